//! The router's upstream side of one request: choose the cluster and endpoint, rewrite the
//! request as Envoy does (path, host, x-forwarded-*, hop-by-hop headers), send it with its
//! body, wait for the response head within the route timeout, and hand back the response with
//! its body streaming from the upstream connection through a bounded channel. Failures become
//! Envoy's local replies: 503 NC/UH/UF/UC, 502 UPE, 504 UT.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hoist_config::model::{ClusterSpecifier, ForwardAction, HostRewrite, PathMatch, RetryPolicy};
use hoist_http::body::{SpliceReport, StreamBody};
use hoist_http::{Body, RequestHead, ResponseFlags, ResponseHead};
use http::header::{self, HeaderValue};
use tokio::sync::oneshot;

use super::attempt::{attempt, Attempt, Failure, Request, Upstream};
use super::conn::ConnectError;
use super::headers::{request_framing, rewrite_request, strip_hop_by_hop, upstream_headers};
use super::pool::{ActiveRequest, Connection, PickError, WorkerCluster, WorkerClusters};
use super::reply::{connect_failure, local, overflow, reset_before_headers, BEFORE_HEADERS};
use super::Resources;
use crate::connection::ConnInfo;
use crate::stream::RequestBody;

/// Where the request body comes from.
pub enum Source<'b, B> {
    /// No body (end of stream with the head).
    None,
    /// Already read whole (a filter asked for it).
    Buffered(Bytes),
    /// Still on the downstream connection: streamed as it arrives.
    Stream(&'b mut B),
}

/// What the upstream answered, or the local reply that stands in for it.
pub struct Forwarded {
    pub head: ResponseHead,
    pub body: Body,
    pub flags: ResponseFlags,
    pub details: &'static str,
    /// The response came from the upstream (false: a local reply).
    pub from_upstream: bool,
    pub upstream_host: Option<SocketAddr>,
    pub cluster: Option<String>,
    /// The downstream request body was not read to its end.
    pub body_unread: bool,
}

pub struct Context<'a> {
    pub clusters: &'a WorkerClusters,
    pub conn: &'a ConnInfo,
    pub use_remote_address: bool,
    /// HCM `via`.
    pub via: Option<&'a HeaderValue>,
    pub xff_num_trusted_hops: u32,
    /// The connection manager's stream_idle_timeout (a route's idle_timeout replaces it).
    pub stream_idle_timeout: Option<Duration>,
    pub path_match: &'a PathMatch,
}

pub async fn forward<B: RequestBody>(
    cx: &Context<'_>,
    action: &ForwardAction,
    head: &mut RequestHead,
    body: Source<'_, B>,
) -> Result<Forwarded, B::Error> {
    let mut attempts = 0u32;
    let mut f = forward_attempts(cx, action, head, body, &mut attempts).await?;
    super::headers::decorate_response(action, &mut f.head, attempts);
    Ok(f)
}

/// `attempts`: tries sent so far (x-envoy-attempt-count).
async fn forward_attempts<B: RequestBody>(
    cx: &Context<'_>,
    action: &ForwardAction,
    head: &mut RequestHead,
    mut body: Source<'_, B>,
    attempts: &mut u32,
) -> Result<Forwarded, B::Error> {
    let name = match &action.cluster {
        ClusterSpecifier::Cluster(n) => Some(n.clone()),
        ClusterSpecifier::Weighted(list) => super::lb::pick_weighted(list).cloned(),
        ClusterSpecifier::Header(h) => head
            .headers
            .get(h.as_str())
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    let Some(cluster) = name.as_deref().and_then(|n| cx.clusters.get(n)) else {
        return Ok(local(
            503,
            "",
            ResponseFlags::NO_CLUSTER_FOUND,
            "cluster_not_found",
            &body,
        ));
    };
    let cluster = cluster.clone();
    let hash = super::hash_policy::for_request(cx, action, head);
    rewrite_request(cx, action, head);
    let (framing, chunked) = request_framing(head, &body);
    let mut headers = upstream_headers(head);
    let request = Request {
        method: head.method.as_str().to_owned(),
        path: head.path.clone(),
        framing,
        chunked,
        is_head: head.method == http::Method::HEAD,
    };
    super::mirror::spawn(cx.clusters, action, &request, &headers, &body);
    // A streamed body cannot be sent twice: retries need it whole (or absent).
    let policy = action
        .retry_policy
        .as_ref()
        .filter(|_| !matches!(body, Source::Stream(_)));
    let idle = action.stream_idle_timeout(cx.stream_idle_timeout);
    let mut retries_left = policy.map_or(0, |p| p.num_retries);
    let mut retried = 0u32;
    let mut deadline: Option<Instant> = None;
    // An active retry (max_retries), held until the retried attempt ends.
    let mut retry_slot: Option<RetrySlot> = None;
    loop {
        let rq = match cluster.pick(hash) {
            Ok(rq) => rq,
            Err(PickError::NoEndpoint) => {
                return Ok(local(
                    503,
                    "no healthy upstream",
                    ResponseFlags::NO_HEALTHY_UPSTREAM,
                    "no_healthy_upstream",
                    &body,
                ))
            }
            Err(PickError::Overflow) => {
                let mut f = overflow(&cluster);
                f.body_unread = matches!(body, Source::Stream(_));
                return Ok(f);
            }
        };
        if action.host_rewrite == HostRewrite::Auto {
            if let Some(e) = cluster.info.endpoints.get(rq.endpoint()) {
                head.authority = Some(e.label.clone());
                if let Ok(v) = HeaderValue::from_str(&e.label) {
                    headers.insert(header::HOST, v);
                }
            }
        }
        *attempts += 1;
        if action.include_attempt_count {
            headers.insert("x-envoy-attempt-count", HeaderValue::from(*attempts));
        }
        let per_try = policy.and_then(|p| p.per_try_timeout);
        let result = attempt(
            &cluster,
            &rq,
            &request,
            &headers,
            &mut body,
            action.timeout,
            per_try,
            idle,
            &mut deadline,
        )
        .await?;
        let retriable = policy.is_some_and(|p| should_retry(p, &result));
        // The previous retry, if this attempt was one, is over.
        drop(retry_slot.take());
        let may_retry =
            retriable && retries_left > 0 && deadline.is_none_or(|d| Instant::now() < d);
        let res = &cluster.info.resources;
        if may_retry && !Resources::try_acquire(&res.retries, cluster.info.retry_limit()) {
            if let Some(s) = &cluster.stats {
                s.upstream_rq_retry_overflow.inc();
            }
        } else if may_retry {
            retry_slot = Some(RetrySlot(cluster.clone()));
            retries_left -= 1;
            retried += 1;
            if let Some(s) = &cluster.stats {
                s.upstream_rq_retry.inc();
            }
            record(&cluster, &rq, &result);
            drop(rq);
            if let Some(p) = policy {
                backoff(p, retried, deadline).await;
            }
            continue;
        }
        let mut f = finish(
            &cluster,
            rq,
            result,
            (deadline, idle),
            &body,
            request.is_head,
        );
        if retried > 0 {
            if retriable {
                if let Some(s) = &cluster.stats {
                    s.upstream_rq_retry_limit_exceeded.inc();
                }
                f.flags = f.flags | ResponseFlags::UPSTREAM_RETRY_LIMIT_EXCEEDED;
            } else if let Some(s) = &cluster.stats {
                s.upstream_rq_retry_success.inc();
            }
        }
        return Ok(f);
    }
}

/// One of the cluster's active retries (circuit_breakers.max_retries).
struct RetrySlot(Rc<WorkerCluster>);

impl Drop for RetrySlot {
    fn drop(&mut self) {
        Resources::release(&self.0.info.resources.retries);
    }
}

/// Envoy's retry back-off: a random wait in [0, min(base * 2^(n-1), max)), within the route
/// timeout.
async fn backoff(p: &RetryPolicy, retry: u32, deadline: Option<Instant>) {
    let ceiling = p
        .base_interval
        .saturating_mul(1u32 << retry.saturating_sub(1).min(16))
        .min(p.max_interval);
    let millis = ceiling.as_millis().max(1) as u64;
    let wait = Duration::from_millis(crate::request_id::random_u64() % millis);
    let until = Instant::now() + wait;
    let until = deadline.map_or(until, |d| d.min(until));
    tokio::time::sleep_until(until.into()).await;
}

/// Whether `retry_on` covers how an attempt ended.
fn should_retry(p: &RetryPolicy, r: &Attempt) -> bool {
    match r {
        Attempt::Response { response, .. } => {
            let s = response.status;
            (p.on_5xx && s >= 500)
                || (p.on_gateway_error && matches!(s, 502..=504))
                || (p.on_retriable_status_codes && p.retriable_status_codes.contains(&s))
        }
        Attempt::Failed { failure, .. } => match failure {
            Failure::Connect(_) => p.on_5xx || p.on_gateway_error || p.on_connect_failure,
            Failure::Reset | Failure::Malformed | Failure::PerTryTimeout => {
                p.on_5xx || p.on_gateway_error || p.on_reset
            }
            Failure::GlobalTimeout | Failure::StreamIdle | Failure::RequestBody => false,
        },
    }
}

/// Counts an attempt that is retried on its host and in the cluster's response codes.
fn record(cluster: &WorkerCluster, rq: &ActiveRequest, r: &Attempt) {
    super::outlier::observe(&cluster.info, rq.endpoint(), r);
    match r {
        Attempt::Response { response, .. } => {
            rq.outcome(Some(response.status), false);
            if let Some(s) = &cluster.stats {
                s.response(response.status);
            }
        }
        Attempt::Failed { failure, .. } => {
            rq.outcome(None, matches!(failure, Failure::PerTryTimeout));
            if let Some(s) = &cluster.stats {
                if matches!(failure, Failure::PerTryTimeout) {
                    s.upstream_rq_per_try_timeout.inc();
                }
            }
        }
    }
}

/// The attempt that ends the request, as the response or local reply to send.
fn finish<B>(
    cluster: &Rc<WorkerCluster>,
    rq: ActiveRequest,
    result: Attempt,
    (deadline, idle): (Option<Instant>, Option<Duration>),
    body: &Source<'_, B>,
    is_head: bool,
) -> Forwarded {
    super::outlier::observe(&cluster.info, rq.endpoint(), &result);
    let (upstream, mut response, length, sent_at, peer) = match result {
        Attempt::Response {
            conn,
            response,
            length,
            sent_at,
            peer,
        } => (conn, response, length, sent_at, peer),
        Attempt::Failed { failure, peer } => {
            let timeout = matches!(failure, Failure::GlobalTimeout | Failure::PerTryTimeout);
            rq.outcome(None, timeout);
            let mut f = match &failure {
                Failure::Connect(ConnectError::Overflow) => overflow(cluster),
                Failure::Connect(e) => connect_failure(e, cluster),
                Failure::GlobalTimeout | Failure::PerTryTimeout => {
                    if let Some(s) = &cluster.stats {
                        if matches!(failure, Failure::PerTryTimeout) {
                            s.upstream_rq_per_try_timeout.inc();
                        } else {
                            s.upstream_rq_timeout.inc();
                        }
                        s.response(504);
                    }
                    local(
                        504,
                        "upstream request timeout",
                        ResponseFlags::UPSTREAM_REQUEST_TIMEOUT,
                        "upstream_response_timeout",
                        &Source::<B>::None,
                    )
                }
                // Envoy's HCM: no response started, so a local 408 (its stats are the
                // connection manager's).
                Failure::StreamIdle => local(
                    408,
                    "stream timeout",
                    ResponseFlags::STREAM_IDLE_TIMEOUT,
                    "stream_idle_timeout",
                    &Source::<B>::None,
                ),
                Failure::Malformed => {
                    if let Some(s) = &cluster.stats {
                        s.response(502);
                    }
                    local(
                        502,
                        &format!("{BEFORE_HEADERS}reset reason: protocol error"),
                        ResponseFlags::UPSTREAM_PROTOCOL_ERROR,
                        "upstream_reset_before_response_started{protocol_error}",
                        &Source::<B>::None,
                    )
                }
                Failure::Reset | Failure::RequestBody => reset_before_headers(cluster),
            };
            f.upstream_host = peer;
            f.cluster = Some(cluster.info.name.clone());
            // An unsent body is still on the downstream connection.
            f.body_unread = matches!(body, Source::Stream(_))
                && matches!(failure, Failure::Connect(_) | Failure::RequestBody);
            return f;
        }
    };
    if let Some(s) = &cluster.stats {
        s.response(response.status);
    }
    rq.outcome(Some(response.status), false);
    strip_hop_by_hop(&mut response.headers);
    if !is_head {
        response.headers.remove(header::CONTENT_LENGTH);
    }
    let service_time = sent_at.elapsed().as_millis().to_string();
    if let Ok(v) = HeaderValue::from_str(&service_time) {
        response.headers.insert("x-envoy-upstream-service-time", v);
    }
    let body = match upstream {
        Upstream::H1(upstream) if length == Some(0) => {
            // Nothing to stream: the connection is ready for the next request now.
            drop(rq);
            cluster.release(*upstream);
            Body::Empty
        }
        Upstream::H1(upstream) => {
            let mut upstream = *upstream;
            let (tx, stream) = StreamBody::channel_with(length, cluster.info.body_pieces);
            let splice = if is_head {
                None
            } else {
                offer_splice(&mut upstream, &stream, deadline)
            };
            tokio::task::spawn_local(pump(
                upstream,
                cluster.clone(),
                rq,
                tx,
                deadline,
                idle,
                splice,
            ));
            Body::Stream(stream)
        }
        // Dropping the body ends the stream (a reset if the upstream still sends).
        Upstream::H2(_) if length == Some(0) => Body::Empty,
        // No splice: HTTP/2 frames the body.
        Upstream::H2(h2) => {
            let (tx, stream) = StreamBody::channel_with(length, cluster.info.body_pieces);
            tokio::task::spawn_local(super::h2::pump(h2, cluster.clone(), rq, tx, deadline, idle));
            Body::Stream(stream)
        }
    };
    Forwarded {
        head: response,
        body,
        flags: ResponseFlags::NONE,
        details: "via_upstream",
        from_upstream: true,
        upstream_host: peer,
        cluster: Some(cluster.info.name.clone()),
        body_unread: false,
    }
}

/// Bodies shorter than this are copied: for them a pipe and a second socket registration cost
/// more than the copy.
const SPLICE_MIN: u64 = 64 * 1024;

/// The writer's answer to a splice offer, and the body bytes read with the head (sent
/// through the channel if the writer declines).
type SpliceAnswer = (oneshot::Receiver<SpliceReport>, Bytes);

/// Offers the downstream writer to splice the body (hoist_tls::splice): a Content-Length body
/// of at least [`SPLICE_MIN`] still on a plain or kernel-TLS upstream socket. The writer
/// declines when its own side cannot take part (user-space TLS, HTTP/2, a filter that reads
/// the body).
fn offer_splice(
    upstream: &mut Connection,
    stream: &StreamBody,
    deadline: Option<Instant>,
) -> Option<SpliceAnswer> {
    if upstream.h1.splice_remaining()? < SPLICE_MIN {
        return None;
    }
    let source = upstream.h1.get_ref().splice_source()?;
    let (buffered, remaining) = upstream.h1.take_for_splice()?;
    let answer = stream.offer_splice(buffered.clone(), source, remaining, deadline);
    Some((answer, buffered))
}

/// Moves the response body from the upstream connection into the channel the downstream
/// writer reads; waits while the channel is full (backpressure). The connection goes back to
/// the pool only after a complete response. With a splice offer out, first waits for the
/// writer's answer: after a complete splice the connection goes back to the pool at once.
async fn pump(
    mut upstream: Connection,
    cluster: Rc<WorkerCluster>,
    rq: ActiveRequest,
    tx: hoist_http::body::StreamSender,
    deadline: Option<Instant>,
    idle: Option<Duration>,
    splice: Option<SpliceAnswer>,
) {
    if let Some((answer, buffered)) = splice {
        let stats = cluster.stats.as_ref();
        match answer.await {
            Ok(SpliceReport::Declined) => {
                if let Some(s) = stats {
                    s.upstream_rq_splice_declined.inc();
                }
                if !buffered.is_empty() && tx.send(Ok(buffered)).await.is_err() {
                    return;
                }
            }
            Ok(SpliceReport::Done(n)) => {
                if let Some(s) = stats {
                    s.upstream_rq_splice.inc();
                    s.upstream_rq_splice_bytes.add(n);
                }
                upstream.h1.spliced(n);
                drop(rq);
                cluster.release(upstream);
                return;
            }
            Ok(SpliceReport::Interrupted(n)) => {
                if let Some(s) = stats {
                    s.upstream_rq_splice_interrupted.inc();
                    s.upstream_rq_splice_bytes.add(n);
                }
                upstream.h1.spliced(n);
            }
            // The forward failed or the client went away: the connection is mid-response.
            Ok(SpliceReport::Failed(n)) => {
                if let Some(s) = stats {
                    s.upstream_rq_splice_bytes.add(n);
                }
                return;
            }
            Err(_) => return,
        }
    }
    loop {
        // The stream idle timeout restarts with every piece; the route timeout does not.
        let idle_end = idle.and_then(|t| Instant::now().checked_add(t));
        let limit = match (deadline, idle_end) {
            (Some(d), Some(i)) => Some(d.min(i)),
            (d, i) => d.or(i),
        };
        match within(limit, upstream.h1.read_body_piece()).await {
            Some(Ok(Some(piece))) => {
                if tx.send(Ok(piece)).await.is_err() {
                    // The client went away: the connection is mid-response, not reusable.
                    return;
                }
            }
            Some(Ok(None)) => {
                drop(rq);
                cluster.release(upstream);
                return;
            }
            Some(Err(e)) => {
                let _ = tx
                    .send(Err(std::io::Error::other(format!("upstream: {e}"))))
                    .await;
                return;
            }
            None if deadline.is_none_or(|d| Instant::now() < d) => {
                let _ = tx
                    .send(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "stream idle timeout",
                    )))
                    .await;
                return;
            }
            None => {
                if let Some(s) = &cluster.stats {
                    s.upstream_rq_timeout.inc();
                }
                let _ = tx
                    .send(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "upstream request timeout",
                    )))
                    .await;
                return;
            }
        }
    }
}

async fn within<F: std::future::Future>(deadline: Option<Instant>, f: F) -> Option<F::Output> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d.into(), f).await.ok(),
        None => Some(f.await),
    }
}

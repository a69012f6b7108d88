//! One try of a forwarded request: a connection from the pool (or a new one), the request head
//! and body sent, the response head read within the per-try and route deadlines. What to do
//! with the result (answer, or retry) is the router's (forward.rs).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use hoist_config::model::UpstreamProtocol;
use hoist_http::h1::{ClientError, RequestFraming};
use hoist_http::ResponseHead;
use http::HeaderMap;

use super::conn::ConnectError;
use super::forward::Source;
use super::pool::{ActiveRequest, Connection, WorkerCluster};
use crate::stream::RequestBody;

/// The parts of the upstream request that stay the same across tries.
pub struct Request {
    pub method: String,
    pub path: String,
    pub framing: RequestFraming,
    pub chunked: bool,
    pub is_head: bool,
}

pub enum Failure {
    Connect(ConnectError),
    /// The upstream closed or reset the connection before a complete response head.
    Reset,
    Malformed,
    PerTryTimeout,
    /// The route timeout: never retried.
    GlobalTimeout,
    /// The stream idle timeout (the route's idle_timeout or the connection manager's
    /// stream_idle_timeout) ran out while waiting for the response head: 408, not retried.
    StreamIdle,
    /// Sending the request body failed.
    RequestBody,
}

/// Where the response body is still to be read from.
pub enum Upstream {
    H1(Box<Connection>),
    H2(super::h2::H2Body),
}

pub enum Attempt {
    Response {
        conn: Upstream,
        response: ResponseHead,
        /// The body's length; Some(0) when it has none.
        length: Option<u64>,
        sent_at: Instant,
        peer: Option<SocketAddr>,
    },
    Failed {
        failure: Failure,
        peer: Option<SocketAddr>,
    },
}

/// A request body type for local replies that have none.
pub struct NoBody;

impl RequestBody for NoBody {
    type Error = Infallible;

    async fn next_chunk(&mut self) -> Result<Option<bytes::Bytes>, Infallible> {
        Ok(None)
    }
}

/// `deadline`: the route timeout's end, set when the request was first sent completely.
#[allow(clippy::too_many_arguments)]
pub async fn attempt<B: RequestBody>(
    cluster: &std::rc::Rc<WorkerCluster>,
    rq: &ActiveRequest,
    request: &Request,
    headers: &HeaderMap,
    body: &mut Source<'_, B>,
    timeout: Option<Duration>,
    per_try: Option<Duration>,
    idle: Option<Duration>,
    deadline: &mut Option<Instant>,
) -> Result<Attempt, B::Error> {
    let h2 = match &cluster.info.protocol {
        UpstreamProtocol::Http2(o) => Some(o),
        UpstreamProtocol::Auto(o) if !cluster.speaks_http1(rq.endpoint()) => Some(o),
        _ => None,
    };
    if let Some(o) = h2 {
        let bounds = |sent_at| bounds(sent_at, timeout, per_try, idle, deadline);
        // None: auto_config, and ALPN chose HTTP/1.1 (the connection waits in the pool).
        let a = super::h2::attempt(cluster, rq, request, headers, body, o, timeout, bounds);
        if let Some(a) = a.await? {
            return Ok(a);
        }
    }
    let mut retried_stale = false;
    let (mut c, sent_at) = loop {
        let (mut c, reused) = match cluster.connection(rq, timeout).await {
            Ok(c) => c,
            Err(e) => {
                return Ok(Attempt::Failed {
                    failure: Failure::Connect(e),
                    peer: None,
                })
            }
        };
        let wrote =
            c.h1.send_head(&request.method, &request.path, headers, request.framing)
                .await;
        if wrote.is_err() {
            // A pooled connection the upstream closed while idle: one fresh connection.
            if reused && !retried_stale {
                retried_stale = true;
                continue;
            }
            return Ok(failed(Failure::Reset, &c));
        }
        let chunked = request.chunked;
        let sent = match body {
            Source::None => c.h1.finish_body(false).await.is_ok(),
            Source::Buffered(b) => {
                c.h1.send_body_piece(b, chunked).await.is_ok()
                    && c.h1.finish_body(chunked).await.is_ok()
            }
            Source::Stream(b) => {
                let mut ok = true;
                while let Some(piece) = b.next_chunk().await? {
                    if c.h1.send_body_piece(&piece, chunked).await.is_err() {
                        ok = false;
                        break;
                    }
                }
                ok && c.h1.finish_body(chunked).await.is_ok()
            }
        };
        if !sent {
            return Ok(failed(Failure::RequestBody, &c));
        }
        break (c, Instant::now());
    };
    let (limit, on_expiry) = bounds(sent_at, timeout, per_try, idle, deadline);
    let read = match limit {
        Some(l) => tokio::time::timeout_at(l.into(), c.h1.read_head(request.is_head))
            .await
            .ok(),
        None => Some(c.h1.read_head(request.is_head).await),
    };
    Ok(match read {
        Some(Ok((response, length))) => Attempt::Response {
            peer: peer_addr(&c),
            conn: Upstream::H1(Box::new(c)),
            response,
            length,
            sent_at,
        },
        None => failed(on_expiry, &c),
        Some(Err(ClientError::Malformed(why))) => {
            tracing::debug!("cluster {}: {why}", cluster.info.name);
            failed(Failure::Malformed, &c)
        }
        Some(Err(_)) => failed(Failure::Reset, &c),
    })
}

/// The bound on waiting for the response head of a try whose request was sent at `sent_at`,
/// and what its expiry means. `deadline`: the route timeout's end, set by the first try.
fn bounds(
    sent_at: Instant,
    timeout: Option<Duration>,
    per_try: Option<Duration>,
    idle: Option<Duration>,
    deadline: &mut Option<Instant>,
) -> (Option<Instant>, Failure) {
    // Envoy's route timeout starts when the downstream request is complete, once for all
    // tries; the per-try timeout starts with each try.
    if deadline.is_none() {
        *deadline = timeout.map(|t| sent_at + t);
    }
    let try_end = per_try.map(|t| sent_at + t);
    let idle_end = idle.and_then(|t| sent_at.checked_add(t));
    // The earliest bound wins; on a tie the route timeout, then the per-try one.
    let mut bound: Option<(Instant, Failure)> = None;
    for (at, failure) in [
        (*deadline, Failure::GlobalTimeout),
        (try_end, Failure::PerTryTimeout),
        (idle_end, Failure::StreamIdle),
    ] {
        if let Some(at) = at {
            if bound.as_ref().is_none_or(|(b, _)| at < *b) {
                bound = Some((at, failure));
            }
        }
    }
    match bound {
        Some((at, f)) => (Some(at), f),
        None => (None, Failure::GlobalTimeout),
    }
}

fn failed(failure: Failure, c: &Connection) -> Attempt {
    failed_at(failure, peer_addr(c))
}

pub fn failed_at(failure: Failure, peer: Option<SocketAddr>) -> Attempt {
    Attempt::Failed { failure, peer }
}

pub fn peer_addr(c: &Connection) -> Option<SocketAddr> {
    c.h1.get_ref().tcp().peer_addr().ok()
}

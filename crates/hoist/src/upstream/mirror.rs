//! `request_mirror_policies`: a shadow copy of the request to another cluster, fire and
//! forget (its answer is read to the end and dropped; it never delays nor changes the real
//! one). As Envoy, the shadow's Host gets a `-shadow` suffix (before the port) unless the
//! policy disables it. Only a request whose body is known whole (none, or read by a filter)
//! can be copied; a streamed body is not held back for a shadow.

use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hoist_config::model::ForwardAction;
use http::header::{self, HeaderMap, HeaderValue};

use super::attempt::{attempt, Attempt, Failure, NoBody, Request, Upstream};
use super::forward::Source;
use super::pool::{WorkerCluster, WorkerClusters};

/// Starts a shadow request for each of the route's mirror policies whose fraction this
/// request falls in (none when the body is streamed).
pub fn spawn<B>(
    clusters: &WorkerClusters,
    action: &ForwardAction,
    request: &Request,
    headers: &HeaderMap,
    body: &Source<'_, B>,
) {
    let policies = &action.request_mirror_policies;
    if policies.is_empty() {
        return;
    }
    let body = match body {
        Source::None => None,
        Source::Buffered(b) => Some(b.clone()),
        Source::Stream(_) => return,
    };
    let timeout = action.timeout;
    for p in policies {
        if crate::request_id::random_u64() % 1_000_000 >= u64::from(p.parts_per_million) {
            continue;
        }
        let Some(cluster) = clusters.get(&p.cluster).cloned() else {
            continue;
        };
        let mut headers = headers.clone();
        if !p.keep_host {
            let shadow = headers
                .get(header::HOST)
                .and_then(|h| h.to_str().ok())
                .map(shadow_host)
                .and_then(|h| HeaderValue::from_str(&h).ok());
            if let Some(h) = shadow {
                headers.insert(header::HOST, h);
            }
        }
        let request = Request {
            method: request.method.clone(),
            path: request.path.clone(),
            framing: request.framing,
            chunked: request.chunked,
            is_head: request.is_head,
        };
        tokio::task::spawn_local(shadow(cluster, request, headers, body.clone(), timeout));
    }
}

/// `host` with `-shadow` after the name, before a port (`a.example:8080` ->
/// `a.example-shadow:8080`).
fn shadow_host(host: &str) -> String {
    let port_at = match host.rfind(':') {
        Some(i)
            if !host[i..].contains(']') && host[i + 1..].bytes().all(|b| b.is_ascii_digit()) =>
        {
            i
        }
        _ => host.len(),
    };
    format!("{}-shadow{}", &host[..port_at], &host[port_at..])
}

async fn shadow(
    cluster: Rc<WorkerCluster>,
    request: Request,
    headers: HeaderMap,
    body: Option<Bytes>,
    timeout: Option<Duration>,
) {
    let Ok(rq) = cluster.pick(None) else {
        return;
    };
    let mut body = match body {
        Some(b) => Source::<NoBody>::Buffered(b),
        None => Source::None,
    };
    let mut deadline: Option<Instant> = None;
    let Ok(result) = attempt(
        &cluster,
        &rq,
        &request,
        &headers,
        &mut body,
        timeout,
        None,
        None,
        &mut deadline,
    )
    .await;
    super::outlier::observe(&cluster.info, rq.endpoint(), &result);
    match result {
        Attempt::Response {
            conn,
            response,
            length,
            ..
        } => {
            rq.outcome(Some(response.status), false);
            if let Some(s) = &cluster.stats {
                s.response(response.status);
            }
            match conn {
                Upstream::H1(conn) => {
                    let mut conn = *conn;
                    if length != Some(0) {
                        loop {
                            let piece = match deadline {
                                Some(d) => {
                                    tokio::time::timeout_at(d.into(), conn.h1.read_body_piece())
                                        .await
                                        .ok()
                                }
                                None => Some(conn.h1.read_body_piece().await),
                            };
                            match piece {
                                Some(Ok(Some(_))) => continue,
                                Some(Ok(None)) => break,
                                // A broken or late shadow answer: the connection is not reusable.
                                _ => return,
                            }
                        }
                    }
                    drop(rq);
                    cluster.release(conn);
                }
                Upstream::H2(mut body) if length != Some(0) => {
                    while let Some(Some(Ok(piece))) =
                        super::h2::next_piece(&mut body, deadline).await
                    {
                        body.release(piece.len());
                    }
                }
                Upstream::H2(_) => {}
            }
        }
        Attempt::Failed { failure, .. } => {
            let timeout = matches!(failure, Failure::GlobalTimeout | Failure::PerTryTimeout);
            rq.outcome(None, timeout);
            if let Some(s) = &cluster.stats {
                if timeout {
                    s.upstream_rq_timeout.inc();
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shadow_host;

    #[test]
    fn shadow_suffix_goes_before_the_port() {
        assert_eq!(shadow_host("example.com"), "example.com-shadow");
        assert_eq!(shadow_host("example.com:8080"), "example.com-shadow:8080");
        assert_eq!(shadow_host("[::1]:80"), "[::1]-shadow:80");
        assert_eq!(shadow_host("[::1]"), "[::1]-shadow");
    }
}

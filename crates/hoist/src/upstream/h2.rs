//! One try over HTTP/2 (`explicit_http_config.http2_protocol_options`, or auto_config when ALPN
//! chose h2) on a connection from h2_pool.rs: the request converted (`:authority` from Host,
//! connection-specific headers removed), its body sent as the stream's window allows, the
//! response head through the same router path as HTTP/1.1 (attempt.rs, forward.rs), and the
//! body pumped with h2's flow control as the backpressure: window is released only once the
//! downstream writer took the bytes.

use std::future::poll_fn;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::{RecvStream, SendStream};
use hoist_config::model::UpstreamHttp2Options;
use hoist_http::body::StreamSender;
use hoist_http::ResponseHead;
use http::header::{self, HeaderMap, HeaderName};

use super::attempt::{failed_at, Attempt, Failure, Request, Upstream};
use super::conn::ConnectError;
use super::forward::Source;
use super::h2_pool::{connection, H2Stream};
use super::pool::{ActiveRequest, WorkerCluster};
use crate::stream::RequestBody;

/// A response whose body is still on its stream.
pub struct H2Body {
    recv: RecvStream,
    _stream: H2Stream,
}

/// Headers that mean something only on one HTTP/1.1 connection, which HTTP/2 forbids
/// (RFC 9113 8.2.2); Host travels as :authority.
const CONNECTION_SPECIFIC: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "host",
];

/// The request for one try: `:authority` from Host (else the endpoint), `:scheme` from the
/// cluster's transport.
fn request(
    cluster: &WorkerCluster,
    endpoint: usize,
    r: &Request,
    headers: &HeaderMap,
) -> Option<http::Request<()>> {
    let authority = match headers.get(header::HOST).and_then(|v| v.to_str().ok()) {
        Some(h) => h.to_owned(),
        None => cluster.info.endpoints.get(endpoint)?.label.clone(),
    };
    let scheme = if cluster.info.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let uri = http::Uri::builder()
        .scheme(scheme)
        .authority(authority)
        .path_and_query(r.path.as_str())
        .build()
        .ok()?;
    let mut req = http::Request::new(());
    *req.method_mut() = http::Method::from_bytes(r.method.as_bytes()).ok()?;
    *req.uri_mut() = uri;
    *req.version_mut() = http::Version::HTTP_2;
    let mut h = headers.clone();
    for name in CONNECTION_SPECIFIC {
        h.remove(name);
    }
    // TE is allowed only as "trailers".
    let te = HeaderName::from_static("te");
    if h.get(&te).is_some_and(|v| v.as_bytes() != b"trailers") {
        h.remove(&te);
    }
    *req.headers_mut() = h;
    Some(req)
}

/// Sends `data` as the window allows (h2 flow control: waits for capacity).
async fn send_all(send: &mut SendStream<Bytes>, mut data: Bytes) -> Result<(), h2::Error> {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let granted = match poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(r) => r?,
            None => return Err(h2::Error::from(h2::Reason::STREAM_CLOSED)),
        };
        if granted == 0 {
            continue;
        }
        let piece = data.split_to(granted.min(data.len()));
        send.send_data(piece, false)?;
    }
    Ok(())
}

/// One try over HTTP/2; the same contract as [`super::attempt::attempt`]. None: an
/// auto_config endpoint answered ALPN with HTTP/1.1 and nothing was sent.
#[allow(clippy::too_many_arguments)]
pub async fn attempt<B: RequestBody>(
    cluster: &Rc<WorkerCluster>,
    rq: &ActiveRequest,
    r: &Request,
    headers: &HeaderMap,
    body: &mut Source<'_, B>,
    o: &UpstreamHttp2Options,
    wait: Option<Duration>,
    bounds: impl FnOnce(Instant) -> (Option<Instant>, Failure),
) -> Result<Option<Attempt>, B::Error> {
    let mut retried_stale = false;
    let no_body = match body {
        Source::None => true,
        Source::Buffered(b) => b.is_empty(),
        Source::Stream(_) => false,
    };
    // The route and per-try bounds start when the first try's request is sent.
    let mut bounds = Some(bounds);
    let mut limit: Option<(Option<Instant>, Failure)> = None;
    let (conn, stream, response, sent_at) = loop {
        let (conn, reused) = match connection(cluster, rq, o).await {
            Ok(Some(c)) => c,
            Ok(None) => return Ok(None),
            Err(e) => {
                return Ok(Some(Attempt::Failed {
                    failure: Failure::Connect(e),
                    peer: None,
                }))
            }
        };
        let Some(req) = request(cluster, rq.endpoint(), r, headers) else {
            return Ok(Some(failed_at(Failure::Malformed, conn.peer)));
        };
        let stream = H2Stream::open(&conn);
        // The upstream's own stream limit can make this wait, as long as a request may wait
        // for an HTTP/1.1 connection (the route timeout): then the pool is full.
        let ready = conn.send.clone().ready();
        let ready = match wait {
            Some(w) => match tokio::time::timeout(w, ready).await {
                Ok(r) => r,
                Err(_) => {
                    return Ok(Some(Attempt::Failed {
                        failure: Failure::Connect(ConnectError::Overflow),
                        peer: conn.peer,
                    }))
                }
            },
            None => ready.await,
        };
        let opened = match ready {
            Ok(mut s) => s.send_request(req, no_body),
            Err(e) => Err(e),
        };
        // A stream the upstream never saw (GOAWAY, a closed or refused connection) is tried
        // once more on a fresh connection, when the body can be sent again.
        let replayable = !retried_stale && !matches!(body, Source::Stream(_));
        let (response, mut send) = match opened {
            Ok(pair) => pair,
            Err(e) => {
                conn.closed.set(true);
                tracing::debug!("cluster {}: HTTP/2 stream: {e}", cluster.info.name);
                if reused && replayable {
                    retried_stale = true;
                    continue;
                }
                return Ok(Some(failed_at(Failure::Reset, conn.peer)));
            }
        };
        if !no_body {
            let sent = match body {
                Source::None => Ok(()),
                Source::Buffered(b) => send_all(&mut send, b.clone()).await,
                Source::Stream(b) => {
                    let mut r = Ok(());
                    while let Some(piece) = b.next_chunk().await? {
                        r = send_all(&mut send, piece).await;
                        if r.is_err() {
                            break;
                        }
                    }
                    r
                }
            };
            if sent
                .and_then(|()| send.send_data(Bytes::new(), true))
                .is_err()
            {
                return Ok(Some(failed_at(Failure::RequestBody, conn.peer)));
            }
        }
        let sent_at = Instant::now();
        if let Some(b) = bounds.take() {
            limit = Some(b(sent_at));
        }
        let at = limit.as_ref().and_then(|(at, _)| *at);
        let answer = match at {
            Some(l) => tokio::time::timeout_at(l.into(), response).await.ok(),
            None => Some(response.await),
        };
        match answer {
            None => {
                let on_expiry = limit.map_or(Failure::GlobalTimeout, |(_, f)| f);
                return Ok(Some(failed_at(on_expiry, conn.peer)));
            }
            Some(Err(e)) => {
                tracing::debug!("cluster {}: HTTP/2 response: {e}", cluster.info.name);
                let refused = e.is_go_away() || e.reason() == Some(h2::Reason::REFUSED_STREAM);
                if refused || e.is_io() {
                    conn.closed.set(true);
                }
                if refused && replayable {
                    retried_stale = true;
                    continue;
                }
                return Ok(Some(failed_at(Failure::Reset, conn.peer)));
            }
            Some(Ok(response)) => break (conn, stream, response, sent_at),
        }
    };
    let (parts, recv) = response.into_parts();
    let length = if r.is_head || recv.is_end_stream() {
        Some(0)
    } else {
        parts
            .headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok())
    };
    Ok(Some(Attempt::Response {
        conn: Upstream::H2(H2Body {
            recv,
            _stream: stream,
        }),
        response: ResponseHead {
            status: parts.status.as_u16(),
            headers: parts.headers,
        },
        length,
        sent_at,
        peer: conn.peer,
    }))
}

/// Reads the next piece of a response body within `limit`: None on expiry, Some(None) at
/// its end. The window is released once the caller has passed the piece on (`release`).
pub async fn next_piece(
    body: &mut H2Body,
    limit: Option<Instant>,
) -> Option<Option<Result<Bytes, h2::Error>>> {
    match limit {
        Some(l) => tokio::time::timeout_at(l.into(), body.recv.data())
            .await
            .ok(),
        None => Some(body.recv.data().await),
    }
}

impl H2Body {
    /// Gives `n` bytes of window back to the upstream: the downstream took them.
    pub fn release(&mut self, n: usize) {
        let _ = self.recv.flow_control().release_capacity(n);
    }
}

/// Moves the response body into the channel the downstream writer reads; waits while the
/// channel is full, and only then opens the window (backpressure to the upstream).
pub async fn pump(
    mut body: H2Body,
    cluster: Rc<WorkerCluster>,
    rq: ActiveRequest,
    tx: StreamSender,
    deadline: Option<Instant>,
    idle: Option<Duration>,
) {
    loop {
        let idle_end = idle.and_then(|t| Instant::now().checked_add(t));
        let limit = match (deadline, idle_end) {
            (Some(d), Some(i)) => Some(d.min(i)),
            (d, i) => d.or(i),
        };
        match next_piece(&mut body, limit).await {
            Some(Some(Ok(piece))) => {
                let n = piece.len();
                if tx.send(Ok(piece)).await.is_err() {
                    // The client went away: dropping the stream resets it.
                    return;
                }
                body.release(n);
            }
            Some(None) => {
                drop(rq);
                return;
            }
            Some(Some(Err(e))) => {
                let _ = tx
                    .send(Err(std::io::Error::other(format!("upstream: {e}"))))
                    .await;
                return;
            }
            None => {
                let route = deadline.is_some_and(|d| Instant::now() >= d);
                if route {
                    if let Some(s) = &cluster.stats {
                        s.upstream_rq_timeout.inc();
                    }
                }
                let why = if route {
                    "upstream request timeout"
                } else {
                    "stream idle timeout"
                };
                let _ = tx
                    .send(Err(std::io::Error::new(std::io::ErrorKind::TimedOut, why)))
                    .await;
                return;
            }
        }
    }
}

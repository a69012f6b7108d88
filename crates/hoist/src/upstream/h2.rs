//! HTTP/2 toward a cluster's endpoints (`explicit_http_config.http2_protocol_options`): per
//! worker and endpoint, multiplexed connections on the `h2` crate's client, a new one only when
//! every open one carries max_concurrent_streams. Each connection's task is driven with
//! spawn_local and counts the connection (upstream_cx_active, max_connections) until it ends;
//! a connection that ended, got a GOAWAY, ran out of max_requests_per_connection or sat idle
//! past idle_timeout takes no new streams. The response head goes through the same router
//! path as HTTP/1.1 (attempt.rs, forward.rs); the body is pumped with h2's flow control as the
//! backpressure: window is released only once the downstream writer took the bytes.

use std::cell::Cell;
use std::future::poll_fn;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use h2::{RecvStream, SendStream};
use hoist_config::model::{UpstreamHttp2Options, UpstreamProtocol};
use hoist_http::body::StreamSender;
use hoist_http::ResponseHead;
use http::header::{self, HeaderMap, HeaderName};

use super::attempt::{failed_at, Attempt, Failure, Request, Upstream};
use super::conn::{connect_with, ConnectError};
use super::forward::Source;
use super::pool::{ActiveRequest, WorkerCluster};
use super::{HostStats, Resources};
use crate::stream::RequestBody;

/// One multiplexed connection to an endpoint.
pub struct H2Conn {
    send: SendRequest<Bytes>,
    /// Streams open now (max_concurrent_streams).
    streams: Cell<u32>,
    /// Streams carried so far (max_requests_per_connection).
    requests: Cell<u32>,
    /// When the last stream ended (idle_timeout).
    idle_since: Cell<Instant>,
    /// Set by the connection's task when it ends, or here when a stream cannot be opened.
    closed: Rc<Cell<bool>>,
    peer: Option<SocketAddr>,
}

/// A stream's place on its connection, released when the response body is done or dropped.
pub struct H2Stream {
    conn: Rc<H2Conn>,
}

impl H2Stream {
    fn open(conn: &Rc<H2Conn>) -> H2Stream {
        conn.streams.set(conn.streams.get() + 1);
        conn.requests.set(conn.requests.get() + 1);
        H2Stream { conn: conn.clone() }
    }
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        let n = self.conn.streams.get().saturating_sub(1);
        self.conn.streams.set(n);
        if n == 0 {
            self.conn.idle_since.set(Instant::now());
        }
    }
}

/// A response whose body is still on its stream.
pub struct H2Body {
    recv: RecvStream,
    _stream: H2Stream,
}

/// What a connection counts while it is open: released when its task ends.
struct Counted {
    cluster: Rc<WorkerCluster>,
    endpoint: usize,
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(s) = &self.cluster.stats {
            s.upstream_cx_active.dec();
        }
        if let Some(e) = self.cluster.info.endpoints.get(self.endpoint) {
            HostStats::dec(&e.stats.cx_active);
        }
        Resources::release(&self.cluster.info.resources.connections);
        self.cluster.released.notify_one();
    }
}

/// Drops the endpoint's connections that must take no new stream; returns one with room for
/// another stream, or the least busy one when no new connection may be opened (`full`).
fn pick_open(
    cluster: &WorkerCluster,
    endpoint: usize,
    o: &UpstreamHttp2Options,
    full: bool,
) -> Option<Rc<H2Conn>> {
    let info = &cluster.info;
    let mut all = cluster.h2.borrow_mut();
    let list = all.get_mut(endpoint)?;
    list.retain(|c| {
        if c.closed.get() {
            return false;
        }
        let exhausted = info
            .max_requests_per_connection
            .is_some_and(|max| c.requests.get() >= max);
        if exhausted {
            if let Some(s) = &cluster.stats {
                s.upstream_cx_max_requests.inc();
            }
            return false;
        }
        let expired = c.streams.get() == 0
            && info
                .idle_timeout
                .is_some_and(|t| c.idle_since.get().elapsed() >= t);
        if expired {
            if let Some(s) = &cluster.stats {
                s.upstream_cx_idle_timeout.inc();
            }
        }
        !expired
    });
    // The upstream's SETTINGS_MAX_CONCURRENT_STREAMS bounds a connection too (as in Envoy).
    let room = list
        .iter()
        .find(|c| {
            let peer = u32::try_from(c.send.current_max_send_streams()).unwrap_or(u32::MAX);
            c.streams.get() < o.max_concurrent_streams.min(peer)
        })
        .cloned();
    if room.is_some() || !full {
        return room;
    }
    list.iter().min_by_key(|c| c.streams.get()).cloned()
}

/// An open connection to the request's endpoint with room for a stream, else a new one. The
/// bool says whether it was already open.
async fn connection(
    cluster: &Rc<WorkerCluster>,
    rq: &ActiveRequest,
    o: &UpstreamHttp2Options,
) -> Result<Option<(Rc<H2Conn>, bool)>, ConnectError> {
    let endpoint = rq.endpoint();
    loop {
        if cluster.speaks_http1(endpoint) {
            return Ok(None);
        }
        // Requests that arrive while a connection is being opened wait for it rather than
        // open one each.
        let opened = cluster.h2_opened.notified();
        if let Some(c) = pick_open(cluster, endpoint, o, false) {
            return Ok(Some((c, true)));
        }
        if !cluster
            .h2_connecting
            .borrow()
            .get(endpoint)
            .copied()
            .unwrap_or(false)
        {
            break;
        }
        opened.await;
    }
    let _connecting = Connecting::start(cluster, endpoint);
    Ok(open(cluster, endpoint, o).await?.map(|c| (c, false)))
}

/// Marks a connection being opened to an endpoint; dropped (done, failed or cancelled with
/// its request), it wakes the requests that waited for it.
struct Connecting<'a> {
    cluster: &'a WorkerCluster,
    endpoint: usize,
}

impl<'a> Connecting<'a> {
    fn start(cluster: &'a WorkerCluster, endpoint: usize) -> Connecting<'a> {
        if let Some(flag) = cluster.h2_connecting.borrow_mut().get_mut(endpoint) {
            *flag = true;
        }
        Connecting { cluster, endpoint }
    }
}

impl Drop for Connecting<'_> {
    fn drop(&mut self) {
        if let Some(flag) = self
            .cluster
            .h2_connecting
            .borrow_mut()
            .get_mut(self.endpoint)
        {
            *flag = false;
        }
        self.cluster.h2_opened.notify_waiters();
    }
}

/// Opens a connection to `endpoint` (or, over max_connections, queues on an open one). None:
/// auto_config, and ALPN chose HTTP/1.1 (the connection went to the HTTP/1.1 pool).
async fn open(
    cluster: &Rc<WorkerCluster>,
    endpoint: usize,
    o: &UpstreamHttp2Options,
) -> Result<Option<Rc<H2Conn>>, ConnectError> {
    let res = &cluster.info.resources;
    if !Resources::try_acquire(&res.connections, cluster.info.limits.max_connections) {
        if let Some(s) = &cluster.stats {
            s.upstream_cx_overflow.inc();
        }
        // Over max_connections: queue on the least busy connection (h2 waits for a stream
        // slot); with none open, an overflow.
        return match pick_open(cluster, endpoint, o, true) {
            Some(c) => Ok(Some(c)),
            None => {
                if let Some(s) = &cluster.stats {
                    s.upstream_rq_pending_overflow.inc();
                }
                Err(ConnectError::Overflow)
            }
        };
    }
    let e = cluster
        .info
        .endpoints
        .get(endpoint)
        .ok_or_else(|| ConnectError::Failed("no such endpoint".into()))?;
    let tls_stats = cluster.stats.as_ref().and_then(|s| s.tls.as_ref());
    let stream = connect_with(&cluster.info, e, tls_stats).await;
    HostStats::inc(&e.stats.cx_total);
    if let Some(s) = &cluster.stats {
        s.upstream_cx_total.inc();
    }
    let stream = match stream {
        Ok(s) => s,
        Err(err) => {
            Resources::release(&res.connections);
            cluster.released.notify_one();
            HostStats::inc(&e.stats.cx_connect_fail);
            if let Some(s) = &cluster.stats {
                s.upstream_cx_connect_fail.inc();
                if matches!(err, ConnectError::Timeout) {
                    s.upstream_cx_connect_timeout.inc();
                }
            }
            return Err(err);
        }
    };
    HostStats::inc(&e.stats.cx_active);
    if let Some(s) = &cluster.stats {
        s.upstream_cx_active.inc();
    }
    if matches!(cluster.info.protocol, UpstreamProtocol::Auto(_)) && stream.alpn() != Some(b"h2") {
        cluster.adopt_http1(endpoint, stream);
        return Ok(None);
    }
    let counted = Counted {
        cluster: cluster.clone(),
        endpoint,
    };
    let peer = stream.tcp().peer_addr().ok();
    let handshake = h2::client::Builder::new()
        .initial_window_size(o.initial_stream_window_size)
        .initial_connection_window_size(o.initial_connection_window_size)
        .enable_push(false)
        .handshake::<_, Bytes>(stream);
    let (send, driver) = match tokio::time::timeout(cluster.info.connect_timeout, handshake).await {
        Ok(Ok(pair)) => pair,
        Ok(Err(err)) => return Err(ConnectError::Failed(format!("HTTP/2 handshake: {err}"))),
        Err(_) => return Err(ConnectError::Timeout),
    };
    let closed = Rc::new(Cell::new(false));
    let ended = closed.clone();
    let name = cluster.info.name.clone();
    tokio::task::spawn_local(async move {
        let _counted = counted;
        if let Err(e) = driver.await {
            tracing::debug!("cluster {name}: HTTP/2 connection ended: {e}");
        }
        ended.set(true);
    });
    let conn = Rc::new(H2Conn {
        send,
        streams: Cell::new(0),
        requests: Cell::new(0),
        idle_since: Cell::new(Instant::now()),
        closed,
        peer,
    });
    if let Some(list) = cluster.h2.borrow_mut().get_mut(endpoint) {
        list.push(conn.clone());
    }
    Ok(Some(conn))
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

//! The HTTP/2 connections of a worker's cluster: per endpoint, multiplexed connections on the
//! `h2` crate's client, a new one only when every open one carries max_concurrent_streams (or
//! the upstream's own limit); requests that arrive while one is being opened wait for it. Each
//! connection's task is driven with spawn_local and counts the connection (upstream_cx_active,
//! max_connections) until it ends; a connection that ended, got a GOAWAY, ran out of
//! max_requests_per_connection or sat idle past idle_timeout takes no new streams.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use bytes::Bytes;
use h2::client::SendRequest;
use hoist_config::model::{UpstreamHttp2Options, UpstreamProtocol};

use super::conn::{connect_with, ConnectError};
use super::pool::{ActiveRequest, WorkerCluster};
use super::{HostStats, Resources};

/// One multiplexed connection to an endpoint.
pub struct H2Conn {
    pub(super) send: SendRequest<Bytes>,
    /// Streams open now (max_concurrent_streams).
    streams: Cell<u32>,
    /// Streams carried so far (max_requests_per_connection).
    requests: Cell<u32>,
    /// When the last stream ended (idle_timeout).
    idle_since: Cell<Instant>,
    /// Set by the connection's task when it ends, or here when a stream cannot be opened.
    pub(super) closed: Rc<Cell<bool>>,
    pub(super) peer: Option<SocketAddr>,
}

/// A stream's place on its connection, released when the response body is done or dropped.
pub struct H2Stream {
    conn: Rc<H2Conn>,
}

impl H2Stream {
    pub(super) fn open(conn: &Rc<H2Conn>) -> H2Stream {
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

/// What a connection counts while it is open: released when its task ends.
struct Counted {
    cluster: Rc<WorkerCluster>,
    endpoint: usize,
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.cluster.connection_closed(self.endpoint);
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
pub(super) async fn connection(
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

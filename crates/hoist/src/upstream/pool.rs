//! A worker's clusters: per endpoint, a pool of idle HTTP/1.1 keep-alive connections, and the
//! balancer's state. Everything here belongs to one worker thread (Rc, RefCell: no locks).

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use hoist_http::h1::UpstreamH1;

use super::conn::{connect_with, ConnectError, UpstreamStream};
use super::lb::LbState;
use super::stats::ClusterStats;
use super::{ClusterInfo, ClusterManager, HostStats, Resources};

/// Idle connections kept per endpoint; more are closed when they are released.
const MAX_IDLE_PER_ENDPOINT: usize = 128;

pub struct WorkerClusters {
    pub manager: Arc<ClusterManager>,
    clusters: Vec<Rc<WorkerCluster>>,
}

impl WorkerClusters {
    pub fn new(manager: Arc<ClusterManager>, slot: usize) -> WorkerClusters {
        let clusters = manager
            .clusters
            .iter()
            .map(|info| {
                let stats = manager
                    .store()
                    .map(|store| ClusterStats::new(store, &info.name, slot, info.tls.is_some()));
                Rc::new(WorkerCluster {
                    lb: RefCell::new(LbState::new(info)),
                    active: RefCell::new(vec![0; info.endpoints.len()]),
                    idle: RefCell::new((0..info.endpoints.len()).map(|_| Vec::new()).collect()),
                    h2: RefCell::new((0..info.endpoints.len()).map(|_| Vec::new()).collect()),
                    h2_connecting: RefCell::new(vec![false; info.endpoints.len()]),
                    alpn_http1: RefCell::new(vec![false; info.endpoints.len()]),
                    h2_opened: Notify::new(),
                    info: info.clone(),
                    stats,
                    released: Notify::new(),
                })
            })
            .collect();
        WorkerClusters { manager, clusters }
    }

    pub fn get(&self, name: &str) -> Option<&Rc<WorkerCluster>> {
        self.manager.index(name).and_then(|i| self.clusters.get(i))
    }
}

pub struct WorkerCluster {
    pub info: Arc<ClusterInfo>,
    /// None only in unit tests without a stats store.
    pub stats: Option<ClusterStats>,
    lb: RefCell<LbState>,
    /// Requests in flight per endpoint (least request reads them).
    active: RefCell<Vec<u32>>,
    idle: RefCell<Vec<Vec<Connection>>>,
    /// HTTP/2 clusters: the open multiplexed connections per endpoint.
    pub(super) h2: RefCell<Vec<Vec<std::rc::Rc<super::h2_pool::H2Conn>>>>,
    /// Per endpoint: an HTTP/2 connection is being opened (others wait for it).
    pub(super) h2_connecting: RefCell<Vec<bool>>,
    /// Wakes the requests waiting for an HTTP/2 connection being opened.
    pub(super) h2_opened: Notify,
    /// auto_config: per endpoint, ALPN chose HTTP/1.1 (its requests take the HTTP/1.1 pool).
    alpn_http1: RefCell<Vec<bool>>,
    /// Wakes requests waiting for a connection (max_connections reached) when one is
    /// released or closed on this worker.
    pub(super) released: Notify,
}

/// An open upstream connection; `upstream_cx_active` counts it until it is dropped.
pub struct Connection {
    pub h1: UpstreamH1<UpstreamStream>,
    cluster: Rc<WorkerCluster>,
    pub endpoint: usize,
    /// Requests this connection has carried (max_requests_per_connection).
    requests: u32,
    /// When it last went back to the pool (idle_timeout).
    idle_since: Instant,
}

impl Connection {
    /// An idle connection may carry another request: within idle_timeout (checked when it
    /// would be reused; a connection nobody asks for stays open until then) and not closed by
    /// the upstream.
    fn usable(&self) -> bool {
        let expired = self
            .cluster
            .info
            .idle_timeout
            .is_some_and(|t| self.idle_since.elapsed() >= t);
        if expired {
            if let Some(s) = &self.cluster.stats {
                s.upstream_cx_idle_timeout.inc();
            }
            return false;
        }
        self.h1.get_ref().idle_ok()
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.cluster.connection_closed(self.endpoint);
    }
}

/// A request in flight to an endpoint, counted until dropped.
pub struct ActiveRequest {
    cluster: Rc<WorkerCluster>,
    endpoint: usize,
}

impl Drop for ActiveRequest {
    fn drop(&mut self) {
        if let Some(n) = self.cluster.active.borrow_mut().get_mut(self.endpoint) {
            *n = n.saturating_sub(1);
        }
        if let Some(s) = &self.cluster.stats {
            s.upstream_rq_active.dec();
        }
        if let Some(e) = self.cluster.info.endpoints.get(self.endpoint) {
            HostStats::dec(&e.stats.rq_active);
        }
        Resources::release(&self.cluster.info.resources.requests);
    }
}

/// Why no request could be started.
pub enum PickError {
    NoEndpoint,
    /// max_requests reached.
    Overflow,
}

/// Holds a pending request's place (max_pending_requests) while it waits for a connection,
/// and counts it in upstream_rq_pending_active.
struct Pending<'a>(&'a Resources, Option<&'a ClusterStats>);

impl<'a> Pending<'a> {
    fn new(res: &'a Resources, stats: Option<&'a ClusterStats>) -> Pending<'a> {
        if let Some(s) = stats {
            s.upstream_rq_pending_active.inc();
        }
        Pending(res, stats)
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        Resources::release(&self.0.pending);
        if let Some(s) = self.1 {
            s.upstream_rq_pending_active.dec();
        }
    }
}

impl WorkerCluster {
    /// Accounting for an upstream connection (HTTP/1.1 or HTTP/2) that went away: the
    /// active gauges, the circuit breaker's connection slot, and a waiter for that slot.
    pub fn connection_closed(&self, endpoint: usize) {
        if let Some(s) = &self.stats {
            s.upstream_cx_active.dec();
        }
        if let Some(e) = self.info.endpoints.get(endpoint) {
            HostStats::dec(&e.stats.cx_active);
        }
        Resources::release(&self.info.resources.connections);
        self.released.notify_one();
    }

    /// Chooses the endpoint for a request and counts the request on it. `hash`: the route's
    /// hash_policy result, for RING_HASH and MAGLEV clusters.
    pub fn pick(self: &Rc<Self>, hash: Option<u64>) -> Result<ActiveRequest, PickError> {
        let endpoint = {
            let active = self.active.borrow();
            self.lb
                .borrow_mut()
                .pick(&self.info, &active, hash)
                .ok_or(PickError::NoEndpoint)?
        };
        let res = &self.info.resources;
        if !Resources::try_acquire(&res.requests, self.info.limits.max_requests) {
            if let Some(s) = &self.stats {
                s.upstream_rq_pending_overflow.inc();
            }
            return Err(PickError::Overflow);
        }
        if let Some(n) = self.active.borrow_mut().get_mut(endpoint) {
            *n += 1;
        }
        if let Some(s) = &self.stats {
            s.upstream_rq_total.inc();
            s.upstream_rq_active.inc();
        }
        if let Some(e) = self.info.endpoints.get(endpoint) {
            HostStats::inc(&e.stats.rq_total);
            HostStats::inc(&e.stats.rq_active);
        }
        Ok(ActiveRequest {
            cluster: self.clone(),
            endpoint,
        })
    }

    /// An idle connection to the request's endpoint that still looks alive, else a new one.
    /// The bool says whether it was reused.
    /// `wait`: how long a request may wait for a connection when max_connections is reached.
    pub async fn connection(
        self: &Rc<Self>,
        rq: &ActiveRequest,
        wait: Option<Duration>,
    ) -> Result<(Connection, bool), ConnectError> {
        let endpoint = rq.endpoint;
        let res = &self.info.resources;
        let mut pending: Option<Pending<'_>> = None;
        let give_up = wait.map(|w| Instant::now() + w);
        loop {
            let idle = self
                .idle
                .borrow_mut()
                .get_mut(endpoint)
                .and_then(|list| list.pop());
            match idle {
                Some(mut c) if c.usable() => {
                    c.requests += 1;
                    return Ok((c, true));
                }
                Some(_) => continue,
                None => {}
            }
            if Resources::try_acquire(&res.connections, self.info.limits.max_connections) {
                break;
            }
            if pending.is_none() {
                if let Some(s) = &self.stats {
                    s.upstream_cx_overflow.inc();
                }
                if !Resources::try_acquire(&res.pending, self.info.limits.max_pending_requests) {
                    if let Some(s) = &self.stats {
                        s.upstream_rq_pending_overflow.inc();
                    }
                    return Err(ConnectError::Overflow);
                }
                pending = Some(Pending::new(res, self.stats.as_ref()));
            }
            let notified = self.released.notified();
            let woke = match give_up {
                Some(t) => tokio::time::timeout_at(t.into(), notified).await.is_ok(),
                None => {
                    notified.await;
                    true
                }
            };
            if !woke {
                return Err(ConnectError::Overflow);
            }
        }
        drop(pending);
        let e = self
            .info
            .endpoints
            .get(endpoint)
            .ok_or_else(|| ConnectError::Failed("no such endpoint".into()))?;
        let tls_stats = self.stats.as_ref().and_then(|s| s.tls.as_ref());
        let stream = connect_with(&self.info, e, tls_stats).await;
        if stream.is_err() {
            Resources::release(&res.connections);
            self.released.notify_one();
        }
        HostStats::inc(&e.stats.cx_total);
        match &stream {
            Ok(_) => HostStats::inc(&e.stats.cx_active),
            Err(_) => HostStats::inc(&e.stats.cx_connect_fail),
        }
        if let Some(s) = &self.stats {
            match &stream {
                Ok(_) => {
                    s.upstream_cx_total.inc();
                    s.upstream_cx_active.inc();
                }
                Err(err) => {
                    s.upstream_cx_total.inc();
                    s.upstream_cx_connect_fail.inc();
                    if matches!(err, ConnectError::Timeout) {
                        s.upstream_cx_connect_timeout.inc();
                    }
                }
            }
        }
        Ok((
            Connection {
                h1: UpstreamH1::new(stream?),
                cluster: self.clone(),
                endpoint,
                requests: 1,
                idle_since: Instant::now(),
            },
            false,
        ))
    }

    /// Puts a connection whose exchange ended cleanly back in its endpoint's pool.
    pub fn release(&self, mut c: Connection) {
        let exhausted = self
            .info
            .max_requests_per_connection
            .is_some_and(|max| c.requests >= max);
        if !c.h1.reusable() || exhausted {
            if exhausted {
                if let Some(s) = &self.stats {
                    s.upstream_cx_max_requests.inc();
                }
            }
            return;
        }
        c.idle_since = Instant::now();
        let mut idle = self.idle.borrow_mut();
        if let Some(list) = idle.get_mut(c.endpoint) {
            if list.len() < MAX_IDLE_PER_ENDPOINT {
                list.push(c);
                self.released.notify_one();
            }
        }
    }
}

impl WorkerCluster {
    /// auto_config: whether `endpoint` answered ALPN with HTTP/1.1.
    pub fn speaks_http1(&self, endpoint: usize) -> bool {
        self.alpn_http1
            .borrow()
            .get(endpoint)
            .copied()
            .unwrap_or(false)
    }

    /// auto_config: a new connection (already counted as open) on which ALPN chose HTTP/1.1
    /// joins the endpoint's idle HTTP/1.1 pool, and the endpoint is spoken to in HTTP/1.1
    /// from now on (Envoy's mixed pool keeps the protocol it learnt).
    pub(super) fn adopt_http1(self: &Rc<Self>, endpoint: usize, stream: UpstreamStream) {
        if let Some(flag) = self.alpn_http1.borrow_mut().get_mut(endpoint) {
            *flag = true;
        }
        let c = Connection {
            h1: UpstreamH1::new(stream),
            cluster: self.clone(),
            endpoint,
            requests: 0,
            idle_since: Instant::now(),
        };
        if let Some(list) = self.idle.borrow_mut().get_mut(endpoint) {
            list.push(c);
        }
        self.released.notify_one();
    }
}

impl ActiveRequest {
    pub fn endpoint(&self) -> usize {
        self.endpoint
    }

    /// Counts how the request ended on its host: a status (5xx is an error, as in Envoy),
    /// or None for a reset or failure before one; `timeout` also counts rq_timeout.
    pub fn outcome(&self, status: Option<u16>, timeout: bool) {
        let Some(e) = self.cluster.info.endpoints.get(self.endpoint) else {
            return;
        };
        match status {
            Some(s) if s < 500 => HostStats::inc(&e.stats.rq_success),
            _ => HostStats::inc(&e.stats.rq_error),
        }
        if timeout {
            HostStats::inc(&e.stats.rq_timeout);
        }
    }
}

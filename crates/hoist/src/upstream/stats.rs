//! `cluster.<name>.*`: Envoy's cluster stats that hoist keeps, bound per worker.

use std::rc::Rc;
use std::sync::Arc;

use hoist_config::model::Cluster;
use hoist_stats::{ImportMode, Store, WorkerCounter, WorkerGauge};

use super::tls::UpstreamTlsStats;

pub struct ClusterStats {
    pub upstream_cx_total: WorkerCounter,
    pub upstream_cx_active: WorkerGauge,
    pub upstream_cx_connect_fail: WorkerCounter,
    pub upstream_cx_connect_timeout: WorkerCounter,
    pub upstream_rq_total: WorkerCounter,
    pub upstream_rq_active: WorkerGauge,
    /// Requests waiting for a connection (max_connections reached, max_pending_requests not).
    pub upstream_rq_pending_active: WorkerGauge,
    pub upstream_rq_2xx: WorkerCounter,
    pub upstream_rq_3xx: WorkerCounter,
    pub upstream_rq_4xx: WorkerCounter,
    pub upstream_rq_5xx: WorkerCounter,
    pub upstream_rq_timeout: WorkerCounter,
    pub upstream_rq_per_try_timeout: WorkerCounter,
    pub upstream_cx_idle_timeout: WorkerCounter,
    pub upstream_cx_max_requests: WorkerCounter,
    pub upstream_cx_overflow: WorkerCounter,
    pub upstream_rq_pending_overflow: WorkerCounter,
    pub upstream_rq_retry_overflow: WorkerCounter,
    pub upstream_rq_retry: WorkerCounter,
    pub upstream_rq_retry_success: WorkerCounter,
    pub upstream_rq_retry_limit_exceeded: WorkerCounter,
    /// Response bodies forwarded with splice(2) to their end, stopped by a kTLS control
    /// record (the rest copied), or declined by the downstream side; bytes spliced.
    pub upstream_rq_splice: WorkerCounter,
    pub upstream_rq_splice_interrupted: WorkerCounter,
    pub upstream_rq_splice_declined: WorkerCounter,
    pub upstream_rq_splice_bytes: WorkerCounter,
    /// `ssl.*` of a cluster with an UpstreamTlsContext (tls.rs).
    pub tls: Option<Rc<UpstreamTlsStats>>,
}

const COUNTERS: [&str; 22] = [
    "upstream_rq_splice",
    "upstream_rq_splice_interrupted",
    "upstream_rq_splice_declined",
    "upstream_rq_splice_bytes",
    "upstream_cx_total",
    "upstream_cx_connect_fail",
    "upstream_cx_connect_timeout",
    "upstream_rq_total",
    "upstream_rq_2xx",
    "upstream_rq_3xx",
    "upstream_rq_4xx",
    "upstream_rq_5xx",
    "upstream_rq_timeout",
    "upstream_rq_per_try_timeout",
    "upstream_cx_idle_timeout",
    "upstream_cx_max_requests",
    "upstream_cx_overflow",
    "upstream_rq_pending_overflow",
    "upstream_rq_retry_overflow",
    "upstream_rq_retry",
    "upstream_rq_retry_success",
    "upstream_rq_retry_limit_exceeded",
];

/// Creates every stat of a cluster at load, so they show (as 0) before any traffic; the
/// membership gauges start here (health.rs keeps membership_healthy current).
pub fn register(store: &Arc<Store>, c: &Cluster) {
    let scope = format!("cluster.{}.", c.name);
    for name in COUNTERS {
        store.counter(&format!("{scope}{name}"));
    }
    if c.tls.is_some() {
        for name in super::tls::COUNTERS {
            store.counter(&format!("{scope}{name}"));
        }
    }
    for name in [
        "upstream_cx_active",
        "upstream_rq_active",
        "upstream_rq_pending_active",
    ] {
        store.gauge(&format!("{scope}{name}"), ImportMode::Accumulate);
    }
    let main = store.main_slot();
    let n = c.endpoints.len() as u64;
    // With health checks a host counts as healthy only once it passed one.
    let healthy = if c.health_check.is_some() { 0 } else { n };
    for (name, v) in [("membership_healthy", healthy), ("membership_total", n)] {
        store
            .gauge(&format!("{scope}{name}"), ImportMode::NeverImport)
            .set(main, v);
    }
}

impl ClusterStats {
    pub fn new(store: &Arc<Store>, cluster: &str, slot: usize, tls: bool) -> ClusterStats {
        let scope = format!("cluster.{cluster}.");
        let c = |n: &str| store.counter(&format!("{scope}{n}")).bind(slot);
        let g = |n: &str| {
            store
                .gauge(&format!("{scope}{n}"), ImportMode::Accumulate)
                .bind(slot)
        };
        ClusterStats {
            upstream_cx_total: c("upstream_cx_total"),
            upstream_cx_active: g("upstream_cx_active"),
            upstream_cx_connect_fail: c("upstream_cx_connect_fail"),
            upstream_cx_connect_timeout: c("upstream_cx_connect_timeout"),
            upstream_rq_total: c("upstream_rq_total"),
            upstream_rq_active: g("upstream_rq_active"),
            upstream_rq_pending_active: g("upstream_rq_pending_active"),
            upstream_rq_2xx: c("upstream_rq_2xx"),
            upstream_rq_3xx: c("upstream_rq_3xx"),
            upstream_rq_4xx: c("upstream_rq_4xx"),
            upstream_rq_5xx: c("upstream_rq_5xx"),
            upstream_rq_timeout: c("upstream_rq_timeout"),
            upstream_rq_per_try_timeout: c("upstream_rq_per_try_timeout"),
            upstream_cx_idle_timeout: c("upstream_cx_idle_timeout"),
            upstream_cx_max_requests: c("upstream_cx_max_requests"),
            upstream_cx_overflow: c("upstream_cx_overflow"),
            upstream_rq_pending_overflow: c("upstream_rq_pending_overflow"),
            upstream_rq_retry_overflow: c("upstream_rq_retry_overflow"),
            upstream_rq_retry: c("upstream_rq_retry"),
            upstream_rq_retry_success: c("upstream_rq_retry_success"),
            upstream_rq_retry_limit_exceeded: c("upstream_rq_retry_limit_exceeded"),
            upstream_rq_splice: c("upstream_rq_splice"),
            upstream_rq_splice_interrupted: c("upstream_rq_splice_interrupted"),
            upstream_rq_splice_declined: c("upstream_rq_splice_declined"),
            upstream_rq_splice_bytes: c("upstream_rq_splice_bytes"),
            tls: tls.then(|| Rc::new(UpstreamTlsStats::new(store, &scope, slot))),
        }
    }

    pub fn response(&self, status: u16) {
        match status {
            200..=299 => self.upstream_rq_2xx.inc(),
            300..=399 => self.upstream_rq_3xx.inc(),
            400..=499 => self.upstream_rq_4xx.inc(),
            500..=599 => self.upstream_rq_5xx.inc(),
            _ => {}
        }
    }
}

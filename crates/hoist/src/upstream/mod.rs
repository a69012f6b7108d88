//! Upstream clusters: the configuration shared by all workers ([`ClusterManager`]) and what
//! each worker keeps for itself without locks ([`WorkerClusters`]: connection pools, load
//! balancer state, active request counts, stats handles). The router's side of a request
//! (pick a cluster and an endpoint, send, stream the response back) is in [`forward`].

mod attempt;
mod conn;
pub mod forward;
mod h2;
mod h2_pool;
mod hash_lb;
pub mod hash_policy;
mod headers;
pub mod health;
mod lb;
mod mirror;
pub mod outlier;
mod pool;
mod priority;
mod reply;
mod stats;
mod tls;
mod xxhash;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoist_config::model::{
    CircuitBreakers, Cluster, DiscoveryType, DnsLookupFamily, HealthCheck, LbPolicy,
    TlsOffloadMode, UpstreamProtocol,
};
use hoist_config::ConfigError;
use hoist_stats::Store;
use hoist_tls::client::UpstreamTls;

pub use headers::{append_via, trusted_client_address};
pub use pool::WorkerClusters;

/// One endpoint of a cluster as configured.
pub struct EndpointInfo {
    pub host: String,
    pub port: u16,
    pub weight: u32,
    /// `host:port` (IPv6 in brackets): what auto_host_rewrite sends and the access log's
    /// %UPSTREAM_HOST% shows.
    pub label: String,
    /// What /clusters shows per host. Shared by the workers: one relaxed atomic add per event.
    pub stats: HostStats,
    /// Active health checking's verdict (always true without health checks).
    pub healthy: AtomicBool,
    /// Outlier detection's counters and ejection flag.
    pub outlier: outlier::HostMonitor,
    /// The locality's priority (0 first).
    pub priority: u32,
}

impl EndpointInfo {
    /// Whether the balancers count this host as healthy: it passes its health checks and is
    /// not ejected (Envoy's coarse health).
    pub fn available(&self) -> bool {
        self.healthy.load(Ordering::Relaxed) && !self.outlier.ejected()
    }

    /// /clusters' health_flags: "healthy", or each failure as `/flag`.
    pub fn health_flags(&self) -> String {
        let mut flags = String::new();
        if !self.healthy.load(Ordering::Relaxed) {
            flags.push_str("/failed_active_hc");
        }
        if self.outlier.ejected() {
            flags.push_str("/failed_outlier_check");
        }
        if flags.is_empty() {
            flags.push_str("healthy");
        }
        flags
    }
}

/// A cluster's open connections, pending and active requests and active retries, shared by
/// the workers (Envoy's circuit breakers are per cluster, not per worker).
#[derive(Default)]
pub struct Resources {
    pub connections: AtomicU64,
    pub pending: AtomicU64,
    pub requests: AtomicU64,
    pub retries: AtomicU64,
}

impl Resources {
    /// Takes one unit of `counter` unless that would go over `max`.
    pub fn try_acquire(counter: &AtomicU64, max: u32) -> bool {
        counter
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
                (v < u64::from(max)).then_some(v + 1)
            })
            .is_ok()
    }

    pub fn release(counter: &AtomicU64) {
        HostStats::dec(counter);
    }
}

/// Envoy's per-host counters, as /clusters prints them.
#[derive(Default)]
pub struct HostStats {
    pub cx_total: AtomicU64,
    pub cx_active: AtomicU64,
    pub cx_connect_fail: AtomicU64,
    pub rq_total: AtomicU64,
    pub rq_active: AtomicU64,
    /// Responses below 500 (Envoy's rq_success), and 5xx or resets (rq_error).
    pub rq_success: AtomicU64,
    pub rq_error: AtomicU64,
    pub rq_timeout: AtomicU64,
}

impl HostStats {
    pub fn inc(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn dec(c: &AtomicU64) {
        let _ = c.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| v.checked_sub(1));
    }

    /// (name, value) in Envoy's /clusters order.
    pub fn values(&self) -> [(&'static str, u64); 8] {
        let v = |c: &AtomicU64| c.load(Ordering::Relaxed);
        [
            ("cx_active", v(&self.cx_active)),
            ("cx_connect_fail", v(&self.cx_connect_fail)),
            ("cx_total", v(&self.cx_total)),
            ("rq_active", v(&self.rq_active)),
            ("rq_error", v(&self.rq_error)),
            ("rq_success", v(&self.rq_success)),
            ("rq_timeout", v(&self.rq_timeout)),
            ("rq_total", v(&self.rq_total)),
        ]
    }
}

/// The largest piece of a response body the upstream codecs hand on at once (the HTTP/1.1
/// client's read size; HTTP/2 DATA frames are smaller).
pub const BODY_PIECE: u32 = 64 * 1024;

/// `per_connection_buffer_limit_bytes` as a number of body pieces, rounded up, at least one.
pub fn body_pieces(limit: u32) -> usize {
    limit.div_ceil(BODY_PIECE).max(1) as usize
}

/// A cluster compiled once at load.
pub struct ClusterInfo {
    pub name: String,
    /// How many body pieces may wait between the upstream connection and the downstream writer:
    /// `per_connection_buffer_limit_bytes` in pieces of at most [`BODY_PIECE`] (at least one).
    pub body_pieces: usize,
    pub endpoints: Vec<EndpointInfo>,
    pub lb_policy: LbPolicy,
    pub connect_timeout: Duration,
    pub idle_timeout: Option<Duration>,
    pub max_requests_per_connection: Option<u32>,
    pub limits: CircuitBreakers,
    pub health_check: Option<HealthCheck>,
    /// What the circuit breakers count, across workers.
    pub resources: Resources,
    /// Host names are resolved at connect time (STRICT_DNS, LOGICAL_DNS).
    pub resolve: bool,
    pub family: DnsLookupFamily,
    /// With `offload_mode` set from `--tls-offload` (tls.rs).
    pub tls: Option<UpstreamTls>,
    pub outlier: Option<outlier::Detector>,
    /// Priority levels (the highest endpoint priority + 1).
    pub priorities: u32,
    /// `load_assignment.policy.overprovisioning_factor`, in percent.
    pub overprovisioning_factor: u32,
    /// RING_HASH's ring or MAGLEV's table, shared by the workers.
    pub hash_table: Option<hash_lb::HashTable>,
    /// The HTTP version spoken to the endpoints; `Auto` is resolved at load (see
    /// [`upstream_protocol`]).
    pub protocol: UpstreamProtocol,
}

impl ClusterInfo {
    /// How many retries may be active now: max_retries, or with a retry budget its share of
    /// the active and pending requests (at least min_retry_concurrency), as Envoy.
    pub fn retry_limit(&self) -> u32 {
        match self.limits.retry_budget {
            None => self.limits.max_retries,
            Some(b) => {
                let r = &self.resources;
                let active = r.requests.load(Ordering::Relaxed) + r.pending.load(Ordering::Relaxed);
                let share = active.saturating_mul(u64::from(b.budget_basis_points)) / 10_000;
                u32::try_from(share)
                    .unwrap_or(u32::MAX)
                    .max(b.min_retry_concurrency)
            }
        }
    }

    /// membership_healthy: hosts that pass their checks and are not ejected.
    pub fn available_count(&self) -> u64 {
        self.endpoints.iter().filter(|e| e.available()).count() as u64
    }
}

/// Every cluster of the bootstrap, by name.
#[derive(Default)]
pub struct ClusterManager {
    pub clusters: Vec<Arc<ClusterInfo>>,
    by_name: HashMap<String, usize>,
    stats: Option<Arc<Store>>,
}

impl ClusterManager {
    pub fn build(
        clusters: &[Cluster],
        stats: &Arc<Store>,
        offload_mode: TlsOffloadMode,
    ) -> Result<ClusterManager, ConfigError> {
        let mut out = ClusterManager {
            stats: Some(stats.clone()),
            ..ClusterManager::default()
        };
        for c in clusters {
            let first = c.endpoints.first().map_or("", |e| e.host.as_str());
            let protocol = upstream_protocol(c);
            let tls = c
                .tls
                .as_ref()
                .map(|t| {
                    UpstreamTls::new(t, first).map(|mut u| {
                        u.offload_mode = offload_mode;
                        // Envoy offers h2 over TLS to an HTTP/2 cluster whose context names
                        // no protocols, and h2 then http/1.1 for auto_config whatever the
                        // context says.
                        let alpn: &[&[u8]] = match protocol {
                            UpstreamProtocol::Http2(_) if u.config.alpn_protocols.is_empty() => {
                                &[b"h2"]
                            }
                            UpstreamProtocol::Auto(_) => &[b"h2", b"http/1.1"],
                            _ => &[],
                        };
                        if !alpn.is_empty() {
                            std::sync::Arc::make_mut(&mut u.config).alpn_protocols =
                                alpn.iter().map(|p| p.to_vec()).collect();
                        }
                        u
                    })
                })
                .transpose()
                .map_err(|e| ConfigError::new(format!("{}.transport_socket", c.yaml_path), e))?;
            let endpoints: Vec<EndpointInfo> = c
                .endpoints
                .iter()
                .map(|e| EndpointInfo {
                    label: if e.host.contains(':') {
                        format!("[{}]:{}", e.host, e.port)
                    } else {
                        format!("{}:{}", e.host, e.port)
                    },
                    host: e.host.clone(),
                    port: e.port,
                    weight: e.weight,
                    stats: HostStats::default(),
                    // Envoy: a host must pass its first check before it counts as healthy.
                    healthy: AtomicBool::new(c.health_check.is_none()),
                    outlier: outlier::HostMonitor::default(),
                    priority: e.priority,
                })
                .collect();
            let hash_table = match c.lb_policy {
                LbPolicy::RingHash {
                    min_ring_size,
                    max_ring_size,
                } => Some(hash_lb::HashTable::ring(
                    &endpoints,
                    min_ring_size,
                    max_ring_size,
                )),
                LbPolicy::Maglev { table_size } => {
                    Some(hash_lb::HashTable::maglev(&endpoints, table_size))
                }
                _ => None,
            };
            out.by_name.insert(c.name.clone(), out.clusters.len());
            out.clusters.push(Arc::new(ClusterInfo {
                name: c.name.clone(),
                body_pieces: body_pieces(c.per_connection_buffer_limit_bytes),
                endpoints,
                lb_policy: c.lb_policy,
                connect_timeout: c.connect_timeout,
                idle_timeout: c.idle_timeout,
                max_requests_per_connection: c.max_requests_per_connection,
                limits: c.circuit_breakers,
                health_check: c.health_check.clone(),
                resources: Resources::default(),
                resolve: c.discovery != DiscoveryType::Static,
                family: c.dns_lookup_family,
                tls,
                priorities: c
                    .endpoints
                    .iter()
                    .map(|e| e.priority + 1)
                    .max()
                    .unwrap_or(1),
                overprovisioning_factor: c.overprovisioning_factor,
                hash_table,
                protocol,
                outlier: c
                    .outlier_detection
                    .map(|o| outlier::Detector::new(o, c.endpoints.len(), Some(stats), &c.name)),
            }));
            stats::register(stats, c);
        }
        Ok(out)
    }

    pub fn index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    pub fn store(&self) -> Option<&Arc<Store>> {
        self.stats.as_ref()
    }

    /// `GET /clusters` in Envoy's text form: `<cluster>::<host>::<stat>::<value>` lines.
    pub fn admin_text(&self) -> String {
        let mut s = String::new();
        for c in &self.clusters {
            s.push_str(&format!("{0}::observability_name::{0}\n", c.name));
            if c.outlier.is_some() {
                // Envoy prints these for a cluster with a detector; -1: no success rate
                // computed (hoist has no success rate detection).
                for name in [
                    "success_rate_average",
                    "success_rate_ejection_threshold",
                    "local_origin_success_rate_average",
                    "local_origin_success_rate_ejection_threshold",
                ] {
                    s.push_str(&format!("{}::outlier::{name}::-1\n", c.name));
                }
            }
            s.push_str(&format!("{}::added_via_api::false\n", c.name));
            for e in &c.endpoints {
                let host = format!("{}::{}", c.name, e.label);
                for (name, value) in e.stats.values() {
                    s.push_str(&format!("{host}::{name}::{value}\n"));
                }
                s.push_str(&format!(
                    "{host}::hostname::{}\n",
                    if e.host.parse::<std::net::IpAddr>().is_ok() {
                        ""
                    } else {
                        e.host.as_str()
                    }
                ));
                s.push_str(&format!("{host}::health_flags::{}\n", e.health_flags()));
                s.push_str(&format!("{host}::weight::{}\n", e.weight));
                s.push_str(&format!(
                    "{host}::region::\n{host}::zone::\n{host}::sub_zone::\n"
                ));
                s.push_str(&format!(
                    "{host}::canary::false\n{host}::priority::{}\n",
                    e.priority
                ));
                s.push_str(&format!(
                    "{host}::success_rate::-1\n{host}::local_origin_success_rate::-1\n"
                ));
            }
        }
        s
    }

    /// `GET /clusters?format=json`.
    pub fn admin_json(&self) -> serde_json::Value {
        let statuses: Vec<serde_json::Value> = self
            .clusters
            .iter()
            .map(|c| {
                let hosts: Vec<serde_json::Value> = c
                    .endpoints
                    .iter()
                    .map(|e| {
                        let stats: Vec<serde_json::Value> = e
                            .stats
                            .values()
                            .iter()
                            .map(|(name, value)| {
                                let kind = if name.ends_with("active") { "GAUGE" } else { "COUNTER" };
                                serde_json::json!({"name": name, "value": value.to_string(), "type": kind})
                            })
                            .collect();
                        serde_json::json!({
                            "address": {"socket_address": {"address": e.host, "port_value": e.port}},
                            "stats": stats,
                            "health_status": health_status(e),
                            "weight": e.weight,
                            "priority": e.priority,
                        })
                    })
                    .collect();
                serde_json::json!({"name": c.name, "observability_name": c.name, "host_statuses": hosts})
            })
            .collect();
        serde_json::json!({ "cluster_statuses": statuses })
    }
}

/// The protocol a cluster's connections speak: auto_config over plain TCP is HTTP/1.1 (no ALPN
/// to ask with); over TLS it stays `Auto`, decided per connection by ALPN (h2.rs).
fn upstream_protocol(c: &Cluster) -> UpstreamProtocol {
    match c.protocol {
        UpstreamProtocol::Auto(_) if c.tls.is_none() => UpstreamProtocol::Http1,
        p => p,
    }
}

/// Envoy's admin HostHealthStatus: the EDS status and each failed check.
fn health_status(e: &EndpointInfo) -> serde_json::Value {
    let mut v = serde_json::json!({"eds_health_status": "HEALTHY"});
    if !e.healthy.load(Ordering::Relaxed) {
        v["failed_active_health_check"] = serde_json::Value::Bool(true);
    }
    if e.outlier.ejected() {
        v["failed_outlier_check"] = serde_json::Value::Bool(true);
    }
    v
}

#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use std::time::Duration;

    /// A STATIC cluster over 127.0.0.1 with one endpoint per weight, for unit tests.
    pub fn cluster(policy: LbPolicy, weights: &[u32]) -> ClusterInfo {
        ClusterInfo {
            body_pieces: 1,
            name: "c".into(),
            endpoints: weights
                .iter()
                .enumerate()
                .map(|(i, w)| EndpointInfo {
                    host: "127.0.0.1".into(),
                    port: 1000 + i as u16,
                    weight: *w,
                    label: format!("127.0.0.1:{}", 1000 + i),
                    stats: Default::default(),
                    healthy: std::sync::atomic::AtomicBool::new(true),
                    outlier: Default::default(),
                    priority: 0,
                })
                .collect(),
            lb_policy: policy,
            connect_timeout: Duration::from_secs(1),
            idle_timeout: None,
            max_requests_per_connection: None,
            limits: Default::default(),
            health_check: None,
            resources: Default::default(),
            resolve: false,
            family: Default::default(),
            tls: None,
            outlier: None,
            hash_table: None,
            protocol: UpstreamProtocol::Http1,
            priorities: 1,
            overprovisioning_factor: 140,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_buffer_limit_becomes_whole_pieces_and_at_least_one() {
        assert_eq!(body_pieces(0), 1);
        assert_eq!(body_pieces(1), 1);
        assert_eq!(body_pieces(BODY_PIECE), 1);
        assert_eq!(body_pieces(BODY_PIECE + 1), 2);
        assert_eq!(body_pieces(1024 * 1024), 16);
        assert_eq!(body_pieces(u32::MAX), 65536);
    }
}

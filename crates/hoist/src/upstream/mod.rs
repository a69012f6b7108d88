//! Upstream clusters: the configuration shared by all workers ([`ClusterManager`]) and what
//! each worker keeps for itself without locks ([`WorkerClusters`]: connection pools, load
//! balancer state, active request counts, stats handles). The router's side of a request
//! (pick a cluster and an endpoint, send, stream the response back) is in [`forward`].

mod attempt;
mod conn;
pub mod forward;
mod headers;
pub mod health;
mod lb;
mod pool;
mod reply;
mod stats;
mod tls;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoist_config::model::{
    CircuitBreakers, Cluster, DiscoveryType, DnsLookupFamily, HealthCheck, LbPolicy, TlsOffloadMode,
};
use hoist_config::ConfigError;
use hoist_stats::Store;
use hoist_tls::client::UpstreamTls;

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

/// A cluster compiled once at load.
pub struct ClusterInfo {
    pub name: String,
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
            let tls = c
                .tls
                .as_ref()
                .map(|t| {
                    UpstreamTls::new(t, first).map(|mut u| {
                        u.offload_mode = offload_mode;
                        u
                    })
                })
                .transpose()
                .map_err(|e| ConfigError::new(format!("{}.transport_socket", c.yaml_path), e))?;
            let endpoints = c
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
                })
                .collect();
            out.by_name.insert(c.name.clone(), out.clusters.len());
            out.clusters.push(Arc::new(ClusterInfo {
                name: c.name.clone(),
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
                let flags = if e.healthy.load(Ordering::Relaxed) {
                    "healthy"
                } else {
                    "/failed_active_hc"
                };
                s.push_str(&format!("{host}::health_flags::{flags}\n"));
                s.push_str(&format!("{host}::weight::{}\n", e.weight));
                s.push_str(&format!(
                    "{host}::region::\n{host}::zone::\n{host}::sub_zone::\n"
                ));
                s.push_str(&format!("{host}::canary::false\n{host}::priority::0\n"));
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
                            "health_status": if e.healthy.load(Ordering::Relaxed) {
                                serde_json::json!({"eds_health_status": "HEALTHY"})
                            } else {
                                serde_json::json!({"eds_health_status": "HEALTHY", "failed_active_health_check": true})
                            },
                            "weight": e.weight,
                        })
                    })
                    .collect();
                serde_json::json!({"name": c.name, "observability_name": c.name, "host_statuses": hosts})
            })
            .collect();
        serde_json::json!({ "cluster_statuses": statuses })
    }
}

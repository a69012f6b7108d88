//! Upstream clusters: the configuration shared by all workers ([`ClusterManager`]) and what
//! each worker keeps for itself without locks ([`WorkerClusters`]: connection pools, load
//! balancer state, active request counts, stats handles). The router's side of a request
//! (pick a cluster and an endpoint, send, stream the response back) is in [`forward`].

mod conn;
pub mod forward;
mod lb;
mod pool;
mod stats;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hoist_config::model::{Cluster, DiscoveryType, DnsLookupFamily, LbPolicy};
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
}

/// A cluster compiled once at load.
pub struct ClusterInfo {
    pub name: String,
    pub endpoints: Vec<EndpointInfo>,
    pub lb_policy: LbPolicy,
    pub connect_timeout: Duration,
    /// Host names are resolved at connect time (STRICT_DNS, LOGICAL_DNS).
    pub resolve: bool,
    pub family: DnsLookupFamily,
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
    pub fn build(clusters: &[Cluster], stats: &Arc<Store>) -> Result<ClusterManager, ConfigError> {
        let mut out = ClusterManager {
            stats: Some(stats.clone()),
            ..ClusterManager::default()
        };
        for c in clusters {
            let first = c.endpoints.first().map_or("", |e| e.host.as_str());
            let tls = c
                .tls
                .as_ref()
                .map(|t| UpstreamTls::new(t, first))
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
                })
                .collect();
            out.by_name.insert(c.name.clone(), out.clusters.len());
            out.clusters.push(Arc::new(ClusterInfo {
                name: c.name.clone(),
                endpoints,
                lb_policy: c.lb_policy,
                connect_timeout: c.connect_timeout,
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
}

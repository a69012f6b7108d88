//! How jwt_authn reaches a cluster: its first endpoint, its connect timeout, and a rustls
//! client built from its UpstreamTlsContext ([`hoist_tls::client`]).

use std::time::Duration;

use hoist_config::model::{Cluster, DiscoveryType, DnsLookupFamily};
pub use hoist_tls::client::UpstreamTls;

/// A cluster as a client of it sees it.
pub struct Upstream {
    pub cluster: String,
    pub host: String,
    pub port: u16,
    /// Whether `host` needs resolving (STRICT_DNS, LOGICAL_DNS).
    pub resolve: bool,
    pub family: DnsLookupFamily,
    pub connect_timeout: Duration,
    pub tls: Option<UpstreamTls>,
}

impl Upstream {
    /// Err: why the cluster's TLS settings cannot be used (for a config error).
    pub fn new(c: &Cluster) -> Result<Upstream, String> {
        let first = c
            .endpoints
            .first()
            .ok_or_else(|| format!("cluster \"{}\" has no endpoint", c.name))?;
        let tls = c
            .tls
            .as_ref()
            .map(|t| UpstreamTls::new(t, &first.host))
            .transpose()?;
        Ok(Upstream {
            cluster: c.name.clone(),
            host: first.host.clone(),
            port: first.port,
            resolve: c.discovery != DiscoveryType::Static,
            family: c.dns_lookup_family,
            connect_timeout: c.connect_timeout,
            tls,
        })
    }
}

//! `envoy.config.bootstrap.v3.Bootstrap`: the root of a configuration.

use super::access_log::AccessLog;
use super::cluster::Cluster;
use super::core::SocketAddress;
use super::listener::Listener;

#[derive(Clone, Debug, Default)]
pub struct Node {
    pub id: String,
    pub cluster: String,
}

#[derive(Clone, Debug)]
pub struct Admin {
    pub address: SocketAddress,
    /// `access_log` entries plus the legacy `access_log_path`.
    pub access_log: Vec<AccessLog>,
}

#[derive(Clone, Debug, Default)]
pub struct Bootstrap {
    pub node: Node,
    /// No `admin` block means no admin listener.
    pub admin: Option<Admin>,
    pub listeners: Vec<Listener>,
    /// `static_resources.clusters`: reachable by filters (jwt_authn's remote JWKS) only.
    pub clusters: Vec<Cluster>,
    /// The configuration as loaded (after --config-yaml merge), for /config_dump. Secrets are
    /// still in it: redact before showing.
    pub source: serde_json::Value,
}

//! `envoy.config.bootstrap.v3.Bootstrap`: node, admin and static_resources.

use serde_json::Value;

use super::access_log::{access_logs, legacy_file_log};
use super::cluster::clusters;
use super::core::address;
use super::listener::listener;
use crate::model::{self, Admin, Bootstrap, Cluster, Listener};
use crate::reader::{Node, Result};

/// Decodes a whole configuration tree; the tree itself is kept for /config_dump.
pub(crate) fn bootstrap(tree: Value) -> Result<Bootstrap> {
    let mut b = decode(&tree)?;
    b.source = tree;
    Ok(b)
}

fn decode(tree: &Value) -> Result<Bootstrap> {
    let mut m = Node::new(tree, "").message()?;
    m.unsupported(&[
        "node_context_params",
        "dynamic_resources",
        "cluster_manager",
        "hds_config",
        "flags_path",
        "stats_sinks",
        "deferred_stat_options",
        "stats_config",
        "stats_flush_interval",
        "stats_flush_on_admin",
        "stats_eviction_interval",
        "watchdog",
        "watchdogs",
        "tracing",
        "layered_runtime",
        "overload_manager",
        "enable_dispatcher_stats",
        "header_prefix",
        "stats_server_version_override",
        "use_tcp_for_dns_lookups",
        "dns_resolution_config",
        "typed_dns_resolver_config",
        "bootstrap_extensions",
        "fatal_actions",
        "config_sources",
        "default_config_source",
        "default_socket_interface",
        "certificate_provider_instances",
        "inline_headers",
        "perf_tracing_file_path",
        "default_regex_engine",
        "xds_delegate_extension",
        "xds_config_tracker_extension",
        "listener_manager",
        "application_log_config",
        "grpc_async_client_manager_config",
        "memory_allocator_manager",
    ])?;
    let node = match m.field("node")? {
        Some(n) => node_info(&n)?,
        None => model::Node::default(),
    };
    let admin = m.field("admin")?.map(|n| admin(&n)).transpose()?;
    let resources = match m.field("static_resources")? {
        Some(n) => static_resources(&n)?,
        None => (Vec::new(), Vec::new()),
    };
    m.finish()?;
    let (listeners, clusters) = resources;
    Ok(Bootstrap {
        node,
        admin,
        listeners,
        clusters,
        source: Value::Null,
    })
}

/// `envoy.config.core.v3.Node`. metadata and locality are data that only /server_info and
/// /config_dump show.
fn node_info(node: &Node) -> Result<model::Node> {
    let mut m = node.message()?;
    m.unsupported(&[
        "dynamic_parameters",
        "user_agent_name",
        "user_agent_version",
        "user_agent_build_version",
        "extensions",
        "client_features",
        "listening_addresses",
    ])?;
    let id = m.string("id")?;
    let cluster = m.string("cluster")?;
    if let Some(metadata) = m.field("metadata")? {
        metadata.entries()?;
    }
    if let Some(locality) = m.field("locality")? {
        let mut l = locality.message()?;
        for field in ["region", "zone", "sub_zone"] {
            l.string(field)?;
        }
        l.finish()?;
    }
    m.finish()?;
    Ok(model::Node { id, cluster })
}

/// `envoy.config.bootstrap.v3.Admin`.
fn admin(node: &Node) -> Result<Admin> {
    let mut m = node.message()?;
    m.unsupported(&[
        "profile_path",
        "socket_options",
        "ignore_global_conn_limit",
        "allow_paths",
    ])?;
    let address = address(&m.required("address")?)?;
    let mut access_log = access_logs(&mut m)?;
    if let Some(path) = m.field("access_log_path")? {
        let file = path.string()?;
        if !file.is_empty() {
            access_log.push(legacy_file_log(file, path.path()));
        }
    }
    m.finish()?;
    Ok(Admin {
        address,
        access_log,
    })
}

/// `static_resources`: listeners, and clusters (which only filters reach for now: a route
/// cannot send requests to a cluster yet).
fn static_resources(node: &Node) -> Result<(Vec<Listener>, Vec<Cluster>)> {
    let mut m = node.message()?;
    m.unsupported(&["secrets"])?;
    let clusters = clusters(&m.list("clusters")?)?;
    let mut listeners: Vec<Listener> = Vec::new();
    for (index, item) in m.list("listeners")?.into_iter().enumerate() {
        let l = listener(&item, index)?;
        if let Some(other) = listeners.iter().find(|o| o.name == l.name) {
            return Err(item.error(format!(
                "listener name \"{}\" is already used by {}",
                l.name, other.yaml_path
            )));
        }
        let port = l.address.addr.port();
        if let Some(other) = listeners
            .iter()
            .find(|o| port != 0 && o.address.addr == l.address.addr)
        {
            return Err(item.error(format!(
                "address {} is already used by listener \"{}\"",
                l.address.addr, other.name
            )));
        }
        listeners.push(l);
    }
    m.finish()?;
    super::forward::check_clusters(&listeners, &clusters)?;
    Ok((listeners, clusters))
}

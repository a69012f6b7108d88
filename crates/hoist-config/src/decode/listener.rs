//! `envoy.config.listener.v3.Listener`, its filter chains and the hoist metadata extension.

use super::core::address;
use super::hcm::http_connection_manager;
use super::tls::downstream_tls_context;
use crate::extension::{select, Kind, Slot};
use crate::model::{FilterChain, FilterChainMatch, Listener, TlsOffloadMode};
use crate::reader::{Node, Result};

const HCM: Kind = Kind {
    type_name: "envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
    names: &[
        "envoy.filters.network.http_connection_manager",
        "envoy.http_connection_manager",
    ],
    name_only: false,
};

const TLS: Kind = Kind {
    type_name: "envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
    names: &["envoy.transport_sockets.tls", "tls"],
    name_only: false,
};

/// hoist peeks at every ClientHello (SNI, ALPN) itself, so the inspector is accepted as a no-op.
const TLS_INSPECTOR: Kind = Kind {
    type_name: "envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector",
    names: &[
        "envoy.filters.listener.tls_inspector",
        "envoy.listener.tls_inspector",
    ],
    name_only: true,
};

/// The default of `per_connection_buffer_limit_bytes`.
pub(crate) const DEFAULT_BUFFER_LIMIT: u32 = 1024 * 1024;

pub(crate) fn listener(node: &Node, index: usize) -> Result<Listener> {
    let mut m = node.message()?;
    m.unsupported(&[
        "additional_addresses",
        "fcds_config",
        "filter_chain_matcher",
        "use_original_dst",
        "deprecated_v1",
        "drain_type",
        "listener_filters_timeout",
        "continue_on_listener_filters_timeout",
        "transparent",
        "freebind",
        "socket_options",
        "tcp_fast_open_queue_length",
        "udp_listener_config",
        "api_listener",
        "connection_balance_config",
        "reuse_port",
        "access_log",
        "tcp_backlog_size",
        "max_connections_to_accept_per_socket_event",
        "bind_to_port",
        "internal_listener",
        "enable_mptcp",
        "ignore_global_conn_limit",
        "bypass_overload_manager",
        "tcp_keepalive",
    ])?;
    let name = m
        .opt_string("name")?
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| format!("listener_{index}"));
    let address = address(&m.required("address")?)?;
    let stat_prefix = m.opt_string("stat_prefix")?.filter(|s| !s.is_empty());
    let per_connection_buffer_limit_bytes = m.u32(
        "per_connection_buffer_limit_bytes",
        DEFAULT_BUFFER_LIMIT,
        0..=u32::MAX,
    )?;
    for item in m.list("listener_filters")? {
        listener_filter(&item)?;
    }
    if let Some(reuse) = m.field("enable_reuse_port")? {
        if !reuse.bool()? {
            return Err(reuse.error(
                "false is not supported by hoist: every worker binds its own SO_REUSEPORT socket",
            ));
        }
    }
    // Informational in Envoy for listeners that are not on Windows; accepted.
    m.enumeration("traffic_direction", &["UNSPECIFIED", "INBOUND", "OUTBOUND"])?;
    let tls_offload = match m.field("metadata")? {
        Some(n) => metadata(&n)?,
        None => None,
    };

    let chain_nodes = m.list("filter_chains")?;
    let mut filter_chains = Vec::with_capacity(chain_nodes.len());
    for item in &chain_nodes {
        let chain = filter_chain(item)?;
        check_unique_match(&filter_chains, &chain, item)?;
        filter_chains.push(chain);
    }
    let default_filter_chain = m
        .field("default_filter_chain")?
        .map(|n| filter_chain(&n))
        .transpose()?;
    if filter_chains.is_empty() && default_filter_chain.is_none() {
        return Err(m.error("no filter chains specified"));
    }
    m.finish()?;
    Ok(Listener {
        name,
        address,
        stat_prefix,
        filter_chains,
        default_filter_chain,
        per_connection_buffer_limit_bytes,
        tls_offload,
        yaml_path: node.path().to_owned(),
    })
}

fn listener_filter(node: &Node) -> Result<()> {
    let mut m = node.message()?;
    m.unsupported(&["filter_disabled"])?;
    match select(&mut m, "listener filter", &[TLS_INSPECTOR])? {
        Slot::Known { config, .. } => {
            if let Some(typed) = config {
                let mut c = typed.body;
                c.unsupported(&[
                    "enable_ja3_fingerprinting",
                    "enable_ja4_fingerprinting",
                    "initial_read_buffer_size",
                    "close_connection_on_client_hello_parsing_errors",
                    "max_client_hello_size",
                ])?;
                c.finish()?;
            }
        }
        Slot::Unsupported(e) => return Err(e),
    }
    m.finish()
}

/// `metadata.filter_metadata`: other namespaces are free-form data; `hoist` is ours.
fn metadata(node: &Node) -> Result<Option<TlsOffloadMode>> {
    let mut m = node.message()?;
    m.unsupported(&["typed_filter_metadata"])?;
    let mut tls_offload = None;
    if let Some(filter_metadata) = m.field("filter_metadata")? {
        for (namespace, value) in filter_metadata.entries()? {
            if namespace == "hoist" {
                tls_offload = hoist_metadata(&value)?;
            } else {
                value.entries()?;
            }
        }
    }
    m.finish()?;
    Ok(tls_offload)
}

fn hoist_metadata(node: &Node) -> Result<Option<TlsOffloadMode>> {
    let mut m = node.message()?;
    let mode = match m.field("tls_offload")? {
        None => None,
        // YAML 1.1 reads a bare `off` as the boolean false.
        Some(n) if n.value() == &serde_json::Value::Bool(false) => Some(TlsOffloadMode::Off),
        Some(n) => match n.str() {
            Ok("auto") => Some(TlsOffloadMode::Auto),
            Ok("off") => Some(TlsOffloadMode::Off),
            Ok("require") => Some(TlsOffloadMode::Require),
            _ => {
                return Err(n.error(format!(
                    "unknown value {}; expected one of auto, off, require",
                    crate::reader::describe(n.value())
                )))
            }
        },
    };
    m.finish()?;
    Ok(mode)
}

fn filter_chain(node: &Node) -> Result<FilterChain> {
    let mut m = node.message()?;
    m.unsupported(&[
        "use_proxy_proto",
        "metadata",
        "transport_socket_connect_timeout",
    ])?;
    let name = m.string("name")?;
    let filter_chain_match = match m.field("filter_chain_match")? {
        Some(n) => chain_match(&n)?,
        None => FilterChainMatch::default(),
    };
    let tls = match m.field("transport_socket")? {
        Some(n) => transport_socket(&n)?,
        None => None,
    };
    let filters = m.list("filters")?;
    let mut hcm = None;
    for item in &filters {
        let mut f = item.message()?;
        match select(&mut f, "network filter", &[HCM])? {
            Slot::Known { config, .. } if hcm.is_none() => {
                // HCM has name_only false, so the config is always there.
                if let Some(typed) = config {
                    hcm = Some(http_connection_manager(typed.body)?);
                }
            }
            Slot::Known { .. } => {
                return Err(item.error(
                    "a filter chain has exactly one network filter, the http_connection_manager",
                ))
            }
            Slot::Unsupported(e) => return Err(e),
        }
        f.finish()?;
    }
    let Some(hcm) = hcm else {
        return Err(m.error(
            "missing required field \"filters\" (one envoy.filters.network.http_connection_manager)",
        ));
    };
    m.finish()?;
    Ok(FilterChain {
        name,
        filter_chain_match,
        tls,
        hcm,
        yaml_path: node.path().to_owned(),
    })
}

fn transport_socket(node: &Node) -> Result<Option<crate::model::DownstreamTlsContext>> {
    super::tls::transport_socket(node, TLS, downstream_tls_context)
}

fn chain_match(node: &Node) -> Result<FilterChainMatch> {
    let mut m = node.message()?;
    m.unsupported(&[
        "destination_port",
        "prefix_ranges",
        "address_suffix",
        "suffix_len",
        "direct_source_prefix_ranges",
        "source_type",
        "source_prefix_ranges",
        "source_ports",
    ])?;
    let mut server_names = Vec::new();
    for item in m.list("server_names")? {
        server_names.push(server_name(&item)?);
    }
    let transport_protocol = match m.field("transport_protocol")? {
        None => None,
        Some(n) => match n.str()? {
            "" => None,
            p @ ("tls" | "raw_buffer") => Some(p.to_owned()),
            other => {
                return Err(n.error(format!(
                    "unknown transport_protocol \"{other}\"; expected tls or raw_buffer"
                )))
            }
        },
    };
    let mut application_protocols = Vec::new();
    for item in m.list("application_protocols")? {
        let p = item.string()?;
        if p.is_empty() || p.len() > 255 {
            return Err(item.error("an ALPN protocol name is 1 to 255 bytes"));
        }
        application_protocols.push(p);
    }
    m.finish()?;
    Ok(FilterChainMatch {
        server_names,
        transport_protocol,
        application_protocols,
    })
}

/// A server name to match SNI against: a host name, or `*.` and a host name.
fn server_name(node: &Node) -> Result<String> {
    let name = node.str()?.to_ascii_lowercase();
    let host = name.strip_prefix("*.").unwrap_or(&name);
    let valid = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
    if !valid {
        return Err(node.error(format!(
            "server name \"{name}\" is not a host name or a \"*.\" wildcard of one"
        )));
    }
    Ok(name)
}

/// Two chains that would match the same connection make the choice ambiguous; Envoy refuses
/// them, and so does hoist. Each chain is expanded into the (server name, transport protocol,
/// ALPN) leaves it matches, as Envoy's matching tree does.
fn check_unique_match(earlier: &[FilterChain], chain: &FilterChain, node: &Node) -> Result<()> {
    let leaves = |m: &FilterChainMatch| {
        let names = if m.server_names.is_empty() {
            vec![String::new()]
        } else {
            m.server_names.clone()
        };
        let alpns = if m.application_protocols.is_empty() {
            vec![String::new()]
        } else {
            m.application_protocols.clone()
        };
        let mut out = Vec::new();
        for n in &names {
            for a in &alpns {
                out.push((n.clone(), m.transport_protocol.clone(), a.clone()));
            }
        }
        out
    };
    let mine = leaves(&chain.filter_chain_match);
    for other in earlier {
        if leaves(&other.filter_chain_match)
            .iter()
            .any(|leaf| mine.contains(leaf))
        {
            return Err(node.error(format!(
                "multiple filter chains with the same matching rules are defined (see {})",
                other.yaml_path
            )));
        }
    }
    Ok(())
}

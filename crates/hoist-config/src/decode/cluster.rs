//! `static_resources.clusters[]` (`envoy.config.cluster.v3.Cluster`): the subset a filter needs
//! and the router need: a name, how to find the endpoints and balance between them, a connect
//! timeout, and optionally TLS (`upstream_tls`).

use std::net::IpAddr;

use super::protocol_options::{
    common_http_protocol_options, typed_extension_protocol_options, ConnectionLimits,
};
use super::upstream_tls::transport_socket;
use crate::model::{
    CircuitBreakers, Cluster, DiscoveryType, DnsLookupFamily, Endpoint, HealthCheck,
    HttpHealthCheck, LbPolicy, OutlierDetection, RetryBudget, UpstreamProtocol,
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_MAGLEV_TABLE_SIZE, DEFAULT_MIN_RING_SIZE,
    DEFAULT_OVERPROVISIONING_FACTOR, DEFAULT_UPSTREAM_IDLE_TIMEOUT, MAX_MAGLEV_TABLE_SIZE,
    MAX_RING_SIZE,
};
use crate::reader::{Message, Node, Result};

/// The cluster types in proto order (`envoy.config.cluster.v3.Cluster.DiscoveryType`).
const DISCOVERY_TYPES: [&str; 5] = ["STATIC", "STRICT_DNS", "LOGICAL_DNS", "EDS", "ORIGINAL_DST"];

/// `envoy.config.cluster.v3.Cluster.LbPolicy` in proto order (4 is reserved).
const LB_POLICIES: [&str; 8] = [
    "ROUND_ROBIN",
    "LEAST_REQUEST",
    "RING_HASH",
    "RANDOM",
    "",
    "MAGLEV",
    "CLUSTER_PROVIDED",
    "LOAD_BALANCING_POLICY_CONFIG",
];

const DNS_FAMILIES: [&str; 5] = ["AUTO", "V4_ONLY", "V6_ONLY", "V4_PREFERRED", "ALL"];

pub(crate) fn clusters(items: &[Node]) -> Result<Vec<Cluster>> {
    let mut out: Vec<Cluster> = Vec::with_capacity(items.len());
    for item in items {
        let c = cluster(item)?;
        if let Some(other) = out.iter().find(|o| o.name == c.name) {
            return Err(item.error(format!(
                "cluster name \"{}\" is already used by {}",
                c.name, other.yaml_path
            )));
        }
        out.push(c);
    }
    Ok(out)
}

fn cluster(node: &Node) -> Result<Cluster> {
    let mut m = node.message()?;
    m.unsupported(&[
        "transport_socket_matches",
        "cluster_type",
        "eds_cluster_config",
        "lb_subset_config",
        "original_dst_lb_config",
        "least_request_lb_config",
        "round_robin_lb_config",
        "common_lb_config",
        "load_balancing_policy",
        "upstream_http_protocol_options",
        "http_protocol_options",
        "http2_protocol_options",
        "dns_refresh_rate",
        "dns_jitter",
        "dns_failure_refresh_rate",
        "respect_dns_ttl",
        "use_tcp_for_dns_lookups",
        "dns_resolution_config",
        "typed_dns_resolver_config",
        "dns_resolvers",
        "wait_for_warm_on_init",
        "cleanup_interval",
        "upstream_bind_config",
        "alt_stat_name",
        "metadata",
        "protocol_selection",
        "upstream_connection_options",
        "close_connections_on_host_health_failure",
        "ignore_health_on_host_removal",
        "filters",
        "lrs_server",
        "lrs_report_endpoint_metrics",
        "track_timeout_budgets",
        "upstream_config",
        "track_cluster_stats",
        "preconnect_policy",
        "connection_pool_per_downstream_connection",
    ])?;
    let yaml_path = m.path().to_owned();
    let name = m.required_string("name")?;
    let discovery = match m.field("type")? {
        None => DiscoveryType::Static,
        Some(n) => match n.enumeration(&DISCOVERY_TYPES)? {
            0 => DiscoveryType::Static,
            1 => DiscoveryType::StrictDns,
            2 => DiscoveryType::LogicalDns,
            _ => {
                return Err(n.error(format!(
                    "cluster type {} is not supported by hoist yet (STATIC, STRICT_DNS, LOGICAL_DNS are)",
                    DISCOVERY_TYPES[n.enumeration(&DISCOVERY_TYPES)?]
                )))
            }
        },
    };
    let per_connection_buffer_limit_bytes = m.u32(
        "per_connection_buffer_limit_bytes",
        super::listener::DEFAULT_BUFFER_LIMIT,
        0..=u32::MAX,
    )?;
    let connect_timeout = match m.opt_duration("connect_timeout")? {
        Some(d) if d.is_zero() => return Err(m.error("connect_timeout must be greater than 0s")),
        Some(d) => d,
        None => DEFAULT_CONNECT_TIMEOUT,
    };
    // Both are checked whatever the policy (Envoy accepts and ignores the other policy's).
    let ring_hash = ring_hash_lb_config(&mut m)?;
    let maglev = maglev_lb_config(&mut m)?;
    let lb_policy = match m.field("lb_policy")? {
        None => LbPolicy::RoundRobin,
        Some(n) => match n.enumeration(&LB_POLICIES)? {
            0 => LbPolicy::RoundRobin,
            1 => LbPolicy::LeastRequest,
            3 => LbPolicy::Random,
            2 => ring_hash,
            5 => maglev,
            i => {
                return Err(n.error(format!(
                    "lb_policy {} is not supported by hoist yet (ROUND_ROBIN, LEAST_REQUEST, RANDOM, RING_HASH, MAGLEV are)",
                    LB_POLICIES.get(i).unwrap_or(&"?")
                )))
            }
        },
    };
    let dns_lookup_family = match m.enumeration("dns_lookup_family", &DNS_FAMILIES)? {
        None | Some(0) => DnsLookupFamily::V6Preferred,
        Some(1) => DnsLookupFamily::V4Only,
        Some(2) => DnsLookupFamily::V6Only,
        _ => DnsLookupFamily::V4Preferred,
    };
    let mut limits = ConnectionLimits {
        idle_timeout: Some(DEFAULT_UPSTREAM_IDLE_TIMEOUT),
        max_requests_per_connection: m
            .opt_u32("max_requests_per_connection", 0..=u32::MAX)?
            .filter(|n| *n > 0),
    };
    let common = m.field("common_http_protocol_options")?;
    if let Some(n) = &common {
        common_http_protocol_options(n, &mut limits)?;
    }
    let protocol = match m.field("typed_extension_protocol_options")? {
        Some(n) => typed_extension_protocol_options(&n, &mut limits, common.is_some())?,
        None => UpstreamProtocol::Http1,
    };
    let ConnectionLimits {
        idle_timeout,
        max_requests_per_connection,
    } = limits;
    let circuit_breakers = match m.field("circuit_breakers")? {
        Some(n) => circuit_breakers(&n)?,
        None => CircuitBreakers::default(),
    };
    let health_check = match m.list("health_checks")?.as_slice() {
        [] => None,
        [one] => Some(health_check(one)?),
        [_, second, ..] => return Err(second.error("hoist supports one health check per cluster")),
    };
    let outlier_detection = m
        .field("outlier_detection")?
        .map(|n| outlier_detection(&n))
        .transpose()?;
    let assignment = m.required("load_assignment")?;
    let (endpoints, overprovisioning_factor) = load_assignment(&assignment, discovery)?;
    let tls = match m.field("transport_socket")? {
        Some(n) => transport_socket(&n)?,
        None => None,
    };
    m.finish()?;
    Ok(Cluster {
        name,
        discovery,
        connect_timeout,
        per_connection_buffer_limit_bytes,
        dns_lookup_family,
        endpoints,
        overprovisioning_factor,
        lb_policy,
        idle_timeout,
        max_requests_per_connection,
        circuit_breakers,
        health_check,
        outlier_detection,
        tls,
        protocol,
        yaml_path,
    })
}

/// `ring_hash_lb_config` of a RING_HASH cluster.
fn ring_hash_lb_config(cluster: &mut Message) -> Result<LbPolicy> {
    let (mut min, mut max) = (DEFAULT_MIN_RING_SIZE, MAX_RING_SIZE);
    if let Some(n) = cluster.field("ring_hash_lb_config")? {
        let mut m = n.message()?;
        m.unsupported(&["hash_balance_factor", "use_hostname_for_hashing"])?;
        if m.enumeration("hash_function", &["XX_HASH", "MURMUR_HASH_2"])? == Some(1) {
            return Err(m.error("hash_function MURMUR_HASH_2 is not supported by hoist yet"));
        }
        let size = |m: &mut Message, name: &str, default: u64| -> Result<u64> {
            match m.field(name)? {
                None => Ok(default),
                Some(n) => match n.u64()? {
                    v @ 1..=MAX_RING_SIZE => Ok(v),
                    v => Err(n.error(format!("{v} is out of range 1..={MAX_RING_SIZE}"))),
                },
            }
        };
        min = size(&mut m, "minimum_ring_size", min)?;
        max = size(&mut m, "maximum_ring_size", max)?;
        if min > max {
            return Err(m.error("minimum_ring_size is greater than maximum_ring_size"));
        }
        m.finish()?;
    }
    Ok(LbPolicy::RingHash {
        min_ring_size: min,
        max_ring_size: max,
    })
}

/// `maglev_lb_config` of a MAGLEV cluster: the table size must be a prime (Envoy's rule).
fn maglev_lb_config(cluster: &mut Message) -> Result<LbPolicy> {
    let mut table_size = DEFAULT_MAGLEV_TABLE_SIZE;
    if let Some(n) = cluster.field("maglev_lb_config")? {
        let mut m = n.message()?;
        m.unsupported(&["use_hostname_for_hashing"])?;
        if let Some(t) = m.field("table_size")? {
            table_size = t.u64()?;
            if table_size > MAX_MAGLEV_TABLE_SIZE || !is_prime(table_size) {
                return Err(t.error(format!(
                    "table_size {table_size} must be a prime number at most {MAX_MAGLEV_TABLE_SIZE}"
                )));
            }
        }
        m.finish()?;
    }
    Ok(LbPolicy::Maglev { table_size })
}

fn is_prime(n: u64) -> bool {
    n >= 2
        && (2..)
            .take_while(|d| d * d <= n)
            .all(|d| !n.is_multiple_of(d))
}

/// `envoy.config.cluster.v3.OutlierDetection`: consecutive 5xx and consecutive gateway
/// failure. Success rate and failure percentage detection are not implemented: their fields
/// are refused (Envoy's success rate detector needs 5 hosts with 100 requests each per
/// interval to act, so configurations that never set them lose nothing below that size).
fn outlier_detection(node: &Node) -> Result<OutlierDetection> {
    let mut m = node.message()?;
    m.unsupported(&[
        "enforcing_success_rate",
        "success_rate_minimum_hosts",
        "success_rate_request_volume",
        "success_rate_stdev_factor",
        "consecutive_local_origin_failure",
        "enforcing_consecutive_local_origin_failure",
        "enforcing_local_origin_success_rate",
        "failure_percentage_threshold",
        "enforcing_failure_percentage",
        "enforcing_failure_percentage_local_origin",
        "failure_percentage_minimum_hosts",
        "failure_percentage_request_volume",
        "max_ejection_time_jitter",
        "monitors",
        "detect_degraded_hosts",
    ])?;
    if let Some(n) = m.field("split_external_local_origin_errors")? {
        if n.bool()? {
            return Err(
                n.error("split_external_local_origin_errors: true is not supported by hoist yet")
            );
        }
    }
    let d = OutlierDetection::default();
    let positive = |m: &mut Message, name: &str, default| -> Result<std::time::Duration> {
        match m.field(name)? {
            None => Ok(default),
            Some(n) => {
                let v = n.duration()?;
                if v.is_zero() {
                    return Err(n.error(format!("{name} must be greater than 0s")));
                }
                Ok(v)
            }
        }
    };
    let interval = positive(&mut m, "interval", d.interval)?;
    let base_ejection_time = positive(&mut m, "base_ejection_time", d.base_ejection_time)?;
    // Envoy: the cap never goes below the base time.
    let max_ejection_time =
        positive(&mut m, "max_ejection_time", d.max_ejection_time)?.max(base_ejection_time);
    let out = OutlierDetection {
        consecutive_5xx: m.u32("consecutive_5xx", d.consecutive_5xx, 0..=u32::MAX)?,
        consecutive_gateway_failure: m.u32(
            "consecutive_gateway_failure",
            d.consecutive_gateway_failure,
            0..=u32::MAX,
        )?,
        enforcing_consecutive_5xx: m.u32(
            "enforcing_consecutive_5xx",
            d.enforcing_consecutive_5xx,
            0..=100,
        )?,
        enforcing_consecutive_gateway_failure: m.u32(
            "enforcing_consecutive_gateway_failure",
            d.enforcing_consecutive_gateway_failure,
            0..=100,
        )?,
        interval,
        base_ejection_time,
        max_ejection_time,
        max_ejection_percent: m.u32("max_ejection_percent", d.max_ejection_percent, 0..=100)?,
        always_eject_one_host: m.bool("always_eject_one_host", d.always_eject_one_host)?,
        successful_active_health_check_uneject_host: m.bool(
            "successful_active_health_check_uneject_host",
            d.successful_active_health_check_uneject_host,
        )?,
    };
    m.finish()?;
    Ok(out)
}

/// `envoy.config.cluster.v3.CircuitBreakers`: the DEFAULT priority's thresholds are the ones
/// hoist applies (routes cannot ask for HIGH); a HIGH entry is checked and kept out of use.
fn circuit_breakers(node: &Node) -> Result<CircuitBreakers> {
    let mut m = node.message()?;
    m.unsupported(&["per_host_thresholds"])?;
    let mut out = CircuitBreakers::default();
    for t in m.list("thresholds")? {
        let mut th = t.message()?;
        th.unsupported(&["track_remaining", "max_connection_pools"])?;
        let high = th.enumeration("priority", &["DEFAULT", "HIGH"])? == Some(1);
        let d = CircuitBreakers::default();
        let b = CircuitBreakers {
            max_connections: th.u32("max_connections", d.max_connections, 0..=u32::MAX)?,
            max_pending_requests: th.u32(
                "max_pending_requests",
                d.max_pending_requests,
                0..=u32::MAX,
            )?,
            max_requests: th.u32("max_requests", d.max_requests, 0..=u32::MAX)?,
            max_retries: th.u32("max_retries", d.max_retries, 0..=u32::MAX)?,
            retry_budget: th
                .field("retry_budget")?
                .map(|n| retry_budget(&n))
                .transpose()?,
        };
        th.finish()?;
        if !high {
            out = b;
        }
    }
    m.finish()?;
    Ok(out)
}

/// `CircuitBreakers.Thresholds.RetryBudget`: `budget_percent` (an `envoy.type.v3.Percent`,
/// 0..=100) and `min_retry_concurrency`.
fn retry_budget(node: &Node) -> Result<RetryBudget> {
    let mut m = node.message()?;
    let d = RetryBudget::default();
    let budget_basis_points = match m.field("budget_percent")? {
        None => d.budget_basis_points,
        Some(n) => {
            let mut p = n.message()?;
            let v = match p.field("value")? {
                None => 0.0,
                Some(v) => v
                    .value()
                    .as_f64()
                    .ok_or_else(|| v.error("expected a number"))?,
            };
            p.finish()?;
            if !(0.0..=100.0).contains(&v) {
                return Err(n.error(format!("{v} is not a percentage (0..=100)")));
            }
            (v * 100.0).round() as u32
        }
    };
    let min_retry_concurrency = m.u32(
        "min_retry_concurrency",
        d.min_retry_concurrency,
        0..=u32::MAX,
    )?;
    m.finish()?;
    Ok(RetryBudget {
        budget_basis_points,
        min_retry_concurrency,
    })
}

fn health_check(node: &Node) -> Result<HealthCheck> {
    let mut m = node.message()?;
    m.unsupported(&[
        "initial_jitter",
        "interval_jitter",
        "interval_jitter_percent",
        "alt_port",
        "reuse_connection",
        "no_traffic_interval",
        "no_traffic_healthy_interval",
        "unhealthy_interval",
        "unhealthy_edge_interval",
        "healthy_edge_interval",
        "event_log_path",
        "event_logger",
        "event_service",
        "always_log_health_check_failures",
        "always_log_health_check_success",
        "tls_options",
        "transport_socket_match_criteria",
        "grpc_health_check",
        "custom_health_check",
    ])?;
    let positive = |m: &mut Message, name: &str| -> Result<std::time::Duration> {
        let n = m.required(name)?;
        let d = n.duration()?;
        if d.is_zero() {
            return Err(n.error(format!("{name} must be greater than 0s")));
        }
        Ok(d)
    };
    let timeout = positive(&mut m, "timeout")?;
    let interval = positive(&mut m, "interval")?;
    let unhealthy_threshold = m.required("unhealthy_threshold")?.u32_in(1..=u32::MAX)?;
    let healthy_threshold = m.required("healthy_threshold")?.u32_in(1..=u32::MAX)?;
    let http = match m.oneof(&["http_health_check", "tcp_health_check"], true)? {
        Some("http_health_check") => {
            let mut h = m.required("http_health_check")?.message()?;
            h.unsupported(&[
                "send",
                "receive",
                "response_buffer_size",
                "request_headers_to_add",
                "request_headers_to_remove",
                "retriable_statuses",
                "codec_client_type",
                "service_name_matcher",
                "method",
            ])?;
            let path = h.required_string("path")?;
            if !path.starts_with('/') || path.bytes().any(|b| !b.is_ascii_graphic()) {
                return Err(h.error(format!("path \"{path}\" is not an origin-form path")));
            }
            let host = h.opt_string("host")?.filter(|s| !s.is_empty());
            let mut expected_statuses = Vec::new();
            for r in h.list("expected_statuses")? {
                let mut rm = r.message()?;
                let start = rm.required("start")?.u32_in(100..=599)?;
                let end = rm.required("end")?.u32_in(101..=600)?;
                rm.finish()?;
                if end <= start {
                    return Err(r.error("end must be greater than start"));
                }
                expected_statuses.push((start as u16, end as u16));
            }
            if expected_statuses.is_empty() {
                expected_statuses.push((200, 201));
            }
            h.finish()?;
            Some(HttpHealthCheck {
                path,
                host,
                expected_statuses,
            })
        }
        _ => {
            let mut t = m.required("tcp_health_check")?.message()?;
            t.unsupported(&["send", "receive", "proxy_protocol_config"])?;
            t.finish()?;
            None
        }
    };
    m.finish()?;
    Ok(HealthCheck {
        timeout,
        interval,
        unhealthy_threshold,
        healthy_threshold,
        http,
    })
}

/// `envoy.config.endpoint.v3.ClusterLoadAssignment`: the endpoints, in order, with their
/// priorities, and the overprovisioning factor.
fn load_assignment(node: &Node, discovery: DiscoveryType) -> Result<(Vec<Endpoint>, u32)> {
    let mut m = node.message()?;
    m.unsupported(&["named_endpoints"])?;
    m.string("cluster_name")?;
    let mut overprovisioning_factor = DEFAULT_OVERPROVISIONING_FACTOR;
    if let Some(p) = m.field("policy")? {
        let mut p = p.message()?;
        p.unsupported(&[
            "drop_overloads",
            "endpoint_stale_after",
            "weighted_priority_health",
        ])?;
        overprovisioning_factor = p.u32(
            "overprovisioning_factor",
            DEFAULT_OVERPROVISIONING_FACTOR,
            1..=u32::MAX,
        )?;
        p.finish()?;
    }
    let mut endpoints = Vec::new();
    let mut priorities = Vec::new();
    for locality in m.list("endpoints")? {
        let mut l = locality.message()?;
        l.unsupported(&[
            "locality",
            "metadata",
            "load_balancing_weight",
            "proximity",
            "leds_cluster_locality_config",
        ])?;
        let priority = l.u32("priority", 0, 0..=u32::MAX)?;
        priorities.push(priority);
        for lb in l.list("lb_endpoints")? {
            let mut e = lb.message()?;
            e.unsupported(&["endpoint_name", "health_status", "metadata"])?;
            let weight = e.u32("load_balancing_weight", 1, 1..=u32::MAX)?;
            let mut endpoint = e.required("endpoint")?.message()?;
            endpoint.unsupported(&["health_check_config", "hostname", "additional_addresses"])?;
            let mut address = socket_address(&endpoint.required("address")?, discovery)?;
            address.weight = weight;
            address.priority = priority;
            endpoints.push(address);
            endpoint.finish()?;
            e.finish()?;
        }
        l.finish()?;
    }
    if endpoints.is_empty() {
        return Err(m.error("no endpoint: a cluster needs at least one"));
    }
    // Envoy: priorities run from 0 without a gap.
    priorities.sort_unstable();
    priorities.dedup();
    if let Some(missing) = (0..).zip(&priorities).find(|(want, got)| *want != **got) {
        return Err(m.error(format!(
            "endpoints skip priority {}: priorities must run from 0 without a gap",
            missing.0
        )));
    }
    m.finish()?;
    Ok((endpoints, overprovisioning_factor))
}

/// An `Address` with a TCP `socket_address`; a host name is allowed for the DNS types.
fn socket_address(node: &Node, discovery: DiscoveryType) -> Result<Endpoint> {
    let mut m = node.message()?;
    m.unsupported(&["pipe", "envoy_internal_address"])?;
    let mut s = m.required("socket_address")?.message()?;
    m.finish()?;
    s.unsupported(&["named_port", "resolver_name", "network_namespace_filepath"])?;
    if let Some(protocol) = s.field("protocol")? {
        if protocol.enumeration(&["TCP", "UDP"])? != 0 {
            return Err(protocol.error("protocol UDP is not supported by hoist"));
        }
    }
    let addr_node = s.required("address")?;
    let text = addr_node.string()?;
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(&text)
        .to_owned();
    let is_ip = bare.parse::<IpAddr>().is_ok();
    if discovery == DiscoveryType::Static && !is_ip {
        return Err(addr_node.error(format!(
            "address \"{text}\" is not an IP address (a STATIC cluster needs IP addresses; use type STRICT_DNS for host names)"
        )));
    }
    if !is_ip && !valid_host_name(&bare) {
        return Err(addr_node.error(format!("\"{text}\" is not a valid host name")));
    }
    let port_node = s.required("port_value")?;
    let port = port_node.u32_in(1..=65535)?;
    s.bool("ipv4_compat", false)?;
    s.finish()?;
    Ok(Endpoint {
        host: bare,
        port: u16::try_from(port).map_err(|_| port_node.error("port out of range"))?,
        weight: 1,
        priority: 0,
    })
}

fn valid_host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

#[cfg(test)]
#[path = "cluster_tests.rs"]
mod tests;

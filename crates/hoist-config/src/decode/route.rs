//! `envoy.config.route.v3`: the route configuration, virtual hosts, routes and their actions.

use std::collections::BTreeMap;

use super::core::data_source;
use super::headers::{header_mutations, header_value};
use super::http_filters::HttpFilters;
use super::rate_limit::rate_limit;
use super::route_match::route_match;
use crate::extension::TypedConfig;
use crate::model::{
    DirectResponse, RawTypedConfig, Redirect, RedirectPath, Route, RouteAction, RouteConfiguration,
    VirtualHost, DEFAULT_MAX_DIRECT_RESPONSE_BODY,
};
use crate::reader::{Message, Node, Result};

/// What routes need from the connection manager around them.
struct Context<'a> {
    filters: &'a HttpFilters,
    max_body: u32,
}

pub(crate) fn route_configuration(
    node: &Node,
    filters: &HttpFilters,
) -> Result<RouteConfiguration> {
    let mut m = node.message()?;
    m.unsupported(&[
        "vhds",
        "internal_only_headers",
        "most_specific_header_mutations_wins",
        "validate_clusters",
        "cluster_specifier_plugins",
        "request_mirror_policies",
        "ignore_port_in_host_matching",
        "vhost_header",
        "ignore_path_parameters_in_path_matching",
        "typed_per_filter_config",
        "metadata",
    ])?;
    let name = m.string("name")?;
    let max_direct_response_body_size_bytes = m.u32(
        "max_direct_response_body_size_bytes",
        DEFAULT_MAX_DIRECT_RESPONSE_BODY,
        0..=u32::MAX,
    )?;
    let headers = header_mutations(&mut m)?;
    let cx = Context {
        filters,
        max_body: max_direct_response_body_size_bytes,
    };
    let mut virtual_hosts: Vec<VirtualHost> = Vec::new();
    for item in m.list("virtual_hosts")? {
        let vh = virtual_host(&item, &cx)?;
        for (i, domain) in vh.domains.iter().enumerate() {
            if let Some(other) = virtual_hosts.iter().find(|o| o.domains.contains(domain)) {
                return Err(crate::ConfigError::new(
                    format!("{}.domains[{i}]", item.path()),
                    format!(
                        "domain \"{domain}\" is already used by virtual host \"{}\"",
                        other.name
                    ),
                ));
            }
        }
        virtual_hosts.push(vh);
    }
    m.finish()?;
    Ok(RouteConfiguration {
        name,
        virtual_hosts,
        max_direct_response_body_size_bytes,
        headers,
    })
}

fn virtual_host(node: &Node, cx: &Context) -> Result<VirtualHost> {
    let mut m = node.message()?;
    m.unsupported(&[
        "matcher",
        "virtual_clusters",
        "cors",
        "retry_policy",
        "retry_policy_typed_config",
        "hedge_policy",
        "include_is_timeout_retry_header",
        "per_request_buffer_limit_bytes",
        "request_body_buffer_limit",
        "request_mirror_policies",
        "metadata",
    ])?;
    let name = m.required_string("name")?;
    let domain_nodes = m.list("domains")?;
    if domain_nodes.is_empty() {
        return Err(m.error("missing required field \"domains\""));
    }
    let mut domains: Vec<String> = Vec::with_capacity(domain_nodes.len());
    for n in &domain_nodes {
        let d = domain(n)?;
        if domains.contains(&d) {
            return Err(n.error(format!("domain \"{d}\" is listed twice")));
        }
        domains.push(d);
    }
    let mut routes = m
        .list("routes")?
        .iter()
        .map(|n| route(n, cx))
        .collect::<Result<Vec<_>>>()?;
    let attempt_count = m.bool("include_request_attempt_count", false)?;
    let attempt_count_in_response = m.bool("include_attempt_count_in_response", false)?;
    for r in &mut routes {
        if let RouteAction::Route(a) = &mut r.action {
            a.include_attempt_count = attempt_count;
            a.include_attempt_count_in_response = attempt_count_in_response;
        }
    }
    let headers = header_mutations(&mut m)?;
    let typed_per_filter_config = typed_per_filter_config(&mut m, cx.filters)?;
    let rate_limits = m
        .list("rate_limits")?
        .iter()
        .map(rate_limit)
        .collect::<Result<Vec<_>>>()?;
    // EXTERNAL_ONLY is ALL for hoist: it has no notion of internal requests.
    let require_tls = m
        .enumeration("require_tls", &["NONE", "EXTERNAL_ONLY", "ALL"])?
        .is_some_and(|i| i > 0);
    m.finish()?;
    Ok(VirtualHost {
        name,
        domains,
        routes,
        headers,
        typed_per_filter_config,
        require_tls,
        rate_limits,
    })
}

/// A virtual host domain: lower-cased; `*` alone, or one `*` as its first or last character.
fn domain(node: &Node) -> Result<String> {
    let d = node.str()?.to_ascii_lowercase();
    let stars = d.matches('*').count();
    let wildcard_ok = stars == 0 || (stars == 1 && (d.starts_with('*') || d.ends_with('*')));
    if d.is_empty() || !wildcard_ok || d.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(node.error(format!(
            "domain \"{d}\" is not valid: use a host name (with an optional :port), \"*\", or one \"*\" at its start or end"
        )));
    }
    Ok(d)
}

fn route(node: &Node, cx: &Context) -> Result<Route> {
    let mut m = node.message()?;
    m.unsupported(&[
        "metadata",
        "decorator",
        "tracing",
        "per_request_buffer_limit_bytes",
        "stat_prefix",
        "request_body_buffer_limit",
    ])?;
    let name = m.string("name")?;
    let route_match = route_match(&m.required("match")?)?;
    for other in ["filter_action", "non_forwarding_action"] {
        if m.has(other) {
            return Err(m.error(format!(
                "route action \"{other}\" is not supported by hoist yet"
            )));
        }
    }
    let action = match m.oneof(&["route", "redirect", "direct_response"], true)? {
        Some("direct_response") => {
            RouteAction::DirectResponse(direct_response(&m.required("direct_response")?, cx)?)
        }
        Some("redirect") => RouteAction::Redirect(redirect(&m.required("redirect")?)?),
        _ => RouteAction::Route(super::forward::forward_action(&m.required("route")?)?),
    };
    let headers = header_mutations(&mut m)?;
    let typed_per_filter_config = typed_per_filter_config(&mut m, cx.filters)?;
    m.finish()?;
    Ok(Route {
        name,
        route_match,
        action,
        headers,
        typed_per_filter_config,
        yaml_path: node.path().to_owned(),
    })
}

fn direct_response(node: &Node, cx: &Context) -> Result<DirectResponse> {
    let mut m = node.message()?;
    m.unsupported(&["body_format"])?;
    let status = m.required("status")?.u32_in(200..=599)?;
    let body = match m.field("body")? {
        None => None,
        Some(n) => {
            let body = data_source(&n)?;
            if body.len() > u64::from(cx.max_body) {
                return Err(n.error(format!(
                    "response body size is {} bytes; maximum is {} (raise route_config.max_direct_response_body_size_bytes)",
                    body.len(),
                    cx.max_body
                )));
            }
            Some(body)
        }
    };
    m.finish()?;
    Ok(DirectResponse {
        // The range check above makes this lossless.
        status: u16::try_from(status).unwrap_or(500),
        body,
    })
}

fn redirect(node: &Node) -> Result<Redirect> {
    let mut m = node.message()?;
    m.unsupported(&["regex_rewrite"])?;
    let scheme = match m.oneof(&["https_redirect", "scheme_redirect"], false)? {
        Some("https_redirect") => m.bool("https_redirect", false)?.then(|| "https".to_owned()),
        Some(_) => {
            let n = m.required("scheme_redirect")?;
            let s = n.string()?.to_ascii_lowercase();
            let valid = s.starts_with(|c: char| c.is_ascii_alphabetic())
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c));
            if !valid {
                return Err(n.error(format!("scheme_redirect \"{s}\" is not a URI scheme")));
            }
            Some(s)
        }
        None => None,
    };
    let host = match m.field("host_redirect")? {
        Some(n) => Some(header_value(&n)?).filter(|h| !h.is_empty()),
        None => None,
    };
    let port = m
        .opt_u32("port_redirect", 0..=65535)?
        .and_then(|p| u16::try_from(p).ok())
        .filter(|p| *p != 0);
    let path = match m.oneof(&["path_redirect", "prefix_rewrite"], false)? {
        Some("path_redirect") => RedirectPath::Path(header_value(&m.required("path_redirect")?)?),
        Some(_) => RedirectPath::PrefixRewrite(header_value(&m.required("prefix_rewrite")?)?),
        None => RedirectPath::Keep,
    };
    let response_code = match m.enumeration(
        "response_code",
        &[
            "MOVED_PERMANENTLY",
            "FOUND",
            "SEE_OTHER",
            "TEMPORARY_REDIRECT",
            "PERMANENT_REDIRECT",
        ],
    )? {
        None | Some(0) => 301,
        Some(1) => 302,
        Some(2) => 303,
        Some(3) => 307,
        Some(_) => 308,
    };
    let strip_query = m.bool("strip_query", false)?;
    m.finish()?;
    Ok(Redirect {
        scheme,
        host,
        port,
        path,
        response_code,
        strip_query,
    })
}

/// `typed_per_filter_config`: filter name -> config, kept raw for the filter to decode. Each
/// key must name a filter of the connection manager.
fn typed_per_filter_config(
    m: &mut Message,
    filters: &HttpFilters,
) -> Result<BTreeMap<String, RawTypedConfig>> {
    let mut out = BTreeMap::new();
    let Some(node) = m.field("typed_per_filter_config")? else {
        return Ok(out);
    };
    for (key, value) in node.entries()? {
        if key == filters.router_name {
            return Err(value.error("the router filter takes no per-route configuration"));
        }
        if !filters.filters.iter().any(|f| f.name == key) {
            return Err(value.error(format!(
                "no HTTP filter named \"{key}\" in the connection manager's http_filters"
            )));
        }
        out.insert(key.to_owned(), TypedConfig::read(&value)?.into_raw());
    }
    Ok(out)
}

//! `envoy.config.route.v3.RouteAction` (a route's `route`): which cluster a request is
//! forwarded to and how the request is rewritten on its way. Fields hoist does not implement
//! are refused with their path.

use super::headers::header_value;
use std::time::Duration;

use crate::model::{
    Cluster, ClusterSpecifier, ForwardAction, HashPolicy, HashSource, HostRewrite, Listener,
    MirrorPolicy, RegexRewrite, RetryPolicy, RouteAction, DEFAULT_ROUTE_TIMEOUT,
};
use crate::reader::{Node, Result};
use crate::ConfigError;

/// Envoy's `validate_clusters` for static route configurations: every cluster a route names
/// must exist (`cluster_header` is resolved per request and answers 503 when it does not).
pub(crate) fn check_clusters(listeners: &[Listener], clusters: &[Cluster]) -> Result<()> {
    let known = |name: &str| clusters.iter().any(|c| c.name == name);
    let chains = listeners
        .iter()
        .flat_map(|l| l.filter_chains.iter().chain(l.default_filter_chain.iter()));
    for chain in chains {
        let routes = chain
            .hcm
            .route_config
            .virtual_hosts
            .iter()
            .flat_map(|vh| vh.routes.iter());
        for route in routes {
            let RouteAction::Route(action) = &route.action else {
                continue;
            };
            let missing = match &action.cluster {
                ClusterSpecifier::Cluster(name) => {
                    (!known(name)).then(|| ("cluster".to_owned(), name))
                }
                ClusterSpecifier::Weighted(list) => list
                    .iter()
                    .enumerate()
                    .find(|(_, (name, _))| !known(name))
                    .map(|(i, (name, _))| (format!("weighted_clusters.clusters[{i}].name"), name)),
                ClusterSpecifier::Header(_) => None,
            };
            let missing = missing.or_else(|| {
                action
                    .request_mirror_policies
                    .iter()
                    .enumerate()
                    .find(|(_, p)| !known(&p.cluster))
                    .map(|(i, p)| (format!("request_mirror_policies[{i}].cluster"), &p.cluster))
            });
            if let Some((field, name)) = missing {
                return Err(ConfigError::new(
                    format!("{}.route.{field}", route.yaml_path),
                    format!("unknown cluster \"{name}\" (not in static_resources.clusters)"),
                ));
            }
        }
    }
    Ok(())
}

pub(crate) fn forward_action(node: &Node) -> Result<ForwardAction> {
    let mut m = node.message()?;
    m.unsupported(&[
        "cluster_specifier_plugin",
        "inline_cluster_specifier_plugin",
        "cluster_not_found_response_code",
        "metadata_match",
        "path_rewrite_policy",
        "path_mutation",
        "append_x_forwarded_host",
        "host_rewrite_header",
        "host_rewrite_path_regex",
        "early_data_policy",
        "retry_policy_typed_config",
        "priority",
        "rate_limits",
        "include_vh_rate_limits",
        "cors",
        "max_grpc_timeout",
        "grpc_timeout_offset",
        "upgrade_configs",
        "internal_redirect_policy",
        "internal_redirect_action",
        "max_internal_redirects",
        "hedge_policy",
        "max_stream_duration",
    ])?;
    let cluster = match m.oneof(&["cluster", "weighted_clusters", "cluster_header"], true)? {
        Some("cluster") => {
            let name = m.required_string("cluster")?;
            if name.is_empty() {
                return Err(m.error("cluster must not be empty"));
            }
            ClusterSpecifier::Cluster(name)
        }
        Some("weighted_clusters") => weighted_clusters(&m.required("weighted_clusters")?)?,
        _ => {
            let n = m.required("cluster_header")?;
            let name = n.string()?.to_ascii_lowercase();
            if !is_header_name(&name) {
                return Err(n.error(format!("\"{name}\" is not a header name")));
            }
            ClusterSpecifier::Header(name)
        }
    };
    let regex_rewrite = match m.field("regex_rewrite")? {
        Some(n) if m.has("prefix_rewrite") => {
            return Err(n.error("only one of prefix_rewrite and regex_rewrite may be set"))
        }
        Some(n) => Some(Box::new(regex_rewrite(&n)?)),
        None => None,
    };
    let prefix_rewrite = match m.field("prefix_rewrite")? {
        Some(n) => Some(header_value(&n)?),
        None => None,
    };
    let host_rewrite = match m.oneof(&["host_rewrite_literal", "auto_host_rewrite"], false)? {
        Some("host_rewrite_literal") => {
            let n = m.required("host_rewrite_literal")?;
            let host = header_value(&n)?;
            if host.is_empty() {
                return Err(n.error("host_rewrite_literal must not be empty"));
            }
            HostRewrite::Literal(host)
        }
        Some(_) => {
            if m.bool("auto_host_rewrite", false)? {
                HostRewrite::Auto
            } else {
                HostRewrite::Keep
            }
        }
        None => HostRewrite::Keep,
    };
    let retry_policy = m
        .field("retry_policy")?
        .map(|n| retry_policy(&n).map(Box::new))
        .transpose()?;
    let hash_policy = m
        .list("hash_policy")?
        .iter()
        .map(hash_policy)
        .collect::<Result<Vec<_>>>()?;
    let idle_timeout = m.opt_duration("idle_timeout")?;
    let request_mirror_policies = m
        .list("request_mirror_policies")?
        .iter()
        .map(mirror_policy)
        .collect::<Result<Vec<_>>>()?;
    let timeout = match m.opt_duration("timeout")? {
        None => Some(DEFAULT_ROUTE_TIMEOUT),
        Some(d) if d.is_zero() => None,
        Some(d) => Some(d),
    };
    m.finish()?;
    Ok(ForwardAction {
        cluster,
        prefix_rewrite,
        host_rewrite,
        timeout,
        retry_policy,
        hash_policy,
        regex_rewrite,
        idle_timeout,
        request_mirror_policies,
        include_attempt_count: false,
        include_attempt_count_in_response: false,
    })
}

/// `RegexMatchAndSubstitute`: `pattern` (a RegexMatcher, unanchored here: every match is
/// replaced, as RE2's GlobalReplace) and `substitution` (`\1`..`\9` insert groups).
fn regex_rewrite(node: &Node) -> Result<RegexRewrite> {
    let mut m = node.message()?;
    let mut p = m.required("pattern")?.message()?;
    if let Some(engine) = p.field("google_re2")? {
        let mut e = engine.message()?;
        e.unsupported(&["max_program_size"])?;
        e.finish()?;
    }
    let regex_node = p.required("regex")?;
    let pattern = regex_node.string()?;
    if pattern.is_empty() {
        return Err(regex_node.error("must not be empty"));
    }
    p.finish()?;
    let compiled = regex::RegexBuilder::new(&pattern)
        .size_limit(super::route_match::REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| {
            regex_node.error(format!(
                "invalid regex \"{pattern}\": {}",
                super::route_match::regex_reason(&e)
            ))
        })?;
    let sub_node = m.required("substitution")?;
    let substitution = re2_substitution(&sub_node.string()?, compiled.captures_len())
        .map_err(|e| sub_node.error(e))?;
    m.finish()?;
    Ok(RegexRewrite {
        pattern: compiled,
        substitution,
    })
}

/// RE2's rewrite string in the regex crate's syntax: `\N` a group (which must exist), `\\` a
/// backslash; `$` is literal in RE2, so it is escaped.
fn re2_substitution(s: &str, groups: usize) -> std::result::Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\\') => out.push('\\'),
                Some(d) if d.is_ascii_digit() => {
                    let n = d as usize - '0' as usize;
                    if n >= groups {
                        return Err(format!("\\{n} names a group the pattern does not have"));
                    }
                    out.push_str(&format!("${{{n}}}"));
                }
                _ => return Err("a backslash must be followed by a digit or a backslash".into()),
            },
            '$' => out.push_str("$$"),
            c => out.push(c),
        }
    }
    Ok(out)
}
/// `RouteAction.RequestMirrorPolicy`: `cluster` (`cluster_header` not supported),
/// `runtime_fraction` (its default_value; there is no runtime to override it),
/// `disable_shadow_host_suffix_append`.
fn mirror_policy(node: &Node) -> Result<MirrorPolicy> {
    let mut m = node.message()?;
    m.unsupported(&["cluster_header", "trace_sampled"])?;
    let cluster = m.required_string("cluster")?;
    if cluster.is_empty() {
        return Err(m.error("cluster must not be empty"));
    }
    let mut parts_per_million = 1_000_000;
    if let Some(f) = m.field("runtime_fraction")? {
        let mut f = f.message()?;
        f.string("runtime_key")?;
        if let Some(d) = f.field("default_value")? {
            let mut d = d.message()?;
            let numerator = u64::from(d.u32("numerator", 0, 0..=u32::MAX)?);
            let per = match d.enumeration("denominator", &["HUNDRED", "TEN_THOUSAND", "MILLION"])? {
                None | Some(0) => 10_000,
                Some(1) => 100,
                _ => 1,
            };
            // Envoy caps a numerator above its denominator at 100 %.
            parts_per_million = (numerator * per).min(1_000_000) as u32;
            d.finish()?;
        }
        f.finish()?;
    }
    let keep_host = m.bool("disable_shadow_host_suffix_append", false)?;
    m.finish()?;
    Ok(MirrorPolicy {
        cluster,
        parts_per_million,
        keep_host,
    })
}

/// `RouteAction.HashPolicy`: one source of the request's hash.
fn hash_policy(node: &Node) -> Result<HashPolicy> {
    let mut m = node.message()?;
    m.unsupported(&["filter_state"])?;
    let which = m.oneof(
        &[
            "header",
            "cookie",
            "connection_properties",
            "query_parameter",
        ],
        true,
    )?;
    let source = match which {
        Some("header") => {
            let mut h = m.required("header")?.message()?;
            h.unsupported(&["regex_rewrite"])?;
            let n = h.required("header_name")?;
            let name = n.string()?.to_ascii_lowercase();
            let bare = name.strip_prefix(':').unwrap_or(&name);
            if !is_header_name(bare) {
                return Err(n.error(format!("\"{name}\" is not a header name")));
            }
            h.finish()?;
            HashSource::Header(name)
        }
        Some("cookie") => {
            let mut c = m.required("cookie")?.message()?;
            c.unsupported(&["ttl", "path", "attributes"])?;
            let name = c.required_string("name")?;
            if name.is_empty() {
                return Err(c.error("name must not be empty"));
            }
            c.finish()?;
            HashSource::Cookie(name)
        }
        Some("connection_properties") => {
            let mut c = m.required("connection_properties")?.message()?;
            let on = c.bool("source_ip", false)?;
            c.finish()?;
            if !on {
                return Err(m.error("connection_properties hashes nothing without source_ip: true"));
            }
            HashSource::SourceIp
        }
        _ => {
            let mut q = m.required("query_parameter")?.message()?;
            let name = q.required_string("name")?;
            if name.is_empty() {
                return Err(q.error("name must not be empty"));
            }
            q.finish()?;
            HashSource::QueryParameter(name)
        }
    };
    let terminal = m.bool("terminal", false)?;
    m.finish()?;
    Ok(HashPolicy { source, terminal })
}

const RETRY_ON: [&str; 5] = [
    "5xx",
    "gateway-error",
    "connect-failure",
    "reset",
    "retriable-status-codes",
];

fn retry_policy(node: &Node) -> Result<RetryPolicy> {
    let mut m = node.message()?;
    m.unsupported(&[
        "retry_host_predicate",
        "retry_priority",
        "host_selection_retry_max_attempts",
        "retriable_headers",
        "retriable_request_headers",
        "rate_limited_retry_back_off",
        "retry_options_predicates",
        "per_try_idle_timeout",
    ])?;
    let mut p = RetryPolicy {
        on_5xx: false,
        on_gateway_error: false,
        on_connect_failure: false,
        on_reset: false,
        on_retriable_status_codes: false,
        num_retries: 1,
        per_try_timeout: None,
        retriable_status_codes: Vec::new(),
        base_interval: Duration::from_millis(25),
        max_interval: Duration::from_millis(250),
    };
    if let Some(n) = m.field("retry_on")? {
        for item in n
            .string()?
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            match RETRY_ON.iter().position(|c| *c == item) {
                Some(0) => p.on_5xx = true,
                Some(1) => p.on_gateway_error = true,
                Some(2) => p.on_connect_failure = true,
                Some(3) => p.on_reset = true,
                Some(_) => p.on_retriable_status_codes = true,
                None => {
                    return Err(n.error(format!(
                        "retry_on \"{item}\" is not supported by hoist yet ({} are)",
                        RETRY_ON.join(", ")
                    )))
                }
            }
        }
    }
    p.num_retries = m.u32("num_retries", 1, 0..=u32::MAX)?;
    p.per_try_timeout = m.opt_duration("per_try_timeout")?.filter(|d| !d.is_zero());
    for n in m.list("retriable_status_codes")? {
        let code = n.u32_in(100..=599)?;
        p.retriable_status_codes
            .push(u16::try_from(code).unwrap_or(0));
    }
    if let Some(n) = m.field("retry_back_off")? {
        let mut b = n.message()?;
        let base = b.required("base_interval")?.duration()?;
        if base.is_zero() {
            return Err(b.error("base_interval must be greater than 0"));
        }
        let max = b.opt_duration("max_interval")?.unwrap_or(base * 10);
        if max < base {
            return Err(b.error("max_interval must not be less than base_interval"));
        }
        b.finish()?;
        p.base_interval = base;
        p.max_interval = max;
    }
    m.finish()?;
    Ok(p)
}

fn weighted_clusters(node: &Node) -> Result<ClusterSpecifier> {
    let mut m = node.message()?;
    m.unsupported(&[
        "runtime_key_prefix",
        "header_name",
        "random_value_specifier",
    ])?;
    // Deprecated in v3 and ignored by Envoy when absent; the weights' sum is what counts.
    m.opt_u32("total_weight", 1..=u32::MAX)?;
    let mut clusters = Vec::new();
    let mut total: u64 = 0;
    for item in m.list("clusters")? {
        let mut c = item.message()?;
        c.unsupported(&[
            "cluster_header",
            "metadata_match",
            "request_headers_to_add",
            "request_headers_to_remove",
            "response_headers_to_add",
            "response_headers_to_remove",
            "typed_per_filter_config",
            "host_rewrite_literal",
        ])?;
        let name = c.required_string("name")?;
        if name.is_empty() {
            return Err(c.error("name must not be empty"));
        }
        let weight = c.u32("weight", 0, 0..=u32::MAX)?;
        total += u64::from(weight);
        c.finish()?;
        clusters.push((name, weight));
    }
    if clusters.is_empty() {
        return Err(m.error("weighted_clusters needs at least one cluster"));
    }
    if total == 0 {
        return Err(m.error("the sum of the weights must be greater than 0"));
    }
    if total > u64::from(u32::MAX) {
        return Err(m.error("the sum of the weights must fit in 32 bits"));
    }
    m.finish()?;
    Ok(ClusterSpecifier::Weighted(clusters))
}

/// An RFC 9110 token (or a pseudo-header such as `:authority`).
fn is_header_name(name: &str) -> bool {
    let bare = name.strip_prefix(':').unwrap_or(name);
    !bare.is_empty()
        && bare
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(v: serde_json::Value) -> std::result::Result<ForwardAction, String> {
        forward_action(&Node::new(&v, "route")).map_err(|e| e.to_string())
    }

    #[test]
    fn cluster_with_defaults() {
        let a = decode(json!({"cluster": "web"})).unwrap();
        assert_eq!(a.cluster, ClusterSpecifier::Cluster("web".into()));
        assert_eq!(a.timeout, Some(DEFAULT_ROUTE_TIMEOUT));
        assert_eq!(a.host_rewrite, HostRewrite::Keep);
        assert!(a.prefix_rewrite.is_none());
    }

    #[test]
    fn rewrites_and_timeouts() {
        let a = decode(
            json!({"cluster_header": "X-Cluster", "prefix_rewrite": "/v2/",
            "host_rewrite_literal": "api.internal", "timeout": "0s"}),
        )
        .unwrap();
        assert_eq!(a.cluster, ClusterSpecifier::Header("x-cluster".into()));
        assert_eq!(a.prefix_rewrite.as_deref(), Some("/v2/"));
        assert_eq!(a.host_rewrite, HostRewrite::Literal("api.internal".into()));
        assert_eq!(a.timeout, None);
        let a =
            decode(json!({"cluster": "a", "auto_host_rewrite": true, "timeout": "2.5s"})).unwrap();
        assert_eq!(a.host_rewrite, HostRewrite::Auto);
        assert_eq!(a.timeout, Some(Duration::from_millis(2500)));
    }

    #[test]
    fn weighted_clusters_need_weight() {
        let a = decode(json!({"weighted_clusters": {"clusters": [
            {"name": "a", "weight": 1}, {"name": "b", "weight": 3}]}}))
        .unwrap();
        assert_eq!(
            a.cluster,
            ClusterSpecifier::Weighted(vec![("a".into(), 1), ("b".into(), 3)])
        );
        let err = decode(json!({"weighted_clusters": {"clusters": [{"name": "a"}]}})).unwrap_err();
        assert!(err.contains("sum of the weights"), "{err}");
    }

    #[test]
    fn mirror_policies_and_their_fraction() {
        let a = decode(json!({"cluster": "a", "request_mirror_policies": [
            {"cluster": "shadow"},
            {"cluster": "s2", "disable_shadow_host_suffix_append": true,
             "runtime_fraction": {"default_value": {"numerator": 25, "denominator": "TEN_THOUSAND"},
                "runtime_key": "k"}}]}))
        .unwrap();
        assert_eq!(
            a.request_mirror_policies,
            vec![
                MirrorPolicy {
                    cluster: "shadow".into(),
                    parts_per_million: 1_000_000,
                    keep_host: false
                },
                MirrorPolicy {
                    cluster: "s2".into(),
                    parts_per_million: 2_500,
                    keep_host: true
                },
            ]
        );
        let err =
            decode(json!({"cluster": "a", "request_mirror_policies": [{"cluster_header": "x"}]}))
                .unwrap_err();
        assert!(
            err.contains("request_mirror_policies[0]: field \"cluster_header\""),
            "{err}"
        );
    }

    #[test]
    fn regex_rewrite_substitutes_groups() {
        let a = decode(json!({"cluster": "a", "regex_rewrite": {
            "pattern": {"google_re2": {}, "regex": "^/service/([^/]+)(/.*)$"},
            "substitution": "\\2/instance/\\1$"}}))
        .unwrap();
        let r = a.regex_rewrite.unwrap();
        assert_eq!(
            r.pattern
                .replace_all("/service/foo/v1/api", r.substitution.as_str()),
            "/v1/api/instance/foo$"
        );
        let err = decode(json!({"cluster": "a", "regex_rewrite": {
            "pattern": {"regex": "(a)"}, "substitution": "\\2"}}))
        .unwrap_err();
        assert!(
            err.contains("regex_rewrite.substitution: \\2 names a group"),
            "{err}"
        );
        let err = decode(
            json!({"cluster": "a", "prefix_rewrite": "/", "regex_rewrite": {
            "pattern": {"regex": "a"}, "substitution": "b"}}),
        )
        .unwrap_err();
        assert!(
            err.contains("only one of prefix_rewrite and regex_rewrite"),
            "{err}"
        );
    }

    #[test]
    fn unimplemented_fields_are_refused_with_their_path() {
        let a = decode(json!({"cluster": "a", "retry_policy": {
            "retry_on": "5xx,connect-failure", "num_retries": 3, "per_try_timeout": "1s",
            "retry_back_off": {"base_interval": "0.01s"}}}))
        .unwrap();
        let r = a.retry_policy.unwrap();
        assert!(r.on_5xx && r.on_connect_failure && !r.on_reset);
        assert_eq!(r.num_retries, 3);
        assert_eq!(r.per_try_timeout, Some(Duration::from_secs(1)));
        assert_eq!(r.max_interval, Duration::from_millis(100));
        let err = decode(json!({"cluster": "a", "retry_policy": {"retry_on": "refused-stream"}}))
            .unwrap_err();
        assert!(
            err.starts_with("route.retry_policy.retry_on: retry_on \"refused-stream\""),
            "{err}"
        );
        let err = decode(json!({"cluster": "a", "hash_policy": [{"filter_state": {"key": "k"}}]}))
            .unwrap_err();
        assert_eq!(
            err,
            "route.hash_policy[0]: field \"filter_state\" is not supported by hoist yet"
        );
        let err = decode(
            json!({"cluster": "a", "hash_policy": [{"cookie": {"name": "s", "ttl": "1s"}}]}),
        )
        .unwrap_err();
        assert!(
            err.contains("hash_policy[0].cookie: field \"ttl\""),
            "{err}"
        );
        let a = decode(json!({"cluster": "a", "hash_policy": [
            {"header": {"header_name": "X-User"}, "terminal": true},
            {"cookie": {"name": "session"}},
            {"connection_properties": {"source_ip": true}},
            {"query_parameter": {"name": "id"}}]}))
        .unwrap();
        assert_eq!(
            a.hash_policy,
            vec![
                HashPolicy {
                    source: HashSource::Header("x-user".into()),
                    terminal: true
                },
                HashPolicy {
                    source: HashSource::Cookie("session".into()),
                    terminal: false
                },
                HashPolicy {
                    source: HashSource::SourceIp,
                    terminal: false
                },
                HashPolicy {
                    source: HashSource::QueryParameter("id".into()),
                    terminal: false
                },
            ]
        );
        assert!(decode(json!({"prefix_rewrite": "/"})).is_err());
        assert!(decode(json!({"cluster": "a", "weighted_clusters": {}})).is_err());
    }
}

//! `envoy.config.route.v3`: route configuration, virtual hosts, routes.

use std::collections::BTreeMap;
use std::time::Duration;

use super::core::{DataSource, HeaderValueOption, RawTypedConfig, StringMatcher};

/// Envoy's default for `max_direct_response_body_size_bytes`.
pub const DEFAULT_MAX_DIRECT_RESPONSE_BODY: u32 = 4096;

#[derive(Clone, Debug)]
pub struct RouteConfiguration {
    pub name: String,
    pub virtual_hosts: Vec<VirtualHost>,
    pub max_direct_response_body_size_bytes: u32,
    pub headers: HeaderMutations,
}

/// The four `*_headers_to_{add,remove}` lists a route configuration, virtual host or route has.
#[derive(Clone, Debug, Default)]
pub struct HeaderMutations {
    pub request_headers_to_add: Vec<HeaderValueOption>,
    /// Lower-cased.
    pub request_headers_to_remove: Vec<String>,
    pub response_headers_to_add: Vec<HeaderValueOption>,
    /// Lower-cased.
    pub response_headers_to_remove: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct VirtualHost {
    pub name: String,
    /// Lower-cased. "*", "*.suffix", "prefix.*", or exact (possibly with :port).
    pub domains: Vec<String>,
    pub routes: Vec<Route>,
    pub headers: HeaderMutations,
    /// Keyed by filter name.
    pub typed_per_filter_config: BTreeMap<String, RawTypedConfig>,
    /// `require_tls`: NONE, EXTERNAL_ONLY, ALL. hoist treats EXTERNAL_ONLY like ALL.
    pub require_tls: bool,
    /// `rate_limits`: descriptor generators for rate limit filters (local_ratelimit).
    pub rate_limits: Vec<RateLimit>,
}

#[derive(Clone, Debug)]
pub enum PathMatch {
    Prefix(String),
    Path(String),
    /// Anchored to the whole path (without query).
    SafeRegex(regex::Regex),
    /// Matches the prefix only at a `/` boundary or the end of the path.
    PathSeparatedPrefix(String),
}

#[derive(Clone, Debug)]
pub enum HeaderMatchSpec {
    /// `string_match` or one of the legacy `exact_match`/`prefix_match`/... fields.
    String(StringMatcher),
    Present(bool),
    /// `range_match`: [start, end).
    Range {
        start: i64,
        end: i64,
    },
}

#[derive(Clone, Debug)]
pub struct HeaderMatcher {
    /// Lower-cased; may be a pseudo-header such as `:method` or `:authority`.
    pub name: String,
    pub spec: HeaderMatchSpec,
    pub invert_match: bool,
    /// `treat_missing_header_as_empty`.
    pub treat_missing_as_empty: bool,
}

impl HeaderMatcher {
    /// Envoy's header match, given the request's value of `name` (several values joined by
    /// ","), or None when the request does not have the header.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let value = match value {
            Some(v) => Some(v),
            None if self.treat_missing_as_empty => Some(""),
            None => None,
        };
        let matched = match (&self.spec, value) {
            (HeaderMatchSpec::Present(want), v) => v.is_some() == *want,
            // A missing header never matches a value matcher, even inverted (Envoy semantics).
            (_, None) => return false,
            (HeaderMatchSpec::String(sm), Some(v)) => sm.matches(v),
            (HeaderMatchSpec::Range { start, end }, Some(v)) => {
                v.parse::<i64>().is_ok_and(|n| n >= *start && n < *end)
            }
        };
        matched != self.invert_match
    }
}

#[derive(Clone, Debug)]
pub enum QueryParameterMatchSpec {
    String(StringMatcher),
    Present,
}

#[derive(Clone, Debug)]
pub struct QueryParameterMatcher {
    pub name: String,
    pub spec: QueryParameterMatchSpec,
}

#[derive(Clone, Debug)]
pub struct RouteMatch {
    pub path: PathMatch,
    /// Default true. Does not apply to safe_regex.
    pub case_sensitive: bool,
    pub headers: Vec<HeaderMatcher>,
    pub query_parameters: Vec<QueryParameterMatcher>,
}

#[derive(Clone, Debug)]
pub struct DirectResponse {
    pub status: u16,
    /// None: no body.
    pub body: Option<DataSource>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedirectPath {
    Keep,
    /// `path_redirect`
    Path(String),
    /// `prefix_rewrite` (replaces the matched prefix)
    PrefixRewrite(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// `https_redirect: true` or `scheme_redirect`.
    pub scheme: Option<String>,
    pub host: Option<String>,
    pub port: Option<u16>,
    pub path: RedirectPath,
    /// 301 (default), 302, 303, 307, 308.
    pub response_code: u16,
    pub strip_query: bool,
}

/// Envoy's default route `timeout`.
pub const DEFAULT_ROUTE_TIMEOUT: Duration = Duration::from_secs(15);

/// Which cluster a forwarded request goes to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterSpecifier {
    /// `cluster`
    Cluster(String),
    /// `weighted_clusters.clusters[]`: (name, weight), weights > 0 in total.
    Weighted(Vec<(String, u32)>),
    /// `cluster_header`: lower-cased header name whose value names the cluster.
    Header(String),
}

/// `host_rewrite_*`: what the Host / :authority sent upstream becomes.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum HostRewrite {
    #[default]
    Keep,
    /// `host_rewrite_literal`
    Literal(String),
    /// `auto_host_rewrite`: the chosen endpoint's address (host:port).
    Auto,
}

/// `envoy.config.route.v3.RouteAction`: forward to an upstream cluster.
#[derive(Clone, Debug)]
pub struct ForwardAction {
    pub cluster: ClusterSpecifier,
    /// `prefix_rewrite`: replaces the part of the path the route's prefix matched.
    pub prefix_rewrite: Option<String>,
    pub host_rewrite: HostRewrite,
    /// `timeout`; None: `0s`, no timeout.
    pub timeout: Option<Duration>,
    /// Boxed, as regex_rewrite: most routes have neither, and the route action stays small.
    pub retry_policy: Option<Box<RetryPolicy>>,
    /// `hash_policy`, in order: the hash RING_HASH and MAGLEV clusters place the request by.
    pub hash_policy: Vec<HashPolicy>,
    /// `regex_rewrite`: the path (not the query) rewritten, every match replaced.
    pub regex_rewrite: Option<Box<RegexRewrite>>,
    /// `idle_timeout`: the stream idle timeout for this route, replacing the connection
    /// manager's stream_idle_timeout. None: not set; Some(zero): `0s`, disabled.
    pub idle_timeout: Option<Duration>,
    /// `request_mirror_policies`: shadow copies of the request, answers discarded.
    pub request_mirror_policies: Vec<MirrorPolicy>,
    /// The virtual host's `include_request_attempt_count`: x-envoy-attempt-count upstream.
    pub include_attempt_count: bool,
    /// The virtual host's `include_attempt_count_in_response`.
    pub include_attempt_count_in_response: bool,
}

/// `envoy.type.matcher.v3.RegexMatchAndSubstitute`.
#[derive(Clone, Debug)]
pub struct RegexRewrite {
    pub pattern: regex::Regex,
    /// In the regex crate's syntax (RE2's `\1` written `${1}`).
    pub substitution: String,
}

impl PartialEq for RegexRewrite {
    fn eq(&self, other: &Self) -> bool {
        self.pattern.as_str() == other.pattern.as_str() && self.substitution == other.substitution
    }
}

impl ForwardAction {
    /// The stream idle timeout of a request on this route: its own `idle_timeout` (`0s`:
    /// none), else the connection manager's.
    pub fn stream_idle_timeout(&self, hcm: Option<Duration>) -> Option<Duration> {
        match self.idle_timeout {
            Some(t) if t.is_zero() => None,
            Some(t) => Some(t),
            None => hcm,
        }
    }
}

/// One `RouteAction.RequestMirrorPolicy`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MirrorPolicy {
    pub cluster: String,
    /// `runtime_fraction.default_value` in parts per million (default: all, 1000000).
    pub parts_per_million: u32,
    /// `disable_shadow_host_suffix_append`: keep the host as it is.
    pub keep_host: bool,
}

/// One `envoy.config.route.v3.RouteAction.HashPolicy`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashPolicy {
    pub source: HashSource,
    /// Stop at this policy when a hash has been made so far.
    pub terminal: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HashSource {
    /// `header.header_name`, lower-cased (may be a pseudo-header such as `:path`).
    Header(String),
    /// `cookie.name`: an existing cookie only (no `ttl`: hoist never sets one).
    Cookie(String),
    /// `connection_properties.source_ip: true`.
    SourceIp,
    /// `query_parameter.name`.
    QueryParameter(String),
}

/// `envoy.config.route.v3.RetryPolicy`, the subset hoist implements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// `retry_on` conditions.
    pub on_5xx: bool,
    pub on_gateway_error: bool,
    pub on_connect_failure: bool,
    pub on_reset: bool,
    pub on_retriable_status_codes: bool,
    /// `num_retries`, default 1.
    pub num_retries: u32,
    /// `per_try_timeout`; None: only the route timeout.
    pub per_try_timeout: Option<Duration>,
    pub retriable_status_codes: Vec<u16>,
    /// `retry_back_off{base_interval (25 ms), max_interval (10 x base)}`.
    pub base_interval: Duration,
    pub max_interval: Duration,
}

#[derive(Clone, Debug)]
pub enum RouteAction {
    DirectResponse(DirectResponse),
    Redirect(Redirect),
    Route(ForwardAction),
}

#[derive(Clone, Debug)]
pub struct Route {
    pub name: String,
    pub route_match: RouteMatch,
    pub action: RouteAction,
    pub headers: HeaderMutations,
    pub typed_per_filter_config: BTreeMap<String, RawTypedConfig>,
    pub yaml_path: String,
}

/// `envoy.config.route.v3.RateLimit`: a list of actions that together make one rate limit
/// descriptor for a request.
#[derive(Clone, Debug)]
pub struct RateLimit {
    /// `stage` (0..=10), None when not written (filters that read stages treat that as 0).
    pub stage: Option<u32>,
    /// `disable_key`: local rate limiting skips entries that have one.
    pub disable_key: String,
    /// At least one.
    pub actions: Vec<RateLimitAction>,
}

impl RateLimit {
    pub fn stage(&self) -> u32 {
        self.stage.unwrap_or(0)
    }
}

/// `envoy.config.route.v3.RateLimit.Action`: one descriptor entry (key, value) from the request,
/// with the defaults of the optional keys already applied.
#[derive(Clone, Debug)]
pub enum RateLimitAction {
    /// `(descriptor_key, <value of header_name>)`. A missing header drops the whole
    /// descriptor, unless `skip_if_absent`, which drops only this entry.
    RequestHeaders {
        /// Lower-cased; may be a pseudo-header.
        header_name: String,
        descriptor_key: String,
        skip_if_absent: bool,
    },
    /// `("remote_address", <downstream IP>)`.
    RemoteAddress,
    /// `(descriptor_key or "generic_key", descriptor_value)`.
    GenericKey {
        descriptor_key: String,
        descriptor_value: String,
    },
    /// `(descriptor_key or "header_match", descriptor_value)` when all `headers` match (or,
    /// with `expect_match: false`, when they do not); otherwise the descriptor is dropped.
    HeaderValueMatch {
        descriptor_key: String,
        descriptor_value: String,
        expect_match: bool,
        headers: Vec<HeaderMatcher>,
    },
}

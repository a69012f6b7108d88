//! `envoy.config.cluster.v3.Cluster`: the upstream services routes forward to (and filters
//! reach for their own needs, such as jwt_authn's remote JWKS).

use std::time::Duration;

use super::core::DataSource;
use super::tls::{SanMatch, TlsCertificate, TlsVersion};

/// Envoy's default `connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Envoy's default upstream connection `idle_timeout`.
pub const DEFAULT_UPSTREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// `envoy.config.core.v3.HealthCheck`, HTTP or TCP.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HealthCheck {
    pub timeout: Duration,
    pub interval: Duration,
    pub unhealthy_threshold: u32,
    pub healthy_threshold: u32,
    /// None: a TCP check (connect only).
    pub http: Option<HttpHealthCheck>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpHealthCheck {
    pub path: String,
    /// `host`; None: the cluster's name, as Envoy sends.
    pub host: Option<String>,
    /// `expected_statuses` as [start, end) ranges; default 200 only.
    pub expected_statuses: Vec<(u16, u16)>,
}

/// `envoy.config.cluster.v3.OutlierDetection`: the consecutive-error detectors (success rate
/// and failure percentage are refused at load).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutlierDetection {
    pub consecutive_5xx: u32,
    pub consecutive_gateway_failure: u32,
    /// Percentages (0..=100): the chance that a detected outlier is really ejected.
    pub enforcing_consecutive_5xx: u32,
    pub enforcing_consecutive_gateway_failure: u32,
    /// How often ejected hosts are checked for their return.
    pub interval: Duration,
    pub base_ejection_time: Duration,
    pub max_ejection_time: Duration,
    pub max_ejection_percent: u32,
    /// Eject one host even when that alone goes over max_ejection_percent.
    pub always_eject_one_host: bool,
    /// A passing active health check returns an ejected host at once.
    pub successful_active_health_check_uneject_host: bool,
}

impl Default for OutlierDetection {
    /// Envoy's defaults.
    fn default() -> Self {
        OutlierDetection {
            consecutive_5xx: 5,
            consecutive_gateway_failure: 5,
            enforcing_consecutive_5xx: 100,
            enforcing_consecutive_gateway_failure: 0,
            interval: Duration::from_secs(10),
            base_ejection_time: Duration::from_secs(30),
            max_ejection_time: Duration::from_secs(300),
            max_ejection_percent: 10,
            always_eject_one_host: false,
            successful_active_health_check_uneject_host: true,
        }
    }
}

/// One `circuit_breakers.thresholds[]` entry: limits across all workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitBreakers {
    pub max_connections: u32,
    pub max_pending_requests: u32,
    pub max_requests: u32,
    pub max_retries: u32,
    /// `retry_budget`: when set, it replaces max_retries.
    pub retry_budget: Option<RetryBudget>,
}

/// `circuit_breakers.thresholds[].retry_budget`: active retries may be this share of the
/// active and pending requests, and at least `min_retry_concurrency`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryBudget {
    /// `budget_percent.value` in hundredths of a percent (default 20 %: 2000).
    pub budget_basis_points: u32,
    /// Default 3.
    pub min_retry_concurrency: u32,
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget {
            budget_basis_points: 2000,
            min_retry_concurrency: 3,
        }
    }
}

impl Default for CircuitBreakers {
    /// Envoy's defaults.
    fn default() -> Self {
        CircuitBreakers {
            max_connections: 1024,
            max_pending_requests: 1024,
            max_requests: 1024,
            max_retries: 3,
            retry_budget: None,
        }
    }
}

/// `type`: how the endpoints' addresses are found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DiscoveryType {
    /// Endpoint addresses are IP literals.
    Static,
    /// Endpoint addresses are host names, resolved when a connection is made.
    StrictDns,
    LogicalDns,
}

/// `dns_lookup_family`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum DnsLookupFamily {
    /// AUTO (the default) and V6_PREFERRED: IPv6 first, then IPv4.
    #[default]
    V6Preferred,
    V4Only,
    V6Only,
    /// V4_PREFERRED and ALL: IPv4 first, then IPv6.
    V4Preferred,
}

/// One `load_assignment.endpoints[].lb_endpoints[].endpoint.address.socket_address`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// An IP literal (STATIC) or a host name (STRICT_DNS, LOGICAL_DNS).
    pub host: String,
    pub port: u16,
    /// `lb_endpoints[].load_balancing_weight` (1..), default 1.
    pub weight: u32,
    /// The locality's `priority`: 0 is used first; the next level takes the load the ones
    /// above cannot.
    pub priority: u32,
}

/// `load_assignment.policy.overprovisioning_factor`'s default (1.4, in percent).
pub const DEFAULT_OVERPROVISIONING_FACTOR: u32 = 140;

/// `lb_policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum LbPolicy {
    /// Weighted round robin (Envoy's default).
    #[default]
    RoundRobin,
    /// Power of two choices by active requests (`choice_count` 2), weights honoured by picking
    /// candidates in proportion to them.
    LeastRequest,
    /// Weighted random.
    Random,
    /// Consistent hashing on a ring of `min_ring_size..=max_ring_size` points, xxHash64.
    RingHash {
        min_ring_size: u64,
        max_ring_size: u64,
    },
    /// Maglev's lookup table of `table_size` (a prime) entries.
    Maglev { table_size: u64 },
}

/// `ring_hash_lb_config` defaults and limit.
pub const DEFAULT_MIN_RING_SIZE: u64 = 1024;
pub const MAX_RING_SIZE: u64 = 8 * 1024 * 1024;
/// `maglev_lb_config.table_size` default and limit (Envoy's).
pub const DEFAULT_MAGLEV_TABLE_SIZE: u64 = 65537;
pub const MAX_MAGLEV_TABLE_SIZE: u64 = 5_000_011;

/// `envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`: the subset hoist's upstream
/// client honours.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamTlsContext {
    /// `sni`; None sends no server name.
    pub sni: Option<String>,
    /// `common_tls_context.validation_context.trusted_ca`. None: the server's certificate is not
    /// verified (Envoy's behaviour without a validation context).
    pub trusted_ca: Option<DataSource>,
    /// `validation_context.match_typed_subject_alt_names` (exact); empty: any name.
    pub subject_alt_names: Vec<SanMatch>,
    /// `common_tls_context.tls_params` versions (Envoy's client default: 1.2 to 1.2).
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    /// `common_tls_context.alpn_protocols`, offered in this order; empty: no ALPN.
    pub alpn_protocols: Vec<String>,
    /// `common_tls_context.tls_certificates[0]`: the client certificate for mTLS.
    pub client_certificate: Option<TlsCertificate>,
    pub yaml_path: String,
}

#[derive(Clone, Debug)]
pub struct Cluster {
    pub name: String,
    pub discovery: DiscoveryType,
    pub connect_timeout: Duration,
    /// `per_connection_buffer_limit_bytes` (default 1 MiB): how much of a response body may
    /// wait between the upstream connection and the downstream writer.
    pub per_connection_buffer_limit_bytes: u32,
    pub dns_lookup_family: DnsLookupFamily,
    /// In configuration order (filters that need one endpoint take the first).
    pub endpoints: Vec<Endpoint>,
    /// `load_assignment.policy.overprovisioning_factor` (percent; default 140).
    pub overprovisioning_factor: u32,
    pub lb_policy: LbPolicy,
    /// `common_http_protocol_options.idle_timeout` (default 1 h); None: `0s`, never.
    pub idle_timeout: Option<Duration>,
    /// `common_http_protocol_options.max_requests_per_connection` (or the deprecated
    /// top-level field); None: unlimited.
    pub max_requests_per_connection: Option<u32>,
    /// `circuit_breakers.thresholds` of priority DEFAULT (Envoy's defaults when absent).
    pub circuit_breakers: CircuitBreakers,
    /// `health_checks` (at most one).
    pub health_check: Option<HealthCheck>,
    pub outlier_detection: Option<OutlierDetection>,
    /// `transport_socket` with an UpstreamTlsContext; None is plain TCP.
    pub tls: Option<UpstreamTlsContext>,
    /// `typed_extension_protocol_options["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]`:
    /// the HTTP version spoken to the endpoints (HTTP/1.1 without it).
    pub protocol: UpstreamProtocol,
    pub yaml_path: String,
}

/// The HTTP version toward a cluster's endpoints (Envoy's HttpProtocolOptions
/// `upstream_protocol_options`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// No protocol options, or `explicit_http_config.http_protocol_options`.
    #[default]
    Http1,
    /// `explicit_http_config.http2_protocol_options`: HTTP/2 (h2c prior knowledge over plain
    /// TCP, ALPN h2 over TLS).
    Http2(UpstreamHttp2Options),
    /// `auto_config`: over TLS, HTTP/2 when ALPN picks h2 and HTTP/1.1 otherwise (hoist offers
    /// `h2,http/1.1`); over plain TCP, HTTP/1.1.
    Auto(UpstreamHttp2Options),
}

/// `http2_protocol_options` toward an upstream (Envoy's defaults when unset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UpstreamHttp2Options {
    pub max_concurrent_streams: u32,
    pub initial_stream_window_size: u32,
    pub initial_connection_window_size: u32,
}

impl Default for UpstreamHttp2Options {
    fn default() -> Self {
        UpstreamHttp2Options {
            max_concurrent_streams: 2_147_483_647,
            initial_stream_window_size: 268_435_456,
            initial_connection_window_size: 268_435_456,
        }
    }
}

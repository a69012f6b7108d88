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

/// One `circuit_breakers.thresholds[]` entry: limits across all workers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CircuitBreakers {
    pub max_connections: u32,
    pub max_pending_requests: u32,
    pub max_requests: u32,
    pub max_retries: u32,
}

impl Default for CircuitBreakers {
    /// Envoy's defaults.
    fn default() -> Self {
        CircuitBreakers {
            max_connections: 1024,
            max_pending_requests: 1024,
            max_requests: 1024,
            max_retries: 3,
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
}

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
}

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
    pub dns_lookup_family: DnsLookupFamily,
    /// In configuration order (filters that need one endpoint take the first).
    pub endpoints: Vec<Endpoint>,
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
    /// `transport_socket` with an UpstreamTlsContext; None is plain TCP.
    pub tls: Option<UpstreamTlsContext>,
    pub yaml_path: String,
}

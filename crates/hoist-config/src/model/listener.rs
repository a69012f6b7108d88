//! `envoy.config.listener.v3.Listener` and its filter chains.

use super::core::SocketAddress;
use super::hcm::HttpConnectionManager;
use super::tls::DownstreamTlsContext;

/// Per-listener TLS offload policy (hoist extension; see docs/KTLS.md). `None` in the model
/// means "follow the command line".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsOffloadMode {
    /// Offload when the kernel can, user-space TLS otherwise (per connection).
    Auto,
    /// Never offload: user-space TLS only.
    Off,
    /// Refuse to start when the kernel cannot offload; close connections that cannot be.
    Require,
}

#[derive(Clone, Debug)]
pub struct Listener {
    /// `name`; Envoy generates one when absent, so this is always set after decoding.
    pub name: String,
    pub address: SocketAddress,
    /// `stat_prefix`: listener stats are `listener.<stat_prefix>.` instead of
    /// `listener.<address>.`.
    pub stat_prefix: Option<String>,
    pub filter_chains: Vec<FilterChain>,
    /// `default_filter_chain`: used when no chain matches.
    pub default_filter_chain: Option<FilterChain>,
    /// `per_connection_buffer_limit_bytes`, default 1 MiB.
    pub per_connection_buffer_limit_bytes: u32,
    /// Hoist extension (`metadata.filter_metadata.hoist.tls_offload`), None when not given.
    pub tls_offload: Option<TlsOffloadMode>,
    pub yaml_path: String,
}

/// `filter_chain_match`: the subset hoist implements.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilterChainMatch {
    /// Lower-cased; may start with `*.` for a wildcard.
    pub server_names: Vec<String>,
    /// `transport_protocol`: "tls" or "raw_buffer"; None matches both.
    pub transport_protocol: Option<String>,
    /// `application_protocols` (ALPN offered by the client).
    pub application_protocols: Vec<String>,
}

#[derive(Clone, Debug)]
pub struct FilterChain {
    pub name: String,
    pub filter_chain_match: FilterChainMatch,
    /// `transport_socket` with a DownstreamTlsContext; None is plain TCP.
    pub tls: Option<DownstreamTlsContext>,
    /// The network filter chain hoist implements: one http_connection_manager.
    pub hcm: HttpConnectionManager,
    pub yaml_path: String,
}

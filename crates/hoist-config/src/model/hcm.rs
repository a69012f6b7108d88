//! `envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`.

use std::time::Duration;

use super::access_log::AccessLog;
use super::core::RawTypedConfig;
use super::route::RouteConfiguration;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CodecType {
    /// HTTP/2 when ALPN says h2 (or the connection starts with the HTTP/2 preface), else HTTP/1.1.
    #[default]
    Auto,
    Http1,
    Http2,
}

/// One entry of `http_filters`. The router is always last and not listed here.
#[derive(Clone, Debug)]
pub struct HttpFilter {
    pub name: String,
    /// The filter's typed_config, decoded by the filter itself when it is built.
    pub config: RawTypedConfig,
    /// `is_optional`, `disabled`.
    pub disabled: bool,
}

#[derive(Clone, Debug)]
pub struct HttpConnectionManager {
    pub stat_prefix: String,
    pub codec_type: CodecType,
    pub route_config: RouteConfiguration,
    /// Filters before the router, in order.
    pub http_filters: Vec<HttpFilter>,
    pub access_log: Vec<AccessLog>,
    /// `server_name`, default "envoy".
    pub server_name: String,
    /// `server_header_transformation`: PASS_THROUGH keeps no server header on local replies
    /// either; hoist implements OVERWRITE (default) and APPEND_IF_ABSENT.
    pub server_header_append_if_absent: bool,
    /// Default 5 minutes; zero disables.
    pub stream_idle_timeout: Option<Duration>,
    /// Default off.
    pub request_timeout: Option<Duration>,
    /// `request_headers_timeout`, default off.
    pub request_headers_timeout: Option<Duration>,
    /// `common_http_protocol_options.idle_timeout`, default 1 hour; zero disables.
    pub idle_timeout: Option<Duration>,
    /// `common_http_protocol_options.max_headers_count`, default 100.
    pub max_headers_count: u32,
    /// `max_request_headers_kb`, default 60, at most 8192.
    pub max_request_headers_kb: u32,
    /// `drain_timeout`, default 5 s.
    pub drain_timeout: Duration,
    pub use_remote_address: bool,
    pub generate_request_id: bool,
    /// `via`: appended to the via header of requests and responses; None: not set.
    pub via: Option<String>,
    /// `xff_num_trusted_hops`: how many proxies in front of this one x-forwarded-for may be
    /// believed about the client's address.
    pub xff_num_trusted_hops: u32,
    /// `http2_protocol_options`: the few settings hoist honours.
    pub http2: Http2Options,
    pub yaml_path: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Http2Options {
    /// `max_concurrent_streams`, default 2147483647.
    pub max_concurrent_streams: u32,
    /// `initial_stream_window_size`, default 268435456.
    pub initial_stream_window_size: u32,
    /// `initial_connection_window_size`, default 268435456.
    pub initial_connection_window_size: u32,
}

impl Default for Http2Options {
    fn default() -> Self {
        Http2Options {
            max_concurrent_streams: 2_147_483_647,
            initial_stream_window_size: 268_435_456,
            initial_connection_window_size: 268_435_456,
        }
    }
}

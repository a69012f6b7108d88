//! What one finished request looks like to the access log.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use hoist_tls::transport::TlsInfo;
use http::HeaderMap;

pub use hoist_http::ResponseFlags;

/// One request, as the connection manager saw it, borrowed for the duration of the log call.
/// Fields the request never reached stay `None` and print as `-`.
#[derive(Clone, Debug)]
pub struct LogContext<'a> {
    /// Wall-clock time the request started (first byte of the request head).
    pub start_time: SystemTime,
    /// Start to the last byte of the request received (%REQUEST_DURATION%).
    pub request_complete: Option<Duration>,
    /// Start to the first byte of the response: the first upstream byte in Envoy; hoist's
    /// connection manager decides what it means for local replies (%RESPONSE_DURATION%).
    pub first_response_byte: Option<Duration>,
    /// Start to the last byte of the response sent (%DURATION%).
    pub response_complete: Option<Duration>,
    pub method: Option<&'a str>,
    /// The request target as received (`/a?b=1`), Envoy's `:path`.
    pub path: Option<&'a str>,
    /// `:authority`, or `Host` on HTTP/1.1; when None the `host` request header is used.
    pub authority: Option<&'a str>,
    pub scheme: Option<&'a str>,
    /// "HTTP/1.0", "HTTP/1.1" or "HTTP/2", as %PROTOCOL% prints it.
    pub protocol: Option<&'a str>,
    pub request_headers: Option<&'a HeaderMap>,
    pub response_headers: Option<&'a HeaderMap>,
    pub response_trailers: Option<&'a HeaderMap>,
    /// None prints 0, as Envoy does for a request that got no response.
    pub response_code: Option<u16>,
    pub response_code_details: Option<&'a str>,
    pub response_flags: ResponseFlags,
    /// Body bytes received from the downstream.
    pub bytes_received: u64,
    /// Body bytes sent to the downstream.
    pub bytes_sent: u64,
    /// The downstream address after `use_remote_address`/XFF processing.
    pub downstream_remote: Option<SocketAddr>,
    /// The peer of the TCP connection.
    pub downstream_direct_remote: Option<SocketAddr>,
    pub downstream_local: Option<SocketAddr>,
    /// None on a plain-text listener.
    pub tls: Option<&'a TlsInfo>,
    pub upstream_host: Option<SocketAddr>,
    pub upstream_cluster: Option<&'a str>,
    pub upstream_transport_failure_reason: Option<&'a str>,
    pub route_name: Option<&'a str>,
    pub connection_id: Option<u64>,
    pub hostname: Option<&'a str>,
}

impl<'a> LogContext<'a> {
    /// A context with nothing known but the start time.
    pub fn new(start_time: SystemTime) -> LogContext<'a> {
        LogContext {
            start_time,
            request_complete: None,
            first_response_byte: None,
            response_complete: None,
            method: None,
            path: None,
            authority: None,
            scheme: None,
            protocol: None,
            request_headers: None,
            response_headers: None,
            response_trailers: None,
            response_code: None,
            response_code_details: None,
            response_flags: ResponseFlags::NONE,
            bytes_received: 0,
            bytes_sent: 0,
            downstream_remote: None,
            downstream_direct_remote: None,
            downstream_local: None,
            tls: None,
            upstream_host: None,
            upstream_cluster: None,
            upstream_transport_failure_reason: None,
            route_name: None,
            connection_id: None,
            hostname: None,
        }
    }
}

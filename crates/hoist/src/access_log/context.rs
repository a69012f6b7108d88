//! What one finished request looks like to the access log.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime};

use hoist_tls::transport::TlsInfo;
use http::HeaderMap;

/// Envoy's response flags, as a bitset whose bit order is Envoy's `CORE_RESPONSE_FLAGS` order:
/// `%RESPONSE_FLAGS%` joins the short codes of the set flags in that order ("UT,DI,FI").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResponseFlags(u32);

macro_rules! response_flags {
    ($($bit:literal $name:ident $code:literal;)*) => {
        impl ResponseFlags {
            $(pub const $name: ResponseFlags = ResponseFlags(1 << $bit);)*
        }
        /// Short codes, indexed by bit.
        const SHORT_CODES: &[&str] = &[$($code),*];
    };
}

response_flags! {
    0 FAILED_LOCAL_HEALTH_CHECK "LH";
    1 NO_HEALTHY_UPSTREAM "UH";
    2 UPSTREAM_REQUEST_TIMEOUT "UT";
    3 LOCAL_RESET "LR";
    4 UPSTREAM_REMOTE_RESET "UR";
    5 UPSTREAM_CONNECTION_FAILURE "UF";
    6 UPSTREAM_CONNECTION_TERMINATION "UC";
    7 UPSTREAM_OVERFLOW "UO";
    8 NO_ROUTE_FOUND "NR";
    9 DELAY_INJECTED "DI";
    10 FAULT_INJECTED "FI";
    11 RATE_LIMITED "RL";
    12 UNAUTHORIZED_EXTERNAL_SERVICE "UAEX";
    13 RATE_LIMIT_SERVICE_ERROR "RLSE";
    14 DOWNSTREAM_CONNECTION_TERMINATION "DC";
    15 UPSTREAM_RETRY_LIMIT_EXCEEDED "URX";
    16 STREAM_IDLE_TIMEOUT "SI";
    17 INVALID_ENVOY_REQUEST_HEADERS "IH";
    18 DOWNSTREAM_PROTOCOL_ERROR "DPE";
    19 UPSTREAM_MAX_STREAM_DURATION_REACHED "UMSDR";
    20 RESPONSE_FROM_CACHE_FILTER "RFCF";
    21 NO_FILTER_CONFIG_FOUND "NFCF";
    22 DURATION_TIMEOUT "DT";
    23 UPSTREAM_PROTOCOL_ERROR "UPE";
    24 NO_CLUSTER_FOUND "NC";
    25 OVERLOAD_MANAGER "OM";
    26 DNS_RESOLUTION_FAILED "DF";
    27 DROP_OVERLOAD "DO";
    28 DOWNSTREAM_REMOTE_RESET "DR";
}

impl ResponseFlags {
    pub const NONE: ResponseFlags = ResponseFlags(0);

    pub fn insert(&mut self, flag: ResponseFlags) {
        self.0 |= flag.0;
    }

    pub fn contains(self, flag: ResponseFlags) -> bool {
        self.0 & flag.0 == flag.0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Envoy's `ResponseFlagUtils::toShortString`: the codes joined with ",", or "-".
    pub fn short_string(self) -> String {
        if self.is_empty() {
            return "-".to_owned();
        }
        let codes: Vec<&str> = SHORT_CODES
            .iter()
            .enumerate()
            .filter(|(bit, _)| self.0 & (1 << bit) != 0)
            .map(|(_, code)| *code)
            .collect();
        codes.join(",")
    }
}

impl std::ops::BitOr for ResponseFlags {
    type Output = ResponseFlags;

    fn bitor(self, rhs: ResponseFlags) -> ResponseFlags {
        ResponseFlags(self.0 | rhs.0)
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_join_in_envoys_order() {
        assert_eq!(ResponseFlags::NONE.short_string(), "-");
        let flags = ResponseFlags::FAULT_INJECTED
            | ResponseFlags::UPSTREAM_REQUEST_TIMEOUT
            | ResponseFlags::DELAY_INJECTED;
        assert_eq!(flags.short_string(), "UT,DI,FI");
        let mut flags = ResponseFlags::NONE;
        flags.insert(ResponseFlags::RATE_LIMITED);
        assert!(flags.contains(ResponseFlags::RATE_LIMITED));
        assert!(!flags.contains(ResponseFlags::NO_ROUTE_FOUND));
        assert_eq!(flags.short_string(), "RL");
        assert_eq!(
            (ResponseFlags::DNS_RESOLUTION_FAILED | ResponseFlags::NO_HEALTHY_UPSTREAM)
                .short_string(),
            "UH,DF"
        );
    }

    #[test]
    fn every_flag_has_its_own_code() {
        assert_eq!(SHORT_CODES.len(), 29);
        let all = ResponseFlags((1 << SHORT_CODES.len()) - 1);
        assert_eq!(
            all.short_string(),
            "LH,UH,UT,LR,UR,UF,UC,UO,NR,DI,FI,RL,UAEX,RLSE,DC,URX,SI,IH,DPE,UMSDR,RFCF,NFCF,DT,UPE,\
             NC,OM,DF,DO,DR"
        );
    }
}

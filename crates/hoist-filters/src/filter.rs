//! The HttpFilter trait: Envoy's filter phases for one request, and what a filter can see and do.

use std::any::Any;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use hoist_config::model::RateLimit;
use hoist_http::{RequestHead, ResponseFlags, ResponseHead};
use hoist_tls::transport::TlsInfo;
use http::HeaderMap;

/// A reply a filter makes instead of letting the request reach the router (Envoy's
/// sendLocalReply): 429 from a rate limit, 401/403 from JWT checks, 403 from the WAF.
#[derive(Clone, Debug)]
pub struct LocalReply {
    pub status: u16,
    pub body: Bytes,
    /// Extra response headers (e.g. `www-authenticate`, `x-ratelimit-*`).
    pub headers: HeaderMap,
    /// Set on the stream for %RESPONSE_FLAGS% (RL for a rate limit).
    pub flags: ResponseFlags,
    /// %RESPONSE_CODE_DETAILS%, e.g. "local_rate_limited".
    pub details: &'static str,
}

impl LocalReply {
    pub fn new(status: u16, body: impl Into<Bytes>, details: &'static str) -> LocalReply {
        LocalReply {
            status,
            body: body.into(),
            headers: HeaderMap::new(),
            flags: ResponseFlags::NONE,
            details,
        }
    }
}

/// What a filter tells the chain after a phase.
#[derive(Debug)]
pub enum FilterStatus {
    /// Go on to the next filter.
    Continue,
    /// From `decode_headers` only: the filter needs the request body. The chain reads the whole
    /// body (up to its buffer limit; past it the client gets a 413) and then calls
    /// `decode_data(body, true)` on this filter and the ones after it.
    StopAndBuffer,
    /// Stop the chain and answer with this reply.
    Reply(LocalReply),
}

/// Facts about the request's connection and route, the same for every filter of the stream.
pub struct StreamInfo<'a> {
    pub downstream_remote: SocketAddr,
    pub downstream_local: SocketAddr,
    pub tls: Option<&'a TlsInfo>,
    pub connection_id: u64,
    /// Name of the route the request matched, if any.
    pub route_name: Option<&'a str>,
    /// Whether a route matched at all (filters may skip work for requests that will 404).
    pub has_route: bool,
    /// The `rate_limits` of the matched virtual host (descriptor generators for rate limit
    /// filters); empty without a route.
    pub virtual_host_rate_limits: &'a [RateLimit],
}

/// What the stream accumulates while filters run: Envoy's dynamic metadata (per filter
/// namespace) and the response flags.
#[derive(Default)]
pub struct StreamState {
    pub metadata: serde_json::Map<String, serde_json::Value>,
    pub response_flags: ResponseFlags,
    /// Headers filters want added to whatever response goes out (e.g. `x-ratelimit-*` on
    /// allowed requests), applied after the router's response headers.
    pub response_headers_to_add: HeaderMap,
}

/// One filter's view of the stream during a phase.
pub struct StreamContext<'a> {
    pub info: &'a StreamInfo<'a>,
    pub state: &'a mut StreamState,
    /// This filter's `typed_per_filter_config` from the route, else the virtual host, as its
    /// factory decoded it at load (downcast it to the filter's own type).
    pub route_config: Option<&'a Arc<dyn Any + Send + Sync>>,
}

impl StreamContext<'_> {
    /// The per-route configuration as the filter's own type.
    pub fn route_config<T: Any>(&self) -> Option<&T> {
        self.route_config.and_then(|c| c.downcast_ref::<T>())
    }
}

/// An HTTP filter, one instance per request, running on its worker thread (nothing here needs
/// to be Send: filters never cross threads, and the hot path takes no lock).
///
/// The phases follow Envoy's: request headers, request body, response headers, response body,
/// log. Each filter sees them in configuration order (the router comes last and is not a
/// filter here). A filter can change the request or response heads, ask for the request body
/// (`StopAndBuffer`), or stop the chain with a local reply.
#[allow(async_fn_in_trait)] // Filters run on single-threaded workers: the futures need not be Send.
pub trait HttpFilter {
    /// The request head is complete; `end_stream`: no body follows.
    async fn decode_headers(
        &mut self,
        head: &mut RequestHead,
        end_stream: bool,
        cx: &mut StreamContext<'_>,
    ) -> FilterStatus;

    /// With `StopAndBuffer`: how much body this filter accepts; the chain reads up to the largest
    /// such limit (the listener's buffer limit when none is given) and answers 413 past it.
    fn buffer_limit(&self) -> Option<u64> {
        None
    }

    /// With a `buffer_limit`: whether a longer body is still let through, this filter
    /// inspecting only its start (ModSecurity's SecRequestBodyLimitAction ProcessPartial),
    /// instead of the client getting a 413. The chain reads past the limit only when every
    /// filter that names a limit allows it; `decode_data` then gets more bytes than the limit
    /// (the first pieces read, the rest goes to the upstream unseen).
    fn partial_body(&self) -> bool {
        false
    }

    /// The whole request body, when this filter or an earlier one asked for it (or, past the
    /// limit with `partial_body`, its first bytes).
    async fn decode_data(&mut self, _body: &Bytes, _cx: &mut StreamContext<'_>) -> FilterStatus {
        FilterStatus::Continue
    }

    /// The response head, before it is written (also for local replies).
    fn encode_headers(
        &mut self,
        _head: &mut ResponseHead,
        _cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        FilterStatus::Continue
    }

    /// Whether `encode_data` should see the response body (the chain then maps file bodies).
    fn wants_response_body(&self) -> bool {
        false
    }

    /// With `wants_response_body`: how much of a streamed (proxied) response body this filter
    /// inspects; the stream is held back up to the largest such limit and the rest passed on
    /// uninspected (`RESPONSE_BODY_LIMIT` when no filter names one).
    fn response_body_limit(&self) -> Option<u64> {
        None
    }

    /// The response body, when `wants_response_body`: all of it, or of a proxied one longer
    /// than the limit its first `response_body_limit` bytes. A `Reply` replaces the response
    /// (possible because nothing of it has been written yet).
    fn encode_data(&mut self, _body: &[u8], _cx: &mut StreamContext<'_>) -> FilterStatus {
        FilterStatus::Continue
    }

    /// The request is over (answered, refused or reset): last chance to count or log.
    fn log(&mut self, _info: &StreamInfo<'_>, _state: &StreamState, _status: u16) {}
}

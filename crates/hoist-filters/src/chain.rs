//! The filter chain of one connection manager at its three lifetimes:
//!
//! - [`FilterChainConfig`]: built once at load from `http_filters` (errors name the YAML path),
//!   shared by all workers; it also decodes `typed_per_filter_config`;
//! - [`WorkerFilterChain`]: one per worker (stats bound to the worker's slot, caches), so the
//!   hot path takes no lock;
//! - [`StreamFilters`]: one per request, the filter instances that see its phases in order.
//!
//! Filters are a closed set compiled into hoist (as Envoy's extensions are), dispatched through
//! enums rather than trait objects: async phases without boxing, and no allocation per phase.

use std::any::Any;
use std::sync::Arc;

use bytes::Bytes;
use hoist_config::model::{Cluster, HttpFilter as FilterModel, RawTypedConfig};
use hoist_config::ConfigError;
use hoist_http::{RequestHead, ResponseHead};
use hoist_stats::Store;

use crate::buffer;
use crate::filter::{FilterStatus, HttpFilter, LocalReply, StreamContext, StreamInfo, StreamState};
use crate::jwt_authn;
use crate::local_ratelimit;
use crate::waf;

/// How much of a streamed response body is held back for the filters that want it when none
/// names a limit: ModSecurity's default SecResponseBodyLimit.
pub const RESPONSE_BODY_LIMIT: u64 = 524_288;

/// A per-route configuration as a filter's factory decoded it.
pub type RouteConfig = Arc<dyn Any + Send + Sync>;

/// What building a filter needs to know about its connection manager.
pub struct BuildContext<'a> {
    /// The connection manager's stat_prefix (`http.<prefix>.` stats).
    pub stat_prefix: &'a str,
    pub stats: &'a Arc<Store>,
    pub workers: usize,
    /// `static_resources.clusters`, for filters that reach a service of their own.
    pub clusters: &'a [Cluster],
}

enum FilterConfig {
    Buffer(Arc<buffer::Config>),
    JwtAuthn(Arc<jwt_authn::Config>),
    LocalRateLimit(Arc<local_ratelimit::Config>),
    Waf(Arc<waf::Config>),
}

struct Entry {
    name: String,
    config: FilterConfig,
}

/// The HTTP filters of one connection manager, in configuration order (router excluded).
pub struct FilterChainConfig {
    entries: Vec<Entry>,
}

/// Dispatches a method call to the filter inside any variant of a filter enum.
macro_rules! dispatch {
    ($value:expr, $f:ident => $body:expr) => {
        match $value {
            Self::Buffer($f) => $body,
            Self::JwtAuthn($f) => $body,
            Self::LocalRateLimit($f) => $body,
            Self::Waf($f) => $body,
        }
    };
}

impl FilterChainConfig {
    pub fn build(
        filters: &[FilterModel],
        cx: &BuildContext<'_>,
    ) -> Result<FilterChainConfig, ConfigError> {
        let mut entries = Vec::new();
        for f in filters.iter().filter(|f| !f.disabled) {
            let config = match type_name(&f.config) {
                buffer::TYPE_NAME => {
                    FilterConfig::Buffer(Arc::new(buffer::Config::decode(&f.config, cx)?))
                }
                jwt_authn::TYPE_NAME => {
                    FilterConfig::JwtAuthn(Arc::new(jwt_authn::Config::decode(&f.config, cx)?))
                }
                local_ratelimit::TYPE_NAME => FilterConfig::LocalRateLimit(Arc::new(
                    local_ratelimit::Config::decode(&f.config, cx)?,
                )),
                waf::WASM_TYPE_NAME | waf::NATIVE_TYPE_NAME => {
                    FilterConfig::Waf(Arc::new(waf::Config::decode(&f.config, cx)?))
                }
                other => {
                    return Err(ConfigError::new(
                        f.config.yaml_path.clone(),
                        format!(
                            "HTTP filter \"{}\" ({other}) is not supported by hoist yet",
                            f.name
                        ),
                    ))
                }
            };
            entries.push(Entry {
                name: f.name.clone(),
                config,
            });
        }
        Ok(FilterChainConfig { entries })
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Decodes a `typed_per_filter_config` entry: the filter's position in the chain and its
    /// per-route configuration. None when the named filter is not in this chain (the decoder
    /// has already refused names that are not configured at all).
    pub fn route_config(
        &self,
        filter_name: &str,
        raw: &RawTypedConfig,
    ) -> Result<Option<(usize, RouteConfig)>, ConfigError> {
        let Some(index) = self.entries.iter().position(|e| e.name == filter_name) else {
            return Ok(None);
        };
        let config: RouteConfig = match &self.entries[index].config {
            FilterConfig::Buffer(_) => Arc::new(buffer::RouteConfig::decode(raw)?),
            FilterConfig::JwtAuthn(c) => Arc::new(jwt_authn::RouteConfig::decode(raw, c)?),
            FilterConfig::LocalRateLimit(c) => Arc::new(c.decode_route(raw)?),
            FilterConfig::Waf(c) => Arc::new(c.decode_route(raw)?),
        };
        Ok(Some((index, config)))
    }

    /// The chain as one worker runs it.
    pub fn worker(&self, slot: usize) -> WorkerFilterChain {
        let filters = self
            .entries
            .iter()
            .map(|e| match &e.config {
                FilterConfig::Buffer(c) => {
                    WorkerFilter::Buffer(buffer::Worker::new(c.clone(), slot))
                }
                FilterConfig::JwtAuthn(c) => {
                    WorkerFilter::JwtAuthn(jwt_authn::Worker::new(c.clone(), slot))
                }
                FilterConfig::LocalRateLimit(c) => {
                    WorkerFilter::LocalRateLimit(local_ratelimit::Worker::new(c.clone(), slot))
                }
                FilterConfig::Waf(c) => WorkerFilter::Waf(waf::Worker::new(c.clone(), slot)),
            })
            .collect();
        WorkerFilterChain { filters }
    }
}

enum WorkerFilter {
    Buffer(buffer::Worker),
    JwtAuthn(jwt_authn::Worker),
    LocalRateLimit(local_ratelimit::Worker),
    Waf(waf::Worker),
}

/// One worker's filter chain.
pub struct WorkerFilterChain {
    filters: Vec<WorkerFilter>,
}

impl WorkerFilterChain {
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Fresh filter instances for one request.
    pub fn stream(&self) -> StreamFilters<'_> {
        StreamFilters {
            filters: self
                .filters
                .iter()
                .map(|w| match w {
                    WorkerFilter::Buffer(w) => StreamFilter::Buffer(w.stream()),
                    WorkerFilter::JwtAuthn(w) => StreamFilter::JwtAuthn(w.stream()),
                    WorkerFilter::LocalRateLimit(w) => StreamFilter::LocalRateLimit(w.stream()),
                    WorkerFilter::Waf(w) => StreamFilter::Waf(w.stream()),
                })
                .collect(),
            resume_at: 0,
        }
    }
}

enum StreamFilter<'w> {
    Buffer(buffer::Filter<'w>),
    JwtAuthn(jwt_authn::Filter<'w>),
    LocalRateLimit(local_ratelimit::Filter<'w>),
    Waf(waf::Filter<'w>),
}

impl StreamFilter<'_> {
    async fn decode_headers(
        &mut self,
        head: &mut RequestHead,
        end_stream: bool,
        cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        dispatch!(self, f => f.decode_headers(head, end_stream, cx).await)
    }

    async fn decode_data(&mut self, body: &Bytes, cx: &mut StreamContext<'_>) -> FilterStatus {
        dispatch!(self, f => f.decode_data(body, cx).await)
    }

    fn encode_headers(
        &mut self,
        head: &mut ResponseHead,
        cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        dispatch!(self, f => f.encode_headers(head, cx))
    }

    fn wants_response_body(&self) -> bool {
        dispatch!(self, f => f.wants_response_body())
    }

    fn buffer_limit(&self) -> Option<u64> {
        dispatch!(self, f => f.buffer_limit())
    }

    fn partial_body(&self) -> bool {
        dispatch!(self, f => f.partial_body())
    }

    fn response_body_limit(&self) -> Option<u64> {
        dispatch!(self, f => f.response_body_limit())
    }

    fn encode_data(&mut self, body: &[u8], cx: &mut StreamContext<'_>) -> FilterStatus {
        dispatch!(self, f => f.encode_data(body, cx))
    }

    fn log(&mut self, info: &StreamInfo<'_>, state: &StreamState, status: u16) {
        dispatch!(self, f => f.log(info, state, status))
    }
}

/// What the request phases decided.
#[derive(Debug)]
pub enum Decision {
    /// All filters let the request through.
    Continue,
    /// A filter needs the request body: read it whole, then call [`StreamFilters::decode_body`].
    NeedBody,
    Reply(LocalReply),
}

/// How much request body the chain reads for the filters that asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyLimit {
    pub bytes: u64,
    /// Past `bytes`, the filters see the first bytes read and the request goes on (every
    /// filter that names a limit allows it: `HttpFilter::partial_body`); else the client
    /// gets a 413.
    pub partial: bool,
}

impl BodyLimit {
    /// The largest of the limits filters name (`(bytes, partial)`), partial only when each
    /// of them allows it; `default` (never partial) when none names one.
    fn of(named: impl Iterator<Item = (u64, bool)>, default: u64) -> BodyLimit {
        let mut limit: Option<BodyLimit> = None;
        for (bytes, partial) in named {
            limit = Some(match limit {
                None => BodyLimit { bytes, partial },
                Some(l) => BodyLimit {
                    bytes: l.bytes.max(bytes),
                    partial: l.partial && partial,
                },
            });
        }
        limit.unwrap_or(BodyLimit {
            bytes: default,
            partial: false,
        })
    }
}

/// The filter instances of one request.
pub struct StreamFilters<'w> {
    filters: Vec<StreamFilter<'w>>,
    /// Where `decode_body` resumes: the filter that asked for the body.
    resume_at: usize,
}

impl<'w> StreamFilters<'w> {
    pub fn is_empty(&self) -> bool {
        self.filters.is_empty()
    }

    /// Runs the request-headers phase in order. `route_configs` is indexed like the chain.
    pub async fn decode_headers(
        &mut self,
        head: &mut RequestHead,
        end_stream: bool,
        info: &StreamInfo<'_>,
        state: &mut StreamState,
        route_configs: &[Option<RouteConfig>],
    ) -> Decision {
        for (i, f) in self.filters.iter_mut().enumerate() {
            let mut cx = context(info, state, route_configs, i);
            match f.decode_headers(head, end_stream, &mut cx).await {
                FilterStatus::Continue => {}
                FilterStatus::StopAndBuffer => {
                    self.resume_at = i;
                    return Decision::NeedBody;
                }
                FilterStatus::Reply(r) => return Decision::Reply(r),
            }
        }
        Decision::Continue
    }

    /// The whole request body, after `Decision::NeedBody`: the filter that asked and those
    /// after it see it (the later ones also get their `decode_headers` first).
    pub async fn decode_body(
        &mut self,
        head: &mut RequestHead,
        body: &Bytes,
        info: &StreamInfo<'_>,
        state: &mut StreamState,
        route_configs: &[Option<RouteConfig>],
    ) -> Decision {
        let start = self.resume_at;
        for i in start..self.filters.len() {
            let mut cx = context(info, state, route_configs, i);
            let f = &mut self.filters[i];
            if i > start {
                match f.decode_headers(head, false, &mut cx).await {
                    FilterStatus::Continue | FilterStatus::StopAndBuffer => {}
                    FilterStatus::Reply(r) => return Decision::Reply(r),
                }
            }
            if let FilterStatus::Reply(r) = f.decode_data(body, &mut cx).await {
                return Decision::Reply(r);
            }
        }
        Decision::Continue
    }

    /// The response head through every filter, last filter first (Envoy's encode order).
    pub fn encode_headers(
        &mut self,
        head: &mut ResponseHead,
        info: &StreamInfo<'_>,
        state: &mut StreamState,
        route_configs: &[Option<RouteConfig>],
    ) -> Option<LocalReply> {
        for i in (0..self.filters.len()).rev() {
            let mut cx = context(info, state, route_configs, i);
            if let FilterStatus::Reply(r) = self.filters[i].encode_headers(head, &mut cx) {
                return Some(r);
            }
        }
        None
    }

    pub fn wants_response_body(&self) -> bool {
        self.filters.iter().any(StreamFilter::wants_response_body)
    }

    /// How much of a streamed response body to hold back for `encode_data`: the largest limit
    /// of the filters that want it.
    pub fn response_body_limit(&self) -> u64 {
        self.filters
            .iter()
            .filter(|f| f.wants_response_body())
            .filter_map(StreamFilter::response_body_limit)
            .max()
            .unwrap_or(RESPONSE_BODY_LIMIT)
    }

    /// After `Decision::NeedBody`: how much body to read, and what happens past it.
    /// `default` is the listener's per_connection_buffer_limit_bytes, used when no filter
    /// names a limit.
    pub fn body_limit(&self, default: u64) -> BodyLimit {
        let named = self.filters[self.resume_at..]
            .iter()
            .filter_map(|f| f.buffer_limit().map(|bytes| (bytes, f.partial_body())));
        BodyLimit::of(named, default)
    }

    pub fn encode_data(
        &mut self,
        body: &[u8],
        info: &StreamInfo<'_>,
        state: &mut StreamState,
        route_configs: &[Option<RouteConfig>],
    ) -> Option<LocalReply> {
        for i in (0..self.filters.len()).rev() {
            if !self.filters[i].wants_response_body() {
                continue;
            }
            let mut cx = context(info, state, route_configs, i);
            if let FilterStatus::Reply(r) = self.filters[i].encode_data(body, &mut cx) {
                return Some(r);
            }
        }
        None
    }

    pub fn log(&mut self, info: &StreamInfo<'_>, state: &StreamState, status: u16) {
        for f in &mut self.filters {
            f.log(info, state, status);
        }
    }
}

fn context<'a>(
    info: &'a StreamInfo<'a>,
    state: &'a mut StreamState,
    route_configs: &'a [Option<RouteConfig>],
    index: usize,
) -> StreamContext<'a> {
    StreamContext {
        info,
        state,
        route_config: route_configs.get(index).and_then(Option::as_ref),
    }
}

/// The config type's full name (`type.googleapis.com/` or any other prefix dropped).
fn type_name(raw: &RawTypedConfig) -> &str {
    raw.type_url.rsplit('/').next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::BodyLimit;

    fn limit(named: &[(u64, bool)]) -> BodyLimit {
        BodyLimit::of(named.iter().copied(), 7)
    }

    /// A body past the limit goes on only if every filter that names a limit lets it: a WAF
    /// with ProcessPartial before a buffer filter (which needs the body whole) still gets a
    /// 413 past the larger of their limits.
    #[test]
    fn the_largest_limit_is_partial_only_when_every_filter_allows_it() {
        let of = |bytes, partial| BodyLimit { bytes, partial };
        assert_eq!(limit(&[]), of(7, false));
        assert_eq!(limit(&[(100, true)]), of(100, true));
        assert_eq!(limit(&[(100, false)]), of(100, false));
        assert_eq!(limit(&[(100, true), (50, true)]), of(100, true));
        assert_eq!(limit(&[(100, true), (500, false)]), of(500, false));
        assert_eq!(limit(&[(500, false), (100, true)]), of(500, false));
    }
}

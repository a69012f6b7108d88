//! envoy.filters.http.buffer: takes the whole request body before the request goes on, up to
//! `max_request_bytes` (larger requests get a 413). Per route it can be disabled or given its
//! own limit (BufferPerRoute).

use std::sync::Arc;

use bytes::Bytes;
use hoist_config::model::RawTypedConfig;
use hoist_config::reader::Node;
use hoist_config::ConfigError;
use hoist_http::RequestHead;

use crate::chain::BuildContext;
use crate::filter::{FilterStatus, HttpFilter, LocalReply, StreamContext};

pub const TYPE_NAME: &str = "envoy.extensions.filters.http.buffer.v3.Buffer";
const PER_ROUTE: &str = "envoy.extensions.filters.http.buffer.v3.BufferPerRoute";

pub struct Config {
    max_request_bytes: u64,
}

impl Config {
    pub fn decode(raw: &RawTypedConfig, _cx: &BuildContext<'_>) -> Result<Config, ConfigError> {
        let node = Node::new(&raw.value, raw.yaml_path.clone());
        let mut m = node.message()?;
        let max = m.required("max_request_bytes")?.u32_in(1..=u32::MAX)?;
        m.finish()?;
        Ok(Config {
            max_request_bytes: u64::from(max),
        })
    }
}

/// BufferPerRoute: `disabled: true`, or `buffer: {max_request_bytes}`.
pub enum RouteConfig {
    Disabled,
    Limit(u64),
}

impl RouteConfig {
    pub fn decode(raw: &RawTypedConfig) -> Result<RouteConfig, ConfigError> {
        let name = raw.type_url.rsplit('/').next().unwrap_or("");
        if name != PER_ROUTE {
            return Err(ConfigError::new(
                raw.yaml_path.clone(),
                format!(
                    "typed_config @type \"{}\" does not match \"type.googleapis.com/{PER_ROUTE}\"",
                    raw.type_url
                ),
            ));
        }
        let node = Node::new(&raw.value, raw.yaml_path.clone());
        let mut m = node.message()?;
        let r = match m.oneof(&["disabled", "buffer"], true)? {
            Some("disabled") => {
                if !m.bool("disabled", false)? {
                    return Err(m.error("disabled must be true when set"));
                }
                RouteConfig::Disabled
            }
            _ => {
                let mut b = m.required("buffer")?.message()?;
                let max = b.required("max_request_bytes")?.u32_in(1..=u32::MAX)?;
                b.finish()?;
                RouteConfig::Limit(u64::from(max))
            }
        };
        m.finish()?;
        Ok(r)
    }
}

/// Per-worker state: none beyond the shared config.
pub struct Worker {
    config: Arc<Config>,
}

impl Worker {
    pub fn new(config: Arc<Config>, _slot: usize) -> Worker {
        Worker { config }
    }

    pub fn stream(&self) -> Filter<'_> {
        Filter {
            config: &self.config,
            limit: self.config.max_request_bytes,
        }
    }
}

pub struct Filter<'w> {
    config: &'w Config,
    limit: u64,
}

impl HttpFilter for Filter<'_> {
    async fn decode_headers(
        &mut self,
        _head: &mut RequestHead,
        end_stream: bool,
        cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        self.limit = match cx.route_config::<RouteConfig>() {
            Some(RouteConfig::Disabled) => return FilterStatus::Continue,
            Some(RouteConfig::Limit(n)) => *n,
            None => self.config.max_request_bytes,
        };
        if end_stream {
            FilterStatus::Continue
        } else {
            FilterStatus::StopAndBuffer
        }
    }

    fn buffer_limit(&self) -> Option<u64> {
        Some(self.limit)
    }

    async fn decode_data(&mut self, body: &Bytes, _cx: &mut StreamContext<'_>) -> FilterStatus {
        if body.len() as u64 > self.limit {
            return FilterStatus::Reply(LocalReply::new(
                413,
                "Payload Too Large",
                "request_payload_too_large",
            ));
        }
        FilterStatus::Continue
    }
}

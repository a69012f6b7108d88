//! envoy.filters.http.local_ratelimit: a token bucket shared by every worker (or one per
//! downstream connection) that refuses requests over the limit with a local reply (429 and
//! `local_rate_limited` by default, response flag RL), with Envoy's configuration, descriptors,
//! per-route limiters and stats.
//!
//! - [`config`]: the LocalRateLimit message (filter and per-route);
//! - [`token_bucket`]: the lock-free bucket with Envoy's discrete refills;
//! - [`limiter`]: the default bucket plus descriptor buckets, and how a request consumes them;
//! - [`descriptors`]: the rate limit actions that turn a request into descriptors;
//! - [`filter`]: the per-worker and per-request halves; [`stats`], [`headers`], [`status`].

mod config;
mod descriptors;
mod filter;
mod headers;
mod limiter;
mod stats;
mod status;
pub mod token_bucket;

pub use config::{LimitConfig, TYPE_NAME};
pub use filter::{Config, Filter, Worker};

/// A per-route (typed_per_filter_config) LocalRateLimit.
pub type RouteConfig = LimitConfig;

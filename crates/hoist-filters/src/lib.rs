//! HTTP filters for hoist, with Envoy's names, configuration and semantics.
//!
//! [`HttpFilter`] is the one trait every filter implements (Envoy's phases: request headers,
//! request body, response headers, response body, log); [`chain`] builds a connection
//! manager's `http_filters` into per-worker chains and runs a request through them in order.
//! docs/ARCHITECTURE.md describes how the connection manager drives the chain.
#![forbid(unsafe_code)]

mod buffer;
pub mod chain;
mod filter;
mod jwt_authn;
pub mod local_ratelimit;
pub mod matcher;
mod waf;

pub use chain::{
    BodyLimit, BuildContext, Decision, FilterChainConfig, RouteConfig, StreamFilters,
    WorkerFilterChain,
};
pub use filter::{FilterStatus, HttpFilter, LocalReply, StreamContext, StreamInfo, StreamState};

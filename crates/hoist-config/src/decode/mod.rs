//! Decoders: one module per Envoy message family, each turning a [`Node`](crate::reader::Node)
//! into the validated model.

mod access_log;
mod bootstrap;
mod cipher;
mod cluster;
mod core;
mod hcm;
mod headers;
mod http_filters;
mod listener;
mod route;
mod route_match;
mod tls;

pub(crate) use bootstrap::bootstrap;

/// Decoders of Envoy messages that filters embed in their own configuration (a JWT rule's
/// RouteMatch, a provider's DataSource), so that filters decode them exactly as the loader does.
pub mod shared {
    pub use super::core::data_source;
    pub use super::route_match::{header_matcher, route_match, string_matcher};
}

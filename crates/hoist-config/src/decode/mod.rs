//! Decoders: one module per Envoy message family, each turning a [`Node`](crate::reader::Node)
//! into the validated model.

mod access_log;
mod bootstrap;
mod cipher;
mod cluster;
mod core;
mod forward;
mod hcm;
mod headers;
mod http_filters;
mod listener;
mod protocol_options;
mod rate_limit;
mod route;
mod route_match;
mod tls;
mod upstream_tls;

pub(crate) use bootstrap::bootstrap;
pub use core::data_source;
pub use headers::header_value_option;
pub use rate_limit::rate_limit;
pub use route_match::{header_matcher, route_match, string_matcher};

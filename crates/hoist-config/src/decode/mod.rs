//! Decoders: one module per Envoy message family, each turning a [`Node`](crate::reader::Node)
//! into the validated model.

mod access_log;
mod bootstrap;
mod cipher;
mod core;
mod hcm;
mod headers;
mod http_filters;
mod listener;
mod rate_limit;
mod route;
mod route_match;
mod tls;

pub(crate) use bootstrap::bootstrap;
pub use headers::header_value_option;
pub use rate_limit::rate_limit;

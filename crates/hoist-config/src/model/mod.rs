//! The typed configuration model. Field names follow Envoy's protos; every value here has been
//! validated by the decoder, so the runtime can build from it without re-checking.

pub mod access_log;
pub mod bootstrap;
pub mod cluster;
pub mod core;
pub mod hcm;
pub mod listener;
pub mod route;
pub mod tls;

pub use access_log::*;
pub use bootstrap::*;
pub use cluster::*;
pub use core::*;
pub use hcm::*;
pub use listener::*;
pub use route::*;
pub use tls::*;

//! The Envoy v3 bootstrap subset hoist accepts.
//!
//! YAML (or JSON) goes in, a validated [`model::Bootstrap`] comes out, or a [`ConfigError`] that
//! names the YAML path of the fault and the reason. Unknown fields are errors, as in Envoy's
//! strict mode; fields Envoy has but hoist does not implement are errors that say so, never
//! silently ignored. docs/CONFIG.md lists what is accepted, field by field.
#![forbid(unsafe_code)]

mod error;
pub mod model;

pub use error::ConfigError;

use std::path::Path;

/// Loads a bootstrap from `--config-path` and/or `--config-yaml` (merged over the file the way
/// Envoy merges: messages field by field, repeated fields appended, scalars replaced).
pub fn load(
    config_path: Option<&Path>,
    config_yaml: Option<&str>,
) -> Result<model::Bootstrap, ConfigError> {
    let _ = (config_path, config_yaml);
    Err(ConfigError::new(
        "",
        "configuration decoding is not built yet",
    ))
}

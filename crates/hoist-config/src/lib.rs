//! The Envoy v3 bootstrap subset hoist accepts.
//!
//! YAML (or JSON) goes in, a validated [`model::Bootstrap`] comes out, or a [`ConfigError`] that
//! names the YAML path of the fault and the reason. Unknown fields are errors, as in Envoy's
//! strict mode; fields Envoy has but hoist does not implement are errors that say so, never
//! silently ignored. docs/CONFIG.md lists what is accepted, field by field.
#![forbid(unsafe_code)]

mod decode;
mod error;
mod extension;
pub mod model;
pub mod reader;
mod source;

pub use error::ConfigError;

/// Decoders of messages that HTTP filter configurations share with the route configuration, for
/// filters that decode their [`RawTypedConfig`](model::RawTypedConfig) with [`reader`].
pub mod decoders {
    pub use crate::decode::{
        data_source, header_matcher, header_value_option, rate_limit, route_match, string_matcher,
    };
}

use std::path::Path;

/// Loads a bootstrap from `--config-path` and/or `--config-yaml` (merged over the file the way
/// Envoy merges: messages field by field, repeated fields appended, scalars replaced).
///
/// Relative file names inside the configuration (certificates, bodies) are resolved against
/// the process's working directory, as Envoy does.
pub fn load(
    config_path: Option<&Path>,
    config_yaml: Option<&str>,
) -> Result<model::Bootstrap, ConfigError> {
    let tree = match (config_path, config_yaml) {
        (None, None) => {
            return Err(ConfigError::new(
                "",
                "no configuration given: use --config-path (-c) and/or --config-yaml",
            ))
        }
        (Some(path), None) => source::read_file(path)?,
        (None, Some(yaml)) => source::parse(yaml, "--config-yaml")?,
        (Some(path), Some(yaml)) => {
            let mut tree = source::read_file(path)?;
            source::merge(&mut tree, source::parse(yaml, "--config-yaml")?);
            tree
        }
    };
    decode::bootstrap(tree)
}

/// Loads a bootstrap from one YAML (or JSON) string.
pub fn load_str(yaml: &str) -> Result<model::Bootstrap, ConfigError> {
    decode::bootstrap(source::parse(yaml, "configuration")?)
}

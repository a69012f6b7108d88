//! Types shared by many messages: envoy.config.core.v3 (addresses, data sources, header options)
//! and envoy.type.matcher.v3 (string matchers).

use std::net::SocketAddr;
use std::path::PathBuf;

/// `envoy.config.core.v3.DataSource`. File contents are not read here: a direct-response body
/// must stay file-backed so the data path can send it with sendfile; the decoder checks that the
/// file exists and is readable and records its size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataSource {
    /// `filename`: path and the size it had when the configuration was loaded.
    File { path: PathBuf, size: u64 },
    /// `inline_string` or `inline_bytes` (base64 in YAML).
    Inline(Vec<u8>),
    /// `environment_variable`: the value, resolved at load.
    Env { name: String, value: Vec<u8> },
}

impl DataSource {
    /// Length of the data in bytes.
    pub fn len(&self) -> u64 {
        match self {
            DataSource::File { size, .. } => *size,
            DataSource::Inline(b) => b.len() as u64,
            DataSource::Env { value, .. } => value.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Reads the whole source into memory. For small things only (certificates, keys, formats).
    pub fn read(&self) -> std::io::Result<Vec<u8>> {
        match self {
            DataSource::File { path, .. } => std::fs::read(path),
            DataSource::Inline(b) => Ok(b.clone()),
            DataSource::Env { value, .. } => Ok(value.clone()),
        }
    }
}

/// `envoy.config.core.v3.SocketAddress` (TCP only; `pipe` and UDP are rejected).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketAddress {
    pub addr: SocketAddr,
}

impl SocketAddress {
    /// The form Envoy uses in stat names: `0.0.0.0_10443`, `[::1]_443` becomes `::1_443`.
    pub fn stat_name(&self) -> String {
        format!("{}_{}", self.addr.ip(), self.addr.port())
    }
}

/// `envoy.config.core.v3.HeaderValueOption.HeaderAppendAction`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum HeaderAppendAction {
    #[default]
    AppendIfExistsOrAdd,
    AddIfAbsent,
    OverwriteIfExistsOrAdd,
    OverwriteIfExists,
}

/// `envoy.config.core.v3.HeaderValueOption`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeaderValueOption {
    /// Lower-cased header name.
    pub key: String,
    pub value: String,
    pub append_action: HeaderAppendAction,
    /// With `keep_empty_value: false` (default) an empty value means the header is not added.
    pub keep_empty_value: bool,
}

/// `envoy.type.matcher.v3.StringMatcher`.
#[derive(Clone, Debug)]
pub enum StringMatch {
    Exact(String),
    Prefix(String),
    Suffix(String),
    Contains(String),
    /// Compiled once at load; anchored to the whole value as RE2 `FullMatch` does.
    SafeRegex(regex::Regex),
}

#[derive(Clone, Debug)]
pub struct StringMatcher {
    pub pattern: StringMatch,
    pub ignore_case: bool,
}

impl StringMatcher {
    pub fn matches(&self, value: &str) -> bool {
        if self.ignore_case {
            let v = value.to_ascii_lowercase();
            match &self.pattern {
                StringMatch::Exact(s) => v == s.to_ascii_lowercase(),
                StringMatch::Prefix(s) => v.starts_with(&s.to_ascii_lowercase()),
                StringMatch::Suffix(s) => v.ends_with(&s.to_ascii_lowercase()),
                StringMatch::Contains(s) => v.contains(&s.to_ascii_lowercase()),
                // Envoy ignores ignore_case for regexes.
                StringMatch::SafeRegex(r) => r.is_match(value),
            }
        } else {
            match &self.pattern {
                StringMatch::Exact(s) => value == s,
                StringMatch::Prefix(s) => value.starts_with(s.as_str()),
                StringMatch::Suffix(s) => value.ends_with(s.as_str()),
                StringMatch::Contains(s) => value.contains(s.as_str()),
                StringMatch::SafeRegex(r) => r.is_match(value),
            }
        }
    }
}

/// A `typed_config` whose decoding belongs to a later stage (per-filter configuration). Kept
/// as JSON with the YAML path it came from, so that stage can report errors at the right place.
///
/// `value` holds the config's fields without `@type` (a `TypedStruct` wrapper is already
/// unwrapped). Decode it with the same strict reader the loader uses:
/// `hoist_config::reader::Node::new(&raw.value, raw.yaml_path.clone()).message()`.
#[derive(Clone, Debug, PartialEq)]
pub struct RawTypedConfig {
    pub type_url: String,
    pub value: serde_json::Value,
    pub yaml_path: String,
}

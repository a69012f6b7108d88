//! A strict reader over the parsed configuration tree.
//!
//! The YAML is parsed into a `serde_json::Value` first (Envoy's proto-JSON view of it), then
//! each decoder walks it with [`Node`] and [`Message`]. The reader tracks the YAML path of every
//! node so that every error can name it, and a [`Message`] remembers which keys were read so
//! that [`Message::finish`] can reject the rest: strict mode, as in Envoy, means a typo never
//! passes silently.
//!
//! The reader is public so that later stages (an HTTP filter decoding its
//! [`RawTypedConfig`](crate::model::RawTypedConfig)) report errors in the same form.

mod message;
mod scalar;

pub use message::Message;

use std::ops::RangeInclusive;
use std::time::Duration;

use serde_json::Value;

use crate::ConfigError;

pub type Result<T> = std::result::Result<T, ConfigError>;

/// One value of the configuration tree with the YAML path it sits at.
#[derive(Clone, Debug)]
pub struct Node<'a> {
    value: &'a Value,
    path: String,
}

impl<'a> Node<'a> {
    /// A node at `path` (empty for the root).
    pub fn new(value: &'a Value, path: impl Into<String>) -> Self {
        Node {
            value,
            path: path.into(),
        }
    }

    pub fn value(&self) -> &'a Value {
        self.value
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// An error located at this node.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.path.clone(), message)
    }

    /// The node is a message (a YAML mapping) whose keys are field names.
    pub fn message(&self) -> Result<Message<'a>> {
        match self.value {
            Value::Object(map) => Ok(Message::new(map, self.path.clone())),
            other => Err(self.error(format!("expected a mapping, got {}", describe(other)))),
        }
    }

    /// The node is a list; its items carry `[i]` paths.
    pub fn list(&self) -> Result<Vec<Node<'a>>> {
        match self.value {
            Value::Array(items) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, v)| Node::new(v, format!("{}[{i}]", self.path)))
                .collect()),
            other => Err(self.error(format!("expected a list, got {}", describe(other)))),
        }
    }

    /// The node is a map (a proto `map<string, T>` or a `google.protobuf.Struct`): keys are
    /// data, not field names, and each value carries a `.<key>` path.
    pub fn entries(&self) -> Result<Vec<(&'a str, Node<'a>)>> {
        match self.value {
            Value::Object(map) => Ok(map
                .iter()
                .map(|(k, v)| (k.as_str(), Node::new(v, child_path(&self.path, k))))
                .collect()),
            other => Err(self.error(format!("expected a mapping, got {}", describe(other)))),
        }
    }

    pub fn str(&self) -> Result<&'a str> {
        match self.value {
            Value::String(s) => Ok(s),
            other => Err(self.error(format!("expected a string, got {}", describe(other)))),
        }
    }

    pub fn string(&self) -> Result<String> {
        self.str().map(str::to_owned)
    }

    /// A list of strings.
    pub fn strings(&self) -> Result<Vec<String>> {
        self.list()?.iter().map(Node::string).collect()
    }

    /// Booleans must be YAML booleans: `"true"` or `1` are errors, as in proto-JSON.
    pub fn bool(&self) -> Result<bool> {
        match self.value {
            Value::Bool(b) => Ok(*b),
            other => Err(self.error(format!("expected a boolean, got {}", describe(other)))),
        }
    }

    /// A `uint32` (or `google.protobuf.UInt32Value`).
    pub fn u32(&self) -> Result<u32> {
        self.u32_in(0..=u32::MAX)
    }

    /// A `uint32` that must lie in `range`.
    pub fn u32_in(&self, range: RangeInclusive<u32>) -> Result<u32> {
        let v = self.integer()?;
        match u32::try_from(v) {
            Ok(n) if range.contains(&n) => Ok(n),
            _ => Err(self.error(format!(
                "value {v} is out of range {}..={}",
                range.start(),
                range.end()
            ))),
        }
    }

    /// A `uint64` (or `google.protobuf.UInt64Value`).
    pub fn u64(&self) -> Result<u64> {
        let v = self.integer()?;
        u64::try_from(v)
            .map_err(|_| self.error(format!("value {v} is out of range 0..={}", u64::MAX)))
    }

    /// An `int64` (or `google.protobuf.Int64Value`).
    pub fn i64(&self) -> Result<i64> {
        let v = self.integer()?;
        i64::try_from(v).map_err(|_| {
            self.error(format!(
                "value {v} is out of range {}..={}",
                i64::MIN,
                i64::MAX
            ))
        })
    }

    fn integer(&self) -> Result<i128> {
        scalar::integer(self.value).map_err(|m| self.error(m))
    }

    /// A `google.protobuf.Duration`: `"5s"`, `"0.250s"`, or `{seconds, nanos}`.
    pub fn duration(&self) -> Result<Duration> {
        if let Value::Object(_) = self.value {
            let mut m = self.message()?;
            let seconds = m
                .field("seconds")?
                .map(|n| n.i64())
                .transpose()?
                .unwrap_or(0);
            let nanos = match m.field("nanos")? {
                Some(n) => n.u32_in(0..=999_999_999)?,
                None => 0,
            };
            m.finish()?;
            return scalar::duration_from_parts(seconds, nanos).map_err(|e| self.error(e));
        }
        scalar::duration(self.value).map_err(|m| self.error(m))
    }

    /// A proto enum: one of `names` by name (or by its number, which proto-JSON also allows;
    /// `names` must list the values in number order from 0). Returns the index into `names`.
    pub fn enumeration(&self, names: &[&str]) -> Result<usize> {
        let found = match self.value {
            Value::String(s) => names.iter().position(|n| n == s),
            Value::Number(_) => scalar::integer(self.value)
                .ok()
                .and_then(|i| usize::try_from(i).ok())
                .filter(|i| *i < names.len()),
            _ => None,
        };
        found.ok_or_else(|| {
            self.error(format!(
                "unknown value {}; expected one of {}",
                describe(self.value),
                names.join(", ")
            ))
        })
    }
}

/// The path of `key` below `parent`.
pub(crate) fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// The lowerCamelCase JSON name protobuf derives from a snake_case field name
/// (`per_connection_buffer_limit_bytes` -> `perConnectionBufferLimitBytes`).
pub fn json_name(field: &str) -> String {
    let mut out = String::with_capacity(field.len());
    let mut upper = false;
    for c in field.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.push(c.to_ascii_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// The snake_case form of a key written in either spelling (`statPrefix` -> `stat_prefix`).
pub fn snake_name(key: &str) -> String {
    let mut out = String::with_capacity(key.len() + 4);
    for c in key.chars() {
        if c.is_ascii_uppercase() {
            out.push('_');
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// A short rendering of a value for error messages.
pub fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => {
            let quoted = Value::String(s.clone()).to_string();
            if quoted.chars().count() > 80 {
                let short: String = s.chars().take(60).collect();
                format!("{}...", &Value::String(short).to_string())
            } else {
                quoted
            }
        }
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "a mapping".to_owned(),
    }
}

#[cfg(test)]
mod tests;

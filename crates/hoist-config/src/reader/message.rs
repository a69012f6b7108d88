//! A mapping read as a proto message: keys are field names, each may be written in snake_case
//! or lowerCamelCase (as proto-JSON allows), and every key must be read or rejected.

use std::ops::RangeInclusive;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{child_path, json_name, Node, Result};
use crate::ConfigError;

#[derive(Debug)]
pub struct Message<'a> {
    map: &'a Map<String, Value>,
    path: String,
    /// Keys read so far, as written in the YAML.
    used: Vec<&'a str>,
}

impl<'a> Message<'a> {
    pub(crate) fn new(map: &'a Map<String, Value>, path: String) -> Self {
        Message {
            map,
            path,
            used: Vec::new(),
        }
    }

    pub fn path(&self) -> &str {
        &self.path
    }

    /// An error located at this message.
    pub fn error(&self, message: impl Into<String>) -> ConfigError {
        ConfigError::new(self.path.clone(), message)
    }

    /// The key and value of field `name` in whichever spelling the YAML used. A field written
    /// in both spellings is an error, as proto-JSON parsers treat it.
    fn lookup(&self, name: &str) -> Result<Option<(&'a str, &'a Value)>> {
        let snake = self.map.get_key_value(name);
        let camel_name = json_name(name);
        let camel = if camel_name == name {
            None
        } else {
            self.map.get_key_value(camel_name.as_str())
        };
        match (snake, camel) {
            (Some(_), Some(_)) => Err(self.error(format!(
                "field \"{name}\" is given twice, as \"{name}\" and \"{camel_name}\""
            ))),
            (Some((k, v)), None) | (None, Some((k, v))) => Ok(Some((k.as_str(), v))),
            (None, None) => Ok(None),
        }
    }

    /// Whether field `name` is set (present and not null). Does not mark it read.
    pub fn has(&self, name: &str) -> bool {
        matches!(self.lookup(name), Ok(Some((_, v))) if !v.is_null())
    }

    /// Field `name`, marked read. An explicit `null` is the same as absent (proto-JSON).
    pub fn field(&mut self, name: &str) -> Result<Option<Node<'a>>> {
        let Some((key, value)) = self.lookup(name)? else {
            return Ok(None);
        };
        self.used.push(key);
        if value.is_null() {
            return Ok(None);
        }
        Ok(Some(Node::new(value, child_path(&self.path, key))))
    }

    pub fn required(&mut self, name: &str) -> Result<Node<'a>> {
        self.field(name)?
            .ok_or_else(|| self.error(format!("missing required field \"{name}\"")))
    }

    pub fn opt_string(&mut self, name: &str) -> Result<Option<String>> {
        self.field(name)?.map(|n| n.string()).transpose()
    }

    /// A string field; absent reads as "" (the proto3 default).
    pub fn string(&mut self, name: &str) -> Result<String> {
        Ok(self.opt_string(name)?.unwrap_or_default())
    }

    /// A string field that must be set and not empty.
    pub fn required_string(&mut self, name: &str) -> Result<String> {
        let node = self.required(name)?;
        let s = node.string()?;
        if s.is_empty() {
            return Err(node.error("must not be empty"));
        }
        Ok(s)
    }

    pub fn opt_bool(&mut self, name: &str) -> Result<Option<bool>> {
        self.field(name)?.map(|n| n.bool()).transpose()
    }

    pub fn bool(&mut self, name: &str, default: bool) -> Result<bool> {
        Ok(self.opt_bool(name)?.unwrap_or(default))
    }

    pub fn opt_u32(&mut self, name: &str, range: RangeInclusive<u32>) -> Result<Option<u32>> {
        self.field(name)?.map(|n| n.u32_in(range)).transpose()
    }

    pub fn u32(&mut self, name: &str, default: u32, range: RangeInclusive<u32>) -> Result<u32> {
        Ok(self.opt_u32(name, range)?.unwrap_or(default))
    }

    pub fn opt_duration(&mut self, name: &str) -> Result<Option<Duration>> {
        self.field(name)?.map(|n| n.duration()).transpose()
    }

    /// An enum field (see [`Node::enumeration`]); absent reads as None.
    pub fn enumeration(&mut self, name: &str, names: &[&str]) -> Result<Option<usize>> {
        self.field(name)?.map(|n| n.enumeration(names)).transpose()
    }

    /// A repeated field; absent reads as empty.
    pub fn list(&mut self, name: &str) -> Result<Vec<Node<'a>>> {
        match self.field(name)? {
            Some(n) => n.list(),
            None => Ok(Vec::new()),
        }
    }

    /// A repeated string field; absent reads as empty.
    pub fn strings(&mut self, name: &str) -> Result<Vec<String>> {
        match self.field(name)? {
            Some(n) => n.strings(),
            None => Ok(Vec::new()),
        }
    }

    /// Checks a proto `oneof`: at most one of `names` is set, and exactly one when `required`.
    /// Returns the one that is set, which the caller then reads.
    pub fn oneof(
        &mut self,
        names: &[&'static str],
        required: bool,
    ) -> Result<Option<&'static str>> {
        let mut set = Vec::new();
        for name in names {
            match self.lookup(name)? {
                // An explicit null is unset: read it here, as nothing else will.
                Some((key, Value::Null)) => self.used.push(key),
                Some(_) => set.push(*name),
                None => {}
            }
        }
        match set.as_slice() {
            [] if !required => Ok(None),
            [one] => Ok(Some(*one)),
            [_, _, ..] if !required => {
                Err(self.error(format!("at most one of {} may be set", names.join(", "))))
            }
            _ => Err(self.error(format!("exactly one of {} must be set", names.join(", ")))),
        }
    }

    /// Rejects Envoy fields that hoist knows but does not implement.
    pub fn unsupported(&mut self, names: &[&str]) -> Result<()> {
        for name in names {
            match self.lookup(name)? {
                Some((key, Value::Null)) => self.used.push(key),
                Some((key, _)) => {
                    return Err(self.error(format!("field \"{key}\" is not supported by hoist yet")))
                }
                None => {}
            }
        }
        Ok(())
    }

    /// Ends the message: any key not read is an unknown field.
    pub fn finish(self) -> Result<()> {
        match self.map.keys().find(|k| !self.used.contains(&k.as_str())) {
            Some(key) => Err(self.error(format!("unknown field \"{key}\""))),
            None => Ok(()),
        }
    }

    /// The mapping as written, for configs kept raw for a later stage.
    pub fn raw(&self) -> &'a Map<String, Value> {
        self.map
    }
}

//! Envoy extensions: `{name, typed_config: {"@type": "type.googleapis.com/<proto>", ...}}`.
//!
//! An extension is identified by its @type; the name is informational (as in current Envoy),
//! except that it lets an error say which extension the operator meant.

use serde_json::Value;

use crate::model::RawTypedConfig;
use crate::reader::{Message, Node, Result};
use crate::ConfigError;

pub(crate) const TYPE_URL_PREFIX: &str = "type.googleapis.com/";

/// Wrappers that carry another extension's config as a Struct; they are unwrapped.
const TYPED_STRUCTS: [&str; 2] = ["xds.type.v3.TypedStruct", "udpa.type.v1.TypedStruct"];

/// Proto namespaces whose types are real (Envoy's, or the xds/udpa/google ones it uses). Other
/// @types are typos or foreign types, reported as unknown rather than as unsupported.
const KNOWN_NAMESPACES: [&str; 4] = ["envoy.", "xds.", "udpa.", "google."];

/// One implementation hoist has for an extension slot.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Kind {
    /// Full proto name of the config message.
    pub type_name: &'static str,
    /// Names Envoy knows this extension by; the first is canonical.
    pub names: &'static [&'static str],
    /// Whether `typed_config` may be left out (extensions with an empty config that Envoy
    /// still finds by name).
    pub name_only: bool,
}

/// A typed_config with its @type read.
pub(crate) struct TypedConfig<'a> {
    /// The @type as written.
    pub type_url: String,
    /// The proto name: the part after the last `/`.
    pub type_name: String,
    /// The config's fields (without @type).
    pub body: Message<'a>,
}

impl<'a> TypedConfig<'a> {
    /// Reads a `google.protobuf.Any`.
    pub fn read(node: &Node<'a>) -> Result<TypedConfig<'a>> {
        let mut any = node.message()?;
        let type_url = any.required_string("@type")?;
        let name = type_name(&type_url).to_owned();
        if !TYPED_STRUCTS.contains(&name.as_str()) {
            return Ok(TypedConfig {
                type_url,
                type_name: name,
                body: any,
            });
        }
        let inner_url = any.required_string("type_url")?;
        let body = any.required("value")?.message()?;
        any.finish()?;
        Ok(TypedConfig {
            type_name: type_name(&inner_url).to_owned(),
            type_url: inner_url,
            body,
        })
    }

    /// The config kept for a later stage to decode.
    pub fn into_raw(self) -> RawTypedConfig {
        let mut fields = self.body.raw().clone();
        fields.shift_remove("@type");
        RawTypedConfig {
            type_url: self.type_url,
            value: Value::Object(fields),
            yaml_path: self.body.path().to_owned(),
        }
    }
}

fn type_name(type_url: &str) -> &str {
    type_url.rsplit('/').next().unwrap_or(type_url)
}

/// The outcome of choosing an implementation for an extension slot.
pub(crate) enum Slot<'a> {
    /// `kinds[index]` with its config.
    Known {
        index: usize,
        /// The `name` as written, or the canonical one.
        name: String,
        config: Option<TypedConfig<'a>>,
    },
    /// An extension hoist does not implement (the caller decides: error, or skip an optional
    /// HTTP filter as Envoy does).
    Unsupported(ConfigError),
}

/// Reads `name`, `typed_config` (and rejects `config_discovery`) of the extension message `m`
/// and picks the implementation from `kinds` by @type. `what` names the slot in errors
/// ("HTTP filter", "transport socket").
pub(crate) fn select<'a>(m: &mut Message<'a>, what: &str, kinds: &[Kind]) -> Result<Slot<'a>> {
    m.unsupported(&["config_discovery"])?;
    let name = m.opt_string("name")?.filter(|n| !n.is_empty());
    let by_name = name
        .as_deref()
        .and_then(|n| kinds.iter().position(|k| k.names.contains(&n)));
    let path = m.path().to_owned();
    let not_supported = |label: &str| {
        Slot::Unsupported(ConfigError::new(
            path.clone(),
            format!("{what} \"{label}\" is not supported by hoist yet"),
        ))
    };

    let Some(node) = m.field("typed_config")? else {
        return match (by_name, name) {
            (Some(i), Some(n)) if kinds[i].name_only => Ok(Slot::Known {
                index: i,
                name: n,
                config: None,
            }),
            (None, Some(n)) => Ok(not_supported(&n)),
            _ => Err(m.error("missing required field \"typed_config\"")),
        };
    };
    let typed = TypedConfig::read(&node)?;
    if let Some(i) = kinds.iter().position(|k| k.type_name == typed.type_name) {
        return Ok(Slot::Known {
            index: i,
            name: name.unwrap_or_else(|| kinds[i].names[0].to_owned()),
            config: Some(typed),
        });
    }
    if let Some(i) = by_name {
        return Err(node.error(format!(
            "typed_config @type \"{}\" does not match \"{TYPE_URL_PREFIX}{}\"",
            typed.type_url, kinds[i].type_name
        )));
    }
    if !KNOWN_NAMESPACES
        .iter()
        .any(|ns| typed.type_name.starts_with(ns))
    {
        return Err(node.error(format!("unknown @type \"{}\"", typed.type_url)));
    }
    Ok(not_supported(name.as_deref().unwrap_or(&typed.type_name)))
}

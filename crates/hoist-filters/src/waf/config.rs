//! The WAF filter's configuration: Coraza's JSON (`directives_map`, `default_directives`,
//! `per_authority_directives`) either inside envoy.filters.http.wasm (as a StringValue in
//! `config.configuration`, with `vm_config` taken as opaque) or as the body of the native
//! hoist.filters.http.waf. Every directive set compiles into a rule set at load.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use hoist_config::model::RawTypedConfig;
use hoist_config::reader::{Message, Node};
use hoist_config::ConfigError;
use hoist_waf::RuleSet;

pub const WASM_TYPE_NAME: &str = "envoy.extensions.filters.http.wasm.v3.Wasm";
pub const NATIVE_TYPE_NAME: &str = "hoist.extensions.filters.http.waf.v3.Waf";
const STRING_VALUE: &str = "google.protobuf.StringValue";

pub struct WafConfig {
    pub default: Arc<RuleSet>,
    /// Authority (as the client sent it) → rule set; the default applies to the others.
    pub per_authority: HashMap<String, Arc<RuleSet>>,
}

impl WafConfig {
    pub fn decode(raw: &RawTypedConfig) -> Result<WafConfig, ConfigError> {
        let node = Node::new(&raw.value, raw.yaml_path.clone());
        let mut m = node.message()?;
        let name = raw.type_url.rsplit('/').next().unwrap_or("");
        let config = if name == WASM_TYPE_NAME {
            let mut plugin = m.required("config")?.message()?;
            plugin.opt_string("name")?;
            plugin.opt_string("root_id")?;
            // The Wasm VM is not used: the rules run natively. Its settings are accepted as
            // they are so an operator's Coraza configuration loads unchanged.
            plugin.field("vm_config")?;
            plugin.bool("fail_open", false)?;
            let mut any = plugin.required("configuration")?.message()?;
            let type_url = any.required_string("@type")?;
            if type_url.rsplit('/').next() != Some(STRING_VALUE) {
                return Err(any.error(format!(
                    "configuration @type \"{type_url}\" is not type.googleapis.com/{STRING_VALUE}"
                )));
            }
            let value_node = any.required("value")?;
            let text = value_node.string()?;
            let json: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| value_node.error(format!("not JSON: {e}")))?;
            any.finish()?;
            plugin.finish()?;
            let path = value_node.path().to_string();
            let inner = Node::new(&json, path);
            let mut body = inner.message()?;
            let c = decode_directives(&mut body)?;
            body.finish()?;
            c
        } else {
            decode_directives(&mut m)?
        };
        m.finish()?;
        Ok(config)
    }
}

fn decode_directives(m: &mut Message<'_>) -> Result<WafConfig, ConfigError> {
    let map_node = m.required("directives_map")?;
    let mut sets: HashMap<String, Arc<RuleSet>> = HashMap::new();
    for (name, list) in map_node.entries()? {
        let lines = list.strings()?;
        let rules = compile(&lines, list.path()).map_err(|e| list.error(e))?;
        sets.insert(name.to_string(), Arc::new(rules));
    }
    let default_name = m.required_string("default_directives")?;
    let Some(default) = sets.get(&default_name).cloned() else {
        return Err(m.error(format!(
            "default_directives \"{default_name}\" is not a key of directives_map"
        )));
    };
    let mut per_authority = HashMap::new();
    if let Some(node) = m.field("per_authority_directives")? {
        for (authority, set) in node.entries()? {
            let set_name = set.str()?;
            let Some(rules) = sets.get(set_name) else {
                return Err(set.error(format!("\"{set_name}\" is not a key of directives_map")));
            };
            per_authority.insert(authority.to_string(), rules.clone());
        }
    }
    Ok(WafConfig {
        default,
        per_authority,
    })
}

/// One directive per entry, as Coraza takes them. Relative `Include` paths are resolved from
/// the working directory; Coraza's embedded `@owasp_crs` aliases do not exist here.
fn compile(lines: &[String], path: &str) -> Result<RuleSet, String> {
    if let Some(alias) = lines.iter().find(|l| {
        l.split_whitespace()
            .nth(1)
            .is_some_and(|a| a.starts_with('@'))
    }) {
        return Err(format!(
            "\"{alias}\": Coraza's embedded rule aliases are not available in hoist; Include the rule files by path"
        ));
    }
    let text = lines.join("\n");
    // First line of each entry, to name a failing directive by its index in the list.
    let mut starts = Vec::with_capacity(lines.len());
    let mut line = 1;
    for l in lines {
        starts.push(line);
        line += l.lines().count().max(1);
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let origin = cwd.join(
        Path::new(&format!("{path}.conf"))
            .file_name()
            .unwrap_or_default(),
    );
    RuleSet::from_str(&text, &origin).map_err(|e| {
        // The origin is synthetic: name the directive by its index instead of a file line.
        if e.file == origin {
            let index = starts.iter().rposition(|&s| s <= e.line).unwrap_or(0);
            format!("[{index}]: {}", e.message)
        } else {
            e.to_string()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn raw(type_name: &str, value: serde_json::Value) -> RawTypedConfig {
        RawTypedConfig {
            type_url: format!("type.googleapis.com/{type_name}"),
            value,
            yaml_path: "f.typed_config".into(),
        }
    }

    fn coraza(json: serde_json::Value) -> RawTypedConfig {
        raw(
            WASM_TYPE_NAME,
            json!({"config": {
                "name": "coraza-filter", "root_id": "",
                "vm_config": {"runtime": "envoy.wasm.runtime.v8", "code": {"local": {"filename": "x.wasm"}}},
                "configuration": {"@type": "type.googleapis.com/google.protobuf.StringValue", "value": json.to_string()}
            }}),
        )
    }

    fn err(r: Result<WafConfig, ConfigError>) -> String {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => format!("{}: {}", e.path, e.message),
        }
    }

    #[test]
    fn coraza_wasm_shape_loads_with_per_authority_sets() {
        let c = WafConfig::decode(&coraza(json!({
            "directives_map": {
                "strict": ["SecRuleEngine On", "SecRule ARGS \"@rx x\" \"id:1,deny\""],
                "off": ["SecRuleEngine Off"]
            },
            "default_directives": "strict",
            "per_authority_directives": {"legacy.example.com": "off"}
        })))
        .expect("loads");
        assert_eq!(c.default.rule_count(), 1);
        assert_eq!(
            c.per_authority
                .get("legacy.example.com")
                .map(|r| r.rule_count()),
            Some(0)
        );
    }

    #[test]
    fn native_shape_takes_the_json_as_its_body() {
        let c = WafConfig::decode(&raw(
            NATIVE_TYPE_NAME,
            json!({"directives_map": {"d": ["SecAction \"id:5,pass\""]}, "default_directives": "d"}),
        ))
        .expect("loads");
        assert_eq!(c.default.rule_count(), 1);
        let e = err(WafConfig::decode(&raw(
            NATIVE_TYPE_NAME,
            json!({"directives_map": {"d": []}, "default_directives": "d", "extra": 1}),
        )));
        assert!(e.contains("extra"), "{e}");
    }

    #[test]
    fn faults_name_their_place() {
        let e = err(WafConfig::decode(&coraza(
            json!({"directives_map": {"d": []}, "default_directives": "nope"}),
        )));
        assert!(
            e.contains("default_directives \"nope\" is not a key"),
            "{e}"
        );
        let e = err(WafConfig::decode(&coraza(json!({
            "directives_map": {"d": ["SecRuleEngine On", "SecRule ARGS \"@bogus\" \"id:1\""]},
            "default_directives": "d"
        }))));
        assert!(
            e.contains("directives_map.d") && e.contains("[1]: unsupported operator @bogus"),
            "{e}"
        );
        let e = err(WafConfig::decode(&coraza(json!({
            "directives_map": {"d": ["Include @owasp_crs/*.conf"]}, "default_directives": "d"
        }))));
        assert!(e.contains("Include the rule files by path"), "{e}");
        let mut bad = coraza(json!({"directives_map": {"d": []}, "default_directives": "d"}));
        bad.value["config"]["configuration"]["@type"] =
            json!("type.googleapis.com/google.protobuf.Struct");
        assert!(err(WafConfig::decode(&bad)).contains("StringValue"));
    }
}

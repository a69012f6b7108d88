//! Where a configuration comes from: the `-c` file and the `--config-yaml` string, parsed and
//! merged into one tree before it is decoded.

use std::path::Path;

use serde_json::{Map, Value};

use crate::reader::snake_name;
use crate::ConfigError;

/// Reads and parses the configuration file. JSON is YAML, so one parser serves both.
pub(crate) fn read_file(path: &Path) -> Result<Value, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new(
            "",
            format!("cannot read configuration file {}: {e}", path.display()),
        )
    })?;
    parse(&text, &path.display().to_string())
}

/// Parses one YAML document. `origin` names it in errors (a file name or `--config-yaml`).
/// Duplicate keys are errors; anchors, aliases and `<<` merge keys are expanded.
pub(crate) fn parse(text: &str, origin: &str) -> Result<Value, ConfigError> {
    let value: Value = serde_saphyr::from_str(text).map_err(|e| {
        let rendered = e.render_with_options(serde_saphyr::render_options! {
            formatter: &serde_saphyr::UserMessageFormatter,
            snippets: serde_saphyr::SnippetMode::Off,
        });
        ConfigError::new("", format!("{origin}: invalid YAML: {rendered}"))
    })?;
    match value {
        // An empty document is an empty bootstrap, as in Envoy.
        Value::Null => Ok(Value::Object(Map::new())),
        Value::Object(_) => Ok(value),
        other => Err(ConfigError::new(
            "",
            format!(
                "{origin}: the configuration must be a mapping (a Bootstrap), got {}",
                crate::reader::describe(&other)
            ),
        )),
    }
}

/// Merges `over` into `base` the way protobuf's `MergeFrom` merges two Bootstraps: messages and
/// maps field by field, repeated fields appended, scalars replaced. A field may be spelled in
/// snake_case in one and lowerCamelCase in the other; it is the same field. `null` means unset,
/// so it changes nothing.
pub(crate) fn merge(base: &mut Value, over: Value) {
    match (base, over) {
        (_, Value::Null) => {}
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                let canonical = snake_name(&key);
                let existing = base.keys().find(|k| snake_name(k) == canonical).cloned();
                match existing {
                    Some(k) => {
                        if let Some(slot) = base.get_mut(&k) {
                            merge(slot, value);
                        }
                    }
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (Value::Array(base), Value::Array(over)) => base.extend(over),
        (base, over) => *base = over,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_appends_lists_replaces_scalars_and_merges_mappings() {
        let mut base = json!({"a": {"x": 1, "y": [1]}, "s": "old", "l": [1, 2]});
        merge(
            &mut base,
            json!({"a": {"y": [2], "z": true}, "s": "new", "l": [3]}),
        );
        assert_eq!(
            base,
            json!({"a": {"x": 1, "y": [1, 2], "z": true}, "s": "new", "l": [1, 2, 3]})
        );
    }

    #[test]
    fn merge_treats_camel_and_snake_spellings_as_one_field() {
        let mut base = json!({"stat_prefix": "a", "max_request_headers_kb": 60});
        merge(&mut base, json!({"statPrefix": "b"}));
        assert_eq!(
            base,
            json!({"stat_prefix": "b", "max_request_headers_kb": 60})
        );
    }

    #[test]
    fn merge_ignores_null_overrides() {
        let mut base = json!({"a": 1});
        merge(&mut base, json!({"a": null}));
        assert_eq!(base, json!({"a": 1}));
    }

    #[test]
    fn parse_rejects_duplicate_keys_and_names_the_origin() {
        let err = parse("a: 1\na: 2\n", "envoy.yaml").unwrap_err();
        assert_eq!(
            err.to_string(),
            "envoy.yaml: invalid YAML: duplicate mapping key `a` is not allowed here at line 2, column 1"
        );
    }

    #[test]
    fn parse_expands_anchors_aliases_and_merge_keys() {
        let v = parse("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\ne: *b\n", "t").unwrap();
        assert_eq!(v["d"], json!({"x": 1, "y": 3}));
        assert_eq!(v["e"], json!({"x": 1, "y": 2}));
    }

    #[test]
    fn parse_rejects_a_non_mapping_root() {
        let err = parse("- 1\n", "t").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t: the configuration must be a mapping (a Bootstrap), got a list"
        );
    }

    #[test]
    fn parse_reads_an_empty_document_as_an_empty_bootstrap() {
        assert_eq!(parse("# nothing\n", "t").unwrap(), json!({}));
    }
}

//! Helpers for the WAF tests: where the CRS is, its directives as the engine bench and corpus
//! test load them, and the two filter configurations that carry them (Coraza's on Envoy and
//! the native name).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// The CRS checkout (rules/ and crs-setup.conf.example): `HOIST_CRS_DIR`, else
/// `../shared/crs` next to the workspace.
pub fn crs_dir() -> Option<PathBuf> {
    shared_crs("HOIST_CRS_DIR", "", |d| d.join("rules").is_dir())
}

/// Its regression corpus: `HOIST_CRS_TESTS`, else `../shared/crs/tests`.
pub fn crs_tests() -> Option<PathBuf> {
    shared_crs("HOIST_CRS_TESTS", "tests", Path::is_dir)
}

/// `var`'s directory, else `below` in `../shared/crs`; `None` (the test is skipped) only
/// with `HOIST_SKIP_CRS_TESTS=1`.
fn shared_crs(var: &str, below: &str, present: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let dir = match std::env::var_os(var) {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../../shared/crs")
            .join(below),
    };
    if present(&dir) {
        return Some(dir);
    }
    assert!(
        std::env::var_os("HOIST_SKIP_CRS_TESTS").is_some_and(|v| v == "1"),
        "CRS not found at {}: set {var} or HOIST_SKIP_CRS_TESTS=1",
        dir.display()
    );
    None
}

pub fn base_conf() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hoist-waf/conf/base.conf")
}

/// Coraza's JSON with one directive set, as a JSON string.
pub fn coraza_json(directives: &[String]) -> String {
    let list: Vec<String> = directives.iter().map(|d| format!("{d:?}")).collect();
    format!(
        "{{\"directives_map\": {{\"default\": [{}]}}, \"default_directives\": \"default\"}}",
        list.join(", ")
    )
}

/// Coraza's JSON with several directive sets (`sets`: key, directives), `default` for every
/// request but the authorities `per_authority` maps (authority, key).
pub fn coraza_json_sets(
    sets: &[(&str, &[String])],
    default: &str,
    per_authority: &[(&str, &str)],
) -> String {
    let map: Vec<String> = (sets.iter())
        .map(|(key, directives)| {
            let list: Vec<String> = directives.iter().map(|d| format!("{d:?}")).collect();
            format!("{key:?}: [{}]", list.join(", "))
        })
        .collect();
    let authorities: Vec<String> = (per_authority.iter())
        .map(|(authority, key)| format!("{authority:?}: {key:?}"))
        .collect();
    format!(
        "{{\"directives_map\": {{{}}}, \"default_directives\": {default:?}, \"per_authority_directives\": {{{}}}}}",
        map.join(", "),
        authorities.join(", ")
    )
}

/// envoy.filters.http.wasm as operators configure Coraza on Envoy.
pub fn wasm_filter(directives: &[String]) -> String {
    wasm_filter_json(&coraza_json(directives))
}

/// envoy.filters.http.wasm with Coraza's JSON `json`.
pub fn wasm_filter_json(json: &str) -> String {
    format!(
        "- name: envoy.filters.http.wasm\n  typed_config:\n    \"@type\": type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm\n    config:\n      name: coraza-filter\n      root_id: \"\"\n      configuration:\n        \"@type\": type.googleapis.com/google.protobuf.StringValue\n        value: {}\n      vm_config:\n        runtime: envoy.wasm.runtime.v8\n        vm_id: coraza-filter_vm_id\n        code: {{local: {{filename: coraza-http-wasm.wasm}}}}",
        serde_quote(json)
    )
}

/// A YAML single-quoted scalar.
pub fn serde_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

pub fn crs_directives(crs: &Path) -> Vec<String> {
    vec![
        format!("Include {}", base_conf().display()),
        format!("Include {}", crs.join("crs-setup.conf.example").display()),
        format!("Include {}", crs.join("rules/*.conf").display()),
    ]
}

/// hoist.filters.http.waf, the native name, with Coraza's JSON `json` written as a YAML flow
/// mapping.
pub fn native_filter_json(json: &str) -> String {
    format!(
        "- name: hoist.filters.http.waf\n  typed_config: {}",
        json.replacen(
            '{',
            "{\"@type\": \"type.googleapis.com/hoist.extensions.filters.http.waf.v3.Waf\", ",
            1
        )
    )
}

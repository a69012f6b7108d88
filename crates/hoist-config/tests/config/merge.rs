//! --config-path with --config-yaml merged over it, as Envoy merges (proto MergeFrom).

use std::path::Path;

use hoist_config::model::AccessLogSink;
use serde_json::json;

use crate::common::*;

#[test]
fn config_yaml_appends_listeners_and_overrides_scalars() {
    let dir = TempDir::new("merge");
    let mut base = plain();
    set(
        &mut base,
        "/admin",
        json!({"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9901}}}),
    );
    let file = dir.file("envoy.json", base.to_string().as_bytes());

    let overlay = r#"
admin: {address: {socket_address: {port_value: 9902}}}
static_resources:
  listeners:
  - name: second
    address: {socket_address: {address: 127.0.0.1, port_value: 8081}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          statPrefix: second
          route_config: {virtual_hosts: [{name: vh, domains: ["*"], routes: [{match: {prefix: /}, direct_response: {status: 204}}]}]}
          http_filters: [{name: envoy.filters.http.router, typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}]
"#;
    let b = hoist_config::load(Some(Path::new(&file)), Some(overlay)).unwrap();
    assert_eq!(b.admin.unwrap().address.addr.to_string(), "127.0.0.1:9902");
    let names: Vec<_> = b.listeners.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["http", "second"]);
    assert_eq!(b.listeners[1].filter_chains[0].hcm.stat_prefix, "second");
    // The merged tree is what /config_dump shows.
    assert_eq!(
        b.source["admin"]["address"]["socket_address"]["port_value"],
        json!(9902)
    );
    assert_eq!(
        b.source["static_resources"]["listeners"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
}

#[test]
fn either_spelling_overrides_the_same_field() {
    let dir = TempDir::new("merge-camel");
    let mut base = plain();
    set(&mut base, "/node", json!({"id": "a", "cluster": "edge"}));
    set(
        &mut base,
        "/admin",
        json!({"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9901}},
                                    "access_log_path": "/dev/null"}),
    );
    let file = dir.file("envoy.yaml", base.to_string().as_bytes());
    // Were the spellings two fields, the decoder would reject access_log_path given twice.
    let b = hoist_config::load(
        Some(Path::new(&file)),
        Some("node: {id: b}\nadmin: {accessLogPath: /tmp/admin.log}"),
    )
    .unwrap();
    assert_eq!((b.node.id.as_str(), b.node.cluster.as_str()), ("b", "edge"));
    let logs = b.admin.unwrap().access_log;
    assert_eq!(logs.len(), 1);
    assert_eq!(logs[0].sink, AccessLogSink::File("/tmp/admin.log".into()));
    assert_eq!(
        b.source["admin"]["access_log_path"],
        json!("/tmp/admin.log")
    );
}

#[test]
fn config_yaml_alone_and_its_faults() {
    let b = hoist_config::load(None, Some(&plain().to_string())).unwrap();
    assert_eq!(b.listeners.len(), 1);

    let e = hoist_config::load(None, Some("static_resources: [")).unwrap_err();
    assert!(
        e.to_string().starts_with("--config-yaml: invalid YAML: "),
        "{e}"
    );

    let dir = TempDir::new("merge-bad");
    let file = dir.file("envoy.yaml", plain().to_string().as_bytes());
    let e = hoist_config::load(Some(Path::new(&file)), Some("static_resources: {bogus: 1}"))
        .unwrap_err();
    assert_eq!(e.to_string(), "static_resources: unknown field \"bogus\"");

    let bad = dir.file("bad.yaml", b"admin: [\n");
    let e = hoist_config::load(Some(Path::new(&bad)), None).unwrap_err();
    assert!(
        e.to_string().starts_with(&format!("{bad}: invalid YAML: ")),
        "{e}"
    );
}

//! Bootstrap, node, admin, static_resources, addresses; YAML-level faults.

use hoist_config::model::{AccessLogSink, LogFormat, DEFAULT_FORMAT};
use serde_json::json;

use crate::common::*;

#[test]
fn unknown_and_unsupported_top_level_fields() {
    let mut v = plain();
    set(&mut v, "/foo", json!(1));
    assert_eq!(error(&v), "unknown field \"foo\"");

    let mut v = plain();
    set(&mut v, "/layered_runtime", json!({"layers": []}));
    assert_eq!(
        error(&v),
        "field \"layered_runtime\" is not supported by hoist yet"
    );
}

#[test]
fn clusters_are_decoded_for_filters_and_checked() {
    let mut v = plain();
    set(&mut v, "/static_resources/clusters", json!([]));
    assert!(ok(&v).clusters.is_empty());
    set(
        &mut v,
        "/static_resources/clusters",
        json!([{"name": "jwks", "connect_timeout": "2s", "load_assignment": {"endpoints": [
            {"lb_endpoints": [{"endpoint": {"address": {"socket_address":
                {"address": "127.0.0.1", "port_value": 9443}}}}]}]}}]),
    );
    let b = ok(&v);
    assert_eq!(b.clusters.len(), 1);
    assert_eq!(b.clusters[0].name, "jwks");
    assert_eq!(b.clusters[0].connect_timeout.as_secs(), 2);
    set(
        &mut v,
        "/static_resources/clusters",
        json!([{"name": "backend"}]),
    );
    assert_eq!(
        error(&v),
        "static_resources.clusters[0]: missing required field \"load_assignment\""
    );
}

#[test]
fn node_keeps_id_and_cluster_and_accepts_metadata_and_locality() {
    let mut v = plain();
    set(
        &mut v,
        "/node",
        json!({"id": "n1", "cluster": "edge", "metadata": {"any": {"thing": [1]}},
               "locality": {"region": "eu", "zone": "a", "sub_zone": "1"}}),
    );
    let b = ok(&v);
    assert_eq!(
        (b.node.id.as_str(), b.node.cluster.as_str()),
        ("n1", "edge")
    );

    set(&mut v, "/node/locality/planet", json!("earth"));
    assert_eq!(error(&v), "node.locality: unknown field \"planet\"");
}

#[test]
fn admin_address_and_legacy_access_log_path() {
    let mut v = plain();
    set(
        &mut v,
        "/admin",
        json!({"address": {"socket_address": {"address": "127.0.0.1", "port_value": 9901}},
               "access_log_path": "/dev/null"}),
    );
    let b = ok(&v);
    let admin = b.admin.expect("admin");
    assert_eq!(admin.address.addr.to_string(), "127.0.0.1:9901");
    assert_eq!(admin.access_log.len(), 1);
    assert_eq!(
        admin.access_log[0].sink,
        AccessLogSink::File("/dev/null".into())
    );
    assert_eq!(
        admin.access_log[0].format,
        LogFormat::Text(DEFAULT_FORMAT.into())
    );
    assert_eq!(admin.access_log[0].yaml_path, "admin.access_log_path");

    set(&mut v, "/admin", json!({"access_log_path": "/dev/null"}));
    assert_eq!(error(&v), "admin: missing required field \"address\"");
}

#[test]
fn no_admin_block_means_no_admin_listener() {
    assert!(ok(&plain()).admin.is_none());
}

#[test]
fn the_source_tree_is_kept_for_config_dump() {
    let v = plain();
    assert_eq!(ok(&v).source, v);
}

#[test]
fn a_wrong_type_at_depth_names_the_path() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{LISTENER}/address/socket_address/port_value"),
        json!("http"),
    );
    assert_eq!(
        error(&v),
        format!(
            "{LISTENER_PATH}.address.socket_address.port_value: expected an integer, got \"http\""
        )
    );
    set(
        &mut v,
        &format!("{LISTENER}/address/socket_address/port_value"),
        json!(65536),
    );
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.address.socket_address.port_value: value 65536 is out of range 0..=65535")
    );
    set(
        &mut v,
        &format!("{LISTENER}/address"),
        json!("127.0.0.1:80"),
    );
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.address: expected a mapping, got \"127.0.0.1:80\"")
    );
}

#[test]
fn addresses_are_tcp_ip_literals() {
    let sock = format!("{LISTENER}/address/socket_address");
    let mut v = plain();
    set(&mut v, &format!("{sock}/address"), json!("localhost"));
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.address.socket_address.address: address \"localhost\" is not an IP address (hoist does not resolve host names)")
    );

    let mut v = plain();
    set(&mut v, &format!("{sock}/address"), json!("::1"));
    set(&mut v, &format!("{sock}/ipv4_compat"), json!(true));
    assert_eq!(ok(&v).listeners[0].address.addr.to_string(), "[::1]:8080");
    assert_eq!(ok(&v).listeners[0].address.stat_name(), "::1_8080");

    let mut v = plain();
    set(&mut v, &format!("{sock}/protocol"), json!("UDP"));
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.address.socket_address.protocol: protocol UDP is not supported by hoist yet")
    );

    let mut v = plain();
    set(
        &mut v,
        &format!("{LISTENER}/address"),
        json!({"pipe": {"path": "/tmp/s"}}),
    );
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.address: field \"pipe\" is not supported by hoist yet")
    );
}

#[test]
fn listener_names_are_generated_and_must_be_unique() {
    let mut v = plain();
    remove(&mut v, &format!("{LISTENER}/name"));
    assert_eq!(ok(&v).listeners[0].name, "listener_0");

    let mut v = plain();
    let mut second = v.pointer(LISTENER).unwrap().clone();
    second["address"]["socket_address"]["port_value"] = json!(8081);
    set(&mut v, "/static_resources/listeners/1", second.clone());
    assert_eq!(
        error(&v),
        "static_resources.listeners[1]: listener name \"http\" is already used by static_resources.listeners[0]"
    );

    second["name"] = json!("other");
    second["address"]["socket_address"]["port_value"] = json!(8080);
    set(&mut v, "/static_resources/listeners/1", second);
    assert_eq!(
        error(&v),
        "static_resources.listeners[1]: address 127.0.0.1:8080 is already used by listener \"http\""
    );
}

#[test]
fn camel_case_names_are_accepted_everywhere_and_paths_keep_them() {
    let yaml = r#"
staticResources:
  listeners:
  - name: http
    perConnectionBufferLimitBytes: 32768
    address: {socketAddress: {address: 127.0.0.1, portValue: 8080}}
    filterChains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typedConfig:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          statPrefix: ingress
          maxRequestHeadersKb: 96
          routeConfig:
            maxDirectResponseBodySizeBytes: 8192
            virtualHosts:
            - name: vh
              domains: ["*"]
              routes:
              - match: {pathSeparatedPrefix: /api}
                directResponse: {status: 204}
          httpFilters:
          - name: envoy.filters.http.router
            typedConfig: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
"#;
    let b = hoist_config::load_str(yaml).unwrap();
    let l = &b.listeners[0];
    assert_eq!(l.per_connection_buffer_limit_bytes, 32768);
    let hcm = &l.filter_chains[0].hcm;
    assert_eq!(hcm.stat_prefix, "ingress");
    assert_eq!(hcm.max_request_headers_kb, 96);
    assert_eq!(hcm.route_config.max_direct_response_body_size_bytes, 8192);

    let bad = yaml.replace("maxRequestHeadersKb: 96", "maxRequestHeadersKb: 0");
    assert_eq!(
        yaml_error(&bad),
        "staticResources.listeners[0].filterChains[0].filters[0].typedConfig.maxRequestHeadersKb: value 0 is out of range 1..=8192"
    );
}

#[test]
fn yaml_faults_are_reported_with_line_and_column() {
    assert_eq!(
        yaml_error("admin: {address: 1\n"),
        "configuration: invalid YAML: unclosed bracket '{' at line 1, column 8"
    );
    assert_eq!(
        yaml_error("admin: 1\nadmin: 2\n"),
        "configuration: invalid YAML: duplicate mapping key `admin` is not allowed here at line 2, column 1"
    );
    assert_eq!(
        yaml_error("- 1\n"),
        "configuration: the configuration must be a mapping (a Bootstrap), got a list"
    );
}

#[test]
fn anchors_aliases_and_merge_keys_work_in_a_configuration() {
    let yaml = r#"
x-route: &route
  match: {prefix: /}
  direct_response: {status: 200}
x-router: &router
  name: envoy.filters.http.router
  typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
"#;
    // Unknown top-level keys are still errors: anchors must live inside known fields.
    assert_eq!(yaml_error(yaml), "unknown field \"x-route\"");

    let yaml = r#"
static_resources:
  listeners:
  - &listener
    name: a
    address: {socket_address: {address: 127.0.0.1, port_value: 8080}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: a
          route_config:
            virtual_hosts:
            - name: vh
              domains: ["*"]
              routes:
              - &route {match: {prefix: /}, direct_response: {status: 200}}
              - <<: *route
                name: second
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  - <<: *listener
    name: b
    address: {socket_address: {address: 127.0.0.1, port_value: 8081}}
"#;
    let b = hoist_config::load_str(yaml).unwrap();
    assert_eq!(b.listeners.len(), 2);
    assert_eq!(b.listeners[1].name, "b");
    let routes = &b.listeners[1].filter_chains[0]
        .hcm
        .route_config
        .virtual_hosts[0]
        .routes;
    assert_eq!(routes[1].name, "second");
}

#[test]
fn load_needs_a_path_or_yaml_and_names_an_unreadable_file() {
    let e = hoist_config::load(None, None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no configuration given: use --config-path (-c) and/or --config-yaml"
    );
    let e = hoist_config::load(Some(std::path::Path::new("/nonexistent/envoy.yaml")), None)
        .unwrap_err();
    assert_eq!(e.path, "");
    assert_eq!(
        e.to_string(),
        "cannot read configuration file /nonexistent/envoy.yaml: No such file or directory (os error 2)"
    );
}

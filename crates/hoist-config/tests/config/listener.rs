//! Listener, filter chains, filter_chain_match, network filters, transport sockets, and the
//! hoist metadata extension.

use hoist_config::model::TlsOffloadMode;
use serde_json::json;

use crate::common::*;

#[test]
fn listener_defaults() {
    let b = ok(&plain());
    let l = &b.listeners[0];
    assert_eq!(l.name, "http");
    assert_eq!(l.per_connection_buffer_limit_bytes, 1_048_576);
    assert_eq!(l.stat_prefix, None);
    assert_eq!(l.tls_offload, None);
    assert!(l.default_filter_chain.is_none());
    assert_eq!(l.yaml_path, LISTENER_PATH);
    assert_eq!(l.filter_chains[0].yaml_path, CHAIN_PATH);
    assert!(l.filter_chains[0].tls.is_none());
}

#[test]
fn unsupported_listener_fields() {
    let mut v = plain();
    set(&mut v, &format!("{LISTENER}/freebind"), json!(true));
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}: field \"freebind\" is not supported by hoist yet")
    );
}

#[test]
fn tls_inspector_is_accepted_other_listener_filters_are_not() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{LISTENER}/listener_filters"),
        json!([
            {"name": "envoy.filters.listener.tls_inspector"},
            {"name": "envoy.filters.listener.tls_inspector", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector"}}
        ]),
    );
    ok(&v);
    set(
        &mut v,
        &format!("{LISTENER}/listener_filters/1"),
        json!({"name": "envoy.filters.listener.http_inspector", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector"}}),
    );
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.listener_filters[1]: listener filter \"envoy.filters.listener.http_inspector\" is not supported by hoist yet")
    );
}

#[test]
fn enable_reuse_port_true_only_and_traffic_direction_accepted() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{LISTENER}/enable_reuse_port"),
        json!(true),
    );
    set(
        &mut v,
        &format!("{LISTENER}/traffic_direction"),
        json!("INBOUND"),
    );
    ok(&v);
    set(
        &mut v,
        &format!("{LISTENER}/enable_reuse_port"),
        json!(false),
    );
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.enable_reuse_port: false is not supported by hoist: every worker binds its own SO_REUSEPORT socket")
    );
    set(
        &mut v,
        &format!("{LISTENER}/enable_reuse_port"),
        json!(true),
    );
    set(
        &mut v,
        &format!("{LISTENER}/traffic_direction"),
        json!("SIDEWAYS"),
    );
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.traffic_direction: unknown value \"SIDEWAYS\"; expected one of UNSPECIFIED, INBOUND, OUTBOUND")
    );
}

#[test]
fn hoist_metadata_sets_tls_offload() {
    let yaml = |mode: &str| {
        format!(
            r#"
static_resources:
  listeners:
  - address: {{socket_address: {{address: 127.0.0.1, port_value: 8080}}}}
    metadata:
      filter_metadata:
        hoist: {{tls_offload: {mode}}}
        com.example.team: {{owner: edge, free: [form, data]}}
    filter_chains:
    - filters:
      - name: hcm
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: a
          route_config: {{virtual_hosts: [{{name: vh, domains: ["*"], routes: [{{match: {{prefix: /}}, direct_response: {{status: 200}}}}]}}]}}
          http_filters: [{{name: router, typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}}}]
"#
        )
    };
    let mode = |m: &str| hoist_config::load_str(&yaml(m)).map(|b| b.listeners[0].tls_offload);
    assert_eq!(mode("auto"), Ok(Some(TlsOffloadMode::Auto)));
    // A bare YAML `off` is the boolean false; it still means off.
    assert_eq!(mode("off"), Ok(Some(TlsOffloadMode::Off)));
    assert_eq!(mode("\"off\""), Ok(Some(TlsOffloadMode::Off)));
    assert_eq!(mode("require"), Ok(Some(TlsOffloadMode::Require)));
    assert_eq!(
        yaml_error(&yaml("always")),
        "static_resources.listeners[0].metadata.filter_metadata.hoist.tls_offload: unknown value \"always\"; expected one of auto, off, require"
    );
    assert_eq!(
        yaml_error(&yaml("auto, offload: yes")),
        "static_resources.listeners[0].metadata.filter_metadata.hoist: unknown field \"offload\""
    );
}

#[test]
fn a_listener_needs_a_filter_chain() {
    let mut v = plain();
    set(&mut v, &format!("{LISTENER}/filter_chains"), json!([]));
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}: no filter chains specified")
    );

    let chain = plain().pointer(CHAIN).unwrap().clone();
    set(&mut v, &format!("{LISTENER}/default_filter_chain"), chain);
    let b = ok(&v);
    let default = b.listeners[0].default_filter_chain.as_ref().unwrap();
    assert_eq!(
        default.yaml_path,
        format!("{LISTENER_PATH}.default_filter_chain")
    );
}

#[test]
fn filter_chain_match_server_names() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{CHAIN}/filter_chain_match"),
        json!({"server_names": ["WWW.Example.com", "*.example.org"],
               "transport_protocol": "tls", "application_protocols": ["h2", "http/1.1"]}),
    );
    let b = ok(&v);
    let m = &b.listeners[0].filter_chains[0].filter_chain_match;
    assert_eq!(m.server_names, ["www.example.com", "*.example.org"]);
    assert_eq!(m.transport_protocol.as_deref(), Some("tls"));
    assert_eq!(m.application_protocols, ["h2", "http/1.1"]);

    set(
        &mut v,
        &format!("{CHAIN}/filter_chain_match/server_names/1"),
        json!("a*.example.org"),
    );
    assert_eq!(
        error(&v),
        format!("{CHAIN_PATH}.filter_chain_match.server_names[1]: server name \"a*.example.org\" is not a host name or a \"*.\" wildcard of one")
    );

    set(
        &mut v,
        &format!("{CHAIN}/filter_chain_match"),
        json!({"transport_protocol": "quic"}),
    );
    assert_eq!(
        error(&v),
        format!("{CHAIN_PATH}.filter_chain_match.transport_protocol: unknown transport_protocol \"quic\"; expected tls or raw_buffer")
    );

    set(
        &mut v,
        &format!("{CHAIN}/filter_chain_match"),
        json!({"destination_port": 443}),
    );
    assert_eq!(
        error(&v),
        format!("{CHAIN_PATH}.filter_chain_match: field \"destination_port\" is not supported by hoist yet")
    );
}

#[test]
fn chains_with_the_same_match_are_an_error() {
    let mut v = plain();
    let mut chain = v.pointer(CHAIN).unwrap().clone();
    chain["filter_chain_match"] = json!({"server_names": ["a.example.com", "b.example.com"]});
    set(&mut v, CHAIN, chain.clone());
    chain["filter_chain_match"] = json!({"server_names": ["c.example.com"]});
    set(
        &mut v,
        &format!("{LISTENER}/filter_chains/1"),
        chain.clone(),
    );
    ok(&v);

    chain["filter_chain_match"] = json!({"server_names": ["B.example.com"]});
    set(&mut v, &format!("{LISTENER}/filter_chains/2"), chain);
    assert_eq!(
        error(&v),
        format!("{LISTENER_PATH}.filter_chains[2]: multiple filter chains with the same matching rules are defined (see {CHAIN_PATH})")
    );
}

#[test]
fn the_network_filter_is_one_http_connection_manager() {
    let filters = format!("{CHAIN}/filters");
    let mut v = plain();
    set(
        &mut v,
        &format!("{filters}/0"),
        json!({"name": "envoy.filters.network.tcp_proxy", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
            "stat_prefix": "tcp", "cluster": "backend"}}),
    );
    assert_eq!(
        error(&v),
        format!("{CHAIN_PATH}.filters[0]: network filter \"envoy.filters.network.tcp_proxy\" is not supported by hoist yet")
    );

    let mut v = plain();
    set(&mut v, &format!("{HCM}/@type"), json!(ROUTER_TYPE));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}: typed_config @type \"{ROUTER_TYPE}\" does not match \"{HCM_TYPE}\"")
    );

    // Without a name that says what was meant, a foreign @type is just unknown.
    let mut v = plain();
    set(
        &mut v,
        &format!("{HCM}/@type"),
        json!("type.googleapis.com/acme.Hcm"),
    );
    remove(&mut v, &format!("{CHAIN}/filters/0/name"));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}: unknown @type \"type.googleapis.com/acme.Hcm\"")
    );

    let mut v = plain();
    remove(&mut v, &format!("{HCM}/@type"));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}: missing required field \"@type\"")
    );

    let mut v = plain();
    set(&mut v, &filters, json!([]));
    assert_eq!(
        error(&v),
        format!("{CHAIN_PATH}: missing required field \"filters\" (one envoy.filters.network.http_connection_manager)")
    );

    let mut v = plain();
    let hcm = v.pointer(&format!("{filters}/0")).unwrap().clone();
    set(&mut v, &format!("{filters}/1"), hcm);
    assert_eq!(
        error(&v),
        format!("{CHAIN_PATH}.filters[1]: a filter chain has exactly one network filter, the http_connection_manager")
    );
}

#[test]
fn a_typed_struct_wrapper_is_unwrapped() {
    let mut v = plain();
    let mut inner = hcm();
    inner.as_object_mut().unwrap().shift_remove("@type");
    set(
        &mut v,
        &format!("{CHAIN}/filters/0/typed_config"),
        json!({"@type": "type.googleapis.com/xds.type.v3.TypedStruct",
               "type_url": HCM_TYPE, "value": inner}),
    );
    assert_eq!(
        ok(&v).listeners[0].filter_chains[0].hcm.stat_prefix,
        "ingress_http"
    );
    set(&mut v, &format!("{HCM}/value/bogus"), json!(1));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}.value: unknown field \"bogus\"")
    );
}

#[test]
fn transport_sockets() {
    // The example from the design: an unknown field at depth.
    let mut v = tls();
    set(&mut v, &format!("{CHAIN}/transport_socket/foo"), json!(1));
    assert_eq!(
        error(&v),
        "static_resources.listeners[0].filter_chains[0].transport_socket: unknown field \"foo\""
    );

    let mut v = plain();
    set(
        &mut v,
        &format!("{CHAIN}/transport_socket"),
        json!({"name": "envoy.transport_sockets.raw_buffer"}),
    );
    assert!(ok(&v).listeners[0].filter_chains[0].tls.is_none());
    set(
        &mut v,
        &format!("{CHAIN}/transport_socket"),
        json!({"name": "raw", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"}}),
    );
    assert!(ok(&v).listeners[0].filter_chains[0].tls.is_none());

    set(
        &mut v,
        &format!("{CHAIN}/transport_socket"),
        json!({"name": "envoy.transport_sockets.tls"}),
    );
    assert_eq!(
        error(&v),
        format!("{CHAIN_PATH}.transport_socket: missing required field \"typed_config\"")
    );

    set(
        &mut v,
        &format!("{CHAIN}/transport_socket"),
        json!({"name": "envoy.transport_sockets.alts", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.alts.v3.Alts"}}),
    );
    assert_eq!(
        error(&v),
        format!("{CHAIN_PATH}.transport_socket: transport socket \"envoy.transport_sockets.alts\" is not supported by hoist yet")
    );

    let mut v = tls();
    set(
        &mut v,
        &format!("{TLS}/@type"),
        json!("type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext"),
    );
    assert_eq!(
        error(&v),
        format!("{TLS_PATH}: typed_config @type \"type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext\" does not match \"{TLS_TYPE}\"")
    );
}

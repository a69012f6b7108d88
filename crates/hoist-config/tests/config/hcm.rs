//! HttpConnectionManager: defaults, timeouts, limits, protocol options, http_filters.

use std::time::Duration;

use hoist_config::model::{CodecType, Http2Options};
use serde_json::json;

use crate::common::*;

fn manager(v: &serde_json::Value) -> hoist_config::model::HttpConnectionManager {
    ok(v).listeners[0].filter_chains[0].hcm.clone()
}

#[test]
fn defaults() {
    let h = manager(&plain());
    assert_eq!(h.stat_prefix, "ingress_http");
    assert_eq!(h.codec_type, CodecType::Auto);
    assert_eq!(h.server_name, "envoy");
    assert!(!h.server_header_append_if_absent);
    assert_eq!(h.stream_idle_timeout, Some(Duration::from_secs(300)));
    assert_eq!(h.request_timeout, None);
    assert_eq!(h.request_headers_timeout, None);
    assert_eq!(h.idle_timeout, Some(Duration::from_secs(3600)));
    assert_eq!(h.max_headers_count, 100);
    assert_eq!(h.max_request_headers_kb, 60);
    assert_eq!(h.drain_timeout, Duration::from_secs(5));
    assert!(!h.use_remote_address);
    assert!(h.generate_request_id);
    assert_eq!(h.http2, Http2Options::default());
    assert!(h.http_filters.is_empty());
    assert!(h.access_log.is_empty());
    assert_eq!(h.yaml_path, HCM_PATH);
}

#[test]
fn settings_are_decoded() {
    let mut v = plain();
    for (field, value) in [
        ("codec_type", json!("HTTP2")),
        ("server_name", json!("hoist")),
        ("server_header_transformation", json!("APPEND_IF_ABSENT")),
        ("stream_idle_timeout", json!("0s")),
        ("request_timeout", json!("1.5s")),
        ("request_headers_timeout", json!({"seconds": 2})),
        ("drain_timeout", json!("0.250s")),
        ("max_request_headers_kb", json!(96)),
        ("use_remote_address", json!(true)),
        ("generate_request_id", json!(false)),
        (
            "common_http_protocol_options",
            json!({"idle_timeout": "0s", "max_headers_count": 50}),
        ),
        ("http_protocol_options", json!({})),
        (
            "http2_protocol_options",
            json!({"max_concurrent_streams": 100,
            "initial_stream_window_size": 65536, "initial_connection_window_size": 1048576}),
        ),
    ] {
        set(&mut v, &format!("{HCM}/{field}"), value);
    }
    let h = manager(&v);
    assert_eq!(h.codec_type, CodecType::Http2);
    assert_eq!(h.server_name, "hoist");
    assert!(h.server_header_append_if_absent);
    assert_eq!(h.stream_idle_timeout, None);
    assert_eq!(h.request_timeout, Some(Duration::from_millis(1500)));
    assert_eq!(h.request_headers_timeout, Some(Duration::from_secs(2)));
    assert_eq!(h.drain_timeout, Duration::from_millis(250));
    assert_eq!(h.max_request_headers_kb, 96);
    assert!(h.use_remote_address);
    assert!(!h.generate_request_id);
    assert_eq!(h.idle_timeout, None);
    assert_eq!(h.max_headers_count, 50);
    assert_eq!(
        h.http2,
        Http2Options {
            max_concurrent_streams: 100,
            initial_stream_window_size: 65536,
            initial_connection_window_size: 1_048_576
        }
    );
}

#[test]
fn value_faults() {
    let cases = [
        ("stat_prefix", json!(null), format!("{HCM_PATH}: missing required field \"stat_prefix\"")),
        ("stat_prefix", json!(""), format!("{HCM_PATH}.stat_prefix: must not be empty")),
        ("stream_idle_timeout", json!(300), format!("{HCM_PATH}.stream_idle_timeout: expected a duration such as \"5s\" or \"0.250s\", got 300")),
        ("request_timeout", json!("5m"), format!("{HCM_PATH}.request_timeout: expected a duration such as \"5s\" or \"0.250s\", got \"5m\"")),
        ("max_request_headers_kb", json!(8193), format!("{HCM_PATH}.max_request_headers_kb: value 8193 is out of range 1..=8192")),
        ("codec_type", json!("HTTP3"), format!("{HCM_PATH}.codec_type: codec_type HTTP3 is not supported by hoist yet")),
        ("codec_type", json!("HTTP/2"), format!("{HCM_PATH}.codec_type: unknown value \"HTTP/2\"; expected one of AUTO, HTTP1, HTTP2, HTTP3")),
        ("server_header_transformation", json!("PASS_THROUGH"), format!("{HCM_PATH}.server_header_transformation: server_header_transformation PASS_THROUGH is not supported by hoist yet")),
        ("use_remote_address", json!("true"), format!("{HCM_PATH}.use_remote_address: expected a boolean, got \"true\"")),
        ("server_name", json!("a\nb"), format!("{HCM_PATH}.server_name: \"a\\nb\" is not a valid header value (no NUL, CR or LF; at most 16384 bytes)")),
        ("http_protocol_options", json!({"accept_http_10": true}), format!("{HCM_PATH}.http_protocol_options: field \"accept_http_10\" is not supported by hoist yet")),
        ("http2_protocol_options", json!({"initial_stream_window_size": 1024}), format!("{HCM_PATH}.http2_protocol_options.initial_stream_window_size: value 1024 is out of range 65535..=2147483647")),
        ("common_http_protocol_options", json!({"max_headers_count": 0}), format!("{HCM_PATH}.common_http_protocol_options.max_headers_count: value 0 is out of range 1..=4294967295")),
        ("rds", json!({"route_config_name": "r"}), format!("{HCM_PATH}: field \"rds\" is not supported by hoist yet")),
        ("tracing", json!({}), format!("{HCM_PATH}: field \"tracing\" is not supported by hoist yet")),
        ("route_config", json!(null), format!("{HCM_PATH}: missing required field \"route_config\"")),
    ];
    for (field, value, expected) in cases {
        let mut v = plain();
        set(&mut v, &format!("{HCM}/{field}"), value);
        assert_eq!(error(&v), expected, "{field}");
    }
}

#[test]
fn the_router_must_be_present_and_last() {
    let filters = format!("{HCM}/http_filters");
    let router =
        json!({"name": "envoy.filters.http.router", "typed_config": {"@type": ROUTER_TYPE}});
    let cors = json!({"name": "envoy.filters.http.cors", "typed_config": {
        "@type": "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"}});

    let mut v = plain();
    set(&mut v, &filters, json!([]));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}: the last HTTP filter must be the router (envoy.filters.http.router)")
    );

    set(&mut v, &filters, json!([router, router]));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}.http_filters[0]: the router filter \"envoy.filters.http.router\" must be the last HTTP filter")
    );

    set(&mut v, &filters, json!([cors, router]));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}.http_filters[0]: HTTP filter \"envoy.filters.http.cors\" is not supported by hoist yet")
    );

    // is_optional: Envoy skips filters it does not have.
    let mut optional = cors.clone();
    optional["is_optional"] = json!(true);
    set(&mut v, &filters, json!([optional, router]));
    assert!(manager(&v).http_filters.is_empty());

    let mut wrong = router.clone();
    wrong["typed_config"]["@type"] = cors["typed_config"]["@type"].clone();
    set(&mut v, &filters, json!([wrong]));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}.http_filters[0].typed_config: typed_config @type \"type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors\" does not match \"{ROUTER_TYPE}\"")
    );

    let mut configured = router.clone();
    configured["typed_config"]["suppress_envoy_headers"] = json!(true);
    set(&mut v, &filters, json!([configured]));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}.http_filters[0].typed_config: field \"suppress_envoy_headers\" is not supported by hoist yet")
    );

    let mut disabled = router.clone();
    disabled["disabled"] = json!(true);
    set(&mut v, &filters, json!([disabled]));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}.http_filters[0]: the router filter cannot be disabled")
    );

    let mut misspelt = router;
    misspelt["typed_confg"] = json!({});
    set(&mut v, &filters, json!([misspelt]));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}.http_filters[0]: unknown field \"typed_confg\"")
    );
}

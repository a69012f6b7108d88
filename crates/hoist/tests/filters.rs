//! The HTTP filter chain through the binary: envoy.filters.http.buffer takes the body up to its
//! limit (413 past it), per-route configuration disables it, and an unknown filter is refused.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::*;

fn config_with_buffer() -> String {
    let yaml = bootstrap(&plain_listener("plain", "f", &[], ""));
    // The buffer filter goes before the router; /open disables it per route.
    let yaml = insert_before(
        &yaml,
        "- name: envoy.filters.http.router",
        "- name: envoy.filters.http.buffer\n  typed_config:\n    \"@type\": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.Buffer\n    max_request_bytes: 1024",
    );
    insert_before(
        &yaml,
        "- match: {prefix: /}",
        "- match: {prefix: /open}\n  direct_response: {status: 200, body: {inline_string: \"open\\n\"}}\n  typed_per_filter_config:\n    envoy.filters.http.buffer:\n      \"@type\": type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute\n      disabled: true",
    )
}

#[test]
fn buffer_filter_limits_bodies_and_per_route_config_disables_it() {
    let dir = TempDir::new("filters");
    let cfg = dir.write("envoy.yaml", config_with_buffer());
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let url = format!("http://{}", hoist.addr("plain"));
    let small = "x".repeat(1000);
    let big = "x".repeat(5000);
    let code = |path: &str, body: &str| {
        let out = curl(&[
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "--data-binary",
            body,
            &format!("{url}{path}"),
        ]);
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    assert_eq!(code("/", &small), "200");
    assert_eq!(code("/", &big), "413");
    assert_eq!(code("/open", &big), "200", "disabled per route");
    hoist.wait_stat("http.f.downstream_rq_4xx", 1);
    assert_eq!(hoist.stat("http.f.downstream_rq_too_large"), 1);
}

#[test]
fn an_unknown_filter_is_refused_with_its_path() {
    let dir = TempDir::new("filters-bad");
    let yaml = config_with_buffer()
        .replace("envoy.filters.http.buffer", "envoy.filters.http.cors")
        .replace(
            "envoy.extensions.filters.http.buffer.v3.Buffer\n",
            "envoy.extensions.filters.http.cors.v3.Cors\n",
        );
    let cfg = dir.write("envoy.yaml", yaml);
    let out = Command::new(BIN)
        .args(["--mode", "validate", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("http_filters[0]"), "{text}");
    assert!(text.contains("not supported by hoist yet"), "{text}");
}

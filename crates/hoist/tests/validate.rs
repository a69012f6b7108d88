//! `hoist --mode validate`: the verdict, the exit code and the YAML path of a fault, through the
//! real binary; and start-time refusals (busy port, bad certificate).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::*;

fn validate(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .arg("--mode")
        .arg("validate")
        .args(args)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn a_good_configuration_is_ok() {
    let dir = TempDir::new("validate-ok");
    let cfg = dir.write(
        "envoy.yaml",
        bootstrap(&plain_listener("plain", "p", &[], "")),
    );
    let (code, text) = validate(&["-c", cfg.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.trim(), format!("configuration '{}' OK", cfg.display()));
}

#[test]
fn faults_name_their_yaml_path_and_exit_1() {
    let dir = TempDir::new("validate-bad");
    let good = bootstrap(&plain_listener("plain", "p", &[], ""));
    let cases = [
        (
            good.replace("    filter_chains:", "    bogus: 1\n    filter_chains:"),
            "static_resources.listeners[0]: unknown field \"bogus\"",
        ),
        (
            good.replace(
                "stat_prefix: p",
                "stat_prefix: p\n          codec_type: SPDY",
            ),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.codec_type",
        ),
        (
            good.replace(
                "direct_response: {status: 200, body: {inline_string: \"hello from hoist\\n\"}}",
                "route: {cluster: backend}",
            ),
            "route.cluster: unknown cluster \"backend\" (not in static_resources.clusters)",
        ),
        (
            good.replace(
                "{address: 127.0.0.1, port_value: 0}}\n    filter_chains",
                "{address: 127.0.0.1, port_value: 70000}}\n    filter_chains",
            ),
            "static_resources.listeners[0].address.socket_address.port_value",
        ),
    ];
    for (yaml, want) in cases {
        let cfg = dir.write("bad.yaml", &yaml);
        let (code, text) = validate(&["-c", cfg.to_str().unwrap()]);
        assert_eq!(code, 1, "{text}\n---\n{yaml}");
        assert!(text.contains(want), "expected {want:?} in {text:?}");
    }
}

#[test]
fn config_yaml_alone_and_merged() {
    let dir = TempDir::new("validate-yaml");
    let base = bootstrap(&plain_listener("plain", "p", &[], ""));
    let (code, text) = validate(&["--config-yaml", &base]);
    assert_eq!(code, 0, "{text}");
    let cfg = dir.write("envoy.yaml", &base);
    let (code, text) = validate(&[
        "-c",
        cfg.to_str().unwrap(),
        "--config-yaml",
        "static_resources: {listeners: [{name: x, bogus: 1}]}",
    ]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("static_resources.listeners[1]"), "{text}");
}

#[test]
fn a_missing_file_and_a_bad_certificate_are_refused() {
    let dir = TempDir::new("validate-cert");
    let cert = Cert {
        cert: dir.write("c.pem", "not a certificate"),
        key: dir.write("k.pem", "not a key"),
    };
    let cfg = dir.write(
        "envoy.yaml",
        bootstrap(&tls_listener("tls", &cert, "", &[])),
    );
    let (code, text) = validate(&["-c", cfg.to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("tls_certificates[0]"), "{text}");
    let (code, text) = validate(&["-c", dir.path("nope.yaml").to_str().unwrap()]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("nope.yaml"), "{text}");
}

#[test]
fn a_busy_port_fails_the_start_clearly() {
    let dir = TempDir::new("busy");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let yaml = bootstrap(&plain_listener("plain", "p", &[], "")).replace(
        "port_value: 0}}\n    filter_chains",
        &format!("port_value: {port}}}}}\n    filter_chains"),
    );
    let cfg = dir.write("envoy.yaml", yaml);
    let out = Command::new(BIN).arg("-c").arg(&cfg).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("listener 'plain' cannot bind 127.0.0.1:{port}")),
        "{err}"
    );
}

#[test]
fn tls_offload_require_is_refused_until_the_kernel_path_exists() {
    let dir = TempDir::new("require");
    let cert = rsa_cert(&dir, "rsa", "localhost", 2048);
    let cfg = dir.write(
        "envoy.yaml",
        bootstrap(&tls_listener("tls", &cert, "", &[])),
    );
    let out = Command::new(BIN)
        .arg("-c")
        .arg(&cfg)
        .args(["--tls-offload", "require"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--tls-offload require"));
}

//! The admin endpoints through the real binary.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::*;

fn start_with_inline_key() -> (TempDir, Hoist) {
    let dir = TempDir::new("admin");
    let cert = rsa_cert(&dir, "rsa", "localhost", 2048);
    let key_pem = std::fs::read_to_string(&cert.key).unwrap();
    let mut yaml = bootstrap(&format!(
        "{}{}",
        plain_listener("plain", "ingress_http", &[], ""),
        tls_listener("tls", &cert, "", &[])
    ));
    // Put the private key inline so /config_dump has a secret to redact.
    let indented: String = key_pem
        .lines()
        .map(|l| format!("                  {l}\n"))
        .collect();
    yaml = yaml.replace(
        &format!("private_key: {{filename: {}}}", cert.key.display()),
        &format!("private_key:\n                inline_string: |\n{indented}"),
    );
    let cfg = dir.write("envoy.yaml", yaml);
    let hoist = Hoist::start(&cfg, &["--concurrency", "2"]);
    (dir, hoist)
}

#[test]
fn read_only_endpoints() {
    let (_dir, hoist) = start_with_inline_key();
    let (code, body) = hoist.admin_get("/ready");
    assert_eq!((code, body.as_str()), (200, "LIVE\n"));

    let (code, body) = hoist.admin_get("/server_info");
    assert_eq!(code, 200);
    let info: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(info["state"], "LIVE");
    assert_eq!(info["command_line_options"]["concurrency"], 2);

    let (code, body) = hoist.admin_get("/config_dump");
    assert_eq!(code, 200);
    assert!(body.contains("[redacted]"), "{body}");
    assert!(!body.contains("PRIVATE KEY"), "private key leaked");
    assert!(body.contains("BootstrapConfigDump"));

    let (_, body) = hoist.admin_get("/listeners");
    assert!(
        body.contains(&format!("plain::{}", hoist.addr("plain"))),
        "{body}"
    );
    let (_, body) = hoist.admin_get("/listeners?format=json");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["listener_statuses"][1]["name"], "tls");

    let (_, body) = hoist.admin_get("/certs");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let chain = &v["certificates"][0]["cert_chain"][0];
    assert!(
        chain["serial_number"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "{body}"
    );
    assert_eq!(chain["subject_alt_names"][0]["dns"], "localhost", "{body}");

    let (code, body) = hoist.admin_get("/help");
    assert_eq!(code, 200);
    assert!(body.contains("/quitquitquit"));
    let (code, _) = hoist.admin_get("/nope");
    assert_eq!(code, 404);
}

#[test]
fn stats_formats_and_reset() {
    let (_dir, hoist) = start_with_inline_key();
    let url = format!("http://{}/", hoist.addr("plain"));
    for _ in 0..3 {
        assert!(curl(&["-o", "/dev/null", &url]).status.success());
    }
    // curl can be done before the worker counts the third (seen once in a .ci/run).
    hoist.wait_stat("http.ingress_http.downstream_rq_completed", 3);
    let (_, text) = hoist.admin_get("/stats");
    assert!(
        text.contains("http.ingress_http.downstream_rq_2xx: 3"),
        "{text}"
    );
    assert!(
        text.contains("http.ingress_http.downstream_rq_time: P0("),
        "{text}"
    );
    let (_, filtered) = hoist.admin_get("/stats?filter=downstream_rq_2xx");
    assert!(
        filtered.lines().all(|l| l.contains("downstream_rq_2xx")),
        "{filtered}"
    );
    let (_, json) = hoist.admin_get("/stats?format=json");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(v["stats"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s["name"] == "http.ingress_http.downstream_rq_2xx" && s["value"] == 3));
    let (_, prom) = hoist.admin_get("/stats/prometheus");
    assert!(
        prom.contains("# TYPE envoy_http_downstream_rq_xx counter"),
        "{prom}"
    );
    assert!(
        prom.contains("envoy_http_downstream_rq_xx{envoy_response_code_class=\"2\",envoy_http_conn_manager_prefix=\"ingress_http\"} 3"),
        "{prom}"
    );
    let (code, _) = hoist.admin_get("/reset_counters");
    assert_eq!(code, 400, "GET on a POST-only endpoint");
    let (code, _) = hoist.admin_post("/reset_counters");
    assert_eq!(code, 200);
    assert_eq!(hoist.stat("http.ingress_http.downstream_rq_2xx"), 0);
}

#[test]
fn healthcheck_fail_makes_ready_503_and_closes_connections() {
    let (_dir, hoist) = start_with_inline_key();
    assert_eq!(hoist.admin_post("/healthcheck/fail").0, 200);
    assert_eq!(hoist.admin_get("/ready"), (503, "DRAINING\n".to_string()));
    let out = curl(&[
        "-D",
        "-",
        "-o",
        "/dev/null",
        &format!("http://{}/", hoist.addr("plain")),
    ]);
    assert!(String::from_utf8_lossy(&out.stdout)
        .to_ascii_lowercase()
        .contains("connection: close"));
    assert_eq!(hoist.admin_post("/healthcheck/ok").0, 200);
    assert_eq!(hoist.admin_get("/ready").0, 200);
}

#[test]
fn quitquitquit_exits_cleanly() {
    let (_dir, mut hoist) = start_with_inline_key();
    assert_eq!(hoist.admin_get("/quitquitquit").0, 400);
    assert_eq!(hoist.admin_post("/quitquitquit").0, 200);
    let status = hoist.wait(Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
}

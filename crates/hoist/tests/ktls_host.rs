//! Kernel TLS policy through the binary on the machine running the tests. On kernels without
//! kTLS (the development and CI hosts) every connection must fall back to user-space TLS and
//! say so: the probe line, `ssl.offload.fallback.kernel_unsupported`, `ssl.offload.none`,
//! %DOWNSTREAM_TLS_OFFLOAD% = none, /tls_offload; `require` refuses to start. On a kernel with
//! kTLS the same tests check the offloaded side instead. The real kTLS path is tested in a VM
//! (ktls_vm.rs).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

const STAT: &str = "listener.127.0.0.1_0.ssl.offload";

/// Whether this machine's kernel can do kTLS: /proc/net/tls_stat exists once tls.ko is
/// loaded, which the probe triggers when it can.
fn kernel_has_ktls() -> bool {
    std::path::Path::new("/proc/net/tls_stat").exists()
}

fn with_metadata(listener: &str, mode: &str) -> String {
    listener.replacen(
        "    address:",
        &format!(
            "    metadata: {{filter_metadata: {{hoist: {{tls_offload: {mode}}}}}}}\n    address:"
        ),
        1,
    )
}

fn tls_config(
    dir: &TempDir,
    metadata: Option<&str>,
    hcm_log: Option<&std::path::Path>,
) -> std::path::PathBuf {
    let cert = ecdsa_cert(dir, "ecdsa", "localhost");
    let body = payload(dir, "100k.bin", 100 * 1024);
    let mut listener = tls_listener("tls", &cert, "", &[("/100k", &body)]);
    if let Some(log) = hcm_log {
        let pad = " ".repeat(10);
        let block = format!(
            "{pad}stat_prefix: ingress_https\n{pad}access_log:\n{pad}- name: envoy.access_loggers.file\n{pad}  typed_config:\n{pad}    \"@type\": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog\n{pad}    path: {}\n{pad}    log_format:\n{pad}      text_format_source:\n{pad}        inline_string: \"%DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_TLS_OFFLOAD%\\n\"\n",
            log.display()
        );
        listener = listener.replacen(&format!("{pad}stat_prefix: ingress_https\n"), &block, 1);
    }
    if let Some(mode) = metadata {
        listener = with_metadata(&listener, mode);
    }
    dir.write("envoy.yaml", bootstrap(&listener))
}

fn fetch_100k(hoist: &Hoist) {
    let addr = hoist.addr("tls");
    let out = curl(&[
        "-k",
        "-o",
        "-",
        &format!("https://localhost:{}/100k", addr.port()),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout.len(), 100 * 1024);
}

fn stderr_until(hoist: &Hoist, needle: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        lines.extend(hoist.stderr_lines());
        if lines.iter().any(|l| l.contains(needle)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    lines
}

#[test]
fn auto_falls_back_per_connection_and_counts_it() {
    let dir = TempDir::new("ktls-auto");
    let log = dir.path("access.log");
    let cfg = tls_config(&dir, None, Some(&log));
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let lines = stderr_until(&hoist, "kTLS: ");
    let probe = lines
        .iter()
        .find(|l| l.contains("kTLS: "))
        .cloned()
        .unwrap_or_default();
    fetch_100k(&hoist);
    fetch_100k(&hoist);
    if kernel_has_ktls() {
        assert!(probe.contains("kTLS: TX"), "{probe}");
        assert_eq!(
            hoist.stat(&format!("{STAT}.tx_sw")) + hoist.stat(&format!("{STAT}.tx_hw")),
            2
        );
    } else {
        assert!(
            probe.contains("kTLS: unavailable (no tls module: ENOENT)"),
            "{lines:?}"
        );
        assert_eq!(
            hoist.stat(&format!("{STAT}.fallback.kernel_unsupported")),
            2
        );
        assert_eq!(hoist.stat(&format!("{STAT}.none")), 2);
        assert_eq!(hoist.stat(&format!("{STAT}.tx_sw")), 0);
    }
    // The access log says where the record layer ran.
    let deadline = Instant::now() + Duration::from_secs(10);
    let text = loop {
        let t = std::fs::read_to_string(&log).unwrap_or_default();
        if t.lines().count() >= 2 || Instant::now() > deadline {
            break t;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let expect = if kernel_has_ktls() { "sw" } else { "none" };
    assert_eq!(text.lines().count(), 2, "{text}");
    for l in text.lines() {
        assert!(l.ends_with(&format!(" {expect}")), "{l}");
    }
}

#[test]
fn off_counts_policy_off() {
    let dir = TempDir::new("ktls-off");
    let cfg = tls_config(&dir, None, None);
    let hoist = Hoist::start(&cfg, &["--concurrency", "1", "--tls-offload", "off"]);
    fetch_100k(&hoist);
    assert_eq!(hoist.stat(&format!("{STAT}.fallback.policy_off")), 1);
    assert_eq!(hoist.stat(&format!("{STAT}.none")), 1);
    assert_eq!(
        hoist.stat(&format!("{STAT}.fallback.kernel_unsupported")),
        0
    );
}

/// The listener's own policy wins over the command line: `off` on the listener serves under
/// `--tls-offload require` even where the kernel cannot offload.
#[test]
fn listener_metadata_overrides_the_command_line() {
    let dir = TempDir::new("ktls-meta-off");
    let cfg = tls_config(&dir, Some("off"), None);
    let hoist = Hoist::start(&cfg, &["--concurrency", "1", "--tls-offload", "require"]);
    fetch_100k(&hoist);
    assert_eq!(hoist.stat(&format!("{STAT}.fallback.policy_off")), 1);
    let (_, body) = hoist.admin_get("/tls_offload");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["command_line"], "require");
    assert_eq!(v["listeners"][0]["policy"], "off");
    assert_eq!(v["listeners"][0]["policy_source"], "listener metadata");
}

fn start_fails(cfg: &std::path::Path, args: &[&str]) -> Option<(i32, String)> {
    let out = Command::new(BIN)
        .arg("-c")
        .arg(cfg)
        .args(args)
        .args(["--mode", "init_only"])
        .output()
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    (code != 0).then(|| (code, String::from_utf8_lossy(&out.stderr).into_owned()))
}

#[test]
fn require_refuses_to_start_without_ktls() {
    let dir = TempDir::new("ktls-require");
    let cfg = tls_config(&dir, None, None);
    let from_cli = start_fails(&cfg, &["--tls-offload", "require"]);
    let meta_cfg = tls_config(&dir, Some("require"), None);
    let from_listener = start_fails(&meta_cfg, &[]);
    if kernel_has_ktls() {
        assert_eq!(from_cli, None);
        assert_eq!(from_listener, None);
        return;
    }
    let (code, err) = from_cli.expect("require must refuse to start without kTLS");
    assert_eq!(code, 1);
    assert!(
        err.contains("error: listener 'tls' requires kernel TLS offload (--tls-offload require), but the kernel cannot: kTLS: unavailable (no tls module: ENOENT)"),
        "{err}"
    );
    let (code, err) = from_listener.expect("a listener's require must refuse too");
    assert_eq!(code, 1);
    assert!(
        err.contains("listener 'tls' requires kernel TLS offload (metadata.filter_metadata.hoist.tls_offload: require)"),
        "{err}"
    );
    // A plaintext listener has nothing to offload.
    let plain = dir.write(
        "plain.yaml",
        bootstrap(&plain_listener("plain", "p", &[], "")),
    );
    assert_eq!(start_fails(&plain, &["--tls-offload", "require"]), None);
}

#[test]
fn tls_offload_endpoint_and_stats_forms() {
    let dir = TempDir::new("ktls-admin");
    let cfg = tls_config(&dir, None, None);
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    fetch_100k(&hoist);
    let (status, body) = hoist.admin_get("/tls_offload");
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let probe = &v["probe"];
    assert_eq!(probe["available"], kernel_has_ktls());
    assert!(probe["line"].as_str().unwrap().starts_with("kTLS: "));
    assert!(probe["probe_time_us"].as_u64().is_some());
    assert!(probe["tx"].is_array() && probe["rx"].is_array() && probe["rekey"].is_boolean());
    assert_eq!(v["command_line"], "auto");
    let l = &v["listeners"][0];
    assert_eq!(l["name"], "tls");
    assert_eq!(l["policy"], "auto");
    assert_eq!(l["policy_source"], "command line");
    assert_eq!(l["stat_prefix"], "listener.127.0.0.1_0");
    let summary = &v["summary"];
    assert_eq!(summary["nic_offload_seen"], false);
    if kernel_has_ktls() {
        assert!(v["tls_stat"]["TlsTxSw"].as_u64().unwrap() >= 1);
        assert_eq!(l["counters"]["tx_sw"], 1);
    } else {
        assert_eq!(v["tls_stat"], serde_json::Value::Null);
        assert_eq!(l["counters"]["none"], 1);
        assert_eq!(l["counters"]["fallback.kernel_unsupported"], 1);
        assert_eq!(l["counters"]["tx_sw"], 0);
        assert_eq!(summary["connections"]["user_space"], 1);
        assert!(
            summary["verdict"]
                .as_str()
                .unwrap()
                .starts_with("user space"),
            "{summary}"
        );
    }
    // The same counters in the Prometheus form.
    let (_, prom) = hoist.admin_get("/stats/prometheus");
    let line = if kernel_has_ktls() {
        "ssl_offload_tx_sw"
    } else {
        "ssl_offload_none"
    };
    assert!(
        prom.lines().any(|l| l.contains(line) && l.ends_with(" 1")),
        "{line} missing from\n{prom}"
    );
    let (_, help) = hoist.admin_get("/help");
    assert!(help.contains("/tls_offload"));
}

//! `hoist bench --quick` end to end: generates its files, measures the baseline with
//! `hoist load`, reports the kernel-TLS column as skipped with the reason on a kernel without
//! kTLS, and writes report.md, results.json and the charts.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::*;

#[test]
fn quick_bench_writes_a_report() {
    let dir = TempDir::new("bench");
    let out = dir.path("report");
    let run = Command::new(BIN)
        .args([
            "bench",
            "--quick",
            "--duration",
            "0.5",
            "--sizes",
            "1k,100k",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "{}{stderr}",
        String::from_utf8_lossy(&run.stdout)
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("## Throughput by payload (ECDHE-RSA-AES256-GCM-SHA384"),
        "{report}"
    );
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let cells = results["cells"].as_array().unwrap();
    let baseline: Vec<&serde_json::Value> = cells
        .iter()
        .filter(|c| c["mode"] == "baseline" && c["rate"].is_null())
        .collect();
    assert_eq!(baseline.len(), 2, "{cells:?}");
    for c in &baseline {
        assert_eq!(c["status"], "measured", "{c}");
        assert!(c["gbps"].as_f64().unwrap() > 0.0);
        assert_eq!(c["errors"], 0);
        assert!(c["server_cpu_s"].as_f64().unwrap() > 0.0);
    }
    // Without kTLS in this kernel the accelerated column is skipped, never faked.
    let accelerated: Vec<&serde_json::Value> = cells
        .iter()
        .filter(|c| c["mode"] == "accelerated")
        .collect();
    if std::path::Path::new("/proc/net/tls_stat").exists() {
        assert!(accelerated.iter().all(|c| c["status"] == "measured"));
    } else {
        assert!(!accelerated.is_empty());
        assert!(accelerated.iter().all(
            |c| c["status"] == "skipped" && c["reason"].as_str().is_some_and(|r| !r.is_empty())
        ));
    }
    for chart in ["throughput.svg", "cpu_per_gb.svg"] {
        let svg = std::fs::read_to_string(out.join(chart)).unwrap();
        assert!(
            svg.starts_with("<svg") && svg.contains("<polyline"),
            "{chart}"
        );
    }
}

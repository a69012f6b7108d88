//! The configurations in examples/ validate unchanged, and the experiment's baseline serves
//! every payload byte-exact over TLS 1.2 with both of its ciphers.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::*;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn make_data() {
    let root = repo_root();
    let out = Command::new("bash")
        .arg(root.join("examples/make-data.sh"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn every_example_validates_unchanged() {
    make_data();
    let root = repo_root();
    let mut seen = 0;
    for entry in std::fs::read_dir(root.join("examples")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            let out = Command::new(BIN)
                .current_dir(&root)
                .args(["--mode", "validate", "-c"])
                .arg(&path)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "{}: {text}{}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(text.contains("OK"), "{text}");
            seen += 1;
        }
    }
    assert!(seen >= 5, "examples found: {seen}");
}

#[test]
fn baseline_serves_every_payload_over_tls12_with_both_ciphers() {
    make_data();
    let root = repo_root();
    // The same file with ephemeral ports, so this test runs beside others.
    let yaml = std::fs::read_to_string(root.join("examples/baseline.yaml"))
        .unwrap()
        .replace("port_value: 10443", "port_value: 0")
        .replace("port_value: 9901", "port_value: 0");
    let dir = TempDir::new("baseline");
    let cfg = dir.write("baseline.yaml", yaml);
    let mut child = Command::new(BIN);
    child.current_dir(&root);
    let hoist = Hoist::start_cmd(child, &["-c", cfg.to_str().unwrap(), "--concurrency", "1"]);
    let addr = hoist.addr("https");
    for (cipher, curl_name) in [
        ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256"),
        ("ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384"),
    ] {
        for size in ["1k", "10k", "100k", "500k", "1m", "2m", "5m", "10m"] {
            let got = dir.path("got");
            let out = curl(&[
                "-k",
                "--tlsv1.2",
                "--tls-max",
                "1.2",
                "--ciphers",
                curl_name,
                "-o",
                got.to_str().unwrap(),
                &format!("https://{addr}/{size}"),
            ]);
            assert!(
                out.status.success(),
                "{cipher} /{size}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let want =
                std::fs::read(root.join(format!("examples/data/payloads/{size}.bin"))).unwrap();
            assert_eq!(
                sha256_hex(&std::fs::read(&got).unwrap()),
                sha256_hex(&want),
                "{cipher} /{size}"
            );
        }
        assert_eq!(
            hoist.stat(&format!("listener.127.0.0.1_0.ssl.ciphers.{cipher}")),
            8
        );
    }
    // TLS 1.3 is refused: the baseline is TLS 1.2 only.
    let out = curl(&["-k", "--tlsv1.3", &format!("https://{addr}/1k")]);
    assert!(!out.status.success());
}

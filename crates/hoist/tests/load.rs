//! `hoist load` (the Fortio-compatible load generator) against hoist itself, through the real
//! command line: report on stderr, JSON on stdout, Go flag syntax, and its usage errors.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;
use std::time::Duration;

use support::*;

fn hoist_load(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(BIN).arg("load").args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-100),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn load_against_hoist_over_tls12() {
    let dir = TempDir::new("load");
    let cert = rsa_cert(&dir, "server", "localhost", 2048);
    let body = payload(&dir, "100k", 100 * 1024);
    let config = dir.write(
        "envoy.yaml",
        bootstrap(&tls_listener("https", &cert, "", &[("/100k", &body)])),
    );
    let mut hoist = Hoist::start(&config, &["--concurrency", "1"]);
    let url = format!("https://{}/100k", hoist.addr("https"));
    let (code, stdout, stderr) = hoist_load(&[
        "-n",
        "40",
        "-c=4",
        "--k",
        "-tls-version",
        "1.2",
        "-cipher",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "-json",
        "-",
        &url,
    ]);
    assert_eq!(code, 0, "{stderr}");
    for line in [
        "Starting at 8 qps with 4 thread(s) [gomax ",
        "Code 200 : 40 (100.0 %)\n",
        "Sockets used: 4 (for perfect keepalive, would be 4)\n",
        "TLS: TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384\n",
        "All done 40 calls (plus 0 warmup) ",
        "Successfully wrote ",
    ] {
        assert!(stderr.contains(line), "missing {line:?} in:\n{stderr}");
    }
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(v["RetCodes"]["200"], 40);
    assert_eq!(v["URL"], url.as_str());
    let head = v["HeaderSizes"]["Min"].as_f64().unwrap();
    assert_eq!(v["Sizes"]["Min"].as_f64().unwrap(), head + 102_400.0);
    assert_eq!(v["Sizes"]["Max"], v["Sizes"]["Min"]);
    assert_eq!(v["Cipher"], "ECDHE-RSA-AES256-GCM-SHA384");
    assert!(hoist.terminate(Duration::from_secs(20)).success());
}

#[test]
fn load_usage_errors_exit_1() {
    let (code, _, stderr) = hoist_load(&["-nope", "http://127.0.0.1:1/"]);
    assert_eq!(code, 1);
    assert!(
        stderr.starts_with("flag provided but not defined: -nope\n"),
        "{stderr}"
    );
    assert!(stderr.contains("Usage: hoist load [flags] URL"), "{stderr}");
    assert!(stderr.contains("  -qps float\n"), "{stderr}");
    let (code, _, stderr) = hoist_load(&["-h2", "http://127.0.0.1:1/"]);
    assert_eq!(code, 1);
    assert!(stderr.contains("not supported yet"), "{stderr}");
    let (code, _, _) = hoist_load(&[]);
    assert_eq!(code, 1);
    let (code, _, stderr) = hoist_load(&["-h"]);
    assert_eq!(code, 0);
    assert!(stderr.contains("Usage: hoist load"));
    // A warm-up failure aborts as Fortio does.
    let (code, _, stderr) = hoist_load(&["-t", "1s", "http://127.0.0.1:1/"]);
    assert_eq!(code, 1);
    assert!(
        stderr.contains("Aborting because of error -1 for http://127.0.0.1:1/ (0 bytes)"),
        "{stderr}"
    );
}

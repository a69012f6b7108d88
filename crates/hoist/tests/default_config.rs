//! `hoist` with no configuration serves the built-in default on 127.0.0.1:10443 and admin on
//! 127.0.0.1:9901 (fixed ports: this is the one test that uses them).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::Duration;

use support::*;

#[test]
fn built_in_default_serves_payloads_over_https() {
    let mut hoist = Hoist::start_args(&["--concurrency", "1"]);
    assert!(
        hoist
            .stdout
            .iter()
            .any(|l| l.contains("curl -k https://127.0.0.1:10443/")),
        "{:?}",
        hoist.stdout
    );
    let out = curl(&["-k", "https://127.0.0.1:10443/"]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("hoist is running"));
    for (path, size) in [
        ("1k", 1024),
        ("100k", 102400),
        ("1m", 1 << 20),
        ("5m", 5 << 20),
        ("10m", 10 << 20),
    ] {
        let out = curl(&[
            "-k",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{size_download}",
            &format!("https://127.0.0.1:10443/{path}"),
        ]);
        assert_eq!(String::from_utf8_lossy(&out.stdout), format!("200 {size}"));
    }
    let (code, _) = http_request("127.0.0.1:9901".parse().unwrap(), "GET", "/ready");
    assert_eq!(code, 200);
    let status = hoist.terminate(Duration::from_secs(20));
    assert!(status.success());
}

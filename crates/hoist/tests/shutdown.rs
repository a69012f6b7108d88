//! SIGTERM/SIGINT: stop accepting, let in-flight requests finish, exit 0.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

#[test]
fn sigterm_finishes_in_flight_requests_then_exits_0() {
    let dir = TempDir::new("shutdown");
    let body = payload(&dir, "10m.bin", 10 << 20);
    let cfg = dir.write(
        "envoy.yaml",
        bootstrap(&plain_listener("plain", "p", &[("/10m", &body)], "")),
    );
    let mut hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let addr = hoist.addr("plain");
    let out_file = dir.path("got");
    // A slow download: about 4 s at 2.5 MB/s.
    let slow = Command::new("curl")
        .args([
            "-sS",
            "--limit-rate",
            "2500K",
            "-o",
            out_file.to_str().unwrap(),
        ])
        .arg(format!("http://{addr}/10m"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    let started = Instant::now();
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(hoist.child.id().to_string())
        .status();
    std::thread::sleep(Duration::from_millis(300));
    // New connections are refused once draining started.
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "listener still accepting"
    );
    let out = slow.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "in-flight download failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sha256_hex(&std::fs::read(&out_file).unwrap()),
        sha256_hex(&std::fs::read(&body).unwrap())
    );
    let status = hoist.wait(Duration::from_secs(30));
    assert!(status.success(), "exit status {status:?}");
    assert!(
        started.elapsed() > Duration::from_millis(500),
        "hoist waited for the download"
    );
}

#[test]
fn sigint_with_idle_keepalive_connections_exits_promptly() {
    let dir = TempDir::new("sigint");
    let cfg = dir.write(
        "envoy.yaml",
        bootstrap(&plain_listener("plain", "p", &[], "")),
    );
    let mut hoist = Hoist::start(&cfg, &[]);
    // An idle keep-alive connection must not hold the exit for the drain time.
    let mut idle = std::net::TcpStream::connect(hoist.addr("plain")).unwrap();
    use std::io::Write;
    idle.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let _ = Command::new("kill")
        .arg("-INT")
        .arg(hoist.child.id().to_string())
        .status();
    let status = hoist.wait(Duration::from_secs(10));
    assert!(status.success(), "{status:?}");
}

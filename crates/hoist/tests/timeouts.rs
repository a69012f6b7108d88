//! Envoy's HTTP/1.1 timeouts through the real binary: idle connections close, a slow head or a
//! stalled body gets a 408, and each is counted.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

fn start() -> (TempDir, Hoist) {
    let dir = TempDir::new("timeouts");
    let extra = "    common_http_protocol_options: {idle_timeout: 1s}\n    request_headers_timeout: 1s\n    stream_idle_timeout: 1s\n";
    let cfg = dir.write(
        "envoy.yaml",
        bootstrap(&plain_listener("plain", "t", &[], extra)),
    );
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    (dir, hoist)
}

fn read_all(s: &mut TcpStream) -> String {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn idle_keepalive_connection_is_closed() {
    let (_dir, hoist) = start();
    let mut s = TcpStream::connect(hoist.addr("plain")).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    let text = read_all(&mut s);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(
        text.ends_with("hello from hoist\n"),
        "the connection closed after the reply only: {text}"
    );
    assert_eq!(hoist.stat("http.t.downstream_cx_idle_timeout"), 1);
}

#[test]
fn slow_request_head_gets_408() {
    let (_dir, hoist) = start();
    let mut s = TcpStream::connect(hoist.addr("plain")).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost:").unwrap();
    let text = read_all(&mut s);
    assert!(text.starts_with("HTTP/1.1 408 Request Timeout"), "{text}");
    assert!(text.ends_with("request header timeout"), "{text}");
    assert_eq!(hoist.stat("http.t.downstream_rq_header_timeout"), 1);
    hoist.wait_stat("http.t.downstream_rq_4xx", 1);
}

#[test]
fn stalled_request_body_gets_408() {
    let (_dir, hoist) = start();
    let mut s = TcpStream::connect(hoist.addr("plain")).unwrap();
    s.write_all(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n0123456789")
        .unwrap();
    let text = read_all(&mut s);
    assert!(text.starts_with("HTTP/1.1 408 Request Timeout"), "{text}");
    assert!(text.ends_with("stream timeout"), "{text}");
    assert_eq!(hoist.stat("http.t.downstream_rq_idle_timeout"), 1);
}

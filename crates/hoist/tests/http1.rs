//! HTTP/1.1 on a plaintext listener, driven by curl and raw TCP: keep-alive, pipelining, bodies,
//! HEAD, Expect: 100-continue, and every class of bad request.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use support::*;

struct Fixture {
    _dir: TempDir,
    hoist: Hoist,
    files: Vec<(String, std::path::PathBuf)>,
}

fn start(hcm_extra: &str) -> Fixture {
    let dir = TempDir::new("h1");
    let sizes = [
        ("1k", 1024),
        ("100k", 100 * 1024),
        ("1m", 1 << 20),
        ("10m", 10 << 20),
    ];
    let files: Vec<(String, std::path::PathBuf)> = sizes
        .iter()
        .map(|(n, s)| (format!("/{n}"), payload(&dir, &format!("{n}.bin"), *s)))
        .collect();
    let routes: Vec<(&str, &std::path::Path)> = files
        .iter()
        .map(|(p, f)| (p.as_str(), f.as_path()))
        .collect();
    let yaml = bootstrap(&plain_listener("plain", "ingress_http", &routes, hcm_extra));
    let cfg = dir.write("envoy.yaml", yaml);
    let hoist = Hoist::start(&cfg, &["--concurrency", "2"]);
    Fixture {
        _dir: dir,
        hoist,
        files,
    }
}

#[test]
fn bodies_are_byte_exact_and_keep_alive_reuses_the_connection() {
    let f = start("");
    let base = format!("http://{}", f.hoist.addr("plain"));
    let mut args = vec!["-o".to_string(), "/dev/null".to_string()];
    let dir = TempDir::new("h1-out");
    let mut outs = Vec::new();
    args.clear();
    for (i, (path, _)) in f.files.iter().enumerate() {
        let out = dir.path(&format!("out{i}"));
        args.push(format!("{base}{path}"));
        args.push("-o".into());
        args.push(out.display().to_string());
        outs.push(out);
    }
    args.push("-w".into());
    args.push("%{num_connects}\n".into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = curl(&argv);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let connects: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.parse().unwrap())
        .collect();
    assert_eq!(
        connects,
        vec![1, 0, 0, 0],
        "one connection reused for all four requests"
    );
    for ((_, file), out) in f.files.iter().zip(&outs) {
        let want = std::fs::read(file).unwrap();
        let got = std::fs::read(out).unwrap();
        assert_eq!(got.len(), want.len());
        assert_eq!(sha256_hex(&got), sha256_hex(&want));
    }
    f.hoist.wait_stat("http.ingress_http.downstream_rq_2xx", 4);
    assert_eq!(
        f.hoist.stat("http.ingress_http.downstream_cx_http1_total"),
        1
    );
    assert_eq!(f.hoist.stat("http.ingress_http.rq_direct_response"), 4);
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let f = start("");
    let addr = f.hoist.addr("plain");
    let req = "GET /1k HTTP/1.1\r\nHost: a\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\nHEAD /1k HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
    let raw = raw_exchange(addr, req.as_bytes());
    let text = String::from_utf8_lossy(&raw);
    let statuses: Vec<_> = text.match_indices("HTTP/1.1 200 OK").collect();
    assert_eq!(statuses.len(), 3, "{text}");
    let first_body_at = text.find("\r\n\r\n").unwrap() + 4;
    let want = std::fs::read(&f.files[0].1).unwrap();
    assert_eq!(&raw[first_body_at..first_body_at + 1024], &want[..]);
    let second = &text[first_body_at + 1024..];
    assert!(second.contains("hello from hoist\n"), "{second}");
    // The HEAD answer carries the length but no body: the stream ends right after its head.
    let head_part = &second[second.rfind("HTTP/1.1 200 OK").unwrap()..];
    assert!(
        head_part
            .to_ascii_lowercase()
            .contains("content-length: 1024"),
        "{head_part}"
    );
    assert!(head_part.ends_with("\r\n\r\n"), "{head_part:?}");
}

fn status_and_closed(addr: std::net::SocketAddr, request: &[u8]) -> (String, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let closed = s.read_to_end(&mut out).is_ok();
    let text = String::from_utf8_lossy(&out).into_owned();
    (text.lines().next().unwrap_or("").to_string(), closed)
}

#[test]
fn malformed_requests_get_400_and_a_closed_connection() {
    let f = start("");
    let addr = f.hoist.addr("plain");
    let cases: &[&[u8]] = &[
        b"GARBAGE\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n",
        b"GET / HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello",
        b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: abc\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        // A space inside the target (four words, the last a good version) and a fragment.
        b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n",
        b"GET /a#frag HTTP/1.1\r\nHost: a\r\n\r\n",
    ];
    for case in cases {
        let (status, closed) = status_and_closed(addr, case);
        assert_eq!(
            status,
            "HTTP/1.1 400 Bad Request",
            "for {:?}",
            String::from_utf8_lossy(case)
        );
        assert!(
            closed,
            "connection closed after {:?}",
            String::from_utf8_lossy(case)
        );
    }
    assert!(
        f.hoist
            .stat("http.ingress_http.downstream_cx_protocol_error")
            >= cases.len() as u64
    );
    f.hoist
        .wait_stat("http.ingress_http.downstream_rq_4xx", cases.len() as u64);
}

#[test]
fn unsupported_transfer_encoding_is_501_and_bad_version_505() {
    let f = start("");
    let addr = f.hoist.addr("plain");
    let (status, _) = status_and_closed(
        addr,
        b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 501 Not Implemented");
    let (status, _) = status_and_closed(addr, b"GET / HTTP/1.2\r\nHost: a\r\n\r\n");
    assert!(
        status.starts_with("HTTP/1.1 505") || status.starts_with("HTTP/1.1 400"),
        "{status}"
    );
}

#[test]
fn oversized_headers_get_431() {
    let f = start("    max_request_headers_kb: 8\n");
    let addr = f.hoist.addr("plain");
    let big = "x".repeat(9 * 1024);
    let req = format!("GET / HTTP/1.1\r\nHost: a\r\nX-Big: {big}\r\n\r\n");
    let (status, closed) = status_and_closed(addr, req.as_bytes());
    assert_eq!(status, "HTTP/1.1 431 Request Header Fields Too Large");
    assert!(closed);
    // Just under the limit is fine.
    let ok = format!(
        "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\nX-Big: {}\r\n\r\n",
        "x".repeat(7 * 1024)
    );
    let (status, _) = status_and_closed(addr, ok.as_bytes());
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(f.hoist.stat("http.ingress_http.downstream_rq_too_large") >= 1);
}

#[test]
fn request_bodies_chunked_and_expect_continue_keep_the_connection_usable() {
    let f = start("");
    let base = format!("http://{}", f.hoist.addr("plain"));
    let dir = TempDir::new("h1-post");
    let body = payload(&dir, "body.bin", 3 << 20);
    let body_arg = format!("@{}", body.display());
    // curl sends Expect: 100-continue for bodies this large.
    for extra in [&[][..], &["-H", "Transfer-Encoding: chunked"][..]] {
        let mut args = vec![
            "--data-binary",
            &body_arg,
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{num_connects}\n",
        ];
        args.extend_from_slice(extra);
        let url1 = format!("{base}/");
        let url2 = format!("{base}/1k");
        args.push(&url1);
        args.push("--next");
        args.push("-o");
        args.push("/dev/null");
        args.push("-w");
        args.push("%{http_code} %{num_connects}\n");
        args.push(&url2);
        let out = curl(&args);
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines.first().map(|l| &l[..3]),
            Some("200"),
            "{text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            lines.get(1).copied(),
            Some("200 0"),
            "second request reuses the connection: {text}"
        );
    }
}

#[test]
fn connection_close_and_http10_are_honoured() {
    let f = start("");
    let addr = f.hoist.addr("plain");
    let (status, closed) = status_and_closed(
        addr,
        b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(closed);
    let (status, closed) = status_and_closed(addr, b"GET / HTTP/1.0\r\n\r\n");
    assert!(
        status.starts_with("HTTP/1.1 200") || status.starts_with("HTTP/1.0 200"),
        "{status}"
    );
    assert!(closed);
}

#[test]
fn date_server_and_content_type_headers() {
    let f = start("");
    let out = curl(&[
        "-D",
        "-",
        "-o",
        "/dev/null",
        &format!("http://{}/", f.hoist.addr("plain")),
    ]);
    let head = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(head.contains("server: envoy"), "{head}");
    assert!(head.contains("date: "), "{head}");
    assert!(head.contains("content-type: text/plain"), "{head}");
    assert!(head.contains("content-length: 17"), "{head}");
}

//! Response bodies forwarded with splice(2) between plain sockets (upstream -> pipe ->
//! downstream): byte-exact at 100 MB, a slow client (the pipe and the sockets bound what is in
//! flight), a client that closes mid-body, and an upstream that closes before the end of its
//! Content-Length (the downstream connection must end, not hang). The kernel-TLS variant runs
//! in the VM suite (ktls_vm.rs). Where the downstream cannot splice (user-space TLS) the body
//! is copied as before (`upstream_rq_splice_declined`).
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;

use sha2::Digest;
use support::{Hoist, TempDir};
use upstream_support::{cluster, config, route, Origin};

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of origin.py's /bytes pattern for `n` bytes.
fn pattern_sha(n: usize) -> String {
    let mut block = sha2::Sha256::digest(b"seed").repeat(31250);
    block.extend_from_slice(b"xxx");
    let mut h = sha2::Sha256::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(block.len());
        h.update(&block[..k]);
        left -= k;
    }
    hex(&h.finalize())
}

/// curl's exit status, the body's SHA-256 and size; `extra` before the URL.
fn fetch(url: &str, extra: &[&str]) -> (i32, String, u64) {
    let args: Vec<String> = extra
        .iter()
        .chain([&url])
        .map(|a| format!("'{a}'"))
        .collect();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "curl -sS --max-time 120 -w '%{{size_download}}' -o >(sha256sum >&2) {}",
            args.join(" ")
        ))
        .output()
        .unwrap();
    let sha = String::from_utf8_lossy(&out.stderr)
        .split_whitespace()
        .find(|w| w.len() == 64)
        .unwrap_or("")
        .to_owned();
    let size = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (out.status.code().unwrap_or(-1), sha, size)
}

fn start(dir: &TempDir, port: u16) -> Hoist {
    let log = dir.path("access.log");
    let cfg = dir.write(
        "hoist.yaml",
        config(
            &route("{prefix: /}", "{cluster: web, timeout: 0s}"),
            &cluster("web", &[(port, 1)], ""),
            &log,
            None,
        ),
    );
    Hoist::start(&cfg, &["--concurrency", "1"])
}

#[test]
fn hundred_megabytes_byte_exact_and_a_slow_client() {
    const N: usize = 100 * 1024 * 1024;
    let dir = TempDir::new("splice-big");
    let origin = Origin::start("a");
    let h = start(&dir, origin.port);
    let url = format!("http://{}/bytes?n={N}", h.addr("plain"));
    let (code, sha, size) = fetch(&url, &[]);
    assert_eq!((code, size), (0, N as u64));
    assert_eq!(sha, pattern_sha(N));
    assert_eq!(h.stat("cluster.web.upstream_rq_splice"), 1);
    // All but what arrived with the head went through the pipe.
    let spliced = h.stat("cluster.web.upstream_rq_splice_bytes");
    assert!(
        ((N - 1024 * 1024) as u64..=N as u64).contains(&spliced),
        "{spliced}"
    );
    // The connection went back to the pool after the splice and carries the next request.
    let small = 3 * 1024 * 1024;
    let (code, sha, _) = fetch(&format!("http://{}/bytes?n={small}", h.addr("plain")), &[]);
    assert_eq!((code, sha), (0, pattern_sha(small)));
    assert_eq!(h.stat("cluster.web.upstream_cx_total"), 1);
    assert_eq!(h.stat("cluster.web.upstream_rq_splice"), 2);

    // A slow client: the body still arrives whole while the pipe and the socket buffers
    // hold the upstream back.
    let n = 20 * 1024 * 1024;
    let (code, sha, size) = fetch(
        &format!("http://{}/bytes?n={n}", h.addr("plain")),
        &["--limit-rate", "10M"],
    );
    assert_eq!((code, size), (0, n as u64));
    assert_eq!(sha, pattern_sha(n));
    assert_eq!(h.stat("cluster.web.upstream_rq_splice"), 3);
    assert_eq!(h.stat("cluster.web.upstream_rq_splice_interrupted"), 0);
    // Below the threshold bodies are copied, and not offered.
    let (code, sha, _) = fetch(&format!("http://{}/bytes?n=1000", h.addr("plain")), &[]);
    assert_eq!((code, sha), (0, pattern_sha(1000)));
    assert_eq!(h.stat("cluster.web.upstream_rq_splice"), 3);
    assert_eq!(h.stat("cluster.web.upstream_rq_splice_declined"), 0);
}

#[test]
fn a_client_that_closes_mid_body() {
    const N: usize = 50 * 1024 * 1024;
    let dir = TempDir::new("splice-client-close");
    let origin = Origin::start("a");
    let h = start(&dir, origin.port);
    let mut s = TcpStream::connect(h.addr("plain")).unwrap();
    write!(s, "GET /bytes?n={N} HTTP/1.1\r\nhost: a\r\n\r\n").unwrap();
    let mut got = vec![0u8; 1024 * 1024];
    s.read_exact(&mut got).unwrap();
    drop(s);
    // hoist lives on: the next request is served (on a new upstream connection: the one
    // that was mid-body cannot be reused).
    let n = 200 * 1024;
    let (code, sha, _) = fetch(&format!("http://{}/bytes?n={n}", h.addr("plain")), &[]);
    assert_eq!((code, sha), (0, pattern_sha(n)));
    assert_eq!(h.stat("cluster.web.upstream_cx_total"), 2);
    assert_eq!(h.stat("cluster.web.upstream_rq_splice"), 1);
    assert!(h.stat("cluster.web.upstream_rq_splice_bytes") < N as u64);
}

/// An origin that announces `announced` bytes, sends `sent`, and closes.
fn short_origin(announced: usize, sent: usize) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut head = Vec::new();
        let mut b = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            if s.read(&mut b).unwrap() == 0 {
                return;
            }
            head.push(b[0]);
        }
        write!(s, "HTTP/1.1 200 OK\r\ncontent-length: {announced}\r\n\r\n").unwrap();
        let chunk = vec![7u8; 64 * 1024];
        let mut left = sent;
        while left > 0 {
            let k = left.min(chunk.len());
            if s.write_all(&chunk[..k]).is_err() {
                return;
            }
            left -= k;
        }
    });
    (port, t)
}

#[test]
fn an_upstream_that_closes_early_ends_the_downstream_connection() {
    let dir = TempDir::new("splice-short");
    let (port, origin) = short_origin(10 * 1024 * 1024, 5 * 1024 * 1024);
    let h = start(&dir, port);
    let (code, _, size) = fetch(&format!("http://{}/", h.addr("plain")), &[]);
    // curl: 18, "transfer closed with outstanding read data remaining".
    assert_eq!(code, 18, "size {size}");
    assert!((64 * 1024..10 * 1024 * 1024).contains(&size), "{size}");
    origin.join().unwrap();
    assert_eq!(h.stat("cluster.web.upstream_rq_splice"), 0);
    assert!(h.stat("cluster.web.upstream_rq_splice_bytes") > 0);
}

#[test]
fn a_user_space_tls_client_declines_and_gets_a_copy() {
    let dir = TempDir::new("splice-declined");
    let origin = Origin::start("a");
    let cert = support::rsa_cert(&dir, "front", "front.test", 2048);
    let log = dir.path("access.log");
    let cfg = dir.write(
        "hoist.yaml",
        config(
            &route("{prefix: /}", "{cluster: web}"),
            &cluster("web", &[(origin.port, 1)], ""),
            &log,
            Some(&cert),
        ),
    );
    let h = Hoist::start(&cfg, &["--concurrency", "1"]);
    let n = 5 * 1024 * 1024;
    let url = format!("https://{}/bytes?n={n}", h.addr("tls"));
    for http in ["--http1.1", "--http2"] {
        let (code, sha, _) = fetch(&url, &["-k", http]);
        assert_eq!((code, sha), (0, pattern_sha(n)), "{http}");
    }
    assert_eq!(h.stat("cluster.web.upstream_rq_splice_declined"), 2);
    assert_eq!(h.stat("cluster.web.upstream_rq_splice"), 0);
}

//! curl against the codec: keep-alive, uploads (Content-Length and chunked), Expect:
//! 100-continue, byte-exact downloads from memory and from a file, HEAD, HTTP/1.0.
// Test code: a panic is a failed test, not a peer crashing the proxy.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;

use common::{payload, sha256_hex, start, FILE_LEN, MEMORY_LEN};
use hoist_http::h1::H1Limits;

struct Output {
    stdout: String,
    stderr: String,
}

fn curl(args: &[&str]) -> Output {
    let out = Command::new("curl")
        .args(["-sS", "--max-time", "120"])
        .args(args)
        .output()
        .expect("curl must be installed for these tests");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "curl {args:?} failed: {stderr}");
    Output { stdout, stderr }
}

fn temp_file(name: &str, content: &[u8]) -> PathBuf {
    let path = std::env::temp_dir().join(format!("hoist-http-curl-{}-{name}", std::process::id()));
    std::fs::write(&path, content).unwrap();
    path
}

const EMPTY_SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

#[test]
fn keep_alive_serves_several_urls_on_one_connection() {
    let server = start(H1Limits::default());
    let out = curl(&[&server.url("/a"), &server.url("/b?x=1"), &server.url("/c")]);
    assert_eq!(
        out.stdout,
        format!(
            "GET /a Http11 None len=0 sha256={EMPTY_SHA}\n\
             GET /b?x=1 Http11 None len=0 sha256={EMPTY_SHA}\n\
             GET /c Http11 None len=0 sha256={EMPTY_SHA}\n"
        )
    );
    assert_eq!(server.connections(), 1);
    assert_eq!(server.counters.requests.load(Ordering::SeqCst), 3);
}

#[test]
fn upload_with_content_length_and_expect_continue() {
    let server = start(H1Limits::default());
    let body = payload(4 * 1024 * 1024 + 3, 1);
    let path = temp_file("cl", &body);
    let data = format!("@{}", path.display());
    // curl asks for 100-continue on its own for a body this large.
    let out = curl(&["-v", "--data-binary", &data, &server.url("/up")]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        out.stdout,
        format!(
            "POST /up Http11 Length({n}) len={n} sha256={}\n",
            sha256_hex(&body),
            n = body.len()
        )
    );
    assert!(
        out.stderr.contains("HTTP/1.1 100 Continue"),
        "{}",
        out.stderr
    );
    assert_eq!(server.counters.expect_continue.load(Ordering::SeqCst), 1);
}

#[test]
fn upload_chunked() {
    let server = start(H1Limits::default());
    let body = payload(3 * 1024 * 1024 + 5, 2);
    let path = temp_file("chunked", &body);
    let data = format!("@{}", path.display());
    let out = curl(&[
        "-H",
        "Transfer-Encoding: chunked",
        "--data-binary",
        &data,
        &server.url("/up"),
        // A second request on the same connection proves the chunked body ended exactly.
        "--next",
        &server.url("/after"),
    ]);
    let _ = std::fs::remove_file(&path);
    assert_eq!(
        out.stdout,
        format!(
            "POST /up Http11 Chunked len={} sha256={}\nGET /after Http11 None len=0 sha256={EMPTY_SHA}\n",
            body.len(),
            sha256_hex(&body)
        )
    );
    assert_eq!(server.connections(), 1);
}

#[test]
fn explicit_expect_on_a_small_body() {
    let server = start(H1Limits::default());
    let out = curl(&[
        "-v",
        "-H",
        "Expect: 100-continue",
        "--data-binary",
        "hello",
        &server.url("/small"),
    ]);
    assert_eq!(
        out.stdout,
        format!(
            "POST /small Http11 Length(5) len=5 sha256={}\n",
            sha256_hex(b"hello")
        )
    );
    assert!(
        out.stderr.contains("HTTP/1.1 100 Continue"),
        "{}",
        out.stderr
    );
}

#[test]
fn answer_before_an_unsolicited_body_closes_the_connection() {
    let server = start(H1Limits::default());
    let body = payload(2 * 1024 * 1024, 3);
    let path = temp_file("early", &body);
    let data = format!("@{}", path.display());
    let out = curl(&[
        "-v",
        "-H",
        "Expect: 100-continue",
        "--data-binary",
        &data,
        &server.url("/early"),
        "--next",
        &server.url("/then"),
    ]);
    let _ = std::fs::remove_file(&path);
    assert!(out.stdout.starts_with("early\n"), "{}", out.stdout);
    assert!(out.stderr.contains("< HTTP/1.1 413"), "{}", out.stderr);
    assert!(out.stderr.contains("< connection: close"), "{}", out.stderr);
    assert!(!out.stderr.contains("100 Continue"), "{}", out.stderr);
    // The body was never sent, so the next request needs a new connection.
    assert!(out
        .stdout
        .ends_with(&format!("GET /then Http11 None len=0 sha256={EMPTY_SHA}\n")));
    assert_eq!(server.connections(), 2);
}

#[test]
fn downloads_are_byte_exact() {
    let server = start(H1Limits::default());
    let file_out = std::env::temp_dir().join(format!("hoist-http-dl-{}-file", std::process::id()));
    let mem_out = std::env::temp_dir().join(format!("hoist-http-dl-{}-mem", std::process::id()));
    let out = curl(&[
        "-D",
        "-",
        &server.url("/file"),
        "-o",
        file_out.to_str().unwrap(),
        &server.url("/memory"),
        "-o",
        mem_out.to_str().unwrap(),
    ]);
    let file = std::fs::read(&file_out).unwrap();
    let mem = std::fs::read(&mem_out).unwrap();
    let _ = std::fs::remove_file(&file_out);
    let _ = std::fs::remove_file(&mem_out);
    assert_eq!(file.len(), FILE_LEN);
    assert_eq!(sha256_hex(&file), sha256_hex(&server.file_content));
    assert_eq!(mem.len(), MEMORY_LEN);
    assert_eq!(sha256_hex(&mem), sha256_hex(&server.memory_content));
    assert!(out
        .stdout
        .contains(&format!("content-length: {FILE_LEN}\r\n")));
    assert!(out
        .stdout
        .contains(&format!("content-length: {MEMORY_LEN}\r\n")));
    assert!(out.stdout.contains("server: hoist-test\r\n"));
    assert_eq!(server.connections(), 1);
}

#[test]
fn head_gives_the_length_only() {
    let server = start(H1Limits::default());
    let out = curl(&["-I", &server.url("/file"), &server.url("/memory")]);
    assert_eq!(
        out.stdout,
        format!(
            "HTTP/1.1 200 OK\r\nserver: hoist-test\r\ncontent-length: {FILE_LEN}\r\n\r\n\
             HTTP/1.1 200 OK\r\nserver: hoist-test\r\ncontent-length: {MEMORY_LEN}\r\n\r\n"
        )
    );
    assert_eq!(server.connections(), 1);
}

#[test]
fn http10_client() {
    let server = start(H1Limits::default());
    let out = curl(&["-0", "-i", &server.url("/old")]);
    assert!(
        out.stdout.starts_with("HTTP/1.1 200 OK\r\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("GET /old Http10 None len=0"),
        "{}",
        out.stdout
    );
}

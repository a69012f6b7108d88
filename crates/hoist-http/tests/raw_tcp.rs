//! Raw TCP against the codec: pipelining, and malformed or oversized requests answered with
//! the right status and a closed connection.
// Test code: a panic is a failed test, not a peer crashing the proxy.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use common::{sha256_hex, start, FILE_LEN, MEMORY_LEN};
use hoist_http::h1::H1Limits;

/// Sends `input` and reads until the server closes. The read timeout only keeps a broken
/// server from hanging the test run.
fn exchange(addr: SocketAddr, input: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s.write_all(input).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {
                panic!(
                    "the server did not close the connection; got {:?}",
                    String::from_utf8_lossy(&out)
                )
            }
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Splits a stream of responses; `head_requests[i]` says the i-th answered a HEAD.
fn responses(mut bytes: &[u8], head_requests: &[bool]) -> Vec<Response> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut resp = httparse::Response::new(&mut headers);
        let n = match resp.parse(bytes).unwrap() {
            httparse::Status::Complete(n) => n,
            httparse::Status::Partial => panic!("truncated response: {bytes:?}"),
        };
        let headers: Vec<(String, String)> = resp
            .headers
            .iter()
            .map(|h| {
                (
                    h.name.to_owned(),
                    String::from_utf8(h.value.to_vec()).unwrap(),
                )
            })
            .collect();
        let status = resp.code.unwrap();
        let len: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .map_or(0, |(_, v)| v.parse().unwrap());
        let body_len = if head_requests.get(out.len()).copied().unwrap_or(false) {
            0
        } else {
            len
        };
        let body = bytes[n..n + body_len].to_vec();
        bytes = &bytes[n + body_len..];
        out.push(Response {
            status,
            headers,
            body,
        });
    }
    out
}

#[test]
fn pipelined_requests_in_one_write() {
    let server = start(H1Limits::default());
    let input: &[u8] = b"GET /a HTTP/1.1\r\nHost: h\r\n\r\n\
        POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello\
        POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n3;ext\r\ncde\r\n0\r\nx-trailer: t\r\n\r\n\
        HEAD /file HTTP/1.1\r\nHost: h\r\n\r\n\
        GET /memory HTTP/1.1\r\nHost: h\r\n\r\n\
        GET /file HTTP/1.1\r\nHost: h\r\n\r\n\
        GET /d HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n\
        GET /never HTTP/1.1\r\nHost: h\r\n\r\n";
    let out = exchange(server.addr, input);
    let r = responses(&out, &[false, false, false, true]);
    assert_eq!(r.len(), 7, "{:?}", String::from_utf8_lossy(&out));
    assert!(r.iter().all(|r| r.status == 200));
    let text = |i: usize| String::from_utf8(r[i].body.clone()).unwrap();
    assert!(text(0).starts_with("GET /a Http11 None len=0 "));
    assert_eq!(
        text(1),
        format!(
            "POST /b Http11 Length(5) len=5 sha256={}\n",
            sha256_hex(b"hello")
        )
    );
    assert_eq!(
        text(2),
        format!(
            "POST /c Http11 Chunked len=5 sha256={}\n",
            sha256_hex(b"abcde")
        )
    );
    assert_eq!(
        r[3].header("content-length"),
        Some(FILE_LEN.to_string().as_str())
    );
    assert!(r[3].body.is_empty());
    assert_eq!(r[4].body.len(), MEMORY_LEN);
    assert_eq!(sha256_hex(&r[4].body), sha256_hex(&server.memory_content));
    assert_eq!(sha256_hex(&r[5].body), sha256_hex(&server.file_content));
    assert!(text(6).starts_with("GET /d Http11 None"));
    assert_eq!(r[6].header("connection"), Some("close"));
    assert!(r[..6].iter().all(|r| r.header("connection").is_none()));
    assert_eq!(server.connections(), 1);
}

#[test]
fn malformed_and_oversized_requests_get_their_status_and_close() {
    let server = start(H1Limits::default());
    let huge_header = [
        b"GET / HTTP/1.1\r\nHost: h\r\nX-Big: ".as_slice(),
        &vec![b'a'; 100 * 1024],
        b"\r\n\r\n",
    ]
    .concat();
    let many_headers = {
        let mut r = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
        for i in 0..150 {
            r.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
        }
        r.extend_from_slice(b"\r\n");
        r
    };
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("no host", b"GET / HTTP/1.1\r\n\r\n".to_vec(), 400),
        ("garbage", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(), 400),
        ("bad header name", b"GET / HTTP/1.1\r\nHost: h\r\nA B: c\r\n\r\n".to_vec(), 400),
        ("control in value", b"GET / HTTP/1.1\r\nHost: h\r\nA: b\x01c\r\n\r\n".to_vec(), 400),
        ("http/2.0 version", b"GET / HTTP/2.0\r\nHost: h\r\n\r\n".to_vec(), 505),
        ("h2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec(), 400),
        (
            "cl and te",
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
                .to_vec(),
            400,
        ),
        (
            "two content-lengths",
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nabcd".to_vec(),
            400,
        ),
        (
            "gzip coding",
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n".to_vec(),
            501,
        ),
        (
            "te on 1.0",
            b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".to_vec(),
            400,
        ),
        (
            "bad chunk size",
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".to_vec(),
            400,
        ),
        (
            "chunk overflow",
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000000\r\n"
                .to_vec(),
            400,
        ),
        ("connect", b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n".to_vec(), 501),
        ("huge header", huge_header, 431),
        ("too many headers", many_headers, 431),
    ];
    for (name, input, status) in cases {
        let out = exchange(server.addr, &input);
        let r = responses(&out, &[]);
        assert_eq!(r.len(), 1, "{name}: {:?}", String::from_utf8_lossy(&out));
        assert_eq!(r[0].status, status, "{name}");
        assert_eq!(r[0].header("connection"), Some("close"), "{name}");
        assert_eq!(r[0].header("content-type"), Some("text/plain"), "{name}");
        assert_eq!(r[0].header("server"), Some("hoist-test"), "{name}");
    }
}

#[test]
fn good_request_then_malformed_on_one_connection() {
    let server = start(H1Limits::default());
    let out = exchange(
        server.addr,
        b"GET /ok HTTP/1.1\r\nHost: h\r\n\r\nGET /bad HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n",
    );
    let r = responses(&out, &[]);
    assert_eq!(r.len(), 2);
    assert_eq!(r[0].status, 200);
    assert_eq!(r[1].status, 400);
    assert_eq!(r[1].body, b"Bad Request");
}

#[test]
fn smaller_configured_header_limit() {
    let server = start(H1Limits {
        max_request_headers_kb: 1,
        max_headers_count: 5,
    });
    let mut fits = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
    fits.resize(1020, b'a');
    fits.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    // 1020 + 23 bytes: over 1 KiB.
    let r = responses(&exchange(server.addr, &fits), &[]);
    assert_eq!(r[0].status, 431);
    fits.truncate(980);
    fits.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    let r = responses(&exchange(server.addr, &fits), &[]);
    assert_eq!(r[0].status, 200);
    let six = b"GET / HTTP/1.1\r\nHost: h\r\na: 1\r\nb: 2\r\nc: 3\r\nd: 4\r\ne: 5\r\n\r\n";
    let r = responses(&exchange(server.addr, six), &[]);
    assert_eq!(r[0].status, 431);
}

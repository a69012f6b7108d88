//! Thousands of random and mutated request streams, cut into random reads. The codec must
//! never panic, and what it does (requests seen, errors, bytes written back) must not depend on
//! how the bytes were split: a peer controls the splits, so they must not change the meaning.

use bytes::Bytes;
use http::HeaderMap;

use super::testing::Mock;
use super::*;
use crate::{Body, ResponseHead};

/// xorshift64*: tiny, seeded, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick(&mut self, items: &[&'static [u8]]) -> &'static [u8] {
        items[self.below(items.len())]
    }
}

const REQUESTS: &[&[u8]] = &[
    b"GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
    b"GET /a?b=c HTTP/1.1\r\nHost: h\r\nUser-Agent: curl/8\r\nAccept: */*\r\n\r\n",
    b"HEAD /1k HTTP/1.1\r\nHost: h:10443\r\n\r\n",
    b"GET / HTTP/1.0\r\n\r\n",
    b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello",
    b"POST /up HTTP/1.1\r\nHost: h\r\nContent-Length: 100\r\n\r\n0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789",
    b"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\n\r\n",
    b"POST /c HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n40\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n0\r\nT: 1\r\n\r\n",
    b"POST /e HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\nabc",
    b"PUT /e HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
    b"GET http://example.com/x HTTP/1.1\r\nHost: example.com\r\n\r\n",
    b"DELETE /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
];

const TOKENS: &[&[u8]] = &[
    b"\r\n",
    b"\n",
    b"\r",
    b" ",
    b":",
    b";",
    b",",
    b"\t",
    b"\x00",
    b"\xff",
    b"0",
    b"9",
    b"f",
    b"Content-Length: ",
    b"Content-Length: 3\r\n",
    b"Content-Length: 99999999999999999999\r\n",
    b"Transfer-Encoding: chunked\r\n",
    b"Transfer-Encoding: gzip\r\n",
    b"Host: h\r\n",
    b"Expect: 100-continue\r\n",
    b"Connection: close\r\n",
    b"0\r\n\r\n",
    b"ffffffffffffffffff\r\n",
    b"HTTP/1.1",
    b"HTTP/2.0",
    b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
    b"GET / HTTP/1.1\r\n",
];

fn generate(rng: &mut Rng) -> Vec<u8> {
    match rng.below(5) {
        0 => (0..rng.below(300)).map(|_| rng.next() as u8).collect(),
        1 => pipeline(rng),
        _ => {
            let mut input = pipeline(rng);
            for _ in 0..1 + rng.below(8) {
                mutate(rng, &mut input);
            }
            input
        }
    }
}

fn pipeline(rng: &mut Rng) -> Vec<u8> {
    let mut input = Vec::new();
    for _ in 0..1 + rng.below(4) {
        input.extend_from_slice(rng.pick(REQUESTS));
    }
    input
}

fn mutate(rng: &mut Rng, input: &mut Vec<u8>) {
    let at = rng.below(input.len() + 1);
    match rng.below(6) {
        0 if at < input.len() => input[at] = rng.next() as u8,
        1 => input.insert(at, rng.next() as u8),
        2 => {
            let end = (at + rng.below(16)).min(input.len());
            input.drain(at..end);
        }
        3 => {
            let token = rng.pick(TOKENS);
            input.splice(at..at, token.iter().copied());
        }
        4 => {
            let end = (at + rng.below(40)).min(input.len());
            let copy = input[at..end].to_vec();
            input.splice(at..at, copy);
        }
        _ => input.truncate(at),
    }
}

/// Random cuts, sometimes one byte at a time.
fn split(rng: &mut Rng, input: &[u8]) -> Vec<Vec<u8>> {
    let max_piece = if rng.below(4) == 0 {
        1
    } else {
        1 + rng.below(64)
    };
    let mut pieces = Vec::new();
    let mut rest = input;
    while !rest.is_empty() {
        let n = (1 + rng.below(max_piece)).min(rest.len());
        pieces.push(rest[..n].to_vec());
        rest = &rest[n..];
    }
    pieces
}

/// Serves the stream like a connection manager would; returns what happened and the bytes
/// written back.
async fn serve(pieces: &[Vec<u8>], limits: H1Limits) -> (Vec<String>, Vec<u8>) {
    let mut c = H1Conn::new(Mock::new(pieces), limits);
    let mut log = Vec::new();
    let no_headers = HeaderMap::new();
    for _ in 0..64 {
        let head = match c.read_request().await {
            Ok(Some(head)) => head,
            Ok(None) => break,
            Err(e) => {
                log.push(format!("error {} {}", e.status(), e.details()));
                c.write_error(&e, &no_headers).await.unwrap();
                break;
            }
        };
        assert!(
            head.path.starts_with('/') || head.path == "*",
            "{}",
            head.path
        );
        if head.version == crate::Version::Http11 {
            assert!(head.headers.contains_key("host"));
        }
        let mut entry = format!("{} {} {:?}", head.method, head.path, c.request_info());
        // What the handler does with the body depends only on the request, never on splits.
        let outcome = match head.path.len() % 3 {
            0 => read_all(&mut c).await.map(|b| format!(" body={b:?}")),
            1 => c
                .discard_body(64)
                .await
                .map(|done| format!(" discarded={done}")),
            _ => Ok(String::new()),
        };
        match outcome {
            Ok(s) => entry.push_str(&s),
            Err(e) => {
                log.push(format!("{entry} body error {} {}", e.status(), e.details()));
                c.write_error(&e, &no_headers).await.unwrap();
                break;
            }
        }
        let body = Body::Bytes(Bytes::from(entry.clone().into_bytes()));
        let is_head = head.method == http::Method::HEAD;
        c.write_response(&ResponseHead::new(200), &body, is_head, false)
            .await
            .unwrap();
        log.push(entry);
        if c.should_close() {
            break;
        }
    }
    let written = c.into_transport().written;
    (log, written)
}

async fn read_all(c: &mut H1Conn<Mock>) -> Result<String, H1Error> {
    let mut body = Vec::new();
    while let Some(piece) = c.read_body_chunk().await? {
        body.extend_from_slice(&piece);
    }
    Ok(String::from_utf8_lossy(&body).into_owned())
}

#[test]
fn random_and_mutated_requests_never_panic_and_ignore_splits() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut served = 0;
    let mut errors = 0;
    for case in 0..6000 {
        let input = generate(&mut rng);
        let limits = match rng.below(3) {
            0 => H1Limits {
                max_request_headers_kb: 1,
                max_headers_count: 4,
            },
            _ => H1Limits::default(),
        };
        let pieces = split(&mut rng, &input);
        let (whole_log, whole_out) = runtime.block_on(serve(std::slice::from_ref(&input), limits));
        let (split_log, split_out) = runtime.block_on(serve(&pieces, limits));
        assert_eq!(
            whole_log,
            split_log,
            "case {case}: {:?} in {} pieces",
            String::from_utf8_lossy(&input),
            pieces.len()
        );
        assert!(
            whole_out == split_out,
            "case {case}: output differs for {:?}",
            String::from_utf8_lossy(&input)
        );
        served += whole_log.iter().filter(|l| !l.starts_with("error")).count();
        errors += whole_log.iter().filter(|l| l.contains("error")).count();
    }
    // The generator must exercise both sides, or the test proves little.
    assert!(served > 3000, "served {served}");
    assert!(errors > 1000, "errors {errors}");
}

#[test]
fn oversized_streams_stay_bounded() {
    // Long runs of header bytes and endless chunk extensions, in random pieces: always an error
    // (never a hang, never unbounded buffering).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let mut rng = Rng(42);
    let limits = H1Limits {
        max_request_headers_kb: 1,
        max_headers_count: 10,
    };
    let long_head = [
        b"GET / HTTP/1.1\r\nHost: h\r\nX: ".as_slice(),
        &[b'a'; 5000],
    ]
    .concat();
    let long_ext = [
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;".as_slice(),
        &[b'e'; 10000],
    ]
    .concat();
    for input in [long_head, long_ext] {
        for _ in 0..20 {
            let pieces = split(&mut rng, &input);
            let (log, _) = runtime.block_on(serve(&pieces, limits));
            assert!(log.last().is_some_and(|l| l.contains("error 4")), "{log:?}");
        }
    }
}

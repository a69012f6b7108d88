use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method};

use super::*;
use crate::h1::testing::{block_on, file_region, Mock, Step};

fn conn(pieces: &[&[u8]]) -> H1Conn<Mock> {
    H1Conn::new(Mock::new(pieces), H1Limits::default())
}

fn ok(status: u16) -> ResponseHead {
    let mut head = ResponseHead::new(status);
    head.headers
        .insert("server", HeaderValue::from_static("hoist"));
    head
}

async fn body_of(c: &mut H1Conn<Mock>) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(piece) = c.read_body_chunk().await.unwrap() {
        body.extend_from_slice(&piece);
    }
    body
}

fn written(c: &H1Conn<Mock>) -> String {
    c.transport().written_str()
}

#[test]
fn get_and_response_in_one_write() {
    block_on(async {
        let req = b"GET /x HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut c = conn(&[req]);
        let head = c.read_request().await.unwrap().unwrap();
        assert_eq!(head.method, Method::GET);
        assert_eq!(c.request_header_bytes(), req.len());
        assert_eq!(c.bytes_read(), req.len() as u64);
        let sent = c
            .write_response(
                &ok(200),
                &Body::Bytes(Bytes::from_static(b"hello")),
                false,
                false,
            )
            .await
            .unwrap();
        assert_eq!(sent, 5);
        let expected = "HTTP/1.1 200 OK\r\nserver: hoist\r\ncontent-length: 5\r\n\r\nhello";
        assert_eq!(written(&c), expected);
        assert_eq!(c.bytes_written(), expected.len() as u64);
        assert!(!c.should_close());
        assert!(c.read_request().await.unwrap().is_none());
    });
}

#[test]
fn head_request_gets_length_without_body() {
    block_on(async {
        let mut c = conn(&[b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let sent = c
            .write_response(
                &ok(200),
                &Body::Bytes(Bytes::from_static(b"hello")),
                true,
                false,
            )
            .await
            .unwrap();
        assert_eq!(sent, 0);
        assert_eq!(
            written(&c),
            "HTTP/1.1 200 OK\r\nserver: hoist\r\ncontent-length: 5\r\n\r\n"
        );

        let mut c = conn(&[b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let file = Body::File(file_region(&[7u8; 100_000]));
        assert_eq!(
            c.write_response(&ok(200), &file, true, false)
                .await
                .unwrap(),
            0
        );
        assert_eq!(
            written(&c),
            "HTTP/1.1 200 OK\r\nserver: hoist\r\ncontent-length: 100000\r\n\r\n"
        );
        assert_eq!(c.transport().file_writes, 0);

        // A HEAD answered without the body (a proxied HEAD) keeps the caller's length.
        let mut c = conn(&[b"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let mut head = ResponseHead::new(200);
        head.headers
            .insert("content-length", HeaderValue::from_static("42"));
        c.write_response(&head, &Body::Empty, true, false)
            .await
            .unwrap();
        assert_eq!(written(&c), "HTTP/1.1 200 OK\r\ncontent-length: 42\r\n\r\n");
    });
}

#[test]
fn no_length_and_no_body_for_204_and_304() {
    block_on(async {
        for (status, line) in [(204, "204 No Content"), (304, "304 Not Modified")] {
            let mut c = conn(&[b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"]);
            c.read_request().await.unwrap().unwrap();
            let mut head = ResponseHead::new(status);
            head.headers
                .insert("content-length", HeaderValue::from_static("5"));
            let sent = c
                .write_response(
                    &head,
                    &Body::Bytes(Bytes::from_static(b"hello")),
                    false,
                    false,
                )
                .await
                .unwrap();
            assert_eq!(sent, 0);
            assert_eq!(written(&c), format!("HTTP/1.1 {line}\r\n\r\n"));
        }
    });
}

#[test]
fn close_is_announced_and_ends_the_connection() {
    block_on(async {
        let two = b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\nGET /2 HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut c = conn(&[two]);
        c.read_request().await.unwrap().unwrap();
        c.write_response(&ok(200), &Body::Empty, false, true)
            .await
            .unwrap();
        assert!(written(&c).ends_with("content-length: 0\r\nconnection: close\r\n\r\n"));
        assert!(c.should_close());
        assert!(c.read_request().await.unwrap().is_none());

        // The client's own `Connection: close`.
        let mut c = conn(&[b"GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        assert!(!c.request_info().keep_alive);
        c.write_response(&ok(200), &Body::Empty, false, false)
            .await
            .unwrap();
        assert!(written(&c).contains("connection: close\r\n"));
        assert!(c.should_close());

        c.lingering_close(1 << 20).await.unwrap();
        assert!(c.transport().shut_down);
    });
}

#[test]
fn http10_keep_alive_only_when_asked() {
    block_on(async {
        let mut c = conn(&[b"GET / HTTP/1.0\r\n\r\nGET / HTTP/1.0\r\n\r\n"]);
        let head = c.read_request().await.unwrap().unwrap();
        assert_eq!(head.version, Version::Http10);
        c.write_response(&ok(200), &Body::Empty, false, false)
            .await
            .unwrap();
        assert_eq!(
            written(&c),
            "HTTP/1.1 200 OK\r\nserver: hoist\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
        assert!(c.read_request().await.unwrap().is_none());

        let mut c =
            conn(&[b"GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /b HTTP/1.0\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        c.write_response(&ok(200), &Body::Empty, false, false)
            .await
            .unwrap();
        assert!(written(&c).ends_with("content-length: 0\r\nconnection: keep-alive\r\n\r\n"));
        let second = c.read_request().await.unwrap().unwrap();
        assert_eq!(second.path, "/b");
    });
}

#[test]
fn pipelined_requests_in_one_read_are_served_in_order() {
    block_on(async {
        let input: &[u8] = b"GET /1 HTTP/1.1\r\nHost: h\r\n\r\n\
            POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello\
            POST /3 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n\
            POST /4 HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\nunread\
            GET /5 HTTP/1.1\r\nHost: h\r\n\r\n";
        let mut c = conn(&[input]);
        let mut seen = Vec::new();
        while let Some(head) = c.read_request().await.unwrap() {
            // The body of /4 is left for the codec to skip.
            let body = if head.path == "/4" {
                Vec::new()
            } else {
                body_of(&mut c).await
            };
            seen.push(format!(
                "{} {}",
                head.path,
                String::from_utf8(body).unwrap()
            ));
            c.write_response(&ok(200), &Body::Empty, false, false)
                .await
                .unwrap();
        }
        assert_eq!(seen, ["/1 ", "/2 hello", "/3 abc", "/4 ", "/5 "]);
        assert_eq!(c.bytes_read(), input.len() as u64);
        assert_eq!(written(&c).matches("HTTP/1.1 200 OK").count(), 5);
    });
}

#[test]
fn bodies_split_across_reads() {
    block_on(async {
        let pieces: &[&[u8]] = &[
            b"POST / HTTP/1.1\r\nHo",
            b"st: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r",
            b"\nhel",
            b"lo\r\n0\r\n",
            b"x-t: 1\r\n\r\nPOST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n01234",
            b"56789",
        ];
        let mut c = conn(pieces);
        c.read_request().await.unwrap().unwrap();
        assert_eq!(body_of(&mut c).await, b"hello");
        c.read_request().await.unwrap().unwrap();
        assert_eq!(body_of(&mut c).await, b"0123456789");
        assert!(c.read_request().await.unwrap().is_none());
    });
}

#[test]
fn expect_continue_sent_when_body_is_read() {
    block_on(async {
        let mut c = conn(&[
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
            b"hello",
        ]);
        c.read_request().await.unwrap().unwrap();
        assert!(c.request_info().expect_continue);
        assert_eq!(written(&c), "", "nothing before the body is read");
        assert_eq!(body_of(&mut c).await, b"hello");
        assert_eq!(written(&c), "HTTP/1.1 100 Continue\r\n\r\n");
        c.write_response(&ok(200), &Body::Empty, false, false)
            .await
            .unwrap();
        assert!(!c.should_close());
        assert_eq!(
            written(&c),
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nserver: hoist\r\ncontent-length: 0\r\n\r\n"
        );
    });
}

#[test]
fn response_before_unread_expect_body_closes() {
    block_on(async {
        let mut c = conn(&[
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
            b"hello",
        ]);
        c.read_request().await.unwrap().unwrap();
        c.write_response(&ok(413), &Body::Empty, false, false)
            .await
            .unwrap();
        assert!(written(&c).starts_with("HTTP/1.1 413 Payload Too Large\r\n"));
        assert!(written(&c).contains("connection: close\r\n"));
        assert!(!written(&c).contains("100 Continue"));
        assert!(c.read_request().await.unwrap().is_none());

        // With an empty body there is nothing to wait for: the connection stays.
        let mut c = conn(&[
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n",
        ]);
        c.read_request().await.unwrap().unwrap();
        c.write_response(&ok(200), &Body::Empty, false, false)
            .await
            .unwrap();
        assert!(!written(&c).contains("connection: close"));
        assert!(!c.should_close());
    });
}

#[test]
fn explicit_interim_response_counts_as_continue() {
    block_on(async {
        let mut c = conn(&[
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n",
            b"ok",
        ]);
        c.read_request().await.unwrap().unwrap();
        c.write_response(&ResponseHead::new(100), &Body::Empty, false, false)
            .await
            .unwrap();
        assert_eq!(body_of(&mut c).await, b"ok");
        assert_eq!(written(&c), "HTTP/1.1 100 Continue\r\n\r\n");
    });
}

#[test]
fn discard_body_within_and_over_limit() {
    block_on(async {
        let mut c = conn(&[
            b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n0123",
            b"456789GET /next HTTP/1.1\r\nHost: h\r\n\r\n",
        ]);
        c.read_request().await.unwrap().unwrap();
        assert!(c.discard_body(10).await.unwrap());
        c.write_response(&ok(200), &Body::Empty, false, false)
            .await
            .unwrap();
        assert_eq!(c.read_request().await.unwrap().unwrap().path, "/next");

        let mut c = conn(&[b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        assert!(!c.discard_body(10).await.unwrap());
        assert!(c.should_close());
        c.write_response(&ok(200), &Body::Empty, false, false)
            .await
            .unwrap();
        assert!(written(&c).contains("connection: close"));

        let chunked: &[u8] =
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n01234567\r\n8\r\n01234567\r\n0\r\n\r\n";
        let mut c = conn(&[chunked]);
        c.read_request().await.unwrap().unwrap();
        assert!(!c.discard_body(10).await.unwrap());
        let mut c = conn(&[chunked]);
        c.read_request().await.unwrap().unwrap();
        assert!(c.discard_body(16).await.unwrap());
        assert!(!c.should_close());

        // A body still waiting for `100 Continue` is never solicited just to be dropped.
        let mut c = conn(&[
            b"POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
        ]);
        c.read_request().await.unwrap().unwrap();
        assert!(!c.discard_body(1000).await.unwrap());
        assert_eq!(written(&c), "");
    });
}

#[test]
fn large_bodies_from_memory_and_file() {
    block_on(async {
        let big: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        let mut c = conn(&[b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let sent = c
            .write_response(
                &ok(200),
                &Body::Bytes(Bytes::from(big.clone())),
                false,
                false,
            )
            .await
            .unwrap();
        assert_eq!(sent, big.len() as u64);
        let out = &c.transport().written;
        let head = b"HTTP/1.1 200 OK\r\nserver: hoist\r\ncontent-length: 100000\r\n\r\n";
        assert_eq!(&out[..head.len()], head);
        assert_eq!(&out[head.len()..], &big[..]);
        // Head and the start of the body went in one vectored write (the mock takes 1000 bytes
        // per call), the rest as plain writes.
        assert_eq!(c.transport().vectored_writes, 1);
        assert_eq!(c.bytes_written(), (head.len() + big.len()) as u64);

        let mut c = conn(&[b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let sent = c
            .write_response(&ok(200), &Body::File(file_region(&big)), false, false)
            .await
            .unwrap();
        assert_eq!(sent, big.len() as u64);
        assert_eq!(c.transport().file_writes, 1);
        let out = &c.transport().written;
        assert_eq!(&out[..head.len()], head);
        assert_eq!(&out[head.len()..], &big[..]);
    });
}

#[test]
fn codec_errors_get_a_local_reply_and_close() {
    block_on(async {
        let cases: &[(&[u8], &str)] = &[
            (b"GET / HTTP/1.1\r\n\r\n", "400 Bad Request"),
            (b"GET / HTTP/2.0\r\nHost: h\r\n\r\n", "505 HTTP Version Not Supported"),
            (
                b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
                "501 Not Implemented",
            ),
            (
                b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
                "400 Bad Request",
            ),
        ];
        for (input, line) in cases {
            let mut c = conn(&[input, b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"]);
            let err = c.read_request().await.unwrap_err();
            let mut extra = HeaderMap::new();
            extra.insert("server", HeaderValue::from_static("hoist"));
            c.write_error(&err, &extra).await.unwrap();
            let reason = line.split_once(' ').unwrap().1;
            assert_eq!(
                written(&c),
                format!(
                    "HTTP/1.1 {line}\r\nserver: hoist\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{reason}",
                    reason.len()
                )
            );
            assert!(c.should_close());
            assert!(c.read_request().await.unwrap().is_none());
        }
    });
}

#[test]
fn oversized_head_stops_reading_at_the_limit() {
    block_on(async {
        let limits = H1Limits {
            max_request_headers_kb: 2,
            ..H1Limits::default()
        };
        let mut mock = Mock::new(&[b"GET / HTTP/1.1\r\nHost: h\r\nX: "]);
        // Far more than the limit, in small pieces as a slow client sends it.
        for _ in 0..1000 {
            mock.push(&[b'a'; 100]);
        }
        let mut c = H1Conn::new(mock, limits);
        let err = c.read_request().await.unwrap_err();
        assert!(matches!(err, H1Error::HeadersTooLarge), "{err}");
        assert!(c.bytes_read() <= 2048 + 100, "read {}", c.bytes_read());
    });
}

#[test]
fn bad_chunk_is_a_codec_error() {
    block_on(async {
        let mut c = conn(&[
            b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloXX",
        ]);
        c.read_request().await.unwrap().unwrap();
        let first = c.read_body_chunk().await.unwrap().unwrap();
        assert_eq!(&first[..], b"hello");
        let err = c.read_body_chunk().await.unwrap_err();
        assert!(matches!(err, H1Error::InvalidChunk));
        assert_eq!(err.status(), 400);
        assert!(c.should_close());
    });
}

#[test]
fn eof_cases() {
    block_on(async {
        let mut c = conn(&[]);
        assert!(c.read_request().await.unwrap().is_none());
        let mut c = conn(&[b"\r\n"]);
        assert!(c.read_request().await.unwrap().is_none());
        let mut c = conn(&[b"GET / HTTP/1.1\r\nHo"]);
        assert!(matches!(
            c.read_request().await,
            Err(H1Error::UnexpectedEof)
        ));
        let mut c = conn(&[b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc"]);
        c.read_request().await.unwrap().unwrap();
        assert_eq!(&c.read_body_chunk().await.unwrap().unwrap()[..], b"abc");
        let err = c.read_body_chunk().await.unwrap_err();
        assert!(matches!(err, H1Error::UnexpectedEof));
        assert!(!err.wants_reply());
        c.write_error(&err, &HeaderMap::new()).await.unwrap();
        assert_eq!(written(&c), "");
    });
}

/// Polls a future once, then drops it.
fn poll_once<F: Future>(f: F) -> Poll<F::Output> {
    let mut f = pin!(f);
    f.as_mut().poll(&mut Context::from_waker(Waker::noop()))
}

#[test]
fn read_request_is_cancellation_safe() {
    let steps = vec![
        Step::Data(b"GET /a HTTP/1.1\r\nHost: h\r\n\r\nGET /b HT".to_vec()),
        Step::Pending,
        Step::Data(b"TP/1.1\r\nHost: h\r\n\r\n".to_vec()),
    ];
    let mut c = H1Conn::new(Mock::steps(steps), H1Limits::default());
    let Poll::Ready(Ok(Some(a))) = poll_once(c.read_request()) else {
        panic!("first request should be ready");
    };
    assert_eq!(a.path, "/a");
    drop(a);
    // The second request is half there: the read stalls, and the call is abandoned.
    assert!(poll_once(c.read_request()).is_pending());
    let Poll::Ready(Ok(Some(b))) = poll_once(c.read_request()) else {
        panic!("second request should be complete");
    };
    assert_eq!(b.path, "/b");
}

#[test]
fn status_out_of_range_is_refused() {
    block_on(async {
        let mut c = conn(&[b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let err = c
            .write_response(&ResponseHead::new(42), &Body::Empty, false, false)
            .await
            .unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::InvalidInput);
        assert_eq!(written(&c), "");
    });
}

/// A streamed body with every piece already sent and the producer gone.
fn stream(length: Option<u64>, pieces: &[&'static [u8]], fail: bool) -> Body {
    let (tx, body) = crate::body::StreamBody::channel(length);
    let pieces: Vec<&'static [u8]> = pieces.to_vec();
    // The channel holds STREAM_CHANNEL_PIECES: tests stay under it.
    for p in pieces {
        tx.try_send(Ok(Bytes::from_static(p))).unwrap();
    }
    if fail {
        tx.try_send(Err(std::io::Error::other("upstream reset")))
            .unwrap();
    }
    Body::Stream(body)
}

#[test]
fn streamed_bodies_with_and_without_a_length() {
    block_on(async {
        let mut c = conn(&[b"GET / HTTP/1.1\r\nHost: h\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let body = stream(Some(5), &[b"he", b"llo"], false);
        assert_eq!(
            c.write_response(&ok(200), &body, false, false)
                .await
                .unwrap(),
            5
        );
        c.read_request().await.unwrap().unwrap();
        let body = stream(None, &[b"ab", b"cde"], false);
        assert_eq!(
            c.write_response(&ok(200), &body, false, false)
                .await
                .unwrap(),
            5
        );
        assert_eq!(
            written(&c),
            "HTTP/1.1 200 OK\r\nserver: hoist\r\ncontent-length: 5\r\n\r\nhello\
             HTTP/1.1 200 OK\r\nserver: hoist\r\ntransfer-encoding: chunked\r\n\r\n\
             2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n"
        );
        assert_eq!(c.bytes_written(), written(&c).len() as u64);
        assert!(!c.should_close());
    });
}

#[test]
fn a_failed_or_short_stream_is_an_error_and_closes() {
    block_on(async {
        let mut c = conn(&[b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let body = stream(None, &[b"ab"], true);
        assert!(c
            .write_response(&ok(200), &body, false, false)
            .await
            .is_err());
        assert!(c.should_close());
        // No terminating chunk: the client cannot take the cut body for a whole one.
        assert!(!written(&c).ends_with("0\r\n\r\n"));

        let mut c = conn(&[b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let body = stream(Some(10), &[b"abc"], false);
        assert!(c
            .write_response(&ok(200), &body, false, false)
            .await
            .is_err());
        assert!(c.should_close());

        // HTTP/1.0 without a length: the body ends with the connection.
        let mut c = conn(&[b"GET / HTTP/1.0\r\n\r\n"]);
        c.read_request().await.unwrap().unwrap();
        let body = stream(None, &[b"xyz"], false);
        assert_eq!(
            c.write_response(&ok(200), &body, false, false)
                .await
                .unwrap(),
            3
        );
        assert_eq!(
            written(&c),
            "HTTP/1.1 200 OK\r\nserver: hoist\r\nconnection: close\r\n\r\nxyz"
        );
        assert!(c.should_close());
    });
}

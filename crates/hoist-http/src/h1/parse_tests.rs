use super::*;
use crate::h1::BodyFraming;

fn limits() -> H1Limits {
    H1Limits::default()
}

fn parse_with(input: &[u8], limits: &H1Limits) -> Result<Option<Parsed>, H1Error> {
    let mut buf = BytesMut::from(input);
    parse_head(&mut buf, limits, &mut Scratch::new())
}

fn parse(input: &[u8]) -> Result<Parsed, H1Error> {
    match parse_with(input, &limits())? {
        Some(p) => Ok(p),
        None => panic!("incomplete: {:?}", String::from_utf8_lossy(input)),
    }
}

fn status_of(input: &[u8]) -> u16 {
    match parse(input) {
        Ok(_) => 0,
        Err(e) => e.status(),
    }
}

#[test]
fn simple_get() {
    let input = b"GET /a/b?x=1 HTTP/1.1\r\nHost: example.com\r\nX-Many: 1\r\nx-many: 2\r\nEmpty:\r\nAccept: */*  \r\n\r\nNEXT";
    let mut buf = BytesMut::from(&input[..]);
    let p = parse_head(&mut buf, &limits(), &mut Scratch::new())
        .unwrap()
        .unwrap();
    assert_eq!(p.head.method, Method::GET);
    assert_eq!(p.head.path, "/a/b?x=1");
    assert_eq!(p.head.path_only(), "/a/b");
    assert_eq!(p.head.version, Version::Http11);
    assert_eq!(p.head.authority.as_deref(), Some("example.com"));
    assert_eq!(p.head.headers["host"], "example.com");
    let many: Vec<_> = p.head.headers.get_all("x-many").iter().collect();
    assert_eq!(many, ["1", "2"]);
    assert_eq!(p.head.headers["empty"], "");
    assert_eq!(p.head.headers["accept"], "*/*");
    assert_eq!(p.len, input.len() - 4);
    assert_eq!(p.info.framing, BodyFraming::None);
    assert!(p.info.keep_alive);
    // What follows the head stays for the next read.
    assert_eq!(&buf[..], b"NEXT");
}

#[test]
fn incomplete_heads_ask_for_more() {
    let full = b"POST /x HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\n";
    for i in 0..full.len() {
        assert!(
            parse_with(&full[..i], &limits()).unwrap().is_none(),
            "prefix of {i} bytes"
        );
    }
    let p = parse(full).unwrap();
    assert_eq!(p.info.framing, BodyFraming::Length(3));
}

#[test]
fn tolerated_forms() {
    // Leading empty lines, bare LF line ends (as httparse accepts them), HTTP/1.0 without Host.
    let p = parse(b"\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(p.head.path, "/");
    let p = parse(b"GET / HTTP/1.1\nHost: h\n\n").unwrap();
    assert_eq!(p.head.authority.as_deref(), Some("h"));
    let p = parse(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(p.head.version, Version::Http10);
    assert_eq!(p.head.authority, None);
    assert!(!p.info.keep_alive);
    let p = parse(b"OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(p.head.path, "*");
    // Extension methods are tokens like any other.
    let p = parse(b"PURGE /x HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(p.head.method.as_str(), "PURGE");
    let p = parse(b"M-SEARCH! /x HTTP/1.1\r\nHost: h\r\n\r\n").unwrap();
    assert_eq!(p.head.method.as_str(), "M-SEARCH!");
    // An empty Host is allowed for a target without authority (RFC 9112 §3.2).
    let p = parse(b"GET / HTTP/1.1\r\nHost:\r\n\r\n").unwrap();
    assert_eq!(p.head.authority, None);
    // obs-text in values passes through.
    let p = parse(b"GET / HTTP/1.1\r\nHost: h\r\nX: caf\xc3\xa9\r\n\r\n").unwrap();
    assert_eq!(p.head.headers["x"].as_bytes(), b"caf\xc3\xa9");
}

#[test]
fn absolute_form_authority_wins_over_host() {
    let p = parse(b"GET http://example.com:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n").unwrap();
    assert_eq!(p.head.authority.as_deref(), Some("example.com:8080"));
    assert_eq!(p.head.path, "/p?q");
    assert_eq!(p.head.headers["host"], "other");
}

#[test]
fn malformed_is_400() {
    let cases: &[&[u8]] = &[
        b"GET\r\n\r\n",
        b"GET /\r\n\r\n",
        b"GET  / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1 \r\nHost: h\r\n\r\n",
        b"G(T / HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nBad Name: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nName : x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\n: x\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x01b\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\x7fb\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\rb\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n folded\r\n\r\n",
        b"GET / HTTP/1.1\r\n Host: h\r\n\r\n",
        b"GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n",
        b"GET /a\x00b HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET /\xff HTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.x\r\nHost: h\r\n\r\n",
        b"GET / HTTP/2\r\nHost: h\r\n\r\n",
        b"GET / XTTP/1.1\r\nHost: h\r\n\r\n",
        b"GET / HTTP/1.1\r\rHost: h\r\n\r\n",
    ];
    for input in cases {
        let r = parse_with(input, &limits());
        assert!(
            matches!(&r, Err(e) if e.status() == 400),
            "{:?}: {:?}",
            String::from_utf8_lossy(input),
            r.map(|p| p.map(|p| p.head))
        );
    }
}

type Check = fn(&H1Error) -> bool;

#[test]
fn specific_400s() {
    let cases: &[(&[u8], Check)] = &[
        (b"GET / HTTP/1.1\r\n\r\n", |e| {
            matches!(e, H1Error::MissingHost)
        }),
        (b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", |e| {
            matches!(e, H1Error::InvalidHost)
        }),
        (b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", |e| {
            matches!(e, H1Error::InvalidHost)
        }),
        (b"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", |e| {
            matches!(e, H1Error::InvalidHost)
        }),
        (b"GET * HTTP/1.1\r\nHost: h\r\n\r\n", |e| {
            matches!(e, H1Error::InvalidUrl)
        }),
        (b"GET relative HTTP/1.1\r\nHost: h\r\n\r\n", |e| {
            matches!(e, H1Error::InvalidUrl)
        }),
        (b"GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n", |e| {
            matches!(e, H1Error::InvalidUrl)
        }),
        (b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", |e| {
            matches!(e, H1Error::Http2Preface)
        }),
    ];
    for (input, check) in cases {
        let r = parse(input);
        match r {
            Err(e) if check(&e) && e.status() == 400 => {}
            other => panic!(
                "{:?}: {:?}",
                String::from_utf8_lossy(input),
                other.map(|p| p.head)
            ),
        }
    }
}

#[test]
fn smuggling() {
    let cl_te =
        b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(matches!(
        parse(cl_te),
        Err(H1Error::ContentLengthAndChunked)
    ));
    let te_cl =
        b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n";
    assert!(matches!(
        parse(te_cl),
        Err(H1Error::ContentLengthAndChunked)
    ));
    let two_cl = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
    assert!(matches!(parse(two_cl), Err(H1Error::InvalidContentLength)));
    let same_cl = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n";
    assert_eq!(parse(same_cl).unwrap().info.framing, BodyFraming::Length(5));
    let bad_cl = b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5a\r\n\r\n";
    assert!(matches!(parse(bad_cl), Err(H1Error::InvalidContentLength)));
    let gzip = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
    assert_eq!(status_of(gzip), 501);
    let te10 = b"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert!(matches!(
        parse(te10),
        Err(H1Error::TransferEncodingNotAllowed)
    ));
    let chunked = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
    assert_eq!(parse(chunked).unwrap().info.framing, BodyFraming::Chunked);
    // The space before the colon is what classic smuggling attacks use; httparse refuses it.
    let spaced = b"POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding : chunked\r\n\r\n";
    assert_eq!(status_of(spaced), 400);
}

#[test]
fn versions() {
    assert_eq!(status_of(b"GET / HTTP/2.0\r\nHost: h\r\n\r\n"), 505);
    assert_eq!(status_of(b"GET / HTTP/1.2\r\nHost: h\r\n\r\n"), 505);
    assert_eq!(status_of(b"GET / HTTP/0.9\r\nHost: h\r\n\r\n"), 505);
    assert_eq!(status_of(b"GET / HTTP/3.0\r\n\r\n"), 505);
    // A space inside the target makes four words: malformed, whatever the last one says.
    assert_eq!(status_of(b"GET /a b HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    assert_eq!(status_of(b"GET /a b HTTP/2.0\r\nHost: h\r\n\r\n"), 400);
    assert_eq!(status_of(b"GET / HTTP/1.1 x\r\nHost: h\r\n\r\n"), 400);
    assert_eq!(status_of(b"GET /\r\nHost: h\r\n\r\n"), 400);
    // The verdict waits for the whole line: "HTTP/2" could still become "HTTP/2.0".
    assert!(parse_with(b"GET / HTTP/2", &limits()).unwrap().is_none());
    assert!(parse_with(b"GET / HTTP/2.0", &limits()).unwrap().is_none());
    assert!(parse_with(b"PRI * HTTP/2", &limits()).unwrap().is_none());
}

#[test]
fn a_fragment_in_the_target_is_400() {
    assert_eq!(status_of(b"GET /#frag HTTP/1.1\r\nHost: h\r\n\r\n"), 400);
    assert_eq!(
        status_of(b"GET /a/index.html:80?x=1#tag HTTP/1.1\r\nHost: h\r\n\r\n"),
        400
    );
    assert_eq!(
        status_of(b"GET http://h/a#b HTTP/1.1\r\nHost: h\r\n\r\n"),
        400
    );
    // Percent-encoded, it is an ordinary path character.
    assert_eq!(
        parse(b"GET /a%23b HTTP/1.1\r\nHost: h\r\n\r\n")
            .unwrap()
            .head
            .path,
        "/a%23b"
    );
}

#[test]
fn connect_is_501() {
    assert_eq!(
        status_of(b"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n"),
        501
    );
}

fn with_headers_count(n: usize) -> Vec<u8> {
    let mut req = b"GET / HTTP/1.1\r\nHost: h\r\n".to_vec();
    for i in 1..n {
        req.extend_from_slice(format!("x-h{i}: v\r\n").as_bytes());
    }
    req.extend_from_slice(b"\r\n");
    req
}

#[test]
fn header_count_limit() {
    let p = parse(&with_headers_count(100)).unwrap();
    assert_eq!(p.head.headers.len(), 100);
    assert!(matches!(
        parse(&with_headers_count(101)),
        Err(H1Error::TooManyHeaders)
    ));
    let small = H1Limits {
        max_headers_count: 3,
        ..limits()
    };
    assert!(parse_with(&with_headers_count(3), &small)
        .unwrap()
        .is_some());
    assert!(matches!(
        parse_with(&with_headers_count(4), &small),
        Err(H1Error::TooManyHeaders)
    ));
    // Above the inline array, the heap takes over.
    let large = H1Limits {
        max_headers_count: 300,
        ..limits()
    };
    let p = parse_with(&with_headers_count(250), &large)
        .unwrap()
        .unwrap();
    assert_eq!(p.head.headers.len(), 250);
    assert!(matches!(
        parse_with(&with_headers_count(301), &large),
        Err(H1Error::TooManyHeaders)
    ));
}

#[test]
fn header_size_limit() {
    let one_kb = H1Limits {
        max_request_headers_kb: 1,
        ..limits()
    };
    let mut req = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
    let fixed = req.len() + 4;
    req.resize(1024 - 4, b'v');
    req.extend_from_slice(b"\r\n\r\n");
    assert_eq!(req.len(), 1024);
    assert!(parse_with(&req, &one_kb).unwrap().is_some());
    // One byte more, complete: too large.
    let mut over = req[..fixed - 4].to_vec();
    over.resize(1025 - 4, b'v');
    over.extend_from_slice(b"\r\n\r\n");
    assert!(matches!(
        parse_with(&over, &one_kb),
        Err(H1Error::HeadersTooLarge)
    ));
    // Incomplete and already past the limit: too large without waiting for the end.
    let mut endless = b"GET / HTTP/1.1\r\nHost: h\r\nX: ".to_vec();
    endless.resize(1025, b'v');
    assert!(matches!(
        parse_with(&endless, &one_kb),
        Err(H1Error::HeadersTooLarge)
    ));
    endless.truncate(1024);
    assert!(parse_with(&endless, &one_kb).unwrap().is_none());
    // A long request line counts too.
    let mut long_path = b"GET /".to_vec();
    long_path.resize(2000, b'a');
    assert!(matches!(
        parse_with(&long_path, &one_kb),
        Err(H1Error::HeadersTooLarge)
    ));
}

#[test]
fn body_bytes_are_not_part_of_the_head() {
    let mut buf = BytesMut::from(
        &b"POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 4\r\n\r\nbodyGET / HTTP/1.1\r\n"[..],
    );
    let p = parse_head(&mut buf, &limits(), &mut Scratch::new())
        .unwrap()
        .unwrap();
    assert_eq!(p.info.framing, BodyFraming::Length(4));
    assert_eq!(&buf[..], b"bodyGET / HTTP/1.1\r\n");
}

#[test]
fn scratch_is_reused() {
    let mut scratch = Scratch::new();
    let mut buf = BytesMut::from(&with_headers_count(10)[..]);
    parse_head(&mut buf, &limits(), &mut scratch)
        .unwrap()
        .unwrap();
    let cap = scratch.capacity();
    assert!(cap >= 10);
    let mut buf = BytesMut::from(&with_headers_count(10)[..]);
    parse_head(&mut buf, &limits(), &mut scratch)
        .unwrap()
        .unwrap();
    assert_eq!(scratch.capacity(), cap);
    assert!(scratch.is_empty());
}

//! The tls_inspector parser on real ClientHellos from rustls' client: whole, split across
//! records at every byte, cut at every byte, and mutated at random; and the socket reader's
//! promise not to read past the hello.
// Helpers outside #[test] functions may unwrap too: a panic here is a failed test.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use hoist_tls::client_hello::{next_read_len, parse, read_client_hello, Inspect};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore};
use tokio::io::AsyncWriteExt;

fn hello(
    sni: &str,
    alpn: &[&[u8]],
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Vec<u8> {
    let mut cfg = ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(RootCertStore::empty())
    .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let mut conn = ClientConnection::new(
        Arc::new(cfg),
        ServerName::try_from(sni.to_string()).unwrap(),
    )
    .unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

fn default_hello() -> Vec<u8> {
    hello(
        "www.example.com",
        &[b"h2", b"http/1.1"],
        rustls::ALL_VERSIONS,
    )
}

fn info(bytes: &[u8]) -> hoist_tls::ClientHelloInfo {
    match parse(bytes) {
        Inspect::Hello(i) => i,
        other => panic!("not a hello: {other:?}"),
    }
}

/// The handshake message of a single-record hello, re-framed as records cut at `cuts`.
fn reframe(wire: &[u8], cuts: &[usize]) -> Vec<u8> {
    assert_eq!(wire[0], 0x16);
    let len = usize::from(u16::from_be_bytes([wire[3], wire[4]]));
    assert_eq!(wire.len(), 5 + len, "one record");
    let msg = &wire[5..];
    let mut out = Vec::new();
    let mut start = 0;
    for &end in cuts.iter().chain([msg.len()].iter()) {
        let frag = &msg[start..end];
        out.extend_from_slice(&[0x16, 0x03, 0x01]);
        out.extend_from_slice(&(frag.len() as u16).to_be_bytes());
        out.extend_from_slice(frag);
        start = end;
    }
    out
}

#[test]
fn real_hello_fields() {
    let i = info(&default_hello());
    assert_eq!(i.sni.as_deref(), Some("www.example.com"));
    assert_eq!(i.alpn, vec![b"h2".to_vec(), b"http/1.1".to_vec()]);
    assert_eq!(i.versions, vec![0x0304, 0x0303]);

    let i = info(&hello("a.test", &[], &[&rustls::version::TLS12]));
    assert_eq!(i.sni.as_deref(), Some("a.test"));
    assert!(i.alpn.is_empty());
    // TLS 1.2 only: rustls sends no supported_versions; the legacy field says 1.2.
    assert_eq!(i.versions, vec![0x0303]);

    // An IP address is not sent as SNI.
    let i = info(&hello("127.0.0.1", &[], rustls::ALL_VERSIONS));
    assert_eq!(i.sni, None);
}

#[test]
fn sni_is_lower_cased() {
    let mut wire = default_hello();
    let at = wire
        .windows(15)
        .position(|w| w == b"www.example.com")
        .unwrap();
    wire[at..at + 15].copy_from_slice(b"WWW.Example.COM");
    assert_eq!(info(&wire).sni.as_deref(), Some("www.example.com"));
}

#[test]
fn every_prefix_needs_more_and_every_read_stays_in_one_record() {
    let wire = default_hello();
    for n in 0..wire.len() {
        assert_eq!(parse(&wire[..n]), Inspect::NeedMore, "prefix {n}");
        // Reading what next_read_len asks never crosses the end of the hello.
        assert!(n + next_read_len(&wire[..n]) <= wire.len(), "prefix {n}");
    }
    assert!(matches!(parse(&wire), Inspect::Hello(_)));
}

#[test]
fn split_across_two_records_at_every_byte() {
    let wire = default_hello();
    let whole = info(&wire);
    let msg_len = wire.len() - 5;
    for cut in 1..msg_len {
        let framed = reframe(&wire, &[cut]);
        assert_eq!(info(&framed), whole, "cut at {cut}");
        for n in 0..framed.len() {
            assert_eq!(
                parse(&framed[..n]),
                Inspect::NeedMore,
                "cut {cut}, prefix {n}"
            );
        }
    }
}

#[test]
fn split_into_many_small_records() {
    let wire = default_hello();
    let whole = info(&wire);
    let msg_len = wire.len() - 5;
    for step in [1, 2, 3, 7, 100] {
        let cuts: Vec<usize> = (step..msg_len).step_by(step).collect();
        assert_eq!(info(&reframe(&wire, &cuts)), whole, "step {step}");
    }
}

#[test]
fn framing_errors() {
    let wire = default_hello();
    let framed = reframe(&wire, &[10]);
    // The second record is not a handshake record.
    let mut bad = framed.clone();
    bad[5 + 10] = 0x17;
    assert_eq!(parse(&bad), Inspect::Malformed);
    // Not a ClientHello (ServerHello type).
    let mut bad = wire.clone();
    bad[5] = 2;
    assert_eq!(parse(&bad), Inspect::Malformed);
    // A hello announcing more than the bound.
    let mut big = wire[..5].to_vec();
    big.extend_from_slice(&[1, 0x01, 0x00, 0x01]);
    big[3..5].copy_from_slice(&4u16.to_be_bytes());
    assert_eq!(parse(&big), Inspect::Malformed);
    // A duplicated extension: ALPN relabelled as a second supported_groups (which the parser
    // otherwise skips), so only the duplicate check can refuse it.
    let mut dup = wire.clone();
    let at = dup
        .windows(4)
        .position(|w| w == [0x00, 0x10, 0x00, 0x0e])
        .unwrap(); // ALPN
    assert!(dup.windows(2).any(|w| w == [0x00, 0x0a]));
    dup[at + 1] = 0x0a;
    assert_eq!(parse(&dup), Inspect::Malformed);
    dup[at + 1] = 0x10;
    assert!(matches!(parse(&dup), Inspect::Hello(_)));
}

/// xorshift64*: deterministic randomness without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[test]
fn mutated_hellos_never_panic() {
    let seeds = [
        default_hello(),
        reframe(&default_hello(), &[40, 41, 200]),
        hello("a.test", &[], &[&rustls::version::TLS12]),
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut outcomes = [0usize; 4];
    for round in 0..30_000 {
        let mut m = seeds[round % seeds.len()].clone();
        for _ in 0..1 + rng.below(4) {
            match rng.below(5) {
                0 => {
                    let i = rng.below(m.len());
                    m[i] = rng.next() as u8;
                }
                1 => {
                    let i = rng.below(m.len());
                    m[i] ^= 1 << rng.below(8);
                }
                2 => m.truncate(rng.below(m.len() + 1)),
                3 => {
                    // Length fields are the interesting bytes: set one to an extreme.
                    let i = rng.below(m.len());
                    m[i] = [0x00, 0xff, 0x01, 0x7f][rng.below(4)];
                }
                _ => {
                    let i = rng.below(m.len() + 1);
                    let extra: Vec<u8> = (0..rng.below(8)).map(|_| rng.next() as u8).collect();
                    m.splice(i..i, extra);
                }
            }
            if m.is_empty() {
                break;
            }
        }
        let r = parse(&m);
        outcomes[match r {
            Inspect::NeedMore => 0,
            Inspect::NotTls => 1,
            Inspect::Malformed => 2,
            Inspect::Hello(_) => 3,
        }] += 1;
        let _ = next_read_len(&m);
    }
    // The mutations reach every outcome, so the parser's paths were exercised.
    assert!(outcomes.iter().all(|&n| n > 0), "{outcomes:?}");
}

#[tokio::test]
async fn reader_stops_at_the_end_of_the_hello() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    let hello = reframe(&default_hello(), &[100]);
    let mut sent = hello.clone();
    sent.extend_from_slice(b"\x17\x03\x03\x00\x05after");
    client.write_all(&sent).await.unwrap();
    let mut buf = Vec::new();
    let r = read_client_hello(&server, &mut buf).await.unwrap();
    assert!(matches!(r, Inspect::Hello(ref i) if i.sni.as_deref() == Some("www.example.com")));
    assert_eq!(buf, hello);
    let mut rest = [0u8; 64];
    let n = server.try_read(&mut rest).unwrap();
    assert_eq!(&rest[..n], b"\x17\x03\x03\x00\x05after");
}

#[tokio::test]
async fn reader_keeps_plain_text() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = Vec::new();
    assert_eq!(
        read_client_hello(&server, &mut buf).await.unwrap(),
        Inspect::NotTls
    );
    assert!(
        !buf.is_empty() && b"GET / HTTP/1.1".starts_with(&buf),
        "{buf:?}"
    );

    // A peer that closes first.
    let mut client = tokio::net::TcpStream::connect(listener.local_addr().unwrap())
        .await
        .unwrap();
    let (server, _) = listener.accept().await.unwrap();
    client.write_all(&default_hello()[..20]).await.unwrap();
    client.shutdown().await.unwrap();
    let mut buf = Vec::new();
    let err = read_client_hello(&server, &mut buf).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
}

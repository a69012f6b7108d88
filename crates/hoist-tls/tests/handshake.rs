//! The handshake and the user-space transport against rustls' own client, in process, where
//! the test controls exactly which bytes reach the socket and when.
// Helpers outside #[test] functions may unwrap too: a panic here is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use hoist_config::model::tls::TlsVersion;
use hoist_tls::{
    accept, read_client_hello, HandshakeErrorKind, Inspect, ServerContext, Transport,
    UserTlsTransport,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, HandshakeKind, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const GUARD: Duration = Duration::from_secs(20);

fn client_config(versions: &[&'static rustls::SupportedProtocolVersion]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(&pki().ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    Arc::new(
        ClientConfig::builder_with_provider(
            Arc::new(rustls::crypto::aws_lc_rs::default_provider()),
        )
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth(),
    )
}

fn server_ctx(max: TlsVersion) -> Arc<ServerContext> {
    let mut ctx = context(&[&pki().ecdsa_a]);
    ctx.tls_params.max_version = max;
    ServerContext::build(&ctx).unwrap()
}

/// A blocking rustls client: handshake with `early` queued before it completes, so that rustls
/// sends it in the same write as its Finished.
fn client_handshake(
    cfg: Arc<ClientConfig>,
    addr: SocketAddr,
    early: &[u8],
) -> (ClientConnection, std::net::TcpStream) {
    let mut conn = ClientConnection::new(cfg, ServerName::try_from("a.test").unwrap()).unwrap();
    let mut sock = std::net::TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(GUARD)).unwrap();
    conn.writer().write_all(early).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).unwrap();
    }
    while conn.wants_write() {
        conn.write_tls(&mut sock).unwrap();
    }
    (conn, sock)
}

fn client_read(conn: &mut ClientConnection, sock: &mut std::net::TcpStream, n: usize) -> Vec<u8> {
    let mut got = Vec::new();
    while got.len() < n {
        let mut buf = vec![0u8; n - got.len()];
        match conn.reader().read(&mut buf) {
            Ok(k) if k > 0 => {
                got.extend_from_slice(&buf[..k]);
                continue;
            }
            Ok(_) => panic!("clean EOF after {} bytes", got.len()),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => panic!("{e}"),
        }
        if conn.read_tls(sock).unwrap() == 0 {
            panic!("EOF after {} bytes", got.len());
        }
        conn.process_new_packets().unwrap();
        while conn.wants_write() {
            conn.write_tls(sock).unwrap();
        }
    }
    got
}

async fn inspect_and_accept(
    listener: &TcpListener,
    ctx: &ServerContext,
) -> Result<hoist_tls::Established, hoist_tls::HandshakeError> {
    let (tcp, _) = listener.accept().await.unwrap();
    let mut buf = Vec::new();
    let Inspect::Hello(_) = read_client_hello(&tcp, &mut buf).await.unwrap() else {
        panic!("not a hello")
    };
    accept(tcp, buf, ctx).await
}

/// After `accept`, the client's first application data record is still whole in the kernel.
async fn assert_first_record_unread(tcp: &TcpStream) {
    let mut peek = [0u8; 64];
    let n = tokio::time::timeout(GUARD, tcp.peek(&mut peek))
        .await
        .unwrap()
        .unwrap();
    assert!(n >= 5, "{n}");
    assert_eq!(peek[0], 0x17, "application data first: {:?}", &peek[..n]);
    let len = usize::from(u16::from_be_bytes([peek[3], peek[4]]));
    assert_eq!(n, 5 + len, "exactly the client's one record is waiting");
}

async fn answer_get(est: hoist_tls::Established) {
    let mut t = UserTlsTransport::new(est);
    let mut line = [0u8; 7];
    t.read_exact(&mut line).await.unwrap();
    assert_eq!(&line, b"GET 10\n");
    let body = hoist_tls::file::MappedFile::open(&pki().body).unwrap();
    let region = hoist_tls::file::FileRegion {
        file: body,
        offset: 0,
        len: 10,
    };
    t.write_file(b"OK 10\n", &region).await.unwrap();
    t.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls13_request_in_the_finished_flight_stays_in_the_socket() {
    let ctx = server_ctx(TlsVersion::Tls1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::thread::spawn(move || {
        let (mut conn, mut sock) =
            client_handshake(client_config(&[&rustls::version::TLS13]), addr, b"GET 10\n");
        let got = client_read(&mut conn, &mut sock, 6 + 10);
        assert_eq!(&got[..6], b"OK 10\n");
        assert_eq!(got[6..], (0..10).map(pattern).collect::<Vec<_>>()[..]);
    });
    let est = tokio::time::timeout(GUARD, inspect_and_accept(&listener, &ctx))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(est.info.version, "TLSv1.3");
    assert_eq!(est.info.sni.as_deref(), Some("a.test"));
    assert_first_record_unread(&est.tcp).await;
    answer_get(est).await;
    client.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls12_resumed_request_in_the_finished_flight_stays_in_the_socket() {
    // In an abbreviated TLS 1.2 handshake the client speaks last: CCS, Finished and the
    // request leave together.
    let ctx = server_ctx(TlsVersion::Tls1_2);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = client_config(&[&rustls::version::TLS12]);
    let client = std::thread::spawn(move || {
        for round in 0..2 {
            let (mut conn, mut sock) = client_handshake(cfg.clone(), addr, b"GET 10\n");
            let got = client_read(&mut conn, &mut sock, 16);
            assert_eq!(&got[..6], b"OK 10\n");
            let want = if round == 0 {
                HandshakeKind::Full
            } else {
                HandshakeKind::Resumed
            };
            assert_eq!(conn.handshake_kind(), Some(want));
        }
    });
    for round in 0..2 {
        let est = tokio::time::timeout(GUARD, inspect_and_accept(&listener, &ctx))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(est.info.version, "TLSv1.2");
        assert_eq!(est.info.session_reused, round == 1);
        if round == 1 {
            assert_eq!(est.info.sigalg, None, "no signature on a resumed session");
            assert_eq!(est.info.sni.as_deref(), Some("a.test"));
            assert_first_record_unread(&est.tcp).await;
        }
        answer_get(est).await;
    }
    client.join().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_handshake_sends_the_alert() {
    let ctx = server_ctx(TlsVersion::Tls1_2);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let client = std::thread::spawn(move || {
        let cfg = client_config(&[&rustls::version::TLS13]);
        let mut conn = ClientConnection::new(cfg, ServerName::try_from("a.test").unwrap()).unwrap();
        let mut sock = std::net::TcpStream::connect(addr).unwrap();
        sock.set_read_timeout(Some(GUARD)).unwrap();
        let err = loop {
            match conn.complete_io(&mut sock) {
                Ok(_) => assert!(conn.is_handshaking(), "handshake must fail"),
                Err(e) => break e,
            }
        };
        let inner = err
            .get_ref()
            .and_then(|e| e.downcast_ref::<rustls::Error>())
            .cloned();
        assert!(
            matches!(inner, Some(rustls::Error::AlertReceived(_))),
            "client saw {err:?}, not an alert"
        );
    });
    let err = tokio::time::timeout(GUARD, inspect_and_accept(&listener, &ctx))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), HandshakeErrorKind::NoSharedCipher, "{err}");
    assert_eq!(err.reason(), "no_shared_cipher");
    assert!(!err.is_peer_reset());
    client.join().unwrap();
}

/// accept() must cope with whatever the caller already read: nothing, part of a header, part
/// of a body.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_resumes_from_any_prefix() {
    let ctx = server_ctx(TlsVersion::Tls1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    for prefix in [0usize, 3, 5, 20] {
        let client = std::thread::spawn(move || {
            let (mut conn, mut sock) =
                client_handshake(client_config(&[&rustls::version::TLS13]), addr, b"GET 10\n");
            client_read(&mut conn, &mut sock, 16);
        });
        let (mut tcp, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; prefix];
        tcp.read_exact(&mut buf).await.unwrap();
        let est = tokio::time::timeout(GUARD, accept(tcp, buf, &ctx))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(est.info.sni.as_deref(), Some("a.test"), "prefix {prefix}");
        assert_first_record_unread(&est.tcp).await;
        answer_get(est).await;
        client.join().unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_record_header_is_refused_without_reading_the_body() {
    let ctx = server_ctx(TlsVersion::Tls1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).await.unwrap();
    let (tcp, _) = listener.accept().await.unwrap();
    // A handshake record announcing 65535 bytes, and nothing more: the server must not wait.
    client.write_all(b"\x16\x03\x01\xff\xff").await.unwrap();
    let err = tokio::time::timeout(GUARD, accept(tcp, Vec::new(), &ctx))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), HandshakeErrorKind::Protocol, "{err}");
    let mut alert = Vec::new();
    tokio::time::timeout(GUARD, client.read_to_end(&mut alert))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alert.first(), Some(&0x15), "an alert record: {alert:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peer_gone_mid_handshake_is_eof() {
    let ctx = server_ctx(TlsVersion::Tls1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let hello = {
        let cfg = client_config(&[&rustls::version::TLS13]);
        let mut conn = ClientConnection::new(cfg, ServerName::try_from("a.test").unwrap()).unwrap();
        let mut v = Vec::new();
        conn.write_tls(&mut v).unwrap();
        v
    };
    let mut client = TcpStream::connect(addr).await.unwrap();
    let (tcp, _) = listener.accept().await.unwrap();
    client.write_all(&hello).await.unwrap();
    client.shutdown().await.unwrap();
    let err = tokio::time::timeout(GUARD, accept(tcp, Vec::new(), &ctx))
        .await
        .unwrap()
        .unwrap_err();
    assert_eq!(err.kind(), HandshakeErrorKind::Eof, "{err}");
    assert!(err.is_peer_reset());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_reads_writes_and_closes() {
    let ctx = server_ctx(TlsVersion::Tls1_3);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let big: Vec<u8> = (0..3_000_000).map(pattern).collect();
    let expect = big.clone();
    let client = std::thread::spawn(move || {
        let (mut conn, mut sock) =
            client_handshake(client_config(&[&rustls::version::TLS13]), addr, b"");
        // Ask the server to rekey its sending side, then read a large write.
        conn.refresh_traffic_keys().unwrap();
        conn.writer().write_all(b"hello").unwrap();
        while conn.wants_write() {
            conn.write_tls(&mut sock).unwrap();
        }
        let got = client_read(&mut conn, &mut sock, expect.len());
        assert!(got == expect);
        conn.send_close_notify();
        while conn.wants_write() {
            conn.write_tls(&mut sock).unwrap();
        }
        // The server's close_notify, then EOF.
        let mut rest = Vec::new();
        loop {
            if conn.read_tls(&mut sock).unwrap() == 0 {
                break;
            }
            let state = conn.process_new_packets().unwrap();
            conn.reader().read_to_end(&mut rest).unwrap_or(0);
            if state.peer_has_closed() {
                break;
            }
        }
        assert!(rest.is_empty());
    });
    let est = tokio::time::timeout(GUARD, inspect_and_accept(&listener, &ctx))
        .await
        .unwrap()
        .unwrap();
    let mut t = UserTlsTransport::new(est);
    assert_eq!(t.tls_info().unwrap().offload, "none");
    let mut hello = [0u8; 5];
    t.read_exact(&mut hello).await.unwrap();
    assert_eq!(&hello, b"hello");
    t.write_all(&big).await.unwrap();
    t.flush().await.unwrap();
    // close_notify from the client reads as EOF, repeatedly.
    let mut rest = Vec::new();
    assert_eq!(t.read_to_end(&mut rest).await.unwrap(), 0);
    assert_eq!(t.read(&mut [0u8; 8]).await.unwrap(), 0);
    t.shutdown().await.unwrap();
    assert!(t.write_all(b"late").await.is_err());
    client.join().unwrap();
}

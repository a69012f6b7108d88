//! The plain transport: head with MSG_MORE, body with sendfile, checked byte for byte.
// Helpers outside #[test] functions may unwrap too: a panic here is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use hoist_tls::file::{FileRegion, MappedFile};
use hoist_tls::{PlainTransport, Transport};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

async fn send_and_receive(head: &'static [u8], offset: u64, len: u64) -> Vec<u8> {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (tcp, _) = listener.accept().await.unwrap();
        let mut t = PlainTransport::new(tcp);
        assert!(t.tls_info().is_none());
        let region = FileRegion {
            file: MappedFile::open(&pki().body).unwrap(),
            offset,
            len,
        };
        t.write_file(head, &region).await.unwrap();
        t.shutdown().await.unwrap();
    });
    let mut client = TcpStream::connect(addr).await.unwrap();
    let mut got = Vec::new();
    // Read slowly at first so the sender meets a full socket buffer (EAGAIN, short writes).
    let mut chunk = [0u8; 1024];
    for _ in 0..64 {
        let n = client.read(&mut chunk).await.unwrap();
        got.extend_from_slice(&chunk[..n]);
        tokio::task::yield_now().await;
    }
    client.read_to_end(&mut got).await.unwrap();
    server.await.unwrap();
    got
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_megabytes_with_sendfile() {
    let got = send_and_receive(b"HTTP/1.1 200 OK\r\n\r\n", 0, BODY_LEN as u64).await;
    let (head, body) = got.split_at(19);
    assert_eq!(head, b"HTTP/1.1 200 OK\r\n\r\n");
    let want: Vec<u8> = (0..BODY_LEN).map(pattern).collect();
    assert_eq!(Sha256::digest(body), Sha256::digest(&want));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn region_in_the_middle_and_empty_head() {
    let got = send_and_receive(b"", 12_345, 1_000_000).await;
    let want: Vec<u8> = (12_345..1_012_345).map(pattern).collect();
    assert!(got == want);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn region_past_the_end_is_an_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let _client = TcpStream::connect(addr).await.unwrap();
    let (tcp, _) = listener.accept().await.unwrap();
    let mut t = PlainTransport::new(tcp);
    let region = FileRegion {
        file: MappedFile::open(&pki().body).unwrap(),
        offset: BODY_LEN as u64 - 10,
        len: 20,
    };
    let err = t.write_file(b"", &region).await.unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffered_bytes_come_first() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let mut client = TcpStream::connect(addr).await.unwrap();
    let (tcp, _) = listener.accept().await.unwrap();
    client.write_all(b"LO WORLD").await.unwrap();
    client.shutdown().await.unwrap();
    let mut t = PlainTransport::with_buffered(tcp, b"HEL".to_vec());
    let mut all = Vec::new();
    t.read_to_end(&mut all).await.unwrap();
    assert_eq!(all, b"HELLO WORLD");
}

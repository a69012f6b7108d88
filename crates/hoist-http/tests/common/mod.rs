//! A tiny server on the codec for the real-peer tests: it answers each request with what it
//! received (method, path, framing, body length and sha256), and serves fixed payloads from
//! memory and from a file.

#![allow(dead_code)]
// Test code: a panic is a failed test, not a peer crashing the proxy.
#![allow(clippy::unwrap_used)]

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hoist_http::h1::{H1Conn, H1Limits};
use hoist_http::{Body, ResponseHead};
use hoist_tls::file::{FileRegion, MappedFile};
use hoist_tls::transport::{TlsInfo, Transport};
use http::{HeaderMap, HeaderValue, Method};
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// Plain TCP as a transport; write_file writes the head, then the region's bytes.
pub struct Tcp(pub TcpStream);

impl AsyncRead for Tcp {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Tcp {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl Transport for Tcp {
    async fn write_file<'a>(&'a mut self, head: &'a [u8], body: &'a FileRegion) -> io::Result<()> {
        self.0.write_all(head).await?;
        self.0.write_all(body.bytes()).await?;
        self.0.flush().await
    }

    fn tls_info(&self) -> Option<&TlsInfo> {
        None
    }
}

pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Deterministic pseudo-random bytes.
pub fn payload(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

pub const FILE_LEN: usize = 3 * 1024 * 1024 + 17;
pub const MEMORY_LEN: usize = 200_000;

#[derive(Default)]
pub struct Counters {
    pub connections: AtomicUsize,
    pub requests: AtomicUsize,
    pub expect_continue: AtomicUsize,
}

pub struct Server {
    pub addr: SocketAddr,
    pub counters: Arc<Counters>,
    pub file_content: Arc<Vec<u8>>,
    pub memory_content: Bytes,
}

impl Server {
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    pub fn connections(&self) -> usize {
        self.counters.connections.load(Ordering::SeqCst)
    }
}

/// Starts a server on 127.0.0.1:0 in a thread of its own; it lives as long as the test
/// process.
pub fn start(limits: H1Limits) -> Server {
    let std_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    std_listener.set_nonblocking(true).unwrap();
    let addr = std_listener.local_addr().unwrap();
    let counters = Arc::new(Counters::default());
    let file_content = Arc::new(payload(FILE_LEN, 7));
    let path = std::env::temp_dir().join(format!(
        "hoist-http-it-{}-{}",
        std::process::id(),
        addr.port()
    ));
    std::fs::write(&path, &*file_content).unwrap();
    let file = MappedFile::open(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let memory_content = Bytes::from(payload(MEMORY_LEN, 9));
    let state = Arc::new(State {
        counters: counters.clone(),
        file: FileRegion::whole(file),
        memory: memory_content.clone(),
        limits,
    });
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = TcpListener::from_std(std_listener).unwrap();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                stream.set_nodelay(true).unwrap();
                state.counters.connections.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, state.clone()));
            }
        });
    });
    Server {
        addr,
        counters,
        file_content,
        memory_content,
    }
}

struct State {
    counters: Arc<Counters>,
    file: FileRegion,
    memory: Bytes,
    limits: H1Limits,
}

async fn serve(stream: TcpStream, state: Arc<State>) {
    let mut conn = H1Conn::new(Tcp(stream), state.limits);
    let mut extra = HeaderMap::new();
    extra.insert("server", HeaderValue::from_static("hoist-test"));
    loop {
        let head = match conn.read_request().await {
            Ok(Some(head)) => head,
            Ok(None) => break,
            Err(e) => {
                let _ = conn.write_error(&e, &extra).await;
                break;
            }
        };
        state.counters.requests.fetch_add(1, Ordering::SeqCst);
        let info = *conn.request_info();
        if info.expect_continue {
            state
                .counters
                .expect_continue
                .fetch_add(1, Ordering::SeqCst);
        }
        let is_head = head.method == Method::HEAD;
        let mut response = ResponseHead::new(200);
        response.headers = extra.clone();
        let body = match head.path_only() {
            "/file" => Body::File(state.file.clone()),
            "/memory" => Body::Bytes(state.memory.clone()),
            "/early" => {
                // Answers without reading the body, as a direct response does.
                if !matches!(conn.discard_body(1 << 20).await, Ok(true)) {
                    response.status = 413;
                }
                Body::Bytes(Bytes::from_static(b"early\n"))
            }
            _ => {
                let mut hasher = Sha256::new();
                let mut len = 0usize;
                loop {
                    match conn.read_body_chunk().await {
                        Ok(Some(piece)) => {
                            len += piece.len();
                            hasher.update(&piece);
                        }
                        Ok(None) => break,
                        Err(e) => {
                            let _ = conn.write_error(&e, &extra).await;
                            return close(conn).await;
                        }
                    }
                }
                let sha: String = hasher
                    .finalize()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                let text = format!(
                    "{} {} {:?} {:?} len={len} sha256={sha}\n",
                    head.method, head.path, head.version, info.framing,
                );
                Body::Bytes(Bytes::from(text))
            }
        };
        let close_requested = head.path_only() == "/close";
        if conn
            .write_response(&response, &body, is_head, close_requested)
            .await
            .is_err()
        {
            break;
        }
        if conn.should_close() {
            break;
        }
    }
    close(conn).await;
}

async fn close(mut conn: H1Conn<Tcp>) {
    let _ = tokio::time::timeout(Duration::from_secs(5), conn.lingering_close(1 << 20)).await;
}

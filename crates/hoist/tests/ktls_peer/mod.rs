//! The TLS client the kTLS VM tests run inside the guest (a rustls client in this test binary,
//! started there with `--ignored --exact guest_peer`). It does what curl and openssl s_client
//! cannot be told to do precisely: a request in the same flight as the client's Finished,
//! pipelining, close_notify from the client, a slow reader, garbage after the handshake, and a
//! TLS 1.3 KeyUpdate at a known point. Each case prints `PEER <case> <version> ok`; a failure
//! panics, which fails the guest script.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use rustls::crypto::aws_lc_rs;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};

pub struct Peer {
    pub addr: SocketAddr,
    pub roots: RootCertStore,
    /// Where the payload files are in the guest (`1k.bin`, `100k.bin`, `1m.bin`).
    pub data: String,
}

type Tls = StreamOwned<ClientConnection, TcpStream>;

impl Peer {
    pub fn from_env() -> Peer {
        let var = |k: &str| std::env::var(k).unwrap_or_else(|_| panic!("{k} not set"));
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(var("HOIST_PEER_CERT")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        Peer {
            addr: var("HOIST_PEER_ADDR").parse().unwrap(),
            roots,
            data: var("HOIST_PEER_DATA"),
        }
    }

    fn config(&self, version: &'static rustls::SupportedProtocolVersion) -> Arc<ClientConfig> {
        Arc::new(
            ClientConfig::builder_with_provider(Arc::new(aws_lc_rs::default_provider()))
                .with_protocol_versions(&[version])
                .unwrap()
                .with_root_certificates(self.roots.clone())
                .with_no_client_auth(),
        )
    }

    fn body(&self, name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/{name}.bin", self.data)).unwrap()
    }

    /// A handshake with `early` queued before it completes: rustls sends it in the same write
    /// as its Finished, so it reaches the server's socket before hoist switches to the kernel.
    fn connect(
        &self,
        version: &'static rustls::SupportedProtocolVersion,
        early: &[u8],
        sock: TcpStream,
    ) -> Tls {
        let mut conn = ClientConnection::new(
            self.config(version),
            ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let mut sock = sock;
        sock.set_read_timeout(Some(Duration::from_secs(120)))
            .unwrap();
        if !early.is_empty() {
            conn.writer().write_all(early).unwrap();
        }
        while conn.is_handshaking() {
            conn.complete_io(&mut sock).unwrap();
        }
        while conn.wants_write() {
            conn.write_tls(&mut sock).unwrap();
        }
        StreamOwned::new(conn, sock)
    }

    fn tcp(&self) -> TcpStream {
        TcpStream::connect(self.addr).unwrap()
    }

    pub fn run_all(&self, rekey: bool) {
        for (v, name) in [
            (&rustls::version::TLS12, "TLSv1.2"),
            (&rustls::version::TLS13, "TLSv1.3"),
        ] {
            self.same_flight(v, name);
            self.pipelined(v, name);
            self.client_close_notify(v, name);
            self.garbage(v, name);
            self.boundaries(v, name);
        }
        self.slow_reader();
        self.key_update(rekey);
    }

    /// The request rides with Finished; the answer comes, then the server's close_notify
    /// (`connection: close`): rustls reports a clean end, not "closed without close_notify".
    fn same_flight(&self, v: &'static rustls::SupportedProtocolVersion, name: &str) {
        let req = b"GET /1m HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n";
        let mut tls = self.connect(v, req, self.tcp());
        let mut all = Vec::new();
        tls.read_to_end(&mut all)
            .expect("a clean end with close_notify");
        let (head, body) = split_response(&all);
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(
            body == self.body("1m"),
            "1m body differs ({} bytes)",
            body.len()
        );
        println!("PEER same_flight {name} ok");
    }

    /// Keep-alive with three requests in one write.
    fn pipelined(&self, v: &'static rustls::SupportedProtocolVersion, name: &str) {
        let mut tls = self.connect(v, b"", self.tcp());
        tls.write_all(
            b"GET /1k HTTP/1.1\r\nhost: a\r\n\r\nGET /100k HTTP/1.1\r\nhost: a\r\n\r\nGET /1k HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n",
        )
        .unwrap();
        let mut all = Vec::new();
        tls.read_to_end(&mut all)
            .expect("a clean end with close_notify");
        let mut rest = &all[..];
        for want in ["1k", "100k", "1k"] {
            let (body, after) = take_response(rest);
            assert!(body == self.body(want), "{want} differs");
            rest = after;
        }
        assert!(rest.is_empty());
        println!("PEER pipelined {name} ok");
    }

    /// Bodies of 0 bytes and around one record (16 KiB) on one keep-alive connection: the head
    /// (sent with MSG_MORE) and the sendfile'd body share records differently each time.
    fn boundaries(&self, v: &'static rustls::SupportedProtocolVersion, name: &str) {
        let mut tls = self.connect(v, b"", self.tcp());
        let sizes = ["0", "16383", "16384", "16385"];
        let mut req = String::new();
        for (i, s) in sizes.iter().enumerate() {
            let close = if i + 1 == sizes.len() {
                "connection: close\r\n"
            } else {
                ""
            };
            req.push_str(&format!("GET /{s} HTTP/1.1\r\nhost: a\r\n{close}\r\n"));
        }
        tls.write_all(req.as_bytes()).unwrap();
        let mut all = Vec::new();
        tls.read_to_end(&mut all)
            .expect("a clean end with close_notify");
        let mut rest = &all[..];
        for s in sizes {
            let (body, after) = take_response(rest);
            assert!(body == self.body(s), "{s}-byte body differs");
            rest = after;
        }
        println!("PEER boundaries {name} ok");
    }

    /// close_notify from the client: the server answers with its own.
    fn client_close_notify(&self, v: &'static rustls::SupportedProtocolVersion, name: &str) {
        let mut tls = self.connect(v, b"", self.tcp());
        tls.write_all(b"GET /1k HTTP/1.1\r\nhost: a\r\n\r\n")
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let mut got = Vec::new();
        while take_response_len(&got).is_none() {
            let n = tls.read(&mut buf).unwrap();
            assert!(n > 0, "closed before the response");
            got.extend_from_slice(&buf[..n]);
        }
        tls.conn.send_close_notify();
        while tls.conn.wants_write() {
            tls.conn.write_tls(&mut tls.sock).unwrap();
        }
        assert_eq!(tls.read(&mut buf).expect("the server's close_notify"), 0);
        println!("PEER client_close_notify {name} ok");
    }

    /// Bytes that are no TLS record after the handshake: the kernel rejects them (EBADMSG) and
    /// the server closes; nothing else happens to it.
    fn garbage(&self, v: &'static rustls::SupportedProtocolVersion, name: &str) {
        let tls = self.connect(v, b"", self.tcp());
        let (_, mut sock) = tls.into_parts();
        let mut junk = vec![23u8, 3, 3, 0, 64];
        junk.extend((0..64u8).map(|i| i.wrapping_mul(37)));
        sock.write_all(&junk).unwrap();
        let mut rest = Vec::new();
        // TLS 1.3 tickets may still arrive; then the server's FIN (or a reset).
        let _ = sock.read_to_end(&mut rest);
        println!("PEER garbage {name} ok");
    }

    /// A receive buffer of a few KiB and small reads: the server's sendfile meets a full
    /// socket again and again (short writes, EAGAIN), and every byte still arrives in order.
    fn slow_reader(&self) {
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.set_recv_buffer_size(4096).unwrap();
        sock.connect(&self.addr.into()).unwrap();
        let mut tls = self.connect(&rustls::version::TLS13, b"", sock.into());
        tls.write_all(b"GET /1m HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut all = Vec::new();
        let mut buf = [0u8; 1000];
        loop {
            match tls.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => all.extend_from_slice(&buf[..n]),
                Err(e) => panic!("slow reader: {e}"),
            }
        }
        let (_, body) = split_response(&all);
        assert!(body == self.body("1m"), "slow reader: 1m differs");
        println!("PEER slow_reader TLSv1.3 ok");
    }

    pub fn key_update_only(&self, rekey: bool) {
        self.key_update(rekey);
    }

    /// TLS 1.3 KeyUpdate (update_requested) between two requests. A kernel that rekeys answers
    /// the second request under new keys both ways; one that cannot closes cleanly.
    fn key_update(&self, rekey: bool) {
        let mut tls = self.connect(&rustls::version::TLS13, b"", self.tcp());
        tls.write_all(b"GET /1k HTTP/1.1\r\nhost: a\r\n\r\n")
            .unwrap();
        let mut got = Vec::new();
        let mut buf = vec![0u8; 4096];
        while take_response_len(&got).is_none() {
            let n = tls.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        tls.conn.refresh_traffic_keys().unwrap();
        tls.write_all(b"GET /1k HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n")
            .unwrap();
        let mut all = Vec::new();
        tls.read_to_end(&mut all)
            .expect("a clean end with close_notify");
        if rekey {
            let (head, body) = split_response(&all);
            assert!(head.starts_with("HTTP/1.1 200"), "{head}");
            assert!(body == self.body("1k"));
            println!("PEER key_update rekeyed ok");
        } else {
            assert!(
                all.is_empty(),
                "data after a KeyUpdate the kernel cannot follow"
            );
            println!("PEER key_update clean_close ok");
        }
    }
}

fn split_response(all: &[u8]) -> (String, Vec<u8>) {
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    (
        String::from_utf8_lossy(&all[..end]).into_owned(),
        all[end + 4..].to_vec(),
    )
}

/// The length of the first complete response (head + content-length body) in `buf`.
fn take_response_len(buf: &[u8]) -> Option<usize> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    let total = end + 4 + len;
    (buf.len() >= total).then_some(total)
}

fn take_response(buf: &[u8]) -> (Vec<u8>, &[u8]) {
    let total = take_response_len(buf).expect("a whole response");
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n").unwrap_or(0);
    (buf[end + 4..total].to_vec(), &buf[total..])
}

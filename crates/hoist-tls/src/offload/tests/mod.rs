//! The offload layer on kernels without kTLS: the transport over an emulated kernel
//! (`emulator.rs`) against rustls clients and a raw record peer, the switch and the transport
//! under injected kernel errors, the probe, and the policy.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod client;
mod faults;
mod policy;
mod transport;

use std::cell::RefCell;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream as StdTcpStream};
use std::rc::Rc;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hoist_config::model::core::DataSource;
use hoist_config::model::tls::{DownstreamTlsContext, TlsCertificate, TlsParams};
use rustls::crypto::aws_lc_rs::{self, cipher_suite};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, SupportedCipherSuite};
use tokio::net::TcpListener;

use super::emulator::{self, Config, Emulator, Keys};
use super::{switch_with, KtlsTransport, OffloadEvent, SwitchError};
use crate::{accept, read_client_hello, Inspect, ServerContext};

const GUARD: Duration = Duration::from_secs(20);

/// The suites the kernel offloads, TLS 1.2 (ECDSA certificate) and TLS 1.3.
pub fn suites() -> [SupportedCipherSuite; 6] {
    [
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
        cipher_suite::TLS13_AES_128_GCM_SHA256,
        cipher_suite::TLS13_AES_256_GCM_SHA384,
        cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    ]
}

pub const TLS12: SupportedCipherSuite = cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256;
pub const TLS13: SupportedCipherSuite = cipher_suite::TLS13_AES_128_GCM_SHA256;

struct Pki {
    cert_der: CertificateDer<'static>,
    ctx: Arc<ServerContext>,
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["a.test".to_string()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let ctx = DownstreamTlsContext {
            tls_params: TlsParams::default(),
            tls_certificates: vec![TlsCertificate {
                certificate_chain: DataSource::Inline(cert.pem().into_bytes()),
                private_key: DataSource::Inline(key.serialize_pem().into_bytes()),
                yaml_path: "test.tls_certificates[0]".into(),
            }],
            alpn_protocols: Vec::new(),
            validation_context: None,
            require_client_certificate: false,
            session_tickets: true,
            session_ticket_keys: Vec::new(),
            yaml_path: "test".into(),
        };
        Pki {
            cert_der: cert.der().clone(),
            ctx: ServerContext::build(&ctx).unwrap(),
        }
    })
}

pub fn client_config(suite: SupportedCipherSuite) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(pki().cert_der.clone()).unwrap();
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: vec![suite],
        ..aws_lc_rs::default_provider()
    };
    let mut cfg = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[suite.version()])
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.enable_secret_extraction = true;
    Arc::new(cfg)
}

/// The client end after its handshake.
pub struct Client {
    pub conn: ClientConnection,
    pub sock: StdTcpStream,
}

impl Client {
    pub fn write_all(&mut self, data: &[u8]) {
        // rustls buffers a bounded amount of plaintext: write, then send, in chunks.
        for chunk in data.chunks(16384) {
            self.conn.writer().write_all(chunk).unwrap();
            while self.conn.wants_write() {
                self.conn.write_tls(&mut self.sock).unwrap();
            }
        }
    }

    /// Reads plaintext until `n` bytes or the end; Err on a TLS or socket error.
    pub fn read_n(&mut self, n: usize) -> std::io::Result<Vec<u8>> {
        let mut out = vec![0u8; n];
        let mut got = 0;
        while got < n {
            match self.read_some(&mut out[got..])? {
                0 => break,
                k => got += k,
            }
        }
        out.truncate(got);
        Ok(out)
    }

    /// One read: Ok(0) on close_notify, Err(UnexpectedEof) on a FIN without it.
    pub fn read_some(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            match self.conn.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
            while self.conn.wants_write() {
                self.conn.write_tls(&mut self.sock)?;
            }
            if self.conn.read_tls(&mut self.sock)? == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.conn
                .process_new_packets()
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        }
    }

    pub fn close_notify(&mut self) {
        self.conn.send_close_notify();
        while self.conn.wants_write() {
            self.conn.write_tls(&mut self.sock).unwrap();
        }
    }

    /// The rest of the connection as raw records, with the client's keys.
    pub fn into_raw(self) -> RawPeer {
        let version = self.conn.protocol_version().unwrap();
        let secrets = self.conn.dangerous_extract_secrets().unwrap();
        RawPeer {
            sock: self.sock,
            tx: Keys::from_secrets(version, secrets.tx.0, &secrets.tx.1),
            rx: Keys::from_secrets(version, secrets.rx.0, &secrets.rx.1),
            inbuf: Vec::new(),
        }
    }
}

/// A peer that writes and reads records of any type with the client's keys.
pub struct RawPeer {
    pub sock: StdTcpStream,
    pub tx: Keys,
    pub rx: Keys,
    inbuf: Vec<u8>,
}

impl RawPeer {
    pub fn send(&mut self, record_type: u8, data: &[u8]) {
        let rec = emulator::seal(&mut self.tx, record_type, data);
        self.sock.write_all(&rec).unwrap();
    }

    /// The next record other than a NewSessionTicket; None at FIN.
    pub fn recv(&mut self) -> Option<(u8, Vec<u8>)> {
        loop {
            if let Some(rec) = emulator::take_record(&mut self.inbuf) {
                let (ty, data) = emulator::open(&mut self.rx, &rec).expect("server record");
                if ty == 22 && data.first() == Some(&4) {
                    continue;
                }
                return Some((ty, data));
            }
            let mut tmp = [0u8; 65536];
            match self.sock.read(&mut tmp) {
                Ok(0) | Err(_) => return None,
                Ok(n) => self.inbuf.extend_from_slice(&tmp[..n]),
            }
        }
    }
}

/// Events the transport reported.
pub type Events = Rc<RefCell<Vec<OffloadEvent>>>;

/// Runs one connection: the client closure on its own thread after its handshake, the server
/// closure on a current-thread runtime with the switch's result over an emulated kernel.
pub fn run<C, S, F>(suite: SupportedCipherSuite, cfg: Config, client: C, server: S)
where
    C: FnOnce(Client) + Send + 'static,
    S: FnOnce(Result<KtlsTransport<Emulator>, SwitchError>, Emulator, Events) -> F,
    F: Future<Output = ()>,
{
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let client_thread = std::thread::spawn(move || client(connect(suite, addr)));
        let (tcp, _) = listener.accept().await.unwrap();
        let mut hello = Vec::new();
        let inspected = read_client_hello(&tcp, &mut hello).await.unwrap();
        assert!(matches!(inspected, Inspect::Hello(_)));
        let established = accept(tcp, hello, &pki().ctx).await.unwrap();
        let rekey = cfg.rekey;
        let emu = Emulator::new(cfg);
        let events: Events = Rc::default();
        let switched = switch_with(established, emu.clone(), rekey).map(|mut t| {
            let ev = events.clone();
            t.set_event_sink(Box::new(move |e| ev.borrow_mut().push(e)));
            t
        });
        tokio::time::timeout(GUARD, server(switched, emu, events))
            .await
            .expect("server side timed out");
        tokio::task::spawn_blocking(move || client_thread.join())
            .await
            .unwrap()
            .expect("client side panicked");
    });
}

fn connect(suite: SupportedCipherSuite, addr: SocketAddr) -> Client {
    let mut conn = ClientConnection::new(
        client_config(suite),
        ServerName::try_from("a.test").unwrap(),
    )
    .unwrap();
    let mut sock = StdTcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(GUARD)).unwrap();
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).unwrap();
    }
    Client { conn, sock }
}

/// The transport, or a failed test.
pub fn switched(r: Result<KtlsTransport<Emulator>, SwitchError>) -> KtlsTransport<Emulator> {
    match r {
        Ok(t) => t,
        Err(e) => panic!("switch failed: {e}"),
    }
}

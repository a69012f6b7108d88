//! The server handshake, driven over the socket with rustls' unbuffered API.
//!
//! Records are read whole and one at a time (5-byte header, then exactly the body), and reading
//! stops the moment rustls reports the handshake complete. Whatever the client sent after its
//! Finished (often the first request, in the same flight) is therefore still in the kernel
//! socket buffer, where kernel TLS will decrypt it. Everything the server has to say, TLS 1.3
//! NewSessionTickets included, is written before [`accept`] returns.

use std::fmt;
use std::io;
use std::sync::Arc;

use rustls::server::UnbufferedServerConnection;
use rustls::{AlertDescription, Error as RustlsError, HandshakeKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::client_hello::{self, Inspect};
use crate::record::{Action, RecordLayer, Step};
use crate::server_config::{Selection, ServerContext};
use crate::side::Side;
use crate::transport::TlsInfo;
use crate::{names, x509};

pub(crate) const RECORD_HEADER: usize = 5;
/// rustls refuses larger records from the header alone (RFC 8446: 2^14 + 256; TLS 1.2 allows
/// 2^14 + 2048); a header announcing more is handed to rustls without reading the body.
const MAX_RECORD_PAYLOAD: usize = 16384 + 2048;

/// A completed handshake, taken apart by whoever runs the record layer next: the user-space
/// transport, or kernel TLS (`conn.dangerous_into_kernel_connection()`, then the socket
/// options on `tcp`). No byte the client sent after its Finished has been read from `tcp`.
/// `C` is the side: the server for downstream connections, the client
/// ([`rustls::client::UnbufferedClientConnection`], from [`crate::connect::connect`]) for
/// upstream ones.
pub struct Established<C = UnbufferedServerConnection> {
    pub tcp: TcpStream,
    pub conn: C,
    pub info: TlsInfo,
}

impl<C> fmt::Debug for Established<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Established")
            .field("tcp", &self.tcp)
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Why a handshake failed. Envoy counts all of them as `ssl.connection_error`;
/// [`HandshakeErrorKind::as_str`] is a stat-name-safe reason for logs and finer stats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HandshakeErrorKind {
    /// The client sent a fatal alert (it rejected our certificate, parameters, ...).
    PeerAlert,
    /// The client violated the protocol (bad record, unexpected message, decrypt error).
    Protocol,
    /// The client certificate was missing, invalid or did not match.
    BadCertificate,
    /// Nothing in common: versions, cipher suites, groups or signature schemes.
    NoSharedCipher,
    /// The connection closed before the handshake completed.
    Eof,
    /// A socket error.
    Io,
}

impl HandshakeErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HandshakeErrorKind::PeerAlert => "peer_alert",
            HandshakeErrorKind::Protocol => "protocol_error",
            HandshakeErrorKind::BadCertificate => "bad_certificate",
            HandshakeErrorKind::NoSharedCipher => "no_shared_cipher",
            HandshakeErrorKind::Eof => "eof",
            HandshakeErrorKind::Io => "io",
        }
    }
}

#[derive(Debug)]
pub struct HandshakeError {
    kind: HandshakeErrorKind,
    io_kind: Option<io::ErrorKind>,
    detail: String,
}

impl HandshakeError {
    pub fn kind(&self) -> HandshakeErrorKind {
        self.kind
    }

    /// Stat-name-safe reason ("no_shared_cipher", "eof", ...).
    pub fn reason(&self) -> &'static str {
        self.kind.as_str()
    }

    /// The peer went away (closed or reset) rather than failed the protocol.
    pub fn is_peer_reset(&self) -> bool {
        self.kind == HandshakeErrorKind::Eof
            || matches!(
                self.io_kind,
                Some(io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe)
            )
    }

    pub(crate) fn io(e: io::Error) -> HandshakeError {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            return HandshakeError::eof();
        }
        HandshakeError {
            kind: HandshakeErrorKind::Io,
            io_kind: Some(e.kind()),
            detail: e.to_string(),
        }
    }

    pub(crate) fn eof() -> HandshakeError {
        HandshakeError {
            kind: HandshakeErrorKind::Eof,
            io_kind: None,
            detail: "connection closed during the handshake".into(),
        }
    }

    pub(crate) fn protocol(detail: impl Into<String>) -> HandshakeError {
        HandshakeError {
            kind: HandshakeErrorKind::Protocol,
            io_kind: None,
            detail: detail.into(),
        }
    }

    pub(crate) fn from_rustls(e: RustlsError) -> HandshakeError {
        let kind = match &e {
            RustlsError::AlertReceived(AlertDescription::CloseNotify) => HandshakeErrorKind::Eof,
            RustlsError::AlertReceived(_) => HandshakeErrorKind::PeerAlert,
            RustlsError::InvalidCertificate(_)
            | RustlsError::NoCertificatesPresented
            | RustlsError::InvalidCertRevocationList(_) => HandshakeErrorKind::BadCertificate,
            RustlsError::PeerIncompatible(_) => HandshakeErrorKind::NoSharedCipher,
            _ => HandshakeErrorKind::Protocol,
        };
        HandshakeError {
            kind,
            io_kind: None,
            detail: e.to_string(),
        }
    }
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind.as_str(), self.detail)
    }
}

impl std::error::Error for HandshakeError {}

/// Runs the server handshake on `tcp`. `hello_bytes` are the bytes already read from it (by
/// [`client_hello::read_client_hello`]), normally whole records; they may be empty.
/// Callers bound the time it may take.
pub async fn accept(
    mut tcp: TcpStream,
    hello_bytes: Vec<u8>,
    ctx: &ServerContext,
) -> Result<Established, HandshakeError> {
    let (conn, selection) = ctx
        .new_connection()
        .map_err(|e| HandshakeError::protocol(format!("cannot start a TLS session: {e}")))?;
    let mut rec = RecordLayer::new(conn, 4096, 8192);
    let mut carry = Carry::after(&hello_bytes);
    // Kept until the hello is complete, for the SNI (rustls does not expose it on a resumed
    // session, and its resolver is not called then).
    let mut hello = HelloTracker::new(hello_bytes);
    rec.incoming.extend_from_slice(hello.bytes());

    loop {
        let step = rec.drive(Action::Nothing);
        if !rec.out.is_empty() {
            let sent = tcp.write_all(rec.out.filled()).await;
            rec.out.consume(usize::MAX);
            if let Err(e) = sent {
                // A failed handshake's alert is best effort; its own error matters more.
                return Err(match step {
                    Err(tls) => HandshakeError::from_rustls(tls),
                    Ok(_) => HandshakeError::io(e),
                });
            }
        }
        match step {
            Err(e) => return Err(HandshakeError::from_rustls(e)),
            Ok(Step::Writable) if !rec.conn.is_handshaking() => break,
            Ok(Step::Closed) => return Err(HandshakeError::eof()),
            Ok(_) if rec.peer_closed() => return Err(HandshakeError::eof()),
            Ok(_) => {}
        }
        read_record(&mut tcp, &mut rec, &mut carry, Some(&mut hello)).await?;
    }

    if !rec.incoming.is_empty() || !rec.plain.is_empty() {
        // Cannot happen with whole-record reads (Finished ends its record); refusing keeps
        // kernel TLS from starting at the wrong sequence number if it ever did.
        return Err(HandshakeError::protocol(
            "data left over after the handshake",
        ));
    }
    let info = tls_info(&rec.conn, &selection, hello.sni());
    Ok(Established {
        tcp,
        conn: rec.conn,
        info,
    })
}

/// Where the bytes handed to [`accept`] left the record framing.
pub(crate) enum Carry {
    Boundary,
    /// The first bytes of a record header.
    Header(Vec<u8>),
    /// Body bytes still missing.
    Body(usize),
}

impl Carry {
    fn after(bytes: &[u8]) -> Carry {
        let missing = client_hello::next_read_len(bytes);
        if bytes.is_empty() || missing == RECORD_HEADER {
            return Carry::Boundary;
        }
        // Walk to the start of the last, incomplete record.
        let mut pos = 0;
        while bytes.len() - pos >= RECORD_HEADER {
            let total =
                RECORD_HEADER + usize::from(u16::from_be_bytes([bytes[pos + 3], bytes[pos + 4]]));
            if bytes.len() - pos < total {
                return Carry::Body(missing);
            }
            pos += total;
        }
        Carry::Header(bytes[pos..].to_vec())
    }
}

/// Reads exactly one record (or the rest of a partial one) into `rec.incoming`.
/// `hello`: the server's ClientHello tracker; None on the client side.
pub(crate) async fn read_record<C: Side>(
    tcp: &mut TcpStream,
    rec: &mut RecordLayer<C>,
    carry: &mut Carry,
    mut hello: Option<&mut HelloTracker>,
) -> Result<(), HandshakeError> {
    let body = match std::mem::replace(carry, Carry::Boundary) {
        Carry::Body(n) => Some(n),
        Carry::Header(h) => read_header(tcp, rec, hello.as_deref_mut(), &h).await?,
        Carry::Boundary => read_header(tcp, rec, hello.as_deref_mut(), &[]).await?,
    };
    let Some(body) = body else {
        // Let rustls reject the record (with the right alert) from its header alone.
        return Ok(());
    };
    let start = rec.incoming.len();
    let spare = rec.incoming.spare(body);
    tcp.read_exact(&mut spare[..body])
        .await
        .map_err(HandshakeError::io)?;
    rec.incoming.commit(body);
    if let Some(hello) = hello {
        hello.push(&rec.incoming.filled()[start..]);
    }
    Ok(())
}

/// Completes a record header of which `have` was already received; the body length, or None
/// when it is larger than any valid record.
async fn read_header<C: Side>(
    tcp: &mut TcpStream,
    rec: &mut RecordLayer<C>,
    hello: Option<&mut HelloTracker>,
    have: &[u8],
) -> Result<Option<usize>, HandshakeError> {
    let mut header = [0u8; RECORD_HEADER];
    header[..have.len()].copy_from_slice(have);
    let have = have.len();
    tcp.read_exact(&mut header[have..])
        .await
        .map_err(HandshakeError::io)?;
    rec.incoming.extend_from_slice(&header[have..]);
    if let Some(hello) = hello {
        hello.push(&header[have..]);
    }
    let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
    Ok((len <= MAX_RECORD_PAYLOAD).then_some(len))
}

/// The ClientHello bytes until they parse, then only its SNI.
pub(crate) struct HelloTracker {
    bytes: Vec<u8>,
    sni: Option<Option<String>>,
}

impl HelloTracker {
    fn new(bytes: Vec<u8>) -> HelloTracker {
        let mut t = HelloTracker { bytes, sni: None };
        t.push(&[]);
        t
    }

    fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn push(&mut self, more: &[u8]) {
        if self.sni.is_some() {
            return;
        }
        self.bytes.extend_from_slice(more);
        match client_hello::parse(&self.bytes) {
            Inspect::NeedMore => {}
            Inspect::Hello(info) => self.sni = Some(info.sni),
            // rustls will fail the handshake; no SNI to report.
            Inspect::NotTls | Inspect::Malformed => self.sni = Some(None),
        }
    }

    fn sni(&self) -> Option<String> {
        self.sni.clone().flatten()
    }
}

fn tls_info(
    conn: &UnbufferedServerConnection,
    selection: &Arc<Selection>,
    sni: Option<String>,
) -> TlsInfo {
    TlsInfo {
        version: conn.protocol_version().map_or("unknown", names::version),
        cipher: conn
            .negotiated_cipher_suite()
            .map_or("unknown", |s| names::cipher(s.suite())),
        curve: conn
            .negotiated_key_exchange_group()
            .map(|g| names::group(g.name())),
        sigalg: selection.sigalg().map(names::sigalg),
        sni,
        alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
        session_reused: conn.handshake_kind() == Some(HandshakeKind::Resumed),
        peer_subject: conn
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| x509::subject_rfc2253(leaf.as_ref())),
        offload: "none",
    }
}

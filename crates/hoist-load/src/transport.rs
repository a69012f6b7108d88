//! One client connection: plain TCP, or TLS through rustls' unbuffered API.
//!
//! Reads go into one reused buffer per connection, as large as the socket will fill, and
//! plaintext goes straight to the [`ResponseReader`], which counts and drops it. With TLS the
//! ciphertext buffer is walked record by record without moving it (the consumed prefix is
//! skipped, and only a trailing partial record is moved to the front before the next read),
//! so a 10 MB body costs one decryption per record and a socket read per buffer-full.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::pki_types::ServerName;
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncodeTlsData, EncryptError, UnbufferedStatus,
};
use rustls::ClientConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::response::{Progress, ResponseError, ResponseReader};

/// Bytes read from the socket at most per read (plaintext or ciphertext).
const READ_BUFFER: usize = 256 * 1024;

/// Why an exchange failed. All of these count as Fortio's "socket error" (-1) except that
/// the HTTP ones keep the response's status when it was read.
#[derive(Debug)]
pub enum TransportError {
    Connect(io::Error),
    Io(io::Error),
    Tls(rustls::Error),
    Http(ResponseError),
    /// The peer closed (or sent something) before our request on a reused connection: the
    /// caller may retry once on a fresh connection.
    Stale,
    Timeout,
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransportError::Connect(e) => write!(f, "connect: {e}"),
            TransportError::Io(e) => write!(f, "socket: {e}"),
            TransportError::Tls(e) => write!(f, "TLS: {e}"),
            TransportError::Http(e) => write!(f, "HTTP: {e}"),
            TransportError::Stale => f.write_str("connection closed by the server"),
            TransportError::Timeout => f.write_str("timeout"),
        }
    }
}

impl From<io::Error> for TransportError {
    fn from(e: io::Error) -> Self {
        TransportError::Io(e)
    }
}

impl From<rustls::Error> for TransportError {
    fn from(e: rustls::Error) -> Self {
        TransportError::Tls(e)
    }
}

impl From<ResponseError> for TransportError {
    fn from(e: ResponseError) -> Self {
        TransportError::Http(e)
    }
}

/// How a response read ended.
#[derive(Debug, PartialEq, Eq)]
pub struct ReadEnd {
    /// Bytes arrived after the response: the connection cannot be trusted for another one.
    pub trailing_garbage: bool,
}

/// The negotiated protocol, for the report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Negotiated {
    pub version: String,
    pub cipher: String,
}

pub enum Transport {
    Plain(Plain),
    Tls(Box<Tls>),
}

impl Transport {
    /// Opens a TCP connection (TCP_NODELAY) and, with `tls`, completes the handshake.
    pub async fn connect(
        addr: SocketAddr,
        tls: Option<(&Arc<ClientConfig>, &ServerName<'static>)>,
    ) -> Result<Transport, TransportError> {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(TransportError::Connect)?;
        tcp.set_nodelay(true).map_err(TransportError::Connect)?;
        match tls {
            None => Ok(Transport::Plain(Plain {
                tcp,
                buf: vec![0; READ_BUFFER],
            })),
            Some((config, name)) => {
                let conn = UnbufferedClientConnection::new(Arc::clone(config), name.clone())?;
                let mut t = Tls {
                    tcp,
                    conn,
                    incoming: vec![0; READ_BUFFER],
                    start: 0,
                    end: 0,
                    outgoing: vec![0; 16 * 1024],
                    out_len: 0,
                };
                t.handshake().await?;
                Ok(Transport::Tls(Box::new(t)))
            }
        }
    }

    pub async fn send(&mut self, request: &[u8]) -> Result<(), TransportError> {
        match self {
            Transport::Plain(p) => Ok(p.tcp.write_all(request).await?),
            Transport::Tls(t) => t.send(request).await,
        }
    }

    /// Reads until `reader` has a complete response (or the stream ends).
    pub async fn read_response(
        &mut self,
        reader: &mut ResponseReader,
    ) -> Result<ReadEnd, TransportError> {
        match self {
            Transport::Plain(p) => p.read_response(reader).await,
            Transport::Tls(t) => t.read_response(reader).await,
        }
    }

    pub fn negotiated(&self) -> Option<Negotiated> {
        match self {
            Transport::Plain(_) => None,
            Transport::Tls(t) => Some(Negotiated {
                version: t
                    .conn
                    .protocol_version()
                    .map(crate::tls::version_name)
                    .unwrap_or_default(),
                cipher: t
                    .conn
                    .negotiated_cipher_suite()
                    .map(|s| crate::tls::openssl_name(s.suite()))
                    .unwrap_or_default(),
            }),
        }
    }
}

pub struct Plain {
    tcp: TcpStream,
    buf: Vec<u8>,
}

impl Plain {
    async fn read_response(
        &mut self,
        reader: &mut ResponseReader,
    ) -> Result<ReadEnd, TransportError> {
        loop {
            let n = self.tcp.read(&mut self.buf).await?;
            if n == 0 {
                reader.eof()?;
                return Ok(ReadEnd {
                    trailing_garbage: false,
                });
            }
            if let Progress::Done { consumed } = reader.feed(&self.buf[..n])? {
                return Ok(ReadEnd {
                    trailing_garbage: consumed < n,
                });
            }
        }
    }
}

pub struct Tls {
    tcp: TcpStream,
    conn: UnbufferedClientConnection,
    /// Ciphertext; `start..end` is not processed yet.
    incoming: Vec<u8>,
    start: usize,
    end: usize,
    /// TLS bytes to send; `..out_len` is filled.
    outgoing: Vec<u8>,
    out_len: usize,
}

/// What the record layer needs next.
enum Next {
    /// Handshake complete / ready for application data.
    Writable,
    /// More bytes from the peer are needed.
    Read,
    /// The peer closed the session (close_notify).
    Closed,
    /// Keep processing.
    Again,
}

impl Tls {
    async fn handshake(&mut self) -> Result<(), TransportError> {
        loop {
            match self.step(None)? {
                Next::Writable => return self.flush().await,
                Next::Again => {}
                Next::Read => {
                    self.flush().await?;
                    if self.fill().await? == 0 {
                        return Err(TransportError::Io(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "connection closed during the TLS handshake",
                        )));
                    }
                }
                Next::Closed => {
                    return Err(TransportError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "peer closed the TLS session during the handshake",
                    )))
                }
            }
        }
    }

    async fn send(&mut self, request: &[u8]) -> Result<(), TransportError> {
        loop {
            match self.step(Some(request))? {
                Next::Writable => return self.flush().await,
                Next::Again => {}
                // Nothing should arrive between responses; treat it as a dying connection.
                Next::Read | Next::Closed => return Err(TransportError::Stale),
            }
        }
    }

    /// Processes buffered records up to the next state. Once the session is writable,
    /// encrypts `encrypt` if given. Application data arriving here (during the handshake or
    /// before a request) means the connection is not usable.
    fn step(&mut self, encrypt: Option<&[u8]>) -> Result<Next, TransportError> {
        let Tls {
            conn,
            incoming,
            start,
            end,
            outgoing,
            out_len,
            ..
        } = self;
        let UnbufferedStatus { discard, state } =
            conn.process_tls_records(&mut incoming[*start..*end]);
        let mut discard = discard;
        let next = match state {
            Err(e) => {
                *start += discard;
                return Err(TransportError::Tls(e));
            }
            Ok(ConnectionState::EncodeTlsData(mut e)) => {
                encode(&mut e, outgoing, out_len);
                Next::Again
            }
            Ok(ConnectionState::TransmitTlsData(t)) => {
                // The bytes are in `outgoing`; the caller flushes them before anything else.
                t.done();
                Next::Again
            }
            Ok(ConnectionState::WriteTraffic(mut w)) => {
                // The session is established; encrypt the request if there is one.
                if let Some(data) = encrypt {
                    loop {
                        match w.encrypt(data, &mut outgoing[*out_len..]) {
                            Ok(n) => {
                                *out_len += n;
                                break;
                            }
                            Err(EncryptError::InsufficientSize(s)) => {
                                outgoing.resize(*out_len + s.required_size, 0);
                            }
                            Err(EncryptError::EncryptExhausted) => {
                                *start += discard;
                                return Err(TransportError::Tls(rustls::Error::EncryptError));
                            }
                        }
                    }
                }
                Next::Writable
            }
            Ok(ConnectionState::BlockedHandshake) => Next::Read,
            Ok(ConnectionState::PeerClosed) | Ok(ConnectionState::Closed) => Next::Closed,
            Ok(ConnectionState::ReadTraffic(mut r)) => {
                while let Some(record) = r.next_record() {
                    discard += record?.discard;
                }
                *start += discard;
                return Err(TransportError::Stale);
            }
            Ok(_) => {
                *start += discard;
                return Err(TransportError::Tls(rustls::Error::General(
                    "unexpected TLS state".into(),
                )));
            }
        };
        *start += discard;
        Ok(next)
    }

    async fn read_response(
        &mut self,
        reader: &mut ResponseReader,
    ) -> Result<ReadEnd, TransportError> {
        loop {
            if let Some(end) = self.drain(reader)? {
                self.flush().await?;
                return Ok(end);
            }
            // Post-handshake messages may have produced records to send (KeyUpdate).
            self.flush().await?;
            if self.fill().await? == 0 {
                if self.start != self.end {
                    return Err(TransportError::Io(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed inside a TLS record",
                    )));
                }
                // TCP FIN without close_notify: the response decides whether that is an end.
                reader.eof()?;
                return Ok(ReadEnd {
                    trailing_garbage: false,
                });
            }
        }
    }

    /// Processes buffered records, feeding application data to `reader`. Returns the end of
    /// the response, or None when more bytes are needed.
    fn drain(&mut self, reader: &mut ResponseReader) -> Result<Option<ReadEnd>, TransportError> {
        loop {
            let Tls {
                conn,
                incoming,
                start,
                end,
                outgoing,
                out_len,
                ..
            } = self;
            let UnbufferedStatus { discard, state } =
                conn.process_tls_records(&mut incoming[*start..*end]);
            let mut discard = discard;
            match state {
                Err(e) => {
                    *start += discard;
                    return Err(TransportError::Tls(e));
                }
                Ok(ConnectionState::ReadTraffic(mut r)) => {
                    let mut done: Option<ReadEnd> = None;
                    while let Some(record) = r.next_record() {
                        let record = record?;
                        discard += record.discard;
                        match done {
                            Some(ref mut d) => d.trailing_garbage |= !record.payload.is_empty(),
                            None => {
                                if let Progress::Done { consumed } = reader.feed(record.payload)? {
                                    done = Some(ReadEnd {
                                        trailing_garbage: consumed < record.payload.len(),
                                    });
                                }
                            }
                        }
                    }
                    *start += discard;
                    if done.is_some() {
                        return Ok(done);
                    }
                }
                Ok(ConnectionState::PeerClosed) | Ok(ConnectionState::Closed) => {
                    *start += discard;
                    reader.eof()?;
                    return Ok(Some(ReadEnd {
                        trailing_garbage: false,
                    }));
                }
                Ok(ConnectionState::EncodeTlsData(mut e)) => {
                    encode(&mut e, outgoing, out_len);
                    *start += discard;
                }
                Ok(ConnectionState::TransmitTlsData(t)) => {
                    t.done();
                    *start += discard;
                }
                Ok(ConnectionState::WriteTraffic(_)) | Ok(ConnectionState::BlockedHandshake) => {
                    *start += discard;
                    return Ok(None);
                }
                Ok(_) => {
                    *start += discard;
                    return Err(TransportError::Tls(rustls::Error::General(
                        "unexpected TLS state".into(),
                    )));
                }
            }
        }
    }

    /// Reads more ciphertext after the unprocessed bytes; returns the count (0 at EOF).
    async fn fill(&mut self) -> Result<usize, TransportError> {
        if self.start > 0 {
            self.incoming.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if self.end == self.incoming.len() {
            // Only a record larger than the buffer could get here; rustls rejects those
            // before, but never loop on a full buffer.
            return Err(TransportError::Tls(rustls::Error::General(
                "TLS record larger than the read buffer".into(),
            )));
        }
        let n = self.tcp.read(&mut self.incoming[self.end..]).await?;
        self.end += n;
        Ok(n)
    }

    async fn flush(&mut self) -> Result<(), TransportError> {
        if self.out_len > 0 {
            let n = self.out_len;
            self.out_len = 0;
            self.tcp.write_all(&self.outgoing[..n]).await?;
        }
        Ok(())
    }
}

/// Appends a handshake (or post-handshake) record to `outgoing`, growing it as needed.
fn encode(
    e: &mut EncodeTlsData<'_, ClientConnectionData>,
    outgoing: &mut Vec<u8>,
    out_len: &mut usize,
) {
    loop {
        match e.encode(&mut outgoing[*out_len..]) {
            Ok(n) => {
                *out_len += n;
                return;
            }
            Err(EncodeError::InsufficientSize(s)) => {
                outgoing.resize(*out_len + s.required_size, 0);
            }
            Err(EncodeError::AlreadyEncoded) => return,
        }
    }
}

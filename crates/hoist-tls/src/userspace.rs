//! TLS records encrypted and decrypted in user space by rustls: the transport used when kernel
//! TLS is not available (no tls module, a cipher the kernel lacks, or configuration).
//!
//! Ciphertext is read in large chunks into a reused buffer; plaintext to send is encrypted into
//! a reused output buffer and written out before more is accepted. Because encryption
//! consumes a record sequence number, bytes reported as written are always kept until they
//! reach the socket (a later write, flush or shutdown sends them first).

use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::file::FileRegion;
use rustls::server::UnbufferedServerConnection;

use crate::handshake::Established;
use crate::record::{Action, RecordLayer, Step};
use crate::side::Side;
use crate::transport::{TlsInfo, Transport};

/// Ciphertext read per socket read (at most).
const READ_CHUNK: usize = 64 * 1024;
/// Plaintext encrypted per socket write: large enough to amortise the syscall, small enough to
/// stay in cache.
const WRITE_BATCH: usize = 128 * 1024;
/// Plaintext bytes of a full TLS record.
const MAX_FRAGMENT: usize = 16384;

/// `C`: the server side (downstream connections) or the client side (upstream ones).
pub struct UserTlsTransport<C = UnbufferedServerConnection> {
    tcp: TcpStream,
    rec: RecordLayer<C>,
    info: TlsInfo,
    /// Complete records may be waiting in `rec.incoming`.
    undriven: bool,
    /// TCP FIN seen on a record boundary.
    read_eof: bool,
    /// A fatal TLS error on the read side, reported again on every read.
    read_error: Option<String>,
    close_queued: bool,
    /// The head and the start of a file body, for the first record of `write_file`.
    scratch: Vec<u8>,
}

impl<C: Side> UserTlsTransport<C> {
    pub fn new(established: Established<C>) -> UserTlsTransport<C> {
        let Established { tcp, conn, info } = established;
        UserTlsTransport {
            tcp,
            rec: RecordLayer::new(conn, READ_CHUNK, 0),
            info,
            undriven: false,
            read_eof: false,
            read_error: None,
            close_queued: false,
            scratch: Vec::new(),
        }
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    pub fn info(&self) -> &TlsInfo {
        &self.info
    }

    /// Writes out everything in the output buffer.
    fn poll_flush_out(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.rec.out.is_empty() {
            let n = ready!(Pin::new(&mut self.tcp).poll_write(cx, self.rec.out.filled()))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.rec.out.consume(n);
        }
        Poll::Ready(Ok(()))
    }

    /// Encrypts `data` (after any records the read side produced) into the output buffer.
    fn encrypt(&mut self, data: &[u8]) -> io::Result<()> {
        if self.close_queued {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "TLS stream already shut down",
            ));
        }
        match self.rec.drive(Action::Encrypt(data)) {
            Ok(Step::Writable) => Ok(()),
            Ok(Step::Closed) => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "TLS session closed",
            )),
            Ok(Step::Blocked) => Err(io::Error::other("TLS session not established")),
            Err(e) => {
                self.read_error.get_or_insert_with(|| e.to_string());
                Err(io::Error::new(io::ErrorKind::InvalidData, e))
            }
        }
    }

    fn read_failure(&self) -> Option<io::Error> {
        self.read_error
            .as_ref()
            .map(|e| io::Error::new(io::ErrorKind::InvalidData, e.clone()))
    }
}

impl<C: Side + Unpin> AsyncRead for UserTlsTransport<C> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if buf.remaining() == 0 {
            return Poll::Ready(Ok(()));
        }
        loop {
            if !this.rec.plain.is_empty() {
                let want = buf.remaining().min(this.rec.plain.len());
                let n = this.rec.plain.take_into(buf.initialize_unfilled_to(want));
                buf.advance(n);
                return Poll::Ready(Ok(()));
            }
            if let Some(e) = this.read_failure() {
                return Poll::Ready(Err(e));
            }
            if this.rec.peer_closed() || this.read_eof {
                return Poll::Ready(Ok(()));
            }
            if this.undriven {
                this.undriven = false;
                if let Err(e) = this.rec.drive(Action::Nothing) {
                    this.read_error = Some(e.to_string());
                    // Best effort: the fatal alert rustls queued.
                    let _ = this.poll_flush_out(cx);
                }
                continue;
            }
            // Post-handshake messages (a KeyUpdate reply) produced by the read side.
            if let Poll::Ready(Err(e)) = this.poll_flush_out(cx) {
                return Poll::Ready(Err(e));
            }
            let spare = this.rec.incoming.spare(MAX_FRAGMENT);
            let cap = spare.len().min(READ_CHUNK.max(MAX_FRAGMENT));
            let mut rb = ReadBuf::new(&mut spare[..cap]);
            ready!(Pin::new(&mut this.tcp).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            if n == 0 {
                if this.rec.incoming.is_empty() {
                    // FIN without close_notify: many clients end like this; the HTTP layer
                    // knows whether a message was cut short.
                    this.read_eof = true;
                    continue;
                }
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed inside a TLS record",
                )));
            }
            this.rec.incoming.commit(n);
            this.undriven = true;
        }
    }
}

impl<C: Side + Unpin> AsyncWrite for UserTlsTransport<C> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        ready!(this.poll_flush_out(cx))?;
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        let n = buf.len().min(WRITE_BATCH);
        this.encrypt(&buf[..n])?;
        // The bytes are committed: send what the socket takes now, the rest on the next call.
        if let Poll::Ready(Err(e)) = this.poll_flush_out(cx) {
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        ready!(this.poll_flush_out(cx))?;
        Pin::new(&mut this.tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.close_queued {
            this.close_queued = true;
            // A session that already failed has no close_notify to send; just close.
            let _ = this.rec.drive(Action::CloseNotify);
        }
        ready!(this.poll_flush_out(cx))?;
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }
}

impl<C: Side + Unpin> Transport for UserTlsTransport<C> {
    async fn write_file<'a>(&'a mut self, head: &'a [u8], body: &'a FileRegion) -> io::Result<()> {
        let bytes = body.bytes();
        if bytes.len() as u64 != body.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "file region extends past the end of the file",
            ));
        }
        poll_fn(|cx| self.poll_flush_out(cx)).await?;
        // One record with the head and the start of the body, so a small response is a
        // single record; then the body straight from the mapping.
        let first = if head.len() < MAX_FRAGMENT {
            (MAX_FRAGMENT - head.len()).min(bytes.len())
        } else {
            0
        };
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        scratch.extend_from_slice(head);
        scratch.extend_from_slice(&bytes[..first]);
        let res = if scratch.is_empty() {
            Ok(())
        } else {
            self.encrypt(&scratch)
        };
        self.scratch = scratch;
        res?;
        for batch in bytes[first..].chunks(WRITE_BATCH) {
            self.encrypt(batch)?;
            poll_fn(|cx| self.poll_flush_out(cx)).await?;
        }
        poll_fn(|cx| self.poll_flush_out(cx)).await?;
        poll_fn(|cx| Pin::new(&mut self.tcp).poll_flush(cx)).await
    }

    fn tls_info(&self) -> Option<&TlsInfo> {
        Some(&self.info)
    }
}

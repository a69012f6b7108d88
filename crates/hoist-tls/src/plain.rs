//! Plain TCP as a [`Transport`]. A file body goes out with sendfile(2) behind the head sent
//! with MSG_MORE, so small responses leave in one segment and the body never enters user space.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustix::net::SendFlags;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use crate::file::FileRegion;
use crate::splice::{poll_splice_into, SpliceSink, SpliceSource, Spliced};
use crate::transport::{TlsInfo, Transport};

/// Largest count passed to one sendfile call (Linux caps a call at 0x7ffff000 bytes anyway).
const SENDFILE_CHUNK: u64 = 1 << 30;

pub struct PlainTransport {
    tcp: TcpStream,
    /// Bytes read before the transport existed (the tls_inspector's look at a plain-text
    /// connection), delivered before anything else.
    prefix: Vec<u8>,
    prefix_pos: usize,
}

impl PlainTransport {
    pub fn new(tcp: TcpStream) -> PlainTransport {
        PlainTransport::with_buffered(tcp, Vec::new())
    }

    /// A transport whose reads first return `buffered`, then the socket.
    pub fn with_buffered(tcp: TcpStream, buffered: Vec<u8>) -> PlainTransport {
        PlainTransport {
            tcp,
            prefix: buffered,
            prefix_pos: 0,
        }
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }
}

/// Sends all of `buf` with `flags`, waiting for writability as needed.
async fn send_all(tcp: &TcpStream, mut buf: &[u8], flags: SendFlags) -> io::Result<()> {
    while !buf.is_empty() {
        tcp.writable().await?;
        match tcp.try_io(Interest::WRITABLE, || {
            rustix::net::send(tcp, buf, flags).map_err(io::Error::from)
        }) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => buf = &buf[n..],
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// sendfile(2) of a whole region, looping on short writes and EAGAIN.
pub(crate) async fn sendfile_all(tcp: &TcpStream, region: &FileRegion) -> io::Result<()> {
    let file = region.file.file();
    let mut offset = region.offset;
    let end = region.offset.saturating_add(region.len);
    while offset < end {
        tcp.writable().await?;
        let count = (end - offset).min(SENDFILE_CHUNK) as usize;
        match tcp.try_io(Interest::WRITABLE, || {
            rustix::fs::sendfile(tcp, file, Some(&mut offset), count).map_err(io::Error::from)
        }) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file region extends past the end of the file",
                ))
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

impl AsyncRead for PlainTransport {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix_pos < this.prefix.len() {
            let rest = &this.prefix[this.prefix_pos..];
            let n = rest.len().min(buf.remaining());
            buf.put_slice(&rest[..n]);
            this.prefix_pos += n;
            if this.prefix_pos == this.prefix.len() {
                this.prefix = Vec::new();
                this.prefix_pos = 0;
            }
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for PlainTransport {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}

impl Transport for PlainTransport {
    async fn write_file<'a>(&'a mut self, head: &'a [u8], body: &'a FileRegion) -> io::Result<()> {
        // MSG_MORE only when the body follows: on the last send it would hold the segment back.
        let flags = if body.len > 0 {
            SendFlags::MORE | SendFlags::NOSIGNAL
        } else {
            SendFlags::NOSIGNAL
        };
        send_all(&self.tcp, head, flags).await?;
        sendfile_all(&self.tcp, body).await
    }

    fn tls_info(&self) -> Option<&TlsInfo> {
        None
    }

    fn can_splice(&self) -> bool {
        true
    }

    async fn splice_from<'a>(
        &'a mut self,
        src: &'a SpliceSource,
        len: u64,
        moved: &'a mut u64,
    ) -> io::Result<Spliced> {
        crate::splice::forward(src, self, len, moved).await
    }
}

impl SpliceSink for PlainTransport {
    fn poll_splice_out(
        &mut self,
        cx: &mut std::task::Context<'_>,
        pipe: std::os::fd::BorrowedFd<'_>,
        n: usize,
        more: bool,
    ) -> std::task::Poll<io::Result<usize>> {
        poll_splice_into(&self.tcp, cx, pipe, n, more)
    }
}

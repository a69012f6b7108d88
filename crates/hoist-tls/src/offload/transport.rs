//! The kernel-TLS transport: plaintext in and out of a socket whose record layer the kernel
//! runs. What stays in user space is what the kernel hands back: non-data records on the read
//! side (alerts, TLS 1.3 KeyUpdate, anything unexpected) and the records hoist must send itself
//! (close_notify, KeyUpdate, fatal alerts), plus the count of records sent under each key.
//!
//! The non-data records live in `control.rs`.
//!
//! Reads are always recvmsg with a control buffer, because a plain read() fails with EIO when
//! the next record is not application data. Writes are plain sends (the kernel frames records);
//! a file body goes with sendfile(2) behind the head sent with MSG_MORE, so the proxy never
//! touches its bytes.

use std::collections::VecDeque;
use std::future::poll_fn;
use std::io::{self, IoSlice};
use std::os::fd::{AsFd, BorrowedFd};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use rustls::kernel::KernelConnection;
use rustls::server::UnbufferedServerConnection;
use rustls::{ProtocolVersion, SupportedCipherSuite};
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};
use tokio::net::TcpStream;

use super::control::{Control, Flow, Then};
use super::records::RecordBudget;
use super::sys::{Linux, Sys, RECORD_APPLICATION_DATA};
use super::{ErrorReason, EventSink, OffloadEvent};
use crate::file::FileRegion;
use crate::side::Side;
use crate::splice::{poll_splice_into, SpliceSink, SpliceSource, Spliced};
use crate::transport::{TlsInfo, Transport};

/// Below this much room in the caller's buffer, reads go through an internal buffer, so that
/// a whole control record (an alert, a KeyUpdate) always arrives in one piece.
const MIN_DIRECT_READ: usize = 64;
/// Room for one record's plaintext.
const SCRATCH: usize = 16384 + 256;
/// Largest count passed to one sendfile call.
const SENDFILE_CHUNK: u64 = 1 << 30;
/// The largest non-data record hoist gathers (a TLS record's plaintext is at most 2^14).
const MAX_CONTROL_RECORD: usize = 16384 + 256;
/// Warning alerts ignored in one poll before yielding to other tasks.
const MAX_IGNORED_ALERTS: usize = 16;

#[derive(Debug)]
pub(super) enum ReadSide {
    Open,
    /// close_notify or FIN: reads return 0.
    Eof,
    Failed(io::ErrorKind, String),
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum WriteSide {
    Open,
    /// No more application data may go out (the reason), but close_notify still may.
    Stopped(&'static str),
    /// close_notify queued or sent, or a fatal alert: nothing more.
    Closed,
    /// The kernel aborted the socket (or a send failed): not even close_notify.
    Failed,
}

/// `C`: the side the handshake ran as, the server (downstream connections) or the client
/// (upstream ones); it decides what a post-handshake NewSessionTicket means.
pub struct KtlsTransport<S: Sys = Linux, C: Side = UnbufferedServerConnection> {
    pub(super) tcp: TcpStream,
    pub(super) sys: S,
    pub(super) kernel: KernelConnection<C::Data>,
    pub(super) info: TlsInfo,
    pub(super) version: ProtocolVersion,
    pub(super) tls13: bool,
    pub(super) can_rekey: bool,
    pub(super) budget: RecordBudget,
    pub(super) read: ReadSide,
    pub(super) write: WriteSide,
    pub(super) pending: VecDeque<Control>,
    pub(super) events: Option<EventSink>,
    /// The first error reason reported (one per connection).
    pub(super) reported: bool,
    pub(super) scratch: Vec<u8>,
    pub(super) leftover: Vec<u8>,
    pub(super) leftover_pos: usize,
    /// A non-data record the caller's buffer could not take in one read, gathered until its
    /// end (a NewSessionTicket is larger than the smallest direct read).
    pub(super) partial: Vec<u8>,
    /// TLS_RX_EXPECT_NO_PAD was set (TLS 1.3 toward an upstream).
    pub(super) rx_expect_no_pad: bool,
}

impl<S: Sys, C: Side> KtlsTransport<S, C> {
    pub(crate) fn new(
        tcp: TcpStream,
        sys: S,
        kernel: KernelConnection<C::Data>,
        info: TlsInfo,
        can_rekey: bool,
    ) -> KtlsTransport<S, C> {
        let version = kernel.protocol_version();
        let limit = confidentiality_limit(kernel.negotiated_cipher_suite());
        KtlsTransport {
            tcp,
            sys,
            info,
            version,
            tls13: version == ProtocolVersion::TLSv1_3,
            can_rekey,
            kernel,
            budget: RecordBudget::new(limit),
            read: ReadSide::Open,
            write: WriteSide::Open,
            pending: VecDeque::new(),
            events: None,
            reported: false,
            scratch: Vec::new(),
            leftover: Vec::new(),
            leftover_pos: 0,
            partial: Vec::new(),
            rx_expect_no_pad: false,
        }
    }

    /// Where rekeys and errors are reported.
    pub fn set_event_sink(&mut self, sink: EventSink) {
        self.events = Some(sink);
    }

    /// "sw" or "hw" (or "unknown"), once the caller has asked the kernel.
    pub fn set_offload_label(&mut self, label: &'static str) {
        self.info.offload = label;
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    /// Records sent under the current TX key (an upper bound).
    pub fn records_sent(&self) -> u64 {
        self.budget.used()
    }

    #[cfg(test)]
    pub(crate) fn set_record_limit(&mut self, limit: u64) {
        self.budget = RecordBudget::new(limit);
    }

    pub(super) fn emit(&self, event: OffloadEvent) {
        if let Some(sink) = &self.events {
            sink(event);
        }
    }

    pub(super) fn report(&mut self, reason: ErrorReason) {
        if !self.reported {
            self.reported = true;
            self.emit(OffloadEvent::Error(reason));
        }
    }

    /// Control records out, and everything written handed to the kernel.
    fn poll_flushed(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        if self.write == WriteSide::Failed {
            return Poll::Ready(Ok(()));
        }
        // Without waiting for writability first: with the real kernel there is nothing to wait
        // for.
        match self.sys.flush(self.tcp.as_fd()) {
            Ok(()) => return Poll::Ready(Ok(())),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Poll::Ready(Err(self.write_failed(e))),
        }
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            let (tcp, sys) = (&self.tcp, &self.sys);
            match tcp.try_io(Interest::WRITABLE, || sys.flush(tcp.as_fd())) {
                Ok(()) => return Poll::Ready(Ok(())),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(self.write_failed(e))),
            }
        }
    }

    pub(super) fn write_failed(&mut self, e: io::Error) -> io::Error {
        self.write = WriteSide::Failed;
        if let Some(reason) = kernel_error_reason(&e) {
            self.report(reason);
        }
        e
    }

    fn check_writable(&self) -> io::Result<()> {
        match self.write {
            WriteSide::Open => Ok(()),
            WriteSide::Stopped(why) => Err(io::Error::new(io::ErrorKind::BrokenPipe, why)),
            WriteSide::Closed | WriteSide::Failed => Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "TLS stream already shut down",
            )),
        }
    }

    /// The most bytes the next send may carry; retires the TX key first when its record
    /// budget is spent (a KeyUpdate on TLS 1.3 kernels that rekey, a graceful close otherwise).
    fn poll_allowance(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        loop {
            let allowance = self.budget.allowance();
            if allowance > 0 {
                return Poll::Ready(Ok(allowance));
            }
            if !(self.tls13 && self.can_rekey) {
                self.report(ErrorReason::RecordLimit);
                self.queue_close_notify();
                let _ = self.poll_pending(cx);
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "TLS record limit of the key reached; connection closed",
                )));
            }
            if !self.pending.iter().any(|c| c.then == Then::InstallTxKey) {
                self.pending.push_back(Control::key_update(false));
            }
            ready!(self.poll_pending(cx))?;
            if self.budget.allowance() == 0 {
                return Poll::Ready(Err(io::Error::other("TLS record budget too small")));
            }
        }
    }

    fn poll_send(
        &mut self,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
        more: bool,
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        self.check_writable()?;
        let total = bufs.iter().map(|b| b.len()).sum::<usize>();
        if total == 0 {
            return Poll::Ready(Ok(0));
        }
        let allowance = ready!(self.poll_allowance(cx))?;
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            let (tcp, sys) = (&self.tcp, &self.sys);
            let res = if total <= allowance {
                tcp.try_io(Interest::WRITABLE, || sys.send(tcp.as_fd(), bufs, more))
            } else {
                let first = bufs
                    .iter()
                    .find(|b| !b.is_empty())
                    .map_or(&[][..], |b| &b[..]);
                let part = [IoSlice::new(&first[..first.len().min(allowance)])];
                tcp.try_io(Interest::WRITABLE, || sys.send(tcp.as_fd(), &part, more))
            };
            match res {
                Ok(n) => {
                    self.budget.charge(n);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(self.write_failed(e))),
            }
        }
    }

    /// One sendfile call's worth of `file` from `*offset` to `end`.
    fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: &std::fs::File,
        offset: &mut u64,
        end: u64,
    ) -> Poll<io::Result<()>> {
        ready!(self.poll_pending(cx))?;
        self.check_writable()?;
        let allowance = ready!(self.poll_allowance(cx))?;
        let count = (end - *offset).min(SENDFILE_CHUNK).min(allowance as u64) as usize;
        loop {
            ready!(self.tcp.poll_write_ready(cx))?;
            let (tcp, sys) = (&self.tcp, &self.sys);
            let res = tcp.try_io(Interest::WRITABLE, || {
                sys.sendfile(tcp.as_fd(), file, offset, count)
            });
            match res {
                Ok(0) => {
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "file region extends past the end of the file",
                    )))
                }
                Ok(n) => {
                    self.budget.charge(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(self.write_failed(e))),
            }
        }
    }

    pub(super) fn read_failed(&mut self, e: io::Error) -> io::Error {
        if let Some(reason) = kernel_error_reason(&e) {
            // The kernel has aborted the connection: it cannot send anything any more.
            self.report(reason);
            self.write = WriteSide::Failed;
        }
        self.read = ReadSide::Failed(e.kind(), e.to_string());
        e
    }
}

/// Errors after which the kernel has already given up on the connection.
fn kernel_error_reason(e: &io::Error) -> Option<ErrorReason> {
    match e.raw_os_error()? {
        libc::EBADMSG => Some(ErrorReason::DecryptError),
        libc::EMSGSIZE => Some(ErrorReason::RecordOverflow),
        libc::EINVAL => Some(ErrorReason::InvalidRecord),
        libc::EKEYEXPIRED => Some(ErrorReason::KeyExpired),
        libc::EIO => Some(ErrorReason::Kernel),
        _ => None,
    }
}

fn confidentiality_limit(suite: SupportedCipherSuite) -> u64 {
    match suite {
        SupportedCipherSuite::Tls12(s) => s.common.confidentiality_limit,
        SupportedCipherSuite::Tls13(s) => s.common.confidentiality_limit,
    }
}

impl<S: Sys + Unpin, C: Side> AsyncRead for KtlsTransport<S, C> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let mut ignored = 0;
        loop {
            if this.leftover_pos < this.leftover.len() {
                let rest = &this.leftover[this.leftover_pos..];
                let n = rest.len().min(buf.remaining());
                buf.put_slice(&rest[..n]);
                this.leftover_pos += n;
                return Poll::Ready(Ok(()));
            }
            match &this.read {
                ReadSide::Open => {}
                ReadSide::Eof => return Poll::Ready(Ok(())),
                ReadSide::Failed(kind, msg) => {
                    return Poll::Ready(Err(io::Error::new(*kind, msg.clone())))
                }
            }
            if buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            if !this.pending.is_empty() {
                // A KeyUpdate reply waiting for room in the socket.
                if let Poll::Ready(Err(e)) = this.poll_pending(cx) {
                    tracing::debug!("kTLS control record: {e}");
                }
            }
            ready!(this.tcp.poll_read_ready(cx))?;
            let room = buf.remaining();
            let direct = room >= MIN_DIRECT_READ;
            let (tcp, sys) = (&this.tcp, &this.sys);
            let res = if direct {
                let dst = buf.initialize_unfilled();
                tcp.try_io(Interest::READABLE, || sys.recv_record(tcp.as_fd(), dst))
            } else {
                if this.scratch.len() < SCRATCH {
                    this.scratch.resize(SCRATCH, 0);
                }
                let dst = &mut this.scratch[..];
                tcp.try_io(Interest::READABLE, || sys.recv_record(tcp.as_fd(), dst))
            };
            let r = match res {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(this.read_failed(e))),
            };
            let got: &[u8] = if direct {
                let filled = buf.initialize_unfilled();
                &filled[..r.len.min(filled.len())]
            } else {
                &this.scratch[..r.len.min(SCRATCH)]
            };
            if r.record_type == RECORD_APPLICATION_DATA {
                if got.is_empty() {
                    // FIN without close_notify: many clients end like this; the HTTP layer
                    // knows whether a message was cut short.
                    this.read = ReadSide::Eof;
                    return Poll::Ready(Ok(()));
                }
                if direct {
                    let n = got.len();
                    buf.advance(n);
                } else {
                    let n = got.len().min(room);
                    this.leftover.clear();
                    this.leftover.extend_from_slice(&got[n..]);
                    this.leftover_pos = 0;
                    buf.put_slice(&this.scratch[..n]);
                }
                return Poll::Ready(Ok(()));
            }
            // A non-data record: gathered whole (the kernel hands out one at a time and
            // marks its end with MSG_EOR), then acted on.
            if this.partial.len() + got.len() > MAX_CONTROL_RECORD {
                this.partial.clear();
                let flow = this.fail_read(
                    cx,
                    ErrorReason::UnexpectedMessage,
                    "oversized TLS control record".into(),
                    Some(super::control::ALERT_UNEXPECTED_MESSAGE),
                );
                if let Flow::Fail(e) = flow {
                    return Poll::Ready(Err(e));
                }
                continue;
            }
            this.partial.extend_from_slice(got);
            if !r.end_of_record && !got.is_empty() {
                continue;
            }
            let record = std::mem::take(&mut this.partial);
            let flow = this.on_control(cx, r.record_type, &record, r.end_of_record);
            this.partial = record;
            this.partial.clear();
            match flow {
                Flow::Continue => {
                    ignored += 1;
                    if ignored >= MAX_IGNORED_ALERTS {
                        cx.waker().wake_by_ref();
                        return Poll::Pending;
                    }
                }
                Flow::Eof => {
                    this.read = ReadSide::Eof;
                    return Poll::Ready(Ok(()));
                }
                Flow::Fail(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl<S: Sys + Unpin, C: Side> AsyncWrite for KtlsTransport<S, C> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_send(cx, &[IoSlice::new(buf)], false)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().poll_send(cx, bufs, false)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.get_mut().poll_flushed(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.queue_close_notify();
        if let Err(e) = ready!(this.poll_pending(cx)) {
            tracing::debug!("kTLS close_notify: {e}");
        }
        Pin::new(&mut this.tcp).poll_shutdown(cx)
    }
}

impl<S: Sys + Unpin, C: Side> Transport for KtlsTransport<S, C> {
    async fn write_file<'a>(&'a mut self, head: &'a [u8], body: &'a FileRegion) -> io::Result<()> {
        // MSG_MORE only when the body follows: the head then shares the body's first record.
        let more = body.len > 0;
        let mut head = head;
        while !head.is_empty() {
            let n = poll_fn(|cx| self.poll_send(cx, &[IoSlice::new(head)], more)).await?;
            head = &head[n.min(head.len())..];
        }
        let file = body.file.file();
        let mut offset = body.offset;
        let end = body.offset.saturating_add(body.len);
        while offset < end {
            poll_fn(|cx| self.poll_sendfile(cx, file, &mut offset, end)).await?;
        }
        poll_fn(|cx| self.poll_flushed(cx)).await
    }

    fn tls_info(&self) -> Option<&TlsInfo> {
        Some(&self.info)
    }

    fn can_splice(&self) -> bool {
        self.sys.can_splice()
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

/// The kernel encrypts what is spliced in; hoist still sends its control records first and
/// counts the records against the key's budget.
impl<S: Sys + Unpin, C: Side> SpliceSink for KtlsTransport<S, C> {
    fn poll_splice_out(
        &mut self,
        cx: &mut Context<'_>,
        pipe: BorrowedFd<'_>,
        n: usize,
        more: bool,
    ) -> Poll<io::Result<usize>> {
        ready!(self.poll_pending(cx))?;
        self.check_writable()?;
        let allowance = ready!(self.poll_allowance(cx))?;
        match ready!(poll_splice_into(
            &self.tcp,
            cx,
            pipe,
            n.min(allowance),
            more
        )) {
            Ok(k) => {
                self.budget.charge(k);
                Poll::Ready(Ok(k))
            }
            Err(e) => Poll::Ready(Err(self.write_failed(e))),
        }
    }
}

impl<S: Sys, C: Side> KtlsTransport<S, C> {
    /// Plaintext or part of a control record already read into user space: the next bytes
    /// of the stream are not all in the socket.
    pub fn rx_expect_no_pad(&self) -> bool {
        self.rx_expect_no_pad
    }

    pub fn read_buffered(&self) -> bool {
        self.leftover_pos < self.leftover.len() || !self.partial.is_empty()
    }
}

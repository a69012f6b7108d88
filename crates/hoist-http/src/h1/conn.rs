//! One HTTP/1.1 server connection: reads request heads and bodies from the transport's
//! plaintext, writes responses to it. It owns one read buffer and one write buffer for the
//! connection's life, so a keep-alive connection allocates nothing per request beyond the
//! request's own head.

use std::io::{self, IoSlice};

use bytes::{Bytes, BytesMut};
use hoist_tls::transport::Transport;
use http::header::{self, HeaderMap};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::chunked::Decoded;
use super::decode::BodyDecoder;
use super::encode::{encode_head, reason, ConnectionHeader, LengthHeader};
use super::framing::RequestInfo;
use super::parse::{parse_head, Scratch};
use super::{H1Error, H1Limits};
use crate::body::{SpliceOffer, SpliceReport, StreamBody};
use crate::{Body, RequestHead, ResponseHead, Version};
use hoist_tls::splice::Spliced;

/// Read size while waiting for a head. Requests are small; a large head grows the buffer up to
/// the head limit and no further.
const HEAD_READ: usize = 8 * 1024;
/// Read size for bodies: large reads keep uploads cheap.
const BODY_READ: usize = 64 * 1024;
/// Memory bodies up to this size are copied behind the head and sent in one write; larger ones
/// go out as a vectored write of head and body.
const COALESCE_MAX: usize = 16 * 1024;

const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

pub struct H1Conn<T: Transport> {
    io: T,
    limits: H1Limits,
    buf: BytesMut,
    wbuf: Vec<u8>,
    scratch: Scratch,
    info: RequestInfo,
    body: BodyDecoder,
    /// A request was read and its final response is not written yet.
    awaiting_response: bool,
    continue_sent: bool,
    /// No further request will be read: a response said `connection: close`, or the stream
    /// is broken, or the peer is gone.
    closing: bool,
    head_bytes: usize,
    /// Body bytes of the current request read so far (Envoy's %BYTES_RECEIVED%).
    body_bytes: u64,
    bytes_read: u64,
    bytes_written: u64,
}

impl<T: Transport> H1Conn<T> {
    pub fn new(io: T, limits: H1Limits) -> Self {
        Self::with_buffer(io, limits, BytesMut::with_capacity(HEAD_READ))
    }

    /// `already_read`: bytes taken from the transport before the codec was chosen.
    pub fn with_buffer(io: T, limits: H1Limits, already_read: BytesMut) -> Self {
        H1Conn {
            io,
            limits,
            buf: already_read,
            wbuf: Vec::with_capacity(1024),
            scratch: Scratch::new(),
            info: RequestInfo::default(),
            body: BodyDecoder::Done,
            awaiting_response: false,
            continue_sent: false,
            closing: false,
            head_bytes: 0,
            body_bytes: 0,
            bytes_read: 0,
            bytes_written: 0,
        }
    }

    /// The next request head. Ok(None): the peer closed cleanly between requests, or the
    /// connection is closing (see [`should_close`](Self::should_close)).
    ///
    /// Whatever the caller left unread of the previous body is read and dropped first, without
    /// a limit; call [`discard_body`](Self::discard_body) to bound that.
    ///
    /// Cancellation-safe: a dropped call loses no bytes, the next call resumes.
    pub async fn read_request(&mut self) -> Result<Option<RequestHead>, H1Error> {
        if self.closing {
            return Ok(None);
        }
        if !self.body.is_done() {
            if self.body_unsolicited() {
                // The client is still waiting for `100 Continue`; its body may or may not
                // follow, so nothing after this point can be framed.
                self.closing = true;
                return Ok(None);
            }
            while self.skip_body_piece().await? != 0 {}
        }
        loop {
            match parse_head(&mut self.buf, &self.limits, &mut self.scratch) {
                Ok(Some(parsed)) => {
                    self.info = parsed.info;
                    self.head_bytes = parsed.len;
                    self.body_bytes = 0;
                    self.body = BodyDecoder::new(parsed.info.framing, &self.limits);
                    self.continue_sent = false;
                    self.awaiting_response = true;
                    return Ok(Some(parsed.head));
                }
                Ok(None) => {}
                Err(e) => return Err(self.fail(e)),
            }
            if self.fill(HEAD_READ).await? == 0 {
                self.closing = true;
                // Stray line breaks between requests are tolerated (RFC 9112 §2.2).
                if self.buf.iter().all(|&b| b == b'\r' || b == b'\n') {
                    return Ok(None);
                }
                return Err(H1Error::UnexpectedEof);
            }
        }
    }

    /// Waits until the first bytes of the next request are buffered, so a caller can tell an
    /// idle keep-alive connection (idle timeout) from a slow request head (headers timeout).
    /// Ok(false): the peer closed, or the connection is closing. Drains what the caller left
    /// of the previous body first, like [`read_request`](Self::read_request).
    ///
    /// Cancellation-safe.
    pub async fn wait_for_request(&mut self) -> Result<bool, H1Error> {
        if self.closing {
            return Ok(false);
        }
        if !self.body.is_done() {
            if self.body_unsolicited() {
                self.closing = true;
                return Ok(false);
            }
            while self.skip_body_piece().await? != 0 {}
        }
        loop {
            // Stray line breaks between requests are not the start of one (RFC 9112 §2.2).
            if self.buf.iter().any(|&b| b != b'\r' && b != b'\n') {
                return Ok(true);
            }
            if self.fill(HEAD_READ).await? == 0 {
                self.closing = true;
                return Ok(false);
            }
        }
    }

    /// The framing facts of the current request.
    pub fn request_info(&self) -> &RequestInfo {
        &self.info
    }

    /// The next piece of the request body; Ok(None) once the body (and its trailers) is
    /// consumed. Sends `100 Continue` first when the client asked for it and no final response
    /// has gone out yet.
    pub async fn read_body_chunk(&mut self) -> Result<Option<Bytes>, H1Error> {
        if self.body.is_done() {
            return Ok(None);
        }
        if self.info.expect_continue && !self.continue_sent && self.awaiting_response {
            self.continue_sent = true;
            let written = match self.io.write_all(CONTINUE).await {
                Ok(()) => self.io.flush().await,
                Err(e) => Err(e),
            };
            if let Err(e) = written {
                return Err(self.fail(e.into()));
            }
            self.bytes_written += CONTINUE.len() as u64;
        }
        loop {
            match self.body.decode(&mut self.buf) {
                Ok(Decoded::Data(data)) => {
                    self.body_bytes += data.len() as u64;
                    return Ok(Some(data));
                }
                Ok(Decoded::Done) => return Ok(None),
                Ok(Decoded::NeedMore) => {}
                Err(e) => return Err(self.fail(e)),
            }
            self.fill_body().await?;
        }
    }

    /// Reads and drops the rest of the body, up to `max` bytes. Ok(false) when more remained
    /// (or the client still waits for `100 Continue`, since soliciting a body only to drop it
    /// costs more than a new connection): the connection then closes after the response.
    pub async fn discard_body(&mut self, max: u64) -> Result<bool, H1Error> {
        if self.body.is_done() {
            return Ok(true);
        }
        let too_long = self.body.remaining_length().is_some_and(|n| n > max);
        if too_long || self.body_unsolicited() {
            self.closing = true;
            return Ok(false);
        }
        let mut dropped = 0u64;
        loop {
            let n = self.skip_body_piece().await?;
            if n == 0 {
                return Ok(true);
            }
            dropped += n;
            if dropped > max {
                self.closing = true;
                return Ok(false);
            }
        }
    }

    /// Writes a complete response: status line, `head.headers` as given, then the framing the
    /// codec owns (`content-length`, `connection`). See the module docs of [`super`] for the
    /// rules on HEAD, 1xx, 204 and 304. Returns the body bytes sent.
    ///
    /// A 1xx status is an interim response: headers only, and the request stays current.
    pub async fn write_response(
        &mut self,
        head: &ResponseHead,
        body: &Body,
        is_head_request: bool,
        close: bool,
    ) -> io::Result<u64> {
        let status = head.status;
        if !(100..=999).contains(&status) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "response status outside 100..=999",
            ));
        }
        if status < 200 {
            self.wbuf.clear();
            encode_head(
                &mut self.wbuf,
                status,
                &head.headers,
                LengthHeader::Omit,
                ConnectionHeader::None,
                None,
            );
            if status == 100 {
                self.continue_sent = true;
            }
            self.write_wbuf().await?;
            self.bytes_written += self.wbuf.len() as u64;
            return Ok(0);
        }
        self.write_final(status, &head.headers, None, body, is_head_request, close)
            .await
    }

    /// A local reply for a codec error: the status, the standard reason phrase as a
    /// `text/plain` body (as Envoy's local replies have), `extra_headers` (date, server...) and
    /// `connection: close`. Writes nothing for errors that mean the peer is gone.
    pub async fn write_error(
        &mut self,
        err: &H1Error,
        extra_headers: &HeaderMap,
    ) -> io::Result<()> {
        self.closing = true;
        if !err.wants_reply() {
            return Ok(());
        }
        let status = err.status();
        let body = Body::Bytes(Bytes::from_static(reason(status).as_bytes()));
        self.write_final(
            status,
            extra_headers,
            Some("text/plain"),
            &body,
            false,
            true,
        )
        .await
        .map(|_| ())
    }

    /// Whether the connection must close after the current exchange: set by a response with
    /// `connection: close`, a body left unread past a limit, or a codec error.
    pub fn should_close(&self) -> bool {
        self.closing
    }

    /// Ends the connection politely: shuts down the sending side (close_notify on TLS, then
    /// FIN), then reads and drops what the client still sends, up to `max_discard` bytes or
    /// its EOF. Closing with unread bytes would make the kernel send a RST, which can destroy
    /// the response still in flight to the client. The caller bounds the time it takes.
    pub async fn lingering_close(&mut self, max_discard: u64) -> io::Result<()> {
        self.closing = true;
        self.io.shutdown().await?;
        let mut dropped = 0u64;
        while dropped < max_discard {
            self.buf.clear();
            self.buf.reserve(BODY_READ);
            let n = self.io.read_buf(&mut self.buf).await?;
            if n == 0 {
                break;
            }
            self.bytes_read += n as u64;
            dropped += n as u64;
        }
        Ok(())
    }

    pub fn transport(&self) -> &T {
        &self.io
    }

    pub fn transport_mut(&mut self) -> &mut T {
        &mut self.io
    }

    /// The transport; bytes buffered but not yet parsed are dropped.
    pub fn into_transport(self) -> T {
        self.io
    }

    /// Plaintext bytes the codec read from the transport so far (not counting the bytes
    /// handed to [`with_buffer`](Self::with_buffer)).
    pub fn bytes_read(&self) -> u64 {
        self.bytes_read
    }

    /// Plaintext bytes written to the transport so far (heads, bodies, interim responses).
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// Body bytes of the current request read (or discarded) so far.
    pub fn request_body_bytes(&self) -> u64 {
        self.body_bytes
    }

    /// Size on the wire of the current request's head.
    pub fn request_header_bytes(&self) -> usize {
        self.head_bytes
    }

    async fn write_final(
        &mut self,
        status: u16,
        headers: &HeaderMap,
        default_content_type: Option<&'static str>,
        body: &Body,
        is_head_request: bool,
        close: bool,
    ) -> io::Result<u64> {
        let bodiless_status = status == 204 || status == 304;
        let unknown_length = matches!(body, Body::Stream(s) if s.length.is_none());
        let until_close = unknown_length && self.info.version == Version::Http10;
        let close = close
            || self.closing
            || !self.info.keep_alive
            || self.body_unsolicited()
            || (until_close && !bodiless_status && !is_head_request);
        let length = if bodiless_status {
            LengthHeader::Omit
        } else if is_head_request && body.is_empty() && headers.contains_key(header::CONTENT_LENGTH)
        {
            LengthHeader::FromCaller
        } else if until_close {
            LengthHeader::UntilClose
        } else if unknown_length {
            LengthHeader::Chunked
        } else {
            LengthHeader::Value(body.len())
        };
        let connection = if close {
            ConnectionHeader::Close
        } else if self.info.version == Version::Http10 {
            ConnectionHeader::KeepAlive
        } else {
            ConnectionHeader::None
        };
        self.wbuf.clear();
        encode_head(
            &mut self.wbuf,
            status,
            headers,
            length,
            connection,
            default_content_type,
        );
        self.awaiting_response = false;
        self.closing |= close;

        let send_body = !bodiless_status && !is_head_request;
        let head_len = self.wbuf.len() as u64;
        let sent = match body {
            Body::Bytes(b) if send_body && !b.is_empty() => {
                if self.wbuf.len() + b.len() <= COALESCE_MAX {
                    self.wbuf.extend_from_slice(b);
                    self.write_wbuf().await?;
                } else {
                    let written = write_two(&mut self.io, &self.wbuf, b).await;
                    self.check(written)?;
                    let flushed = self.io.flush().await;
                    self.check(flushed)?;
                }
                b.len() as u64
            }
            Body::File(region) if send_body && region.len > 0 => {
                let written = self.io.write_file(&self.wbuf, region).await;
                self.check(written)?;
                region.len
            }
            Body::Stream(stream) if send_body => {
                let offer = match length {
                    LengthHeader::Value(_) if self.io.can_splice() => stream.take_splice(),
                    _ => None,
                };
                let written = match offer {
                    Some(offer) => self.write_spliced(stream, offer).await,
                    None => {
                        self.write_stream(stream, length == LengthHeader::Chunked)
                            .await
                    }
                };
                self.check(written)?
            }
            _ => {
                self.write_wbuf().await?;
                0
            }
        };
        self.bytes_written += head_len + sent;
        Ok(sent)
    }

    /// Writes the head in `wbuf`, then the pieces of a streamed body as they come (each one
    /// written before the next is taken, so the producer waits for this client). A producer
    /// that fails, or a stream shorter or longer than its length, is an error: the caller
    /// closes the connection so the client sees the response is incomplete.
    async fn write_stream(&mut self, stream: &StreamBody, chunked: bool) -> io::Result<u64> {
        self.write_wbuf().await?;
        self.stream_pieces(stream, chunked, 0).await
    }

    /// Writes the head in `wbuf`, the body bytes the producer already read, then has the
    /// transport splice the rest socket to socket (the bytes never enter user space). A
    /// kernel-TLS control record on the upstream stops the splice: the rest comes through the
    /// channel. Every outcome is reported to the producer, which owns the upstream connection.
    async fn write_spliced(&mut self, stream: &StreamBody, offer: SpliceOffer) -> io::Result<u64> {
        let mut head = std::mem::take(&mut self.wbuf);
        head.extend_from_slice(&offer.buffered);
        self.wbuf = head;
        if let Err(e) = self.write_wbuf().await {
            offer.report(SpliceReport::Failed(0));
            return Err(e);
        }
        let mut moved = 0u64;
        let forwarded = {
            let splice = self
                .io
                .splice_from(&offer.source, offer.remaining, &mut moved);
            match offer.deadline {
                Some(d) => tokio::time::timeout_at(d.into(), splice)
                    .await
                    .unwrap_or_else(|_| {
                        Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "upstream request timeout",
                        ))
                    }),
                None => splice.await,
            }
        };
        let sent = offer.buffered.len() as u64 + moved;
        match forwarded {
            Ok(Spliced::Done) => {
                offer.report(SpliceReport::Done(moved));
                self.io.flush().await?;
                Ok(sent)
            }
            Ok(Spliced::Interrupted) => {
                offer.report(SpliceReport::Interrupted(moved));
                self.stream_pieces(stream, false, sent).await
            }
            Err(e) => {
                offer.report(SpliceReport::Failed(moved));
                Err(e)
            }
        }
    }

    /// The pieces of a streamed body after `sent` bytes of it were written.
    async fn stream_pieces(
        &mut self,
        stream: &StreamBody,
        chunked: bool,
        mut sent: u64,
    ) -> io::Result<u64> {
        let mut rx = stream.take().ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, "stream body already taken")
        })?;
        while let Some(piece) = rx.recv().await {
            let piece = piece?;
            if piece.is_empty() {
                continue;
            }
            sent += piece.len() as u64;
            if stream.length.is_some_and(|n| sent > n) {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "body over its length",
                ));
            }
            if chunked {
                // One write per piece, framing included: a TLS transport then makes full
                // records rather than one for each size line.
                self.wbuf.clear();
                self.wbuf
                    .extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                let framing = self.wbuf.len() as u64 + 2;
                self.wbuf.extend_from_slice(&piece);
                self.wbuf.extend_from_slice(b"\r\n");
                self.io.write_all(&self.wbuf).await?;
                self.bytes_written += framing;
            } else {
                self.io.write_all(&piece).await?;
            }
        }
        if stream.length.is_some_and(|n| sent != n) {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "body short of its length",
            ));
        }
        if chunked {
            self.io.write_all(b"0\r\n\r\n").await?;
            self.bytes_written += 5;
        }
        self.io.flush().await?;
        Ok(sent)
    }

    /// Writes and flushes the write buffer; the caller counts the bytes.
    async fn write_wbuf(&mut self) -> io::Result<()> {
        let written = self.io.write_all(&self.wbuf).await;
        self.check(written)?;
        let flushed = self.io.flush().await;
        self.check(flushed)
    }

    /// A failed write leaves the stream in an unknown state.
    fn check<R>(&mut self, r: io::Result<R>) -> io::Result<R> {
        if r.is_err() {
            self.closing = true;
        }
        r
    }

    /// The client asked for `100 Continue`, has not got it, and its body is still due.
    fn body_unsolicited(&self) -> bool {
        self.info.expect_continue && !self.continue_sent && !self.body.is_done()
    }

    /// Drops one buffered piece of the body, reading if needed; 0 at the end of the body.
    async fn skip_body_piece(&mut self) -> Result<u64, H1Error> {
        loop {
            match self.body.skip_buffered(&mut self.buf) {
                Ok(Some(n)) => {
                    self.body_bytes += n;
                    return Ok(n);
                }
                Ok(None) => {}
                Err(e) => return Err(self.fail(e)),
            }
            self.fill_body().await?;
        }
    }

    async fn fill_body(&mut self) -> Result<(), H1Error> {
        let want = match self.body.remaining_length() {
            Some(n) => usize::try_from(n).map_or(BODY_READ, |n| n.min(BODY_READ)),
            None => BODY_READ,
        };
        if self.fill(want).await? == 0 {
            return Err(self.fail(H1Error::UnexpectedEof));
        }
        Ok(())
    }

    /// Reads once into the buffer; the number of bytes read, 0 at EOF.
    async fn fill(&mut self, want: usize) -> Result<usize, H1Error> {
        self.buf.reserve(want);
        match self.io.read_buf(&mut self.buf).await {
            Ok(n) => {
                self.bytes_read += n as u64;
                Ok(n)
            }
            Err(e) => Err(self.fail(e.into())),
        }
    }

    fn fail(&mut self, e: H1Error) -> H1Error {
        self.closing = true;
        e
    }
}

/// Writes `a` then `b`, as few writes as the transport allows.
async fn write_two<T: Transport>(io: &mut T, mut a: &[u8], mut b: &[u8]) -> io::Result<()> {
    while !a.is_empty() {
        let n = io
            .write_vectored(&[IoSlice::new(a), IoSlice::new(b)])
            .await?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        if n < a.len() {
            a = &a[n..];
        } else {
            b = b.get(n - a.len()..).ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    "transport wrote more than given",
                )
            })?;
            a = &[];
        }
    }
    io.write_all(b).await
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;

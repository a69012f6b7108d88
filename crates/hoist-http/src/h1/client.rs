//! The HTTP/1.1 client side, for upstream connections: request heads out, response heads and
//! bodies in. Strict like the server side: a response whose framing is ambiguous
//! (Content-Length with Transfer-Encoding, differing lengths, a coding other than a final
//! `chunked`) is malformed, never guessed at, so one response cannot bleed into the next on a
//! reused connection.

use std::io;

use bytes::{Bytes, BytesMut};
use http::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::chunked::Decoded;
use super::decode::BodyDecoder;
use super::framing::BodyFraming;
use super::parse::with_headers;
use super::H1Limits;
use crate::ResponseHead;

/// Upstream response heads larger than this are malformed (Envoy's default limit is 60 KiB
/// for request heads; responses get the same).
const MAX_RESPONSE_HEAD: usize = 60 * 1024;
const MAX_RESPONSE_HEADERS: usize = 100;
/// The most read from the socket at once, and so the largest body piece handed out.
const READ_SIZE: usize = 64 * 1024;

/// Why an upstream exchange failed.
#[derive(Debug)]
pub enum ClientError {
    /// The connection ended before any byte of the response (a reset before headers).
    ClosedBeforeResponse,
    /// The connection ended in the middle of the response.
    Truncated,
    /// The response is not valid HTTP/1.1.
    Malformed(&'static str),
    Io(io::Error),
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::ClosedBeforeResponse => f.write_str("connection closed before response"),
            ClientError::Truncated => f.write_str("connection closed during response"),
            ClientError::Malformed(why) => write!(f, "malformed response: {why}"),
            ClientError::Io(e) => write!(f, "{e}"),
        }
    }
}

/// How a request body is delimited on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestFraming {
    None,
    Length(u64),
    Chunked,
}

/// How the response body is delimited.
#[derive(Debug)]
enum ResponseBody {
    Framed(BodyDecoder),
    /// No length and not chunked: the body ends with the connection.
    UntilClose,
    Done,
}

pub struct UpstreamH1<T> {
    io: T,
    rbuf: BytesMut,
    body: ResponseBody,
    /// The upstream keeps the connection after this response.
    keep_alive: bool,
    wbuf: Vec<u8>,
}

impl<T: AsyncRead + AsyncWrite + Unpin> UpstreamH1<T> {
    pub fn new(io: T) -> Self {
        UpstreamH1 {
            io,
            rbuf: BytesMut::with_capacity(READ_SIZE),
            body: ResponseBody::Done,
            keep_alive: true,
            wbuf: Vec::with_capacity(1024),
        }
    }

    pub fn get_ref(&self) -> &T {
        &self.io
    }

    /// Writes a request head: `method target HTTP/1.1`, the headers as given (the caller removed
    /// hop-by-hop ones), then the framing header this codec owns.
    pub async fn send_head(
        &mut self,
        method: &str,
        target: &str,
        headers: &HeaderMap,
        framing: RequestFraming,
    ) -> io::Result<()> {
        self.wbuf.clear();
        let w = &mut self.wbuf;
        w.extend_from_slice(method.as_bytes());
        w.push(b' ');
        w.extend_from_slice(target.as_bytes());
        w.extend_from_slice(b" HTTP/1.1\r\n");
        for (name, value) in headers {
            w.extend_from_slice(name.as_str().as_bytes());
            w.extend_from_slice(b": ");
            w.extend_from_slice(value.as_bytes());
            w.extend_from_slice(b"\r\n");
        }
        match framing {
            RequestFraming::None => {}
            RequestFraming::Length(n) => {
                w.extend_from_slice(format!("content-length: {n}\r\n").as_bytes())
            }
            RequestFraming::Chunked => w.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        }
        w.extend_from_slice(b"\r\n");
        self.io.write_all(&self.wbuf).await?;
        if framing == RequestFraming::None {
            self.io.flush().await?;
        }
        Ok(())
    }

    pub async fn send_body_piece(&mut self, piece: &[u8], chunked: bool) -> io::Result<()> {
        if piece.is_empty() {
            return Ok(());
        }
        if chunked {
            self.io
                .write_all(format!("{:x}\r\n", piece.len()).as_bytes())
                .await?;
            self.io.write_all(piece).await?;
            self.io.write_all(b"\r\n").await
        } else {
            self.io.write_all(piece).await
        }
    }

    pub async fn finish_body(&mut self, chunked: bool) -> io::Result<()> {
        if chunked {
            self.io.write_all(b"0\r\n\r\n").await?;
        }
        self.io.flush().await
    }

    /// Reads the final response head, skipping interim (1xx) responses. `head_request`: the
    /// request was HEAD, so the response has no body whatever its headers say.
    pub async fn read_head(
        &mut self,
        head_request: bool,
    ) -> Result<(ResponseHead, Option<u64>), ClientError> {
        let mut any = false;
        loop {
            if let Some(parsed) = self.parse_head(head_request)? {
                if parsed.0.status >= 200 {
                    return Ok(parsed);
                }
                any = true;
                continue;
            }
            if self.rbuf.len() >= MAX_RESPONSE_HEAD {
                return Err(ClientError::Malformed("response head too large"));
            }
            let n = self.fill().await?;
            if n == 0 {
                return Err(if any || !self.rbuf.is_empty() {
                    ClientError::Truncated
                } else {
                    ClientError::ClosedBeforeResponse
                });
            }
        }
    }

    /// The next piece of the response body; Ok(None) at its end.
    pub async fn read_body_piece(&mut self) -> Result<Option<Bytes>, ClientError> {
        loop {
            match &mut self.body {
                ResponseBody::Done => return Ok(None),
                ResponseBody::UntilClose => {
                    if !self.rbuf.is_empty() {
                        return Ok(Some(self.rbuf.split().freeze()));
                    }
                    if self.fill().await? == 0 {
                        self.body = ResponseBody::Done;
                        return Ok(None);
                    }
                }
                ResponseBody::Framed(decoder) => {
                    match decoder
                        .decode(&mut self.rbuf)
                        .map_err(|_| ClientError::Malformed("invalid chunked body"))?
                    {
                        Decoded::Data(d) => {
                            if decoder.is_done() {
                                self.body = ResponseBody::Done;
                            }
                            return Ok(Some(d));
                        }
                        Decoded::Done => {
                            self.body = ResponseBody::Done;
                            return Ok(None);
                        }
                        Decoded::NeedMore => {
                            if self.fill().await? == 0 {
                                return Err(ClientError::Truncated);
                            }
                        }
                    }
                }
            }
        }
    }

    /// For a Content-Length body: takes the body bytes already read with the head, and says how
    /// many are still in the socket (to be moved past user space, then reported with
    /// [`spliced`](Self::spliced)). None for other framings or when nothing is left to move.
    pub fn take_for_splice(&mut self) -> Option<(Bytes, u64)> {
        let left = self.splice_remaining()?;
        let ResponseBody::Framed(BodyDecoder::Length(remaining)) = &mut self.body else {
            return None;
        };
        let n = self.rbuf.len();
        *remaining = left;
        Some((self.rbuf.split_to(n).freeze(), left))
    }

    /// What [`take_for_splice`](Self::take_for_splice) would leave in the socket (None: not a
    /// Content-Length body, or all of it is read already).
    pub fn splice_remaining(&self) -> Option<u64> {
        let ResponseBody::Framed(BodyDecoder::Length(remaining)) = &self.body else {
            return None;
        };
        let left = remaining.checked_sub(self.rbuf.len() as u64)?;
        (left > 0).then_some(left)
    }

    /// `n` bytes of the body were moved from the socket by someone else (splice).
    pub fn spliced(&mut self, n: u64) {
        if let ResponseBody::Framed(BodyDecoder::Length(remaining)) = &mut self.body {
            *remaining = remaining.saturating_sub(n);
            if *remaining == 0 {
                self.body = ResponseBody::Done;
            }
        }
    }

    /// Whether another request may be sent: the response was read to its end, nothing
    /// unexpected follows it, and neither side asked to close.
    pub fn reusable(&self) -> bool {
        self.keep_alive && matches!(self.body, ResponseBody::Done) && self.rbuf.is_empty()
    }

    async fn fill(&mut self) -> Result<usize, ClientError> {
        if self.rbuf.capacity() - self.rbuf.len() < READ_SIZE / 4 {
            self.rbuf.reserve(READ_SIZE);
        }
        self.io
            .read_buf(&mut self.rbuf)
            .await
            .map_err(ClientError::Io)
    }

    /// Ok(None): the head is not complete yet.
    fn parse_head(
        &mut self,
        head_request: bool,
    ) -> Result<Option<(ResponseHead, Option<u64>)>, ClientError> {
        let parsed = with_headers(MAX_RESPONSE_HEADERS, |slots| {
            let mut resp = httparse::Response::new(slots);
            match resp.parse(&self.rbuf) {
                Ok(httparse::Status::Partial) => Ok(None),
                Ok(httparse::Status::Complete(len)) => {
                    let status = resp.code.unwrap_or(0);
                    let version = resp.version.unwrap_or(1);
                    let mut headers = HeaderMap::with_capacity(resp.headers.len());
                    for h in resp.headers.iter() {
                        let name = HeaderName::from_bytes(h.name.as_bytes())
                            .map_err(|_| ClientError::Malformed("invalid header name"))?;
                        let value = HeaderValue::from_bytes(h.value)
                            .map_err(|_| ClientError::Malformed("invalid header value"))?;
                        headers.append(name, value);
                    }
                    Ok(Some((status, version, headers, len)))
                }
                Err(_) => Err(ClientError::Malformed("invalid response head")),
            }
        })?;
        let Some((status, version, headers, len)) = parsed else {
            return Ok(None);
        };
        if !(100..=599).contains(&status) {
            return Err(ClientError::Malformed("status outside 100..=599"));
        }
        let _ = self.rbuf.split_to(len);
        if status < 200 {
            if status == 101 {
                return Err(ClientError::Malformed("upgrade not requested"));
            }
            return Ok(Some((ResponseHead { status, headers }, None)));
        }
        let framing = response_framing(&headers)?;
        self.keep_alive = keep_alive(&headers, version);
        let bodiless = head_request || status == 204 || status == 304;
        let (body, length) = match framing {
            _ if bodiless => (ResponseBody::Done, Some(0)),
            Some(BodyFraming::Length(n)) => (
                ResponseBody::Framed(BodyDecoder::new(
                    BodyFraming::Length(n),
                    &H1Limits::default(),
                )),
                Some(n),
            ),
            Some(BodyFraming::Chunked) => (
                ResponseBody::Framed(BodyDecoder::new(BodyFraming::Chunked, &H1Limits::default())),
                None,
            ),
            Some(BodyFraming::None) | None => {
                self.keep_alive = false;
                (ResponseBody::UntilClose, None)
            }
        };
        self.body = match body {
            ResponseBody::Framed(d) if d.is_done() => ResponseBody::Done,
            b => b,
        };
        Ok(Some((ResponseHead { status, headers }, length)))
    }
}

/// Content-Length / Transfer-Encoding of a response; None: neither (read until close).
fn response_framing(headers: &HeaderMap) -> Result<Option<BodyFraming>, ClientError> {
    let mut length: Option<u64> = None;
    for v in headers.get_all(http::header::CONTENT_LENGTH) {
        for item in v.as_bytes().split(|&b| b == b',') {
            let text = std::str::from_utf8(item)
                .map_err(|_| ClientError::Malformed("invalid content-length"))?
                .trim();
            if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
                return Err(ClientError::Malformed("invalid content-length"));
            }
            let n: u64 = text
                .parse()
                .map_err(|_| ClientError::Malformed("invalid content-length"))?;
            if length.is_some_and(|prev| prev != n) {
                return Err(ClientError::Malformed("conflicting content-length"));
            }
            length = Some(n);
        }
    }
    let codings: Vec<String> = headers
        .get_all(http::header::TRANSFER_ENCODING)
        .iter()
        .flat_map(|v| v.as_bytes().split(|&b| b == b',').map(|c| c.to_vec()))
        .map(|c| String::from_utf8_lossy(&c).trim().to_ascii_lowercase())
        .filter(|c| !c.is_empty())
        .collect();
    if !codings.is_empty() {
        if length.is_some() {
            return Err(ClientError::Malformed(
                "both content-length and transfer-encoding",
            ));
        }
        if codings.len() != 1 || codings[0] != "chunked" {
            return Err(ClientError::Malformed("unsupported transfer-encoding"));
        }
        return Ok(Some(BodyFraming::Chunked));
    }
    Ok(length.map(BodyFraming::Length))
}

fn keep_alive(headers: &HeaderMap, version: u8) -> bool {
    let mut close = false;
    let mut keep = false;
    for v in headers.get_all(http::header::CONNECTION) {
        for token in v.as_bytes().split(|&b| b == b',') {
            let t = String::from_utf8_lossy(token).trim().to_ascii_lowercase();
            close |= t == "close";
            keep |= t == "keep-alive";
        }
    }
    !close && (version == 1 || keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn exchange(
        response: &[u8],
        head_request: bool,
    ) -> (
        Result<(ResponseHead, Option<u64>), ClientError>,
        Vec<u8>,
        bool,
    ) {
        let (client, mut server) = tokio::io::duplex(1 << 20);
        server.write_all(response).await.unwrap();
        drop(server);
        let mut c = UpstreamH1::new(client);
        let head = c.read_head(head_request).await;
        let mut body = Vec::new();
        if head.is_ok() {
            loop {
                match c.read_body_piece().await {
                    Ok(Some(p)) => body.extend_from_slice(&p),
                    Ok(None) => break,
                    Err(_) => {
                        body.extend_from_slice(b"<error>");
                        break;
                    }
                }
            }
        }
        let reusable = c.reusable();
        (head, body, reusable)
    }

    #[tokio::test]
    async fn length_chunked_and_close_delimited() {
        let (h, b, reuse) = exchange(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc",
            false,
        )
        .await;
        let (h, len) = h.unwrap();
        assert_eq!(
            (h.status, len, &b[..], reuse),
            (200, Some(3), &b"abc"[..], true)
        );
        let (h, b, reuse) = exchange(
            b"HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n1\r\nc\r\n0\r\n\r\n",
            false,
        )
        .await;
        assert_eq!(h.unwrap().1, None);
        assert_eq!((&b[..], reuse), (&b"abc"[..], true));
        let (_, b, reuse) = exchange(b"HTTP/1.0 200 OK\r\n\r\nuntil close", false).await;
        assert_eq!((&b[..], reuse), (&b"until close"[..], false));
        let (h, b, _) = exchange(b"HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n", true).await;
        assert_eq!((h.unwrap().1, b.len()), (Some(0), 0));
    }

    #[tokio::test]
    async fn malformed_and_truncated() {
        let (h, _, _) = exchange(b"", false).await;
        assert!(matches!(h, Err(ClientError::ClosedBeforeResponse)));
        let (h, _, _) = exchange(b"HTTP/1.1 200 OK\r\ncontent-le", false).await;
        assert!(matches!(h, Err(ClientError::Truncated)));
        let (h, _, _) = exchange(b"garbage\r\n\r\n", false).await;
        assert!(matches!(h, Err(ClientError::Malformed(_))));
        let (h, _, _) = exchange(
            b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n",
            false,
        )
        .await;
        assert!(matches!(h, Err(ClientError::Malformed(_))));
        let (_, b, reuse) =
            exchange(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nab", false).await;
        assert_eq!((&b[..], reuse), (&b"ab<error>"[..], false));
    }
}

//! A streaming HTTP/1.1 response reader that counts bytes and never keeps a body.
//!
//! It is fed whatever the transport read (any split, down to one byte at a time) and tells
//! when the response ends: after Content-Length bytes, after the last chunk and trailers of a
//! chunked body, or at the end of the stream for a body delimited by the connection close.
//! Only the head is copied (into a small reused buffer, bounded); body bytes are counted and
//! dropped, so any body size works with the same memory (Fortio's fast client reads into a
//! fixed buffer and mis-reads bodies larger than it).

use std::fmt;

/// Longest response head accepted; a peer cannot make us buffer more.
const MAX_HEAD: usize = 64 * 1024;
/// Most header lines parsed in one head.
const MAX_HEADERS: usize = 128;

/// What a response turned out to be once complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    pub status: u16,
    /// Bytes of the final response head (status line and headers, blank line included).
    pub header_bytes: u64,
    /// Every byte of the response: heads (1xx ones included), body and chunk framing.
    pub total_bytes: u64,
    /// Whether the connection may carry the next request.
    pub keep_alive: bool,
}

/// Progress after a [`ResponseReader::feed`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    NeedMore,
    /// The response is complete; `consumed` bytes of the last input belonged to it.
    Done {
        consumed: usize,
    },
}

/// A response that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseError(pub String);

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    /// Reading the hex size; `digits` so far.
    Size {
        digits: u8,
    },
    /// Skipping a chunk extension up to the end of the line.
    Extension,
    /// Saw '\r' after the size line, expecting '\n'.
    SizeLf,
    Data,
    /// After the data: expecting '\r' (or a bare '\n').
    DataCr,
    DataLf,
    /// At the start of a trailer line (or the final blank line).
    TrailerStart,
    /// Inside a trailer line.
    TrailerLine,
    /// Saw '\r' at the start of a trailer line, expecting '\n'.
    EndLf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Head,
    Length,
    Chunked(Chunk),
    UntilClose,
    Done,
}

/// Reads one response at a time; reuse it for every response of a connection.
#[derive(Debug)]
pub struct ResponseReader {
    head: Vec<u8>,
    state: State,
    /// Body bytes left (Content-Length) or bytes left in the current chunk.
    remaining: u64,
    status: u16,
    header_bytes: u64,
    total_bytes: u64,
    keep_alive: bool,
    /// The request was HEAD: a response has no body whatever its headers say.
    head_request: bool,
    /// We asked the server to close (or spoke HTTP/1.0 without keep-alive).
    close_requested: bool,
}

impl ResponseReader {
    pub fn new() -> ResponseReader {
        ResponseReader {
            head: Vec::with_capacity(1024),
            state: State::Done,
            remaining: 0,
            status: 0,
            header_bytes: 0,
            total_bytes: 0,
            keep_alive: false,
            head_request: false,
            close_requested: false,
        }
    }

    /// Prepares for the response to a new request.
    pub fn start(&mut self, head_request: bool, close_requested: bool) {
        self.head.clear();
        self.state = State::Head;
        self.remaining = 0;
        self.status = 0;
        self.header_bytes = 0;
        self.total_bytes = 0;
        self.keep_alive = false;
        self.head_request = head_request;
        self.close_requested = close_requested;
    }

    /// Bytes of the response seen so far (for error accounting).
    pub fn bytes_so_far(&self) -> u64 {
        self.total_bytes + self.head.len() as u64
    }

    /// The status code, once the head has been read.
    pub fn status(&self) -> Option<u16> {
        (self.status != 0).then_some(self.status)
    }

    pub fn summary(&self) -> Summary {
        Summary {
            status: self.status,
            header_bytes: self.header_bytes,
            total_bytes: self.total_bytes,
            keep_alive: self.keep_alive,
        }
    }

    /// Consumes bytes of the response from `data`.
    pub fn feed(&mut self, data: &[u8]) -> Result<Progress, ResponseError> {
        let mut pos = 0;
        while self.state != State::Done {
            if pos == data.len() {
                return Ok(Progress::NeedMore);
            }
            let rest = &data[pos..];
            // Head bytes are counted by feed_head once the head is complete.
            let counted_here = self.state != State::Head;
            let used = match self.state {
                State::Head => self.feed_head(rest)?,
                State::Length => {
                    let n = take(&mut self.remaining, rest.len());
                    if self.remaining == 0 {
                        self.state = State::Done;
                    }
                    n
                }
                State::UntilClose => rest.len(),
                State::Chunked(chunk) => self.feed_chunked(chunk, rest)?,
                State::Done => 0,
            };
            if counted_here {
                self.total_bytes += used as u64;
            }
            pos += used;
        }
        Ok(Progress::Done { consumed: pos })
    }

    /// The stream ended. Completes a body delimited by the close; anything else was cut short.
    pub fn eof(&mut self) -> Result<(), ResponseError> {
        match self.state {
            State::UntilClose => {
                self.state = State::Done;
                self.keep_alive = false;
                Ok(())
            }
            State::Done => Ok(()),
            State::Head => Err(ResponseError(if self.head.is_empty() {
                "connection closed before a response".into()
            } else {
                "connection closed inside the response head".into()
            })),
            State::Length => Err(ResponseError(format!(
                "connection closed with {} body bytes missing",
                self.remaining
            ))),
            State::Chunked(_) => Err(ResponseError(
                "connection closed inside a chunked body".into(),
            )),
        }
    }

    /// Accumulates head bytes until the blank line; returns how many of `data` were used
    /// (bytes after the head are left for the body). A complete head is added to the total
    /// here.
    fn feed_head(&mut self, data: &[u8]) -> Result<usize, ResponseError> {
        let before = self.head.len();
        let room = MAX_HEAD - before;
        let take_n = data.len().min(room);
        self.head.extend_from_slice(&data[..take_n]);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let head_len = match response.parse(&self.head) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => {
                if self.head.len() >= MAX_HEAD {
                    return Err(ResponseError(format!(
                        "response head larger than {MAX_HEAD} bytes"
                    )));
                }
                return Ok(take_n);
            }
            Err(e) => return Err(ResponseError(format!("invalid response head: {e}"))),
        };
        let status = response.code.unwrap_or(0);
        let http10 = response.version == Some(0);
        let framing = Framing::from_headers(response.headers)?;
        let used = head_len - before;
        self.total_bytes += head_len as u64;
        self.head.clear();
        if (100..200).contains(&status) {
            if status == 101 {
                return Err(ResponseError(
                    "101 Switching Protocols is not supported".into(),
                ));
            }
            // An interim response: the real one follows.
            return Ok(used);
        }
        self.status = status;
        self.header_bytes = head_len as u64;
        self.keep_alive = !self.close_requested
            && if http10 {
                framing.keep_alive_token
            } else {
                !framing.close_token
            };
        let no_body = self.head_request || status == 204 || status == 304;
        self.state = if no_body {
            State::Done
        } else if framing.chunked {
            State::Chunked(Chunk::Size { digits: 0 })
        } else if let Some(len) = framing.content_length {
            self.remaining = len;
            if len == 0 {
                State::Done
            } else {
                State::Length
            }
        } else {
            self.keep_alive = false;
            State::UntilClose
        };
        Ok(used)
    }

    /// One step of the chunked decoder; returns the bytes used.
    fn feed_chunked(&mut self, chunk: Chunk, data: &[u8]) -> Result<usize, ResponseError> {
        if chunk == Chunk::Data {
            let n = take(&mut self.remaining, data.len());
            if self.remaining == 0 {
                self.state = State::Chunked(Chunk::DataCr);
            }
            return Ok(n);
        }
        let b = data[0];
        let next = match chunk {
            Chunk::Size { digits } => match b {
                b'0'..=b'9' | b'a'..=b'f' | b'A'..=b'F' => {
                    if digits >= 15 {
                        return Err(ResponseError("chunk size too large".into()));
                    }
                    let v = u64::from(char::from(b).to_digit(16).unwrap_or(0));
                    self.remaining = self.remaining * 16 + v;
                    Chunk::Size { digits: digits + 1 }
                }
                _ if digits == 0 => {
                    return Err(ResponseError("invalid chunk size line".into()));
                }
                b';' | b' ' | b'\t' => Chunk::Extension,
                b'\r' => Chunk::SizeLf,
                b'\n' => self.after_size_line(),
                _ => return Err(ResponseError("invalid chunk size line".into())),
            },
            Chunk::Extension => match b {
                b'\r' => Chunk::SizeLf,
                b'\n' => self.after_size_line(),
                _ => Chunk::Extension,
            },
            Chunk::SizeLf => {
                if b != b'\n' {
                    return Err(ResponseError("invalid chunk size line ending".into()));
                }
                self.after_size_line()
            }
            Chunk::DataCr => match b {
                b'\r' => Chunk::DataLf,
                b'\n' => Chunk::Size { digits: 0 },
                _ => return Err(ResponseError("chunk data longer than its size".into())),
            },
            Chunk::DataLf => {
                if b != b'\n' {
                    return Err(ResponseError("chunk data longer than its size".into()));
                }
                Chunk::Size { digits: 0 }
            }
            Chunk::TrailerStart => match b {
                b'\r' => Chunk::EndLf,
                b'\n' => {
                    self.state = State::Done;
                    return Ok(1);
                }
                _ => Chunk::TrailerLine,
            },
            Chunk::TrailerLine => match b {
                b'\n' => Chunk::TrailerStart,
                _ => Chunk::TrailerLine,
            },
            Chunk::EndLf => {
                if b != b'\n' {
                    return Err(ResponseError("invalid end of chunked body".into()));
                }
                self.state = State::Done;
                return Ok(1);
            }
            Chunk::Data => Chunk::Data,
        };
        self.state = State::Chunked(next);
        Ok(1)
    }

    fn after_size_line(&mut self) -> Chunk {
        if self.remaining == 0 {
            Chunk::TrailerStart
        } else {
            Chunk::Data
        }
    }
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader::new()
    }
}

/// Takes up to `available` from `remaining`; returns how many were taken.
fn take(remaining: &mut u64, available: usize) -> usize {
    let n = (*remaining).min(available as u64);
    *remaining -= n;
    // n <= available, so it fits.
    usize::try_from(n).unwrap_or(available)
}

/// How the body is delimited and whether the connection stays open, from the headers.
struct Framing {
    chunked: bool,
    content_length: Option<u64>,
    close_token: bool,
    keep_alive_token: bool,
}

impl Framing {
    fn from_headers(headers: &[httparse::Header<'_>]) -> Result<Framing, ResponseError> {
        let mut f = Framing {
            chunked: false,
            content_length: None,
            close_token: false,
            keep_alive_token: false,
        };
        let mut transfer_encoding = false;
        for h in headers {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .map(str::trim)
                    .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|v| v.parse::<u64>().ok())
                    .ok_or_else(|| ResponseError("invalid Content-Length".into()))?;
                if f.content_length.is_some_and(|prev| prev != v) {
                    return Err(ResponseError("conflicting Content-Length headers".into()));
                }
                f.content_length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                transfer_encoding = true;
                // Chunked must be the last coding for the body to be chunk-delimited.
                f.chunked = tokens(h.value)
                    .last()
                    .is_some_and(|t| t.eq_ignore_ascii_case("chunked"));
            } else if h.name.eq_ignore_ascii_case("connection") {
                for t in tokens(h.value) {
                    f.close_token |= t.eq_ignore_ascii_case("close");
                    f.keep_alive_token |= t.eq_ignore_ascii_case("keep-alive");
                }
            }
        }
        if transfer_encoding {
            // RFC 9112 6.3: Transfer-Encoding overrides Content-Length; a non-chunked coding
            // means the body runs to the close.
            f.content_length = None;
            if !f.chunked {
                f.close_token = true;
                f.keep_alive_token = false;
            }
        }
        Ok(f)
    }
}

fn tokens(value: &[u8]) -> impl Iterator<Item = &str> {
    std::str::from_utf8(value)
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `wire` in pieces of `step` bytes; returns the summary and the bytes left over.
    fn read(wire: &[u8], step: usize, eof: bool) -> Result<(Summary, usize), ResponseError> {
        let mut r = ResponseReader::new();
        r.start(false, false);
        let mut pos = 0;
        while pos < wire.len() {
            let end = (pos + step).min(wire.len());
            if let Progress::Done { consumed } = r.feed(&wire[pos..end])? {
                return Ok((r.summary(), wire.len() - (pos + consumed)));
            }
            pos = end;
        }
        if eof {
            r.eof()?;
            return Ok((r.summary(), 0));
        }
        Err(ResponseError("incomplete".into()))
    }

    fn every_split(wire: &[u8], eof: bool) -> Summary {
        let first = read(wire, wire.len(), eof).unwrap();
        for step in 1..wire.len() {
            assert_eq!(read(wire, step, eof).unwrap(), first, "step {step}");
        }
        first.0
    }

    #[test]
    fn content_length_body() {
        let head = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\nServer: x\r\n\r\n";
        let wire = format!("{head}0123456789");
        let s = every_split(wire.as_bytes(), false);
        assert_eq!(s.status, 200);
        assert_eq!(s.header_bytes, head.len() as u64);
        assert_eq!(s.total_bytes, wire.len() as u64);
        assert!(s.keep_alive);
    }

    #[test]
    fn bytes_after_the_response_are_left_over() {
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA";
        let (s, left) = read(wire, wire.len(), false).unwrap();
        assert_eq!(left, 5);
        assert_eq!(s.total_bytes, wire.len() as u64 - 5);
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
        let body = "5;name=v\r\nhello\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n";
        let wire = format!("{head}{body}");
        let s = every_split(wire.as_bytes(), false);
        assert_eq!(s.status, 200);
        assert_eq!(s.header_bytes, head.len() as u64);
        assert_eq!(s.total_bytes, wire.len() as u64);
        assert!(s.keep_alive);
        // Bare LF line endings are tolerated.
        let wire = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\n0\n\n";
        assert_eq!(
            every_split(wire.as_bytes(), false).total_bytes,
            wire.len() as u64
        );
    }

    #[test]
    fn chunked_overrides_content_length() {
        let wire = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n";
        let s = every_split(wire.as_bytes(), false);
        assert_eq!(s.total_bytes, wire.len() as u64);
    }

    #[test]
    fn body_until_close() {
        let head = "HTTP/1.0 200 OK\r\nServer: x\r\n\r\n";
        let wire = format!("{head}{}", "z".repeat(1000));
        let s = every_split(wire.as_bytes(), true);
        assert_eq!(s.total_bytes, wire.len() as u64);
        assert!(!s.keep_alive);
    }

    #[test]
    fn keep_alive_rules() {
        let s = every_split(
            b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
            false,
        );
        assert!(!s.keep_alive);
        let s = every_split(b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false);
        assert!(!s.keep_alive);
        let s = every_split(
            b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n",
            false,
        );
        assert!(s.keep_alive);
        // We asked for close: never reuse.
        let mut r = ResponseReader::new();
        r.start(false, true);
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        assert_eq!(
            r.feed(wire),
            Ok(Progress::Done {
                consumed: wire.len()
            })
        );
        assert!(!r.summary().keep_alive);
    }

    #[test]
    fn interim_responses_are_skipped_but_counted() {
        let interim = "HTTP/1.1 100 Continue\r\n\r\n";
        let head = "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\n";
        let wire = format!("{interim}{head}nah");
        let s = every_split(wire.as_bytes(), false);
        assert_eq!(s.status, 404);
        assert_eq!(s.header_bytes, head.len() as u64);
        assert_eq!(s.total_bytes, wire.len() as u64);
    }

    #[test]
    fn responses_without_body() {
        for wire in [
            "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n",
            "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n",
        ] {
            let s = every_split(wire.as_bytes(), false);
            assert_eq!(s.total_bytes, wire.len() as u64);
            assert!(s.keep_alive);
        }
        let mut r = ResponseReader::new();
        r.start(true, false);
        let wire = b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n";
        assert_eq!(
            r.feed(wire),
            Ok(Progress::Done {
                consumed: wire.len()
            })
        );
    }

    #[test]
    fn truncated_and_invalid_responses() {
        let mut r = ResponseReader::new();
        r.start(false, false);
        assert!(r.eof().is_err());
        for (wire, eof) in [
            (
                &b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"[..],
                true,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
                true,
            ),
            (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc",
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffff\r\n",
                false,
            ),
            (b"SSH-2.0-OpenSSH\r\n\r\n", false),
            (b"HTTP/1.1 101 Switching Protocols\r\n\r\n", false),
        ] {
            assert!(
                read(wire, wire.len(), eof).is_err(),
                "{:?}",
                String::from_utf8_lossy(wire)
            );
        }
    }

    #[test]
    fn head_size_is_bounded() {
        let mut r = ResponseReader::new();
        r.start(false, false);
        let mut wire = b"HTTP/1.1 200 OK\r\n".to_vec();
        let line = b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        while wire.len() <= MAX_HEAD {
            wire.extend_from_slice(line);
        }
        let mut result = Ok(Progress::NeedMore);
        for piece in wire.chunks(1000) {
            result = r.feed(piece);
            if result.is_err() {
                break;
            }
        }
        assert!(result.is_err());
    }
}

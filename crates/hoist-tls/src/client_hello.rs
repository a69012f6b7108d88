//! Envoy's tls_inspector: what the ClientHello asks for (SNI, ALPN, versions), read before any
//! filter chain is chosen.
//!
//! [`parse`] is a pure function over the bytes received so far; [`read_client_hello`] feeds it
//! from the socket in whole TLS records and never reads past the last record of the hello, so
//! the handshake (and later the kernel) finds the stream exactly where TLS expects it.

use std::borrow::Cow;
use std::io;

use tokio::net::TcpStream;

/// Largest ClientHello accepted (the handshake message, without record headers). Real hellos
/// are under 2 KiB; post-quantum key shares bring them near 2.5 KiB.
pub const MAX_CLIENT_HELLO: usize = 64 * 1024;

/// Bound on the wire bytes of a fragmented hello: the message plus generous record overhead.
const MAX_WIRE: usize = 2 * MAX_CLIENT_HELLO;

const RECORD_HEADER: usize = 5;
const MAX_RECORD_PAYLOAD: usize = 16384;
const CONTENT_HANDSHAKE: u8 = 22;
const HANDSHAKE_CLIENT_HELLO: u8 = 1;

const EXT_SERVER_NAME: u16 = 0;
const EXT_ALPN: u16 = 16;
const EXT_SUPPORTED_VERSIONS: u16 = 43;

/// What the bytes received so far are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inspect {
    /// A TLS record is started but the ClientHello is not complete.
    NeedMore,
    /// The first bytes are not a TLS handshake record (plain text, or SSLv2).
    NotTls,
    /// TLS framing, but not a valid ClientHello (or one over [`MAX_CLIENT_HELLO`]).
    Malformed,
    Hello(ClientHelloInfo),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHelloInfo {
    /// The host_name of the server_name extension, lower-cased.
    pub sni: Option<String>,
    /// ALPN protocols offered, in the client's order.
    pub alpn: Vec<Vec<u8>>,
    /// Versions offered (wire values, 0x0304 = TLS 1.3): supported_versions without GREASE
    /// values, or the legacy version field when that extension is absent.
    pub versions: Vec<u16>,
}

/// Parses the start of a connection. Never panics, whatever the bytes.
pub fn parse(buf: &[u8]) -> Inspect {
    match buf {
        [] => return Inspect::NeedMore,
        [first, ..] if *first != CONTENT_HANDSHAKE => return Inspect::NotTls,
        [_, major, ..] if *major != 3 => return Inspect::NotTls,
        _ => {}
    }
    if buf.len() > MAX_WIRE {
        return Inspect::Malformed;
    }
    // The handshake message, joined from as many records as it spans.
    let mut joined: Cow<'_, [u8]> = Cow::Borrowed(&[]);
    let mut pos = 0;
    loop {
        let rest = &buf[pos..];
        if rest.len() < RECORD_HEADER {
            // A later record must also be a handshake record.
            if pos > 0
                && (rest.first().is_some_and(|t| *t != CONTENT_HANDSHAKE)
                    || rest.get(1).is_some_and(|m| *m != 3))
            {
                return Inspect::Malformed;
            }
            return Inspect::NeedMore;
        }
        if rest[0] != CONTENT_HANDSHAKE || rest[1] != 3 {
            return Inspect::Malformed;
        }
        let len = usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if len == 0 || len > MAX_RECORD_PAYLOAD {
            return Inspect::Malformed;
        }
        let Some(payload) = rest.get(RECORD_HEADER..RECORD_HEADER + len) else {
            return Inspect::NeedMore;
        };
        pos += RECORD_HEADER + len;
        if joined.is_empty() {
            joined = Cow::Borrowed(payload);
        } else {
            joined.to_mut().extend_from_slice(payload);
        }
        if joined.len() < 4 {
            continue;
        }
        if joined[0] != HANDSHAKE_CLIENT_HELLO {
            return Inspect::Malformed;
        }
        let msg_len =
            usize::from(joined[1]) << 16 | usize::from(joined[2]) << 8 | usize::from(joined[3]);
        if msg_len > MAX_CLIENT_HELLO {
            return Inspect::Malformed;
        }
        if let Some(body) = joined.get(4..4 + msg_len) {
            return match parse_body(body) {
                Some(info) => Inspect::Hello(info),
                None => Inspect::Malformed,
            };
        }
    }
}

/// How many bytes to read next so that a read never crosses a record boundary: the rest of the
/// current record header or body, or a new header when `buf` ends on a boundary.
pub fn next_read_len(buf: &[u8]) -> usize {
    let mut pos = 0;
    loop {
        let rest = &buf[pos.min(buf.len())..];
        if rest.len() < RECORD_HEADER {
            return RECORD_HEADER - rest.len();
        }
        let total = RECORD_HEADER + usize::from(u16::from_be_bytes([rest[3], rest[4]]));
        if rest.len() < total {
            return total - rest.len();
        }
        pos += total;
    }
}

/// Reads from `tcp` into `buf` until [`parse`] can decide, in whole records: the 5-byte header,
/// then exactly its body. On `NotTls` the bytes read so far (at most five) stay in `buf` for a
/// plain-text filter chain. Returns `UnexpectedEof` if the peer closes first. Callers bound
/// the time it may take.
pub async fn read_client_hello(tcp: &TcpStream, buf: &mut Vec<u8>) -> io::Result<Inspect> {
    loop {
        match parse(buf) {
            Inspect::NeedMore => {}
            decided => return Ok(decided),
        }
        let want = next_read_len(buf);
        tcp.readable().await?;
        // Read into a stack chunk, not into `buf`: if this future is dropped at the await
        // above, `buf` holds only bytes that were received.
        let mut chunk = [0u8; 4096];
        let limit = want.min(chunk.len());
        match tcp.try_read(&mut chunk[..limit]) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed before the ClientHello was complete",
                ))
            }
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(e),
        }
    }
}

/// A bounds-checked reader; every accessor returns None past the end.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn vec8(&mut self) -> Option<Reader<'a>> {
        let n = usize::from(self.u8()?);
        self.take(n).map(Reader)
    }

    fn vec16(&mut self) -> Option<Reader<'a>> {
        let n = usize::from(self.u16()?);
        self.take(n).map(Reader)
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

fn parse_body(body: &[u8]) -> Option<ClientHelloInfo> {
    let mut r = Reader(body);
    let legacy_version = r.u16()?;
    r.take(32)?; // random
    let session_id = r.vec8()?;
    if session_id.0.len() > 32 {
        return None;
    }
    let suites = r.vec16()?;
    if suites.0.is_empty() || suites.0.len() % 2 != 0 {
        return None;
    }
    if r.vec8()?.is_empty() {
        return None; // compression methods: at least "null"
    }
    let mut info = ClientHelloInfo::default();
    let mut supported_versions = None;
    if !r.is_empty() {
        let mut exts = r.vec16()?;
        if !r.is_empty() {
            return None;
        }
        let mut seen = Vec::new();
        while !exts.is_empty() {
            let typ = exts.u16()?;
            let mut data = exts.vec16()?;
            seen.push(typ);
            match typ {
                EXT_SERVER_NAME => info.sni = Some(parse_sni(&mut data)?),
                EXT_ALPN => info.alpn = parse_alpn(&mut data)?,
                EXT_SUPPORTED_VERSIONS => supported_versions = Some(parse_versions(&mut data)?),
                _ => {}
            }
        }
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return None; // RFC 8446 §4.2: no extension type twice
        }
    }
    info.versions = supported_versions.unwrap_or_else(|| vec![legacy_version]);
    Some(info)
}

fn parse_sni(data: &mut Reader<'_>) -> Option<String> {
    let mut list = data.vec16()?;
    if !data.is_empty() || list.is_empty() {
        return None;
    }
    let mut host = None;
    while !list.is_empty() {
        let name_type = list.u8()?;
        let name = list.vec16()?.0;
        if name_type == 0 {
            // RFC 6066 §3: one name per type; names are ASCII host names.
            if host.is_some() || name.is_empty() || !name.iter().all(|b| (0x21..0x7f).contains(b)) {
                return None;
            }
            host = Some(String::from_utf8_lossy(name).to_ascii_lowercase());
        }
    }
    host
}

fn parse_alpn(data: &mut Reader<'_>) -> Option<Vec<Vec<u8>>> {
    let mut list = data.vec16()?;
    if !data.is_empty() || list.is_empty() {
        return None;
    }
    let mut protocols = Vec::new();
    while !list.is_empty() {
        let p = list.vec8()?.0;
        if p.is_empty() {
            return None;
        }
        protocols.push(p.to_vec());
    }
    Some(protocols)
}

fn parse_versions(data: &mut Reader<'_>) -> Option<Vec<u16>> {
    let mut list = data.vec8()?;
    if !data.is_empty() || list.is_empty() || list.0.len() % 2 != 0 {
        return None;
    }
    let mut versions = Vec::new();
    while !list.is_empty() {
        let v = list.u16()?;
        if !is_grease(v) {
            versions.push(v);
        }
    }
    Some(versions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_decide_tls_or_not() {
        assert_eq!(parse(b""), Inspect::NeedMore);
        assert_eq!(parse(b"GET / HTTP/1.1\r\n"), Inspect::NotTls);
        assert_eq!(parse(b"\x16"), Inspect::NeedMore);
        assert_eq!(parse(b"\x16\x02"), Inspect::NotTls);
        assert_eq!(parse(b"\x80\x2e\x01"), Inspect::NotTls); // SSLv2 hello
        assert_eq!(parse(b"\x16\x03\x01\x00\x00"), Inspect::Malformed);
        assert_eq!(
            parse(b"\x16\x03\x01\x00\x04\x02\x00\x00\x00"),
            Inspect::Malformed
        );
        assert_eq!(
            parse(b"\x16\x03\x01\x00\x04\x01\x01\x00\x01"),
            Inspect::Malformed
        ); // > 64 KiB
        assert_eq!(
            parse(b"\x16\x03\x01\x00\x04\x01\x01\x00\x00"),
            Inspect::NeedMore
        ); // = 64 KiB
        assert_eq!(
            parse(b"\x16\x03\x01\x00\x04\x01\x00\x00\x00"),
            Inspect::Malformed
        ); // empty body
    }

    #[test]
    fn read_lengths_follow_records() {
        assert_eq!(next_read_len(b""), 5);
        assert_eq!(next_read_len(b"\x16\x03"), 3);
        assert_eq!(next_read_len(b"\x16\x03\x01\x00\x10"), 16);
        assert_eq!(next_read_len(b"\x16\x03\x01\x00\x02ab"), 5);
        assert_eq!(next_read_len(b"\x16\x03\x01\x00\x02ab\x16"), 4);
    }

    #[test]
    fn grease() {
        assert!(is_grease(0x0a0a));
        assert!(is_grease(0xfafa));
        assert!(!is_grease(0x0304));
        assert!(!is_grease(0x0a1a));
    }
}

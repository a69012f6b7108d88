//! Response heads on the wire. Header names are written as stored (lower-case, as Envoy writes
//! them); framing and connection management are the codec's, so the caller's copies of those
//! headers are replaced, never duplicated.

use http::header::{self, HeaderMap, HeaderName};
use http::StatusCode;

/// The `content-length` the head carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LengthHeader {
    /// None at all (1xx, 204, 304).
    Omit,
    /// This value, computed from the body.
    Value(u64),
    /// The caller's own (a HEAD response whose body was not fetched).
    FromCaller,
    /// A streamed body of unknown length to an HTTP/1.1 client: `transfer-encoding: chunked`.
    Chunked,
    /// A streamed body of unknown length to an HTTP/1.0 client: ends with the connection.
    UntilClose,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConnectionHeader {
    None,
    Close,
    KeepAlive,
}

/// Appends `HTTP/1.1 <code> <reason>`, the headers and the blank line to `out`.
pub(crate) fn encode_head(
    out: &mut Vec<u8>,
    status: u16,
    headers: &HeaderMap,
    length: LengthHeader,
    connection: ConnectionHeader,
    default_content_type: Option<&'static str>,
) {
    out.extend_from_slice(b"HTTP/1.1 ");
    push_u64(out, u64::from(status));
    out.push(b' ');
    out.extend_from_slice(reason(status).as_bytes());
    out.extend_from_slice(b"\r\n");
    for (name, value) in headers {
        if is_codec_owned(name, length) {
            continue;
        }
        push_header(out, name.as_str().as_bytes(), value.as_bytes());
    }
    if let Some(ct) = default_content_type {
        if !headers.contains_key(header::CONTENT_TYPE) {
            push_header(out, b"content-type", ct.as_bytes());
        }
    }
    match length {
        LengthHeader::Value(n) => {
            out.extend_from_slice(b"content-length: ");
            push_u64(out, n);
            out.extend_from_slice(b"\r\n");
        }
        LengthHeader::Chunked => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        LengthHeader::Omit | LengthHeader::FromCaller | LengthHeader::UntilClose => {}
    }
    match connection {
        ConnectionHeader::None => {}
        ConnectionHeader::Close => out.extend_from_slice(b"connection: close\r\n"),
        ConnectionHeader::KeepAlive => out.extend_from_slice(b"connection: keep-alive\r\n"),
    }
    out.extend_from_slice(b"\r\n");
}

fn is_codec_owned(name: &HeaderName, length: LengthHeader) -> bool {
    (*name == header::CONTENT_LENGTH && length != LengthHeader::FromCaller)
        || *name == header::TRANSFER_ENCODING
        || *name == header::CONNECTION
        || name.as_str() == "keep-alive"
}

fn push_header(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
    out.extend_from_slice(name);
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// Decimal without going through `fmt`, which costs more than the rest of a small head.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The standard reason phrase; "Unknown" for codes without one, as Envoy writes.
pub(crate) fn reason(status: u16) -> &'static str {
    StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("Unknown")
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn encode(
        status: u16,
        headers: &[(&'static str, &'static str)],
        length: LengthHeader,
        connection: ConnectionHeader,
    ) -> String {
        let mut map = HeaderMap::new();
        for (n, v) in headers {
            map.append(*n, HeaderValue::from_static(v));
        }
        let mut out = Vec::new();
        encode_head(&mut out, status, &map, length, connection, None);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn status_line_and_headers() {
        assert_eq!(
            encode(
                200,
                &[("x-a", "1"), ("x-a", "2"), ("server", "hoist")],
                LengthHeader::Value(1234567890),
                ConnectionHeader::None
            ),
            "HTTP/1.1 200 OK\r\nx-a: 1\r\nx-a: 2\r\nserver: hoist\r\ncontent-length: 1234567890\r\n\r\n"
        );
        assert_eq!(
            encode(404, &[], LengthHeader::Value(0), ConnectionHeader::Close),
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
        );
        assert_eq!(
            encode(599, &[], LengthHeader::Omit, ConnectionHeader::KeepAlive),
            "HTTP/1.1 599 Unknown\r\nconnection: keep-alive\r\n\r\n"
        );
    }

    #[test]
    fn framing_headers_of_the_caller_are_replaced() {
        let owned = [
            ("content-length", "99"),
            ("transfer-encoding", "chunked"),
            ("connection", "upgrade"),
            ("keep-alive", "timeout=5"),
        ];
        assert_eq!(
            encode(200, &owned, LengthHeader::Value(5), ConnectionHeader::None),
            "HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"
        );
        assert_eq!(
            encode(304, &owned, LengthHeader::Omit, ConnectionHeader::None),
            "HTTP/1.1 304 Not Modified\r\n\r\n"
        );
        assert_eq!(
            encode(
                200,
                &owned[..1],
                LengthHeader::FromCaller,
                ConnectionHeader::None
            ),
            "HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n"
        );
    }

    #[test]
    fn default_content_type_only_when_absent() {
        let mut out = Vec::new();
        encode_head(
            &mut out,
            400,
            &HeaderMap::new(),
            LengthHeader::Value(11),
            ConnectionHeader::Close,
            Some("text/plain"),
        );
        assert_eq!(
            out,
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\ncontent-length: 11\r\nconnection: close\r\n\r\n"
        );
        let mut map = HeaderMap::new();
        map.insert("content-type", HeaderValue::from_static("application/json"));
        out.clear();
        encode_head(
            &mut out,
            400,
            &map,
            LengthHeader::Omit,
            ConnectionHeader::None,
            Some("text/plain"),
        );
        assert_eq!(
            out,
            b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\n\r\n"
        );
    }

    #[test]
    fn numbers() {
        for n in [0u64, 7, 10, 99, 100, 65535, u64::MAX] {
            let mut out = Vec::new();
            push_u64(&mut out, n);
            assert_eq!(out, n.to_string().as_bytes());
        }
    }

    #[test]
    fn reasons() {
        assert_eq!(reason(100), "Continue");
        assert_eq!(reason(204), "No Content");
        assert_eq!(reason(413), "Payload Too Large");
        assert_eq!(reason(431), "Request Header Fields Too Large");
        assert_eq!(reason(505), "HTTP Version Not Supported");
        assert_eq!(reason(299), "Unknown");
    }
}

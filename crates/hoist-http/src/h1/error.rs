//! Why a request could not be read. Each codec error maps to the status of the local reply and
//! to an Envoy-style response code detail (what %RESPONSE_CODE_DETAILS% prints), so the
//! connection manager can answer, count and log it without knowing the codec's internals.

use std::fmt;
use std::io;

#[derive(Debug)]
#[non_exhaustive]
pub enum H1Error {
    /// Request line and headers larger than `max_request_headers_kb` (or trailers larger than it).
    HeadersTooLarge,
    /// More headers (or trailers) than `max_headers_count`.
    TooManyHeaders,
    /// The request line or a header line does not parse (httparse's verdict).
    Malformed,
    /// A header name or value holds bytes a header may not hold.
    InvalidCharacters,
    /// The request target is none of origin-form, absolute-form or `OPTIONS *`.
    InvalidUrl,
    /// A well-formed `HTTP/x.y` other than HTTP/1.0 and HTTP/1.1.
    UnsupportedVersion,
    /// The HTTP/2 connection preface, sent to an HTTP/1.1-only listener. Answered with 400 like
    /// any other request this codec cannot read; h2 is chosen by ALPN, never by sniffing.
    Http2Preface,
    /// CONNECT: hoist is no forward proxy, so tunnels are not implemented.
    ConnectNotSupported,
    /// HTTP/1.1 without `Host`.
    MissingHost,
    /// Several `Host` headers, or one that is not a valid authority.
    InvalidHost,
    /// `Content-Length` that is not a number, or several that differ.
    InvalidContentLength,
    /// Both `Transfer-Encoding` and `Content-Length` (request smuggling).
    ContentLengthAndChunked,
    /// `Transfer-Encoding` on an HTTP/1.0 request, which cannot carry it.
    TransferEncodingNotAllowed,
    /// `Transfer-Encoding` that names no coding, or `chunked` twice.
    InvalidTransferEncoding,
    /// A transfer coding other than a single final `chunked` (gzip, deflate...).
    UnsupportedTransferEncoding,
    /// Broken chunked framing: size not hex, size overflow, missing CRLF, oversized extension.
    InvalidChunk,
    /// A body larger than the caller accepts. The codec itself sets no body limit; callers that
    /// buffer bodies use this to answer 413.
    PayloadTooLarge,
    /// The peer closed the connection in the middle of a request.
    UnexpectedEof,
    /// The transport failed.
    Io(io::Error),
}

impl H1Error {
    /// Status of the local reply.
    pub fn status(&self) -> u16 {
        match self {
            H1Error::HeadersTooLarge | H1Error::TooManyHeaders => 431,
            H1Error::UnsupportedVersion => 505,
            H1Error::UnsupportedTransferEncoding | H1Error::ConnectNotSupported => 501,
            H1Error::PayloadTooLarge => 413,
            _ => 400,
        }
    }

    /// Envoy-style response code details.
    pub fn details(&self) -> &'static str {
        match self {
            H1Error::HeadersTooLarge => "http1.headers_too_large",
            H1Error::TooManyHeaders => "http1.too_many_headers",
            H1Error::Malformed | H1Error::Http2Preface | H1Error::InvalidChunk => {
                "http1.codec_error"
            }
            H1Error::InvalidCharacters => "http1.invalid_characters",
            H1Error::InvalidUrl => "http1.invalid_url",
            H1Error::UnsupportedVersion => "http1.unsupported_version",
            H1Error::ConnectNotSupported => "http1.connect_not_supported",
            H1Error::MissingHost => "missing_host_header",
            H1Error::InvalidHost => "http.invalid_authority",
            H1Error::InvalidContentLength => "http1.invalid_content_length",
            H1Error::ContentLengthAndChunked => "http1.content_length_and_chunked_not_allowed",
            H1Error::TransferEncodingNotAllowed => "http1.transfer_encoding_not_allowed",
            H1Error::InvalidTransferEncoding | H1Error::UnsupportedTransferEncoding => {
                "http1.invalid_transfer_encoding"
            }
            H1Error::PayloadTooLarge => "request_payload_too_large",
            H1Error::UnexpectedEof | H1Error::Io(_) => "downstream_remote_disconnect",
        }
    }

    /// False when the peer is gone or the transport broke: no reply can reach anyone, and
    /// [`H1Conn::write_error`](super::H1Conn::write_error) writes nothing.
    pub fn wants_reply(&self) -> bool {
        !matches!(self, H1Error::UnexpectedEof | H1Error::Io(_))
    }
}

impl fmt::Display for H1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            H1Error::HeadersTooLarge => "request headers too large",
            H1Error::TooManyHeaders => "too many request headers",
            H1Error::Malformed => "malformed request",
            H1Error::InvalidCharacters => "invalid characters in a header",
            H1Error::InvalidUrl => "invalid request target",
            H1Error::UnsupportedVersion => "unsupported HTTP version",
            H1Error::Http2Preface => "HTTP/2 preface on an HTTP/1.1 connection",
            H1Error::ConnectNotSupported => "CONNECT is not supported",
            H1Error::MissingHost => "HTTP/1.1 request without Host",
            H1Error::InvalidHost => "invalid Host header",
            H1Error::InvalidContentLength => "invalid Content-Length",
            H1Error::ContentLengthAndChunked => "both Content-Length and Transfer-Encoding",
            H1Error::TransferEncodingNotAllowed => "Transfer-Encoding on HTTP/1.0",
            H1Error::InvalidTransferEncoding => "invalid Transfer-Encoding",
            H1Error::UnsupportedTransferEncoding => "unsupported transfer coding",
            H1Error::InvalidChunk => "invalid chunked encoding",
            H1Error::PayloadTooLarge => "request body too large",
            H1Error::UnexpectedEof => "connection closed in the middle of a request",
            H1Error::Io(e) => return write!(f, "i/o error: {e}"),
        };
        f.write_str(what)
    }
}

impl std::error::Error for H1Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            H1Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<io::Error> for H1Error {
    fn from(e: io::Error) -> Self {
        H1Error::Io(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_and_details() {
        assert_eq!(H1Error::HeadersTooLarge.status(), 431);
        assert_eq!(H1Error::TooManyHeaders.status(), 431);
        assert_eq!(H1Error::UnsupportedVersion.status(), 505);
        assert_eq!(H1Error::UnsupportedTransferEncoding.status(), 501);
        assert_eq!(H1Error::PayloadTooLarge.status(), 413);
        assert_eq!(H1Error::ContentLengthAndChunked.status(), 400);
        assert_eq!(H1Error::Http2Preface.status(), 400);
        assert_eq!(
            H1Error::HeadersTooLarge.details(),
            "http1.headers_too_large"
        );
        assert_eq!(H1Error::Malformed.details(), "http1.codec_error");
        assert!(H1Error::Malformed.wants_reply());
        assert!(!H1Error::UnexpectedEof.wants_reply());
        assert!(!H1Error::Io(io::ErrorKind::BrokenPipe.into()).wants_reply());
    }
}

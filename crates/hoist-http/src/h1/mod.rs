//! The HTTP/1.1 server codec, on httparse: what curl, wrk, h2load --h1 and Fortio talk to.
//!
//! [`H1Conn`] reads request heads and bodies from a [`Transport`](hoist_tls::transport::Transport)
//! and writes responses to it. The rules it enforces, so the connection manager need not:
//!
//! - Heads: request line + headers over `max_request_headers_kb`, or more than
//!   `max_headers_count` headers, is 431 (reading stops at the limit). Malformed syntax or
//!   header bytes is 400, and so is a request line of more than three words (a space inside
//!   the target); a well-formed version other than HTTP/1.0 and 1.1 is 505 (the HTTP/2
//!   preface is 400: h2 is chosen by ALPN); HTTP/1.1 without `Host` is 400; a target with a
//!   fragment (`#`) is 400, as in Envoy; absolute-form targets give the authority; `OPTIONS *`
//!   is allowed; CONNECT is 501.
//! - Smuggling: Transfer-Encoding with Content-Length is 400, differing or non-numeric
//!   Content-Length is 400, a coding other than one final `chunked` is 501, Transfer-Encoding
//!   on HTTP/1.0 is 400. Chunked bodies are decoded strictly.
//! - Keep-alive: HTTP/1.1 by default, HTTP/1.0 only with `Connection: keep-alive`;
//!   pipelined requests are served in order and no byte of the next one is lost.
//! - Expect: 100-continue: `100 Continue` goes out when the body is first read; a final
//!   response written before that closes the connection (unless the body is empty).
//! - Responses: `HTTP/1.1 <code> <reason>`, the caller's headers as stored, then the framing
//!   the codec owns: `content-length` from the body (none for 1xx/204/304; 1xx, 204 and 304
//!   never carry a body), for HEAD the length the body would have had and no body bytes,
//!   `connection: close` when closing and `connection: keep-alive` to an HTTP/1.0 client
//!   that keeps the connection. Date and server headers are the caller's.
//!
//! Timeouts are the caller's: it wraps calls in `tokio::time::timeout`.

mod chunked;
mod client;
mod conn;
mod decode;
mod encode;
mod error;
mod framing;
mod parse;
mod target;

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod testing;

pub use client::{ClientError, RequestFraming, UpstreamH1};
pub use conn::H1Conn;
pub use error::H1Error;
pub use framing::{BodyFraming, RequestInfo};

/// Limits on request heads, from the connection manager's config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct H1Limits {
    /// `max_request_headers_kb`: request line plus headers, and separately the trailers.
    pub max_request_headers_kb: u32,
    /// `common_http_protocol_options.max_headers_count`.
    pub max_headers_count: u32,
}

impl Default for H1Limits {
    /// Envoy's defaults.
    fn default() -> Self {
        H1Limits {
            max_request_headers_kb: 60,
            max_headers_count: 100,
        }
    }
}

impl H1Limits {
    pub(crate) fn max_head_bytes(&self) -> usize {
        (self.max_request_headers_kb as usize).saturating_mul(1024)
    }
}

//! What the framing headers of a request mean: the body's length (RFC 9112 §6), whether the
//! connection persists (§9.3) and whether the client waits for `100 Continue`. This is where
//! request smuggling is refused: every ambiguity is an error, never a guess.

use crate::Version;

use super::H1Error;

/// How the request body is delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body (neither Content-Length nor Transfer-Encoding).
    None,
    Length(u64),
    Chunked,
}

/// The framing facts of the current request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestInfo {
    pub version: Version,
    pub framing: BodyFraming,
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    pub expect_continue: bool,
    /// The client lets the connection live after this request.
    pub keep_alive: bool,
}

impl Default for RequestInfo {
    fn default() -> Self {
        RequestInfo {
            version: Version::Http11,
            framing: BodyFraming::None,
            expect_continue: false,
            keep_alive: true,
        }
    }
}

/// Collects the framing headers as the head is parsed, then decides.
#[derive(Default)]
pub(crate) struct FramingBuilder {
    content_length: Option<u64>,
    te_present: bool,
    te_chunked: u32,
    te_other: bool,
    conn_close: bool,
    conn_keep_alive: bool,
    expect_continue: bool,
}

impl FramingBuilder {
    /// One `Content-Length` header; a list (`5, 5`) or repeated headers must all agree.
    pub(crate) fn content_length(&mut self, value: &[u8]) -> Result<(), H1Error> {
        for item in value.split(|&b| b == b',') {
            let n = parse_decimal(trim(item)).ok_or(H1Error::InvalidContentLength)?;
            match self.content_length {
                Some(prev) if prev != n => return Err(H1Error::InvalidContentLength),
                _ => self.content_length = Some(n),
            }
        }
        Ok(())
    }

    /// One `Transfer-Encoding` header; the codings of repeated headers form one list.
    pub(crate) fn transfer_encoding(&mut self, value: &[u8]) {
        self.te_present = true;
        // Empty list elements are legal and ignored (RFC 9110 §5.6.1).
        for item in value
            .split(|&b| b == b',')
            .map(trim)
            .filter(|i| !i.is_empty())
        {
            if item.eq_ignore_ascii_case(b"chunked") {
                self.te_chunked += 1;
            } else {
                self.te_other = true;
            }
        }
    }

    pub(crate) fn connection(&mut self, value: &[u8]) {
        for item in value.split(|&b| b == b',').map(trim) {
            if item.eq_ignore_ascii_case(b"close") {
                self.conn_close = true;
            } else if item.eq_ignore_ascii_case(b"keep-alive") {
                self.conn_keep_alive = true;
            }
        }
    }

    /// Other expectations are ignored, as RFC 9110 §10.1.1 allows (no 417).
    pub(crate) fn expect(&mut self, value: &[u8]) {
        if trim(value).eq_ignore_ascii_case(b"100-continue") {
            self.expect_continue = true;
        }
    }

    pub(crate) fn finish(self, version: Version) -> Result<RequestInfo, H1Error> {
        let framing = if self.te_present {
            if version == Version::Http10 {
                return Err(H1Error::TransferEncodingNotAllowed);
            }
            if self.content_length.is_some() {
                return Err(H1Error::ContentLengthAndChunked);
            }
            if self.te_other {
                return Err(H1Error::UnsupportedTransferEncoding);
            }
            if self.te_chunked != 1 {
                return Err(H1Error::InvalidTransferEncoding);
            }
            BodyFraming::Chunked
        } else {
            match self.content_length {
                Some(n) => BodyFraming::Length(n),
                None => BodyFraming::None,
            }
        };
        let keep_alive = match version {
            Version::Http10 => self.conn_keep_alive && !self.conn_close,
            _ => !self.conn_close,
        };
        Ok(RequestInfo {
            version,
            framing,
            expect_continue: self.expect_continue && version == Version::Http11,
            keep_alive,
        })
    }
}

fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// 1*DIGIT without sign or whitespace; None on overflow.
fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build(version: Version, headers: &[(&str, &str)]) -> Result<RequestInfo, H1Error> {
        let mut b = FramingBuilder::default();
        for (name, value) in headers {
            match *name {
                "content-length" => b.content_length(value.as_bytes())?,
                "transfer-encoding" => b.transfer_encoding(value.as_bytes()),
                "connection" => b.connection(value.as_bytes()),
                "expect" => b.expect(value.as_bytes()),
                _ => unreachable!(),
            }
        }
        b.finish(version)
    }

    fn framing(headers: &[(&str, &str)]) -> Result<BodyFraming, H1Error> {
        build(Version::Http11, headers).map(|i| i.framing)
    }

    #[test]
    fn content_length() {
        assert_eq!(framing(&[]).unwrap(), BodyFraming::None);
        assert_eq!(
            framing(&[("content-length", "0")]).unwrap(),
            BodyFraming::Length(0)
        );
        assert_eq!(
            framing(&[("content-length", " 42 ")]).unwrap(),
            BodyFraming::Length(42)
        );
        assert_eq!(
            framing(&[("content-length", "5, 5"), ("content-length", "5")]).unwrap(),
            BodyFraming::Length(5)
        );
        assert_eq!(
            framing(&[("content-length", "18446744073709551615")]).unwrap(),
            BodyFraming::Length(u64::MAX)
        );
        for bad in [
            "",
            "abc",
            "-1",
            "+1",
            "1 2",
            "0x10",
            "5,",
            "18446744073709551616",
            "1.0",
        ] {
            assert!(
                matches!(
                    framing(&[("content-length", bad)]),
                    Err(H1Error::InvalidContentLength)
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            framing(&[("content-length", "5"), ("content-length", "6")]),
            Err(H1Error::InvalidContentLength)
        ));
        assert!(matches!(
            framing(&[("content-length", "5, 6")]),
            Err(H1Error::InvalidContentLength)
        ));
    }

    #[test]
    fn transfer_encoding() {
        assert_eq!(
            framing(&[("transfer-encoding", "chunked")]).unwrap(),
            BodyFraming::Chunked
        );
        assert_eq!(
            framing(&[("transfer-encoding", "Chunked ")]).unwrap(),
            BodyFraming::Chunked
        );
        assert_eq!(
            framing(&[("transfer-encoding", ", chunked")]).unwrap(),
            BodyFraming::Chunked
        );
        for (value, status) in [
            ("gzip, chunked", 501),
            ("chunked, gzip", 501),
            ("identity", 501),
            ("gzip", 501),
            ("chunked, chunked", 400),
            ("", 400),
            (" , ", 400),
        ] {
            let err = framing(&[("transfer-encoding", value)]).unwrap_err();
            assert_eq!(err.status(), status, "{value:?}: {err}");
        }
        assert_eq!(
            framing(&[
                ("transfer-encoding", "gzip"),
                ("transfer-encoding", "chunked")
            ])
            .unwrap_err()
            .status(),
            501
        );
        assert!(matches!(
            framing(&[
                ("transfer-encoding", "chunked"),
                ("transfer-encoding", "chunked")
            ]),
            Err(H1Error::InvalidTransferEncoding)
        ));
    }

    #[test]
    fn smuggling_combinations() {
        assert!(matches!(
            framing(&[("transfer-encoding", "chunked"), ("content-length", "5")]),
            Err(H1Error::ContentLengthAndChunked)
        ));
        assert!(matches!(
            framing(&[
                ("content-length", "5"),
                ("transfer-encoding", "gzip, chunked")
            ]),
            Err(H1Error::ContentLengthAndChunked)
        ));
        assert!(matches!(
            build(Version::Http10, &[("transfer-encoding", "chunked")]),
            Err(H1Error::TransferEncodingNotAllowed)
        ));
    }

    #[test]
    fn keep_alive_and_expect() {
        assert!(build(Version::Http11, &[]).unwrap().keep_alive);
        assert!(
            !build(Version::Http11, &[("connection", "close")])
                .unwrap()
                .keep_alive
        );
        assert!(
            !build(Version::Http11, &[("connection", "Upgrade, CLOSE")])
                .unwrap()
                .keep_alive
        );
        assert!(!build(Version::Http10, &[]).unwrap().keep_alive);
        assert!(
            build(Version::Http10, &[("connection", "Keep-Alive")])
                .unwrap()
                .keep_alive
        );
        assert!(
            !build(Version::Http10, &[("connection", "keep-alive, close")])
                .unwrap()
                .keep_alive
        );
        assert!(
            build(Version::Http11, &[("expect", "100-Continue")])
                .unwrap()
                .expect_continue
        );
        assert!(
            !build(Version::Http11, &[("expect", "something")])
                .unwrap()
                .expect_continue
        );
        assert!(
            !build(Version::Http10, &[("expect", "100-continue")])
                .unwrap()
                .expect_continue
        );
    }
}

//! Where the current request body stands: bytes left of a Content-Length body, or the chunked
//! decoder. Works on the connection's buffer only; the connection reads more when told to.

use bytes::{Buf, BytesMut};

use super::chunked::{ChunkedDecoder, Decoded};
use super::framing::BodyFraming;
use super::{H1Error, H1Limits};

#[derive(Debug)]
pub(crate) enum BodyDecoder {
    Length(u64),
    Chunked(ChunkedDecoder),
    Done,
}

impl BodyDecoder {
    pub(crate) fn new(framing: BodyFraming, limits: &H1Limits) -> Self {
        match framing {
            BodyFraming::None | BodyFraming::Length(0) => BodyDecoder::Done,
            BodyFraming::Length(n) => BodyDecoder::Length(n),
            BodyFraming::Chunked => BodyDecoder::Chunked(ChunkedDecoder::new(
                limits.max_head_bytes(),
                limits.max_headers_count as usize,
            )),
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        match self {
            BodyDecoder::Done => true,
            BodyDecoder::Chunked(c) => c.is_done(),
            BodyDecoder::Length(_) => false,
        }
    }

    /// Bytes still to come of a Content-Length body.
    pub(crate) fn remaining_length(&self) -> Option<u64> {
        match self {
            BodyDecoder::Length(n) => Some(*n),
            _ => None,
        }
    }

    pub(crate) fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, H1Error> {
        match self {
            BodyDecoder::Done => Ok(Decoded::Done),
            BodyDecoder::Chunked(c) => c.decode(buf),
            BodyDecoder::Length(remaining) => {
                if buf.is_empty() {
                    return Ok(Decoded::NeedMore);
                }
                let n = usize::try_from(*remaining).map_or(buf.len(), |r| r.min(buf.len()));
                *remaining -= n as u64;
                let data = buf.split_to(n).freeze();
                if *remaining == 0 {
                    *self = BodyDecoder::Done;
                }
                Ok(Decoded::Data(data))
            }
        }
    }

    /// Drops buffered body bytes without handing them out: Some(bytes dropped), Some(0) at the
    /// end of the body, None when more must be read. Cheaper than [`decode`](Self::decode) for
    /// Content-Length bodies being discarded.
    pub(crate) fn skip_buffered(&mut self, buf: &mut BytesMut) -> Result<Option<u64>, H1Error> {
        match self {
            BodyDecoder::Length(remaining) if !buf.is_empty() => {
                let n = usize::try_from(*remaining).map_or(buf.len(), |r| r.min(buf.len()));
                *remaining -= n as u64;
                buf.advance(n);
                if *remaining == 0 {
                    *self = BodyDecoder::Done;
                }
                Ok(Some(n as u64))
            }
            _ => match self.decode(buf)? {
                Decoded::Data(d) => Ok(Some(d.len() as u64)),
                Decoded::NeedMore => Ok(None),
                Decoded::Done => Ok(Some(0)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_body_stops_at_its_end() {
        let limits = H1Limits::default();
        let mut d = BodyDecoder::new(BodyFraming::Length(5), &limits);
        let mut buf = BytesMut::from(&b"abc"[..]);
        assert_eq!(d.decode(&mut buf).unwrap(), Decoded::Data("abc".into()));
        assert_eq!(d.decode(&mut buf).unwrap(), Decoded::NeedMore);
        buf.extend_from_slice(b"deGET");
        assert_eq!(d.decode(&mut buf).unwrap(), Decoded::Data("de".into()));
        assert!(d.is_done());
        assert_eq!(d.decode(&mut buf).unwrap(), Decoded::Done);
        assert_eq!(&buf[..], b"GET");
    }

    #[test]
    fn no_body() {
        let limits = H1Limits::default();
        assert!(BodyDecoder::new(BodyFraming::None, &limits).is_done());
        assert!(BodyDecoder::new(BodyFraming::Length(0), &limits).is_done());
        assert!(!BodyDecoder::new(BodyFraming::Chunked, &limits).is_done());
    }

    #[test]
    fn skipping() {
        let limits = H1Limits::default();
        let mut d = BodyDecoder::new(BodyFraming::Length(4), &limits);
        let mut buf = BytesMut::from(&b"ab"[..]);
        assert_eq!(d.skip_buffered(&mut buf).unwrap(), Some(2));
        assert_eq!(d.skip_buffered(&mut buf).unwrap(), None);
        buf.extend_from_slice(b"cdX");
        assert_eq!(d.skip_buffered(&mut buf).unwrap(), Some(2));
        assert!(d.is_done());
        assert_eq!(&buf[..], b"X");

        let mut d = BodyDecoder::new(BodyFraming::Chunked, &limits);
        let mut buf = BytesMut::from(&b"3\r\nabc\r\n0\r\n\r\nX"[..]);
        assert_eq!(d.skip_buffered(&mut buf).unwrap(), Some(3));
        assert_eq!(d.skip_buffered(&mut buf).unwrap(), Some(0));
        assert!(d.is_done());
        assert_eq!(&buf[..], b"X");
    }
}

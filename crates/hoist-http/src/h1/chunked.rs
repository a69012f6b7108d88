//! Chunked transfer coding, decoding side (RFC 9112 §7.1). Strict: a size is 1*HEXDIG that fits
//! in u64, extensions are skipped but bounded, every line ends in CRLF, and trailers are parsed
//! as headers within the same limits as the request head, then dropped.
//!
//! The decoder works on whatever bytes are buffered and keeps its place between calls, so a
//! body split at any byte boundary decodes the same.

use bytes::{Buf, Bytes, BytesMut};

use super::parse::with_headers;
use super::H1Error;

/// Longest chunk-size line (size, extensions, CRLF) accepted. Extensions carry nothing hoist
/// uses; the bound keeps a peer from making us buffer them.
const MAX_SIZE_LINE: usize = 4096;

#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Decoded {
    Data(Bytes),
    /// More bytes must be read before anything can be decoded.
    NeedMore,
    /// The last chunk and the trailers are consumed.
    Done,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Size,
    Data(u64),
    DataEnd,
    Trailers,
    Done,
}

#[derive(Debug)]
pub(crate) struct ChunkedDecoder {
    state: State,
    max_trailer_bytes: usize,
    max_trailers: usize,
}

impl ChunkedDecoder {
    pub(crate) fn new(max_trailer_bytes: usize, max_trailers: usize) -> Self {
        ChunkedDecoder {
            state: State::Size,
            max_trailer_bytes,
            max_trailers,
        }
    }

    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Consumes framing from `buf` and returns the next piece of data, if any.
    pub(crate) fn decode(&mut self, buf: &mut BytesMut) -> Result<Decoded, H1Error> {
        loop {
            match self.state {
                State::Size => match size_line(buf)? {
                    None => return Ok(Decoded::NeedMore),
                    Some((line_len, 0)) => {
                        buf.advance(line_len);
                        self.state = State::Trailers;
                    }
                    Some((line_len, size)) => {
                        buf.advance(line_len);
                        self.state = State::Data(size);
                    }
                },
                State::Data(remaining) => {
                    if buf.is_empty() {
                        return Ok(Decoded::NeedMore);
                    }
                    let n = usize::try_from(remaining).map_or(buf.len(), |r| r.min(buf.len()));
                    let left = remaining - n as u64;
                    self.state = if left == 0 {
                        State::DataEnd
                    } else {
                        State::Data(left)
                    };
                    return Ok(Decoded::Data(buf.split_to(n).freeze()));
                }
                State::DataEnd => match buf.get(..2) {
                    Some(b"\r\n") => {
                        buf.advance(2);
                        self.state = State::Size;
                    }
                    Some(_) => return Err(H1Error::InvalidChunk),
                    None if buf.first().is_some_and(|&b| b != b'\r') => {
                        return Err(H1Error::InvalidChunk)
                    }
                    None => return Ok(Decoded::NeedMore),
                },
                State::Trailers => {
                    let parsed =
                        with_headers(self.max_trailers, |h| {
                            match httparse::parse_headers(buf, h) {
                                Ok(httparse::Status::Complete((n, _))) => {
                                    Ok(httparse::Status::Complete(n))
                                }
                                Ok(httparse::Status::Partial) => Ok(httparse::Status::Partial),
                                Err(e) => Err(e),
                            }
                        });
                    match parsed {
                        Ok(httparse::Status::Complete(n)) => {
                            if n > self.max_trailer_bytes {
                                return Err(H1Error::HeadersTooLarge);
                            }
                            buf.advance(n);
                            self.state = State::Done;
                        }
                        Ok(httparse::Status::Partial) => {
                            if buf.len() > self.max_trailer_bytes {
                                return Err(H1Error::HeadersTooLarge);
                            }
                            return Ok(Decoded::NeedMore);
                        }
                        Err(httparse::Error::TooManyHeaders) => {
                            return Err(H1Error::TooManyHeaders)
                        }
                        Err(_) => return Err(H1Error::InvalidChunk),
                    }
                }
                State::Done => return Ok(Decoded::Done),
            }
        }
    }
}

/// Parses `1*HEXDIG [ BWS ";" chunk-ext ] CRLF` at the start of `buf`: Some((line length,
/// size)) when the whole line is there, None when more bytes are needed.
fn size_line(buf: &[u8]) -> Result<Option<(usize, u64)>, H1Error> {
    let window = &buf[..buf.len().min(MAX_SIZE_LINE)];
    let Some(lf) = window.iter().position(|&b| b == b'\n') else {
        if buf.len() >= MAX_SIZE_LINE {
            return Err(H1Error::InvalidChunk);
        }
        // Fail early on a line that can never become valid.
        return validate_prefix(buf).map(|()| None);
    };
    let line = match window[..lf].split_last() {
        Some((b'\r', line)) => line,
        _ => return Err(H1Error::InvalidChunk),
    };
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(H1Error::InvalidChunk);
    }
    let mut size: u64 = 0;
    for &b in &line[..digits] {
        let d = hex_value(b);
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(d))
            .ok_or(H1Error::InvalidChunk)?;
    }
    valid_extensions(&line[digits..])?;
    Ok(Some((lf + 1, size)))
}

/// Checks an incomplete size line as far as it goes.
fn validate_prefix(buf: &[u8]) -> Result<(), H1Error> {
    let digits = buf.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    match buf.get(digits) {
        None => Ok(()),
        Some(_) if digits == 0 => Err(H1Error::InvalidChunk),
        Some(b'\r') if digits + 1 == buf.len() => Ok(()),
        Some(_) => {
            let rest = &buf[digits..];
            let rest = rest.strip_suffix(b"\r").unwrap_or(rest);
            // Blanks may still be followed by ";".
            if rest.iter().all(|&b| b == b' ' || b == b'\t') {
                return Ok(());
            }
            valid_extensions(rest)
        }
    }
}

/// `*( BWS ";" BWS ext-name [ BWS "=" BWS ext-value ] )`, checked loosely: optional blanks,
/// then `;`, then anything but control characters.
fn valid_extensions(ext: &[u8]) -> Result<(), H1Error> {
    let start = ext.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
    match ext.get(start) {
        None if start == 0 => Ok(()),
        Some(b';') => {
            if ext[start..]
                .iter()
                .all(|&b| b == b'\t' || (b >= 0x20 && b != 0x7f))
            {
                Ok(())
            } else {
                Err(H1Error::InvalidChunk)
            }
        }
        // Blanks must lead to an extension: "5 \r\n" is not a size line.
        _ => Err(H1Error::InvalidChunk),
    }
}

/// Value of a byte already known to be a hex digit.
fn hex_value(b: u8) -> u64 {
    match b {
        b'0'..=b'9' => u64::from(b - b'0'),
        b'a'..=b'f' => u64::from(b - b'a' + 10),
        b'A'..=b'F' => u64::from(b - b'A' + 10),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `input` in the given pieces; returns the body, and what is left in the buffer.
    fn decode_pieces(pieces: &[&[u8]]) -> Result<(Vec<u8>, Vec<u8>), H1Error> {
        let mut dec = ChunkedDecoder::new(1024, 10);
        let mut buf = BytesMut::new();
        let mut body = Vec::new();
        for (i, piece) in pieces.iter().enumerate() {
            buf.extend_from_slice(piece);
            loop {
                match dec.decode(&mut buf)? {
                    Decoded::Data(d) => body.extend_from_slice(&d),
                    Decoded::NeedMore => break,
                    Decoded::Done => {
                        let mut rest = buf.to_vec();
                        pieces[i + 1..]
                            .iter()
                            .for_each(|p| rest.extend_from_slice(p));
                        return Ok((body, rest));
                    }
                }
            }
        }
        Err(H1Error::UnexpectedEof)
    }

    fn decode(input: &[u8]) -> Result<(Vec<u8>, Vec<u8>), H1Error> {
        decode_pieces(&[input])
    }

    const BODY: &[u8] =
        b"5\r\nhello\r\n1;name=value\r\n \r\nA\r\n0123456789\r\n0\r\nx-trailer: 1\r\n\r\nNEXT";

    #[test]
    fn decodes_whole() {
        let (body, rest) = decode(BODY).unwrap();
        assert_eq!(body, b"hello 0123456789");
        assert_eq!(rest, b"NEXT");
    }

    #[test]
    fn decodes_split_at_every_boundary() {
        for i in 0..=BODY.len() {
            for j in i..=BODY.len() {
                let (body, rest) = decode_pieces(&[&BODY[..i], &BODY[i..j], &BODY[j..]])
                    .unwrap_or_else(|e| panic!("split {i}/{j}: {e}"));
                assert_eq!(body, b"hello 0123456789", "split {i}/{j}");
                assert_eq!(rest, b"NEXT", "split {i}/{j}");
            }
        }
        let bytes: Vec<&[u8]> = BODY.chunks(1).collect();
        assert_eq!(decode_pieces(&bytes).unwrap().0, b"hello 0123456789");
    }

    #[test]
    fn errors_detected_at_every_split() {
        // Each must fail however it arrives, never be accepted.
        let bad: &[&[u8]] = &[
            b"5\r\nhelloX\r\n0\r\n\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"5\r\nhello\n0\r\n\r\n",
            b"g\r\n",
            b"\r\n",
            b"5 \r\nhello\r\n0\r\n\r\n",
            b"-5\r\n",
            b"0x5\r\n",
            b"10000000000000000\r\n",
            b"5;a\x00b\r\nhello\r\n0\r\n\r\n",
            b"0\r\nbad trailer\r\n\r\n",
            b"0\r\n: empty-name\r\n\r\n",
        ];
        for input in bad {
            for i in 0..=input.len() {
                let r = decode_pieces(&[&input[..i], &input[i..]]);
                assert!(
                    matches!(r, Err(H1Error::InvalidChunk)),
                    "{:?} split at {i}: {r:?}",
                    String::from_utf8_lossy(input)
                );
            }
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(size_line(b"fFfF\r\n").unwrap(), Some((6, 0xffff)));
        assert_eq!(
            size_line(b"0000000000000000000001\r\n").unwrap(),
            Some((24, 1))
        );
        assert_eq!(
            size_line(b"ffffffffffffffff\r\n").unwrap(),
            Some((18, u64::MAX))
        );
        assert!(size_line(b"10000000000000000\r\n").is_err());
        assert_eq!(size_line(b"5 ; ext\r\n").unwrap(), Some((9, 5)));
        assert_eq!(size_line(b"5").unwrap(), None);
    }

    #[test]
    fn extension_line_is_bounded() {
        let mut long = b"5;".to_vec();
        long.resize(MAX_SIZE_LINE + 10, b'a');
        assert!(matches!(decode(&long), Err(H1Error::InvalidChunk)));
        let mut ok = b"1;".to_vec();
        ok.resize(MAX_SIZE_LINE - 2, b'a');
        ok.extend_from_slice(b"\r\nx\r\n0\r\n\r\n");
        assert_eq!(decode(&ok).unwrap().0, b"x");
    }

    #[test]
    fn trailers_are_bounded() {
        let mut many = b"0\r\n".to_vec();
        for i in 0..11 {
            many.extend_from_slice(format!("t{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        assert!(matches!(decode(&many), Err(H1Error::TooManyHeaders)));
        let mut big = b"0\r\nt: ".to_vec();
        big.resize(2000, b'v');
        big.extend_from_slice(b"\r\n\r\n");
        assert!(matches!(decode(&big), Err(H1Error::HeadersTooLarge)));
        // Unterminated trailers are cut off at the limit rather than buffered forever.
        let mut endless = b"0\r\nt: ".to_vec();
        endless.resize(2000, b'v');
        assert!(matches!(decode(&endless), Err(H1Error::HeadersTooLarge)));
    }

    #[test]
    fn large_chunk_comes_out_in_pieces() {
        let pieces: &[&[u8]] = &[b"10\r\n01234", b"56789abcdef\r\n0\r\n\r\n"];
        assert_eq!(decode_pieces(pieces).unwrap().0, b"0123456789abcdef");
    }
}

//! Request heads: httparse does the syntax; this module adds the limits, the meaning of the
//! request line and the framing headers, and builds a [`RequestHead`] without copying header
//! values (they are slices of the frozen head bytes).

use std::mem::MaybeUninit;

use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Method;

use super::framing::{FramingBuilder, RequestInfo};
use super::target::{parse_target, valid_host};
use super::{H1Error, H1Limits};
use crate::{RequestHead, Version};

/// Headers parsed into a stack array up to this count; larger limits use the heap.
const INLINE_HEADERS: usize = 100;

/// Where each header value lies in the head, kept between requests so parsing allocates
/// nothing but the request's own fields.
pub(crate) type Scratch = Vec<(HeaderName, usize, usize)>;

/// A complete head, and how many bytes of the buffer it took.
pub(crate) struct Parsed {
    pub head: RequestHead,
    pub info: RequestInfo,
    pub len: usize,
}

/// Runs `f` with room for `max` parsed headers, on the stack when it fits.
pub(crate) fn with_uninit_headers<'b, R>(
    max: usize,
    f: impl FnOnce(&mut [MaybeUninit<httparse::Header<'b>>]) -> R,
) -> R {
    if max <= INLINE_HEADERS {
        let mut inline = [MaybeUninit::<httparse::Header<'b>>::uninit(); INLINE_HEADERS];
        f(&mut inline[..max])
    } else {
        let mut heap = vec![MaybeUninit::<httparse::Header<'b>>::uninit(); max];
        f(&mut heap)
    }
}

/// Like [`with_uninit_headers`], for httparse's APIs that want initialised headers.
pub(crate) fn with_headers<'b, R>(
    max: usize,
    f: impl FnOnce(&mut [httparse::Header<'b>]) -> R,
) -> R {
    if max <= INLINE_HEADERS {
        let mut inline = [httparse::EMPTY_HEADER; INLINE_HEADERS];
        f(&mut inline[..max])
    } else {
        let mut heap = vec![httparse::EMPTY_HEADER; max];
        f(&mut heap)
    }
}

/// What is known before the head's bytes are split off the buffer.
struct Pending {
    method: Method,
    path: String,
    version: Version,
    authority: Option<String>,
    info: RequestInfo,
    len: usize,
}

/// Parses a request head at the start of `buf`. Ok(None): incomplete, read more. On success
/// the head's bytes are removed from `buf`; what follows (body, next request) stays.
pub(crate) fn parse_head(
    buf: &mut BytesMut,
    limits: &H1Limits,
    scratch: &mut Scratch,
) -> Result<Option<Parsed>, H1Error> {
    let max_bytes = limits.max_head_bytes();
    // httparse never sees more than the limit: a head that does not end within it is too
    // large, however many bytes the peer has sent, and the verdict is the same however the
    // bytes were split into reads.
    let window = &buf[..buf.len().min(max_bytes)];
    let over_limit = buf.len() > max_bytes;
    scratch.clear();
    let pending = with_uninit_headers(limits.max_headers_count as usize, |headers| {
        let mut req = httparse::Request::new(&mut []);
        match httparse::ParserConfig::default()
            .parse_request_with_uninit_headers(&mut req, window, headers)
        {
            Ok(httparse::Status::Complete(len)) => interpret(&req, window, len, scratch).map(Some),
            Ok(httparse::Status::Partial) if over_limit => Err(H1Error::HeadersTooLarge),
            Ok(httparse::Status::Partial) => Ok(None),
            Err(httparse::Error::TooManyHeaders) => Err(H1Error::TooManyHeaders),
            Err(httparse::Error::Version) => version_error(window, over_limit),
            Err(httparse::Error::HeaderName | httparse::Error::HeaderValue) => {
                Err(H1Error::InvalidCharacters)
            }
            Err(_) => Err(H1Error::Malformed),
        }
    })?;
    let Some(p) = pending else {
        return Ok(None);
    };
    let raw: Bytes = buf.split_to(p.len).freeze();
    let mut headers = HeaderMap::with_capacity(scratch.len());
    for (name, start, end) in scratch.drain(..) {
        let value = raw
            .get(start..end)
            .map(|_| raw.slice(start..end))
            .ok_or(H1Error::Malformed)?;
        let value =
            HeaderValue::from_maybe_shared(value).map_err(|_| H1Error::InvalidCharacters)?;
        headers.append(name, value);
    }
    Ok(Some(Parsed {
        head: RequestHead {
            method: p.method,
            path: p.path,
            version: p.version,
            authority: p.authority,
            headers,
        },
        info: p.info,
        len: p.len,
    }))
}

/// Gives the parsed request its meaning: method, target, version, Host and framing.
fn interpret(
    req: &httparse::Request<'_, '_>,
    buf: &[u8],
    len: usize,
    scratch: &mut Scratch,
) -> Result<Pending, H1Error> {
    let (Some(method), Some(target), Some(minor)) = (req.method, req.path, req.version) else {
        return Err(H1Error::Malformed);
    };
    let method = Method::from_bytes(method.as_bytes()).map_err(|_| H1Error::Malformed)?;
    let version = if minor == 0 {
        Version::Http10
    } else {
        Version::Http11
    };
    let target = parse_target(&method, target)?;

    let base = buf.as_ptr() as usize;
    let mut framing = FramingBuilder::default();
    let mut host: Option<&[u8]> = None;
    let mut hosts = 0;
    for h in req.headers.iter() {
        let name =
            HeaderName::from_bytes(h.name.as_bytes()).map_err(|_| H1Error::InvalidCharacters)?;
        if name == header::HOST {
            hosts += 1;
            host = Some(h.value);
        } else if name == header::CONTENT_LENGTH {
            framing.content_length(h.value)?;
        } else if name == header::TRANSFER_ENCODING {
            framing.transfer_encoding(h.value);
        } else if name == header::CONNECTION {
            framing.connection(h.value);
        } else if name == header::EXPECT {
            framing.expect(h.value);
        }
        // httparse hands out slices of `buf`; their offsets locate the values in the frozen
        // head. An empty value may point anywhere, so it gets an empty range.
        let start = (h.value.as_ptr() as usize).wrapping_sub(base);
        let (start, end) = if h.value.is_empty() || start > len {
            (0, 0)
        } else {
            (start, start + h.value.len())
        };
        scratch.push((name, start, end));
    }
    let info = framing.finish(version)?;

    if hosts > 1 {
        return Err(H1Error::InvalidHost);
    }
    let host_authority = match host {
        None if version == Version::Http11 => return Err(H1Error::MissingHost),
        None | Some(b"") => None,
        Some(h) if valid_host(h) => std::str::from_utf8(h).ok().map(str::to_owned),
        Some(_) => return Err(H1Error::InvalidHost),
    };
    Ok(Pending {
        method,
        path: target.path,
        version,
        // The absolute-form's authority wins over Host (RFC 9112 §3.2.2).
        authority: target.authority.or(host_authority),
        info,
        len,
    })
}

/// httparse reports any version but 1.0 and 1.1 the same way, and also a request line with a
/// space inside its target (it reads the third word as the version). A line of exactly three
/// words ending in a well-formed `HTTP/x.y` is answered 505; anything else, 400. Needs the
/// whole request line to tell.
fn version_error(buf: &[u8], over_limit: bool) -> Result<Option<Pending>, H1Error> {
    let start = buf
        .iter()
        .take_while(|&&b| b == b'\r' || b == b'\n')
        .count();
    let rest = &buf[start..];
    if rest.starts_with(b"PRI * HTTP/2.0") {
        return Err(H1Error::Http2Preface);
    }
    let Some(lf) = rest.iter().position(|&b| b == b'\n') else {
        if over_limit {
            return Err(H1Error::HeadersTooLarge);
        }
        return Ok(None);
    };
    let line = &rest[..lf];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let mut words = line.split(|&b| b == b' ');
    let version = match (words.next(), words.next(), words.next(), words.next()) {
        (Some(_), Some(_), Some(version), None) => version,
        _ => return Err(H1Error::Malformed),
    };
    match version {
        [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
            if major.is_ascii_digit() && minor.is_ascii_digit() =>
        {
            Err(H1Error::UnsupportedVersion)
        }
        _ => Err(H1Error::Malformed),
    }
}

#[cfg(test)]
#[path = "parse_tests.rs"]
mod tests;

//! Where tokens are found (Envoy's Extractor): `from_headers` (with a value prefix such as
//! `Bearer `), `from_params`, `from_cookies`; by default `Authorization: Bearer <token>` and
//! `?access_token=`. Each location remembers which issuers named it, so a token found there
//! is only accepted from those issuers.

use std::collections::BTreeMap;

use hoist_http::RequestHead;
use http::HeaderName;

use super::config::Provider;

/// The issuers that configured one location; an empty issuer allows any.
#[derive(Clone, Debug, Default)]
pub struct IssuerChecker {
    allow_all: bool,
    issuers: Vec<String>,
}

impl IssuerChecker {
    fn add(&mut self, issuer: &str) {
        if issuer.is_empty() {
            self.allow_all = true;
        } else if !self.issuers.iter().any(|i| i == issuer) {
            self.issuers.push(issuer.to_owned());
        }
    }

    pub fn allows(&self, issuer: &str) -> bool {
        self.allow_all || self.issuers.iter().any(|i| i == issuer)
    }
}

#[derive(Debug)]
struct HeaderLocation {
    name: HeaderName,
    prefix: String,
    issuers: IssuerChecker,
}

/// The token locations of one provider, or of all providers (allow_missing[_or_failed]).
#[derive(Debug, Default)]
pub struct Extractor {
    /// Ordered by name then prefix, as Envoy's std::map keyed by `name + prefix`.
    headers: Vec<HeaderLocation>,
    params: BTreeMap<String, IssuerChecker>,
    cookies: BTreeMap<String, IssuerChecker>,
    /// forward_payload_header and claim_to_headers names: removed from the request before
    /// verification, so a client cannot pose as a verified token.
    sanitize: Vec<HeaderName>,
}

/// A token found in a request.
pub struct Token<'e> {
    pub text: String,
    pub issuers: &'e IssuerChecker,
    /// The header it came from (removed after verification unless `forward`); None for
    /// parameters and cookies, which Envoy leaves in place.
    pub header: Option<&'e HeaderName>,
}

const BEARER: &str = "Bearer ";
const ACCESS_TOKEN: &str = "access_token";

impl Extractor {
    pub fn new<'p>(providers: impl IntoIterator<Item = &'p Provider>) -> Extractor {
        let mut e = Extractor::default();
        let mut headers: BTreeMap<String, HeaderLocation> = BTreeMap::new();
        for p in providers {
            let mut add_header = |name: &HeaderName, prefix: &str| {
                headers
                    .entry(format!("{}{prefix}", name.as_str()))
                    .or_insert_with(|| HeaderLocation {
                        name: name.clone(),
                        prefix: prefix.to_owned(),
                        issuers: IssuerChecker::default(),
                    })
                    .issuers
                    .add(&p.issuer);
            };
            for (name, prefix) in &p.from_headers {
                add_header(name, prefix);
            }
            for param in &p.from_params {
                e.params.entry(param.clone()).or_default().add(&p.issuer);
            }
            for cookie in &p.from_cookies {
                e.cookies.entry(cookie.clone()).or_default().add(&p.issuer);
            }
            if p.from_headers.is_empty() && p.from_params.is_empty() && p.from_cookies.is_empty() {
                add_header(&http::header::AUTHORIZATION, BEARER);
                e.params
                    .entry(ACCESS_TOKEN.to_owned())
                    .or_default()
                    .add(&p.issuer);
            }
            e.sanitize.extend(p.forward_payload_header.iter().cloned());
            e.sanitize
                .extend(p.claim_to_headers.iter().map(|(h, _)| h.clone()));
        }
        e.headers = headers.into_values().collect();
        e
    }

    pub fn sanitize(&self, head: &mut RequestHead) {
        for h in &self.sanitize {
            head.headers.remove(h);
        }
    }

    /// The tokens of the request, in Envoy's order: headers, then parameters, then cookies.
    pub fn extract(&self, head: &RequestHead) -> Vec<Token<'_>> {
        let mut tokens = Vec::new();
        for loc in &self.headers {
            let mut values = head.headers.get_all(&loc.name).iter();
            let Some(first) = values.next() else { continue };
            let text = match values.next() {
                // The usual case: one value, scanned as bytes (a token is ASCII), one
                // allocation: the token's.
                None => token_in(first.as_bytes(), &loc.prefix),
                // Several values are joined with ",", as Envoy's getAllOfHeaderAsString does.
                Some(second) => {
                    let mut joined = first.as_bytes().to_vec();
                    for v in std::iter::once(second).chain(values) {
                        joined.push(b',');
                        joined.extend_from_slice(v.as_bytes());
                    }
                    token_in(&joined, &loc.prefix)
                }
            };
            let Some(text) = text else { continue };
            tokens.push(Token {
                text,
                issuers: &loc.issuers,
                header: Some(&loc.name),
            });
        }
        if !self.params.is_empty() {
            if let Some(query) = head.query() {
                let query = query.split_once('#').map_or(query, |(q, _)| q);
                for (name, issuers) in &self.params {
                    if let Some(v) = query_param(query, name) {
                        tokens.push(Token {
                            text: v,
                            issuers,
                            header: None,
                        });
                    }
                }
            }
        }
        if !self.cookies.is_empty() {
            for (name, issuers) in &self.cookies {
                if let Some(v) = cookie(head, name) {
                    tokens.push(Token {
                        text: v,
                        issuers,
                        header: None,
                    });
                }
            }
        }
        tokens
    }
}

/// Base64url and '.': the bytes of a JWT. A table because every request's token is scanned
/// byte by byte: profiles put a branchy test at ~2 ns a byte, and branch-free arithmetic
/// slower still (a loop-carried chain); the lookup runs at a fraction of that.
static TOKEN_BYTES: [bool; 256] = {
    let mut t = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        t[b] = c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'.';
        b += 1;
    }
    t
};

fn is_token_byte(b: u8) -> bool {
    TOKEN_BYTES[usize::from(b)]
}

/// Token bytes are ASCII, so the strict check passes at memory speed; only the fallback (a
/// whole value without a token run) can need the lossy copy.
fn text(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// The token in a header value: after `prefix` (None when the value lacks it), Envoy's
/// extractJWT: skip to the first base64url-or-dot character and take the run of them; when
/// there is none, the whole value (which then fails to parse).
fn token_in(value: &[u8], prefix: &str) -> Option<String> {
    // Without a prefix the whole value is the token, as in Envoy.
    if prefix.is_empty() {
        return Some(text(value));
    }
    let p = prefix.as_bytes();
    // Almost always at the start ("Bearer ..."): check there before searching.
    let at = if value.starts_with(p) {
        Some(0)
    } else {
        value.windows(p.len()).position(|w| w == p)
    };
    let after = at? + p.len();
    let rest = value.get(after..).unwrap_or(&[]);
    // The usual value is "Bearer <token>": when every byte after the prefix but leading spaces
    // is a token byte, that is the run.
    let trimmed = rest.trim_ascii_start();
    if !trimmed.is_empty() && trimmed.iter().all(|&b| is_token_byte(b)) {
        return Some(text(trimmed));
    }
    let token = match rest.iter().position(|&b| is_token_byte(b)) {
        Some(start) => {
            let run = &rest[start..];
            let end = run.iter().position(|&b| !is_token_byte(b));
            &run[..end.unwrap_or(run.len())]
        }
        None => value,
    };
    Some(text(token))
}

/// The first value of `name` in a query string, percent-decoded (as Envoy's
/// parseAndDecodeQueryString reads it).
fn query_param(query: &str, name: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k) == name).then(|| percent_decode(v))
    })
}

fn percent_decode(s: &str) -> String {
    if !s.contains(['%', '+']) {
        return s.to_owned();
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push(h << 4 | l);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok())
}

/// The first cookie named `name` over all `cookie` headers, without surrounding quotes.
fn cookie(head: &RequestHead, name: &str) -> Option<String> {
    for value in head.headers.get_all(http::header::COOKIE) {
        let text = String::from_utf8_lossy(value.as_bytes());
        for part in text.split(';') {
            let part = part.trim_start_matches([' ', '\t']);
            let Some((k, v)) = part.split_once('=') else {
                continue;
            };
            if k == name {
                let v = v.trim_end_matches([' ', '\t']);
                let v = v
                    .strip_prefix('"')
                    .and_then(|x| x.strip_suffix('"'))
                    .unwrap_or(v);
                return Some(v.to_owned());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn token_bytes_are_base64url_and_dot() {
        for b in 0..=255u8 {
            let want = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
            assert_eq!(is_token_byte(b), want, "byte {b:#x}");
        }
    }

    #[test]
    fn token_after_the_prefix() {
        let t = |v: &str, p: &str| token_in(v.as_bytes(), p);
        assert_eq!(t("Bearer a.b.c", "Bearer ").as_deref(), Some("a.b.c"));
        assert_eq!(t("Bearer  a.b.c, x", "Bearer ").as_deref(), Some("a.b.c"));
        assert_eq!(t("Bearer ", "Bearer ").as_deref(), Some("Bearer "));
        assert_eq!(t("Bearer   ", "Bearer ").as_deref(), Some("Bearer   "));
        // The prefix may sit after other text, as Envoy's find() allows.
        assert_eq!(t("x, Bearer a.b", "Bearer ").as_deref(), Some("a.b"));
        assert_eq!(t("Basic abc", "Bearer ").as_deref(), None);
        assert_eq!(t("a.b.c, x", "").as_deref(), Some("a.b.c, x"));
    }

    #[test]
    fn query_params_are_decoded_and_the_first_wins() {
        assert_eq!(
            query_param("a=1&access_token=x%2Ey&access_token=z", "access_token").as_deref(),
            Some("x.y")
        );
        assert_eq!(query_param("a=1", "access_token"), None);
        assert_eq!(percent_decode("%zz%4"), "%zz%4");
    }
}

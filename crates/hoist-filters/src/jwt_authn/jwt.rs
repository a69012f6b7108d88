//! A JWT parsed the way Envoy's jwt_verify_lib parses it (`Jwt::parseFromString`): three
//! non-empty dot-separated sections, base64url header and payload holding JSON objects, the
//! registered claims type-checked, the signature decoded. Each failure has its own status.

use std::borrow::Cow;
use std::ops::Range;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{Map, Value};

use super::status::Status;

/// Tokens longer than this are refused before any decoding (Envoy has no such bound; hoist
/// has one so a peer cannot make it decode and parse megabytes of JSON per request).
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;

/// The signature algorithms hoist verifies (jwt_verify_lib's list minus ES512, which the
/// jsonwebtoken crate does not implement).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alg {
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Ps384,
    Ps512,
    Es256,
    Es384,
    Hs256,
    Hs384,
    Hs512,
    EdDsa,
}

impl Alg {
    pub fn from_name(name: &str) -> Option<Alg> {
        Some(match name {
            "RS256" => Alg::Rs256,
            "RS384" => Alg::Rs384,
            "RS512" => Alg::Rs512,
            "PS256" => Alg::Ps256,
            "PS384" => Alg::Ps384,
            "PS512" => Alg::Ps512,
            "ES256" => Alg::Es256,
            "ES384" => Alg::Es384,
            "HS256" => Alg::Hs256,
            "HS384" => Alg::Hs384,
            "HS512" => Alg::Hs512,
            "EdDSA" => Alg::EdDsa,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Alg::Rs256 => "RS256",
            Alg::Rs384 => "RS384",
            Alg::Rs512 => "RS512",
            Alg::Ps256 => "PS256",
            Alg::Ps384 => "PS384",
            Alg::Ps512 => "PS512",
            Alg::Es256 => "ES256",
            Alg::Es384 => "ES384",
            Alg::Hs256 => "HS256",
            Alg::Hs384 => "HS384",
            Alg::Hs512 => "HS512",
            Alg::EdDsa => "EdDSA",
        }
    }

    pub fn jsonwebtoken(self) -> jsonwebtoken::Algorithm {
        use jsonwebtoken::Algorithm as A;
        match self {
            Alg::Rs256 => A::RS256,
            Alg::Rs384 => A::RS384,
            Alg::Rs512 => A::RS512,
            Alg::Ps256 => A::PS256,
            Alg::Ps384 => A::PS384,
            Alg::Ps512 => A::PS512,
            Alg::Es256 => A::ES256,
            Alg::Es384 => A::ES384,
            Alg::Hs256 => A::HS256,
            Alg::Hs384 => A::HS384,
            Alg::Hs512 => A::HS512,
            Alg::EdDsa => A::EdDSA,
        }
    }
}

/// A parsed (not yet verified) JWT.
#[derive(Debug)]
pub struct Jwt {
    token: Box<str>,
    header_b64: Range<usize>,
    payload_b64: Range<usize>,
    signature_b64: Range<usize>,
    pub alg: Alg,
    /// Empty when the header has none.
    pub kid: String,
    /// Empty when the payload has none.
    pub iss: String,
    /// 0 when absent.
    pub exp: u64,
    pub nbf: u64,
    pub audiences: Vec<String>,
    pub header: Map<String, Value>,
    pub payload: Map<String, Value>,
    pub signature: Vec<u8>,
}

impl Jwt {
    pub fn parse(token: &str) -> Result<Jwt, Status> {
        // Empty sections are skipped, as absl::StrSplit(..., SkipEmpty()) does.
        let mut sections = [0..0, 0..0, 0..0];
        let mut count = 0;
        let mut start = 0;
        for (i, b) in token
            .bytes()
            .enumerate()
            .chain(std::iter::once((token.len(), b'.')))
        {
            if b == b'.' {
                if i > start {
                    if count == 3 {
                        return Err(Status::JwtBadFormat);
                    }
                    sections[count] = start..i;
                    count += 1;
                }
                start = i + 1;
            }
        }
        if count != 3 {
            return Err(Status::JwtBadFormat);
        }
        let [header_b64, payload_b64, signature_b64] = sections;
        let header_json =
            decode_b64(&token[header_b64.clone()]).ok_or(Status::JwtHeaderParseErrorBadBase64)?;
        let header = json_object(&header_json).ok_or(Status::JwtHeaderParseErrorBadJson)?;
        let alg = match header.get("alg") {
            Some(Value::String(a)) => {
                Alg::from_name(a).ok_or(Status::JwtHeaderNotImplementedAlg)?
            }
            _ => return Err(Status::JwtHeaderBadAlg),
        };
        let kid = optional_string(&header, "kid").map_err(|()| Status::JwtHeaderBadKid)?;

        let payload_json =
            decode_b64(&token[payload_b64.clone()]).ok_or(Status::JwtPayloadParseErrorBadBase64)?;
        let payload = json_object(&payload_json).ok_or(Status::JwtPayloadParseErrorBadJson)?;
        let iss = optional_string(&payload, "iss")
            .map_err(|()| Status::JwtPayloadParseErrorIssNotString)?;
        optional_string(&payload, "sub").map_err(|()| Status::JwtPayloadParseErrorSubNotString)?;
        time_claim(
            &payload,
            "iat",
            Status::JwtPayloadParseErrorIatNotInteger,
            Status::JwtPayloadParseErrorIatOutOfRange,
        )?;
        let nbf = time_claim(
            &payload,
            "nbf",
            Status::JwtPayloadParseErrorNbfNotInteger,
            Status::JwtPayloadParseErrorNbfOutOfRange,
        )?;
        let exp = time_claim(
            &payload,
            "exp",
            Status::JwtPayloadParseErrorExpNotInteger,
            Status::JwtPayloadParseErrorExpOutOfRange,
        )?;
        optional_string(&payload, "jti").map_err(|()| Status::JwtPayloadParseErrorJtiNotString)?;
        let audiences = match payload.get("aud") {
            None => Vec::new(),
            Some(Value::String(a)) => vec![a.clone()],
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or(Status::JwtPayloadParseErrorAudNotString)?,
            Some(_) => return Err(Status::JwtPayloadParseErrorAudNotString),
        };
        let signature = decode_b64(&token[signature_b64.clone()])
            .ok_or(Status::JwtSignatureParseErrorBadBase64)?;
        Ok(Jwt {
            token: token.into(),
            header_b64,
            payload_b64,
            signature_b64,
            alg,
            kid,
            iss,
            exp,
            nbf,
            audiences,
            header,
            payload,
            signature,
        })
    }

    /// `exp` and `nbf` against `now` (unix seconds), with `clock_skew` seconds of tolerance.
    pub fn verify_time(&self, now: u64, clock_skew: u64) -> Status {
        if now.saturating_add(clock_skew) < self.nbf {
            return Status::JwtNotYetValid;
        }
        if self.exp != 0 && now > self.exp.saturating_add(clock_skew) {
            return Status::JwtExpired;
        }
        Status::Ok
    }

    /// What the signature covers: `<header b64>.<payload b64>` as written.
    pub fn signed_data(&self) -> Cow<'_, [u8]> {
        let t = self.token.as_bytes();
        if self.payload_b64.start == self.header_b64.end + 1 {
            Cow::Borrowed(&t[self.header_b64.start..self.payload_b64.end])
        } else {
            let mut v = t[self.header_b64.clone()].to_vec();
            v.push(b'.');
            v.extend_from_slice(&t[self.payload_b64.clone()]);
            Cow::Owned(v)
        }
    }

    /// The signature section as written, without padding (what jsonwebtoken decodes).
    pub fn signature_b64(&self) -> &str {
        self.token[self.signature_b64.clone()].trim_end_matches('=')
    }

    /// The payload section as written (forward_payload_header).
    pub fn payload_b64(&self) -> &str {
        &self.token[self.payload_b64.clone()]
    }
}

/// Base64url, padding optional (absl's WebSafeBase64Unescape accepts both).
pub fn decode_b64(text: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(text.trim_end_matches('=')).ok()
}

fn json_object(bytes: &[u8]) -> Option<Map<String, Value>> {
    match serde_json::from_slice(bytes).ok()? {
        Value::Object(map) => Some(map),
        _ => None,
    }
}

/// A string claim: absent reads as "", present with another type is an error.
fn optional_string(map: &Map<String, Value>, name: &str) -> Result<String, ()> {
    match map.get(name) {
        None => Ok(String::new()),
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(()),
    }
}

/// A NumericDate claim as jwt_verify_lib reads it: any JSON number in [0, 2^64), truncated.
fn time_claim(
    map: &Map<String, Value>,
    name: &str,
    not_integer: Status,
    out_of_range: Status,
) -> Result<u64, Status> {
    match map.get(name) {
        None => Ok(0),
        Some(Value::Number(n)) => {
            let v = n.as_f64().ok_or(out_of_range)?;
            if !(0.0..u64::MAX as f64).contains(&v) {
                return Err(out_of_range);
            }
            Ok(v as u64)
        }
        Some(_) => Err(not_integer),
    }
}

/// Envoy's audience comparison: `http://` or `https://` and one trailing `/` are ignored.
pub fn sanitize_audience(aud: &str) -> &str {
    let a = aud
        .strip_prefix("http://")
        .or_else(|| aud.strip_prefix("https://"))
        .unwrap_or(aud);
    a.strip_suffix('/').unwrap_or(a)
}

/// `audiences` (already sanitized) allow the JWT: none configured allows any.
pub fn audiences_allowed(configured: &[String], jwt_audiences: &[String]) -> bool {
    configured.is_empty()
        || jwt_audiences
            .iter()
            .any(|a| configured.iter().any(|c| c == sanitize_audience(a)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn b64(s: &str) -> String {
        URL_SAFE_NO_PAD.encode(s)
    }

    fn token(header: &str, payload: &str) -> String {
        format!("{}.{}.{}", b64(header), b64(payload), b64("sig"))
    }

    fn status(t: &str) -> Status {
        match Jwt::parse(t) {
            Ok(_) => Status::Ok,
            Err(s) => s,
        }
    }

    #[test]
    fn parses_claims() {
        let t = token(
            r#"{"alg":"RS256","kid":"k1"}"#,
            r#"{"iss":"https://idp","aud":["a","b"],"exp":2000000000,"nbf":5,"iat":1.5}"#,
        );
        let j = Jwt::parse(&t).unwrap();
        assert_eq!(j.alg, Alg::Rs256);
        assert_eq!(j.kid, "k1");
        assert_eq!(j.iss, "https://idp");
        assert_eq!(j.audiences, vec!["a", "b"]);
        assert_eq!((j.exp, j.nbf), (2_000_000_000, 5));
        assert_eq!(j.signature, b"sig");
        assert_eq!(&*j.signed_data(), t.rsplit_once('.').unwrap().0.as_bytes());
    }

    #[test]
    fn each_malformation_has_envoys_status() {
        let ok_h = r#"{"alg":"RS256"}"#;
        assert_eq!(status("a.b"), Status::JwtBadFormat);
        assert_eq!(status("a.b.c.d"), Status::JwtBadFormat);
        assert_eq!(
            status(&format!("{}.{}.", b64(ok_h), b64("{}"))),
            Status::JwtBadFormat
        );
        assert_eq!(status("!!.e30.c2ln"), Status::JwtHeaderParseErrorBadBase64);
        assert_eq!(
            status(&token("[1]", "{}")),
            Status::JwtHeaderParseErrorBadJson
        );
        assert_eq!(status(&token("{}", "{}")), Status::JwtHeaderBadAlg);
        assert_eq!(
            status(&token(r#"{"alg":1}"#, "{}")),
            Status::JwtHeaderBadAlg
        );
        assert_eq!(
            status(&token(r#"{"alg":"none"}"#, "{}")),
            Status::JwtHeaderNotImplementedAlg
        );
        assert_eq!(
            status(&token(r#"{"alg":"RS256","kid":3}"#, "{}")),
            Status::JwtHeaderBadKid
        );
        assert_eq!(
            status(&format!("{}.%%.{}", b64(ok_h), b64("s"))),
            Status::JwtPayloadParseErrorBadBase64
        );
        assert_eq!(
            status(&token(ok_h, "not json")),
            Status::JwtPayloadParseErrorBadJson
        );
        assert_eq!(
            status(&token(ok_h, r#"{"iss":1}"#)),
            Status::JwtPayloadParseErrorIssNotString
        );
        assert_eq!(
            status(&token(ok_h, r#"{"exp":"1"}"#)),
            Status::JwtPayloadParseErrorExpNotInteger
        );
        assert_eq!(
            status(&token(ok_h, r#"{"exp":-1}"#)),
            Status::JwtPayloadParseErrorExpOutOfRange
        );
        assert_eq!(
            status(&token(ok_h, r#"{"nbf":true}"#)),
            Status::JwtPayloadParseErrorNbfNotInteger
        );
        assert_eq!(
            status(&token(ok_h, r#"{"aud":[1]}"#)),
            Status::JwtPayloadParseErrorAudNotString
        );
        assert_eq!(
            status(&format!("{}.{}.%%", b64(ok_h), b64("{}"))),
            Status::JwtSignatureParseErrorBadBase64
        );
    }

    #[test]
    fn time_constraints_with_skew() {
        let j = Jwt::parse(&token(r#"{"alg":"HS256"}"#, r#"{"exp":1000,"nbf":900}"#)).unwrap();
        assert_eq!(j.verify_time(950, 60), Status::Ok);
        assert_eq!(j.verify_time(1060, 60), Status::Ok);
        assert_eq!(j.verify_time(1061, 60), Status::JwtExpired);
        assert_eq!(j.verify_time(840, 60), Status::Ok);
        assert_eq!(j.verify_time(839, 60), Status::JwtNotYetValid);
        let no_exp = Jwt::parse(&token(r#"{"alg":"HS256"}"#, "{}")).unwrap();
        assert_eq!(no_exp.verify_time(u64::MAX, 60), Status::Ok);
    }

    #[test]
    fn audiences_ignore_scheme_and_trailing_slash() {
        let configured = vec![sanitize_audience("https://api.example.com/").to_owned()];
        assert!(audiences_allowed(
            &configured,
            &["http://api.example.com".into()]
        ));
        assert!(audiences_allowed(&configured, &["api.example.com".into()]));
        assert!(!audiences_allowed(&configured, &["other".into()]));
        assert!(!audiences_allowed(&configured, &[]));
        assert!(audiences_allowed(&[], &[]));
    }
}

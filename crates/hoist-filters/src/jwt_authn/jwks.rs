//! A JSON Web Key Set parsed as jwt_verify_lib parses one (`Jwks::createFromJwksCore`): keys
//! that fail to parse are skipped, the set is valid when one key is. Each key becomes a
//! jsonwebtoken `DecodingKey` once, so verification does no key parsing.

use aws_lc_rs::signature::{ParsedPublicKey, ECDSA_P256_SHA256_FIXED, ECDSA_P384_SHA384_FIXED};
use jsonwebtoken::DecodingKey;
use serde_json::{Map, Value};

use super::jwt::decode_b64;
use super::status::Status;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Curve {
    P256,
    P384,
}

pub enum KeyMaterial {
    Rsa(DecodingKey),
    Ec(Curve, DecodingKey),
    Hmac(DecodingKey),
    Ed25519(DecodingKey),
}

pub struct Jwk {
    /// Empty when the key has none.
    pub kid: String,
    /// Empty when the key has none.
    pub alg: String,
    pub material: KeyMaterial,
}

pub struct Jwks {
    pub keys: Vec<Jwk>,
}

impl std::fmt::Debug for Jwks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kids: Vec<&str> = self.keys.iter().map(|k| k.kid.as_str()).collect();
        f.debug_struct("Jwks").field("kids", &kids).finish()
    }
}

impl Jwks {
    /// Parses a JWKS document. Err: why no key could be used (the first key error, as Envoy
    /// reports it, or the document's own fault).
    pub fn parse(text: &[u8]) -> Result<Jwks, Status> {
        let Ok(Value::Object(doc)) = serde_json::from_slice::<Value>(text) else {
            return Err(Status::JwksParseError);
        };
        let items = match doc.get("keys") {
            None => return Err(Status::JwksNoKeys),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(Status::JwksBadKeys),
        };
        let mut keys = Vec::new();
        let mut first_error = None;
        for item in items {
            let Value::Object(jwk) = item else { continue };
            match parse_key(jwk) {
                Ok(k) => keys.push(k),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if keys.is_empty() {
            return Err(first_error.unwrap_or(Status::JwksNoValidKeys));
        }
        Ok(Jwks { keys })
    }
}

enum Field<'a> {
    Missing,
    WrongType,
    Str(&'a str),
}

fn field<'a>(m: &'a Map<String, Value>, name: &str) -> Field<'a> {
    match m.get(name) {
        None => Field::Missing,
        Some(Value::String(s)) => Field::Str(s),
        Some(_) => Field::WrongType,
    }
}

/// A string field that is optional and ignored when it has another type (kid, alg).
fn lenient(m: &Map<String, Value>, name: &str) -> String {
    match field(m, name) {
        Field::Str(s) => s.to_owned(),
        _ => String::new(),
    }
}

fn required<'a>(
    m: &'a Map<String, Value>,
    name: &str,
    missing: Status,
    wrong: Status,
) -> Result<&'a str, Status> {
    match field(m, name) {
        Field::Missing => Err(missing),
        Field::WrongType => Err(wrong),
        Field::Str(s) => Ok(s),
    }
}

fn parse_key(m: &Map<String, Value>) -> Result<Jwk, Status> {
    let kty = required(m, "kty", Status::JwksMissingKty, Status::JwksBadKty)?;
    let kid = lenient(m, "kid");
    let alg = lenient(m, "alg");
    let material = match kty {
        "RSA" => rsa(m, &alg)?,
        "EC" => ec(m, &alg)?,
        "oct" => oct(m, &alg)?,
        "OKP" => okp(m, &alg)?,
        _ => return Err(Status::JwksNotImplementedKty),
    };
    Ok(Jwk { kid, alg, material })
}

fn rsa(m: &Map<String, Value>, alg: &str) -> Result<KeyMaterial, Status> {
    if !(alg.is_empty() || alg.starts_with("RS") || alg.starts_with("PS")) {
        return Err(Status::JwksRsaKeyBadAlg);
    }
    let n = required(m, "n", Status::JwksRsaKeyMissingN, Status::JwksRsaKeyBadN)?;
    let e = required(m, "e", Status::JwksRsaKeyMissingE, Status::JwksRsaKeyBadE)?;
    let n = decode_b64(n).ok_or(Status::JwksRsaParseError)?;
    let e = decode_b64(e).ok_or(Status::JwksRsaParseError)?;
    let n = strip_leading_zeros(&n);
    let e = strip_leading_zeros(&e);
    // jwt_verify_lib refuses non-standard exponents early.
    if n.is_empty() || !(e == [3] || e == [1, 0, 1]) {
        return Err(Status::JwksRsaParseError);
    }
    Ok(KeyMaterial::Rsa(DecodingKey::from_rsa_raw_components(n, e)))
}

fn strip_leading_zeros(b: &[u8]) -> &[u8] {
    let first = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    &b[first..]
}

fn ec(m: &Map<String, Value>, alg: &str) -> Result<KeyMaterial, Status> {
    if !alg.is_empty() && !alg.starts_with("ES") {
        return Err(Status::JwksEcKeyBadAlg);
    }
    let crv = match field(m, "crv") {
        Field::Missing => "",
        Field::WrongType => return Err(Status::JwksEcKeyBadCrv),
        Field::Str(s) => s,
    };
    if !alg.is_empty()
        && !crv.is_empty()
        && !matches!(
            (alg, crv),
            ("ES256", "P-256") | ("ES384", "P-384") | ("ES512", "P-521")
        )
    {
        return Err(Status::JwksEcKeyAlgNotCompatibleWithCrv);
    }
    // Neither alg nor crv: P-256, as jwt_verify_lib assumes. P-521 (ES512) is not available
    // in the jsonwebtoken crate, so such keys are unusable here.
    let curve = if alg == "ES256" || crv == "P-256" || (alg.is_empty() && crv.is_empty()) {
        Curve::P256
    } else if alg == "ES384" || crv == "P-384" {
        Curve::P384
    } else {
        return Err(Status::JwksEcKeyAlgOrCrvUnsupported);
    };
    let x = required(m, "x", Status::JwksEcKeyMissingX, Status::JwksEcKeyBadX)?;
    let y = required(m, "y", Status::JwksEcKeyMissingY, Status::JwksEcKeyBadY)?;
    let x = decode_b64(x).ok_or(Status::JwksEcXorYBadBase64)?;
    let y = decode_b64(y).ok_or(Status::JwksEcXorYBadBase64)?;
    let size = match curve {
        Curve::P256 => 32,
        Curve::P384 => 48,
    };
    // Uncompressed point: 0x04 || x || y, each coordinate left-padded to the field size (a
    // JWK may drop leading zero bytes, as BN_bin2bn tolerates).
    let x = strip_leading_zeros(&x);
    let y = strip_leading_zeros(&y);
    if x.len() > size || y.len() > size {
        return Err(Status::JwksEcParseError);
    }
    let mut point = vec![0u8; 1 + 2 * size];
    point[0] = 4;
    point[1 + size - x.len()..1 + size].copy_from_slice(x);
    point[1 + 2 * size - y.len()..].copy_from_slice(y);
    let algorithm = match curve {
        Curve::P256 => &ECDSA_P256_SHA256_FIXED,
        Curve::P384 => &ECDSA_P384_SHA384_FIXED,
    };
    // A point off the curve is refused now, as EC_KEY_set_public_key_affine_coordinates does.
    ParsedPublicKey::new(algorithm, &point).map_err(|_| Status::JwksEcParseError)?;
    Ok(KeyMaterial::Ec(curve, DecodingKey::from_ec_der(&point)))
}

fn oct(m: &Map<String, Value>, alg: &str) -> Result<KeyMaterial, Status> {
    if !alg.is_empty() && !matches!(alg, "HS256" | "HS384" | "HS512") {
        return Err(Status::JwksHmacKeyBadAlg);
    }
    let k = required(m, "k", Status::JwksHmacKeyMissingK, Status::JwksHmacKeyBadK)?;
    let k = decode_b64(k)
        .filter(|k| !k.is_empty())
        .ok_or(Status::JwksOctBadBase64)?;
    DecodingKey::from_secret(&k)
        .map(KeyMaterial::Hmac)
        .map_err(|_| Status::JwksOctBadBase64)
}

fn okp(m: &Map<String, Value>, alg: &str) -> Result<KeyMaterial, Status> {
    if !alg.is_empty() && alg != "EdDSA" {
        return Err(Status::JwksOkpKeyBadAlg);
    }
    let crv = required(
        m,
        "crv",
        Status::JwksOkpKeyMissingCrv,
        Status::JwksOkpKeyBadCrv,
    )?;
    if crv != "Ed25519" {
        return Err(Status::JwksOkpKeyCrvUnsupported);
    }
    let x = required(m, "x", Status::JwksOkpKeyMissingX, Status::JwksOkpKeyBadX)?;
    let x = decode_b64(x).ok_or(Status::JwksOkpXBadBase64)?;
    if x.len() != 32 {
        return Err(Status::JwksOkpXWrongLength);
    }
    Ok(KeyMaterial::Ed25519(DecodingKey::from_ed_der(&x)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn err(doc: &str) -> Status {
        Jwks::parse(doc.as_bytes()).unwrap_err()
    }

    #[test]
    fn document_faults() {
        assert_eq!(err("not json"), Status::JwksParseError);
        assert_eq!(err("[]"), Status::JwksParseError);
        assert_eq!(err("{}"), Status::JwksNoKeys);
        assert_eq!(err(r#"{"keys":{}}"#), Status::JwksBadKeys);
        assert_eq!(err(r#"{"keys":[]}"#), Status::JwksNoValidKeys);
        assert_eq!(err(r#"{"keys":[1, "x"]}"#), Status::JwksNoValidKeys);
    }

    #[test]
    fn key_faults_report_the_first_one() {
        assert_eq!(err(r#"{"keys":[{}]}"#), Status::JwksMissingKty);
        assert_eq!(err(r#"{"keys":[{"kty":1}]}"#), Status::JwksBadKty);
        assert_eq!(
            err(r#"{"keys":[{"kty":"XYZ"}]}"#),
            Status::JwksNotImplementedKty
        );
        assert_eq!(
            err(r#"{"keys":[{"kty":"RSA","alg":"ES256"},{"kty":"oct"}]}"#),
            Status::JwksRsaKeyBadAlg
        );
        assert_eq!(
            err(r#"{"keys":[{"kty":"RSA","e":"AQAB"}]}"#),
            Status::JwksRsaKeyMissingN
        );
        assert_eq!(
            err(r#"{"keys":[{"kty":"RSA","n":"AQAB","e":"Aw8"}]}"#),
            Status::JwksRsaParseError
        );
        assert_eq!(
            err(r#"{"keys":[{"kty":"EC","alg":"ES256","crv":"P-384"}]}"#),
            Status::JwksEcKeyAlgNotCompatibleWithCrv
        );
        assert_eq!(
            err(r#"{"keys":[{"kty":"EC","crv":"P-256","x":"AAAA","y":"AAAA"}]}"#),
            Status::JwksEcParseError
        );
        assert_eq!(
            err(r#"{"keys":[{"kty":"oct","k":""}]}"#),
            Status::JwksOctBadBase64
        );
        assert_eq!(
            err(r#"{"keys":[{"kty":"OKP","crv":"X25519","x":"AA"}]}"#),
            Status::JwksOkpKeyCrvUnsupported
        );
        assert_eq!(
            err(r#"{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAA"}]}"#),
            Status::JwksOkpXWrongLength
        );
    }

    #[test]
    fn valid_keys_are_kept_and_bad_ones_skipped() {
        let doc = r#"{"keys":[
            {"kty":"oct","kid":"h","alg":"HS256","k":"c2VjcmV0"},
            {"kty":"RSA","kid":"bad"},
            {"kty":"OKP","crv":"Ed25519","kid":"e","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}
        ]}"#;
        let jwks = Jwks::parse(doc.as_bytes()).unwrap();
        let kids: Vec<&str> = jwks.keys.iter().map(|k| k.kid.as_str()).collect();
        assert_eq!(kids, ["h", "e"]);
        assert!(matches!(jwks.keys[0].material, KeyMaterial::Hmac(_)));
        assert!(matches!(jwks.keys[1].material, KeyMaterial::Ed25519(_)));
    }
}

//! Test signers, on aws-lc-rs directly (not through jsonwebtoken, which the filter verifies
//! with): one key per algorithm, its public JWK, and compact JWS signing.

use std::sync::OnceLock;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize, PublicKeyComponents};
use aws_lc_rs::signature::{
    self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING,
    ECDSA_P384_SHA384_FIXED_SIGNING,
};
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde_json::{json, Value};

pub fn b64(data: impl AsRef<[u8]>) -> String {
    URL_SAFE_NO_PAD.encode(data)
}

struct Keys {
    rsa: RsaKeyPair,
    rsa_other: RsaKeyPair,
    p256: EcdsaKeyPair,
    p384: EcdsaKeyPair,
    ed: Ed25519KeyPair,
}

fn keys() -> &'static Keys {
    static KEYS: OnceLock<Keys> = OnceLock::new();
    KEYS.get_or_init(|| Keys {
        rsa: RsaKeyPair::generate(KeySize::Rsa2048).unwrap(),
        rsa_other: RsaKeyPair::generate(KeySize::Rsa2048).unwrap(),
        p256: EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap(),
        p384: EcdsaKeyPair::generate(&ECDSA_P384_SHA384_FIXED_SIGNING).unwrap(),
        ed: Ed25519KeyPair::generate().unwrap(),
    })
}

const HMAC_SECRET: &[u8] = b"a shared secret of enough length for HS512 tests";

/// Which key signs: each algorithm's own, or a second RSA key no JWKS lists.
#[derive(Clone, Copy, Debug)]
pub enum Signer {
    Rsa,
    OtherRsa,
    P256,
    P384,
    Ed,
    Hmac,
}

pub fn signer_for(alg: &str) -> Signer {
    match alg {
        a if a.starts_with("RS") || a.starts_with("PS") => Signer::Rsa,
        "ES256" => Signer::P256,
        "ES384" => Signer::P384,
        "EdDSA" => Signer::Ed,
        _ => Signer::Hmac,
    }
}

/// A compact JWS of `payload` with `header` (alg and kid are written as given).
pub fn sign_with(signer: Signer, header: &Value, payload: &Value) -> String {
    let alg = header["alg"].as_str().unwrap_or("RS256");
    let input = format!("{}.{}", b64(header.to_string()), b64(payload.to_string()));
    let msg = input.as_bytes();
    let rng = SystemRandom::new();
    let sig: Vec<u8> = match signer {
        Signer::Rsa | Signer::OtherRsa => {
            let kp = if matches!(signer, Signer::Rsa) {
                &keys().rsa
            } else {
                &keys().rsa_other
            };
            let padding: &'static dyn signature::RsaEncoding = match alg {
                "RS384" => &signature::RSA_PKCS1_SHA384,
                "RS512" => &signature::RSA_PKCS1_SHA512,
                "PS256" => &signature::RSA_PSS_SHA256,
                "PS384" => &signature::RSA_PSS_SHA384,
                "PS512" => &signature::RSA_PSS_SHA512,
                _ => &signature::RSA_PKCS1_SHA256,
            };
            let mut out = vec![0; kp.public_modulus_len()];
            kp.sign(padding, &rng, msg, &mut out).unwrap();
            out
        }
        Signer::P256 => keys().p256.sign(&rng, msg).unwrap().as_ref().to_vec(),
        Signer::P384 => keys().p384.sign(&rng, msg).unwrap().as_ref().to_vec(),
        Signer::Ed => keys().ed.sign(msg).as_ref().to_vec(),
        Signer::Hmac => {
            let algorithm = match alg {
                "HS384" => aws_lc_rs::hmac::HMAC_SHA384,
                "HS512" => aws_lc_rs::hmac::HMAC_SHA512,
                _ => aws_lc_rs::hmac::HMAC_SHA256,
            };
            let key = aws_lc_rs::hmac::Key::new(algorithm, HMAC_SECRET);
            aws_lc_rs::hmac::sign(&key, msg).as_ref().to_vec()
        }
    };
    format!("{input}.{}", b64(sig))
}

/// Signs with the key of `alg`, header `{alg, kid}` (no kid when empty).
pub fn sign(alg: &str, kid: &str, payload: &Value) -> String {
    let mut header = json!({"alg": alg, "typ": "JWT"});
    if !kid.is_empty() {
        header["kid"] = json!(kid);
    }
    sign_with(signer_for(alg), &header, payload)
}

fn rsa_jwk(kp: &RsaKeyPair, kid: &str) -> Value {
    let c = PublicKeyComponents::<Vec<u8>>::from(kp.public_key());
    json!({"kty": "RSA", "kid": kid, "n": b64(&c.n), "e": b64(&c.e)})
}

fn ec_jwk(kp: &EcdsaKeyPair, crv: &str, kid: &str) -> Value {
    let point = kp.public_key().as_ref();
    let size = (point.len() - 1) / 2;
    json!({"kty": "EC", "crv": crv, "kid": kid,
        "x": b64(&point[1..1 + size]), "y": b64(&point[1 + size..])})
}

/// The public keys: kid "rsa", "p256", "p384", "ed", "hmac".
pub fn jwks() -> Value {
    json!({"keys": [
        rsa_jwk(&keys().rsa, "rsa"),
        ec_jwk(&keys().p256, "P-256", "p256"),
        ec_jwk(&keys().p384, "P-384", "p384"),
        {"kty": "OKP", "crv": "Ed25519", "kid": "ed", "x": b64(keys().ed.public_key().as_ref())},
        {"kty": "oct", "kid": "hmac", "k": b64(HMAC_SECRET)},
    ]})
}

/// Only the RSA key (kid "rsa"), without kid when `kid` is false.
pub fn rsa_only_jwks(kid: bool) -> Value {
    let mut k = rsa_jwk(&keys().rsa, "rsa");
    if !kid {
        if let Some(m) = k.as_object_mut() {
            m.remove("kid");
        }
    }
    json!({"keys": [k]})
}

/// The kid each algorithm's key has in `jwks()`.
pub fn kid_for(alg: &str) -> &'static str {
    match signer_for(alg) {
        Signer::Rsa | Signer::OtherRsa => "rsa",
        Signer::P256 => "p256",
        Signer::P384 => "p384",
        Signer::Ed => "ed",
        Signer::Hmac => "hmac",
    }
}

//! The signature check (jwt_verify_lib's `verifyJwtWithoutTimeChecking`): keys are tried in
//! order, skipping those whose `kid` or `alg` says they are for another token; the first key
//! that verifies wins. Only keys of the token's algorithm family are tried (Envoy would also
//! feed, say, an RS256 token to an EC key without `alg`, which can only fail).
//!
//! The cryptography is jsonwebtoken's, on its aws-lc-rs backend (the library rustls uses).

use jsonwebtoken::crypto::CryptoProvider;

use super::jwks::{Curve, Jwks, KeyMaterial};
use super::jwt::{Alg, Jwt};
use super::status::Status;

/// Makes sure jsonwebtoken has a crypto provider. It picks aws-lc-rs by itself when that is its
/// only backend; if feature unification ever enables a second one, install aws-lc-rs rather
/// than let the first verification panic.
pub fn ensure_crypto_provider() {
    if CryptoProvider::try_get_default().is_none() {
        // Err: another thread installed one first, which is as good.
        let _ = jsonwebtoken::crypto::aws_lc::DEFAULT_PROVIDER.install_default();
    }
}

pub fn verify_signature(jwt: &Jwt, jwks: &Jwks) -> Status {
    let signed = jwt.signed_data();
    let mut kid_alg_matched = false;
    for key in &jwks.keys {
        if !jwt.kid.is_empty() && !key.kid.is_empty() && key.kid != jwt.kid {
            continue;
        }
        if !key.alg.is_empty() && key.alg != jwt.alg.name() {
            continue;
        }
        kid_alg_matched = true;
        let usable = match (&key.material, jwt.alg) {
            (KeyMaterial::Rsa(k), Alg::Rs256 | Alg::Rs384 | Alg::Rs512)
            | (KeyMaterial::Rsa(k), Alg::Ps256 | Alg::Ps384 | Alg::Ps512)
            | (KeyMaterial::Ec(Curve::P256, k), Alg::Es256)
            | (KeyMaterial::Ec(Curve::P384, k), Alg::Es384)
            | (KeyMaterial::Hmac(k), Alg::Hs256 | Alg::Hs384 | Alg::Hs512) => Some(k),
            (KeyMaterial::Ed25519(k), Alg::EdDsa) => {
                if jwt.signature.len() != 64 {
                    return Status::JwtEd25519SignatureWrongLength;
                }
                Some(k)
            }
            _ => None,
        };
        let Some(k) = usable else { continue };
        if let Ok(true) =
            jsonwebtoken::crypto::verify(jwt.signature_b64(), &signed, k, jwt.alg.jsonwebtoken())
        {
            return Status::Ok;
        }
    }
    if kid_alg_matched {
        Status::JwtVerificationFail
    } else {
        Status::JwksKidAlgMismatch
    }
}

//! The work directory: everything the experiment needs, generated once and reused.
//!
//! - certs/server.{crt,key}: RSA-4096 self-signed, as in the published experiment;
//! - payloads/<size>.bin: the response bodies;
//! - jwt/: an RS256 signing key, the JWKS the jwt_authn filter trusts, and a token for the load;
//! - waf/base.conf: the WAF configuration's first directives (hoist-waf's conf/base.conf, what
//!   Coraza's `@recommended-conf` is to its users).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::rsa::{KeyPair, KeySize};
use aws_lc_rs::signature::{KeyPair as _, RSA_PKCS1_SHA256};
use base64::Engine;

use crate::options::size_bytes;

pub struct WorkDir {
    pub root: PathBuf,
}

impl WorkDir {
    pub fn cert(&self) -> PathBuf {
        self.root.join("certs/server.crt")
    }

    pub fn key(&self) -> PathBuf {
        self.root.join("certs/server.key")
    }

    pub fn payload(&self, size: &str) -> PathBuf {
        self.root.join(format!("payloads/{size}.bin"))
    }

    pub fn jwks(&self) -> PathBuf {
        self.root.join("jwt/jwks.json")
    }

    pub fn token(&self) -> io::Result<String> {
        Ok(fs::read_to_string(self.root.join("jwt/token.txt"))?
            .trim()
            .to_string())
    }

    pub fn config(&self, name: &str) -> PathBuf {
        self.root.join(format!("configs/{name}.yaml"))
    }

    pub fn waf_base_conf(&self) -> PathBuf {
        self.root.join("waf/base.conf")
    }
}

/// hoist-waf's base configuration: engine settings (request and response body access, their
/// limits) and the body-processor rules CRS expects before it. Operators of Coraza on Envoy
/// include its equivalent (`@recommended-conf`) first; without it no body is inspected.
const WAF_BASE_CONF: &str = include_str!("../../hoist-waf/conf/base.conf");

/// Creates (or completes) the work directory.
pub fn prepare(root: &Path, sizes: &[String]) -> io::Result<WorkDir> {
    for sub in ["certs", "payloads", "jwt", "configs", "waf"] {
        fs::create_dir_all(root.join(sub))?;
    }
    let wd = WorkDir {
        root: root.to_path_buf(),
    };
    // Rewritten each time: it follows the binary's hoist-waf.
    fs::write(wd.waf_base_conf(), WAF_BASE_CONF)?;
    if !wd.cert().exists() || !wd.key().exists() {
        eprintln!("hoist bench: generating an RSA-4096 certificate (a few seconds)");
        certificate(&wd)?;
    }
    for size in sizes {
        let bytes = size_bytes(size).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("bad size {size:?}"))
        })?;
        let path = wd.payload(size);
        if fs::metadata(&path).map(|m| m.len()).ok() != Some(bytes) {
            payload(&path, bytes)?;
        }
    }
    if !wd.jwks().exists() || !root.join("jwt/token.txt").exists() {
        jwt(&wd)?;
    }
    Ok(wd)
}

fn certificate(wd: &WorkDir) -> io::Result<()> {
    let key = rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_4096)
        .map_err(io::Error::other)?;
    let mut params =
        rcgen::CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .map_err(io::Error::other)?;
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "hoist-bench");
    let cert = params.self_signed(&key).map_err(io::Error::other)?;
    fs::write(wd.cert(), cert.pem())?;
    fs::write(wd.key(), key.serialize_pem())?;
    Ok(())
}

/// Incompressible, reproducible bytes: a xorshift stream.
fn payload(path: &Path, size: u64) -> io::Result<()> {
    let mut out = io::BufWriter::new(fs::File::create(path)?);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D ^ size;
    let mut left = size;
    while left > 0 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let bytes = x.to_le_bytes();
        let take = left.min(8) as usize;
        out.write_all(&bytes[..take])?;
        left -= take as u64;
    }
    out.flush()
}

/// An RS256 key, its JWKS, and a token valid for a year (issuer hoist-bench, audience bench).
fn jwt(wd: &WorkDir) -> io::Result<()> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let key = KeyPair::generate(KeySize::Rsa2048)
        .map_err(|_| io::Error::other("RSA key generation failed"))?;
    let public = key.public_key();
    let jwks = serde_json::json!({
        "keys": [{
            "kty": "RSA",
            "alg": "RS256",
            "use": "sig",
            "kid": "bench",
            "n": b64.encode(public.modulus().big_endian_without_leading_zero()),
            "e": b64.encode(public.exponent().big_endian_without_leading_zero()),
        }]
    });
    fs::write(
        wd.jwks(),
        serde_json::to_vec_pretty(&jwks).map_err(io::Error::other)?,
    )?;
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let header = b64.encode(br#"{"alg":"RS256","typ":"JWT","kid":"bench"}"#);
    let claims = serde_json::json!({
        "iss": "hoist-bench", "aud": "bench", "sub": "load", "iat": now, "exp": now + 365 * 86400,
    });
    let claims = b64.encode(serde_json::to_vec(&claims).map_err(io::Error::other)?);
    let signing_input = format!("{header}.{claims}");
    let mut sig = vec![0u8; key.public_modulus_len()];
    key.sign(
        &RSA_PKCS1_SHA256,
        &SystemRandom::new(),
        signing_input.as_bytes(),
        &mut sig,
    )
    .map_err(|_| io::Error::other("JWT signing failed"))?;
    fs::write(
        wd.root.join("jwt/token.txt"),
        format!("{signing_input}.{}\n", b64.encode(sig)),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the WAF configuration includes first turns body inspection on.
    #[test]
    fn the_waf_base_configuration_inspects_request_and_response_bodies() {
        for line in [
            "SecRequestBodyAccess On",
            "SecResponseBodyAccess On",
            "SecResponseBodyMimeType text/plain text/html text/xml",
        ] {
            assert!(WAF_BASE_CONF.lines().any(|l| l == line), "{line}");
        }
    }

    #[test]
    fn payload_is_exact_and_reproducible() {
        let dir = std::env::temp_dir().join(format!("hoist-bench-wd-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let a = dir.join("a.bin");
        let b = dir.join("b.bin");
        payload(&a, 1000).unwrap();
        payload(&b, 1000).unwrap();
        let data = fs::read(&a).unwrap();
        assert_eq!(data.len(), 1000);
        assert_eq!(data, fs::read(&b).unwrap());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn token_verifies_with_the_jwks() {
        let dir = std::env::temp_dir().join(format!("hoist-bench-jwt-{}", std::process::id()));
        fs::create_dir_all(dir.join("jwt")).unwrap();
        let wd = WorkDir { root: dir.clone() };
        jwt(&wd).unwrap();
        let token = wd.token().unwrap();
        let jwks: serde_json::Value =
            serde_json::from_slice(&fs::read(wd.jwks()).unwrap()).unwrap();
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let n = b64.decode(jwks["keys"][0]["n"].as_str().unwrap()).unwrap();
        let e = b64.decode(jwks["keys"][0]["e"].as_str().unwrap()).unwrap();
        let (input, sig) = token.rsplit_once('.').unwrap();
        let public = aws_lc_rs::signature::RsaPublicKeyComponents { n: &n, e: &e };
        public
            .verify(
                &aws_lc_rs::signature::RSA_PKCS1_2048_8192_SHA256,
                input.as_bytes(),
                &b64.decode(sig).unwrap(),
            )
            .unwrap();
        fs::remove_dir_all(&dir).unwrap();
    }
}

//! For the jwt_authn tests: tokens and key sets made by an independent implementation (Python's
//! PyJWT with cryptography), and a small HTTPS server that serves a JWKS file and counts the
//! fetches.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

/// Generates fresh keys (kids prefixed with `kid_prefix`) and signs tokens with PyJWT.
/// Returns `{"jwks": {...}, "tokens": {"RS256": ..., "expired": ..., ...}}`.
pub fn pyjwt(kid_prefix: &str, iss: &str, aud: &str) -> Value {
    const SCRIPT: &str = r#"
import base64, json, sys, time
try:
    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
except ImportError as e:
    sys.exit("PyJWT with cryptography is needed: pip install pyjwt cryptography (%s)" % e)
prefix, iss, aud = sys.argv[1], sys.argv[2], sys.argv[3]
now = int(time.time())
rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
p256 = ec.generate_private_key(ec.SECP256R1())
p384 = ec.generate_private_key(ec.SECP384R1())
ed = ed25519.Ed25519PrivateKey.generate()
secret = b"an integration-test HMAC secret, 48 bytes long!!"
def jwk(cls, key, kid):
    d = json.loads(cls.to_jwk(key))
    d["kid"] = prefix + kid
    return d
keys = [jwk(RSAAlgorithm, rsa_key.public_key(), "rsa"),
        jwk(ECAlgorithm, p256.public_key(), "p256"),
        jwk(ECAlgorithm, p384.public_key(), "p384"),
        jwk(OKPAlgorithm, ed.public_key(), "ed"),
        {"kty": "oct", "kid": prefix + "hmac",
         "k": base64.urlsafe_b64encode(secret).rstrip(b"=").decode()}]
good = {"iss": iss, "aud": aud, "sub": "alice", "exp": now + 3600, "iat": now}
signers = {"RS256": (rsa_key, "rsa"), "RS384": (rsa_key, "rsa"), "RS512": (rsa_key, "rsa"),
           "PS256": (rsa_key, "rsa"), "PS384": (rsa_key, "rsa"), "PS512": (rsa_key, "rsa"),
           "ES256": (p256, "p256"), "ES384": (p384, "p384"), "EdDSA": (ed, "ed"),
           "HS256": (secret, "hmac"), "HS384": (secret, "hmac"), "HS512": (secret, "hmac")}
tokens = {}
for alg, (key, kid) in signers.items():
    tokens[alg] = jwt.encode(good, key, algorithm=alg, headers={"kid": prefix + kid})
def rs(claims, kid="rsa"):
    return jwt.encode(claims, rsa_key, algorithm="RS256", headers={"kid": prefix + kid})
tokens["no_kid"] = jwt.encode(good, p256, algorithm="ES256")
tokens["expired"] = rs(dict(good, exp=now - 3600))
tokens["not_yet_valid"] = rs(dict(good, nbf=now + 3600))
tokens["wrong_aud"] = rs(dict(good, aud="someone-else"))
tokens["wrong_iss"] = rs(dict(good, iss="https://evil.example.com"))
tokens["unknown_kid"] = rs(good, kid="gone")
tokens["none"] = jwt.encode(good, None, algorithm="none")
print(json.dumps({"jwks": {"keys": keys}, "tokens": tokens}))
"#;
    let out = Command::new("python3")
        .args(["-c", SCRIPT, kid_prefix, iss, aud])
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "the PyJWT helper failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A CA and a server certificate for `name` signed by it (PEM files in `dir`).
pub struct Pki {
    pub ca: PathBuf,
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
}

pub fn pki(dir: &Path, name: &str) -> Pki {
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "jwks test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    let ca = dir.join("jwks-ca.pem");
    std::fs::write(&ca, ca_cert.pem()).unwrap();
    Pki {
        ca,
        cert_der: cert.der().to_vec(),
        key_der: key.serialize_der(),
    }
}

/// Serves the current contents of `file` over HTTPS to any GET, until dropped.
pub struct JwksServer {
    pub addr: SocketAddr,
    pub fetches: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
}

impl JwksServer {
    pub fn start(pki: &Pki, file: PathBuf) -> JwksServer {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![pki.cert_der.clone().into()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(pki.key_der.clone().into()),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let fetches = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (f, s) = (fetches.clone(), stop.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if s.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(tcp) = conn else { continue };
                let _ = serve(&config, tcp, &file, &f);
            }
        });
        JwksServer {
            addr,
            fetches,
            stop,
        }
    }

    pub fn fetches(&self) -> usize {
        self.fetches.load(Ordering::SeqCst)
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.addr);
    }
}

fn serve(
    config: &Arc<rustls::ServerConfig>,
    tcp: TcpStream,
    file: &Path,
    fetches: &AtomicUsize,
) -> std::io::Result<()> {
    tcp.set_read_timeout(Some(Duration::from_secs(5)))?;
    let conn = rustls::ServerConnection::new(config.clone()).map_err(std::io::Error::other)?;
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tls.read(&mut buf)?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
    }
    fetches.fetch_add(1, Ordering::SeqCst);
    let body = std::fs::read(file)?;
    let mut response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    response.extend_from_slice(&body);
    tls.write_all(&response)?;
    tls.conn.send_close_notify();
    tls.flush()
}

//! A peer must never be able to make hoist panic: random bytes, truncated and mutated
//! ClientHellos, and garbage after a completed handshake, on TLS and plaintext listeners. Each
//! ends in a clean close; hoist keeps serving and prints no panic.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use support::*;

/// xorshift: a fixed seed makes every run send the same inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A real ClientHello from rustls' client, as the first flight of a handshake.
fn client_hello() -> Vec<u8> {
    let config = rustls::ClientConfig::builder()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAll))
        .with_no_client_auth();
    let mut conn =
        rustls::ClientConnection::new(Arc::new(config), "localhost".try_into().unwrap()).unwrap();
    let mut out = Vec::new();
    conn.write_tls(&mut out).unwrap();
    out
}

fn send(addr: SocketAddr, data: &[u8]) {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let _ = s.write_all(data);
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
}

#[test]
fn garbage_never_panics_hoist() {
    let dir = TempDir::new("garbage");
    let cert = rsa_cert(&dir, "rsa", "localhost", 2048);
    let yaml = bootstrap(&format!(
        "{}{}",
        tls_listener(
            "tls",
            &cert,
            "            alpn_protocols: [h2, http/1.1]\n",
            &[]
        ),
        plain_listener("plain", "plain", &[], "")
    ));
    let cfg = dir.write("envoy.yaml", yaml);
    let hoist = Hoist::start(&cfg, &["--concurrency", "2"]);
    let tls = hoist.addr("tls");
    let plain = hoist.addr("plain");
    let hello = client_hello();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for i in 0..300 {
        let input: Vec<u8> = match i % 4 {
            // Random bytes.
            0 => (0..rng.below(600) + 1).map(|_| rng.next() as u8).collect(),
            // A truncated hello.
            1 => hello[..rng.below(hello.len())].to_vec(),
            // A hello with a few bytes flipped.
            2 => {
                let mut h = hello.clone();
                for _ in 0..(1 + rng.below(4)) {
                    let at = rng.below(h.len());
                    h[at] ^= (rng.next() as u8) | 1;
                }
                h
            }
            // A TLS-looking record header with a random length and body.
            _ => {
                let len = rng.below(20000) as u16;
                let mut r = vec![0x16, 0x03, 0x01, (len >> 8) as u8, len as u8];
                r.extend((0..rng.below(2000)).map(|_| rng.next() as u8));
                r
            }
        };
        send(tls, &input);
        if i % 3 == 0 {
            send(plain, &input);
        }
    }
    // Still serving on both listeners.
    let out = curl(&["-k", &format!("https://{tls}/")]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from hoist\n");
    let (code, _) = http_request(plain, "GET", "/");
    assert_eq!(code, 200);
    let panics: Vec<String> = hoist
        .stderr_lines()
        .into_iter()
        .filter(|l| l.contains("panicked"))
        .collect();
    assert!(
        panics.is_empty(),
        "{} panics, first: {:?}",
        panics.len(),
        panics.first()
    );
    assert!(hoist.stat("listener.127.0.0.1_0.ssl.connection_error") > 0);
}

#[derive(Debug)]
struct AcceptAll;

impl rustls::client::danger::ServerCertVerifier for AcceptAll {
    fn verify_server_cert(
        &self,
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &[rustls::pki_types::CertificateDer<'_>],
        _: &rustls::pki_types::ServerName<'_>,
        _: &[u8],
        _: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &rustls::pki_types::CertificateDer<'_>,
        _: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        Ok(rustls::client::danger::HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        rustls::crypto::aws_lc_rs::default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
}

//! The server against Python's ssl module (OpenSSL underneath, but a different client
//! state machine than s_client): large file-backed bodies, close_notify, garbage, and a
//! request sent in the same flight as the client's Finished.
// Helpers outside #[test] functions may unwrap too: a panic here is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::{Command, Stdio};

use common::*;
use sha2::{Digest, Sha256};

fn python(server: &TestServer, mode: &str, arg: &str) -> (bool, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/tls_client.py");
    let child = Command::new("python3")
        .args([script, mode, &server.port(), arg])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_guarded(child);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn body_sha256(n: usize) -> String {
    let body: Vec<u8> = (0..n).map(pattern).collect();
    Sha256::digest(&body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn no_session_errors(server: &TestServer) {
    let errors: Vec<_> = server
        .events
        .snapshot()
        .into_iter()
        .filter(|e| {
            matches!(
                e,
                Event::SessionError { .. } | Event::HandshakeFailed { .. }
            )
        })
        .collect();
    assert!(errors.is_empty(), "{errors:?}");
}

#[test]
fn ten_megabytes_file_backed() {
    let p = pki();
    let server = TestServer::start(&context(&[&p.ecdsa_a]));
    // 16384 - 8: head and body fill the first record exactly.
    for n in [BODY_LEN, 16384 - 8, 16384 - 7, 1, 0] {
        let (ok, out) = python(&server, "sha256", &n.to_string());
        assert!(ok, "{out}");
        assert_eq!(
            out.split_whitespace().next().unwrap(),
            body_sha256(n),
            "{n}"
        );
    }
    server
        .events
        .wait_count("clean ends", 5, |e| matches!(e, Event::SessionEnd("quit")));
    no_session_errors(&server);
}

#[test]
fn ten_megabytes_over_tls12() {
    let p = pki();
    let mut ctx = context(&[&p.rsa_a]);
    ctx.tls_params.max_version = hoist_config::model::tls::TlsVersion::Tls1_2;
    let server = TestServer::start(&ctx);
    let (ok, out) = python(&server, "sha256", &BODY_LEN.to_string());
    assert!(ok, "{out}");
    let mut words = out.split_whitespace();
    assert_eq!(words.next().unwrap(), body_sha256(BODY_LEN));
    assert_eq!(words.next().unwrap(), "TLSv1.2");
}

#[test]
fn close_notify_both_ways() {
    let p = pki();
    let server = TestServer::start(&context(&[&p.ecdsa_a]));
    let (ok, out) = python(&server, "close_notify", "");
    assert!(ok, "{out}");
    assert!(out.contains("clean"));
    // The client's close_notify reads as EOF (not an error), and the server answers with its own.
    server
        .events
        .wait_for("eof", |e| matches!(e, Event::SessionEnd("eof")));
    no_session_errors(&server);
}

#[test]
fn request_in_the_same_flight_as_finished() {
    let p = pki();
    let server = TestServer::start(&context(&[&p.ecdsa_a]));
    for version in ["TLSv1_3", "TLSv1_2"] {
        let (ok, out) = python(&server, "same_flight", version);
        assert!(ok, "{version}: {out}");
        assert_eq!(out.split_whitespace().next().unwrap(), body_sha256(1000));
    }
}

#[test]
fn garbage_after_the_handshake_is_an_error_not_a_panic() {
    let p = pki();
    let server = TestServer::start(&context(&[&p.ecdsa_a]));
    for (i, kind) in ["record", "text"].into_iter().enumerate() {
        let (ok, out) = python(&server, "garbage", kind);
        assert!(ok, "{kind}: {out}");
        server.events.wait_count("InvalidData", i + 1, |e| {
            matches!(
                e,
                Event::SessionError {
                    kind: std::io::ErrorKind::InvalidData,
                    ..
                }
            )
        });
    }
    // The server still serves.
    let (ok, out) = python(&server, "sha256", "100");
    assert!(ok, "{out}");
}

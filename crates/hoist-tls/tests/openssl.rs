//! The server against `openssl s_client`: versions, the six TLS 1.2 suites, certificate
//! selection, ALPN, client certificates, resumption, KeyUpdate.
// Helpers outside #[test] functions may unwrap too: a panic here is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use hoist_config::model::tls::{CipherSuite, Curve, SanMatch, SanType, TlsVersion};

fn tls12_ctx() -> hoist_config::model::tls::DownstreamTlsContext {
    let p = pki();
    context(&[&p.rsa_a, &p.ecdsa_a])
}

#[test]
fn tls12_each_default_cipher() {
    let server = TestServer::start(&tls12_ctx());
    for suite in CipherSuite::ALL {
        let name = suite.openssl_name();
        let (ok, out, err) = s_client(&server, &["-tls1_2", "-cipher", name], "INFO\nQUIT\n");
        assert!(ok, "{name}: {err}\n{out}");
        let info = parse_info(&out);
        assert_eq!(info["version"], "TLSv1.2", "{name}");
        assert_eq!(info["cipher"], name);
        assert!(out.contains(&format!("Cipher is {name}")), "{out}");
        // The key type follows the suite: RSA suites get the RSA certificate.
        let want_sig = if name.contains("RSA") {
            "rsa_"
        } else {
            "ecdsa_"
        };
        assert!(
            info["sigalg"].starts_with(want_sig),
            "{name}: {:?}",
            info["sigalg"]
        );
    }
}

#[test]
fn tls13_with_server_preference() {
    let server = TestServer::start(&tls12_ctx());
    let (ok, out, err) = s_client(&server, &["-tls1_3"], "INFO\nQUIT\n");
    assert!(ok, "{err}");
    let info = parse_info(&out);
    assert_eq!(info["version"], "TLSv1.3");
    // OpenSSL prefers AES-256 first; the server's order (AES-128 first) wins.
    assert_eq!(info["cipher"], "TLS_AES_128_GCM_SHA256");
    assert_eq!(info["curve"], "X25519");
    assert_eq!(info["sigalg"], "ecdsa_secp256r1_sha256");
    assert_eq!(info["reused"], "false");

    let (ok, out, _) = s_client(
        &server,
        &[
            "-tls1_3",
            "-ciphersuites",
            "TLS_CHACHA20_POLY1305_SHA256",
            "-groups",
            "P-256",
            "-sigalgs",
            "rsa_pss_rsae_sha256",
        ],
        "INFO\nQUIT\n",
    );
    assert!(ok);
    let info = parse_info(&out);
    assert_eq!(info["cipher"], "TLS_CHACHA20_POLY1305_SHA256");
    assert_eq!(info["curve"], "P-256");
    // RSA-PSS only: the RSA certificate is chosen although ECDSA is preferred.
    assert_eq!(info["sigalg"], "rsa_pss_rsae_sha256");
    assert!(out.contains("Server public key is 2048 bit"), "{out}");
}

#[test]
fn sni_selects_the_certificate() {
    let p = pki();
    let server = TestServer::start(&context(&[&p.ecdsa_a, &p.rsa_b]));
    let (ok, out, _) = s_client(&server, &["-servername", "b.test"], "INFO\nQUIT\n");
    assert!(ok);
    assert!(out.contains("subject=CN = b.test"), "{out}");
    assert_eq!(parse_info(&out)["sni"], "b.test");

    let (ok, out, _) = s_client(&server, &["-servername", "A.Test"], "INFO\nQUIT\n");
    assert!(ok);
    assert!(out.contains("subject=CN = a.test"), "{out}");
    assert_eq!(parse_info(&out)["sni"], "a.test");

    // Unknown name: no certificate matches, so all are candidates and ECDSA wins.
    let (ok, out, _) = s_client(&server, &["-servername", "c.test"], "INFO\nQUIT\n");
    assert!(ok);
    assert!(out.contains("subject=CN = a.test"), "{out}");
}

#[test]
fn alpn() {
    let mut ctx = tls12_ctx();
    ctx.alpn_protocols = vec!["h2".into(), "http/1.1".into()];
    let server = TestServer::start(&ctx);
    let (ok, out, _) = s_client(&server, &["-alpn", "http/1.1,h2"], "INFO\nQUIT\n");
    assert!(ok);
    assert!(out.contains("ALPN protocol: h2"), "{out}");
    assert_eq!(parse_info(&out)["alpn"], "h2");

    let (ok, out, _) = s_client(&server, &["-alpn", "http/1.1"], "INFO\nQUIT\n");
    assert!(ok);
    assert!(out.contains("ALPN protocol: http/1.1"), "{out}");
}

#[test]
fn cipher_not_allowed_fails_the_handshake() {
    let mut ctx = tls12_ctx();
    ctx.tls_params.max_version = TlsVersion::Tls1_2;
    ctx.tls_params.cipher_suites = vec![vec![CipherSuite::EcdheRsaAes128GcmSha256]];
    let server = TestServer::start(&ctx);
    let (ok, out, _) = s_client(
        &server,
        &["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"],
        "INFO\nQUIT\n",
    );
    assert!(!ok, "{out}");
    assert!(!out.contains("version="));
    let e = server.events.wait_for("handshake failure", |e| {
        matches!(e, Event::HandshakeFailed { .. })
    });
    let Event::HandshakeFailed { reason, .. } = e else {
        unreachable!()
    };
    assert_eq!(reason, "no_shared_cipher");

    // The allowed one works, and only with the RSA certificate.
    let (ok, out, _) = s_client(
        &server,
        &["-tls1_2", "-cipher", "ECDHE-RSA-AES128-GCM-SHA256"],
        "INFO\nQUIT\n",
    );
    assert!(ok);
    assert_eq!(parse_info(&out)["cipher"], "ECDHE-RSA-AES128-GCM-SHA256");
}

#[test]
fn cipher_groups_keep_written_order() {
    let mut ctx = tls12_ctx();
    ctx.tls_params.cipher_suites = vec![
        vec![
            CipherSuite::EcdheEcdsaAes256GcmSha384,
            CipherSuite::EcdheEcdsaChacha20Poly1305,
        ],
        vec![CipherSuite::EcdheEcdsaAes128GcmSha256],
    ];
    ctx.tls_params.ecdh_curves = vec![Curve::P256];
    let server = TestServer::start(&ctx);
    let (ok, out, _) = s_client(
        &server,
        &["-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES256-GCM-SHA384"],
        "INFO\nQUIT\n",
    );
    assert!(ok);
    let info = parse_info(&out);
    assert_eq!(info["cipher"], "ECDHE-ECDSA-AES256-GCM-SHA384");
    assert_eq!(info["curve"], "P-256");
}

#[test]
fn version_bounds() {
    let mut ctx = tls12_ctx();
    ctx.tls_params.min_version = TlsVersion::Tls1_3;
    let server = TestServer::start(&ctx);
    let (ok, _, _) = s_client(&server, &["-tls1_2"], "INFO\nQUIT\n");
    assert!(!ok);
    let (ok, out, _) = s_client(&server, &[], "INFO\nQUIT\n");
    assert!(ok);
    assert_eq!(parse_info(&out)["version"], "TLSv1.3");

    let mut ctx = tls12_ctx();
    ctx.tls_params.min_version = TlsVersion::Tls1_0; // clamped to 1.2
    ctx.tls_params.max_version = TlsVersion::Tls1_2;
    let server = TestServer::start(&ctx);
    let (ok, _, _) = s_client(&server, &["-tls1_3"], "INFO\nQUIT\n");
    assert!(!ok);
    let (ok, out, _) = s_client(&server, &[], "INFO\nQUIT\n");
    assert!(ok);
    assert_eq!(parse_info(&out)["version"], "TLSv1.2");
}

#[test]
fn client_certificate_required() {
    let p = pki();
    let mut ctx = tls12_ctx();
    ctx.validation_context = Some(validation(vec![SanMatch {
        san_type: SanType::Uri,
        exact: "spiffe://hoist/client".into(),
    }]));
    ctx.require_client_certificate = true;
    let server = TestServer::start(&ctx);

    let cert = p.client.cert.to_str().unwrap();
    let key = p.client.key.to_str().unwrap();
    for version in ["-tls1_2", "-tls1_3"] {
        let (ok, out, err) = s_client(
            &server,
            &[version, "-cert", cert, "-key", key],
            "INFO\nQUIT\n",
        );
        assert!(ok, "{err}");
        assert_eq!(parse_info(&out)["subject"], openssl_subject(&p.client.cert));
    }

    // No certificate.
    let (_, out, _) = s_client(&server, &["-tls1_3"], "INFO\nQUIT\n");
    assert!(!out.contains("version="), "{out}");
    let e = server.events.wait_for("handshake failure", |e| {
        matches!(e, Event::HandshakeFailed { .. })
    });
    assert!(
        matches!(
            e,
            Event::HandshakeFailed {
                reason: "bad_certificate",
                ..
            }
        ),
        "{e:?}"
    );

    // A certificate from the right CA with the wrong SAN.
    let (_, out, _) = s_client(
        &server,
        &[
            "-tls1_2",
            "-cert",
            p.other_client.cert.to_str().unwrap(),
            "-key",
            p.other_client.key.to_str().unwrap(),
        ],
        "INFO\nQUIT\n",
    );
    assert!(!out.contains("version="), "{out}");
    server.events.wait_count("second failure", 2, |e| {
        matches!(
            e,
            Event::HandshakeFailed {
                reason: "bad_certificate",
                ..
            }
        )
    });
}

#[test]
fn client_certificate_optional() {
    let p = pki();
    let mut ctx = tls12_ctx();
    ctx.validation_context = Some(validation(Vec::new()));
    let server = TestServer::start(&ctx);
    let (ok, out, _) = s_client(&server, &[], "INFO\nQUIT\n");
    assert!(ok);
    assert_eq!(parse_info(&out)["subject"], "-");
    let (ok, out, _) = s_client(
        &server,
        &[
            "-cert",
            p.client.cert.to_str().unwrap(),
            "-key",
            p.client.key.to_str().unwrap(),
        ],
        "INFO\nQUIT\n",
    );
    assert!(ok);
    assert_eq!(parse_info(&out)["subject"], openssl_subject(&p.client.cert));
}

/// The subject as `openssl x509 -nameopt RFC2253` prints it: what Envoy reports.
fn openssl_subject(cert: &std::path::Path) -> String {
    let out = std::process::Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-nameopt", "RFC2253", "-in"])
        .arg(cert)
        .output()
        .unwrap();
    let s = String::from_utf8(out.stdout).unwrap();
    s.trim().strip_prefix("subject=").unwrap().to_string()
}

/// Connects twice, saving then offering the session; returns whether the second was resumed
/// (as both s_client and the server report it).
fn resume(first: &TestServer, second: &TestServer, args: &[&str], name: &str) -> bool {
    let sess = tmp_dir("sessions").join(name);
    let sess = sess.to_str().unwrap();
    let mut a = args.to_vec();
    a.extend(["-sess_out", sess]);
    let (ok, out, err) = s_client(first, &a, "INFO\nQUIT\n");
    assert!(ok, "{err}");
    assert_eq!(parse_info(&out)["reused"], "false");
    let mut a = args.to_vec();
    a.extend(["-sess_in", sess]);
    let (ok, out, err) = s_client(second, &a, "INFO\nQUIT\n");
    assert!(ok, "{err}");
    let reused = parse_info(&out)["reused"] == "true";
    assert_eq!(reused, out.contains("Reused,"), "{out}");
    reused
}

#[test]
fn resumption_tickets_and_session_ids() {
    let server = TestServer::start(&tls12_ctx());
    assert!(resume(&server, &server, &["-tls1_3"], "t13"));
    assert!(resume(&server, &server, &["-tls1_2"], "t12"));
    assert!(resume(
        &server,
        &server,
        &["-tls1_2", "-no_ticket"],
        "t12_id"
    ));

    // Tickets off: TLS 1.2 falls back to the session cache; TLS 1.3 resumes statefully.
    let mut ctx = tls12_ctx();
    ctx.session_tickets = false;
    let server = TestServer::start(&ctx);
    assert!(resume(&server, &server, &["-tls1_2"], "off12"));
    assert!(resume(&server, &server, &["-tls1_3"], "off13"));
}

#[test]
fn session_ticket_keys_are_shared_and_rotate() {
    let key = |b: u8| (0..80u8).map(|i| i ^ b).collect::<Vec<u8>>();
    let with_keys = |keys: Vec<Vec<u8>>| {
        let mut ctx = tls12_ctx();
        ctx.session_ticket_keys = keys;
        TestServer::start(&ctx)
    };
    let a = with_keys(vec![key(1)]);
    let b = with_keys(vec![key(1)]);
    let rotated = with_keys(vec![key(2), key(1)]);
    let other = with_keys(vec![key(3)]);
    for v in ["-tls1_2", "-tls1_3"] {
        assert!(resume(&a, &b, &[v], &format!("shared{v}")), "{v}");
        assert!(resume(&a, &rotated, &[v], &format!("rotated{v}")), "{v}");
        assert!(!resume(&a, &other, &[v], &format!("other{v}")), "{v}");
    }
}

/// Collects a child's output in the background so the test can wait for what it expects.
struct Collector(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Collector {
    fn start(mut from: impl std::io::Read + Send + 'static) -> Collector {
        let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let b = buf.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 65536];
            while let Ok(n) = from.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                b.lock().unwrap().extend_from_slice(&chunk[..n]);
            }
        });
        Collector(buf)
    }

    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until `f` accepts the output (bounded: a guard against hangs, not a timing).
    fn wait(&self, what: &str, f: impl Fn(&[u8]) -> bool) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !f(&self.0.lock().unwrap()) {
            assert!(
                std::time::Instant::now() < deadline,
                "timed out waiting for {what}"
            );
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

#[test]
fn large_body_and_key_update() {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let server = TestServer::start(&tls12_ctx());
    // -quiet keeps stdout to the data; -no_ign_eof re-enables the command letters (K) and
    // closing on stdin EOF, which -quiet turns off.
    let mut child = Command::new("openssl")
        .args([
            "s_client",
            "-connect",
            &server.connect_arg(),
            "-tls1_3",
            "-quiet",
            "-no_ign_eof",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let out = Collector::start(child.stdout.take().unwrap());
    let err = Collector::start(child.stderr.take().unwrap());
    server
        .events
        .wait_for("handshake", |e| matches!(e, Event::Handshake(_)));

    let n = 300_000;
    let body: Vec<u8> = (0..n).map(pattern).collect();
    let mut expect = Vec::new();
    let send = |stdin: &mut std::process::ChildStdin,
                expect: &mut Vec<u8>,
                line: &str,
                expect_more: &[u8]| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.flush().unwrap();
        expect.extend_from_slice(expect_more);
        let want = expect.len();
        out.wait(line, |o| o.len() >= want);
    };
    let response = [format!("OK {n}\n").as_bytes(), &body].concat();
    send(&mut stdin, &mut expect, &format!("GET {n}\n"), &response);
    // `K` on a line of its own: s_client sends a KeyUpdate that requests ours.
    stdin.write_all(b"K\n").unwrap();
    stdin.flush().unwrap();
    err.wait("KEYUPDATE", |e| {
        String::from_utf8_lossy(e).contains("KEYUPDATE")
    });
    send(&mut stdin, &mut expect, &format!("GET {n}\n"), &response);
    send(&mut stdin, &mut expect, "ECHO done\n", b"done\n");
    drop(stdin); // EOF: s_client sends close_notify and exits
    let status = wait_guarded(child).status;
    assert!(
        status.success(),
        "{}",
        String::from_utf8_lossy(&err.bytes())
    );
    assert!(
        out.bytes() == expect,
        "got {} bytes, want {}",
        out.bytes().len(),
        expect.len()
    );
    server
        .events
        .wait_for("session end", |e| matches!(e, Event::SessionEnd("eof")));
    assert!(!server
        .events
        .snapshot()
        .iter()
        .any(|e| matches!(e, Event::SessionError { .. })));
}

//! Building server contexts: errors name the YAML path and the reason.
// Helpers outside #[test] functions may unwrap too: a panic here is a failed test.
#![allow(clippy::unwrap_used)]

mod common;

use std::process::Command;

use common::*;
use hoist_config::model::core::DataSource;
use hoist_config::model::tls::TlsVersion;
use hoist_tls::ServerContext;

fn build_err(ctx: &hoist_config::model::tls::DownstreamTlsContext) -> hoist_tls::TlsConfigError {
    ServerContext::build(ctx).unwrap_err()
}

#[test]
fn key_that_does_not_match_the_certificate() {
    let p = pki();
    let mut ctx = context(&[&p.rsa_b, &p.ecdsa_a]);
    ctx.tls_certificates[1].private_key = file_source(&p.rsa_a.key);
    let e = build_err(&ctx);
    assert_eq!(e.yaml_path, "test.common_tls_context.tls_certificates[1]");
    assert!(e.reason.contains("does not match"), "{e}");
    assert!(e
        .to_string()
        .starts_with("test.common_tls_context.tls_certificates[1]: "));
}

#[test]
fn unsupported_and_missing_keys() {
    let p = pki();
    let dir = tmp_dir("keys");
    let ed448 = dir.join("ed448.key");
    let ok = Command::new("openssl")
        .args(["genpkey", "-algorithm", "ed448", "-out"])
        .arg(&ed448)
        .status()
        .unwrap();
    assert!(ok.success());
    let mut ctx = context(&[&p.ecdsa_a]);
    ctx.tls_certificates[0].private_key = file_source(&ed448);
    let e = build_err(&ctx);
    assert_eq!(e.yaml_path, "test.common_tls_context.tls_certificates[0]");
    assert!(e.reason.contains("unsupported key"), "{e}");

    ctx.tls_certificates[0].private_key = DataSource::Inline(b"no key here".to_vec());
    assert!(build_err(&ctx).reason.contains("private_key"));

    ctx.tls_certificates[0].private_key = DataSource::File {
        path: dir.join("missing.key"),
        size: 0,
    };
    assert!(build_err(&ctx).reason.contains("cannot read"));
}

#[test]
fn empty_chain() {
    let p = pki();
    let mut ctx = context(&[&p.ecdsa_a]);
    ctx.tls_certificates[0].certificate_chain = DataSource::Inline(b"# nothing\n".to_vec());
    let e = build_err(&ctx);
    assert_eq!(e.yaml_path, "test.common_tls_context.tls_certificates[0]");
    assert!(e.reason.contains("no certificate"), "{e}");
}

#[test]
fn context_level_errors() {
    let p = pki();
    let no_certs = context(&[]);
    assert_eq!(build_err(&no_certs).yaml_path, "test");

    let mut ctx = context(&[&p.ecdsa_a]);
    ctx.require_client_certificate = true;
    let e = build_err(&ctx);
    assert!(e.reason.contains("validation_context"), "{e}");

    let mut ctx = context(&[&p.ecdsa_a]);
    ctx.tls_params.min_version = TlsVersion::Tls1_3;
    ctx.tls_params.max_version = TlsVersion::Tls1_2;
    assert!(build_err(&ctx).reason.contains("below the minimum"));

    let mut ctx = context(&[&p.ecdsa_a]);
    ctx.session_ticket_keys = vec![vec![7; 80], vec![7; 79]];
    let e = build_err(&ctx);
    assert_eq!(e.yaml_path, "test.session_ticket_keys.keys[1]");

    let mut ctx = context(&[&p.ecdsa_a]);
    let mut vc = validation(Vec::new());
    vc.trusted_ca = DataSource::Inline(Vec::new());
    ctx.validation_context = Some(vc);
    assert_eq!(
        build_err(&ctx).yaml_path,
        "test.common_tls_context.validation_context"
    );
}

#[test]
fn settings_kernel_tls_depends_on() {
    let p = pki();
    let mut ctx = context(&[&p.ecdsa_a]);
    ctx.alpn_protocols = vec!["h2".into(), "http/1.1".into()];
    ctx.tls_params.min_version = TlsVersion::Tls1_0; // clamped, not refused
    let sc = ServerContext::build(&ctx).unwrap();
    assert_eq!(sc.alpn(), [b"h2".to_vec(), b"http/1.1".to_vec()]);
    let cfg = sc.config();
    assert!(cfg.enable_secret_extraction);
    assert_eq!(cfg.max_early_data_size, 0);
    assert!(cfg.ignore_client_order);
    assert!(cfg.ticketer.enabled());

    ctx.session_tickets = false;
    assert!(!ServerContext::build(&ctx)
        .unwrap()
        .config()
        .ticketer
        .enabled());
}

/// With kernel TLS, offloadable suites come first; the configured order holds within each
/// group, and nothing is added or dropped.
#[test]
fn offloadable_suites_first() {
    use rustls::CipherSuite as S;
    let p = pki();
    let ctx = context(&[&p.ecdsa_a]);
    let names =
        |sc: &ServerContext| -> Vec<S> { sc.cipher_suites().iter().map(|s| s.suite()).collect() };
    let plain = ServerContext::build(&ctx).unwrap();
    // A kernel without ChaCha20: it moves behind both AES-GCM suites in each version.
    let no_chacha = ServerContext::build_preferring(&ctx, &|s| {
        !matches!(
            s.suite(),
            S::TLS13_CHACHA20_POLY1305_SHA256
                | S::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
                | S::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        )
    })
    .unwrap();
    let before = names(&plain);
    let after = names(&no_chacha);
    assert_eq!(before.len(), after.len());
    let chacha_at = after
        .iter()
        .position(|s| format!("{s:?}").contains("CHACHA"))
        .unwrap();
    assert!(
        after[chacha_at..]
            .iter()
            .all(|s| format!("{s:?}").contains("CHACHA")),
        "{after:?}"
    );
    let keep = |v: &[S], chacha: bool| -> Vec<S> {
        v.iter()
            .copied()
            .filter(|s| format!("{s:?}").contains("CHACHA") == chacha)
            .collect()
    };
    assert_eq!(keep(&before, false), keep(&after, false));
    assert_eq!(keep(&before, true), keep(&after, true));
    assert_ne!(
        before, after,
        "the default order has ChaCha20 before some AES suites"
    );
}

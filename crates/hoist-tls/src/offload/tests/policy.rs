//! The probe (over the emulator and the real kernel) and the per-connection plan.

use std::collections::BTreeSet;

use rustls::ProtocolVersion;

use super::*;
use crate::offload::crypto_info::{KernelCipher, KernelVersion};
use crate::offload::emulator::{Fault, Op};
use crate::offload::probe::{probe_with, Capabilities};
use crate::offload::{kernel_pair, plan, Plan, Reason, TlsOffloadMode};

fn all_pairs() -> BTreeSet<(KernelVersion, KernelCipher)> {
    KernelVersion::ALL
        .iter()
        .flat_map(|v| KernelCipher::ALL.iter().map(move |c| (*v, *c)))
        .collect()
}

#[test]
fn probe_of_a_full_kernel() {
    let caps = probe_with(&Emulator::new(Config::default()));
    assert!(caps.available());
    assert_eq!(caps.tx, all_pairs());
    assert_eq!(caps.rx, all_pairs());
    assert!(caps.rekey);
    assert_eq!(
        caps.summary(),
        "kTLS: TX+RX for TLS1.2/1.3 AES-128-GCM AES-256-GCM CHACHA20-POLY1305; rekey: yes"
    );
    let old = probe_with(&Emulator::new(Config {
        rekey: false,
        ..Config::default()
    }));
    assert!(!old.rekey);
    assert!(old.summary().ends_with("rekey: no"), "{}", old.summary());
}

#[test]
fn probe_without_module_or_cipher() {
    let none = probe_with(&Emulator::new(Config {
        faults: vec![Fault {
            op: Op::AttachUlp,
            skip: 0,
            errno: libc::ENOENT,
        }],
        ..Config::default()
    }));
    assert!(!none.available());
    assert_eq!(none.summary(), "kTLS: unavailable (no tls module: ENOENT)");

    // No ChaCha20 in the kernel's crypto API: its TX and RX keys fail with ENOENT. The probe
    // sets TX keys in order 1.2 AES-128, AES-256, ChaCha, then 1.3 AES-128 (twice: rekey),
    // AES-256, ChaCha; RX keys once per pair.
    let fault = |op, skip| Fault {
        op,
        skip,
        errno: libc::ENOENT,
    };
    let caps = probe_with(&Emulator::new(Config {
        faults: vec![
            fault(Op::SetTx, 2),
            fault(Op::SetTx, 6),
            fault(Op::SetRx, 2),
            fault(Op::SetRx, 5),
        ],
        ..Config::default()
    }));
    assert!(caps.available());
    assert!(!caps.supports((KernelVersion::Tls12, KernelCipher::Chacha20Poly1305)));
    assert!(caps.supports((KernelVersion::Tls13, KernelCipher::Aes256Gcm)));
    assert_eq!(
        caps.summary(),
        "kTLS: TX+RX for TLS1.2/1.3 AES-128-GCM AES-256-GCM; rekey: yes"
    );
    assert_eq!(caps.failures.len(), 4, "{:?}", caps.failures);
    assert!(caps.failures[0].contains("CHACHA20-POLY1305 tx: ENOENT"));
}

/// On the machine running the tests: unavailable exactly when no tls module is loaded or
/// loadable, and quick either way.
#[test]
fn probe_of_this_kernel() {
    let caps = probe_with(&crate::offload::sys::Linux);
    if caps.available() {
        assert!(caps.summary().starts_with("kTLS: TX"), "{}", caps.summary());
    } else {
        assert!(
            !std::path::Path::new("/sys/module/tls").exists(),
            "tls module loaded but probe says {}",
            caps.summary()
        );
        let reason = caps.unavailable.clone().unwrap_or_default();
        assert!(
            reason.contains("ENOENT") || reason.contains("EPERM"),
            "{reason}"
        );
    }
    assert!(caps.took < Duration::from_secs(2), "{:?}", caps.took);
}

#[test]
fn plan_follows_policy_probe_and_negotiation() {
    let full = probe_with(&Emulator::new(Config::default()));
    let none = Capabilities::unavailable("no tls module: ENOENT");
    let mut no_tls13 = full.clone();
    no_tls13.tx.retain(|(v, _)| *v == KernelVersion::Tls12);
    let mut no_chacha = full.clone();
    no_chacha
        .rx
        .retain(|(_, c)| *c != KernelCipher::Chacha20Poly1305);
    let v13 = Some(ProtocolVersion::TLSv1_3);
    let aes = Some(TLS13);
    let chacha = Some(cipher_suite::TLS13_CHACHA20_POLY1305_SHA256);
    use TlsOffloadMode::*;
    assert_eq!(plan(Auto, &full, v13, aes), Plan::Offload);
    assert_eq!(plan(Require, &full, v13, aes), Plan::Offload);
    assert_eq!(
        plan(Off, &full, v13, aes),
        Plan::UserSpace(Reason::PolicyOff)
    );
    assert_eq!(
        plan(Auto, &none, v13, aes),
        Plan::UserSpace(Reason::KernelUnsupported)
    );
    assert_eq!(
        plan(Require, &none, v13, aes),
        Plan::Close(Reason::KernelUnsupported)
    );
    assert_eq!(
        plan(Auto, &no_tls13, v13, aes),
        Plan::UserSpace(Reason::VersionUnsupported)
    );
    assert_eq!(
        plan(Auto, &no_chacha, v13, chacha),
        Plan::UserSpace(Reason::CipherUnsupported)
    );
    assert_eq!(
        plan(Require, &no_chacha, v13, chacha),
        Plan::Close(Reason::CipherUnsupported)
    );
    assert_eq!(plan(Auto, &no_chacha, v13, aes), Plan::Offload);
}

#[test]
fn every_configurable_suite_maps_to_a_kernel_cipher() {
    for s in suites() {
        assert!(kernel_pair(s).is_some(), "{s:?}");
    }
    assert_eq!(
        kernel_pair(cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
        Some((KernelVersion::Tls12, KernelCipher::Aes256Gcm))
    );
    assert_eq!(Reason::SetsockoptFailed.as_str(), "setsockopt_failed");
}

//! Kernel errors injected into the switch and the transport, and records a peer should never
//! send: every one ends in a fallback, or a clean close with its reason reported, never a panic.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::offload::emulator::{Call, Fault, Op};
use crate::offload::sys::{
    RECORD_ALERT, RECORD_APPLICATION_DATA, RECORD_CHANGE_CIPHER_SPEC, RECORD_HANDSHAKE,
};
use crate::offload::{ErrorReason, OffloadEvent, Reason};
use crate::UserTlsTransport;

fn faults(list: &[(Op, usize, i32)]) -> Config {
    Config {
        faults: list
            .iter()
            .map(|&(op, skip, errno)| Fault { op, skip, errno })
            .collect(),
        ..Config::default()
    }
}

/// A failed ULP attach (no module, peer gone) leaves the connection to user-space TLS.
#[test]
fn ulp_failure_falls_back_to_user_space() {
    for errno in [libc::ENOENT, libc::ENOTCONN, libc::EPERM] {
        run(
            TLS13,
            faults(&[(Op::AttachUlp, 0, errno)]),
            |mut c| {
                c.write_all(b"hello");
                assert_eq!(c.read_n(5).unwrap(), b"hello");
                c.close_notify();
            },
            move |t, _, _| async move {
                let Err(SwitchError::Fallback {
                    established,
                    reason,
                    error,
                }) = t
                else {
                    panic!("expected a fallback");
                };
                assert_eq!(reason, Reason::SetsockoptFailed);
                assert_eq!(error.raw_os_error(), Some(errno));
                let mut u = UserTlsTransport::new(*established);
                let mut b = [0u8; 5];
                u.read_exact(&mut b).await.unwrap();
                u.write_all(&b).await.unwrap();
                u.flush().await.unwrap();
                assert_eq!(u.read(&mut b).await.unwrap(), 0);
                u.shutdown().await.unwrap();
            },
        );
    }
}

/// Once the secrets are out of rustls, a refused key loses the connection.
#[test]
fn key_setup_failure_is_fatal() {
    for (op, errno) in [
        (Op::SetTx, libc::EINVAL),
        (Op::SetTx, libc::ENOENT),
        (Op::SetRx, libc::ENOMEM),
        (Op::SetRx, libc::EBUSY),
    ] {
        run(
            TLS12,
            faults(&[(op, 0, errno)]),
            |mut c| {
                let mut b = [0u8; 4];
                assert!(
                    c.read_some(&mut b).is_err(),
                    "the server drops the connection"
                );
            },
            move |t, _, _| async move {
                match t {
                    Err(SwitchError::Failed { reason, error }) => {
                        assert_eq!(reason, Reason::KeySetupFailed);
                        assert!(error.starts_with("TLS_"), "{error}");
                    }
                    _ => panic!("expected a failed switch"),
                }
            },
        );
    }
}

/// Errors after which the kernel has aborted: reported once, no close_notify.
#[test]
fn kernel_read_errors() {
    for (errno, reason) in [
        (libc::EBADMSG, ErrorReason::DecryptError),
        (libc::EMSGSIZE, ErrorReason::RecordOverflow),
        (libc::EINVAL, ErrorReason::InvalidRecord),
        (libc::EIO, ErrorReason::Kernel),
        (libc::EKEYEXPIRED, ErrorReason::KeyExpired),
    ] {
        run(
            TLS13,
            faults(&[(Op::Recv, 0, errno)]),
            |mut c| {
                c.write_all(b"x");
                let mut b = [0u8; 4];
                // FIN without close_notify.
                assert!(c.read_some(&mut b).is_err());
            },
            move |t, emu, events| async move {
                let mut t = switched(t);
                let e = t.read(&mut [0u8; 64]).await.unwrap_err();
                assert_eq!(e.raw_os_error(), Some(errno));
                // Reported again, not retried.
                assert!(t.read(&mut [0u8; 64]).await.is_err());
                assert!(t.write_all(b"no").await.is_err());
                let _ = t.shutdown().await;
                assert_eq!(*events.borrow(), vec![OffloadEvent::Error(reason)]);
                assert!(!emu
                    .log()
                    .iter()
                    .any(|c| matches!(c, Call::SendRecord { .. })));
            },
        );
    }
}

#[test]
fn send_errors_and_short_writes() {
    // A reset peer (EPIPE) is not a kTLS error.
    run(
        TLS13,
        faults(&[(Op::Send, 1, libc::EPIPE)]),
        |mut c| {
            let _ = c.read_n(3);
        },
        |t, _, events| async move {
            let mut t = switched(t);
            t.write_all(b"abc").await.unwrap();
            let e = t.write_all(b"def").await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
            assert!(t.write_all(b"ghi").await.is_err());
            assert!(events.borrow().is_empty());
        },
    );
    // Short writes: every byte still arrives, in order.
    let cfg = Config {
        max_chunk: 3,
        ..Config::default()
    };
    run(
        TLS12,
        cfg,
        |mut c| {
            assert_eq!(c.read_n(26).unwrap(), b"abcdefghijklmnopqrstuvwxyz");
            c.close_notify();
        },
        |t, _, _| async move {
            let mut t = switched(t);
            t.write_all(b"abcdefghijklmnopqrstuvwxyz").await.unwrap();
            t.flush().await.unwrap();
            assert_eq!(t.read(&mut [0u8; 4]).await.unwrap(), 0);
        },
    );
}

/// Alerts: close_notify ends the stream, warnings are ignored where TLS allows, fatal alerts
/// end the connection without an answer.
#[test]
fn peer_alerts() {
    run(
        TLS12,
        Config::default(),
        |c| {
            let mut p = c.into_raw();
            p.send(RECORD_ALERT, &[1, 100]); // no_renegotiation warning: ignored in TLS 1.2
            p.send(RECORD_APPLICATION_DATA, b"a");
            p.send(RECORD_ALERT, &[1, 90]); // user_canceled: ignored
            p.send(RECORD_APPLICATION_DATA, b"b");
            p.send(RECORD_ALERT, &[2, 40]); // handshake_failure: fatal
            assert_eq!(p.recv(), None, "no answer to a fatal alert");
        },
        |t, emu, events| async move {
            let mut t = switched(t);
            let mut b = [0u8; 2];
            t.read_exact(&mut b).await.unwrap();
            assert_eq!(&b, b"ab");
            let e = t.read(&mut b).await.unwrap_err();
            assert!(e.to_string().contains("alert 40"), "{e}");
            drop(t);
            assert_eq!(
                *events.borrow(),
                vec![OffloadEvent::Error(ErrorReason::PeerAlert)]
            );
            assert!(!emu
                .log()
                .iter()
                .any(|c| matches!(c, Call::SendRecord { .. })));
        },
    );
    // TLS 1.3: a warning-level alert other than close_notify and user_canceled is fatal.
    run(
        TLS13,
        Config::default(),
        |c| {
            let mut p = c.into_raw();
            p.send(RECORD_ALERT, &[1, 100]);
            assert_eq!(p.recv(), None);
        },
        |t, _, events| async move {
            let mut t = switched(t);
            assert!(t.read(&mut [0u8; 64]).await.is_err());
            drop(t);
            assert_eq!(
                *events.borrow(),
                vec![OffloadEvent::Error(ErrorReason::PeerAlert)]
            );
        },
    );
}

/// Records with no place after the handshake get unexpected_message; small reads still see
/// every control record whole.
#[test]
fn unexpected_records_get_an_alert() {
    let cases: [(SupportedCipherSuite, u8, &[u8]); 5] = [
        (TLS13, RECORD_HANDSHAKE, &[4, 0, 0, 0]), // NewSessionTicket from a client
        (TLS13, RECORD_HANDSHAKE, &[24, 0, 0, 1, 7]), // KeyUpdate with a bad request value
        (TLS12, RECORD_HANDSHAKE, &[1, 0, 0, 0]), // renegotiation attempt
        (TLS12, RECORD_CHANGE_CIPHER_SPEC, &[1]),
        (TLS13, 99, b"what"),
    ];
    for (suite, ty, payload) in cases {
        run(
            suite,
            Config::default(),
            move |c| {
                let mut p = c.into_raw();
                p.send(RECORD_APPLICATION_DATA, b"ok");
                p.send(ty, payload);
                assert_eq!(p.recv(), Some((RECORD_ALERT, vec![2, 10])));
                assert_eq!(p.recv(), None);
            },
            move |t, _, events| async move {
                let mut t = switched(t);
                // One byte at a time: the control record still arrives whole.
                let mut b = [0u8; 1];
                t.read_exact(&mut b).await.unwrap();
                t.read_exact(&mut b).await.unwrap();
                assert!(t.read(&mut b).await.is_err(), "type {ty}");
                let _ = t.shutdown().await;
                assert_eq!(
                    *events.borrow(),
                    vec![OffloadEvent::Error(ErrorReason::UnexpectedMessage)]
                );
            },
        );
    }
}

/// Garbage instead of a record: the kernel fails authentication (EBADMSG).
#[test]
fn garbage_after_the_handshake() {
    run(
        TLS13,
        Config::default(),
        |mut c| {
            use std::io::Write;
            c.sock
                .write_all(&[
                    23, 3, 3, 0, 20, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18,
                    19, 20,
                ])
                .unwrap();
            let mut b = [0u8; 4];
            assert!(c.read_some(&mut b).is_err());
        },
        |t, emu, events| async move {
            let mut t = switched(t);
            let e = t.read(&mut [0u8; 64]).await.unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EBADMSG));
            let _ = t.shutdown().await;
            assert_eq!(
                *events.borrow(),
                vec![OffloadEvent::Error(ErrorReason::DecryptError)]
            );
            assert!(!emu
                .log()
                .iter()
                .any(|c| matches!(c, Call::SendRecord { .. })));
        },
    );
}

//! The transport over the emulated kernel, against a real rustls client: data both ways for
//! every offloadable suite, close_notify both ways, file bodies with short writes, KeyUpdate
//! with and without kernel rekey, and the record limit.

use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::file::{FileRegion, MappedFile};
use crate::offload::emulator::Call;
use crate::offload::sys::{Direction, RECORD_ALERT, RECORD_HANDSHAKE};
use crate::offload::{ErrorReason, OffloadEvent};
use crate::transport::Transport;

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 13) as u8 ^ seed)
        .collect()
}

#[test]
fn echo_and_close_notify_both_ways_for_every_suite() {
    for suite in suites() {
        let data = pattern(200_000, 7);
        let expect = data.clone();
        run(
            suite,
            Config::default(),
            move |mut c| {
                c.write_all(&data);
                let back = c.read_n(data.len()).unwrap();
                assert!(back == data, "{suite:?}: echo differs");
                c.close_notify();
                // The server answers our close_notify with its own: a clean end.
                let mut rest = [0u8; 16];
                assert_eq!(c.read_some(&mut rest).unwrap(), 0, "{suite:?}");
            },
            move |t, emu, events| async move {
                let mut t = switched(t);
                let mut got = vec![0u8; expect.len()];
                t.read_exact(&mut got).await.unwrap();
                assert!(got == expect);
                t.write_all(&got).await.unwrap();
                t.flush().await.unwrap();
                let mut more = [0u8; 8];
                assert_eq!(t.read(&mut more).await.unwrap(), 0, "close_notify is EOF");
                t.shutdown().await.unwrap();
                let log = emu.log();
                let sets: Vec<_> = log
                    .iter()
                    .filter(|c| matches!(c, Call::SetCrypto { .. }))
                    .collect();
                assert_eq!(sets.len(), 2, "{log:?}");
                assert!(matches!(
                    sets[0],
                    Call::SetCrypto {
                        dir: Direction::Tx,
                        ..
                    }
                ));
                assert!(matches!(
                    sets[1],
                    Call::SetCrypto {
                        dir: Direction::Rx,
                        ..
                    }
                ));
                assert!(log.contains(&Call::SendRecord {
                    record_type: RECORD_ALERT,
                    data: vec![1, 0]
                }));
                assert!(events.borrow().is_empty(), "{:?}", events.borrow());
            },
        );
    }
}

#[test]
fn file_body_head_with_more_and_short_writes() {
    let dir = std::env::temp_dir().join(format!("hoist-ktls-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("body.bin");
    let body = pattern(300_001, 3);
    std::fs::write(&path, &body).unwrap();
    let head = b"HTTP/1.1 200 OK\r\ncontent-length: 300001\r\n\r\n".to_vec();
    let mut expect = head.clone();
    expect.extend_from_slice(&body);
    let cfg = Config {
        max_chunk: 7000,
        ..Config::default()
    };
    let total = expect.len();
    run(
        TLS13,
        cfg,
        move |mut c| {
            let got = c.read_n(total + 1).unwrap();
            assert!(got == expect, "body differs ({} bytes)", got.len());
        },
        move |t, emu, _| async move {
            let mut t = switched(t);
            let file = MappedFile::open(&path).unwrap();
            let region = FileRegion::whole(Arc::clone(&file));
            t.write_file(&head, &region).await.unwrap();
            t.shutdown().await.unwrap();
            let log = emu.log();
            let first_send = log.iter().find(|c| matches!(c, Call::Send { .. }));
            assert_eq!(
                first_send,
                Some(&Call::Send {
                    len: head.len(),
                    more: true
                })
            );
            let chunks: Vec<usize> = log
                .iter()
                .filter_map(|c| match c {
                    Call::Sendfile { len } => Some(*len),
                    _ => None,
                })
                .collect();
            assert!(chunks.len() >= 300_001 / 7000, "{chunks:?}");
            assert!(chunks.iter().all(|n| *n <= 7000));
            assert_eq!(chunks.iter().sum::<usize>(), 300_001);
            let _ = std::fs::remove_dir_all(&dir);
        },
    );
}

#[test]
fn tls13_key_update_rekeys_both_directions() {
    run(
        TLS13,
        Config::default(),
        |mut c| {
            c.write_all(b"ping1");
            assert_eq!(c.read_n(5).unwrap(), b"ping1");
            c.conn.refresh_traffic_keys().unwrap();
            c.write_all(b"ping2");
            // Decrypting this needs the server's new key, announced by its KeyUpdate.
            assert_eq!(c.read_n(5).unwrap(), b"ping2");
            c.close_notify();
        },
        |t, emu, events| async move {
            let mut t = switched(t);
            for _ in 0..2 {
                let mut b = [0u8; 5];
                t.read_exact(&mut b).await.unwrap();
                t.write_all(&b).await.unwrap();
                t.flush().await.unwrap();
            }
            assert_eq!(t.read(&mut [0u8; 4]).await.unwrap(), 0);
            t.shutdown().await.unwrap();
            let log = emu.log();
            let rekey_rx = log.iter().position(|c| {
                matches!(
                    c,
                    Call::SetCrypto {
                        dir: Direction::Rx,
                        seq: 0,
                        ..
                    }
                )
            });
            let reply = log.iter().position(|c| {
                *c == Call::SendRecord {
                    record_type: RECORD_HANDSHAKE,
                    data: vec![24, 0, 0, 1, 0],
                }
            });
            let rekey_tx = log.iter().rposition(|c| {
                matches!(
                    c,
                    Call::SetCrypto {
                        dir: Direction::Tx,
                        seq: 0,
                        ..
                    }
                )
            });
            assert!(
                rekey_rx.is_some() && reply.is_some() && rekey_tx.is_some(),
                "{log:?}"
            );
            assert!(rekey_rx < reply && reply < rekey_tx, "{log:?}");
            assert_eq!(
                *events.borrow(),
                vec![
                    OffloadEvent::Rekey(Direction::Rx),
                    OffloadEvent::Rekey(Direction::Tx)
                ]
            );
        },
    );
}

#[test]
fn key_update_without_kernel_rekey_is_a_clean_close() {
    let cfg = Config {
        rekey: false,
        ..Config::default()
    };
    run(
        TLS13,
        cfg,
        |mut c| {
            c.write_all(b"before");
            assert_eq!(c.read_n(6).unwrap(), b"before");
            c.conn.refresh_traffic_keys().unwrap();
            c.write_all(b"after");
            // No data under the old key, then close_notify: rustls reports a clean end.
            let mut b = [0u8; 8];
            assert_eq!(c.read_some(&mut b).unwrap(), 0);
        },
        |t, emu, events| async move {
            let mut t = switched(t);
            let mut b = [0u8; 6];
            t.read_exact(&mut b).await.unwrap();
            t.write_all(&b).await.unwrap();
            t.flush().await.unwrap();
            assert_eq!(
                t.read(&mut [0u8; 8]).await.unwrap(),
                0,
                "EOF after KeyUpdate"
            );
            let e = t.write_all(b"no").await.unwrap_err();
            assert_eq!(e.kind(), std::io::ErrorKind::BrokenPipe);
            t.shutdown().await.unwrap();
            assert_eq!(
                *events.borrow(),
                vec![OffloadEvent::Error(ErrorReason::RekeyUnsupported)]
            );
            assert!(emu.log().contains(&Call::SendRecord {
                record_type: RECORD_ALERT,
                data: vec![1, 0]
            }));
        },
    );
}

#[test]
fn record_limit_rekeys_on_tls13() {
    let data = pattern(200_000, 9);
    let expect = data.clone();
    run(
        TLS13,
        Config::default(),
        move |mut c| {
            assert!(c.read_n(expect.len()).unwrap() == expect);
            c.close_notify();
        },
        move |t, emu, events| async move {
            let mut t = switched(t);
            t.set_record_limit(5);
            for chunk in data.chunks(20_000) {
                t.write_all(chunk).await.unwrap();
            }
            t.flush().await.unwrap();
            assert_eq!(t.read(&mut [0u8; 4]).await.unwrap(), 0);
            t.shutdown().await.unwrap();
            assert!(t.records_sent() <= 5);
            let updates = emu
                .log()
                .iter()
                .filter(|c| {
                    **c == Call::SendRecord {
                        record_type: RECORD_HANDSHAKE,
                        data: vec![24, 0, 0, 1, 0],
                    }
                })
                .count();
            assert!(updates >= 3, "{updates} KeyUpdates");
            let tx_rekeys = events
                .borrow()
                .iter()
                .filter(|e| **e == OffloadEvent::Rekey(Direction::Tx))
                .count();
            assert_eq!(tx_rekeys, updates);
        },
    );
}

#[test]
fn record_limit_closes_tls12_gracefully() {
    run(
        TLS12,
        Config::default(),
        |mut c| {
            let mut got = Vec::new();
            let mut buf = [0u8; 65536];
            loop {
                match c.read_some(&mut buf).unwrap() {
                    0 => break,
                    n => got.extend_from_slice(&buf[..n]),
                }
            }
            // What was sent before the limit arrived whole, then close_notify.
            assert!(!got.is_empty() && got.iter().all(|b| *b == 0x61));
        },
        |t, _emu, events| async move {
            let mut t = switched(t);
            t.set_record_limit(4);
            let chunk = vec![0x61u8; 10_000];
            let mut err = None;
            for _ in 0..10 {
                if let Err(e) = t.write_all(&chunk).await {
                    err = Some(e);
                    break;
                }
            }
            let err = err.expect("the record limit stops writes");
            assert_eq!(err.kind(), std::io::ErrorKind::BrokenPipe);
            t.shutdown().await.unwrap();
            assert_eq!(
                *events.borrow(),
                vec![OffloadEvent::Error(ErrorReason::RecordLimit)]
            );
        },
    );
}

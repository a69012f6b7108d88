//! The rustls unbuffered state machine, without any I/O: ciphertext goes in through
//! `incoming`, plaintext comes out in `plain`, and everything to send (handshake messages,
//! alerts, encrypted application data) is appended to `out` in the order rustls produced it.
//!
//! One [`RecordLayer::drive`] call processes every complete record in `incoming` before it
//! returns, so the caller decides alone when to read from the socket: the handshake reads one
//! record at a time (kTLS needs the rest left in the kernel), the user-space transport reads
//! large chunks. The incoming buffer is always the one passed to rustls, also on the write path,
//! because rustls keeps partial handshake messages in it between calls.

use rustls::unbuffered::{ConnectionState, EncodeError, EncryptError, UnbufferedStatus};

use crate::buf::ByteBuf;
use crate::side::Side;

/// What to do once rustls allows application data to be sent.
#[derive(Clone, Copy)]
pub(crate) enum Action<'a> {
    Nothing,
    Encrypt(&'a [u8]),
    CloseNotify,
}

/// Where [`RecordLayer::drive`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    /// Every complete record is processed and the action (if any) is done.
    Writable,
    /// The handshake needs more records from the peer.
    Blocked,
    /// Both sides have sent close_notify; nothing more can be sent.
    Closed,
}

/// TLS record overhead budget per 16 KiB record when sizing the output buffer: header (5),
/// explicit nonce (8, TLS 1.2 GCM), content type (1, TLS 1.3), tag (16), with room to spare.
const RECORD_OVERHEAD: usize = 64;
const MAX_FRAGMENT: usize = 16384;

pub(crate) struct RecordLayer<C> {
    pub(crate) conn: C,
    pub(crate) incoming: ByteBuf,
    pub(crate) plain: ByteBuf,
    pub(crate) out: ByteBuf,
    peer_closed: bool,
    /// The fatal error, once there was one: rustls must not be driven again after it (it
    /// would process the offending bytes a second time).
    failed: Option<rustls::Error>,
}

impl<C: Side> RecordLayer<C> {
    pub(crate) fn new(conn: C, in_cap: usize, out_cap: usize) -> RecordLayer<C> {
        RecordLayer {
            conn,
            incoming: ByteBuf::with_capacity(in_cap),
            plain: ByteBuf::with_capacity(0),
            out: ByteBuf::with_capacity(out_cap),
            peer_closed: false,
            failed: None,
        }
    }

    /// The peer sent close_notify: no more plaintext will come after what is in `plain`.
    pub(crate) fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    /// Processes all complete records in `incoming`, collecting plaintext and output, then
    /// performs `action` if application data may be sent. On a fatal error the alert rustls
    /// queued is already in `out`.
    pub(crate) fn drive(&mut self, action: Action<'_>) -> Result<Step, rustls::Error> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        loop {
            let UnbufferedStatus { mut discard, state } =
                self.conn.process(self.incoming.filled_mut());
            let outcome = match state {
                Err(e) => Err(e),
                Ok(ConnectionState::ReadTraffic(mut traffic)) => {
                    let mut res = Ok(None);
                    while let Some(record) = traffic.next_record() {
                        match record {
                            Ok(r) => {
                                discard += r.discard;
                                self.plain.extend_from_slice(r.payload);
                            }
                            Err(e) => {
                                res = Err(e);
                                break;
                            }
                        }
                    }
                    res
                }
                Ok(ConnectionState::EncodeTlsData(mut data)) => {
                    encode(&mut self.out, |buf| data.encode(buf)).map(|()| None)
                }
                Ok(ConnectionState::TransmitTlsData(data)) => {
                    // The bytes are in `out`; the owner of `out` sends them before anything
                    // encrypted later, which is all rustls asks.
                    data.done();
                    Ok(None)
                }
                Ok(ConnectionState::BlockedHandshake) => Ok(Some(Step::Blocked)),
                Ok(ConnectionState::PeerClosed) => {
                    self.peer_closed = true;
                    Ok(None)
                }
                Ok(ConnectionState::Closed) => {
                    self.peer_closed = true;
                    Ok(Some(Step::Closed))
                }
                Ok(ConnectionState::WriteTraffic(mut traffic)) => {
                    let done = match action {
                        Action::Nothing => Ok(()),
                        Action::Encrypt(data) => encrypt(&mut self.out, data, |plain, buf| {
                            traffic.encrypt(plain, buf)
                        }),
                        Action::CloseNotify => {
                            encrypt(&mut self.out, &[], |_, buf| traffic.queue_close_notify(buf))
                        }
                    };
                    done.map(|()| Some(Step::Writable))
                }
                Ok(ConnectionState::ReadEarlyData(_)) => Err(rustls::Error::General(
                    "early data received although max_early_data_size is 0".into(),
                )),
                Ok(_) => Err(rustls::Error::General(
                    "unexpected TLS connection state".into(),
                )),
            };
            self.incoming.consume(discard);
            match outcome {
                Ok(Some(step)) => return Ok(step),
                Ok(None) => {}
                Err(e) => {
                    self.collect_alert();
                    self.failed = Some(e.clone());
                    return Err(e);
                }
            }
        }
    }

    /// After a fatal error rustls has queued an alert. Each call with messages queued hands out
    /// one of them before looking at the input again, so stopping when the queue is empty
    /// keeps rustls from processing the offending bytes twice.
    fn collect_alert(&mut self) {
        while self.conn.wants_write() {
            let UnbufferedStatus { discard, state } = self.conn.process(self.incoming.filled_mut());
            let encoded = match state {
                Ok(ConnectionState::EncodeTlsData(mut data)) => {
                    encode(&mut self.out, |buf| data.encode(buf)).is_ok()
                }
                _ => false,
            };
            self.incoming.consume(discard);
            if !encoded {
                break;
            }
        }
    }
}

fn encode(
    out: &mut ByteBuf,
    mut f: impl FnMut(&mut [u8]) -> Result<usize, EncodeError>,
) -> Result<(), rustls::Error> {
    let mut want = 4096;
    loop {
        match f(out.spare(want)) {
            Ok(n) => {
                out.commit(n);
                return Ok(());
            }
            Err(EncodeError::InsufficientSize(s)) if s.required_size > want => {
                want = s.required_size
            }
            Err(e) => {
                return Err(rustls::Error::General(format!(
                    "encoding a TLS record: {e}"
                )))
            }
        }
    }
}

fn encrypt(
    out: &mut ByteBuf,
    plain: &[u8],
    mut f: impl FnMut(&[u8], &mut [u8]) -> Result<usize, EncryptError>,
) -> Result<(), rustls::Error> {
    let mut want = plain.len() + (plain.len() / MAX_FRAGMENT + 1) * RECORD_OVERHEAD;
    loop {
        match f(plain, out.spare(want)) {
            Ok(n) => {
                out.commit(n);
                return Ok(());
            }
            Err(EncryptError::InsufficientSize(s)) if s.required_size > want => {
                want = s.required_size
            }
            Err(EncryptError::EncryptExhausted) => return Err(rustls::Error::EncryptError),
            Err(e) => {
                return Err(rustls::Error::General(format!(
                    "encrypting a TLS record: {e}"
                )))
            }
        }
    }
}

//! What the kernel leaves to hoist on a kTLS socket: the records that are not application
//! data. Received: alerts, the peer's TLS 1.3 KeyUpdate (new keys through rustls'
//! KernelConnection), anything unexpected (a fatal alert back). Sent: close_notify, fatal
//! alerts and hoist's own KeyUpdate, queued as [`Control`] records and written with a
//! TLS_SET_RECORD_TYPE cmsg before any more application data.

use std::io;
use std::os::fd::AsFd;
use std::task::{ready, Context, Poll};

use tokio::io::Interest;

use super::crypto_info::CryptoInfo;
use super::sys::{Direction, Sys, RECORD_ALERT, RECORD_HANDSHAKE};
use super::transport::{KtlsTransport, ReadSide, WriteSide};
use super::{ErrorReason, OffloadEvent};
use crate::side::Side;

pub(super) const ALERT_WARNING: u8 = 1;
pub(super) const ALERT_FATAL: u8 = 2;
pub(super) const ALERT_CLOSE_NOTIFY: u8 = 0;
pub(super) const ALERT_UNEXPECTED_MESSAGE: u8 = 10;
pub(super) const ALERT_INTERNAL_ERROR: u8 = 80;
pub(super) const ALERT_USER_CANCELED: u8 = 90;
pub(super) const HANDSHAKE_NEW_SESSION_TICKET: u8 = 4;
pub(super) const HANDSHAKE_KEY_UPDATE: u8 = 24;

/// A record hoist sends itself, and what to do once it is out.
#[derive(Clone, Copy, Debug)]
pub(super) struct Control {
    pub(super) record_type: u8,
    pub(super) bytes: [u8; 5],
    pub(super) len: usize,
    pub(super) sent: usize,
    pub(super) then: Then,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Then {
    Nothing,
    /// Our KeyUpdate is out: the next records use the new TX key.
    InstallTxKey,
}

impl Control {
    pub(super) fn alert(level: u8, description: u8) -> Control {
        Control {
            record_type: RECORD_ALERT,
            bytes: [level, description, 0, 0, 0],
            len: 2,
            sent: 0,
            then: Then::Nothing,
        }
    }

    pub(super) fn key_update(update_requested: bool) -> Control {
        Control {
            record_type: RECORD_HANDSHAKE,
            bytes: [HANDSHAKE_KEY_UPDATE, 0, 0, 1, u8::from(update_requested)],
            len: 5,
            sent: 0,
            then: Then::InstallTxKey,
        }
    }
}

/// What a control record means for the read in progress.
pub(super) enum Flow {
    Continue,
    Eof,
    Fail(io::Error),
}

impl<S: Sys, C: Side> KtlsTransport<S, C> {
    /// Sends the queued control records, then does what each asks for afterwards.
    pub(super) fn poll_pending(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while let Some(ctl) = self.pending.front().copied() {
            if self.write == WriteSide::Failed {
                self.pending.clear();
                break;
            }
            ready!(self.tcp.poll_write_ready(cx))?;
            let (tcp, sys) = (&self.tcp, &self.sys);
            let res = tcp.try_io(Interest::WRITABLE, || {
                sys.send_record(tcp.as_fd(), ctl.record_type, &ctl.bytes[ctl.sent..ctl.len])
            });
            match res {
                Ok(n) => {
                    let sent = ctl.sent + n;
                    if sent < ctl.len {
                        if let Some(front) = self.pending.front_mut() {
                            front.sent = sent;
                        }
                        continue;
                    }
                    self.pending.pop_front();
                    self.budget.charge_record();
                    if ctl.then == Then::InstallTxKey {
                        if let Err(e) = self.install_key(Direction::Tx) {
                            self.write = WriteSide::Failed;
                            self.report(ErrorReason::RekeyFailed);
                            return Poll::Ready(Err(e));
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => {
                    self.pending.clear();
                    return Poll::Ready(Err(self.write_failed(e)));
                }
            }
        }
        Poll::Ready(Ok(()))
    }

    /// Asks rustls for the next secret of `dir` and hands it to the kernel.
    pub(super) fn install_key(&mut self, dir: Direction) -> io::Result<()> {
        let next = match dir {
            Direction::Tx => self.kernel.update_tx_secret(),
            Direction::Rx => self.kernel.update_rx_secret(),
        };
        let (seq, secrets) = next.map_err(|e| io::Error::other(format!("TLS key update: {e}")))?;
        let info = CryptoInfo::from_secrets(self.version, seq, &secrets)
            .map_err(|e| io::Error::other(format!("TLS key update: {e}")))?;
        drop(secrets);
        self.sys.set_crypto(self.tcp.as_fd(), dir, &info)?;
        if dir == Direction::Tx {
            self.budget.reset();
        }
        self.emit(OffloadEvent::Rekey(dir));
        Ok(())
    }

    pub(super) fn queue_close_notify(&mut self) {
        if matches!(self.write, WriteSide::Open | WriteSide::Stopped(_)) {
            self.write = WriteSide::Closed;
            self.pending
                .push_back(Control::alert(ALERT_WARNING, ALERT_CLOSE_NOTIFY));
        }
    }

    /// A whole record that is not application data arrived (`eor`: the kernel marked its end;
    /// false only when the stream ended inside it).
    pub(super) fn on_control(
        &mut self,
        cx: &mut Context<'_>,
        record_type: u8,
        head: &[u8],
        eor: bool,
    ) -> Flow {
        let len = head.len();
        match record_type {
            RECORD_ALERT if len == 2 && eor => {
                let (level, description) = (head[0], head[1]);
                if description == ALERT_CLOSE_NOTIFY {
                    return Flow::Eof;
                }
                // TLS 1.3 makes every alert but these two fatal; TLS 1.2 warnings are ignored.
                if description == ALERT_USER_CANCELED || (level == ALERT_WARNING && !self.tls13) {
                    return Flow::Continue;
                }
                self.fail_read(
                    cx,
                    ErrorReason::PeerAlert,
                    format!("peer sent fatal alert {description}"),
                    None,
                )
            }
            RECORD_HANDSHAKE
                if self.tls13 && eor && head.first() == Some(&HANDSHAKE_NEW_SESSION_TICKET) =>
            {
                self.new_session_tickets(cx, head)
            }
            RECORD_HANDSHAKE
                if self.tls13
                    && len == 5
                    && eor
                    && head[..4] == [HANDSHAKE_KEY_UPDATE, 0, 0, 1]
                    && head[4] <= 1 =>
            {
                self.key_update(cx, head[4] == 1)
            }
            _ => self.fail_read(
                cx,
                ErrorReason::UnexpectedMessage,
                format!("unexpected TLS record of type {record_type} after the handshake"),
                Some(ALERT_UNEXPECTED_MESSAGE),
            ),
        }
    }

    /// The peer's TLS 1.3 KeyUpdate (RFC 8446 section 4.6.3).
    pub(super) fn key_update(&mut self, cx: &mut Context<'_>, update_requested: bool) -> Flow {
        if !self.can_rekey {
            // The kernel cannot take a new key: nothing after this record can be read, and
            // data under a key the peer asked us to retire must not be sent. End cleanly.
            self.report(ErrorReason::RekeyUnsupported);
            if update_requested && self.write == WriteSide::Open {
                self.write = WriteSide::Stopped(
                    "peer requested a TLS key update, which this kernel cannot install",
                );
            }
            return Flow::Eof;
        }
        if let Err(e) = self.install_key(Direction::Rx) {
            return self.fail_read(
                cx,
                ErrorReason::RekeyFailed,
                e.to_string(),
                Some(ALERT_INTERNAL_ERROR),
            );
        }
        let queued = self.pending.iter().any(|c| c.then == Then::InstallTxKey);
        if update_requested && !queued && self.write == WriteSide::Open {
            self.pending.push_back(Control::key_update(false));
            // Best effort now; a write, flush or shutdown sends it otherwise.
            if let Poll::Ready(Err(e)) = self.poll_pending(cx) {
                tracing::debug!("sending the KeyUpdate reply: {e}");
            }
        }
        Flow::Continue
    }

    /// TLS 1.3 NewSessionTickets (one record may hold several) from the server, on a client
    /// connection: rustls stores them for the next connection to the same upstream.
    fn new_session_tickets(&mut self, cx: &mut Context<'_>, mut record: &[u8]) -> Flow {
        while !record.is_empty() {
            let message = match record {
                [typ, a, b, c, rest @ ..] if *typ == HANDSHAKE_NEW_SESSION_TICKET => {
                    let len = u32::from_be_bytes([0, *a, *b, *c]) as usize;
                    (rest.len() >= len).then(|| rest.split_at(len))
                }
                _ => None,
            };
            let Some((payload, rest)) = message else {
                return self.fail_read(
                    cx,
                    ErrorReason::UnexpectedMessage,
                    "malformed or mixed handshake record after the handshake".into(),
                    Some(ALERT_UNEXPECTED_MESSAGE),
                );
            };
            match C::new_session_ticket(&mut self.kernel, payload) {
                None => {
                    return self.fail_read(
                        cx,
                        ErrorReason::UnexpectedMessage,
                        "NewSessionTicket sent to a server".into(),
                        Some(ALERT_UNEXPECTED_MESSAGE),
                    )
                }
                Some(Err(e)) => {
                    return self.fail_read(
                        cx,
                        ErrorReason::UnexpectedMessage,
                        format!("bad NewSessionTicket: {e}"),
                        Some(ALERT_UNEXPECTED_MESSAGE),
                    )
                }
                Some(Ok(())) => self.emit(OffloadEvent::SessionTicket),
            }
            record = rest;
        }
        Flow::Continue
    }

    pub(super) fn fail_read(
        &mut self,
        cx: &mut Context<'_>,
        reason: ErrorReason,
        message: String,
        alert: Option<u8>,
    ) -> Flow {
        self.report(reason);
        if let Some(description) = alert {
            if matches!(self.write, WriteSide::Open | WriteSide::Stopped(_)) {
                self.write = WriteSide::Closed;
                self.pending
                    .push_back(Control::alert(ALERT_FATAL, description));
                let _ = self.poll_pending(cx);
            }
        }
        self.read = ReadSide::Failed(io::ErrorKind::InvalidData, message.clone());
        Flow::Fail(io::Error::new(io::ErrorKind::InvalidData, message))
    }
}

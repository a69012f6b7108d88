//! The switch: a completed handshake becomes a kernel-TLS socket.
//!
//! Order matters. The ULP is attached first, while the rustls connection is still whole: with
//! the ULP but no keys the socket is still plain TCP, so a failure there (the peer already
//! closed: ENOTCONN; no module: ENOENT) hands the connection back for user-space TLS. Only then
//! are the secrets taken out of rustls, which consumes the connection; a failure from that
//! point on loses it.

use std::fmt;
use std::io;
use std::os::fd::AsFd;

use super::crypto_info::CryptoInfo;
use super::probe::errno_name;
use super::sys::{Direction, Linux, Sys};
use super::transport::KtlsTransport;
use super::{Capabilities, Reason};
use rustls::server::UnbufferedServerConnection;

use crate::handshake::Established;
use crate::side::Side;

/// Why the switch did not happen.
pub enum SwitchError<C = UnbufferedServerConnection> {
    /// Nothing changed that user-space TLS cannot continue from: here is the connection back.
    Fallback {
        established: Box<Established<C>>,
        reason: Reason,
        error: io::Error,
    },
    /// The secrets were taken out of rustls and the kernel refused them: the connection is
    /// lost and must be closed.
    Failed { reason: Reason, error: String },
}

impl<C> SwitchError<C> {
    pub fn reason(&self) -> Reason {
        match self {
            SwitchError::Fallback { reason, .. } | SwitchError::Failed { reason, .. } => *reason,
        }
    }
}

impl<C> fmt::Debug for SwitchError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl<C> fmt::Display for SwitchError<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SwitchError::Fallback { reason, error, .. } => {
                write!(f, "{reason}: {}", errno_name(error))
            }
            SwitchError::Failed { reason, error } => write!(f, "{reason}: {error}"),
        }
    }
}

/// Moves the record layer of `established` into the kernel.
pub fn switch<C: Side>(
    established: Established<C>,
    caps: &Capabilities,
) -> Result<KtlsTransport<Linux, C>, SwitchError<C>> {
    switch_with(established, Linux, caps.rekey)
}

/// [`switch`] through `sys`; `can_rekey` says whether the kernel installs new keys on a live
/// socket (from the probe).
pub fn switch_with<S: Sys, C: Side>(
    established: Established<C>,
    sys: S,
    can_rekey: bool,
) -> Result<KtlsTransport<S, C>, SwitchError<C>> {
    if let Err(error) = sys.attach_ulp(established.tcp.as_fd()) {
        return Err(SwitchError::Fallback {
            established: Box::new(established),
            reason: Reason::SetsockoptFailed,
            error,
        });
    }
    let Established { tcp, conn, info } = established;
    let (secrets, kernel) = conn.into_kernel().map_err(|e| SwitchError::Failed {
        reason: Reason::SecretExtraction,
        error: e.to_string(),
    })?;
    let version = kernel.protocol_version();
    let key_setup = |error: String| SwitchError::Failed {
        reason: Reason::KeySetupFailed,
        error,
    };
    let tx = CryptoInfo::from_secrets(version, secrets.tx.0, &secrets.tx.1)
        .map_err(|e| key_setup(e.to_string()))?;
    let rx = CryptoInfo::from_secrets(version, secrets.rx.0, &secrets.rx.1)
        .map_err(|e| key_setup(e.to_string()))?;
    drop(secrets);
    sys.set_crypto(tcp.as_fd(), Direction::Tx, &tx)
        .map_err(|e| key_setup(format!("TLS_TX: {}", errno_name(&e))))?;
    sys.set_crypto(tcp.as_fd(), Direction::Rx, &rx)
        .map_err(|e| key_setup(format!("TLS_RX: {}", errno_name(&e))))?;
    // Best effort: kernels before 6.0 do not know the option (ENOPROTOOPT).
    let no_pad = C::TRUSTED_PEER
        && version == rustls::ProtocolVersion::TLSv1_3
        && sys.expect_no_pad(tcp.as_fd()).is_ok();
    let mut t = KtlsTransport::new(tcp, sys, kernel, info, can_rekey);
    t.rx_expect_no_pad = no_pad;
    Ok(t)
}

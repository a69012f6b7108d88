//! Kernel TLS: after the handshake, the record layer moves into the kernel (and, when the NIC
//! supports it, into the NIC). The proxy then reads and writes plaintext on the socket, and
//! file-backed bodies go out with sendfile(2) without entering user space.
//!
//! - [`probe`]: once at start, what the kernel can offload (versions x ciphers, each
//!   direction, rekeying).
//! - [`plan`]: per connection, the policy (auto, off, require) against the probe and what the
//!   handshake negotiated, decided before the rustls connection is consumed.
//! - [`switch`]: ULP, secrets from rustls, TLS_TX and TLS_RX; the [`KtlsTransport`] after it.
//! - [`observe`]: per socket, whether the kernel (sw) or the NIC (hw) does the crypto
//!   ([`diag`], with [`tls_stat`] as the fallback witness).
//! - [`sys`]: the system calls (the only unsafe code of the workspace), behind a trait so tests
//!   can emulate the kernel or inject its errors.

mod control;
pub mod crypto_info;
pub mod diag;
mod observe;
pub mod probe;
pub mod records;
mod switch;
pub mod sys;
pub mod tls_stat;
mod transport;

#[cfg(test)]
mod emulator;
#[cfg(test)]
mod tests;

use std::fmt;

pub use hoist_config::model::TlsOffloadMode;
use rustls::{CipherSuite, ProtocolVersion, SupportedCipherSuite};

pub use crypto_info::{KernelCipher, KernelVersion};
pub use observe::{observe, Observed, Where};
pub use probe::{capabilities, Capabilities};
pub use switch::{switch, switch_with, SwitchError};
pub use sys::Direction;
pub use transport::KtlsTransport;

/// The kernel's (version, cipher) for a rustls suite; None for suites the kernel structures do
/// not cover.
pub fn kernel_pair(suite: SupportedCipherSuite) -> Option<(KernelVersion, KernelCipher)> {
    let version = KernelVersion::from_rustls(suite.version().version)?;
    let cipher = match suite.suite() {
        CipherSuite::TLS13_AES_128_GCM_SHA256
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        | CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => KernelCipher::Aes128Gcm,
        CipherSuite::TLS13_AES_256_GCM_SHA384
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        | CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => KernelCipher::Aes256Gcm,
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256
        | CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        | CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => {
            KernelCipher::Chacha20Poly1305
        }
        _ => return None,
    };
    Some((version, cipher))
}

/// Whether the kernel described by `caps` can take over connections using `suite`.
pub fn offloadable(caps: &Capabilities, suite: SupportedCipherSuite) -> bool {
    kernel_pair(suite).is_some_and(|p| caps.supports(p))
}

/// Why a connection is not offloaded; the name is the stat suffix
/// (`ssl.offload.fallback.<reason>`, `ssl.offload.closed.<reason>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The listener's policy is off.
    PolicyOff,
    /// The kernel has no kTLS (no tls module) or the probe failed.
    KernelUnsupported,
    /// The kernel offloads no cipher of the negotiated TLS version.
    VersionUnsupported,
    /// The kernel offloads the version but not the negotiated cipher.
    CipherUnsupported,
    /// Attaching the ULP failed on this socket (the peer already closed: ENOTCONN, ...).
    SetsockoptFailed,
    /// rustls would not hand over the secrets (cannot happen with hoist's configurations).
    SecretExtraction,
    /// TLS_TX or TLS_RX failed after the secrets were taken: the connection cannot continue.
    KeySetupFailed,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::PolicyOff => "policy_off",
            Reason::KernelUnsupported => "kernel_unsupported",
            Reason::VersionUnsupported => "version_unsupported",
            Reason::CipherUnsupported => "cipher_unsupported",
            Reason::SetsockoptFailed => "setsockopt_failed",
            Reason::SecretExtraction => "secret_extraction_failed",
            Reason::KeySetupFailed => "key_setup_failed",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What to do with a connection whose handshake just completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// Switch to kernel TLS.
    Offload,
    /// Keep the record layer in user space (rustls), for this reason.
    UserSpace(Reason),
    /// The policy requires offload and it is not possible: close the connection.
    Close(Reason),
}

/// Decides, from the policy, the probe and what the handshake negotiated, whether a connection
/// goes to the kernel. Runs before the rustls connection is consumed, so that every "no" can
/// still be served in user space.
pub fn plan(
    mode: TlsOffloadMode,
    caps: &Capabilities,
    version: Option<ProtocolVersion>,
    suite: Option<SupportedCipherSuite>,
) -> Plan {
    let reason = if mode == TlsOffloadMode::Off {
        Some(Reason::PolicyOff)
    } else if !caps.available() {
        Some(Reason::KernelUnsupported)
    } else {
        match (version.and_then(KernelVersion::from_rustls), suite) {
            (Some(v), Some(_)) if !caps.supports_version(v) => Some(Reason::VersionUnsupported),
            (Some(_), Some(s)) if !offloadable(caps, s) => Some(Reason::CipherUnsupported),
            (Some(_), Some(_)) => None,
            (None, _) => Some(Reason::VersionUnsupported),
            (Some(_), None) => Some(Reason::CipherUnsupported),
        }
    };
    match (reason, mode) {
        (None, _) => Plan::Offload,
        (Some(r), TlsOffloadMode::Require) => Plan::Close(r),
        (Some(r), _) => Plan::UserSpace(r),
    }
}

/// Something that happened on an offloaded connection, for its listener's stats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OffloadEvent {
    /// A TLS 1.3 KeyUpdate installed a new key in this direction (`ssl.offload.rekey_<dir>`).
    Rekey(Direction),
    /// The connection ends because of this (`ssl.offload.error.<reason>`).
    Error(ErrorReason),
    /// A client connection stored a TLS 1.3 session ticket that arrived after the switch.
    SessionTicket,
}

/// Why an offloaded connection ended early.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorReason {
    /// EBADMSG: a record failed authentication (garbage, tampering); the kernel aborted.
    DecryptError,
    /// EMSGSIZE: a record longer than TLS allows; the kernel aborted.
    RecordOverflow,
    /// EINVAL: a malformed record; the kernel aborted.
    InvalidRecord,
    /// EKEYEXPIRED: data after a KeyUpdate could not be read with a new key.
    KeyExpired,
    /// The peer sent a fatal alert.
    PeerAlert,
    /// A record or handshake message that has no place after the handshake.
    UnexpectedMessage,
    /// A TLS 1.3 KeyUpdate on a kernel that cannot install new keys (before 6.14).
    RekeyUnsupported,
    /// Installing a new key failed.
    RekeyFailed,
    /// The AES-GCM record limit was reached where no rekey is possible (TLS 1.2).
    RecordLimit,
    /// Another error from the kernel.
    Kernel,
}

impl ErrorReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorReason::DecryptError => "decrypt_error",
            ErrorReason::RecordOverflow => "record_overflow",
            ErrorReason::InvalidRecord => "invalid_record",
            ErrorReason::KeyExpired => "key_expired",
            ErrorReason::PeerAlert => "peer_alert",
            ErrorReason::UnexpectedMessage => "unexpected_message",
            ErrorReason::RekeyUnsupported => "rekey_unsupported",
            ErrorReason::RekeyFailed => "rekey_failed",
            ErrorReason::RecordLimit => "record_limit",
            ErrorReason::Kernel => "kernel_error",
        }
    }
}

/// Receives [`OffloadEvent`]s (the binary counts them in the listener's stats).
pub type EventSink = Box<dyn Fn(OffloadEvent)>;

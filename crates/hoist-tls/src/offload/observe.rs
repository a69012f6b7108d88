//! Who does the record crypto of an offloaded socket: the kernel (sw) or the NIC (hw).
//!
//! sock_diag answers per socket when hoist has CAP_NET_ADMIN. Without it, /proc/net/tls_stat
//! still proves software for a direction when the namespace has no device-offloaded socket in
//! that direction at all (TlsCurrTxDevice / TlsCurrRxDevice = 0, read while this socket is
//! open); otherwise the answer is "unknown".

use std::net::SocketAddr;

use super::diag::{self, Conf, Diag};
use super::tls_stat;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    Sw,
    Hw,
    Unknown,
}

impl Where {
    pub fn as_str(self) -> &'static str {
        match self {
            Where::Sw => "sw",
            Where::Hw => "hw",
            Where::Unknown => "unknown",
        }
    }

    fn from_conf(c: Conf) -> Where {
        match c {
            Conf::Sw => Where::Sw,
            Conf::Hw | Conf::HwRecord => Where::Hw,
            Conf::Base | Conf::Unknown(_) => Where::Unknown,
        }
    }
}

/// One socket's record-layer placement, and how it was learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Observed {
    pub tx: Where,
    pub rx: Where,
    /// "sock_diag", "tls_stat" or "none".
    pub source: &'static str,
}

impl Observed {
    /// For %DOWNSTREAM_TLS_OFFLOAD% and TlsInfo.offload: "hw" when the NIC does either
    /// direction, "sw" when the kernel does both, "unknown" otherwise.
    pub fn label(&self) -> &'static str {
        if self.tx == Where::Hw || self.rx == Where::Hw {
            "hw"
        } else if self.tx == Where::Sw && self.rx == Where::Sw {
            "sw"
        } else {
            "unknown"
        }
    }
}

/// Asks the kernel about the offloaded socket `local` <-> `remote`.
pub fn observe(local: SocketAddr, remote: SocketAddr) -> Observed {
    match diag::query(local, remote) {
        Ok(Diag::Tls(s)) => Observed {
            tx: Where::from_conf(s.tx),
            rx: Where::from_conf(s.rx),
            source: "sock_diag",
        },
        other => {
            if let Err(e) = &other {
                tracing::debug!("sock_diag for {local} <-> {remote}: {e}");
            }
            from_tls_stat()
        }
    }
}

fn from_tls_stat() -> Observed {
    match tls_stat::read() {
        Ok(Some(stats)) => {
            let dir = |name| {
                if tls_stat::value(&stats, name) == 0 {
                    Where::Sw
                } else {
                    Where::Unknown
                }
            };
            Observed {
                tx: dir("TlsCurrTxDevice"),
                rx: dir("TlsCurrRxDevice"),
                source: "tls_stat",
            }
        }
        _ => Observed {
            tx: Where::Unknown,
            rx: Where::Unknown,
            source: "none",
        },
    }
}

//! What the running kernel can offload, found once at start by trying it: attach the "tls" ULP
//! to a throwaway loopback connection, set TX and RX keys (dummy ones) for every version and
//! cipher on fresh connections, and set a TLS 1.3 TX key twice (the second one is a rekey:
//! EBUSY on kernels before 6.14). Kernel versions are not consulted: modules, backports and
//! distribution patches make them a poor guide.
//!
//! The loopback device never does TLS offload, so this measures the kernel's software path;
//! whether the NIC takes over is seen per connection (sock_diag) and in /proc/net/tls_stat.

use std::collections::BTreeSet;
use std::fmt;
use std::io;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::crypto_info::{CryptoInfo, KernelCipher, KernelVersion};
use super::sys::{Direction, Linux, Sys};

/// A (version, cipher) pair the kernel takes in one direction.
pub type Pair = (KernelVersion, KernelCipher);

/// The probe's result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// Why the "tls" ULP cannot be attached (None: it can).
    pub unavailable: Option<String>,
    pub tx: BTreeSet<Pair>,
    pub rx: BTreeSet<Pair>,
    /// The kernel accepts new keys on a live socket (TLS 1.3 KeyUpdate).
    pub rekey: bool,
    /// Why individual pairs failed ("TLSv1.3 CHACHA20-POLY1305 tx: ENOENT"), for /tls_offload.
    pub failures: Vec<String>,
    pub took: Duration,
}

impl Capabilities {
    /// A kernel without kTLS, and the reason.
    pub fn unavailable(reason: impl Into<String>) -> Capabilities {
        Capabilities {
            unavailable: Some(reason.into()),
            tx: BTreeSet::new(),
            rx: BTreeSet::new(),
            rekey: false,
            failures: Vec::new(),
            took: Duration::ZERO,
        }
    }

    pub fn available(&self) -> bool {
        self.unavailable.is_none() && !self.tx.is_empty() && !self.rx.is_empty()
    }

    /// Both directions of `pair` can be offloaded.
    pub fn supports(&self, pair: Pair) -> bool {
        self.tx.contains(&pair) && self.rx.contains(&pair)
    }

    /// The kernel offloads some cipher of `version` (in both directions).
    pub fn supports_version(&self, version: KernelVersion) -> bool {
        KernelCipher::ALL
            .iter()
            .any(|c| self.supports((version, *c)))
    }

    /// The one log line: `kTLS: unavailable (no tls module: ENOENT)` or
    /// `kTLS: TX+RX for TLS1.2/1.3 AES-128-GCM AES-256-GCM CHACHA20-POLY1305; rekey: no`.
    pub fn summary(&self) -> String {
        if let Some(why) = &self.unavailable {
            return format!("kTLS: unavailable ({why})");
        }
        if self.tx.is_empty() && self.rx.is_empty() {
            return "kTLS: unavailable (the tls module takes no cipher)".to_string();
        }
        let mut parts = Vec::new();
        // Group the ciphers by the set of versions and directions they work for.
        let mut groups: Vec<(String, Vec<&'static str>)> = Vec::new();
        for cipher in KernelCipher::ALL {
            let mut key = Vec::new();
            for dir in ["TX", "RX"] {
                let set = if dir == "TX" { &self.tx } else { &self.rx };
                let versions: Vec<&str> = KernelVersion::ALL
                    .iter()
                    .filter(|v| set.contains(&(**v, cipher)))
                    .map(|v| match v {
                        KernelVersion::Tls12 => "1.2",
                        KernelVersion::Tls13 => "1.3",
                    })
                    .collect();
                if !versions.is_empty() {
                    key.push((dir, versions.join("/")));
                }
            }
            if key.is_empty() {
                continue;
            }
            let label = if key.len() == 2 && key[0].1 == key[1].1 {
                format!("TX+RX for TLS{}", key[0].1)
            } else {
                key.iter()
                    .map(|(d, v)| format!("{d} for TLS{v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            match groups.iter_mut().find(|(l, _)| *l == label) {
                Some((_, ciphers)) => ciphers.push(cipher.name()),
                None => groups.push((label, vec![cipher.name()])),
            }
        }
        for (label, ciphers) in groups {
            parts.push(format!("{label} {}", ciphers.join(" ")));
        }
        format!(
            "kTLS: {}; rekey: {}",
            parts.join("; "),
            if self.rekey { "yes" } else { "no" }
        )
    }
}

impl fmt::Display for Capabilities {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.summary())
    }
}

static CAPABILITIES: OnceLock<Capabilities> = OnceLock::new();

/// The probe's result, probing on first use (once per process).
pub fn capabilities() -> &'static Capabilities {
    CAPABILITIES.get_or_init(|| probe_with(&Linux))
}

/// Probes the kernel through `sys` (the real one, or a test double).
pub fn probe_with(sys: &dyn Sys) -> Capabilities {
    let start = Instant::now();
    let mut caps = match run(sys) {
        Ok(c) => c,
        Err(e) => Capabilities::unavailable(format!("probe failed: {e}")),
    };
    caps.took = start.elapsed();
    caps
}

fn run(sys: &dyn Sys) -> io::Result<Capabilities> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let addr = listener.local_addr()?;
    let pair = || -> io::Result<(TcpStream, TcpStream)> {
        let client = TcpStream::connect(addr)?;
        let (server, _) = listener.accept()?;
        Ok((client, server))
    };

    let mut caps = Capabilities::unavailable("");
    caps.unavailable = None;
    for version in KernelVersion::ALL {
        for cipher in KernelCipher::ALL {
            // The peer socket must stay open while the keys are set: the ULP wants an
            // established connection.
            let (sock, _peer) = pair()?;
            if let Err(e) = sys.attach_ulp(sock.as_fd()) {
                return Ok(Capabilities::unavailable(ulp_reason(&e)));
            }
            let info = dummy(version, cipher)?;
            let label = format!("{} {}", version.name(), cipher.name());
            match sys.set_crypto(sock.as_fd(), Direction::Tx, &info) {
                Ok(()) => {
                    caps.tx.insert((version, cipher));
                    if version == KernelVersion::Tls13 && !caps.rekey {
                        caps.rekey = sys.set_crypto(sock.as_fd(), Direction::Tx, &info).is_ok();
                    }
                }
                Err(e) => caps
                    .failures
                    .push(format!("{label} tx: {}", errno_name(&e))),
            }
            match sys.set_crypto(sock.as_fd(), Direction::Rx, &info) {
                Ok(()) => {
                    caps.rx.insert((version, cipher));
                }
                Err(e) => caps
                    .failures
                    .push(format!("{label} rx: {}", errno_name(&e))),
            }
        }
    }
    Ok(caps)
}

/// Dummy key material: the probe never sends a byte under it.
fn dummy(version: KernelVersion, cipher: KernelCipher) -> io::Result<CryptoInfo> {
    let key = [0x5au8; 32];
    let len = match cipher {
        KernelCipher::Aes128Gcm => 16,
        _ => 32,
    };
    CryptoInfo::new(version, cipher, &key[..len], &[0xa5; 12], 0)
        .map_err(|e| io::Error::other(e.to_string()))
}

fn ulp_reason(e: &io::Error) -> String {
    match e.raw_os_error() {
        Some(libc::ENOENT) => "no tls module: ENOENT".to_string(),
        Some(libc::EPERM) => {
            "tls module not loaded and no CAP_NET_ADMIN to load it: EPERM".to_string()
        }
        _ => format!("TCP_ULP tls: {}", errno_name(e)),
    }
}

/// "ENOENT", "EBUSY", ... for the errors the offload layer meets; the message otherwise.
pub fn errno_name(e: &io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::EINVAL) => "EINVAL",
        Some(libc::EBUSY) => "EBUSY",
        Some(libc::ENOTCONN) => "ENOTCONN",
        Some(libc::EIO) => "EIO",
        Some(libc::EBADMSG) => "EBADMSG",
        Some(libc::EMSGSIZE) => "EMSGSIZE",
        Some(libc::EPERM) => "EPERM",
        Some(libc::EOPNOTSUPP) => "EOPNOTSUPP",
        Some(libc::ENOPROTOOPT) => "ENOPROTOOPT",
        Some(libc::EEXIST) => "EEXIST",
        Some(libc::ENOMEM) => "ENOMEM",
        Some(libc::EKEYEXPIRED) => "EKEYEXPIRED",
        _ => return e.to_string(),
    };
    name.to_string()
}

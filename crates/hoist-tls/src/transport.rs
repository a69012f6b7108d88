//! The transport: what the HTTP codecs read plaintext from and write plaintext to.
//!
//! Three implementations share this trait: plain TCP, user-space TLS (rustls records) and
//! kernel TLS (the kernel, or the NIC, does the record crypto). The codecs never know which one
//! they talk to; `write_file` is where the difference pays off: plain and kernel TLS send the
//! file with sendfile(2), user-space TLS encrypts straight from the mapping.

use std::future::Future;
use std::io;

use tokio::io::{AsyncRead, AsyncWrite};

use crate::file::FileRegion;
use crate::splice::{SpliceSource, Spliced};

/// What a TLS connection negotiated, for stats, access logs and routing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsInfo {
    /// "TLSv1.2" or "TLSv1.3", as Envoy's stats and %DOWNSTREAM_TLS_VERSION% spell it.
    pub version: &'static str,
    /// OpenSSL name of the cipher suite ("ECDHE-RSA-AES128-GCM-SHA256", "TLS_AES_128_GCM_SHA256").
    pub cipher: &'static str,
    /// Key exchange group ("X25519", "P-256").
    pub curve: Option<&'static str>,
    /// Signature scheme of the server's CertificateVerify, OpenSSL-style ("rsa_pss_rsae_sha256").
    pub sigalg: Option<&'static str>,
    /// Server name the client asked for.
    pub sni: Option<String>,
    /// ALPN protocol agreed on.
    pub alpn: Option<Vec<u8>>,
    pub session_reused: bool,
    /// Subject of the client certificate (mTLS), if one was presented.
    pub peer_subject: Option<String>,
    /// How the record layer runs: "none" (user space), "sw" (kernel), "hw" (NIC).
    pub offload: &'static str,
}

/// A connection's byte stream after any TLS handshake.
///
/// `AsyncRead`/`AsyncWrite` carry plaintext. `poll_shutdown` ends the stream cleanly: a TLS
/// transport sends close_notify before the FIN.
pub trait Transport: AsyncRead + AsyncWrite + Unpin {
    /// Writes `head` followed by the bytes of `body`, and flushes. On plain TCP and kernel TLS
    /// the head goes with MSG_MORE and the body with sendfile, so both share the first segment
    /// or record; user-space TLS puts the head in the first record with the start of the body.
    fn write_file<'a>(
        &'a mut self,
        head: &'a [u8],
        body: &'a FileRegion,
    ) -> impl Future<Output = io::Result<()>> + 'a;

    /// The TLS parameters, or None on plain TCP.
    fn tls_info(&self) -> Option<&TlsInfo>;

    /// Whether [`Transport::splice_from`] works here: plain TCP and kernel TLS, where the
    /// kernel sees plaintext at the socket; never user-space TLS.
    fn can_splice(&self) -> bool {
        false
    }

    /// Forwards `len` bytes from `src` with splice(2) (see [`crate::splice`]); `moved` counts
    /// the bytes written, also when an error ends it.
    fn splice_from<'a>(
        &'a mut self,
        src: &'a SpliceSource,
        len: u64,
        moved: &'a mut u64,
    ) -> impl Future<Output = io::Result<Spliced>> + 'a {
        let _ = (src, len, moved);
        async {
            Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "this transport cannot splice",
            ))
        }
    }
}

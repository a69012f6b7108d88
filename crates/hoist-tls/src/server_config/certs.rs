//! Server certificates: loading `tls_certificates[]`, and choosing one per ClientHello the way
//! Envoy does when a context holds several (RSA + ECDSA, or different names).
//!
//! The chosen certificate's signature scheme is only known when rustls signs with it, so each
//! connection gets a resolver of its own that records that choice in a [`Selection`]; the
//! handshake reads it afterwards for `ssl.sigalgs.<name>`.

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use hoist_config::model::tls::TlsCertificate;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::{CertifiedKey, Signer, SigningKey};
use rustls::{SignatureAlgorithm, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, SubjectPublicKeyInfoDer};

use super::TlsConfigError;
use crate::x509;

/// One loaded `tls_certificates[]` entry.
#[derive(Debug)]
pub(crate) struct LoadedCert {
    key: Arc<CertifiedKey>,
    /// Lower-cased DNS names (SAN, else CN), sorted.
    names: Vec<String>,
}

impl LoadedCert {
    /// The certificate chain and signing key (also what an upstream client presents).
    pub(crate) fn certified_key(&self) -> Arc<CertifiedKey> {
        self.key.clone()
    }

    fn is_ecdsa(&self) -> bool {
        self.key.key.algorithm() == SignatureAlgorithm::ECDSA
    }

    fn usable_with(&self, schemes: &[SignatureScheme]) -> bool {
        self.key.key.choose_scheme(schemes).is_some()
    }

    fn answers_for(&self, sni: &str) -> bool {
        self.names.iter().any(|n| x509::name_matches(n, sni))
    }
}

/// Reads and checks one certificate: PEM chain (leaf first) and PEM private key.
pub(crate) fn load(
    cert: &TlsCertificate,
    provider: &CryptoProvider,
) -> Result<LoadedCert, TlsConfigError> {
    let err = |reason: String| TlsConfigError::new(&cert.yaml_path, reason);
    let chain_pem = cert
        .certificate_chain
        .read()
        .map_err(|e| err(format!("certificate_chain: cannot read: {e}")))?;
    let chain = CertificateDer::pem_slice_iter(&chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(format!("certificate_chain: invalid PEM: {e}")))?;
    if chain.is_empty() {
        return Err(err("certificate_chain: no certificate in the chain".into()));
    }
    let key_pem = cert
        .private_key
        .read()
        .map_err(|e| err(format!("private_key: cannot read: {e}")))?;
    let key_der = PrivateKeyDer::from_pem_slice(&key_pem)
        .map_err(|e| err(format!("private_key: no usable private key in PEM: {e}")))?;
    let key = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| err(format!("private_key: unsupported key: {e}")))?;
    let names = x509::dns_names(chain[0].as_ref());
    let certified = CertifiedKey::new(chain, key);
    certified
        .keys_match()
        .map_err(|e| err(format!("private_key does not match the certificate: {e}")))?;
    Ok(LoadedCert {
        key: Arc::new(certified),
        names,
    })
}

/// All certificates of one context and the selection rule.
#[derive(Debug)]
pub(crate) struct CertSet {
    certs: Vec<LoadedCert>,
    /// Whether SNI can tell the certificates apart at all.
    names_differ: bool,
}

impl CertSet {
    /// `certs` must not be empty (checked by the caller, which knows the YAML path).
    pub(crate) fn new(certs: Vec<LoadedCert>) -> CertSet {
        let names_differ = certs.windows(2).any(|w| w[0].names != w[1].names);
        CertSet {
            certs,
            names_differ,
        }
    }

    /// Envoy's order: certificates whose names match the SNI (when names differ at all; none
    /// matching means all), then among those one whose key type the client's signature schemes
    /// allow, ECDSA first; failing that the first candidate, so the client gets a clear
    /// handshake failure rather than no certificate.
    pub(crate) fn select(
        &self,
        sni: Option<&str>,
        schemes: &[SignatureScheme],
    ) -> Option<&LoadedCert> {
        let by_name = |c: &&LoadedCert| match sni {
            Some(host) if self.names_differ => c.answers_for(host),
            _ => true,
        };
        let any_by_name = self.certs.iter().any(|c| by_name(&c));
        let candidates = || {
            self.certs
                .iter()
                .filter(move |c| !any_by_name || by_name(c))
        };
        candidates()
            .find(|c| c.is_ecdsa() && c.usable_with(schemes))
            .or_else(|| candidates().find(|c| c.usable_with(schemes)))
            .or_else(|| candidates().next())
    }
}

/// What was chosen for one connection's handshake.
#[derive(Debug, Default)]
pub struct Selection {
    /// The signature scheme used, as `u16 | 1 << 16`; 0 until the server signs (it never does on
    /// a resumed session).
    sigalg: AtomicU32,
}

impl Selection {
    pub fn sigalg(&self) -> Option<SignatureScheme> {
        match self.sigalg.load(Ordering::Relaxed) {
            0 => None,
            v => Some(SignatureScheme::from(v as u16)),
        }
    }

    fn record(&self, scheme: SignatureScheme) {
        self.sigalg
            .store(u32::from(u16::from(scheme)) | 1 << 16, Ordering::Relaxed);
    }
}

/// The per-connection resolver: [`CertSet::select`] plus recording.
#[derive(Debug)]
pub(crate) struct RecordingResolver {
    pub(crate) set: Arc<CertSet>,
    pub(crate) selection: Arc<Selection>,
}

impl ResolvesServerCert for RecordingResolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        let sni = hello.server_name().map(str::to_ascii_lowercase);
        let chosen = self.set.select(sni.as_deref(), hello.signature_schemes())?;
        Some(Arc::new(CertifiedKey {
            cert: chosen.key.cert.clone(),
            key: Arc::new(RecordingKey {
                inner: chosen.key.key.clone(),
                selection: self.selection.clone(),
            }),
            ocsp: chosen.key.ocsp.clone(),
        }))
    }
}

struct RecordingKey {
    inner: Arc<dyn SigningKey>,
    selection: Arc<Selection>,
}

impl fmt::Debug for RecordingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordingKey")
            .field("algorithm", &self.inner.algorithm())
            .finish()
    }
}

impl SigningKey for RecordingKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        let inner = self.inner.choose_scheme(offered)?;
        Some(Box::new(RecordingSigner {
            inner,
            selection: self.selection.clone(),
        }))
    }

    fn public_key(&self) -> Option<SubjectPublicKeyInfoDer<'_>> {
        self.inner.public_key()
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        self.inner.algorithm()
    }
}

#[derive(Debug)]
struct RecordingSigner {
    inner: Box<dyn Signer>,
    selection: Arc<Selection>,
}

impl Signer for RecordingSigner {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, rustls::Error> {
        self.selection.record(self.inner.scheme());
        self.inner.sign(message)
    }

    fn scheme(&self) -> SignatureScheme {
        self.inner.scheme()
    }
}

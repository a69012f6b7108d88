//! Client certificates: `validation_context.trusted_ca` checked by rustls' WebPKI verifier,
//! then Envoy's `match_typed_subject_alt_names` (exact matchers) on the end-entity certificate.

use std::sync::Arc;

use hoist_config::model::tls::{SanMatch, ValidationContext};
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::CryptoProvider;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, UnixTime};

use super::TlsConfigError;
use crate::x509;

/// The verifier for a context with a validation context. Without `require_client_certificate`
/// the certificate is requested and checked when sent, but a client may send none.
pub(crate) fn verifier(
    vc: &ValidationContext,
    require: bool,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, TlsConfigError> {
    let err = |reason: String| TlsConfigError::new(&vc.yaml_path, reason);
    let pem = vc
        .trusted_ca
        .read()
        .map_err(|e| err(format!("trusted_ca: cannot read: {e}")))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| err(format!("trusted_ca: invalid PEM: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| err(format!("trusted_ca: unusable CA certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(err("trusted_ca: no CA certificate".into()));
    }
    let mut builder = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
    if !require {
        builder = builder.allow_unauthenticated();
    }
    let inner = builder
        .build()
        .map_err(|e| err(format!("cannot build the client certificate verifier: {e}")))?;
    if vc.subject_alt_names.is_empty() {
        return Ok(inner);
    }
    Ok(Arc::new(SanVerifier {
        inner,
        sans: vc.subject_alt_names.clone(),
    }))
}

#[derive(Debug)]
struct SanVerifier {
    inner: Arc<dyn ClientCertVerifier>,
    sans: Vec<SanMatch>,
}

impl ClientCertVerifier for SanVerifier {
    fn offer_client_auth(&self) -> bool {
        self.inner.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.inner.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        self.inner.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let verified = self
            .inner
            .verify_client_cert(end_entity, intermediates, now)?;
        if x509::san_matches(end_entity.as_ref(), &self.sans) {
            Ok(verified)
        } else {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::ApplicationVerificationFailure,
            ))
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

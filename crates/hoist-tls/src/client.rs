//! rustls client configurations from an `UpstreamTlsContext`, shared by every upstream client
//! (the router's connection pools, jwt_authn's JWKS fetches). Verification follows Envoy's:
//! with a `validation_context` the chain must lead to `trusted_ca` (and the SAN matchers, if
//! any, must match); without one the server's certificate is not checked. The host name is
//! not checked unless a SAN matcher asks for it, as in Envoy.

use std::sync::Arc;

use hoist_config::model::{DataSource, SanType, TlsOffloadMode, TlsVersion, UpstreamTlsContext};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{
    verify_server_cert_signed_by_trust_anchor, verify_server_name, ResolvesClientCert,
};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::sign::CertifiedKey;
use rustls::{DigitallySignedStruct, RootCertStore, SignatureScheme};

/// A client configuration and the name the handshake uses, for connections to one cluster.
pub struct UpstreamTls {
    pub config: Arc<rustls::ClientConfig>,
    pub server_name: ServerName<'static>,
    /// Whether connections go to kernel TLS after the handshake (the process-wide
    /// `--tls-offload`; `auto` unless the owner sets it).
    pub offload_mode: TlsOffloadMode,
}

impl UpstreamTls {
    /// `first_host`: the cluster's first endpoint, the session cache key when `sni` is unset.
    /// Err: why the context cannot be used (for a config error).
    pub fn new(t: &UpstreamTlsContext, first_host: &str) -> Result<UpstreamTls, String> {
        let name = t.sni.as_deref().unwrap_or(first_host);
        // Without sni nothing is sent; the name only keys rustls' session cache.
        let server_name = ServerName::try_from(name.to_owned())
            .unwrap_or_else(|_| ServerName::IpAddress(std::net::Ipv4Addr::UNSPECIFIED.into()));
        let versions = versions(t.min_version, t.max_version)?;
        let client_cert = t
            .client_certificate
            .as_ref()
            .map(|c| {
                crate::server_config::certs::load(c, &rustls::crypto::aws_lc_rs::default_provider())
                    .map(|loaded| loaded.certified_key())
                    .map_err(|e| e.to_string())
            })
            .transpose()?;
        let mut config = client_config(
            t.trusted_ca.as_ref(),
            &t.subject_alt_names,
            &versions,
            client_cert,
        )?;
        config.enable_sni = t.sni.is_some();
        config.alpn_protocols = t
            .alpn_protocols
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        // Kernel TLS takes the keys out of rustls after the handshake (offload/switch.rs);
        // user-space connections are unaffected. 0-RTT stays off (rustls' default): early data
        // would precede the kernel's keys.
        config.enable_secret_extraction = true;
        Ok(UpstreamTls {
            config: Arc::new(config),
            server_name,
            offload_mode: TlsOffloadMode::Auto,
        })
    }
}

/// The rustls versions of a tls_params range (hoist speaks 1.2 and 1.3).
fn versions(
    min: TlsVersion,
    max: TlsVersion,
) -> Result<Vec<&'static rustls::SupportedProtocolVersion>, String> {
    let mut out = Vec::new();
    if min <= TlsVersion::Tls1_3 && max >= TlsVersion::Tls1_3 {
        out.push(&rustls::version::TLS13);
    }
    if min <= TlsVersion::Tls1_2 && max >= TlsVersion::Tls1_2 {
        out.push(&rustls::version::TLS12);
    }
    if out.is_empty() {
        return Err("tls_params: no TLS version hoist speaks (1.2, 1.3) in range".into());
    }
    Ok(out)
}

fn client_config(
    trusted_ca: Option<&DataSource>,
    sans: &[hoist_config::model::SanMatch],
    versions: &[&'static rustls::SupportedProtocolVersion],
    client_cert: Option<Arc<CertifiedKey>>,
) -> Result<rustls::ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let roots = match trusted_ca {
        Some(source) => {
            let pem = source
                .read()
                .map_err(|e| format!("cannot read trusted_ca: {e}"))?;
            let mut roots = RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| format!("trusted_ca: invalid PEM: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("trusted_ca: unusable certificate: {e}"))?;
            }
            if roots.is_empty() {
                return Err("trusted_ca holds no certificate".into());
            }
            Some(Arc::new(roots))
        }
        None => None,
    };
    let mut names = Vec::new();
    for san in sans {
        let name = match san.san_type {
            SanType::Dns | SanType::IpAddress => ServerName::try_from(san.exact.clone())
                .map_err(|_| format!("\"{}\" is not a DNS name or IP address", san.exact))?,
            SanType::Uri | SanType::Email => {
                return Err(
                    "upstream match_typed_subject_alt_names supports DNS and IP_ADDRESS only"
                        .into(),
                )
            }
        };
        names.push(name);
    }
    let verifier = Arc::new(EnvoyVerifier {
        roots,
        names,
        provider: provider.clone(),
    });
    // Envoy's client default is TLS 1.2 at most; tls_params may say otherwise (decoded so).
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .map_err(|e| format!("TLS client: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    Ok(match client_cert {
        Some(key) => builder.with_client_cert_resolver(Arc::new(ClientCert(key))),
        None => builder.with_no_client_auth(),
    })
}

/// mTLS: the one configured certificate, whatever the server's hints (as Envoy does).
#[derive(Debug)]
struct ClientCert(Arc<CertifiedKey>);

impl ResolvesClientCert for ClientCert {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

#[derive(Debug)]
struct EnvoyVerifier {
    /// None: no validation_context, the certificate is not verified.
    roots: Option<Arc<RootCertStore>>,
    /// From match_typed_subject_alt_names; empty: any.
    names: Vec<ServerName<'static>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for EnvoyVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            return Ok(ServerCertVerified::assertion());
        };
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        if !self.names.is_empty()
            && !self
                .names
                .iter()
                .any(|n| verify_server_name(&cert, n).is_ok())
        {
            return Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName,
            ));
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

//! The client's rustls configuration: aws-lc-rs provider narrowed to the requested protocol
//! version and cipher suites (OpenSSL or IANA names), server certificate checks against a
//! custom CA, the system bundle, or nothing (`-k`), and an optional client certificate.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{aws_lc_rs, CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CipherSuite, ClientConfig, DigitallySignedStruct, ProtocolVersion, RootCertStore,
    SignatureScheme, SupportedCipherSuite, SupportedProtocolVersion,
};

/// TLS protocol version to offer (both when not set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

impl TlsVersion {
    /// "1.2" or "1.3" (also "TLSv1.2", "tls1.3").
    pub fn parse(s: &str) -> Option<TlsVersion> {
        let lower = s.to_ascii_lowercase();
        let v = lower
            .strip_prefix("tlsv")
            .or_else(|| lower.strip_prefix("tls"))
            .unwrap_or(&lower);
        match v {
            "1.2" => Some(TlsVersion::Tls12),
            "1.3" => Some(TlsVersion::Tls13),
            _ => None,
        }
    }

    fn rustls(self) -> &'static SupportedProtocolVersion {
        match self {
            TlsVersion::Tls12 => &rustls::version::TLS12,
            TlsVersion::Tls13 => &rustls::version::TLS13,
        }
    }
}

/// A configuration we cannot build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfigError(pub String);

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// OpenSSL's names for the suites the aws-lc-rs provider has (TLS 1.3 suites have one name).
const OPENSSL_NAMES: &[(&str, CipherSuite)] = &[
    (
        "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-RSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ),
    (
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
    ),
    (
        "ECDHE-ECDSA-CHACHA20-POLY1305",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ),
    (
        "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_128_GCM_SHA256,
    ),
    (
        "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_AES_256_GCM_SHA384,
    ),
    (
        "TLS_CHACHA20_POLY1305_SHA256",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256,
    ),
];

/// The OpenSSL name of a suite (what people pass to `-cipher` and what nginx logs).
pub fn openssl_name(suite: CipherSuite) -> String {
    OPENSSL_NAMES
        .iter()
        .find(|(_, s)| *s == suite)
        .map_or_else(|| format!("{suite:?}"), |(n, _)| (*n).to_string())
}

/// "TLSv1.2" / "TLSv1.3", as OpenSSL and nginx print versions.
pub fn version_name(v: ProtocolVersion) -> String {
    match v {
        ProtocolVersion::TLSv1_2 => "TLSv1.2".to_string(),
        ProtocolVersion::TLSv1_3 => "TLSv1.3".to_string(),
        other => format!("{other:?}"),
    }
}

/// The provider's suites named in `list` (OpenSSL or IANA names, separated by ':' or ',').
fn select_suites(list: &str) -> Result<Vec<SupportedCipherSuite>, TlsConfigError> {
    let mut out: Vec<SupportedCipherSuite> = Vec::new();
    for name in list
        .split([':', ','])
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        let wanted = OPENSSL_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, s)| *s);
        let found = aws_lc_rs::ALL_CIPHER_SUITES.iter().find(|s| {
            let id = s.suite();
            wanted == Some(id)
                || id
                    .as_str()
                    .is_some_and(|iana| iana.eq_ignore_ascii_case(name))
        });
        match found {
            Some(s) if !out.iter().any(|o| o.suite() == s.suite()) => out.push(*s),
            Some(_) => {}
            None => {
                let known: Vec<&str> = OPENSSL_NAMES.iter().map(|(n, _)| *n).collect();
                return Err(TlsConfigError(format!(
                    "unknown or unsupported cipher {name:?} (supported: {})",
                    known.join(", ")
                )));
            }
        }
    }
    if out.is_empty() {
        return Err(TlsConfigError("empty -cipher list".into()));
    }
    Ok(out)
}

/// What the TLS side of the client needs from the options.
pub struct TlsSettings<'a> {
    pub version: Option<TlsVersion>,
    pub cipher: Option<&'a str>,
    pub insecure: bool,
    pub ca_cert: Option<&'a Path>,
    pub client_cert: Option<&'a Path>,
    pub client_key: Option<&'a Path>,
}

/// Builds the client configuration shared by every connection of a run.
pub fn client_config(s: &TlsSettings<'_>) -> Result<Arc<ClientConfig>, TlsConfigError> {
    let mut provider = aws_lc_rs::default_provider();
    if let Some(list) = s.cipher {
        provider.cipher_suites = select_suites(list)?;
    }
    let wanted: Vec<TlsVersion> = match s.version {
        Some(v) => vec![v],
        None => vec![TlsVersion::Tls13, TlsVersion::Tls12],
    };
    // Offer only the versions some selected suite can use: a TLS 1.2 cipher alone means 1.2.
    let versions: Vec<&'static SupportedProtocolVersion> = wanted
        .iter()
        .map(|v| v.rustls())
        .filter(|v| provider.cipher_suites.iter().any(|s| s.version() == *v))
        .collect();
    if versions.is_empty() {
        return Err(TlsConfigError(format!(
            "no selected cipher suite works with {}",
            match s.version {
                Some(TlsVersion::Tls12) => "TLS 1.2",
                Some(TlsVersion::Tls13) => "TLS 1.3",
                None => "TLS 1.2 or 1.3",
            }
        )));
    }
    let algorithms = provider.signature_verification_algorithms;
    let builder = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&versions)
        .map_err(|e| TlsConfigError(format!("TLS configuration: {e}")))?;
    let builder = if s.insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate { algorithms }))
    } else {
        builder.with_root_certificates(root_store(s.ca_cert)?)
    };
    let mut config = match (s.client_cert, s.client_key) {
        (Some(cert), Some(key)) => {
            let chain = read_certs(cert)?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                TlsConfigError(format!(
                    "cannot read a private key from {}: {e}",
                    key.display()
                ))
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| TlsConfigError(format!("client certificate: {e}")))?
        }
        (None, None) => builder.with_no_client_auth(),
        _ => {
            return Err(TlsConfigError(
                "-cert and -key must be given together".into(),
            ))
        }
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The server name to verify and send as SNI (IP literals are checked against IP SANs and
/// sent without SNI, as rustls does).
pub fn server_name(host: &str) -> Result<ServerName<'static>, TlsConfigError> {
    ServerName::try_from(host.to_string())
        .map_err(|_| TlsConfigError(format!("{host:?} is not a valid TLS server name")))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsConfigError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| {
            TlsConfigError(format!(
                "cannot read certificates from {}: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(TlsConfigError(format!(
            "no certificate in {}",
            path.display()
        )));
    }
    Ok(certs)
}

/// Trust anchors: the `-cacert` file, else the system bundle (SSL_CERT_FILE or the usual
/// distribution paths).
fn root_store(ca_cert: Option<&Path>) -> Result<RootCertStore, TlsConfigError> {
    let mut store = RootCertStore::empty();
    let path = match ca_cert {
        Some(p) => p.to_path_buf(),
        None => system_bundle().ok_or_else(|| {
            TlsConfigError("no system CA bundle found; pass -cacert FILE or -k".into())
        })?,
    };
    let certs = read_certs(&path)?;
    let (added, _ignored) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(TlsConfigError(format!(
            "no usable CA certificate in {}",
            path.display()
        )));
    }
    Ok(store)
}

fn system_bundle() -> Option<std::path::PathBuf> {
    let from_env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
    from_env
        .into_iter()
        .chain(
            [
                "/etc/ssl/certs/ca-certificates.crt",
                "/etc/pki/tls/certs/ca-bundle.crt",
                "/etc/ssl/cert.pem",
            ]
            .iter()
            .map(std::path::PathBuf::from),
        )
        .find(|p| p.is_file())
}

/// `-k`: any certificate is accepted, but the handshake signatures are still checked so the
/// session keys are bound to the certificate's key (as Go's InsecureSkipVerify does).
#[derive(Debug)]
struct AcceptAnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// The `-cipher` names this client can offer (the aws-lc-rs provider's suites), e.g. for the
/// benchmark to list or validate its matrix.
pub fn supported_cipher_names() -> Vec<&'static str> {
    let provider: CryptoProvider = aws_lc_rs::default_provider();
    OPENSSL_NAMES
        .iter()
        .filter(|(_, s)| provider.cipher_suites.iter().any(|p| p.suite() == *s))
        .map(|(n, _)| *n)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cipher_names_openssl_and_iana() {
        let s = select_suites("ECDHE-RSA-AES256-GCM-SHA384").unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(
            s[0].suite(),
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384
        );
        let s = select_suites("TLS_AES_128_GCM_SHA256:TLS13_AES_256_GCM_SHA384").unwrap();
        assert_eq!(
            s.iter().map(|s| s.suite()).collect::<Vec<_>>(),
            vec![
                CipherSuite::TLS13_AES_128_GCM_SHA256,
                CipherSuite::TLS13_AES_256_GCM_SHA384
            ]
        );
        let s = select_suites("TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256").unwrap();
        assert_eq!(
            s[0].suite(),
            CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256
        );
        assert!(select_suites("RC4-MD5").is_err());
        assert!(select_suites("").is_err());
        assert_eq!(
            openssl_name(CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384),
            "ECDHE-RSA-AES256-GCM-SHA384"
        );
        assert!(supported_cipher_names().contains(&"ECDHE-RSA-AES128-GCM-SHA256"));
    }

    #[test]
    fn versions_follow_the_ciphers() {
        let base = TlsSettings {
            version: None,
            cipher: Some("ECDHE-RSA-AES256-GCM-SHA384"),
            insecure: true,
            ca_cert: None,
            client_cert: None,
            client_key: None,
        };
        assert!(client_config(&base).is_ok());
        // A TLS 1.2 suite cannot be used with TLS 1.3 only.
        let only13 = TlsSettings {
            version: Some(TlsVersion::Tls13),
            ..base
        };
        assert!(client_config(&only13).is_err());
        assert_eq!(TlsVersion::parse("1.2"), Some(TlsVersion::Tls12));
        assert_eq!(TlsVersion::parse("TLSv1.3"), Some(TlsVersion::Tls13));
        assert_eq!(TlsVersion::parse("1.1"), None);
    }

    #[test]
    fn missing_files_are_reported() {
        let s = TlsSettings {
            version: None,
            cipher: None,
            insecure: false,
            ca_cert: Some(Path::new("/nonexistent/ca.pem")),
            client_cert: None,
            client_key: None,
        };
        let err = client_config(&s).unwrap_err();
        assert!(err.0.contains("/nonexistent/ca.pem"), "{err}");
    }
}

//! `envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext` and its parts.

use super::core::DataSource;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls1_0,
    Tls1_1,
    Tls1_2,
    Tls1_3,
}

/// A TLS 1.2 cipher suite by its OpenSSL name, as Envoy spells them in `cipher_suites`.
/// Only the names hoist can negotiate are accepted; others are refused at load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CipherSuite {
    EcdheEcdsaAes128GcmSha256,
    EcdheRsaAes128GcmSha256,
    EcdheEcdsaAes256GcmSha384,
    EcdheRsaAes256GcmSha384,
    EcdheEcdsaChacha20Poly1305,
    EcdheRsaChacha20Poly1305,
}

impl CipherSuite {
    pub const ALL: [CipherSuite; 6] = [
        CipherSuite::EcdheEcdsaAes128GcmSha256,
        CipherSuite::EcdheRsaAes128GcmSha256,
        CipherSuite::EcdheEcdsaChacha20Poly1305,
        CipherSuite::EcdheRsaChacha20Poly1305,
        CipherSuite::EcdheEcdsaAes256GcmSha384,
        CipherSuite::EcdheRsaAes256GcmSha384,
    ];

    /// The OpenSSL name (what Envoy's config and `ssl.ciphers.<name>` stats use).
    pub fn openssl_name(self) -> &'static str {
        match self {
            CipherSuite::EcdheEcdsaAes128GcmSha256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
            CipherSuite::EcdheRsaAes128GcmSha256 => "ECDHE-RSA-AES128-GCM-SHA256",
            CipherSuite::EcdheEcdsaAes256GcmSha384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
            CipherSuite::EcdheRsaAes256GcmSha384 => "ECDHE-RSA-AES256-GCM-SHA384",
            CipherSuite::EcdheEcdsaChacha20Poly1305 => "ECDHE-ECDSA-CHACHA20-POLY1305",
            CipherSuite::EcdheRsaChacha20Poly1305 => "ECDHE-RSA-CHACHA20-POLY1305",
        }
    }

    pub fn from_openssl_name(name: &str) -> Option<CipherSuite> {
        CipherSuite::ALL
            .into_iter()
            .find(|c| c.openssl_name() == name)
    }
}

/// One entry of `cipher_suites`: a single suite, or an `[A|B]` equal-preference group.
/// rustls has no equal-preference groups: a group keeps its members in the order written.
pub type CipherGroup = Vec<CipherSuite>;

/// `ecdh_curves` entries hoist supports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Curve {
    X25519,
    P256,
    P384,
    /// Hybrid post-quantum group, TLS 1.3 only.
    X25519Mlkem768,
}

impl Curve {
    pub fn name(self) -> &'static str {
        match self {
            Curve::X25519 => "X25519",
            Curve::P256 => "P-256",
            Curve::P384 => "P-384",
            Curve::X25519Mlkem768 => "X25519MLKEM768",
        }
    }
}

/// `common_tls_context.tls_params`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsParams {
    pub min_version: TlsVersion,
    pub max_version: TlsVersion,
    /// Empty means Envoy's default list.
    pub cipher_suites: Vec<CipherGroup>,
    /// Empty means Envoy's default (X25519, P-256).
    pub ecdh_curves: Vec<Curve>,
}

impl Default for TlsParams {
    fn default() -> Self {
        TlsParams {
            min_version: TlsVersion::Tls1_2,
            max_version: TlsVersion::Tls1_3,
            cipher_suites: Vec::new(),
            ecdh_curves: Vec::new(),
        }
    }
}

/// `common_tls_context.tls_certificates[]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsCertificate {
    pub certificate_chain: DataSource,
    pub private_key: DataSource,
    /// Where the certificate came from, for errors raised when it is parsed.
    pub yaml_path: String,
}

/// `common_tls_context.validation_context` (client certificates).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationContext {
    pub trusted_ca: DataSource,
    /// `match_typed_subject_alt_names[].matcher.exact` values with their SAN type; empty: any.
    pub subject_alt_names: Vec<SanMatch>,
    pub yaml_path: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SanMatch {
    pub san_type: SanType,
    pub exact: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SanType {
    Dns,
    Uri,
    Email,
    IpAddress,
}

/// `envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DownstreamTlsContext {
    pub tls_params: TlsParams,
    pub tls_certificates: Vec<TlsCertificate>,
    /// Empty means no ALPN is negotiated.
    pub alpn_protocols: Vec<String>,
    pub validation_context: Option<ValidationContext>,
    pub require_client_certificate: bool,
    /// `disable_stateless_session_resumption: true` turns session tickets off.
    pub session_tickets: bool,
    /// `session_ticket_keys.keys[]`: each 80 bytes (Envoy's format); empty means generated keys.
    pub session_ticket_keys: Vec<Vec<u8>>,
    /// Path of this context in the YAML, for errors raised when it is built.
    pub yaml_path: String,
}

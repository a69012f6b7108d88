//! rustls enums under the names Envoy uses in stats (`ssl.ciphers.<name>`, `ssl.curves.<name>`,
//! `ssl.sigalgs.<name>`, `ssl.versions.<name>`) and in access logs. Envoy gets these from
//! BoringSSL, which spells TLS 1.2 suites the OpenSSL way and TLS 1.3 suites the IANA way.

use rustls::{CipherSuite, NamedGroup, ProtocolVersion, SignatureScheme};

/// "TLSv1.2", "TLSv1.3"; "unknown" for anything rustls cannot negotiate anyway.
pub fn version(v: ProtocolVersion) -> &'static str {
    match v {
        ProtocolVersion::TLSv1_3 => "TLSv1.3",
        ProtocolVersion::TLSv1_2 => "TLSv1.2",
        ProtocolVersion::TLSv1_1 => "TLSv1.1",
        ProtocolVersion::TLSv1_0 => "TLSv1",
        _ => "unknown",
    }
}

/// OpenSSL name of a TLS 1.2 suite, IANA name of a TLS 1.3 suite.
pub fn cipher(suite: CipherSuite) -> &'static str {
    match suite {
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 => "ECDHE-ECDSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => "ECDHE-RSA-AES128-GCM-SHA256",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384 => "ECDHE-ECDSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => "ECDHE-RSA-AES256-GCM-SHA384",
        CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256 => {
            "ECDHE-ECDSA-CHACHA20-POLY1305"
        }
        CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => "ECDHE-RSA-CHACHA20-POLY1305",
        CipherSuite::TLS13_AES_128_GCM_SHA256 => "TLS_AES_128_GCM_SHA256",
        CipherSuite::TLS13_AES_256_GCM_SHA384 => "TLS_AES_256_GCM_SHA384",
        CipherSuite::TLS13_CHACHA20_POLY1305_SHA256 => "TLS_CHACHA20_POLY1305_SHA256",
        _ => "unknown",
    }
}

/// Key exchange group as BoringSSL names it ("X25519", "P-256").
pub fn group(g: NamedGroup) -> &'static str {
    match g {
        NamedGroup::X25519 => "X25519",
        NamedGroup::secp256r1 => "P-256",
        NamedGroup::secp384r1 => "P-384",
        NamedGroup::secp521r1 => "P-521",
        NamedGroup::X25519MLKEM768 => "X25519MLKEM768",
        NamedGroup::secp256r1MLKEM768 => "P256MLKEM768",
        NamedGroup::MLKEM768 => "MLKEM768",
        NamedGroup::MLKEM1024 => "MLKEM1024",
        _ => "unknown",
    }
}

/// Signature scheme as OpenSSL/BoringSSL name it ("rsa_pss_rsae_sha256", "ecdsa_secp256r1_sha256").
pub fn sigalg(s: SignatureScheme) -> &'static str {
    match s {
        SignatureScheme::RSA_PKCS1_SHA1 => "rsa_pkcs1_sha1",
        SignatureScheme::ECDSA_SHA1_Legacy => "ecdsa_sha1",
        SignatureScheme::RSA_PKCS1_SHA256 => "rsa_pkcs1_sha256",
        SignatureScheme::RSA_PKCS1_SHA384 => "rsa_pkcs1_sha384",
        SignatureScheme::RSA_PKCS1_SHA512 => "rsa_pkcs1_sha512",
        SignatureScheme::ECDSA_NISTP256_SHA256 => "ecdsa_secp256r1_sha256",
        SignatureScheme::ECDSA_NISTP384_SHA384 => "ecdsa_secp384r1_sha384",
        SignatureScheme::ECDSA_NISTP521_SHA512 => "ecdsa_secp521r1_sha512",
        SignatureScheme::RSA_PSS_SHA256 => "rsa_pss_rsae_sha256",
        SignatureScheme::RSA_PSS_SHA384 => "rsa_pss_rsae_sha384",
        SignatureScheme::RSA_PSS_SHA512 => "rsa_pss_rsae_sha512",
        SignatureScheme::ED25519 => "ed25519",
        SignatureScheme::ED448 => "ed448",
        SignatureScheme::ML_DSA_44 => "mldsa44",
        SignatureScheme::ML_DSA_65 => "mldsa65",
        SignatureScheme::ML_DSA_87 => "mldsa87",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoist_config::model::tls::CipherSuite as ConfigSuite;

    #[test]
    fn tls12_names_agree_with_the_config_model() {
        use crate::server_config::suite_for;
        for c in ConfigSuite::ALL {
            assert_eq!(cipher(suite_for(c).suite()), c.openssl_name());
        }
    }

    #[test]
    fn tls13_and_groups() {
        assert_eq!(
            cipher(CipherSuite::TLS13_AES_256_GCM_SHA384),
            "TLS_AES_256_GCM_SHA384"
        );
        assert_eq!(group(NamedGroup::secp256r1), "P-256");
        assert_eq!(version(ProtocolVersion::TLSv1_3), "TLSv1.3");
        assert_eq!(
            sigalg(SignatureScheme::RSA_PSS_SHA256),
            "rsa_pss_rsae_sha256"
        );
        assert_eq!(cipher(CipherSuite::from(0x1234)), "unknown");
    }
}

//! TLS parameter names as Envoy (BoringSSL) spells them: protocol versions, cipher suites with
//! `[A|B]` groups, and ECDH curves.

use crate::model::{CipherGroup, CipherSuite, Curve, TlsVersion};

/// `TlsParameters.TlsProtocol`, in number order. `TLS_AUTO` (index 0) means the default.
pub(crate) const TLS_PROTOCOLS: [&str; 5] =
    ["TLS_AUTO", "TLSv1_0", "TLSv1_1", "TLSv1_2", "TLSv1_3"];

/// The version for a non-AUTO index into [`TLS_PROTOCOLS`].
pub(crate) fn tls_version(index: usize) -> Option<TlsVersion> {
    match index {
        1 => Some(TlsVersion::Tls1_0),
        2 => Some(TlsVersion::Tls1_1),
        3 => Some(TlsVersion::Tls1_2),
        4 => Some(TlsVersion::Tls1_3),
        _ => None,
    }
}

pub(crate) fn tls_version_name(v: TlsVersion) -> &'static str {
    match v {
        TlsVersion::Tls1_0 => "TLSv1_0",
        TlsVersion::Tls1_1 => "TLSv1_1",
        TlsVersion::Tls1_2 => "TLSv1_2",
        TlsVersion::Tls1_3 => "TLSv1_3",
    }
}

/// Valid BoringSSL cipher names that rustls cannot offer (CBC, RSA key exchange, PSK, 3DES).
const NON_AEAD_SUITES: &[&str] = &[
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
    "ECDHE-ECDSA-AES128-SHA256",
    "ECDHE-RSA-AES128-SHA256",
    "ECDHE-ECDSA-AES256-SHA384",
    "ECDHE-RSA-AES256-SHA384",
    "ECDHE-PSK-AES128-CBC-SHA",
    "ECDHE-PSK-AES256-CBC-SHA",
    "ECDHE-PSK-CHACHA20-POLY1305",
    "PSK-AES128-CBC-SHA",
    "PSK-AES256-CBC-SHA",
    "AES128-GCM-SHA256",
    "AES256-GCM-SHA384",
    "AES128-SHA",
    "AES256-SHA",
    "AES128-SHA256",
    "AES256-SHA256",
    "DES-CBC3-SHA",
];

/// TLS 1.3 suite names: BoringSSL does not let `cipher_suites` configure them.
const TLS13_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// One `cipher_suites` entry: a suite name, or `[A|B|...]`, an equal-preference group.
pub(crate) fn cipher_group(entry: &str) -> Result<CipherGroup, String> {
    let members: Vec<&str> = match entry.strip_prefix('[') {
        Some(rest) => match rest.strip_suffix(']') {
            Some(inner) => inner.split('|').collect(),
            None => return Err(format!("cipher group \"{entry}\" has no closing \"]\"")),
        },
        None => vec![entry],
    };
    let mut group = CipherGroup::new();
    for name in members {
        group.push(cipher_suite(name)?);
    }
    Ok(group)
}

fn cipher_suite(name: &str) -> Result<CipherSuite, String> {
    if let Some(suite) = CipherSuite::from_openssl_name(name) {
        return Ok(suite);
    }
    if NON_AEAD_SUITES.contains(&name) {
        return Err(format!(
            "cipher suite \"{name}\" is not supported by hoist (rustls offers only AEAD suites)"
        ));
    }
    if TLS13_SUITES.contains(&name) {
        return Err(format!(
            "cipher suite \"{name}\" is a TLS 1.3 suite; cipher_suites configures TLS 1.2 only"
        ));
    }
    let known: Vec<&str> = CipherSuite::ALL.iter().map(|c| c.openssl_name()).collect();
    Err(format!(
        "unknown cipher suite \"{name}\"; hoist supports {}",
        known.join(", ")
    ))
}

/// One `ecdh_curves` entry, with the aliases BoringSSL accepts.
pub(crate) fn curve(name: &str) -> Result<Curve, String> {
    match name {
        "X25519" | "x25519" => Ok(Curve::X25519),
        "P-256" | "prime256v1" | "secp256r1" => Ok(Curve::P256),
        "P-384" | "secp384r1" => Ok(Curve::P384),
        "X25519MLKEM768" => Ok(Curve::X25519Mlkem768),
        "P-224" | "secp224r1" | "P-521" | "secp521r1" | "X25519Kyber768Draft00" => Err(format!(
            "curve \"{name}\" is not supported by hoist; use X25519, P-256, P-384 or X25519MLKEM768"
        )),
        _ => Err(format!(
            "unknown curve \"{name}\"; hoist supports X25519, P-256, P-384, X25519MLKEM768"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_keeps_its_members_in_order() {
        assert_eq!(
            cipher_group("[ECDHE-RSA-AES256-GCM-SHA384|ECDHE-RSA-AES128-GCM-SHA256]"),
            Ok(vec![
                CipherSuite::EcdheRsaAes256GcmSha384,
                CipherSuite::EcdheRsaAes128GcmSha256
            ])
        );
        assert_eq!(
            cipher_group("ECDHE-ECDSA-CHACHA20-POLY1305"),
            Ok(vec![CipherSuite::EcdheEcdsaChacha20Poly1305])
        );
    }

    #[test]
    fn groups_and_names_are_checked() {
        assert_eq!(
            cipher_group("[ECDHE-RSA-AES128-GCM-SHA256"),
            Err("cipher group \"[ECDHE-RSA-AES128-GCM-SHA256\" has no closing \"]\"".into())
        );
        assert_eq!(
            cipher_group("[ECDHE-RSA-AES128-GCM-SHA256|AES128-SHA]"),
            Err("cipher suite \"AES128-SHA\" is not supported by hoist (rustls offers only AEAD suites)".into())
        );
        assert!(cipher_group("[]").is_err());
        assert!(cipher_group("TLS_AES_128_GCM_SHA256")
            .unwrap_err()
            .contains("TLS 1.3"));
    }

    #[test]
    fn curve_aliases_map_to_one_curve() {
        assert_eq!(curve("prime256v1"), Ok(Curve::P256));
        assert_eq!(curve("X25519MLKEM768"), Ok(Curve::X25519Mlkem768));
        assert!(curve("P-521").unwrap_err().contains("not supported"));
        assert!(curve("nope").unwrap_err().starts_with("unknown curve"));
    }
}

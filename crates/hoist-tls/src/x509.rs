//! The few facts hoist needs from certificates: the DNS names a server certificate answers for
//! (certificate selection by SNI), the subject of a client certificate as Envoy prints it
//! (RFC 2253, for logs and headers), and its subject alternative names (SAN matchers).

use std::fmt::Write as _;
use std::net::IpAddr;

use hoist_config::model::tls::{SanMatch, SanType};
use x509_parser::asn1_rs::ToDer;
use x509_parser::certificate::X509Certificate;
use x509_parser::extensions::GeneralName;
use x509_parser::prelude::FromDer;
use x509_parser::x509::X509Name;

fn parse(der: &[u8]) -> Option<X509Certificate<'_>> {
    X509Certificate::from_der(der).ok().map(|(_, cert)| cert)
}

/// Lower-cased DNS names of the certificate's SAN, or its common names when it has no DNS SAN
/// (what BoringSSL matches too); sorted and deduplicated so that two lists compare as sets.
pub(crate) fn dns_names(der: &[u8]) -> Vec<String> {
    let Some(cert) = parse(der) else {
        return Vec::new();
    };
    let mut names: Vec<String> = match cert.subject_alternative_name() {
        Ok(Some(san)) => san
            .value
            .general_names
            .iter()
            .filter_map(|n| match n {
                GeneralName::DNSName(d) => Some(d.to_ascii_lowercase()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    if names.is_empty() {
        names = cert
            .subject()
            .iter_common_name()
            .filter_map(|cn| cn.as_str().ok())
            .map(str::to_ascii_lowercase)
            .collect();
    }
    names.sort();
    names.dedup();
    names
}

/// Whether a certificate name (possibly `*.example.com`) covers `host` (lower-cased). A
/// wildcard stands for exactly one non-empty label, as in RFC 6125.
pub(crate) fn name_matches(name: &str, host: &str) -> bool {
    if let Some(suffix) = name.strip_prefix("*.") {
        match host.split_once('.') {
            Some((label, rest)) => !label.is_empty() && rest == suffix,
            None => false,
        }
    } else {
        name == host
    }
}

/// The subject in RFC 2253 form, most specific RDN first (`CN=client,O=Acme,C=US`): what
/// Envoy's `%DOWNSTREAM_PEER_SUBJECT%` prints.
pub(crate) fn subject_rfc2253(der: &[u8]) -> Option<String> {
    let cert = parse(der)?;
    Some(format_name(cert.subject()))
}

fn format_name(name: &X509Name<'_>) -> String {
    let mut out = String::new();
    let rdns: Vec<_> = name.iter_rdn().collect();
    for (i, rdn) in rdns.iter().rev().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for (j, atv) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = atv.attr_type().to_id_string();
            match (short_name(&oid), atv.as_str()) {
                (Some(short), Ok(value)) => {
                    out.push_str(short);
                    out.push('=');
                    escape_value(&mut out, value);
                }
                // RFC 2253 §2.4: unknown types or non-string values as the OID and `#` + hex
                // of the BER encoding.
                _ => {
                    out.push_str(short_name(&oid).unwrap_or(&oid));
                    out.push_str("=#");
                    for b in atv.attr_value().to_der_vec().unwrap_or_default() {
                        let _ = write!(out, "{b:02X}");
                    }
                }
            }
        }
    }
    out
}

fn short_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.6" => "C",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.9" => "STREET",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.5" => "serialNumber",
        "0.9.2342.19200300.100.1.1" => "UID",
        "0.9.2342.19200300.100.1.25" => "DC",
        "1.2.840.113549.1.9.1" => "emailAddress",
        _ => return None,
    })
}

fn escape_value(out: &mut String, value: &str) {
    let last = value.chars().count().saturating_sub(1);
    for (i, c) in value.chars().enumerate() {
        let special = matches!(c, ',' | '+' | '"' | '\\' | '<' | '>' | ';')
            || (i == 0 && (c == '#' || c == ' '))
            || (i == last && c == ' ');
        if special {
            out.push('\\');
        }
        out.push(c);
    }
}

/// Whether the certificate has a SAN equal to one of `matchers` (Envoy's
/// `match_typed_subject_alt_names` with exact matchers: any one match accepts).
pub(crate) fn san_matches(der: &[u8], matchers: &[SanMatch]) -> bool {
    let Some(cert) = parse(der) else {
        return false;
    };
    let Ok(Some(san)) = cert.subject_alternative_name() else {
        return false;
    };
    san.value.general_names.iter().any(|name| {
        matchers.iter().any(|m| match (m.san_type, name) {
            (SanType::Dns, GeneralName::DNSName(d)) => *d == m.exact,
            (SanType::Uri, GeneralName::URI(u)) => *u == m.exact,
            (SanType::Email, GeneralName::RFC822Name(e)) => *e == m.exact,
            (SanType::IpAddress, GeneralName::IPAddress(raw)) => ip_from_san(raw)
                .zip(m.exact.parse::<IpAddr>().ok())
                .is_some_and(|(a, b)| a == b),
            _ => false,
        })
    })
}

fn ip_from_san(raw: &[u8]) -> Option<IpAddr> {
    match raw.len() {
        4 => <[u8; 4]>::try_from(raw).ok().map(IpAddr::from),
        16 => <[u8; 16]>::try_from(raw).ok().map(IpAddr::from),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_cover_one_label() {
        assert!(name_matches("*.example.com", "a.example.com"));
        assert!(!name_matches("*.example.com", "a.b.example.com"));
        assert!(!name_matches("*.example.com", "example.com"));
        assert!(name_matches("example.com", "example.com"));
        assert!(!name_matches("example.com", "a.example.com"));
    }

    #[test]
    fn escaping() {
        let mut s = String::new();
        escape_value(&mut s, "#a,b ");
        assert_eq!(s, "\\#a\\,b\\ ");
    }

    #[test]
    fn garbage_is_not_a_certificate() {
        assert!(dns_names(b"not a certificate").is_empty());
        assert!(subject_rfc2253(b"\x30\x03\x02\x01\x00").is_none());
        assert!(!san_matches(b"", &[]));
    }
}

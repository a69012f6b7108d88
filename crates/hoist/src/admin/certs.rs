//! /certs: the certificates hoist serves and trusts, with the details operators watch
//! (serial, names, expiry), in Envoy's shape.

use hoist_config::model::{DataSource, TlsCertificate};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use serde_json::{json, Value};
use x509_parser::prelude::*;

use crate::server::ServerState;

pub fn certs(state: &ServerState) -> Value {
    let mut out = Vec::new();
    for listener in &state.bootstrap.listeners {
        let chains = listener
            .filter_chains
            .iter()
            .chain(listener.default_filter_chain.iter());
        for chain in chains {
            let Some(tls) = &chain.tls else { continue };
            let ca: Vec<Value> = tls
                .validation_context
                .as_ref()
                .map(|v| describe_source(&v.trusted_ca))
                .unwrap_or_default();
            let cert_chain: Vec<Value> = tls
                .tls_certificates
                .iter()
                .flat_map(|c: &TlsCertificate| describe_source(&c.certificate_chain))
                .collect();
            out.push(json!({"ca_cert": ca, "cert_chain": cert_chain}));
        }
    }
    json!({ "certificates": out })
}

fn describe_source(source: &DataSource) -> Vec<Value> {
    let path = match source {
        DataSource::File { path, .. } => path.display().to_string(),
        DataSource::Inline(_) => "<inline>".to_string(),
        DataSource::Env { name, .. } => format!("<environment variable {name}>"),
    };
    let Ok(pem) = source.read() else {
        return vec![json!({"path": path, "error": "unreadable"})];
    };
    CertificateDer::pem_slice_iter(&pem)
        .filter_map(Result::ok)
        .map(|der| describe(&path, &der))
        .collect()
}

fn describe(path: &str, der: &[u8]) -> Value {
    let Ok((_, cert)) = X509Certificate::from_der(der) else {
        return json!({"path": path, "error": "not a parsable X.509 certificate"});
    };
    let sans: Vec<Value> = cert
        .subject_alternative_name()
        .ok()
        .flatten()
        .map(|ext| {
            ext.value
                .general_names
                .iter()
                .filter_map(|n| match n {
                    GeneralName::DNSName(d) => Some(json!({"dns": d})),
                    GeneralName::URI(u) => Some(json!({"uri": u})),
                    GeneralName::RFC822Name(e) => Some(json!({"email": e})),
                    GeneralName::IPAddress(ip) => Some(json!({"ip_address": format_ip(ip)})),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let validity = cert.validity();
    let days = validity.time_to_expiration().map_or(0, |d| d.whole_days());
    json!({
        "path": path,
        "serial_number": cert.raw_serial_as_string().replace(':', ""),
        "subject_alt_names": sans,
        "subject": cert.subject().to_string(),
        "days_until_expiration": days.to_string(),
        "valid_from": asn1_to_rfc3339(&validity.not_before),
        "expiration_time": asn1_to_rfc3339(&validity.not_after),
    })
}

fn asn1_to_rfc3339(t: &ASN1Time) -> String {
    let dt = t.to_datetime();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
        dt.year(),
        u8::from(dt.month()),
        dt.day(),
        dt.hour(),
        dt.minute(),
        dt.second()
    )
}

fn format_ip(bytes: &[u8]) -> String {
    match bytes.len() {
        4 => std::net::Ipv4Addr::new(bytes[0], bytes[1], bytes[2], bytes[3]).to_string(),
        16 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(bytes);
            std::net::Ipv6Addr::from(a).to_string()
        }
        _ => String::new(),
    }
}

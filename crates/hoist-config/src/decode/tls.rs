//! `envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext`, and what the listener's and
//! the cluster's TLS share: the transport socket choice, certificates, parameters,
//! validation and the refused CommonTlsContext fields.

use rustls_pki_types::pem::{self, PemObject};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use super::cipher::{cipher_group, curve, tls_version, tls_version_name, TLS_PROTOCOLS};
use super::core::{data_source, describe_source};
use crate::extension::{select, Kind, Slot};
use crate::model::{
    DataSource, DownstreamTlsContext, SanMatch, SanType, TlsCertificate, TlsParams, TlsVersion,
    ValidationContext,
};
use crate::reader::{Message, Node, Result};

const RAW_BUFFER: Kind = Kind {
    type_name: "envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer",
    names: &["envoy.transport_sockets.raw_buffer", "raw_buffer"],
    name_only: true,
};

/// `CommonTlsContext` fields hoist refuses, on either side (SDS, certificate providers,
/// custom handshakers, key logging).
pub(crate) const COMMON_TLS_CONTEXT_UNSUPPORTED: &[&str] = &[
    "tls_certificate_sds_secret_configs",
    "tls_certificate_provider_instance",
    "custom_tls_certificate_selector",
    "tls_certificate_certificate_provider",
    "tls_certificate_certificate_provider_instance",
    "validation_context_sds_secret_config",
    "combined_validation_context",
    "validation_context_certificate_provider",
    "validation_context_certificate_provider_instance",
    "custom_handshaker",
    "key_log",
];

/// `CommonTlsContext.alpn_protocols`: names of 1 to 255 bytes.
pub(crate) fn alpn_protocols(c: &mut Message) -> Result<Vec<String>> {
    let mut protocols = Vec::new();
    for item in c.list("alpn_protocols")? {
        let p = item.string()?;
        if p.is_empty() || p.len() > 255 {
            return Err(item.error("an ALPN protocol name is 1 to 255 bytes"));
        }
        protocols.push(p);
    }
    Ok(protocols)
}

/// A `transport_socket`: `tls` (the listener's Downstream- or the cluster's
/// UpstreamTlsContext, decoded by `decode`) or `raw_buffer` (plain TCP, `None`).
pub(crate) fn transport_socket<T>(
    node: &Node,
    tls: Kind,
    decode: impl FnOnce(Message) -> Result<T>,
) -> Result<Option<T>> {
    let mut m = node.message()?;
    let context = match select(&mut m, "transport socket", &[tls, RAW_BUFFER])? {
        Slot::Known {
            index: 0,
            config: Some(typed),
            ..
        } => Some(decode(typed.body)?),
        Slot::Known { config, .. } => {
            if let Some(typed) = config {
                typed.body.finish()?;
            }
            None
        }
        Slot::Unsupported(e) => return Err(e),
    };
    m.finish()?;
    Ok(context)
}

/// Envoy's session ticket key format: 16 bytes name, 32 bytes HMAC secret, 32 bytes AES key.
const TICKET_KEY_LEN: u64 = 80;

pub(crate) fn downstream_tls_context(mut m: Message) -> Result<DownstreamTlsContext> {
    m.unsupported(&[
        "require_sni",
        "session_ticket_keys_sds_secret_config",
        "disable_stateful_session_resumption",
        "ocsp_staple_policy",
        "full_scan_certs_on_sni_mismatch",
        "prefer_client_ciphers",
    ])?;
    let yaml_path = m.path().to_owned();
    let common = m.required("common_tls_context")?;
    let require_client_certificate = m.bool("require_client_certificate", false)?;

    m.oneof(
        &[
            "session_ticket_keys",
            "disable_stateless_session_resumption",
        ],
        false,
    )?;
    let session_tickets = !m.bool("disable_stateless_session_resumption", false)?;
    let session_ticket_keys = match m.field("session_ticket_keys")? {
        Some(n) => ticket_keys(&n)?,
        None => Vec::new(),
    };
    // A ticket lifetime hint; rustls picks its own (accepted, like Envoy accepts it everywhere).
    if let Some(n) = m.field("session_timeout")? {
        if n.duration()?.as_secs() >= 1 << 32 {
            return Err(n.error("session_timeout must be less than 4294967296s"));
        }
    }
    m.finish()?;

    let mut c = common.message()?;
    c.unsupported(COMMON_TLS_CONTEXT_UNSUPPORTED)?;
    let tls_params = match c.field("tls_params")? {
        Some(n) => tls_params(&n)?,
        None => TlsParams::default(),
    };
    let certs = c.list("tls_certificates")?;
    if certs.is_empty() {
        return Err(c.error("missing required field \"tls_certificates\""));
    }
    let tls_certificates = certs
        .iter()
        .map(tls_certificate)
        .collect::<Result<Vec<_>>>()?;
    let alpn_protocols = alpn_protocols(&mut c)?;
    let validation_context = c
        .field("validation_context")?
        .map(|n| validation_context(&n))
        .transpose()?;
    c.finish()?;

    if require_client_certificate && validation_context.is_none() {
        return Err(crate::ConfigError::new(
            yaml_path,
            "require_client_certificate needs common_tls_context.validation_context with a trusted_ca",
        ));
    }
    Ok(DownstreamTlsContext {
        tls_params,
        tls_certificates,
        alpn_protocols,
        validation_context,
        require_client_certificate,
        session_tickets,
        session_ticket_keys,
        yaml_path,
    })
}

pub(crate) fn tls_params(node: &Node) -> Result<TlsParams> {
    let mut m = node.message()?;
    m.unsupported(&["signature_algorithms", "compliance_policies"])?;
    let min_version = m
        .enumeration("tls_minimum_protocol_version", &TLS_PROTOCOLS)?
        .and_then(tls_version)
        .unwrap_or(TlsVersion::Tls1_2);
    let max_node = m.field("tls_maximum_protocol_version")?;
    let max_version = match &max_node {
        Some(n) => tls_version(n.enumeration(&TLS_PROTOCOLS)?).unwrap_or(TlsVersion::Tls1_3),
        None => TlsVersion::Tls1_3,
    };
    if let Some(n) = &max_node {
        if max_version < TlsVersion::Tls1_2 {
            return Err(n.error(format!(
                "{} is not supported as a maximum: hoist speaks TLS 1.2 and 1.3",
                tls_version_name(max_version)
            )));
        }
    }
    if min_version > max_version {
        return Err(m.error(format!(
            "tls_minimum_protocol_version {} is greater than tls_maximum_protocol_version {}",
            tls_version_name(min_version),
            tls_version_name(max_version)
        )));
    }
    let mut cipher_suites = Vec::new();
    for item in m.list("cipher_suites")? {
        cipher_suites.push(cipher_group(item.str()?).map_err(|e| item.error(e))?);
    }
    let mut ecdh_curves = Vec::new();
    for item in m.list("ecdh_curves")? {
        ecdh_curves.push(curve(item.str()?).map_err(|e| item.error(e))?);
    }
    m.finish()?;
    Ok(TlsParams {
        min_version,
        max_version,
        cipher_suites,
        ecdh_curves,
    })
}

pub(crate) fn tls_certificate(node: &Node) -> Result<TlsCertificate> {
    let mut m = node.message()?;
    m.unsupported(&[
        "pkcs12",
        "watched_directory",
        "private_key_provider",
        "password",
        "ocsp_staple",
        "signed_certificate_timestamp",
    ])?;
    let chain_node = m.required("certificate_chain")?;
    let certificate_chain = data_source(&chain_node)?;
    certificates(&chain_node, &certificate_chain)?;
    let key_node = m.required("private_key")?;
    let private_key = data_source(&key_node)?;
    let key = read(&key_node, &private_key)?;
    match PrivateKeyDer::from_pem_slice(&key) {
        Ok(_) => {}
        Err(pem::Error::NoItemsFound) => {
            return Err(key_node.error(format!(
                "no private key found in {}",
                describe_source(&private_key)
            )))
        }
        Err(e) => return Err(key_node.error(format!("invalid PEM: {e}"))),
    }
    m.finish()?;
    Ok(TlsCertificate {
        certificate_chain,
        private_key,
        yaml_path: node.path().to_owned(),
    })
}

/// Checks that `source` holds at least one PEM certificate and nothing malformed.
fn certificates(node: &Node, source: &DataSource) -> Result<()> {
    let bytes = read(node, source)?;
    let mut count = 0;
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        cert.map_err(|e| node.error(format!("invalid PEM: {e}")))?;
        count += 1;
    }
    if count == 0 {
        return Err(node.error(format!(
            "no certificate found in {}",
            describe_source(source)
        )));
    }
    Ok(())
}

fn read(node: &Node, source: &DataSource) -> Result<Vec<u8>> {
    source
        .read()
        .map_err(|e| node.error(format!("cannot read {}: {e}", describe_source(source))))
}

fn ticket_keys(node: &Node) -> Result<Vec<Vec<u8>>> {
    let mut m = node.message()?;
    let items = m.list("keys")?;
    if items.is_empty() {
        return Err(m.error("missing required field \"keys\""));
    }
    let mut keys = Vec::with_capacity(items.len());
    for item in &items {
        let source = data_source(item)?;
        if source.len() != TICKET_KEY_LEN {
            return Err(item.error(format!(
                "a session ticket key is {} bytes; it must be exactly {TICKET_KEY_LEN}",
                source.len()
            )));
        }
        keys.push(read(item, &source)?);
    }
    m.finish()?;
    Ok(keys)
}

pub(crate) fn validation_context(node: &Node) -> Result<ValidationContext> {
    let mut m = node.message()?;
    m.unsupported(&[
        "ca_certificate_provider_instance",
        "system_root_certs",
        "watched_directory",
        "verify_certificate_spki",
        "verify_certificate_hash",
        "match_subject_alt_names",
        "require_signed_certificate_timestamp",
        "crl",
        "allow_expired_certificate",
        "trust_chain_verification",
        "custom_validator_config",
        "only_verify_leaf_cert_crl",
        "max_verify_depth",
    ])?;
    let ca_node = m.required("trusted_ca")?;
    let trusted_ca = data_source(&ca_node)?;
    certificates(&ca_node, &trusted_ca)?;
    let subject_alt_names = m
        .list("match_typed_subject_alt_names")?
        .iter()
        .map(san_matcher)
        .collect::<Result<Vec<_>>>()?;
    m.finish()?;
    Ok(ValidationContext {
        trusted_ca,
        subject_alt_names,
        yaml_path: node.path().to_owned(),
    })
}

fn san_matcher(node: &Node) -> Result<SanMatch> {
    let mut m = node.message()?;
    m.unsupported(&["oid"])?;
    let type_node = m.required("san_type")?;
    let san_type = match type_node.enumeration(&[
        "SAN_TYPE_UNSPECIFIED",
        "EMAIL",
        "DNS",
        "URI",
        "IP_ADDRESS",
        "OTHER_NAME",
    ])? {
        1 => SanType::Email,
        2 => SanType::Dns,
        3 => SanType::Uri,
        4 => SanType::IpAddress,
        5 => return Err(type_node.error("san_type OTHER_NAME is not supported by hoist yet")),
        _ => return Err(type_node.error("san_type must be EMAIL, DNS, URI or IP_ADDRESS")),
    };
    let mut matcher = m.required("matcher")?.message()?;
    matcher.unsupported(&[
        "prefix",
        "suffix",
        "safe_regex",
        "contains",
        "custom",
        "ignore_case",
    ])?;
    let exact = matcher.required("exact")?.string()?;
    matcher.finish()?;
    m.finish()?;
    Ok(SanMatch { san_type, exact })
}

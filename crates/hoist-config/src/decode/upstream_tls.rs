//! A cluster's `transport_socket`: raw_buffer, or TLS to the upstream
//! (`envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext`).

use super::tls::{
    self, tls_certificate, tls_params, validation_context, COMMON_TLS_CONTEXT_UNSUPPORTED,
};
use crate::extension::Kind;
use crate::model::{TlsParams, TlsVersion, UpstreamTlsContext};
use crate::reader::{Message, Node, Result};

const UPSTREAM_TLS: Kind = Kind {
    type_name: "envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
    names: &["envoy.transport_sockets.tls", "tls"],
    name_only: false,
};

pub(super) fn transport_socket(node: &Node) -> Result<Option<UpstreamTlsContext>> {
    tls::transport_socket(node, UPSTREAM_TLS, upstream_tls_context)
}

fn upstream_tls_context(mut m: Message) -> Result<UpstreamTlsContext> {
    m.unsupported(&[
        "allow_renegotiation",
        "max_session_keys",
        "enforce_rsa_key_usage",
        "auto_host_sni",
        "auto_sni_san_validation",
    ])?;
    let yaml_path = m.path().to_owned();
    let sni = match m.field("sni")? {
        Some(n) => {
            let s = n.string()?;
            if s.len() > 255 {
                return Err(n.error("sni is at most 255 bytes"));
            }
            (!s.is_empty()).then_some(s)
        }
        None => None,
    };
    let mut params = TlsParams {
        max_version: TlsVersion::Tls1_2,
        ..TlsParams::default()
    };
    let mut alpn_protocols = Vec::new();
    let mut client_certificate = None;
    let (trusted_ca, subject_alt_names) = match m.field("common_tls_context")? {
        Some(n) => {
            let mut c = n.message()?;
            c.unsupported(COMMON_TLS_CONTEXT_UNSUPPORTED)?;
            if let Some(n) = c.field("tls_params")? {
                params = upstream_tls_params(&n)?;
            }
            let certs = c.list("tls_certificates")?;
            if certs.len() > 1 {
                return Err(c.error("an upstream presents at most one client certificate"));
            }
            if let Some(n) = certs.first() {
                client_certificate = Some(tls_certificate(n)?);
            }
            alpn_protocols = tls::alpn_protocols(&mut c)?;
            let v = c
                .field("validation_context")?
                .map(|n| validation_context(&n))
                .transpose()?;
            c.finish()?;
            match v {
                Some(v) => (Some(v.trusted_ca), v.subject_alt_names),
                None => (None, Vec::new()),
            }
        }
        None => (None, Vec::new()),
    };
    m.finish()?;
    Ok(UpstreamTlsContext {
        sni,
        trusted_ca,
        subject_alt_names,
        min_version: params.min_version,
        max_version: params.max_version,
        alpn_protocols,
        client_certificate,
        yaml_path,
    })
}

/// `tls_params` of an upstream: versions only. Envoy's client maximum is TLS 1.2 unless set
/// (or unless the minimum is 1.3).
fn upstream_tls_params(n: &Node) -> Result<TlsParams> {
    let mut p = tls_params(n)?;
    if !p.cipher_suites.is_empty() || !p.ecdh_curves.is_empty() {
        return Err(n.error(
            "upstream tls_params: cipher_suites and ecdh_curves are not supported (versions only)",
        ));
    }
    let explicit_max = n
        .message()?
        .field("tls_maximum_protocol_version")?
        .is_some();
    if !explicit_max && p.min_version < TlsVersion::Tls1_3 {
        p.max_version = TlsVersion::Tls1_2;
    }
    Ok(p)
}

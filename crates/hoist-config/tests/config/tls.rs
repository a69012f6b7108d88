//! DownstreamTlsContext: versions, ciphers, curves, certificates, data sources, tickets,
//! client certificates.

use hoist_config::model::{CipherSuite, Curve, DataSource, SanType, TlsVersion};
use serde_json::json;

use crate::common::*;

fn context(v: &serde_json::Value) -> hoist_config::model::DownstreamTlsContext {
    ok(v).listeners[0].filter_chains[0]
        .tls
        .clone()
        .expect("a TLS context")
}

const COMMON: &str = "/static_resources/listeners/0/filter_chains/0/transport_socket/typed_config/common_tls_context";
const CERT: &str = "/static_resources/listeners/0/filter_chains/0/transport_socket/typed_config/common_tls_context/tls_certificates/0";

fn common_path() -> String {
    format!("{TLS_PATH}.common_tls_context")
}

fn cert_path() -> String {
    format!("{TLS_PATH}.common_tls_context.tls_certificates[0]")
}

#[test]
fn defaults() {
    let c = context(&tls());
    assert_eq!(c.tls_params.min_version, TlsVersion::Tls1_2);
    assert_eq!(c.tls_params.max_version, TlsVersion::Tls1_3);
    assert!(c.tls_params.cipher_suites.is_empty());
    assert!(c.tls_params.ecdh_curves.is_empty());
    assert!(c.alpn_protocols.is_empty());
    assert!(c.session_tickets);
    assert!(c.session_ticket_keys.is_empty());
    assert!(!c.require_client_certificate);
    assert_eq!(c.yaml_path, TLS_PATH);
    assert_eq!(c.tls_certificates[0].yaml_path, cert_path());
    let crt_size = std::fs::metadata(data("rsa.crt")).unwrap().len();
    assert_eq!(
        c.tls_certificates[0].certificate_chain,
        DataSource::File {
            path: data("rsa.crt").into(),
            size: crt_size
        }
    );
}

#[test]
fn tls_params_are_decoded() {
    let mut v = tls();
    set(
        &mut v,
        &format!("{COMMON}/tls_params"),
        json!({
            "tls_minimum_protocol_version": "TLSv1_2",
            "tls_maximum_protocol_version": "TLS_AUTO",
            "cipher_suites": ["[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]",
                              "ECDHE-RSA-AES256-GCM-SHA384"],
            "ecdh_curves": ["X25519MLKEM768", "X25519", "P-256"]
        }),
    );
    set(
        &mut v,
        &format!("{COMMON}/alpn_protocols"),
        json!(["h2", "http/1.1"]),
    );
    let c = context(&v);
    assert_eq!(c.tls_params.max_version, TlsVersion::Tls1_3);
    assert_eq!(
        c.tls_params.cipher_suites,
        vec![
            vec![
                CipherSuite::EcdheEcdsaAes128GcmSha256,
                CipherSuite::EcdheEcdsaChacha20Poly1305
            ],
            vec![CipherSuite::EcdheRsaAes256GcmSha384],
        ]
    );
    assert_eq!(
        c.tls_params.ecdh_curves,
        [Curve::X25519Mlkem768, Curve::X25519, Curve::P256]
    );
    assert_eq!(c.alpn_protocols, ["h2", "http/1.1"]);
}

#[test]
fn version_faults() {
    let params = format!("{COMMON}/tls_params");
    let mut v = tls();
    set(
        &mut v,
        &params,
        json!({"tls_minimum_protocol_version": "TLSv1_3",
                                "tls_maximum_protocol_version": "TLSv1_2"}),
    );
    assert_eq!(
        error(&v),
        format!("{}.tls_params: tls_minimum_protocol_version TLSv1_3 is greater than tls_maximum_protocol_version TLSv1_2", common_path())
    );

    set(
        &mut v,
        &params,
        json!({"tls_maximum_protocol_version": "TLSv1_1"}),
    );
    assert_eq!(
        error(&v),
        format!("{}.tls_params.tls_maximum_protocol_version: TLSv1_1 is not supported as a maximum: hoist speaks TLS 1.2 and 1.3", common_path())
    );

    // A 1.0/1.1 minimum is accepted; the runtime clamps it to 1.2.
    set(
        &mut v,
        &params,
        json!({"tls_minimum_protocol_version": "TLSv1_0"}),
    );
    assert_eq!(context(&v).tls_params.min_version, TlsVersion::Tls1_0);

    set(
        &mut v,
        &params,
        json!({"tls_minimum_protocol_version": "TLSv1.2"}),
    );
    assert_eq!(
        error(&v),
        format!("{}.tls_params.tls_minimum_protocol_version: unknown value \"TLSv1.2\"; expected one of TLS_AUTO, TLSv1_0, TLSv1_1, TLSv1_2, TLSv1_3", common_path())
    );
}

#[test]
fn cipher_and_curve_faults() {
    let params = format!("{COMMON}/tls_params");
    let mut v = tls();
    set(
        &mut v,
        &params,
        json!({"cipher_suites": ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA"]}),
    );
    assert_eq!(
        error(&v),
        format!("{}.tls_params.cipher_suites[1]: cipher suite \"ECDHE-RSA-AES128-SHA\" is not supported by hoist (rustls offers only AEAD suites)", common_path())
    );
    set(
        &mut v,
        &params,
        json!({"cipher_suites": ["ECDHE-RSA-AES129-GCM-SHA256"]}),
    );
    assert_eq!(
        error(&v),
        format!("{}.tls_params.cipher_suites[0]: unknown cipher suite \"ECDHE-RSA-AES129-GCM-SHA256\"; hoist supports ECDHE-ECDSA-AES128-GCM-SHA256, ECDHE-RSA-AES128-GCM-SHA256, ECDHE-ECDSA-CHACHA20-POLY1305, ECDHE-RSA-CHACHA20-POLY1305, ECDHE-ECDSA-AES256-GCM-SHA384, ECDHE-RSA-AES256-GCM-SHA384", common_path())
    );
    set(&mut v, &params, json!({"ecdh_curves": ["P-521"]}));
    assert_eq!(
        error(&v),
        format!("{}.tls_params.ecdh_curves[0]: curve \"P-521\" is not supported by hoist; use X25519, P-256, P-384 or X25519MLKEM768", common_path())
    );
    set(
        &mut v,
        &params,
        json!({"signature_algorithms": ["rsa_pss_rsae_sha256"]}),
    );
    assert_eq!(
        error(&v),
        format!(
            "{}.tls_params: field \"signature_algorithms\" is not supported by hoist yet",
            common_path()
        )
    );
}

#[test]
fn certificate_faults() {
    let mut v = tls();
    set(&mut v, &format!("{COMMON}/tls_certificates"), json!([]));
    assert_eq!(
        error(&v),
        format!(
            "{}: missing required field \"tls_certificates\"",
            common_path()
        )
    );

    let mut v = tls();
    set(
        &mut v,
        &format!("{CERT}/certificate_chain/filename"),
        json!("/nonexistent/server.crt"),
    );
    assert_eq!(
        error(&v),
        format!("{}.certificate_chain.filename: cannot read \"/nonexistent/server.crt\": No such file or directory (os error 2)", cert_path())
    );

    let mut v = tls();
    set(
        &mut v,
        &format!("{CERT}/certificate_chain/filename"),
        json!(data("rsa.key")),
    );
    assert_eq!(
        error(&v),
        format!(
            "{}.certificate_chain: no certificate found in \"{}\"",
            cert_path(),
            data("rsa.key")
        )
    );

    let mut v = tls();
    set(
        &mut v,
        &format!("{CERT}/private_key/filename"),
        json!(data("rsa.crt")),
    );
    assert_eq!(
        error(&v),
        format!(
            "{}.private_key: no private key found in \"{}\"",
            cert_path(),
            data("rsa.crt")
        )
    );

    let mut v = tls();
    set(
        &mut v,
        &format!("{CERT}/private_key"),
        json!({"inline_string": "-----BEGIN PRIVATE KEY-----\nAAAA\n"}),
    );
    let e = error(&v);
    assert!(
        e.starts_with(&format!(
            "{}.private_key: invalid PEM: missing section end marker",
            cert_path()
        )),
        "{e}"
    );

    let mut v = tls();
    remove(&mut v, &format!("{CERT}/private_key"));
    assert_eq!(
        error(&v),
        format!("{}: missing required field \"private_key\"", cert_path())
    );

    let mut v = tls();
    set(
        &mut v,
        &format!("{CERT}/password"),
        json!({"inline_string": "x"}),
    );
    assert_eq!(
        error(&v),
        format!(
            "{}: field \"password\" is not supported by hoist yet",
            cert_path()
        )
    );
}

#[test]
fn certificates_from_every_kind_of_data_source() {
    let crt = std::fs::read_to_string(data("ecdsa.crt")).unwrap();
    let key = std::fs::read(data("ecdsa.key")).unwrap();
    let var = "HOIST_CONFIG_TEST_ECDSA_KEY";
    std::env::set_var(var, String::from_utf8(key.clone()).unwrap());
    let mut v = tls();
    set(
        &mut v,
        CERT,
        json!({"certificate_chain": {"inline_string": crt},
               "private_key": {"environment_variable": var}}),
    );
    let c = context(&v);
    assert_eq!(
        c.tls_certificates[0].certificate_chain,
        DataSource::Inline(crt.into_bytes())
    );
    assert_eq!(
        c.tls_certificates[0].private_key,
        DataSource::Env {
            name: var.into(),
            value: key.clone()
        }
    );

    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&key);
    set(
        &mut v,
        &format!("{CERT}/private_key"),
        json!({"inline_bytes": b64}),
    );
    assert_eq!(
        context(&v).tls_certificates[0].private_key,
        DataSource::Inline(key)
    );

    set(
        &mut v,
        &format!("{CERT}/private_key"),
        json!({"inline_bytes": "not base64!"}),
    );
    assert_eq!(
        error(&v),
        format!("{}.private_key.inline_bytes: inline_bytes is not valid base64 (proto-JSON bytes are base64)", cert_path())
    );

    set(
        &mut v,
        &format!("{CERT}/private_key"),
        json!({"environment_variable": "HOIST_CONFIG_TEST_UNSET"}),
    );
    assert_eq!(
        error(&v),
        format!("{}.private_key.environment_variable: environment variable \"HOIST_CONFIG_TEST_UNSET\" is not set", cert_path())
    );

    set(
        &mut v,
        &format!("{CERT}/private_key"),
        json!({"filename": data("ecdsa.key"), "inline_string": "x"}),
    );
    assert_eq!(
        error(&v),
        format!("{}.private_key: exactly one of filename, inline_string, inline_bytes, environment_variable must be set", cert_path())
    );

    set(&mut v, &format!("{CERT}/private_key"), json!({}));
    assert_eq!(
        error(&v),
        format!("{}.private_key: exactly one of filename, inline_string, inline_bytes, environment_variable must be set", cert_path())
    );

    set(
        &mut v,
        &format!("{CERT}/private_key"),
        json!({"filename": env!("CARGO_MANIFEST_DIR")}),
    );
    assert_eq!(
        error(&v),
        format!(
            "{}.private_key.filename: cannot read \"{}\": not a regular file",
            cert_path(),
            env!("CARGO_MANIFEST_DIR")
        )
    );
}

#[test]
fn session_tickets() {
    let mut v = tls();
    set(
        &mut v,
        &format!("{TLS}/disable_stateless_session_resumption"),
        json!(true),
    );
    assert!(!context(&v).session_tickets);

    let mut v = tls();
    let key = vec![7u8; 80];
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(&key);
    set(
        &mut v,
        &format!("{TLS}/session_ticket_keys"),
        json!({"keys": [{"inline_bytes": b64}]}),
    );
    set(&mut v, &format!("{TLS}/session_timeout"), json!("7200s"));
    assert_eq!(context(&v).session_ticket_keys, vec![key]);

    set(
        &mut v,
        &format!("{TLS}/session_ticket_keys"),
        json!({"keys": [{"inline_string": "short"}]}),
    );
    assert_eq!(
        error(&v),
        format!("{TLS_PATH}.session_ticket_keys.keys[0]: a session ticket key is 5 bytes; it must be exactly 80")
    );

    set(
        &mut v,
        &format!("{TLS}/disable_stateless_session_resumption"),
        json!(true),
    );
    assert_eq!(
        error(&v),
        format!("{TLS_PATH}: at most one of session_ticket_keys, disable_stateless_session_resumption may be set")
    );
}

#[test]
fn client_certificates() {
    let mut v = tls();
    set(
        &mut v,
        &format!("{TLS}/require_client_certificate"),
        json!(true),
    );
    assert_eq!(
        error(&v),
        format!("{TLS_PATH}: require_client_certificate needs common_tls_context.validation_context with a trusted_ca")
    );
    set(
        &mut v,
        &format!("{COMMON}/validation_context"),
        json!({"trusted_ca": {"filename": data("ecdsa.crt")},
               "match_typed_subject_alt_names": [
                   {"san_type": "DNS", "matcher": {"exact": "client.example.com"}},
                   {"san_type": "URI", "matcher": {"exact": "spiffe://example/client"}}]}),
    );
    let c = context(&v);
    assert!(c.require_client_certificate);
    let vc = c.validation_context.unwrap();
    assert_eq!(vc.subject_alt_names.len(), 2);
    assert_eq!(vc.subject_alt_names[0].san_type, SanType::Dns);
    assert_eq!(vc.subject_alt_names[1].exact, "spiffe://example/client");
    assert_eq!(
        vc.yaml_path,
        format!("{}.validation_context", common_path())
    );

    let sans = format!("{COMMON}/validation_context/match_typed_subject_alt_names/0");
    set(
        &mut v,
        &format!("{sans}/matcher"),
        json!({"prefix": "client"}),
    );
    assert_eq!(
        error(&v),
        format!("{}.validation_context.match_typed_subject_alt_names[0].matcher: field \"prefix\" is not supported by hoist yet", common_path())
    );
    set(&mut v, &sans, json!({"matcher": {"exact": "x"}}));
    assert_eq!(
        error(&v),
        format!("{}.validation_context.match_typed_subject_alt_names[0]: missing required field \"san_type\"", common_path())
    );

    set(
        &mut v,
        &format!("{COMMON}/validation_context"),
        json!({"trusted_ca": {"filename": data("rsa.key")}}),
    );
    assert_eq!(
        error(&v),
        format!(
            "{}.validation_context.trusted_ca: no certificate found in \"{}\"",
            common_path(),
            data("rsa.key")
        )
    );
}

#[test]
fn unsupported_tls_fields() {
    let mut v = tls();
    set(&mut v, &format!("{TLS}/require_sni"), json!(true));
    assert_eq!(
        error(&v),
        format!("{TLS_PATH}: field \"require_sni\" is not supported by hoist yet")
    );

    let mut v = tls();
    set(
        &mut v,
        &format!("{COMMON}/tls_certificate_sds_secret_configs"),
        json!([{"name": "x"}]),
    );
    assert_eq!(
        error(&v),
        format!(
            "{}: field \"tls_certificate_sds_secret_configs\" is not supported by hoist yet",
            common_path()
        )
    );

    let mut v = tls();
    set(
        &mut v,
        &format!("{TLS}/require_client_certificate"),
        json!("yes"),
    );
    assert_eq!(
        error(&v),
        format!("{TLS_PATH}.require_client_certificate: expected a boolean, got \"yes\"")
    );
}

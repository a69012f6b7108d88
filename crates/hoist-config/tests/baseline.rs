//! The experiment's baseline configuration decodes unchanged, with its relative file names
//! resolved against the working directory (as Envoy does), and so do its variants: TLS 1.3,
//! ECDSA, several certificates chosen by SNI, and a plain-HTTP listener.
//!
//! One test in its own binary: it changes the process's working directory.

use hoist_config::model::{CipherSuite, DataSource, PathMatch, RouteAction, TlsVersion};

const BASELINE: &str = r#"
admin:
  address: {socket_address: {address: 127.0.0.1, port_value: 9901}}
static_resources:
  listeners:
  - name: https
    address: {socket_address: {address: 0.0.0.0, port_value: 10443}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_params:
              tls_minimum_protocol_version: TLSv1_2
              tls_maximum_protocol_version: TLSv1_2
              cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256, ECDHE-RSA-AES256-GCM-SHA384]
            tls_certificates:
            - certificate_chain: {filename: certs/server.crt}
              private_key: {filename: certs/server.key}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
          route_config:
            max_direct_response_body_size_bytes: 10485760
            virtual_hosts:
            - name: payloads
              domains: ["*"]
              routes:
              - match: {path: /1m}
                direct_response: {status: 200, body: {filename: payloads/1m.bin}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#;

/// Several certificates chosen by SNI, TLS 1.3, ECDSA, and a second, plain-HTTP listener.
const VARIANTS: &str = r#"
static_resources:
  listeners:
  - name: https
    address: {socket_address: {address: "::", port_value: 10443}}
    listener_filters:
    - name: envoy.filters.listener.tls_inspector
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector
    filter_chains:
    - filter_chain_match: {server_names: [rsa.example.com]}
      transport_socket: &rsa
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_params: {tls_minimum_protocol_version: TLSv1_3}
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: {filename: certs/server.crt}
              private_key: {filename: certs/server.key}
      filters: &filters
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_http
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {prefix: /}
                direct_response: {status: 200, body: {inline_string: "hoist\n"}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
    - filter_chain_match: {server_names: [ecdsa.example.com, "*.ecdsa.example.com"]}
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_params:
              cipher_suites: ["[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]"]
              ecdh_curves: [X25519, P-256]
            tls_certificates:
            - certificate_chain: {filename: certs/ecdsa.crt}
              private_key: {filename: certs/ecdsa.key}
      filters: *filters
    - transport_socket: *rsa
      filters: *filters
  - name: http
    address: {socket_address: {address: 127.0.0.1, port_value: 10080}}
    filter_chains:
    - filters: *filters
"#;

#[test]
fn baseline_and_variants_decode() {
    let data = |f: &str| format!("{}/tests/data/{f}", env!("CARGO_MANIFEST_DIR"));
    let dir = std::env::temp_dir().join(format!("hoist-config-baseline-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("certs")).unwrap();
    std::fs::create_dir_all(dir.join("payloads")).unwrap();
    for (from, to) in [
        ("rsa.crt", "server.crt"),
        ("rsa.key", "server.key"),
        ("ecdsa.crt", "ecdsa.crt"),
        ("ecdsa.key", "ecdsa.key"),
    ] {
        std::fs::copy(data(from), dir.join("certs").join(to)).unwrap();
    }
    std::fs::write(dir.join("payloads/1m.bin"), vec![b'x'; 1 << 20]).unwrap();
    std::env::set_current_dir(&dir).unwrap();

    let b = hoist_config::load(Some(std::path::Path::new("envoy.yaml")), None);
    assert_eq!(
        b.unwrap_err().to_string(),
        "cannot read configuration file envoy.yaml: No such file or directory (os error 2)"
    );
    std::fs::write("envoy.yaml", BASELINE).unwrap();
    let b = hoist_config::load(Some(std::path::Path::new("envoy.yaml")), None).unwrap();

    assert_eq!(
        b.admin.as_ref().unwrap().address.addr.to_string(),
        "127.0.0.1:9901"
    );
    let l = &b.listeners[0];
    assert_eq!(l.name, "https");
    assert_eq!(l.address.stat_name(), "0.0.0.0_10443");
    let chain = &l.filter_chains[0];
    let tls = chain.tls.as_ref().unwrap();
    assert_eq!(tls.tls_params.min_version, TlsVersion::Tls1_2);
    assert_eq!(tls.tls_params.max_version, TlsVersion::Tls1_2);
    assert_eq!(
        tls.tls_params.cipher_suites,
        vec![
            vec![CipherSuite::EcdheRsaAes128GcmSha256],
            vec![CipherSuite::EcdheRsaAes256GcmSha384]
        ]
    );
    let key_size = std::fs::metadata("certs/server.key").unwrap().len();
    assert_eq!(
        tls.tls_certificates[0].private_key,
        DataSource::File {
            path: "certs/server.key".into(),
            size: key_size
        }
    );
    let hcm = &chain.hcm;
    assert_eq!(hcm.stat_prefix, "ingress_http");
    assert_eq!(
        hcm.route_config.max_direct_response_body_size_bytes,
        10_485_760
    );
    let route = &hcm.route_config.virtual_hosts[0].routes[0];
    assert!(matches!(&route.route_match.path, PathMatch::Path(p) if p == "/1m"));
    match &route.action {
        RouteAction::DirectResponse(d) => {
            assert_eq!(d.status, 200);
            assert_eq!(
                d.body,
                Some(DataSource::File {
                    path: "payloads/1m.bin".into(),
                    size: 1 << 20
                })
            );
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        b.source["static_resources"]["listeners"][0]["name"],
        "https"
    );

    let v = hoist_config::load_str(VARIANTS).unwrap();
    let https = &v.listeners[0];
    assert_eq!(https.address.addr.to_string(), "[::]:10443");
    assert_eq!(https.filter_chains.len(), 3);
    let rsa = https.filter_chains[0].tls.as_ref().unwrap();
    assert_eq!(rsa.tls_params.min_version, TlsVersion::Tls1_3);
    assert_eq!(rsa.alpn_protocols, ["h2", "http/1.1"]);
    let ecdsa = &https.filter_chains[1];
    assert_eq!(
        ecdsa.filter_chain_match.server_names,
        ["ecdsa.example.com", "*.ecdsa.example.com"]
    );
    assert_eq!(
        ecdsa.tls.as_ref().unwrap().tls_params.cipher_suites[0].len(),
        2
    );
    assert!(https.filter_chains[2]
        .filter_chain_match
        .server_names
        .is_empty());
    let http = &v.listeners[1];
    assert!(http.filter_chains[0].tls.is_none());

    // Leaving the directory before removing it keeps the process's cwd valid.
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}

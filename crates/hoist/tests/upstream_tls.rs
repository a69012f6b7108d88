//! Upstream TLS through hoist's own client handshake, on a host whose kernel has no kTLS:
//! every connection falls back to user-space TLS by `--tls-offload` (counted under
//! `cluster.<name>.ssl.offload.*`), TLS 1.2 and TLS 1.3 (tls_params) origins serve byte-exact
//! bodies, sessions resume across a cluster's connections, and `require` turns a connection
//! that cannot be offloaded into a 503 UF. The kernel path itself runs in the VM suite
//! (ktls_vm.rs, ktls_upstream_on_debian_6_1).
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use std::path::Path;

use sha2::Digest;
use support::{curl, Hoist, TempDir};
use upstream_support::{cluster, config, route, Origin};

/// A TLS cluster extra (indented by 4): each request on a new connection, so resumption shows.
fn tls_extra(ca: &Path, params: &str) -> String {
    format!(
        r#"    max_requests_per_connection: 1
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: origin.test
        common_tls_context:
          tls_params: {{{params}}}
          alpn_protocols: [http/1.1]
          validation_context:
            trusted_ca: {{filename: {}}}
"#,
        ca.display()
    )
}

fn start(dir: &TempDir, offload: &str) -> (Hoist, Origin) {
    let (ca, cert) = upstream_support::ca_and_leaf(dir, "origin.test");
    let origin = Origin::start_tls("secure", &cert);
    let ca = Path::new(&ca);
    let clusters = cluster(
        "c12",
        &[(origin.port, 1)],
        &tls_extra(ca, "tls_maximum_protocol_version: TLSv1_2"),
    ) + &cluster(
        "c13",
        &[(origin.port, 1)],
        &tls_extra(
            ca,
            "tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_3",
        ),
    );
    let routes = route("{prefix: /12/}", "{cluster: c12, prefix_rewrite: /}")
        + &route("{prefix: /13/}", "{cluster: c13, prefix_rewrite: /}");
    let log = dir.path("access.log");
    let cfg = dir.write("hoist.yaml", config(&routes, &clusters, &log, None));
    let h = Hoist::start(&cfg, &["--concurrency", "1", "--tls-offload", offload]);
    (h, origin)
}

/// SHA-256 of origin.py's /bytes pattern for `n` bytes.
fn pattern_sha(n: usize) -> String {
    let block: Vec<u8> = {
        let mut b = sha2::Sha256::digest(b"seed").repeat(31250);
        b.extend_from_slice(b"xxx");
        b
    };
    let mut h = sha2::Sha256::new();
    let mut left = n;
    while left > 0 {
        let k = left.min(block.len());
        h.update(&block[..k]);
        left -= k;
    }
    hex(&h.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn fetch_sha(h: &Hoist, path: &str) -> (String, String) {
    let out = curl(&[
        "-w",
        "\n%{http_code}",
        &format!("http://{}{path}", h.addr("plain")),
    ]);
    let mut body = out.stdout;
    let nl = body.iter().rposition(|b| *b == b'\n').unwrap();
    let status = String::from_utf8_lossy(&body[nl + 1..]).into_owned();
    body.truncate(nl);
    (status, hex(&sha2::Sha256::digest(&body)))
}

#[test]
fn tls12_and_tls13_upstreams_fall_back_to_user_space_and_resume() {
    let dir = TempDir::new("up-tls-auto");
    let (h, _origin) = start(&dir, "auto");
    let n = 3_000_001;
    for v in ["12", "13"] {
        for _ in 0..3 {
            let (status, sha) = fetch_sha(&h, &format!("/{v}/bytes?n={n}"));
            assert_eq!(status, "200", "TLS 1.{}", &v[1..]);
            assert_eq!(sha, pattern_sha(n), "TLS 1.{}", &v[1..]);
        }
        let c = format!("cluster.c{v}.");
        assert_eq!(h.stat(&format!("{c}upstream_cx_total")), 3, "{v}");
        assert_eq!(h.stat(&format!("{c}ssl.handshake")), 3, "{v}");
        // The first connection's session (a TLS 1.2 ticket in the handshake, TLS 1.3 tickets
        // after it) resumes the later ones.
        assert_eq!(h.stat(&format!("{c}ssl.session_reused")), 2, "{v}");
        // This kernel has no kTLS: every connection is served in user space, and says why.
        assert_eq!(
            h.stat(&format!("{c}ssl.offload.fallback.kernel_unsupported")),
            3,
            "{v}"
        );
        assert_eq!(h.stat(&format!("{c}ssl.offload.none")), 3, "{v}");
        assert_eq!(h.stat(&format!("{c}ssl.offload.tx_sw")), 0, "{v}");
        assert_eq!(h.stat(&format!("{c}ssl.connection_error")), 0, "{v}");
    }
}

#[test]
fn offload_off_and_require() {
    let dir = TempDir::new("up-tls-off");
    let (h, _origin) = start(&dir, "off");
    let (status, _) = fetch_sha(&h, "/13/bytes?n=10");
    assert_eq!(status, "200");
    assert_eq!(h.stat("cluster.c13.ssl.offload.fallback.policy_off"), 1);
    assert_eq!(h.stat("cluster.c13.ssl.offload.none"), 1);
    drop(h);

    let dir = TempDir::new("up-tls-require");
    let (h, _origin) = start(&dir, "require");
    let out = curl(&["-i", &format!("http://{}/12/bytes?n=10", h.addr("plain"))]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("kernel TLS required"), "{text}");
    assert_eq!(
        h.stat("cluster.c12.ssl.offload.closed.kernel_unsupported"),
        1
    );
    assert_eq!(h.stat("cluster.c12.ssl.offload.none"), 0);
    // The access log is written after the response: wait for its line (a liveness bound).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let log = std::fs::read_to_string(dir.path("access.log")).unwrap_or_default();
        if log.contains("GET /12/bytes") {
            assert!(log.contains(" 503 UF "), "{log}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no log line:\n{log}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// nginx requiring a client certificate signed by `client_ca`; answers with the subject it saw.
struct MtlsNginx {
    _process: upstream_support::NginxProcess,
    port: u16,
}

impl MtlsNginx {
    fn start(dir: &TempDir, server: &support::Cert, client_ca: &Path) -> MtlsNginx {
        let port = upstream_support::free_port();
        let http = format!(
            r#"    server {{
        listen 127.0.0.1:{port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_client_certificate {ca};
        ssl_verify_client on;
        location / {{ return 200 "verify=$ssl_client_verify dn=$ssl_client_s_dn\n"; }}
    }}"#,
            cert = server.cert.display(),
            key = server.key.display(),
            ca = client_ca.display(),
        );
        MtlsNginx {
            _process: upstream_support::NginxProcess::start(dir, &http, &[port]),
            port,
        }
    }
}

#[test]
fn mtls_client_certificate_toward_nginx_verify_client() {
    let dir = TempDir::new("up-mtls");
    let server_dir = TempDir::new("up-mtls-server");
    let client_dir = TempDir::new("up-mtls-client");
    let (server_ca, server_cert) = upstream_support::ca_and_leaf(&server_dir, "origin.test");
    let (client_ca, client_cert) = upstream_support::ca_and_leaf(&client_dir, "hoist.test");
    let nginx = MtlsNginx::start(&dir, &server_cert, &client_ca);
    let cert = |c: &support::Cert| {
        format!(
            "          tls_certificates:\n          - certificate_chain: {{filename: {}}}\n            private_key: {{filename: {}}}\n",
            c.cert.display(),
            c.key.display()
        )
    };
    let ctx = |certs: &str| {
        format!(
            r#"    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: origin.test
        common_tls_context:
{certs}          validation_context:
            trusted_ca: {{filename: {}}}
"#,
            server_ca.display()
        )
    };
    let clusters = cluster("mtls", &[(nginx.port, 1)], &ctx(&cert(&client_cert)))
        + &cluster("anon", &[(nginx.port, 1)], &ctx(""))
        // A certificate from a CA nginx does not trust.
        + &cluster("stranger", &[(nginx.port, 1)], &ctx(&cert(&server_cert)));
    let routes = route("{prefix: /anon}", "{cluster: anon}")
        + &route("{prefix: /stranger}", "{cluster: stranger}")
        + &route("{prefix: /}", "{cluster: mtls}");
    let log = dir.path("access.log");
    let cfg = dir.write("hoist.yaml", config(&routes, &clusters, &log, None));
    let h = Hoist::start(&cfg, &["--concurrency", "1"]);
    let get = |path: &str| {
        let out = curl(&["-i", &format!("http://{}{path}", h.addr("plain"))]);
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ok = get("/");
    assert!(ok.starts_with("HTTP/1.1 200"), "{ok}");
    assert!(ok.contains("verify=SUCCESS dn="), "{ok}");
    // nginx answers 400 without a (trusted) client certificate.
    let anon = get("/anon");
    assert!(anon.starts_with("HTTP/1.1 400"), "{anon}");
    assert!(
        anon.contains("No required SSL certificate was sent"),
        "{anon}"
    );
    let stranger = get("/stranger");
    assert!(stranger.starts_with("HTTP/1.1 400"), "{stranger}");
    assert!(stranger.contains("certificate error"), "{stranger}");
}

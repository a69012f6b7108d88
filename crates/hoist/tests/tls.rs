//! TLS listeners against real peers: openssl s_client for each cipher and version, curl for
//! bodies and certificate checks, SNI chain selection, ALPN, and garbage from the peer.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::*;

/// Runs `openssl s_client` with `args`, sends a GET for `path`, returns stdout+stderr.
fn s_client(addr: std::net::SocketAddr, args: &[&str], path: &str) -> String {
    let mut child = Command::new("openssl")
        .arg("s_client")
        .arg("-connect")
        .arg(addr.to_string())
        .args(["-ign_eof"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(req.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn listener_yaml(
    dir: &TempDir,
    cert: &Cert,
    tls_extra: &str,
) -> (std::path::PathBuf, std::path::PathBuf) {
    let body = payload(dir, "1m.bin", 1 << 20);
    let yaml = bootstrap(&tls_listener("tls", cert, tls_extra, &[("/1m", &body)]));
    (dir.write("envoy.yaml", yaml), body)
}

#[test]
fn tls12_each_rsa_cipher_and_tls13() {
    let dir = TempDir::new("tls-rsa");
    let cert = rsa_cert(&dir, "rsa", "rsa.test", 2048);
    let (cfg, _) = listener_yaml(
        &dir,
        &cert,
        "            tls_params: {tls_maximum_protocol_version: TLSv1_3}\n",
    );
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let addr = hoist.addr("tls");
    for cipher in [
        "ECDHE-RSA-AES128-GCM-SHA256",
        "ECDHE-RSA-AES256-GCM-SHA384",
        "ECDHE-RSA-CHACHA20-POLY1305",
    ] {
        let out = s_client(addr, &["-tls1_2", "-cipher", cipher], "/");
        assert!(
            out.contains(&format!("Cipher is {cipher}")),
            "{cipher}: {out}"
        );
        assert!(out.contains("hello from hoist"), "{cipher}: {out}");
        assert_eq!(
            hoist.stat(&format!("listener.127.0.0.1_0.ssl.ciphers.{cipher}")),
            1
        );
    }
    let out = s_client(addr, &["-tls1_3"], "/");
    assert!(out.contains("TLSv1.3"), "{out}");
    assert!(out.contains("hello from hoist"), "{out}");
    let scope = "listener.127.0.0.1_0.ssl.";
    assert_eq!(hoist.stat(&format!("{scope}versions.TLSv1.2")), 3);
    assert_eq!(hoist.stat(&format!("{scope}versions.TLSv1.3")), 1);
    assert_eq!(hoist.stat(&format!("{scope}handshake")), 4);
}

#[test]
fn tls12_only_with_configured_ciphers_refuses_others() {
    let dir = TempDir::new("tls-limit");
    let cert = rsa_cert(&dir, "rsa", "rsa.test", 2048);
    let params = "            tls_params:\n              tls_minimum_protocol_version: TLSv1_2\n              tls_maximum_protocol_version: TLSv1_2\n              cipher_suites: [ECDHE-RSA-AES128-GCM-SHA256, ECDHE-RSA-AES256-GCM-SHA384]\n";
    let (cfg, _) = listener_yaml(&dir, &cert, params);
    let hoist = Hoist::start(&cfg, &[]);
    let addr = hoist.addr("tls");
    let out = s_client(
        addr,
        &["-tls1_2", "-cipher", "ECDHE-RSA-AES256-GCM-SHA384"],
        "/",
    );
    assert!(
        out.contains("Cipher is ECDHE-RSA-AES256-GCM-SHA384"),
        "{out}"
    );
    let out = s_client(
        addr,
        &["-tls1_2", "-cipher", "ECDHE-RSA-CHACHA20-POLY1305"],
        "/",
    );
    assert!(
        !out.contains("hello from hoist"),
        "chacha must be refused: {out}"
    );
    let out = s_client(addr, &["-tls1_3"], "/");
    assert!(
        !out.contains("hello from hoist"),
        "TLS 1.3 must be refused: {out}"
    );
    let scope = "listener.127.0.0.1_0.ssl.";
    assert_eq!(hoist.stat(&format!("{scope}connection_error")), 2);
}

#[test]
fn ecdsa_ciphers() {
    let dir = TempDir::new("tls-ecdsa");
    let cert = ecdsa_cert(&dir, "ec", "ec.test");
    let (cfg, _) = listener_yaml(&dir, &cert, "");
    let hoist = Hoist::start(&cfg, &[]);
    let addr = hoist.addr("tls");
    for cipher in [
        "ECDHE-ECDSA-AES128-GCM-SHA256",
        "ECDHE-ECDSA-AES256-GCM-SHA384",
        "ECDHE-ECDSA-CHACHA20-POLY1305",
    ] {
        let out = s_client(addr, &["-tls1_2", "-cipher", cipher], "/");
        assert!(
            out.contains(&format!("Cipher is {cipher}")),
            "{cipher}: {out}"
        );
        assert!(out.contains("hello from hoist"), "{out}");
    }
}

#[test]
fn curl_verifies_the_certificate_and_bodies_are_exact() {
    let dir = TempDir::new("tls-curl");
    let cert = rsa_cert(&dir, "rsa", "localhost", 2048);
    let (cfg, body) = listener_yaml(&dir, &cert, "");
    let hoist = Hoist::start(&cfg, &[]);
    let url = format!("https://localhost:{}/1m", hoist.addr("tls").port());
    let resolve = format!("localhost:{}:127.0.0.1", hoist.addr("tls").port());
    // No trust anchor: curl refuses the self-signed certificate (exit 60).
    let out = curl(&["--resolve", &resolve, "-o", "/dev/null", &url]);
    assert_eq!(
        out.status.code(),
        Some(60),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out_file = dir.path("got");
    let out = curl(&[
        "--resolve",
        &resolve,
        "--cacert",
        cert.cert.to_str().unwrap(),
        "-o",
        out_file.to_str().unwrap(),
        &url,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sha256_hex(&std::fs::read(out_file).unwrap()),
        sha256_hex(&std::fs::read(body).unwrap())
    );
}

#[test]
fn sni_selects_the_filter_chain_and_certificate() {
    let dir = TempDir::new("tls-sni");
    let a = rsa_cert(&dir, "a", "a.test", 2048);
    let b = ecdsa_cert(&dir, "b", "b.test");
    let chain = |cert: &Cert, names: &str, prefix: &str, text: &str| {
        format!(
            r#"    - filter_chain_match: {{server_names: [{names}]}}
      transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificates:
            - certificate_chain: {{filename: {}}}
              private_key: {{filename: {}}}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {prefix}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: /}}
                direct_response: {{status: 200, body: {{inline_string: "{text}"}}}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#,
            cert.cert.display(),
            cert.key.display()
        )
    };
    let listeners = format!(
        "  - name: sni\n    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}\n    filter_chains:\n{}{}",
        chain(&a, "a.test", "chain_a", "chain a"),
        chain(&b, "\"*.b.test\", b.test", "chain_b", "chain b")
    );
    let cfg = dir.write("envoy.yaml", bootstrap(&listeners));
    let hoist = Hoist::start(&cfg, &[]);
    let addr = hoist.addr("sni");
    let out = s_client(addr, &["-servername", "a.test"], "/");
    assert!(
        out.contains("CN = a.test") || out.contains("CN=a.test"),
        "{out}"
    );
    assert!(out.contains("chain a"), "{out}");
    for name in ["b.test", "www.b.test"] {
        let out = s_client(addr, &["-servername", name], "/");
        assert!(
            out.contains("CN = b.test") || out.contains("CN=b.test"),
            "{name}: {out}"
        );
        assert!(out.contains("chain b"), "{out}");
    }
    // No chain matches: the connection is closed and counted.
    let out = s_client(addr, &["-servername", "c.test"], "/");
    assert!(!out.contains("chain "), "{out}");
    assert_eq!(hoist.stat("listener.127.0.0.1_0.no_filter_chain_match"), 1);
    hoist.wait_stat("http.chain_b.downstream_rq_2xx", 2);
}

#[test]
fn alpn_negotiates_h2_and_http11() {
    let dir = TempDir::new("tls-alpn");
    let cert = rsa_cert(&dir, "rsa", "localhost", 2048);
    let (cfg, _) = listener_yaml(&dir, &cert, "            alpn_protocols: [h2, http/1.1]\n");
    let hoist = Hoist::start(&cfg, &[]);
    let addr = hoist.addr("tls");
    let out = s_client(addr, &["-alpn", "h2"], "/");
    assert!(out.contains("ALPN protocol: h2"), "{out}");
    let url = format!("https://{addr}/");
    let out = curl(&["-k", "--http2", "-w", "%{http_version}\n", &url]);
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with("hello from hoist\n2\n"),
        "{:?}",
        out
    );
    let out = curl(&["-k", "--http1.1", "-w", "%{http_version}\n", &url]);
    assert!(
        String::from_utf8_lossy(&out.stdout).ends_with("hello from hoist\n1.1\n"),
        "{:?}",
        out
    );
    // s_client negotiated h2 too (and then spoke HTTP/1.1 on it), so two h2 connections.
    assert_eq!(
        hoist.stat("http.ingress_https.downstream_cx_http2_total"),
        2
    );
}

#[test]
fn garbage_and_plaintext_on_a_tls_port_end_in_a_clean_close_and_a_stat() {
    let dir = TempDir::new("tls-garbage");
    let cert = rsa_cert(&dir, "rsa", "localhost", 2048);
    let (cfg, _) = listener_yaml(&dir, &cert, "");
    let hoist = Hoist::start(&cfg, &[]);
    let addr = hoist.addr("tls");
    // Plain HTTP to a TLS port.
    let raw = raw_exchange(addr, b"GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    assert!(
        !String::from_utf8_lossy(&raw).contains("hello"),
        "no plaintext answer"
    );
    // A TLS record header announcing a handshake, then junk.
    let mut junk = vec![0x16, 0x03, 0x01, 0x00, 0x40];
    junk.extend((0..64u8).map(|i| i.wrapping_mul(37)));
    let _ = raw_exchange(addr, &junk);
    // Half a hello, then the peer goes away.
    {
        let mut s = TcpStream::connect(addr).unwrap();
        s.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01]).unwrap();
    }
    std::thread::sleep(Duration::from_millis(200));
    let scope = "listener.127.0.0.1_0.";
    assert!(hoist.stat(&format!("{scope}ssl.connection_error")) >= 2);
    // Still serving.
    let out = curl(&["-k", &format!("https://{addr}/")]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello from hoist\n");
}

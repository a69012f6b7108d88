//! HTTP/2: over TLS with ALPN and in cleartext with prior knowledge, driven by curl and h2load.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::process::Command;

use support::*;

#[test]
fn h2_over_tls_and_cleartext() {
    let dir = TempDir::new("h2");
    let cert = rsa_cert(&dir, "rsa", "localhost", 2048);
    let body = payload(&dir, "5m.bin", 5 << 20);
    let yaml = bootstrap(&format!(
        "{}{}",
        tls_listener(
            "tls",
            &cert,
            "            alpn_protocols: [h2, http/1.1]\n",
            &[("/5m", &body)]
        ),
        plain_listener("plain", "ingress_http", &[("/5m", &body)], "")
    ));
    let cfg = dir.write("envoy.yaml", yaml);
    let hoist = Hoist::start(&cfg, &["--concurrency", "2"]);
    let want = sha256_hex(&std::fs::read(&body).unwrap());
    let got = dir.path("got");
    let tls_url = format!("https://{}/5m", hoist.addr("tls"));
    let out = curl(&[
        "-k",
        "--http2",
        "-o",
        got.to_str().unwrap(),
        "-w",
        "%{http_version}",
        &tls_url,
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "2",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(sha256_hex(&std::fs::read(&got).unwrap()), want);
    let plain_url = format!("http://{}/5m", hoist.addr("plain"));
    let out = curl(&[
        "--http2-prior-knowledge",
        "-o",
        got.to_str().unwrap(),
        "-w",
        "%{http_version}",
        &plain_url,
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2");
    assert_eq!(sha256_hex(&std::fs::read(&got).unwrap()), want);
    // HEAD over h2 carries no body.
    let out = curl(&["-k", "--http2", "-I", &tls_url]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("content-length: 5242880"));

    let out = Command::new("h2load")
        .args(["-n", "200", "-c", "4", "-m", "8"])
        .arg(format!("https://{}/", hoist.addr("tls")))
        .output()
        .expect("h2load is installed");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("200 succeeded, 0 failed, 0 errored"),
        "{text}"
    );
    assert!(hoist.stat("http.ingress_https.downstream_rq_http2_total") >= 200);
}

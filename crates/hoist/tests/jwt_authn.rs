//! envoy.filters.http.jwt_authn through the binary, with tokens and keys made by PyJWT (an
//! independent implementation): every algorithm, Envoy's rejections, local JWKS from a file,
//! remote JWKS fetched over HTTPS from a cluster (on demand and in the background), key
//! rotation, a failing fetch, and the chain with local_ratelimit in either order.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod jwt_support;
mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use jwt_support::{pki, pyjwt, JwksServer};
use serde_json::{json, Value};
use support::*;

const ISS: &str = "https://idp.example.com";
const AUD: &str = "api.example.com";

/// A plain listener "plain" (stat_prefix "ingress") whose chain runs jwt_authn with
/// `filter` (the JwtAuthentication fields), plus `clusters` (YAML list items).
fn write_config(dir: &TempDir, filter: Value, clusters: &str) -> std::path::PathBuf {
    write_chain(dir, &[jwt_filter(filter)], clusters)
}

/// An http_filters entry for jwt_authn with these JwtAuthentication fields.
fn jwt_filter(mut typed: Value) -> String {
    typed["@type"] =
        json!("type.googleapis.com/envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication");
    format!("- name: envoy.filters.http.jwt_authn\n  typed_config: {typed}")
}

/// Like `write_config` with several http_filters entries, in this order, before the router.
fn write_chain(dir: &TempDir, filters: &[String], clusters: &str) -> std::path::PathBuf {
    let yaml = bootstrap(&plain_listener("plain", "ingress", &[], ""));
    let yaml = insert_before(
        &yaml,
        "- name: envoy.filters.http.router",
        &filters.join("\n"),
    );
    let yaml = if clusters.is_empty() {
        yaml
    } else {
        format!("{yaml}  clusters:\n{clusters}")
    };
    dir.write("envoy.yaml", yaml)
}

fn cluster_yaml(port: u16, ca: &Path) -> String {
    format!(
        r#"  - name: jwks_cluster
    type: STATIC
    connect_timeout: 2s
    load_assignment:
      cluster_name: jwks_cluster
      endpoints:
      - lb_endpoints:
        - endpoint:
            address:
              socket_address: {{address: 127.0.0.1, port_value: {port}}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: jwks.test
        common_tls_context:
          validation_context:
            trusted_ca: {{filename: {}}}
            match_typed_subject_alt_names:
            - san_type: DNS
              matcher: {{exact: jwks.test}}
"#,
        ca.display()
    )
}

struct Response {
    status: u16,
    head: String,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

fn get(addr: SocketAddr, path: &str, token: Option<&str>) -> Response {
    let auth = token
        .map(|t| format!("authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let raw = raw_exchange(
        addr,
        format!("GET {path} HTTP/1.1\r\nhost: api.example.com\r\n{auth}connection: close\r\n\r\n")
            .as_bytes(),
    );
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Response {
        status: head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0),
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

/// Polls until `cond` holds (10 s at most; a timing is never asserted, only the outcome).
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(Instant::now() < deadline, "never happened: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn token<'a>(set: &'a Value, name: &str) -> &'a str {
    set["tokens"][name].as_str().unwrap()
}

#[test]
fn pyjwt_tokens_against_a_local_jwks_file() {
    let dir = TempDir::new("jwt-local");
    let set = pyjwt("", ISS, AUD);
    let jwks = dir.write("jwks.json", set["jwks"].to_string());
    let cfg = write_config(
        &dir,
        json!({
            "providers": {"idp": {"issuer": ISS, "audiences": [AUD],
                "local_jwks": {"filename": jwks}, "forward_payload_header": "x-jwt-payload"}},
            "rules": [{"match": {"prefix": "/public"}},
                      {"match": {"prefix": "/"}, "requires": {"provider_name": "idp"}}]
        }),
        "",
    );
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let addr = hoist.addr("plain");
    let algs = [
        "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA", "HS256",
        "HS384", "HS512", "no_kid",
    ];
    for alg in algs {
        let r = get(addr, "/data", Some(token(&set, alg)));
        assert_eq!(
            (r.status, r.body.as_str()),
            (200, "hello from hoist\n"),
            "{alg}"
        );
    }
    let expect = |name: &str, status: u16, body: &str| {
        let r = get(addr, "/data?q=1", Some(token(&set, name)));
        assert_eq!((r.status, r.body.as_str()), (status, body), "{name}");
        assert_eq!(
            r.header("www-authenticate").as_deref(),
            Some("Bearer realm=\"http://api.example.com/data?q=1\", error=\"invalid_token\""),
            "{name}"
        );
    };
    expect("expired", 401, "Jwt is expired");
    expect("not_yet_valid", 401, "Jwt not yet valid");
    expect("wrong_aud", 403, "Audiences in Jwt are not allowed");
    expect("wrong_iss", 401, "Jwt issuer is not configured");
    expect(
        "unknown_kid",
        401,
        "Jwks doesn't have key to match kid or alg from Jwt",
    );
    expect(
        "none",
        401,
        "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections",
    );
    let missing = get(addr, "/data", None);
    assert_eq!(
        (missing.status, missing.body.as_str()),
        (401, "Jwt is missing")
    );
    assert_eq!(
        missing.header("www-authenticate").as_deref(),
        Some("Bearer realm=\"http://api.example.com/data\"")
    );
    assert_eq!(get(addr, "/public/x", None).status, 200, "no requirement");
    assert_eq!(
        hoist.stat("http.ingress.jwt_authn.allowed"),
        algs.len() as u64 + 1
    );
    assert_eq!(hoist.stat("http.ingress.jwt_authn.denied"), 7);
    hoist.wait_stat("http.ingress.downstream_rq_4xx", 7);
}

fn remote_provider(cache_duration: &str, async_fetch: bool) -> Value {
    let mut remote = json!({
        "http_uri": {"uri": "https://jwks.test/.well-known/jwks.json", "cluster": "jwks_cluster",
                     "timeout": "5s"},
        "cache_duration": cache_duration
    });
    if async_fetch {
        remote["async_fetch"] = json!({"failed_refetch_duration": "0.2s"});
    }
    json!({
        "providers": {"idp": {"issuer": ISS, "remote_jwks": remote}},
        "rules": [{"match": {"prefix": "/"}, "requires": {"provider_name": "idp"}}]
    })
}

#[test]
fn remote_jwks_over_https_is_fetched_cached_and_rotated() {
    let dir = TempDir::new("jwt-remote");
    let pki = pki(&dir.0, "jwks.test");
    let first = pyjwt("k1-", ISS, AUD);
    let second = pyjwt("k2-", ISS, AUD);
    let jwks = dir.write("served.json", first["jwks"].to_string());
    let server = JwksServer::start(&pki, jwks.clone());
    let cfg = write_config(
        &dir,
        remote_provider("1s", false),
        &cluster_yaml(server.addr.port(), &pki.ca),
    );
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let addr = hoist.addr("plain");
    assert_eq!(server.fetches(), 0, "fetched on demand, not at start");
    assert_eq!(get(addr, "/", Some(token(&first, "ES256"))).status, 200);
    assert_eq!(get(addr, "/", Some(token(&first, "RS256"))).status, 200);
    assert!(server.fetches() >= 1);
    assert!(hoist.stat("http.ingress.jwt_authn.jwks_fetch_success") >= 1);

    // Rotation: the IdP now serves the second set; once the cached set expires (1 s) hoist
    // fetches again and accepts the new keys, and refuses tokens of the old ones.
    std::fs::write(&jwks, second["jwks"].to_string()).unwrap();
    eventually("the rotated key is accepted", || {
        get(addr, "/", Some(token(&second, "EdDSA"))).status == 200
    });
    let old = get(addr, "/", Some(token(&first, "ES256")));
    assert_eq!(
        (old.status, old.body.as_str()),
        (401, "Jwks doesn't have key to match kid or alg from Jwt")
    );
    assert!(hoist.stat("http.ingress.jwt_authn.jwks_fetch_success") >= 2);
    assert_eq!(hoist.stat("http.ingress.jwt_authn.jwks_fetch_failed"), 0);
}

#[test]
fn async_fetch_fetches_at_start_and_in_the_background() {
    let dir = TempDir::new("jwt-async");
    let pki = pki(&dir.0, "jwks.test");
    let first = pyjwt("a1-", ISS, AUD);
    let second = pyjwt("a2-", ISS, AUD);
    let jwks = dir.write("served.json", first["jwks"].to_string());
    let server = JwksServer::start(&pki, jwks.clone());
    let cfg = write_config(
        &dir,
        remote_provider("1s", true),
        &cluster_yaml(server.addr.port(), &pki.ca),
    );
    let hoist = Hoist::start(&cfg, &["--concurrency", "2"]);
    let addr = hoist.addr("plain");
    eventually("the first background fetch", || {
        hoist.stat("http.ingress.jwt_authn.jwks_fetch_success") >= 1
    });
    assert_eq!(get(addr, "/", Some(token(&first, "PS256"))).status, 200);
    std::fs::write(&jwks, second["jwks"].to_string()).unwrap();
    eventually("the background refetch publishes the new set", || {
        get(addr, "/", Some(token(&second, "HS256"))).status == 200
    });
    assert_eq!(get(addr, "/", Some(token(&first, "PS256"))).status, 401);
}

#[test]
fn a_failed_fetch_refuses_the_request_as_envoy_does() {
    let dir = TempDir::new("jwt-fetch-fail");
    let pki = pki(&dir.0, "jwks.test");
    let set = pyjwt("", ISS, AUD);
    // Nothing listens there: a port bound but not listening.
    let refusing = support::RefusingPort::new();
    let port = refusing.port;
    let cfg = write_config(
        &dir,
        remote_provider("60s", false),
        &cluster_yaml(port, &pki.ca),
    );
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let r = get(hoist.addr("plain"), "/", Some(token(&set, "RS256")));
    assert_eq!(
        (r.status, r.body.as_str()),
        (401, "Jwks remote fetch is failed")
    );
    assert_eq!(hoist.stat("http.ingress.jwt_authn.jwks_fetch_failed"), 1);
    assert_eq!(hoist.stat("http.ingress.jwt_authn.jwks_fetch_success"), 0);
}

#[test]
fn a_certificate_the_trusted_ca_did_not_sign_fails_the_fetch() {
    let dir = TempDir::new("jwt-untrusted");
    let pki_served = pki(&dir.0, "jwks.test");
    let other = TempDir::new("jwt-untrusted-ca");
    let pki_trusted = pki(&other.0, "jwks.test");
    let set = pyjwt("", ISS, AUD);
    let jwks = dir.write("served.json", set["jwks"].to_string());
    let server = JwksServer::start(&pki_served, jwks);
    let cfg = write_config(
        &dir,
        remote_provider("60s", false),
        &cluster_yaml(server.addr.port(), &pki_trusted.ca),
    );
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let r = get(hoist.addr("plain"), "/", Some(token(&set, "RS256")));
    assert_eq!(
        (r.status, r.body.as_str()),
        (401, "Jwks remote fetch is failed")
    );
    assert_eq!(
        server.fetches(),
        0,
        "no request is sent over an untrusted connection"
    );
}

#[test]
fn validate_accepts_clusters_and_refuses_an_unknown_one() {
    let dir = TempDir::new("jwt-validate");
    let pki = pki(&dir.0, "jwks.test");
    let cfg = write_config(
        &dir,
        remote_provider("60s", true),
        &cluster_yaml(1, &pki.ca),
    );
    let out = std::process::Command::new(BIN)
        .args(["--mode", "validate", "-c", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut filter = remote_provider("60s", false);
    filter["providers"]["idp"]["remote_jwks"]["http_uri"]["cluster"] = json!("nope");
    let cfg = write_config(&dir, filter, &cluster_yaml(1, &pki.ca));
    let out = std::process::Command::new(BIN)
        .args(["--mode", "validate", "-c", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    // validate reports on stdout, as Envoy does.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            ".http_uri.cluster: cluster \"nope\" is not defined in static_resources.clusters"
        ),
        "{text}"
    );
}

/// An enforced local_ratelimit with two tokens that never refill during the test.
fn rate_limit_filter() -> String {
    let always =
        json!({"runtime_key": "rl", "default_value": {"numerator": 100, "denominator": "HUNDRED"}});
    let typed = json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
        "stat_prefix": "rl",
        "token_bucket": {"max_tokens": 2, "tokens_per_fill": 1, "fill_interval": "3600s"},
        "filter_enabled": always,
        "filter_enforced": always
    });
    format!("- name: envoy.filters.http.local_ratelimit\n  typed_config: {typed}")
}

#[test]
fn rate_limit_and_jwt_run_in_the_order_the_config_gives() {
    let dir = TempDir::new("jwt-ratelimit");
    let set = pyjwt("", ISS, AUD);
    let jwks = dir.write("jwks.json", set["jwks"].to_string());
    let jwt = jwt_filter(json!({
        "providers": {"idp": {"issuer": ISS, "local_jwks": {"filename": jwks}}},
        "rules": [{"match": {"prefix": "/"}, "requires": {"provider_name": "idp"}}]
    }));
    let good = token(&set, "RS256");

    // Rate limit first: requests without a token still take tokens from the bucket, and the
    // third is refused by the rate limit before the JWT check sees it.
    let cfg = write_chain(&dir, &[rate_limit_filter(), jwt.clone()], "");
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let addr = hoist.addr("plain");
    let statuses: Vec<u16> = (0..3).map(|_| get(addr, "/", None).status).collect();
    assert_eq!(statuses, [401, 401, 429]);
    assert_eq!(
        get(addr, "/", Some(good)).status,
        429,
        "the bucket is empty"
    );
    assert_eq!(hoist.stat("rl.http_local_rate_limit.rate_limited"), 2);
    assert_eq!(hoist.stat("http.ingress.jwt_authn.denied"), 2);
    assert_eq!(hoist.stat("http.ingress.jwt_authn.allowed"), 0);
    drop(hoist);

    // JWT first: refused requests never reach the rate limit; two good ones take its tokens.
    let cfg = write_chain(&dir, &[jwt, rate_limit_filter()], "");
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let addr = hoist.addr("plain");
    let statuses: Vec<u16> = (0..3).map(|_| get(addr, "/", None).status).collect();
    assert_eq!(statuses, [401, 401, 401]);
    assert_eq!(hoist.stat("rl.http_local_rate_limit.enabled"), 0);
    let statuses: Vec<u16> = (0..3).map(|_| get(addr, "/", Some(good)).status).collect();
    assert_eq!(statuses, [200, 200, 429]);
    assert_eq!(hoist.stat("rl.http_local_rate_limit.rate_limited"), 1);
    assert_eq!(hoist.stat("http.ingress.jwt_authn.denied"), 3);
    assert_eq!(hoist.stat("http.ingress.jwt_authn.allowed"), 3);
}

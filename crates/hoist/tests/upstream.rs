//! Proxying to upstream clusters, end to end: the real binary in front of origin.py (a small
//! Python origin that can delay, fail, reset or answer garbage), driven by curl.
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{curl, vm_hwm_kib, Hoist, TempDir};
use upstream_support::{cluster, config, route, Origin};

fn start(dir: &TempDir, routes: &str, clusters: &str) -> Hoist {
    let log = dir.path("access.log");
    let cfg = dir.write("hoist.yaml", config(routes, clusters, &log, None));
    Hoist::start(&cfg, &["--concurrency", "1"])
}

fn url(h: &Hoist, path: &str) -> String {
    format!("http://{}{path}", h.addr("plain"))
}

fn get_json(h: &Hoist, path: &str, extra: &[&str]) -> Value {
    let mut args = vec![url(h, path)];
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = curl(&args);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// Status, headers (lower-case names) and body.
type Reply = (u16, HashMap<String, String>, String);

/// Status, headers (lower-case names) and body of a GET through curl -i.
fn get(h: &Hoist, path: &str) -> Reply {
    let out = curl(&["-i", &url(h, path)]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers, body.to_owned())
}

/// The access log line containing `needle` (the log is flushed every second).
fn log_line(dir: &TempDir, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(dir.path("access.log")).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.contains(needle)) {
            return l.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {needle}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn routes_rewrite_and_forward_headers() {
    let dir = TempDir::new("up-route");
    let a = Origin::start("a");
    let routes = route(
        "{prefix: /api/}",
        "{cluster: web, prefix_rewrite: /v2/, host_rewrite_literal: backend.internal}",
    ) + &route("{prefix: /auto}", "{cluster: web, auto_host_rewrite: true}")
        + &route("{prefix: /by-header}", "{cluster_header: x-target}")
        + &route("{prefix: /}", "{cluster: web, timeout: 0s}");
    let h = start(&dir, &routes, &cluster("web", &[(a.port, 1)], ""));

    let v = get_json(
        &h,
        "/api/items?x=1",
        &[
            "-H",
            "x-forwarded-for: 10.0.0.1",
            "-H",
            "x-request-id: keep-me",
            "-H",
            "connection: x-private",
            "-H",
            "x-private: secret",
            "-H",
            "te: trailers",
        ],
    );
    assert_eq!(v["path"], "/v2/items?x=1");
    let hd = &v["headers"];
    assert_eq!(hd["host"], "backend.internal");
    assert_eq!(hd["x-forwarded-for"], "10.0.0.1,127.0.0.1");
    assert_eq!(hd["x-forwarded-proto"], "http");
    assert_eq!(hd["x-request-id"], "keep-me");
    assert_eq!(hd["x-envoy-original-path"], "/api/items?x=1");
    assert_eq!(hd["x-envoy-expected-rq-timeout-ms"], "15000");
    for hop in ["x-private", "te", "connection"] {
        assert!(hd.get(hop).is_none(), "{hop} was forwarded: {hd}");
    }

    let v = get_json(&h, "/auto", &[]);
    assert_eq!(v["headers"]["host"], format!("127.0.0.1:{}", a.port));
    let v = get_json(&h, "/plain", &[]);
    assert!(
        v["headers"]["x-request-id"].as_str().unwrap().len() == 36,
        "{v}"
    );
    assert!(v["headers"].get("x-envoy-expected-rq-timeout-ms").is_none());

    let (status, headers, _) = get(&h, "/plain");
    assert_eq!(status, 200);
    assert!(headers.contains_key("x-envoy-upstream-service-time"));
    assert_eq!(headers["server"], "envoy");
    for hop in ["x-origin-private", "keep-alive"] {
        assert!(!headers.contains_key(hop), "{hop} came back: {headers:?}");
    }

    let out = curl(&["-H", "x-target: web", &url(&h, "/by-header")]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"origin\": \"a\""));
    let (status, _, _) = get(&h, "/by-header/none");
    assert_eq!(status, 503);
    assert!(log_line(&dir, "GET /by-header/none").contains(" 503 NC "));
    assert!(log_line(&dir, "GET /api/items").contains(&format!("\"127.0.0.1:{}\"", a.port)));
}

fn origins_seen(h: &Hoist, n: usize) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for _ in 0..n {
        let v = get_json(h, "/", &[]);
        *seen
            .entry(v["origin"].as_str().unwrap().to_owned())
            .or_default() += 1;
    }
    seen
}

#[test]
fn load_balancing_policies_follow_weights() {
    let dir = TempDir::new("up-lb");
    let (a, b) = (Origin::start("a"), Origin::start("b"));
    let clusters = cluster("rr", &[(a.port, 1), (b.port, 3)], "")
        + &cluster(
            "random",
            &[(a.port, 1), (b.port, 1)],
            "    lb_policy: RANDOM\n",
        )
        + &cluster(
            "lr",
            &[(a.port, 1), (b.port, 1)],
            "    lb_policy: LEAST_REQUEST\n",
        );
    let routes = route("{prefix: /random}", "{cluster: random}")
        + &route("{prefix: /lr}", "{cluster: lr}")
        + &route(
            "{prefix: /split}",
            "{weighted_clusters: {clusters: [{name: rr, weight: 0}, {name: random, weight: 1}]}}",
        )
        + &route("{prefix: /}", "{cluster: rr}");
    let h = start(&dir, &routes, &clusters);
    // One worker: smooth weighted round robin is exact over whole rounds.
    let seen = origins_seen(&h, 40);
    assert_eq!((seen["a"], seen["b"]), (10, 30), "{seen:?}");
    for path in ["/random", "/lr", "/split"] {
        let mut seen: HashMap<String, usize> = HashMap::new();
        for _ in 0..60 {
            let v = get_json(&h, path, &[]);
            *seen
                .entry(v["origin"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
        // Both endpoints get traffic (a fair coin misses one in 60 throws with p = 2^-59).
        assert_eq!(seen.len(), 2, "{path}: {seen:?}");
    }
    assert_eq!(h.stat("cluster.rr.upstream_rq_total"), 40);
    assert_eq!(h.stat("cluster.rr.upstream_rq_2xx"), 40);
    assert_eq!(h.stat("cluster.random.upstream_rq_total"), 120);
    assert_eq!(h.stat("cluster.rr.membership_total"), 2);
}

#[test]
fn keep_alive_connections_are_reused() {
    let dir = TempDir::new("up-reuse");
    let a = Origin::start("a");
    let h = start(
        &dir,
        &route("{prefix: /}", "{cluster: web}"),
        &cluster("web", &[(a.port, 1)], ""),
    );
    let mut numbers = Vec::new();
    for _ in 0..20 {
        numbers.push(get_json(&h, "/", &[])["connection"].as_u64().unwrap());
    }
    // Sequential requests: one upstream connection carries them all.
    assert!(numbers.iter().all(|n| *n == numbers[0]), "{numbers:?}");
    assert_eq!(h.stat("cluster.web.upstream_cx_total"), 1);
    assert_eq!(h.stat("cluster.web.upstream_cx_active"), 1);
    assert_eq!(h.stat("cluster.web.upstream_rq_total"), 20);
    let (_, clusters) = h.admin_get("/clusters");
    let host = format!("web::127.0.0.1:{}", a.port);
    for line in [
        "cx_total::1",
        "cx_active::1",
        "rq_total::20",
        "rq_success::20",
        "rq_error::0",
    ] {
        assert!(
            clusters.contains(&format!("{host}::{line}\n")),
            "{line}:\n{clusters}"
        );
    }
    assert!(clusters.contains("web::observability_name::web\n"));
    // A response the upstream ends by closing is not reused.
    let (status, _, _) = get(&h, "/reset");
    assert_eq!(status, 503);
    assert_eq!(get_json(&h, "/", &[])["origin"], "a");
}

#[test]
fn upstream_failures_are_envoys_local_replies() {
    let dir = TempDir::new("up-fail");
    let a = Origin::start("a");
    // A port nothing listens on.
    let refusing = support::RefusingPort::new();
    let dead = refusing.port;
    let clusters = cluster("web", &[(a.port, 1)], "")
        + &cluster("dead", &[(dead, 1)], "    connect_timeout: 1s\n");
    let routes = route("{prefix: /dead}", "{cluster: dead}")
        + &route("{prefix: /delay}", "{cluster: web, timeout: 0.3s}")
        + &route("{prefix: /}", "{cluster: web}");
    let h = start(&dir, &routes, &clusters);

    let (status, _, body) = get(&h, "/dead");
    assert_eq!(status, 503);
    assert!(body.starts_with("upstream connect error or disconnect/reset before headers. reset reason: remote connection failure"), "{body}");
    assert!(log_line(&dir, "GET /dead").contains(" 503 UF "));
    assert_eq!(h.stat("cluster.dead.upstream_cx_connect_fail"), 1);

    let (status, _, body) = get(&h, "/delay?ms=3000");
    assert_eq!((status, body.as_str()), (504, "upstream request timeout"));
    assert!(log_line(&dir, "GET /delay").contains(" 504 UT "));
    assert_eq!(h.stat("cluster.web.upstream_rq_timeout"), 1);

    let (status, _, body) = get(&h, "/malformed");
    assert_eq!(status, 502);
    assert!(body.ends_with("reset reason: protocol error"), "{body}");
    assert!(log_line(&dir, "GET /malformed").contains(" 502 UPE "));

    let (status, _, body) = get(&h, "/reset");
    assert_eq!(status, 503);
    assert!(
        body.ends_with("reset reason: connection termination"),
        "{body}"
    );
    assert!(log_line(&dir, "GET /reset").contains(" 503 UC "));

    let (status, _, _) = get(&h, "/status?code=404");
    assert_eq!(status, 404);
    assert_eq!(h.stat("cluster.web.upstream_rq_4xx"), 1);
    // The origin is still served after all that.
    assert_eq!(get_json(&h, "/", &[])["origin"], "a");
}

/// The SHA-256 origin.py's /bytes pattern has for `n` bytes.
fn pattern_sha(n: usize) -> String {
    use sha2::Digest;
    let block: Vec<u8> = {
        let d = sha2::Sha256::digest(b"seed");
        let mut b = d.repeat(31250);
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
    h.finalize().iter().map(|b| format!("{b:02x}")).collect()
}

fn curl_sha(args: &[&str]) -> (String, u64) {
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "curl -sS --max-time 120 -w '%{{size_download}}' -o >(sha256sum >&2) {} ",
            args.iter()
                .map(|a| format!("'{a}'"))
                .collect::<Vec<_>>()
                .join(" ")
        ))
        .output()
        .unwrap();
    let sha = String::from_utf8_lossy(&out.stderr)
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_owned();
    let size = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (sha, size)
}

#[test]
fn hundred_megabytes_both_ways_through_http1_and_http2_with_bounded_memory() {
    const N: usize = 100 * 1024 * 1024;
    let dir = TempDir::new("up-big");
    let a = Origin::start("a");
    let cert = support::rsa_cert(&dir, "front", "front.test", 2048);
    let log = dir.path("access.log");
    let cfg = dir.write(
        "hoist.yaml",
        config(
            &route("{prefix: /}", "{cluster: web}"),
            // One 64 KiB piece may wait between the upstream and the client.
            &cluster(
                "web",
                &[(a.port, 1)],
                "    per_connection_buffer_limit_bytes: 65536\n",
            ),
            &log,
            Some(&cert),
        ),
    );
    let h = Hoist::start(&cfg, &["--concurrency", "1"]);
    let pid = h.child.id();
    let before = vm_hwm_kib(pid);
    let want = pattern_sha(N);

    // Download: content-length over plain HTTP/1.1, chunked over TLS with HTTP/1.1 and h2.
    let plain = format!("http://{}/bytes?n={N}", h.addr("plain"));
    assert_eq!(curl_sha(&[&plain]), (want.clone(), N as u64));
    let tls = format!("https://{}/bytes?n={N}&chunked=1", h.addr("tls"));
    assert_eq!(
        curl_sha(&["-k", "--http1.1", &tls]),
        (want.clone(), N as u64)
    );
    assert_eq!(curl_sha(&["-k", "--http2", &tls]), (want.clone(), N as u64));

    // Upload: the origin hashes what it received.
    let file = support::payload(&dir, "up.bin", N);
    let data = std::fs::read(&file).unwrap();
    let up_sha = support::sha256_hex(&data);
    drop(data);
    let body = format!("@{}", file.display());
    for args in [
        vec![
            "--http1.1".to_owned(),
            format!("http://{}/upload", h.addr("plain")),
        ],
        vec![
            "-k".to_owned(),
            "--http2".to_owned(),
            format!("https://{}/upload", h.addr("tls")),
        ],
    ] {
        let mut all: Vec<&str> = args.iter().map(String::as_str).collect();
        all.extend([
            "--data-binary",
            &body,
            "-H",
            "content-type: application/octet-stream",
        ]);
        let out = curl(&all);
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        assert_eq!(v["length"], N as u64, "{args:?}");
        assert_eq!(v["sha256"], up_sha, "{args:?}");
    }
    let after = vm_hwm_kib(pid);
    // Streaming holds a few pieces per exchange: the peak grows by far less than one body.
    assert!(
        after < before + 32 * 1024,
        "VmHWM grew from {before} KiB to {after} KiB"
    );
}

#[test]
fn upstream_tls_verifies_the_certificate_and_its_names() {
    let dir = TempDir::new("up-tls");
    let (ca, cert) = upstream_support::ca_and_leaf(&dir, "origin.test");
    let a = Origin::start_tls("secure", &cert);
    let tls = |san: &str| {
        format!(
            r#"    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: origin.test
        common_tls_context:
          validation_context:
            trusted_ca: {{filename: {}}}
            match_typed_subject_alt_names:
            - san_type: DNS
              matcher: {{exact: {san}}}
"#,
            Path::new(&ca).display()
        )
    };
    let clusters = cluster("good", &[(a.port, 1)], &tls("origin.test"))
        + &cluster("wrong", &[(a.port, 1)], &tls("other.test"));
    let routes =
        route("{prefix: /wrong}", "{cluster: wrong}") + &route("{prefix: /}", "{cluster: good}");
    let h = start(&dir, &routes, &clusters);
    for _ in 0..3 {
        assert_eq!(get_json(&h, "/", &[])["origin"], "secure");
    }
    assert_eq!(h.stat("cluster.good.upstream_cx_total"), 1);
    let (status, _, body) = get(&h, "/wrong");
    assert_eq!(status, 503);
    assert!(body.contains("TLS_error"), "{body}");
    assert!(log_line(&dir, "GET /wrong").contains(" 503 UF "));
}

#[test]
fn retries_by_policy_then_retry_limit_exceeded() {
    let dir = TempDir::new("up-retry");
    let a = Origin::start("a");
    let refusing = support::RefusingPort::new();
    let dead = refusing.port;
    let clusters = cluster(
        "half",
        &[(dead, 1), (a.port, 1)],
        "    connect_timeout: 1s\n",
    ) + &cluster("web", &[(a.port, 1)], "");
    let routes = route(
        "{prefix: /half}",
        "{cluster: half, retry_policy: {retry_on: connect-failure, num_retries: 1}}",
    ) + &route(
        "{prefix: /status}",
        "{cluster: web, retry_policy: {retry_on: 5xx, num_retries: 2, retry_back_off: {base_interval: 0.001s}}}",
    ) + &route(
        "{prefix: /delay}",
        "{cluster: web, timeout: 10s, retry_policy: {retry_on: reset, num_retries: 1, per_try_timeout: 0.2s}}",
    ) + &route("{prefix: /}", "{cluster: web}");
    let h = start(&dir, &routes, &clusters);

    // Round robin sends every request to the dead endpoint first; the retry reaches the live one.
    for _ in 0..4 {
        assert_eq!(get_json(&h, "/half", &[])["origin"], "a");
    }
    assert_eq!(h.stat("cluster.half.upstream_rq_retry"), 4);
    assert_eq!(h.stat("cluster.half.upstream_rq_retry_success"), 4);
    assert_eq!(h.stat("cluster.half.upstream_cx_connect_fail"), 4);

    let (status, _, _) = get(&h, "/status?code=503");
    assert_eq!(status, 503);
    assert_eq!(h.stat("cluster.web.upstream_rq_retry"), 2);
    assert_eq!(h.stat("cluster.web.upstream_rq_retry_limit_exceeded"), 1);
    assert_eq!(h.stat("cluster.web.upstream_rq_5xx"), 3);
    assert!(log_line(&dir, "GET /status?code=503").contains(" 503 URX "));

    let (status, _, body) = get(&h, "/delay?ms=3000");
    assert_eq!((status, body.as_str()), (504, "upstream request timeout"));
    assert_eq!(h.stat("cluster.web.upstream_rq_per_try_timeout"), 2);
    assert!(log_line(&dir, "GET /delay").contains(" 504 UT"));
}

#[test]
fn max_requests_per_connection_and_idle_timeout_retire_connections() {
    let dir = TempDir::new("up-retire");
    let a = Origin::start("a");
    let clusters = cluster(
        "capped",
        &[(a.port, 1)],
        "    common_http_protocol_options: {max_requests_per_connection: 3}\n",
    ) + &cluster(
        "idle",
        &[(a.port, 1)],
        "    common_http_protocol_options: {idle_timeout: 0.2s}\n",
    );
    let routes =
        route("{prefix: /idle}", "{cluster: idle}") + &route("{prefix: /}", "{cluster: capped}");
    let h = start(&dir, &routes, &clusters);
    let numbers: Vec<u64> = (0..7)
        .map(|_| get_json(&h, "/", &[])["connection"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers[0..3], [numbers[0]; 3], "{numbers:?}");
    assert_eq!(numbers[3..6], [numbers[3]; 3], "{numbers:?}");
    assert!(
        numbers[0] != numbers[3] && numbers[3] != numbers[6],
        "{numbers:?}"
    );
    assert_eq!(h.stat("cluster.capped.upstream_cx_total"), 3);
    assert_eq!(h.stat("cluster.capped.upstream_cx_max_requests"), 2);

    let first = get_json(&h, "/idle", &[])["connection"].as_u64().unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let second = get_json(&h, "/idle", &[])["connection"].as_u64().unwrap();
    assert_ne!(first, second);
    assert_eq!(h.stat("cluster.idle.upstream_cx_idle_timeout"), 1);
}

/// Waits (at most 30 s) until the stat `name` is not zero.
fn wait_nonzero(h: &Hoist, name: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while h.stat(name) == 0 {
        assert!(Instant::now() < deadline, "{name} stayed 0");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a slow request in the background, then sends `path` once the slow one is in flight
/// at the origin (`cluster`'s upstream_rq_active is 1).
fn while_busy(h: &Hoist, cluster: &str, busy: &str, path: &str) -> ((u16, String), Reply) {
    let busy_url = url(h, busy);
    let first = std::thread::spawn(move || {
        let out = curl(&["-w", "\n%{http_code}", &busy_url]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (body, code) = text.rsplit_once('\n').unwrap();
        (code.parse().unwrap(), body.to_owned())
    });
    wait_nonzero(h, &format!("cluster.{cluster}.upstream_rq_active"));
    let second = get(h, path);
    (first.join().unwrap(), second)
}

#[test]
fn circuit_breakers_overflow_with_503_uo() {
    let dir = TempDir::new("up-cb");
    let a = Origin::start("a");
    let clusters = cluster(
        "rq",
        &[(a.port, 1)],
        "    circuit_breakers: {thresholds: [{max_requests: 1}]}\n",
    ) + &cluster(
        "nopending",
        &[(a.port, 1)],
        "    circuit_breakers: {thresholds: [{max_connections: 1, max_pending_requests: 0}]}\n",
    ) + &cluster(
        "queue",
        &[(a.port, 1)],
        "    circuit_breakers: {thresholds: [{max_connections: 1, max_pending_requests: 1}]}\n",
    );
    let routes = route("{prefix: /rq/}", "{cluster: rq, prefix_rewrite: /}")
        + &route(
            "{prefix: /nopending/}",
            "{cluster: nopending, prefix_rewrite: /}",
        )
        + &route("{prefix: /queue/}", "{cluster: queue, prefix_rewrite: /}");
    let h = start(&dir, &routes, &clusters);

    let (first, (status, _, body)) = while_busy(&h, "rq", "/rq/delay?ms=1500", "/rq/echo");
    assert_eq!(first, (200, "late".to_owned()));
    assert_eq!(status, 503);
    assert!(body.ends_with("reset reason: overflow"), "{body}");
    assert!(log_line(&dir, "GET /rq/echo").contains(" 503 UO "));
    assert_eq!(h.stat("cluster.rq.upstream_rq_pending_overflow"), 1);

    let (first, (status, _, _)) = while_busy(
        &h,
        "nopending",
        "/nopending/delay?ms=1500",
        "/nopending/echo",
    );
    assert_eq!((first.0, status), (200, 503));
    assert_eq!(h.stat("cluster.nopending.upstream_cx_overflow"), 1);

    // With room to wait, the second request waits for the one connection and reuses it.
    let (first, (status, _, body)) = while_busy(&h, "queue", "/queue/delay?ms=1500", "/queue/echo");
    assert_eq!((first.0, status), (200, 200), "{body}");
    assert_eq!(h.stat("cluster.queue.upstream_cx_total"), 1);
    assert_eq!(h.stat("cluster.queue.upstream_cx_overflow"), 1);

    // While it waits, the second request is counted in upstream_rq_pending_active.
    let slow = url(&h, "/queue/delay?ms=1500");
    let first = std::thread::spawn(move || curl(&[&slow]).status.success());
    wait_nonzero(&h, "cluster.queue.upstream_rq_active");
    let queued = url(&h, "/queue/echo");
    let second = std::thread::spawn(move || curl(&[&queued]).status.success());
    wait_nonzero(&h, "cluster.queue.upstream_rq_pending_active");
    assert!(first.join().unwrap() && second.join().unwrap());
    assert_eq!(h.stat("cluster.queue.upstream_rq_pending_active"), 0);
}

#[test]
fn nginx_origin_over_http_and_https_with_keep_alive() {
    let dir = TempDir::new("up-nginx");
    let root = dir.path("www");
    std::fs::create_dir_all(&root).unwrap();
    let file = support::payload(&dir, "www/file.bin", 3 * 1024 * 1024 + 7);
    let want = support::sha256_hex(&std::fs::read(&file).unwrap());
    let (ca, cert) = upstream_support::ca_and_leaf(&dir, "nginx.test");
    let nginx = upstream_support::Nginx::start(&dir, &root, &cert);
    let tls = format!(
        r#"    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: nginx.test
        common_tls_context:
          validation_context:
            trusted_ca: {{filename: {}}}
            match_typed_subject_alt_names: [{{san_type: DNS, matcher: {{exact: nginx.test}}}}]
"#,
        ca.display()
    );
    let clusters = cluster("plain", &[(nginx.http_port, 1)], "")
        + &cluster("secure", &[(nginx.https_port, 1)], &tls);
    let routes = route("{prefix: /s/}", "{cluster: secure, prefix_rewrite: /}")
        + &route("{prefix: /}", "{cluster: plain}");
    let h = start(&dir, &routes, &clusters);
    for path in ["/file.bin", "/s/file.bin"] {
        for _ in 0..5 {
            let out = curl(&[&url(&h, path)]);
            assert_eq!(support::sha256_hex(&out.stdout), want, "{path}");
        }
    }
    let (status, _, _) = get(&h, "/missing");
    assert_eq!(status, 404);
    assert_eq!(h.stat("cluster.plain.upstream_cx_total"), 1);
    assert_eq!(h.stat("cluster.plain.upstream_rq_2xx"), 5);
    assert_eq!(h.stat("cluster.plain.upstream_rq_4xx"), 1);
    assert_eq!(h.stat("cluster.secure.upstream_cx_total"), 1);
    assert_eq!(h.stat("cluster.secure.upstream_rq_2xx"), 5);
}

fn wait_for_stat(h: &Hoist, name: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while h.stat(name) != want {
        assert!(
            Instant::now() < deadline,
            "{name} never reached {want}: {}",
            h.stat(name)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn health_checks_eject_a_dead_host_and_panic_mode_keeps_traffic_flowing() {
    let dir = TempDir::new("up-hc");
    let a = Origin::start("a");
    let b = Origin::start("b");
    let hc = |path: &str| {
        format!(
            "    health_checks:\n    - {{timeout: 1s, interval: 0.1s, unhealthy_threshold: 2, healthy_threshold: 1, http_health_check: {{path: \"{path}\"}}}}\n"
        )
    };
    let clusters = cluster("web", &[(a.port, 1), (b.port, 1)], &hc("/status?code=200"))
        + &cluster(
            "failing",
            &[(a.port, 1), (b.port, 1)],
            &hc("/status?code=503"),
        );
    let routes = route(
        "{prefix: /failing/}",
        "{cluster: failing, prefix_rewrite: /}",
    ) + &route("{prefix: /}", "{cluster: web}");
    let h = start(&dir, &routes, &clusters);
    wait_for_stat(&h, "cluster.web.membership_healthy", 2);
    assert_eq!(origins_seen(&h, 10).len(), 2);

    drop(b);
    wait_for_stat(&h, "cluster.web.membership_healthy", 1);
    let seen = origins_seen(&h, 10);
    assert_eq!(seen.get("a"), Some(&10), "{seen:?}");
    assert!(h.stat("cluster.web.health_check.network_failure") >= 2);
    let (_, clusters) = h.admin_get("/clusters");
    assert!(
        clusters.contains("::health_flags::/failed_active_hc\n"),
        "{clusters}"
    );

    // No host passes: below the panic threshold every host takes traffic again.
    assert_eq!(h.stat("cluster.failing.membership_healthy"), 0);
    assert!(h.stat("cluster.failing.health_check.failure") >= 2);
    assert_eq!(get_json(&h, "/failing/echo", &[])["origin"], "a");
}

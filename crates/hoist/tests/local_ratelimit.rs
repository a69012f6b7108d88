//! envoy.filters.http.local_ratelimit through the real binary: the 429 local reply with the RL
//! flag in the access log and the top-level stats, enabled-but-not-enforced, the x-ratelimit
//! headers, descriptors from the virtual host's rate_limits, per-route limiters, and the bucket
//! shared exactly by two workers under real concurrent clients (h2load, HTTP/1.1 and HTTP/2).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};

use support::*;

/// `text` with every line indented by `n` spaces (blank lines dropped).
fn indent(text: &str, n: usize) -> String {
    let pad = " ".repeat(n);
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| format!("{pad}{l}\n"))
        .collect()
}

/// A bootstrap with one plaintext listener whose connection manager runs the local rate limit
/// filter (`filter`: the LocalRateLimit fields) before the router. `vh_extra` goes into the
/// virtual host, `routes` before its catch-all route, `hcm_extra` into the connection manager.
fn config(filter: &str, vh_extra: &str, routes: &str, hcm_extra: &str) -> String {
    format!(
        r#"admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
static_resources:
  listeners:
  - name: plain
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
{hcm_extra}          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
{vh_extra}              routes:
{routes}              - match: {{prefix: /}}
                direct_response: {{status: 200, body: {{inline_string: "ok\n"}}}}
          http_filters:
          - name: envoy.filters.http.local_ratelimit
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit
{filter}          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#,
        hcm_extra = indent(hcm_extra, 10),
        vh_extra = indent(vh_extra, 14),
        routes = indent(routes, 14),
        filter = indent(filter, 14),
    )
}

const ALWAYS: &str = "{runtime_key: rl, default_value: {numerator: 100, denominator: HUNDRED}}";

/// A LocalRateLimit with `max_tokens` and a fill interval long enough never to refill during
/// a test, enabled and enforced for every request.
fn enforced(stat_prefix: &str, max_tokens: u32, extra: &str) -> String {
    format!(
        "stat_prefix: {stat_prefix}\ntoken_bucket: {{max_tokens: {max_tokens}, tokens_per_fill: 1, fill_interval: 3600s}}\nfilter_enabled: {ALWAYS}\nfilter_enforced: {ALWAYS}\n{extra}"
    )
}

fn access_log(path: &std::path::Path, format: &str) -> String {
    format!(
        r#"access_log:
- name: envoy.access_loggers.file
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
    path: {}
    log_format: {{text_format_source: {{inline_string: "{format}\n"}}}}
"#,
        path.display()
    )
}

fn wait_for_lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// One GET with curl: status, lower-cased response headers, body.
struct Response {
    status: u16,
    headers: HashMap<String, String>,
    body: String,
}

fn get(url: &str, headers: &[&str]) -> Response {
    let mut args: Vec<&str> = vec!["-D", "-"];
    for h in headers {
        args.extend(["-H", h]);
    }
    args.push(url);
    let out = curl(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Response {
        status,
        headers,
        body: body.to_string(),
    }
}

fn statuses(url: &str, headers: &[&str], n: usize) -> Vec<u16> {
    (0..n).map(|_| get(url, headers).status).collect()
}

#[test]
fn over_the_limit_requests_get_429_with_rl_and_top_level_stats() {
    let dir = TempDir::new("rl-reply");
    let log = dir.path("access.log");
    let filter = enforced(
        "edge",
        2,
        "response_headers_to_add:\n- header: {key: x-local-rate-limit, value: 'true'}\n  append_action: OVERWRITE_IF_EXISTS_OR_ADD",
    );
    let hcm = access_log(
        &log,
        "%RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS%",
    );
    let cfg = dir.write("envoy.yaml", config(&filter, "", "", &hcm));
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let url = format!("http://{}/", hoist.addr("plain"));

    assert_eq!(get(&url, &[]).status, 200);
    assert_eq!(get(&url, &[]).status, 200);
    let refused = get(&url, &[]);
    assert_eq!(refused.status, 429);
    assert_eq!(refused.body, "local_rate_limited");
    assert_eq!(
        refused
            .headers
            .get("x-local-rate-limit")
            .map(String::as_str),
        Some("true")
    );

    let lines = wait_for_lines(&log, 3);
    assert_eq!(
        lines,
        [
            "200 - direct_response",
            "200 - direct_response",
            "429 RL local_rate_limited"
        ]
    );
    assert_eq!(hoist.stat("edge.http_local_rate_limit.enabled"), 3);
    assert_eq!(hoist.stat("edge.http_local_rate_limit.ok"), 2);
    assert_eq!(hoist.stat("edge.http_local_rate_limit.rate_limited"), 1);
    assert_eq!(hoist.stat("edge.http_local_rate_limit.enforced"), 1);
    hoist.wait_stat("http.ingress.downstream_rq_4xx", 1);
    // The filter's stats are rooted at its stat_prefix, not under http.<hcm prefix>.
    let (_, all) = hoist.admin_get("/stats?filter=http_local_rate_limit");
    let names: Vec<&str> = all.lines().filter_map(|l| l.split(':').next()).collect();
    assert_eq!(names.len(), 4, "{all}");
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("edge.http_local_rate_limit.")),
        "{all}"
    );
}

#[test]
fn enabled_but_not_enforced_lets_requests_through_and_marks_them() {
    let dir = TempDir::new("rl-shadow");
    let log = dir.path("access.log");
    let filter = format!(
        "stat_prefix: shadow\ntoken_bucket: {{max_tokens: 1, fill_interval: 3600s}}\nfilter_enabled: {ALWAYS}\nrequest_headers_to_add_when_not_enforced:\n- header: {{key: x-local-ratelimited, value: 'true'}}\n  append_action: OVERWRITE_IF_EXISTS_OR_ADD"
    );
    let hcm = access_log(
        &log,
        "%RESPONSE_CODE% %RESPONSE_FLAGS% %REQ(X-LOCAL-RATELIMITED)%",
    );
    let cfg = dir.write("envoy.yaml", config(&filter, "", "", &hcm));
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let url = format!("http://{}/", hoist.addr("plain"));
    assert_eq!(statuses(&url, &[], 3), [200, 200, 200]);
    let lines = wait_for_lines(&log, 3);
    assert_eq!(lines, ["200 - -", "200 - true", "200 - true"]);
    assert_eq!(hoist.stat("shadow.http_local_rate_limit.enabled"), 3);
    assert_eq!(hoist.stat("shadow.http_local_rate_limit.ok"), 1);
    assert_eq!(hoist.stat("shadow.http_local_rate_limit.rate_limited"), 2);
    assert_eq!(hoist.stat("shadow.http_local_rate_limit.enforced"), 0);
}

#[test]
fn x_ratelimit_headers_on_allowed_and_refused_responses() {
    let dir = TempDir::new("rl-xheaders");
    let filter = format!(
        "stat_prefix: x\ntoken_bucket: {{max_tokens: 2, fill_interval: 3600s}}\nfilter_enabled: {ALWAYS}\nfilter_enforced: {ALWAYS}\nenable_x_ratelimit_headers: DRAFT_VERSION_03"
    );
    let cfg = dir.write("envoy.yaml", config(&filter, "", "", ""));
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let url = format!("http://{}/", hoist.addr("plain"));
    let header = |r: &Response, name: &str| r.headers.get(name).cloned().unwrap_or_default();
    let reset = |r: &Response| header(r, "x-ratelimit-reset").parse::<u64>().unwrap();
    let first = get(&url, &[]);
    assert_eq!(first.status, 200);
    assert_eq!(header(&first, "x-ratelimit-limit"), "2");
    assert_eq!(header(&first, "x-ratelimit-remaining"), "1");
    // The fill interval minus the whole seconds since the last fill (hoist's start here).
    assert!((1..=3600).contains(&reset(&first)), "{:?}", first.headers);
    let second = get(&url, &[]);
    assert_eq!(header(&second, "x-ratelimit-remaining"), "0");
    let refused = get(&url, &[]);
    assert_eq!(refused.status, 429);
    assert_eq!(header(&refused, "x-ratelimit-limit"), "2");
    assert_eq!(header(&refused, "x-ratelimit-remaining"), "0");
    assert!(reset(&refused) <= reset(&first));
}

#[test]
fn descriptors_from_the_virtual_hosts_rate_limits_have_their_own_buckets() {
    let dir = TempDir::new("rl-descriptors");
    let filter = enforced(
        "d",
        100,
        "descriptors:\n- entries: [{key: client, value: slow}]\n  token_bucket: {max_tokens: 1, fill_interval: 3600s}\n- entries: [{key: generic_key, value: everyone}, {key: client, value: medium}]\n  token_bucket: {max_tokens: 2, fill_interval: 7200s}",
    );
    let vh = "rate_limits:\n- actions: [{request_headers: {header_name: x-client, descriptor_key: client}}]\n- actions: [{generic_key: {descriptor_value: everyone}}, {request_headers: {header_name: x-client, descriptor_key: client}}]\n- stage: 1\n  actions: [{remote_address: {}}]";
    let cfg = dir.write("envoy.yaml", config(&filter, vh, "", ""));
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let url = format!("http://{}/", hoist.addr("plain"));
    assert_eq!(statuses(&url, &["x-client: slow"], 3), [200, 429, 429]);
    assert_eq!(statuses(&url, &["x-client: medium"], 3), [200, 200, 429]);
    assert_eq!(statuses(&url, &["x-client: fast"], 3), [200, 200, 200]);
    assert_eq!(statuses(&url, &[], 2), [200, 200]);
    // Allowed: 1 slow, 2 medium, 3 fast, 2 without the header; the refusals came from the
    // descriptors' buckets, not the default one (100 tokens).
    assert_eq!(hoist.stat("d.http_local_rate_limit.ok"), 8);
    assert_eq!(hoist.stat("d.http_local_rate_limit.enforced"), 3);
}

#[test]
fn a_per_route_config_is_a_separate_limiter_with_its_own_stats() {
    let dir = TempDir::new("rl-route");
    // The filter itself does nothing (no filter_enabled): only the route's limiter acts.
    let filter = "stat_prefix: top";
    let route = format!(
        "- match: {{prefix: /limited}}\n  direct_response: {{status: 200, body: {{inline_string: \"limited\\n\"}}}}\n  typed_per_filter_config:\n    envoy.filters.http.local_ratelimit:\n      \"@type\": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit\n{}",
        indent(&enforced("route_rl", 2, "status: {code: ServiceUnavailable}"), 6)
    );
    let cfg = dir.write("envoy.yaml", config(filter, "", &route, ""));
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let base = format!("http://{}", hoist.addr("plain"));
    assert_eq!(
        statuses(&format!("{base}/limited"), &[], 3),
        [200, 200, 503]
    );
    assert_eq!(statuses(&format!("{base}/other"), &[], 3), [200, 200, 200]);
    assert_eq!(hoist.stat("route_rl.http_local_rate_limit.enabled"), 3);
    assert_eq!(hoist.stat("route_rl.http_local_rate_limit.enforced"), 1);
    assert_eq!(hoist.stat("top.http_local_rate_limit.enabled"), 0);
}

/// h2load's "status codes: N 2xx, N 3xx, N 4xx, N 5xx" line.
fn h2load_codes(args: &[&str], url: &str) -> (u64, u64) {
    let out = Command::new("h2load")
        .args(args)
        .arg(url)
        .output()
        .expect("h2load is installed");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.starts_with("status codes:"))
        .unwrap_or_else(|| panic!("no status codes in h2load output: {text}"));
    let count = |class: &str| -> u64 {
        line.split(',')
            .find(|p| p.trim_end().ends_with(class))
            .and_then(|p| p.split_whitespace().rev().nth(1))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {class} in {line:?}"))
    };
    (count("2xx"), count("4xx"))
}

#[test]
fn the_bucket_is_shared_exactly_by_two_workers_under_concurrent_clients() {
    let dir = TempDir::new("rl-workers");
    // Two limiters on separate routes, one driven over HTTP/1.1, one over HTTP/2.
    let filter = "stat_prefix: top";
    let route = |path: &str, prefix: &str, tokens: u32| {
        format!(
            "- match: {{prefix: {path}}}\n  direct_response: {{status: 200, body: {{inline_string: \"ok\\n\"}}}}\n  typed_per_filter_config:\n    envoy.filters.http.local_ratelimit:\n      \"@type\": type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit\n{}",
            indent(&enforced(prefix, tokens, ""), 6)
        )
    };
    let routes = format!("{}{}", route("/h1", "h1", 137), route("/h2", "h2", 61));
    let cfg = dir.write("envoy.yaml", config(filter, "", &routes, ""));
    let hoist = Hoist::start(&cfg, &["--concurrency", "2"]);
    let base = format!("http://{}", hoist.addr("plain"));

    let (ok, refused) = h2load_codes(
        &["--h1", "-n", "1200", "-c", "24", "-t", "2"],
        &format!("{base}/h1"),
    );
    assert_eq!((ok, refused), (137, 1063));
    let (ok, refused) = h2load_codes(
        &["-n", "1200", "-c", "12", "-m", "8", "-t", "2"],
        &format!("{base}/h2"),
    );
    assert_eq!((ok, refused), (61, 1139));

    assert_eq!(hoist.stat("h1.http_local_rate_limit.ok"), 137);
    assert_eq!(hoist.stat("h1.http_local_rate_limit.enforced"), 1063);
    assert_eq!(hoist.stat("h2.http_local_rate_limit.ok"), 61);
    assert_eq!(hoist.stat("h2.http_local_rate_limit.enforced"), 1139);
    hoist.wait_stat("http.ingress.downstream_rq_2xx", 137 + 61);
}

#[test]
fn configuration_errors_name_the_yaml_path() {
    let dir = TempDir::new("rl-invalid");
    let filter = "stat_prefix: x\ntoken_bucket: {max_tokens: 1, fill_interval: 0.010s}";
    let cfg = dir.write("envoy.yaml", config(filter, "", "", ""));
    let out = Command::new(BIN)
        .args(["--mode", "validate", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("http_filters[0].typed_config.token_bucket"),
        "{text}"
    );
    assert!(text.contains("at least 50ms"), "{text}");

    // A virtual host's rate limit action hoist does not generate is refused, with its path.
    let vh = "rate_limits:\n- actions: [{destination_cluster: {}}]";
    let cfg = dir.write("envoy2.yaml", config("stat_prefix: x", vh, "", ""));
    let out = Command::new(BIN)
        .args(["--mode", "validate", "-c"])
        .arg(&cfg)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("virtual_hosts[0].rate_limits[0].actions[0]"),
        "{text}"
    );
}

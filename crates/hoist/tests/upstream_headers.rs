//! Request and response headers the router adds or rewrites, seen by a real origin and by
//! curl: via, x-envoy-attempt-count, x-envoy-expected-rq-timeout-ms, regex_rewrite.
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use serde_json::Value;
use support::TempDir;
use upstream_support::client::{exchange, start_with};
use upstream_support::{cluster, route, Origin};

#[test]
fn via_attempt_count_expected_timeout_and_regex_rewrite() {
    let dir = TempDir::new("up-headers");
    let a = Origin::start("a");
    let routes = route("{prefix: /direct}", "{cluster: web}").replace(
        "route: {cluster: web}",
        "direct_response: {status: 200, body: {inline_string: ok}}",
    ) + &route(
        "{prefix: /svc/}",
        r#"{cluster: web, regex_rewrite: {pattern: {google_re2: {}, regex: "^/svc/([^/]+)/(.*)$"}, substitution: "/\\2/of/\\1"}}"#,
    ) + &route(
        "{prefix: /retry}",
        "{cluster: web, timeout: 5s, prefix_rewrite: /status, retry_policy: {retry_on: 5xx, num_retries: 2, per_try_timeout: 2s, retry_back_off: {base_interval: 0.001s}}}",
    ) + &route("{prefix: /}", "{cluster: web, timeout: 3s}");
    let h = start_with(
        &dir,
        &routes,
        &cluster("web", &[(a.port, 1)], ""),
        "          via: hoist-test\n",
        "              include_request_attempt_count: true\n              include_attempt_count_in_response: true\n",
    );

    let (status, headers, body) = exchange(&h, "/echo", &["-H", "via: 1.1 edge"]);
    assert_eq!(status, 200);
    let seen: Value = serde_json::from_str(&body).unwrap();
    let sent = &seen["headers"];
    assert_eq!(sent["via"], "1.1 edge, hoist-test");
    assert_eq!(sent["x-envoy-attempt-count"], "1");
    assert_eq!(sent["x-envoy-expected-rq-timeout-ms"], "3000");
    assert_eq!(headers["via"], "hoist-test");
    assert_eq!(headers["x-envoy-attempt-count"], "1");
    // Every response gets via, a direct response too (and no attempt count: nothing was
    // forwarded).
    let (status, headers, _) = exchange(&h, "/direct", &[]);
    assert_eq!((status, headers["via"].as_str()), (200, "hoist-test"));
    assert!(!headers.contains_key("x-envoy-attempt-count"));

    // Three tries (a 503 each): the count the client sees is the last try's.
    let (status, headers, _) = exchange(&h, "/retry?code=503", &[]);
    assert_eq!(status, 503);
    assert_eq!(headers["x-envoy-attempt-count"], "3");
    assert_eq!(h.stat("cluster.web.upstream_rq_retry"), 2);
    // The per-try timeout is the shorter: that is what the upstream is told.
    // (/retry/echo goes upstream as /status/echo, which the origin answers as /echo.)
    let (_, _, body) = exchange(&h, "/retry/echo", &[]);
    let seen: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(seen["headers"]["x-envoy-expected-rq-timeout-ms"], "2000");

    // regex_rewrite: groups substituted in the path, the query kept as it was.
    let (_, _, body) = exchange(&h, "/svc/users/v1/list?x=1", &[]);
    let seen: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(seen["path"], "/v1/list/of/users?x=1");
    assert_eq!(
        seen["headers"]["x-envoy-original-path"],
        "/svc/users/v1/list?x=1"
    );
}

#[test]
fn route_idle_timeout_replaces_the_stream_idle_timeout() {
    let dir = TempDir::new("up-idle");
    let a = Origin::start("a");
    let routes = route(
        "{prefix: /idle/}",
        "{cluster: web, timeout: 30s, idle_timeout: 0.2s, prefix_rewrite: /}",
    ) + &route(
        "{prefix: /off/}",
        "{cluster: web, timeout: 30s, idle_timeout: 0s, prefix_rewrite: /}",
    ) + &route("{prefix: /}", "{cluster: web, timeout: 30s}");
    // The connection manager's stream idle timeout would cut /off/ and / short.
    let h = start_with(
        &dir,
        &routes,
        &cluster("web", &[(a.port, 1)], ""),
        "          stream_idle_timeout: 0.2s\n",
        "",
    );
    // No response head within the idle time: Envoy's 408 "stream timeout", flag SI.
    let (status, _, body) = exchange(&h, "/idle/delay?ms=3000", &[]);
    assert_eq!((status, body.as_str()), (408, "stream timeout"));
    let line = upstream_support::client::log_line(&dir, "GET /idle/delay");
    assert!(line.contains(" 408 SI "), "{line}");
    assert_eq!(h.stat("http.ingress.downstream_rq_idle_timeout"), 1);
    // idle_timeout: 0s turns it off for the route: the slow answer comes through.
    let (status, _, body) = exchange(&h, "/off/delay?ms=600", &[]);
    assert_eq!((status, body.as_str()), (200, "late"));
    // Without a route idle_timeout the connection manager's applies.
    let (status, _, _) = exchange(&h, "/delay?ms=3000", &[]);
    assert_eq!(status, 408);
    // A prompt answer is untouched.
    assert_eq!(exchange(&h, "/idle/echo", &[]).0, 200);
}

#[test]
fn downstream_remote_address_follows_the_trusted_hops_of_x_forwarded_for() {
    let dir = TempDir::new("up-xff");
    let log = dir.path("xff.log");
    let listener = |name: &str, remote: bool| {
        format!(
            r#"  - name: {name}
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {name}
          use_remote_address: {remote}
          xff_num_trusted_hops: 1
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {log}
              log_format: {{text_format_source: {{inline_string: "{name} %REQ(:PATH)% %DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_DIRECT_REMOTE_ADDRESS%\n"}}}}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: /}}
                direct_response: {{status: 200, body: {{inline_string: ok}}}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
"#,
            log = log.display()
        )
    };
    let cfg = dir.write(
        "xff.yaml",
        format!(
            "static_resources:\n  listeners:\n{}{}",
            listener("edge", true),
            listener("inner", false)
        ),
    );
    let h = support::Hoist::start(&cfg, &["--concurrency", "1"]);
    let xff = "x-forwarded-for: 192.0.2.1, 192.0.2.2, 192.0.2.3";
    for name in ["edge", "inner"] {
        let url = format!("http://{}/{name}", h.addr(name));
        support::curl(&["-H", xff, &url]);
        support::curl(&[&format!("{url}-none")]);
    }
    let line = |needle: &str| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            if let Some(l) = text.lines().find(|l| l.contains(needle)) {
                return l.to_owned();
            }
            assert!(std::time::Instant::now() < deadline, "{needle}: {text}");
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    // use_remote_address with one trusted hop: the last address appended before hoist.
    assert!(line("edge /edge ").contains(" 192.0.2.3:0 127.0.0.1:"));
    // Without it, one trusted hop: the second from the right.
    assert!(line("inner /inner ").contains(" 192.0.2.2:0 127.0.0.1:"));
    // No x-forwarded-for: the peer.
    assert!(line("edge /edge-none ").starts_with("edge /edge-none 127.0.0.1:"));
    assert!(line("inner /inner-none ").starts_with("inner /inner-none 127.0.0.1:"));
}

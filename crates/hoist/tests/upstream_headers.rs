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
    // idle_timeout: 0s turns it off for the route: the slow answer comes through.
    let (status, _, body) = exchange(&h, "/off/delay?ms=600", &[]);
    assert_eq!((status, body.as_str()), (200, "late"));
    // Without a route idle_timeout the connection manager's applies.
    let (status, _, _) = exchange(&h, "/delay?ms=3000", &[]);
    assert_eq!(status, 408);
    // A prompt answer is untouched.
    assert_eq!(exchange(&h, "/idle/echo", &[]).0, 200);
}

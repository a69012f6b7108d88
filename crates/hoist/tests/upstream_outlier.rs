//! Outlier detection end to end: origins that fail are ejected from load balancing (requests
//! stop reaching them), come back after their ejection time, and max_ejection_percent holds.
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use support::TempDir;
use upstream_support::client::{get, origin_of, origins_seen, start, wait_for_stat};
use upstream_support::{cluster, route, Origin};

fn outlier(fields: &str) -> String {
    format!("    outlier_detection: {{{fields}}}\n")
}

#[test]
fn consecutive_5xx_ejects_a_host_until_its_ejection_time_is_over() {
    let dir = TempDir::new("up-outlier");
    let (a, b) = (Origin::start("a"), Origin::start("b"));
    let clusters = cluster(
        "web",
        &[(a.port, 1), (b.port, 1)],
        &outlier(
            "consecutive_5xx: 3, interval: 0.2s, base_ejection_time: 1s, max_ejection_percent: 50",
        ),
    );
    let h = start(&dir, &route("{prefix: /}", "{cluster: web}"), &clusters);
    assert_eq!(
        h.stat("cluster.web.outlier_detection.ejections_enforced_total"),
        0
    );
    // Round robin alternates: b answers every other request with a 500, a runs the echo.
    let fail = "/fail?origin=b&code=500";
    let mut failures = 0;
    while h.stat("cluster.web.outlier_detection.ejections_active") == 0 {
        let (status, _) = get(&h, fail, &[]);
        if status == 500 {
            failures += 1;
        }
        assert!(failures <= 3, "b answered a 4th 500 without being ejected");
    }
    assert_eq!(failures, 3);
    assert_eq!(
        h.stat("cluster.web.outlier_detection.ejections_enforced_consecutive_5xx"),
        1
    );
    assert_eq!(
        h.stat("cluster.web.outlier_detection.ejections_detected_consecutive_5xx"),
        1
    );
    assert_eq!(h.stat("cluster.web.membership_healthy"), 1);
    let (_, text) = h.admin_get("/clusters");
    assert!(
        text.contains("web::outlier::success_rate_average::-1\n"),
        "{text}"
    );
    let flags = format!(
        "web::127.0.0.1:{}::health_flags::/failed_outlier_check\n",
        b.port
    );
    assert!(text.contains(&flags), "{text}");
    // Ejected: a takes every request made while the ejection lasts (the gauge still 1
    // after the answer), until b's 1 s is over.
    for _ in 0..20 {
        let answered = origin_of(&h, fail, &[]);
        if h.stat("cluster.web.outlier_detection.ejections_active") != 1 {
            break;
        }
        assert_eq!(answered.as_deref(), Some("a"));
    }
    // Back after its ejection time: b takes traffic again.
    wait_for_stat(&h, "cluster.web.outlier_detection.ejections_active", 0);
    assert_eq!(h.stat("cluster.web.membership_healthy"), 2);
    let seen = origins_seen(&h, "/echo", 10, &[]);
    assert_eq!(
        (seen.get("a"), seen.get("b")),
        (Some(&5), Some(&5)),
        "{seen:?}"
    );
    let (_, text) = h.admin_get("/clusters");
    assert!(!text.contains("failed_outlier_check"), "{text}");
}

#[test]
fn max_ejection_percent_and_gateway_failures_from_connect_errors() {
    let dir = TempDir::new("up-outlier-max");
    let (a, b, c) = (Origin::start("a"), Origin::start("b"), Origin::start("c"));
    let refusing = support::RefusingPort::new();
    let closed = refusing.port;
    let clusters = cluster(
        "all",
        &[(a.port, 1), (b.port, 1), (c.port, 1)],
        &outlier("consecutive_5xx: 2, base_ejection_time: 60s, max_ejection_percent: 34"),
    ) + &cluster(
        "gw",
        &[(a.port, 1), (closed, 1)],
        &outlier(
            "consecutive_5xx: 100, consecutive_gateway_failure: 2, \
             enforcing_consecutive_gateway_failure: 100, base_ejection_time: 60s, \
             max_ejection_percent: 50",
        ),
    );
    let routes = route("{prefix: /gw/}", "{cluster: gw, prefix_rewrite: /}")
        + &route("{prefix: /}", "{cluster: all}");
    let h = start(&dir, &routes, &clusters);
    // Every host fails; 34 % of 3 hosts lets one go, not two.
    for _ in 0..12 {
        assert_eq!(get(&h, "/status?code=503", &[]).0, 503);
    }
    assert_eq!(h.stat("cluster.all.outlier_detection.ejections_active"), 1);
    assert!(h.stat("cluster.all.outlier_detection.ejections_overflow") >= 1);
    assert_eq!(h.stat("cluster.all.membership_healthy"), 2);
    let (_, text) = h.admin_get("/clusters");
    assert_eq!(
        text.matches("::health_flags::/failed_outlier_check")
            .count(),
        1
    );

    // Connection refused counts as a gateway failure (503, as Envoy maps it): after two the
    // closed port is ejected and every request reaches a.
    let mut refused = 0;
    while h.stat("cluster.gw.outlier_detection.ejections_active") == 0 {
        if get(&h, "/gw/echo", &[]).0 == 503 {
            refused += 1;
        }
        assert!(refused <= 2, "a third refused connection without ejection");
    }
    assert_eq!(
        h.stat("cluster.gw.outlier_detection.ejections_enforced_consecutive_gateway_failure"),
        1
    );
    assert_eq!(
        h.stat("cluster.gw.outlier_detection.ejections_detected_consecutive_5xx"),
        0
    );
    let seen = origins_seen(&h, "/gw/echo", 10, &[]);
    assert_eq!(seen.get("a"), Some(&10), "{seen:?}");
}

//! Priority levels (load_assignment.endpoints[].priority): priority 0 takes the traffic while
//! it is healthy enough, and spills to priority 1 as its hosts fail health checks.
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use support::TempDir;
use upstream_support::client::{origins_seen, start, wait_for_stat};
use upstream_support::{cluster_by_priority, route, Origin};

fn hc(path: &str) -> String {
    format!(
        "    health_checks:\n    - {{timeout: 1s, interval: 0.1s, unhealthy_threshold: 1, healthy_threshold: 1, http_health_check: {{path: \"{path}\"}}}}\n"
    )
}

#[test]
fn priority_one_takes_what_priority_zero_cannot() {
    let dir = TempDir::new("up-priority");
    let (a, b, c) = (Origin::start("a"), Origin::start("b"), Origin::start("c"));
    let levels = [(a.port, 0), (b.port, 0), (c.port, 1)];
    // a fails its checks in "spill" and "down"; everyone passes in "stay".
    let clusters = cluster_by_priority("stay", &levels, &hc("/echo"))
        + &cluster_by_priority("spill", &levels, &hc("/fail?origin=a&code=503"))
        + &cluster_by_priority(
            "down",
            &[(a.port, 0), (c.port, 1)],
            &hc("/fail?origin=a&code=503"),
        );
    let routes = ["stay", "spill", "down"]
        .iter()
        .map(|n| {
            route(
                &format!("{{prefix: /{n}/}}"),
                &format!("{{cluster: {n}, prefix_rewrite: /}}"),
            )
        })
        .collect::<String>();
    let h = start(&dir, &routes, &clusters);
    wait_for_stat(&h, "cluster.stay.membership_healthy", 3);
    wait_for_stat(&h, "cluster.spill.membership_healthy", 2);
    wait_for_stat(&h, "cluster.down.membership_healthy", 1);

    // Healthy priority 0: priority 1 gets nothing.
    let seen = origins_seen(&h, "/stay/echo", 30, &[]);
    assert_eq!(seen.get("c"), None, "{seen:?}");
    assert_eq!(
        seen.get("a").unwrap() + seen.get("b").unwrap(),
        30,
        "{seen:?}"
    );

    // Half of priority 0 healthy: 1/2 x 1.4 = 70 % stays on b, 30 % spills to c, none to a.
    let seen = origins_seen(&h, "/spill/echo", 60, &[]);
    assert_eq!(seen.get("a"), None, "{seen:?}");
    assert!(seen.get("b").is_some_and(|n| *n > 20), "{seen:?}");
    assert!(seen.get("c").is_some_and(|n| *n > 0), "{seen:?}");

    // Nothing healthy at priority 0: all of it to priority 1.
    let seen = origins_seen(&h, "/down/echo", 10, &[]);
    assert_eq!(seen.get("c"), Some(&10), "{seen:?}");
    let (_, text) = h.admin_get("/clusters");
    assert!(
        text.contains(&format!("down::127.0.0.1:{}::priority::1\n", c.port)),
        "{text}"
    );
}

//! request_mirror_policies end to end: a shadow copy reaches the mirror cluster with a
//! `-shadow` host, its answer is dropped, and the real request is answered as before.
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use serde_json::Value;
use support::{curl, TempDir};
use upstream_support::client::{origin_of, start, wait_for_stat};
use upstream_support::{cluster, route, Origin};

fn seen_by(origin: &Origin) -> Vec<Value> {
    let out = curl(&[&format!("http://127.0.0.1:{}/seen", origin.port)]);
    serde_json::from_slice::<Value>(&out.stdout)
        .unwrap()
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn shadow_requests_reach_the_mirror_cluster_and_are_dropped() {
    let dir = TempDir::new("up-mirror");
    let (main, mirror) = (Origin::start("main"), Origin::start("mirror"));
    let refusing = support::RefusingPort::new();
    let closed = refusing.port;
    let clusters = cluster("main", &[(main.port, 1)], "")
        + &cluster("mirror", &[(mirror.port, 1)], "")
        + &cluster("never", &[(mirror.port, 1)], "")
        + &cluster("dead", &[(closed, 1)], "");
    let routes = route(
        "{prefix: /dead/}",
        "{cluster: main, request_mirror_policies: [{cluster: dead}]}",
    ) + &route(
        "{prefix: /}",
        "{cluster: main, request_mirror_policies: [{cluster: mirror}, \
         {cluster: never, runtime_fraction: {default_value: {numerator: 0}}}]}",
    );
    let h = start(&dir, &routes, &clusters);
    for k in 0..5 {
        assert_eq!(
            origin_of(&h, &format!("/echo?k={k}"), &[]).as_deref(),
            Some("main")
        );
    }
    wait_for_stat(&h, "cluster.mirror.upstream_rq_2xx", 5);
    assert_eq!(h.stat("cluster.main.upstream_rq_2xx"), 5);
    assert_eq!(h.stat("cluster.never.upstream_rq_total"), 0);
    let port = h.addr("plain").port();
    let shadows = seen_by(&mirror);
    assert_eq!(shadows.len(), 5, "{shadows:?}");
    // Shadows run beside the real requests: their order is not the clients'.
    let mut paths: Vec<&str> = shadows
        .iter()
        .map(|s| s["path"].as_str().unwrap())
        .collect();
    paths.sort_unstable();
    let want: Vec<String> = (0..5).map(|k| format!("/echo?k={k}")).collect();
    assert_eq!(paths, want);
    for s in &shadows {
        assert_eq!(s["host"], format!("127.0.0.1-shadow:{port}").as_str());
    }
    // The real request never carries the suffix.
    assert!(seen_by(&main)
        .iter()
        .all(|s| s["host"] == format!("127.0.0.1:{port}").as_str()));
    // A mirror that cannot be reached changes nothing for the client.
    assert_eq!(origin_of(&h, "/dead/echo", &[]).as_deref(), Some("main"));
    wait_for_stat(&h, "cluster.dead.upstream_cx_connect_fail", 1);
}

//! Consistent hashing end to end: RING_HASH and MAGLEV clusters behind routes with
//! hash_policy (header, cookie, query parameter, source IP), three origins.
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use std::collections::{HashMap, HashSet};

use support::TempDir;
use upstream_support::client::{origin_of, origins_seen, start, start_with};
use upstream_support::{cluster, route, Origin};

#[test]
fn ring_hash_and_maglev_keep_a_key_on_one_host_and_spread_keys() {
    let dir = TempDir::new("up-hash");
    let origins = [Origin::start("a"), Origin::start("b"), Origin::start("c")];
    let endpoints: Vec<(u16, u32)> = origins.iter().map(|o| (o.port, 1)).collect();
    let clusters = cluster(
        "ring",
        &endpoints,
        "    lb_policy: RING_HASH\n    ring_hash_lb_config: {minimum_ring_size: 1024, hash_function: XX_HASH}\n",
    ) + &cluster("maglev", &endpoints, "    lb_policy: MAGLEV\n");
    let by_header = "hash_policy: [{header: {header_name: x-user}}]";
    let routes = route(
        "{prefix: /ring/cookie}",
        "{cluster: ring, hash_policy: [{cookie: {name: session}}]}",
    ) + &route(
        "{prefix: /ring/query}",
        "{cluster: ring, hash_policy: [{query_parameter: {name: id}}]}",
    ) + &route(
        "{prefix: /ring/ip}",
        "{cluster: ring, hash_policy: [{connection_properties: {source_ip: true}}]}",
    ) + &route(
        "{prefix: /ring}",
        &format!("{{cluster: ring, {by_header}}}"),
    ) + &route(
        "{prefix: /maglev}",
        &format!("{{cluster: maglev, {by_header}}}"),
    );
    let h = start(&dir, &routes, &clusters);

    for prefix in ["/ring", "/maglev"] {
        // One key, one host, request after request.
        for user in ["alice", "bob"] {
            let header = format!("x-user: {user}");
            let seen = origins_seen(&h, prefix, 10, &["-H", &header]);
            assert_eq!(seen.len(), 1, "{prefix} {user}: {seen:?}");
            assert!(!seen.contains_key("-"), "{seen:?}");
        }
        // Many keys spread over the three equal hosts (each gets about 20 of 60; fewer than
        // 3 has a probability below 1e-7 even for a fair split).
        let mut per_host: HashMap<String, usize> = HashMap::new();
        let mut placement: HashMap<String, String> = HashMap::new();
        for k in 0..60 {
            let header = format!("x-user: user-{k}");
            let o = origin_of(&h, prefix, &["-H", &header]).unwrap();
            *per_host.entry(o.clone()).or_default() += 1;
            placement.insert(header, o);
        }
        assert_eq!(per_host.len(), 3, "{prefix}: {per_host:?}");
        assert!(per_host.values().all(|&n| n >= 3), "{prefix}: {per_host:?}");
        // And they stay where they were placed.
        for (header, o) in placement.iter().take(15) {
            assert_eq!(origin_of(&h, prefix, &["-H", header]).as_ref(), Some(o));
        }
        // Without the header there is no hash: a random host, as Envoy.
        let seen = origins_seen(&h, prefix, 30, &[]);
        assert!(seen.len() >= 2, "{prefix}: {seen:?}");
    }

    // The other sources: an existing cookie, a query parameter, the client's address.
    let hosts = |path: &str, extra: &[&str]| -> HashSet<String> {
        origins_seen(&h, path, 8, extra).into_keys().collect()
    };
    assert_eq!(hosts("/ring/cookie", &["-b", "session=abc"]).len(), 1);
    assert_eq!(hosts("/ring/query?id=42", &[]).len(), 1);
    assert_eq!(hosts("/ring/ip", &[]).len(), 1);
    let cookies: HashSet<String> = (0..30)
        .map(|k| origin_of(&h, "/ring/cookie", &["-b", &format!("session=s{k}")]).unwrap())
        .collect();
    assert!(cookies.len() >= 2, "{cookies:?}");
    assert_eq!(h.stat("cluster.ring.upstream_rq_5xx"), 0);
}

#[test]
fn source_ip_hash_believes_x_forwarded_for_only_as_far_as_the_trusted_hops() {
    let dir = TempDir::new("up-hash-xff");
    let origins = [Origin::start("a"), Origin::start("b"), Origin::start("c")];
    let endpoints: Vec<(u16, u32)> = origins.iter().map(|o| (o.port, 1)).collect();
    let clusters = cluster("ring", &endpoints, "    lb_policy: RING_HASH\n");
    let routes = route(
        "{prefix: /}",
        "{cluster: ring, hash_policy: [{connection_properties: {source_ip: true}}]}",
    );
    // use_remote_address with one trusted hop: the client is the last address the proxy in
    // front of hoist appended.
    let h = start_with(
        &dir,
        &routes,
        &clusters,
        "          xff_num_trusted_hops: 1\n",
        "",
    );
    let via = |client: &str| format!("x-forwarded-for: 203.0.113.7, {client}");
    let clients: HashSet<String> = (0..30)
        .map(|k| origin_of(&h, "/echo", &["-H", &via(&format!("10.0.0.{k}"))]).unwrap())
        .collect();
    assert!(clients.len() >= 2, "{clients:?}");
    for k in [1, 2] {
        let seen = origins_seen(&h, "/echo", 6, &["-H", &via(&format!("10.0.0.{k}"))]);
        assert_eq!(seen.len(), 1, "{seen:?}");
    }
    // The first address is not trusted: changing it changes nothing.
    let first = |spoof: &str| {
        let header = format!("x-forwarded-for: {spoof}, 10.0.0.5");
        origin_of(&h, "/echo", &["-H", &header]).unwrap()
    };
    let placed: HashSet<String> = (0..10).map(|k| first(&format!("198.51.100.{k}"))).collect();
    assert_eq!(placed.len(), 1, "{placed:?}");
}

#[test]
fn a_host_that_fails_its_health_checks_takes_only_its_own_keys_away() {
    let dir = TempDir::new("up-hash-hc");
    let (a, c) = (Origin::start("a"), Origin::start("c"));
    let b = Origin::start("b");
    let endpoints = [(a.port, 1), (b.port, 1), (c.port, 1)];
    let clusters = cluster(
        "ring",
        &endpoints,
        "    lb_policy: RING_HASH\n    health_checks:\n    - {timeout: 1s, interval: 0.1s, unhealthy_threshold: 1, healthy_threshold: 1, tcp_health_check: {}}\n",
    );
    let routes = route(
        "{prefix: /}",
        "{cluster: ring, hash_policy: [{header: {header_name: x-user}}]}",
    );
    let h = start(&dir, &routes, &clusters);
    upstream_support::client::wait_for_stat(&h, "cluster.ring.membership_healthy", 3);
    let place = |k: usize| origin_of(&h, "/echo", &["-H", &format!("x-user: u{k}")]).unwrap();
    let before: Vec<String> = (0..45).map(place).collect();
    assert!(before.iter().any(|o| o == "b"), "{before:?}");
    drop(b);
    upstream_support::client::wait_for_stat(&h, "cluster.ring.membership_healthy", 2);
    for (k, was) in before.iter().enumerate() {
        let now = place(k);
        if was == "b" {
            assert_ne!(now, "b");
        } else {
            assert_eq!(&now, was, "key u{k} moved off a host that stayed");
        }
    }
}

//! Tests of `static_resources.clusters[]` decoding (cluster.rs and upstream_tls.rs).

use super::*;
use crate::model::TlsVersion;
use serde_json::json;

fn decode(v: serde_json::Value) -> std::result::Result<Vec<Cluster>, String> {
    let root = json!({ "clusters": v });
    let node = Node::new(&root["clusters"], "static_resources.clusters");
    clusters(&node.list().map_err(|e| e.to_string())?).map_err(|e| e.to_string())
}

fn endpoint(host: &str, port: u16) -> serde_json::Value {
    json!({"endpoints": [{"lb_endpoints": [{"endpoint": {"address": {
        "socket_address": {"address": host, "port_value": port}}}}]}]})
}

#[test]
fn per_connection_buffer_limit_bytes_is_read() {
    let c = decode(
        json!([{"name": "c", "per_connection_buffer_limit_bytes": 65536,
        "load_assignment": endpoint("127.0.0.1", 80)}]),
    )
    .unwrap();
    assert_eq!(c[0].per_connection_buffer_limit_bytes, 65536);
    let e = decode(
        json!([{"name": "c", "per_connection_buffer_limit_bytes": -1,
        "load_assignment": endpoint("127.0.0.1", 80)}]),
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("per_connection_buffer_limit_bytes"),
        "{e}"
    );
}

#[test]
fn a_static_cluster_with_defaults() {
    let c =
        decode(json!([{"name": "jwks", "load_assignment": endpoint("127.0.0.1", 8443)}])).unwrap();
    assert_eq!(c[0].name, "jwks");
    assert_eq!(c[0].discovery, DiscoveryType::Static);
    assert_eq!(c[0].connect_timeout, DEFAULT_CONNECT_TIMEOUT);
    assert_eq!(c[0].per_connection_buffer_limit_bytes, 1024 * 1024);
    assert_eq!(
        c[0].endpoints,
        vec![Endpoint {
            host: "127.0.0.1".into(),
            port: 8443,
            weight: 1,
            priority: 0,
        }]
    );
    assert!(c[0].tls.is_none());
    assert_eq!(c[0].lb_policy, LbPolicy::RoundRobin);
    assert_eq!(c[0].idle_timeout, Some(DEFAULT_UPSTREAM_IDLE_TIMEOUT));
    assert_eq!(c[0].max_requests_per_connection, None);
    let c = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "common_http_protocol_options": {"idle_timeout": "0s", "max_requests_per_connection": 3}}]),
    )
    .unwrap();
    assert_eq!(c[0].idle_timeout, None);
    assert_eq!(c[0].max_requests_per_connection, Some(3));
    let c = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "circuit_breakers": {"thresholds": [{"max_requests": 2, "max_connections": 1},
            {"priority": "HIGH", "max_requests": 9}]}}]),
    )
    .unwrap();
    assert_eq!(c[0].circuit_breakers.max_requests, 2);
    assert_eq!(c[0].circuit_breakers.max_connections, 1);
    assert_eq!(c[0].circuit_breakers.max_pending_requests, 1024);
    assert_eq!(c[0].circuit_breakers.retry_budget, None);
    let c = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "circuit_breakers": {"thresholds": [{"retry_budget": {}},
            {"priority": "HIGH", "retry_budget": {"budget_percent": {"value": 12.5},
                "min_retry_concurrency": 1}}]}}]),
    )
    .unwrap();
    assert_eq!(
        c[0].circuit_breakers.retry_budget,
        Some(RetryBudget::default())
    );
    let err = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "circuit_breakers": {"thresholds": [{"retry_budget": {"budget_percent": {"value": 101}}}]}}]),
    )
    .unwrap_err();
    assert!(
        err.contains("retry_budget.budget_percent: 101 is not a percentage"),
        "{err}"
    );
    let c = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "health_checks": [{"timeout": "1s", "interval": "5s", "unhealthy_threshold": 3,
            "healthy_threshold": 2, "http_health_check": {"path": "/healthz",
            "expected_statuses": [{"start": 200, "end": 300}]}}]}]),
    )
    .unwrap();
    let hc = c[0].health_check.as_ref().unwrap();
    assert_eq!((hc.unhealthy_threshold, hc.healthy_threshold), (3, 2));
    assert_eq!(
        hc.http.as_ref().unwrap().expected_statuses,
        vec![(200, 300)]
    );
    let err = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "health_checks": [{"timeout": "1s", "interval": "5s", "unhealthy_threshold": 3,
            "healthy_threshold": 2, "grpc_health_check": {}}]}]),
    )
    .unwrap_err();
    assert!(
        err.contains("health_checks[0]: field \"grpc_health_check\""),
        "{err}"
    );
    let err = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "common_http_protocol_options": {"max_stream_duration": "1s"}}]),
    )
    .unwrap_err();
    assert!(
        err.contains("common_http_protocol_options: field \"max_stream_duration\""),
        "{err}"
    );
}

#[test]
fn lb_policies_and_endpoint_weights() {
    let mut assignment = endpoint("127.0.0.1", 1);
    assignment["endpoints"][0]["lb_endpoints"][0]["load_balancing_weight"] = json!(3);
    let c = decode(json!([{"name": "a", "lb_policy": "LEAST_REQUEST",
        "load_assignment": assignment}]))
    .unwrap();
    assert_eq!(c[0].lb_policy, LbPolicy::LeastRequest);
    assert_eq!(c[0].endpoints[0].weight, 3);
    let c = decode(json!([{"name": "a", "lb_policy": "RANDOM",
        "load_assignment": endpoint("127.0.0.1", 1)}]))
    .unwrap();
    assert_eq!(c[0].lb_policy, LbPolicy::Random);
    let c = decode(json!([{"name": "a", "lb_policy": "MAGLEV",
        "load_assignment": endpoint("127.0.0.1", 1)}]))
    .unwrap();
    assert_eq!(c[0].lb_policy, LbPolicy::Maglev { table_size: 65537 });
    let c = decode(json!([{"name": "a", "lb_policy": "MAGLEV",
        "maglev_lb_config": {"table_size": 251},
        "load_assignment": endpoint("127.0.0.1", 1)}]))
    .unwrap();
    assert_eq!(c[0].lb_policy, LbPolicy::Maglev { table_size: 251 });
    let err = decode(json!([{"name": "a", "lb_policy": "MAGLEV",
        "maglev_lb_config": {"table_size": 1000},
        "load_assignment": endpoint("127.0.0.1", 1)}]))
    .unwrap_err();
    assert!(
        err.contains("maglev_lb_config.table_size: table_size 1000 must be a prime"),
        "{err}"
    );
    let c = decode(json!([{"name": "a", "lb_policy": "RING_HASH",
        "ring_hash_lb_config": {"minimum_ring_size": 64, "hash_function": "XX_HASH"},
        "load_assignment": endpoint("127.0.0.1", 1)}]))
    .unwrap();
    assert_eq!(
        c[0].lb_policy,
        LbPolicy::RingHash {
            min_ring_size: 64,
            max_ring_size: MAX_RING_SIZE
        }
    );
    let err = decode(json!([{"name": "a", "lb_policy": "RING_HASH",
        "ring_hash_lb_config": {"hash_function": "MURMUR_HASH_2"},
        "load_assignment": endpoint("127.0.0.1", 1)}]))
    .unwrap_err();
    assert!(err.contains("MURMUR_HASH_2"), "{err}");
    let err = decode(json!([{"name": "a", "lb_policy": "CLUSTER_PROVIDED",
        "load_assignment": endpoint("127.0.0.1", 1)}]))
    .unwrap_err();
    assert!(
        err.contains("lb_policy CLUSTER_PROVIDED is not supported"),
        "{err}"
    );
    let mut zero = endpoint("127.0.0.1", 1);
    zero["endpoints"][0]["lb_endpoints"][0]["load_balancing_weight"] = json!(0);
    assert!(decode(json!([{"name": "a", "load_assignment": zero}])).is_err());
}

#[test]
fn outlier_detection_defaults_and_refusals() {
    let c = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "outlier_detection": {}}]),
    )
    .unwrap();
    assert_eq!(c[0].outlier_detection, Some(OutlierDetection::default()));
    assert!(
        decode(json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1)}])).unwrap()[0]
            .outlier_detection
            .is_none()
    );
    let c = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
        "outlier_detection": {"consecutive_5xx": 3, "consecutive_gateway_failure": 2,
            "enforcing_consecutive_gateway_failure": 100, "interval": "0.5s",
            "base_ejection_time": "20s", "max_ejection_time": "10s",
            "max_ejection_percent": 50, "split_external_local_origin_errors": false}}]),
    )
    .unwrap();
    let o = c[0].outlier_detection.unwrap();
    assert_eq!((o.consecutive_5xx, o.consecutive_gateway_failure), (3, 2));
    assert_eq!(o.enforcing_consecutive_gateway_failure, 100);
    assert_eq!(o.interval, std::time::Duration::from_millis(500));
    // The cap is raised to the base time, as Envoy does.
    assert_eq!(o.max_ejection_time, std::time::Duration::from_secs(20));
    assert_eq!(o.max_ejection_percent, 50);
    for (field, value) in [
        ("failure_percentage_threshold", json!(80)),
        ("max_ejection_percent", json!(101)),
        ("interval", json!("0s")),
        ("split_external_local_origin_errors", json!(true)),
    ] {
        let err = decode(
            json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1),
            "outlier_detection": {field: value}}]),
        )
        .unwrap_err();
        assert!(err.contains("clusters[0].outlier_detection"), "{err}");
    }
}

#[test]
fn priorities_and_overprovisioning() {
    let one = |port: u16, priority: u32| {
        json!({"priority": priority, "lb_endpoints": [{"endpoint": {"address": {
            "socket_address": {"address": "127.0.0.1", "port_value": port}}}}]})
    };
    let c = decode(json!([{"name": "a", "load_assignment": {
        "endpoints": [one(1, 0), one(2, 1)], "policy": {"overprovisioning_factor": 200}}}]))
    .unwrap();
    assert_eq!(
        c[0].endpoints
            .iter()
            .map(|e| e.priority)
            .collect::<Vec<_>>(),
        [0, 1]
    );
    assert_eq!(c[0].overprovisioning_factor, 200);
    let err = decode(json!([{"name": "a", "load_assignment": {
        "endpoints": [one(1, 0), one(2, 2)]}}]))
    .unwrap_err();
    assert!(err.contains("skip priority 1"), "{err}");
    let c = decode(json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 1)}])).unwrap();
    assert_eq!(
        c[0].overprovisioning_factor,
        DEFAULT_OVERPROVISIONING_FACTOR
    );
}

#[test]
fn host_names_need_a_dns_type() {
    let err = decode(json!([{"name": "a", "load_assignment": endpoint("idp.example.com", 443)}]))
        .unwrap_err();
    assert!(err.contains("a STATIC cluster needs IP addresses"), "{err}");
    let c = decode(
        json!([{"name": "a", "type": "STRICT_DNS", "dns_lookup_family": "V4_ONLY",
        "load_assignment": endpoint("idp.example.com", 443)}]),
    )
    .unwrap();
    assert_eq!(c[0].discovery, DiscoveryType::StrictDns);
    assert_eq!(c[0].dns_lookup_family, DnsLookupFamily::V4Only);
}

#[test]
fn upstream_tls_sni_and_unsupported_fields() {
    let c = decode(json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 443),
        "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "sni": "idp.example.com"}}}]))
    .unwrap();
    let tls = c[0].tls.as_ref().unwrap();
    assert_eq!(tls.sni.as_deref(), Some("idp.example.com"));
    assert!(tls.trusted_ca.is_none());
    let err = decode(
        json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 443),
        "http2_protocol_options": {}}]),
    )
    .unwrap_err();
    assert_eq!(
        err,
        "static_resources.clusters[0]: field \"http2_protocol_options\" is not supported by hoist yet"
    );
}

#[test]
fn upstream_tls_versions_and_alpn() {
    let with = |common: serde_json::Value| {
        decode(
            json!([{"name": "a", "load_assignment": endpoint("127.0.0.1", 443),
            "transport_socket": {"name": "envoy.transport_sockets.tls", "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "common_tls_context": common}}}]),
        )
    };
    let tls = |c: Vec<Cluster>| c[0].tls.clone().unwrap();
    // Envoy's client default: TLS 1.2 only.
    let t = tls(with(json!({})).unwrap());
    assert_eq!(
        (t.min_version, t.max_version),
        (TlsVersion::Tls1_2, TlsVersion::Tls1_2)
    );
    assert!(t.alpn_protocols.is_empty());
    let t = tls(with(
        json!({"tls_params": {"tls_maximum_protocol_version": "TLSv1_3"},
        "alpn_protocols": ["h2", "http/1.1"]}),
    )
    .unwrap());
    assert_eq!(
        (t.min_version, t.max_version),
        (TlsVersion::Tls1_2, TlsVersion::Tls1_3)
    );
    assert_eq!(t.alpn_protocols, ["h2", "http/1.1"]);
    let t = tls(with(json!({"tls_params": {"tls_minimum_protocol_version": "TLSv1_3"}})).unwrap());
    assert_eq!(
        (t.min_version, t.max_version),
        (TlsVersion::Tls1_3, TlsVersion::Tls1_3)
    );
    let err = with(json!({"tls_params": {"cipher_suites": ["ECDHE-RSA-AES128-GCM-SHA256"]}}))
        .unwrap_err();
    assert!(
        err.contains("cipher_suites and ecdh_curves are not supported"),
        "{err}"
    );
    let err = with(json!({"alpn_protocols": [""]})).unwrap_err();
    assert!(err.contains("1 to 255 bytes"), "{err}");
}

#[test]
fn duplicate_names_and_eds_are_refused() {
    let one = json!({"name": "a", "load_assignment": endpoint("127.0.0.1", 1)});
    let err = decode(json!([one.clone(), one])).unwrap_err();
    assert!(
        err.contains("already used by static_resources.clusters[0]"),
        "{err}"
    );
    let err =
        decode(json!([{"name": "a", "type": "EDS", "load_assignment": endpoint("127.0.0.1", 1)}]))
            .unwrap_err();
    assert!(err.contains("cluster type EDS is not supported"), "{err}");
}

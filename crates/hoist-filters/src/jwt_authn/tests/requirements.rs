//! Requirements (provider_name, provider_and_audiences, requires_any, requires_all,
//! allow_missing, allow_missing_or_failed), rules, the requirement map and per-route configs.

use serde_json::{json, Value};

use super::keys::{self, sign};
use super::*;

/// Providers "a" (issuer A, header x-a) and "b" (issuer B, header x-b), both with all keys;
/// one rule on "/" with `requires`.
fn two_providers(requires: Value) -> Value {
    let jwks = json!({"inline_string": keys::jwks().to_string()});
    json!({
        "providers": {
            "a": {"issuer": "A", "local_jwks": jwks, "audiences": ["aud-a"],
                  "from_headers": [{"name": "x-a"}]},
            "b": {"issuer": "B", "local_jwks": jwks, "from_headers": [{"name": "x-b"}]}
        },
        "rules": [{"match": {"prefix": "/"}, "requires": requires}]
    })
}

fn token(iss: &str, aud: &str) -> String {
    sign(
        "ES384",
        "p384",
        &json!({"iss": iss, "aud": aud, "exp": now() + 600}),
    )
}

fn with(headers: &[(&str, &str)]) -> RequestHead {
    request("/r", headers)
}

#[test]
fn provider_and_audiences_replaces_the_providers_audiences() {
    let h = Harness::new(two_providers(
        json!({"provider_and_audiences": {"provider_name": "a", "audiences": ["other"]}}),
    ));
    assert_eq!(h.run(with(&[("x-a", &token("A", "aud-a"))])).code(), 403);
    assert!(h.run(with(&[("x-a", &token("A", "other"))])).passed());
}

#[test]
fn requires_any_takes_the_first_success_and_reports_the_telling_error() {
    let h = Harness::new(two_providers(
        json!({"requires_any": {"requirements": [{"provider_name": "a"}, {"provider_name": "b"}]}}),
    ));
    assert!(h.run(with(&[("x-b", &token("B", ""))])).passed());
    assert!(h.run(with(&[("x-a", &token("A", "aud-a"))])).passed());
    assert_eq!(h.run(with(&[])).body(), "Jwt is missing");
    // b's token in a's header: a says unknown issuer, b says missing; the issuer wins.
    assert_eq!(
        h.run(with(&[("x-a", &token("B", ""))])).body(),
        "Jwt issuer is not configured"
    );
    // A real error beats both.
    let mut expired = json!({"iss": "A", "aud": "aud-a", "exp": now() - 100});
    let bad = sign("ES384", "p384", &expired);
    assert_eq!(h.run(with(&[("x-a", &bad)])).body(), "Jwt is expired");
    expired["iss"] = json!("B");
    assert_eq!(
        h.run(with(&[
            ("x-a", &token("B", "")),
            ("x-b", &sign("ES384", "p384", &expired))
        ]))
        .body(),
        "Jwt is expired"
    );
}

#[test]
fn requires_all_needs_every_provider() {
    let h = Harness::new(two_providers(
        json!({"requires_all": {"requirements": [{"provider_name": "a"}, {"provider_name": "b"}]}}),
    ));
    assert!(h
        .run(with(&[
            ("x-a", &token("A", "aud-a")),
            ("x-b", &token("B", ""))
        ]))
        .passed());
    assert_eq!(
        h.run(with(&[("x-a", &token("A", "aud-a"))])).body(),
        "Jwt is missing"
    );
}

#[test]
fn allow_missing_and_allow_missing_or_failed() {
    let h = Harness::new(two_providers(json!({"allow_missing": {}})));
    assert!(h.run(with(&[])).passed());
    assert!(h.run(with(&[("x-b", &token("B", ""))])).passed());
    assert_eq!(
        h.run(with(&[("x-b", "garbage")])).code(),
        401,
        "a bad token still fails"
    );
    assert_eq!(
        h.run(with(&[("x-a", &token("A", "wrong"))])).code(),
        403,
        "the provider found by issuer checks its audiences"
    );

    let h = Harness::new(two_providers(json!({"allow_missing_or_failed": {}})));
    assert!(h.run(with(&[])).passed());
    assert!(h.run(with(&[("x-b", "garbage")])).passed());
    let out = h.run(with(&[("x-b", &token("B", ""))]));
    assert!(out.passed());
    assert_eq!(
        out.header("x-b"),
        None,
        "a good token still has its effects"
    );

    let h = Harness::new(two_providers(json!({"requires_any": {"requirements": [
        {"provider_name": "a"}, {"allow_missing": {}}]}})));
    assert!(h.run(with(&[])).passed(), "a's token may be missing");
    assert_eq!(
        h.run(with(&[("x-a", "garbage")])).code(),
        401,
        "but not bad"
    );
}

#[test]
fn rules_first_match_wins_and_no_match_passes() {
    let jwks = json!({"inline_string": keys::jwks().to_string()});
    let h = Harness::new(json!({
        "providers": {"p": {"issuer": ISSUER, "local_jwks": jwks}},
        "rules": [
            {"match": {"prefix": "/public"}},
            {"match": {"prefix": "/", "headers": [{"name": "x-internal", "exact_match": "1"}]},
             "requires": {"allow_missing": {}}},
            {"match": {"prefix": "/api"}, "requirement_name": "strict"}
        ],
        "requirement_map": {"strict": {"provider_name": "p"}, "open": {}}
    }));
    assert!(h.run(request("/public/x", &[])).passed());
    assert!(h.run(request("/api/x", &[("x-internal", "1")])).passed());
    assert_eq!(h.run(request("/api/x", &[])).body(), "Jwt is missing");
    assert!(h.run(request("/other", &[])).passed(), "no rule matches");
    assert_eq!(h.stat("allowed"), 3);
    assert_eq!(h.stat("denied"), 1);

    // A route's PerRouteConfig replaces the rules.
    let open = h.route_config(json!({"requirement_name": "open"})).unwrap();
    assert!(h.run_with(request("/api/x", &[]), Some(open)).passed());
    let strict = h
        .route_config(json!({"requirement_name": "strict"}))
        .unwrap();
    assert_eq!(
        h.run_with(request("/public", &[]), Some(strict)).code(),
        401
    );
    let off = h.route_config(json!({"disabled": true})).unwrap();
    assert!(h.run_with(request("/api/x", &[]), Some(off)).passed());
    assert_eq!(
        h.route_config(json!({"requirement_name": "nope"}))
            .err()
            .unwrap(),
        "jwt.requirement_name: Wrong requirement_name: nope. It should be one of [open,strict]"
    );
    assert!(h.route_config(json!({"disabled": false})).is_err());
}

#[test]
fn cors_preflight_bypass() {
    let mut cfg = provider_config(json!({}));
    let mut preflight = request(
        "/data",
        &[
            ("origin", "https://app"),
            ("access-control-request-method", "GET"),
        ],
    );
    preflight.method = http::Method::OPTIONS;
    let h = Harness::new(cfg.clone());
    assert_eq!(h.run(preflight.clone()).code(), 401);
    cfg["bypass_cors_preflight"] = json!(true);
    let h = Harness::new(cfg);
    assert!(h.run(preflight.clone()).passed());
    assert_eq!(h.stat("cors_preflight_bypassed"), 1);
    preflight.headers.remove("origin");
    assert_eq!(
        h.run(preflight).code(),
        401,
        "not a preflight without origin"
    );
}

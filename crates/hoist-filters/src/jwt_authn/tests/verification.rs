//! One provider: algorithms, every rejection with Envoy's text, the reply's header and details,
//! the cache, and what a good token does to the request.

use serde_json::json;

use super::keys::{self, b64, kid_for, sign, sign_with, Signer};
use super::*;

const ALGS: [&str; 12] = [
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "EdDSA", "HS256",
    "HS384", "HS512",
];

#[test]
fn every_algorithm_verifies_with_and_without_kid() {
    let h = Harness::new(provider_config(json!({})));
    for alg in ALGS {
        let with_kid = h.run(bearer(&sign(alg, kid_for(alg), &claims())));
        assert!(with_kid.passed(), "{alg}: {}", with_kid.body());
        let without = h.run(bearer(&sign(alg, "", &claims())));
        assert!(without.passed(), "{alg} without kid: {}", without.body());
    }
    assert_eq!(h.stat("allowed"), 2 * ALGS.len() as u64);
    assert_eq!(h.stat("denied"), 0);
}

#[test]
fn a_good_token_is_removed_unless_forwarded() {
    let h = Harness::new(provider_config(json!({})));
    let out = h.run(bearer(&sign("RS256", "rsa", &claims())));
    assert!(out.passed());
    assert_eq!(out.header("authorization"), None);
    let h = Harness::new(provider_config(json!({"forward": true})));
    let token = sign("RS256", "rsa", &claims());
    let out = h.run(bearer(&token));
    assert_eq!(out.header("authorization"), Some(format!("Bearer {token}")));
}

fn rejection(h: &Harness, token: &str) -> (u16, String) {
    let out = h.run(bearer(token));
    (out.code(), out.body())
}

#[test]
fn rejections_carry_envoys_status_text() {
    let h = Harness::new(provider_config(
        json!({"audiences": ["https://api.example.com/"]}),
    ));
    let good = |mut c: serde_json::Value| {
        c["aud"] = json!("api.example.com");
        c
    };
    let mut expired = good(claims());
    expired["exp"] = json!(now() - 61);
    let mut early = good(claims());
    // Well past the 60 s skew: with `now() + 61` the token became valid when signing the
    // cases below took the check into the next second (seen once under a loaded CI run).
    early["nbf"] = json!(now() + 3600);
    let mut other_issuer = good(claims());
    other_issuer["iss"] = json!("https://other");
    let cases: Vec<(String, u16, &str)> = vec![
        (sign("RS256", "rsa", &expired), 401, "Jwt is expired"),
        (sign("RS256", "rsa", &early), 401, "Jwt not yet valid"),
        (
            sign("RS256", "rsa", &other_issuer),
            401,
            "Jwt issuer is not configured",
        ),
        (
            sign("RS256", "rsa", &claims()),
            403,
            "Audiences in Jwt are not allowed",
        ),
        (
            sign("RS256", "nope", &good(claims())),
            401,
            "Jwks doesn't have key to match kid or alg from Jwt",
        ),
        (
            sign_with(
                Signer::OtherRsa,
                &json!({"alg": "RS256", "kid": "rsa"}),
                &good(claims()),
            ),
            401,
            "Jwt verification fails",
        ),
        (
            format!(
                "{}.{}.",
                b64(r#"{"alg":"none"}"#),
                b64(good(claims()).to_string())
            ),
            401,
            "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections",
        ),
        (
            format!(
                "{}.{}.c2ln",
                b64(r#"{"alg":"none"}"#),
                b64(good(claims()).to_string())
            ),
            401,
            "Jwt header [alg] is not supported",
        ),
        (
            "e30.e30".into(),
            401,
            "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections",
        ),
        (
            "abcde.e30.c2ln".into(),
            401,
            "Jwt header is an invalid Base64url encoded",
        ),
        (
            "@@@.e30.c2ln".into(),
            401,
            "Jwt is not in the form of Header.Payload.Signature with two dots and 3 sections",
        ),
        (
            format!("{}.e30.c2ln", b64("{not json")),
            401,
            "Jwt header is an invalid JSON",
        ),
        (
            format!("{}.{}.c2ln", b64(r#"{"alg":"RS256"}"#), b64("[]")),
            401,
            "Jwt payload is an invalid JSON",
        ),
        (
            format!("{}.{}.c2ln", b64(r#"{"alg":"RS256","kid":7}"#), b64("{}")),
            401,
            "Jwt header [kid] field is not a string",
        ),
        (
            format!(
                "{}.{}.c2ln",
                b64(r#"{"alg":"RS256"}"#),
                b64(r#"{"exp":"soon"}"#)
            ),
            401,
            "Jwt payload [exp] field is not an integer",
        ),
        (
            format!(
                "{}.{}.c2ln",
                b64(r#"{"alg":"EdDSA","kid":"ed"}"#),
                b64(good(claims()).to_string())
            ),
            401,
            "Jwt ED25519 signature is wrong length",
        ),
        (
            format!(
                "{}.{}.{}",
                b64(r#"{"alg":"RS256"}"#),
                b64("x".repeat(70_000)),
                b64("s")
            ),
            401,
            "Jwt verification fails",
        ),
    ];
    for (token, code, text) in &cases {
        assert_eq!(
            rejection(&h, token),
            (*code, (*text).to_owned()),
            "{token:.60}"
        );
    }
    assert_eq!(h.stat("denied"), cases.len() as u64);
}

#[test]
fn a_tampered_payload_fails_for_every_algorithm() {
    let h = Harness::new(provider_config(json!({})));
    for alg in ALGS {
        let token = sign(alg, kid_for(alg), &claims());
        let parts: Vec<&str> = token.split('.').collect();
        let mut c = claims();
        c["sub"] = json!("admin");
        let forged = format!("{}.{}.{}", parts[0], b64(c.to_string()), parts[2]);
        assert_eq!(
            rejection(&h, &forged),
            (401, "Jwt verification fails".into()),
            "{alg}"
        );
    }
}

#[test]
fn a_token_for_another_key_type_is_not_verified() {
    // The JWKS has only an RSA key without kid or alg: an ES256 token finds a key (nothing
    // rules it out) but none of the right type.
    let cfg = provider_config(
        json!({"local_jwks": {"inline_string": keys::rsa_only_jwks(false).to_string()}}),
    );
    let h = Harness::new(cfg);
    assert_eq!(
        rejection(&h, &sign("ES256", "", &claims())),
        (401, "Jwt verification fails".into())
    );
    assert!(
        h.run(bearer(&sign("RS256", "any-kid", &claims()))).passed(),
        "a key without kid matches any kid"
    );
}

#[test]
fn reply_headers_and_details_follow_envoy() {
    let h = Harness::new(provider_config(json!({})));
    let out = h.run(request("/data?x=1", &[]));
    let r = out.reply.as_ref().unwrap();
    assert_eq!((r.status, out.body().as_str()), (401, "Jwt is missing"));
    assert_eq!(
        r.headers["www-authenticate"],
        "Bearer realm=\"http://api.example.com/data?x=1\""
    );
    assert_eq!(r.details, "jwt_authn_access_denied{Jwt_is_missing}");
    let out = h.run(bearer("a.b.c"));
    let r = out.reply.as_ref().unwrap();
    assert_eq!(
        r.headers["www-authenticate"],
        "Bearer realm=\"http://api.example.com/data\", error=\"invalid_token\""
    );
    assert_eq!(
        r.details,
        "jwt_authn_access_denied{Jwt_header_is_an_invalid_Base64url_encoded}"
    );

    let mut cfg = provider_config(json!({}));
    cfg["strip_failure_response"] = json!(true);
    let out = Harness::new(cfg).run(bearer("a.b.c"));
    let r = out.reply.as_ref().unwrap();
    assert_eq!((r.status, r.body.len()), (401, 0));
    assert!(r.headers.get("www-authenticate").is_none());
}

#[test]
fn clock_skew_applies_to_exp_and_nbf() {
    let h = Harness::new(provider_config(json!({})));
    let mut c = claims();
    c["exp"] = json!(now() - 30);
    assert!(
        h.run(bearer(&sign("HS256", "hmac", &c))).passed(),
        "within the default 60 s"
    );
    let h = Harness::new(provider_config(json!({"clock_skew_seconds": 10})));
    assert_eq!(
        rejection(&h, &sign("HS256", "hmac", &c)),
        (401, "Jwt is expired".into())
    );
}

#[test]
fn the_cache_skips_the_signature_but_not_the_time_checks() {
    let h = Harness::new(provider_config(
        json!({"jwt_cache_config": {"jwt_cache_size": 10}, "clock_skew_seconds": 10}),
    ));
    let mut c = claims();
    c["exp"] = json!(now() + 100);
    let token = sign("RS256", "rsa", &c);
    let requirement = &h.config.settings.requirements[0];
    let verify_at = |at: u64| {
        let mut head = bearer(&token);
        let mut run = crate::jwt_authn::verifier::Run {
            worker: &h.worker,
            head: &mut head,
            now: at,
            extracted: Map::new(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(run.eval(requirement))
    };
    use crate::jwt_authn::status::Status;
    assert_eq!(verify_at(now()), Status::Ok);
    assert_eq!((h.stat("jwt_cache_miss"), h.stat("jwt_cache_hit")), (1, 0));
    assert_eq!(verify_at(now()), Status::Ok);
    assert_eq!((h.stat("jwt_cache_miss"), h.stat("jwt_cache_hit")), (1, 1));
    // Still cached (the cache forgets 60 s past exp), but past exp with the provider's skew.
    assert_eq!(verify_at(now() + 100 + 11), Status::JwtExpired);
    assert_eq!(h.stat("jwt_cache_hit"), 2);
    // Another signature over the same claims is another token: a miss, and refused.
    let forged = sign_with(Signer::OtherRsa, &json!({"alg": "RS256", "kid": "rsa"}), &c);
    let out = h.run(bearer(&forged));
    assert_eq!(out.body(), "Jwt verification fails");
    assert_eq!(h.stat("jwt_cache_miss"), 2);
}

#[test]
fn without_cache_config_every_lookup_misses() {
    let h = Harness::new(provider_config(json!({})));
    let token = sign("ES256", "p256", &claims());
    assert!(h.run(bearer(&token)).passed());
    assert!(h.run(bearer(&token)).passed());
    assert_eq!((h.stat("jwt_cache_miss"), h.stat("jwt_cache_hit")), (2, 0));
}

#[test]
fn good_tokens_forward_payload_claims_and_metadata() {
    let h = Harness::new(provider_config(json!({
        "forward_payload_header": "X-Jwt-Payload",
        "pad_forward_payload_header": true,
        "payload_in_metadata": "my_payload",
        "header_in_metadata": "my_header",
        "claim_to_headers": [
            {"header_name": "x-sub", "claim_name": "sub"},
            {"header_name": "x-tenant", "claim_name": "org.tenant"},
            {"header_name": "x-absent", "claim_name": "nope"}
        ]
    })));
    let mut c = claims();
    c["org"] = json!({"tenant": "t1"});
    let token = sign("EdDSA", "ed", &c);
    // A client cannot pose as a verified token: its own copies of these headers go.
    let mut head = bearer(&token);
    head.headers.insert("x-sub", "spoofed".parse().unwrap());
    head.headers
        .insert("x-jwt-payload", "spoofed".parse().unwrap());
    let out = h.run(head);
    assert!(out.passed(), "{}", out.body());
    assert_eq!(out.header("x-sub").as_deref(), Some("user-1"));
    assert_eq!(out.header("x-tenant").as_deref(), Some("t1"));
    assert_eq!(out.header("x-absent"), None);
    let payload = out.header("x-jwt-payload").unwrap();
    assert_eq!(payload.len() % 4, 0, "padded");
    assert_eq!(
        payload.trim_end_matches('='),
        token.split('.').nth(1).unwrap()
    );
    assert_eq!(out.metadata["my_payload"]["sub"], "user-1");
    assert_eq!(out.metadata["my_payload"]["org"]["tenant"], "t1");
    assert_eq!(out.metadata["my_header"]["alg"], "EdDSA");
}

#[test]
fn token_locations_headers_params_cookies() {
    let token = sign("RS256", "rsa", &claims());
    let h = Harness::new(provider_config(json!({})));
    assert!(
        h.run(request(&format!("/data?access_token={token}"), &[]))
            .passed(),
        "default param"
    );
    let out = h.run(request(
        "/data",
        &[("authorization", &format!("Basic {token}"))],
    ));
    assert_eq!(
        out.body(),
        "Jwt is missing",
        "the Bearer prefix is required"
    );

    let h = Harness::new(provider_config(json!({
        "from_headers": [{"name": "X-Token", "value_prefix": "Tok "}],
        "from_params": ["jwt"],
        "from_cookies": ["session"]
    })));
    let out = h.run(request(
        "/d",
        &[("x-token", &format!("scheme Tok {token}"))],
    ));
    assert!(
        out.passed(),
        "prefix found anywhere in the value: {}",
        out.body()
    );
    assert_eq!(out.header("x-token"), None, "removed after verification");
    assert!(h.run(request(&format!("/d?a=1&jwt={token}"), &[])).passed());
    assert!(h
        .run(request(
            "/d",
            &[("cookie", &format!("a=1; session=\"{token}\""))]
        ))
        .passed());
    assert_eq!(
        h.run(bearer(&token)).body(),
        "Jwt is missing",
        "the default locations are gone once any is configured"
    );
    // Every token found must verify: a good header next to a bad parameter fails.
    let out = h.run(request(
        "/d?jwt=bad",
        &[("x-token", &format!("Tok {token}"))],
    ));
    assert_eq!(out.code(), 401);
}

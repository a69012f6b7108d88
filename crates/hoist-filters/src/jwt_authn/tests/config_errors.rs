//! Configuration faults are refused at load with the YAML path and the reason.

use serde_json::json;

use super::keys;
use super::*;

fn err(v: serde_json::Value) -> String {
    try_config(v).err().unwrap()
}

#[test]
fn references_must_resolve() {
    let mut cfg = provider_config(json!({}));
    cfg["rules"][0]["requires"] = json!({"provider_name": "nope"});
    assert_eq!(
        err(cfg),
        "jwt.rules[0].requires.provider_name: Required provider ['nope'] is not configured."
    );
    let mut cfg = provider_config(json!({}));
    cfg["rules"][0] = json!({"match": {"prefix": "/"}, "requirement_name": "x"});
    assert_eq!(
        err(cfg),
        "jwt.rules[0].requirement_name: Wrong requirement_name: x. It should be one of []"
    );
    let cfg = provider_config(json!({"local_jwks": null, "remote_jwks": {
        "http_uri": {"uri": "https://idp/jwks", "cluster": "missing", "timeout": "1s"}}}));
    assert_eq!(
        err(cfg),
        "jwt.providers.p.remote_jwks.http_uri.cluster: cluster \"missing\" is not defined in static_resources.clusters"
    );
}

#[test]
fn keys_must_be_usable_and_fields_known() {
    let cfg = provider_config(json!({"local_jwks": {"inline_string": "{\"keys\": []}"}}));
    assert_eq!(
        err(cfg),
        "jwt.providers.p.local_jwks: invalid JWKS: Jwks doesn't have any valid public key"
    );
    let cfg = provider_config(json!({"subjects": {"exact": "x"}}));
    assert_eq!(
        err(cfg),
        "jwt.providers.p: field \"subjects\" is not supported by hoist yet"
    );
    let cfg = provider_config(json!({"forwrd": true}));
    assert_eq!(err(cfg), "jwt.providers.p: unknown field \"forwrd\"");
    let cfg = provider_config(json!({"from_headers": [{"name": "bad header"}]}));
    assert_eq!(
        err(cfg),
        "jwt.providers.p.from_headers[0].name: \"bad header\" is not a valid header name"
    );
    let mut cfg = provider_config(json!({}));
    cfg["rules"][0]["requires"] =
        json!({"requires_any": {"requirements": [{"provider_name": "p"}]}});
    assert_eq!(
        err(cfg),
        "jwt.rules[0].requires.requires_any: requirements must have at least 2 items"
    );
    let both = json!({"issuer": "x", "local_jwks": {"inline_string": keys::jwks().to_string()},
        "remote_jwks": {"http_uri": {"uri": "https://h/", "cluster": "c", "timeout": "1s"}}});
    assert_eq!(
        err(json!({"providers": {"p": both}})),
        "jwt.providers.p: exactly one of local_jwks, remote_jwks must be set"
    );
}

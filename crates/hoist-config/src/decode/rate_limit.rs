//! `envoy.config.route.v3.RateLimit`: the descriptor generators of virtual hosts (and of rate
//! limit filters that carry their own `rate_limits`).

use super::headers::header_name;
use super::route_match::header_matcher;
use crate::model::{RateLimit, RateLimitAction};
use crate::reader::{Message, Node, Result};

/// The actions Envoy has that hoist does not generate descriptors for yet.
const UNSUPPORTED_ACTIONS: &[&str] = &[
    "source_cluster",
    "destination_cluster",
    "query_parameters",
    "dynamic_metadata",
    "metadata",
    "extension",
    "masked_remote_address",
    "query_parameter_value_match",
];

/// One `RateLimit` entry.
pub fn rate_limit(node: &Node) -> Result<RateLimit> {
    let mut m = node.message()?;
    m.unsupported(&["limit", "hits_addend"])?;
    if m.bool("apply_on_stream_done", false)? {
        return Err(m.error("field \"apply_on_stream_done\" is not supported by hoist yet"));
    }
    let stage = m.opt_u32("stage", 0..=10)?;
    let disable_key = m.string("disable_key")?;
    let items = m.list("actions")?;
    if items.is_empty() {
        return Err(m.error("\"actions\" must have at least one item"));
    }
    let actions = items.iter().map(action).collect::<Result<Vec<_>>>()?;
    m.finish()?;
    Ok(RateLimit {
        stage,
        disable_key,
        actions,
    })
}

fn action(node: &Node) -> Result<RateLimitAction> {
    let mut m = node.message()?;
    for name in UNSUPPORTED_ACTIONS {
        if m.has(name) {
            return Err(m.error(format!(
                "rate limit action \"{name}\" is not supported by hoist yet"
            )));
        }
    }
    let which = m.oneof(
        &[
            "request_headers",
            "remote_address",
            "generic_key",
            "header_value_match",
        ],
        true,
    )?;
    let action = match which {
        Some("request_headers") => {
            let mut a = m.required("request_headers")?.message()?;
            let header_name = header_name(&a.required("header_name")?)?;
            let descriptor_key = a.required_string("descriptor_key")?;
            let skip_if_absent = a.bool("skip_if_absent", false)?;
            a.finish()?;
            RateLimitAction::RequestHeaders {
                header_name,
                descriptor_key,
                skip_if_absent,
            }
        }
        Some("remote_address") => {
            m.required("remote_address")?.message()?.finish()?;
            RateLimitAction::RemoteAddress
        }
        Some("generic_key") => {
            let mut a = m.required("generic_key")?.message()?;
            let descriptor_value = a.required_string("descriptor_value")?;
            let descriptor_key = key_or(&mut a, "generic_key")?;
            a.finish()?;
            RateLimitAction::GenericKey {
                descriptor_key,
                descriptor_value,
            }
        }
        _ => {
            let mut a = m.required("header_value_match")?.message()?;
            let descriptor_value = a.required_string("descriptor_value")?;
            let descriptor_key = key_or(&mut a, "header_match")?;
            let expect_match = a.bool("expect_match", true)?;
            let items = a.list("headers")?;
            if items.is_empty() {
                return Err(a.error("\"headers\" must have at least one item"));
            }
            let headers = items.iter().map(header_matcher).collect::<Result<_>>()?;
            a.finish()?;
            RateLimitAction::HeaderValueMatch {
                descriptor_key,
                descriptor_value,
                expect_match,
                headers,
            }
        }
    };
    m.finish()?;
    Ok(action)
}

/// An optional `descriptor_key`: empty or absent means `default`.
fn key_or(m: &mut Message, default: &str) -> Result<String> {
    let key = m.string("descriptor_key")?;
    Ok(if key.is_empty() {
        default.to_owned()
    } else {
        key
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(value: serde_json::Value) -> Result<RateLimit> {
        rate_limit(&Node::new(&value, "rate_limits[0]"))
    }

    #[test]
    fn defaults_of_the_optional_keys_are_applied() {
        let r = decode(json!({
            "actions": [
                {"generic_key": {"descriptor_value": "v"}},
                {"header_value_match": {"descriptor_value": "m", "headers": [{"name": "x-a"}]}},
                {"request_headers": {"header_name": "X-User", "descriptor_key": "user"}},
                {"remote_address": {}}
            ]
        }))
        .unwrap();
        assert_eq!(r.stage, None);
        assert_eq!(r.stage(), 0);
        match &r.actions[0] {
            RateLimitAction::GenericKey { descriptor_key, .. } => {
                assert_eq!(descriptor_key, "generic_key")
            }
            other => panic!("{other:?}"),
        }
        match &r.actions[1] {
            RateLimitAction::HeaderValueMatch {
                descriptor_key,
                expect_match,
                ..
            } => {
                assert_eq!(descriptor_key, "header_match");
                assert!(*expect_match);
            }
            other => panic!("{other:?}"),
        }
        match &r.actions[2] {
            RateLimitAction::RequestHeaders { header_name, .. } => {
                assert_eq!(header_name, "x-user")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn errors_name_the_path() {
        let e = decode(json!({"actions": []})).unwrap_err();
        assert_eq!(e.path, "rate_limits[0]");
        let e = decode(json!({"stage": 11, "actions": [{"remote_address": {}}]})).unwrap_err();
        assert_eq!(e.path, "rate_limits[0].stage");
        let e = decode(json!({"actions": [{"destination_cluster": {}}]})).unwrap_err();
        assert_eq!(e.path, "rate_limits[0].actions[0]");
        assert!(e.message.contains("destination_cluster"), "{e}");
        let e =
            decode(json!({"actions": [{"generic_key": {"descriptor_value": ""}}]})).unwrap_err();
        assert_eq!(
            e.path,
            "rate_limits[0].actions[0].generic_key.descriptor_value"
        );
        let e = decode(
            json!({"actions": [{"remote_address": {}, "generic_key": {"descriptor_value": "a"}}]}),
        )
        .unwrap_err();
        assert!(e.message.contains("exactly one of"), "{e}");
    }
}

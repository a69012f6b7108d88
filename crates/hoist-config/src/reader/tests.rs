use std::time::Duration;

use serde_json::{json, Value};

use super::*;

fn node(v: &Value) -> Node<'_> {
    Node::new(v, "root")
}

fn err<T: std::fmt::Debug>(r: Result<T>) -> String {
    r.unwrap_err().to_string()
}

#[test]
fn json_names_follow_protobuf() {
    assert_eq!(
        json_name("per_connection_buffer_limit_bytes"),
        "perConnectionBufferLimitBytes"
    );
    assert_eq!(json_name("http2_protocol_options"), "http2ProtocolOptions");
    assert_eq!(json_name("ipv4_compat"), "ipv4Compat");
    assert_eq!(json_name("name"), "name");
    assert_eq!(snake_name("http2ProtocolOptions"), "http2_protocol_options");
    assert_eq!(snake_name("stat_prefix"), "stat_prefix");
}

#[test]
fn fields_are_found_in_either_spelling_and_paths_keep_the_spelling_used() {
    let v = json!({"statPrefix": 5});
    let mut m = node(&v).message().unwrap();
    let f = m.field("stat_prefix").unwrap().unwrap();
    assert_eq!(f.path(), "root.statPrefix");
    assert_eq!(err(f.string()), "root.statPrefix: expected a string, got 5");
    m.finish().unwrap();
}

#[test]
fn a_field_in_both_spellings_is_an_error() {
    let v = json!({"stat_prefix": "a", "statPrefix": "b"});
    let mut m = node(&v).message().unwrap();
    assert_eq!(
        err(m.field("stat_prefix")),
        "root: field \"stat_prefix\" is given twice, as \"stat_prefix\" and \"statPrefix\""
    );
}

#[test]
fn finish_reports_the_first_unread_key() {
    let v = json!({"a": 1, "b": 2, "c": 3});
    let mut m = node(&v).message().unwrap();
    m.field("a").unwrap();
    assert_eq!(err(m.finish()), "root: unknown field \"b\"");
}

#[test]
fn unsupported_fields_are_named_as_written_and_null_is_unset() {
    let v = json!({"reusePort": true});
    let mut m = node(&v).message().unwrap();
    assert_eq!(
        err(m.unsupported(&["reuse_port"])),
        "root: field \"reusePort\" is not supported by hoist yet"
    );
    let v = json!({"reuse_port": null});
    let mut m = node(&v).message().unwrap();
    m.unsupported(&["reuse_port"]).unwrap();
    m.finish().unwrap();
}

#[test]
fn required_fields_and_empty_strings() {
    let v = json!({"x": ""});
    let mut m = node(&v).message().unwrap();
    assert_eq!(
        err(m.required("stat_prefix")),
        "root: missing required field \"stat_prefix\""
    );
    assert_eq!(err(m.required_string("x")), "root.x: must not be empty");
}

#[test]
fn null_fields_read_as_absent() {
    let v = json!({"a": null});
    let mut m = node(&v).message().unwrap();
    assert!(m.field("a").unwrap().is_none());
    m.finish().unwrap();
}

#[test]
fn oneof_checks_exactly_one() {
    let v = json!({"prefix": "/", "path": "/x"});
    let mut m = node(&v).message().unwrap();
    assert_eq!(
        err(m.oneof(&["prefix", "path", "safe_regex"], true)),
        "root: exactly one of prefix, path, safe_regex must be set"
    );
    let v = json!({});
    let mut m = node(&v).message().unwrap();
    assert_eq!(
        err(m.oneof(&["prefix", "path"], true)),
        "root: exactly one of prefix, path must be set"
    );
    assert_eq!(m.oneof(&["prefix", "path"], false).unwrap(), None);
    let v = json!({"a": 1, "b": 2});
    let mut m = node(&v).message().unwrap();
    assert_eq!(
        err(m.oneof(&["a", "b"], false)),
        "root: at most one of a, b may be set"
    );
    let v = json!({"a": null, "b": 2});
    let mut m = node(&v).message().unwrap();
    assert_eq!(m.oneof(&["a", "b"], true).unwrap(), Some("b"));
}

#[test]
fn kinds_are_checked() {
    assert_eq!(
        err(node(&json!([1])).message()),
        "root: expected a mapping, got a list"
    );
    assert_eq!(
        err(node(&json!({})).list()),
        "root: expected a list, got a mapping"
    );
    assert_eq!(
        err(node(&json!("yes")).bool()),
        "root: expected a boolean, got \"yes\""
    );
    assert_eq!(
        err(node(&json!(1)).bool()),
        "root: expected a boolean, got 1"
    );
    assert_eq!(
        err(node(&json!(null)).str()),
        "root: expected a string, got null"
    );
}

#[test]
fn list_items_get_index_paths_and_map_entries_key_paths() {
    let v = json!([1, "x"]);
    let items = node(&v).list().unwrap();
    assert_eq!(
        err(items[1].u32()),
        "root[1]: expected an integer, got \"x\""
    );
    let v = json!({"envoy.filters.http.x": 1});
    let entries = node(&v).entries().unwrap();
    assert_eq!(entries[0].1.path(), "root.envoy.filters.http.x");
}

#[test]
fn integers_in_proto_json_forms_with_ranges() {
    assert_eq!(node(&json!(5)).u32().unwrap(), 5);
    assert_eq!(node(&json!("5")).u32().unwrap(), 5);
    assert_eq!(node(&json!({"value": 5})).u32().unwrap(), 5);
    assert_eq!(node(&json!(1000.0)).u32().unwrap(), 1000);
    assert_eq!(
        err(node(&json!(1.5)).u32()),
        "root: expected an integer, got 1.5"
    );
    assert_eq!(
        err(node(&json!(-1)).u32()),
        "root: value -1 is out of range 0..=4294967295"
    );
    assert_eq!(
        err(node(&json!(4294967296u64)).u32()),
        "root: value 4294967296 is out of range 0..=4294967295"
    );
    assert_eq!(
        err(node(&json!(70000)).u32_in(0..=65535)),
        "root: value 70000 is out of range 0..=65535"
    );
    assert_eq!(node(&json!(-7)).i64().unwrap(), -7);
    assert_eq!(
        node(&json!("18446744073709551615")).u64().unwrap(),
        u64::MAX
    );
    assert_eq!(
        err(node(&json!(true)).u32()),
        "root: expected an integer, got true"
    );
}

#[test]
fn durations_in_proto_json_forms() {
    assert_eq!(
        node(&json!("5s")).duration().unwrap(),
        Duration::from_secs(5)
    );
    assert_eq!(
        node(&json!("0.250s")).duration().unwrap(),
        Duration::from_millis(250)
    );
    assert_eq!(
        node(&json!("1.5s")).duration().unwrap(),
        Duration::from_millis(1500)
    );
    assert_eq!(
        node(&json!("0.000000001s")).duration().unwrap(),
        Duration::from_nanos(1)
    );
    assert_eq!(
        node(&json!({"seconds": 2, "nanos": 500000000}))
            .duration()
            .unwrap(),
        Duration::from_millis(2500)
    );
    for bad in [
        json!(5),
        json!("5"),
        json!("5ms"),
        json!("1.s"),
        json!(".5s"),
        json!("1.0000000001s"),
    ] {
        assert_eq!(
            err(node(&bad).duration()),
            format!(
                "root: expected a duration such as \"5s\" or \"0.250s\", got {}",
                describe(&bad)
            )
        );
    }
    assert_eq!(
        err(node(&json!("-1s")).duration()),
        "root: duration \"-1s\" must not be negative"
    );
    assert_eq!(
        err(node(&json!({"seconds": 1, "nanos": 1000000000})).duration()),
        "root.nanos: value 1000000000 is out of range 0..=999999999"
    );
    assert_eq!(
        err(node(&json!({"seconds": 1, "millis": 1})).duration()),
        "root: unknown field \"millis\""
    );
}

#[test]
fn enums_by_name_or_number() {
    let names = ["AUTO", "HTTP1", "HTTP2"];
    assert_eq!(node(&json!("HTTP2")).enumeration(&names).unwrap(), 2);
    assert_eq!(node(&json!(1)).enumeration(&names).unwrap(), 1);
    assert_eq!(
        err(node(&json!("http2")).enumeration(&names)),
        "root: unknown value \"http2\"; expected one of AUTO, HTTP1, HTTP2"
    );
    assert_eq!(
        err(node(&json!(3)).enumeration(&names)),
        "root: unknown value 3; expected one of AUTO, HTTP1, HTTP2"
    );
}

#[test]
fn long_strings_are_shortened_in_messages() {
    let long = "x".repeat(200);
    let d = describe(&json!(long));
    assert!(d.len() < 80 && d.ends_with("..."), "{d}");
}

//! Route configuration, virtual hosts, routes, matchers, actions, header mutations,
//! typed_per_filter_config.

use hoist_config::model::{
    DataSource, HeaderAppendAction, HeaderMatchSpec, PathMatch, QueryParameterMatchSpec,
    RedirectPath, RouteAction, RouteConfiguration, StringMatch,
};
use serde_json::{json, Value};

use crate::common::*;

fn routes(v: &Value) -> RouteConfiguration {
    ok(v).listeners[0].filter_chains[0].hcm.route_config.clone()
}

const RC: &str =
    "/static_resources/listeners/0/filter_chains/0/filters/0/typed_config/route_config";

fn rc_path() -> String {
    format!("{HCM_PATH}.route_config")
}

#[test]
fn defaults_and_inline_body() {
    let rc = routes(&plain());
    assert_eq!(rc.max_direct_response_body_size_bytes, 4096);
    let vh = &rc.virtual_hosts[0];
    assert_eq!(
        (vh.name.as_str(), vh.domains.as_slice()),
        ("local", &["*".to_owned()][..])
    );
    assert!(!vh.require_tls);
    let r = &vh.routes[0];
    assert_eq!(r.yaml_path, ROUTE_PATH);
    assert!(r.route_match.case_sensitive);
    match &r.action {
        RouteAction::DirectResponse(d) => {
            assert_eq!(d.status, 200);
            assert_eq!(d.body, Some(DataSource::Inline(b"hello".to_vec())));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn bodies_over_the_limit_are_an_error_at_the_body() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{ROUTE}/direct_response/body"),
        json!({"inline_string": "x".repeat(4097)}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.direct_response.body: response body size is 4097 bytes; maximum is 4096 (raise route_config.max_direct_response_body_size_bytes)")
    );

    let dir = TempDir::new("bodies");
    let file = dir.file("payloads/8k.bin", &[0u8; 8192]);
    set(
        &mut v,
        &format!("{ROUTE}/direct_response/body"),
        json!({"filename": file}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.direct_response.body: response body size is 8192 bytes; maximum is 4096 (raise route_config.max_direct_response_body_size_bytes)")
    );
    set(
        &mut v,
        &format!("{RC}/max_direct_response_body_size_bytes"),
        json!(8192),
    );
    match &routes(&v).virtual_hosts[0].routes[0].action {
        RouteAction::DirectResponse(d) => {
            assert_eq!(
                d.body,
                Some(DataSource::File {
                    path: file.into(),
                    size: 8192
                })
            )
        }
        other => panic!("{other:?}"),
    }

    set(
        &mut v,
        &format!("{ROUTE}/direct_response/body"),
        json!({"filename": "/nonexistent/1m.bin"}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.direct_response.body.filename: cannot read \"/nonexistent/1m.bin\": No such file or directory (os error 2)")
    );
}

#[test]
fn direct_response_status_range() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{ROUTE}/direct_response/status"),
        json!(101),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.direct_response.status: value 101 is out of range 200..=599")
    );
    set(&mut v, &format!("{ROUTE}/direct_response"), json!({}));
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.direct_response: missing required field \"status\"")
    );
}

#[test]
fn domains() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{VHOST}/domains"),
        json!(["Example.COM", "*.example.org", "api.*", "example.net:8443"]),
    );
    assert_eq!(
        routes(&v).virtual_hosts[0].domains,
        ["example.com", "*.example.org", "api.*", "example.net:8443"]
    );

    let mut second = v.pointer(VHOST).unwrap().clone();
    second["name"] = json!("other");
    second["domains"] = json!(["www.example.com", "example.com"]);
    set(&mut v, &format!("{RC}/virtual_hosts/1"), second);
    assert_eq!(
        error(&v),
        format!("{}.virtual_hosts[1].domains[1]: domain \"example.com\" is already used by virtual host \"local\"", rc_path())
    );

    set(
        &mut v,
        &format!("{RC}/virtual_hosts/1/domains"),
        json!(["*"]),
    );
    ok(&v);
    set(&mut v, &format!("{VHOST}/domains"), json!(["*"]));
    assert_eq!(
        error(&v),
        format!("{}.virtual_hosts[1].domains[0]: domain \"*\" is already used by virtual host \"local\"", rc_path())
    );

    let mut v = plain();
    set(
        &mut v,
        &format!("{VHOST}/domains"),
        json!(["a*b.example.com"]),
    );
    assert_eq!(
        error(&v),
        format!("{VHOST_PATH}.domains[0]: domain \"a*b.example.com\" is not valid: use a host name (with an optional :port), \"*\", or one \"*\" at its start or end")
    );
    set(
        &mut v,
        &format!("{VHOST}/domains"),
        json!(["a.com", "A.com"]),
    );
    assert_eq!(
        error(&v),
        format!("{VHOST_PATH}.domains[1]: domain \"a.com\" is listed twice")
    );
    set(&mut v, &format!("{VHOST}/domains"), json!([]));
    assert_eq!(
        error(&v),
        format!("{VHOST_PATH}: missing required field \"domains\"")
    );
    set(&mut v, &format!("{VHOST}/domains"), json!(["*"]));
    remove(&mut v, &format!("{VHOST}/name"));
    assert_eq!(
        error(&v),
        format!("{VHOST_PATH}: missing required field \"name\"")
    );
}

#[test]
fn path_matchers() {
    let m = format!("{ROUTE}/match");
    let mut v = plain();
    set(&mut v, &m, json!({"path": "/1m", "case_sensitive": false}));
    let r = routes(&v).virtual_hosts[0].routes[0].route_match.clone();
    assert!(matches!(r.path, PathMatch::Path(ref p) if p == "/1m"));
    assert!(!r.case_sensitive);

    set(
        &mut v,
        &m,
        json!({"safe_regex": {"google_re2": {}, "regex": "/v[0-9]+/.*"}}),
    );
    match routes(&v).virtual_hosts[0].routes[0]
        .route_match
        .path
        .clone()
    {
        PathMatch::SafeRegex(re) => {
            assert!(re.is_match("/v2/x"));
            assert!(!re.is_match("/api/v2/x"));
        }
        other => panic!("{other:?}"),
    }

    set(&mut v, &m, json!({"path_separated_prefix": "/api"}));
    assert!(matches!(
        routes(&v).virtual_hosts[0].routes[0].route_match.path,
        PathMatch::PathSeparatedPrefix(ref p) if p == "/api"
    ));
    set(&mut v, &m, json!({"path_separated_prefix": "/api/"}));
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.match.path_separated_prefix: path_separated_prefix \"/api/\" must be non-empty, without '?' or '#', and not end in '/'")
    );

    for bad in [json!({}), json!({"prefix": "/", "path": "/x"})] {
        set(&mut v, &m, bad);
        assert_eq!(
            error(&v),
            format!("{ROUTE_PATH}.match: exactly one of prefix, path, safe_regex, path_separated_prefix must be set")
        );
    }

    set(&mut v, &m, json!({"safe_regex": {"regex": "/api/(v1"}}));
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.match.safe_regex.regex: invalid regex \"/api/(v1\": unclosed group")
    );

    set(&mut v, &m, json!({"prefix": "/", "runtime_fraction": {}}));
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.match: field \"runtime_fraction\" is not supported by hoist yet")
    );
}

#[test]
fn header_and_query_matchers() {
    let m = format!("{ROUTE}/match");
    let mut v = plain();
    set(
        &mut v,
        &m,
        json!({"prefix": "/",
               "headers": [
                   {"name": "X-Env", "exact_match": "prod"},
                   {"name": ":method", "string_match": {"exact": "GET", "ignore_case": true}},
                   {"name": "x-debug", "present_match": false, "invert_match": true},
                   {"name": "x-version", "range_match": {"start": 1, "end": "10"}},
                   {"name": "x-any"},
                   {"name": "x-re", "safe_regex_match": {"regex": "a+"}, "treat_missing_header_as_empty": true}],
               "query_parameters": [
                   {"name": "debug", "present_match": true},
                   {"name": "v", "string_match": {"prefix": "2"}}]}),
    );
    let r = routes(&v).virtual_hosts[0].routes[0].route_match.clone();
    assert_eq!(r.headers[0].name, "x-env");
    assert!(
        matches!(&r.headers[0].spec, HeaderMatchSpec::String(s) if matches!(&s.pattern, StringMatch::Exact(e) if e == "prod"))
    );
    assert!(
        matches!(&r.headers[1].spec, HeaderMatchSpec::String(s) if s.ignore_case && s.matches("get"))
    );
    assert!(matches!(r.headers[2].spec, HeaderMatchSpec::Present(false)));
    assert!(r.headers[2].invert_match);
    assert!(matches!(
        r.headers[3].spec,
        HeaderMatchSpec::Range { start: 1, end: 10 }
    ));
    assert!(matches!(r.headers[4].spec, HeaderMatchSpec::Present(true)));
    assert!(r.headers[5].treat_missing_as_empty);
    assert!(matches!(
        r.query_parameters[0].spec,
        QueryParameterMatchSpec::Present
    ));
    assert!(
        matches!(&r.query_parameters[1].spec, QueryParameterMatchSpec::String(s) if s.matches("2.1"))
    );

    set(
        &mut v,
        &format!("{m}/headers/0"),
        json!({"name": "x", "exact_match": "a", "prefix_match": "b"}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.match.headers[0]: at most one of exact_match, safe_regex_match, range_match, present_match, prefix_match, suffix_match, contains_match, string_match may be set")
    );
    set(
        &mut v,
        &format!("{m}/headers/0"),
        json!({"name": "bad header", "present_match": true}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.match.headers[0].name: \"bad header\" is not a valid header name")
    );
    set(
        &mut v,
        &format!("{m}/headers/0"),
        json!({"name": "x", "string_match": {"prefix": ""}}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.match.headers[0].string_match.prefix: must not be empty")
    );
    set(
        &mut v,
        &format!("{m}/headers/0"),
        json!({"name": "x", "string_match": {"exact": "a", "custom": {}}}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.match.headers[0].string_match: field \"custom\" is not supported by hoist yet")
    );
}

#[test]
fn route_actions() {
    let mut v = plain();
    remove(&mut v, &format!("{ROUTE}/direct_response"));
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}: exactly one of route, redirect, direct_response must be set")
    );
    set(
        &mut v,
        &format!("{ROUTE}/route"),
        json!({"cluster": "backend"}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.route.cluster: unknown cluster \"backend\" (not in static_resources.clusters)")
    );
    set(
        &mut v,
        &format!("{ROUTE}/direct_response"),
        json!({"status": 200}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}: exactly one of route, redirect, direct_response must be set")
    );

    let mut v = plain();
    remove(&mut v, &format!("{ROUTE}/direct_response"));
    set(
        &mut v,
        &format!("{ROUTE}/redirect"),
        json!({"https_redirect": true, "host_redirect": "example.com", "port_redirect": 8443,
               "path_redirect": "/new", "response_code": "FOUND", "strip_query": true}),
    );
    match routes(&v).virtual_hosts[0].routes[0].action.clone() {
        RouteAction::Redirect(r) => {
            assert_eq!(r.scheme.as_deref(), Some("https"));
            assert_eq!(r.host.as_deref(), Some("example.com"));
            assert_eq!(r.port, Some(8443));
            assert_eq!(r.path, RedirectPath::Path("/new".into()));
            assert_eq!(r.response_code, 302);
            assert!(r.strip_query);
        }
        other => panic!("{other:?}"),
    }
    set(
        &mut v,
        &format!("{ROUTE}/redirect"),
        json!({"prefix_rewrite": "/v2"}),
    );
    match routes(&v).virtual_hosts[0].routes[0].action.clone() {
        RouteAction::Redirect(r) => {
            assert_eq!((r.scheme, r.port, r.response_code), (None, None, 301));
            assert_eq!(r.path, RedirectPath::PrefixRewrite("/v2".into()));
        }
        other => panic!("{other:?}"),
    }
    set(
        &mut v,
        &format!("{ROUTE}/redirect"),
        json!({"https_redirect": true, "scheme_redirect": "http"}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.redirect: at most one of https_redirect, scheme_redirect may be set")
    );
    set(
        &mut v,
        &format!("{ROUTE}/redirect"),
        json!({"response_code": "MOVED"}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.redirect.response_code: unknown value \"MOVED\"; expected one of MOVED_PERMANENTLY, FOUND, SEE_OTHER, TEMPORARY_REDIRECT, PERMANENT_REDIRECT")
    );
    set(
        &mut v,
        &format!("{ROUTE}/redirect"),
        json!({"regex_rewrite": {}}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.redirect: field \"regex_rewrite\" is not supported by hoist yet")
    );
}

#[test]
fn header_mutations() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{RC}/response_headers_to_add"),
        json!([
        {"header": {"key": "X-Served-By", "value": "hoist"}},
        {"header": {"key": "cache-control", "value": "no-cache"}, "append": false},
        {"header": {"key": "x-once", "value": "1"}, "append_action": "ADD_IF_ABSENT", "keep_empty_value": true}]),
    );
    set(
        &mut v,
        &format!("{VHOST}/request_headers_to_remove"),
        json!(["X-Internal"]),
    );
    set(&mut v, &format!("{VHOST}/require_tls"), json!("ALL"));
    let rc = routes(&v);
    let add = &rc.headers.response_headers_to_add;
    assert_eq!(
        (add[0].key.as_str(), add[0].value.as_str()),
        ("x-served-by", "hoist")
    );
    assert_eq!(
        add[0].append_action,
        HeaderAppendAction::AppendIfExistsOrAdd
    );
    assert_eq!(
        add[1].append_action,
        HeaderAppendAction::OverwriteIfExistsOrAdd
    );
    assert_eq!(add[2].append_action, HeaderAppendAction::AddIfAbsent);
    assert!(add[2].keep_empty_value);
    assert_eq!(
        rc.virtual_hosts[0].headers.request_headers_to_remove,
        ["x-internal"]
    );
    assert!(rc.virtual_hosts[0].require_tls);

    let add = format!("{ROUTE}/request_headers_to_add");
    set(
        &mut v,
        &add,
        json!([{"header": {"key": "x", "value": "1"}, "append": true, "append_action": "OVERWRITE_IF_EXISTS"}]),
    );
    assert_eq!(
        error(&v),
        format!(
            "{ROUTE_PATH}.request_headers_to_add[0]: only one of append, append_action may be set"
        )
    );
    set(
        &mut v,
        &add,
        json!([{"header": {"key": ":path", "value": "/x"}}]),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.request_headers_to_add[0].header.key: header \":path\" may not be modified: :-prefixed and host headers are set by hoist")
    );
    set(&mut v, &add, json!([]));
    set(
        &mut v,
        &format!("{ROUTE}/response_headers_to_remove"),
        json!(["Host"]),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.response_headers_to_remove[0]: header \"host\" may not be modified: :-prefixed and host headers are set by hoist")
    );
    set(
        &mut v,
        &format!("{ROUTE}/response_headers_to_remove"),
        json!(["x(y)"]),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.response_headers_to_remove[0]: \"x(y)\" is not a valid header name")
    );
}

#[test]
fn typed_per_filter_config_keys_name_filters() {
    let mut v = plain();
    set(
        &mut v,
        &format!("{ROUTE}/typed_per_filter_config"),
        json!({
        "envoy.filters.http.local_ratelimit": {"@type": "type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit"}}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.typed_per_filter_config.envoy.filters.http.local_ratelimit: no HTTP filter named \"envoy.filters.http.local_ratelimit\" in the connection manager's http_filters")
    );
    set(
        &mut v,
        &format!("{ROUTE}/typed_per_filter_config"),
        json!({
        "envoy.filters.http.router": {"@type": ROUTER_TYPE}}),
    );
    assert_eq!(
        error(&v),
        format!("{ROUTE_PATH}.typed_per_filter_config.envoy.filters.http.router: the router filter takes no per-route configuration")
    );
    remove(&mut v, &format!("{ROUTE}/typed_per_filter_config"));
    set(
        &mut v,
        &format!("{VHOST}/typed_per_filter_config"),
        json!({"x": {"@type": "t"}}),
    );
    assert_eq!(
        error(&v),
        format!("{VHOST_PATH}.typed_per_filter_config.x: no HTTP filter named \"x\" in the connection manager's http_filters")
    );
}

#[test]
fn unknown_fields_in_routes() {
    let mut v = plain();
    set(&mut v, &format!("{ROUTE}/foo"), json!(1));
    assert_eq!(error(&v), format!("{ROUTE_PATH}: unknown field \"foo\""));
    let mut v = plain();
    set(&mut v, &format!("{VHOST}/cors"), json!({}));
    assert_eq!(
        error(&v),
        format!("{VHOST_PATH}: field \"cors\" is not supported by hoist yet")
    );
}

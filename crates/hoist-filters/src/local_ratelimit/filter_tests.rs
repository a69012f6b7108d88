//! The filter's phases driven directly, on a clock the tests move by hand.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll, Waker};

use hoist_config::decoders::rate_limit;
use hoist_config::reader::Node;
use hoist_http::Version;
use serde_json::{json, Value};

use super::*;
use crate::filter::StreamState;
use crate::local_ratelimit::config::Fraction;

struct ManualClock(AtomicU64);

impl Clock for ManualClock {
    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Relaxed))
    }
}

impl ManualClock {
    fn advance(&self, d: Duration) {
        self.0.fetch_add(d.as_nanos() as u64, Relaxed);
    }
}

/// Filter phases never wait: one poll finishes them.
fn ready<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("a filter phase waited"),
    }
}

fn raw(value: Value, path: &str) -> RawTypedConfig {
    RawTypedConfig {
        type_url: format!("type.googleapis.com/{}", super::super::TYPE_NAME),
        value,
        yaml_path: path.into(),
    }
}

struct Harness {
    store: Arc<Store>,
    clock: Arc<ManualClock>,
    config: Arc<Config>,
    worker: Worker,
}

fn harness(value: Value) -> Harness {
    let store = Store::new(1);
    let clock = Arc::new(ManualClock(AtomicU64::new(5_000_000_000)));
    let config = Arc::new(
        Config::with_clock(
            &raw(value, "http_filters[0].typed_config"),
            store.clone(),
            clock.clone(),
        )
        .unwrap(),
    );
    let worker = Worker::new(config.clone(), 0);
    Harness {
        store,
        clock,
        config,
        worker,
    }
}

/// What one request went through.
struct Exchange {
    status: u16,
    reply: Option<LocalReply>,
    request: RequestHead,
    response: ResponseHead,
}

#[derive(Default)]
struct Req<'a> {
    headers: &'a [(&'a str, &'a str)],
    connection: u64,
    route: Option<Arc<dyn std::any::Any + Send + Sync>>,
    vh_limits: &'a [RateLimit],
}

impl Harness {
    fn send(&self, r: Req<'_>) -> Exchange {
        let mut headers = http::HeaderMap::new();
        for (k, v) in r.headers {
            headers.append(
                HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        let mut request = RequestHead {
            method: http::Method::GET,
            path: "/".into(),
            version: Version::Http11,
            authority: Some("example.com".into()),
            headers,
        };
        let remote: SocketAddr = "192.0.2.7:40000".parse().unwrap();
        let info = StreamInfo {
            downstream_remote: remote,
            downstream_local: "127.0.0.1:10000".parse().unwrap(),
            tls: None,
            connection_id: r.connection,
            route_name: None,
            has_route: true,
            virtual_host_rate_limits: r.vh_limits,
        };
        let mut state = StreamState::default();
        let mut filter = self.worker.stream();
        let mut cx = StreamContext {
            info: &info,
            state: &mut state,
            route_config: r.route.as_ref(),
        };
        let reply = match ready(filter.decode_headers(&mut request, true, &mut cx)) {
            FilterStatus::Continue => None,
            FilterStatus::Reply(r) => Some(r),
            FilterStatus::StopAndBuffer => panic!("the rate limit filter never buffers"),
        };
        let mut response = ResponseHead::new(reply.as_ref().map_or(200, |r| r.status));
        if let Some(r) = &reply {
            response.headers = r.headers.clone();
        }
        filter.encode_headers(&mut response, &mut cx);
        Exchange {
            status: response.status,
            reply,
            request,
            response,
        }
    }

    fn stat(&self, name: &str) -> u64 {
        self.store.counter(name).value()
    }

    fn route(&self, value: Value) -> Arc<dyn std::any::Any + Send + Sync> {
        Arc::new(
            self.config
                .decode_route(&raw(value, "virtual_hosts[0].typed_per_filter_config.rl"))
                .unwrap(),
        )
    }
}

fn header<'e>(e: &'e Exchange, name: &str) -> Option<&'e str> {
    e.response.headers.get(name).map(|v| v.to_str().unwrap())
}

fn always() -> Value {
    json!({"default_value": {"numerator": 100, "denominator": "HUNDRED"}, "runtime_key": "k"})
}

fn limited(max: u32, extra: Value) -> Value {
    let mut v = json!({
        "stat_prefix": "rl",
        "token_bucket": {"max_tokens": max, "tokens_per_fill": 1, "fill_interval": "60s"},
        "filter_enabled": always(),
        "filter_enforced": always(),
    });
    if let (Value::Object(base), Value::Object(more)) = (&mut v, extra) {
        base.extend(more);
    }
    v
}

#[test]
fn without_filter_enabled_the_filter_does_nothing() {
    let h = harness(json!({
        "stat_prefix": "rl",
        "token_bucket": {"max_tokens": 1, "fill_interval": "60s"},
    }));
    for _ in 0..5 {
        assert_eq!(h.send(Req::default()).status, 200);
    }
    assert_eq!(h.stat("rl.http_local_rate_limit.enabled"), 0);
    assert!(!h.store.counter("rl.http_local_rate_limit.enabled").used());
}

#[test]
fn over_the_limit_requests_get_the_local_reply_and_are_counted() {
    let h = harness(limited(
        2,
        json!({"response_headers_to_add": [
            {"header": {"key": "x-local-rate-limit", "value": "true"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
        ]}),
    ));
    assert_eq!(h.send(Req::default()).status, 200);
    assert_eq!(h.send(Req::default()).status, 200);
    let e = h.send(Req::default());
    assert_eq!(e.status, 429);
    let reply = e.reply.as_ref().unwrap();
    assert_eq!(&reply.body[..], b"local_rate_limited");
    assert_eq!(reply.details, "local_rate_limited");
    assert!(reply.flags.contains(ResponseFlags::RATE_LIMITED));
    assert_eq!(header(&e, "x-local-rate-limit"), Some("true"));
    assert_eq!(
        header(&e, "x-ratelimit-limit"),
        None,
        "x-ratelimit headers are off"
    );
    assert_eq!(h.stat("rl.http_local_rate_limit.enabled"), 3);
    assert_eq!(h.stat("rl.http_local_rate_limit.ok"), 2);
    assert_eq!(h.stat("rl.http_local_rate_limit.rate_limited"), 1);
    assert_eq!(h.stat("rl.http_local_rate_limit.enforced"), 1);
}

#[test]
fn the_bucket_refills_in_steps_of_the_fill_interval() {
    let h = harness(json!({
        "stat_prefix": "rl",
        "token_bucket": {"max_tokens": 3, "tokens_per_fill": 2, "fill_interval": "1s"},
        "filter_enabled": always(),
        "filter_enforced": always(),
    }));
    let passed = |h: &Harness| {
        (0..10)
            .filter(|_| h.send(Req::default()).status == 200)
            .count()
    };
    assert_eq!(passed(&h), 3);
    h.clock.advance(Duration::from_millis(999));
    assert_eq!(passed(&h), 0);
    h.clock.advance(Duration::from_millis(1));
    assert_eq!(passed(&h), 2);
    h.clock.advance(Duration::from_secs(10));
    assert_eq!(passed(&h), 3, "capped at max_tokens");
}

#[test]
fn a_custom_status_is_used_and_codes_below_400_become_429() {
    let h = harness(limited(
        1,
        json!({"status": {"code": "ServiceUnavailable"}}),
    ));
    h.send(Req::default());
    assert_eq!(h.send(Req::default()).status, 503);
    let h = harness(limited(1, json!({"status": {"code": 302}})));
    h.send(Req::default());
    assert_eq!(h.send(Req::default()).status, 429);
}

#[test]
fn enabled_but_not_enforced_counts_and_marks_the_request() {
    let h = harness(json!({
        "stat_prefix": "shadow",
        "token_bucket": {"max_tokens": 1, "fill_interval": "60s"},
        "filter_enabled": always(),
        "request_headers_to_add_when_not_enforced": [
            {"header": {"key": "x-local-ratelimited", "value": "true"}, "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}
        ],
    }));
    let first = h.send(Req::default());
    assert_eq!(first.status, 200);
    assert!(first.request.headers.get("x-local-ratelimited").is_none());
    let second = h.send(Req::default());
    assert_eq!(second.status, 200);
    assert_eq!(
        second.request.headers.get("x-local-ratelimited").unwrap(),
        "true"
    );
    assert_eq!(h.stat("shadow.http_local_rate_limit.enabled"), 2);
    assert_eq!(h.stat("shadow.http_local_rate_limit.ok"), 1);
    assert_eq!(h.stat("shadow.http_local_rate_limit.rate_limited"), 1);
    assert_eq!(h.stat("shadow.http_local_rate_limit.enforced"), 0);
}

#[test]
fn x_ratelimit_headers_on_allowed_and_refused_responses() {
    let h = harness(limited(
        2,
        json!({"enable_x_ratelimit_headers": "DRAFT_VERSION_03"}),
    ));
    let e = h.send(Req::default());
    assert_eq!(header(&e, "x-ratelimit-limit"), Some("2"));
    assert_eq!(header(&e, "x-ratelimit-remaining"), Some("1"));
    assert_eq!(header(&e, "x-ratelimit-reset"), Some("60"));
    h.clock.advance(Duration::from_millis(10_500));
    let e = h.send(Req::default());
    assert_eq!(header(&e, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(header(&e, "x-ratelimit-reset"), Some("50"));
    let e = h.send(Req::default());
    assert_eq!(e.status, 429);
    assert_eq!(header(&e, "x-ratelimit-limit"), Some("2"));
    assert_eq!(header(&e, "x-ratelimit-remaining"), Some("0"));
}

#[test]
fn a_per_route_config_is_a_limiter_of_its_own() {
    let h = harness(limited(1, json!({})));
    let route = h.route(json!({
        "stat_prefix": "route_rl",
        "token_bucket": {"max_tokens": 3, "fill_interval": "60s"},
        "filter_enabled": always(),
        "filter_enforced": always(),
        "enable_x_ratelimit_headers": "DRAFT_VERSION_03",
    }));
    let on_route = || Req {
        route: Some(route.clone()),
        ..Req::default()
    };
    assert_eq!(h.send(Req::default()).status, 200);
    assert_eq!(h.send(Req::default()).status, 429);
    let statuses: Vec<u16> = (0..4).map(|_| h.send(on_route()).status).collect();
    assert_eq!(statuses, [200, 200, 200, 429]);
    assert_eq!(header(&h.send(on_route()), "x-ratelimit-limit"), Some("3"));
    assert_eq!(h.stat("rl.http_local_rate_limit.enabled"), 2);
    assert_eq!(h.stat("route_rl.http_local_rate_limit.enabled"), 5);
    assert_eq!(h.stat("route_rl.http_local_rate_limit.ok"), 3);
    assert_eq!(h.stat("route_rl.http_local_rate_limit.enforced"), 2);
}

#[test]
fn per_connection_buckets_are_separate_and_full_ones_are_swept() {
    let h = harness(limited(
        1,
        json!({"local_rate_limit_per_downstream_connection": true}),
    ));
    let on = |connection| Req {
        connection,
        ..Req::default()
    };
    assert_eq!(h.send(on(1)).status, 200);
    assert_eq!(h.send(on(1)).status, 429);
    assert_eq!(h.send(on(2)).status, 200);
    assert_eq!(h.send(on(2)).status, 429);
    assert_eq!(h.worker.connection_limiters(), 2);
    // The filter cannot see connections close: the map is swept when it has doubled, and
    // limiters that have refilled (full again, like new ones) are dropped.
    for c in 3..1003 {
        assert_eq!(h.send(on(c)).status, 200);
    }
    assert_eq!(h.worker.connection_limiters(), 1002);
    h.clock.advance(Duration::from_secs(60));
    for c in 1003..2101 {
        assert_eq!(h.send(on(c)).status, 200);
    }
    // Without the sweep: 2100 limiters; the 1002 full ones went at the first sweep.
    assert_eq!(h.worker.connection_limiters(), 1098);
    // A swept connection starts again with a full bucket; a kept one still has none.
    assert_eq!(h.send(on(1)).status, 200);
    assert_eq!(h.send(on(2000)).status, 429);
}

fn rate_limits(v: Value) -> Vec<RateLimit> {
    Node::new(&v, "rate_limits")
        .list()
        .unwrap()
        .iter()
        .map(|n| rate_limit(n).unwrap())
        .collect()
}

#[test]
fn descriptors_selected_by_the_virtual_hosts_rate_limits() {
    let h = harness(limited(
        100,
        json!({
            "descriptors": [
                {"entries": [{"key": "client", "value": "slow"}],
                 "token_bucket": {"max_tokens": 1, "fill_interval": "120s"}},
            ],
            "enable_x_ratelimit_headers": "DRAFT_VERSION_03",
        }),
    ));
    let vh = rate_limits(json!([
        {"actions": [{"request_headers": {"header_name": "x-client", "descriptor_key": "client"}}]},
        // Another stage, and a disabled entry: both ignored by a stage-0 filter.
        {"stage": 1, "actions": [{"generic_key": {"descriptor_value": "never"}}]},
        {"disable_key": "off", "actions": [{"generic_key": {"descriptor_value": "never"}}]},
    ]));
    let slow = || Req {
        headers: &[("x-client", "slow")],
        vh_limits: &vh,
        ..Req::default()
    };
    let e = h.send(slow());
    assert_eq!(e.status, 200);
    assert_eq!(
        header(&e, "x-ratelimit-limit"),
        Some("1"),
        "the descriptor's bucket"
    );
    let e = h.send(slow());
    assert_eq!(e.status, 429);
    assert_eq!(header(&e, "x-ratelimit-reset"), Some("120"));
    // Other clients only meet the default bucket.
    let other = h.send(Req {
        headers: &[("x-client", "fast")],
        vh_limits: &vh,
        ..Req::default()
    });
    assert_eq!(other.status, 200);
    assert_eq!(header(&other, "x-ratelimit-limit"), Some("100"));
    // vh_rate_limits: IGNORE: the same request meets only the default bucket.
    let h = harness(limited(
        100,
        json!({
            "descriptors": [{"entries": [{"key": "client", "value": "slow"}],
                             "token_bucket": {"max_tokens": 1, "fill_interval": "120s"}}],
            "vh_rate_limits": "IGNORE",
        }),
    ));
    assert_eq!(h.send(slow()).status, 200);
    assert_eq!(h.send(slow()).status, 200);
}

#[test]
fn the_filters_own_rate_limits_replace_the_virtual_hosts() {
    let h = harness(limited(
        100,
        json!({
            "descriptors": [
                {"entries": [{"key": "remote_address", "value": "192.0.2.7"}],
                 "token_bucket": {"max_tokens": 2, "fill_interval": "60s"}},
                {"entries": [{"key": "generic_key", "value": "vh"}],
                 "token_bucket": {"max_tokens": 1, "fill_interval": "60s"}},
            ],
            "rate_limits": [{"actions": [{"remote_address": {}}]}],
        }),
    ));
    let vh = rate_limits(json!([{"actions": [{"generic_key": {"descriptor_value": "vh"}}]}]));
    let req = || Req {
        vh_limits: &vh,
        ..Req::default()
    };
    let statuses: Vec<u16> = (0..3).map(|_| h.send(req()).status).collect();
    assert_eq!(
        statuses,
        [200, 200, 429],
        "the remote address descriptor, not the vh's"
    );
}

#[test]
fn fractions_follow_envoys_draw() {
    let half = Fraction {
        numerator: 50,
        denominator: 100,
    };
    assert!(half.contains(|| 149));
    assert!(!half.contains(|| 150));
    assert!(!Fraction::NEVER.contains(|| 0));
    let all = Fraction {
        numerator: 2_000_000,
        denominator: 1_000_000,
    };
    assert!(all.contains(|| panic!("no draw needed")));
}

fn decode_error(value: Value) -> ConfigError {
    let store = Store::new(1);
    match Config::with_clock(
        &raw(value, "http_filters[0].typed_config"),
        store,
        Arc::new(ManualClock(AtomicU64::new(0))),
    ) {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    }
}

#[test]
fn config_errors_name_the_yaml_path() {
    let cases = [
        (json!({}), "http_filters[0].typed_config", "stat_prefix"),
        (
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 1, "fill_interval": "0.049s"}}),
            "http_filters[0].typed_config.token_bucket",
            "at least 50ms",
        ),
        (
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 0, "fill_interval": "1s"}}),
            "http_filters[0].typed_config.token_bucket.max_tokens",
            "out of range",
        ),
        (
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 1}}),
            "http_filters[0].typed_config.token_bucket",
            "fill_interval",
        ),
        (
            json!({"stat_prefix": "a", "tokenBucket": {"max_tokens": 1, "fill_interval": "1s", "burst": 2}}),
            "http_filters[0].typed_config.tokenBucket",
            "unknown field \"burst\"",
        ),
        (
            json!({"stat_prefix": "a", "filter_enabled": {"runtime_key": "k"}}),
            "http_filters[0].typed_config.filter_enabled",
            "default_value",
        ),
        (
            json!({"stat_prefix": "a", "filter_enforced": {"default_value": {"numerator": 1, "denominator": "PERCENT"}}}),
            "http_filters[0].typed_config.filter_enforced.default_value.denominator",
            "HUNDRED",
        ),
        (
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 1, "fill_interval": "1s"},
                   "descriptors": [{"entries": [{"key": "k", "value": "v"}],
                                    "token_bucket": {"max_tokens": 1, "fill_interval": "1.5s"}}]}),
            "http_filters[0].typed_config.descriptors[0].token_bucket",
            "not a multiple",
        ),
        (
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 1, "fill_interval": "1s"},
                   "descriptors": [
                       {"entries": [{"key": "k", "value": "v"}], "token_bucket": {"max_tokens": 1, "fill_interval": "1s"}},
                       {"entries": [{"key": "k", "value": "v"}], "token_bucket": {"max_tokens": 2, "fill_interval": "2s"}}]}),
            "http_filters[0].typed_config.descriptors[1]",
            "duplicate",
        ),
        (
            json!({"stat_prefix": "a",
                   "descriptors": [{"entries": [{"key": "k", "value": "v"}],
                                    "token_bucket": {"max_tokens": 1, "fill_interval": "1s"}}]}),
            "http_filters[0].typed_config.descriptors[0]",
            "token_bucket",
        ),
        (
            json!({"stat_prefix": "a", "token_bucket": {"max_tokens": 1, "fill_interval": "1s"},
                   "descriptors": [{"entries": [{"key": "k", "value": ""}],
                                    "token_bucket": {"max_tokens": 1, "fill_interval": "1s"}}]}),
            "http_filters[0].typed_config.descriptors[0].entries[0].value",
            "empty value",
        ),
        (
            json!({"stat_prefix": "a", "rate_limits": [{"stage": 1, "actions": [{"remote_address": {}}]}]}),
            "http_filters[0].typed_config.rate_limits[0]",
            "stage",
        ),
        (
            json!({"stat_prefix": "a", "status": {"code": "Teapot"}}),
            "http_filters[0].typed_config.status.code",
            "unknown status code",
        ),
        (
            json!({"stat_prefix": "a", "stage": 11}),
            "http_filters[0].typed_config.stage",
            "out of range",
        ),
        (
            json!({"stat_prefix": "a", "response_headers_to_add": [
                {"header": {"key": "x-a", "value": "%DOWNSTREAM_REMOTE_ADDRESS%"}}]}),
            "http_filters[0].typed_config.response_headers_to_add[0]",
            "not supported",
        ),
        (
            json!({"stat_prefix": "a", "local_cluster_rate_limit": {}}),
            "http_filters[0].typed_config",
            "not supported",
        ),
        (
            json!({"stat_prefix": "a", "enable_x_ratelimit_headers": "DRAFT_VERSION_04"}),
            "http_filters[0].typed_config.enable_x_ratelimit_headers",
            "DRAFT_VERSION_03",
        ),
    ];
    for (value, path, needle) in cases {
        let e = decode_error(value.clone());
        assert_eq!(e.path, path, "{value}: {e}");
        assert!(e.message.contains(needle), "{value}: {e}");
    }
    let too_many: Vec<Value> = (0..11)
        .map(|i| json!({"header": {"key": format!("x-{i}"), "value": "v"}}))
        .collect();
    let e = decode_error(json!({"stat_prefix": "a", "response_headers_to_add": too_many}));
    assert_eq!(e.path, "http_filters[0].typed_config");
    assert!(e.message.contains("at most 10"), "{e}");
}

#[test]
fn a_per_route_config_needs_its_own_token_bucket_and_the_right_type() {
    let h = harness(json!({"stat_prefix": "rl"}));
    let path = "virtual_hosts[0].typed_per_filter_config.rl";
    let e = match h
        .config
        .decode_route(&raw(json!({"stat_prefix": "r"}), path))
    {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    };
    assert_eq!(e.path, path);
    assert!(e.message.contains("token_bucket"), "{e}");
    let mut wrong = raw(json!({"stat_prefix": "r"}), path);
    wrong.type_url =
        "type.googleapis.com/envoy.extensions.filters.http.buffer.v3.BufferPerRoute".into();
    let e = match h.config.decode_route(&wrong) {
        Ok(_) => panic!("accepted"),
        Err(e) => e,
    };
    assert!(e.message.contains("does not match"), "{e}");
}

#[test]
fn without_a_token_bucket_an_enabled_filter_refuses_everything_as_envoy_does() {
    // Envoy's limiter without a token_bucket has no tokens and no refill timer.
    let h = harness(json!({
        "stat_prefix": "rl",
        "filter_enabled": always(),
        "filter_enforced": always(),
    }));
    assert_eq!(h.send(Req::default()).status, 429);
    h.clock.advance(Duration::from_secs(3600));
    assert_eq!(h.send(Req::default()).status, 429);
}

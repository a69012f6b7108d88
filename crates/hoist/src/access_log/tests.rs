//! Formatter and sink tests on a full request context.

use std::net::SocketAddr;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hoist_config::model::access_log::DEFAULT_FORMAT;
use hoist_tls::transport::TlsInfo;
use http::{HeaderMap, HeaderValue};
use serde_json::json;

use super::*;

struct Owned {
    request: HeaderMap,
    response: HeaderMap,
    trailers: HeaderMap,
    tls: TlsInfo,
}

fn owned() -> Owned {
    let mut request = HeaderMap::new();
    request.insert("user-agent", HeaderValue::from_static("curl/8.5.0"));
    request.insert("x-request-id", HeaderValue::from_static("abc-123"));
    request.insert("x-forwarded-for", HeaderValue::from_static("10.1.2.3"));
    request.insert("x-custom", HeaderValue::from_static("first"));
    request.append("x-custom", HeaderValue::from_static("second"));
    request.insert("host", HeaderValue::from_static("host-header:10443"));
    let mut response = HeaderMap::new();
    response.insert(
        "x-envoy-upstream-service-time",
        HeaderValue::from_static("2"),
    );
    response.insert("content-type", HeaderValue::from_static("text/plain"));
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let tls = TlsInfo {
        version: "TLSv1.2",
        cipher: "ECDHE-RSA-AES128-GCM-SHA256",
        curve: Some("X25519"),
        sigalg: None,
        sni: Some("localhost".to_owned()),
        alpn: None,
        session_reused: false,
        peer_subject: Some("CN=client".to_owned()),
        offload: "sw",
    };
    Owned {
        request,
        response,
        trailers,
        tls,
    }
}

/// A TLS request for /1k answered by a direct response, 2024-05-01T12:00:00.123456789Z.
fn full(o: &Owned) -> LogContext<'_> {
    let remote: SocketAddr = "127.0.0.1:54321".parse().unwrap();
    let mut ctx = LogContext::new(UNIX_EPOCH + Duration::new(1_714_564_800, 123_456_789));
    ctx.request_complete = Some(Duration::from_micros(1_200));
    ctx.first_response_byte = Some(Duration::from_micros(2_900));
    ctx.response_complete = Some(Duration::from_micros(5_999));
    ctx.method = Some("GET");
    ctx.path = Some("/1k?x=1");
    ctx.authority = Some("localhost:10443");
    ctx.scheme = Some("https");
    ctx.protocol = Some("HTTP/1.1");
    ctx.request_headers = Some(&o.request);
    ctx.response_headers = Some(&o.response);
    ctx.response_trailers = Some(&o.trailers);
    ctx.response_code = Some(200);
    ctx.response_code_details = Some("direct_response");
    ctx.bytes_received = 17;
    ctx.bytes_sent = 1024;
    ctx.downstream_remote = Some(remote);
    ctx.downstream_direct_remote = Some("127.0.0.2:40000".parse().unwrap());
    ctx.downstream_local = Some("[::1]:10443".parse().unwrap());
    ctx.tls = Some(&o.tls);
    ctx.upstream_host = Some("10.0.0.9:8080".parse().unwrap());
    ctx.upstream_cluster = Some("backend");
    ctx.upstream_transport_failure_reason = Some("tls_error");
    ctx.route_name = Some("payloads");
    ctx.connection_id = Some(7);
    ctx.hostname = Some("edge-1");
    ctx
}

fn text(format: &str, ctx: &LogContext<'_>) -> String {
    let mut out = Vec::new();
    Formatter::text(format).unwrap().format(ctx, &mut out);
    String::from_utf8(out).unwrap()
}

#[test]
fn default_format_on_a_full_context() {
    let o = owned();
    assert_eq!(
        text(DEFAULT_FORMAT, &full(&o)),
        "[2024-05-01T12:00:00.123Z] \"GET /1k?x=1 HTTP/1.1\" 200 - 17 1024 5 2 \"10.1.2.3\" \
         \"curl/8.5.0\" \"abc-123\" \"localhost:10443\" \"10.0.0.9:8080\"\n"
    );
}

#[test]
fn default_format_on_an_empty_context() {
    let ctx = LogContext::new(UNIX_EPOCH);
    assert_eq!(
        text(DEFAULT_FORMAT, &ctx),
        "[1970-01-01T00:00:00.000Z] \"- - -\" 0 - 0 0 - - \"-\" \"-\" \"-\" \"-\" \"-\"\n"
    );
}

#[test]
fn each_operator() {
    let o = owned();
    let ctx = full(&o);
    let cases = [
        ("%START_TIME(%s.%3f)%", "1714564800.123"),
        (
            "%REQ(:METHOD)% %REQ(:path)% %REQ(:AUTHORITY)% %REQ(:SCHEME)%",
            "GET /1k?x=1 localhost:10443 https",
        ),
        ("%REQ(User-Agent)%", "curl/8.5.0"),
        ("%REQ(X-CUSTOM)%", "first"),
        ("%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%", "/1k?x=1"),
        ("%REQ(X-MISSING?USER-AGENT)%", "curl/8.5.0"),
        ("%REQ(USER-AGENT?X-REQUEST-ID)%", "curl/8.5.0"),
        ("%RESP(CONTENT-TYPE)% %RESP(:STATUS)%", "text/plain 200"),
        ("%TRAILER(GRPC-STATUS)%", "0"),
        ("%PROTOCOL%", "HTTP/1.1"),
        ("%RESPONSE_CODE%", "200"),
        ("%RESPONSE_CODE_DETAILS%", "direct_response"),
        ("%RESPONSE_FLAGS%", "-"),
        ("%BYTES_RECEIVED% %BYTES_SENT%", "17 1024"),
        (
            "%DURATION% %REQUEST_DURATION% %RESPONSE_DURATION% %RESPONSE_TX_DURATION%",
            "5 1 2 3",
        ),
        ("%DOWNSTREAM_REMOTE_ADDRESS%", "127.0.0.1:54321"),
        (
            "%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_REMOTE_PORT%",
            "127.0.0.1 54321",
        ),
        ("%DOWNSTREAM_LOCAL_ADDRESS%", "[::1]:10443"),
        (
            "%DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_LOCAL_PORT%",
            "::1 10443",
        ),
        ("%DOWNSTREAM_DIRECT_REMOTE_ADDRESS%", "127.0.0.2:40000"),
        (
            "%DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_TLS_CIPHER%",
            "TLSv1.2 ECDHE-RSA-AES128-GCM-SHA256",
        ),
        (
            "%DOWNSTREAM_PEER_SUBJECT% %REQUESTED_SERVER_NAME%",
            "CN=client localhost",
        ),
        ("%DOWNSTREAM_TLS_OFFLOAD%", "sw"),
        (
            "%UPSTREAM_HOST% %UPSTREAM_CLUSTER%",
            "10.0.0.9:8080 backend",
        ),
        ("%UPSTREAM_TRANSPORT_FAILURE_REASON%", "tls_error"),
        (
            "%ROUTE_NAME% %HOSTNAME% %CONNECTION_ID%",
            "payloads edge-1 7",
        ),
        ("%STREAM_ID%", "abc-123"),
        ("100%% %PROTOCOL%%%", "100% HTTP/1.1%"),
        ("no operators", "no operators"),
        ("", ""),
    ];
    for (format, expected) in cases {
        assert_eq!(text(format, &ctx), expected, "format {format:?}");
    }
}

#[test]
fn response_flags_join() {
    let o = owned();
    let mut ctx = full(&o);
    ctx.response_flags = ResponseFlags::NO_ROUTE_FOUND | ResponseFlags::UPSTREAM_CONNECTION_FAILURE;
    assert_eq!(text("%RESPONSE_FLAGS%", &ctx), "UF,NR");
}

#[test]
fn authority_falls_back_to_host_header() {
    let o = owned();
    let mut ctx = full(&o);
    ctx.authority = None;
    assert_eq!(text("%REQ(:AUTHORITY)%", &ctx), "host-header:10443");
}

#[test]
fn truncation() {
    let o = owned();
    let ctx = full(&o);
    assert_eq!(text("%REQ(USER-AGENT):4%", &ctx), "curl");
    assert_eq!(text("%REQ(USER-AGENT):0%", &ctx), "");
    assert_eq!(text("%REQ(USER-AGENT):100%", &ctx), "curl/8.5.0");
    assert_eq!(text("%REQ(:PATH):3%", &ctx), "/1k");
    assert_eq!(text("%REQ(X-MISSING):3%", &ctx), "-");
}

#[test]
fn missing_values_print_a_dash() {
    let ctx = LogContext::new(UNIX_EPOCH);
    let format = "%REQ(:METHOD)%|%RESP(X-A)%|%TRAILER(X-B)%|%PROTOCOL%|%RESPONSE_CODE_DETAILS%|\
                  %DURATION%|%REQUEST_DURATION%|%RESPONSE_DURATION%|%RESPONSE_TX_DURATION%|\
                  %DOWNSTREAM_REMOTE_ADDRESS%|%DOWNSTREAM_REMOTE_PORT%|%DOWNSTREAM_LOCAL_ADDRESS%|\
                  %DOWNSTREAM_TLS_VERSION%|%DOWNSTREAM_TLS_CIPHER%|%DOWNSTREAM_PEER_SUBJECT%|\
                  %REQUESTED_SERVER_NAME%|%DOWNSTREAM_TLS_OFFLOAD%|%UPSTREAM_HOST%|\
                  %UPSTREAM_CLUSTER%|%ROUTE_NAME%|%HOSTNAME%|%CONNECTION_ID%|%STREAM_ID%|\
                  %UPSTREAM_TRANSPORT_FAILURE_REASON%";
    let expected = vec!["-"; 24].join("|");
    assert_eq!(text(format, &ctx), expected);
    // Numbers Envoy always has print as numbers.
    assert_eq!(
        text("%RESPONSE_CODE% %BYTES_SENT% %RESPONSE_FLAGS%", &ctx),
        "0 0 -"
    );
}

#[test]
fn json_keeps_operator_types() {
    let o = owned();
    let ctx = full(&o);
    let config = json!({
        "start": "%START_TIME%",
        "code": "%RESPONSE_CODE%",
        "bytes": "%BYTES_SENT%",
        "duration": "%DURATION%",
        "upstream": "%UPSTREAM_HOST%",
        "missing": "%REQ(X-MISSING)%",
        "line": "%REQ(:METHOD)% %REQ(:PATH)% %REQ(X-MISSING)%",
        "port_text": "port %DOWNSTREAM_REMOTE_PORT%",
        "nested": {"ua": "%REQ(USER-AGENT):4%", "constant": 3, "flag": true, "nothing": null},
        "list": ["%PROTOCOL%", "%CONNECTION_ID%"],
        "literal": "100%%"
    });
    let formatter = Formatter::json(config.as_object().unwrap()).unwrap();
    let mut out = Vec::new();
    formatter.format(&ctx, &mut out);
    let line = String::from_utf8(out).unwrap();
    assert_eq!(
        line,
        "{\"start\":\"2024-05-01T12:00:00.123Z\",\"code\":200,\"bytes\":1024,\"duration\":5,\
         \"upstream\":\"10.0.0.9:8080\",\"missing\":null,\"line\":\"GET /1k?x=1 -\",\
         \"port_text\":\"port 54321\",\"nested\":{\"ua\":\"curl\",\"constant\":3,\"flag\":true,\
         \"nothing\":null},\"list\":[\"HTTP/1.1\",7],\"literal\":\"100%\"}\n"
    );
    let parsed: serde_json::Value = serde_json::from_str(line.trim_end()).unwrap();
    assert_eq!(parsed["code"], 200);
    assert!(parsed["missing"].is_null());
}

#[test]
fn json_escapes_peer_bytes() {
    let mut request = HeaderMap::new();
    request.insert(
        "user-agent",
        HeaderValue::from_bytes(b"a\"b\\c\xff").unwrap(),
    );
    let mut ctx = LogContext::new(SystemTime::UNIX_EPOCH);
    ctx.request_headers = Some(&request);
    let config = json!({"ua": "%REQ(USER-AGENT)%"});
    let mut out = Vec::new();
    Formatter::json(config.as_object().unwrap())
        .unwrap()
        .format(&ctx, &mut out);
    assert_eq!(out, "{\"ua\":\"a\\\"b\\\\c\u{fffd}\"}\n".as_bytes());
    // Text logs carry the bytes as received, as Envoy's do.
    let mut out = Vec::new();
    Formatter::text("%REQ(USER-AGENT)%")
        .unwrap()
        .format(&ctx, &mut out);
    assert_eq!(out, b"a\"b\\c\xff");
}

#[test]
fn errors_name_the_operator() {
    let err = |f: &str| Formatter::text(f).unwrap_err();
    assert_eq!(err("%FOO%"), "Not supported field in StreamInfo: FOO");
    assert_eq!(
        err("a %UPSTREAM_PEER_URI_SAN% b"),
        "Not supported field in StreamInfo: UPSTREAM_PEER_URI_SAN"
    );
    assert_eq!(
        err("[%REQ(:PATH)"),
        "Incorrect configuration: [%REQ(:PATH). Couldn't find valid command at position 1"
    );
    assert_eq!(
        err("50%"),
        "Incorrect configuration: 50%. Couldn't find valid command at position 2"
    );
    assert_eq!(
        err("%req(:path)%"),
        "Incorrect configuration: %req(:path)%. Couldn't find valid command at position 0"
    );
    assert_eq!(err("%REQ%"), "REQ requires parameters");
    assert_eq!(err("%REQ()%"), "REQ requires parameters");
    assert_eq!(
        err("%PROTOCOL(x)%"),
        "PROTOCOL does not take any parameters or length"
    );
    assert_eq!(
        err("%BYTES_SENT:3%"),
        "BYTES_SENT does not take any parameters or length"
    );
    assert_eq!(
        err("%START_TIME:3%"),
        "START_TIME does not allow length to be specified."
    );
    assert_eq!(
        err("%START_TIME(%Q)%"),
        "START_TIME: unsupported format specifier %Q"
    );
    assert_eq!(
        err("%REQ(A?B?C)%"),
        "More than 1 alternative header specified in token: A?B?C"
    );
    assert_eq!(err("%REQ(:FOO)%"), "REQ: unsupported pseudo-header ':FOO'");
    assert_eq!(err("%REQ(A B)%"), "REQ: invalid header name 'A B'");
    assert_eq!(
        err("%REQ(A):99999999999999999999999%"),
        "Length must be an integer, given: 99999999999999999999999"
    );
    let config = json!({"a": {"b": "%NOPE%"}});
    assert_eq!(
        Formatter::json(config.as_object().unwrap()).unwrap_err(),
        "Not supported field in StreamInfo: NOPE"
    );
}

#[test]
fn start_time_subcommand_may_hold_parentheses() {
    let ctx = LogContext::new(UNIX_EPOCH + Duration::from_secs(86_400));
    assert_eq!(text("%START_TIME((%Y))%", &ctx), "(1970)");
    assert_eq!(text("%START_TIME()%", &ctx), "1970-01-02T00:00:00.000Z");
}

mod file_sink {
    use super::*;
    use std::path::PathBuf;

    /// A file in the system temp dir, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(tag: &str) -> TempFile {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            TempFile(std::env::temp_dir().join(format!(
                "hoist-access-log-{tag}-{}-{nanos}.log",
                std::process::id()
            )))
        }

        fn read(&self) -> String {
            std::fs::read_to_string(&self.0).unwrap()
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn logger(file: &TempFile) -> AccessLogger {
        let sink = AccessLogSink::open_file(&file.0).unwrap();
        AccessLogger::new(Formatter::text("%REQ(X-LINE)%\n").unwrap(), sink)
    }

    fn ctx_with(headers: &HeaderMap) -> LogContext<'_> {
        let mut ctx = LogContext::new(UNIX_EPOCH);
        ctx.request_headers = Some(headers);
        ctx
    }

    #[test]
    fn two_workers_write_every_line_once() {
        const LINES: usize = 5_000;
        let file = TempFile::new("workers");
        let logger = logger(&file);
        let threads: Vec<_> = (0..2)
            .map(|worker| {
                let logger = logger.clone();
                std::thread::spawn(move || {
                    let mut log = logger.worker();
                    for i in 0..LINES {
                        let mut headers = HeaderMap::new();
                        let line = format!("worker-{worker}-line-{i:05}-{}", "x".repeat(40));
                        headers.insert("x-line", HeaderValue::from_str(&line).unwrap());
                        log.log(&ctx_with(&headers)).unwrap();
                    }
                    log.flush().unwrap();
                    assert_eq!(log.buffered(), 0);
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let content = file.read();
        let mut lines: Vec<&str> = content.lines().collect();
        assert_eq!(lines.len(), 2 * LINES);
        lines.sort_unstable();
        let mut expected: Vec<String> = (0..2)
            .flat_map(|w| {
                (0..LINES).map(move |i| format!("worker-{w}-line-{i:05}-{}", "x".repeat(40)))
            })
            .collect();
        expected.sort_unstable();
        assert_eq!(lines, expected);
    }

    #[test]
    fn a_full_buffer_is_written_without_waiting() {
        let file = TempFile::new("full");
        let mut log = logger(&file).worker();
        let big = "y".repeat(FLUSH_BYTES);
        let mut headers = HeaderMap::new();
        headers.insert("x-line", HeaderValue::from_str(&big).unwrap());
        log.log(&ctx_with(&headers)).unwrap();
        assert_eq!(log.buffered(), 0);
        assert_eq!(file.read(), format!("{big}\n"));
    }

    #[test]
    fn the_interval_and_drop_flush() {
        let file = TempFile::new("interval");
        let logger = logger(&file);
        let mut log = logger.worker();
        let mut headers = HeaderMap::new();
        headers.insert("x-line", HeaderValue::from_static("one"));
        log.log(&ctx_with(&headers)).unwrap();
        log.flush_if_due(std::time::Instant::now() + FLUSH_INTERVAL)
            .unwrap();
        assert_eq!(log.buffered(), 0);
        assert_eq!(file.read(), "one\n");
        headers.insert("x-line", HeaderValue::from_static("two"));
        log.log(&ctx_with(&headers)).unwrap();
        drop(log);
        assert_eq!(file.read(), "one\ntwo\n");
    }

    #[test]
    fn from_config_reports_the_yaml_path() {
        use hoist_config::model::access_log as config;
        let file = TempFile::new("config");
        let entry = |format: config::LogFormat, sink: config::AccessLogSink| {
            config::AccessLog {
            name: "envoy.access_loggers.file".to_owned(),
            sink,
            format,
            yaml_path: "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.access_log[0]"
                .to_owned(),
        }
        };
        let ok = entry(
            config::LogFormat::Text(DEFAULT_FORMAT.to_owned()),
            config::AccessLogSink::File(file.0.clone()),
        );
        let logger = AccessLogger::from_config(&ok).unwrap();
        assert!(matches!(logger.sink(), AccessLogSink::File { .. }));
        let bad = entry(
            config::LogFormat::Text("%BAD%".to_owned()),
            config::AccessLogSink::Stdout,
        );
        assert_eq!(
            AccessLogger::from_config(&bad).unwrap_err(),
            "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.access_log[0]: \
             Not supported field in StreamInfo: BAD"
        );
        let unopenable = entry(
            config::LogFormat::Text(DEFAULT_FORMAT.to_owned()),
            config::AccessLogSink::File("/nonexistent-dir/x.log".into()),
        );
        let err = AccessLogger::from_config(&unopenable).unwrap_err();
        assert!(
            err.contains("cannot open access log file '/nonexistent-dir/x.log'"),
            "{err}"
        );
    }
}

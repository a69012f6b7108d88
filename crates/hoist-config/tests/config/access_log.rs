//! Access loggers: file, stdout, stderr; formats; faults.

use hoist_config::model::{AccessLogSink, LogFormat, DEFAULT_FORMAT};
use serde_json::{json, Value};

use crate::common::*;

const FILE_TYPE: &str = "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog";
const STDOUT_TYPE: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog";
const STDERR_TYPE: &str =
    "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StderrAccessLog";

fn with_logs(logs: Value) -> Value {
    let mut v = plain();
    set(&mut v, &format!("{HCM}/access_log"), logs);
    v
}

fn logs(v: &Value) -> Vec<hoist_config::model::AccessLog> {
    ok(v).listeners[0].filter_chains[0].hcm.access_log.clone()
}

#[test]
fn loggers_and_formats() {
    let v = with_logs(json!([
        {"name": "envoy.access_loggers.file", "typed_config": {"@type": FILE_TYPE, "path": "/var/log/a.log",
            "log_format": {"text_format_source": {"inline_string": "%RESPONSE_CODE%\n"}}}},
        {"name": "envoy.access_loggers.stdout", "typed_config": {"@type": STDOUT_TYPE}},
        {"typed_config": {"@type": STDERR_TYPE, "log_format": {"json_format": {"code": "%RESPONSE_CODE%", "nested": {"a": "%PROTOCOL%"}}}}},
        {"typed_config": {"@type": FILE_TYPE, "path": "/tmp/b.log", "format": "%PROTOCOL%\n"}},
        {"typed_config": {"@type": FILE_TYPE, "path": "/tmp/c.log", "json_format": {"p": "%PROTOCOL%"}}},
        {"typed_config": {"@type": STDOUT_TYPE, "log_format": {"text_format": "%DURATION%\n"}}},
    ]));
    let l = logs(&v);
    let at = |i: usize| format!("{HCM_PATH}.access_log[{i}]");
    assert_eq!(l[0].name, "envoy.access_loggers.file");
    assert_eq!(l[0].sink, AccessLogSink::File("/var/log/a.log".into()));
    assert_eq!(l[0].format, LogFormat::Text("%RESPONSE_CODE%\n".into()));
    assert_eq!(
        l[0].yaml_path,
        format!("{}.typed_config.log_format.text_format_source", at(0))
    );
    assert_eq!(l[1].sink, AccessLogSink::Stdout);
    assert_eq!(l[1].format, LogFormat::Text(DEFAULT_FORMAT.into()));
    assert_eq!(l[1].yaml_path, at(1));
    assert_eq!(l[2].name, "envoy.access_loggers.stderr");
    assert_eq!(l[2].sink, AccessLogSink::Stderr);
    match &l[2].format {
        LogFormat::Json(map) => {
            assert_eq!(
                Value::Object(map.clone()),
                json!({"code": "%RESPONSE_CODE%", "nested": {"a": "%PROTOCOL%"}})
            )
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(l[3].format, LogFormat::Text("%PROTOCOL%\n".into()));
    assert_eq!(l[3].yaml_path, format!("{}.typed_config.format", at(3)));
    assert!(matches!(l[4].format, LogFormat::Json(_)));
    assert_eq!(l[5].format, LogFormat::Text("%DURATION%\n".into()));
}

#[test]
fn text_format_source_from_a_file() {
    let dir = TempDir::new("formats");
    let path = dir.file("format.txt", b"%START_TIME% %REQ(:PATH)%\n");
    let v = with_logs(json!([{"typed_config": {"@type": STDOUT_TYPE,
        "log_format": {"text_format_source": {"filename": path}}}}]));
    assert_eq!(
        logs(&v)[0].format,
        LogFormat::Text("%START_TIME% %REQ(:PATH)%\n".into())
    );

    let bin = dir.file("format.bin", &[0xff, 0xfe]);
    let v = with_logs(json!([{"typed_config": {"@type": STDOUT_TYPE,
        "log_format": {"text_format_source": {"filename": bin}}}}]));
    assert_eq!(
        error(&v),
        format!("{HCM_PATH}.access_log[0].typed_config.log_format.text_format_source: \"{bin}\" is not UTF-8 text")
    );
}

#[test]
fn faults() {
    let at = format!("{HCM_PATH}.access_log[0]");
    let cases = [
        (json!({"filter": {}, "typed_config": {"@type": STDOUT_TYPE}}),
         format!("{at}: field \"filter\" is not supported by hoist yet")),
        (json!({"name": "envoy.access_loggers.http_grpc", "typed_config": {
            "@type": "type.googleapis.com/envoy.extensions.access_loggers.grpc.v3.HttpGrpcAccessLogConfig"}}),
         format!("{at}: access logger \"envoy.access_loggers.http_grpc\" is not supported by hoist yet")),
        (json!({"name": "envoy.access_loggers.file"}),
         format!("{at}: missing required field \"typed_config\"")),
        (json!({"typed_config": {"@type": FILE_TYPE}}),
         format!("{at}.typed_config: missing required field \"path\"")),
        (json!({"typed_config": {"@type": FILE_TYPE, "path": "/tmp/x", "format": "a", "log_format": {"text_format": "b"}}}),
         format!("{at}.typed_config: at most one of format, json_format, log_format may be set")),
        (json!({"typed_config": {"@type": STDOUT_TYPE, "log_format": {}}}),
         format!("{at}.typed_config.log_format: exactly one of text_format, json_format, text_format_source must be set")),
        (json!({"typed_config": {"@type": STDOUT_TYPE, "log_format": {"text_format": "x", "omit_empty_values": true}}}),
         format!("{at}.typed_config.log_format: field \"omit_empty_values\" is not supported by hoist yet")),
        (json!({"typed_config": {"@type": STDOUT_TYPE, "log_format": {"json_format": "not a struct"}}}),
         format!("{at}.typed_config.log_format.json_format: expected a mapping, got \"not a struct\"")),
        (json!({"typed_config": {"@type": STDOUT_TYPE, "log_format": {"text_format_source": {"filename": "/nonexistent/f"}}}}),
         format!("{at}.typed_config.log_format.text_format_source.filename: cannot read \"/nonexistent/f\": No such file or directory (os error 2)")),
        (json!({"typed_config": {"@type": STDOUT_TYPE, "path": "/tmp/x"}}),
         format!("{at}.typed_config: unknown field \"path\"")),
    ];
    for (log, expected) in cases {
        assert_eq!(error(&with_logs(json!([log]))), expected);
    }
}

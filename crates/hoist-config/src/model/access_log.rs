//! `envoy.config.accesslog.v3.AccessLog` with the file and stdout loggers.

/// Envoy's default text format (see specs/envoy.md).
pub const DEFAULT_FORMAT: &str = "[%START_TIME%] \"%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%\" %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% %RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% \"%REQ(X-FORWARDED-FOR)%\" \"%REQ(USER-AGENT)%\" \"%REQ(X-REQUEST-ID)%\" \"%REQ(:AUTHORITY)%\" \"%UPSTREAM_HOST%\"\n";

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AccessLogSink {
    /// envoy.access_loggers.file: appended to this path.
    File(std::path::PathBuf),
    /// envoy.access_loggers.stdout.
    Stdout,
    /// envoy.access_loggers.stderr.
    Stderr,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// A text format with %OPERATORS%. The access log formatter in the binary compiles it at
    /// load and reports unknown operators with `AccessLog::yaml_path`.
    Text(String),
    /// `json_format`: key -> format string (nested objects flattened with their structure kept).
    Json(serde_json::Map<String, serde_json::Value>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessLog {
    pub name: String,
    pub sink: AccessLogSink,
    pub format: LogFormat,
    /// Where the format was written (`...log_format.text_format`, `...typed_config.format`), or
    /// the access_log entry itself when the default format applies.
    pub yaml_path: String,
}

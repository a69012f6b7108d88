//! Access logs: the file logger with Envoy's default format and with a custom format, flushed
//! by the workers; a codec error is logged too.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;

use std::time::{Duration, Instant};

use support::*;

fn wait_for_lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if lines.len() >= n || Instant::now() > deadline {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn default_and_custom_formats() {
    let dir = TempDir::new("alog");
    let default_log = dir.path("default.log");
    let custom_log = dir.path("custom.log");
    let extra = format!(
        r#"    access_log:
    - name: envoy.access_loggers.file
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
        path: {}
    - name: envoy.access_loggers.file
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
        path: {}
        log_format:
          text_format_source:
            inline_string: "%REQ(:METHOD)% %REQ(:PATH)% %PROTOCOL% %RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_SENT% %REQ(X-MISSING)% %DOWNSTREAM_TLS_VERSION% %RESPONSE_CODE_DETAILS%\n"
"#,
        default_log.display(),
        custom_log.display()
    );
    let cfg = dir.write(
        "envoy.yaml",
        bootstrap(&plain_listener("plain", "p", &[], &extra)),
    );
    let hoist = Hoist::start(&cfg, &["--concurrency", "1"]);
    let addr = hoist.addr("plain");
    let out = curl(&[
        "-A",
        "test-agent/1",
        "-o",
        "/dev/null",
        &format!("http://{addr}/hello?x=1"),
    ]);
    assert!(out.status.success());
    let _ = raw_exchange(addr, b"NOT HTTP\r\n\r\n");
    let lines = wait_for_lines(&custom_log, 2);
    assert_eq!(
        lines.first().map(String::as_str),
        Some("GET /hello?x=1 HTTP/1.1 200 - 17 - - direct_response"),
        "{lines:?}"
    );
    assert!(
        lines.get(1).is_some_and(|l| l.contains(" 400 DPE ")),
        "{lines:?}"
    );
    let lines = wait_for_lines(&default_log, 2);
    let first = &lines[0];
    // [2024-01-01T00:00:00.000Z] "GET /hello?x=1 HTTP/1.1" 200 - 0 17 3 - "-" "test-agent/1" "<uuid>" "127.0.0.1:port" "-"
    assert!(first.starts_with('['), "{first}");
    assert!(
        first.contains("] \"GET /hello?x=1 HTTP/1.1\" 200 - 0 17 "),
        "{first}"
    );
    assert!(first.contains("\"test-agent/1\""), "{first}");
    assert!(first.contains(&format!("\"{addr}\" \"-\"")), "{first}");
}

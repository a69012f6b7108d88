//! The CRS regression stages that the engine's corpus test skips, checked against the proxy
//! instead. A stage whose only expectation is a 4xx status (a malformed request line, a bad
//! Content-Length, a header with a bare CR...) was written for a web server that refuses the
//! request before ModSecurity sees it; `crates/hoist-waf/tests/crs.rs` cannot check it in
//! process and skips it. Here each such stage's request is sent byte for byte, as go-ftw
//! would write it, to the binary with the CRS in blocking mode, and must be refused (see
//! `refused`). The test prints which status each stage got, so a stage the HTTP layer lets
//! through (and the WAF then blocks with its 403) shows.
//!
//! The corpus comes from `HOIST_CRS_TESTS` (else `../shared/crs/tests`), the rules from
//! `HOIST_CRS_DIR` (else `../shared/crs`); `HOIST_SKIP_CRS_TESTS=1` skips when they are absent.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;
mod waf_support;

use std::path::{Path, PathBuf};

use serde_json::Value;
use support::*;
use waf_support::*;

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The stage's expectations are a 4xx status and no rule ids to see: the corpus test's skip.
fn only_expects_a_4xx(output: &Value) -> bool {
    let log = output.get("log").unwrap_or(&Value::Null);
    let expects_ids = [log.get("expect_ids"), output.get("expect_ids")]
        .into_iter()
        .flatten()
        .any(|ids| ids.as_array().is_some_and(|a| !a.is_empty()));
    let status = output.get("status").and_then(Value::as_u64);
    !expects_ids && status.is_some_and(|s| (400..500).contains(&s))
}

/// The request as go-ftw writes it: `encoded_request` or `raw_request` as they are, else the
/// request line, the headers in the file's order, and the body; with its default
/// `autocomplete_headers`, a Content-Length for a body that states none and
/// `Connection: close`.
fn raw_request(input: &Value) -> Vec<u8> {
    if let Some(encoded) = input.get("encoded_request").and_then(Value::as_str) {
        return decode_base64(encoded);
    }
    if let Some(raw) = input.get("raw_request").and_then(Value::as_str) {
        return raw.as_bytes().to_vec();
    }
    let text = |k: &str, d: &str| input.get(k).map(as_text).unwrap_or_else(|| d.to_string());
    let headers: Vec<(String, String)> = match input.get("headers") {
        Some(Value::Object(m)) => m.iter().map(|(k, v)| (k.clone(), as_text(v))).collect(),
        _ => Vec::new(),
    };
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let body = text("data", "");
    let autocomplete = input
        .get("autocomplete_headers")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let mut out = format!(
        "{} {} {}\r\n",
        text("method", "GET"),
        text("uri", "/"),
        text("version", "HTTP/1.1")
    );
    for (k, v) in &headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    if autocomplete && !body.is_empty() && !has("content-length") {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    if autocomplete && !has("connection") {
        out.push_str("Connection: close\r\n");
    }
    out.push_str("\r\n");
    out.push_str(&body);
    out.into_bytes()
}

/// `encoded_request` as go-ftw reads it: standard base64, line breaks allowed.
fn decode_base64(text: &str) -> Vec<u8> {
    use base64::Engine;
    let text: String = text.split_ascii_whitespace().collect();
    base64::engine::general_purpose::STANDARD
        .decode(text)
        .unwrap()
}

/// Every stage the corpus test skips for its 4xx: (label, request).
fn rejected_stages(tests: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(tests)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_dir())
        .flat_map(|family| std::fs::read_dir(family.path()).unwrap().flatten())
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&file).unwrap();
        let doc: Value = serde_saphyr::from_str(&text).unwrap();
        let tests = doc.get("tests").and_then(Value::as_array);
        for (index, test) in tests.into_iter().flatten().enumerate() {
            let id = test
                .get("test_id")
                .map(as_text)
                .unwrap_or_else(|| (index + 1).to_string());
            let stages = test.get("stages").and_then(Value::as_array);
            for stage in stages.into_iter().flatten() {
                if only_expects_a_4xx(stage.get("output").unwrap_or(&Value::Null)) {
                    let input = stage.get("input").unwrap_or(&Value::Null);
                    out.push((format!("{name}-{id}"), raw_request(input)));
                }
            }
        }
    }
    out
}

/// What counts as refusing: a 4xx (the HTTP layer's 400 for a malformed request, or the WAF's
/// 403), or the two answers RFC 9110 gives a well-formed request the server does not
/// implement: 501 for CONNECT and 505 for an HTTP version other than 1.0 and 1.1 (the
/// corpus's Apache answers 400 to those too). Never the route's 200.
fn refused(status: u16) -> bool {
    (400..500).contains(&status) || status == 501 || status == 505
}

#[test]
fn crs_stages_only_a_server_can_check_are_refused_by_the_proxy() {
    let (Some(crs), Some(tests)) = (crs_dir(), crs_tests()) else {
        return;
    };
    let stages = rejected_stages(&tests);
    // The corpus at the time of writing has 22; an empty list would prove nothing.
    assert!(stages.len() >= 10, "only {} stages found", stages.len());
    let dir = TempDir::new("crs-rejected");
    let filter = native_filter_json(&coraza_json(&crs_directives(&crs)));
    let yaml = bootstrap(&plain_listener("plain", "ingress_http", &[], ""));
    let yaml = insert_before(&yaml, "- name: envoy.filters.http.router", &filter);
    let hoist = Hoist::start(&dir.write("envoy.yaml", yaml), &["--concurrency", "1"]);
    let addr = hoist.addr("plain");
    let mut answers = Vec::new();
    let mut wrong = Vec::new();
    for (label, request) in &stages {
        let response = raw_exchange(addr, request);
        let line = response.split(|&b| b == b'\r').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line).into_owned();
        let status: u16 = line.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        answers.push(format!("{label} {status}"));
        if !refused(status) {
            wrong.push(format!("{label}: {line:?}"));
        }
    }
    eprintln!("crs stages refused by the proxy: {}", answers.join(", "));
    assert!(wrong.is_empty(), "not refused: {wrong:#?}");
    // The HTTP layer refuses before a WAF transaction exists; whatever it let through, the
    // WAF must have interrupted, and those are the 403s.
    let blocked = answers.iter().filter(|a| a.ends_with(" 403")).count() as u64;
    if blocked > 0 {
        hoist.wait_stat("http.ingress_http.waf.tx_interrupted", blocked);
    }
    assert_eq!(hoist.stat("http.ingress_http.waf.tx_total"), blocked);
}

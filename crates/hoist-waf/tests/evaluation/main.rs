//! What the evaluation shortcuts must not change: transformed values shared between rules
//! (per value and chain), the prefilter (negation, captures, multiMatch, @pm, one-byte
//! literals), rule gates (exclusions, values that appear in a later phase, TX targets),
//! skipAfter jumps resolved at load, regex groups and `@contains` read without its copies.

use hoist_waf::{RuleSet, Transaction};
use std::path::Path;
use std::sync::Arc;

mod gates;
mod multimatch;
mod prefilter;
mod regex_groups;
mod transactions;

fn rules(text: &str) -> Arc<RuleSet> {
    match RuleSet::from_str(text, Path::new("test.conf")) {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("rules do not load: {e}"),
    }
}

/// Runs a GET of `uri` through phases 1 and 2 and returns the transaction.
fn get(rules: &Arc<RuleSet>, uri: &str) -> Transaction {
    let mut tx = Transaction::new(rules.clone(), "10.0.0.1", "t");
    tx.process_request_line("GET", uri, "HTTP/1.1");
    tx.add_request_header("Host", b"example.com");
    tx.process_request_headers();
    tx.process_request_body();
    tx
}

/// Phase 1 of a GET of `uri` with these request headers.
fn with_headers(rules: &Arc<RuleSet>, uri: &str, headers: &[(&str, &[u8])]) -> Transaction {
    let mut tx = Transaction::new(rules.clone(), "10.0.0.1", "t");
    tx.process_request_line("GET", uri, "HTTP/1.1");
    for (name, value) in headers {
        tx.add_request_header(name, value);
    }
    tx.process_request_headers();
    tx
}

/// A GET of `/` answered 200 with an HTML `body`, through phase 4.
fn get_with_response_body(rules: &Arc<RuleSet>, body: &[u8]) -> Transaction {
    let mut tx = get(rules, "/");
    tx.set_response_status(200, "HTTP/1.1");
    tx.add_response_header("Content-Type", b"text/html");
    tx.process_response_headers();
    assert!(tx.wants_response_body());
    tx.append_response_body(body);
    tx.process_response_body();
    tx
}

fn tx_var(tx: &Transaction, name: &str) -> Option<String> {
    tx.tx_var(name)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// A form POST through phases 1 and 2, the body buffered before phase 1 runs (as a proxy
/// that reads a small body with the headers may do): its arguments exist only from phase 2.
fn post(rules: &Arc<RuleSet>, uri: &str, body: &[u8]) -> Transaction {
    let mut tx = Transaction::new(rules.clone(), "10.0.0.1", "t");
    tx.process_request_line("POST", uri, "HTTP/1.1");
    tx.add_request_header("Content-Type", b"application/x-www-form-urlencoded");
    tx.append_request_body(body);
    tx.process_request_headers();
    tx.process_request_body();
    tx
}

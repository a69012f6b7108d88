//! What the request fuzz targets share: how an input becomes a transaction, and what of a
//! finished transaction two rule sets must agree on.

use hoist_waf::{RuleSet, Transaction};
use std::sync::Arc;

/// Runs `data` through `rules` as one transaction: the input up to the first blank line is
/// the request line and `Name: value` headers, the rest the body, which also comes back as
/// a text/html response body. `before` sees the transaction before the request line.
pub fn run(rules: Arc<RuleSet>, data: &[u8], before: impl FnOnce(&mut Transaction)) -> Transaction {
    let text = String::from_utf8_lossy(data);
    let (head, body) = text.split_once("\n\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let line = lines.next().unwrap_or("");
    let mut parts = line.splitn(3, ' ');
    let (method, uri, proto) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    let mut tx = Transaction::new(rules, "127.0.0.1", "fuzz");
    before(&mut tx);
    tx.process_request_line(method, uri, proto);
    for l in lines {
        if let Some((k, v)) = l.split_once(':') {
            tx.add_request_header(k, v.trim().as_bytes());
        }
    }
    tx.process_request_headers();
    tx.append_request_body(body.as_bytes());
    tx.process_request_body();
    tx.set_response_status(200, "HTTP/1.1");
    tx.add_response_header("Content-Type", b"text/html");
    tx.process_response_headers();
    tx.append_response_body(body.as_bytes());
    tx.process_response_body();
    tx.process_logging();
    tx
}

/// The matched rules (id, phase, log line) and the interruption (status, rule id).
pub type Outcome = (Vec<(i64, u8, String)>, Option<(u16, i64)>);

pub fn outcome(tx: &Transaction) -> Outcome {
    let matched = tx
        .matched_rules()
        .iter()
        .map(|m| (m.id, m.phase, m.log_line().to_string()));
    (
        matched.collect(),
        tx.interruption().map(|i| (i.status, i.rule_id)),
    )
}

//! The constant block's TX, replayed into each transaction by restoring only what the
//! previous transaction wrote (`tx_vars`), must leave no trace of that transaction: with the
//! full CRS, a mix of clean and attacking requests is run one after another on one rule set
//! (each transaction but the first resets the previous one's TX), and each must match,
//! interrupt and score exactly as the same request on the path that evaluates every rule
//! from an empty TX. In debug builds `TxVars::reset_to` also asserts the map equals the
//! block's after each reset.
//!
//! The CRS comes from `HOIST_CRS_TESTS`' parent or `../shared/crs`; `HOIST_SKIP_CRS_TESTS=1`
//! skips the test when it is absent, as for the corpus test.

use hoist_waf::{RuleSet, Transaction};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn crs_dir() -> PathBuf {
    match std::env::var_os("HOIST_CRS_TESTS") {
        Some(d) => PathBuf::from(d).join(".."),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs"),
    }
}

fn load_crs(crs: &Path) -> Arc<RuleSet> {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/base.conf");
    let text = format!(
        "Include {}\nInclude {}\nInclude {}\n",
        base.display(),
        crs.join("crs-setup.conf.example").display(),
        crs.join("rules/*.conf").display()
    );
    match RuleSet::from_str(&text, &crs.join("replay-test.conf")) {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("CRS does not load: {e}"),
    }
}

/// (method, uri, extra headers, body)
type Request = (
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
);

const REQUESTS: &[Request] = &[
    ("GET", "/", &[], ""),
    ("GET", "/search?q=1%27%20or%20%271%27%3D%271", &[], ""),
    (
        "GET",
        "/p?id=5&name=ann",
        &[("Cookie", "session=abc; theme=dark")],
        "",
    ),
    (
        "GET",
        "/x?a=<script>alert(1)</script>",
        &[("Referer", "https://a.example/")],
        "",
    ),
    (
        "GET",
        "/",
        &[("Proxy", "http://evil"), ("Lock-Token", "x")],
        "",
    ),
    ("GET", "/etc/passwd?f=../../../../etc/passwd", &[], ""),
    (
        "POST",
        "/form",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        "a=1&b=two+words&c=union+select+password+from+users",
    ),
    (
        "POST",
        "/form",
        &[("Content-Type", "application/x-www-form-urlencoded")],
        "name=ann&msg=hello+there",
    ),
    (
        "GET",
        "/cmd?c=;cat%20/etc/passwd",
        &[("User-Agent", "sqlmap/1.7")],
        "",
    ),
    (
        "GET",
        "/ok?page=2&sort=asc",
        &[("Accept-Language", "en-US,en;q=0.5")],
        "",
    ),
];

/// Matched rule ids, the interruption and the scores, after phases 1 to 5.
fn run(
    rules: &Arc<RuleSet>,
    req: &Request,
    slow: bool,
) -> (Vec<i64>, Option<i64>, Vec<String>, bool) {
    let (method, uri, headers, body) = req;
    let mut tx = Transaction::new(rules.clone(), "10.0.0.9", "replay");
    if slow {
        // Any TX set before phase 1 makes the transaction evaluate every rule.
        tx.set_tx_var("zz_slow_path", b"1");
    }
    tx.process_request_line(method, uri, "HTTP/1.1");
    tx.add_request_header("Host", b"shop.example.com");
    tx.add_request_header(
        "User-Agent",
        b"Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0",
    );
    tx.add_request_header("Accept", b"text/html");
    for (k, v) in *headers {
        tx.add_request_header(k, v.as_bytes());
    }
    if !body.is_empty() {
        tx.add_request_header("Content-Length", body.len().to_string().as_bytes());
    }
    tx.process_request_headers();
    tx.append_request_body(body.as_bytes());
    tx.process_request_body();
    tx.set_response_status(200, "HTTP/1.1");
    tx.add_response_header("Content-Type", b"text/html");
    tx.process_response_headers();
    tx.process_response_body();
    tx.process_logging();
    let ids = tx.matched_rules().iter().map(|m| m.id).collect();
    let scores = [
        "blocking_inbound_anomaly_score",
        "detection_inbound_anomaly_score",
        "inbound_anomaly_score_pl1",
        "sql_injection_score",
        "xss_score",
        "rce_score",
        "lfi_score",
    ]
    .iter()
    .map(|n| {
        let v = tx.tx_var(n).unwrap_or_default();
        format!("{n}={}", String::from_utf8_lossy(v))
    })
    .collect();
    (
        ids,
        tx.interruption().map(|i| i.rule_id),
        scores,
        tx.replayed_constant_block(),
    )
}

#[test]
fn replayed_transactions_keep_nothing_of_the_previous_one() {
    let crs = crs_dir();
    if !crs.join("rules").is_dir() {
        if std::env::var_os("HOIST_SKIP_CRS_TESTS").is_some_and(|v| v == "1") {
            eprintln!(
                "replay: no CRS at {}, skipped (HOIST_SKIP_CRS_TESTS=1)",
                crs.display()
            );
            return;
        }
        panic!(
            "replay: no CRS at {}: set HOIST_CRS_TESTS or HOIST_SKIP_CRS_TESTS=1",
            crs.display()
        );
    }
    let rules = load_crs(&crs);
    let expected: Vec<_> = REQUESTS.iter().map(|r| run(&rules, r, true)).collect();
    let mut replayed = 0;
    let mut flagged = 0;
    // Forwards, backwards and forwards again: each request follows different ones.
    let order = (0..REQUESTS.len())
        .chain((0..REQUESTS.len()).rev())
        .chain(0..REQUESTS.len());
    for i in order {
        let (ids, interruption, scores, replay) = run(&rules, &REQUESTS[i], false);
        let (want_ids, want_interruption, want_scores, _) = &expected[i];
        assert_eq!(&ids, want_ids, "request {i}: matched rules");
        assert_eq!(
            &interruption, want_interruption,
            "request {i}: interruption"
        );
        assert_eq!(&scores, want_scores, "request {i}: scores");
        replayed += usize::from(replay);
        flagged += usize::from(!ids.is_empty());
    }
    // The test means something only if the block was replayed and requests did match.
    assert!(
        replayed >= 2 * REQUESTS.len(),
        "only {replayed} transactions replayed"
    );
    assert!(
        flagged >= REQUESTS.len(),
        "only {flagged} transactions matched a rule"
    );
}

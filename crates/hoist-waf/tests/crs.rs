//! The CRS regression corpus (go-ftw YAML), run in-process in detection mode.
//!
//! Directory: `HOIST_CRS_TESTS` (the `tests/` folder of a CRS checkout), else
//! `../shared/crs/tests` next to the workspace. `HOIST_SKIP_CRS_TESTS=1` skips the run when
//! the corpus is absent.
//!
//! Every request also runs through the same rules loaded without the engine's shortcuts
//! (`RuleSet::from_str_without_shortcuts`: no prefilter, gates, regex groups, byte filters,
//! constant plan...), and both must log the same rules with the same lines and interrupt the
//! same way: the corpus's attacks and their near misses are where a shortcut that drops a
//! match would show.

use hoist_waf::{RuleSet, Transaction};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The run fails when fewer tests than this pass: raise it as the engine improves.
const RATCHET_PASSED: usize = 3179;

const SETUP_900005: &str = "SecAction \"id:900005,phase:1,nolog,pass,ctl:ruleEngine=DetectionOnly,\
ctl:ruleRemoveById=910000,setvar:tx.blocking_paranoia_level=4,setvar:tx.crs_validate_utf8_encoding=1,\
setvar:tx.arg_name_length=100,setvar:tx.arg_length=400,setvar:tx.total_arg_length=64000,\
setvar:tx.max_num_args=255,setvar:tx.max_file_size=64100,setvar:tx.combined_file_sizes=65535\"";

fn corpus_dir() -> PathBuf {
    match std::env::var_os("HOIST_CRS_TESTS") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs/tests"),
    }
}

/// The rule set the corpus runs against; `shortcuts: false` gives the reference.
fn load_rules(crs: &Path, shortcuts: bool) -> RuleSet {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/base.conf");
    let text = format!(
        "Include {}\n{SETUP_900005}\nInclude {}\nInclude {}\n",
        base.display(),
        crs.join("crs-setup.conf.example").display(),
        crs.join("rules/*.conf").display()
    );
    let origin = crs.join("hoist-crs-test.conf");
    let loaded = if shortcuts {
        RuleSet::from_str(&text, &origin)
    } else {
        RuleSet::from_str_without_shortcuts(&text, &origin)
    };
    match loaded {
        Ok(r) => r,
        Err(e) => panic!("CRS does not load: {e}"),
    }
}

struct Request {
    method: String,
    uri: String,
    version: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
}

fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn build_request(input: &Value) -> Result<Request, String> {
    if let Some(encoded) = input.get("encoded_request").and_then(Value::as_str) {
        use base64::Engine;
        let raw = base64::engine::general_purpose::STANDARD
            .decode(encoded.split_ascii_whitespace().collect::<String>())
            .map_err(|e| format!("encoded_request: {e}"))?;
        return parse_raw(&raw);
    }
    let text = |k: &str, d: &str| input.get(k).map(as_text).unwrap_or_else(|| d.to_string());
    let mut headers: Vec<(String, Vec<u8>)> = match input.get("headers") {
        Some(Value::Object(m)) => m
            .iter()
            .map(|(k, v)| (k.clone(), as_text(v).into_bytes()))
            .collect(),
        _ => Vec::new(),
    };
    let mut body = input
        .get("data")
        .map(as_text)
        .unwrap_or_default()
        .into_bytes();
    let has = |h: &[(String, Vec<u8>)], n: &str| h.iter().any(|(k, _)| k.eq_ignore_ascii_case(n));
    let multipart = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("content-type") && v.to_ascii_lowercase().starts_with(b"multipart/")
    });
    if multipart && !body.contains(&b'\r') {
        body = String::from_utf8_lossy(&body)
            .replace('\n', "\r\n")
            .into_bytes();
    }
    let autocomplete = input
        .get("autocomplete_headers")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let method = text("method", "GET");
    if autocomplete && !body.is_empty() && !has(&headers, "content-type") {
        headers.push((
            "Content-Type".into(),
            b"application/x-www-form-urlencoded".to_vec(),
        ));
    }
    // A client frames every body, and states an empty one for methods that carry a body.
    let body_method = matches!(method.as_str(), "POST" | "PUT" | "PATCH");
    if autocomplete && (!body.is_empty() || body_method) && !has(&headers, "content-length") {
        headers.push(("Content-Length".into(), body.len().to_string().into_bytes()));
    }
    frame_body(&mut headers, &mut body);
    Ok(Request {
        method,
        uri: text("uri", "/"),
        version: text("version", "HTTP/1.1"),
        headers,
        body,
    })
}

fn parse_raw(raw: &[u8]) -> Result<Request, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    let split = split.or_else(|| {
        raw.windows(2)
            .position(|w| w == b"\n\n")
            .map(|i| (i, i + 2))
    });
    let (head_end, body_start) = split.unwrap_or((raw.len(), raw.len()));
    let head = String::from_utf8_lossy(&raw[..head_end]);
    let mut lines = head.lines();
    let line = lines.next().ok_or("empty encoded request")?;
    let mut parts = line.split(' ');
    let method = parts.next().unwrap_or("GET").to_string();
    let uri = parts.next().unwrap_or("/").to_string();
    let version = parts.next().unwrap_or("HTTP/1.1").trim().to_string();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().as_bytes().to_vec()))
        .collect();
    Ok(Request {
        method,
        uri,
        version,
        headers,
        body: raw[body_start..].to_vec(),
    })
}

/// What an HTTP/1.1 server hands on as the body: chunked bodies are de-chunked and lose
/// Content-Length (RFC 9112 6.3), and without either header there is no body at all.
fn frame_body(headers: &mut Vec<(String, Vec<u8>)>, body: &mut Vec<u8>) {
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.to_ascii_lowercase().ends_with(b"chunked")
    });
    if chunked {
        headers.retain(|(k, _)| !k.eq_ignore_ascii_case("content-length"));
        let mut out = Vec::new();
        let mut rest = body.as_slice();
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let size = usize::from_str_radix(String::from_utf8_lossy(&rest[..eol]).trim(), 16)
                .unwrap_or(0);
            rest = &rest[eol + 2..];
            if size == 0 || size > rest.len() {
                break;
            }
            out.extend_from_slice(&rest[..size]);
            rest = rest.get(size + 2..).unwrap_or(&[]);
        }
        *body = out;
    } else if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-length"))
    {
        body.clear();
    }
}

/// albedo's `/reflect`: the JSON body says what the backend answers.
type Response = (u16, Vec<(String, Vec<u8>)>, Vec<u8>);

fn response_for(req: &Request) -> Response {
    let mut headers = Vec::new();
    let mut status = 200;
    let mut body = Vec::new();
    if req.uri.starts_with("/reflect") {
        if let Ok(v) = serde_json::from_slice::<Value>(&req.body) {
            if let Some(s) = v.get("status").and_then(Value::as_u64) {
                status = u16::try_from(s).unwrap_or(200);
            }
            if let Some(Value::Object(h)) = v.get("headers") {
                headers.extend(h.iter().map(|(k, v)| (k.clone(), as_text(v).into_bytes())));
            }
            if let Some(b) = v.get("body").and_then(Value::as_str) {
                body = b.as_bytes().to_vec();
            }
        }
    }
    if !headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
    {
        headers.push(("Content-Type".into(), b"text/plain; charset=utf-8".to_vec()));
    }
    (status, headers, body)
}

fn ids(v: Option<&Value>) -> Vec<i64> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).collect())
        .unwrap_or_default()
}

enum Outcome {
    Pass,
    Fail(String),
    Skip(String),
}

/// What a transaction did: each matched rule (id, phase, logged, log line) and the
/// interruption, for comparing two rule sets.
type Trace = (Vec<(i64, u8, bool, String)>, Option<(u16, i64)>);

fn trace(tx: &Transaction) -> Trace {
    let matched = tx
        .matched_rules()
        .iter()
        .map(|m| (m.id, m.phase, m.logged(), m.log_line().to_string()))
        .collect();
    (matched, tx.interruption().map(|i| (i.status, i.rule_id)))
}

/// `req` through every phase, with the response `response_for` gives.
fn transact(rules: &Arc<RuleSet>, req: &Request) -> Transaction {
    let mut tx = Transaction::new(Arc::clone(rules), "127.0.0.1", "ftw");
    tx.process_request_line(&req.method, &req.uri, &req.version);
    for (k, v) in &req.headers {
        tx.add_request_header(k, v);
    }
    tx.process_request_headers();
    tx.append_request_body(&req.body);
    tx.process_request_body();
    let (status, headers, body) = response_for(req);
    tx.set_response_status(status, "HTTP/1.1");
    for (k, v) in &headers {
        tx.add_response_header(k, v);
    }
    tx.process_response_headers();
    if tx.wants_response_body() {
        tx.append_response_body(&body);
    }
    tx.process_response_body();
    tx.process_logging();
    tx
}

/// Runs `stage` against `rules` and, when it has a request, against `reference` too;
/// the third value says how the two differed, if they did.
fn run_stage(
    rules: &Arc<RuleSet>,
    reference: &Arc<RuleSet>,
    stage: &Value,
) -> (bool, Outcome, Option<String>) {
    let input = stage.get("input").cloned().unwrap_or(Value::Null);
    let divergence = build_request(&input).ok().and_then(|req| {
        let (ours, theirs) = (
            trace(&transact(rules, &req)),
            trace(&transact(reference, &req)),
        );
        (ours != theirs).then(|| {
            let only = |a: &Trace, b: &Trace| -> Vec<_> {
                a.0.iter().filter(|m| !b.0.contains(m)).cloned().collect()
            };
            format!(
                "only with shortcuts {:?}, only without {:?}, interruptions {:?} / {:?}",
                only(&ours, &theirs),
                only(&theirs, &ours),
                ours.1,
                theirs.1
            )
        })
    });
    let (positive, outcome) = check_stage(rules, stage);
    (positive, outcome, divergence)
}

fn check_stage(rules: &Arc<RuleSet>, stage: &Value) -> (bool, Outcome) {
    let input = stage.get("input").cloned().unwrap_or(Value::Null);
    let output = stage.get("output").cloned().unwrap_or(Value::Null);
    let log = output.get("log").cloned().unwrap_or(Value::Null);
    let expect = ids(log.get("expect_ids").or_else(|| output.get("expect_ids")));
    let no_expect = ids(log
        .get("no_expect_ids")
        .or_else(|| output.get("no_expect_ids")));
    let match_regex = log.get("match_regex").and_then(Value::as_str);
    let no_match_regex = log.get("no_match_regex").and_then(Value::as_str);
    let positive = !expect.is_empty() || match_regex.is_some();
    let status = output.get("status").and_then(Value::as_u64);
    if expect.is_empty() && status.is_some_and(|s| (400..500).contains(&s)) {
        return (
            positive,
            Outcome::Skip(
                "expects a 4xx status: refused by the proxy, checked in crates/hoist/tests/crs_rejected.rs".into(),
            ),
        );
    }
    if expect.is_empty()
        && no_expect.is_empty()
        && match_regex.is_none()
        && no_match_regex.is_none()
    {
        let why = if output.get("status").is_some() {
            "only checks an HTTP status other than a 4xx: nothing the engine decides"
        } else {
            "no log expectation"
        };
        return (positive, Outcome::Skip(why.into()));
    }
    let req = match build_request(&input) {
        Ok(r) => r,
        Err(e) => {
            return (
                positive,
                Outcome::Skip(format!("request not buildable: {e}")),
            )
        }
    };
    let tx = transact(rules, &req);
    let logged: Vec<i64> = tx
        .matched_rules()
        .iter()
        .filter(|m| m.logged())
        .map(|m| m.id)
        .collect();
    let missing: Vec<i64> = expect
        .iter()
        .copied()
        .filter(|id| !logged.contains(id))
        .collect();
    let unwanted: Vec<i64> = no_expect
        .iter()
        .copied()
        .filter(|id| logged.contains(id))
        .collect();
    let mut problems = Vec::new();
    if !missing.is_empty() {
        problems.push(format!("expected {missing:?} not logged"));
    }
    if !unwanted.is_empty() {
        problems.push(format!("unexpected {unwanted:?} logged"));
    }
    if let Some(re) = match_regex {
        if let Ok(re) = regex::Regex::new(re) {
            if !tx
                .matched_rules()
                .iter()
                .any(|m| m.logged() && re.is_match(m.log_line()))
            {
                problems.push(format!("no log line matches {re}"));
            }
        }
    }
    if let Some(re) = no_match_regex {
        match regex::Regex::new(re) {
            Ok(re) => {
                if let Some(m) = tx
                    .matched_rules()
                    .iter()
                    .find(|m| m.logged() && re.is_match(m.log_line()))
                {
                    problems.push(format!("log line of {} matches {re}", m.id));
                }
            }
            Err(e) => {
                return (
                    positive,
                    Outcome::Skip(format!("no_match_regex does not compile: {e}")),
                )
            }
        }
    }
    if problems.is_empty() {
        (positive, Outcome::Pass)
    } else {
        (
            positive,
            Outcome::Fail(format!("{} (logged {logged:?})", problems.join("; "))),
        )
    }
}

#[derive(Default)]
struct Counts {
    passed: usize,
    failed: usize,
    skipped: usize,
    pos_passed: usize,
    pos_total: usize,
    neg_passed: usize,
    neg_total: usize,
}

impl Counts {
    fn add(&mut self, positive: bool, outcome: &Outcome) {
        match outcome {
            Outcome::Skip(_) => self.skipped += 1,
            Outcome::Pass | Outcome::Fail(_) => {
                let pass = matches!(outcome, Outcome::Pass);
                if pass {
                    self.passed += 1;
                } else {
                    self.failed += 1;
                }
                if positive {
                    self.pos_total += 1;
                    self.pos_passed += usize::from(pass);
                } else {
                    self.neg_total += 1;
                    self.neg_passed += usize::from(pass);
                }
            }
        }
    }

    fn line(&self) -> String {
        format!(
            "{} passed, {} failed, {} skipped (positive {}/{}, negative {}/{})",
            self.passed,
            self.failed,
            self.skipped,
            self.pos_passed,
            self.pos_total,
            self.neg_passed,
            self.neg_total
        )
    }
}

#[test]
fn crs_regression_corpus() {
    let dir = corpus_dir();
    if !dir.is_dir() {
        if std::env::var_os("HOIST_SKIP_CRS_TESTS").is_some_and(|v| v == "1") {
            eprintln!(
                "crs: corpus {} missing, skipped (HOIST_SKIP_CRS_TESTS=1)",
                dir.display()
            );
            return;
        }
        panic!(
            "crs: regression corpus not found at {}: set HOIST_CRS_TESTS to a CRS tests/ directory \
             or HOIST_SKIP_CRS_TESTS=1",
            dir.display()
        );
    }
    let crs = dir.parent().unwrap_or(Path::new(".")).to_path_buf();
    let rules = Arc::new(load_rules(&crs, true));
    let reference = Arc::new(load_rules(&crs, false));
    eprintln!(
        "crs: {} rules loaded; {} need fancy-regex: {:?}",
        rules.rule_count(),
        rules.fancy_regex_rules.len(),
        rules.fancy_regex_rules
    );
    let (prefiltered, rx) = rules.prefiltered_rx();
    eprintln!(
        "crs: {} transformation chain nodes; {prefiltered} of {rx} @rx rules prefiltered",
        rules.chains.len()
    );
    let (groups, grouped) = rules.regex_groups();
    eprintln!("crs: {grouped} rule links in {groups} regex groups");
    let (block, decided) = rules.constant_rules();
    eprintln!("crs: constant plan: a block of {block} phase-1 entries, {decided} rules decided");
    let verbose = std::env::var_os("HOIST_CRS_VERBOSE").is_some();
    let only = std::env::var("HOIST_CRS_ONLY").ok();
    let mut total = Counts::default();
    let mut families: BTreeMap<String, Counts> = BTreeMap::new();
    let mut skips: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut divergences = Vec::new();
    let mut family_dirs: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    family_dirs.sort();
    for family_dir in family_dirs {
        let family = family_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut files: Vec<PathBuf> = std::fs::read_dir(&family_dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect();
        files.sort();
        for file in files {
            let name = file
                .file_stem()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if only.as_deref().is_some_and(|o| !name.starts_with(o)) {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let doc: Value = match serde_saphyr::from_str(&text) {
                Ok(d) => d,
                Err(e) => {
                    skips
                        .entry(format!("YAML not readable: {e}"))
                        .or_default()
                        .push(name.clone());
                    continue;
                }
            };
            let tests = doc
                .get("tests")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            for (index, test) in tests.iter().enumerate() {
                let test_id = test
                    .get("test_id")
                    .map(as_text)
                    .unwrap_or_else(|| (index + 1).to_string());
                let label = format!("{name}-{test_id}");
                let stages = test
                    .get("stages")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                for stage in &stages {
                    let (positive, outcome, divergence) = run_stage(&rules, &reference, stage);
                    if let Some(d) = divergence {
                        divergences.push(format!("{label}: {d}"));
                    }
                    total.add(positive, &outcome);
                    families
                        .entry(family.clone())
                        .or_default()
                        .add(positive, &outcome);
                    match &outcome {
                        Outcome::Skip(why) => {
                            skips.entry(why.clone()).or_default().push(label.clone())
                        }
                        Outcome::Fail(why) => failures.push(format!("{label}: {why}")),
                        Outcome::Pass => {}
                    }
                }
            }
        }
    }
    for (family, c) in &families {
        eprintln!("crs {family}: {}", c.line());
    }
    for (why, labels) in &skips {
        eprintln!("crs skipped {} ({why}): {}", labels.len(), labels.join(" "));
    }
    if verbose {
        for f in &failures {
            eprintln!("crs FAIL {f}");
        }
    }
    eprintln!("crs: {}", total.line());
    for d in &divergences {
        eprintln!("crs DIVERGES {d}");
    }
    assert!(
        divergences.is_empty(),
        "crs: {} stages match differently without the shortcuts (listed above)",
        divergences.len()
    );
    assert!(
        only.is_some() || total.passed >= RATCHET_PASSED,
        "crs: {} passed, below the ratchet {RATCHET_PASSED}",
        total.passed
    );
}

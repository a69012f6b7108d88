//! What the evaluation shortcuts must not change: transformed values shared between rules
//! (per value and chain), the prefilter (negation, captures, multiMatch, @pm, one-byte
//! literals), rule gates (exclusions, values that appear in a later phase, TX targets),
//! skipAfter jumps resolved at load, regex groups and `@contains` read without its copies.

use hoist_waf::{RuleSet, Transaction};
use std::path::Path;
use std::sync::Arc;

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

#[test]
fn chains_sharing_a_value_do_not_leak_into_each_other() {
    let r = rules(
        r#"
SecRule ARGS "@rx ^abc$" "id:1,phase:1,pass,nolog,t:none,t:lowercase,setvar:tx.lower=1"
SecRule ARGS "@rx ^ABC$" "id:2,phase:1,pass,nolog,t:none,setvar:tx.plain=1"
SecRule ARGS "@rx ^abc$" "id:3,phase:1,pass,nolog,t:none,setvar:tx.wrong=1"
SecRule ARGS "@rx ^abc$" "id:4,phase:2,pass,nolog,t:none,t:lowercase,t:trim,setvar:tx.prefix=1"
"#,
    );
    let tx = get(&r, "/?q=ABC");
    assert_eq!(tx_var(&tx, "lower").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "plain").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "wrong"), None);
    assert_eq!(tx_var(&tx, "prefix").as_deref(), Some("1"));
}

#[test]
fn negated_regex_matches_when_its_literal_is_absent() {
    let r = rules(r#"SecRule ARGS "!@rx select" "id:1,phase:1,deny,status:403""#);
    assert!(get(&r, "/?q=hello").interruption().is_some());
    // The prefilter folds case; the regex does not: SELECT is not `select`.
    assert!(get(&r, "/?q=SELECT").interruption().is_some());
    assert!(get(&r, "/?q=select").interruption().is_none());
}

#[test]
fn prefiltered_regex_still_captures_and_matches_case_insensitively() {
    let r = rules(
        r#"SecRule ARGS "@rx (?i)un(ion)\s+select" "id:1,phase:1,pass,nolog,capture,t:none,t:urlDecodeUni,setvar:tx.cap=%{tx.1}""#,
    );
    let tx = get(&r, "/?q=x%2520UnIoN%2520SeLeCt");
    assert_eq!(tx_var(&tx, "cap").as_deref(), Some("IoN"));
    let tx = get(&r, "/?q=onion+select");
    assert_eq!(tx_var(&tx, "cap"), None);
}

#[test]
fn multimatch_sees_the_value_before_and_after_each_transformation() {
    // The raw value has `%3C`; only the urlDecoded one has `<`.
    let r = rules(
        r#"
SecRule ARGS "@rx ^%3c" "id:1,phase:1,pass,nolog,multiMatch,t:none,t:lowercase,t:urlDecode,setvar:tx.multi=1"
SecRule ARGS "@rx ^%3c" "id:2,phase:1,pass,nolog,t:none,t:lowercase,t:urlDecode,setvar:tx.single=1"
SecRule ARGS "@rx ^<x>$" "id:3,phase:1,pass,nolog,multiMatch,t:none,t:lowercase,t:urlDecode,setvar:tx.last=1"
"#,
    );
    let tx = get(&r, "/?q=%253CX%253E");
    assert_eq!(tx_var(&tx, "multi").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "single"), None);
    assert_eq!(tx_var(&tx, "last").as_deref(), Some("1"));
}

#[test]
fn multimatch_rules_are_prefiltered_without_losing_a_step() {
    // A case-sensitive literal that occurs only before t:lowercase (which keeps the
    // prefilter's case-folded hits), or only after t:urlDecode (which does not; ARGS are
    // URL-decoded once when parsed, hence %2553).
    let r = rules(
        r#"SecRule ARGS "@rx Select" "id:1,phase:1,pass,nolog,multiMatch,t:none,t:lowercase,t:urlDecode,setvar:tx.hit=%{matched_var}""#,
    );
    assert_eq!(
        tx_var(&get(&r, "/?q=Select"), "hit").as_deref(),
        Some("select")
    );
    assert_eq!(
        tx_var(&get(&r, "/?q=%2553elect"), "hit").as_deref(),
        Some("Select")
    );
    assert_eq!(tx_var(&get(&r, "/?q=selected+items"), "hit"), None);
    assert_eq!(tx_var(&get(&r, "/?q=nothing"), "hit"), None);
}

/// A multiMatch rule whose steps all leave a value as it is tests that value once, as
/// collected; a chain with a case change still tests the changed value (the shortcut must
/// not take `lowercase` or `cmdLine` for no-ops), and a step that changes the value still
/// counts.
#[test]
fn multimatch_on_values_no_step_changes() {
    let r = rules(
        r#"SecRule ARGS "@rx ^Plain words$" "id:1,phase:1,pass,nolog,multiMatch,t:none,t:urlDecodeUni,t:removeNulls,t:htmlEntityDecode,setvar:tx.hit=%{matched_var}"
SecRule ARGS "@rx ^plain words$" "id:2,phase:1,pass,nolog,multiMatch,t:none,t:urlDecodeUni,t:lowercase,setvar:tx.lower=%{matched_var}"
SecRule ARGS "@rx ^plain words$" "id:3,phase:1,pass,nolog,multiMatch,t:none,t:urlDecodeUni,t:cmdLine,setvar:tx.cmd=%{matched_var}"
SecRule ARGS "@rx ^Plainwords$" "id:4,phase:1,pass,nolog,multiMatch,t:none,t:urlDecodeUni,t:removeWhitespace,setvar:tx.ws=%{matched_var}""#,
    );
    let tx = get(&r, "/?q=Plain+words");
    assert_eq!(tx_var(&tx, "hit").as_deref(), Some("Plain words"));
    assert_eq!(tx_var(&tx, "lower").as_deref(), Some("plain words"));
    assert_eq!(tx_var(&tx, "cmd").as_deref(), Some("plain words"));
    assert_eq!(tx_var(&tx, "ws").as_deref(), Some("Plainwords"));
    // A value one of rule 1's steps changes: tested before and after it.
    let tx = get(&r, "/?q=Plain%2526amp;words");
    assert_eq!(tx_var(&tx, "hit"), None);
    let tx = get(&r, "/?q=Plain%26%2332;words");
    assert_eq!(tx_var(&tx, "hit").as_deref(), Some("Plain words"));
}

#[test]
fn multimatch_punctuation_filter_reads_each_step_not_the_original() {
    // Every match needs `(` or `.`; the argument as sent has neither (base64 of `eval(1)`
    // and of `evaluate`), only its decoded step may.
    let r = rules(
        r#"SecRule ARGS "@rx eval\(|this\.constructor" "id:1,phase:1,pass,nolog,multiMatch,t:none,t:base64Decode,setvar:tx.hit=%{matched_var}""#,
    );
    assert_eq!(
        tx_var(&get(&r, "/?q=ZXZhbCgxKQ%3D%3D"), "hit").as_deref(),
        Some("eval(1)")
    );
    assert_eq!(tx_var(&get(&r, "/?q=ZXZhbHVhdGU%3D"), "hit"), None);
    // The value as sent matches (MATCHED_VAR is then the last step's, as for every multiMatch).
    assert!(tx_var(&get(&r, "/?q=this.constructor"), "hit").is_some());
}

#[test]
fn multimatch_steps_after_a_decode_are_searched_when_they_can_reach_the_filter() {
    // base64 of `%28x` decodes to a value without `(` whose `%28` urlDecodeUni turns into
    // one; base64 of `x+y` decodes to one that nothing after it can give a `(`.
    let r = rules(
        r#"SecRule ARGS "@rx \(" "id:1,phase:1,pass,nolog,multiMatch,t:none,t:base64Decode,t:urlDecodeUni,t:removeWhitespace,setvar:tx.hit=%{matched_var}""#,
    );
    assert_eq!(tx_var(&get(&r, "/?q=JTI4eA"), "hit").as_deref(), Some("(x"));
    assert_eq!(tx_var(&get(&r, "/?q=eCt5"), "hit"), None);
    // `eCt5(` matches as sent; its decoded `x+y` cannot match, but MATCHED_VAR is still the
    // last step's value (`x y` without its space), not that of the step the search stopped at.
    assert_eq!(tx_var(&get(&r, "/?q=eCt5("), "hit").as_deref(), Some("xy"));
}

#[test]
fn multimatch_length_check_keeps_every_decoding_long_enough_to_match() {
    // 934160's chain; the regex's matches are eleven bytes or more. Rule 2 gives what the
    // whole chain makes of the value, for MATCHED_VAR.
    let chain = "t:none,t:urlDecodeUni,t:jsDecode,t:base64Decode,t:urlDecodeUni,t:jsDecode,t:replaceComments";
    let r = rules(&format!(
        r#"SecRule ARGS "@rx while\s*\(true\)" "id:1,phase:1,pass,nolog,multiMatch,{chain},setvar:tx.hit=%{{matched_var}}"
SecRule ARGS "@rx ." "id:2,phase:1,pass,nolog,{chain},setvar:tx.full=%{{matched_var}}""#
    ));
    // `while(true)` in base64, exactly eleven bytes decoded, then with text after a space
    // (decoding stops there).
    for q in ["d2hpbGUodHJ1ZSk", "d2hpbGUodHJ1ZSk+more"] {
        let tx = get(&r, &format!("/?q={q}"));
        assert_eq!(tx_var(&tx, "hit").as_deref(), Some("while(true)"), "{q}");
    }
    // Its first byte written as a JavaScript escape: as sent, its base64 run is empty, but
    // jsDecode changes the value, so the run that counts is the decoded one.
    let tx = get(&r, "/?q=%5Cx642hpbGUodHJ1ZSk");
    assert_eq!(tx_var(&tx, "hit").as_deref(), Some("while(true)"));
    // Ten bytes decoded (`while(true`) cannot hold a match, nor can anything after it: only
    // the value as sent is tested.
    assert_eq!(tx_var(&get(&r, "/?q=d2hpbGUodHJ1ZQ"), "hit"), None);
    // A match as sent: MATCHED_VAR is still the whole chain's value.
    let tx = get(&r, "/?q=while(true)");
    assert!(tx_var(&tx, "hit").is_some());
    assert_eq!(tx_var(&tx, "hit"), tx_var(&tx, "full"));
}

#[test]
fn validation_rules_see_the_bytes_their_chain_brings() {
    // Values that lack every byte a validation operator flags are passed over (see
    // `reach::value_needs`); what the chain can make counts. `%00` as collected (sent as
    // `%2500`) has no NUL, but urlDecodeUni makes one: CRS 920270's shape.
    let r = rules(
        r#"SecRule ARGS "@validateByteRange 1-255" "id:1,phase:1,pass,nolog,t:none,t:urlDecodeUni,setvar:tx.range=%{matched_var_name}"
SecRule ARGS "@validateByteRange 1-255" "id:2,phase:1,pass,nolog,t:none,setvar:tx.raw=%{matched_var_name}"
SecRule ARGS "@validateUtf8Encoding" "id:3,phase:1,pass,nolog,t:none,setvar:tx.utf8=%{matched_var_name}"
SecRule ARGS "@validateUrlEncoding" "id:4,phase:1,pass,nolog,t:none,setvar:tx.url=%{matched_var_name}"
SecRule ARGS "!@validateByteRange 48-57" "id:5,phase:1,pass,nolog,t:none,setvar:tx.digits=%{matched_var_name}""#,
    );
    let tx = get(&r, "/?a=%2500&b=x%C3&c=%25zz&d=123");
    assert_eq!(tx_var(&tx, "range").as_deref(), Some("ARGS:a"));
    assert_eq!(tx_var(&tx, "raw"), None);
    assert_eq!(tx_var(&tx, "utf8").as_deref(), Some("ARGS:b"));
    assert_eq!(tx_var(&tx, "url").as_deref(), Some("ARGS:c"));
    // Negated: matches the value with no byte outside the range.
    assert_eq!(tx_var(&tx, "digits").as_deref(), Some("ARGS:d"));
    let tx = get(&r, "/?a=plain+text&b=123");
    for var in ["range", "raw", "utf8", "url"] {
        assert_eq!(tx_var(&tx, var), None, "{var}");
    }
}

#[test]
fn detect_xss_sees_markup_its_chain_decodes() {
    // detectXSS needs a `<` or a `=`; urlDecodeUni and htmlEntityDecode can make either.
    let r = rules(
        r#"SecRule ARGS "@detectXSS" "id:1,phase:1,pass,nolog,t:none,t:urlDecodeUni,t:htmlEntityDecode,setvar:tx.xss=%{matched_var_name}""#,
    );
    for (query, hit) in [
        ("a=%253Cscript%253E", Some("ARGS:a")),
        ("a=%26lt%3Bscript%26gt%3B", Some("ARGS:a")),
        ("a=x+onerror%3Dalert(1)", Some("ARGS:a")),
        ("a=plain+words&b=x+onerror+alert(1)", None),
    ] {
        let tx = get(&r, &format!("/?{query}"));
        assert_eq!(tx_var(&tx, "xss").as_deref(), hit, "{query}");
    }
}

#[test]
fn multimatch_rule_gated_on_every_step_matches_a_middle_step() {
    // `foo bar` is only in the middle step: not as sent (`foo%20bar`), not after
    // removeWhitespace (`foobar`). The rule's gate must cover each step's values.
    let r = rules(
        r#"SecRule ARGS "@rx foo bar" "id:1,phase:1,pass,nolog,multiMatch,t:none,t:urlDecodeUni,t:removeWhitespace,setvar:tx.hit=%{matched_var}""#,
    );
    assert_eq!(
        tx_var(&get(&r, "/?q=foo%2520bar"), "hit").as_deref(),
        Some("foobar")
    );
    assert_eq!(tx_var(&get(&r, "/?q=foo%2520baz"), "hit"), None);
    assert_eq!(
        tx_var(&get(&r, "/?q=x&p=foo+bar"), "hit").as_deref(),
        Some("foobar")
    );
}

#[test]
fn multimatch_steps_use_the_hits_a_gate_already_scanned() {
    // Rule 1's gate scans each argument after removeWhitespace; rule 2 (multiMatch, same
    // chain) reads that scan for its removeWhitespace step: `ev al(` has no `eval(` until its
    // space is removed, so the step must be found to hold the literal, and one without it
    // must not match.
    let r = rules(
        r#"SecRule ARGS "@rx zzzz" "id:1,phase:2,pass,nolog,t:none,t:removeWhitespace"
SecRule ARGS "@rx eval\(" "id:2,phase:2,pass,nolog,multiMatch,t:none,t:removeWhitespace,setvar:tx.hit=%{matched_var}""#,
    );
    assert_eq!(
        tx_var(&get(&r, "/?q=ev+al(1)"), "hit").as_deref(),
        Some("eval(1)")
    );
    assert_eq!(tx_var(&get(&r, "/?q=ev+il(1)"), "hit"), None);
    assert_eq!(
        tx_var(&get(&r, "/?q=eval(2)"), "hit").as_deref(),
        Some("eval(2)")
    );
}

#[test]
fn skip_after_jumps_to_the_next_marker_of_that_name() {
    let r = rules(
        r#"
SecAction "id:1,phase:1,pass,nolog,skipAfter:END"
SecRule ARGS "@rx ." "id:2,phase:1,deny,status:403"
SecMarker OTHER
SecAction "id:3,phase:1,pass,nolog,setvar:tx.skipped=1"
SecMarker END
SecAction "id:4,phase:1,pass,nolog,setvar:tx.after=1"
SecAction "id:5,phase:1,pass,nolog,skipAfter:MISSING"
SecAction "id:6,phase:1,pass,nolog,setvar:tx.rest=1"
SecAction "id:7,phase:2,pass,nolog,setvar:tx.phase2=1"
"#,
    );
    let tx = get(&r, "/?q=x");
    assert!(tx.interruption().is_none());
    assert_eq!(tx_var(&tx, "skipped"), None);
    assert_eq!(tx_var(&tx, "after").as_deref(), Some("1"));
    // No such marker after the rule: the rest of the phase is skipped, not the next phase.
    assert_eq!(tx_var(&tx, "rest"), None);
    assert_eq!(tx_var(&tx, "phase2").as_deref(), Some("1"));
}

#[test]
fn request_body_seen_whole_after_more_is_appended() {
    let r = rules(
        r#"
SecRequestBodyAccess On
SecRule REQUEST_BODY "@rx end$" "id:1,phase:2,pass,nolog,t:none,t:lowercase,setvar:tx.end=1"
"#,
    );
    let mut tx = Transaction::new(r.clone(), "10.0.0.1", "t");
    tx.process_request_line("POST", "/", "HTTP/1.1");
    tx.add_request_header("Content-Type", b"application/x-www-form-urlencoded");
    tx.process_request_headers();
    tx.append_request_body(b"a=1&");
    tx.append_request_body(b"b=END");
    tx.process_request_body();
    assert_eq!(tx_var(&tx, "end").as_deref(), Some("1"));
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

#[test]
fn bytes_summarized_in_phase_1_are_summarized_again_when_body_arguments_arrive() {
    // Rule 1 makes phase 1 summarize the bytes of ARGS (the query's: ASCII); in phase 2 the
    // body's arguments have joined them, and rule 2 must see the body's invalid UTF-8.
    // Rule 3 excludes that argument: the summary holds its bytes, its values do not match.
    let r = rules(
        r#"SecRequestBodyAccess On
SecRule ARGS "@validateUtf8Encoding" "id:1,phase:1,pass,nolog,t:none,setvar:tx.early=%{matched_var_name}"
SecRule ARGS "@validateUtf8Encoding" "id:2,phase:2,pass,nolog,t:none,setvar:tx.late=%{matched_var_name}"
SecRule ARGS|!ARGS:b "@validateUtf8Encoding" "id:3,phase:2,pass,nolog,t:none,setvar:tx.excluded=%{matched_var_name}""#,
    );
    let tx = post(&r, "/?q=plain", b"a=ok&b=%C3");
    assert_eq!(tx_var(&tx, "early"), None);
    assert_eq!(tx_var(&tx, "late").as_deref(), Some("ARGS:b"));
    assert_eq!(tx_var(&tx, "excluded"), None);
    let tx = post(&r, "/?q=plain", b"a=%C3&b=ok");
    assert_eq!(tx_var(&tx, "excluded").as_deref(), Some("ARGS:a"));
}

/// A union closed by its target's bytes (see `gate_bytes`) still opens for a byte the chain
/// makes, and for a rule on the same gate that needs no byte.
#[test]
fn a_gate_closed_by_bytes_opens_for_bytes_the_chain_can_make() {
    let r = rules(
        r#"SecRequestBodyAccess On
SecRule ARGS "@rx url\(javascript" "id:1,phase:2,pass,nolog,t:none,t:urlDecodeUni,t:removeWhitespace,setvar:tx.one=%{matched_var_name}"
SecRule ARGS "@rx url\(javascript" "id:2,phase:2,pass,nolog,t:none,t:removeWhitespace,setvar:tx.two=%{matched_var_name}"
SecRule ARGS "@rx plainword" "id:3,phase:2,pass,nolog,t:none,t:removeWhitespace,setvar:tx.three=%{matched_var_name}"
"#,
    );
    let tx = post(&r, "/", b"a=url+javascript&b=plain+word");
    assert_eq!(tx_var(&tx, "one"), None);
    assert_eq!(tx_var(&tx, "two"), None);
    // Rule 3 shares rule 2's gate and needs no punctuation: the gate stays open for it.
    assert_eq!(tx_var(&tx, "three").as_deref(), Some("ARGS:b"));
    // The `(` as sent, between words removeWhitespace joins.
    let tx = post(&r, "/", b"a=plain&b=url(+java+script");
    assert_eq!(tx_var(&tx, "one").as_deref(), Some("ARGS:b"));
    assert_eq!(tx_var(&tx, "two").as_deref(), Some("ARGS:b"));
    // The `(` only after urlDecodeUni (`%2528` is `%28` once the body is parsed).
    let tx = post(&r, "/", b"a=plain&b=url%2528+javascript");
    assert_eq!(tx_var(&tx, "one").as_deref(), Some("ARGS:b"));
    assert_eq!(tx_var(&tx, "two"), None);
}

/// A multiMatch step after a value its byte filter ruled out is passed over only when the
/// step cannot make one of the filter's bytes (see `ByteFilter::kept_out_by`).
#[test]
fn multimatch_steps_after_a_filtered_value_are_read_when_they_can_make_a_filter_byte() {
    let r = rules(
        r#"SecRequestBodyAccess On
SecRule ARGS "@rx foo.*/" "id:1,phase:2,pass,nolog,multiMatch,t:none,t:normalisePathWin,setvar:tx.one=%{matched_var}"
SecRule ARGS "@rx a\(b" "id:2,phase:2,pass,nolog,multiMatch,t:none,t:removeWhitespace,t:base64Decode,setvar:tx.two=%{matched_var}"
"#,
    );
    // `foo\xx...` lacks the `/`, which normalisePathWin makes. (Longer than the prefilter
    // scans, so that its filter, not its literals' absence, rules out the value as sent.)
    let mut body = b"x=foo%5C".to_vec();
    body.resize(body.len() + 5000, b'x');
    let tx = post(&r, "/", &body);
    let one = tx_var(&tx, "one").unwrap_or_default();
    assert!(one.starts_with("foo/xxx"), "{one:.20}");
    // removeWhitespace makes no `(`: `YShi` is passed over like `YS hi`; its base64 is `a(b`.
    let tx = post(&r, "/", b"x=YS+hi");
    assert_eq!(tx_var(&tx, "two").as_deref(), Some("a(b"));
    let tx = post(&r, "/", b"x=plain+words");
    assert_eq!(tx_var(&tx, "one"), None);
    assert_eq!(tx_var(&tx, "two"), None);
}

#[test]
fn gate_computed_in_phase_1_sees_the_body_arguments_of_phase_2() {
    // Rule 1 makes phase 1 compute the ARGS union (query only); rule 2 uses the same
    // target and chain in phase 2, when the body's arguments have joined ARGS. Rule 3
    // computes another union (query arguments only) first, where phase 1's ARGS union was
    // kept: a stale record of rule 2's gate set would read it.
    let r = rules(
        r#"
SecRequestBodyAccess On
SecRule ARGS "@rx zzzz" "id:1,phase:1,pass,nolog,t:none,setvar:tx.one=1"
SecRule ARGS_GET "@rx qqqq" "id:3,phase:2,pass,nolog,t:none,setvar:tx.three=1"
SecRule ARGS "@rx attack" "id:2,phase:2,pass,nolog,t:none,setvar:tx.two=1"
"#,
    );
    let tx = post(&r, "/?q=fine", b"a=plain&b=an+attack+here");
    assert_eq!(tx_var(&tx, "one"), None);
    assert_eq!(tx_var(&tx, "two").as_deref(), Some("1"));
    let tx = post(&r, "/?q=fine", b"a=plain");
    assert_eq!(tx_var(&tx, "two"), None);
}

#[test]
fn gates_on_the_response_are_recomputed_as_more_of_it_arrives() {
    // Rules 1 and 2 make phases 1 and 3 compute the request-header and response-header
    // unions; rules 3 and 4 read the same targets and chains after more of the response
    // has arrived (a header, then the body), and rule 5 the request's headers again.
    let r = rules(
        r#"
SecResponseBodyAccess On
SecRule REQUEST_HEADERS "@rx zzzz" "id:1,phase:1,pass,nolog,t:none,setvar:tx.one=1"
SecRule RESPONSE_BODY "@rx secretword" "id:2,phase:3,pass,nolog,t:none,setvar:tx.early=1"
SecRule RESPONSE_HEADERS "@rx lateheader" "id:3,phase:4,pass,nolog,t:none,setvar:tx.header=1"
SecRule RESPONSE_BODY "@rx secretword" "id:4,phase:4,pass,nolog,t:none,setvar:tx.late=1"
SecRule REQUEST_HEADERS "@rx needle" "id:5,phase:4,pass,nolog,t:none,setvar:tx.req=1"
"#,
    );
    let run = |request_header: &[u8]| {
        let mut tx = with_headers(&r, "/", &[("X-A", request_header)]);
        tx.process_request_body();
        tx.set_response_status(200, "HTTP/1.1");
        tx.add_response_header("Content-Type", b"text/html");
        tx.process_response_headers();
        tx.add_response_header("X-Late", b"a lateheader");
        tx.append_response_body(b"<p>the secretword</p>");
        tx.process_response_body();
        tx
    };
    let tx = run(b"a needle");
    assert_eq!(tx_var(&tx, "one"), None);
    assert_eq!(tx_var(&tx, "early"), None);
    assert_eq!(tx_var(&tx, "header").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "late").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "req").as_deref(), Some("1"));
    let tx = run(b"hay");
    assert_eq!(tx_var(&tx, "req"), None);
}

/// Consecutive gated rules are passed over together only when none can match: a rule in the
/// middle of such a run still runs, including one whose chain changes what the prefilter
/// sees (its target's summary of the values as collected does not stand for it).
#[test]
fn a_run_of_gated_rules_is_passed_over_only_when_all_are_closed() {
    let r = rules(
        r#"
SecRule ARGS "@rx zzzz" "id:1,phase:1,pass,nolog,t:none,setvar:tx.one=1"
SecRule ARGS "@rx attack" "id:2,phase:1,pass,nolog,t:none,t:urlDecodeUni,setvar:tx.two=1"
SecRule REQUEST_HEADERS "@rx needle" "id:3,phase:1,pass,nolog,t:none,setvar:tx.three=1"
SecRule ARGS "@rx yyyy" "id:4,phase:1,pass,nolog,t:none,t:lowercase,setvar:tx.four=1"
"#,
    );
    let run = |uri: &str, header: &[u8]| {
        let tx = with_headers(&r, uri, &[("X-A", header)]);
        ["one", "two", "three", "four"].map(|n| tx_var(&tx, n).is_some())
    };
    // The query's own decoding leaves `%61ttack`; only t:urlDecodeUni makes `attack`.
    assert_eq!(run("/?q=%2561ttack", b"hay"), [false, true, false, false]);
    assert_eq!(run("/?q=fine", b"a needle"), [false, false, true, false]);
    assert_eq!(run("/?q=YYYY", b"hay"), [false, false, false, true]);
    assert_eq!(run("/?q=fine", b"hay"), [false; 4]);
}

/// An open gated rule skips the targets whose own union lacks its literal; each target is
/// still read when the literal is in it, whichever of the rule's targets it is.
#[test]
fn an_open_rule_reads_only_the_targets_that_may_match() {
    let r = rules(
        r#"
SecRule REQUEST_HEADERS|ARGS_NAMES|ARGS "@rx attack" "id:1,phase:1,pass,nolog,t:none,setvar:tx.hit=%{matched_var_name}"
SecRule ARGS|REQUEST_HEADERS "@rx attack" "id:2,phase:1,pass,nolog,t:none,setvar:tx.second=%{matched_var_name}"
"#,
    );
    let run = |uri: &str, header: &[u8]| {
        let tx = with_headers(&r, uri, &[("X-A", header)]);
        (tx_var(&tx, "hit"), tx_var(&tx, "second"))
    };
    let hit = |s: &str| Some(s.to_string());
    assert_eq!(run("/?q=an+attack", b"hay"), (hit("ARGS:q"), hit("ARGS:q")));
    assert_eq!(run("/?attack=1", b"hay"), (hit("ARGS_NAMES:attack"), None));
    assert_eq!(
        run("/?q=1", b"attack"),
        (hit("REQUEST_HEADERS:X-A"), hit("REQUEST_HEADERS:X-A"))
    );
    assert_eq!(run("/?q=1", b"hay"), (None, None));
}

/// Gates on one target whose chains differ only by leading steps that change none of its
/// values share one union (`gates::reduced_chain`); a step that changes some value keeps its
/// chain's union apart, so the rule behind it still sees what that step makes.
#[test]
fn chains_differing_by_steps_that_change_no_value_share_a_union() {
    let r = rules(
        r#"
SecRule ARGS "@rx xy" "id:1,phase:1,pass,nolog,t:none,t:urlDecodeUni,t:removeWhitespace,setvar:tx.one=%{matched_var_name}"
SecRule ARGS "@rx ab" "id:2,phase:1,pass,nolog,t:none,t:htmlEntityDecode,t:removeWhitespace,setvar:tx.two=%{matched_var_name}"
"#,
    );
    let run = |uri: &str| {
        let tx = get(&r, uri);
        (tx_var(&tx, "one"), tx_var(&tx, "two"))
    };
    let hit = |s: &str| Some(s.to_string());
    // Nothing for either decoder: one union serves both rules and holds both literals.
    assert_eq!(run("/?p=x+y&q=a+b"), (hit("ARGS:p"), hit("ARGS:q")));
    // `a&#98;` is `ab` only after htmlEntityDecode, which the first chain does not have.
    assert_eq!(run("/?p=x+y&q=a%26%2398;"), (hit("ARGS:p"), hit("ARGS:q")));
    assert_eq!(run("/?p=a%26%2398;"), (None, hit("ARGS:p")));
    assert_eq!(run("/?p=x+y%26%2398;"), (hit("ARGS:p"), None));
}

#[test]
fn gated_rule_still_honours_exclusions_and_later_members() {
    let r = rules(
        r#"
SecRule ARGS|!ARGS:skip "@rx evil" "id:1,phase:1,pass,nolog,t:none,setvar:tx.hit=%{matched_var_name}"
"#,
    );
    // The literal occurs only in an excluded member: the union says "maybe", the rule no.
    assert_eq!(tx_var(&get(&r, "/?skip=evil&b=ok"), "hit"), None);
    assert_eq!(
        tx_var(&get(&r, "/?skip=evil&b=more+evil"), "hit").as_deref(),
        Some("ARGS:b")
    );
}

#[test]
fn pm_phrases_and_one_byte_literals_are_found_in_any_case() {
    let r = rules(
        r#"
SecRule ARGS "@pm foobar quux" "id:1,phase:1,pass,nolog,t:none,setvar:tx.pm=1"
SecRule ARGS "@rx '" "id:2,phase:1,pass,nolog,t:none,setvar:tx.quote=1"
SecRule ARGS "@rx [xX]" "id:3,phase:1,pass,nolog,t:none,setvar:tx.x=1"
"#,
    );
    let tx = get(&r, "/?a=it%27s+FooBAR");
    assert_eq!(tx_var(&tx, "pm").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "quote").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "x"), None);
    let tx = get(&r, "/?a=plain&b=X");
    assert_eq!(tx_var(&tx, "pm"), None);
    assert_eq!(tx_var(&tx, "quote"), None);
    assert_eq!(tx_var(&tx, "x").as_deref(), Some("1"));
}

/// A body too long for the prefilter reaches @pm's own search (the packed searcher over a
/// lower-cased copy, then the automaton): a phrase is found in any case, with 70 phrases
/// (past Teddy's default limit of 64) and with a short phrase among them, and captured as
/// it stands in the body.
#[test]
fn pm_finds_phrases_in_long_bodies_in_any_case() {
    let many: Vec<String> = (0..70).map(|i| format!("java.class{i};")).collect();
    for extra in ["", " ab"] {
        let r = rules(&format!(
            r#"
SecRequestBodyAccess On
SecRule REQUEST_BODY "@pm {}{extra}" "id:1,phase:2,pass,nolog,t:none,capture,setvar:tx.pm=%{{tx.0}}"
"#,
            many.join(" ")
        ));
        let filler = "x".repeat(5000);
        let tx = post(
            &r,
            "/",
            format!("a={filler}&b=Java.Class42;&c={filler}").as_bytes(),
        );
        assert_eq!(
            tx_var(&tx, "pm").as_deref(),
            Some("Java.Class42;"),
            "{extra}"
        );
        let tx = post(
            &r,
            "/",
            format!("a={filler}&b=java.class42&c=AB").as_bytes(),
        );
        let short = (!extra.is_empty()).then_some("AB");
        assert_eq!(tx_var(&tx, "pm").as_deref(), short, "{extra}");
    }
}

/// A response body is prefiltered whatever its length (request values over 4 KB are not):
/// phrases and regex literals past the first 4 KB, in any case, open their rules, and a
/// body without them leaves the rules closed, with or without the rules' own searches.
#[test]
fn long_response_bodies_are_prefiltered_whole() {
    let r = rules(
        r#"
SecResponseBodyAccess On
SecResponseBodyMimeType text/html
SecRule RESPONSE_BODY "@pm java.io.File SQL.syntax" "id:1,phase:4,pass,nolog,t:none,capture,setvar:tx.pm=%{tx.0}"
SecRule RESPONSE_BODY "@rx (?i)fatal error: (\w+)" "id:2,phase:4,pass,nolog,t:none,capture,setvar:tx.rx=%{tx.1}"
"#,
    );
    let filler = "<p>ordinary text</p>\n".repeat(1000);
    let tx = get_with_response_body(
        &r,
        format!("{filler}Sql.Syntax near 1 and FATAL ERROR: Oops{filler}").as_bytes(),
    );
    assert_eq!(tx_var(&tx, "pm").as_deref(), Some("Sql.Syntax"));
    assert_eq!(tx_var(&tx, "rx").as_deref(), Some("Oops"));
    let tx = get_with_response_body(&r, format!("{filler}sql syntax, fatal: x").as_bytes());
    assert_eq!(tx_var(&tx, "pm"), None);
    assert_eq!(tx_var(&tx, "rx"), None);
}

/// Values over 4 KB are not scanned by the prefilter (their hits count as unknown): rules
/// still match them, in the body and in an argument, before and after a transformation,
/// and still do not where the literal is absent.
#[test]
fn values_too_long_to_prefilter_are_still_matched() {
    let r = rules(
        r#"
SecRequestBodyAccess On
SecRule REQUEST_BODY "@rx evil" "id:1,phase:2,pass,nolog,t:none,setvar:tx.body=1"
SecRule ARGS "@rx evil" "id:2,phase:2,pass,nolog,t:none,setvar:tx.arg=1"
SecRule ARGS "@rx e v i l" "id:3,phase:2,pass,nolog,t:none,t:urlDecodeUni,setvar:tx.decoded=1"
"#,
    );
    for len in [4000, 4096, 4097, 9000] {
        let filler = "x".repeat(len);
        let tx = post(&r, "/", format!("a={filler}evil").as_bytes());
        assert_eq!(tx_var(&tx, "body").as_deref(), Some("1"), "{len}");
        assert_eq!(tx_var(&tx, "arg").as_deref(), Some("1"), "{len}");
        let tx = post(&r, "/", format!("a={filler}%2565%2520v+i+l").as_bytes());
        assert_eq!(tx_var(&tx, "decoded").as_deref(), Some("1"), "{len}");
        let tx = post(&r, "/", format!("a={filler}evi").as_bytes());
        assert_eq!(tx_var(&tx, "body"), None, "{len}");
        assert_eq!(tx_var(&tx, "arg"), None, "{len}");
        assert_eq!(tx_var(&tx, "decoded"), None, "{len}");
    }
}

#[test]
fn a_regex_needing_two_literals_matches_only_where_both_occur() {
    // Requires `$` and one of the words: the prefilter checks both sets (`literals`).
    let r = rules(
        r#"
SecRule ARGS "@rx (?i)\$\s*(?:abs|and|or)\b" "id:1,phase:1,pass,nolog,t:none,t:urlDecodeUni,setvar:tx.both=1"
SecRule ARGS "!@rx (?i)\$\s*(?:abs|and|or)\b" "id:2,phase:1,pass,nolog,t:none,setvar:tx.negated=1"
"#,
    );
    // Each literal in a different argument: the gate's union holds neither rule bit.
    let tx = get(&r, "/?a=%24&b=and");
    assert_eq!(tx_var(&tx, "both"), None);
    assert_eq!(tx_var(&tx, "negated").as_deref(), Some("1"));
    let tx = get(&r, "/?a=x&b=%24+AND");
    assert_eq!(tx_var(&tx, "both").as_deref(), Some("1"));
    // `$` only after the chain's urlDecodeUni (%2524 -> %24 -> $).
    let tx = get(&r, "/?a=%2524or");
    assert_eq!(tx_var(&tx, "both").as_deref(), Some("1"));
    // Both literals, but not as the regex wants them.
    let tx = get(&r, "/?a=or+%24");
    assert_eq!(tx_var(&tx, "both"), None);
}

#[test]
fn rules_on_tx_are_never_gated() {
    // TX changes during the phase: the value rule 2 tests is set by rule 1 just before.
    let r = rules(
        r#"
SecRule ARGS "@rx ." "id:1,phase:1,pass,nolog,t:none,setvar:tx.seen=%{matched_var}"
SecRule TX:seen "@rx needle" "id:2,phase:1,pass,nolog,t:none,setvar:tx.found=1"
"#,
    );
    assert_eq!(
        tx_var(&get(&r, "/?a=the+needle"), "found").as_deref(),
        Some("1")
    );
    assert_eq!(tx_var(&get(&r, "/?a=hay"), "found"), None);
}

#[test]
fn a_transformation_shared_by_two_chains_is_applied_to_the_right_base() {
    // `t:lowercase` on the original and after `t:urlDecodeUni`: one result is reused when the
    // decode left the value alone, and must not be when it changed it.
    let r = rules(
        r#"
SecRule ARGS "@rx ^aa$" "id:1,phase:1,pass,nolog,t:none,t:urlDecodeUni,t:lowercase,setvar:tx.decoded=1"
SecRule ARGS "@rx ^a%41$" "id:2,phase:1,pass,nolog,t:none,t:lowercase,setvar:tx.plain=1"
SecRule ARGS "@rx ^aa$" "id:3,phase:1,pass,nolog,t:none,t:lowercase,setvar:tx.wrong=1"
SecRule ARGS "@rx ^bb$" "id:4,phase:1,pass,nolog,t:none,t:urlDecodeUni,t:lowercase,setvar:tx.same=1"
"#,
    );
    // The query's own decoding leaves `A%41` and `BB` as the values.
    let tx = get(&r, "/?q=A%2541&p=BB");
    assert_eq!(tx_var(&tx, "decoded").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "plain").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "wrong"), None);
    assert_eq!(tx_var(&tx, "same").as_deref(), Some("1"));
}

/// A value whose own prefilter hits stand for a chain's (nothing the chain does changes what
/// the prefilter sees) skips the chain; one the chain does change is transformed first. Both
/// through a gate (two rules share the target and chain) and per value in the rule itself.
#[test]
fn values_are_transformed_where_the_chain_changes_what_the_prefilter_sees() {
    let r = rules(
        r#"
SecRule REQUEST_HEADERS "@rx select" "id:1,phase:1,pass,nolog,t:none,t:urlDecodeUni,t:lowercase,setvar:tx.decoded=1"
SecRule REQUEST_HEADERS "@rx union" "id:2,phase:1,pass,nolog,t:none,t:urlDecodeUni,t:lowercase,setvar:tx.union=1"
SecRule REQUEST_HEADERS "@rx select" "id:3,phase:1,pass,nolog,t:none,t:lowercase,setvar:tx.cased=1"
SecRule REQUEST_HEADERS "@rx a b" "id:4,phase:1,pass,nolog,t:none,t:compressWhitespace,setvar:tx.spaces=1"
SecRule REQUEST_HEADERS "@rx ab" "id:5,phase:1,pass,nolog,t:none,t:removeWhitespace,setvar:tx.removed=1"
SecRule REQUEST_HEADERS "@rx ^select union$" "id:6,phase:1,pass,nolog,t:none,t:cmdLine,setvar:tx.cmdline=1"
"#,
    );
    let run = |headers: &[(&str, &[u8])]| {
        let mut tx = Transaction::new(r.clone(), "10.0.0.1", "t");
        tx.process_request_line("GET", "/", "HTTP/1.1");
        for (k, v) in headers {
            tx.add_request_header(k, v);
        }
        tx.process_request_headers();
        tx
    };
    // `%73` is `s`: only the decoded value holds the literal.
    let tx = run(&[("Host", b"example.com"), ("X-A", b"%73ELECT 1")]);
    assert_eq!(tx_var(&tx, "decoded").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "cased"), None);
    assert_eq!(tx_var(&tx, "union"), None);
    // Case alone never hides a literal from the prefilter (cmdLine here only lower-cases:
    // its buffer shares the original's hits).
    let tx = run(&[("X-A", b"SELECT UNION")]);
    assert_eq!(tx_var(&tx, "cmdline").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "decoded").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "cased").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "union").as_deref(), Some("1"));
    // Whitespace transformations make literals that were not there.
    let tx = run(&[("X-A", b"a\t\tb"), ("X-B", b"a  b")]);
    assert_eq!(tx_var(&tx, "spaces").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "removed").as_deref(), Some("1"));
}

#[test]
fn a_transaction_sees_nothing_of_the_one_before() {
    // Finished transactions hand their working memory to the next (scratch.rs): the same
    // value slots, with other values, must be transformed and scanned afresh, and TX must
    // start empty.
    let r = rules(
        r#"
SecRule ARGS "@rx attack" "id:1,phase:1,pass,nolog,t:none,t:urlDecodeUni,t:lowercase,setvar:tx.seen=%{matched_var}"
SecRule &TX:seen "@eq 0" "id:2,phase:1,pass,nolog,setvar:tx.unseen=1"
"#,
    );
    for _ in 0..3 {
        let first = get(&r, "/?q=benign&p=%2541ttack");
        assert_eq!(tx_var(&first, "seen").as_deref(), Some("attack"));
        drop(first);
        let tx = get(&r, "/?q=ATTACK&p=other");
        assert_eq!(tx_var(&tx, "seen").as_deref(), Some("attack"));
        drop(tx);
        let tx = get(&r, "/?q=nothing&p=here");
        assert_eq!(tx_var(&tx, "seen"), None);
        assert_eq!(tx_var(&tx, "unseen").as_deref(), Some("1"));
    }
}

#[test]
fn a_transaction_sees_none_of_the_last_ones_arguments_cookies_or_headers() {
    // The lists' entries keep their buffers from transaction to transaction (scratch.rs);
    // the next transaction must see only its own members.
    let r = rules(
        r#"
SecRule &ARGS "@eq 1" "id:10,phase:1,pass,nolog,setvar:tx.args=1"
SecRule &REQUEST_HEADERS "@eq 1" "id:11,phase:1,pass,nolog,setvar:tx.headers=1"
SecRule &REQUEST_COOKIES "@eq 0" "id:12,phase:1,pass,nolog,setvar:tx.cookies=0"
SecRule ARGS "@rx ^(.*)$" "id:13,phase:1,pass,nolog,capture,setvar:tx.arg=%{tx.1}"
SecRule &RESPONSE_HEADERS "@eq 1" "id:14,phase:3,pass,nolog,setvar:tx.response=1"
SecRule RESPONSE_HEADERS:Content-Type "@rx ." "id:15,phase:3,pass,nolog,setvar:tx.ct=%{matched_var}"
"#,
    );
    for _ in 0..3 {
        let headers: [(&str, &[u8]); 3] = [
            ("Host", b"example.com"),
            ("Cookie", b"s=1; t=2"),
            ("Accept", b"*/*"),
        ];
        let mut big = with_headers(&r, "/?a=first&b=second&c=third", &headers);
        big.process_request_body();
        big.set_response_status(200, "HTTP/1.1");
        big.add_response_header("Content-Type", b"text/html");
        big.add_response_header("Server", b"x");
        big.process_response_headers();
        assert_eq!(tx_var(&big, "args"), None);
        drop(big);
        let mut small = get(&r, "/?q=only");
        assert_eq!(tx_var(&small, "args").as_deref(), Some("1"));
        assert_eq!(tx_var(&small, "arg").as_deref(), Some("only"));
        assert_eq!(tx_var(&small, "headers").as_deref(), Some("1"));
        assert_eq!(tx_var(&small, "cookies").as_deref(), Some("0"));
        small.set_response_status(200, "HTTP/1.1");
        small.add_response_header("X-Other", b"y");
        small.process_response_headers();
        assert_eq!(tx_var(&small, "response").as_deref(), Some("1"));
        assert_eq!(tx_var(&small, "ct"), None);
    }
}

#[test]
fn each_matching_variable_gets_its_own_captures() {
    // As CRS 920450 does per header: the actions run once per match with TX.0.. of that
    // match (the groups of all matches are kept side by side until the actions run).
    let r = rules(
        r#"SecRule REQUEST_HEADERS_NAMES "@rx ^(x-)?(.*)$" "id:1,phase:1,pass,nolog,capture,t:lowercase,setvar:'tx.h_%{tx.2}=%{tx.0}|%{tx.1}'""#,
    );
    for _ in 0..2 {
        let headers: [(&str, &[u8]); 3] = [
            ("Host", b"example.com"),
            ("X-Trace", b"1"),
            ("Accept", b"*/*"),
        ];
        let tx = with_headers(&r, "/", &headers);
        assert_eq!(tx_var(&tx, "h_host").as_deref(), Some("host|"));
        assert_eq!(tx_var(&tx, "h_trace").as_deref(), Some("x-trace|x-"));
        assert_eq!(tx_var(&tx, "h_accept").as_deref(), Some("accept|"));
    }
}

#[test]
fn matched_vars_start_empty_and_list_each_match_of_the_last_rule() {
    // Rule 1 matches two arguments; rule 2 sees both as MATCHED_VARS. A transaction
    // dropped and followed by another on the same rule set (its buffers are reused) must
    // start with no MATCHED_VAR: rule 3 runs before anything matched.
    let r = rules(
        r#"
SecRule MATCHED_VAR "@rx ." "id:3,phase:1,pass,nolog,setvar:tx.stale=%{matched_var}"
SecRule ARGS "@rx ^x" "id:1,phase:2,pass,nolog,setvar:tx.last=%{matched_var_name}"
SecRule &MATCHED_VARS "@eq 2" "id:2,phase:2,pass,nolog,setvar:tx.both=1"
"#,
    );
    let tx = get(&r, "/?a=x1&b=x2&c=y");
    assert_eq!(tx_var(&tx, "last").as_deref(), Some("ARGS:b"));
    assert_eq!(tx_var(&tx, "both").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "stale"), None);
    drop(tx);
    let tx = get(&r, "/?a=x1&b=x2&c=y");
    assert_eq!(tx_var(&tx, "stale"), None);
    assert_eq!(tx_var(&tx, "both").as_deref(), Some("1"));
}

#[test]
fn contains_under_whitespace_and_case_folding_finds_a_spread_out_needle() {
    // CRS 955300's shape: the needle is looked for in the body without whitespace and in
    // lower case (found without making that copy unless it is there).
    let r = rules(
        r#"
SecResponseBodyAccess On
SecRule RESPONSE_BODY "@contains <title>punkholicshell</title>" "id:1,phase:4,pass,nolog,t:none,t:removeWhitespace,t:lowercase,setvar:tx.hit=%{matched_var}"
"#,
    );
    let run = |body: &[u8]| tx_var(&get_with_response_body(&r, body), "hit");
    assert_eq!(
        run(b"<html><TITLE> PunkHolic\tShell\r\n</title></html>").as_deref(),
        Some("<html><title>punkholicshell</title></html>")
    );
    assert_eq!(run(b"<title>PunkHolic Shel</title>"), None);
    assert_eq!(run(b"<title>punk holic shell<title>"), None);
}

// Regex groups (literal-free regexes over the same values, searched together first): each
// member still answers for itself, per value, with its own captures, and an answer kept for
// a value is dropped when the value changes.

// Classes of more than 16 bytes only: no literal every match needs, so the prefilter cannot
// gate these rules.
const GROUPED: &str = r#"
SecRule ARGS "@rx [[:digit:][:punct:]]{3}" "id:1,phase:2,pass,nolog,capture,t:none,setvar:'tx.digits=%{tx.digits} %{MATCHED_VAR_NAME}=%{TX.0}'"
SecRule ARGS "@rx [[:upper:]]{4}" "id:2,phase:2,pass,nolog,capture,t:none,setvar:'tx.upper=%{tx.upper} %{MATCHED_VAR_NAME}=%{TX.0}'"
SecRule ARGS "@rx [[:lower:]]{5}" "id:3,phase:2,pass,nolog,t:none,t:lowercase,setvar:'tx.lower=%{tx.lower} %{MATCHED_VAR_NAME}'"
SecRule ARGS "@rx [[:upper:]]{4}" "id:4,phase:2,pass,nolog,t:none,t:lowercase,setvar:'tx.never=%{tx.never} %{MATCHED_VAR_NAME}'"
SecRule ARGS "!@rx [[:digit:][:punct:]]{3}" "id:5,phase:2,pass,nolog,t:none,setvar:'tx.not_digits=%{tx.not_digits} %{MATCHED_VAR_NAME}'"
SecRule ARGS "@rx xy[0-9]" "id:6,phase:2,pass,nolog,t:none,setvar:'tx.literal=%{tx.literal} %{MATCHED_VAR_NAME}'"
SecRule ARGS "@rx q[[:digit:][:punct:]]" "id:7,phase:2,pass,nolog,t:none,setvar:'tx.q=%{tx.q} %{MATCHED_VAR_NAME}'"
"#;

#[test]
fn rules_sharing_targets_and_chain_form_a_group() {
    let r = rules(GROUPED);
    // 1, 2 and 7 (t:none over ARGS; 7's only literal is one letter, `q`: ordinary
    // words pass such a gate), 3 and 4 (t:none,t:lowercase); not the negated 5, and not 6, whose literal
    // `xy` the prefilter gates it on.
    assert_eq!(r.regex_groups(), (2, 5));
}

#[test]
fn regex_group_members_answer_for_themselves_per_value() {
    let r = rules(GROUPED);
    // e: the group of 1 and 2 says no; that must not answer for the group of 3 and 4.
    let tx = get(&r, "/?a=xy123&b=WORD&c=none&d=AB12CDEF9876&e=Words&f=q12");
    assert_eq!(
        tx_var(&tx, "digits").as_deref(),
        Some(" ARGS:a=123 ARGS:d=987")
    );
    assert_eq!(
        tx_var(&tx, "upper").as_deref(),
        Some(" ARGS:b=WORD ARGS:d=CDEF")
    );
    assert_eq!(tx_var(&tx, "lower").as_deref(), Some(" ARGS:e"));
    // After lowercase there is no upper-case run: the group of 3 and 4 said yes for e (3's
    // letters); 4 answered no for itself.
    assert_eq!(tx_var(&tx, "never"), None);
    assert_eq!(
        tx_var(&tx, "not_digits").as_deref(),
        Some(" ARGS:b ARGS:c ARGS:e ARGS:f")
    );
    assert_eq!(tx_var(&tx, "q").as_deref(), Some(" ARGS:f"));
    assert_eq!(tx_var(&tx, "literal").as_deref(), Some(" ARGS:a"));
}

#[test]
fn regex_group_no_for_a_value_is_no_hit_for_any_member() {
    let r = rules(GROUPED);
    let tx = get(&r, "/?q=ab+12");
    for name in ["digits", "upper", "lower", "never", "literal", "q"] {
        assert_eq!(tx_var(&tx, name), None, "tx.{name}");
    }
    assert_eq!(tx_var(&tx, "not_digits").as_deref(), Some(" ARGS:q"));
}

#[test]
fn regex_group_answer_is_dropped_when_the_value_grows() {
    // Phase 3 sees the response body empty (no member matches); phase 4 sees it whole.
    let r = rules(
        r#"
SecResponseBodyAccess On
SecRule RESPONSE_BODY "@rx [[:digit:][:punct:]]{5}" "id:1,phase:3,pass,nolog,t:none,setvar:tx.early=1"
SecRule RESPONSE_BODY "@rx [[:digit:][:punct:]]{5}" "id:2,phase:4,pass,nolog,t:none,setvar:tx.digits=1"
SecRule RESPONSE_BODY "@rx [[:lower:]]{9}" "id:3,phase:4,pass,nolog,t:none,setvar:tx.word=1"
"#,
    );
    assert_eq!(r.regex_groups(), (1, 3));
    let tx = get_with_response_body(&r, b"order 12345 shipped");
    assert_eq!(tx_var(&tx, "early"), None);
    assert_eq!(tx_var(&tx, "digits").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "word"), None);
}

#[test]
fn regex_group_no_over_all_values_is_asked_again_when_arguments_arrive() {
    // Phase 1 sees the query's arguments only: every value says no, so the group is closed
    // for the rest of the phase. The body's arguments (phase 2) must open it again.
    let r = rules(
        r#"
SecRequestBodyAccess On
SecRule ARGS "@rx [[:digit:][:punct:]]{3}" "id:1,phase:1,pass,nolog,t:none,setvar:tx.early=1"
SecRule ARGS "@rx [[:upper:]]{4}" "id:2,phase:1,pass,nolog,t:none,setvar:tx.upper=1"
SecRule ARGS "@rx [[:digit:][:punct:]]{3}" "id:3,phase:2,pass,nolog,t:none,setvar:'tx.digits=%{MATCHED_VAR_NAME}'"
"#,
    );
    assert_eq!(r.regex_groups(), (1, 3));
    let tx = post(&r, "/?q=plain", b"order=12345");
    assert_eq!(tx_var(&tx, "early"), None);
    assert_eq!(tx_var(&tx, "upper"), None);
    assert_eq!(tx_var(&tx, "digits").as_deref(), Some("ARGS:order"));
}

#[test]
fn regex_group_answer_over_all_values_ignores_a_members_exclusions() {
    // Rule 1 does not read `a`, so its "no" says nothing about `a` for rule 2.
    let r = rules(
        r#"
SecRule ARGS|!ARGS:a "@rx [[:digit:][:punct:]]{3}" "id:1,phase:1,pass,nolog,t:none,setvar:tx.first=1"
SecRule ARGS "@rx [[:upper:]]{4}" "id:2,phase:1,pass,nolog,t:none,setvar:'tx.upper=%{MATCHED_VAR_NAME}'"
"#,
    );
    assert_eq!(r.regex_groups(), (1, 2));
    let tx = get(&r, "/?a=WORD&b=plain");
    assert_eq!(tx_var(&tx, "first"), None);
    assert_eq!(tx_var(&tx, "upper").as_deref(), Some("ARGS:a"));
}

/// Macros expand to the bytes a variable holds, as ModSecurity's do: a value captured from
/// binary input and copied by setvar is still those bytes, and an operator compares with
/// them (a single `%{tx.x}` and one joined with text alike).
#[test]
fn macros_expand_to_the_bytes_a_variable_holds() {
    let r = rules(
        r#"
SecRule ARGS:a "@rx ^(.*)$" "id:1,phase:2,pass,nolog,capture,setvar:tx.x=%{tx.1}"
SecRule ARGS:b "@streq %{tx.x}" "id:2,phase:2,pass,nolog,setvar:tx.same=1"
SecRule ARGS:c "@streq %{tx.x}z" "id:3,phase:2,pass,nolog,setvar:tx.joined=1"
SecRule ARGS:d "@within %{tx.x}" "id:4,phase:2,pass,nolog,setvar:tx.within=1"
"#,
    );
    let tx = get(&r, "/?a=%FF%FE&b=%FF%FE&c=%FF%FEz&d=%FE");
    assert_eq!(tx.tx_var("x"), Some(&b"\xff\xfe"[..]));
    assert_eq!(tx_var(&tx, "same").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "joined").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "within").as_deref(), Some("1"));
    // Text stays text: a replaced byte is not the byte.
    let tx = get(&r, "/?a=%FF%FE&b=%EF%BF%BD%EF%BF%BD");
    assert_eq!(tx_var(&tx, "same"), None);
}

/// The reference the CRS corpus test compares against: the same rules with no shortcut
/// worked out (no prefilter slot, no regex group, no constant plan used), matching what the
/// usual set matches.
#[test]
fn a_rule_set_without_shortcuts_evaluates_every_rule_and_agrees() {
    let text = r#"
SecAction "id:1,phase:1,pass,nolog,setvar:tx.score=0"
SecRule ARGS "@rx (?i)union\s+select" "id:2,phase:2,pass,log,setvar:tx.score=+5"
SecRule ARGS "@rx (?i)a[\"'\\]*b[\"'\\]*c" "id:3,phase:2,pass,log,setvar:tx.score=+1"
SecRule ARGS "@rx (?i)x[\"'\\]*y[\"'\\]*z" "id:4,phase:2,pass,log,setvar:tx.score=+1"
SecRule TX:score "@ge 5" "id:5,phase:2,deny,status:403"
"#;
    let usual = rules(text);
    let plain = match RuleSet::from_str_without_shortcuts(text, Path::new("test.conf")) {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("rules do not load: {e}"),
    };
    assert!(usual.prefiltered_rx().0 > 0 && usual.regex_groups().0 > 0);
    assert_eq!(plain.prefiltered_rx(), (0, 3));
    assert_eq!(plain.regex_groups(), (0, 0));
    for uri in [
        "/?q=1+UNION+SELECT+2",
        "/?q=a'b'c",
        "/?q=xyz&r=plain",
        "/?q=plain",
    ] {
        let (a, b) = (get(&usual, uri), get(&plain, uri));
        let ids =
            |tx: &Transaction| -> Vec<i64> { tx.matched_rules().iter().map(|m| m.id).collect() };
        assert_eq!(ids(&a), ids(&b), "{uri}");
        assert_eq!(
            a.interruption().map(|i| i.rule_id),
            b.interruption().map(|i| i.rule_id),
            "{uri}"
        );
    }
    assert_eq!(
        get(&plain, "/?q=1+UNION+SELECT+2")
            .interruption()
            .map(|i| i.status),
        Some(403)
    );
}

#[test]
fn a_nolog_match_is_recorded_without_its_message_and_a_logged_one_with_it() {
    let r = rules(
        r#"SecRule ARGS "@rx abc" "id:1,phase:1,pass,nolog,msg:'quiet %{matched_var}',logdata:'d',tag:'t1',severity:'CRITICAL'"
SecRule ARGS "@rx abc" "id:2,phase:1,pass,log,msg:'loud %{matched_var}',logdata:'seen %{matched_var_name}',tag:'t1',tag:'t2',severity:'WARNING'""#,
    );
    let tx = get(&r, "/?a=xabcx");
    let m = tx.matched_rules();
    assert_eq!(m.iter().map(|m| m.id).collect::<Vec<_>>(), [1, 2]);
    assert!(!m[0].logged());
    assert_eq!(
        (m[0].message(), m[0].data(), m[0].tags(), m[0].log_line()),
        ("", "", &[][..], "")
    );
    // A nolog record keeps the rule's severity, as before.
    assert_eq!(m[0].severity, Some(2));
    assert!(m[1].logged());
    assert_eq!(m[1].message(), "loud xabcx");
    assert_eq!(m[1].data(), "seen ARGS:a");
    assert_eq!(m[1].tags(), ["t1", "t2"]);
    assert_eq!(m[1].severity, Some(4));
    assert!(m[1]
        .log_line()
        .contains(r#"[id "2"] [msg "loud xabcx"] [data "seen ARGS:a"] [severity "WARNING"]"#));
}

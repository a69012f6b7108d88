//! Regex groups (literal-free regexes over the same values, searched together first): each
//! member still answers for itself, per value, with its own captures, and an answer kept for
//! a value is dropped when the value changes.

use hoist_waf::{RuleSet, Transaction};
use std::path::Path;
use std::sync::Arc;

fn rules(text: &str) -> Arc<RuleSet> {
    match RuleSet::from_str(text, Path::new("test.conf")) {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("rules do not load: {e}"),
    }
}

fn tx_var(tx: &Transaction, name: &str) -> Option<String> {
    tx.tx_var(name)
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Phases 1 and 2 of a GET of `uri`.
fn get(rules: &Arc<RuleSet>, uri: &str) -> Transaction {
    let mut tx = Transaction::new(rules.clone(), "10.0.0.1", "t");
    tx.process_request_line("GET", uri, "HTTP/1.1");
    tx.add_request_header("Host", b"example.com");
    tx.process_request_headers();
    tx.process_request_body();
    tx
}

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
fn each_member_answers_for_itself_per_value() {
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
fn a_value_no_member_matches_is_no_hit_for_any() {
    let r = rules(GROUPED);
    let tx = get(&r, "/?q=ab+12");
    for name in ["digits", "upper", "lower", "never", "literal", "q"] {
        assert_eq!(tx_var(&tx, name), None, "tx.{name}");
    }
    assert_eq!(tx_var(&tx, "not_digits").as_deref(), Some(" ARGS:q"));
}

#[test]
fn an_answer_is_dropped_when_the_value_grows() {
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
    let mut tx = get(&r, "/");
    tx.set_response_status(200, "HTTP/1.1");
    tx.add_response_header("Content-Type", b"text/html");
    tx.process_response_headers();
    assert!(tx.wants_response_body());
    tx.append_response_body(b"order 12345 shipped");
    tx.process_response_body();
    assert_eq!(tx_var(&tx, "early"), None);
    assert_eq!(tx_var(&tx, "digits").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "word"), None);
}

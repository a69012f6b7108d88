//! Regex groups: literal-free regexes over the same values, searched together first.

use super::*;

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

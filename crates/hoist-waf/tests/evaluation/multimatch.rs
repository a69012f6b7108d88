//! multiMatch rules: every step of the chain is tested, whatever the prefilter, byte
//! filters and length bounds skip; validation and detectXSS see the bytes their chain brings.

use super::*;

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

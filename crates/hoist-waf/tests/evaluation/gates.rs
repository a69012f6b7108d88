//! Rule gates: unions recomputed when values arrive in a later phase or the response grows,
//! runs of gated rules, exclusions, TX targets never gated.

use super::*;

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

/// CRS 901340 forces REQUEST_BODY on every GET: it appears, empty, at phase 2. The unions
/// phase 1 computed over it (when it was absent) are computed again, the others kept.
#[test]
fn a_forced_empty_request_body_is_seen_by_gates_computed_without_it() {
    // `t:length` makes "0" of the empty body: rule 3 matches it. Rule 1 computes the same
    // gate (REQUEST_BODY, t:length) in phase 1, over no value at all.
    let r = rules(
        r#"SecRequestBodyAccess On
SecRule REQUEST_BODY "@rx ^0$" "id:1,phase:1,pass,nolog,t:length,setvar:tx.early=1"
SecRule REQUEST_HEADERS:Host "@rx example" "id:2,phase:1,pass,nolog,ctl:forceRequestBodyVariable=On"
SecRule REQUEST_BODY "@rx ^0$" "id:3,phase:2,pass,nolog,t:length,setvar:tx.late=1"
SecRule REQUEST_HEADERS:Host "@rx example" "id:4,phase:2,pass,nolog,setvar:tx.host=1"
"#,
    );
    let tx = get(&r, "/");
    assert_eq!(tx_var(&tx, "early"), None);
    assert_eq!(tx_var(&tx, "late").as_deref(), Some("1"));
    assert_eq!(tx_var(&tx, "host").as_deref(), Some("1"));
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

//! A transaction on its own: skipAfter, bodies appended, nothing kept from the one before,
//! captures and MATCHED_VARS, macros, the reference set without shortcuts, nolog records.

use super::*;

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

/// The request line's variables as a rule reads them: REQUEST_LINE is the three pieces as
/// received, joined by single spaces; REMOTE_ADDR and UNIQUE_ID are what the caller gave.
#[test]
fn request_line_variables_hold_what_was_received() {
    let r = rules(
        r#"
SecAction "id:1,phase:1,pass,nolog,setvar:tx.line=%{REQUEST_LINE},setvar:tx.method=%{REQUEST_METHOD},setvar:tx.uri=%{REQUEST_URI},setvar:tx.file=%{REQUEST_FILENAME},setvar:tx.query=%{QUERY_STRING},setvar:tx.protocol=%{REQUEST_PROTOCOL},setvar:tx.addr=%{REMOTE_ADDR}"
"#,
    );
    let tx = get(&r, "/a/b.php?x=1&y=%20");
    assert_eq!(
        tx_var(&tx, "line").as_deref(),
        Some("GET /a/b.php?x=1&y=%20 HTTP/1.1")
    );
    assert_eq!(tx_var(&tx, "method").as_deref(), Some("GET"));
    assert_eq!(tx_var(&tx, "uri").as_deref(), Some("/a/b.php?x=1&y=%20"));
    assert_eq!(tx_var(&tx, "file").as_deref(), Some("/a/b.php"));
    assert_eq!(tx_var(&tx, "query").as_deref(), Some("x=1&y=%20"));
    assert_eq!(tx_var(&tx, "protocol").as_deref(), Some("HTTP/1.1"));
    assert_eq!(tx_var(&tx, "addr").as_deref(), Some("10.0.0.1"));
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

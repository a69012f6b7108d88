//! The prefilter and the value cache: negation, captures, @pm and one-byte literals, long
//! values, required literal pairs, chains sharing values and transformations.

use super::*;

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

//! SecArgumentsLimit: a peer decides how many arguments a body holds; past the limit the body
//! is a REQBODY_ERROR (which the base configuration refuses with 400) instead of memory and
//! rule work for every one of them.

use hoist_waf::{RuleSet, Transaction};
use std::path::Path;
use std::sync::Arc;

fn rules(text: &str) -> Arc<RuleSet> {
    match RuleSet::from_str(text, Path::new("test.conf")) {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("rules do not load: {e}"),
    }
}

const SETUP: &str = r#"
SecRequestBodyAccess On
SecRule REQUEST_HEADERS:Content-Type "@rx ^application/json" "id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQBODY_ERROR "!@eq 0" "id:2,phase:2,deny,status:400,log,msg:'%{reqbody_error_msg}'"
SecRule &ARGS_POST "@gt 0" "id:3,phase:2,pass,nolog,setvar:tx.args=%{matched_var}"
"#;

fn post(rules: &Arc<RuleSet>, content_type: &str, body: &[u8]) -> Transaction {
    let mut tx = Transaction::new(rules.clone(), "10.0.0.1", "t");
    tx.process_request_line("POST", "/", "HTTP/1.1");
    tx.add_request_header("Content-Type", content_type.as_bytes());
    tx.process_request_headers();
    tx.append_request_body(body);
    tx.process_request_body();
    tx
}

fn urlencoded(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| format!("a{i}=x"))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

fn json(n: usize) -> Vec<u8> {
    let items: Vec<String> = (0..n).map(|i| i.to_string()).collect();
    format!("{{\"list\":[{}]}}", items.join(",")).into_bytes()
}

fn multipart(n: usize) -> Vec<u8> {
    let mut body = String::new();
    for i in 0..n {
        body.push_str(&format!(
            "--B\r\nContent-Disposition: form-data; name=\"f{i}\"\r\n\r\nv\r\n"
        ));
    }
    body.push_str("--B--\r\n");
    body.into_bytes()
}

#[test]
fn default_limit_is_1000_for_every_body_processor() {
    let r = rules(SETUP);
    let form = "application/x-www-form-urlencoded";
    let multi = "multipart/form-data; boundary=B";
    for (ct, at, over) in [
        (form, urlencoded(1000), urlencoded(1001)),
        ("application/json", json(1000), json(1001)),
        (multi, multipart(1000), multipart(1001)),
    ] {
        let tx = post(&r, ct, &at);
        assert!(tx.interruption().is_none(), "{ct}: 1000 arguments refused");
        assert_eq!(tx.tx_var("args"), Some(&b"1000"[..]), "{ct}");
        let tx = post(&r, ct, &over);
        assert_eq!(
            tx.interruption().map(|i| i.status),
            Some(400),
            "{ct}: 1001 passed"
        );
        let log = &tx
            .matched_rules()
            .iter()
            .find(|m| m.id == 2)
            .map(|m| m.message().to_string());
        assert!(
            log.as_deref()
                .is_some_and(|m| m.contains("more than 1000 arguments")),
            "{ct}: {log:?}"
        );
    }
}

#[test]
fn directive_sets_the_limit_and_query_arguments_do_not_count() {
    let r = rules(&format!("SecArgumentsLimit 3\n{SETUP}"));
    let form = "application/x-www-form-urlencoded";
    let mut tx = Transaction::new(r.clone(), "10.0.0.1", "t");
    tx.process_request_line("POST", "/?q1=1&q2=2&q3=3&q4=4", "HTTP/1.1");
    tx.add_request_header("Content-Type", form.as_bytes());
    tx.process_request_headers();
    tx.append_request_body(b"a=1&b=2&c=3");
    tx.process_request_body();
    assert!(tx.interruption().is_none());
    assert_eq!(
        post(&r, form, b"a=1&b=2&c=3&d=4")
            .interruption()
            .map(|i| i.status),
        Some(400)
    );
    assert!(RuleSet::from_str("SecArgumentsLimit many", Path::new("x.conf")).is_err());
}

/// A query string is bounded the same way: the base configuration's rule refuses more than
/// the limit, and no more than one argument past it is parsed.
#[test]
fn query_strings_over_the_limit_are_refused_by_the_base_configuration() {
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/base.conf");
    let text = format!(
        "SecRule &ARGS_GET \"@gt 0\" \"id:3,phase:1,pass,nolog,setvar:tx.args=%{{matched_var}}\"\nInclude {}\n",
        base.display()
    );
    let r = rules(&text);
    let get = |n: usize| {
        let query = String::from_utf8(urlencoded(n)).unwrap_or_default();
        let mut tx = Transaction::new(r.clone(), "10.0.0.1", "t");
        tx.process_request_line("GET", &format!("/?{query}"), "HTTP/1.1");
        tx.add_request_header("Host", b"example.com");
        tx.process_request_headers();
        tx
    };
    let tx = get(1000);
    assert!(tx.interruption().is_none());
    assert_eq!(tx.tx_var("args"), Some(&b"1000"[..]));
    for n in [1001, 5000] {
        let tx = get(n);
        assert_eq!(
            tx.interruption().map(|i| (i.status, i.rule_id)),
            Some((400, 200005))
        );
        assert_eq!(tx.tx_var("args"), Some(&b"1001"[..]), "{n} arguments");
    }
}

/// A response of `body` through all phases; the interruption's status, if any, and whether
/// rule 9 (a match on the body's last byte) matched.
fn respond(rules: &Arc<RuleSet>, body: &[u8]) -> (Option<u16>, bool) {
    let mut tx = Transaction::new(rules.clone(), "10.0.0.1", "t");
    tx.process_request_line("GET", "/", "HTTP/1.1");
    tx.process_request_headers();
    tx.process_request_body();
    tx.set_response_status(200, "HTTP/1.1");
    tx.add_response_header("Content-Type", b"text/html");
    tx.process_response_headers();
    tx.append_response_body(body);
    tx.process_response_body();
    tx.process_logging();
    let status = tx.interruption().map(|i| i.status);
    let matched = tx.matched_rules().iter().any(|m| m.id == 9);
    (status, matched)
}

const RESPONSE: &str = r#"
SecRuleEngine On
SecResponseBodyAccess On
SecResponseBodyMimeType text/html
SecResponseBodyLimit 10
SecRule RESPONSE_BODY "@rx Z" "id:9,phase:4,pass,log"
"#;

/// SecResponseBodyLimitAction: past SecResponseBodyLimit, Reject (ModSecurity's default)
/// answers 500; ProcessPartial inspects the first bytes only; DetectionOnly never interrupts.
#[test]
fn response_body_limit_action() {
    let reject = rules(RESPONSE);
    assert_eq!(
        respond(&reject, b"0123456789"),
        (None, false),
        "within the limit"
    );
    assert_eq!(
        respond(&reject, b"012345678Z"),
        (None, true),
        "the last byte it sees"
    );
    assert_eq!(respond(&reject, b"0123456789Z").0, Some(500), "past it");
    let explicit = rules(&format!("{RESPONSE}SecResponseBodyLimitAction Reject\n"));
    assert_eq!(respond(&explicit, b"0123456789Z").0, Some(500));
    let partial = rules(&format!(
        "{RESPONSE}SecResponseBodyLimitAction ProcessPartial\n"
    ));
    assert_eq!(
        respond(&partial, b"0123456789Z"),
        (None, false),
        "Z not seen"
    );
    assert_eq!(respond(&partial, b"Z0123456789abc"), (None, true), "Z seen");
    let detection = rules(&RESPONSE.replace("SecRuleEngine On", "SecRuleEngine DetectionOnly"));
    assert_eq!(respond(&detection, b"0123456789Z").0, None);
    refused_naming_file_and_directive("SecResponseBodyLimitAction Sometimes");
}

/// `line` (a directive with a bad value) in bad.conf is a load error naming the file and
/// the directive.
fn refused_naming_file_and_directive(line: &str) {
    let directive = line.split_whitespace().next().unwrap_or(line);
    match RuleSet::from_str(&format!("{line}\n"), Path::new("bad.conf")) {
        Ok(_) => panic!("{line} loads"),
        Err(e) => {
            let e = e.to_string();
            assert!(e.contains("bad.conf") && e.contains(directive), "{e}");
        }
    }
}

const REQUEST: &str = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecRequestBodyLimit 10
SecRule REQUEST_BODY "@rx Z" "id:8,phase:2,pass,log"
"#;

/// A urlencoded POST of `body` (REQUEST_BODY is set for that processor) through phase 2:
/// the interruption's status, whether rule 8 (a match on the body's last byte) matched, and
/// what the transaction says of the body limit (`request_body_truncated`,
/// `request_body_partial`).
fn post_raw(rules: &Arc<RuleSet>, body: &[u8]) -> (Option<u16>, bool, bool, bool) {
    let tx = post(rules, "application/x-www-form-urlencoded", body);
    let status = tx.interruption().map(|i| i.status);
    let matched = tx.matched_rules().iter().any(|m| m.id == 8);
    (
        status,
        matched,
        tx.request_body_truncated(),
        tx.request_body_partial(),
    )
}

/// SecRequestBodyLimitAction: past SecRequestBodyLimit, Reject (the default) interrupts with
/// 413; ProcessPartial inspects the first bytes and lets the request on; with the engine in
/// DetectionOnly even Reject never interrupts, so the proxy must not refuse the body either
/// (`request_body_partial`).
#[test]
fn request_body_limit_action() {
    let reject = rules(REQUEST);
    assert_eq!(post_raw(&reject, b"012345678Z"), (None, true, false, false));
    assert_eq!(
        post_raw(&reject, b"0123456789Z"),
        (Some(413), false, true, false)
    );
    let explicit = rules(&format!("{REQUEST}SecRequestBodyLimitAction Reject\n"));
    assert_eq!(post_raw(&explicit, b"0123456789Z").0, Some(413));
    let partial = rules(&format!(
        "{REQUEST}SecRequestBodyLimitAction ProcessPartial\n"
    ));
    assert_eq!(
        post_raw(&partial, b"0123456789Z"),
        (None, false, true, true),
        "Z past the limit: not seen"
    );
    assert_eq!(
        post_raw(&partial, b"Z0123456789abc"),
        (None, true, true, true),
        "Z within it"
    );
    let detection = rules(&REQUEST.replace("SecRuleEngine On", "SecRuleEngine DetectionOnly"));
    assert_eq!(
        post_raw(&detection, b"0123456789Z"),
        (None, false, true, true)
    );
    refused_naming_file_and_directive("SecRequestBodyLimitAction Sometimes");
}

/// ProcessPartial inspects what fits: a multipart body cut at the limit no longer parses
/// (its closing boundary is gone), so it is a REQBODY_ERROR, which the base configuration
/// (here rule 2) refuses with 400; the same parts within the limit pass.
#[test]
fn a_multipart_body_cut_by_process_partial_is_a_body_error() {
    let r = rules(&format!(
        "{SETUP}SecRequestBodyLimit 200\nSecRequestBodyLimitAction ProcessPartial\n"
    ));
    let multi = "multipart/form-data; boundary=B";
    let whole = multipart(2);
    assert!(whole.len() <= 200);
    assert!(post(&r, multi, &whole).interruption().is_none());
    let cut = multipart(10);
    assert!(cut.len() > 200);
    let tx = post(&r, multi, &cut);
    assert!(tx.request_body_truncated());
    assert_eq!(
        tx.interruption().map(|i| (i.status, i.rule_id)),
        Some((400, 2))
    );
}

/// The response body is wanted for a listed MIME type whatever its case, spacing and
/// parameters; not for another type or without a Content-Type.
#[test]
fn response_body_wanted_by_listed_mime_type() {
    let r = rules(RESPONSE);
    let wants = |ct: Option<&[u8]>| {
        let mut tx = Transaction::new(r.clone(), "10.0.0.1", "t");
        tx.set_response_status(200, "HTTP/1.1");
        if let Some(ct) = ct {
            tx.add_response_header("content-TYPE", ct);
        }
        tx.wants_response_body()
    };
    assert!(wants(Some(b"text/html")));
    assert!(wants(Some(b" Text/HTML ; charset=utf-8")));
    assert!(!wants(Some(b"text/plain")));
    assert!(!wants(Some(b"text/htmlx")));
    assert!(!wants(None));
}

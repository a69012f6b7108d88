//! Arbitrary requests through variable extraction, body processors, transformations and
//! operators: the input is split into a request line, headers and a body, and run through
//! rules that read every collection. Each request runs three times: as usual, without the
//! constant plan (a TX variable set before phase 1 turns it off), and through the same rules
//! loaded without any shortcut (`RuleSet::from_str_without_shortcuts`); all three must match
//! the same rules.
//! `cargo fuzz run request_variables` (nightly).
#![no_main]

#[path = "../common/request.rs"]
mod request;

use hoist_waf::{RuleSet, Transaction};
use libfuzzer_sys::fuzz_target;
use request::outcome;
use std::path::Path;
use std::sync::{Arc, OnceLock};

const RULES: &str = r#"
SecRuleEngine On
SecRequestBodyAccess On
SecResponseBodyAccess On
SecRequestBodyLimit 65536
SecRule REQUEST_HEADERS:Content-Type "@rx (?i)json" "id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecRule REQUEST_HEADERS:Content-Type "@rx (?i)xml" "id:2,phase:1,pass,nolog,ctl:requestBodyProcessor=XML"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.pl=1,setvar:tx.limit=3"
SecRule &TX:pl "@eq 0" "id:11,phase:1,pass,nolog,setvar:tx.pl=2"
SecRule TX:pl "@lt 2" "id:12,phase:1,pass,nolog,skipAfter:END-PL2"
SecRule ARGS "@rx attack" "id:13,phase:1,deny,status:403,log"
SecMarker END-PL2
SecRule REQUEST_URI "@contains /rm" "id:17,phase:1,pass,nolog,ctl:ruleRemoveTargetById=16;TX:pl"
SecRule ARGS:limit "@rx ^\d$" "id:14,phase:1,pass,nolog,capture,setvar:tx.limit=%{TX.0}"
SecRule &ARGS "@gt %{tx.limit}" "id:15,phase:2,pass,log,msg:'too many'"
SecRule TX:pl "@eq 1" "id:16,phase:2,pass,log,msg:'pl %{tx.pl} at %{REQUEST_URI}'"
SecRule ARGS|ARGS_NAMES|REQUEST_COOKIES|REQUEST_COOKIES_NAMES|REQUEST_HEADERS|REQUEST_HEADERS_NAMES|FILES|FILES_NAMES|MULTIPART_PART_HEADERS|XML:/*|XML://@* "@rx (?i)(select|script|\.\./)" "id:3,phase:2,pass,capture,multiMatch,t:none,t:urlDecodeUni,t:htmlEntityDecode,t:jsDecode,t:cssDecode,t:utf8toUnicode,t:removeNulls,t:cmdLine,t:normalisePathWin,t:replaceComments,t:compressWhitespace,t:base64Decode,t:escapeSeqDecode,setvar:'tx.hits=+1',setvar:'tx.m_%{MATCHED_VAR_NAME}=%{TX.0}'"
SecRule REQUEST_URI|REQUEST_URI_RAW|REQUEST_FILENAME|REQUEST_BASENAME|REQUEST_LINE|QUERY_STRING|REQUEST_BODY|REQBODY_ERROR_MSG "@detectSQLi" "id:4,phase:2,pass,t:none,t:urlDecode,t:lowercase"
SecRule ARGS|REQUEST_BODY "@detectXSS" "id:5,phase:2,pass,t:none,t:urlDecode"
SecRule &ARGS|ARGS_COMBINED_SIZE|FILES_COMBINED_SIZE|REQUEST_BODY_LENGTH|TX:/^m_/ "@gt 0" "id:6,phase:2,pass,t:none,t:length"
SecRule REQUEST_HEADERS|ARGS "!@validateByteRange 9,10,13,32-126" "id:7,phase:2,pass,t:none,t:hexEncode,t:sha1"
SecRule ARGS "@validateUtf8Encoding" "chain,id:8,phase:2,pass"
    SecRule MATCHED_VARS "@validateUrlEncoding" "t:none"
SecRule ARGS|REQUEST_COOKIES "@rx (?:\$\{|<\?|;\s*id\b)" "id:18,phase:2,pass,log,t:none,t:urlDecodeUni,t:removeWhitespace"
SecRule ARGS|ARGS_NAMES "@rx (?i)b[\"'\x5c]*a[\"'\x5c]*s[\"'\x5c]*h" "id:19,phase:2,pass,log,capture,t:none"
SecRule ARGS|ARGS_NAMES "@rx (?i)(?:^|;)c[\"'\x5c]*a[\"'\x5c]*t" "id:20,phase:2,pass,log,capture,t:none"
SecRule RESPONSE_BODY|RESPONSE_HEADERS "@pm select script" "id:9,phase:4,deny"
"#;

fn rules() -> Arc<RuleSet> {
    static RULES_SET: OnceLock<Arc<RuleSet>> = OnceLock::new();
    RULES_SET
        .get_or_init(|| match RuleSet::from_str(RULES, Path::new("fuzz.conf")) {
            Ok(r) => Arc::new(r),
            Err(e) => panic!("fuzz rules do not load: {e}"),
        })
        .clone()
}

/// The same rules without shortcuts: the reference.
fn reference() -> Arc<RuleSet> {
    static RULES_SET: OnceLock<Arc<RuleSet>> = OnceLock::new();
    RULES_SET
        .get_or_init(
            || match RuleSet::from_str_without_shortcuts(RULES, Path::new("fuzz.conf")) {
                Ok(r) => Arc::new(r),
                Err(e) => panic!("fuzz rules do not load: {e}"),
            },
        )
        .clone()
}

fn run(data: &[u8], slow: bool) -> Transaction {
    request::run(rules(), data, |tx| {
        if slow {
            tx.set_tx_var("zz_fuzz_slow_path", b"1");
        }
    })
}

fuzz_target!(|data: &[u8]| {
    let fast = run(data, false);
    let slow = run(data, true);
    assert_eq!(
        outcome(&fast),
        outcome(&slow),
        "the constant plan changed the outcome"
    );
    let plain = request::run(reference(), data, |_| {});
    assert_eq!(
        outcome(&fast),
        outcome(&plain),
        "the shortcuts changed the outcome"
    );
});

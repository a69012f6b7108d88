//! The constant plan (rules worked out once per rule set) must give every request what
//! evaluating each rule would: each case runs the same request twice, once as usual and once
//! with a TX variable set before phase 1 (which makes the transaction evaluate every rule),
//! and compares matches, interruptions and TX; and states the expected outcome outright.

use hoist_waf::{RuleSet, Transaction};
use std::path::Path;
use std::sync::Arc;

fn rules(text: &str) -> Arc<RuleSet> {
    match RuleSet::from_str(text, Path::new("test.conf")) {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("rules do not load: {e}"),
    }
}

fn run(rules: &Arc<RuleSet>, uri: &str, slow: bool) -> Transaction {
    let mut tx = Transaction::new(rules.clone(), "10.0.0.1", "t");
    if slow {
        tx.set_tx_var("zz_slow_path", b"1");
    }
    tx.process_request_line("GET", uri, "HTTP/1.1");
    tx.add_request_header("Host", b"example.com");
    tx.process_request_headers();
    tx.process_request_body();
    tx.process_logging();
    tx
}

/// (id, phase, logged, message) per match, and the interruption.
type Outcome = (Vec<(i64, u8, bool, String)>, Option<(u16, i64)>);

fn outcome(tx: &Transaction) -> Outcome {
    let matched = tx
        .matched_rules()
        .iter()
        .map(|m| (m.id, m.phase, m.logged(), m.message().to_string()))
        .collect();
    (matched, tx.interruption().map(|i| (i.status, i.rule_id)))
}

/// Runs `uri` both ways, checks they agree on the outcome and on `vars`, returns the usual one.
fn both(rules: &Arc<RuleSet>, uri: &str, vars: &[&str]) -> Transaction {
    let fast = run(rules, uri, false);
    let slow = run(rules, uri, true);
    assert_eq!(outcome(&fast), outcome(&slow), "{uri}: matches differ");
    for v in vars {
        assert_eq!(fast.tx_var(v), slow.tx_var(v), "{uri}: tx.{v} differs");
    }
    fast
}

fn ids(tx: &Transaction) -> Vec<i64> {
    tx.matched_rules().iter().map(|m| m.id).collect()
}

const SETUP: &str = r#"
SecRule REQUEST_HEADERS:Content-Type "@rx json" "id:1,phase:1,pass,nolog,ctl:requestBodyProcessor=JSON"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.setup=1"
SecRule &TX:pl "@eq 0" "id:11,phase:1,pass,nolog,setvar:tx.pl=1"
SecRule &TX:setup "@eq 0" "id:12,phase:1,deny,log,msg:'setup missing'"
SecRule TX:pl "@ge 1" "id:13,phase:1,pass,nolog,setvar:tx.threshold=5"
SecRule REQUEST_METHOD "@streq GET" "id:20,phase:1,pass,nolog,setvar:tx.seen=1"
SecRule TX:pl "@lt 2" "id:21,phase:1,pass,nolog,skipAfter:END-PL2"
SecRule ARGS "@rx attack" "id:22,phase:1,deny,log,msg:'paranoia level 2'"
SecMarker END-PL2
SecRule ARGS "@rx evil" "id:23,phase:2,deny,status:403,log,msg:'evil'"
SecRule TX:threshold "@eq 5" "id:24,phase:2,pass,log,msg:'threshold %{tx.threshold} at %{REQUEST_URI}'"
"#;

#[test]
fn crs_like_setup_is_worked_out_once_and_agrees_with_evaluation() {
    let r = rules(SETUP);
    let (block, decided) = r.constant_rules();
    assert_eq!(block, 4, "rules 10-13 form the block");
    assert_eq!(decided, 2, "rules 21 and 24 are decided");
    let vars = ["setup", "pl", "threshold", "seen"];
    let plain = both(&r, "/", &vars);
    assert_eq!(ids(&plain), [10, 11, 13, 20, 21, 24]);
    assert_eq!(plain.tx_var("threshold"), Some(&b"5"[..]));
    // A decided match still logs with the request's own state.
    let logged = &plain.matched_rules()[5];
    assert_eq!(logged.message(), "threshold 5 at /");
    // The paranoia-level skip is honoured: rule 22 never runs.
    let attack = both(&r, "/?a=attack", &vars);
    assert!(attack.interruption().is_none());
    let evil = both(&r, "/?a=evil", &vars);
    assert_eq!(evil.interruption().map(|i| i.rule_id), Some(23));
}

#[test]
fn a_variable_a_request_rule_may_write_is_evaluated_per_request() {
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.pl=1,setvar:tx.limit=1"
SecRule ARGS:pl "@streq 2" "id:20,phase:1,pass,nolog,setvar:tx.pl=2"
SecRule ARGS:x "@rx ." "id:21,phase:1,pass,nolog,setvar:'tx.li%{ARGS.x}=7'"
SecRule TX:pl "@eq 2" "id:30,phase:1,deny,status:403,log"
SecRule TX:limit "@eq 7" "id:31,phase:1,deny,status:429,log"
"#,
    );
    let vars = ["pl", "limit"];
    assert!(both(&r, "/", &vars).interruption().is_none());
    let pl2 = both(&r, "/?pl=2", &vars);
    assert_eq!(pl2.interruption().map(|i| i.status), Some(403));
    // `tx.li%{ARGS.x}` can name `tx.limit`: the prefix makes it unstable.
    let limit = both(&r, "/?x=mit", &vars);
    assert_eq!(limit.interruption().map(|i| i.status), Some(429));
}

#[test]
fn a_block_rule_that_would_log_ends_the_block() {
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.a=1"
SecRule TX:a "@eq 1" "id:11,phase:1,pass,log,msg:'logged at %{REQUEST_URI}'"
SecAction "id:12,phase:1,pass,nolog,setvar:tx.b=1"
"#,
    );
    assert_eq!(r.constant_rules().0, 1);
    let tx = both(&r, "/here", &["a", "b"]);
    assert_eq!(ids(&tx), [10, 11, 12]);
    assert_eq!(tx.matched_rules()[1].message(), "logged at /here");
}

#[test]
fn a_block_rule_that_denies_still_denies() {
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.a=1"
SecRule &TX:missing "@eq 0" "id:11,phase:1,deny,status:403,nolog"
SecAction "id:12,phase:1,pass,nolog,setvar:tx.b=1"
"#,
    );
    let tx = both(&r, "/", &["a", "b"]);
    assert_eq!(
        tx.interruption().map(|i| (i.status, i.rule_id)),
        Some((403, 11))
    );
    assert_eq!(tx.tx_var("b"), None);
}

#[test]
fn rules_removed_before_the_block_are_not_replayed() {
    let r = rules(
        r#"
SecRule REQUEST_URI "@streq /off" "id:1,phase:1,pass,nolog,ctl:ruleRemoveById=11"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.a=1"
SecAction "id:11,phase:1,pass,nolog,setvar:tx.b=1"
SecRule TX:b "@eq 1" "id:12,phase:2,deny,status:403,nolog"
"#,
    );
    let on = both(&r, "/", &["a", "b"]);
    assert_eq!(on.interruption().map(|i| i.rule_id), Some(12));
    let off = both(&r, "/off", &["a", "b"]);
    assert_eq!(off.tx_var("b"), None);
    assert!(off.interruption().is_none());
}

#[test]
fn a_target_removed_from_a_decided_rule_is_honoured() {
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.pl=1"
SecRule REQUEST_URI "@streq /ex" "id:20,phase:1,pass,nolog,ctl:ruleRemoveTargetById=30;TX:pl"
SecRule REQUEST_URI "@rx ." "id:21,phase:1,pass,nolog,ctl:ruleRemoveTargetById=99;TX:pl"
SecRule TX:pl "@eq 1" "id:30,phase:1,deny,status:403,log"
"#,
    );
    assert_eq!(r.constant_rules().1, 1, "rule 30 is decided");
    let plain = both(&r, "/", &["pl"]);
    assert_eq!(plain.interruption().map(|i| i.rule_id), Some(30));
    let excepted = both(&r, "/ex", &["pl"]);
    assert!(excepted.interruption().is_none());
}

#[test]
fn a_run_of_decided_rules_is_walked_when_a_removed_target_names_one() {
    // After the block &TX:pl counts 1, so 31 is decided "no match", in a run with markers
    // and 30 that the phase loop passes over at once (a leap). Taking TX:pl from 31 (by its
    // tag or its id) leaves a count of 0, which matches: the run must be walked then.
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.pl=1"
SecRule REQUEST_URI "@beginsWith /t" "id:20,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=count-me;TX:pl"
SecRule REQUEST_URI "@beginsWith /o" "id:21,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=other;TX:pl"
SecRule REQUEST_URI "@beginsWith /i" "id:22,phase:1,pass,nolog,ctl:ruleRemoveTargetById=31;TX:pl"
SecMarker A
SecRule TX:pl "@eq 2" "id:30,phase:2,deny,status:402,log,tag:'other'"
SecMarker B
SecRule &TX:pl "@eq 0" "id:31,phase:2,deny,status:403,log,tag:'count-me'"
SecMarker C
"#,
    );
    assert_eq!(r.constant_rules().1, 2, "30 and 31 are decided");
    let status = |uri: &str| both(&r, uri, &["pl"]).interruption().map(|i| i.status);
    assert_eq!(status("/"), None);
    assert_eq!(status("/t"), Some(403));
    assert_eq!(status("/i"), Some(403));
    // A removal naming only 30 (which then has no value to match) leaves 31 decided.
    assert_eq!(status("/o"), None);
}

#[test]
fn decided_matches_passed_over_leave_their_records_and_matched_vars() {
    // Phase 2 opens like a CRS file: 30 decided "no match", 31 a decided match that skips
    // the paranoia-level-2 rule 32, 33 a decided match; the loop passes over all of them at
    // once, and must leave what stepping through them leaves: 31's and 33's nolog records
    // (with 31's severity) and 33's MATCHED_VARS, which 40 reads.
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.pl=1,setvar:tx.n=7"
SecRule REQUEST_URI "@beginsWith /r" "id:20,phase:1,pass,nolog,ctl:ruleRemoveById=31"
SecRule REQUEST_URI "@beginsWith /t" "id:21,phase:1,pass,nolog,ctl:ruleRemoveByTag=pl-skip"
SecMarker BEGIN
SecRule TX:pl "@lt 1" "id:30,phase:2,pass,nolog,skipAfter:END-1"
SecRule TX:pl "@lt 2" "id:31,phase:2,pass,nolog,tag:'pl-skip',severity:'NOTICE',skipAfter:END-2"
SecRule ARGS "@rx ." "id:32,phase:2,deny,status:402,log"
SecMarker END-2
SecRule TX:n "@eq 7" "id:33,phase:2,pass,nolog"
SecMarker END-1
SecRule MATCHED_VAR_NAME "@streq TX:n" "id:40,phase:2,deny,status:403,log"
"#,
    );
    assert_eq!(r.constant_rules().1, 3, "30, 31 and 33 are decided");
    let plain = both(&r, "/?a=1", &["pl"]);
    assert_eq!(ids(&plain), [10, 31, 33, 40]);
    let skip = plain.matched_rules().iter().find(|m| m.id == 31);
    assert_eq!(
        skip.map(|m| (m.phase, m.severity, m.logged())),
        Some((2, Some(5), false))
    );
    assert_eq!(plain.interruption().map(|i| i.status), Some(403));
    // 31 removed (by id, by tag): its skip is not taken, and 32 denies.
    for uri in ["/r?a=1", "/t?a=1"] {
        let removed = both(&r, uri, &["pl"]);
        assert_eq!(removed.interruption().map(|i| i.status), Some(402), "{uri}");
        assert!(!ids(&removed).contains(&31), "{uri}");
    }
}

#[test]
fn a_chain_whose_first_link_cannot_match_is_decided() {
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.a=1"
SecRule &TX:max_args "@eq 1" "id:20,phase:2,deny,status:403,log,chain"
    SecRule &ARGS "@gt 0" ""
SecRule TX:a "@eq 1" "id:21,phase:2,deny,status:418,log,chain"
    SecRule ARGS:x "@streq y" ""
SecRule &TX:never "@eq 1" "id:22,phase:2,deny,status:402,log,capture"
"#,
    );
    // 20 and 22 decided (a never-written name is absent for good); 21's first link matches,
    // so its chain is left to evaluation.
    assert_eq!(r.constant_rules().1, 2);
    assert!(both(&r, "/?q=1", &["a"]).interruption().is_none());
    let teapot = both(&r, "/?x=y", &["a"]);
    assert_eq!(teapot.interruption().map(|i| i.status), Some(418));
    // Once a request rule may write the name, the chain is evaluated each time.
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.a=1"
SecRule ARGS:limit "@rx ." "id:15,phase:1,pass,nolog,setvar:tx.max_args=1"
SecRule &TX:max_args "@eq 1" "id:20,phase:2,deny,status:403,log,chain"
    SecRule &ARGS "@gt 1" ""
"#,
    );
    assert_eq!(r.constant_rules().1, 0);
    let limited = both(&r, "/?limit=1&q=2", &["max_args"]);
    assert_eq!(limited.interruption().map(|i| i.status), Some(403));
}

#[test]
fn captured_groups_are_never_decided() {
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.a=1"
SecRule ARGS:v "@rx (\d)" "id:15,phase:1,pass,nolog,capture"
SecRule TX:1 "@eq 7" "id:20,phase:1,deny,status:403,log"
"#,
    );
    assert_eq!(r.constant_rules().1, 0);
    let seven = both(&r, "/?v=7", &["1"]);
    assert_eq!(seven.interruption().map(|i| i.rule_id), Some(20));
}

#[test]
fn removals_by_tag_reach_decided_and_gated_rules() {
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.pl=1"
SecRule REQUEST_URI "@beginsWith /a" "id:20,phase:1,pass,nolog,ctl:ruleRemoveByTag=attack-x"
SecRule REQUEST_URI "@contains /b" "id:21,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=attack-y;ARGS:q"
SecRule REQUEST_URI "@beginsWith /c" "id:22,phase:1,pass,nolog,ctl:ruleRemoveTargetByTag=attack-z;TX:pl"
SecRule TX:pl "@eq 1" "id:32,phase:2,pass,log,tag:'attack-z'"
SecRule TX:pl "@eq 1" "id:30,phase:2,deny,status:401,log,tag:'other',tag:'attack-x'"
SecRule ARGS "@rx evil" "id:31,phase:2,deny,status:403,log,tag:'attack-y'"
"#,
    );
    let status = |uri: &str| both(&r, uri, &["pl"]).interruption().map(|i| i.status);
    assert_eq!(status("/?q=evil"), Some(401));
    // Removed by tag: 30 no longer runs, 31 (gated on "evil") does.
    assert_eq!(status("/a?q=evil"), Some(403));
    // With 30 removed too, ARGS:q taken from 31 by tag: only another argument trips it.
    assert_eq!(status("/a/b?q=evil"), None);
    assert_eq!(status("/a/b?q=x&r=evil"), Some(403));
    // TX:pl taken from the decided rule 32 by tag: it must not match.
    let c = both(&r, "/c", &["pl"]);
    assert!(!c.matched_rules().iter().any(|m| m.id == 32));
    assert!(both(&r, "/", &["pl"])
        .matched_rules()
        .iter()
        .any(|m| m.id == 32));
}

#[test]
fn the_block_is_not_replayed_under_another_engine_mode() {
    let r = rules(
        r#"
SecRuleEngine DetectionOnly
SecRule REQUEST_URI "@streq /enforce" "id:1,phase:1,pass,nolog,ctl:ruleEngine=On"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.a=1"
SecRule TX:a "@eq 1" "id:11,phase:1,deny,status:403,nolog"
SecAction "id:12,phase:1,pass,nolog,setvar:tx.b=1"
"#,
    );
    // Detection only: rule 11 matches without interrupting, so it is part of the block.
    assert_eq!(r.constant_rules().0, 3);
    let detect = both(&r, "/", &["a", "b"]);
    assert!(detect.interruption().is_none());
    assert_eq!(detect.tx_var("b"), Some(&b"1"[..]));
    let enforced = both(&r, "/enforce", &["a", "b"]);
    assert_eq!(enforced.interruption().map(|i| i.rule_id), Some(11));
    assert_eq!(enforced.tx_var("b"), None);
}

#[test]
fn a_replayed_block_leaves_nothing_of_the_last_transactions_tx() {
    // The block's TX is written over the previous transaction's map (scratch.rs): what that
    // transaction changed or added must be gone.
    let r = rules(
        r#"
SecAction "id:10,phase:1,pass,nolog,setvar:tx.a=1,setvar:tx.b=two"
SecRule ARGS:a "@rx ." "id:20,phase:1,pass,nolog,setvar:'tx.a=%{ARGS.a}',setvar:tx.extra=1,setvar:!tx.b"
"#,
    );
    assert_eq!(r.constant_rules().0, 1, "rule 10 forms the block");
    for _ in 0..3 {
        let changed = run(&r, "/?a=longer-than-before", false);
        assert_eq!(changed.tx_var("a"), Some(&b"longer-than-before"[..]));
        assert_eq!(changed.tx_var("b"), None);
        drop(changed);
        let plain = run(&r, "/", false);
        assert_eq!(plain.tx_var("a"), Some(&b"1"[..]));
        assert_eq!(plain.tx_var("b"), Some(&b"two"[..]));
        assert_eq!(plain.tx_var("extra"), None);
    }
}

/// A TX target with a regex selector yields its members in the order they were added
/// (ModSecurity 2's tables keep that order; a hash map's order changes with its seed and
/// history), whether TX comes from the constant plan's block or from evaluating every rule,
/// and on each of several transactions (the map is reused between them). Eight names: a
/// map that ignored the order would pass by chance once in 40,320 runs.
#[test]
fn tx_members_come_in_the_order_they_were_added() {
    let r = rules(
        r#"
SecAction "id:1,phase:1,pass,nolog,setvar:tx.order=o,setvar:tx.p_h=h,setvar:tx.p_c=c,setvar:tx.p_f=f,setvar:tx.p_a=a,setvar:tx.p_g=g,setvar:tx.p_b=b,setvar:tx.p_e=e,setvar:tx.p_d=d"
SecRule REQUEST_URI "@rx ^/(\w)" "id:2,phase:1,pass,nolog,capture,setvar:tx.p_%{tx.1}=%{tx.1},setvar:tx.p_y=y"
SecRule TX:/^p_/ "@rx ." "id:3,phase:1,pass,nolog,setvar:'tx.order=%{tx.order}%{MATCHED_VAR}'"
"#,
    );
    for uri in ["/x", "/z", "/x", "/q"] {
        let tx = both(&r, uri, &["order"]);
        let added = &uri[1..];
        let want = format!("ohcfagbed{added}y");
        assert_eq!(
            tx.tx_var("order").map(String::from_utf8_lossy),
            Some(want.as_str().into()),
            "{uri}"
        );
    }
}

/// After the block's replay a TX selector reads the block's names it takes (worked out with
/// the plan) and the names written since: a block name changed, removed, or removed and
/// added again, and new names, must come out as a walk of the whole of TX gives them, in
/// TX's order. The same selectors through a prefix (`/^p_/`), a regex and all of TX.
#[test]
fn tx_selectors_after_the_block_see_every_change_since() {
    let r = rules(
        r#"
SecAction "id:1,phase:1,pass,nolog,setvar:tx.seen=,setvar:tx.regex=,setvar:tx.all=,setvar:tx.p_a=a,setvar:tx.p_b=b,setvar:tx.p_c=c,setvar:tx.q_p_d=d"
SecRule ARGS:change "@rx ." "id:2,phase:1,pass,nolog,setvar:tx.p_a=A"
SecRule ARGS:remove "@rx ." "id:3,phase:1,pass,nolog,setvar:!tx.p_b"
SecRule ARGS:readd "@rx ." "id:4,phase:1,pass,nolog,setvar:!tx.p_c,setvar:tx.p_c=C"
SecRule ARGS:add "@rx ." "id:5,phase:1,pass,nolog,setvar:tx.p_new=n,setvar:tx.p_newer=m"
SecRule TX:/^p_/ "@rx ." "id:6,phase:2,pass,nolog,setvar:'tx.seen=%{tx.seen}%{MATCHED_VAR}'"
SecRule TX:/P_[A-Z]$/ "@rx ." "id:7,phase:2,pass,nolog,setvar:'tx.regex=%{tx.regex}%{MATCHED_VAR}'"
SecRule TX "@rx ^[a-zA-Z]$" "id:8,phase:2,pass,nolog,setvar:'tx.all=%{tx.all}%{MATCHED_VAR}'"
"#,
    );
    assert_eq!(r.constant_rules().0, 1, "rule 1 forms the block");
    for (uri, seen, regex, all) in [
        ("/", "abc", "abcd", "abcd"),
        ("/?change=1", "Abc", "Abcd", "Abcd"),
        ("/?remove=1", "ac", "acd", "acd"),
        ("/?readd=1", "abC", "abdC", "abdC"),
        ("/?add=1", "abcnm", "abcd", "abcdnm"),
        ("/?change=1&remove=1&readd=1&add=1", "ACnm", "AdC", "AdCnm"),
        ("/", "abc", "abcd", "abcd"),
    ] {
        let tx = both(&r, uri, &["seen", "regex", "all"]);
        assert!(tx.replayed_constant_block(), "{uri}");
        let var = |v: &str| {
            tx.tx_var(v)
                .map(|x| String::from_utf8_lossy(x).into_owned())
        };
        assert_eq!(var("seen").as_deref(), Some(seen), "{uri}: TX:/^p_/");
        assert_eq!(var("regex").as_deref(), Some(regex), "{uri}: TX:/P_[A-Z]$/");
        assert_eq!(var("all").as_deref(), Some(all), "{uri}: TX");
    }
}

//! Every operator, with macros and negation.

use hoist_waf::macros::{Macro, Part};
use hoist_waf::operators::{atoi, Captures, Expand, Operator};
use std::borrow::Cow;
use std::path::Path;

/// Expands `%{tx.x}` to "5" and every other macro to "".
struct Env;

impl Expand for Env {
    fn expand<'m>(&self, m: &'m Macro) -> Cow<'m, str> {
        let mut out = String::new();
        for p in &m.parts {
            match p {
                Part::Literal(s) => out.push_str(s),
                Part::Tx(k) if *k == "x" => out.push('5'),
                Part::Tx(_) | Part::Var(..) => {}
            }
        }
        Cow::Owned(out)
    }
}

fn op(spec: &str) -> (Operator, bool) {
    match Operator::parse(spec, Path::new(".")) {
        Ok(o) => o,
        Err(e) => panic!("{spec}: {e}"),
    }
}

fn hit(spec: &str, input: &[u8]) -> bool {
    let (o, negated) = op(spec);
    o.evaluate(input, &Env, None) != negated
}

#[test]
fn rx_is_dotall_bytewise_and_captures() {
    assert!(hit("@rx ^a.b$", b"a\nb"));
    assert!(hit("@rx \\xff", b"x\xffy"), "raw bytes, not UTF-8");
    assert!(hit("(?i)select", b"SELECT"), "bare pattern is @rx");
    assert!(!hit("!@rx abc", b"xabcx"));
    let (o, _) = op("@rx (\\d+)-(\\d+)");
    let mut caps = Captures::default();
    assert!(o.evaluate(b"id 12-34", &Env, Some(&mut caps)));
    assert_eq!(
        caps.groups(),
        [b"12-34".to_vec(), b"12".to_vec(), b"34".to_vec()]
    );
    // No groups of its own: TX.0 alone, the leftmost match as PCRE finds it.
    let (o, _) = op("@rx b+|c");
    assert!(o.evaluate(b"acbbc", &Env, Some(&mut caps)));
    assert_eq!(
        caps.groups(),
        [b"c".to_vec()],
        "fewer groups than the last match"
    );
    assert!(!o.evaluate(b"xyz", &Env, Some(&mut caps)));
}

/// `^.*$` is answered without a regex: the same answer and TX.0 as the DOTALL regex.
#[test]
fn rx_match_everything_captures_the_whole_value() {
    let (whole, _) = op("@rx ^.*$");
    let (regex, _) = op("@rx ^(?:.*)$");
    for input in [
        &b""[..],
        b"host",
        b"x-forwarded-for",
        b"a\nb",
        b"\n",
        b"\xff\x00 z",
    ] {
        let (mut a, mut b) = (Captures::default(), Captures::default());
        assert!(whole.evaluate(input, &Env, Some(&mut a)), "{input:?}");
        assert!(regex.evaluate(input, &Env, Some(&mut b)), "{input:?}");
        assert_eq!(a.groups(), [input.to_vec()], "{input:?}");
        assert_eq!(a.groups(), b.groups(), "{input:?}");
    }
    assert!(!hit("!@rx ^.*$", b"anything"));
}

#[test]
fn rx_falls_back_for_lookaround() {
    assert!(hit("@rx a(?=b)", b"ab"));
    assert!(!hit("@rx a(?=b)", b"ac"));
    assert!(hit("@rx (a)\\1", b"aa"));
}

#[test]
fn pm_is_case_insensitive_substring() {
    assert!(hit("@pm foo bar", b"xxBARxx"));
    assert!(!hit("@pm foo bar", b"baz"));
    let dir = std::env::temp_dir().join(format!("hoist-waf-pm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("words.data"), "# comment\n\nnikto\nsqlmap\n").expect("write");
    let (o, _) = Operator::parse("@pmFromFile words.data", &dir).expect("loads");
    assert!(o.evaluate(b"Mozilla sqlmap/1.0", &Env, None));
    assert!(
        !o.evaluate(b"# comment", &Env, None),
        "comments are not phrases"
    );
    assert!(Operator::parse("@pmFromFile missing.data", &dir).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn string_comparisons_with_macros() {
    assert!(hit("@streq abc", b"abc"));
    assert!(!hit("@streq abc", b"abcd"));
    assert!(hit("@streq %{tx.x}", b"5"));
    assert!(hit("@contains ell", b"hello"));
    assert!(hit("@beginsWith he", b"hello"));
    assert!(hit("@endsWith lo", b"hello"));
    assert!(!hit("!@endsWith lo", b"hello"));
    assert!(hit("@within GET HEAD POST", b"HEAD"));
    assert!(!hit("@within GET POST", b"PUT"));
    assert!(
        !hit("@within GET POST", b""),
        "an empty value is within nothing"
    );
    assert!(hit("@containsWord select", b"1 select 2"));
    assert!(!hit("@containsWord select", b"selected"));
    assert!(
        hit("@containsWord select", b"selected_x, select"),
        "a later occurrence that is a word"
    );
    assert!(!hit("@contains ell", b"el"));
    assert!(hit("@within /accept/ /host/", b"/host/"));
}

#[test]
fn numeric_comparisons() {
    assert!(hit("@eq 0", b""), "non-numbers are 0");
    assert!(hit("@eq %{tx.x}", b"5"));
    assert!(hit("@gt 4", b"5"));
    assert!(hit("@ge 5", b"5"));
    assert!(hit("@lt 6", b"5"));
    assert!(hit("@le 5", b"5"));
    assert!(!hit("!@eq 0", b"0"));
    assert_eq!(atoi(b" -12abc"), -12);
    assert_eq!(atoi(b"99999999999999999999999"), i64::MAX);
}

#[test]
fn ip_match() {
    assert!(hit("@ipMatch 127.0.0.1,10.0.0.0/8", b"10.1.2.3"));
    assert!(!hit("@ipMatch 10.0.0.0/8", b"11.0.0.1"));
    assert!(hit("@ipMatch ::1,2001:db8::/32", b"2001:db8::5"));
    assert!(!hit("@ipMatch 10.0.0.0/8", b"not an ip"));
    assert!(Operator::parse("@ipMatch 10.0.0.0/33", Path::new(".")).is_err());
}

#[test]
fn validators() {
    assert!(hit("@validateByteRange 32-126", b"ab\x01"));
    assert!(!hit("@validateByteRange 32-126", b"abc"));
    assert!(!hit("@validateByteRange 1-255", b"\xff"));
    assert!(Operator::parse("@validateByteRange 9-2", Path::new(".")).is_err());
    assert!(hit("@validateUrlEncoding", b"a%2"));
    assert!(hit("@validateUrlEncoding", b"%zz"));
    assert!(!hit("@validateUrlEncoding", b"a%20b"));
    assert!(hit("@validateUtf8Encoding", b"\xc0\xaf"), "overlong");
    assert!(!hit("@validateUtf8Encoding", "é".as_bytes()));
}

#[test]
fn libinjection() {
    let (o, _) = op("@detectSQLi");
    let mut caps = Captures::default();
    assert!(o.evaluate(b"1' OR '1'='1", &Env, Some(&mut caps)));
    assert!(
        caps.len() == 1 && !caps.groups()[0].is_empty(),
        "fingerprint captured"
    );
    assert!(!hit("@detectSQLi", b"hello world"));
    assert!(hit("@detectXSS", b"<script>alert(1)</script>"));
    assert!(!hit("@detectXSS", b"just text"));
}

#[test]
fn trivial_and_unknown() {
    assert!(hit("@unconditionalMatch", b""));
    assert!(!hit("@noMatch", b"x"));
    assert!(Operator::parse("@bogus x", Path::new(".")).is_err());
}

#[test]
fn rx_hex_escapes_are_bytes_as_in_pcre() {
    // CRS 942432: `\x{e2}\x80[\x98\x99]` is the UTF-8 encoding of U+2019, byte by byte.
    let spec = "@rx ((?:(?:[!-\\+\\-:->@\\[\\]\\^`\\{-~]|\\x{c2}\\x{b4}|\\x{e2}\\x80[\\x98\\x99])[^!-\\+\\-:->@\\[\\]\\^`\\{-~]*?){2})";
    assert!(hit(spec, "\u{2019} #".as_bytes()));
    assert!(!hit(spec, b"plain words"));
}

//! Every transformation, with the decoder edge cases that attackers use.

use hoist_waf::transforms::Transform;

/// Applies a transformation, checking on the way that the engine's no-op shortcut never
/// claims "unchanged" for an input the transformation changes.
fn t(name: &str, input: &[u8]) -> Vec<u8> {
    match Transform::parse(name) {
        Ok(Some(tr)) => {
            let out = tr.apply(input);
            if tr.is_noop_for(input) {
                assert_eq!(out, input, "{name}: is_noop_for lied");
            }
            out
        }
        other => panic!("{name}: {other:?}"),
    }
}

#[test]
fn noop_shortcut_holds_for_plain_values() {
    let names = [
        "lowercase",
        "urlDecodeUni",
        "htmlEntityDecode",
        "jsDecode",
        "cssDecode",
        "utf8toUnicode",
        "removeNulls",
        "removeWhitespace",
        "compressWhitespace",
        "replaceComments",
        "removeCommentsChar",
        "normalisePath",
        "normalisePathWin",
        "trim",
    ];
    for name in names {
        for input in [&b"plain value 42"[..], b"", b" padded ", b"a/b/c", b"x  y"] {
            t(name, input);
        }
    }
    let Ok(Some(lower)) = Transform::parse("lowercase") else {
        panic!("lowercase")
    };
    assert!(lower.is_noop_for(b"abc") && !lower.is_noop_for(b"aBc"));
}

#[test]
fn none_is_a_reset_and_unknown_is_an_error() {
    assert_eq!(Transform::parse("none"), Ok(None));
    assert!(Transform::parse("rot13").is_err());
}

#[test]
fn case_and_length() {
    assert_eq!(t("lowercase", b"SeLeCT\xc3\x89"), b"select\xc3\x89");
    assert_eq!(t("uppercase", b"abc"), b"ABC");
    assert_eq!(t("length", b"hello"), b"5");
    assert_eq!(t("length", b""), b"0");
}

#[test]
fn url_decode_edges() {
    assert_eq!(t("urlDecode", b"a%20b+c"), b"a b c");
    assert_eq!(t("urlDecode", b"%2"), b"%2", "truncated escape kept");
    assert_eq!(t("urlDecode", b"%zz%41"), b"%zzA", "invalid hex kept");
    assert_eq!(t("urlDecode", b"%00"), b"\0");
    assert_eq!(
        t("urlDecodeUni", b"%u0041%uFF1C"),
        b"A<",
        "full-width maps to ASCII"
    );
    assert_eq!(t("urlDecodeUni", b"%u12"), b"%u12");
    assert_eq!(
        t("urlDecodeUni", b"%u004"),
        b"%u004",
        "%u with three digits kept"
    );
    assert_eq!(t("urlDecodeUni", b"%u0041%41"), b"AA");
    assert_eq!(t("urlDecode", b"%u0041"), b"%u0041", "no %u without Uni");
    assert_eq!(t("urlDecode", b"ab%"), b"ab%", "% at the end kept");
    assert_eq!(t("urlDecode", b"%%41+%2B"), b"%A +");
    assert_eq!(t("urlDecode", b"\xff%ff"), b"\xff\xff");
    assert_eq!(t("urlEncode", b"a b&"), b"a+b%26");
}

#[test]
fn html_entities() {
    assert_eq!(t("htmlEntityDecode", b"&lt;script&gt;"), b"<script>");
    assert_eq!(
        t("htmlEntityDecode", b"&#x3c;&#60;&#X3C"),
        b"<<<",
        "hex, decimal, no semicolon"
    );
    assert_eq!(
        t("htmlEntityDecode", b"&quot;&amp;&nbsp;&apos;"),
        b"\"&\xa0'"
    );
    assert_eq!(t("htmlEntityDecode", b"&bogus; &#;"), b"&bogus; &#;");
    assert_eq!(
        t("htmlEntityDecode", b"&#99999999999;"),
        b"\xff",
        "overflow saturates"
    );
}

#[test]
fn js_and_css_decoding() {
    assert_eq!(t("jsDecode", b"\\x3cscript\\u003e"), b"<script>");
    assert_eq!(t("jsDecode", b"\\n\\t\\'\\\\"), b"\n\t'\\");
    assert_eq!(t("jsDecode", b"\\101\\7"), b"A\x07", "octal");
    assert_eq!(
        t("jsDecode", b"\\x4"),
        b"x4",
        "short hex drops the backslash"
    );
    assert_eq!(t("jsDecode", b"end\\"), b"end\\");
    assert_eq!(t("cssDecode", b"\\3c script"), b"<script");
    assert_eq!(t("cssDecode", b"ja\\vascript"), b"javascript");
    assert_eq!(t("cssDecode", b"\\"), b"");
    assert_eq!(t("cssDecode", b"\\00003c"), b"<");
}

#[test]
fn escape_sequences() {
    assert_eq!(t("escapeSeqDecode", b"\\x41\\101\\n\\\""), b"AA\n\"");
    assert_eq!(
        t("escapeSeqDecode", b"\\q\\x"),
        b"\\q\\x",
        "unknown escapes kept"
    );
}

#[test]
fn utf8_to_unicode() {
    assert_eq!(
        t("utf8toUnicode", "a<\u{ff1c}é".as_bytes()),
        b"a<%uff1c%u00e9"
    );
    assert_eq!(
        t("utf8toUnicode", b"\xff"),
        b"\xff",
        "invalid bytes pass through"
    );
}

#[test]
fn nulls_and_whitespace() {
    assert_eq!(t("removeNulls", b"a\0b\0"), b"ab");
    assert_eq!(t("replaceNulls", b"a\0b"), b"a b");
    assert_eq!(t("removeWhitespace", b" a\tb\n\xa0c "), b"abc");
    assert_eq!(t("compressWhitespace", b"a  \t\nb \xa0c"), b"a b c");
    assert_eq!(t("trim", b" \t x y \n"), b"x y");
    assert_eq!(t("trimLeft", b"  x "), b"x ");
    assert_eq!(t("trimRight", b"  x "), b"  x");
    assert_eq!(t("trim", b"   "), b"");
    // The filters at their edges: nothing, everything and nothing removed, and a long value
    // whose kept bytes are every other one.
    assert_eq!(t("removeWhitespace", b""), b"");
    assert_eq!(t("removeWhitespace", b" \t\n\r\x0b\x0c\xa0"), b"");
    assert_eq!(t("removeNulls", b"\0\0\0"), b"");
    assert_eq!(t("removeNulls", b"abc"), b"abc");
    let long: Vec<u8> = (0..3000u32)
        .flat_map(|i| [b'a' + (i % 26) as u8, b' '])
        .collect();
    let kept: Vec<u8> = (0..3000u32).map(|i| b'a' + (i % 26) as u8).collect();
    assert_eq!(t("removeWhitespace", &long), kept);
}

#[test]
fn comments() {
    assert_eq!(
        t("replaceComments", b"un/**/ion/*x*/select"),
        b"un ion select"
    );
    assert_eq!(t("replaceComments", b"a/* never closed"), b"a ");
    assert_eq!(t("removeComments", b"a/*x*/b<!--y-->c-- tail"), b"abc");
    assert_eq!(t("removeCommentsChar", b"a/*b*/c--d#e<!--f-->"), b"abcdef");
}

#[test]
fn cmd_line() {
    assert_eq!(t("cmdLine", b"C^a\"t /E'T'C/pa\\sswd"), b"cat/etc/passwd");
    assert_eq!(t("cmdLine", b"ls ,;  -la"), b"ls -la");
    assert_eq!(t("cmdLine", b"echo (x)"), b"echo(x)");
}

#[test]
fn paths() {
    assert_eq!(t("normalisePath", b"/a/./b/../c//d"), b"/a/c/d");
    assert_eq!(t("normalizePath", b"/../../etc/passwd"), b"/etc/passwd");
    assert_eq!(t("normalisePath", b"a/../../b"), b"../b");
    assert_eq!(t("normalisePath", b"/a/b/"), b"/a/b/");
    assert_eq!(t("normalisePathWin", b"c:\\a\\..\\b"), b"c:/b");
    assert_eq!(t("normalisePath", b""), b"");
}

#[test]
fn encodings_and_hashes() {
    assert_eq!(t("base64Decode", b"PHNjcmlwdD4="), b"<script>");
    assert_eq!(
        t("base64Decode", b"PHNjcmlwdD4"),
        b"<script>",
        "missing padding"
    );
    assert_eq!(
        t("base64Decode", b"QUJD*junk"),
        b"ABC",
        "stops at a foreign byte"
    );
    assert_eq!(
        t("base64DecodeExt", b"QU.JD"),
        b"ABC",
        "skips foreign bytes"
    );
    assert_eq!(t("base64Encode", b"ABC"), b"QUJD");
    assert_eq!(t("hexEncode", b"\x00\xffA"), b"00ff41");
    assert_eq!(t("hexDecode", b"41424"), b"AB");
    assert_eq!(
        t("hexEncode", &t("sha1", b"abc")),
        b"a9993e364706816aba3e25717850c26c9cd0d89d"
    );
}

const EVERY_TRANSFORM: &[&str] = &[
    "lowercase",
    "uppercase",
    "urlDecode",
    "urlDecodeUni",
    "urlEncode",
    "htmlEntityDecode",
    "jsDecode",
    "cssDecode",
    "utf8toUnicode",
    "removeNulls",
    "replaceNulls",
    "removeWhitespace",
    "compressWhitespace",
    "replaceComments",
    "removeComments",
    "removeCommentsChar",
    "cmdLine",
    "normalisePath",
    "normalisePathWin",
    "escapeSeqDecode",
    "base64Decode",
    "base64DecodeExt",
    "base64Encode",
    "hexEncode",
    "hexDecode",
    "length",
    "sha1",
    "trim",
    "trimLeft",
    "trimRight",
];

/// Every string of up to three bytes over the bytes the no-op checks look at, plus letters.
fn small_inputs() -> Vec<Vec<u8>> {
    let alphabet = b"%+&\\\x00 \t\xa0\xc3/*-#.aZ\"'^,;(";
    let mut out = vec![Vec::new()];
    let mut last = vec![Vec::new()];
    for _ in 0..3 {
        let mut next = Vec::new();
        for s in &last {
            for &b in alphabet {
                let mut v: Vec<u8> = s.clone();
                v.push(b);
                next.push(v);
            }
        }
        out.extend(next.iter().cloned());
        last = next;
    }
    out
}

/// `small_inputs` between letters too (one to four before, four after): the mask is gathered
/// four bytes at a time, and a pair (`//`, `/*`, two spaces...) must count wherever it falls
/// in those four, across two of them included.
fn shifted_inputs() -> Vec<Vec<u8>> {
    let small = small_inputs();
    let mut out = small.clone();
    for shift in 1..=4 {
        for input in &small {
            let mut v = b"xxxx"[..shift].to_vec();
            v.extend_from_slice(input);
            v.extend_from_slice(b"xxxx");
            out.push(v);
        }
    }
    out
}

/// The one-pass mask agrees with `keeps_prefilter_hits` for every transformation.
#[test]
fn hit_keeping_mask_matches_each_transformation() {
    for input in shifted_inputs() {
        let mask = Transform::hit_keeping_mask(&input);
        for name in EVERY_TRANSFORM {
            let t = Transform::parse(name).unwrap().unwrap();
            assert_eq!(
                mask & t.bit() != 0,
                t.keeps_prefilter_hits(&input),
                "{name} on {input:?}"
            );
        }
    }
}

/// The value cache reads "changes nothing" off the mask for every transformation but the case
/// changers and cmdLine (`ValueCache::transform`): there the mask's bit is `is_noop_for`.
#[test]
fn hit_keeping_mask_is_the_noop_check_but_for_case_and_cmd_line() {
    for input in shifted_inputs() {
        let mask = Transform::hit_keeping_mask(&input);
        for name in EVERY_TRANSFORM {
            if matches!(*name, "lowercase" | "uppercase" | "cmdLine") {
                continue;
            }
            let t = Transform::parse(name).unwrap().unwrap();
            assert_eq!(
                mask & t.bit() != 0,
                t.is_noop_for(&input),
                "{name} on {input:?}"
            );
        }
    }
}

/// What "keeps the prefilter hits" promises: the output is the input but for ASCII case.
#[test]
fn kept_means_changed_in_case_only() {
    for input in small_inputs() {
        for name in EVERY_TRANSFORM {
            let t = Transform::parse(name).unwrap().unwrap();
            if t.keeps_prefilter_hits(&input) {
                assert!(
                    t.apply(&input).eq_ignore_ascii_case(&input),
                    "{name} on {input:?}"
                );
            }
        }
    }
}

/// What makes the mask sound along a chain: whether a transformation is a no-op does not
/// depend on ASCII case (the case transformations aside), so it holds for every value a
/// chain of kept steps produces from the original.
#[test]
fn no_op_checks_ignore_ascii_case() {
    for input in small_inputs() {
        for name in EVERY_TRANSFORM {
            let t = Transform::parse(name).unwrap().unwrap();
            if matches!(t, Transform::Lowercase | Transform::Uppercase) {
                continue;
            }
            for changed in [input.to_ascii_lowercase(), input.to_ascii_uppercase()] {
                assert_eq!(
                    t.is_noop_for(&input),
                    t.is_noop_for(&changed),
                    "{name} on {input:?}"
                );
                assert_eq!(
                    t.keeps_prefilter_hits(&input),
                    t.keeps_prefilter_hits(&changed),
                    "{name} on {input:?}"
                );
            }
        }
    }
}

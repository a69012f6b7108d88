//! @detectSQLi and @detectXSS: libinjection's two detectors.
//!
//! SQLi is hoist's own implementation of libinjection's algorithm (`crate::sqli`: same
//! verdicts and fingerprints as libinjectionrs, which it replaced because it spent ~30,000
//! instructions on an ordinary form value). XSS is libinjectionrs, run only on values where
//! it could say yes:
//!
//! Most values CRS hands these operators are single words: argument and cookie names,
//! identifiers, numbers. For such text the XSS answer is known without parsing:
//! libinjection parses the value as HTML text and as an attribute value (unquoted and in
//! each quote). Words of letters, digits and `_` separated by spaces hold no `<` (text
//! only), no quote (one quoted value, of no known attribute), and no `=`, `/` or `>`: the
//! unquoted value is its first word and the others are attribute names without values,
//! while every check libinjection makes is on a tag, a comment, a doctype or an attribute's
//! value. So the empty value and such text are never XSS. `tests` compares the shortcut
//! with libinjectionrs.

/// libinjection's SQLi detector (hoist's implementation, `crate::sqli`); the fingerprint
/// goes to `capture` (TX.0) on a match.
pub(crate) fn detect_sqli(input: &[u8], capture: impl FnOnce(&[u8])) -> bool {
    match crate::sqli::detect(input) {
        Some(fingerprint) => {
            capture(fingerprint.as_bytes());
            true
        }
        None => false,
    }
}

/// libinjection's XSS detector.
pub(crate) fn detect_xss(input: &[u8]) -> bool {
    if input.iter().all(|&b| is_word_byte(b) || b == b' ') {
        return false;
    }
    libinjectionrs::detect_xss(input).is_injection()
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_xss(input: &[u8]) -> bool {
        libinjectionrs::detect_xss(input).is_injection()
    }

    /// xorshift64: the generators below are deterministic, so a failure reproduces.
    fn next(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    /// Single words the shortcut takes, from a deterministic generator: SQL keywords and
    /// function names (every word in libinjection's own table), HTML and JavaScript words,
    /// digits, and random words up to past libinjection's 32-byte token size.
    fn words() -> Vec<Vec<u8>> {
        let mut words: Vec<Vec<u8>> = libinjectionrs::sqli::sqli_data::SQL_KEYWORDS
            .iter()
            .map(|k| k.word.as_bytes().to_vec())
            .filter(|w| !w.is_empty() && w.iter().all(|&b| is_word_byte(b)))
            .collect();
        for w in [
            "script",
            "onerror",
            "onload",
            "javascript",
            "style",
            "src",
            "href",
            "iframe",
            "svg",
            "xmlns",
            "import",
            "entity",
            "doctype",
            "vbscript",
            "data",
            "alert",
            "0",
            "1",
            "00",
            "0x",
            "0b",
            "1e5",
            "1f",
            "1d",
            "1fUNION",
            "true",
            "null",
            "sleep",
            "benchmark",
            "waitfor",
            "union",
            "select",
            "or",
            "and",
            "xor",
            "div",
            "like",
            "field12",
            "utm_source",
            "_",
            "__proto__",
            "sp_password",
        ] {
            words.push(w.as_bytes().to_vec());
        }
        let alphabet = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_";
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..20_000 {
            let seed = next(&mut seed);
            let len = 1 + (seed % 40) as usize;
            let word = (0..len)
                .map(|i| {
                    let x = seed.rotate_left(i as u32 * 7) as usize;
                    alphabet.get(x % alphabet.len()).copied().unwrap_or(b'a')
                })
                .collect();
            words.push(word);
        }
        let lower: Vec<Vec<u8>> = words.iter().map(|w| w.to_ascii_lowercase()).collect();
        words.extend(lower);
        let digits: Vec<Vec<u8>> = (0..200u32).map(|n| n.pow(3).to_string().into()).collect();
        words.extend(digits);
        words
    }

    /// Words and attribute-like names joined by spaces, for the XSS shortcut.
    fn texts() -> Vec<Vec<u8>> {
        let html = [
            "on",
            "onerror",
            "onload",
            "onclick",
            "style",
            "src",
            "href",
            "xmlns",
            "formaction",
            "action",
            "javascript",
            "vbscript",
            "data",
            "attributename",
            "values",
            "from",
            "to",
            "by",
            "script",
            "iframe",
            "svg",
            "img",
            "a",
            "background",
            "dynsrc",
            "lowsrc",
        ];
        let mut vocabulary: Vec<Vec<u8>> = html.iter().map(|w| w.as_bytes().to_vec()).collect();
        vocabulary.extend(words().into_iter().step_by(7));
        let mut texts = vec![Vec::new(), b" ".to_vec(), b"  on  ".to_vec()];
        let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..20_000 {
            let seed = next(&mut seed);
            let n = 1 + (seed % 6) as usize;
            let mut text = Vec::new();
            for i in 0..n {
                let pick = seed.rotate_left(i as u32 * 11) as usize % vocabulary.len();
                let spaces = 1 + (seed >> (i * 3 + 40)) as usize % 3;
                if i > 0 || seed % 5 == 0 {
                    text.extend(std::iter::repeat_n(b' ', spaces));
                }
                text.extend_from_slice(vocabulary.get(pick).map_or(&b"x"[..], |w| &w[..]));
            }
            texts.push(text);
        }
        texts
    }

    #[test]
    fn the_xss_shortcut_agrees_with_libinjection() {
        for word in words().into_iter().chain(texts()) {
            assert_eq!(
                detect_xss(&word),
                reference_xss(&word),
                "{:?}",
                String::from_utf8_lossy(&word)
            );
        }
    }

    #[test]
    fn values_outside_the_shortcut_still_reach_libinjection() {
        for input in [
            &b"3f2a9c1e7b5d"[..],
            b"1 or 1=1",
            b"<script>alert(1)</script>",
            b"\" onerror=alert(1)",
        ] {
            assert_eq!(detect_xss(input), reference_xss(input));
        }
        assert!(detect_xss(b"<script>alert(1)</script>"));
    }

    #[test]
    fn sqli_reports_the_fingerprint() {
        let mut captured = Vec::new();
        assert!(detect_sqli(b"1 or 1=1", |fp| captured.extend_from_slice(fp)));
        assert_eq!(captured, b"1&1");
        assert!(!detect_sqli(b"field_12", |_| panic!(
            "no match, no capture"
        )));
    }
}

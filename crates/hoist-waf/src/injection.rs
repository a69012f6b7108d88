//! @detectSQLi and @detectXSS: libinjection (the libinjectionrs port), run only on values
//! where it could say yes.
//!
//! Most values CRS hands these operators are single words: argument and cookie names,
//! identifiers, numbers. libinjectionrs spends ~17,000 instructions on one (a keyword lookup
//! that upper-cases into a new String and binary-searches 9,000 entries, per word), and on a
//! form POST the two detectors were a third of the engine's work. For such a word the answer
//! is known without tokenizing:
//!
//! - SQLi: a word of letters, digits and `_` that does not start with a digit is one token
//!   (libinjection's word parser stops only at punctuation, whitespace and quotes; the `b'`,
//!   `e'`, `n'`, `q'`, `u&'`, `x'` string prefixes need a quote), and so is a run of digits
//!   (no `0x`/`0b`, `.`, exponent or suffix to read). A value of one token has a fingerprint
//!   of at most one character, its type, and libinjection reports SQLi only for a fingerprint
//!   on its list: checked at first use (`one_token_can_match`) against the list itself, so a
//!   future list with such a fingerprint turns the shortcut off rather than making it wrong.
//!   (The list has one one-character fingerprint, `X`; that type comes only from comments.)
//! - XSS: libinjection parses the value as HTML text and as an attribute value (unquoted and
//!   in each quote). Words of letters, digits and `_` separated by spaces hold no `<` (text
//!   only), no quote (one quoted value, of no known attribute), and no `=`, `/` or `>`: the
//!   unquoted value is its first word and the others are attribute names without values,
//!   while every check libinjection makes is on a tag, a comment, a doctype or an attribute's
//!   value. So the empty value and such text are never XSS.
//!
//! Mixed words starting with a digit (`3f2a...`) are two tokens for libinjection (a number
//! and a word) and still go to it. `tests` compares both shortcuts with libinjectionrs.

use std::sync::OnceLock;

/// libinjection's SQLi detector; the fingerprint goes to `capture` (TX.0) on a match.
pub(crate) fn detect_sqli(input: &[u8], capture: impl FnOnce(&[u8])) -> bool {
    if is_one_sqli_token(input) && !one_token_can_match() {
        return false;
    }
    let mut state = libinjectionrs::SqliState::new(input, libinjectionrs::SqliFlags::FLAG_NONE);
    // Not `libinjectionrs::detect_sqli`: it fingerprints the input once more after
    // detecting, for a fingerprint the state already holds (twice the work).
    let injection = state.detect();
    if injection {
        capture(state.fingerprint_string().as_bytes());
    }
    injection
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

/// Whether libinjection's SQL tokenizer reads `input` as exactly one token: a word that does
/// not start with a digit, or digits only.
fn is_one_sqli_token(input: &[u8]) -> bool {
    match input.first() {
        None => false,
        Some(b) if b.is_ascii_digit() => input.iter().all(u8::is_ascii_digit),
        Some(_) => input.iter().all(|&b| is_word_byte(b)),
    }
}

/// Whether the fingerprint of a lone word or number can be on libinjection's list. Its one
/// character is the token's type: `n` (a word that is no keyword), `1` (a number), or the
/// type of a keyword in libinjection's word table (entries of type `F` are fingerprints, all
/// starting with `0`: no word of `is_one_sqli_token` equals one). Asked of the list once.
fn one_token_can_match() -> bool {
    static ANSWER: OnceLock<bool> = OnceLock::new();
    *ANSWER.get_or_init(|| {
        let keyword_types = libinjectionrs::sqli::sqli_data::SQL_KEYWORDS
            .iter()
            .map(|k| k.token_type)
            .filter(|&t| t != b'F');
        [b'n', b'1'].into_iter().chain(keyword_types).any(|t| {
            let fingerprint = [t];
            std::str::from_utf8(&fingerprint)
                .is_ok_and(libinjectionrs::sqli::blacklist::is_blacklisted)
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference_sqli(input: &[u8]) -> bool {
        libinjectionrs::SqliState::new(input, libinjectionrs::SqliFlags::FLAG_NONE).detect()
    }

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

    /// Single words a shortcut takes, from a deterministic generator: SQL keywords and
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

    #[test]
    fn no_lone_word_fingerprint_is_on_the_list() {
        // If this fails, libinjection's list gained one and the SQLi shortcut is off.
        assert!(!one_token_can_match());
    }

    #[test]
    fn the_sqli_shortcut_agrees_with_libinjection() {
        let mut taken = 0;
        for word in words() {
            let shortcut = detect_sqli(&word, |_| {});
            assert_eq!(
                shortcut,
                reference_sqli(&word),
                "{:?}",
                String::from_utf8_lossy(&word)
            );
            taken += usize::from(is_one_sqli_token(&word));
        }
        assert!(
            taken > 20_000,
            "the generator must exercise the shortcut: {taken}"
        );
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
    fn values_outside_the_shortcuts_still_reach_libinjection() {
        // Two tokens (a number, then a word) and the classic injections: decided by
        // libinjection, whatever it says.
        for input in [
            &b"3f2a9c1e7b5d"[..],
            b"1 or 1=1",
            b"' or '1'='1",
            b"1fUNION",
            b"admin'--",
            b"<script>alert(1)</script>",
            b"\" onerror=alert(1)",
        ] {
            assert_eq!(detect_sqli(input, |_| {}), reference_sqli(input));
            assert_eq!(detect_xss(input), reference_xss(input));
        }
        assert!(detect_sqli(b"1 or 1=1", |_| {}));
        assert!(detect_xss(b"<script>alert(1)</script>"));
        assert!(!is_one_sqli_token(b"3f2a9c1e7b5d"));
        assert!(!is_one_sqli_token(b""));
        assert!(is_one_sqli_token(b"12345"));
        assert!(is_one_sqli_token(b"field_12"));
    }
}

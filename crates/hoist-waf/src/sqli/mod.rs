//! hoist's SQL injection detector: libinjection's algorithm (as libinjectionrs 0.1.1 runs it,
//! fingerprint for fingerprint), without allocating and without libinjectionrs's per-word
//! `String`s and binary searches.
//!
//! libinjection reads a value as a fragment of SQL, folds its tokens into at most five
//! (`fold`), and takes the folded tokens' kinds as a fingerprint (`1&1`, `s&sos`, `Uknn`...).
//! The value is an injection when the fingerprint is on its blacklist and not one of a few
//! look-alikes of ordinary text (`verdict`). It tries up to five readings of the value:
//!
//! 1. as is, in ANSI SQL; again in MySQL when MySQL would read its comments differently;
//! 2. when it holds a `'`, as the rest of a `'...` string (ANSI, then perhaps MySQL);
//! 3. when it holds a `"`, as the rest of a `"...` string (MySQL only).
//!
//! The first reading that finds an injection gives the verdict and the fingerprint.
//!
//! The word list and character classes are libinjectionrs's own data, read through its
//! public API (`keywords`, `tokenizer`), so the two cannot drift apart; `tests` compares the
//! two detectors on ~800,000 inputs.

mod fold;
mod keywords;
mod token;
mod tokenizer;
mod verdict;

#[cfg(test)]
mod tests;

pub(crate) use verdict::Fingerprint;

use tokenizer::Context;

/// Inputs up to this long are copied next to `MAX_TEXT` spare bytes for the tokenizer (on
/// the stack); longer ones are read as they are.
pub(super) const PADDED_INPUT: usize = 256;

/// libinjection's `libinjection_is_sqli`: the fingerprint of the first reading of `input`
/// that is an injection, or `None`.
pub(crate) fn detect(input: &[u8]) -> Option<Fingerprint> {
    if input.is_empty() {
        return None;
    }
    if let Some(kind) = tokenizer::lone_word_kind(input) {
        return lone_word(input, kind);
    }
    // The input with room after it, for the tokenizer's fixed-size copies.
    let mut room = [0u8; PADDED_INPUT + token::MAX_TEXT];
    let padded = match room.get_mut(..input.len()) {
        Some(head) => {
            head.copy_from_slice(input);
            room.get(..input.len() + token::MAX_TEXT).unwrap_or(input)
        }
        None => input,
    };
    let read = |quote, mysql| reading(input, padded, quote, mysql);
    let (hit, wants_mysql) = read(0, false);
    if hit.is_some() {
        return hit;
    }
    if wants_mysql {
        if let (Some(fp), _) = read(0, true) {
            return Some(fp);
        }
    }
    // Most values hold no quote at all: one scan says so for both.
    memchr::memchr2(b'\'', b'"', input)?;
    if memchr::memchr(b'\'', input).is_some() {
        let (hit, wants_mysql) = read(b'\'', false);
        if hit.is_some() {
            return hit;
        }
        if wants_mysql {
            if let (Some(fp), _) = read(b'\'', true) {
                return Some(fp);
            }
        }
    }
    if memchr::memchr(b'"', input).is_some() {
        if let (Some(fp), _) = read(b'"', true) {
            return Some(fp);
        }
    }
    None
}

/// The verdict on a value that is one word (a form field's name, a plain value): a single
/// token of that word's kind, which folding leaves alone or, as it does any leading SQL
/// type, comment, `(` or unary `NOT`, drops; with no quote and no comment there is no other
/// reading, and one token is never whitelisted. So: its kind, if that is blacklisted.
fn lone_word(word: &[u8], kind: u8) -> Option<Fingerprint> {
    use token::kind::{COMMENT, LPAREN, OPERATOR, SQLTYPE};
    if matches!(kind, COMMENT | LPAREN | SQLTYPE)
        || (kind == OPERATOR && word.eq_ignore_ascii_case(b"not"))
    {
        return None;
    }
    keywords::is_blacklisted(&[kind]).then(|| Fingerprint::one(kind))
}

/// One reading: its fingerprint when it is an injection, and whether the input had comments
/// that MySQL reads differently.
fn reading(input: &[u8], padded: &[u8], quote: u8, mysql: bool) -> (Option<Fingerprint>, bool) {
    let mut folded = fold::Folded::new(input, padded, Context { quote, mysql });
    folded.run();
    let fp = Fingerprint::of(&folded);
    let hit = verdict::is_injection(input, &fp, &folded).then_some(fp);
    (hit, folded.wants_mysql)
}

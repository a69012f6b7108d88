//! `@pm` / `@pmFromFile`: a list of phrases, matched anywhere in the value, ignoring ASCII case.
//!
//! The Aho-Corasick automaton answers (and gives the phrase for `capture`). Built to ignore
//! case, it has no prefilter of its own (the aho-corasick crate turns its SIMD "packed"
//! searcher off for case-insensitive patterns, and CRS's lists start with too many distinct
//! bytes for a start-byte one), so it walks its DFA byte by byte: CRS 944130's 68 Java class
//! names over a 10 KB form body cost ~167k instructions, ~17 µs of a ~370 µs POST. Values
//! that short are mostly answered by the literal prefilter before the operator runs; the
//! long ones (request and response bodies over the prefilter's 4 KB) reach it. For those,
//! a packed searcher over the lower-cased phrases first reads a lower-cased copy of the
//! value: it finds a phrase exactly when the automaton would, so its "none" is the answer
//! and only a value that holds a phrase is walked by the automaton.

use aho_corasick::{packed, AhoCorasick};
use std::ops::Range;

/// Values at least this long go through the packed searcher first; below it, copying the
/// value to lower its case costs more than the automaton's walk saves.
const LONG_VALUE: usize = 256;

#[derive(Debug)]
pub struct PhraseSet {
    automaton: AhoCorasick,
    /// `None` when the packed searcher cannot be built here (more than 128 phrases, more than
    /// 64 with a short one, an empty one, or no SIMD on this CPU).
    long_values: Option<packed::Searcher>,
    phrases: Vec<Vec<u8>>,
}

impl PhraseSet {
    pub fn new(phrases: Vec<Vec<u8>>) -> Result<PhraseSet, String> {
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&phrases)
            .map_err(|e| format!("@pm: {e}"))?;
        // Teddy, the packed searcher, refuses more than 64 patterns unless told otherwise
        // (944130 has 68): with four-byte fingerprints (`java`, `com.`, `org.`...) its
        // candidates are few even so; shorter phrases keep the crate's limit.
        let shortest = phrases.iter().map(Vec::len).min().unwrap_or(0);
        let long_values = packed::Config::new()
            .heuristic_pattern_limits(shortest < 4)
            .builder()
            .extend(phrases.iter().map(|p| p.to_ascii_lowercase()))
            .build();
        Ok(PhraseSet {
            automaton,
            long_values,
            phrases,
        })
    }

    /// The phrases as configured (the prefilter adds them to its own literals).
    pub fn phrases(&self) -> &[Vec<u8>] {
        &self.phrases
    }

    /// Where the automaton's first match lies in `input` (the one ending first), if any.
    pub fn find(&self, input: &[u8]) -> Option<Range<usize>> {
        if input.len() >= LONG_VALUE {
            if let Some(searcher) = &self.long_values {
                // No phrase in the lower-cased copy: none in any case.
                searcher.find(input.to_ascii_lowercase())?;
            }
        }
        self.automaton.find(input).map(|m| m.range())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(phrases: &[&str]) -> PhraseSet {
        PhraseSet::new(phrases.iter().map(|p| p.as_bytes().to_vec()).collect()).unwrap()
    }

    /// `value` padded past `LONG_VALUE` on both sides, so the packed searcher runs.
    fn long(value: &str) -> Vec<u8> {
        let pad = "x".repeat(LONG_VALUE);
        format!("{pad}{value}{pad}").into_bytes()
    }

    #[test]
    fn long_values_find_phrases_in_any_case() {
        let s = set(&["java.lang.Runtime", "classLoader"]);
        assert!(s.long_values.is_some(), "no packed searcher on this CPU");
        let v = long("a=JAVA.LANG.runtime&b=1");
        let r = s.find(&v).unwrap();
        assert_eq!(&v[r], b"JAVA.LANG.runtime");
        assert_eq!(s.find(&long("ClassLoader")).map(|r| r.len()), Some(11));
        assert_eq!(s.find(&long("java.lang.Runtim")), None);
        assert_eq!(s.find(&long("class loader")), None);
    }

    #[test]
    fn lists_longer_than_teddys_default_limit_get_a_packed_searcher() {
        let many: Vec<String> = (0..100).map(|i| format!("phrase{i}.")).collect();
        let s = set(&many.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(s.long_values.is_some());
        assert_eq!(s.find(&long("PHRASE77.")).map(|r| r.len()), Some(9));
        assert_eq!(s.find(&long("phrase100")), None);
        // A short phrase among them keeps the crate's limit of 64.
        let mut short = many.clone();
        short.push("ab".into());
        let s = set(&short.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(s.long_values.is_none());
        assert_eq!(s.find(&long("xAB")).map(|r| r.len()), Some(2));
    }

    #[test]
    fn long_and_short_values_answer_as_the_automaton_does() {
        let phrases = ["abcd", "bc", "Xy", "y.z", "zz"];
        let s = set(&phrases);
        let alphabet = [b'a', b'b', b'c', b'd', b'x', b'Y', b'.', b'z', b'Z', b' '];
        // Every string of up to four bytes from the alphabet, alone and padded.
        let mut values = vec![Vec::new()];
        for len in 1..=4 {
            let mut next = Vec::new();
            for v in values.iter().filter(|v: &&Vec<u8>| v.len() == len - 1) {
                for &b in &alphabet {
                    let mut w = v.clone();
                    w.push(b);
                    next.push(w);
                }
            }
            values.extend(next);
        }
        for v in values {
            for value in [v.clone(), long(std::str::from_utf8(&v).unwrap())] {
                let expected = s.automaton.find(&value[..]).map(|m| m.range());
                assert_eq!(
                    s.find(&value),
                    expected,
                    "{:?}",
                    String::from_utf8_lossy(&value)
                );
            }
        }
    }
}

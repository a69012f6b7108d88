//! `@pm` / `@pmFromFile`: a list of phrases, matched anywhere in the value, ignoring ASCII case.
//!
//! The Aho-Corasick automaton answers (and gives the phrase for `capture`). Built to ignore
//! case, it has no prefilter of its own (the aho-corasick crate turns its SIMD "packed"
//! searcher off for case-insensitive patterns, and CRS's lists start with too many distinct
//! bytes for a start-byte one), so it walks its DFA byte by byte: CRS 944130's 68 Java class
//! names over a 10 KB form body cost ~167k instructions, ~17 µs of a ~370 µs POST. Values
//! that short are mostly answered by the literal prefilter before the operator runs; the
//! long ones (request and response bodies over the prefilter's 4 KB) reach it. For those,
//! packed searchers (Teddy) over the lower-cased phrases first read a lower-cased copy of
//! the value: between them they find a phrase exactly when the automaton would, so their
//! "none" is the answer and only a value that holds a phrase is walked by the automaton.
//! A Teddy pass over an HTML page took about a quarter of the automaton's walk (perf, a
//! 512 KB page), so a list is split into at most `MAX_PASSES` searchers. A longer list
//! (php-errors.data's 1,831 phrases would need 15 passes, no faster than the automaton)
//! is looked for with the literal prefilter's `LiteralScan` instead, whose small tables
//! stay cached where the automaton's large one misses on every few bytes.

use crate::literal_scan::LiteralScan;
use aho_corasick::{packed, AhoCorasick};
use std::ops::Range;

/// Values at least this long go through the packed searchers first; below it, copying the
/// value to lower its case costs more than the automaton's walk saves.
const LONG_VALUE: usize = 256;

/// A packed searcher takes at most 128 patterns (64 with a phrase under four bytes, whose
/// shorter fingerprints would bring Teddy too many candidates); a longer list is split into
/// up to this many searchers, each a pass over the value (sql-errors.data's 171 phrases
/// take two).
const MAX_PASSES: usize = 2;

#[derive(Debug)]
pub struct PhraseSet {
    automaton: AhoCorasick,
    /// What long values are searched with before the automaton.
    long_values: LongValues,
    phrases: Vec<Vec<u8>>,
}

impl PhraseSet {
    pub fn new(phrases: Vec<Vec<u8>>) -> Result<PhraseSet, String> {
        let automaton = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&phrases)
            .map_err(|e| format!("@pm: {e}"))?;
        Ok(PhraseSet {
            automaton,
            long_values: LongValues::new(&phrases),
            phrases,
        })
    }

    /// The phrases as configured (the prefilter adds them to its own literals).
    pub fn phrases(&self) -> &[Vec<u8>] {
        &self.phrases
    }

    /// Where the automaton's first match lies in `input` (the one ending first), if any.
    pub fn find(&self, input: &[u8]) -> Option<Range<usize>> {
        if input.len() >= LONG_VALUE && !self.long_values.holds_some(input) {
            return None;
        }
        self.automaton.find(input).map(|m| m.range())
    }
}

#[derive(Debug)]
enum LongValues {
    /// Teddy searchers over the lower-cased phrases, between them all of them.
    Packed(Vec<packed::Searcher>),
    Scan(Box<LiteralScan>),
    /// The automaton alone (an empty phrase, or neither of the others could be built).
    Automaton,
}

impl LongValues {
    fn new(phrases: &[Vec<u8>]) -> LongValues {
        if phrases.iter().any(Vec::is_empty) {
            return LongValues::Automaton;
        }
        let packed = packed_searchers(phrases);
        if !packed.is_empty() {
            return LongValues::Packed(packed);
        }
        LiteralScan::new(phrases).map_or(LongValues::Automaton, |s| LongValues::Scan(Box::new(s)))
    }

    /// False only when no phrase occurs in `input` in any case.
    fn holds_some(&self, input: &[u8]) -> bool {
        match self {
            LongValues::Packed(searchers) => {
                let lowered = input.to_ascii_lowercase();
                searchers.iter().any(|s| s.find(&lowered).is_some())
            }
            LongValues::Scan(scan) => {
                let mut any = false;
                scan.scan(input, |_| any = true);
                any
            }
            LongValues::Automaton => true,
        }
    }
}

/// Teddy searchers for `phrases` lower-cased, or none. Teddy refuses more than 64 patterns
/// unless told otherwise (CRS 944130 has 68): with four-byte fingerprints (`java`, `com.`,
/// `org.`...) its candidates stay few with up to 128.
fn packed_searchers(phrases: &[Vec<u8>]) -> Vec<packed::Searcher> {
    let mut lowered: Vec<Vec<u8>> = phrases.iter().map(|p| p.to_ascii_lowercase()).collect();
    lowered.sort_unstable();
    lowered.dedup();
    let shortest = lowered.iter().map(Vec::len).min().unwrap_or(0);
    let per_searcher = if shortest < 4 { 64 } else { 128 };
    if lowered.len() > per_searcher * MAX_PASSES {
        return Vec::new();
    }
    let searchers: Option<Vec<_>> = lowered
        .chunks(per_searcher)
        .map(|chunk| {
            packed::Config::new()
                .heuristic_pattern_limits(false)
                .builder()
                .extend(chunk)
                .build()
        })
        .collect();
    searchers.unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(phrases: &[&str]) -> PhraseSet {
        PhraseSet::new(phrases.iter().map(|p| p.as_bytes().to_vec()).collect()).unwrap()
    }

    fn kind(s: &PhraseSet) -> String {
        match &s.long_values {
            LongValues::Packed(searchers) => format!("packed {}", searchers.len()),
            LongValues::Scan(_) => "scan".into(),
            LongValues::Automaton => "automaton".into(),
        }
    }

    /// `value` padded past `LONG_VALUE` on both sides, so the packed searcher runs.
    fn long(value: &str) -> Vec<u8> {
        let pad = "x".repeat(LONG_VALUE);
        format!("{pad}{value}{pad}").into_bytes()
    }

    #[test]
    fn long_values_find_phrases_in_any_case() {
        let s = set(&["java.lang.Runtime", "classLoader"]);
        assert_eq!(kind(&s), "packed 1", "no packed searcher on this CPU?");
        let v = long("a=JAVA.LANG.runtime&b=1");
        let r = s.find(&v).unwrap();
        assert_eq!(&v[r], b"JAVA.LANG.runtime");
        assert_eq!(s.find(&long("ClassLoader")).map(|r| r.len()), Some(11));
        assert_eq!(s.find(&long("java.lang.Runtim")), None);
        assert_eq!(s.find(&long("class loader")), None);
    }

    #[test]
    fn long_lists_are_split_between_packed_searchers() {
        let many: Vec<String> = (0..200).map(|i| format!("phrase{i}.")).collect();
        let s = set(&many.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(kind(&s), "packed 2");
        for i in [0, 150, 199] {
            let v = long(&format!("PHRASE{i}."));
            assert_eq!(s.find(&v).map(|r| r.len()), Some(format!("{i}").len() + 7));
        }
        assert_eq!(s.find(&long("phrase200.")), None);
        // A short phrase among them: 64 phrases per searcher.
        let mut short: Vec<String> = many.iter().take(100).cloned().collect();
        short.push("ab".into());
        let s = set(&short.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(kind(&s), "packed 2");
        assert_eq!(s.find(&long("xAB")).map(|r| r.len()), Some(2));
        // More than `MAX_PASSES` searchers would be needed: the literal scan.
        let too_many: Vec<String> = (0..128 * MAX_PASSES + 1)
            .map(|i| format!("p{i}."))
            .collect();
        let s = set(&too_many.iter().map(String::as_str).collect::<Vec<_>>());
        assert_eq!(kind(&s), "scan");
        assert_eq!(s.find(&long("P256.")).map(|r| r.len()), Some(5));
        assert_eq!(s.find(&long("P257.")), None);
    }

    #[test]
    fn long_and_short_values_answer_as_the_automaton_does() {
        let phrases = ["abcd", "bc", "Xy", "y.z", "zz"];
        let mut s = set(&phrases);
        assert_eq!(kind(&s), "packed 1");
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
        for round in ["packed", "scan"] {
            if round == "scan" {
                let bytes: Vec<Vec<u8>> = phrases.iter().map(|p| p.as_bytes().to_vec()).collect();
                s.long_values = LongValues::Scan(Box::new(LiteralScan::new(&bytes).unwrap()));
            }
            for v in &values {
                for value in [v.clone(), long(std::str::from_utf8(v).unwrap())] {
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
}

//! @rx prefilter: the literals one of which must occur in any match of a regex, extracted at
//! load, and per transformation chain one Aho-Corasick automaton over the literals of every
//! @rx rule that uses that chain.
//!
//! Per transformed value the engine runs the automaton once and learns which rules' literal
//! sets occur; a rule whose set does not occur cannot match, so its regex is not run. This
//! only ever answers "cannot match", so it changes no result: negation, captures and chains
//! see the operator's true answer either way. Literals are folded to ASCII lowercase and
//! searched ASCII-case-insensitively, which can only add candidates, never lose one.

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex_syntax::hir::{Class, Hir, HirKind};

type Set = Vec<Vec<u8>>;

/// Largest finite language kept exactly while combining sub-expressions.
const MAX_EXACT: usize = 64;
/// Largest literal set kept as a requirement; bigger sets filter too little to be worth it.
const MAX_REQUIRED: usize = 256;
/// Largest character class enumerated into literals.
const MAX_CLASS: u32 = 16;

/// What a sub-expression tells about the strings it matches.
struct Info {
    /// Every string it can match, when that is a small finite set.
    exact: Option<Set>,
    /// Every match contains one of these; `None` when nothing is known.
    required: Option<Set>,
}

/// The literals (ASCII-lowercased) one of which occurs in every match of `pattern`, parsed as
/// the `regex` crate parses it for a bytes regex; `None` when no useful set exists (the regex
/// can match the empty string, or the set would be too large).
pub fn required_literals(pattern: &str) -> Option<Set> {
    let hir = regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(pattern)
        .ok()?;
    let set = required_of(analyze(&hir))?;
    (!set.is_empty() && set.iter().all(|s| !s.is_empty())).then_some(set)
}

fn analyze(h: &Hir) -> Info {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => exact(vec![Vec::new()]),
        HirKind::Literal(lit) => exact(vec![lit.0.to_ascii_lowercase()]),
        HirKind::Class(class) => Info {
            exact: class_members(class),
            required: None,
        },
        HirKind::Capture(c) => analyze(&c.sub),
        HirKind::Repetition(r) => {
            let sub = analyze(&r.sub);
            if r.min == 0 {
                // It may match the empty string: no requirement.
                let exact = match (r.max, sub.exact) {
                    (Some(1), Some(mut e)) => {
                        e.push(Vec::new());
                        Some(normalize(e))
                    }
                    _ => None,
                };
                Info {
                    exact,
                    required: None,
                }
            } else {
                let once = r.min == 1 && r.max == Some(1);
                Info {
                    exact: if once { sub.exact.clone() } else { None },
                    required: required_of(sub),
                }
            }
        }
        HirKind::Concat(subs) => concat(subs),
        HirKind::Alternation(subs) => alternation(subs),
    }
}

fn exact(set: Set) -> Info {
    Info {
        exact: Some(set),
        required: None,
    }
}

fn normalize(mut set: Set) -> Set {
    set.sort();
    set.dedup();
    set
}

fn class_members(class: &Class) -> Option<Set> {
    let mut out = Vec::new();
    match class {
        Class::Bytes(c) => {
            let size: u32 = c
                .ranges()
                .iter()
                .map(|r| u32::from(r.end()) - u32::from(r.start()) + 1)
                .sum();
            if size > MAX_CLASS {
                return None;
            }
            for r in c.ranges() {
                out.extend((r.start()..=r.end()).map(|b| vec![b.to_ascii_lowercase()]));
            }
        }
        Class::Unicode(c) => {
            let size: u32 = c
                .ranges()
                .iter()
                .map(|r| u32::from(r.end()) - u32::from(r.start()) + 1)
                .sum();
            if size > MAX_CLASS {
                return None;
            }
            for r in c.ranges() {
                for ch in r.start()..=r.end() {
                    let mut buf = [0u8; 4];
                    out.push(ch.encode_utf8(&mut buf).as_bytes().to_ascii_lowercase());
                }
            }
        }
    }
    Some(normalize(out))
}

/// The better requirement of what is known: the exact set (if it has no empty string) or the
/// required set.
fn required_of(info: Info) -> Option<Set> {
    let from_exact = info
        .exact
        .filter(|e| !e.is_empty() && e.iter().all(|s| !s.is_empty()));
    match (from_exact, info.required) {
        (Some(a), Some(b)) => Some(if score(&b) > score(&a) { b } else { a }),
        (a, b) => a.or(b),
    }
}

/// Longer shortest literal first (up to 4 bytes, where false hits become rare), then fewer.
fn score(set: &Set) -> (usize, std::cmp::Reverse<usize>) {
    let shortest = set.iter().map(Vec::len).min().unwrap_or(0);
    (shortest.min(4), std::cmp::Reverse(set.len()))
}

fn consider(best: &mut Option<Set>, candidate: Set) {
    if candidate.is_empty() || candidate.iter().any(Vec::is_empty) {
        return;
    }
    if best.as_ref().is_none_or(|b| score(&candidate) > score(b)) {
        *best = Some(candidate);
    }
}

/// A concatenation's runs of exactly-known parts multiply into longer literals; any run or
/// any part's requirement is a requirement of the whole.
fn concat(subs: &[Hir]) -> Info {
    let mut run: Option<Set> = Some(vec![Vec::new()]);
    let mut all_exact = true;
    let mut best = None;
    for sub in subs {
        let info = analyze(sub);
        match (run.take(), info.exact) {
            (Some(r), Some(e)) if r.len() * e.len() <= MAX_EXACT => {
                let mut next = Vec::with_capacity(r.len() * e.len());
                for a in &r {
                    for b in &e {
                        let mut s = a.clone();
                        s.extend_from_slice(b);
                        next.push(s);
                    }
                }
                run = Some(normalize(next));
            }
            (r, e) => {
                all_exact = false;
                if let Some(r) = r {
                    consider(&mut best, r);
                }
                if let Some(req) = info.required {
                    consider(&mut best, req);
                }
                run = e;
            }
        }
    }
    let exact = if all_exact { run.clone() } else { None };
    if let Some(r) = run {
        consider(&mut best, r);
    }
    Info {
        exact,
        required: best,
    }
}

fn alternation(subs: &[Hir]) -> Info {
    let infos: Vec<Info> = subs.iter().map(analyze).collect();
    let mut exact = Some(Vec::new());
    for info in &infos {
        exact = match (exact, &info.exact) {
            (Some(mut acc), Some(e)) if acc.len() + e.len() <= MAX_EXACT => {
                acc.extend(e.iter().cloned());
                Some(acc)
            }
            _ => None,
        };
    }
    let mut required = Some(Vec::new());
    for info in infos {
        required = match (required, required_of(info)) {
            (Some(mut acc), Some(r)) if acc.len() + r.len() <= MAX_REQUIRED => {
                acc.extend(r);
                Some(acc)
            }
            _ => None,
        };
    }
    Info {
        exact: exact.map(normalize),
        required: required.map(normalize),
    }
}

/// One automaton over the literal sets of every prefiltered rule, plus a byte table for the
/// one-byte literals (`/`, whitespace, digits): in an automaton those match at nearly every
/// byte of ordinary text, and reporting each match cost more than the whole scan.
#[derive(Debug)]
pub struct Prefilter {
    automaton: Option<AhoCorasick>,
    /// Pattern index → the slots of the rules that require it (rules share literals).
    slots_of: Vec<Vec<u32>>,
    /// The bytes some rule has as a one-byte literal (both ASCII cases of a letter), each
    /// with the `words` of its slot mask in `byte_masks`.
    bytes: Vec<(u8, usize)>,
    byte_masks: Vec<u64>,
    /// u64 words of a hit bitset.
    words: usize,
}

/// Drops literals that contain another literal of the same set: the shorter one occurs
/// wherever the longer does, so the set requires the same, with fewer matches to report.
/// Large sets (@pm phrase files) are kept as they are: the check is quadratic.
fn minimize(set: &Set) -> Set {
    if set.len() > MAX_REQUIRED {
        return set.clone();
    }
    let contains = |hay: &[u8], needle: &[u8]| {
        needle.len() < hay.len()
            && hay
                .windows(needle.len())
                .any(|w| w.eq_ignore_ascii_case(needle))
    };
    set.iter()
        .filter(|a| !set.iter().any(|b| contains(a, b)))
        .cloned()
        .collect()
}

impl Prefilter {
    /// `rules[slot]` is the literal set of the rule given that slot.
    pub fn build(rules: &[Set]) -> Option<Prefilter> {
        let words = rules.len().div_ceil(64);
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut slots_of: Vec<Vec<u32>> = Vec::new();
        let mut byte_slots = vec![Vec::new(); 256];
        let mut index = std::collections::HashMap::new();
        for (slot, set) in rules.iter().enumerate() {
            let slot_u32 = u32::try_from(slot).ok()?;
            for lit in minimize(set) {
                if let [b] = lit[..] {
                    for b in [b.to_ascii_lowercase(), b.to_ascii_uppercase()] {
                        let mask: &mut Vec<u64> = &mut byte_slots[usize::from(b)];
                        mask.resize(words, 0);
                        mask[slot / 64] |= 1 << (slot % 64);
                    }
                    continue;
                }
                let key = lit.to_ascii_lowercase();
                let at = *index.entry(key).or_insert_with(|| {
                    patterns.push(lit);
                    slots_of.push(Vec::new());
                    patterns.len() - 1
                });
                slots_of[at].push(slot_u32);
            }
        }
        let automaton = if patterns.is_empty() {
            None
        } else {
            Some(
                AhoCorasick::builder()
                    .ascii_case_insensitive(true)
                    .match_kind(MatchKind::Standard)
                    // Not a DFA: over CRS's @pm phrase files it made the process 80 MB
                    // larger (RSS 120 vs 39 MB with the whole CRS loaded) per rule set, for 2 %
                    // fewer instructions on a GET and 9 % on a form POST.
                    .kind(Some(AhoCorasickKind::ContiguousNFA))
                    .build(&patterns)
                    .ok()?,
            )
        };
        let mut bytes = Vec::new();
        let mut byte_masks = Vec::new();
        for (b, mask) in byte_slots.iter().enumerate() {
            if !mask.is_empty() {
                bytes.push((u8::try_from(b).ok()?, byte_masks.len()));
                byte_masks.extend_from_slice(mask);
            }
        }
        Some(Prefilter {
            automaton,
            slots_of,
            bytes,
            byte_masks,
            words,
        })
    }

    pub fn words(&self) -> usize {
        self.words
    }

    /// Sets in `bits` (of length `words()`) the slot of every rule one of whose literals
    /// occurs in `value`.
    pub fn scan(&self, value: &[u8], bits: &mut [u64]) {
        if !self.bytes.is_empty() {
            let mut present = [false; 256];
            for &b in value {
                present[usize::from(b)] = true;
            }
            for &(b, at) in &self.bytes {
                if present[usize::from(b)] {
                    let mask = self.byte_masks.get(at..at + self.words).unwrap_or(&[]);
                    bits.iter_mut().zip(mask).for_each(|(w, m)| *w |= m);
                }
            }
        }
        let Some(automaton) = &self.automaton else {
            return;
        };
        for m in automaton.find_overlapping_iter(value) {
            let Some(slots) = self.slots_of.get(m.pattern().as_usize()) else {
                continue;
            };
            for &slot in slots {
                let slot = slot as usize;
                if let Some(w) = bits.get_mut(slot / 64) {
                    *w |= 1 << (slot % 64);
                }
            }
        }
    }
}

pub fn has_slot(bits: &[u64], slot: u32) -> bool {
    let slot = slot as usize;
    bits.get(slot / 64)
        .is_some_and(|w| w & (1 << (slot % 64)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lits(p: &str) -> Option<Vec<String>> {
        required_literals(p).map(|s| {
            s.into_iter()
                .map(|l| String::from_utf8_lossy(&l).into_owned())
                .collect()
        })
    }

    #[test]
    fn literal_and_alternation() {
        assert_eq!(lits("(?s-u)abc"), Some(vec!["abc".into()]));
        assert_eq!(
            lits("(?s-u)(?i)(?:union|select)"),
            Some(vec!["select".into(), "union".into()])
        );
        // A small class after an alternation multiplies out: longer, exact literals.
        let ws = lits("(?s-u)(?i)(?:union|select)\\s").unwrap_or_default();
        assert_eq!(ws.len(), 12);
        assert!(ws.contains(&"select ".to_string()) && ws.contains(&"union\t".to_string()));
    }

    #[test]
    fn case_insensitive_classes_fold_to_one_literal() {
        assert_eq!(lits("(?s-u)(?i)SeLeCt"), Some(vec!["select".into()]));
        // Unicode case folding adds non-ASCII members (K: the Kelvin sign); kept exactly.
        let k = lits("(?s)(?i)k").unwrap_or_default();
        assert!(k.contains(&"k".to_string()) && k.len() == 2, "{k:?}");
    }

    #[test]
    fn no_requirement_when_empty_matches() {
        assert_eq!(lits("(?s-u)a*"), None);
        assert_eq!(lits("(?s-u)^"), None);
        assert_eq!(lits("(?s-u)(?:abc)?"), None);
        assert_eq!(lits("(?s-u)abc|x*"), None);
    }

    #[test]
    fn requirement_inside_concat_with_unknowns() {
        // `.+` is unknown, but the literal around it is required.
        assert_eq!(lits("(?s-u).+select.+"), Some(vec!["select".into()]));
        // Equal scores: the first required part wins.
        assert_eq!(lits("(?s-u)[a-z]+=\\d+&"), Some(vec!["=".into()]));
    }

    #[test]
    fn shared_and_subsumed_literals() {
        let sets = vec![
            vec![b"select".to_vec(), b"elect".to_vec()],
            vec![b"select".to_vec()],
            vec![b"union".to_vec()],
        ];
        let f = Prefilter::build(&sets).expect("builds");
        let mut bits = vec![0; f.words()];
        f.scan(b"xSELECTx", &mut bits);
        assert!(has_slot(&bits, 0) && has_slot(&bits, 1) && !has_slot(&bits, 2));
        let mut bits = vec![0; f.words()];
        f.scan(b"elect", &mut bits);
        assert!(has_slot(&bits, 0) && !has_slot(&bits, 1));
    }

    /// Soundness: whenever the regex matches, the prefilter reports the rule.
    #[test]
    fn never_drops_a_match() {
        let patterns = [
            r"(?i)(?:union\s+select|select.+from)",
            r"(?i)<script[^>]*>",
            r"\.\./|\.\.\\",
            r"(?i)\bon(?:load|error)\s*=",
            r"[\x00-\x08]",
            r"(?i)x{2,}y",
        ];
        let inputs = [
            "UNION   SELECT 1",
            "select a from b",
            "<ScRiPt src=x>",
            "../../etc/passwd",
            "..\\win",
            "<img OnError = x>",
            "\u{1}",
            "XXy",
            "ordinary text",
            "",
        ];
        for p in patterns {
            let full = format!("(?s-u){p}");
            let re = regex::bytes::Regex::new(&full).expect("test regex");
            let set = required_literals(&full).expect("has literals");
            let filter = Prefilter::build(std::slice::from_ref(&set)).expect("builds");
            for input in inputs {
                let mut bits = vec![0; filter.words()];
                filter.scan(input.as_bytes(), &mut bits);
                if re.is_match(input.as_bytes()) {
                    assert!(has_slot(&bits, 0), "{p} matches {input:?}, filter {set:?}");
                }
            }
        }
    }
}

//! @rx prefilter: one scan (`literal_scan`) over the literal sets (`literals`) of every
//! prefiltered rule.
//!
//! Per transformed value the engine scans once and learns which rules' literal
//! sets occur; a rule one of whose sets does not occur cannot match, so its regex is not run.
//! This only ever answers "cannot match", so it changes no result: negation, captures and
//! chains see the operator's true answer either way.

use crate::literal_scan::LiteralScan;
use crate::literals::{Set, MAX_REQUIRED};

/// One scan over the literal sets of every prefiltered rule, plus a byte table for the
/// one-byte literals (`/`, whitespace, digits): those occur at nearly every byte of ordinary
/// text, and reporting each occurrence cost more than the whole scan.
///
/// Rule `r`'s first (best) set has slot `r` in the hit bits callers see. A rule's further
/// sets are numbered after the last rule and only live during a scan: at its end a rule's
/// bit is cleared unless each of its further sets occurred too, so one bit per rule still
/// means "every requirement of the rule is met".
#[derive(Debug)]
pub struct Prefilter {
    literals: Option<LiteralScan>,
    /// Pattern index → its range in `pattern_masks`: (word, bits) pairs of the sets (rule
    /// slots or further sets) that contain it. CRS's short words are in dozens of sets
    /// each ("or" is found twice in "ordinary words"): one OR per word of sets, not per set.
    pattern_at: Vec<std::ops::Range<u32>>,
    pattern_masks: Vec<(u32, u64)>,
    /// The bytes some set has as a one-byte literal (both ASCII cases of a letter).
    bytes: Vec<u8>,
    /// Per byte value, its range in `byte_masks`: (word, bits) pairs of the sets that
    /// contain it (empty for a byte no set has).
    byte_at: Vec<std::ops::Range<usize>>,
    byte_masks: Vec<(usize, u64)>,
    /// Per byte value, its class: bytes with the same sets share one, 0 is "in no set".
    /// `None` when there are more than 63 classes (then `byte_at` is used).
    byte_class: Option<Box<[u8; 256]>>,
    /// Per class, per chunk of `CHUNK` words of sets, the sets' bits (class-major).
    class_masks: Vec<[u64; CHUNK]>,
    /// Per rule with further sets: the range of their numbers in `further`; indexed by the
    /// rule's slot, an empty range for the others.
    conjunctions: Vec<std::ops::Range<usize>>,
    further: Vec<u32>,
    /// The rule slots with further sets, as a bitset of `words` words.
    conjunctive: Vec<u64>,
    /// u64 words of the hit bits callers see (one bit per rule).
    words: usize,
    /// u64 words of every set's bit, during a scan.
    scan_words: usize,
    /// The slots of prefiltered rules this prefilter does not look for (see `build_for`):
    /// set in every scan's result, "may match". Empty when it looks for every rule.
    unknown: Vec<u64>,
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

/// Whether a rule's further set pays for itself: only a punctuated one (`literals::punctuated`)
/// does. Word sets cost more scan hits on every value than they save (the engine benchmark
/// with every set kept: 3.6 % more instructions per GET and 2.5 % per form POST than with
/// none).
fn worth_adding(set: &Set) -> bool {
    crate::literals::punctuated(set)
}

impl Prefilter {
    /// `rules[slot]` are the literal sets of the rule given that slot, each required (as
    /// `required_sets` gives them); a rule without sets is not prefiltered.
    pub fn build(rules: &[Vec<Set>]) -> Option<Prefilter> {
        Prefilter::build_for(rules, |_| true)
    }

    /// A prefilter for the rules whose slot `include` accepts, with the same slots as
    /// `build(rules)`: the scan of a kind of value that only those rules read (see
    /// `value_class`) looks for fewer literals. The other rules' bits are always set, so a
    /// reader the value's class left out is told "may match", never a wrong "cannot".
    pub fn build_for(rules: &[Vec<Set>], include: impl Fn(usize) -> bool) -> Option<Prefilter> {
        let words = rules.len().div_ceil(64);
        let mut unknown = vec![0u64; words];
        for (slot, sets) in rules.iter().enumerate() {
            if !sets.is_empty() && !include(slot) {
                unknown[slot / 64] |= 1 << (slot % 64);
            }
        }
        if unknown.iter().all(|&w| w == 0) {
            unknown.clear();
        }
        let mut conjunctions = vec![0..0; rules.len()];
        let mut further = Vec::new();
        let mut conjunctive = vec![0u64; words];
        // (set number, set) for every set: a rule's first set has the rule's slot, the
        // further ones numbers from `rules.len()` on.
        let mut numbered: Vec<(usize, &Set)> = Vec::new();
        for (slot, sets) in rules.iter().enumerate() {
            let Some((first, rest)) = sets.split_first().filter(|_| include(slot)) else {
                continue;
            };
            let rest: Vec<&Set> = rest.iter().filter(|s| worth_adding(s)).collect();
            numbered.push((slot, first));
            if rest.is_empty() {
                continue;
            }
            let start = further.len();
            for set in rest {
                let number = rules.len() + further.len();
                numbered.push((number, set));
                further.push(u32::try_from(number).ok()?);
            }
            conjunctions[slot] = start..further.len();
            conjunctive[slot / 64] |= 1 << (slot % 64);
        }
        let scan_words = (rules.len() + further.len()).div_ceil(64);
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut slots_of: Vec<Vec<u32>> = Vec::new();
        let mut byte_sets = vec![vec![0u64; scan_words]; 256];
        let mut index = std::collections::HashMap::new();
        for (number, set) in numbered {
            let number_u32 = u32::try_from(number).ok()?;
            for lit in minimize(set) {
                if let [b] = lit[..] {
                    for b in [b.to_ascii_lowercase(), b.to_ascii_uppercase()] {
                        byte_sets[usize::from(b)][number / 64] |= 1 << (number % 64);
                    }
                    continue;
                }
                let key = lit.to_ascii_lowercase();
                let at = *index.entry(key).or_insert_with(|| {
                    patterns.push(lit);
                    slots_of.push(Vec::new());
                    patterns.len() - 1
                });
                if !slots_of[at].contains(&number_u32) {
                    slots_of[at].push(number_u32);
                }
            }
        }
        // Not Aho-Corasick: see `literal_scan` for why. (Before it, a contiguous NFA was
        // used; a DFA over CRS's @pm phrase files made the process 80 MB larger per rule set.)
        let literals = if patterns.is_empty() {
            None
        } else {
            Some(LiteralScan::new(&patterns)?)
        };
        let mut bytes = Vec::new();
        let mut byte_at = Vec::with_capacity(256);
        let mut byte_masks = Vec::new();
        for (b, mask) in byte_sets.iter().enumerate() {
            let start = byte_masks.len();
            byte_masks.extend(
                mask.iter()
                    .enumerate()
                    .filter(|(_, m)| **m != 0)
                    .map(|(w, m)| (w, *m)),
            );
            if byte_masks.len() > start {
                bytes.push(u8::try_from(b).ok()?);
            }
            byte_at.push(start..byte_masks.len());
        }
        let (byte_class, class_masks) = byte_classes(&byte_sets);
        let mut pattern_at = Vec::with_capacity(slots_of.len());
        let mut pattern_masks = Vec::new();
        for slots in &slots_of {
            let mut words: std::collections::BTreeMap<u32, u64> = Default::default();
            for &n in slots {
                *words.entry(n / 64).or_default() |= 1 << (n % 64);
            }
            let start = u32::try_from(pattern_masks.len()).ok()?;
            pattern_masks.extend(words);
            pattern_at.push(start..u32::try_from(pattern_masks.len()).ok()?);
        }
        Some(Prefilter {
            literals,
            pattern_at,
            pattern_masks,
            bytes,
            byte_at,
            byte_masks,
            byte_class,
            class_masks,
            conjunctions,
            further,
            conjunctive,
            words,
            scan_words,
            unknown,
        })
    }

    pub fn words(&self) -> usize {
        self.words
    }

    /// How many literals (one-byte ones counted once per byte value) it looks for.
    pub fn literal_count(&self) -> usize {
        self.pattern_at.len() + self.bytes.len()
    }

    /// Sets in `bits` (of length `words()`) the slot of every rule each of whose literal sets
    /// has a literal in `value`, and clears the others.
    pub fn scan(&self, value: &[u8], bits: &mut [u64]) {
        // Every set's bit, on the stack unless there are thousands of sets.
        let mut stack = [0u64; 32];
        let mut heap = Vec::new();
        let sets = match stack.get_mut(..self.scan_words) {
            Some(s) => s,
            None => {
                heap.resize(self.scan_words, 0);
                &mut heap[..]
            }
        };
        self.scan_sets(value, sets);
        for (out, set) in bits.iter_mut().zip(sets.iter()) {
            *out = *set;
        }
        for (out, unknown) in bits.iter_mut().zip(&self.unknown) {
            *out |= unknown;
        }
    }

    /// Sets the bits of the sets that have byte `b` as a literal.
    fn add_byte(&self, b: usize, sets: &mut [u64]) {
        let at = self.byte_at.get(b).cloned().unwrap_or(0..0);
        for &(w, m) in self.byte_masks.get(at).unwrap_or(&[]) {
            if let Some(word) = sets.get_mut(w) {
                *word |= m;
            }
        }
    }

    fn scan_sets(&self, value: &[u8], sets: &mut [u64]) {
        if let Some(classes) = self.byte_class.as_deref() {
            // The classes of the value's bytes, as bits of one register: no store per byte,
            // and each class's sets ORed once, a chunk at a time in registers. (ORing each
            // distinct byte's sets into `sets` in memory waited on the previous OR to the
            // same word: perf put 16 % of the scan's own time on the POST, 28 % in a loop of
            // byte-only scans of its fields, on the instruction after that OR.)
            let class = |b: u8| 1u64 << (classes[usize::from(b)] & 63);
            // Four accumulators: one would make each byte wait on the previous OR.
            let mut acc = [0u64; 4];
            let mut quads = value.chunks_exact(4);
            for q in &mut quads {
                for (a, &b) in acc.iter_mut().zip(q) {
                    *a |= class(b);
                }
            }
            for &b in quads.remainder() {
                acc[0] |= class(b);
            }
            let present = (acc[0] | acc[1] | acc[2] | acc[3]) & !1;
            let chunks = sets.len().div_ceil(CHUNK);
            for (c, words) in sets.chunks_mut(CHUNK).enumerate() {
                let mut acc = [0u64; CHUNK];
                let mut bits = present;
                while bits != 0 {
                    let class = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    if let Some(m) = self.class_masks.get(class * chunks + c) {
                        for (a, m) in acc.iter_mut().zip(m) {
                            *a |= m;
                        }
                    }
                }
                for (w, a) in words.iter_mut().zip(acc) {
                    *w |= a;
                }
            }
        } else if value.len() <= self.bytes.len() {
            let mut present = [false; 256];
            // A short value: look up each of its distinct bytes.
            for &b in value {
                let b = usize::from(b);
                if !present[b] {
                    present[b] = true;
                    self.add_byte(b, sets);
                }
            }
        } else {
            // A long one: note its bytes, then go through the table once.
            let mut present = [false; 256];
            for &b in value {
                present[usize::from(b)] = true;
            }
            for &b in &self.bytes {
                if present[usize::from(b)] {
                    self.add_byte(usize::from(b), sets);
                }
            }
        }
        if let Some(literals) = &self.literals {
            literals.scan(value, |pattern| {
                let at = self
                    .pattern_at
                    .get(pattern as usize)
                    .cloned()
                    .unwrap_or(0..0);
                let masks = self.pattern_masks.get(at.start as usize..at.end as usize);
                for &(w, m) in masks.unwrap_or(&[]) {
                    if let Some(word) = sets.get_mut(w as usize) {
                        *word |= m;
                    }
                }
            });
        }
        // A rule with further sets keeps its bit only when each of them occurred.
        for (w, conj) in self.conjunctive.iter().enumerate() {
            let mut hit = sets.get(w).map_or(0, |s| s & conj);
            while hit != 0 {
                let bit = hit.trailing_zeros() as usize;
                hit &= hit - 1;
                let range = self.conjunctions.get(w * 64 + bit).cloned().unwrap_or(0..0);
                let further = self.further.get(range).unwrap_or(&[]);
                if !further.iter().all(|&n| has_slot(sets, n)) {
                    if let Some(word) = sets.get_mut(w) {
                        *word &= !(1 << bit);
                    }
                }
            }
        }
    }
}

/// Words per chunk of `Prefilter::class_masks`: one 256-bit register.
const CHUNK: usize = 4;

/// `Prefilter::byte_class` and `class_masks` for the sets' bits per byte value (`byte_sets`,
/// `scan_words` words each); none when there are more than 63 classes.
fn byte_classes(byte_sets: &[Vec<u64>]) -> (Option<Box<[u8; 256]>>, Vec<[u64; CHUNK]>) {
    let mut distinct: Vec<&Vec<u64>> = Vec::new();
    let mut class = Vec::with_capacity(256);
    for sets in byte_sets {
        if sets.iter().all(|&w| w == 0) {
            class.push(0);
            continue;
        }
        let at = match distinct.iter().position(|d| *d == sets) {
            Some(at) => at,
            None => {
                distinct.push(sets);
                distinct.len() - 1
            }
        };
        match u8::try_from(at + 1) {
            Ok(c) if c < 64 => class.push(c),
            _ => return (None, Vec::new()),
        }
    }
    let chunks = byte_sets.first().map_or(0, Vec::len).div_ceil(CHUNK);
    let mut masks = vec![[0u64; CHUNK]; (distinct.len() + 1) * chunks];
    for (i, sets) in distinct.iter().enumerate() {
        for (w, &m) in sets.iter().enumerate() {
            if let Some(word) = masks
                .get_mut((i + 1) * chunks + w / CHUNK)
                .and_then(|c| c.get_mut(w % CHUNK))
            {
                *word = m;
            }
        }
    }
    let class: Option<Box<[u8; 256]>> = class.into_boxed_slice().try_into().ok();
    (class, masks)
}

pub fn has_slot(bits: &[u64], slot: u32) -> bool {
    let slot = slot as usize;
    bits.get(slot / 64)
        .is_some_and(|w| w & (1 << (slot % 64)) != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::literals::required_sets;

    /// 941170's shape: a branch with a word and a branch that needs `-`, `:` and `(`. A value
    /// with one of those bytes only is ruled out by the sets of punctuation the branches
    /// lend each other; a match of either branch is not.
    #[test]
    fn punctuated_unions_rule_out_a_branch_met_by_one_byte() {
        let sets = required_sets("(?s-u)(?i)(?:javascript:.*?name|-.*?:.*?\\()");
        let filter = Prefilter::build(&[sets]).expect("builds");
        let passes = |value: &str| {
            let mut bits = vec![0; filter.words()];
            filter.scan(value.as_bytes(), &mut bits);
            has_slot(&bits, 0)
        };
        assert!(!passes("hoist-load/0.1"));
        assert!(!passes("Mozilla/5.0 (X11; rv:128.0)"));
        assert!(passes("-moz-binding:url(x)"));
        assert!(passes("JavaScript:alert(name)"));
    }

    #[test]
    fn a_conjunction_needs_every_set() {
        let rules = vec![
            vec![vec![b"and".to_vec(), b"or".to_vec()], vec![b"$".to_vec()]],
            vec![vec![b"and".to_vec()]],
        ];
        let f = Prefilter::build(&rules).expect("builds");
        let scan = |v: &str| {
            let mut bits = vec![u64::MAX; f.words()];
            f.scan(v.as_bytes(), &mut bits);
            (has_slot(&bits, 0), has_slot(&bits, 1))
        };
        assert_eq!(scan("words and numbers"), (false, true));
        assert_eq!(scan("$AND"), (true, true));
        assert_eq!(scan("$x"), (false, false));
        assert_eq!(scan("or $"), (true, false));
    }

    #[test]
    fn shared_and_subsumed_literals() {
        let sets = vec![
            vec![vec![b"select".to_vec(), b"elect".to_vec()]],
            vec![vec![b"select".to_vec()]],
            vec![vec![b"union".to_vec()]],
        ];
        let f = Prefilter::build(&sets).expect("builds");
        let mut bits = vec![0; f.words()];
        f.scan(b"xSELECTx", &mut bits);
        assert!(has_slot(&bits, 0) && has_slot(&bits, 1) && !has_slot(&bits, 2));
        let mut bits = vec![0; f.words()];
        f.scan(b"elect", &mut bits);
        assert!(has_slot(&bits, 0) && !has_slot(&bits, 1));
    }

    #[test]
    fn one_byte_literals_are_found_in_short_and_long_values() {
        let rules = vec![
            vec![vec![b"'".to_vec()]],
            vec![vec![b"x".to_vec()]],
            vec![vec![b"select".to_vec()], vec![b"(".to_vec()]],
        ];
        let f = Prefilter::build(&rules).expect("builds");
        let scan = |v: &[u8]| {
            let mut bits = vec![0; f.words()];
            f.scan(v, &mut bits);
            (0..3).map(|s| has_slot(&bits, s)).collect::<Vec<_>>()
        };
        assert_eq!(scan(b"X'"), [true, true, false]);
        assert_eq!(scan(b"SELECT("), [false, false, true]);
        // Longer than the byte table: the other way of looking bytes up.
        let mut long = vec![b'a'; 300];
        assert_eq!(scan(&long), [false, false, false]);
        long.extend_from_slice(b"select (X");
        assert_eq!(scan(&long), [false, true, true]);
    }

    /// One-byte literals over several chunks of sets, with few byte classes (looked up by
    /// class) and with more than 63 (looked up byte by byte), against a plain model.
    #[test]
    fn one_byte_literals_over_many_sets_and_classes() {
        let mut next = crate::test_rng::xorshift(0x2545_F491_4F6C_DD1D);
        for (rules, distinct) in [(300usize, 40u8), (300, 100)] {
            let byte = |r: usize| 0x80 + (r % usize::from(distinct)) as u8;
            let sets: Vec<Vec<Set>> = (0..rules).map(|r| vec![vec![vec![byte(r)]]]).collect();
            let f = Prefilter::build(&sets).expect("builds");
            assert_eq!(f.byte_class.is_some(), distinct < 64);
            for len in [0usize, 1, 5, 60, 200, 700] {
                let value: Vec<u8> = (0..len).map(|_| 0x70 + (next() % 120) as u8).collect();
                let mut bits = vec![0; f.words()];
                f.scan(&value, &mut bits);
                for r in 0..rules {
                    let slot = u32::try_from(r).expect("fits");
                    assert_eq!(has_slot(&bits, slot), value.contains(&byte(r)), "rule {r}");
                }
            }
        }
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
            r"(?i)\[?\$(?:abs|and|or)\b",
            r"(?:id\s*=|cmd\s*\()",
            r"(?i)(?:union|select)\s+(?:from|all)\s*\d",
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
            "[$AND",
            "$or ",
            "cmd (",
            "ID =",
            "union all 1",
            "select\tfrom9",
            "words and numbers or id",
            "ordinary text",
            "",
        ];
        for p in patterns {
            let full = format!("(?s-u){p}");
            let re = regex::bytes::Regex::new(&full).expect("test regex");
            let set = required_sets(&full);
            assert!(!set.is_empty(), "{p} has literals");
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

//! Which of several thousand literals occur in a value, ignoring ASCII case.
//!
//! The prefilter asks this of every distinct transformed value, over the ~6,400 literals CRS
//! rules require. An Aho-Corasick automaton answers it with one dependent load per byte:
//! each state's address comes from the previous one, so when the 2 MB automaton is not in
//! the cache (in the proxy, TLS and the socket calls between two requests push it out) every
//! byte waits for memory. Here each position is looked up on its own: its first two bytes
//! (lowercased) index two bits of a 16 KB table (a literal of two or three bytes starts with
//! them; a longer one does), and only then are its first four hashed to a bit in a 16 KB
//! bitmap; a set bit leads to a hash table of the literals that start with those bytes.
//! The loads of different positions do not depend on each other, so the CPU overlaps their
//! misses, and the two tables are small enough to stay cached between requests. A literal
//! of four or more bytes is found by its first four; one of two or three by its first two;
//! single bytes by a 256-bit table.

/// log2 of the bits in the four-byte filter: 16 KB, about 1 % full with CRS's literals.
const QUAD_FILTER_LOG2: u32 = 17;
/// u64 words of the four-byte filter.
const QUAD_WORDS: usize = 1 << (QUAD_FILTER_LOG2 - 6);
/// u64 words of the two-byte table: two bits per two-byte value.
const LEAD_WORDS: usize = 1 << (16 - 5);
/// In the two-byte table: a literal of two or three bytes starts with the pair.
const SHORT: u64 = 1;
/// In the two-byte table: a literal of four or more bytes starts with the pair.
const LONG: u64 = 2;

/// A literal that occurs is reported at every position it starts at (as Aho-Corasick's
/// overlapping search would); ids are indexes into the slice `new` was given.
#[derive(Debug)]
pub(crate) struct LiteralScan {
    /// The literals, ASCII-lowercased, one after another (`spans` says where): checking a
    /// candidate reads two small arrays instead of chasing a pointer to a heap block.
    bytes: Vec<u8>,
    /// Per literal id, (start in `bytes`, length).
    spans: Vec<(u32, u32)>,
    /// Literals of four or more bytes, by their first four.
    quads: Table,
    /// Bit `hash(first four bytes) >> (32 - QUAD_FILTER_LOG2)` set for each key of `quads`.
    quad_filter: Box<[u64; QUAD_WORDS]>,
    /// Literals of two or three bytes, by their first two.
    pairs: Table,
    /// Per two-byte value (as u16), two bits: `SHORT` when it is a key of `pairs`, `LONG`
    /// when a key of `quads` starts with it. Most positions of a value start no literal
    /// of either kind, and one load says so before the four-byte filter is hashed into.
    leads: Box<[u64; LEAD_WORDS]>,
    /// One-byte literals: (byte, id), sorted; `single_filter` has a bit per byte.
    singles: Vec<(u8, u32)>,
    single_filter: [u64; 4],
    /// Empty literals: they occur in every value.
    empty: Vec<u32>,
}

/// An open-addressing hash table from a key (two or four lowercased bytes, little-endian) to
/// the ids of the literals that start with it.
#[derive(Debug, Default)]
struct Table {
    /// (key, start, end) of each key's ids in `ids`; `end == 0` marks an empty slot.
    slots: Vec<(u32, u32, u32)>,
    /// `slots.len()` is `1 << log2`.
    log2: u32,
    ids: Vec<u32>,
}

fn hash(key: u32) -> u32 {
    key.wrapping_mul(0x9E37_79B1)
}

fn has_bit(bits: &[u64], at: usize) -> bool {
    bits.get(at / 64).is_some_and(|w| w & (1 << (at % 64)) != 0)
}

fn set_bit(bits: &mut [u64], at: usize) {
    if let Some(w) = bits.get_mut(at / 64) {
        *w |= 1 << (at % 64);
    }
}

impl Table {
    fn build(groups: std::collections::BTreeMap<u32, Vec<u32>>) -> Option<Table> {
        let log2 = (groups.len() * 2)
            .next_power_of_two()
            .trailing_zeros()
            .max(1);
        let mut slots = vec![(0, 0, 0); 1 << log2];
        let mut ids = Vec::new();
        let mask = slots.len() - 1;
        for (key, group) in groups {
            let start = u32::try_from(ids.len()).ok()?;
            ids.extend(group);
            let end = u32::try_from(ids.len()).ok()?;
            let mut at = (hash(key) >> (32 - log2)) as usize;
            // At most half full, so an empty slot is always found.
            while slots.get(at).is_some_and(|s| s.2 != 0) {
                at = (at + 1) & mask;
            }
            *slots.get_mut(at)? = (key, start, end);
        }
        Some(Table { slots, log2, ids })
    }

    /// The ids of the literals whose first bytes are `key`.
    fn get(&self, key: u32) -> &[u32] {
        if self.slots.is_empty() {
            return &[];
        }
        let mask = self.slots.len() - 1;
        let mut at = (hash(key) >> (32 - self.log2)) as usize;
        while let Some(&(k, start, end)) = self.slots.get(at) {
            if end == 0 {
                break;
            }
            if k == key {
                return self.ids.get(start as usize..end as usize).unwrap_or(&[]);
            }
            at = (at + 1) & mask;
        }
        &[]
    }
}

impl LiteralScan {
    /// `None` only when there are more than `u32::MAX` literals.
    pub fn new(literals: &[Vec<u8>]) -> Option<LiteralScan> {
        let literals: Vec<Vec<u8>> = literals.iter().map(|l| l.to_ascii_lowercase()).collect();
        let mut quads = std::collections::BTreeMap::<u32, Vec<u32>>::new();
        let mut pairs = std::collections::BTreeMap::<u32, Vec<u32>>::new();
        let mut quad_filter = Box::new([0u64; QUAD_WORDS]);
        let mut leads = Box::new([0u64; LEAD_WORDS]);
        let mut lead = |pair: u32, kind: u64| {
            if let Some(w) = leads.get_mut(pair as usize / 32) {
                *w |= kind << (2 * (pair % 32));
            }
        };
        let mut singles = Vec::new();
        let mut single_filter = [0u64; 4];
        let mut empty = Vec::new();
        for (id, l) in literals.iter().enumerate() {
            let id = u32::try_from(id).ok()?;
            match l[..] {
                [] => empty.push(id),
                [b] => {
                    singles.push((b, id));
                    set_bit(&mut single_filter, usize::from(b));
                }
                [a, b] | [a, b, _] => {
                    let key = u32::from(u16::from_le_bytes([a, b]));
                    pairs.entry(key).or_default().push(id);
                    lead(key, SHORT);
                }
                [a, b, c, d, ..] => {
                    let key = u32::from_le_bytes([a, b, c, d]);
                    lead(u32::from(u16::from_le_bytes([a, b])), LONG);
                    quads.entry(key).or_default().push(id);
                    set_bit(
                        &mut quad_filter[..],
                        (hash(key) >> (32 - QUAD_FILTER_LOG2)) as usize,
                    );
                }
            }
        }
        singles.sort_unstable();
        let mut bytes = Vec::new();
        let mut spans = Vec::with_capacity(literals.len());
        for l in &literals {
            spans.push((
                u32::try_from(bytes.len()).ok()?,
                u32::try_from(l.len()).ok()?,
            ));
            bytes.extend_from_slice(l);
        }
        Some(LiteralScan {
            bytes,
            spans,
            quads: Table::build(quads)?,
            quad_filter,
            pairs: Table::build(pairs)?,
            leads,
            singles,
            single_filter,
            empty,
        })
    }

    /// Calls `found` with the id of each literal that occurs in `value`, once per position
    /// it starts at, in no particular order.
    pub fn scan(&self, value: &[u8], mut found: impl FnMut(u32)) {
        self.empty.iter().for_each(|&id| found(id));
        // The value lowercased, with three bytes of padding so that every position can be
        // read as four bytes, in a buffer of its size class: most values are short, and
        // zeroing a 1 KB buffer for each of them showed in the scan's cost.
        let len = value.len() + 3;
        if len <= 64 {
            self.scan_lowered(value, &mut [0u8; 64][..len], &mut found);
        } else if len <= 1024 {
            self.scan_lowered(value, &mut [0u8; 1024][..len], &mut found);
        } else {
            self.scan_lowered(value, &mut vec![0u8; len], &mut found);
        }
    }

    /// `scan` with `lower` (zeroed, three bytes longer than `value`) to lowercase into.
    fn scan_lowered(&self, value: &[u8], lower: &mut [u8], found: &mut impl FnMut(u32)) {
        for (l, b) in lower.iter_mut().zip(value) {
            *l = b.to_ascii_lowercase();
        }
        let lower = &*lower;
        let n = value.len();
        if self.single_filter != [0; 4] {
            for &b in lower.get(..n).unwrap_or(&[]) {
                if has_bit(&self.single_filter, usize::from(b)) {
                    self.found_single(b, found);
                }
            }
        }
        // One window per position, read with one four-byte load that the pair and third byte
        // are taken from (assembled from four byte loads, the compiler's code for this loop
        // changed with unrelated edits elsewhere in the crate: +8k instructions on a 1 KB
        // body). Keys that reach into the padding are looked up too (no branch here); the
        // checks behind the filters reject what would not fit.
        for (i, w) in lower.windows(4).enumerate() {
            let Ok(bytes) = <[u8; 4]>::try_from(w) else {
                break;
            };
            let quad = u32::from_le_bytes(bytes);
            let pair = quad as u16;
            let lead = self.leads[usize::from(pair) / 32 % LEAD_WORDS] >> (2 * (pair % 32));
            if lead & (SHORT | LONG) == 0 {
                continue;
            }
            if lead & SHORT != 0 {
                self.found_pair(u32::from(pair), (quad >> 16) as u8, n - i, found);
            }
            let bit = (hash(quad) >> (32 - QUAD_FILTER_LOG2)) as usize;
            if lead & LONG != 0 && self.quad_filter[bit / 64 % QUAD_WORDS] & (1 << (bit % 64)) != 0
            {
                self.found_quad(quad, lower.get(i + 4..n).unwrap_or(&[]), n - i, found);
            }
        }
    }

    /// The literals of two or three bytes at a position whose first two bytes are `pair`,
    /// followed by `third`, with `left` bytes of the value from the position on.
    fn found_pair(&self, pair: u32, third: u8, left: usize, found: &mut impl FnMut(u32)) {
        for &id in self.pairs.get(pair) {
            let ok = match self.spans.get(id as usize) {
                Some(&(_, 2)) => left >= 2,
                Some(&(start, 3)) => {
                    left >= 3 && self.bytes.get(start as usize + 2) == Some(&third)
                }
                _ => false,
            };
            if ok {
                found(id);
            }
        }
    }

    /// The literals of four or more bytes at a position whose first four bytes are `quad`;
    /// `after` is the value after those four bytes.
    fn found_quad(&self, quad: u32, after: &[u8], left: usize, found: &mut impl FnMut(u32)) {
        if left < 4 {
            return;
        }
        for &id in self.quads.get(quad) {
            let Some(&(start, len)) = self.spans.get(id as usize) else {
                continue;
            };
            let rest = self
                .bytes
                .get(start as usize + 4..(start + len) as usize)
                .unwrap_or(&[]);
            // Byte by byte: most rests are a few bytes, fewer than a memcmp call costs.
            if rest.len() <= after.len() && rest.iter().zip(after).all(|(l, b)| l == b) {
                found(id);
            }
        }
    }

    fn found_single(&self, byte: u8, found: &mut impl FnMut(u32)) {
        let start = self.singles.partition_point(|&(b, _)| b < byte);
        for &(b, id) in self.singles.get(start..).unwrap_or(&[]) {
            if b != byte {
                break;
            }
            found(id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aho_corasick::{AhoCorasick, MatchKind};

    /// The ids `LiteralScan` reports for `value`, sorted and deduplicated.
    fn scanned(scan: &LiteralScan, value: &[u8]) -> Vec<u32> {
        let mut ids = Vec::new();
        scan.scan(value, |id| ids.push(id));
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The same question answered by Aho-Corasick (what the prefilter used before).
    fn oracle(ac: &AhoCorasick, value: &[u8]) -> Vec<u32> {
        let mut ids: Vec<u32> = ac
            .find_overlapping_iter(value)
            .map(|m| m.pattern().as_u32())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    fn case_insensitive(literals: &[Vec<u8>]) -> AhoCorasick {
        AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .match_kind(MatchKind::Standard)
            .build(literals)
            .expect("builds")
    }

    #[test]
    fn every_length_at_every_edge() {
        let literals: Vec<Vec<u8>> = [
            "", "a", "Or", "sEl", "UNION", "sele", "select", "%2e", "\0\0x", "unio\0", "or\0",
        ]
        .iter()
        .map(|s| s.as_bytes().to_vec())
        .collect();
        let scan = LiteralScan::new(&literals).expect("builds");
        let ac = case_insensitive(&literals);
        for value in [
            &b""[..],
            b"a",
            b"or",
            b"xoR",
            b"sel",
            b"Sele",
            b"SELECT",
            b"xunionx",
            b"unio",
            b"%2E",
            b"%2",
            b"\0\0X",
            b"\0\0",
            b"b",
            b"UNIO",
            b"unio\0",
            b"xor\0",
        ] {
            assert_eq!(scanned(&scan, value), oracle(&ac, value), "{value:?}");
        }
        assert_eq!(scanned(&scan, b"SELECT"), vec![0, 3, 5, 6]);
        assert!(scanned(&scan, b"sel").contains(&3));
        assert!(!scanned(&scan, b"se").contains(&3));
    }

    #[test]
    fn reports_each_start() {
        let literals = vec![b"ab".to_vec(), b"abcd".to_vec()];
        let scan = LiteralScan::new(&literals).expect("builds");
        let mut ids = Vec::new();
        scan.scan(b"abcdABCD", |id| ids.push(id));
        ids.sort_unstable();
        assert_eq!(ids, vec![0, 0, 1, 1]);
    }

    #[test]
    fn long_values_leave_the_stack_buffer() {
        let literals = vec![b"needle".to_vec(), b"zq".to_vec()];
        let scan = LiteralScan::new(&literals).expect("builds");
        let mut value = vec![b'x'; 5000];
        value.extend_from_slice(b"NEEDLE");
        assert_eq!(scanned(&scan, &value), vec![0]);
        value.extend_from_slice(b"zQ");
        assert_eq!(scanned(&scan, &value), vec![0, 1]);
    }

    /// A literal at the very end of values on both sides of each buffer size class (the
    /// value plus three bytes of padding: 64 and 1024 bytes on the stack, more on the heap).
    #[test]
    fn literals_at_the_end_of_every_buffer_size_class() {
        let literals = vec![b"needle".to_vec(), b"zq".to_vec(), b"ab".to_vec()];
        let scan = LiteralScan::new(&literals).expect("builds");
        for len in (50..70).chain(1010..1030) {
            for (tail, want) in [
                (&b"NEEDLE"[..], vec![0]),
                (b"zQ", vec![1]),
                (b"xAB", vec![2]),
            ] {
                let mut value = vec![b'x'; len - tail.len()];
                value.extend_from_slice(tail);
                assert_eq!(
                    scanned(&scan, &value),
                    want,
                    "{len} bytes ending in {tail:?}"
                );
                value.pop();
                assert!(scanned(&scan, &value).is_empty(), "{len} bytes, cut");
            }
        }
    }

    /// Many literals that share prefixes and keys, against Aho-Corasick over random text
    /// drawn from their own bytes (so that most positions start some literal).
    #[test]
    fn agrees_with_aho_corasick() {
        let mut next = crate::test_rng::xorshift(0x9E37_79B9_7F4A_7C15);
        let alphabet = b"abcABC01 %'(/*-;<>\0\xc3\xa9";
        let pick = |r: u64| alphabet[(r % alphabet.len() as u64) as usize];
        let literals: Vec<Vec<u8>> = (0..3000)
            .map(|_| {
                let len = 1 + (next() % 9) as usize;
                (0..len).map(|_| pick(next())).collect()
            })
            .collect();
        let scan = LiteralScan::new(&literals).expect("builds");
        let ac = case_insensitive(&literals);
        for _ in 0..1000 {
            let len = (next() % 1500) as usize;
            let value: Vec<u8> = (0..len).map(|_| pick(next())).collect();
            assert_eq!(scanned(&scan, &value), oracle(&ac, &value), "{value:?}");
        }
    }
}

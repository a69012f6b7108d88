//! libinjection's word list, looked up without allocating.
//!
//! The list itself is libinjectionrs's (`sqli_data::SQL_KEYWORDS`: upper-case words, each with
//! the token kind it stands for, plus ~8,400 entries of kind `F` that are not words but the
//! fingerprint blacklist, spelled `0` + the fingerprint upper-cased). Reading it through the
//! crate's public API keeps our detector on exactly the list libinjectionrs uses.
//!
//! libinjectionrs upper-cases every looked-up word into a new `String` and binary-searches
//! all 9,352 entries. Here the entries go, once, into two open-addressing hash tables: the
//! ~1,000 real words, and the fingerprints (looked up once per reading). A word is looked up
//! as a `Key`: its bytes upper-cased eight at a time into four `u64`s, so hashing and
//! comparing cost a few instructions per eight bytes, with no copy on the heap.

use std::sync::OnceLock;

use libinjectionrs::sqli::sqli_data::SQL_KEYWORDS;

use super::token::kind;

/// Keys are at most 32 bytes (the longest word is 29): longer words are in no table.
const MAX_KEY: usize = 32;

/// Up to 32 bytes, ASCII letters upper-cased, zero-padded, as little-endian `u64`s.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    chunks: [u64; MAX_KEY / 8],
    len: usize,
}

const ONES: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// `to_ascii_uppercase` on eight bytes at once: a byte's high bit, after adding to its low
/// seven bits, tells whether they are at least `a` (resp. past `z`); bytes from 0x80 on are
/// left alone. No addition carries into the next byte (at most 0x7f + 0x1f).
#[inline]
fn upper8(x: u64) -> u64 {
    let low7 = x & !HIGH;
    let from_a = low7 + ONES * (0x80 - u64::from(b'a'));
    let past_z = low7 + ONES * (0x80 - u64::from(b'z') - 1);
    let lower = from_a & !past_z & !x & HIGH;
    x ^ (lower >> 2)
}

impl Key {
    fn new(bytes: &[u8]) -> Option<Key> {
        Key::within(bytes, bytes.len())
    }

    /// The key of `window[..len]`. Bytes of `window` past `len` (the rest of the input, say)
    /// let whole eight-byte reads cover the tail; they are masked off.
    #[inline]
    fn within(window: &[u8], len: usize) -> Option<Key> {
        if len > MAX_KEY || len > window.len() {
            return None;
        }
        let mut chunks = [0u64; MAX_KEY / 8];
        for (i, chunk) in chunks.iter_mut().enumerate().take(len.div_ceil(8)) {
            let from = i * 8;
            let v = match window.get(from..from + 8) {
                Some(eight) => u64::from_le_bytes(eight.try_into().unwrap_or([0; 8])),
                // Near the window's end: byte by byte.
                None => window
                    .get(from..)
                    .unwrap_or(&[])
                    .iter()
                    .rev()
                    .fold(0u64, |v, &b| (v << 8) | u64::from(b)),
            };
            let kept = len - from; // at least 1
            let v = if kept >= 8 {
                v
            } else {
                v & ((1u64 << (kept * 8)) - 1)
            };
            *chunk = upper8(v);
        }
        Some(Key { chunks, len })
    }

    /// Multiply-xor over the used chunks; the table reads the well-mixed top bits.
    #[inline]
    fn hash(&self) -> u64 {
        let used = self.len.div_ceil(8);
        self.chunks
            .iter()
            .take(used)
            .fold(self.len as u64, |h, &c| {
                (h ^ c).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            })
    }
}

/// The words of `SQL_KEYWORDS` (all but the fingerprints), with their kinds.
struct Words {
    entries: Vec<(Key, u8)>,
    /// Per slot: 0 when empty, else an index in `entries` + 1.
    slots: Box<[u16]>,
    shift: u32,
    /// A bit per (length, first byte, last byte) of the words, hashed (`shape_bit`): most
    /// words of ordinary text have a shape no keyword has, and are barewords without their
    /// key being built and looked up (a form value's ~5 lookups were a sixth of detectSQLi).
    shapes: Box<[u64; SHAPE_WORDS]>,
    /// The words of at most eight bytes (nearly all), by their first chunk alone (`short`):
    /// a probe compares one `u64` of a 16 KB table rather than a 48-byte entry of a larger
    /// one (the lookups of a form value's words were a quarter of detectSQLi).
    short: ShortWords,
    /// For the multi-word keywords (`UNION ALL`, `NOT IN`, `LOCK IN SHARE`): per first byte,
    /// a bit for each position that holds a space. Folding tries to merge two tokens only
    /// when the first one's length is such a position (`could_merge`).
    phrase_spaces: [u32; 256],
}

/// u64 words of `Words::shapes`: 16,384 bits for ~1,000 words.
const SHAPE_WORDS: usize = 256;

/// The bit of a word of `len` bytes from `first` to `last` (ASCII letters upper-cased, as
/// keys are) in `Words::shapes`.
fn shape_bit(len: usize, first: u8, last: u8) -> usize {
    let x = (len as u32) << 16
        | u32::from(first.to_ascii_uppercase()) << 8
        | u32::from(last.to_ascii_uppercase());
    (x.wrapping_mul(0x9E37_79B1) >> 18) as usize
}

/// Words of one to eight bytes by their `Key`'s first chunk (upper-cased, zero-padded; no
/// word holds a NUL, so the chunk also tells the length and 0 marks an empty slot).
struct ShortWords {
    keys: Box<[u64]>,
    kinds: Box<[u8]>,
    shift: u32,
}

impl ShortWords {
    fn build(entries: &[(Key, u8)]) -> ShortWords {
        let short: Vec<(u64, u8)> = entries
            .iter()
            .filter(|(key, _)| key.len <= 8 && key.chunks[0] != 0)
            .map(|(key, kind)| (key.chunks[0], *kind))
            .collect();
        let (size, shift) = table_size(short.len());
        let mut keys = vec![0u64; size].into_boxed_slice();
        let mut kinds = vec![0u8; size].into_boxed_slice();
        for (chunk, kind) in short {
            let mut at = (mix(chunk) >> shift) as usize;
            while keys.get(at).is_some_and(|&k| k != 0 && k != chunk) {
                at = (at + 1) & (size - 1);
            }
            if let (Some(k), Some(t)) = (keys.get_mut(at), kinds.get_mut(at)) {
                *k = chunk;
                *t = kind;
            }
        }
        ShortWords { keys, kinds, shift }
    }

    #[inline]
    fn get(&self, chunk: u64) -> Option<u8> {
        let mask = self.keys.len() - 1;
        let mut at = (mix(chunk) >> self.shift) as usize;
        loop {
            match self.keys.get(at) {
                Some(&k) if k == chunk => return self.kinds.get(at).copied(),
                Some(&0) | None => return None,
                Some(_) => at = (at + 1) & mask,
            }
        }
    }
}

/// `Key::within(window, len)`'s first chunk, for `len` from 1 to 8 (`None` past the window).
#[inline]
fn short_chunk(window: &[u8], len: usize) -> Option<u64> {
    let v = match window.get(..8) {
        Some(eight) => u64::from_le_bytes(eight.try_into().ok()?),
        None => window
            .get(..len)?
            .iter()
            .rev()
            .fold(0u64, |v, &b| (v << 8) | u64::from(b)),
    };
    let v = if len >= 8 {
        v
    } else {
        v & ((1u64 << (len * 8)) - 1)
    };
    (len <= window.len()).then_some(upper8(v))
}

/// The fingerprint entries, `0` + fingerprint (at most 8 bytes), as `u64` keys.
struct Fingerprints {
    slots: Box<[u64]>,
    shift: u32,
}

fn table_size(entries: usize) -> (usize, u32) {
    let size = entries.saturating_mul(2).max(16).next_power_of_two();
    (size, 64 - size.trailing_zeros())
}

impl Words {
    fn build() -> Words {
        // libinjectionrs compares the upper-cased word with the entry as spelled: an entry
        // with a lower-case letter could never match (the list has none).
        let entries: Vec<(Key, u8)> = SQL_KEYWORDS
            .iter()
            .filter(|k| k.token_type != kind::FINGERPRINT)
            .filter(|k| !k.word.bytes().any(|b| b.is_ascii_lowercase()))
            .filter_map(|k| Some((Key::new(k.word.as_bytes())?, k.token_type)))
            .collect();
        let (size, shift) = table_size(entries.len());
        let mut slots = vec![0u16; size].into_boxed_slice();
        for (i, (key, _)) in entries.iter().enumerate() {
            let Ok(id) = u16::try_from(i + 1) else {
                break; // more than 65,534 words: not libinjection's list
            };
            let mut at = (key.hash() >> shift) as usize;
            while slots.get(at).is_some_and(|&s| s != 0) {
                at = (at + 1) & (size - 1);
            }
            if let Some(slot) = slots.get_mut(at) {
                *slot = id;
            }
        }
        let mut shapes = Box::new([0u64; SHAPE_WORDS]);
        for (key, _) in &entries {
            let bytes = key.chunks.map(u64::to_le_bytes).concat();
            if let (Some(&first), Some(&last)) = (bytes.first(), bytes.get(key.len.wrapping_sub(1)))
            {
                let bit = shape_bit(key.len, first, last);
                if let Some(w) = shapes.get_mut(bit / 64) {
                    *w |= 1 << (bit % 64);
                }
            }
        }
        let mut phrase_spaces = [0u32; 256];
        for k in SQL_KEYWORDS
            .iter()
            .filter(|k| k.token_type != kind::FINGERPRINT)
        {
            let word = k.word.as_bytes();
            let Some(&first) = word.first() else {
                continue;
            };
            for (i, _) in word.iter().enumerate().filter(|(_, &b)| b == b' ') {
                if let (Some(bits), Ok(i)) =
                    (phrase_spaces.get_mut(usize::from(first)), u32::try_from(i))
                {
                    *bits |= 1u32.checked_shl(i).unwrap_or(0);
                }
            }
        }
        let short = ShortWords::build(&entries);
        Words {
            entries,
            slots,
            shift,
            shapes,
            short,
            phrase_spaces,
        }
    }

    #[inline]
    fn get(&self, key: &Key) -> Option<u8> {
        let mask = self.slots.len() - 1;
        let mut at = (key.hash() >> self.shift) as usize;
        loop {
            let id = *self.slots.get(at)?;
            let (entry, k) = self.entries.get(usize::from(id).checked_sub(1)?)?;
            if entry == key {
                return Some(*k);
            }
            at = (at + 1) & mask;
        }
    }
}

impl Fingerprints {
    fn build() -> Fingerprints {
        let keys: Vec<u64> = SQL_KEYWORDS
            .iter()
            .filter(|k| k.token_type == kind::FINGERPRINT)
            .filter_map(|k| fingerprint_key(k.word.as_bytes()))
            .collect();
        let (size, shift) = table_size(keys.len());
        let mut slots = vec![0u64; size].into_boxed_slice();
        for key in keys {
            let mut at = (mix(key) >> shift) as usize;
            while slots.get(at).is_some_and(|&s| s != 0 && s != key) {
                at = (at + 1) & (size - 1);
            }
            if let Some(slot) = slots.get_mut(at) {
                *slot = key;
            }
        }
        Fingerprints { slots, shift }
    }

    fn contains(&self, key: u64) -> bool {
        let mask = self.slots.len() - 1;
        let mut at = (mix(key) >> self.shift) as usize;
        loop {
            match self.slots.get(at) {
                Some(&s) if s == key => return true,
                Some(&0) | None => return false,
                Some(_) => at = (at + 1) & mask,
            }
        }
    }
}

fn mix(key: u64) -> u64 {
    (key ^ (key >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// A fingerprint entry's key: its (at most 8, non-zero-led) bytes upper-cased in a `u64`.
fn fingerprint_key(entry: &[u8]) -> Option<u64> {
    let key = Key::new(entry)?;
    (entry.len() <= 8 && entry.first().is_some_and(|&b| b != 0)).then_some(key.chunks[0])
}

struct Tables {
    words: Words,
    fingerprints: Fingerprints,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Tables {
        words: Words::build(),
        fingerprints: Fingerprints::build(),
    })
}

/// libinjection's word lookup: the kind of `word` (case-insensitive), or `n` (bareword)
/// when it is not on the list. Entries of kind `n` exist too (`BY`, `USER`): same answer.
///
/// Fingerprint entries all start with `0` (a test checks it), so a word needs the
/// fingerprint table only when it starts with `0`: the answer is then exactly
/// libinjectionrs's single search over the whole list.
pub(super) fn lookup(word: &[u8]) -> u8 {
    lookup_within(word, word.len())
}

/// `lookup(&window[..len])`, reading the bytes past `len` for speed (see `Key::within`).
pub(super) fn lookup_within(window: &[u8], len: usize) -> u8 {
    let word = window.get(..len).unwrap_or(&[]);
    let t = tables();
    // No word has this shape (and it is no fingerprint entry, which all start with `0`).
    if let (Some(&first), Some(&last)) = (word.first(), word.last()) {
        let bit = shape_bit(len, first, last);
        let known = t
            .words
            .shapes
            .get(bit / 64)
            .is_some_and(|w| w & (1 << (bit % 64)) != 0);
        if !known && first != b'0' {
            return kind::BAREWORD;
        }
    }
    if (1..=8).contains(&len) {
        let Some(chunk) = short_chunk(window, len) else {
            return kind::BAREWORD;
        };
        if let Some(k) = t.words.short.get(chunk) {
            return k;
        }
    } else {
        let Some(key) = Key::within(window, len) else {
            return kind::BAREWORD;
        };
        if let Some(k) = t.words.get(&key) {
            return k;
        }
    }
    if word.first() == Some(&b'0')
        && fingerprint_key(word).is_some_and(|k| t.fingerprints.contains(k))
    {
        return kind::FINGERPRINT;
    }
    kind::BAREWORD
}

/// Whether `text`, a space and another token's text could be a multi-word keyword: a cheap
/// necessary condition (the keyword's first byte, and a space at `text.len()`), checked
/// before joining the two texts and looking them up.
pub(super) fn could_merge(text: &[u8]) -> bool {
    // The joined words start with the first token's first byte (a space when it is empty).
    let lead = text.first().map_or(b' ', u8::to_ascii_uppercase);
    let bits = tables()
        .words
        .phrase_spaces
        .get(usize::from(lead))
        .copied()
        .unwrap_or(0);
    u32::try_from(text.len())
        .ok()
        .and_then(|n| bits.checked_shr(n))
        .is_some_and(|b| b & 1 == 1)
}

/// Whether libinjection blacklists `fingerprint`: `0` + the fingerprint upper-cased is an
/// entry of kind `F` (the upper-casing makes `t` and `T` alike; libinjection's choice).
pub(super) fn is_blacklisted(fingerprint: &[u8]) -> bool {
    // Entries are at most 8 bytes: `0` and up to 7 fingerprint characters.
    if fingerprint.is_empty() || fingerprint.len() > 7 {
        return false;
    }
    let key = fingerprint
        .iter()
        .rev()
        .fold(0u64, |v, &b| (v << 8) | u64::from(b));
    tables()
        .fingerprints
        .contains(upper8((key << 8) | u64::from(b'0')))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_is_found_with_its_kind() {
        for k in SQL_KEYWORDS {
            let word = k.word.as_bytes();
            let expected = if k.token_type == b'F' {
                b'F'
            } else {
                k.token_type
            };
            assert_eq!(lookup(word), expected, "{}", k.word);
            assert_eq!(lookup(&word.to_ascii_lowercase()), expected, "{}", k.word);
        }
        assert_eq!(lookup(b"surely_no_keyword"), kind::BAREWORD);
        assert_eq!(lookup(b""), kind::BAREWORD);
    }

    #[test]
    fn words_of_a_shape_no_keyword_has_are_barewords() {
        // `lookup`'s shortcut against the table alone, on generated words.
        let alphabet = b"aeinorstuASELN_0129 .'";
        let mut x: u64 = 0x5eed_5a1e;
        let mut passed_over = 0;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 9) as usize;
            let word: Vec<u8> = (0..len)
                .map(|i| alphabet[((x >> (8 + 5 * i)) % alphabet.len() as u64) as usize])
                .collect();
            let t = tables();
            let full = Key::new(&word)
                .and_then(|key| t.words.get(&key))
                .unwrap_or(kind::BAREWORD);
            if word.first() != Some(&b'0') {
                assert_eq!(lookup(&word), full, "{:?}", String::from_utf8_lossy(&word));
            }
            passed_over += usize::from(full == kind::BAREWORD);
        }
        assert!(passed_over > 0);
    }

    #[test]
    fn upper8_upper_cases_every_byte_in_every_lane() {
        for b in 0..=255u8 {
            for lane in 0..8 {
                let mut bytes = [b'a', b'z', b'@', b'[', b'`', b'{', 0xe1, 0x7f];
                bytes[lane] = b;
                let expected = u64::from_le_bytes(bytes.map(|x| x.to_ascii_uppercase()));
                assert_eq!(
                    upper8(u64::from_le_bytes(bytes)),
                    expected,
                    "{b:#x} in lane {lane}"
                );
            }
        }
    }

    #[test]
    fn fingerprint_entries_start_with_zero() {
        // `lookup` relies on it to skip the fingerprint table for most words.
        for k in SQL_KEYWORDS.iter().filter(|k| k.token_type == b'F') {
            assert!(k.word.starts_with('0'), "{}", k.word);
        }
    }

    #[test]
    fn blacklist_agrees_with_libinjectionrs() {
        for k in SQL_KEYWORDS.iter().filter(|k| k.token_type == b'F') {
            let fp = k.word.get(1..).unwrap_or("");
            assert!(is_blacklisted(fp.as_bytes()), "{fp}");
            let lower = fp.to_ascii_lowercase();
            assert_eq!(
                is_blacklisted(lower.as_bytes()),
                libinjectionrs::sqli::blacklist::is_blacklisted(&lower),
                "{lower}"
            );
        }
        assert!(!is_blacklisted(b""));
        assert!(!is_blacklisted(b"nnnnn"));
    }
}

//! libinjection's word list, looked up without allocating.
//!
//! The list itself is libinjectionrs's (`sqli_data::SQL_KEYWORDS`: upper-case words, each with
//! the token kind it stands for, plus ~8,400 entries of kind `F` that are not words but the
//! fingerprint blacklist, spelled `0` + the fingerprint upper-cased). Reading it through the
//! crate's public API keeps our detector on exactly the list libinjectionrs uses.
//!
//! libinjectionrs upper-cases every looked-up word into a new `String` and binary-searches
//! all 9,352 entries. Here the entries go, once, into two open-addressing hash tables: the
//! ~1,000 real words (a few KiB, so the table stays in cache while a value is tokenized) and
//! the fingerprints (looked up once per pass). A lookup hashes the bytes upper-cased on the
//! fly and compares them with the entry in place: no copy, no allocation.

use std::sync::OnceLock;

use libinjectionrs::sqli::sqli_data::SQL_KEYWORDS;

use super::token::kind;

/// Longer keys are in no table (the longest word is 29 bytes): not even hashed.
const MAX_KEY: usize = 32;

/// One hash table over a subset of `SQL_KEYWORDS`.
struct Table {
    /// Per slot: 0 when empty, else the entry's index in `SQL_KEYWORDS` + 1 in the low 16
    /// bits and 16 bits of its hash above them, so most misses never touch the word.
    slots: Box<[u32]>,
    /// `64 - log2(slots.len())`: the hash's top bits pick the home slot.
    shift: u32,
}

/// FxHash-style: cheap per byte, and the multiply leaves the top bits well mixed, which are
/// the ones `Table` uses. Letters count upper-cased, as libinjection compares them.
fn hash(key: &[u8]) -> u64 {
    key.iter().fold(key.len() as u64, |h, &b| {
        (h.rotate_left(5) ^ u64::from(b.to_ascii_uppercase())).wrapping_mul(0x517c_c1b7_2722_0a95)
    })
}

impl Table {
    fn build(entries: impl Iterator<Item = usize> + Clone) -> Table {
        let wanted = entries.clone().count().saturating_mul(2).max(16);
        let size = wanted.next_power_of_two();
        let mut slots = vec![0u32; size].into_boxed_slice();
        let shift = 64 - size.trailing_zeros();
        let mask = size - 1;
        for index in entries {
            let Some(entry) = SQL_KEYWORDS.get(index) else {
                continue;
            };
            let (Ok(id), h) = (u16::try_from(index + 1), hash(entry.word.as_bytes())) else {
                continue; // the list has fewer than 65,535 entries
            };
            let mut at = (h >> shift) as usize;
            while slots.get(at).is_some_and(|&s| s != 0) {
                at = (at + 1) & mask;
            }
            if let Some(slot) = slots.get_mut(at) {
                *slot = (((h >> 16) as u32) & 0xffff_0000) | u32::from(id);
            }
        }
        Table { slots, shift }
    }

    /// The kind of the entry equal to `key` upper-cased, if any.
    fn get(&self, key: &[u8]) -> Option<u8> {
        if key.len() > MAX_KEY {
            return None;
        }
        let h = hash(key);
        let tag = ((h >> 16) as u32) & 0xffff_0000;
        let mask = self.slots.len() - 1;
        let mut at = (h >> self.shift) as usize;
        loop {
            let slot = *self.slots.get(at)?;
            if slot == 0 {
                return None;
            }
            if slot & 0xffff_0000 == tag {
                let entry = SQL_KEYWORDS.get((slot & 0xffff) as usize - 1)?;
                let word = entry.word.as_bytes();
                if word.len() == key.len()
                    && word
                        .iter()
                        .zip(key)
                        .all(|(&w, &k)| w == k.to_ascii_uppercase())
                {
                    return Some(entry.token_type);
                }
            }
            at = (at + 1) & mask;
        }
    }
}

struct Tables {
    words: Table,
    fingerprints: Table,
}

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| {
        let all = 0..SQL_KEYWORDS.len();
        let is_fingerprint = |&i: &usize| SQL_KEYWORDS.get(i).is_some_and(|k| k.token_type == b'F');
        Tables {
            words: Table::build(all.clone().filter(move |i| !is_fingerprint(i))),
            fingerprints: Table::build(all.filter(is_fingerprint)),
        }
    })
}

/// libinjection's word lookup: the kind of `word` (case-insensitive), or `n` (bareword)
/// when it is not on the list. Entries of kind `n` exist too (`BY`, `USER`): same answer.
///
/// Fingerprint entries all start with `0` (a test checks it), which no keyword does, so a
/// word only needs the fingerprint table when it starts with `0`: the answer is then exactly
/// libinjectionrs's single search over the whole list.
pub(super) fn lookup(word: &[u8]) -> u8 {
    let t = tables();
    if let Some(k) = t.words.get(word) {
        return k;
    }
    if word.first() == Some(&b'0') && t.fingerprints.get(word).is_some() {
        return kind::FINGERPRINT;
    }
    kind::BAREWORD
}

/// Whether libinjection blacklists `fingerprint`: `0` + the fingerprint upper-cased is an
/// entry of kind `F` (the upper-casing makes `t` and `T` alike; libinjection's choice).
pub(super) fn is_blacklisted(fingerprint: &[u8]) -> bool {
    if fingerprint.is_empty() {
        return false;
    }
    let mut key = [b'0'; 9];
    let Some(rest) = key.get_mut(1..=fingerprint.len()) else {
        return false;
    };
    rest.copy_from_slice(fingerprint);
    let len = fingerprint.len() + 1;
    key.get(..len)
        .and_then(|k| tables().fingerprints.get(k))
        .is_some()
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

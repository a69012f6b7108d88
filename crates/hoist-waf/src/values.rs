//! Per-transaction cache of transformed values and their prefilter hits.
//!
//! Every request value that does not change once set (an argument, a header, the URI, the
//! body) has a [`Slot`]; a transformed value is cached under (slot, chain id), so each value
//! is transformed once per distinct chain per transaction instead of once per rule, and the
//! chain's @rx prefilter runs once on it. Lookups are plain vector indexing and a short linear
//! search over the chains seen for that value: nothing is hashed or compared byte by byte.

use crate::chains::{ChainId, Chains, EMPTY_CHAIN};
use crate::prefilter::Prefilter;
use crate::variables::VarName;

/// A value's identity in the transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Slot {
    Scalar(u8),
    /// `list` numbers the collection (and names vs values), `index` the member.
    Member {
        list: u8,
        index: u32,
    },
}

/// Scalars whose value is fixed once set (or whose setter invalidates it).
pub(crate) fn scalar_slot(var: VarName) -> Option<Slot> {
    use VarName::*;
    let code = match var {
        RequestUri => 0,
        RequestUriRaw => 1,
        RequestFilename => 2,
        RequestBasename => 3,
        RequestLine => 4,
        RequestMethod => 5,
        RequestProtocol => 6,
        QueryString => 7,
        RequestBody => 8,
        ResponseBody => 9,
        _ => return None,
    };
    Some(Slot::Scalar(code))
}

const SCALARS: usize = 10;
/// Collections only ever appended to: see `Transaction::list_code`.
pub(crate) const LISTS: usize = 16;

#[derive(Debug, Clone, Copy)]
enum Val {
    /// The value as collected (no transformation changed it).
    Original,
    Buf(usize),
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    chain: ChainId,
    value: Val,
    /// Start of the prefilter hit bits in `ValueCache::bits`, once scanned.
    bits: Option<usize>,
}

#[derive(Debug, Default)]
pub(crate) struct ValueCache {
    /// Per slot, indexed by chain id: 1 + the index of its entry in `entries`, 0 for none.
    /// Allocated when the slot is first seen; a dense table because a value meets dozens
    /// of chains (with prefixes) in CRS and a linear search over them was the hot spot.
    scalars: Vec<Vec<u32>>,
    lists: Vec<Vec<Vec<u32>>>,
    entries: Vec<Entry>,
    bufs: Vec<Vec<u8>>,
    bits: Vec<u64>,
    path: Vec<ChainId>,
}

impl ValueCache {
    pub fn clear(&mut self) {
        *self = ValueCache::default();
    }

    /// Forgets a scalar whose value changed (the body grows between phases).
    pub fn invalidate(&mut self, slot: Slot) {
        if let Some(index) = self.index_mut(slot, 0) {
            index.clear();
        }
    }

    /// Forgets a whole collection that was replaced rather than appended to.
    pub fn invalidate_list(&mut self, list: u8) {
        if let Some(l) = self.lists.get_mut(usize::from(list)) {
            l.clear();
        }
    }

    /// The chain → entry table of `slot`, at least `chains` long.
    fn index_mut(&mut self, slot: Slot, chains: usize) -> Option<&mut Vec<u32>> {
        let index = match slot {
            Slot::Scalar(code) => {
                if self.scalars.is_empty() {
                    self.scalars.resize_with(SCALARS, Vec::new);
                }
                self.scalars.get_mut(usize::from(code))?
            }
            Slot::Member { list, index } => {
                if self.lists.is_empty() {
                    self.lists.resize_with(LISTS, Vec::new);
                }
                let l = self.lists.get_mut(usize::from(list))?;
                let i = index as usize;
                if l.len() <= i {
                    l.resize_with(i + 1, Vec::new);
                }
                l.get_mut(i)?
            }
        };
        if index.len() < chains {
            index.resize(chains, 0);
        }
        Some(index)
    }

    fn find(&mut self, slot: Slot, chain: ChainId, chains: usize) -> Option<(usize, Entry)> {
        let at = *self.index_mut(slot, chains)?.get(chain as usize)?;
        let at = (at as usize).checked_sub(1)?;
        self.entries.get(at).map(|e| (at, *e))
    }

    fn insert(&mut self, slot: Slot, entry: Entry, chains: usize) -> usize {
        let at = self.entries.len();
        let Ok(tag) = u32::try_from(at + 1) else {
            return usize::MAX;
        };
        self.entries.push(entry);
        if let Some(i) = self
            .index_mut(slot, chains)
            .and_then(|index| index.get_mut(entry.chain as usize))
        {
            *i = tag;
        }
        at
    }

    fn resolve<'v>(&'v self, v: Val, original: &'v [u8]) -> &'v [u8] {
        match v {
            Val::Original => original,
            Val::Buf(i) => self.bufs.get(i).map_or(&[][..], Vec::as_slice),
        }
    }

    /// `original` (the value of `slot`) under `chain`, and, with a prefilter, the hit bits of
    /// that prefilter on it. Computes and caches whatever is missing, reusing the longest
    /// cached prefix of the chain.
    pub fn get<'v>(
        &'v mut self,
        slot: Slot,
        original: &'v [u8],
        chain: ChainId,
        chains: &Chains,
        prefilter: Option<&Prefilter>,
    ) -> (&'v [u8], Option<&'v [u64]>) {
        let (at, entry) = match self.find(slot, chain, chains.len()) {
            Some(found) => found,
            None => self.compute(slot, original, chain, chains),
        };
        let bits = match (prefilter, entry.bits) {
            (None, _) => None,
            (Some(_), Some(start)) => Some(start),
            (Some(p), None) => {
                let start = self.bits.len();
                self.bits.resize(start + p.words(), 0);
                let value = self.resolve(entry.value, original);
                let mut scratch = vec![0u64; p.words()];
                p.scan(value, &mut scratch);
                self.bits[start..].copy_from_slice(&scratch);
                if let Some(e) = self.entries.get_mut(at) {
                    e.bits = Some(start);
                }
                Some(start)
            }
        };
        let words = prefilter.map_or(0, Prefilter::words);
        let this: &'v ValueCache = self;
        let bits = bits.and_then(|s| this.bits.get(s..s + words));
        (this.resolve(entry.value, original), bits)
    }

    fn compute(
        &mut self,
        slot: Slot,
        original: &[u8],
        chain: ChainId,
        chains: &Chains,
    ) -> (usize, Entry) {
        let mut path = std::mem::take(&mut self.path);
        path.clear();
        let mut at = chain;
        let mut base = Val::Original;
        while at != EMPTY_CHAIN {
            if let Some((_, e)) = self.find(slot, at, chains.len()) {
                base = e.value;
                break;
            }
            path.push(at);
            at = chains.node(at).parent;
        }
        if chain == EMPTY_CHAIN {
            let entry = Entry {
                chain,
                value: Val::Original,
                bits: None,
            };
            let at = self.insert(slot, entry, chains.len());
            self.path = path;
            return (at, entry);
        }
        // Unreachable placeholder: `path` is non-empty here, so the loop sets it.
        let mut last = (
            usize::MAX,
            Entry {
                chain,
                value: base,
                bits: None,
            },
        );
        for &node in path.iter().rev() {
            let transform = chains.node(node).transform;
            let changed = transform.and_then(|t| {
                let input = self.resolve(base, original);
                (!t.is_noop_for(input)).then(|| t.apply(input))
            });
            if let Some(out) = changed {
                self.bufs.push(out);
                base = Val::Buf(self.bufs.len() - 1);
            }
            let entry = Entry {
                chain: node,
                value: base,
                bits: None,
            };
            last = (self.insert(slot, entry, chains.len()), entry);
        }
        self.path = path;
        last
    }
}

//! TX, the transaction's variables, and which of them were written since the map last
//! equalled the constant block's TX.
//!
//! CRS's setup gives every transaction the same ~100 TX variables; the constant plan
//! replays them (`constant`, `Transaction::replay`) by rewriting the previous transaction's
//! map, so their buffers are reused. Rewriting all of them cost ~19,000 instructions of a
//! ~300,000-instruction GET, and touched every entry's memory, while a request changes a
//! dozen or two (scores, per-header names). Every write goes through this type, which notes
//! each name once; `reset_to` then restores only those, and rewrites the whole map only when
//! it was not reset from the same base before.
//!
//! TX keeps its names in the order they were added (ModSecurity 2's tables do): a target
//! such as `TX:/^rfi_parameter_/` yields its members in that order, so which one a chain's
//! MATCHED_VAR names does not depend on the hash map's seed or history (it did: the same
//! request logged `TX:rfi_parameter_args:loc` in one transaction and `...:referer` in
//! another).
//!
//! The variables are entries in a vector that keeps its positions: a name removed (or not
//! in the base a reset restores) stays as an absent entry with its buffers, and a name
//! written in the rules (`TxName`) is found through its number's slot, noted the first
//! time it is looked up, without hashing it again (see `tx_name`).

use crate::tx_name::{self, TxName};
use std::cell::Cell;
use std::collections::HashMap;

/// Whether an entry holds more than an absent one may keep (`MAX_SPARE_BYTES`).
fn oversized(var: &Var) -> bool {
    var.name.capacity() + var.value.capacity() > MAX_SPARE_BYTES
}

/// A plain TX map: the constant block's snapshot, with each name's place in TX's order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct TxMap {
    vars: HashMap<String, (u64, Vec<u8>), foldhash::fast::RandomState>,
    /// More than any name's place: where names added after this snapshot go.
    next_born: u64,
}

impl TxMap {
    /// The names `keep` accepts, in TX's order.
    pub fn selected(&self, keep: impl Fn(&str) -> bool) -> Vec<String> {
        let mut names: Vec<(u64, &String)> = (self.vars.iter())
            .filter(|(k, _)| keep(k))
            .map(|(k, (born, _))| (*born, k))
            .collect();
        names.sort_unstable();
        names.into_iter().map(|(_, k)| k.clone()).collect()
    }

    #[cfg(test)]
    fn insert(&mut self, name: String, value: Vec<u8>) {
        self.vars.insert(name, (self.next_born, value));
        self.next_born += 1;
    }
}

/// One name TX has held since the map was last compacted: present now, or kept with its
/// buffers for the next time the name is added (CRS adds the same per-header names, 920450's,
/// on every request).
#[derive(Debug, Clone)]
struct Var {
    name: String,
    value: Vec<u8>,
    /// Its place in TX's order: when the name was last added.
    born: u64,
    /// Whether the name is in TX.
    present: bool,
    /// Whether the entry is in `TxVars::written`.
    written: bool,
}

/// foldhash (randomly seeded per process, so names a peer influences, such as CRS's
/// per-header keys, cannot be chosen to collide), not SipHash: CRS reads and writes TX dozens
/// of times per request, and SipHash was a few percent of a GET's cost.
#[derive(Debug, Clone, Default)]
pub(crate) struct TxVars {
    /// Entries never move but in `compact`: a position found once stays valid.
    entries: Vec<Var>,
    /// Name -> position in `entries`, present or not.
    index: HashMap<String, usize, foldhash::fast::RandomState>,
    /// Per `TxName` number: its position in `entries` + 1, or 0 when not looked up yet (or
    /// not in `entries`): then the name is hashed and the position noted here.
    by_number: Vec<Cell<usize>>,
    /// How many entries are present.
    present: usize,
    /// Positions of the entries written (set, changed, added or removed) since `reset_to`,
    /// each once.
    written: Vec<usize>,
    /// Whether the map equals the base of the last `reset_to` but for the entries in
    /// `written`. False for a map that rules built up from empty.
    tracked: bool,
    /// The place the next added name takes.
    next_born: u64,
}

/// Absent entries are kept up to this many; past it, or when one holds more than
/// `MAX_SPARE_BYTES` (name and value), a reset drops all absent entries (`compact`): the
/// per-header names are short, and a pooled TX (two per scratch set, see `scratch`) must
/// not pin more than a few KB for a request that had odd headers.
const MAX_SPARE: usize = 128;
const MAX_SPARE_BYTES: usize = 256;

impl TxVars {
    pub fn with_capacity(capacity: usize) -> TxVars {
        let mut tx = TxVars {
            entries: Vec::with_capacity(capacity),
            index: HashMap::with_capacity_and_hasher(capacity, Default::default()),
            ..TxVars::default()
        };
        tx.cover_numbers();
        tx
    }

    /// Gives every numbered name a slot in `by_number` (names numbered after the map was
    /// made, by a rule set loaded later, have none until the next call: they are hashed).
    fn cover_numbers(&mut self) {
        let numbered = tx_name::numbered();
        if self.by_number.len() < numbered {
            self.by_number.resize_with(numbered, Cell::default);
        }
    }

    fn position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// `position` through the number's table: no hashing once the name was found.
    fn position_named(&self, name: &TxName) -> Option<usize> {
        let cell = name.number().and_then(|n| self.by_number.get(n));
        if let Some(at) = cell.map(Cell::get).filter(|&at| at != 0) {
            debug_assert_eq!(
                self.entries.get(at - 1).map(|v| v.name.as_str()),
                Some(name.as_str())
            );
            return Some(at - 1);
        }
        let at = self.position(name)?;
        if let Some(cell) = cell {
            cell.set(at + 1);
        }
        Some(at)
    }

    fn present_at(&self, at: Option<usize>) -> Option<&Var> {
        self.entries.get(at?).filter(|v| v.present)
    }

    pub fn get(&self, name: &str) -> Option<&Vec<u8>> {
        self.present_at(self.position(name)).map(|v| &v.value)
    }

    pub fn get_named(&self, name: &TxName) -> Option<&Vec<u8>> {
        self.present_at(self.position_named(name)).map(|v| &v.value)
    }

    pub fn get_key_value(&self, name: &str) -> Option<(&String, &Vec<u8>)> {
        self.present_at(self.position(name))
            .map(|v| (&v.name, &v.value))
    }

    /// The names `keep` accepts, with their values, in the order they were added.
    pub fn matching_in_order(
        &self,
        keep: impl Fn(&str) -> bool,
    ) -> impl Iterator<Item = (&String, &Vec<u8>)> {
        let mut found: smallvec::SmallVec<[(u64, &String, &Vec<u8>); 8]> = (self.entries.iter())
            .filter(|v| v.present && keep(&v.name))
            .map(|v| (v.born, &v.name, &v.value))
            .collect();
        found.sort_unstable_by_key(|&(born, _, _)| born);
        found.into_iter().map(|(_, k, v)| (k, v))
    }

    /// `matching_in_order` for a map that was reset to a base (`reset_to`) whose names
    /// `keep` accepts are `from_base` (`TxMap::selected`): only those and the names written
    /// since the reset are looked at, not every name (CRS's `TX:/^header_name_920450_/` and
    /// `TX:/MULTIPART_HEADERS_CONTENT_TYPES_*/` walked ~100 setup names per request for
    /// none). `None` when the map is not tracked against a base.
    pub fn matching_since_reset<'a>(
        &'a self,
        from_base: &'a [String],
        keep: impl Fn(&str) -> bool,
    ) -> Option<impl Iterator<Item = (&'a String, &'a Vec<u8>)>> {
        if !self.tracked {
            return None;
        }
        let mut found: smallvec::SmallVec<[(u64, &String, &Vec<u8>); 8]> =
            smallvec::SmallVec::new();
        // A base name still there and not written since keeps its base place; the written
        // ones (changed, added, removed and added again) are taken from the list below.
        for name in from_base {
            if let Some(var) = self.present_at(self.position(name)) {
                if !var.written {
                    found.push((var.born, &var.name, &var.value));
                }
            }
        }
        for var in self.written.iter().filter_map(|&at| self.entries.get(at)) {
            if var.present && keep(&var.name) {
                found.push((var.born, &var.name, &var.value));
            }
        }
        found.sort_unstable_by_key(|&(born, _, _)| born);
        Some(found.into_iter().map(|(_, k, v)| (k, v)))
    }

    pub fn is_empty(&self) -> bool {
        self.present == 0
    }

    /// Entries held, present or not: what a pooled map keeps.
    pub fn capacity(&self) -> usize {
        self.entries.capacity().max(self.index.capacity())
    }

    #[cfg(test)]
    pub fn reserve(&mut self, additional: usize) {
        self.entries.reserve(additional);
        self.index.reserve(additional);
    }

    /// Empties the map (its entries' buffers stay for names added again); it is no longer
    /// tracked against a base.
    pub fn clear(&mut self) {
        self.forget_all();
        self.written.clear();
        self.tracked = false;
        self.compact_if_needed(self.spares_oversized());
        self.cover_numbers();
    }

    /// Makes every entry absent and unwritten.
    fn forget_all(&mut self) {
        for var in &mut self.entries {
            var.present = false;
            var.written = false;
        }
        self.present = 0;
    }

    /// Whether an absent entry holds more than `MAX_SPARE_BYTES`.
    fn spares_oversized(&self) -> bool {
        (self.entries.iter()).any(|v| !v.present && oversized(v))
    }

    /// Notes entry `at` as written, once.
    fn note(&mut self, at: usize) {
        if let Some(var) = self.entries.get_mut(at) {
            if !var.written {
                var.written = true;
                self.written.push(at);
            }
        }
    }

    /// The value of `name` to be written, and whether it was there: a name not in TX is
    /// added, with an empty value.
    pub fn upsert_named(&mut self, name: &TxName) -> (&mut Vec<u8>, bool) {
        let at = match self.position_named(name) {
            Some(at) => at,
            None => {
                let at = self.add_entry(name);
                if let Some(cell) = name.number().and_then(|n| self.by_number.get(n)) {
                    cell.set(at + 1);
                }
                at
            }
        };
        self.upsert_at(at)
    }

    /// `upsert_named` for a name made up at run time.
    pub fn upsert(&mut self, name: &str) -> (&mut Vec<u8>, bool) {
        let at = match self.position(name) {
            Some(at) => at,
            None => self.add_entry(name),
        };
        self.upsert_at(at)
    }

    /// `at` comes from `index` (through `position*`) or `add_entry`: a valid position.
    fn upsert_at(&mut self, at: usize) -> (&mut Vec<u8>, bool) {
        self.note(at);
        let var = &mut self.entries[at];
        let existed = var.present;
        if !existed {
            var.present = true;
            var.value.clear();
            var.born = self.next_born;
            self.next_born += 1;
            self.present += 1;
        }
        (&mut var.value, existed)
    }

    /// A new absent entry for `name` (not in `index`); its position.
    fn add_entry(&mut self, name: &str) -> usize {
        let at = self.entries.len();
        self.entries.push(Var {
            name: name.to_string(),
            value: Vec::new(),
            born: 0,
            present: false,
            written: false,
        });
        self.index.insert(name.to_string(), at);
        at
    }

    /// `name` := `value`, into the old value's buffer when there is one.
    pub fn set(&mut self, name: &str, value: &[u8]) {
        let (old, _) = self.upsert(name);
        old.clear();
        old.extend_from_slice(value);
    }

    pub fn remove(&mut self, name: &str) {
        self.remove_at(self.position(name));
    }

    pub fn remove_named(&mut self, name: &TxName) {
        self.remove_at(self.position_named(name));
    }

    fn remove_at(&mut self, at: Option<usize>) {
        let Some(at) = at.filter(|&at| self.entries.get(at).is_some_and(|v| v.present)) else {
            return;
        };
        self.note(at);
        if let Some(var) = self.entries.get_mut(at) {
            var.present = false;
            self.present -= 1;
        }
    }

    /// The map := `base`, keeping buffers: only the written entries when the map was reset
    /// to this same base before (the caller's promise: `Transaction::replay` always passes
    /// its rule set's one block), every entry otherwise.
    pub fn reset_to(&mut self, base: &TxMap) {
        self.cover_numbers();
        // Names added from now on come after every name of the base.
        self.next_born = self.next_born.max(base.next_born);
        let base_vars = &base.vars;
        let restore = |var: &mut Var, &(born, ref value): &(u64, Vec<u8>)| {
            var.value.clone_from(value);
            var.born = born;
            var.present = true;
        };
        let mut spare_oversized = false;
        if self.tracked {
            let TxVars {
                entries,
                written,
                present,
                ..
            } = self;
            for &at in written.iter() {
                let Some(var) = entries.get_mut(at) else {
                    continue;
                };
                var.written = false;
                match base_vars.get(var.name.as_str()) {
                    Some(b) => {
                        *present += usize::from(!var.present);
                        restore(var, b);
                    }
                    None => {
                        *present -= usize::from(var.present);
                        var.present = false;
                        spare_oversized |= oversized(var);
                    }
                }
            }
        } else {
            self.forget_all();
            for (name, b) in base_vars {
                let at = self.position(name).unwrap_or_else(|| self.add_entry(name));
                if let Some(var) = self.entries.get_mut(at) {
                    restore(var, b);
                    self.present += 1;
                }
            }
            spare_oversized = self.spares_oversized();
        }
        self.written.clear();
        self.tracked = true;
        self.compact_if_needed(spare_oversized);
        debug_assert!(
            self.present == base_vars.len()
                && base_vars.iter().all(|(k, (born, v))| {
                    self.present_at(self.position(k))
                        .is_some_and(|x| &x.value == v && x.born == *born && !x.written)
                }),
            "TX after a reset differs from its base"
        );
    }

    /// Compacts when more than `MAX_SPARE` entries are absent, or one holds too much.
    fn compact_if_needed(&mut self, spare_oversized: bool) {
        if spare_oversized || self.entries.len() - self.present > MAX_SPARE {
            self.compact();
        }
    }

    /// Drops the absent entries; positions change, so the numbers' table starts over.
    /// Only between transactions (`written` is empty).
    fn compact(&mut self) {
        debug_assert!(self.written.is_empty());
        self.entries.retain(|v| v.present);
        self.index.clear();
        for (at, var) in self.entries.iter().enumerate() {
            self.index.insert(var.name.clone(), at);
        }
        self.by_number.iter().for_each(|c| c.set(0));
    }

    /// A plain copy, for the constant plan's snapshot.
    pub fn to_map(&self) -> TxMap {
        TxMap {
            vars: (self.entries.iter())
                .filter(|v| v.present)
                .map(|v| (v.name.clone(), (v.born, v.value.clone())))
                .collect(),
            next_born: self.next_born,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> TxMap {
        let mut m = TxMap::default();
        m.insert("score".into(), b"0".to_vec());
        m.insert("paranoia".into(), b"1".to_vec());
        m.insert("gone".into(), b"x".to_vec());
        m
    }

    fn equals(tx: &TxVars, base: &TxMap) -> bool {
        tx.to_map().vars == base.vars
    }

    #[test]
    fn every_kind_of_write_is_undone_by_a_tracked_reset() {
        let base = base();
        let mut tx = TxVars::default();
        tx.set("leftover", b"1");
        tx.reset_to(&base); // untracked: a full rewrite
        assert!(equals(&tx, &base));
        for round in 0..3 {
            tx.set("score", b"5");
            let (v, existed) = tx.upsert("paranoia");
            assert!(existed);
            v.push(b'0');
            tx.remove("gone");
            tx.set("header_name_x", b"/x/");
            tx.set("gone", b"back");
            tx.remove("header_name_x");
            tx.set("new", b"1");
            tx.set("score", b"7");
            // Into the buffers of a name the last reset removed (from round 1 on).
            let (v, existed) = tx.upsert("header_name_y");
            assert!(!existed && v.is_empty());
            v.extend_from_slice(b"/y/");
            assert_eq!(tx.get("header_name_y"), Some(&b"/y/".to_vec()));
            assert_eq!(tx.get("new"), Some(&b"1".to_vec()));
            assert!(!equals(&tx, &base), "round {round}");
            tx.reset_to(&base);
            assert!(equals(&tx, &base), "round {round}: {:?}", tx.to_map());
            assert_eq!(
                tx.entries.len(),
                7,
                "round {round}: the removed names' entries are kept"
            );
        }
    }

    #[test]
    fn a_cleared_map_is_rewritten_whole() {
        let base = base();
        let mut tx = TxVars::default();
        tx.reset_to(&base);
        tx.clear();
        tx.set("score", b"9");
        tx.reset_to(&base);
        assert!(equals(&tx, &base));
    }

    fn order(tx: &TxVars) -> Vec<String> {
        tx.matching_in_order(|_| true)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Names come in the order they were added; a reset brings back the base's order, and
    /// names added after it come after the base's, also when the base held them once.
    #[test]
    fn names_keep_the_order_they_were_added_in_across_resets() {
        let mut base = TxMap::default();
        for name in ["h", "c", "f", "a", "g"] {
            base.insert(name.into(), b"1".to_vec());
        }
        let mut tx = TxVars::default();
        tx.set("stale", b"1");
        for round in 0..3 {
            tx.reset_to(&base);
            assert_eq!(order(&tx), ["h", "c", "f", "a", "g"], "round {round}");
            tx.set("z", b"1");
            tx.remove("c");
            tx.set("c", b"2");
            tx.set("f", b"3");
            tx.set("b", b"1");
            assert_eq!(
                order(&tx),
                ["h", "f", "a", "g", "z", "c", "b"],
                "round {round}"
            );
        }
    }

    /// A name looked up by its number and by hashing gives the same entry, before and after
    /// resets, removals and the compaction of many absent names.
    #[test]
    fn numbered_names_find_the_same_entries_as_hashed_ones() {
        let score = TxName::new("tx_vars_test_score".into());
        let gone = TxName::new("tx_vars_test_gone".into());
        let mut base = TxMap::default();
        base.insert(score.to_string(), b"0".to_vec());
        base.insert("tx_vars_test_level".into(), b"1".to_vec());
        let mut tx = TxVars::with_capacity(4);
        for round in 0..5 {
            tx.reset_to(&base);
            assert_eq!(tx.get_named(&score), Some(&b"0".to_vec()), "round {round}");
            assert_eq!(tx.get_named(&gone), None);
            let (v, existed) = tx.upsert_named(&score);
            assert!(existed);
            v.push(b'5');
            assert_eq!(tx.get("tx_vars_test_score"), Some(&b"05".to_vec()));
            let (v, existed) = tx.upsert_named(&gone);
            assert!(!existed && v.is_empty());
            v.push(b'x');
            assert_eq!(tx.get("tx_vars_test_gone"), Some(&b"x".to_vec()));
            tx.remove_named(&gone);
            assert_eq!(tx.get_named(&gone), None);
            assert_eq!(tx.get("tx_vars_test_gone"), None);
            // Names made up per request: more than MAX_SPARE over the rounds, so the absent
            // ones are compacted away and positions change.
            for i in 0..MAX_SPARE / 2 {
                tx.set(&format!("made_up_{round}_{i}"), b"1");
            }
            tx.remove("tx_vars_test_level");
            assert_eq!(tx.to_map().vars.len(), 1 + MAX_SPARE / 2);
        }
        tx.reset_to(&base);
        assert!(tx.entries.len() <= base.vars.len() + MAX_SPARE + 1);
        assert_eq!(tx.get_named(&score), Some(&b"0".to_vec()));
        assert_eq!(tx.get("tx_vars_test_level"), Some(&b"1".to_vec()));
        assert!(equals(&tx, &base));
    }

    /// An absent entry with a large buffer is not kept for the next request.
    #[test]
    fn a_large_absent_entry_is_not_kept() {
        let base = base();
        let mut tx = TxVars::default();
        tx.reset_to(&base);
        tx.set("small", b"1");
        tx.reset_to(&base);
        assert_eq!(tx.entries.len(), base.vars.len() + 1, "a small one is kept");
        tx.set("big", &[b'x'; 1024]);
        tx.reset_to(&base);
        assert_eq!(tx.entries.len(), base.vars.len());
        assert!(equals(&tx, &base));
        tx.set("big", &[b'x'; 1024]);
        tx.clear();
        assert!(tx.entries.is_empty());
    }
}

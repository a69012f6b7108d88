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

use std::collections::HashMap;

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

#[derive(Debug, Clone)]
struct Var {
    value: Vec<u8>,
    /// Its place in TX's order: when the name was added.
    born: u64,
    /// Whether the name is in `TxVars::written`.
    written: bool,
}

/// foldhash (randomly seeded per process, so names a peer influences, such as CRS's
/// per-header keys, cannot be chosen to collide), not SipHash: CRS reads and writes TX dozens
/// of times per request, and SipHash was a few percent of a GET's cost.
#[derive(Debug, Clone, Default)]
pub(crate) struct TxVars {
    map: HashMap<String, Var, foldhash::fast::RandomState>,
    /// Names written (set, changed, added or removed) since `reset_to`, each at least once;
    /// entries past `written_len` are spare buffers.
    written: Vec<String>,
    written_len: usize,
    /// Whether the map equals the base of the last `reset_to` but for the names in
    /// `written`. False for a map that rules built up from empty.
    tracked: bool,
    /// Name and value buffers of entries a reset removed, for `insert_from` to fill: CRS
    /// adds the same per-header names (920450's) on every request.
    spare: Vec<(String, Vec<u8>)>,
    /// The place the next added name takes.
    next_born: u64,
}

/// At most this many removed entries' buffers are kept, each at most `MAX_SPARE_BYTES`
/// (name and value): the per-header names are short, and a pooled TX (two per scratch set,
/// see `scratch`) must not pin more than a few KB for a request that had odd headers.
const MAX_SPARE: usize = 128;
const MAX_SPARE_BYTES: usize = 256;

impl TxVars {
    pub fn with_capacity(capacity: usize) -> TxVars {
        TxVars {
            map: HashMap::with_capacity_and_hasher(capacity, Default::default()),
            ..TxVars::default()
        }
    }

    pub fn get(&self, name: &str) -> Option<&Vec<u8>> {
        self.map.get(name).map(|v| &v.value)
    }

    pub fn get_key_value(&self, name: &str) -> Option<(&String, &Vec<u8>)> {
        self.map.get_key_value(name).map(|(k, v)| (k, &v.value))
    }

    /// The names `keep` accepts, with their values, in the order they were added.
    pub fn matching_in_order(
        &self,
        keep: impl Fn(&str) -> bool,
    ) -> impl Iterator<Item = (&String, &Vec<u8>)> {
        let mut found: smallvec::SmallVec<[(u64, &String, &Vec<u8>); 8]> = self
            .map
            .iter()
            .filter(|(k, _)| keep(k))
            .map(|(k, v)| (v.born, k, &v.value))
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
            if let Some((k, var)) = self.map.get_key_value(name.as_str()) {
                if !var.written {
                    found.push((var.born, k, &var.value));
                }
            }
        }
        for name in self.written.iter().take(self.written_len) {
            if !keep(name) {
                continue;
            }
            if let Some((k, var)) = self.map.get_key_value(name.as_str()) {
                found.push((var.born, k, &var.value));
            }
        }
        found.sort_unstable_by_key(|&(born, _, _)| born);
        // A name written twice (removed, then added again) is listed twice.
        found.dedup_by_key(|&mut (born, _, _)| born);
        Some(found.into_iter().map(|(_, k, v)| (k, v)))
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.map.capacity()
    }

    #[cfg(test)]
    pub fn reserve(&mut self, additional: usize) {
        self.map.reserve(additional);
    }

    /// Empties the map; it is no longer tracked against a base.
    pub fn clear(&mut self) {
        self.map.clear();
        self.written_len = 0;
        self.tracked = false;
    }

    /// The value of `name`, to be changed in place.
    pub fn get_mut(&mut self, name: &str) -> Option<&mut Vec<u8>> {
        let TxVars {
            map,
            written,
            written_len,
            ..
        } = self;
        let var = map.get_mut(name)?;
        if !var.written {
            var.written = true;
            note(written, written_len, name);
        }
        Some(&mut var.value)
    }

    pub fn insert(&mut self, name: String, value: Vec<u8>) {
        if let Some(old) = self.get_mut(&name) {
            *old = value;
            return;
        }
        self.insert_new(name, value);
    }

    /// Adds `name`, which is not in the map: no lookup first (the callers just made one).
    fn insert_new(&mut self, name: String, value: Vec<u8>) {
        debug_assert!(!self.map.contains_key(&name), "{name} is already in TX");
        note(&mut self.written, &mut self.written_len, &name);
        self.map.insert(
            name,
            Var {
                value,
                born: self.next_born,
                written: true,
            },
        );
        self.next_born += 1;
    }

    /// `name` := `value`, into the old value's buffer when there is one.
    pub fn set(&mut self, name: &str, value: &[u8]) {
        match self.get_mut(name) {
            Some(old) => {
                old.clear();
                old.extend_from_slice(value);
            }
            None => self.insert_from(name, |v| v.extend_from_slice(value)),
        }
    }

    /// Adds `name` (not in the map) with the value `fill` writes into an empty buffer; name
    /// and value go into buffers a reset kept when there are some.
    pub fn insert_from(&mut self, name: &str, fill: impl FnOnce(&mut Vec<u8>)) {
        let (mut key, mut value) = self.spare.pop().unwrap_or_default();
        key.clear();
        key.push_str(name);
        value.clear();
        fill(&mut value);
        self.insert_new(key, value);
    }

    pub fn remove(&mut self, name: &str) {
        if let Some(var) = self.map.remove(name) {
            if !var.written {
                note(&mut self.written, &mut self.written_len, name);
            }
        }
    }

    /// The map := `base`, keeping buffers: only the written names when the map was reset
    /// to this same base before (the caller's promise: `Transaction::replay` always passes
    /// its rule set's one block), every entry otherwise.
    pub fn reset_to(&mut self, base: &TxMap) {
        let TxVars {
            map,
            written,
            written_len,
            tracked,
            spare,
            next_born,
        } = self;
        let restore =
            |map: &mut HashMap<String, Var, _>, name: &String, &(born, ref value)| match map
                .get_mut(name)
            {
                Some(var) => {
                    var.value.clone_from(value);
                    var.born = born;
                    var.written = false;
                }
                None => {
                    map.insert(
                        name.clone(),
                        Var {
                            value: Vec::clone(value),
                            born,
                            written: false,
                        },
                    );
                }
            };
        // Names added from now on come after every name of the base.
        *next_born = (*next_born).max(base.next_born);
        let base_vars = &base.vars;
        if *tracked {
            for name in written.iter().take(*written_len) {
                match base_vars.get_key_value(name.as_str()) {
                    Some((name, var)) => restore(map, name, var),
                    None => {
                        if let Some((key, var)) = map.remove_entry(name.as_str()) {
                            if spare.len() < MAX_SPARE
                                && key.capacity() + var.value.capacity() <= MAX_SPARE_BYTES
                            {
                                spare.push((key, var.value));
                            }
                        }
                    }
                }
            }
        } else {
            map.retain(|name, _| base_vars.contains_key(name));
            for (name, var) in base_vars {
                restore(map, name, var);
            }
        }
        *written_len = 0;
        *tracked = true;
        debug_assert!(
            self.map.len() == base_vars.len()
                && base_vars.iter().all(|(k, (born, v))| {
                    self.map
                        .get(k)
                        .is_some_and(|x| &x.value == v && x.born == *born && !x.written)
                }),
            "TX after a reset differs from its base"
        );
    }

    /// A plain copy, for the constant plan's snapshot.
    pub fn to_map(&self) -> TxMap {
        TxMap {
            vars: (self.map.iter())
                .map(|(k, v)| (k.clone(), (v.born, v.value.clone())))
                .collect(),
            next_born: self.next_born,
        }
    }
}

/// Appends `name` to the written list, into a spare buffer when there is one.
fn note(written: &mut Vec<String>, len: &mut usize, name: &str) {
    match written.get_mut(*len) {
        Some(spare) => {
            spare.clear();
            spare.push_str(name);
        }
        None => written.push(name.to_string()),
    }
    *len += 1;
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
            if let Some(v) = tx.get_mut("paranoia") {
                v.push(b'0');
            }
            tx.remove("gone");
            tx.insert("header_name_x".into(), b"/x/".to_vec());
            tx.set("gone", b"back");
            tx.remove("header_name_x");
            tx.set("new", b"1");
            tx.set("score", b"7");
            // Into the buffers of a name the last reset removed (from round 1 on).
            tx.insert_from("header_name_y", |v| v.extend_from_slice(b"/y/"));
            assert_eq!(tx.get("header_name_y"), Some(&b"/y/".to_vec()));
            assert_eq!(tx.get("new"), Some(&b"1".to_vec()));
            assert!(!equals(&tx, &base), "round {round}");
            tx.reset_to(&base);
            assert!(equals(&tx, &base), "round {round}: {:?}", tx.to_map());
            assert!(
                !tx.spare.is_empty(),
                "round {round}: the removed names' buffers are kept"
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
}

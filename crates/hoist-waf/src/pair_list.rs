//! A list of (name, value) pairs whose buffers outlive its entries: MATCHED_VARS and the
//! variables one rule matched before its actions run.
//!
//! Both are rewritten for every rule that matches (CRS's header, cookie and argument rules
//! match one variable after another), and each entry used to be two fresh allocations freed
//! a rule later: about a tenth of a GET's instructions went to malloc and free. Clearing this
//! list keeps its entries' buffers, and the next push writes into them; with the list kept
//! from transaction to transaction (see `scratch`), steady traffic allocates none.

use crate::body::{PairSlice, Pairs};

#[derive(Debug, Clone, Default)]
pub(crate) struct PairList {
    /// Entries past `len` are spare buffers, not part of the list.
    pairs: Pairs,
    len: usize,
}

impl PairList {
    pub fn as_slice(&self) -> &PairSlice {
        self.pairs.get(..self.len).unwrap_or_default()
    }

    pub fn last(&self) -> Option<&(String, Vec<u8>)> {
        self.as_slice().last()
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Entries and spare buffers together: what the list holds on to.
    pub fn capacity(&self) -> usize {
        self.pairs.capacity()
    }

    /// The bytes its names and values (live and spare) hold on to.
    pub fn retained_bytes(&self) -> usize {
        self.pairs
            .iter()
            .map(|(n, v)| n.capacity() + v.capacity())
            .sum()
    }

    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends an entry whose name `name` writes into an empty string.
    pub fn push_with(&mut self, name: impl FnOnce(&mut String), value: &[u8]) {
        self.push_raw(|n, v| {
            name(n);
            v.extend_from_slice(value);
        });
    }

    /// Appends an entry that `fill` writes into an empty name and an empty value (the
    /// value buffer may serve as scratch space first: a URL-decoded name, say).
    pub fn push_raw(&mut self, fill: impl FnOnce(&mut String, &mut Vec<u8>)) {
        if self.pairs.len() <= self.len {
            self.pairs.push((String::new(), Vec::new()));
        }
        if let Some((n, v)) = self.pairs.get_mut(self.len) {
            n.clear();
            v.clear();
            fill(n, v);
            self.len += 1;
        }
    }

    pub fn push(&mut self, name: &str, value: &[u8]) {
        self.push_with(|n| n.push_str(name), value);
    }

    /// The list := `pairs`, into the buffers already there.
    pub fn assign(&mut self, pairs: &PairSlice) {
        self.clear();
        for (name, value) in pairs {
            self.push(name, value);
        }
    }

    /// The entries as a plain list, for the constant plan's snapshots.
    pub fn to_pairs(&self) -> Pairs {
        self.as_slice().to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cleared_entries_are_gone_but_their_buffers_are_reused() {
        let mut list = PairList::default();
        list.push("ARGS:a", b"1");
        list.push("ARGS:b", b"22");
        assert_eq!(list.as_slice().len(), 2);
        assert_eq!(list.last(), Some(&("ARGS:b".to_string(), b"22".to_vec())));
        let buffer = list.as_slice()[0].1.as_ptr();
        list.clear();
        assert!(list.is_empty());
        assert_eq!(list.last(), None);
        list.push_with(|n| n.push_str("REQUEST_HEADERS:x"), b"");
        assert_eq!(
            list.as_slice(),
            &[("REQUEST_HEADERS:x".to_string(), Vec::new())]
        );
        // The first entry's value buffer was kept (capacity 1 or more) and written into.
        assert_eq!(list.as_slice()[0].1.as_ptr(), buffer);
        list.assign(&[("a".into(), b"x".to_vec()), ("b".into(), b"y".to_vec())]);
        assert_eq!(list.to_pairs().len(), 2);
        assert!(list.capacity() >= 2);
    }
}

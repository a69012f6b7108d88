//! What the `capture` action keeps: the groups an operator found (TX:0..9), per matching
//! variable, in buffers reused from match to match and, through `scratch`, from transaction
//! to transaction.
//!
//! CRS 920450 captures every request header name (`^.*$`) and runs its actions once per
//! name. It allocated a fresh `Vec<Vec<u8>>` and a buffer per match and freed them after the
//! actions: the allocator's functions were ~5,100 of the rule's ~36,000 instructions on a GET
//! with eleven headers (callgrind).

/// The groups one operator run found: group 0 (the match) and up to nine more.
#[derive(Debug, Default, Clone)]
pub struct Captures {
    /// The first `len` are the groups; the rest are buffers kept for the next run.
    bufs: Vec<Vec<u8>>,
    len: usize,
}

impl Captures {
    /// No groups (the buffers stay).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Adds the next group.
    pub fn push(&mut self, group: &[u8]) {
        match self.bufs.get_mut(self.len) {
            Some(buf) => {
                buf.clear();
                buf.extend_from_slice(group);
            }
            None => self.bufs.push(group.to_vec()),
        }
        self.len += 1;
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn groups(&self) -> &[Vec<u8>] {
        self.bufs.get(..self.len).unwrap_or_default()
    }

    /// Bytes held, groups and spare buffers alike.
    pub(crate) fn retained_bytes(&self) -> usize {
        self.bufs.iter().map(Vec::capacity).sum()
    }
}

/// The groups of each variable a rule matched, until its actions have run.
#[derive(Debug, Default)]
pub(crate) struct HitCaptures {
    /// The first `used` hold groups of the current rule's hits; the rest are spare.
    pool: Vec<Captures>,
    used: usize,
    /// Per hit, in order: its groups' place in `pool`, if it has groups.
    per_hit: Vec<Option<usize>>,
}

/// A pooled set holding more than this (long captured values) is dropped rather than kept.
const MAX_RETAINED_BYTES: usize = 64 * 1024;

/// For a match with no captures to hand over (the constant plan's decided matches).
pub(crate) static NO_HIT_CAPTURES: HitCaptures = HitCaptures {
    pool: Vec::new(),
    used: 0,
    per_hit: Vec::new(),
};

impl HitCaptures {
    pub fn clear(&mut self) {
        self.used = 0;
        self.per_hit.clear();
    }

    /// The next hit's groups: taken from `captures` (swapped into the pool, so no bytes are
    /// copied; `captures` is left empty with the pool's spare buffers). None when empty.
    pub fn push_from(&mut self, captures: &mut Captures) {
        if captures.is_empty() {
            self.per_hit.push(None);
            return;
        }
        if self.pool.len() == self.used {
            self.pool.push(Captures::default());
        }
        if let Some(slot) = self.pool.get_mut(self.used) {
            std::mem::swap(slot, captures);
            captures.clear();
            self.per_hit.push(Some(self.used));
            self.used += 1;
        }
    }

    /// The next hit has no groups (the rule does not capture).
    pub fn push_none(&mut self) {
        self.per_hit.push(None);
    }

    /// The groups of hit `i`.
    pub fn of(&self, i: usize) -> &[Vec<u8>] {
        let slot = self.per_hit.get(i).copied().flatten();
        slot.and_then(|s| self.pool.get(s))
            .map_or(&[], Captures::groups)
    }

    /// Whether the set is small enough to keep for another transaction.
    pub fn keepable(&self) -> bool {
        self.pool
            .iter()
            .map(Captures::retained_bytes)
            .sum::<usize>()
            <= MAX_RETAINED_BYTES
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_per_hit_and_buffers_are_reused() {
        let mut caps = Captures::default();
        let mut hits = HitCaptures::default();
        for round in 0..3 {
            hits.clear();
            caps.push(b"first");
            caps.push(b"1");
            hits.push_from(&mut caps);
            assert!(caps.is_empty());
            hits.push_none();
            hits.push_from(&mut caps); // empty: no groups
            caps.push(b"second");
            hits.push_from(&mut caps);
            assert_eq!(
                hits.of(0),
                [b"first".to_vec(), b"1".to_vec()],
                "round {round}"
            );
            assert!(hits.of(1).is_empty() && hits.of(2).is_empty());
            assert_eq!(hits.of(3), [b"second".to_vec()]);
            assert!(hits.of(4).is_empty());
            assert_eq!(
                hits.pool.len(),
                2,
                "round {round}: no pool entry is added again"
            );
        }
        caps.clear();
        caps.push(b"x");
        assert_eq!(caps.groups(), [b"x".to_vec()]);
        assert_eq!(caps.len(), 1);
        assert!(hits.keepable());
        caps.push(&vec![b'y'; MAX_RETAINED_BYTES + 1]);
        hits.push_from(&mut caps);
        assert!(!hits.keepable());
    }
}

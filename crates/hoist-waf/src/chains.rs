//! Transformation chains (`t:none,t:urlDecodeUni,t:lowercase`) interned at load into a trie.
//!
//! CRS uses a few dozen distinct chains across hundreds of rules, and many share prefixes.
//! Each chain (and each of its prefixes) gets a small integer id, so a transaction can cache
//! "value v under chain c" in plain vectors and compute every transformed value once, the
//! common prefix of two chains once for both.

use crate::transforms::Transform;

/// Id of a chain in [`Chains`]; 0 is the empty chain (the value as collected).
pub type ChainId = u32;

pub const EMPTY_CHAIN: ChainId = 0;

#[derive(Debug, Clone, Copy)]
pub struct ChainNode {
    /// The chain without its last transformation; the root points at itself.
    pub parent: ChainId,
    /// `None` only for the root.
    pub transform: Option<Transform>,
    /// Number of transformations from the root.
    pub depth: u32,
    /// The transformations on the way from the root, as `Transform::bit`s.
    pub mask: u64,
}

#[derive(Debug, Clone)]
pub struct Chains {
    nodes: Vec<ChainNode>,
    /// Per node, the nodes from the root to it (both included): the values a multiMatch
    /// rule tests.
    paths: Vec<Vec<ChainId>>,
    /// Per node, its transformations packed (`packed_steps`).
    packed: Vec<Option<u64>>,
}

/// Bits per transformation in `Chains::packed_steps` (each stored as its index + 1), and
/// most transformations a packed chain holds; the count is in the top four bits.
pub const STEP_BITS: u32 = 6;
pub const MAX_PACKED_STEPS: u64 = 9;
pub const COUNT_SHIFT: u32 = 60;

impl Default for Chains {
    fn default() -> Self {
        Chains {
            nodes: vec![ChainNode {
                parent: EMPTY_CHAIN,
                transform: None,
                depth: 0,
                mask: 0,
            }],
            paths: vec![vec![EMPTY_CHAIN]],
            packed: vec![Some(0)],
        }
    }
}

impl Chains {
    /// The id of `transforms`, adding it (and its prefixes) if new. Load time only: the
    /// linear search over children is fine for the few hundred nodes CRS produces.
    pub fn intern(&mut self, transforms: &[Transform]) -> ChainId {
        let mut at = EMPTY_CHAIN;
        for &t in transforms {
            let found = self
                .nodes
                .iter()
                .position(|n| n.parent == at && n.transform == Some(t))
                .filter(|&i| i != 0);
            at = match found {
                Some(i) => to_id(i),
                None => {
                    let parent = self.nodes[at as usize];
                    self.nodes.push(ChainNode {
                        parent: at,
                        transform: Some(t),
                        depth: parent.depth + 1,
                        mask: parent.mask | t.bit(),
                    });
                    let id = to_id(self.nodes.len() - 1);
                    let mut path = self.paths[at as usize].clone();
                    path.push(id);
                    self.paths.push(path);
                    let packed = self.packed[at as usize]
                        .filter(|&p| p >> COUNT_SHIFT < MAX_PACKED_STEPS)
                        .map(|p| {
                            let count = (p >> COUNT_SHIFT) + 1;
                            let steps = p & ((1 << COUNT_SHIFT) - 1);
                            (steps << STEP_BITS | (t as u64 + 1)) | count << COUNT_SHIFT
                        });
                    self.packed.push(packed);
                    id
                }
            };
        }
        at
    }

    /// The transformations of chain `id` as `Transform::bit`s.
    pub fn mask(&self, id: ChainId) -> u64 {
        self.nodes.get(id as usize).map_or(u64::MAX, |n| n.mask)
    }

    pub fn node(&self, id: ChainId) -> ChainNode {
        self.nodes[id as usize]
    }

    /// Chain `id`'s transformations in one word: each one's index + 1 in `STEP_BITS` bits,
    /// the first in the highest, and their number in the top four bits; `None` for chains
    /// of more than `MAX_PACKED_STEPS`. Equal words, equal chains.
    pub fn packed_steps(&self, id: ChainId) -> Option<u64> {
        self.packed.get(id as usize).copied().flatten()
    }

    /// The root, each prefix of chain `id`, and `id` itself.
    pub fn path(&self, id: ChainId) -> &[ChainId] {
        self.paths.get(id as usize).map_or(&[], Vec::as_slice)
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() <= 1
    }

    /// The transformations of chain `id`, first to last.
    pub fn transforms(&self, id: ChainId) -> Vec<Transform> {
        let mut out = Vec::new();
        let mut at = id;
        while let Some(t) = self.nodes[at as usize].transform {
            out.push(t);
            at = self.nodes[at as usize].parent;
        }
        out.reverse();
        out
    }
}

fn to_id(i: usize) -> ChainId {
    // A rule set with four billion distinct chains does not fit in memory anyway.
    ChainId::try_from(i).expect("chain ids fit in u32")
}

#[cfg(test)]
mod tests {
    use super::*;
    use Transform::*;

    #[test]
    fn shares_prefixes_and_reuses_ids() {
        let mut c = Chains::default();
        let a = c.intern(&[UrlDecodeUni, Lowercase]);
        let b = c.intern(&[UrlDecodeUni, HtmlEntityDecode]);
        let p = c.intern(&[UrlDecodeUni]);
        assert_eq!(c.len(), 4);
        assert_eq!(c.node(a).parent, p);
        assert_eq!(c.node(b).parent, p);
        assert_eq!(c.intern(&[UrlDecodeUni, Lowercase]), a);
        assert_eq!(c.intern(&[]), EMPTY_CHAIN);
        assert_eq!(c.transforms(a), vec![UrlDecodeUni, Lowercase]);
        assert_eq!(c.node(a).depth, 2);
        assert_eq!(c.node(a).mask, UrlDecodeUni.bit() | Lowercase.bit());
        assert_eq!(c.path(a), &[EMPTY_CHAIN, p, a]);
        assert_eq!(c.path(EMPTY_CHAIN), &[EMPTY_CHAIN]);
    }

    #[test]
    fn order_matters() {
        let mut c = Chains::default();
        assert_ne!(
            c.intern(&[Lowercase, UrlDecode]),
            c.intern(&[UrlDecode, Lowercase])
        );
    }
}

//! The phase loop's packed view of each entry: whether it is a marker, its id, a filter of
//! its tags, and its first link's prefilter slot and gate set, one array per phase.
//!
//! Most of a request's rules are passed over: their gate is closed, or the constant plan
//! decided them. Each rule is a separate allocation with its targets, actions and tags
//! behind further pointers; perf in the proxy put about half of the phase loop's own time
//! on the first read of each rule. Deciding from this array instead reads memory in order,
//! and a rule is dereferenced only when it is evaluated or its actions run.

use crate::rules::{Entry, Rule};

/// No prefilter slot.
const NO_SLOT: u32 = u32::MAX;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Head {
    pub(crate) id: i64,
    pub(crate) marker: bool,
    /// [`tag_bit`] of each of the rule's tags, OR-ed: a tag whose bit is absent is not one
    /// of them, known without reading the tags.
    pub(crate) tag_bits: u64,
    /// `NO_SLOT` when the first link is not gated.
    slot: u32,
    gate_set: u32,
}

impl Head {
    /// The first link's prefilter slot and gate set, when it is gated.
    pub(crate) fn gated(&self) -> Option<(u32, u32)> {
        (self.slot != NO_SLOT).then_some((self.slot, self.gate_set))
    }
}

#[derive(Debug, Default)]
pub(crate) struct Heads {
    pub(crate) phases: [Vec<Head>; 5],
}

impl Heads {
    pub(crate) fn build(phases: &[Vec<Entry>; 5]) -> Heads {
        let mut heads = Heads::default();
        for (p, list) in phases.iter().enumerate() {
            heads.phases[p] = list
                .iter()
                .map(|entry| match entry {
                    Entry::Marker(_) => Head {
                        id: 0,
                        marker: true,
                        tag_bits: 0,
                        slot: NO_SLOT,
                        gate_set: 0,
                    },
                    Entry::Rule(rule) => Heads::head(rule),
                })
                .collect();
        }
        heads
    }

    fn head(rule: &Rule) -> Head {
        let gated = rule.prefilter_slot.zip(rule.gate_set);
        Head {
            id: rule.id,
            marker: false,
            tag_bits: rule.actions.tag_bits,
            slot: gated.map_or(NO_SLOT, |(slot, _)| slot),
            gate_set: gated.map_or(0, |(_, set)| set),
        }
    }
}

/// One of 64 bits for a tag (FNV-1a), the same for every rule set.
pub(crate) fn tag_bit(tag: &str) -> u64 {
    let hash = tag.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    1 << (hash % 64)
}

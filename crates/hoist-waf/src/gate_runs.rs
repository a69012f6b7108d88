//! Runs of consecutive gated rules, passed over with one check when none can match.
//!
//! A CRS rule file is mostly gated rules one after another (942's PL1 part is dozens on the
//! same arguments), and a benign request opens few gates: the phase loop read each head and
//! checked its gate set, ~165 checks for the proxy's small GET. A run of two or more gated
//! entries (no marker or ungated rule between them) keeps, per gate its rules use (grouped by
//! target, see `Run`), the prefilter slots of those rules; when no gate's union holds any of
//! its slots, every rule of the run is closed and the loop jumps past it. Otherwise the run is walked rule by rule as
//! before. Passing over a closed rule does nothing else: a gated rule reads no TX, so the
//! constant plan decides none of them, and a removal (`ctl:ruleRemove*`) only stops rules
//! from running.

use crate::gates::GateKey;
use crate::heads::{Head, Heads};
use crate::transaction::Transaction;
use std::collections::BTreeMap;

/// Runs shorter than this are left to the per-rule checks (a run of one is its rule).
const MIN_RUN: usize = 2;

#[derive(Debug, Default)]
pub(crate) struct GateRuns {
    /// Per phase, per entry index: 1 + the index in `runs` of the run starting there, else 0.
    starts: [Vec<u32>; 5],
    runs: Vec<Run>,
}

/// A run's rules grouped by the target of their gates: most of a target's gates have chains
/// that keep every value's hits, and then one test of the target's summary answers for all
/// of them (a run of 13 CRS rules in the small GET's phase 2 has 44 gates).
#[derive(Debug)]
pub(crate) struct Run {
    /// The entry index after the run's last rule.
    pub(crate) end: usize,
    targets: Box<[RunTarget]>,
    /// The distinct gates of the run's rules, grouped by target (see `RunTarget::gates`).
    gates: Box<[u32]>,
    /// `words` words per gate (in `gates`' order), then per target: the slots of the run's
    /// rules gated on it.
    slots: Box<[u64]>,
}

#[derive(Debug)]
struct RunTarget {
    target_id: u32,
    /// The OR of the chain masks of its gates in the run.
    chain_masks: u64,
    /// Its gates' range in `Run::gates`.
    gates: std::ops::Range<usize>,
}

impl GateRuns {
    /// `sets` are the rule set's gate sets by id, `keys` its gates' keys, `words` the
    /// prefilter's bitset length.
    pub(crate) fn build(
        heads: &Heads,
        sets: &[Box<[u32]>],
        keys: &[GateKey],
        words: usize,
    ) -> GateRuns {
        let mut out = GateRuns::default();
        for (p, list) in heads.phases.iter().enumerate() {
            let mut starts = vec![0u32; list.len()];
            let mut i = 0;
            while i < list.len() {
                let gated = |h: &&Head| !h.marker && h.gated().is_some();
                let rest = list.get(i..).unwrap_or(&[]);
                let end = i + rest.iter().take_while(gated).count();
                if end - i >= MIN_RUN {
                    let run = Run::build(list.get(i..end).unwrap_or(&[]), end, sets, keys, words);
                    if let (Some(at), Ok(id)) =
                        (starts.get_mut(i), u32::try_from(out.runs.len() + 1))
                    {
                        *at = id;
                        out.runs.push(run);
                    }
                }
                i = end.max(i + 1);
            }
            if let Some(s) = out.starts.get_mut(p) {
                *s = starts;
            }
        }
        out
    }

    /// The run that starts at entry `index` of `phase` (1-5).
    pub(crate) fn at(&self, phase: u8, index: usize) -> Option<&Run> {
        let id = *self
            .starts
            .get(usize::from(phase).checked_sub(1)?)?
            .get(index)?;
        self.runs.get((id as usize).checked_sub(1)?)
    }
}

impl Run {
    fn build(
        heads: &[Head],
        end: usize,
        sets: &[Box<[u32]>],
        keys: &[GateKey],
        words: usize,
    ) -> Run {
        // Per target, per gate: the slots of the rules gated on it.
        let mut per_target: BTreeMap<u32, BTreeMap<u32, Vec<u64>>> = BTreeMap::new();
        for (slot, set) in heads.iter().filter_map(Head::gated) {
            for &g in sets.get(set as usize).map_or(&[][..], |s| &s[..]) {
                let target = keys.get(g as usize).map_or(u32::MAX, |k| k.target_id);
                let bits = per_target
                    .entry(target)
                    .or_default()
                    .entry(g)
                    .or_insert_with(|| vec![0; words]);
                if let Some(w) = bits.get_mut(slot as usize / 64) {
                    *w |= 1 << (slot % 64);
                }
            }
        }
        let mut targets = Vec::new();
        let mut gates = Vec::new();
        let mut gate_slots = Vec::new();
        let mut target_slots = Vec::new();
        for (target_id, per_gate) in per_target {
            let first = gates.len();
            let mut chain_masks = 0;
            let mut all = vec![0u64; words];
            for (g, bits) in per_gate {
                chain_masks |= keys.get(g as usize).map_or(u64::MAX, |k| k.chain_mask);
                all.iter_mut().zip(&bits).for_each(|(a, b)| *a |= b);
                gates.push(g);
                gate_slots.extend(bits);
            }
            target_slots.extend(all);
            targets.push(RunTarget {
                target_id,
                chain_masks,
                gates: first..gates.len(),
            });
        }
        gate_slots.extend(target_slots);
        Run {
            end,
            targets: targets.into(),
            gates: gates.into(),
            slots: gate_slots.into(),
        }
    }
}

impl Transaction {
    /// Whether no rule of `run` can match now: no gate's union holds the slot of a rule on it.
    pub(crate) fn run_closed(&mut self, run: &Run) -> bool {
        let words = self.rules.prefilter().map_or(0, |p| p.words());
        let disjoint = |union: Option<&[u64]>, slots: Option<&[u64]>| match (union, slots) {
            (Some(u), Some(s)) => u.iter().zip(s).all(|(u, s)| u & s == 0),
            _ => false,
        };
        let target_slots = run.gates.len() * words;
        for (t, target) in run.targets.iter().enumerate() {
            let mut summary = self.summary_covering(target.target_id, target.chain_masks);
            if summary.is_none() {
                // Not summarized yet in this transaction: the first gate's union makes it.
                let first = run.gates.get(target.gates.start).copied();
                if first.and_then(|g| self.gate_union(g)).is_none() {
                    return false;
                }
                summary = self.summary_covering(target.target_id, target.chain_masks);
            }
            if let Some(start) = summary {
                let at = target_slots + t * words;
                if !disjoint(
                    self.gate_cache_bits(start, words),
                    run.slots.get(at..at + words),
                ) {
                    return false;
                }
                continue;
            }
            for k in target.gates.clone() {
                let Some(start) = run.gates.get(k).and_then(|&g| self.gate_union(g)) else {
                    return false;
                };
                let slots = run.slots.get(k * words..(k + 1) * words);
                if !disjoint(self.gate_cache_bits(start, words), slots) {
                    return false;
                }
            }
        }
        true
    }
}

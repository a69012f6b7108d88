//! Rule gates: skip a prefiltered rule without looking at its values one by one.
//!
//! Most CRS rules inspect the same few target lists (`ARGS|ARGS_NAMES|REQUEST_COOKIES|...`)
//! under a few dozen transformation chains. Per transaction, the prefilter hits of every
//! value a (target, chain) pair yields are OR-ed into one union, computed on first use and
//! shared by every rule on that pair until a value changes (see `GateCache::changed`). A
//! rule whose prefilter bit is in none of its targets' unions cannot match any of its
//! values, so it is skipped whole: no collection, no per-value lookups. Exclusions
//! (`!ARGS:foo`, ctl:ruleRemoveTargetById) only remove values, so a union over the
//! unexcluded target is a superset and the skip stays exact. Negated rules are never gated:
//! they can match where no literal occurs. A multiMatch rule tests the value after every
//! step of its chain, so it is gated on a union per step (`assign_each_step`), and only when
//! no step can write anything (after a base64Decode, every argument's decoded copy would be
//! scanned: more than 934100 and 934160 cost).
//!
//! Most values have nothing any decoder would change, and the prefilter ignores case, so
//! most chains leave a value's hits as they are (`Transform::keeps_prefilter_hits`). Each
//! target is therefore summarized once (the OR of its values' own hits, the transformations
//! that keep every value's hits) and a union starts from that OR; only values a chain may
//! change are transformed and scanned. Starting from every value's own hits makes a union a
//! superset, which can only open a gate, never close one wrongly.

use crate::chains::ChainId;
use crate::collections::Items;
use crate::prefilter::has_slot;
use crate::prefilter::Prefilter;
use crate::rules::{Rule, RuleSet};
use crate::transaction::Transaction;
use crate::values::{ValueCache, CASE_CHANGING};
use crate::variables::{Selector, Target, Targets, VarName};
use smallvec::SmallVec;
use std::collections::HashMap;
use std::sync::Arc;

/// A target (without exclusions) under a chain: what one union is computed over.
#[derive(Debug)]
pub(crate) struct GateDef {
    pub target: Target,
    /// The target's id among the distinct targets of all gates (see `TargetSummary`).
    pub target_id: u32,
    pub chain: ChainId,
}

/// What a union's computation reads of its gate before it knows whether it needs the target's
/// values: kept apart from `GateDef` (whose `Target` is ~100 bytes) so that a transaction's
/// ~200 lookups read a few KB of these rather than one `GateDef` and one chain node each.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GateKey {
    /// `Chains::mask` of the gate's chain.
    pub chain_mask: u64,
    pub target_id: u32,
}

impl GateKey {
    pub fn of(defs: &[GateDef], chains: &crate::chains::Chains) -> Vec<GateKey> {
        defs.iter()
            .map(|d| GateKey {
                chain_mask: chains.mask(d.chain),
                target_id: d.target_id,
            })
            .collect()
    }

    /// Per target id, whether some gate on it has a chain that transforms.
    pub fn transformed_targets(keys: &[GateKey]) -> Vec<bool> {
        let mut out = Vec::new();
        for key in keys {
            let t = key.target_id as usize;
            if out.len() <= t {
                out.resize(t + 1, false);
            }
            if let Some(x) = out.get_mut(t) {
                *x |= key.chain_mask != 0;
            }
        }
        out
    }
}

/// Load time: gives each distinct (target, chain) pair an id, and each distinct list of them
/// (a rule's gates) a set id.
#[derive(Default)]
pub(crate) struct GateTable {
    index: HashMap<String, u32>,
    targets: HashMap<String, u32>,
    defs: Vec<GateDef>,
    set_index: HashMap<Vec<u32>, u32>,
    sets: Vec<Box<[u32]>>,
}

impl GateTable {
    /// The gate set of a rule with these targets and chain; `None` when some target can
    /// hold values the prefilter never sees (TX and MATCHED_* change during the phase,
    /// `&COUNT` targets test a number).
    /// Also returns each target's gate, in the targets' order.
    pub fn assign(&mut self, targets: &Targets, chain: ChainId) -> Option<(u32, Vec<u32>)> {
        let per_target = self.gate_ids(targets, chain)?;
        let mut ids = per_target.clone();
        ids.sort_unstable();
        ids.dedup();
        if let Some(&set) = self.set_index.get(&ids) {
            return Some((set, per_target));
        }
        let set = u32::try_from(self.sets.len()).ok()?;
        self.sets.push(ids.clone().into_boxed_slice());
        self.set_index.insert(ids, set);
        Some((set, per_target))
    }

    /// The gate set of a multiMatch rule, which tests the value after every step of its
    /// chain: a gate per target and step (`path`: the root, each prefix, the chain), each
    /// union covering that step's values. No per-target gates (a target is closed only
    /// when all its steps are, which `evaluate_link` does not ask).
    pub fn assign_each_step(&mut self, targets: &Targets, path: &[ChainId]) -> Option<u32> {
        let mut ids = Vec::new();
        for &step in path {
            ids.extend(self.gate_ids(targets, step)?);
        }
        ids.sort_unstable();
        ids.dedup();
        if let Some(&set) = self.set_index.get(&ids) {
            return Some(set);
        }
        let set = u32::try_from(self.sets.len()).ok()?;
        self.sets.push(ids.clone().into_boxed_slice());
        self.set_index.insert(ids, set);
        Some(set)
    }

    fn gate_ids(&mut self, targets: &Targets, chain: ChainId) -> Option<Vec<u32>> {
        if targets.targets.is_empty() {
            return None;
        }
        let mut ids = Vec::new();
        for target in &targets.targets {
            if target.count || !stable(target.var) {
                return None;
            }
            let target_key = target_key(target);
            let next_target = u32::try_from(self.targets.len()).ok()?;
            let target_id = *self
                .targets
                .entry(target_key.clone())
                .or_insert(next_target);
            let key = format!("{target_key}|{chain}");
            let next = u32::try_from(self.defs.len()).ok()?;
            let id = *self.index.entry(key).or_insert_with(|| {
                self.defs.push(GateDef {
                    target: target.clone(),
                    target_id,
                    chain,
                });
                next
            });
            ids.push(id);
        }
        Some(ids)
    }

    /// The gates by id and the sets by id.
    pub fn into_parts(self) -> (Vec<GateDef>, Vec<Box<[u32]>>) {
        (self.defs, self.sets)
    }
}

/// A target's identity without exclusions: the variable and its selector (keys ignore case).
pub(crate) fn target_key(target: &Target) -> String {
    let selector = match &target.selector {
        Selector::All => String::new(),
        Selector::Key(k) => format!("k:{}", k.to_ascii_lowercase()),
        Selector::Regex(r, _) => format!("r:{}", r.as_str()),
        Selector::Prefix(p) => format!("p:{p}"),
    };
    format!("{:?}|{selector}", target.var)
}

/// Variables whose values stay put during a phase.
pub(crate) fn stable(var: VarName) -> bool {
    use VarName::*;
    !matches!(
        var,
        Tx | MatchedVar | MatchedVars | MatchedVarName | MatchedVarsNames | Rule
    )
}

/// Per transaction: the unions computed since the request's values last changed.
#[derive(Debug, Default)]
pub(crate) struct GateCache {
    /// Per gate id: 1 + the start of its union in `bits`, 0 while not computed.
    at: Vec<u32>,
    /// Per gate set id: 1 + the start in `bits` of the OR of its gates' unions, 0 while not
    /// computed.
    set_at: Vec<u32>,
    /// Per target id, once computed.
    targets: Vec<Option<TargetSummary>>,
    bits: Vec<u64>,
    /// Per regex group (bit = group number, see `rx_groups`): whether its answer over all
    /// its targets' values is known, and whether that answer is "may match".
    groups_known: u32,
    groups_open: u32,
    /// Per byte target id (see `byte_summary`), the bytes its values hold, once computed.
    pub(crate) byte_sets: Vec<Option<crate::reach::ByteSet>>,
    /// The unions computed under chains that transform some value: (target id, the chain's
    /// steps from the first that changes some value, `reduced_chain`) -> start in `bits`.
    reduced: ReducedUnions,
}

/// What the values of one target have in common, so that a union under a chain that
/// transforms none of them in a way the prefilter sees costs no per-value work.
#[derive(Debug, Clone, Copy)]
struct TargetSummary {
    /// The transformations that keep the prefilter hits of every value (the AND of their
    /// `Transform::hit_keeping_mask`s).
    keeping: u64,
    /// Start in `GateCache::bits` of the OR of the values' own hits; `None` when some value
    /// has no cache slot (its hits are unknown).
    hits: Option<usize>,
}

impl GateCache {
    /// Called by every setter that adds or changes a value a target can name (headers,
    /// the body and its arguments, the response): the unions are recomputed on next use.
    /// A GET changes nothing between phases 1 and 2, so phase 2 reuses phase 1's unions.
    pub fn changed(&mut self) {
        self.at.clear();
        self.set_at.clear();
        self.targets.clear();
        self.bits.clear();
        self.groups_known = 0;
        self.groups_open = 0;
        self.byte_sets.clear();
        self.reduced.clear();
    }

    /// `changed` for a change to the values of one variable only: forgets what reads it
    /// (see `dependents`); the rest stays for the next phase.
    pub fn forget(&mut self, d: &crate::dependents::Dependents) {
        for (list, ids) in [(&mut self.at, &d.gates), (&mut self.set_at, &d.sets)] {
            for &id in ids {
                if let Some(at) = list.get_mut(id as usize) {
                    *at = 0;
                }
            }
        }
        for &t in &d.targets {
            if let Some(summary) = self.targets.get_mut(t as usize) {
                *summary = None;
            }
        }
        self.reduced.retain(|((t, _), _)| !d.targets.contains(t));
        for &b in &d.byte_targets {
            if let Some(bytes) = self.byte_sets.get_mut(b as usize) {
                *bytes = None;
            }
        }
        self.groups_known &= !d.groups;
        self.groups_open &= !d.groups;
    }

    /// What `Transaction::group_may_match` found for `group` since the values last changed.
    pub fn group_answer(&self, group: u8) -> Option<bool> {
        let bit = 1u32.checked_shl(u32::from(group))?;
        (self.groups_known & bit != 0).then_some(self.groups_open & bit != 0)
    }

    pub fn set_group_answer(&mut self, group: u8, may_match: bool) {
        if let Some(bit) = 1u32.checked_shl(u32::from(group)) {
            self.groups_known |= bit;
            if may_match {
                self.groups_open |= bit;
            }
        }
    }
}

impl Transaction {
    /// False when `rule` cannot match now: its prefilter bit is in no union of its gates.
    pub(crate) fn gate_open(&mut self, rule: &Rule) -> bool {
        let (Some(set), Some(slot)) = (rule.gate_set, rule.prefilter_slot) else {
            return true;
        };
        self.gates_open(slot, set)
    }

    /// Whether any gate of gate set `set` lets prefilter `slot` through. A transaction checks
    /// ~165 rules, most of them on a few sets that CRS rule files share (targets and chain),
    /// so the OR of a shared set's unions is made once and each check is one bit; a set of
    /// one rule is checked gate by gate (measured: ORing every set cost more than it saved).
    pub(crate) fn gates_open(&mut self, slot: u32, set: u32) -> bool {
        let words = self.rules.prefilter().map_or(0, |p| p.words());
        let start = match self.gate_cache.set_at.get(set as usize) {
            Some(&at) if at > 0 => Some(at as usize - 1),
            _ if self.rules.shared_gate_sets.get(set as usize) == Some(&true) => {
                self.set_union(set, words)
            }
            _ => return self.any_gate_open(slot, set, words),
        };
        start
            .and_then(|s| self.gate_cache.bits.get(s..s + words))
            .is_none_or(|bits| has_slot(bits, slot))
    }

    fn any_gate_open(&mut self, slot: u32, set: u32, words: usize) -> bool {
        let rules = Arc::clone(&self.rules);
        let Some(gates) = rules.gate_sets.get(set as usize) else {
            return true;
        };
        gates.iter().any(|&g| {
            self.gate_union(g)
                .and_then(|s| self.gate_cache_bits(s, words))
                .is_none_or(|bits| has_slot(bits, slot))
        })
    }

    /// Where the summary of target `target_id` starts in the cache when it stands for the
    /// union of every gate on the target whose chain is in `chain_masks` (their OR): the
    /// summary is known and those chains keep every value's hits.
    pub(crate) fn summary_covering(&self, target_id: u32, chain_masks: u64) -> Option<usize> {
        let summary = (*self.gate_cache.targets.get(target_id as usize)?)?;
        if chain_masks & !summary.keeping != 0 {
            return None;
        }
        summary.hits
    }

    /// Whether gate `g`'s union is known without computing it (its target's summary, or made
    /// earlier in the phase) and lacks prefilter `slot`. Computing a union here would
    /// transform and scan values that the rule's own evaluation may never look at.
    pub(crate) fn gate_known_without(&self, g: u32, slot: u32) -> bool {
        let words = self.rules.prefilter().map_or(0, |p| p.words());
        let computed = || {
            let at = *self.gate_cache.at.get(g as usize)?;
            (at > 0).then(|| at as usize - 1)
        };
        self.summary_as_union(g)
            .or_else(computed)
            .and_then(|s| self.gate_cache_bits(s, words))
            .is_some_and(|bits| !has_slot(bits, slot))
    }

    /// Where gate `g`'s union starts in the cache (see `union`).
    pub(crate) fn gate_union(&mut self, g: u32) -> Option<usize> {
        self.summary_as_union(g).or_else(|| self.union(g))
    }

    /// The union (of `words` words) starting at `start`.
    pub(crate) fn gate_cache_bits(&self, start: usize, words: usize) -> Option<&[u64]> {
        self.gate_cache.bits.get(start..start + words)
    }

    /// Where the OR of gate set `set`'s unions starts in the cache, computing and recording it;
    /// `None` means "unknown": its rules must be evaluated.
    fn set_union(&mut self, set: u32, words: usize) -> Option<usize> {
        let rules = Arc::clone(&self.rules);
        let gates = rules.gate_sets.get(set as usize)?;
        let mut starts: SmallVec<[usize; 16]> = SmallVec::new();
        for &g in gates.iter() {
            // `gate_union` spelled out: with a third caller the compiler stopped inlining it
            // into the phase loop (+2k instructions per small GET).
            starts.push(match self.summary_as_union(g) {
                Some(s) => s,
                None => self.union(g)?,
            });
        }
        let start = match starts.as_slice() {
            [one] => *one,
            _ => {
                let bits = &mut self.gate_cache.bits;
                let start = bits.len();
                bits.resize(start + words, 0);
                for &s in &starts {
                    for i in 0..words {
                        let b = bits.get(s + i).copied().unwrap_or(u64::MAX);
                        if let Some(u) = bits.get_mut(start + i) {
                            *u |= b;
                        }
                    }
                }
                start
            }
        };
        let at = &mut self.gate_cache.set_at;
        if at.len() <= set as usize {
            at.resize(set as usize + 1, 0);
        }
        if let Some(a) = at.get_mut(set as usize) {
            *a = u32::try_from(start + 1).ok()?;
        }
        Some(start)
    }

    /// Where gate `g`'s union starts when it is its target's summary as it stands (the
    /// summary is known and the gate's chain keeps every value's hits): nothing to compute
    /// or record, the case of most of a transaction's gates.
    fn summary_as_union(&self, g: u32) -> Option<usize> {
        let key = self.rules.gate_keys.get(g as usize)?;
        self.summary_covering(key.target_id, key.chain_mask)
    }

    /// Where gate `g`'s union starts in the cache, computing it on first use; `None` means
    /// "unknown": the rule must be evaluated.
    fn union(&mut self, g: u32) -> Option<usize> {
        let gi = g as usize;
        if let Some(&at) = self.gate_cache.at.get(gi) {
            if at > 0 {
                return Some(at as usize - 1);
            }
        }
        if self.gate_closed_by_bytes(gi) {
            // No rule on the gate can match a value of its target (see `gate_bytes`).
            let words = self.rules.prefilter().map_or(0, Prefilter::words);
            let start = self.gate_cache.bits.len();
            self.gate_cache.bits.resize(start + words, 0);
            return self.record_union(gi, start);
        }
        // Moved out so they can grow while collected items borrow the transaction.
        let mut cache = self.values.take().unwrap_or_default();
        let mut bits = std::mem::take(&mut self.gate_cache.bits);
        let mut targets = std::mem::take(&mut self.gate_cache.targets);
        let mut reduced = std::mem::take(&mut self.gate_cache.reduced);
        #[cfg(feature = "rule-profile")]
        crate::rule_profile::count_union();
        let start = self.compute_union(gi, &mut cache, &mut bits, &mut targets, &mut reduced);
        self.values = Some(cache);
        self.gate_cache.bits = bits;
        self.gate_cache.targets = targets;
        self.gate_cache.reduced = reduced;
        self.record_union(gi, start?)
    }

    /// Notes that gate `gi`'s union starts at `start` in the cache.
    fn record_union(&mut self, gi: usize, start: usize) -> Option<usize> {
        if self.gate_cache.at.len() <= gi {
            self.gate_cache.at.resize(gi + 1, 0);
        }
        if let Some(at) = self.gate_cache.at.get_mut(gi) {
            *at = u32::try_from(start + 1).ok()?;
        }
        Some(start)
    }

    /// Gate `gi`'s union, in `bits` from the returned start: the target's summary itself
    /// when the chain keeps every value's hits, else the summary with the transformed hits
    /// of the values the chain may change added.
    fn compute_union(
        &self,
        gi: usize,
        cache: &mut ValueCache,
        bits: &mut Vec<u64>,
        targets: &mut Vec<Option<TargetSummary>>,
        reduced_unions: &mut ReducedUnions,
    ) -> Option<usize> {
        let rules = &self.rules;
        let key = *rules.gate_keys.get(gi)?;
        let prefilter = rules.prefilter()?;
        let words = prefilter.words();
        let (chain_mask, chains) = (key.chain_mask, rules.chains.len());
        let t = key.target_id as usize;
        // Collected only when a summary or the union needs the values: most of a GET's ~200
        // unions are a summary as it is.
        let mut collected: Option<Items<'_>> = None;
        let summary = match targets.get(t) {
            Some(Some(summary)) => *summary,
            _ => {
                let items = collected.insert(Items::new());
                self.collect(&rules.gates.get(gi)?.target, &[], items);
                let transformed = rules.transformed_targets.get(t).copied().unwrap_or(true);
                let summary = summarize(items, cache, bits, chains, rules, transformed);
                if targets.len() <= t {
                    targets.resize(t + 1, None);
                }
                if let Some(entry) = targets.get_mut(t) {
                    *entry = Some(summary);
                }
                summary
            }
        };
        let Some(hits) = summary.hits else {
            // Some value's hits are unknown: every rule on the gate must be evaluated.
            let start = bits.len();
            bits.resize(start + words, u64::MAX);
            return Some(start);
        };
        if chain_mask & !summary.keeping == 0 {
            return Some(hits);
        }
        let def = rules.gates.get(gi)?;
        // Chains that differ only by leading steps which change no value of the target
        // (`t:urlDecodeUni,t:removeWhitespace` and `t:utf8toUnicode,...,t:removeNulls,
        // t:removeWhitespace` on form fields of plain words) give every value the same
        // buffer, hence the same union: computed once.
        let reduced = rules
            .chains
            .packed_steps(def.chain)
            .map(|steps| (key.target_id, reduced_chain(steps, summary.keeping)));
        if let Some(r) = reduced {
            if let Some(&(_, start)) = reduced_unions.iter().find(|(k, _)| *k == r) {
                return Some(start);
            }
        }
        let items = match collected {
            Some(items) => items,
            None => {
                let mut items = Items::new();
                self.collect(&def.target, &[], &mut items);
                items
            }
        };
        // Every value's own hits (a superset of those of the values the chain keeps, which
        // only opens a gate more often), plus the transformed hits of the others.
        let start = bits.len();
        bits.extend_from_within(hits..hits + words);
        let mut known = true;
        for item in &items {
            let Some(slot) = item.slot else {
                known = false;
                break;
            };
            if cache.keeps_hits(slot, &item.value, chain_mask, chains) {
                continue;
            }
            let p = rules.value_scans(slot, &item.key);
            let (_, value_hits) = cache.get(slot, &item.value, def.chain, &rules.chains, p);
            match (value_hits, bits.get_mut(start..)) {
                (Some(h), Some(union)) => union.iter_mut().zip(h).for_each(|(u, b)| *u |= b),
                _ => {
                    known = false;
                    break;
                }
            }
        }
        if !known {
            bits.get_mut(start..).unwrap_or_default().fill(u64::MAX);
        }
        if let Some(r) = reduced {
            reduced_unions.push((r, start));
        }
        Some(start)
    }
}

/// Unions by (target id, `reduced_chain`), with the start of each in `GateCache::bits`: a
/// few dozen per transaction, searched in order (a hash map cost more).
type ReducedUnions = Vec<((u32, u64), usize)>;

/// A chain's `Chains::packed_steps` without its leading steps that change no value (their
/// bits in `keeping`, the AND of the target's values' hit-keeping masks, case changes aside).
/// Steps after the first one that changes something stay, whatever they are: that one's
/// output is another value, which they may change.
fn reduced_chain(packed: u64, keeping: u64) -> u64 {
    use crate::chains::{COUNT_SHIFT, STEP_BITS};
    let unchanged = keeping & !CASE_CHANGING;
    let mut count = packed >> COUNT_SHIFT;
    let steps = packed & ((1 << COUNT_SHIFT) - 1);
    while count > 0 {
        // The first remaining step: its transformation's index + 1.
        let first = (steps >> (STEP_BITS as u64 * (count - 1))) & ((1 << STEP_BITS) - 1);
        let bit = 1u64
            .checked_shl(first.saturating_sub(1) as u32)
            .unwrap_or(0);
        if unchanged & bit == 0 {
            break;
        }
        count -= 1;
    }
    steps & ((1 << (STEP_BITS as u64 * count)) - 1) | count << COUNT_SHIFT
}

/// The `TargetSummary` of a target's values; their own hits are ORed into new room at the
/// end of `bits`.
fn summarize(
    items: &Items<'_>,
    cache: &mut ValueCache,
    bits: &mut Vec<u64>,
    chains: usize,
    rules: &RuleSet,
    transformed: bool,
) -> TargetSummary {
    let words = rules.prefilter().map_or(0, Prefilter::words);
    let start = bits.len();
    bits.resize(start + words, 0);
    // A target no gate transforms (RESPONSE_BODY's are all `t:none`) never has its chains
    // compared with `keeping`: 0 says "keeps nothing", and each value's mask (a pass over a
    // 1 KB body) is not computed.
    let mut keeping = if transformed { u64::MAX } else { 0 };
    for item in items {
        let Some(slot) = item.slot else {
            return TargetSummary {
                keeping: 0,
                hits: None,
            };
        };
        let own = rules.value_prefilter(slot, &item.key).and_then(|p| {
            if transformed {
                cache.own_hits(slot, &item.value, chains, p)
            } else {
                Some((0, cache.original_hits(slot, &item.value, chains, p)?))
            }
        });
        let Some((mask, own)) = own else {
            return TargetSummary {
                keeping: 0,
                hits: None,
            };
        };
        keeping &= mask;
        if let Some(out) = bits.get_mut(start..) {
            out.iter_mut().zip(own).for_each(|(u, b)| *u |= b);
        }
    }
    TargetSummary {
        keeping,
        hits: Some(start),
    }
}

#[cfg(test)]
mod tests {
    use super::reduced_chain;
    use crate::chains::Chains;
    use crate::transforms::Transform::{self, *};

    fn key(chains: &mut Chains, steps: &[Transform], keeping: u64) -> u64 {
        let id = chains.intern(steps);
        reduced_chain(chains.packed_steps(id).unwrap_or(u64::MAX), keeping)
    }

    /// Leading steps that change no value drop out of a chain's key; a step that changes
    /// some value, every step after it, and case changes never do.
    #[test]
    fn reduced_chains_drop_only_leading_steps_that_change_no_value() {
        let mut c = Chains::default();
        let noop = UrlDecodeUni.bit() | HtmlEntityDecode.bit() | Lowercase.bit();
        let ws = key(&mut c, &[RemoveWhitespace], noop);
        assert_eq!(key(&mut c, &[UrlDecodeUni, RemoveWhitespace], noop), ws);
        assert_eq!(
            key(
                &mut c,
                &[HtmlEntityDecode, UrlDecodeUni, RemoveWhitespace],
                noop
            ),
            ws
        );
        // HtmlEntityDecode changes some value: its chain keeps its own union.
        let entities_change = noop & !HtmlEntityDecode.bit();
        assert_ne!(
            key(
                &mut c,
                &[HtmlEntityDecode, RemoveWhitespace],
                entities_change
            ),
            key(&mut c, &[RemoveWhitespace], entities_change)
        );
        // After the first step that changes something, nothing is dropped.
        assert_ne!(key(&mut c, &[RemoveWhitespace, UrlDecodeUni], noop), ws);
        // Lowercase changes case, which later steps may read (`cmdLine`...): kept.
        assert_ne!(key(&mut c, &[Lowercase, RemoveWhitespace], noop), ws);
        // Different remaining steps, different keys.
        assert_ne!(key(&mut c, &[UrlDecodeUni, CompressWhitespace], noop), ws);
    }
}

//! Rule gates: skip a prefiltered rule without looking at its values one by one.
//!
//! Most CRS rules inspect the same few target lists (`ARGS|ARGS_NAMES|REQUEST_COOKIES|...`)
//! under a few dozen transformation chains. Per transaction, the prefilter hits of every
//! value a (target, chain) pair yields are OR-ed into one union, computed on first use and
//! shared by every rule on that pair until a value changes (see `GateCache::changed`). A rule whose prefilter bit is in none of its targets'
//! unions cannot match any of its values, so it is skipped whole: no collection, no
//! per-value lookups. Exclusions (`!ARGS:foo`, ctl:ruleRemoveTargetById) only remove values,
//! so a union over the unexcluded target is a superset and the skip stays exact. Negated and
//! multiMatch rules are never gated: they can match where no literal occurs.

use crate::chains::ChainId;
use crate::collections::Items;
use crate::prefilter::has_slot;
use crate::rules::Rule;
use crate::transaction::Transaction;
use crate::variables::{Selector, Target, Targets, VarName};
use std::collections::HashMap;

/// A target (without exclusions) under a chain: what one union is computed over.
#[derive(Debug)]
pub(crate) struct GateDef {
    pub target: Target,
    pub chain: ChainId,
}

/// Load time: gives each distinct (target, chain) pair an id.
#[derive(Default)]
pub(crate) struct GateTable {
    index: HashMap<String, u32>,
    defs: Vec<GateDef>,
}

impl GateTable {
    /// The gate ids of a rule with these targets and chain; `None` when some target can
    /// hold values the prefilter never sees (TX and MATCHED_* change during the phase,
    /// `&COUNT` targets test a number).
    pub fn assign(&mut self, targets: &Targets, chain: ChainId) -> Option<Vec<u32>> {
        if targets.targets.is_empty() {
            return None;
        }
        let mut ids = Vec::new();
        for target in &targets.targets {
            if target.count || !stable(target.var) {
                return None;
            }
            let selector = match &target.selector {
                Selector::All => String::new(),
                Selector::Key(k) => format!("k:{}", k.to_ascii_lowercase()),
                Selector::Regex(r) => format!("r:{}", r.as_str()),
                Selector::Prefix(p) => format!("p:{p}"),
            };
            let key = format!("{:?}|{selector}|{chain}", target.var);
            let next = u32::try_from(self.defs.len()).ok()?;
            let id = *self.index.entry(key).or_insert_with(|| {
                self.defs.push(GateDef {
                    target: target.clone(),
                    chain,
                });
                next
            });
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Some(ids)
    }

    pub fn into_defs(self) -> Vec<GateDef> {
        self.defs
    }
}

/// Variables whose values stay put during a phase.
fn stable(var: VarName) -> bool {
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
    bits: Vec<u64>,
}

impl GateCache {
    /// Called by every setter that adds or changes a value a target can name (headers,
    /// the body and its arguments, the response): the unions are recomputed on next use.
    /// A GET changes nothing between phases 1 and 2, so phase 2 reuses phase 1's unions.
    pub fn changed(&mut self) {
        self.at.clear();
        self.bits.clear();
    }
}

impl Transaction {
    /// False when `rule` cannot match now: its prefilter bit is in no union of its gates.
    pub(crate) fn gate_open(&mut self, rule: &Rule) -> bool {
        let (Some(gates), Some(slot)) = (&rule.gates, rule.prefilter_slot) else {
            return true;
        };
        gates.iter().any(|&g| {
            let start = self.union(g);
            let words = self.rules.prefilter().map_or(0, |p| p.words());
            start
                .and_then(|s| self.gate_cache.bits.get(s..s + words))
                .is_none_or(|bits| has_slot(bits, slot))
        })
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
        let rules = &self.rules;
        let def = rules.gates.get(gi)?;
        let prefilter = rules.prefilter()?;
        let words = prefilter.words();
        let tag = u32::try_from(self.gate_cache.bits.len() + 1).ok()?;
        // Both moved out so they can grow while `items` borrows the transaction.
        let mut cache = std::mem::take(&mut self.values);
        let mut all = std::mem::take(&mut self.gate_cache.bits);
        let start = all.len();
        all.resize(start + words, 0);
        let union = all.get_mut(start..).unwrap_or_default();
        let mut items = Items::new();
        self.collect(&def.target, &[], &mut items);
        let mut known = true;
        for item in &items {
            let Some(slot) = item.slot else {
                known = false;
                break;
            };
            let (_, bits) = cache.get(slot, &item.value, def.chain, &rules.chains, Some(prefilter));
            match bits {
                Some(bits) => union.iter_mut().zip(bits).for_each(|(u, b)| *u |= b),
                None => {
                    known = false;
                    break;
                }
            }
        }
        if !known {
            union.fill(u64::MAX);
        }
        drop(items);
        self.values = cache;
        self.gate_cache.bits = all;
        if self.gate_cache.at.len() <= gi {
            self.gate_cache.at.resize(gi + 1, 0);
        }
        if let Some(at) = self.gate_cache.at.get_mut(gi) {
            *at = tag;
        }
        Some(start)
    }
}

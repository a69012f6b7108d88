//! Which bytes a target's values hold, per transaction: a rule whose operator needs a byte
//! (see `reach::value_needs`) passes over a target none of whose values holds one.
//!
//! CRS 920270 (`@validateByteRange 1-255`), 920250 (`@validateUtf8Encoding`) and 941100
//! (`@detectXSS`) read every argument and argument name. Asking each value whether it holds
//! a needed byte still walked the ~400 of a form POST three times (~140k instructions per
//! rule). Here each target's values are read once, into the set of bytes they hold, shared
//! by the rules on that target until a value changes (`GateCache::changed` clears the sets,
//! as it clears the gates' unions). The set is taken without the rule's exclusions, which
//! only remove values: a superset, so a target is passed over only when no value of it
//! could match.

use crate::gates::{stable, target_key};
use crate::reach::ByteSet;
use crate::rules::Rule;
use crate::transaction::Transaction;
use crate::variables::{Target, Targets};
use std::collections::HashMap;

/// Load time: an id per distinct target that a rule with needed bytes reads.
#[derive(Default)]
pub(crate) struct ByteTargets {
    index: HashMap<String, u32>,
    targets: Vec<Target>,
}

impl ByteTargets {
    /// Per target of `targets`, its id; `None` for a target whose values may change during
    /// a phase (TX, MATCHED_*), a count, or one that is not visited value by value (XML).
    pub fn assign(&mut self, targets: &Targets) -> Vec<Option<u32>> {
        targets.targets.iter().map(|t| self.assign_one(t)).collect()
    }

    /// `assign` for one target.
    pub fn assign_one(&mut self, t: &Target) -> Option<u32> {
        if !stable(t.var) || !Transaction::visitable(t) {
            return None;
        }
        let next = u32::try_from(self.targets.len()).ok()?;
        let id = *self.index.entry(target_key(t)).or_insert(next);
        if id == next {
            self.targets.push(t.clone());
        }
        Some(id)
    }

    pub fn into_targets(self) -> Vec<Target> {
        self.targets
    }
}

impl Transaction {
    /// Bit i set when target i of `rule` holds no value with a byte the rule needs (only
    /// for a rule with needed bytes, and its first 64 targets).
    pub(crate) fn targets_without_needed_bytes(&mut self, rule: &Rule) -> u64 {
        let Some(needs) = rule.needs else {
            return 0;
        };
        let mut closed = 0u64;
        for (i, id) in rule.byte_targets.iter().enumerate().take(64) {
            if let Some(id) = *id {
                if self
                    .target_bytes(id)
                    .is_some_and(|held| !held.meets(&needs))
                {
                    closed |= 1 << i;
                }
            }
        }
        closed
    }

    /// The bytes the values of byte target `id` hold, computed on first use.
    pub(crate) fn target_bytes(&mut self, id: u32) -> Option<ByteSet> {
        let at = id as usize;
        if let Some(&Some(known)) = self.gate_cache.byte_sets.get(at) {
            return Some(known);
        }
        let mut present = [0u8; 256];
        let mut any = false;
        let target = self.rules.byte_targets.get(at)?;
        self.visit(target, &[], &mut |item| {
            any |= !item.value.is_empty();
            for &b in item.value.iter() {
                present[usize::from(b)] = 1;
            }
        });
        // Most targets of a GET are empty (no cookies, no arguments).
        let held = if any {
            ByteSet::of_present(&present)
        } else {
            ByteSet::default()
        };
        let sets = &mut self.gate_cache.byte_sets;
        if sets.len() <= at {
            sets.resize(at + 1, None);
        }
        if let Some(slot) = sets.get_mut(at) {
            *slot = Some(held);
        }
        Some(held)
    }
}

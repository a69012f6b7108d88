//! What a transaction's gate cache must forget when one variable's values change and no
//! other's do.
//!
//! CRS 901340 sets `ctl:forceRequestBodyVariable=On` on every request that has no body
//! processor, i.e. every GET: REQUEST_BODY then appears, empty, at phase 2. Forgetting every
//! union, target summary and byte set there (`GateCache::changed`) made each GET compute
//! its phase-1 unions again in phase 2 (~7,000 of a small GET's ~197,000 instructions). Only
//! what reads REQUEST_BODY can differ: the gates on it, the gate sets holding one of those,
//! its target summaries and byte sets, and the regex groups that read it.

use crate::rules::RuleSet;
use crate::variables::VarName;

/// The gate cache's entries that read one variable, by id (see `GateCache::forget`).
#[derive(Debug, Default)]
pub(crate) struct Dependents {
    pub(crate) gates: Vec<u32>,
    pub(crate) sets: Vec<u32>,
    /// Gate target ids (`GateDef::target_id`): summaries and reduced unions.
    pub(crate) targets: Vec<u32>,
    pub(crate) byte_targets: Vec<u32>,
    /// Regex group numbers as bits (see `rx_groups`).
    pub(crate) groups: u32,
}

impl Dependents {
    pub(crate) fn of(var: VarName, set: &RuleSet) -> Dependents {
        let mut d = Dependents::default();
        for (g, def) in (0u32..).zip(&set.gates) {
            if def.target.var == var {
                d.gates.push(g);
                if !d.targets.contains(&def.target_id) {
                    d.targets.push(def.target_id);
                }
            }
        }
        for (s, gates) in (0u32..).zip(&set.gate_sets) {
            if gates.iter().any(|g| d.gates.contains(g)) {
                d.sets.push(s);
            }
        }
        for (b, target) in (0u32..).zip(&set.byte_targets) {
            if target.var == var {
                d.byte_targets.push(b);
            }
        }
        for rule in crate::rules::links(set.phases.iter().flatten()) {
            let reads = rule.targets.targets.iter().any(|t| t.var == var);
            if let (Some(group), true) = (rule.rx_group, reads) {
                d.groups |= 1u32.checked_shl(u32::from(group)).unwrap_or(0);
            }
        }
        d
    }
}

//! Rules whose outcome is the same for every request, worked out once per rule set.
//!
//! CRS spends a good part of a benign request on bookkeeping that reads nothing but TX
//! variables its own setup wrote: REQUEST-901 fills in defaults (`&TX:x "@eq 0"` →
//! `setvar:tx.x=...`) and every rule file opens with paranoia-level skips
//! (`TX:DETECTION_PARANOIA_LEVEL "@lt 2"` → `skipAfter:...`). Two things are computed on a
//! rule set's first transaction, by running those rules on a probe transaction:
//!
//! - **The block**: the run of phase-1 rules, from the first one that reads only TX, whose
//!   targets, operator arguments and actions touch nothing but TX (and their own match).
//!   Entered with an empty TX, it always leaves the same TX, the same matched (nolog, pass)
//!   rules and the same MATCHED_VARS, so a transaction that reaches it with an empty TX, no
//!   pending skip, no rule or target removals and the configured engine mode copies that
//!   state and jumps past it.
//! - **Decisions**: a later rule whose targets and operator arguments read only *stable* TX
//!   variables (ones no rule outside the block can write: no setvar name, literal or the
//!   literal head of a macro name, and no capture can reach them) matches, or not, with the
//!   same variables on every request that replayed the block. Its operator is not run
//!   again; a match still runs its actions and logging with the request's own state. For a
//!   chain (or a rule with `capture`) only "no match" is decided: a first link that does not
//!   match ends it.
//!
//! A transaction that did not replay the block (TX written before it, a removal, the public
//! `set_tx_var`) evaluates every rule as written.

use crate::actions::Effect;
use crate::body::Pairs;
use crate::eval::Cursor;
use crate::macros::{Macro, Part};
use crate::operators::Operator;
use crate::rules::{Entry, Rule, RuleSet};
use crate::transaction::{MatchedRule, Transaction, TxMap};
use crate::variables::{Selector, VarName};
use std::collections::HashSet;
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct ConstantPlan {
    block: Option<Block>,
    /// Per phase, per entry index (see the module comment); `Undecided` for most rules.
    decisions: [Vec<Decision>; 5],
    /// The kind of each decision, one byte per entry (`UNDECIDED`, `NO_MATCH`, `MATCH`): the
    /// phase loop asks for every entry it reaches, and reading 24-byte decisions there made
    /// its walk the first source of L1 data misses in callgrind's cache model. `decisions`
    /// is read only for a match.
    kinds: [Vec<u8>; 5],
    /// Per phase, per entry index: where the run of entries that do nothing in a transaction
    /// that replayed the block (markers and rules decided "no match") ends, when one starts
    /// there; the index itself otherwise. CRS's files open with paranoia-level markers and
    /// decided bookkeeping: ~230 such steps of a small GET, each reading its head, its
    /// removals and its decision.
    dead_end: [Vec<u32>; 5],
    /// Per phase, per entry index: the OR of the tag bits (`heads::tag_bit`) of the decided
    /// rules from there to `dead_end`. A `ctl:ruleRemoveTargetByTag` whose tag bit is absent
    /// names none of them, so their decisions stand (`dead_run`).
    dead_tags: [Vec<u64>; 5],
}

const UNDECIDED: u8 = 0;
const NO_MATCH: u8 = 1;
const MATCH: u8 = 2;

static UNDECIDED_DECISION: Decision = Decision::Undecided;
static NO_MATCH_DECISION: Decision = Decision::NoMatch;

/// The state the block leaves behind, entered with an empty TX.
#[derive(Debug)]
pub(crate) struct Block {
    /// Index in phase 1's entry list of its first rule.
    pub(crate) start: usize,
    /// Where, and with what pending `skip`, the phase goes on after it.
    pub(crate) resume: Cursor,
    pub(crate) tx: TxMap,
    pub(crate) matched: Vec<MatchedRule>,
    /// MATCHED_VARS after it; `None` when none of its rules matched (left as it was).
    pub(crate) matched_vars: Option<Pairs>,
    pub(crate) last_rule_id: i64,
}

#[derive(Debug, Clone)]
pub(crate) enum Decision {
    Undecided,
    NoMatch,
    /// The matching variables (name, value), as MATCHED_VARS holds them.
    Match(Pairs),
}

impl ConstantPlan {
    pub(crate) fn block(&self) -> Option<&Block> {
        self.block.as_ref()
    }

    /// Rules the block covers (skipped ones included) and rules with a decision.
    pub(crate) fn summary(&self) -> (usize, usize) {
        let block = self
            .block
            .as_ref()
            .map_or(0, |b| b.resume.next.saturating_sub(b.start));
        let decided = self.decisions.iter().flatten();
        (
            block,
            decided
                .filter(|d| !matches!(d, Decision::Undecided))
                .count(),
        )
    }

    pub(crate) fn decision(&self, phase: u8, index: usize) -> &Decision {
        let p = usize::from(phase - 1);
        let kind = self.kinds.get(p).and_then(|k| k.get(index)).copied();
        match kind {
            Some(NO_MATCH) => &NO_MATCH_DECISION,
            Some(MATCH) => self
                .decisions
                .get(p)
                .and_then(|d| d.get(index))
                .unwrap_or(&UNDECIDED_DECISION),
            _ => &UNDECIDED_DECISION,
        }
    }

    /// The run of entries from `index` on that a transaction which replayed the block may
    /// pass over at once: its end and the OR of its rules' tag bits, when it is not empty.
    /// Passing over it is what stepping through it would do (a marker does nothing, a
    /// decided "no match" nothing but name the current rule), as long as no pending `skip`
    /// counts its rules and no removed target names one of them (see
    /// `Transaction::targets_removed_from`, which sends a decided rule back to evaluation).
    #[inline]
    pub(crate) fn dead_run(&self, phase: u8, index: usize) -> Option<(usize, u64)> {
        let p = usize::from(phase - 1);
        let end = *self.dead_end.get(p)?.get(index)? as usize;
        (end > index).then(|| (end, self.dead_tags[p][index]))
    }

    pub(crate) fn build(rules: &Arc<RuleSet>) -> ConstantPlan {
        let mut probe = Transaction::new(Arc::clone(rules), "", "");
        probe.use_constant_plan = false;
        let mut decisions: [Vec<Decision>; 5] = Default::default();
        for (phase, list) in rules.phases.iter().enumerate() {
            decisions[phase] = vec![Decision::Undecided; list.len()];
        }
        let Some(block) = run_block(&mut probe, rules) else {
            return ConstantPlan::new(None, decisions, &rules.phases);
        };
        let stable = StableTx::new(rules, &block);
        for (p, list) in rules.phases.iter().enumerate() {
            let first = if p == 0 { block.resume.next } else { 0 };
            for (index, entry) in list.iter().enumerate().skip(first) {
                let Entry::Rule(rule) = entry else { continue };
                if !stable.decides(rule) {
                    continue;
                }
                // The first link alone: when it does not match, neither does the chain.
                probe.current_rule_id = rule.id;
                decisions[p][index] = if !probe.evaluate(rule, rule) {
                    Decision::NoMatch
                } else if rule.chained.is_none() && !rule.actions.capture {
                    Decision::Match(probe.matched_vars.to_pairs())
                } else {
                    Decision::Undecided
                };
            }
        }
        ConstantPlan::new(Some(block), decisions, &rules.phases)
    }

    fn new(
        block: Option<Block>,
        decisions: [Vec<Decision>; 5],
        phases: &[Vec<Entry>; 5],
    ) -> ConstantPlan {
        let kinds: [Vec<u8>; 5] = decisions.each_ref().map(|list| {
            list.iter()
                .map(|d| match d {
                    Decision::Undecided => UNDECIDED,
                    Decision::NoMatch => NO_MATCH,
                    Decision::Match(_) => MATCH,
                })
                .collect()
        });
        let mut dead_end: [Vec<u32>; 5] = Default::default();
        let mut dead_tags: [Vec<u64>; 5] = Default::default();
        for (p, list) in phases.iter().enumerate() {
            let n = list.len();
            let (ends, tags) = (&mut dead_end[p], &mut dead_tags[p]);
            ends.resize(n, 0);
            tags.resize(n, 0);
            // From the back: a dead entry's run ends where the next one's does.
            for index in (0..n).rev() {
                let tag_bits = match &list[index] {
                    Entry::Marker(_) => Some(0),
                    Entry::Rule(rule) if kinds[p].get(index) == Some(&NO_MATCH) => Some(
                        rule.actions
                            .tags
                            .iter()
                            .fold(0, |b, t| b | crate::heads::tag_bit(t)),
                    ),
                    Entry::Rule(_) => None,
                };
                let next_dead = index + 1 < n && ends[index + 1] as usize > index + 1;
                (ends[index], tags[index]) = match (tag_bits, next_dead) {
                    (None, _) => (index as u32, 0),
                    (Some(bits), true) => (ends[index + 1], bits | tags[index + 1]),
                    (Some(bits), false) => (index as u32 + 1, bits),
                };
            }
        }
        ConstantPlan {
            block,
            decisions,
            kinds,
            dead_end,
            dead_tags,
        }
    }
}

/// Runs phase 1 from its first TX-only rule for as long as rules read only TX and a match
/// leaves no trace but TX (nolog, no interruption, no `allow`).
fn run_block(probe: &mut Transaction, rules: &RuleSet) -> Option<Block> {
    let list = &rules.phases[0];
    let start = list
        .iter()
        .position(|e| matches!(e, Entry::Rule(r) if reads_only_tx(r)))?;
    let mut at = Cursor {
        next: start,
        skip: 0,
    };
    while let Some(entry) = list.get(at.next) {
        if matches!(entry, Entry::Rule(r) if !reads_only_tx(r)) {
            break;
        }
        let before = (
            probe.tx.clone(),
            probe.matched.len(),
            probe.matched_vars.clone(),
            at,
            probe.current_rule_id,
        );
        let go_on = probe.step(rules, 1, &mut at, None);
        let left_trace = probe.matched[before.1..].iter().any(|m| m.logged())
            || probe.interruption.is_some()
            || probe.allowed;
        if left_trace || !go_on {
            (probe.tx, _, probe.matched_vars, at, probe.current_rule_id) = before;
            probe.matched.truncate(before.1);
            probe.interruption = None;
            probe.allowed = false;
            break;
        }
    }
    if at.next <= start {
        return None;
    }
    Some(Block {
        start,
        resume: at,
        tx: probe.tx.to_map(),
        matched: probe.matched.clone(),
        matched_vars: (!probe.matched.is_empty()).then(|| probe.matched_vars.to_pairs()),
        last_rule_id: probe.current_rule_id,
    })
}

/// Every link reads TX alone: targets, operator argument, and macros in its actions (which
/// may also name the link's own match and the rule id). No `ctl`: it changes the engine.
fn reads_only_tx(head: &Rule) -> bool {
    let mut link = Some(head);
    while let Some(rule) = link {
        let targets_ok = rule.targets.targets.iter().all(|t| t.var == VarName::Tx);
        let operator_ok = operator_macro(&rule.operator).is_none_or(|m| macro_vars_ok(m, false));
        let effects_ok = rule.actions.effects.iter().all(|e| match e {
            Effect::SetVar(sv) => {
                macro_vars_ok(&sv.name, true)
                    && setvar_value(&sv.op).is_none_or(|m| macro_vars_ok(m, true))
            }
            Effect::Ctl(_) => false,
        });
        if !(targets_ok && operator_ok && effects_ok) {
            return false;
        }
        link = rule.chained.as_deref();
    }
    true
}

/// TX names no rule outside the block writes: their value (or absence) after the block holds
/// for the rest of the transaction.
struct StableTx {
    /// Names written by setvar outside the block.
    exact: HashSet<String>,
    /// Literal heads of names built from macros.
    prefixes: Vec<String>,
    /// Some rule captures: TX.0 .. TX.99 are written.
    captures: bool,
    /// A name that is all macro is written somewhere: nothing is stable.
    none: bool,
}

impl StableTx {
    fn new(rules: &RuleSet, block: &Block) -> StableTx {
        let mut stable = StableTx {
            exact: HashSet::new(),
            prefixes: Vec::new(),
            captures: false,
            none: false,
        };
        for (p, list) in rules.phases.iter().enumerate() {
            for (index, entry) in list.iter().enumerate() {
                if p == 0 && (block.start..block.resume.next).contains(&index) {
                    continue;
                }
                let Entry::Rule(head) = entry else { continue };
                let mut link = Some(&**head);
                while let Some(rule) = link {
                    stable.add_writes(rule);
                    link = rule.chained.as_deref();
                }
            }
        }
        stable
    }

    fn add_writes(&mut self, rule: &Rule) {
        self.captures |= rule.actions.capture;
        for e in &rule.actions.effects {
            let Effect::SetVar(sv) = e else { continue };
            match sv.name.parts.as_slice() {
                [] => {}
                [Part::Literal(name)] => {
                    self.exact.insert(name.clone());
                }
                [Part::Literal(head), ..] => self.prefixes.push(head.clone()),
                _ => self.none = true,
            }
        }
    }

    fn is_stable(&self, name: &str) -> bool {
        let written = self.none
            || (self.captures && name.starts_with(|c: char| c.is_ascii_digit()))
            || self.exact.contains(name)
            || self.prefixes.iter().any(|p| name.starts_with(p.as_str()));
        !written
    }

    /// The rule's first link reads nothing but stable variables (and its own id).
    fn decides(&self, rule: &Rule) -> bool {
        if rule.unconditional {
            return false;
        }
        let targets_ok = rule.targets.targets.iter().all(|t| match &t.selector {
            Selector::Key(k) => t.var == VarName::Tx && self.is_stable(k),
            _ => false,
        });
        let operator_ok = operator_macro(&rule.operator).is_none_or(|m| {
            m.parts.iter().all(|p| match p {
                Part::Literal(_) => true,
                Part::Var(VarName::Tx, Some(k)) => self.is_stable(k),
                Part::Var(VarName::Rule, _) => true,
                Part::Var(..) => false,
            })
        });
        targets_ok && operator_ok
    }
}

/// Variables a macro may read and still be the same on every request: TX, the rule's own
/// id, and (in actions) the variable the link matched.
fn macro_vars_ok(m: &Macro, in_action: bool) -> bool {
    m.parts.iter().all(|p| match p {
        Part::Literal(_) => true,
        Part::Var(VarName::Tx | VarName::Rule, _) => true,
        Part::Var(VarName::MatchedVar | VarName::MatchedVarName, _) => in_action,
        Part::Var(..) => false,
    })
}

fn setvar_value(op: &crate::actions::SetVarOp) -> Option<&Macro> {
    use crate::actions::SetVarOp::*;
    match op {
        Set(m) | Add(m) | Sub(m) => Some(m),
        Delete => None,
    }
}

fn operator_macro(op: &Operator) -> Option<&Macro> {
    use Operator::*;
    match op {
        StrEq(m) | Eq(m) | Ge(m) | Gt(m) | Lt(m) | Le(m) | Within(m) | Contains(m)
        | ContainsWord(m) | BeginsWith(m) | EndsWith(m) => Some(m),
        _ => None,
    }
}

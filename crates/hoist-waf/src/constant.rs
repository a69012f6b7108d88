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
//! - **Leaps**: from each entry, how far the phase loop of a transaction that replayed the
//!   block may go without stepping: over markers, decided "no match" rules and decided
//!   matches that leave only a nolog record and MATCHED_VARS (see `Leap`).
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
    /// Per phase, per entry index: how far a transaction that replayed the block may go from
    /// there without stepping through the entries (see `Leap`).
    leaps: [Vec<Leap>; 5],
    /// Per phase, per entry index of a decided match a leap passes: its record and the next
    /// one along the way (read instead of the rule, which is not dereferenced).
    matches: [Vec<LeapMatch>; 5],
}

/// No entry.
const NONE: u32 = u32::MAX;

/// The entries from an index on that give every transaction that replayed the block the
/// same outcome: markers, rules decided "no match", and decided matches whose only traces
/// are a nolog record and MATCHED_VARS (`pass`, no effects, no `skip`; a `skipAfter` is
/// followed). CRS's files open with these: paranoia-level markers and the
/// `TX:DETECTION_PARANOIA_LEVEL "@lt N"` skips: 278 of a small GET's steps in 54 leaps (47
/// of them matches), each reading its head, its removals and its decision, and a match its
/// rule.
/// Passing over them is stepping through them, as long as no `skip` is pending and no
/// removal may name one of them (`Transaction::may_leap`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Leap {
    /// Where the walk goes on; the index itself when its entry cannot be passed so.
    pub(crate) end: u32,
    /// The first decided match on the way, `NONE` without one.
    pub(crate) first_match: u32,
    /// The OR of the tag bits (`heads::tag_bit`) of the rules on the way.
    pub(crate) tags: u64,
}

/// A decided match on the way of a leap: what its record holds, and the next one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LeapMatch {
    pub(crate) id: i64,
    pub(crate) severity: Option<u8>,
    /// `NONE` after the last.
    pub(crate) next: u32,
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
    /// Per TX target of the rule set that selects by regex or prefix (or takes all of TX),
    /// the names of the block's TX it takes (see `TxVars::matching_since_reset`).
    pub(crate) tx_selections: Vec<TxSelection>,
}

/// What one TX selector takes of the block's TX.
#[derive(Debug)]
pub(crate) struct TxSelection {
    pub(crate) selector: Selector,
    /// The names, in TX's order (`TxVars::matching_since_reset` reads their places from the
    /// live map: a name removed and added again has a new one).
    pub(crate) names: Vec<String>,
}

impl Block {
    /// The block's names that `selector` takes, when it is one of the rule set's.
    pub(crate) fn tx_selection(&self, selector: &Selector) -> Option<&[String]> {
        self.tx_selections
            .iter()
            .find(|s| s.selector.same_as(selector))
            .map(|s| s.names.as_slice())
    }
}

/// Every selector of a TX target other than one name, in the rule set's rules and their
/// chain links, with what it takes of `tx`.
fn tx_selections(rules: &RuleSet, tx: &TxMap) -> Vec<TxSelection> {
    let mut out: Vec<TxSelection> = Vec::new();
    for rule in crate::rules::links(rules.phases.iter().flatten()) {
        for target in &rule.targets.targets {
            if target.var != VarName::Tx || matches!(target.selector, Selector::Key(_)) {
                continue;
            }
            if out.iter().any(|s| s.selector.same_as(&target.selector)) {
                continue;
            }
            out.push(TxSelection {
                selector: target.selector.clone(),
                names: tx.selected(|k| target.selector.matches_folded(k)),
            });
        }
    }
    out
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

    /// The leap from `index`, when it passes at least one entry.
    #[inline]
    pub(crate) fn leap(&self, phase: u8, index: usize) -> Option<Leap> {
        let leap = *self.leaps.get(usize::from(phase - 1))?.get(index)?;
        (leap.end as usize > index).then_some(leap)
    }

    /// The decided match at `index` on the way of a leap (`Leap::first_match`,
    /// `LeapMatch::next`); `None` for `NONE`.
    pub(crate) fn leap_match(&self, phase: u8, index: u32) -> Option<LeapMatch> {
        let list = self.matches.get(usize::from(phase - 1))?;
        list.get(index as usize).copied()
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
        let mut leaps: [Vec<Leap>; 5] = Default::default();
        let mut matches: [Vec<LeapMatch>; 5] = Default::default();
        for (p, list) in phases.iter().enumerate() {
            let n = list.len();
            let here = |index: usize| Leap {
                end: index as u32,
                first_match: NONE,
                tags: 0,
            };
            leaps[p] = (0..n).map(here).collect();
            let unused = LeapMatch {
                id: 0,
                severity: None,
                next: NONE,
            };
            matches[p] = vec![unused; n];
            // From the back: an entry's leap goes on with the leap where its own step ends.
            for index in (0..n).rev() {
                let kind = kinds[p].get(index).copied();
                let (bits, record, next) = match &list[index] {
                    Entry::Marker(_) => (0, None, index + 1),
                    Entry::Rule(rule) if kind == Some(NO_MATCH) => {
                        (rule.actions.tag_bits, None, index + 1)
                    }
                    Entry::Rule(rule) if kind == Some(MATCH) && leaves_only_a_record(rule) => {
                        let next = rule.skip_after_index.unwrap_or(index + 1);
                        if next <= index {
                            continue;
                        }
                        (rule.actions.tag_bits, Some(rule), next)
                    }
                    Entry::Rule(_) => continue,
                };
                let after = leaps[p].get(next).copied().unwrap_or(here(n));
                let is_match = record.is_some();
                if let Some(rule) = record {
                    matches[p][index] = LeapMatch {
                        id: rule.id,
                        severity: rule.actions.severity,
                        next: after.first_match,
                    };
                }
                leaps[p][index] = Leap {
                    end: after.end,
                    first_match: if is_match {
                        index as u32
                    } else {
                        after.first_match
                    },
                    tags: bits | after.tags,
                };
            }
        }
        ConstantPlan {
            block,
            decisions,
            kinds,
            leaps,
            matches,
        }
    }
}

/// Whether a decided match of `rule` leaves nothing but its nolog record and MATCHED_VARS:
/// what `Transaction::leap_over` writes for it (`on_match` and `record_decided` do the same).
fn leaves_only_a_record(rule: &Rule) -> bool {
    matches!(rule.disruptive, crate::actions::Disruptive::Pass)
        && !rule.log
        && rule.actions.effects.is_empty()
        && rule.actions.skip == 0
        && rule.chained.is_none()
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
    let tx = probe.tx.to_map();
    Some(Block {
        start,
        resume: at,
        tx_selections: tx_selections(rules, &tx),
        tx,
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
                for rule in crate::rules::links([entry]) {
                    stable.add_writes(rule);
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
                Part::Tx(k) => self.is_stable(k),
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
        Part::Literal(_) | Part::Tx(_) => true,
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

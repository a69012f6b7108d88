//! Rule evaluation for a transaction: the phase loop (markers, skip, skipAfter, removals,
//! the constant plan's replay and decisions, gate runs), target collection and
//! transformation, and operator matching. What a match then does is in `on_match`.

use crate::actions::EngineMode;
use crate::captures::{Captures, HitCaptures, NO_HIT_CAPTURES};
use crate::collections::{Item, Items};
use crate::constant::{Block, ConstantPlan, Decision};
use crate::heads::Head;
use crate::pair_list::PairList;
use crate::rules::{Entry, Rule, RuleSet};
use crate::transaction::{MatchedRule, RemovedTarget, Transaction};
use crate::variables::Exclusion;
use smallvec::SmallVec;
use std::borrow::Cow;
use std::sync::Arc;

/// Where a phase's loop is: the next entry and how many rules `skip` still passes over.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Cursor {
    pub(crate) next: usize,
    pub(crate) skip: u32,
}

impl Transaction {
    pub(crate) fn run_phase(&mut self, phase: u8) {
        self.phases_done = self.phases_done.max(phase);
        if self.engine == EngineMode::Off {
            return;
        }
        if phase < 5 && (self.allowed || self.interruption.is_some()) {
            return;
        }
        let rules = Arc::clone(&self.rules);
        let plan = self.use_constant_plan.then(|| rules.constant_plan());
        let list = &rules.phases[usize::from(phase - 1)];
        let mut at = Cursor::default();
        while at.next < list.len() {
            if let Some(block) = plan.and_then(|p| p.block()) {
                if phase == 1 && at.next == block.start && self.can_replay(at) {
                    self.replay(block);
                    at = block.resume;
                    continue;
                }
            }
            // Markers and decided rules that leave nothing but a record, passed over at once.
            if at.skip == 0 && self.constant_tx {
                if let Some((plan, leap)) = plan.and_then(|p| Some((p, p.leap(phase, at.next)?))) {
                    if self.may_leap(leap.tags) {
                        self.leap_over(plan, phase, leap.first_match);
                        at.next = leap.end as usize;
                        continue;
                    }
                }
            }
            // A run of gated rules none of which can match is passed over at once.
            if at.skip == 0 {
                if let Some(run) = rules.gate_runs.at(phase, at.next) {
                    #[cfg(feature = "rule-profile")]
                    let since = std::time::Instant::now();
                    let closed = self.run_closed(run);
                    #[cfg(feature = "rule-profile")]
                    crate::rule_profile::add(phase, crate::rule_profile::GATES, since);
                    if closed {
                        at.next = run.end;
                        continue;
                    }
                }
            }
            if !self.step(&rules, phase, &mut at, plan) {
                break;
            }
        }
    }

    /// One entry of a phase's list: skips, removals, evaluation and the actions of a match.
    /// `false` when the phase stops (an interruption or `allow`). Passing over a rule (a
    /// marker, a skip, a removal, a decided or gated-off rule) reads only its packed head.
    #[inline(always)]
    pub(crate) fn step(
        &mut self,
        rules: &RuleSet,
        phase: u8,
        at: &mut Cursor,
        plan: Option<&ConstantPlan>,
    ) -> bool {
        let p = usize::from(phase - 1);
        let index = at.next;
        at.next += 1;
        let list = &rules.phases[p];
        let Some(head) = rules.heads.phases[p].get(index).filter(|h| !h.marker) else {
            return true;
        };
        if at.skip > 0 {
            at.skip -= 1;
            return true;
        }
        if self.is_removed(head, list, index) {
            return true;
        }
        self.current_rule_id = head.id;
        let decision = match plan.map(|p| p.decision(phase, index)) {
            Some(d @ (Decision::NoMatch | Decision::Match(_)))
                if self.constant_tx && !self.targets_removed_from(head, list, index) =>
            {
                d
            }
            _ => &Decision::Undecided,
        };
        if matches!(decision, Decision::NoMatch) {
            return true;
        }
        if let (Decision::Undecided, Some((slot, set))) = (decision, head.gated()) {
            #[cfg(feature = "rule-profile")]
            let since = std::time::Instant::now();
            let open = self.gates_open(slot, set);
            #[cfg(feature = "rule-profile")]
            crate::rule_profile::add(phase, crate::rule_profile::GATES, since);
            if !open {
                return true;
            }
        }
        // Only now is the rule itself read.
        let Some(rule) = rule_at(list, index) else {
            return true;
        };
        #[cfg(feature = "rule-profile")]
        let since = std::time::Instant::now();
        let matched = crate::rule_probe::probed!(
            head.id,
            match decision {
                Decision::Match(vars) => {
                    self.record_decided(rule, vars);
                    true
                }
                _ => self.evaluate_chain(rule),
            }
        );
        #[cfg(feature = "rule-profile")]
        crate::rule_profile::add(phase, head.id, since);
        if !matched {
            return true;
        }
        crate::rule_probe::probed!(head.id, self.on_match(rule, phase));
        if self.interruption.is_some() || self.allowed {
            return false;
        }
        // skipAfter: straight to its marker (resolved at load; CRS skips whole files
        // above the paranoia level this way).
        if let Some(to) = rule.skip_after_index {
            at.next = to;
        }
        at.skip = rule.actions.skip;
        true
    }

    /// The constant block (see `constant`) gives the same state to every transaction that
    /// enters it like this.
    fn can_replay(&self, at: Cursor) -> bool {
        // The probe ran with the rule set's engine mode: a `deny` or `allow` it saw do
        // nothing in DetectionOnly would act after `ctl:ruleEngine=On`.
        at.skip == 0
            && self.engine == self.rules.engine
            && self.tx.is_empty()
            && self.removed_ids.is_empty()
            && self.removed_tags.is_empty()
            && self.removed_targets.is_empty()
    }

    fn replay(&mut self, block: &Block) {
        // Rewrites the previous transaction's TX (see `scratch`): most of its names are the
        // block's, whose buffers are then reused.
        std::mem::swap(&mut self.tx, &mut self.last_tx);
        self.tx.reset_to(&block.tx);
        self.matched.extend(block.matched.iter().cloned());
        if let Some(vars) = &block.matched_vars {
            self.copy_matched_vars(vars);
        }
        self.current_rule_id = block.last_rule_id;
        self.constant_tx = true;
    }

    /// Whether a `ctl:ruleRemoveTarget*` of this transaction names the rule; its tags are
    /// read only when one of the removals' tags may be among them.
    fn targets_removed_from(&self, head: &Head, list: &[Entry], index: usize) -> bool {
        self.removed_targets.iter().any(|r| match r {
            RemovedTarget::Ids(ids, _) => crate::actions::in_ranges(ids, head.id),
            RemovedTarget::Tag(tag, bit, _) => {
                head.tag_bits & bit != 0 && has_tag(list, index, tag)
            }
        })
    }

    /// Whether no removal of this transaction (`ctl:ruleRemove*`) may name a rule with one
    /// of `tag_bits`: then each rule of a leap is stepped as decided (see `step`). A removal
    /// by id is not looked into: the walk then goes rule by rule.
    fn may_leap(&self, tag_bits: u64) -> bool {
        self.removed_ids.is_empty()
            && self.removed_tag_bits & tag_bits == 0
            && self
                .removed_targets
                .iter()
                .all(|r| matches!(r, RemovedTarget::Tag(_, bit, _) if tag_bits & bit == 0))
    }

    /// What stepping through a leap's entries leaves: each decided match's nolog record, in
    /// order, and the last one's MATCHED_VARS (see `constant::Leap`).
    fn leap_over(&mut self, plan: &ConstantPlan, phase: u8, first_match: u32) {
        let (mut at, mut last) = (first_match, None);
        while let Some(m) = plan.leap_match(phase, at) {
            self.matched
                .push(MatchedRule::new(m.id, phase, m.severity, None));
            last = Some((at, m.id));
            at = m.next;
        }
        if let Some((index, id)) = last {
            if let Decision::Match(vars) = plan.decision(phase, index as usize) {
                self.matched_vars.assign(vars);
            }
            self.current_rule_id = id;
        }
    }

    fn is_removed(&self, head: &Head, list: &[Entry], index: usize) -> bool {
        crate::actions::in_ranges(&self.removed_ids, head.id)
            || (head.tag_bits & self.removed_tag_bits != 0
                && self.removed_tags.iter().any(|t| has_tag(list, index, t)))
    }

    /// Evaluates a rule and its chain. As in ModSecurity, each link's non-disruptive actions
    /// run as soon as that link matches: CRS chains read TX variables their starter just set.
    /// The head's gates were checked by the caller (`step`), so only later links check theirs.
    pub(crate) fn evaluate_chain(&mut self, head: &Rule) -> bool {
        let mut link = Some(head);
        let mut gate_checked = true;
        while let Some(rule) = link {
            if !self.evaluate_link(rule, head, gate_checked) {
                return false;
            }
            gate_checked = false;
            link = rule.chained.as_deref();
        }
        true
    }

    pub(crate) fn evaluate(&mut self, rule: &Rule, head: &Rule) -> bool {
        self.evaluate_link(rule, head, false)
    }

    fn evaluate_link(&mut self, rule: &Rule, head: &Rule, gate_checked: bool) -> bool {
        if rule.unconditional {
            for effect in &rule.actions.effects {
                self.apply_effect(effect);
            }
            return true;
        }
        if !gate_checked && !self.gate_open(rule) {
            return false;
        }
        if let Some(group) = rule.rx_group {
            if !self.group_may_match(rule, group) {
                return false;
            }
        }
        // A gated rule may be open on one target only: the others' unions (over their values
        // before exclusions) may lack its bit, and then none of their values can match (a
        // rule opened by one target walked every member of the others, ~190 form arguments
        // each in the benchmark's POST). Bit i: target i is closed.
        let mut closed_targets = self.targets_without_needed_bytes(rule);
        if let (Some(slot), Some(_)) = (rule.prefilter_slot, rule.gate_set) {
            for (i, &g) in rule.target_gates.iter().enumerate().take(64) {
                if self.gate_known_without(g, slot) {
                    closed_targets |= 1 << i;
                }
            }
        }
        // Most rules have none: the collecting was most of a small request's SmallVec work.
        let mut exclusions: SmallVec<[&Exclusion; 8]> = SmallVec::new();
        if !rule.targets.exclusions.is_empty() || !self.removed_targets.is_empty() {
            exclusions.extend(rule.targets.exclusions.iter());
            exclusions.extend(removed_targets_of(&self.removed_targets, head));
        }
        // Moved out so the cache can grow while items borrow the transaction.
        let cache = self.values.take().unwrap_or_default();
        let mut hits = std::mem::take(&mut self.hits);
        hits.clear();
        // Taken as `Option`s: putting back after a `mem::take` dropped the placeholder
        // through an outlined drop on every evaluation.
        let mut hit_captures = self.hit_captures.take().unwrap_or_default();
        hit_captures.clear();
        let mut captures = self.captures.take().unwrap_or_default();
        captures.clear();
        let rules = &self.rules;
        let mut state = ItemState {
            cache,
            captures: &mut captures,
            hits: &mut hits,
            hit_captures: &mut hit_captures,
            prefilter: None,
            per_item: false,
            chain_mask: rules.chains.mask(rule.chain),
        };
        let full = rule
            .prefilter_slot
            .and_then(|slot| Some((slot, rules.prefilter()?)));
        for (i, target) in rule.targets.targets.iter().enumerate() {
            if i < 64 && closed_targets & (1 << i) != 0 {
                continue;
            }
            // The prefilter of the target's values (see `value_class`): one for all of them
            // unless it depends on each member's key.
            if let Some((slot, p)) = full {
                let class = rule.target_classes.get(i).copied().flatten();
                state.prefilter = Some((
                    slot,
                    class.map_or(p, |c| rules.value_classes.of_class(p, c)),
                ));
                state.per_item = class.is_none();
            }
            // Collections and scalars are taken one item at a time; TX, XML and counts are
            // gathered first (few items, and a count needs them all).
            if Transaction::visitable(target) {
                self.visit(target, &exclusions, &mut |item| {
                    self.evaluate_item(rule, &item, &mut state);
                });
            } else {
                let mut items = Items::new();
                self.collect(target, &exclusions, &mut items);
                for item in &items {
                    self.evaluate_item(rule, item, &mut state);
                }
            }
        }
        drop(exclusions);
        self.values = Some(state.cache);
        let matched = !hits.is_empty();
        if matched {
            self.record_matches(rule, &hits, &hit_captures);
        }
        self.hits = hits;
        self.hit_captures = Some(hit_captures);
        self.captures = Some(captures);
        matched
    }

    /// Transforms one item along the rule's chain (through the cache when the value is
    /// stable) and runs the operator on it; a match is added to `state.hits`.
    fn evaluate_item(&self, rule: &Rule, item: &Item<'_>, state: &mut ItemState<'_>) {
        let ItemState {
            cache,
            captures,
            hits,
            hit_captures,
            prefilter,
            per_item,
            chain_mask,
        } = state;
        let captures: &mut Captures = captures;
        // The operator needs a byte the value lacks and its chain cannot bring (the
        // validation rules over every argument): no match, nothing transformed.
        if rule.needs.is_some_and(|d| !d.found_in(&item.value)) {
            return;
        }
        let rules = &self.rules;
        // The scan of the value's class (see `value_class`), when the target's values have
        // no one class: the same slots, fewer literals.
        let prefilter = match (*prefilter, item.slot) {
            (Some((rule_slot, _)), Some(vslot)) if *per_item => rules
                .value_prefilter(vslot, &item.key)
                .map(|p| (rule_slot, p)),
            (p, _) => p,
        };
        let want_captures = rule.actions.capture;
        // The literals the regex needs are in none of the value's transformations' hits,
        // known without transforming it: no match, and nothing to record. (Each step
        // then changes at most case, so this holds for multiMatch's intermediate values.)
        // For a multiMatch rule, whether the literals are absent from the value as collected
        // (with its hit-keeping mask): one lookup answers this check and the one per step
        // below.
        let mut absent = None;
        // The value's hit-keeping mask when that lookup already read it.
        let mut mask = None;
        if let (Some((slot, p)), Some(vslot), false) = (prefilter, item.slot, rule.negated) {
            if rule.actions.multi_match {
                let own = cache.own_hits(vslot, &item.value, rules.chains.len(), p);
                if let Some((keeping, bits)) = own {
                    mask = Some(keeping);
                    if !crate::prefilter::has_slot(bits, slot) {
                        if *chain_mask & !keeping == 0 {
                            return;
                        }
                        absent = Some(keeping);
                    }
                }
            } else {
                let kept = cache.hits_kept(vslot, &item.value, *chain_mask, rules.chains.len(), p);
                if kept.is_some_and(|bits| !crate::prefilter::has_slot(bits, slot)) {
                    return;
                }
            }
        }
        let hit;
        let value: Cow<'_, [u8]>;
        match item.slot {
            Some(slot) if !rule.actions.multi_match => {
                // Its needle is not in the value even with whitespace dropped and case
                // lowered: no need to make that copy.
                if let Some(fc) = &rule.folded_contains {
                    if !fc.found_in(&item.value) {
                        return;
                    }
                }
                // One search for the regexes of the rule's group tells whether any of them
                // can match this value; a member is never negated, so "none" is no hit.
                if let Some(group) = rule.rx_group {
                    let chains = rules.chains.len();
                    let may_match = match cache.group_answer(slot, chains, group) {
                        Some(known) => known,
                        None => {
                            let (v, _) =
                                cache.get(slot, &item.value, rule.chain, &rules.chains, None);
                            let answer = rules.rx_groups.may_match(group, v);
                            cache.set_group_answer(slot, chains, group, answer);
                            answer
                        }
                    };
                    if !may_match {
                        return;
                    }
                }
                let (v, bits) = cache.get(
                    slot,
                    &item.value,
                    rule.chain,
                    &rules.chains,
                    prefilter.map(|(_, class)| crate::values::Scans {
                        class,
                        made_by: &rules.made_by_prefilters,
                    }),
                );
                // None of the regex's required literals occurs: it cannot match.
                let impossible = match (prefilter, bits) {
                    (Some((slot, _)), Some(bits)) => !crate::prefilter::has_slot(bits, slot),
                    _ => false,
                };
                hit = if impossible {
                    rule.negated
                } else {
                    self.check(rule, v, want_captures.then_some(&mut *captures))
                };
                value = Cow::Borrowed(v);
            }
            Some(slot)
                if cache.changes_nothing(
                    slot,
                    &item.value,
                    *chain_mask,
                    rules.chains.len(),
                    mask,
                ) =>
            {
                // multiMatch, and no step changes the value (detectSQLi's chain on most
                // fields): the value as collected is the only one to test, nothing to
                // compute or cache.
                hit = self.check(rule, &item.value, want_captures.then_some(&mut *captures));
                value = Cow::Borrowed(&item.value);
            }
            Some(slot)
                if rule.length_check.is_some_and(|(before, chars)| {
                    !crate::decode::starts_with_base64_run(&item.value, chars)
                        && cache.changes_nothing(
                            slot,
                            &item.value,
                            before,
                            rules.chains.len(),
                            mask,
                        )
                }) =>
            {
                // multiMatch; the steps before the rule's base64Decode leave the value as
                // it is, and the decoding makes fewer bytes than any match (see
                // `length_bound`): only the value as collected can match, and nothing is
                // computed unless it does (MATCHED_VAR is then the whole chain's value).
                hit = absent.is_none()
                    && self.check(rule, &item.value, want_captures.then_some(&mut *captures));
                value = if hit {
                    let (v, _) = cache.get(slot, &item.value, rule.chain, &rules.chains, None);
                    Cow::Borrowed(v)
                } else {
                    Cow::Borrowed(&item.value)
                };
            }
            Some(slot) => {
                // multiMatch: the value before and after each transformation that
                // changes it (a changed value is a different buffer).
                let mut seen: Option<Option<usize>> = None;
                let mut h = false;
                // `absent`: the regex's literals are absent from the value as collected (with
                // the transformations that keep its hits): then a step that differs from it
                // in case only cannot match either, and its regex is not run.
                let path = rules.chains.path(rule.chain);
                // The steps after the last one that may write anything are computed only
                // if its value can come to hold one of the filter's bytes (see `reach`).
                let reachable = |v: &[u8]| rule.reach_check.is_none_or(|(_, d)| d.found_in(v));
                let check = match (rule.reach_check, rule.negated) {
                    (Some((at, _)), false) => Some((at, &reachable as &dyn Fn(&[u8]) -> bool)),
                    _ => None,
                };
                let mut steps = SmallVec::new();
                cache.steps(
                    slot,
                    &item.value,
                    rule.chain,
                    &rules.chains,
                    &mut steps,
                    check,
                );
                // The value at the reach check when it stopped the walk: it lacks the bytes
                // the later steps need to make a filter byte, the filter's own among them.
                let stopped_at = (steps.len() < path.len()).then(|| steps.len() - 1);
                // Whether the value before the current step is known to lack every byte of
                // the rule's byte filter (see `ByteFilter::kept_out_by`).
                let mut filtered_out = false;
                for (i, (&node, &step)) in path.iter().zip(&steps).enumerate() {
                    if !h && seen != Some(step) {
                        let v = cache.step_value(step, &item.value);
                        let kept_out = stopped_at == Some(i)
                            || filtered_out
                                && rule.byte_filter.is_some_and(|f| {
                                    rules
                                        .chains
                                        .node(node)
                                        .transform
                                        .is_some_and(|t| f.kept_out_by(t))
                                });
                        let skip = kept_out
                            || absent.is_some_and(|keeping| {
                                rules.chains.mask(node) & !keeping == 0
                                    || v.eq_ignore_ascii_case(&item.value)
                            })
                            || scanned_without(cache, step, prefilter, rule.negated);
                        filtered_out = kept_out;
                        if !skip {
                            // `check`, keeping what the filter said.
                            if rule.byte_filter.is_some_and(|f| !f.may_match(v)) {
                                filtered_out = true;
                            } else {
                                let caps = want_captures.then_some(&mut *captures);
                                h = rule.operator.evaluate(v, self, caps) != rule.negated;
                            }
                        }
                    }
                    seen = Some(step);
                }
                hit = h;
                if hit && steps.len() < path.len() {
                    // MATCHED_VAR is the last step's value: compute the steps left out.
                    cache.steps(
                        slot,
                        &item.value,
                        rule.chain,
                        &rules.chains,
                        &mut steps,
                        None,
                    );
                }
                let last = steps.last().copied().flatten();
                value = Cow::Borrowed(cache.step_value(last, &item.value));
            }
            None => {
                let (h, v) = self.transform_and_check(rule, &item.value, captures);
                hit = h;
                value = v;
            }
        }
        if hit {
            hits.push_with(|name| item.write_name(name), &value);
            if want_captures {
                hit_captures.push_from(captures);
            } else {
                hit_captures.push_none();
            }
        }
    }

    /// ModSecurity runs a rule's non-disruptive actions once per matching variable, with
    /// MATCHED_VAR and TX.0.. of that variable: CRS builds per-header TX keys this way.
    fn record_matches(&mut self, rule: &Rule, hits: &PairList, captures: &HitCaptures) {
        self.matched_vars.clear();
        for (i, (name, value)) in hits.as_slice().iter().enumerate() {
            // Operators find at most ten groups (TX:0..9).
            for (name, group) in CAPTURE_NAMES.iter().zip(captures.of(i)) {
                self.set_tx(name, group);
            }
            self.matched_vars.push(name, value);
            for effect in &rule.actions.effects {
                self.apply_effect(effect);
            }
        }
    }

    /// `record_matches` for a match the constant plan decided: one variable is copied into
    /// MATCHED_VARS' existing buffers (kept from match to match and, through `scratch`,
    /// from transaction to transaction).
    fn record_decided(&mut self, rule: &Rule, vars: &crate::body::Pairs) {
        if let [_] = vars.as_slice() {
            self.copy_matched_vars(vars);
            for effect in &rule.actions.effects {
                self.apply_effect(effect);
            }
        } else {
            let mut hits = PairList::default();
            hits.assign(vars);
            self.record_matches(rule, &hits, &NO_HIT_CAPTURES);
        }
    }

    /// MATCHED_VARS := `vars`, into the buffers already there.
    pub(crate) fn copy_matched_vars(&mut self, vars: &crate::body::Pairs) {
        self.matched_vars.assign(vars);
    }

    /// Transforms a value that has no cache slot (TX, MATCHED_VAR, counts) or for a
    /// multiMatch rule, which tests the value after every transformation that changes it.
    fn transform_and_check<'v>(
        &self,
        rule: &Rule,
        original: &'v [u8],
        captures: &mut Captures,
    ) -> (bool, Cow<'v, [u8]>) {
        let want_captures = rule.actions.capture;
        let mut value: Cow<'v, [u8]> = Cow::Borrowed(original);
        let mut hit = false;
        if rule.actions.multi_match {
            hit = self.check(rule, &value, want_captures.then_some(&mut *captures));
        }
        for t in &rule.transforms {
            if t.is_noop_for(&value) {
                continue;
            }
            value = Cow::Owned(t.apply(&value));
            if rule.actions.multi_match && !hit {
                hit = self.check(rule, &value, want_captures.then_some(&mut *captures));
            }
        }
        if !rule.actions.multi_match {
            hit = self.check(rule, &value, want_captures.then_some(&mut *captures));
        }
        (hit, value)
    }

    fn check(&self, rule: &Rule, value: &[u8], captures: Option<&mut Captures>) -> bool {
        if rule.byte_filter.is_some_and(|f| !f.may_match(value)) {
            return rule.negated;
        }
        rule.operator.evaluate(value, self, captures) != rule.negated
    }
}

/// TX.0 to TX.9, the names `capture` writes (ModSecurity keeps ten).
const CAPTURE_NAMES: [&str; 10] = ["0", "1", "2", "3", "4", "5", "6", "7", "8", "9"];

/// Whether a multiMatch step's buffer was already scanned (for a gate whose chain ends at the
/// same buffer: 934100's `removeWhitespace` step is the buffer of the 942 rules' chains) and
/// lacks the rule's literals, so its regex cannot match. Never scans: scanning every step
/// cost more than the regex runs it saved.
fn scanned_without(
    cache: &crate::values::ValueCache,
    step: Option<usize>,
    prefilter: Option<(u32, &crate::prefilter::Prefilter)>,
    negated: bool,
) -> bool {
    match prefilter {
        Some((slot, p)) if !negated => cache
            .step_hits(step, p)
            .is_some_and(|bits| !crate::prefilter::has_slot(bits, slot)),
        _ => false,
    }
}

/// What a rule's evaluation carries from item to item.
struct ItemState<'r> {
    /// The transaction's value cache, moved out while items borrow the transaction.
    cache: Box<crate::values::ValueCache>,
    /// The operator's groups for the current item (the `capture` action).
    captures: &'r mut Captures,
    /// (name, transformed value) per matching item, and its captures.
    hits: &'r mut PairList,
    hit_captures: &'r mut HitCaptures,
    /// The rule's prefilter slot and the prefilter of the current target's values, when the
    /// rule has one.
    prefilter: Option<(u32, &'r crate::prefilter::Prefilter)>,
    /// Whether that prefilter depends on each value's key (`Rule::target_classes` has no
    /// class for the target): then each value asks `RuleSet::value_prefilter`.
    per_item: bool,
    /// `Chains::mask` of the rule's chain.
    chain_mask: u64,
}

/// Targets `ctl:ruleRemoveTarget*` took from this rule (chain) in this transaction.
fn removed_targets_of<'a>(
    removed: &'a [RemovedTarget],
    head: &'a Rule,
) -> impl Iterator<Item = &'a Exclusion> {
    removed.iter().filter_map(move |r| match r {
        RemovedTarget::Ids(ids, e) if crate::actions::in_ranges(ids, head.id) => Some(e),
        RemovedTarget::Tag(tag, bit, e)
            if head.actions.tag_bits & bit != 0 && head.actions.tags.contains(tag) =>
        {
            Some(e)
        }
        _ => None,
    })
}

/// The rule at `index`. Out of line on purpose: with the rule in hand, the compiler reads its
/// fields ahead of the checks that pass most rules over (a rule reference may be read
/// early), and that read is the cache miss the packed heads are there to avoid.
#[inline(never)]
fn rule_at(list: &[Entry], index: usize) -> Option<&Rule> {
    match list.get(index) {
        Some(Entry::Rule(rule)) => Some(rule),
        _ => None,
    }
}

fn has_tag(list: &[Entry], index: usize, tag: &str) -> bool {
    rule_at(list, index).is_some_and(|rule| rule.actions.tags.iter().any(|t| t == tag))
}

//! The compiled rule set: rules per phase (built from the directives by `builder`, with
//! defaults merged, chains linked, removals and target updates applied) and the shortcuts
//! worked out at load. Immutable and shared by every transaction.

use crate::actions::{Actions, Disruptive, EngineMode};
use crate::builder::Builder;
use crate::chains::{ChainId, Chains};
use crate::constant::ConstantPlan;
use crate::error::Error;
use crate::heads::Heads;
use crate::literals::required_sets;
use crate::operators::{Operator, Pattern};
use crate::parser::{self, Directive};
use crate::prefilter::Prefilter;
use crate::transforms::Transform;
use crate::value_class::ValueClasses;
use crate::values::Slot;
use crate::variables::Targets;
use std::path::Path;
use std::sync::{Arc, OnceLock};

/// A compiled SecRule or SecAction (a chain's further links hang off `chained`).
///
/// Field order is layout (`repr(C)`, aligned to a cache line), hot fields first. In the proxy
/// a request finds most of the rule set out of the CPU's caches, and every line of a rule the
/// phase loop reads is a miss: the first line holds what the loop reads for every rule it
/// evaluates or whose match it records, then come the actions (their hot part first, see
/// `Actions`), then what evaluation reads; what only the load or a log line reads is last.
/// The compiler's own order spread those reads over seven of the rule's thirteen lines;
/// measured as simulated cache misses per cold transaction (docs/BENCHMARKS.md).
#[derive(Debug)]
#[repr(C, align(64))]
pub struct Rule {
    /// 0 for chain members; their starter carries the id.
    pub id: i64,
    /// Index in its phase's entry list of the marker `skipAfter` names (the list's length
    /// when there is none after the rule: the rest of the phase is skipped).
    pub skip_after_index: Option<usize>,
    pub chained: Option<Box<Rule>>,
    /// This rule's bit in the prefilter, when its regex has required literals (or it is @pm).
    pub prefilter_slot: Option<u32>,
    /// The set of (target, chain) unions whose prefilter bits decide whether this rule can
    /// match at all in a transaction (an index in `RuleSet::gate_sets`); `None` when it is
    /// always evaluated.
    pub gate_set: Option<u32>,
    /// `transforms` interned in [`RuleSet::chains`].
    pub chain: ChainId,
    pub phase: u8,
    pub negated: bool,
    pub log: bool,
    /// SecAction: no targets, always matches once.
    pub unconditional: bool,
    /// The regex group this rule's regex is searched in first (see `rx_groups`).
    pub(crate) rx_group: Option<u8>,
    pub actions: Actions,
    pub disruptive: Disruptive,
    pub targets: Targets,
    /// A value as collected that holds none of these bytes cannot match: the operator
    /// needs a byte no step of the chain can bring (see `reach::value_needs`).
    pub(crate) needs: Option<crate::reach::ByteSet>,
    /// With a gate set: each target's gate, in the targets' order (see `evaluate_link`).
    pub(crate) target_gates: Vec<u32>,
    /// Per target, the value class of every value it yields (`ValueClasses::class_of_var`),
    /// `None` where it depends on each member's key; empty without a prefilter slot.
    pub(crate) target_classes: Vec<Option<u8>>,
    /// With `needs`: per target, its id among the targets whose bytes a transaction
    /// summarizes (see `byte_summary`), `None` where it has none.
    pub(crate) byte_targets: Vec<Option<u32>>,
    pub operator: Operator,
    /// `@contains` answered on the value as collected (see `folded_contains`).
    pub(crate) folded_contains: Option<crate::folded_contains::FoldedContains>,
    /// Punctuation one of which every match of a multiMatch rule's regex holds, checked
    /// before searching a step of its chain (see `byte_filter`).
    pub(crate) byte_filter: Option<crate::byte_filter::ByteFilter>,
    /// With a byte filter: the index in the chain's path of the step after which the steps
    /// left are computed only if that step's value holds one of the bytes given with it
    /// (see `reach::check_point`).
    pub(crate) reach_check: Option<(usize, crate::reach::ByteSet)>,
    /// For a multiMatch regex rule: the transformations (`Chains::mask`) before a
    /// base64Decode after which no step lengthens a value, and how many alphabet bytes a
    /// value must start with there to decode to the regex's shortest match; one that does
    /// not cannot match from the decoding on (see `length_bound`).
    pub(crate) length_check: Option<(u64, usize)>,
    /// The operator as written, for log lines.
    pub operator_text: String,
    pub transforms: Vec<Transform>,
    pub file: Arc<Path>,
    pub line: usize,
}

#[derive(Debug)]
pub enum Entry {
    Rule(Box<Rule>),
    Marker(String),
}

/// A loaded SecLang configuration.
#[derive(Debug)]
pub struct RuleSet {
    /// Index 0 is phase 1.
    pub phases: [Vec<Entry>; 5],
    pub engine: EngineMode,
    pub request_body_access: bool,
    pub response_body_access: bool,
    pub request_body_limit: usize,
    /// `SecRequestBodyLimitAction Reject` (413) or ProcessPartial.
    pub request_body_limit_reject: bool,
    /// SecResponseBodyLimitAction Reject (the default) rather than ProcessPartial.
    pub response_body_limit_reject: bool,
    pub response_body_limit: usize,
    /// SecArgumentsLimit: most arguments a request body may hold (default 1000, as Coraza
    /// and ModSecurity's recommended configuration); more make REQBODY_ERROR.
    pub arguments_limit: usize,
    pub response_mime_types: Vec<String>,
    pub component_signatures: Vec<String>,
    /// Ids of rules whose regex needed `fancy-regex` (lookaround, backreferences).
    pub fancy_regex_rules: Vec<i64>,
    /// Disruptive action of SecDefaultAction per phase, for `block`.
    pub default_disruptive: [Disruptive; 5],
    /// Every transformation chain the rules use (and their prefixes).
    pub chains: Chains,
    /// One scan over the literals of every prefiltered rule.
    pub(crate) prefilter: Option<Prefilter>,
    /// Narrower scans for values only some prefiltered rules read (see `value_class`).
    pub(crate) value_classes: ValueClasses,
    /// Per transformation (`Transform as usize`), a scan over the literals of the rules
    /// whose chain has it, for the buffers it makes (see `values::Scans`); `None` where that
    /// would look for more than a quarter of the full prefilter's literals. The form POST's
    /// ~200 removeWhitespace copies were scanned for all 6,498 literals (CRS at PL1 with
    /// base.conf), for the rules with that step, which have 632.
    pub(crate) made_by_prefilters: Vec<Option<Prefilter>>,
    /// The targets of rules with needed bytes, by byte target id (see `byte_summary`).
    pub(crate) byte_targets: Vec<crate::variables::Target>,
    /// The (target, chain) pairs rules are gated on, indexed by gate id.
    pub(crate) gates: Vec<crate::gates::GateDef>,
    /// Per gate id, the bytes its rules need and its target's byte target id (see
    /// `gate_bytes`).
    pub(crate) gate_bytes: crate::gate_bytes::GateBytes,
    /// Per gate id, what its union's computation reads first (see `GateKey`).
    pub(crate) gate_keys: Vec<crate::gates::GateKey>,
    /// Per gate target id, whether some gate on it transforms (see `gates::summarize`).
    pub(crate) transformed_targets: Vec<bool>,
    /// The distinct gate lists of rules, by set id: rules on the same targets and chain
    /// share one OR of their unions per transaction (see `gates`).
    pub(crate) gate_sets: Vec<Box<[u32]>>,
    /// Per gate set, whether more than one rule link is gated on it: only then does making
    /// the OR of its unions pay (see `gates`).
    pub(crate) shared_gate_sets: Vec<bool>,
    /// Literal-free regexes searched together (see `rx_groups`).
    pub(crate) rx_groups: crate::rx_groups::RxGroups,
    /// The phase loop's packed view of `phases` (see `heads`).
    pub(crate) heads: Heads,
    /// Runs of gated rules checked together (see `gate_runs`).
    pub(crate) gate_runs: crate::gate_runs::GateRuns,
    /// What a transaction's gate cache forgets when REQUEST_BODY appears empty at phase 2
    /// (see `dependents`).
    pub(crate) request_body_readers: crate::dependents::Dependents,
    /// Worked out on the first transaction (it runs rules on a probe transaction).
    pub(crate) constant_plan: OnceLock<ConstantPlan>,
    /// Finished transactions' working memory, for the next ones (see `scratch`).
    pub(crate) scratch: crate::scratch::ScratchPool,
    /// False for a set built by [`RuleSet::from_str_without_shortcuts`].
    pub(crate) shortcuts: bool,
}

impl RuleSet {
    pub fn from_file(path: &Path) -> Result<RuleSet, Error> {
        RuleSet::from_directives(parser::parse_file(path)?)
    }

    /// `origin` names the text in errors and anchors relative `Include`s and data files.
    pub fn from_str(text: &str, origin: &Path) -> Result<RuleSet, Error> {
        RuleSet::from_directives(parser::parse_str(text, origin)?)
    }

    pub fn from_directives(directives: Vec<Directive>) -> Result<RuleSet, Error> {
        Builder::default().build(directives)
    }

    /// The rules of `text` evaluated without any of the shortcuts worked out at load: no
    /// prefilter, gates or value classes, no byte filters, needed bytes, length bounds or
    /// folded `@contains`, no regex groups and no constant plan. Every rule reads every
    /// value of its targets and runs its operator, as the rules are written. It exists to
    /// check the shortcuts: the same requests must match the same rules either way (the
    /// CRS corpus test and the `request_variables` fuzz target compare the two).
    pub fn from_str_without_shortcuts(text: &str, origin: &Path) -> Result<RuleSet, Error> {
        Builder::without_shortcuts().build(parser::parse_str(text, origin)?)
    }

    pub fn rule_count(&self) -> usize {
        self.phases
            .iter()
            .flatten()
            .filter(|e| matches!(e, Entry::Rule(_)))
            .count()
    }
}

impl RuleSet {
    /// Gives every rule (chain links included) its chain id, every @rx rule with required
    /// literals and every @pm rule a slot in the prefilter, and every rule that can be
    /// skipped on the prefilter's word its gates (see `gates`). multiMatch rules get a slot
    /// but no gates: they test the value after every step of their chain, and a union over
    /// every prefix (base64Decode and all) cost more to scan than their regexes (measured).
    /// Returns, per prefilter slot, whether ordinary words meet its literal sets
    /// (`literals::met_by_words`: the slot gates almost nothing).
    pub(crate) fn intern_chains(&mut self) -> Vec<bool> {
        let mut literal_sets: Vec<Vec<Vec<Vec<u8>>>> = Vec::new();
        // Per slot, the rule's targets: which values its bit is read for.
        let mut slot_targets: Vec<Vec<crate::variables::Target>> = Vec::new();
        let mut gates = crate::gates::GateTable::default();
        let mut byte_targets = crate::byte_summary::ByteTargets::default();
        let mut weak_slots = Vec::new();
        // Per slot, the transformations of its rule's chain (`Chains::mask`).
        let mut slot_masks: Vec<u64> = Vec::new();
        for entry in self.phases.iter_mut().flatten() {
            let Entry::Rule(head) = entry else { continue };
            let mut link: Option<&mut Rule> = Some(head);
            while let Some(rule) = link {
                rule.chain = self.chains.intern(&rule.transforms);
                rule.folded_contains = crate::folded_contains::FoldedContains::plan(rule);
                rule.byte_filter = match &rule.operator {
                    Operator::Rx(Pattern::Bytes(re))
                        if rule.actions.multi_match && !rule.negated =>
                    {
                        crate::byte_filter::ByteFilter::of_regex(re.as_str())
                    }
                    _ => None,
                };
                rule.reach_check = rule
                    .byte_filter
                    .and_then(|f| crate::reach::check_point(&self.chains, rule.chain, &f.bytes()));
                rule.length_check = match &rule.operator {
                    Operator::Rx(Pattern::Bytes(re))
                        if rule.actions.multi_match && !rule.negated =>
                    {
                        crate::length_bound::regex_min_len(re.as_str()).and_then(|min| {
                            let before =
                                crate::length_bound::before_decoding(&self.chains, rule.chain)?;
                            Some((before, crate::decode::base64_chars_for(min)))
                        })
                    }
                    _ => None,
                };
                rule.needs = crate::reach::operator_needs(&rule.operator)
                    .filter(|_| !rule.negated)
                    .and_then(|w| crate::reach::value_needs(&self.chains, rule.chain, &w));
                if rule.needs.is_some() {
                    rule.byte_targets = byte_targets.assign(&rule.targets);
                }
                let literals = match &rule.operator {
                    Operator::Rx(Pattern::Bytes(re)) => {
                        Some(required_sets(re.as_str())).filter(|sets| !sets.is_empty())
                    }
                    // @pm matches exactly when one of its phrases occurs (ASCII case
                    // folded, as the prefilter searches).
                    Operator::Pm(set) if set.phrases().iter().all(|p| !p.is_empty()) => {
                        Some(vec![set.phrases().to_vec()])
                    }
                    _ => None,
                };
                if let Some(lits) = literals {
                    rule.prefilter_slot = u32::try_from(literal_sets.len()).ok();
                    weak_slots.push(crate::literals::met_by_words(&lits));
                    literal_sets.push(lits);
                    slot_masks.push(self.chains.mask(rule.chain));
                    slot_targets.push(rule.targets.targets.clone());
                    if !rule.negated && !rule.actions.multi_match {
                        if let Some((set, per_target)) = gates.assign(&rule.targets, rule.chain) {
                            rule.gate_set = Some(set);
                            rule.target_gates = per_target;
                        }
                    } else if !rule.negated
                        && crate::reach::no_step_writes_anything(&self.chains, rule.chain)
                    {
                        // multiMatch: gated on every step's values, when no step can make
                        // a value unlike its input (a decoded base64 would be scanned for
                        // every argument, costing more than the rule).
                        let path = self.chains.path(rule.chain).to_vec();
                        rule.gate_set = gates.assign_each_step(&rule.targets, &path);
                    }
                }
                link = rule.chained.as_deref_mut();
            }
        }
        self.prefilter = Prefilter::build(&literal_sets);
        if let Some(full) = &self.prefilter {
            let targets: Vec<&[crate::variables::Target]> =
                slot_targets.iter().map(Vec::as_slice).collect();
            self.value_classes = ValueClasses::build(&targets, &literal_sets, full);
            self.made_by_prefilters = (0..Transform::COUNT)
                .map(|t| {
                    let has = |slot: usize| slot_masks.get(slot).is_some_and(|m| m >> t & 1 != 0);
                    Prefilter::build_for(&literal_sets, has)
                        .filter(|p| p.literal_count() * 4 <= full.literal_count())
                })
                .collect();
            for entry in self.phases.iter_mut().flatten() {
                let Entry::Rule(head) = entry else { continue };
                let mut link: Option<&mut Rule> = Some(head);
                while let Some(rule) = link {
                    if rule.prefilter_slot.is_some() {
                        let classes = &self.value_classes;
                        rule.target_classes = (rule.targets.targets.iter())
                            .map(|t| classes.class_of_var(t.var))
                            .collect();
                    }
                    link = rule.chained.as_deref_mut();
                }
            }
        }
        if self.prefilter.is_none() {
            // No prefilter (no literals, or it could not be built): nothing may be gated.
            for entry in self.phases.iter_mut().flatten() {
                let Entry::Rule(head) = entry else { continue };
                let mut link: Option<&mut Rule> = Some(head);
                while let Some(rule) = link {
                    rule.prefilter_slot = None;
                    rule.gate_set = None;
                    rule.target_gates = Vec::new();
                    link = rule.chained.as_deref_mut();
                }
            }
        }
        (self.gates, self.gate_sets) = gates.into_parts();
        self.gate_bytes = crate::gate_bytes::build(
            &self.phases,
            &self.gates,
            &self.gate_sets,
            &self.chains,
            &mut byte_targets,
        );
        self.byte_targets = byte_targets.into_targets();
        self.shared_gate_sets = shared_sets(&self.phases, self.gate_sets.len());
        self.gate_keys = crate::gates::GateKey::of(&self.gates, &self.chains);
        self.transformed_targets = crate::gates::GateKey::transformed_targets(&self.gate_keys);
        weak_slots
    }

    /// `intern_chains` without the shortcuts: only each link's chain id.
    pub(crate) fn intern_chains_only(&mut self) {
        for entry in self.phases.iter_mut().flatten() {
            let Entry::Rule(head) = entry else { continue };
            let mut link: Option<&mut Rule> = Some(head);
            while let Some(rule) = link {
                rule.chain = self.chains.intern(&rule.transforms);
                link = rule.chained.as_deref_mut();
            }
        }
    }

    pub(crate) fn resolve_skip_after(&mut self) {
        for list in &mut self.phases {
            let markers: Vec<(usize, String)> = list
                .iter()
                .enumerate()
                .filter_map(|(i, e)| match e {
                    Entry::Marker(name) => Some((i, name.clone())),
                    Entry::Rule(_) => None,
                })
                .collect();
            let len = list.len();
            for (i, entry) in list.iter_mut().enumerate() {
                let Entry::Rule(rule) = entry else { continue };
                if let Some(name) = &rule.actions.skip_after {
                    let to = markers
                        .iter()
                        .find(|(at, m)| *at > i && m == name)
                        .map_or(len, |(at, _)| *at);
                    rule.skip_after_index = Some(to);
                }
            }
        }
    }

    /// How many @rx rule links have a prefilter slot, of how many @rx rule links.
    pub fn prefiltered_rx(&self) -> (usize, usize) {
        let (mut with, mut all) = (0, 0);
        for rule in links(self.phases.iter().flatten()) {
            if matches!(rule.operator, Operator::Rx(_)) {
                all += 1;
                with += usize::from(rule.prefilter_slot.is_some());
            }
        }
        (with, all)
    }

    /// How many regex groups (see `rx_groups`) the rule set has, and how many rule links
    /// search one first.
    pub fn regex_groups(&self) -> (usize, usize) {
        let members = links(self.phases.iter().flatten())
            .filter(|rule| rule.rx_group.is_some())
            .count();
        (self.rx_groups.len(), members)
    }

    pub(crate) fn prefilter(&self) -> Option<&Prefilter> {
        self.prefilter.as_ref()
    }

    /// The prefilter that scans the value in `slot` (key `key` in its collection).
    #[inline]
    pub(crate) fn value_prefilter(&self, slot: Slot, key: &str) -> Option<&Prefilter> {
        let full = self.prefilter.as_ref()?;
        Some(self.value_classes.prefilter(full, slot, key))
    }

    /// The scans of the value in `slot` and of the buffers transformations make of it.
    #[inline]
    pub(crate) fn value_scans(&self, slot: Slot, key: &str) -> Option<crate::values::Scans<'_>> {
        Some(crate::values::Scans {
            class: self.value_prefilter(slot, key)?,
            made_by: &self.made_by_prefilters,
        })
    }

    pub(crate) fn constant_plan(self: &Arc<Self>) -> &ConstantPlan {
        self.constant_plan.get_or_init(|| ConstantPlan::build(self))
    }

    /// How much of the rule set is worked out once rather than per request (see
    /// `constant`): the phase-1 entries the constant block covers, and the rules whose match
    /// is decided.
    pub fn constant_rules(self: &Arc<Self>) -> (usize, usize) {
        self.constant_plan().summary()
    }
}

/// Every rule link of `entries`: each rule, then the links chained to it, in order.
pub(crate) fn links<'a>(
    entries: impl IntoIterator<Item = &'a Entry>,
) -> impl Iterator<Item = &'a Rule> {
    entries.into_iter().flat_map(|entry| {
        let mut link = match entry {
            Entry::Rule(rule) => Some(&**rule),
            Entry::Marker(_) => None,
        };
        std::iter::from_fn(move || {
            let this = link?;
            link = this.chained.as_deref();
            Some(this)
        })
    })
}

/// Per gate set, whether two or more rule links are gated on it.
fn shared_sets(phases: &[Vec<Entry>; 5], sets: usize) -> Vec<bool> {
    let mut users = vec![0_u32; sets];
    for rule in links(phases.iter().flatten()) {
        if let Some(n) = rule.gate_set.and_then(|s| users.get_mut(s as usize)) {
            *n += 1;
        }
    }
    users.into_iter().map(|n| n > 1).collect()
}

//! Building a rule set from parsed directives: engine settings, SecDefaultAction per phase,
//! SecRule/SecAction with their defaults merged and chains linked, markers, removals
//! (SecRuleRemoveById/ByTag) and target updates (SecRuleUpdateTargetById/ByTag, retried at the
//! end for rules defined later). The shortcuts worked out afterwards are `RuleSet`'s (rules.rs).

use crate::actions::{in_ranges, parse_id_ranges, Actions, Disruptive, EngineMode};
use crate::chains::{Chains, EMPTY_CHAIN};
use crate::error::Error;
use crate::heads::Heads;
use crate::operators::Operator;
use crate::parser::Directive;
use crate::prefilter::Prefilter;
use crate::rules::{Entry, Rule, RuleSet};
use crate::transforms::Transform;
use crate::value_class::ValueClasses;
use crate::variables::Targets;
use std::path::Path;
use std::sync::OnceLock;

#[derive(Debug, Clone)]
struct DefaultAction {
    transforms: Vec<Transform>,
    log: bool,
    disruptive: Disruptive,
}

impl Default for DefaultAction {
    fn default() -> Self {
        DefaultAction {
            transforms: Vec::new(),
            log: true,
            disruptive: Disruptive::Pass,
        }
    }
}

pub(crate) struct Builder {
    defaults: [DefaultAction; 5],
    /// Rules in definition order; a chain is one entry.
    rules: Vec<Entry>,
    /// The chain being built: index in `rules`, depth.
    open_chain: Option<usize>,
    pending_updates: Vec<(Directive, bool)>,
    /// Whether the load works out the evaluation shortcuts (see
    /// `RuleSet::from_str_without_shortcuts`).
    shortcuts: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            defaults: Default::default(),
            rules: Vec::new(),
            open_chain: None,
            pending_updates: Vec::new(),
            shortcuts: true,
        }
    }
}

fn on_off(d: &Directive) -> Result<bool, Error> {
    match d.args.first().map(|s| s.to_ascii_lowercase()).as_deref() {
        Some("on") => Ok(true),
        Some("off") => Ok(false),
        _ => Err(d.error(format!("{} expects On or Off", d.name))),
    }
}

/// A body limit action: true for Reject, false for ProcessPartial.
fn reject(d: &Directive) -> Result<bool, Error> {
    match d.args.first().map(|s| s.to_ascii_lowercase()).as_deref() {
        Some("reject") => Ok(true),
        Some("processpartial") => Ok(false),
        _ => Err(d.error(format!("{}: Reject or ProcessPartial", d.name))),
    }
}

impl Builder {
    /// See `RuleSet::from_str_without_shortcuts`.
    pub(crate) fn without_shortcuts() -> Builder {
        Builder {
            shortcuts: false,
            ..Builder::default()
        }
    }

    pub(crate) fn build(mut self, directives: Vec<Directive>) -> Result<RuleSet, Error> {
        let mut set = RuleSet {
            phases: Default::default(),
            engine: EngineMode::On,
            request_body_access: false,
            response_body_access: false,
            request_body_limit: 13_107_200,
            request_body_limit_reject: true,
            response_body_limit_reject: true,
            response_body_limit: 524_288,
            arguments_limit: 1000,
            response_mime_types: vec!["text/plain".into(), "text/html".into()],
            component_signatures: Vec::new(),
            fancy_regex_rules: Vec::new(),
            default_disruptive: Default::default(),
            chains: Chains::default(),
            prefilter: None,
            value_classes: ValueClasses::default(),
            made_by_prefilters: Vec::new(),
            byte_targets: Vec::new(),
            gates: Vec::new(),
            gate_bytes: Vec::new(),
            gate_keys: Vec::new(),
            transformed_targets: Vec::new(),
            gate_sets: Vec::new(),
            shared_gate_sets: Vec::new(),
            rx_groups: Default::default(),
            heads: Heads::default(),
            gate_runs: Default::default(),
            request_body_readers: Default::default(),
            constant_plan: OnceLock::new(),
            scratch: Default::default(),
            shortcuts: true,
        };
        for d in directives {
            let arg0 = d.args.first().map(String::as_str).unwrap_or("");
            match d.name.to_ascii_lowercase().as_str() {
                "secrule" => self.rule(&d, false)?,
                "secaction" => self.rule(&d, true)?,
                "secmarker" => {
                    self.check_no_open_chain(&d)?;
                    self.rules.push(Entry::Marker(arg0.to_string()));
                }
                "secdefaultaction" => self.default_action(&d)?,
                "secruleengine" => {
                    set.engine =
                        EngineMode::parse(arg0).ok_or_else(|| d.error("bad SecRuleEngine"))?
                }
                "secrequestbodyaccess" => set.request_body_access = on_off(&d)?,
                "secresponsebodyaccess" => set.response_body_access = on_off(&d)?,
                "secrequestbodylimit" | "secrequestbodynofileslimit" => {
                    set.request_body_limit = arg0
                        .parse()
                        .map_err(|_| d.error("bad SecRequestBodyLimit"))?
                }
                "secargumentslimit" => {
                    set.arguments_limit =
                        arg0.parse().map_err(|_| d.error("bad SecArgumentsLimit"))?
                }
                "secresponsebodylimit" => {
                    set.response_body_limit = arg0
                        .parse()
                        .map_err(|_| d.error("bad SecResponseBodyLimit"))?
                }
                "secrequestbodylimitaction" => set.request_body_limit_reject = reject(&d)?,
                "secresponsebodylimitaction" => set.response_body_limit_reject = reject(&d)?,
                "secresponsebodymimetype" => set.response_mime_types = d.args.clone(),
                "seccomponentsignature" => set.component_signatures.push(arg0.to_string()),
                "secruleremovebyid" => {
                    let ranges = parse_id_ranges(&d.args.join(" ")).map_err(|m| d.error(m))?;
                    self.rules
                        .retain(|e| !matches!(e, Entry::Rule(r) if in_ranges(&ranges, r.id)));
                }
                "secruleremovebytag" => {
                    self.rules.retain(|e| !matches!(e, Entry::Rule(r) if r.actions.tags.iter().any(|t| t == arg0)));
                }
                "secruleupdatetargetbyid" => self.update_targets(&d, false, true)?,
                "secruleupdatetargetbytag" => self.update_targets(&d, true, true)?,
                _ => return Err(d.error(format!("unsupported directive {}", d.name))),
            }
        }
        if let Some(i) = self.open_chain {
            let (file, line) = match &self.rules[i] {
                Entry::Rule(r) => (r.file.to_path_buf(), r.line),
                Entry::Marker(_) => (Default::default(), 0),
            };
            return Err(Error::new(
                file,
                line,
                "chain action on the last rule: nothing to chain",
            ));
        }
        for (d, by_tag) in std::mem::take(&mut self.pending_updates) {
            self.update_targets(&d, by_tag, false)?;
        }
        for (i, d) in self.defaults.iter().enumerate() {
            set.default_disruptive[i] = d.disruptive.clone();
        }
        for entry in self.rules {
            match entry {
                Entry::Marker(name) => {
                    for phase in &mut set.phases {
                        phase.push(Entry::Marker(name.clone()));
                    }
                }
                Entry::Rule(rule) => {
                    let mut r: Option<&Rule> = Some(&rule);
                    while let Some(x) = r {
                        if let Operator::Rx(p) = &x.operator {
                            if p.is_fancy() {
                                set.fancy_regex_rules.push(rule.id);
                            }
                        }
                        r = x.chained.as_deref();
                    }
                    let index = usize::from(rule.phase.clamp(1, 5) - 1);
                    set.phases[index].push(Entry::Rule(rule));
                }
            }
        }
        set.shortcuts = self.shortcuts;
        if self.shortcuts {
            let weak_slots = set.intern_chains();
            set.rx_groups = crate::rx_groups::RxGroups::build(&mut set.phases, &weak_slots);
        } else {
            set.intern_chains_only();
        }
        set.resolve_skip_after();
        set.heads = Heads::build(&set.phases);
        let words = set.prefilter().map_or(0, Prefilter::words);
        set.gate_runs =
            crate::gate_runs::GateRuns::build(&set.heads, &set.gate_sets, &set.gate_keys, words);
        set.request_body_readers =
            crate::dependents::Dependents::of(crate::variables::VarName::RequestBody, &set);
        Ok(set)
    }

    fn check_no_open_chain(&self, d: &Directive) -> Result<(), Error> {
        if self.open_chain.is_some() {
            return Err(d.error(format!("{} inside a rule chain", d.name)));
        }
        Ok(())
    }

    fn default_action(&mut self, d: &Directive) -> Result<(), Error> {
        let a = Actions::parse(d.args.first().map(String::as_str).unwrap_or(""))
            .map_err(|m| d.error(m))?;
        let phase = a
            .phase
            .ok_or_else(|| d.error("SecDefaultAction needs a phase"))?;
        let disruptive = a.disruptive.clone().unwrap_or(Disruptive::Pass);
        if disruptive == Disruptive::Block {
            return Err(d.error("SecDefaultAction cannot use block"));
        }
        self.defaults[usize::from(phase - 1)] = DefaultAction {
            transforms: a.transforms,
            log: a.log.unwrap_or(true),
            disruptive,
        };
        Ok(())
    }

    fn rule(&mut self, d: &Directive, is_action: bool) -> Result<(), Error> {
        let (targets, op_text, action_text) = if is_action {
            match d.args.as_slice() {
                [a] => (Targets::default(), String::new(), a.as_str()),
                [] => (Targets::default(), String::new(), ""),
                _ => return Err(d.error("SecAction takes one argument")),
            }
        } else {
            match d.args.as_slice() {
                [t, o] => (Targets::parse(t).map_err(|m| d.error(m))?, o.clone(), ""),
                [t, o, a] => (
                    Targets::parse(t).map_err(|m| d.error(m))?,
                    o.clone(),
                    a.as_str(),
                ),
                _ => return Err(d.error("SecRule takes variables, operator and actions")),
            }
        };
        let actions = Actions::parse(action_text).map_err(|m| d.error(m))?;
        let dir = d.file.parent().unwrap_or_else(|| Path::new("."));
        let (operator, negated) = if is_action {
            (Operator::UnconditionalMatch, false)
        } else {
            Operator::parse(&op_text, dir).map_err(|m| d.error(m))?
        };
        let in_chain = self.open_chain.is_some();
        let phase = if in_chain {
            0
        } else {
            actions.phase.unwrap_or(2)
        };
        let defaults = if in_chain {
            DefaultAction::default()
        } else {
            self.defaults[usize::from(phase - 1)].clone()
        };
        let mut transforms = if actions.transforms_reset {
            Vec::new()
        } else {
            defaults.transforms
        };
        transforms.extend(actions.transforms.iter().copied());
        if !in_chain && actions.id.is_none() {
            return Err(d.error("rule has no id"));
        }
        let rule = Rule {
            id: if in_chain { 0 } else { actions.id.unwrap_or(0) },
            phase,
            targets,
            operator,
            negated,
            operator_text: op_text,
            transforms,
            chain: EMPTY_CHAIN,
            skip_after_index: None,
            prefilter_slot: None,
            gate_set: None,
            target_gates: Vec::new(),
            byte_filter: None,
            reach_check: None,
            length_check: None,
            needs: None,
            byte_targets: Vec::new(),
            rx_group: None,
            folded_contains: None,
            target_classes: Vec::new(),
            log: actions.log.unwrap_or(defaults.log),
            disruptive: actions.disruptive.clone().unwrap_or(defaults.disruptive),
            chained: None,
            file: d.file.clone(),
            line: d.line,
            unconditional: is_action,
            actions,
        };
        let opens_chain = rule.actions.chain;
        match self.open_chain {
            Some(i) => {
                let Some(Entry::Rule(head)) = self.rules.get_mut(i) else {
                    return Err(d.error("internal: chain head missing"));
                };
                let mut slot = &mut head.chained;
                while let Some(next) = slot {
                    slot = &mut next.chained;
                }
                *slot = Some(Box::new(rule));
                if !opens_chain {
                    self.open_chain = None;
                }
            }
            None => {
                self.rules.push(Entry::Rule(Box::new(rule)));
                if opens_chain {
                    self.open_chain = Some(self.rules.len() - 1);
                }
            }
        }
        Ok(())
    }

    /// SecRuleUpdateTargetById/ByTag. ModSecurity applies them to rules defined so far; CRS
    /// files sometimes update a rule that a later file defines, so misses are retried at the end.
    fn update_targets(
        &mut self,
        d: &Directive,
        by_tag: bool,
        first_try: bool,
    ) -> Result<(), Error> {
        let (key, spec) = match d.args.as_slice() {
            [k, s] | [k, s, _] => (k.as_str(), s.as_str()),
            _ => return Err(d.error(format!("{} takes a rule and targets", d.name))),
        };
        let ranges = if by_tag {
            Vec::new()
        } else {
            parse_id_ranges(key).map_err(|m| d.error(m))?
        };
        let mut found = false;
        for e in &mut self.rules {
            if let Entry::Rule(r) = e {
                let hit = if by_tag {
                    r.actions.tags.iter().any(|t| t == key)
                } else {
                    in_ranges(&ranges, r.id)
                };
                if hit {
                    r.targets.add(spec).map_err(|m| d.error(m))?;
                    found = true;
                }
            }
        }
        if !found && first_try {
            self.pending_updates.push((d.clone(), by_tag));
        }
        Ok(())
    }
}

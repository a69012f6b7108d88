//! Regex groups: literal-free regexes over the same values, searched together once per value.
//!
//! A regex the prefilter cannot gate (no literal every match needs, or only sets of literals
//! that ordinary words contain, such as single letters) runs on every value its rule reads. CRS's Unix command rules (932230, 932235, 932250, 932260 at paranoia level 1,
//! more above it) are such regexes: they put an evasion class (`["'\)\[\x5c]*`) between any
//! two letters of each command, and each reads every argument, argument name and cookie
//! unchanged. Searching one value for the alternation of all of them costs about what one of
//! them costs (the lazy DFA walks the value once either way; measured), and most values match
//! none: then every rule of the group is answered for that value by one search. When the
//! alternation matches, each rule still runs its own regex (for its own answer and captures).
//!
//! Rules group by transformation chain and targets: the answer is kept per (value, group) in
//! the value cache, so a group has one chain, and rules that read the same values are the ones
//! that ask about the same values. Membership changes only the cost: the alternation matches
//! whenever one of its members would, so a member's "no" is exact and any "yes" is rechecked.
//!
//! Per transaction, a group whose targets hold only stable values is also answered whole
//! (`Transaction::group_may_match`): once every value of its targets has said "no", each
//! further member is passed over without walking those values again (three of the four Unix
//! rules each walked the ~400 argument names and values of the benchmark's form POST just to
//! read the cached "no"). Exclusions and `ctl:ruleRemoveTarget*` only take values away, so
//! the answer over the targets as written holds for every member.

use crate::chains::ChainId;
use crate::collections::Items;
use crate::operators::{Operator, Pattern};
use crate::rules::{Entry, Rule};
use crate::transaction::Transaction;
use std::collections::HashMap;

/// Answers fit the value cache's memo word: two bits per group.
pub(crate) const MAX_GROUPS: usize = 16;

/// The alternation of each group's regexes, indexed by group number.
#[derive(Debug, Default)]
pub(crate) struct RxGroups {
    unions: Vec<regex::bytes::Regex>,
    /// Per group, whether its targets' values stay put during a phase (no TX, MATCHED_*
    /// or count), so that `Transaction::group_may_match` may answer for all of them.
    closable: Vec<bool>,
}

impl RxGroups {
    /// Finds the groups among `phases`' rules and sets each member's `rx_group`. A group
    /// whose alternation does not compile (past the size limits) is left out: its rules
    /// search alone, as before.
    /// `weak_slots[slot]`: whether prefilter slot `slot` lets ordinary words through.
    pub fn build(phases: &mut [Vec<Entry>], weak_slots: &[bool]) -> RxGroups {
        // Candidate keys (chain, targets) in first-seen order with their distinct patterns,
        // and per rule link in walk order the index of its key, if it is a candidate.
        let mut keys: HashMap<(ChainId, String), usize> = HashMap::new();
        let mut members: Vec<Vec<String>> = Vec::new();
        let mut stable: Vec<bool> = Vec::new();
        let mut link_keys: Vec<Option<usize>> = Vec::new();
        for_each_link(phases, &mut |rule| {
            let key = candidate(rule, weak_slots).map(|pattern| {
                let key = (rule.chain, format!("{:?}", rule.targets.targets));
                let next = members.len();
                let at = *keys.entry(key).or_insert(next);
                if at == next {
                    members.push(Vec::new());
                    stable.push(
                        rule.targets
                            .targets
                            .iter()
                            .all(|t| !t.count && crate::gates::stable(t.var)),
                    );
                }
                if let Some(patterns) = members.get_mut(at) {
                    if !patterns.iter().any(|p| p == pattern) {
                        patterns.push(pattern.to_owned());
                    }
                }
                at
            });
            link_keys.push(key);
        });
        // Per key, its group number when its patterns form one.
        let mut numbers: Vec<Option<u8>> = vec![None; members.len()];
        let mut unions = Vec::new();
        let mut closable = Vec::new();
        for ((patterns, number), &stable) in members.iter().zip(&mut numbers).zip(&stable) {
            if patterns.len() < 2 {
                continue;
            }
            if unions.len() == MAX_GROUPS {
                break;
            }
            let Some(union) = alternation(patterns) else {
                continue;
            };
            if let Ok(n) = u8::try_from(unions.len()) {
                *number = Some(n);
                unions.push(union);
                closable.push(stable);
            }
        }
        let mut links = link_keys.into_iter();
        for_each_link(phases, &mut |rule| {
            let key = links.next().flatten();
            rule.rx_group = key.and_then(|k| numbers.get(k).copied().flatten());
        });
        RxGroups { unions, closable }
    }

    /// Whether any regex of group `group` matches `value`.
    pub fn may_match(&self, group: u8, value: &[u8]) -> bool {
        self.unions
            .get(usize::from(group))
            .is_none_or(|re| re.is_match(value))
    }

    pub fn len(&self) -> usize {
        self.unions.len()
    }
}

impl Transaction {
    /// False when group `group` (of which `rule` is a member) has answered "no" for every
    /// value of the group's targets since those values last changed: then `rule` cannot
    /// match. Answers are those the value cache keeps per value, computed here for the
    /// values no member has asked about yet; the walk stops at the first "yes".
    pub(crate) fn group_may_match(&mut self, rule: &Rule, group: u8) -> bool {
        let closable = self.rules.rx_groups.closable.get(usize::from(group));
        if !closable.copied().unwrap_or(false) {
            return true;
        }
        if let Some(known) = self.gate_cache.group_answer(group) {
            return known;
        }
        // Held apart from `self` only while the values are walked (once per group and
        // phase), not on the members' every call.
        let rules = std::sync::Arc::clone(&self.rules);
        let mut cache = self.values.take().unwrap_or_default();
        let chains = rules.chains.len();
        let mut may_match = false;
        // Whether `item` may match; the answer is cached per value. A value without a cache
        // slot keeps no answer: it counts as "may match", left to the members.
        let mut ask = |item: &crate::collections::Item<'_>| {
            let Some(slot) = item.slot else {
                return true;
            };
            cache.group_answer(slot, chains, group).unwrap_or_else(|| {
                let (v, _) = cache.get(slot, &item.value, rule.chain, &rules.chains, None);
                let answer = rules.rx_groups.may_match(group, v);
                cache.set_group_answer(slot, chains, group, answer);
                answer
            })
        };
        for target in &rule.targets.targets {
            if may_match {
                break;
            }
            if Transaction::visitable(target) {
                self.visit(target, &[], &mut |item| {
                    may_match = may_match || ask(&item);
                });
            } else {
                let mut items = Items::new();
                self.collect(target, &[], &mut items);
                may_match = items.iter().any(&mut ask);
            }
        }
        self.values = Some(cache);
        self.gate_cache.set_group_answer(group, may_match);
        may_match
    }
}

/// The regex of a rule that can join a group: a plain `@rx` (not negated: its "no" would be
/// a match) that the prefilter does not gate (no slot, or one that ordinary words meet), and
/// not multiMatch (which searches each step of its chain, not one value).
fn candidate<'r>(rule: &'r Rule, weak_slots: &[bool]) -> Option<&'r str> {
    let ungated = rule
        .prefilter_slot
        .is_none_or(|slot| weak_slots.get(slot as usize).copied().unwrap_or(false));
    match &rule.operator {
        Operator::Rx(Pattern::Bytes(re))
            if !rule.negated && ungated && !rule.actions.multi_match =>
        {
            Some(re.as_str())
        }
        _ => None,
    }
}

/// One regex matching wherever one of `patterns` does. Each pattern keeps its own flags: a
/// flag group such as `(?i)` inside `(?:...)` ends with it.
fn alternation(patterns: &[String]) -> Option<regex::bytes::Regex> {
    let joined: Vec<String> = patterns.iter().map(|p| format!("(?:{p})")).collect();
    regex::bytes::RegexBuilder::new(&joined.join("|"))
        // Each member compiled under the default limits; their alternation is their sum.
        .size_limit(patterns.len().saturating_mul(10 << 20))
        .dfa_size_limit(patterns.len().saturating_mul(2 << 20))
        .build()
        .ok()
}

fn for_each_link(phases: &mut [Vec<Entry>], f: &mut impl FnMut(&mut Rule)) {
    for entry in phases.iter_mut().flatten() {
        let Entry::Rule(head) = entry else { continue };
        let mut link: Option<&mut Rule> = Some(head);
        while let Some(rule) = link {
            f(rule);
            link = rule.chained.as_deref_mut();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alternation_keeps_each_patterns_flags() {
        let union = alternation(&["(?s-u)(?i)ab".to_owned(), "(?s-u)cd".to_owned()]).unwrap();
        assert!(union.is_match(b"xABx"));
        assert!(union.is_match(b"xcdx"));
        // The second pattern is case-sensitive: `(?i)` ended with the first group.
        assert!(!union.is_match(b"xCDx"));
        // Bytes mode survives the grouping: `.` matches a byte that is not UTF-8.
        let union = alternation(&["(?s-u)a.b".to_owned(), "(?s-u)zz".to_owned()]).unwrap();
        assert!(union.is_match(b"a\xffb"));
    }
}

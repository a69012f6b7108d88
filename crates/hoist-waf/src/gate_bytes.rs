//! Gates closed by a target's bytes: a union not worth computing because no rule gated on it
//! can match a value of its target, whatever literals the value holds.
//!
//! A union under a chain that changes values (`removeWhitespace` on words) transforms every
//! value of its target and scans each result (see `gates`): 191 removeWhitespace copies of
//! the benchmark's form POST, for 942550, 933210 and 941140 (and their stricter siblings).
//! Every match of those regexes holds a punctuation byte (`"` `'` `_`, `;`, `=` `:` `(`...:
//! `byte_filter`), which a value as collected must hold, or a byte that lets the chain make
//! one (`%` before urlDecodeUni: `reach::value_needs`). The target's bytes are known per
//! transaction (`byte_summary`, shared with the validation rules): when they hold none of
//! the bytes any rule on the gate needs, the union is empty without a value being read.
//!
//! Rules on a gate are all the rule links whose gate set holds it: its target is one of
//! theirs, its chain theirs (or, for a multiMatch rule, one of its steps'). One of them with
//! no byte requirement (a word list, a regex that matches letters alone) leaves the gate as
//! it was. The byte set is taken over the target without exclusions, which only remove
//! values: a superset, so a gate is closed only when no value could match.

use crate::byte_filter::ByteFilter;
use crate::byte_summary::ByteTargets;
use crate::chains::Chains;
use crate::gates::GateDef;
use crate::operators::{Operator, Pattern};
use crate::reach::{value_needs, ByteSet};
use crate::rules::{Entry, Rule};
use crate::transaction::Transaction;

/// Per gate id, the bytes one of which some value of its target must hold for a rule on the
/// gate to match, and the target's byte target id; `None` for a gate with a rule that
/// needs no byte, or a target whose bytes are not summarized.
pub(crate) type GateBytes = Vec<Option<(ByteSet, u32)>>;

/// What the rules seen so far on one gate need.
#[derive(Clone, Copy)]
enum Needs {
    NoRule,
    Bytes(ByteSet),
    Nothing,
}

/// Load time, once every rule link has its gate set.
pub(crate) fn build(
    phases: &[Vec<Entry>],
    gates: &[GateDef],
    gate_sets: &[Box<[u32]>],
    chains: &Chains,
    byte_targets: &mut ByteTargets,
) -> GateBytes {
    let mut needs = vec![Needs::NoRule; gates.len()];
    for rule in crate::rules::links(phases.iter().flatten()) {
        let set = rule.gate_set.and_then(|s| gate_sets.get(s as usize));
        // Read off the regex once per link, not once per gate (a target each).
        let wanted = set.and_then(|_| rule_bytes(rule));
        for &g in set.map_or(&[][..], |s| &s[..]) {
            let (Some(def), Some(n)) = (gates.get(g as usize), needs.get_mut(g as usize)) else {
                continue;
            };
            let bytes = wanted.and_then(|w| value_needs(chains, def.chain, &w));
            *n = match (*n, bytes) {
                (Needs::Nothing, _) | (_, None) => Needs::Nothing,
                (Needs::NoRule, Some(b)) => Needs::Bytes(b),
                (Needs::Bytes(a), Some(b)) => Needs::Bytes(a.union(b)),
            };
        }
    }
    gates
        .iter()
        .zip(needs)
        .map(|(def, n)| match n {
            Needs::Bytes(b) => Some((b, byte_targets.assign_one(&def.target)?)),
            Needs::NoRule | Needs::Nothing => None,
        })
        .collect()
}

/// The punctuation bytes one of which every match of the rule's operator holds.
fn rule_bytes(rule: &Rule) -> Option<ByteSet> {
    if rule.negated {
        return None;
    }
    match &rule.operator {
        Operator::Rx(Pattern::Bytes(re)) => ByteFilter::of_regex(re.as_str()).map(|f| f.bytes()),
        _ => None,
    }
}

impl Transaction {
    /// Whether no rule on gate `g` can match a value of its target: the target's values
    /// hold none of the bytes those rules need (see the module comment).
    pub(crate) fn gate_closed_by_bytes(&mut self, g: usize) -> bool {
        let Some(&Some((needs, target))) = self.rules.gate_bytes.get(g) else {
            return false;
        };
        self.target_bytes(target)
            .is_some_and(|held| !held.meets(&needs))
    }
}

#[cfg(test)]
mod tests {
    use crate::rules::{Entry, RuleSet};
    use crate::transaction::Transaction;
    use std::path::Path;
    use std::sync::Arc;

    const RULES: &str = r#"SecRequestBodyAccess On
SecRule ARGS "@rx url\(javascript" "id:1,phase:2,pass,nolog,t:none,t:urlDecodeUni,t:removeWhitespace"
SecRule ARGS "@rx [\"']x" "id:2,phase:2,pass,nolog,t:none,t:urlDecodeUni,t:removeWhitespace"
SecRule ARGS "@rx url\(javascript" "id:3,phase:2,pass,nolog,t:none,t:removeWhitespace"
SecRule ARGS "@rx plainword" "id:4,phase:2,pass,nolog,t:none,t:removeWhitespace"
"#;

    /// The gates of rule `id` (its gate set).
    fn gates_of(rules: &RuleSet, id: i64) -> Vec<u32> {
        let rule = rules.phases.iter().flatten().find_map(|e| match e {
            Entry::Rule(r) if r.id == id => Some(r),
            _ => None,
        });
        let set = rule.and_then(|r| r.gate_set).expect("rule is gated");
        rules.gate_sets[set as usize].to_vec()
    }

    /// Phases 1 and 2 of a form POST with `body`; then whether each gate of rule `id` is
    /// closed by its target's bytes.
    fn closed(rules: &Arc<RuleSet>, body: &[u8], id: i64) -> Vec<bool> {
        let mut tx = Transaction::new(rules.clone(), "10.0.0.1", "t");
        tx.process_request_line("POST", "/", "HTTP/1.1");
        tx.add_request_header("Content-Type", b"application/x-www-form-urlencoded");
        tx.process_request_headers();
        tx.append_request_body(body);
        tx.process_request_body();
        gates_of(rules, id)
            .into_iter()
            .map(|g| tx.gate_closed_by_bytes(g as usize))
            .collect()
    }

    #[test]
    fn a_gate_is_closed_when_no_value_holds_a_byte_its_rules_need() {
        let rules = Arc::new(RuleSet::from_str(RULES, Path::new("t.conf")).expect("loads"));
        // Rules 1 and 2 share a gate: `(`, or `"` `'`, or urlDecodeUni's `%` `+`.
        assert_eq!(closed(&rules, b"a=some+plain+words", 1), [true]);
        assert_eq!(closed(&rules, b"a=some+plain+words&b=f(x)", 1), [false]);
        assert_eq!(closed(&rules, b"a=it%27s", 1), [false]);
        // A `%` left in a value (`%2528` decodes to `%28`) may decode to anything.
        assert_eq!(closed(&rules, b"a=url%2528javascript", 1), [false]);
        // Rule 4, on rule 3's gate, matches words alone: that gate is never closed.
        assert_eq!(closed(&rules, b"a=some+plain+words", 3), [false]);
    }
}

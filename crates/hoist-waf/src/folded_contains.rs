//! `@contains` under a chain that only drops whitespace and lowers case, without the copies.
//!
//! CRS 955300 looks for `<title>punkholicshell</title>` in the response body after
//! `t:removeWhitespace,t:lowercase`, and it is the only response rule with a transformation:
//! every inspected body was copied twice for it (~17 instructions a byte) and scanned for
//! which transformations keep the prefilter's hits (~8 more), about a third of phase 4 for a
//! 1 KB body. Reading the body as it is, skipping whitespace and lowering case on the fly,
//! answers whether the needle is there without either. Only a "no" is final: when the
//! needle is there the rule is evaluated as usual, so MATCHED_VAR and the capture come from
//! the transformed value as before.

use crate::operators::Operator;
use crate::rules::Rule;
use crate::transforms::{is_space, Transform};

#[derive(Debug)]
pub(crate) struct FoldedContains {
    needle: Vec<u8>,
    drop_space: bool,
    lower: bool,
}

impl FoldedContains {
    /// For a rule whose operator is `@contains` with a constant, non-empty argument, not
    /// negated, and whose chain is only removeWhitespace and lowercase (which commute: one
    /// never makes or changes what the other acts on).
    pub fn plan(rule: &Rule) -> Option<FoldedContains> {
        let Operator::Contains(arg) = &rule.operator else {
            return None;
        };
        let needle = arg.as_literal()?.as_bytes();
        if needle.is_empty() || rule.negated || rule.transforms.is_empty() {
            return None;
        }
        let (mut drop_space, mut lower) = (false, false);
        for t in &rule.transforms {
            match t {
                Transform::RemoveWhitespace => drop_space = true,
                Transform::Lowercase => lower = true,
                _ => return None,
            }
        }
        Some(FoldedContains {
            needle: needle.to_vec(),
            drop_space,
            lower,
        })
    }

    /// Whether the needle may occur in `value` transformed by the chain: `false` only when it
    /// does not. Each candidate position is compared on its own, so a value made of the
    /// needle's beginning over and over costs up to the needle's length per byte; past four
    /// bytes read per byte of the value the answer is `true`, and the rule is evaluated
    /// the usual way (which costs what it did before this shortcut).
    pub fn found_in(&self, value: &[u8]) -> bool {
        let Some(&first) = self.needle.first() else {
            return true;
        };
        let mut budget = value.len().saturating_mul(4);
        let mut from = 0;
        while let Some(at) = self.next_candidate(value, from, first) {
            match self.matches_at(value, at) {
                Ok(()) => return true,
                Err(read) if read > budget => return true,
                Err(read) => budget -= read,
            }
            from = at + 1;
        }
        false
    }

    /// The next position at or after `from` holding a byte the chain may turn into `first`.
    fn next_candidate(&self, value: &[u8], from: usize, first: u8) -> Option<usize> {
        let rest = value.get(from..)?;
        let at = if self.lower && first.is_ascii_lowercase() {
            memchr::memchr2(first, first.to_ascii_uppercase(), rest)
        } else {
            memchr::memchr(first, rest)
        };
        at.map(|i| from + i)
    }

    /// `Ok` when the transformed bytes from `start` on begin with the needle, else how many
    /// bytes of the value were read to tell.
    fn matches_at(&self, value: &[u8], start: usize) -> Result<(), usize> {
        let rest = value.get(start..).unwrap_or_default();
        let mut read = 0;
        let mut kept = rest
            .iter()
            .inspect(|_| read += 1)
            .filter(|&&b| !(self.drop_space && is_space(b)))
            .map(|&b| {
                if self.lower {
                    b.to_ascii_lowercase()
                } else {
                    b
                }
            });
        if self.needle.iter().all(|&n| kept.next() == Some(n)) {
            Ok(())
        } else {
            Err(read)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::{Entry, RuleSet};
    use std::path::Path;

    fn set(operator: &str, chain: &str) -> RuleSet {
        let text =
            format!("SecRule RESPONSE_BODY \"{operator}\" \"id:1,phase:4,pass,t:none,{chain}\"");
        RuleSet::from_str(&text, Path::new("t.conf")).expect("loads")
    }

    fn only_rule(set: &RuleSet) -> &Rule {
        match set.phases[3].first() {
            Some(Entry::Rule(r)) => r,
            _ => panic!("no rule"),
        }
    }

    fn plan(operator: &str, chain: &str) -> Option<FoldedContains> {
        FoldedContains::plan(only_rule(&set(operator, chain)))
    }

    #[test]
    fn plans_only_constant_contains_under_whitespace_and_case_chains() {
        assert!(plan("@contains <title>", "t:removeWhitespace,t:lowercase").is_some());
        assert!(plan("@contains <title>", "t:lowercase").is_some());
        assert!(plan("!@contains <title>", "t:lowercase").is_none());
        assert!(plan("@contains %{tx.x}", "t:lowercase").is_none());
        assert!(plan("@contains <title>", "t:compressWhitespace").is_none());
        assert!(plan("@contains <title>", "t:lowercase,t:urlDecode").is_none());
        assert!(plan("@rx <title>", "t:lowercase").is_none());
        // No transformation: the operator's own search copies nothing.
        assert!(plan("@contains <title>", "t:none").is_none());
    }

    /// A value that repeats the needle's beginning without the needle, so that every byte
    /// starts a long comparison: the reading stops at its budget and says "may", never "no"
    /// wrongly; a value with fewer candidates is still read to the end and answered.
    #[test]
    fn repeated_beginnings_end_in_may_match() {
        let runs = set("@contains aaaaaaaaab", "t:lowercase");
        let fc = FoldedContains::plan(only_rule(&runs)).expect("planned");
        assert!(fc.found_in(&b"A".repeat(10_000)));
        assert!(!fc.found_in(&b"Aaaab".repeat(2_000)));
        assert!(fc.found_in(&[b"Aaaab".repeat(2_000), b"aAaAaaaaaB".to_vec()].concat()));
        let title = set(
            "@contains <title>punkholicshell</title>",
            "t:removeWhitespace,t:lowercase",
        );
        let fc = FoldedContains::plan(only_rule(&title)).expect("planned");
        assert!(!fc.found_in(&b"<title>punkholicshell<".repeat(1000)));
    }

    /// Against transforming and searching, on values drawn from the bytes that matter
    /// (whitespace of every kind ModSecurity strips, both cases, the needles' bytes).
    #[test]
    fn agrees_with_transforming_first() {
        let mut next = crate::test_rng::xorshift(0x2545_F491_4F6C_DD1D);
        let alphabet = b"<>/tTiI \t\n\x0b\x0c\r\xa0xX";
        for chain in [
            "t:removeWhitespace,t:lowercase",
            "t:lowercase,t:removeWhitespace",
            "t:removeWhitespace",
            "t:lowercase",
        ] {
            for needle in ["<ti", "t<", "iti", "<T", "t t", "x", "X/", "<ti>"] {
                let set = set(&format!("@contains {needle}"), chain);
                let rule = only_rule(&set);
                let fc = FoldedContains::plan(rule).expect("planned");
                for _ in 0..3000 {
                    let len = (next() % 24) as usize;
                    let value = crate::test_rng::bytes_from(&mut next, alphabet, len);
                    let transformed = rule
                        .transforms
                        .iter()
                        .fold(value.clone(), |v, t| t.apply(&v));
                    let want = memchr::memmem::find(&transformed, needle.as_bytes()).is_some();
                    assert_eq!(fc.found_in(&value), want, "{chain} {needle:?} in {value:?}");
                }
            }
        }
    }
}

//! What a match does: the rule's disruptive action (an interruption, or `allow`) and its
//! record in the matched rules (with the error-log line when the rule logs), and each of a
//! link's effects as it matches (`setvar`, `ctl`, ...). The phase loop and the evaluation
//! that decide whether a rule matched are in `eval`.

use crate::actions::{Ctl, Disruptive, Effect, EngineMode, SetVar, SetVarOp};
use crate::heads::tag_bit;
use crate::macros::Macro;
use crate::operators::{atoi, Expand};
use crate::rules::Rule;
use crate::transaction::{Interruption, LogEntry, MatchedRule, RemovedTarget, Transaction};
use crate::tx_vars::TxVars;
use std::borrow::Cow;

impl Transaction {
    pub(crate) fn on_match(&mut self, head: &Rule, phase: u8) {
        let disruptive = match &head.disruptive {
            Disruptive::Block => self.rules.default_disruptive[usize::from(phase - 1)].clone(),
            d => d.clone(),
        };
        let mut interruption = None;
        match &disruptive {
            Disruptive::Deny | Disruptive::Drop | Disruptive::Redirect(_) => {
                let (action, status, redirect) = match &disruptive {
                    Disruptive::Drop => ("drop", head.actions.status.unwrap_or(403), None),
                    Disruptive::Redirect(m) => (
                        "redirect",
                        head.actions.status.unwrap_or(302),
                        Some(self.expand(m).into_owned()),
                    ),
                    _ => ("deny", head.actions.status.unwrap_or(403), None),
                };
                interruption = Some(Interruption {
                    status,
                    rule_id: head.id,
                    action,
                    redirect,
                });
            }
            Disruptive::Allow => {
                if self.engine == EngineMode::On {
                    self.allowed = true;
                }
            }
            Disruptive::Pass | Disruptive::Block => {}
        }
        let enforce = self.engine == EngineMode::On;
        // nolog rules (CRS's bookkeeping, dozens per request) get no message or log line:
        // formatting them would be most of the matching cost.
        let entry = head.log.then(|| {
            let expand = |m: &Option<Macro>| m.as_ref().map(|m| self.expand(m).into_owned());
            let message = expand(&head.actions.msg).unwrap_or_default();
            let data = expand(&head.actions.logdata).unwrap_or_default();
            let shown = interruption.as_ref().filter(|_| enforce);
            let log_line = crate::log::format(self, head, phase, &message, &data, shown);
            LogEntry {
                message,
                data,
                tags: head.actions.tags.clone(),
                log_line,
            }
        });
        self.matched.push(MatchedRule::new(
            head.id,
            phase,
            head.actions.severity,
            entry,
        ));
        if enforce {
            if let Some(i) = interruption {
                self.interruption = Some(i);
            }
        }
    }

    pub(crate) fn apply_effect(&mut self, effect: &Effect) {
        match effect {
            Effect::SetVar(sv) => match &sv.literal {
                // A literal name was lowercased and numbered at load; CRS's names are nearly
                // all literal.
                Some(name) => {
                    self.set_var(sv, |tx| tx.upsert_named(name), |tx| tx.remove_named(name))
                }
                // Others (920450's `tx.header_name_920450_%{tx.0}`, per header) are expanded
                // into a buffer kept for the next one.
                None => {
                    let mut name_buf = std::mem::take(&mut self.setvar_name);
                    name_buf.clear();
                    self.expand_into(&sv.name, &mut name_buf);
                    name_buf.make_ascii_lowercase();
                    {
                        // TX names are text; nearly all are ASCII (checked first: the lossy
                        // conversion is slower on valid text).
                        let name = match std::str::from_utf8(&name_buf) {
                            Ok(name) => Cow::Borrowed(name),
                            Err(_) => String::from_utf8_lossy(&name_buf),
                        };
                        self.set_var(sv, |tx| tx.upsert(&name), |tx| tx.remove(&name));
                    }
                    self.setvar_name = name_buf;
                }
            },
            Effect::Ctl(ctl) => match ctl {
                Ctl::RuleEngine(mode) => self.engine = *mode,
                Ctl::RuleRemoveById(ids) => self.removed_ids.extend(ids.iter().copied()),
                Ctl::RuleRemoveByTag(tag) => {
                    self.removed_tag_bits |= tag_bit(tag);
                    self.removed_tags.push(tag.clone());
                }
                Ctl::RuleRemoveTargetById(ids, excl) => {
                    for e in excl {
                        self.removed_targets
                            .push(RemovedTarget::Ids(ids.clone(), e.clone()));
                    }
                }
                Ctl::RuleRemoveTargetByTag(tag, excl) => {
                    for e in excl {
                        self.removed_targets.push(RemovedTarget::Tag(
                            tag.clone(),
                            tag_bit(tag),
                            e.clone(),
                        ));
                    }
                }
                Ctl::RequestBodyProcessor(p) => self.body_processor = Some(*p),
                Ctl::ForceRequestBodyVariable(on) => self.force_body_variable = *on,
                Ctl::RequestBodyAccess(on) => self.request_body_access = *on,
                Ctl::AuditLog => {}
            },
        }
    }
}

impl Transaction {
    /// One `setvar` on the variable `upsert` finds or adds (and `remove` deletes).
    fn set_var(
        &mut self,
        sv: &SetVar,
        upsert: impl FnOnce(&mut TxVars) -> (&mut Vec<u8>, bool),
        remove: impl FnOnce(&mut TxVars),
    ) {
        match &sv.op {
            SetVarOp::Delete => remove(&mut self.tx),
            SetVarOp::Set(m) => {
                // Expanded before the write: the value may be another TX variable's (or
                // this one's).
                let mut value = std::mem::take(&mut self.setvar_buf);
                value.clear();
                self.expand_into(m, &mut value);
                let (old, _) = upsert(&mut self.tx);
                std::mem::swap(old, &mut value);
                self.setvar_buf = value;
            }
            SetVarOp::Add(m) | SetVarOp::Sub(m) => {
                let delta = atoi(&self.expand_bytes(m));
                let (v, existed) = upsert(&mut self.tx);
                let current = if existed { atoi(v) } else { 0 };
                let next = if matches!(sv.op, SetVarOp::Add(_)) {
                    current.saturating_add(delta)
                } else {
                    current.saturating_sub(delta)
                };
                v.clear();
                write_decimal(v, next);
            }
        }
    }

    /// Sets a TX variable, reusing the old value's buffer when there is one.
    pub(crate) fn set_tx(&mut self, name: &str, value: &[u8]) {
        self.tx.set(name, value);
    }
}

/// `n` in decimal, appended to `out`. By hand, not `write!`: CRS's anomaly scores are
/// rewritten by a dozen `setvar:tx.x=+N` on every request, and the formatting machinery cost
/// more than the arithmetic around it.
fn write_decimal(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::write_decimal;

    #[test]
    fn write_decimal_matches_display() {
        for n in [
            0,
            1,
            -1,
            9,
            10,
            -10,
            99,
            100,
            12345,
            -987654321,
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = b"x".to_vec();
            write_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}").into_bytes());
        }
    }
}

//! Matched-rule log lines in ModSecurity's error-log form, so existing tooling (and go-ftw's
//! `log.match_regex`) reads them.

use crate::actions::SEVERITIES;
use crate::rules::Rule;
use crate::transaction::{Interruption, Transaction};
use std::fmt::Write;

/// ModSecurity's log escaping: quotes and backslashes escaped, control bytes as `\xHH`, so a
/// log entry stays on one line whatever the request carried.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() && (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

pub(crate) fn format(
    tx: &Transaction,
    rule: &Rule,
    phase: u8,
    msg: &str,
    data: &str,
    interruption: Option<&Interruption>,
) -> String {
    let mut line = format!("[client {}] ModSecurity: ", tx.client());
    match interruption {
        Some(i) => {
            let _ = write!(
                line,
                "Access denied with code {} (phase {phase}). ",
                i.status
            );
        }
        None => line.push_str("Warning. "),
    }
    let (var_name, value) = tx
        .matched_vars
        .last()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .unwrap_or_default();
    let _ = write!(
        line,
        "Matched \"Operator `{}' with parameter `{}' against variable `{}' (Value: `{}' )",
        rule.operator.name(),
        escape(
            rule.operator_text
                .trim_start_matches('!')
                .trim_start_matches('@')
        ),
        var_name,
        escape(&value),
    );
    let _ = write!(
        line,
        " [file \"{}\"] [line \"{}\"] [id \"{}\"]",
        rule.file.display(),
        rule.line,
        rule.id
    );
    if let Some(rev) = &rule.actions.rev {
        let _ = write!(line, " [rev \"{}\"]", escape(rev));
    }
    let _ = write!(
        line,
        " [msg \"{}\"] [data \"{}\"]",
        escape(msg),
        escape(data)
    );
    if let Some(sev) = rule.actions.severity {
        let _ = write!(
            line,
            " [severity \"{}\"]",
            SEVERITIES[usize::from(sev.min(7))]
        );
    }
    if let Some(ver) = &rule.actions.ver {
        let _ = write!(line, " [ver \"{}\"]", escape(ver));
    }
    for tag in &rule.actions.tags {
        let _ = write!(line, " [tag \"{}\"]", escape(tag));
    }
    let _ = write!(line, " [uri \"{}\"]", escape(tx.request_uri()));
    line
}

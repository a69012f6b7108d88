//! `%{tx.score}`-style macros in action and operator arguments, split at load so expansion is a
//! walk over parts.

use crate::tx_name::TxName;
use crate::variables::VarName;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Literal(String),
    /// A variable and an optional key (`request_headers.host`, `MATCHED_VAR`, `tx`).
    Var(VarName, Option<String>),
    /// A TX variable (`tx.critical_anomaly_score`, `tx.0`), CRS's usual macro: its name
    /// carries the number `TxVars` finds it by.
    Tx(TxName),
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Macro {
    pub parts: Vec<Part>,
}

impl Macro {
    pub fn parse(text: &str) -> Macro {
        let mut parts = Vec::new();
        let mut rest = text;
        let mut literal = String::new();
        while let Some(start) = rest.find("%{") {
            let Some(len) = rest[start + 2..].find('}') else {
                break;
            };
            let inner = &rest[start + 2..start + 2 + len];
            let (name, key) = match inner.split_once('.') {
                Some((n, k)) => (n, Some(k.to_string())),
                None => (inner, None),
            };
            literal.push_str(&rest[..start]);
            match VarName::parse(name) {
                Some(var) => {
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    // TX keys are stored lower-case: fold once here, not per expansion.
                    parts.push(match (var, key) {
                        (VarName::Tx, Some(k)) => Part::Tx(TxName::new(k.to_ascii_lowercase())),
                        (var, key) => Part::Var(var, key),
                    });
                }
                // Unknown macros stay as written, as ModSecurity leaves them.
                None => literal.push_str(&rest[start..start + 3 + len]),
            }
            rest = &rest[start + 3 + len..];
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Macro { parts }
    }

    /// The text when it holds no macro, so operators can precompute.
    pub fn as_literal(&self) -> Option<&str> {
        match self.parts.as_slice() {
            [] => Some(""),
            [Part::Literal(s)] => Some(s),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_parts() {
        let m = Macro::parse("score %{tx.critical_anomaly_score} at %{MATCHED_VAR_NAME}!");
        assert_eq!(
            m.parts,
            vec![
                Part::Literal("score ".into()),
                Part::Tx(TxName::new("critical_anomaly_score".into())),
                Part::Literal(" at ".into()),
                Part::Var(VarName::MatchedVarName, None),
                Part::Literal("!".into()),
            ]
        );
        assert_eq!(Macro::parse("plain").as_literal(), Some("plain"));
        assert_eq!(Macro::parse("%{nope.x}").as_literal(), Some("%{nope.x}"));
    }
}

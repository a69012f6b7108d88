//! Rule actions (`id:1,phase:2,deny,setvar:tx.x=+1,...`), parsed once at load.

use crate::macros::Macro;
use crate::transforms::Transform;
use crate::tx_name::TxName;
use crate::variables::{Exclusion, Targets};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineMode {
    On,
    DetectionOnly,
    Off,
}

impl EngineMode {
    pub fn parse(s: &str) -> Option<EngineMode> {
        match s.to_ascii_lowercase().as_str() {
            "on" => Some(EngineMode::On),
            "detectiononly" => Some(EngineMode::DetectionOnly),
            "off" => Some(EngineMode::Off),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Disruptive {
    #[default]
    Pass,
    Deny,
    Drop,
    Allow,
    Redirect(Macro),
    /// Whatever SecDefaultAction of the phase says.
    Block,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyProcessor {
    UrlEncoded,
    Multipart,
    Json,
    Xml,
}

impl BodyProcessor {
    pub fn parse(s: &str) -> Option<BodyProcessor> {
        match s.to_ascii_uppercase().as_str() {
            "URLENCODED" => Some(BodyProcessor::UrlEncoded),
            "MULTIPART" => Some(BodyProcessor::Multipart),
            "JSON" => Some(BodyProcessor::Json),
            "XML" => Some(BodyProcessor::Xml),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BodyProcessor::UrlEncoded => "URLENCODED",
            BodyProcessor::Multipart => "MULTIPART",
            BodyProcessor::Json => "JSON",
            BodyProcessor::Xml => "XML",
        }
    }
}

/// Inclusive id ranges (`1-5,7`).
pub type IdRanges = Vec<(i64, i64)>;

pub fn parse_id_ranges(s: &str) -> Result<IdRanges, String> {
    s.split([',', ' '])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (lo, hi) = p.split_once('-').unwrap_or((p, p));
            let parse = |v: &str| {
                v.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("bad rule id {p}"))
            };
            Ok((parse(lo)?, parse(hi)?))
        })
        .collect()
}

pub fn in_ranges(ranges: &IdRanges, id: i64) -> bool {
    ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&id))
}

#[derive(Debug, Clone)]
pub enum Ctl {
    RuleEngine(EngineMode),
    RuleRemoveById(IdRanges),
    RuleRemoveByTag(String),
    RuleRemoveTargetById(IdRanges, Vec<Exclusion>),
    RuleRemoveTargetByTag(String, Vec<Exclusion>),
    RequestBodyProcessor(BodyProcessor),
    ForceRequestBodyVariable(bool),
    RequestBodyAccess(bool),
    /// Audit-log switches: hoist has no audit log, so these have nothing to change.
    AuditLog,
}

#[derive(Debug, Clone)]
pub enum SetVarOp {
    Set(Macro),
    Add(Macro),
    Sub(Macro),
    Delete,
}

#[derive(Debug, Clone)]
pub struct SetVar {
    pub name: Macro,
    /// The name when it has no macro (nearly every CRS setvar), numbered for `TxVars`.
    pub literal: Option<TxName>,
    pub op: SetVarOp,
}

/// Non-disruptive actions that change state, kept in rule order.
#[derive(Debug, Clone)]
pub enum Effect {
    SetVar(SetVar),
    Ctl(Ctl),
}

/// A rule's actions as parsed from its action list.
///
/// Field order is layout (`repr(C)`): what a match or an evaluation reads (effects, skip,
/// severity, capture, multiMatch) comes first, in the cache line after the rule's own hot
/// fields (see `Rule`); the rest is read at load or when a log line is written.
#[derive(Debug, Clone, Default)]
#[repr(C)]
pub struct Actions {
    pub effects: Vec<Effect>,
    pub skip: u32,
    pub severity: Option<u8>,
    pub capture: bool,
    pub multi_match: bool,
    pub chain: bool,
    pub log: Option<bool>,
    pub id: Option<i64>,
    pub phase: Option<u8>,
    pub msg: Option<Macro>,
    pub logdata: Option<Macro>,
    pub tags: Vec<String>,
    pub ver: Option<String>,
    pub rev: Option<String>,
    pub disruptive: Option<Disruptive>,
    pub status: Option<u16>,
    pub auditlog: Option<bool>,
    pub skip_after: Option<String>,
    /// `t:none` seen: the default action's transformations do not apply.
    pub transforms_reset: bool,
    /// `heads::tag_bit` of each of `tags`, OR-ed: a tag whose bit is absent is not one of
    /// them, known without comparing strings (each evaluation checks a request's
    /// `ctl:ruleRemoveTargetByTag`, which CRS 941010 makes on every ordinary request).
    pub(crate) tag_bits: u64,
    pub transforms: Vec<Transform>,
}

pub const SEVERITIES: [&str; 8] = [
    "EMERGENCY",
    "ALERT",
    "CRITICAL",
    "ERROR",
    "WARNING",
    "NOTICE",
    "INFO",
    "DEBUG",
];

/// Splits at commas outside single quotes.
fn split_actions(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let bytes = s.as_bytes();
    let (mut start, mut quoted) = (0, false);
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quoted => i += 1,
            b'\'' => quoted = !quoted,
            b',' if !quoted => {
                out.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    out.push(&s[start..]);
    out
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    if v.len() >= 2 && v.starts_with('\'') && v.ends_with('\'') {
        v[1..v.len() - 1].replace("\\'", "'")
    } else {
        v.to_string()
    }
}

impl Actions {
    pub fn parse(s: &str) -> Result<Actions, String> {
        let mut a = Actions::default();
        for item in split_actions(s) {
            let item = item.trim();
            if item.is_empty() {
                continue;
            }
            let (name, value) = match item.split_once(':') {
                Some((n, v)) => (n.trim(), unquote(v)),
                None => (item, String::new()),
            };
            a.apply(name, value)?;
        }
        Ok(a)
    }

    fn apply(&mut self, name: &str, value: String) -> Result<(), String> {
        match name.to_ascii_lowercase().as_str() {
            "id" => self.id = Some(value.parse().map_err(|_| format!("bad id {value}"))?),
            "phase" => {
                self.phase = Some(match value.as_str() {
                    "request" => 2,
                    "response" => 4,
                    "logging" => 5,
                    v => v
                        .parse()
                        .ok()
                        .filter(|p| (1..=5).contains(p))
                        .ok_or(format!("bad phase {v}"))?,
                })
            }
            "msg" => self.msg = Some(Macro::parse(&value)),
            "logdata" => self.logdata = Some(Macro::parse(&value)),
            "severity" => {
                let sev = match value.parse::<u8>() {
                    Ok(n) if n < 8 => n,
                    _ => SEVERITIES
                        .iter()
                        .position(|s| s.eq_ignore_ascii_case(&value))
                        .ok_or(format!("bad severity {value}"))? as u8,
                };
                self.severity = Some(sev);
            }
            "tag" => {
                self.tag_bits |= crate::heads::tag_bit(&value);
                self.tags.push(value);
            }
            "ver" => self.ver = Some(value),
            "rev" => self.rev = Some(value),
            "maturity" | "accuracy" | "expirevar" | "initcol" | "sanitisematched"
            | "sanitisearg" | "setuid" | "setsid" => {}
            "pass" => self.disruptive = Some(Disruptive::Pass),
            "deny" => self.disruptive = Some(Disruptive::Deny),
            "drop" => self.disruptive = Some(Disruptive::Drop),
            "allow" => self.disruptive = Some(Disruptive::Allow),
            "block" => self.disruptive = Some(Disruptive::Block),
            "redirect" => self.disruptive = Some(Disruptive::Redirect(Macro::parse(&value))),
            "status" => {
                self.status = Some(value.parse().map_err(|_| format!("bad status {value}"))?)
            }
            "log" => self.log = Some(true),
            "nolog" => self.log = Some(false),
            "auditlog" => self.auditlog = Some(true),
            "noauditlog" => self.auditlog = Some(false),
            "capture" => self.capture = true,
            "multimatch" => self.multi_match = true,
            "chain" => self.chain = true,
            "skip" => self.skip = value.parse().map_err(|_| format!("bad skip {value}"))?,
            "skipafter" => self.skip_after = Some(value),
            "t" => match Transform::parse(&value)? {
                None => {
                    self.transforms_reset = true;
                    self.transforms.clear();
                }
                Some(t) => self.transforms.push(t),
            },
            "setvar" => self.effects.push(Effect::SetVar(parse_setvar(&value)?)),
            "ctl" => self.effects.push(Effect::Ctl(parse_ctl(&value)?)),
            other => return Err(format!("unsupported action {other}")),
        }
        Ok(())
    }
}

fn parse_setvar(v: &str) -> Result<SetVar, String> {
    let (target, op) = if let Some(name) = v.strip_prefix('!') {
        (name, SetVarOp::Delete)
    } else {
        match v.split_once('=') {
            None => (v, SetVarOp::Set(Macro::parse("1"))),
            Some((n, val)) => {
                let op = if let Some(x) = val.strip_prefix('+') {
                    SetVarOp::Add(Macro::parse(x))
                } else if let Some(x) = val.strip_prefix('-') {
                    SetVarOp::Sub(Macro::parse(x))
                } else {
                    SetVarOp::Set(Macro::parse(val))
                };
                (n, op)
            }
        }
    };
    let (collection, name) = target
        .split_once('.')
        .ok_or(format!("setvar: no collection in {v}"))?;
    if !collection.eq_ignore_ascii_case("tx") {
        // Persistent collections (ip, global, session) are not kept between requests.
        return Err(format!("setvar: unsupported collection {collection}"));
    }
    let name = Macro::parse(&name.to_ascii_lowercase());
    Ok(SetVar {
        literal: name.as_literal().map(|n| TxName::new(n.to_string())),
        name,
        op,
    })
}

fn exclusions(spec: &str) -> Result<Vec<Exclusion>, String> {
    let t = Targets::parse(spec)?;
    Ok(t.targets
        .into_iter()
        .map(|t| Exclusion {
            var: t.var,
            selector: t.selector,
        })
        .collect())
}

fn on_off(v: &str) -> Result<bool, String> {
    match v.to_ascii_lowercase().as_str() {
        "on" | "1" | "true" => Ok(true),
        "off" | "0" | "false" => Ok(false),
        _ => Err(format!("expected On or Off, got {v}")),
    }
}

fn parse_ctl(v: &str) -> Result<Ctl, String> {
    let (name, value) = v
        .split_once('=')
        .ok_or(format!("ctl: missing value in {v}"))?;
    Ok(match name.trim().to_ascii_lowercase().as_str() {
        "ruleengine" => {
            Ctl::RuleEngine(EngineMode::parse(value).ok_or(format!("ctl: bad engine {value}"))?)
        }
        "ruleremovebyid" => Ctl::RuleRemoveById(parse_id_ranges(value)?),
        "ruleremovebytag" => Ctl::RuleRemoveByTag(value.to_string()),
        "ruleremovetargetbyid" => {
            let (ids, spec) = value.split_once(';').ok_or(format!("ctl: bad {v}"))?;
            Ctl::RuleRemoveTargetById(parse_id_ranges(ids)?, exclusions(spec)?)
        }
        "ruleremovetargetbytag" => {
            let (tag, spec) = value.split_once(';').ok_or(format!("ctl: bad {v}"))?;
            Ctl::RuleRemoveTargetByTag(tag.to_string(), exclusions(spec)?)
        }
        "requestbodyprocessor" => Ctl::RequestBodyProcessor(
            BodyProcessor::parse(value).ok_or(format!("ctl: unknown body processor {value}"))?,
        ),
        "forcerequestbodyvariable" => Ctl::ForceRequestBodyVariable(on_off(value)?),
        "requestbodyaccess" => Ctl::RequestBodyAccess(on_off(value)?),
        "auditengine" | "auditlogparts" => Ctl::AuditLog,
        other => return Err(format!("ctl: unsupported {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_crs_style_actions() {
        let a = Actions::parse(
            "id:942100,\n    phase:2,block,capture,t:none,t:utf8toUnicode,msg:'SQL, \\'x\\'',\
             setvar:'tx.inbound_anomaly_score_pl1=+%{tx.critical_anomaly_score}',\
             ctl:ruleRemoveTargetById=942100;ARGS:foo,severity:'CRITICAL'",
        )
        .expect("parses");
        assert_eq!(a.id, Some(942100));
        assert_eq!(a.phase, Some(2));
        assert_eq!(a.disruptive, Some(Disruptive::Block));
        assert!(a.capture && a.transforms_reset);
        assert_eq!(a.transforms, vec![Transform::Utf8ToUnicode]);
        assert_eq!(
            a.msg.as_ref().and_then(|m| m.as_literal()),
            Some("SQL, 'x'")
        );
        assert_eq!(a.severity, Some(2));
        assert_eq!(a.effects.len(), 2);
    }

    #[test]
    fn rejects_unknown_action() {
        assert!(Actions::parse("id:1,frobnicate").is_err());
    }
}

//! hoist-waf: a SecLang engine that runs the OWASP Core Rule Set, usable without the proxy.
//!
//! Load a configuration once into a [`RuleSet`] (regexes compiled, phrase lists built), then
//! run one [`Transaction`] per request:
//!
//! ```ignore
//! let rules = Arc::new(RuleSet::from_file(Path::new("waf.conf"))?);
//! let mut tx = Transaction::new(rules, "10.0.0.1", "id-1");
//! tx.process_request_line("GET", "/?q=1", "HTTP/1.1");
//! tx.add_request_header("Host", b"example.com");
//! if let Some(i) = tx.process_request_headers() { /* reply i.status */ }
//! tx.append_request_body(b"...");
//! tx.process_request_body();
//! ```
#![forbid(unsafe_code)]

pub mod actions;
mod body;
mod builder;
mod byte_filter;
mod byte_summary;
mod captures;
pub mod chains;
mod collections;
mod constant;
mod decode;
mod dependents;
pub mod error;
mod eval;
mod folded_contains;
mod gate_bytes;
mod gate_runs;
mod gates;
mod heads;
mod hit_keeping;
mod injection;
mod json;
mod length_bound;
mod literal_scan;
mod literals;
mod log;
pub mod macros;
mod on_match;
pub mod operators;
mod pair_list;
pub mod parser;
mod phrase_set;
mod prefilter;
mod reach;
mod rule_probe;
#[cfg(feature = "rule-profile")]
pub mod rule_profile;
pub mod rules;
mod rx_groups;
mod scratch;
mod sqli;
#[cfg(test)]
mod test_rng;
mod transaction;
pub mod transforms;
pub mod tx_name;
mod tx_vars;
mod value_class;
mod values;
pub mod variables;

pub use actions::EngineMode;
pub use error::Error;
pub use rules::RuleSet;
pub use transaction::{Interruption, LogEntry, MatchedRule, Transaction};

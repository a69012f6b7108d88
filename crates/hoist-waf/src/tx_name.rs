//! TX names written in the rules, each with a number handed out when its rule is parsed.
//!
//! CRS reads and writes TX by names it spells out (`setvar:tx.inbound_anomaly_score_pl1=+5`,
//! `%{tx.critical_anomaly_score}`) a few dozen times per request. Hashing and comparing the
//! name each time was ~5 % of a small GET's instructions. A `TxName` carries a number, and
//! `TxVars` remembers where each numbered name sits among its entries, so looking one up is
//! an index into a table instead. Names a request makes up (920450's per-header
//! `tx.header_name_920450_%{tx.0}`) have no number and are looked up by hashing as before.
//!
//! Numbers are per process, not per rule set, so that a name needs nothing but itself to be
//! looked up. The table they come from holds each distinct name of every rule set loaded
//! (about 80 for CRS; reloading the same rules adds none) and is never shrunk; past
//! `MAX_NUMBERED` names or `MAX_NUMBERED_BYTES` of them, further names get no number and
//! are looked up by hashing, as made-up ones are.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};

/// Fifty times the names CRS spells out. It bounds each map's table of positions
/// (`TxVars::by_number`, 8 bytes a name: 32 KB) and, with the byte bound, the table here.
const MAX_NUMBERED: usize = 4096;
const MAX_NUMBERED_BYTES: usize = 256 * 1024;

/// Each numbered name, and the bytes of all of them.
static NUMBERS: LazyLock<Mutex<(HashMap<String, u32>, usize)>> = LazyLock::new(Default::default);
/// How many numbers were handed out: what a map's table must cover.
static COUNT: AtomicUsize = AtomicUsize::new(0);

/// A TX variable's name as a rule writes it (folded to lower case, as TX keys are stored).
#[derive(Clone, PartialEq, Eq)]
pub struct TxName {
    name: String,
    /// `NO_NUMBER` past `MAX_NUMBERED`.
    number: u32,
}

const NO_NUMBER: u32 = u32::MAX;

impl TxName {
    /// `name` is already folded to lower case.
    pub fn new(name: String) -> TxName {
        let mut guard = NUMBERS.lock().unwrap_or_else(PoisonError::into_inner);
        let (numbers, bytes) = &mut *guard;
        let number = match numbers.get(&name) {
            Some(&n) => n,
            None if numbers.len() < MAX_NUMBERED && *bytes + name.len() <= MAX_NUMBERED_BYTES => {
                let n = u32::try_from(numbers.len()).unwrap_or(NO_NUMBER);
                numbers.insert(name.clone(), n);
                *bytes += name.len();
                COUNT.store(numbers.len(), Ordering::Release);
                n
            }
            None => NO_NUMBER,
        };
        TxName { name, number }
    }

    pub fn as_str(&self) -> &str {
        &self.name
    }

    /// The name's number, if it has one.
    pub(crate) fn number(&self) -> Option<usize> {
        (self.number != NO_NUMBER).then_some(self.number as usize)
    }
}

/// How many names have a number so far.
pub(crate) fn numbered() -> usize {
    COUNT.load(Ordering::Acquire)
}

impl std::ops::Deref for TxName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.name
    }
}

impl std::fmt::Debug for TxName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.name.fmt(f)
    }
}

impl PartialEq<str> for TxName {
    fn eq(&self, other: &str) -> bool {
        self.name == other
    }
}

impl PartialEq<&str> for TxName {
    fn eq(&self, other: &&str) -> bool {
        self.name == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_name_gets_the_same_number() {
        let a = TxName::new("tx_name_test_a".into());
        let b = TxName::new("tx_name_test_b".into());
        let a2 = TxName::new("tx_name_test_a".into());
        assert_eq!(a.number(), a2.number());
        assert_ne!(a.number(), b.number());
        assert!(a.number().is_some_and(|n| n < numbered()));
        assert_eq!(&*a, "tx_name_test_a");
        assert_eq!(a, "tx_name_test_a");
    }
}

//! Time per rule, for finding where a transaction's CPU goes (`--features rule-profile`;
//! compiled out otherwise).
//!
//! Sessions on this engine kept rebuilding the same temporary timer around each rule: a
//! callgrind profile shows functions, not rules, and most of a transaction is one function
//! (`evaluate`) run on a few hundred rules. With the feature on, the phase loop times each
//! rule's evaluation (its chain included) and each gate check, per thread; the engine
//! benchmark prints the table after its fixed-count runs (`HOIST_WAF_BENCH_ITERS`). Timer
//! reads cost ~25 ns each, so compare rules with each other, not with a build without it;
//! [`bias_nanos`] measures what one timed call records around nothing, which the benchmark
//! subtracts (without it, the ~160 cheap gate checks of a GET looked like a third of it).

use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

/// The key of gate checks (no rule id is negative).
pub const GATES: i64 = -1;
/// The key of the gate unions computed: counted, not timed (a timer around each would add
/// its own cost to the gate checks that contain them). Reported as phase 0.
pub const UNIONS: i64 = -2;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Entry {
    pub phase: u8,
    /// The rule id, or [`GATES`].
    pub id: i64,
    pub nanos: u64,
    pub calls: u64,
}

thread_local! {
    static TABLE: RefCell<HashMap<(u8, i64), (u64, u64)>> = RefCell::new(HashMap::new());
    static UNION_COUNT: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

pub(crate) fn add(phase: u8, id: i64, since: Instant) {
    let nanos = u64::try_from(since.elapsed().as_nanos()).unwrap_or(u64::MAX);
    TABLE.with(|t| {
        let mut t = t.borrow_mut();
        let e = t.entry((phase, id)).or_default();
        e.0 = e.0.saturating_add(nanos);
        e.1 += 1;
    });
}

/// Counts a union computation: a plain counter, since even a table update per union showed
/// in the gate checks' time.
pub(crate) fn count_union() {
    UNION_COUNT.with(|c| c.set(c.get() + 1));
}

/// What `add` records for an empty timed region, on average (the timer's own cost inside
/// the measurement): subtract it per call. Measured on this thread; leaves no entry behind.
pub fn bias_nanos() -> f64 {
    const RUNS: u64 = 20_000;
    const KEY: (u8, i64) = (u8::MAX, i64::MIN);
    for _ in 0..RUNS {
        add(KEY.0, KEY.1, Instant::now());
    }
    let (nanos, calls) = TABLE
        .with(|t| t.borrow_mut().remove(&KEY))
        .unwrap_or((0, 1));
    nanos as f64 / calls.max(1) as f64
}

/// This thread's entries since the last call, most time first.
pub fn take() -> Vec<Entry> {
    let unions = UNION_COUNT.with(|c| c.replace(0));
    if unions > 0 {
        TABLE.with(|t| t.borrow_mut().entry((0, UNIONS)).or_default().1 += unions);
    }
    let mut out: Vec<Entry> = TABLE.with(|t| {
        t.borrow_mut()
            .drain()
            .map(|((phase, id), (nanos, calls))| Entry {
                phase,
                id,
                nanos,
                calls,
            })
            .collect()
    });
    out.sort_by(|a, b| b.nanos.cmp(&a.nanos).then(a.id.cmp(&b.id)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_add_up_per_phase_and_rule_and_are_taken_once() {
        let t = Instant::now();
        add(2, 942100, t);
        add(2, 942100, t);
        add(1, GATES, t);
        let taken = take();
        assert_eq!(taken.len(), 2);
        let sqli = taken.iter().find(|e| e.id == 942100);
        assert_eq!(sqli.map(|e| (e.phase, e.calls)), Some((2, 2)));
        assert!(take().is_empty());
    }

    #[test]
    fn the_bias_is_measured_without_leaving_an_entry() {
        let bias = bias_nanos();
        assert!(bias.is_finite() && bias >= 0.0);
        assert!(take().is_empty());
    }
}

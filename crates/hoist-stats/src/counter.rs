//! Counters: monotonically increasing, one cell per slot, merged on read.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use crate::cell::{Cells, UsedFlag};
use crate::tags::StatName;

pub(crate) struct CounterData {
    pub(crate) name: StatName,
    cells: Cells,
    /// The merged sum when the admin last called reset_counters. Workers never write it, so a
    /// reset cannot race with an increment: the counter reads as `sum - baseline`.
    baseline: AtomicU64,
    used: UsedFlag,
}

/// A counter handle: cheap to clone, usable from any thread with that thread's slot.
#[derive(Clone)]
pub struct Counter(pub(crate) Arc<CounterData>);

impl Counter {
    pub(crate) fn new(name: &str, slots: usize) -> Counter {
        Counter(Arc::new(CounterData {
            name: StatName::new(name),
            cells: Cells::new(slots),
            baseline: AtomicU64::new(0),
            used: UsedFlag::default(),
        }))
    }

    pub fn name(&self) -> &str {
        self.0.name.as_str()
    }

    #[inline]
    pub fn inc(&self, slot: usize) {
        self.add(slot, 1);
    }

    /// Adds `n` to `slot`'s cell. Only the thread that owns `slot` may call this.
    #[inline]
    pub fn add(&self, slot: usize, n: u64) {
        if let Some(cell) = self.0.cells.slot(slot) {
            cell.add(n);
        }
        self.0.used.mark();
    }

    /// The merged value since the last [`reset`](crate::Store::reset_counters).
    pub fn value(&self) -> u64 {
        self.0
            .cells
            .sum()
            .wrapping_sub(self.0.baseline.load(Relaxed))
    }

    /// Whether the counter was ever incremented (Envoy's `usedonly` filter).
    pub fn used(&self) -> bool {
        self.0.used.get()
    }

    /// Binds the handle to `slot` so that hot-path calls need no slot argument.
    pub fn bind(&self, slot: usize) -> WorkerCounter {
        WorkerCounter {
            counter: self.clone(),
            slot,
        }
    }

    pub(crate) fn reset(&self) {
        self.0.baseline.store(self.0.cells.sum(), Relaxed);
    }
}

/// A counter bound to one worker's slot. Keep it on that worker: two threads incrementing the
/// same slot would lose increments (never memory safety, only counts).
#[derive(Clone)]
pub struct WorkerCounter {
    counter: Counter,
    slot: usize,
}

impl WorkerCounter {
    #[inline]
    pub fn inc(&self) {
        self.counter.add(self.slot, 1);
    }

    #[inline]
    pub fn add(&self, n: u64) {
        self.counter.add(self.slot, n);
    }

    pub fn counter(&self) -> &Counter {
        &self.counter
    }
}

//! Per-slot storage: one padded atomic per slot, each written by one thread only.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

/// One slot's value. 128-byte alignment keeps two slots off the same cache line and off the
/// adjacent line the prefetcher pairs with it, so workers never invalidate each other's lines.
#[repr(align(128))]
#[derive(Default)]
pub(crate) struct Cell(AtomicU64);

impl Cell {
    /// Single-writer add: a load and a store, not `fetch_add`, because no other thread writes
    /// this cell; readers may see the old or the new value, never a torn one.
    #[inline]
    pub(crate) fn add(&self, n: u64) {
        let v = self.0.load(Relaxed);
        self.0.store(v.wrapping_add(n), Relaxed);
    }

    #[inline]
    pub(crate) fn set(&self, v: u64) {
        self.0.store(v, Relaxed);
    }

    #[inline]
    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A stat's cells, one per slot.
pub(crate) struct Cells(Box<[Cell]>);

impl Cells {
    pub(crate) fn new(slots: usize) -> Cells {
        Cells((0..slots).map(|_| Cell::default()).collect())
    }

    /// The cell of `slot`. A slot past the end is a caller bug; it is caught in debug builds
    /// and dropped in release builds rather than panicking a worker.
    #[inline]
    pub(crate) fn slot(&self, slot: usize) -> Option<&Cell> {
        let cell = self.0.get(slot);
        debug_assert!(cell.is_some(), "stats slot {slot} out of range");
        cell
    }

    /// The merged value: the sum of all slots, modulo 2^64 (gauges store signed deltas).
    pub(crate) fn sum(&self) -> u64 {
        self.0.iter().fold(0u64, |acc, c| acc.wrapping_add(c.get()))
    }
}

/// Envoy's "used" flag: set on the first write, never cleared (reset_counters keeps it).
#[derive(Default)]
pub(crate) struct UsedFlag(AtomicBool);

impl UsedFlag {
    /// Reads before writing so that, once set, the shared line stays clean in every core's cache.
    #[inline]
    pub(crate) fn mark(&self) {
        if !self.0.load(Relaxed) {
            self.0.store(true, Relaxed);
        }
    }

    pub(crate) fn get(&self) -> bool {
        self.0.load(Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_do_not_share_cache_lines() {
        assert!(std::mem::align_of::<Cell>() >= 128);
        assert_eq!(std::mem::size_of::<Cell>() % 128, 0);
    }

    #[test]
    fn sum_wraps_like_signed_deltas() {
        let cells = Cells::new(2);
        cells.slot(0).unwrap().add(5);
        cells.slot(1).unwrap().add(3u64.wrapping_neg());
        assert_eq!(cells.sum(), 2);
    }
}

//! Gauges: each slot holds that thread's share; the gauge is the sum of the shares.
//!
//! A connection is opened and closed on the same worker, so `downstream_cx_active` is the sum
//! of each worker's own count. A slot's share may go negative transiently only if a caller
//! decrements on a different slot than it incremented, which the single-writer rule forbids.

use std::sync::Arc;

use crate::cell::{Cells, UsedFlag};
use crate::tags::StatName;

/// Envoy's `Gauge::ImportMode`: whether a hot restart carries the value over. hoist has no hot
/// restart; the mode is kept so gauges are declared as Envoy declares them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImportMode {
    NeverImport,
    Accumulate,
}

pub(crate) struct GaugeData {
    pub(crate) name: StatName,
    import_mode: ImportMode,
    /// Signed shares stored as two's complement in u64 cells.
    cells: Cells,
    used: UsedFlag,
}

#[derive(Clone)]
pub struct Gauge(pub(crate) Arc<GaugeData>);

impl Gauge {
    pub(crate) fn new(name: &str, import_mode: ImportMode, slots: usize) -> Gauge {
        Gauge(Arc::new(GaugeData {
            name: StatName::new(name),
            import_mode,
            cells: Cells::new(slots),
            used: UsedFlag::default(),
        }))
    }

    pub fn name(&self) -> &str {
        self.0.name.as_str()
    }

    pub fn import_mode(&self) -> ImportMode {
        self.0.import_mode
    }

    #[inline]
    pub fn add(&self, slot: usize, n: u64) {
        if let Some(cell) = self.0.cells.slot(slot) {
            cell.add(n);
        }
        self.0.used.mark();
    }

    #[inline]
    pub fn sub(&self, slot: usize, n: u64) {
        self.add(slot, n.wrapping_neg());
    }

    #[inline]
    pub fn inc(&self, slot: usize) {
        self.add(slot, 1);
    }

    #[inline]
    pub fn dec(&self, slot: usize) {
        self.sub(slot, 1);
    }

    /// Sets `slot`'s share. For a gauge only one thread sets (`server.concurrency`, `server.live`),
    /// use the main slot and the share is the value.
    #[inline]
    pub fn set(&self, slot: usize, v: u64) {
        if let Some(cell) = self.0.cells.slot(slot) {
            cell.set(v);
        }
        self.0.used.mark();
    }

    /// The sum of all shares; a negative sum (a caller bug) reads as 0 rather than 2^64 - n.
    pub fn value(&self) -> u64 {
        let sum = self.0.cells.sum() as i64;
        sum.max(0) as u64
    }

    pub fn used(&self) -> bool {
        self.0.used.get()
    }

    pub fn bind(&self, slot: usize) -> WorkerGauge {
        WorkerGauge {
            gauge: self.clone(),
            slot,
        }
    }
}

/// A gauge bound to one worker's slot.
#[derive(Clone)]
pub struct WorkerGauge {
    gauge: Gauge,
    slot: usize,
}

impl WorkerGauge {
    #[inline]
    pub fn add(&self, n: u64) {
        self.gauge.add(self.slot, n);
    }

    #[inline]
    pub fn sub(&self, n: u64) {
        self.gauge.sub(self.slot, n);
    }

    #[inline]
    pub fn inc(&self) {
        self.gauge.inc(self.slot);
    }

    #[inline]
    pub fn dec(&self) {
        self.gauge.dec(self.slot);
    }

    #[inline]
    pub fn set(&self, v: u64) {
        self.gauge.set(self.slot, v);
    }

    pub fn gauge(&self) -> &Gauge {
        &self.gauge
    }
}

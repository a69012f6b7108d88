//! Histograms with Envoy's default buckets, recorded per slot and merged on the main thread.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::cell::UsedFlag;
use crate::tags::StatName;

/// Envoy's default histogram bucket upper bounds (`stats_config.histogram_bucket_settings`
/// unset). A value lands in the first bucket whose bound is >= the value; values above the
/// last bound land in an overflow bucket that only `+Inf` and the count see.
pub const BUCKET_BOUNDS: [f64; 19] = [
    0.5, 1.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 500.0, 1000.0, 2500.0, 5000.0, 10000.0, 30000.0,
    60000.0, 300000.0, 600000.0, 1800000.0, 3600000.0,
];

/// The quantiles Envoy's admin reports, as fractions.
pub const SUPPORTED_QUANTILES: [f64; 10] =
    [0.0, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 1.0];

const BUCKETS: usize = BUCKET_BOUNDS.len() + 1;

/// Envoy's `Histogram::Unit`; informational (rendering does not scale values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    Unspecified,
    Bytes,
    Microseconds,
    Milliseconds,
    Percent,
}

/// One slot's buckets and sum, padded so two workers never share a cache line.
#[repr(align(128))]
#[derive(Default)]
struct SlotCells {
    buckets: [AtomicU64; BUCKETS],
    sum: AtomicU64,
}

/// Bucket counts (disjoint: each sample counted once) and the sum of the samples.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HistogramStatistics {
    buckets: [u64; BUCKETS],
    sum: u64,
}

impl Default for HistogramStatistics {
    fn default() -> Self {
        HistogramStatistics {
            buckets: [0; BUCKETS],
            sum: 0,
        }
    }
}

impl HistogramStatistics {
    pub fn sample_count(&self) -> u64 {
        self.buckets.iter().fold(0u64, |a, &b| a.wrapping_add(b))
    }

    pub fn sample_sum(&self) -> u64 {
        self.sum
    }

    /// Counts of samples <= each bound of [`BUCKET_BOUNDS`] (Prometheus `le` buckets).
    pub fn cumulative_buckets(&self) -> [u64; BUCKET_BOUNDS.len()] {
        let mut out = [0u64; BUCKET_BOUNDS.len()];
        let mut running = 0u64;
        for (o, &b) in out.iter_mut().zip(self.buckets.iter()) {
            running = running.wrapping_add(b);
            *o = running;
        }
        out
    }

    /// Estimates quantile `q` (0..=1) by linear interpolation inside the bucket that holds the
    /// q-th sample; NaN when there are no samples. The overflow bucket has no upper bound, so
    /// quantiles that fall in it read as the last bound.
    pub fn quantile(&self, q: f64) -> f64 {
        let total = self.sample_count();
        if total == 0 {
            return f64::NAN;
        }
        let rank = q.clamp(0.0, 1.0) * total as f64;
        let mut before = 0u64;
        for (i, &count) in self.buckets.iter().enumerate() {
            if count == 0 {
                continue;
            }
            if (before + count) as f64 >= rank {
                let lower = if i == 0 { 0.0 } else { BUCKET_BOUNDS[i - 1] };
                let upper = BUCKET_BOUNDS.get(i).copied().unwrap_or(lower);
                let fraction = ((rank - before as f64) / count as f64).clamp(0.0, 1.0);
                return lower + (upper - lower) * fraction;
            }
            before += count;
        }
        // Unreachable with a non-zero total (the last non-empty bucket reaches `rank`), but a
        // float rounding corner must not panic: report the highest bound reached.
        BUCKET_BOUNDS[BUCKET_BOUNDS.len() - 1]
    }

    /// The [`SUPPORTED_QUANTILES`], in order.
    pub fn computed_quantiles(&self) -> [f64; SUPPORTED_QUANTILES.len()] {
        SUPPORTED_QUANTILES.map(|q| self.quantile(q))
    }

    fn minus(&self, earlier: &HistogramStatistics) -> HistogramStatistics {
        let mut buckets = [0u64; BUCKETS];
        for (i, b) in buckets.iter_mut().enumerate() {
            *b = self.buckets[i].saturating_sub(earlier.buckets[i]);
        }
        HistogramStatistics {
            buckets,
            sum: self.sum.saturating_sub(earlier.sum),
        }
    }

    #[cfg(test)]
    pub(crate) fn from_values(values: &[u64]) -> HistogramStatistics {
        let mut s = HistogramStatistics::default();
        for &v in values {
            s.buckets[bucket_index(v)] += 1;
            s.sum += v;
        }
        s
    }
}

#[inline]
fn bucket_index(value: u64) -> usize {
    BUCKET_BOUNDS.partition_point(|&bound| bound < value as f64)
}

#[derive(Default)]
struct Merged {
    cumulative: HistogramStatistics,
    interval: HistogramStatistics,
}

pub(crate) struct HistogramData {
    pub(crate) name: StatName,
    unit: Unit,
    slots: Box<[SlotCells]>,
    used: UsedFlag,
    /// Only the main thread (merge, render) takes this lock; workers never do.
    merged: Mutex<Merged>,
}

#[derive(Clone)]
pub struct Histogram(pub(crate) Arc<HistogramData>);

impl Histogram {
    pub(crate) fn new(name: &str, unit: Unit, slots: usize) -> Histogram {
        Histogram(Arc::new(HistogramData {
            name: StatName::new(name),
            unit,
            slots: (0..slots).map(|_| SlotCells::default()).collect(),
            used: UsedFlag::default(),
            merged: Mutex::new(Merged::default()),
        }))
    }

    pub fn name(&self) -> &str {
        self.0.name.as_str()
    }

    pub fn unit(&self) -> Unit {
        self.0.unit
    }

    /// Records one sample in `slot`. Only the thread that owns `slot` may call this.
    #[inline]
    pub fn record(&self, slot: usize, value: u64) {
        let cells = self.0.slots.get(slot);
        debug_assert!(cells.is_some(), "stats slot {slot} out of range");
        if let Some(cells) = cells {
            let bucket = &cells.buckets[bucket_index(value)];
            bucket.store(bucket.load(Relaxed).wrapping_add(1), Relaxed);
            cells
                .sum
                .store(cells.sum.load(Relaxed).wrapping_add(value), Relaxed);
        }
        self.0.used.mark();
    }

    pub fn used(&self) -> bool {
        self.0.used.get()
    }

    pub fn bind(&self, slot: usize) -> WorkerHistogram {
        WorkerHistogram {
            histogram: self.clone(),
            slot,
        }
    }

    /// `(interval, cumulative)` as of the last [`merge`](crate::Store::merge_histograms).
    pub fn statistics(&self) -> (HistogramStatistics, HistogramStatistics) {
        let merged = self.lock();
        (merged.interval.clone(), merged.cumulative.clone())
    }

    pub(crate) fn merge(&self) {
        let current = self.current();
        let mut merged = self.lock();
        merged.interval = current.minus(&merged.cumulative);
        merged.cumulative = current;
    }

    /// The sum of all slots right now. The count is derived from the buckets, so it always
    /// agrees with them even while workers record; the sum may be a sample ahead or behind.
    fn current(&self) -> HistogramStatistics {
        let mut s = HistogramStatistics::default();
        for cells in self.0.slots.iter() {
            for (total, b) in s.buckets.iter_mut().zip(cells.buckets.iter()) {
                *total = total.wrapping_add(b.load(Relaxed));
            }
            s.sum = s.sum.wrapping_add(cells.sum.load(Relaxed));
        }
        s
    }

    fn lock(&self) -> MutexGuard<'_, Merged> {
        // A panic while holding this lock leaves plain numbers behind; they are still usable.
        self.0.merged.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A histogram bound to one worker's slot.
#[derive(Clone)]
pub struct WorkerHistogram {
    histogram: Histogram,
    slot: usize,
}

impl WorkerHistogram {
    #[inline]
    pub fn record(&self, value: u64) {
        self.histogram.record(self.slot, value);
    }

    pub fn histogram(&self) -> &Histogram {
        &self.histogram
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_in_envoy_buckets() {
        assert_eq!(bucket_index(0), 0);
        assert_eq!(bucket_index(1), 1);
        assert_eq!(bucket_index(2), 2);
        assert_eq!(bucket_index(5), 2);
        assert_eq!(bucket_index(6), 3);
        assert_eq!(bucket_index(3_600_000), 18);
        assert_eq!(bucket_index(3_600_001), 19);
        assert_eq!(bucket_index(u64::MAX), 19);
    }

    #[test]
    fn quantiles_interpolate_inside_buckets() {
        // 100 samples: 1..=100. Buckets: (0.5,1]:1, (1,5]:4, (5,10]:5, (10,25]:15, (25,50]:25,
        // (50,100]:50.
        let values: Vec<u64> = (1..=100).collect();
        let s = HistogramStatistics::from_values(&values);
        assert_eq!(s.sample_count(), 100);
        assert_eq!(s.sample_sum(), 5050);
        // P0: first non-empty bucket's lower bound.
        assert_eq!(s.quantile(0.0), 0.5);
        // P25: rank 25 is the last sample of (10,25] (cumulative 25) -> its upper bound.
        assert_eq!(s.quantile(0.25), 25.0);
        // P50: rank 50 falls in (25,50] with 25 before: 25 + 25 * 25/25 = 50.
        assert_eq!(s.quantile(0.5), 50.0);
        // P75: rank 75 in (50,100] with 50 before: 50 + 50 * 25/50 = 75.
        assert_eq!(s.quantile(0.75), 75.0);
        // P90: 50 + 50 * 40/50 = 90.
        assert_eq!(s.quantile(0.9), 90.0);
        assert_eq!(s.quantile(1.0), 100.0);
        let q = s.computed_quantiles();
        assert_eq!(q[0], 0.5);
        assert_eq!(q[9], 100.0);
    }

    #[test]
    fn quantile_within_a_single_bucket() {
        // Four samples of 7 sit in (5,10]: P25 = 5 + 5 * 1/4.
        let s = HistogramStatistics::from_values(&[7, 7, 7, 7]);
        assert_eq!(s.quantile(0.0), 5.0);
        assert_eq!(s.quantile(0.25), 6.25);
        assert_eq!(s.quantile(0.5), 7.5);
        assert_eq!(s.quantile(1.0), 10.0);
    }

    #[test]
    fn empty_is_nan_and_overflow_reads_last_bound() {
        assert!(HistogramStatistics::default().quantile(0.5).is_nan());
        let s = HistogramStatistics::from_values(&[10_000_000]);
        assert_eq!(s.quantile(0.5), 3_600_000.0);
        assert_eq!(s.cumulative_buckets()[18], 0);
        assert_eq!(s.sample_count(), 1);
    }

    #[test]
    fn merge_keeps_interval_and_cumulative() {
        let h = Histogram::new("h", Unit::Milliseconds, 3);
        h.record(0, 3);
        h.record(1, 30);
        h.merge();
        let (interval, cumulative) = h.statistics();
        assert_eq!(interval.sample_count(), 2);
        assert_eq!(cumulative.sample_count(), 2);
        h.record(2, 300);
        h.merge();
        let (interval, cumulative) = h.statistics();
        assert_eq!(interval.sample_count(), 1);
        assert_eq!(interval.sample_sum(), 300);
        assert_eq!(cumulative.sample_count(), 3);
        assert_eq!(cumulative.sample_sum(), 333);
        h.merge();
        let (interval, cumulative) = h.statistics();
        assert_eq!(interval.sample_count(), 0);
        assert_eq!(cumulative.sample_count(), 3);
    }
}

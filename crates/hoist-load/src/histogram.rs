//! Fortio's counter and histogram (`stats/stats.go`), ported value for value: the same bucket
//! bounds, the same "open on the left" bucketing, the same export and percentile
//! interpolation, so that percentiles computed here equal Fortio's for the same samples.

use std::fmt::Write as _;

use crate::gofmt;

/// Upper bounds of the buckets, in units of the histogram's divider. A value v falls in the
/// first bucket whose bound is >= v (intervals are ]previous, bound]); bucket 0 holds values
/// <= 0 and one extra bucket after the last holds values > 100000.
const BOUNDS: [u32; 56] = [
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, // by 1
    12, 14, 16, 18, 20, // by 2
    25, 30, 35, 40, 45, 50, // by 5
    60, 70, 80, 90, 100, // by 10
    120, 140, 160, 180, 200, // by 20
    250, 300, 350, 400, 450, 500, // by 50
    600, 700, 800, 900, 1000, // by 100
    2000, 3000, 4000, 5000, 7500, 10000, // coarse
    20000, 30000, 40000, 50000, 75000, 100000, // coarser
];
const NUM_BUCKETS: usize = BOUNDS.len() + 1;
const LAST_BOUND: f64 = 100_000.0;

/// Count, min, max, sum and sum of squares of recorded values.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counter {
    pub count: u64,
    pub min: f64,
    pub max: f64,
    pub sum: f64,
    sum_of_squares: f64,
}

impl Counter {
    pub fn record(&mut self, v: f64) {
        if self.count == 0 {
            self.min = v;
            self.max = v;
        } else if v < self.min {
            self.min = v;
        } else if v > self.max {
            self.max = v;
        }
        self.count += 1;
        self.sum += v;
        self.sum_of_squares += v * v;
    }

    pub fn avg(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        self.sum / self.count as f64
    }

    /// Population standard deviation (Fortio's `+/-`).
    pub fn std_dev(&self) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let n = self.count as f64;
        let sigma = (self.sum_of_squares - self.sum * self.sum / n) / n;
        // Rounding can make it slightly negative for constant samples.
        if sigma < 0.0 {
            0.0
        } else {
            sigma.sqrt()
        }
    }

    /// Adds `other`'s samples to this counter.
    pub fn merge(&mut self, other: &Counter) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = other.clone();
            return;
        }
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
        self.sum += other.sum;
        self.sum_of_squares += other.sum_of_squares;
    }

    /// `"<msg> : count N avg A +/- S min M max X sum T"` with Fortio's number formats.
    pub fn line(&self, msg: &str) -> String {
        counter_line(
            msg,
            self.count,
            self.avg(),
            self.std_dev(),
            self.min,
            self.max,
            self.sum,
        )
    }
}

/// A [`Counter`] plus bucket counts; values are bucketed as `(v - offset) / divider`.
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub counter: Counter,
    offset: f64,
    divider: f64,
    buckets: [u64; NUM_BUCKETS],
}

impl Histogram {
    /// `divider` is the resolution (the width of the first buckets), e.g. 0.001 for
    /// durations in seconds at millisecond resolution; it must be > 0.
    pub fn new(offset: f64, divider: f64) -> Histogram {
        Histogram {
            counter: Counter::default(),
            offset,
            divider,
            buckets: [0; NUM_BUCKETS],
        }
    }

    pub fn record(&mut self, v: f64) {
        self.counter.record(v);
        let scaled = (v - self.offset) / self.divider;
        let idx = if scaled.is_nan() || scaled <= 0.0 {
            0
        } else if scaled > LAST_BOUND {
            NUM_BUCKETS - 1
        } else {
            // Intervals are open on the left: a value exactly on a bound belongs to the
            // bucket that ends there, hence the step back when there is no fraction (with
            // Fortio's epsilon, so that 0.003/0.001 = 2.9999999999999996 and 3 agree).
            let mut whole = scaled as i64;
            if scaled - (whole as f64) < 1e-12 {
                whole -= 1;
            }
            bucket_after(whole)
        };
        self.buckets[idx] += 1;
    }

    pub fn count(&self) -> u64 {
        self.counter.count
    }

    /// Count in the first bucket (values <= offset): Fortio uses it on the sleep-time
    /// histogram to tell how often the pacing fell behind.
    pub fn first_bucket_count(&self) -> u64 {
        self.buckets[0]
    }

    /// Adds `other`'s samples (which must use the same offset and divider).
    pub fn merge(&mut self, other: &Histogram) {
        debug_assert!(self.offset == other.offset && self.divider == other.divider);
        self.counter.merge(&other.counter);
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
    }

    /// The non-empty buckets as intervals, the first starting at min and the last ending at
    /// max, with cumulative percentages (Fortio's `Export`).
    pub fn export(&self) -> HistogramData {
        let c = &self.counter;
        let mut data = Vec::new();
        let total = c.count as f64;
        let mut prev = BOUNDS[0];
        let mut cumulative = 0u64;
        for (i, &n) in self.buckets.iter().enumerate() {
            if n == 0 {
                if let Some(&bound) = BOUNDS.get(i) {
                    prev = bound;
                }
                continue;
            }
            cumulative += n;
            let start = if data.is_empty() {
                c.min
            } else {
                self.divider * f64::from(prev) + self.offset
            };
            let end = match BOUNDS.get(i) {
                Some(&bound) => {
                    prev = bound;
                    self.divider * f64::from(bound) + self.offset
                }
                None => c.max,
            };
            data.push(Bucket {
                start,
                end,
                percent: 100.0 * cumulative as f64 / total,
                count: n,
            });
        }
        if let Some(last) = data.last_mut() {
            last.end = c.max;
        }
        HistogramData {
            count: c.count,
            min: c.min,
            max: c.max,
            sum: c.sum,
            avg: c.avg(),
            std_dev: c.std_dev(),
            data,
            percentiles: Vec::new(),
        }
    }
}

fn counter_line(
    msg: &str,
    count: u64,
    avg: f64,
    std_dev: f64,
    min: f64,
    max: f64,
    sum: f64,
) -> String {
    format!(
        "{msg} : count {count} avg {} +/- {} min {} max {} sum {}\n",
        gofmt::g_prec(avg, 8),
        gofmt::g_prec(std_dev, 4),
        gofmt::g(min),
        gofmt::g(max),
        gofmt::g_prec(sum, 9)
    )
}

/// Index of the first bucket whose bound is greater than `v`.
fn bucket_after(v: i64) -> usize {
    BOUNDS
        .iter()
        .position(|&b| i64::from(b) > v)
        .unwrap_or(NUM_BUCKETS - 1)
}

/// One exported bucket: `]start, end]` (the first one `[min, end]`), the cumulative percent
/// of samples up to and including it, and its count.
#[derive(Clone, Debug, PartialEq)]
pub struct Bucket {
    pub start: f64,
    pub end: f64,
    pub percent: f64,
    pub count: u64,
}

/// A percentile and its interpolated value.
#[derive(Clone, Debug, PartialEq)]
pub struct Percentile {
    pub percentile: f64,
    pub value: f64,
}

/// Fortio's `HistogramData`: what the report prints and the JSON carries.
#[derive(Clone, Debug, PartialEq)]
pub struct HistogramData {
    pub count: u64,
    pub min: f64,
    pub max: f64,
    pub sum: f64,
    pub avg: f64,
    pub std_dev: f64,
    pub data: Vec<Bucket>,
    pub percentiles: Vec<Percentile>,
}

impl HistogramData {
    /// The value under which `percentile` % of the samples fall, interpolated linearly inside
    /// the first bucket whose cumulative percent reaches it; min is taken to hold at least
    /// one sample's worth of percent.
    pub fn percentile(&self, percentile: f64) -> f64 {
        if self.data.is_empty() {
            return 0.0;
        }
        if percentile >= 100.0 {
            return self.max;
        }
        let mut prev_percent = 100.0 / self.count as f64;
        if percentile <= prev_percent {
            return self.min;
        }
        for b in &self.data {
            if percentile <= b.percent {
                return b.start
                    + (percentile - prev_percent) / (b.percent - prev_percent) * (b.end - b.start);
            }
            prev_percent = b.percent;
        }
        self.max
    }

    /// Fills [`HistogramData::percentiles`] (left empty when there is no sample, as Fortio).
    pub fn with_percentiles(mut self, percentiles: &[f64]) -> HistogramData {
        if self.count == 0 {
            return self;
        }
        self.percentiles = percentiles
            .iter()
            .map(|&p| Percentile {
                percentile: p,
                value: self.percentile(p),
            })
            .collect();
        self
    }

    /// The counter line alone (what Fortio prints for the size histograms).
    pub fn counter_line(&self, msg: &str) -> String {
        counter_line(
            msg,
            self.count,
            self.avg,
            self.std_dev,
            self.min,
            self.max,
            self.sum,
        )
    }

    /// Fortio's `HistogramData.Print`: the counter line, the buckets and the percentiles, or
    /// `"<msg> : no data"`.
    pub fn print(&self, msg: &str) -> String {
        if self.data.is_empty() {
            return format!("{msg} : no data\n");
        }
        let mut out = self.counter_line(msg);
        out.push_str("# range, mid point, percentile, count\n");
        for (i, b) in self.data.iter().enumerate() {
            let sep = if i == 0 { ">=" } else { ">" };
            let _ = writeln!(
                out,
                "{sep} {} <= {} , {} , {}, {}",
                gofmt::g_prec(b.start, 6),
                gofmt::g_prec(b.end, 6),
                gofmt::g_prec((b.start + b.end) / 2.0, 6),
                gofmt::f(b.percent, 2),
                b.count
            );
        }
        for p in &self.percentiles {
            let _ = writeln!(
                out,
                "# target {}% {}",
                gofmt::g(p.percentile),
                gofmt::g_prec(p.value, 6)
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[f64]) -> Histogram {
        let mut h = Histogram::new(0.0, 0.001);
        for &v in values {
            h.record(v);
        }
        h
    }

    #[test]
    fn bucketing_is_open_on_the_left() {
        // 3 ms falls in ]2, 3] (index 3), 3.5 ms in ]3, 4] (index 4), 0 in the first bucket,
        // 13 ms in ]12, 14] (index 13), 1.2 s in ]1000, 2000] (index 44), 200 s overflow (56).
        let h = hist(&[0.003, 0.0035, 0.0, 0.013, 1.2, 200.0]);
        let nonzero: Vec<(usize, u64)> = h
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, &n)| n > 0)
            .map(|(i, &n)| (i, n))
            .collect();
        assert_eq!(
            nonzero,
            vec![(0, 1), (3, 1), (4, 1), (13, 1), (44, 1), (56, 1)]
        );
    }

    #[test]
    fn export_and_percentiles_by_hand() {
        // Samples (ms): 1.5, 2.5, 2.5, 7, 30.
        // Buckets: ]1,2] has 1 (20%), ]2,3] has 2 (60%), ]6,7] has 1 (80%), ]25,30] 1 (100%).
        // The first interval starts at min (1.5 ms), the last ends at max (30 ms).
        let h = hist(&[0.0015, 0.0025, 0.0025, 0.007, 0.030]);
        let d = h
            .export()
            .with_percentiles(&[10.0, 20.0, 50.0, 70.0, 90.0, 99.9, 100.0]);
        let spans: Vec<(f64, f64, f64, u64)> = d
            .data
            .iter()
            .map(|b| (b.start, b.end, b.percent, b.count))
            .collect();
        assert_eq!(
            spans,
            vec![
                (0.0015, 0.002, 20.0, 1),
                (0.002, 0.003, 60.0, 2),
                (0.006, 0.007, 80.0, 1),
                (0.025, 0.030, 100.0, 1),
            ]
        );
        let p: Vec<f64> = d.percentiles.iter().map(|p| p.value).collect();
        // p10 and p20 <= 100/5 = 20% -> min.
        assert_eq!(p[0], 0.0015);
        assert_eq!(p[1], 0.0015);
        // p50 in ]2,3]: 2 + (50-20)/(60-20) * 1 = 2.75 ms.
        assert!((p[2] - 0.00275).abs() < 1e-12, "{}", p[2]);
        // p70 in ]6,7]: 6 + (70-60)/(80-60) * 1 = 6.5 ms.
        assert!((p[3] - 0.0065).abs() < 1e-12, "{}", p[3]);
        // p90 in ]25,30]: 25 + (90-80)/20 * 5 = 27.5 ms.
        assert!((p[4] - 0.0275).abs() < 1e-12, "{}", p[4]);
        // p99.9: 25 + 19.9/20 * 5 = 29.975 ms.
        assert!((p[5] - 0.029975).abs() < 1e-12, "{}", p[5]);
        assert_eq!(p[6], 0.030);
        assert_eq!(d.count, 5);
        assert!((d.avg - 0.0087).abs() < 1e-15);
        // Population std dev of 1.5, 2.5, 2.5, 7, 30 ms: sqrt(585.3 / 5) = 10.81942 ms.
        assert!((d.std_dev - 0.010_819_42).abs() < 1e-8, "{}", d.std_dev);
    }

    #[test]
    fn print_matches_fortio_layout() {
        let h = hist(&[0.0015, 0.0025, 0.0025, 0.007, 0.030]);
        let text = h
            .export()
            .with_percentiles(&[50.0, 99.9])
            .print("Aggregated Function Time");
        let expected = "Aggregated Function Time : count 5 avg 0.0087 +/- 0.01082 min 0.0015 max 0.03 sum 0.0435\n\
# range, mid point, percentile, count\n\
>= 0.0015 <= 0.002 , 0.00175 , 20.00, 1\n\
> 0.002 <= 0.003 , 0.0025 , 60.00, 2\n\
> 0.006 <= 0.007 , 0.0065 , 80.00, 1\n\
> 0.025 <= 0.03 , 0.0275 , 100.00, 1\n\
# target 50% 0.00275\n\
# target 99.9% 0.029975\n";
        assert_eq!(text, expected);
        assert_eq!(
            Histogram::new(0.0, 0.001).export().print("Error cases"),
            "Error cases : no data\n"
        );
    }

    #[test]
    fn single_value_and_overflow() {
        // One sample: one bucket from min to max, every percentile is that value.
        let d = hist(&[0.25]).export().with_percentiles(&[50.0]);
        assert_eq!(d.data.len(), 1);
        assert_eq!((d.data[0].start, d.data[0].end), (0.25, 0.25));
        assert_eq!(d.percentiles[0].value, 0.25);
        // Sizes histogram (divider 100): 10 MiB + headers lands in the overflow bucket,
        // which ends at max.
        let mut sizes = Histogram::new(0.0, 100.0);
        sizes.record(1024.0 + 250.0);
        sizes.record(10_485_760.0 + 137.0);
        let d = sizes.export();
        assert_eq!(d.data.len(), 2);
        assert_eq!((d.data[0].start, d.data[0].end), (1274.0, 1400.0));
        assert_eq!(
            (d.data[1].start, d.data[1].end),
            (10_000_000.0, 10_485_897.0)
        );
    }

    #[test]
    fn merge_equals_recording_everything_once() {
        let mut a = hist(&[0.001, 0.004]);
        let b = hist(&[0.0005, 0.2]);
        a.merge(&b);
        let all = hist(&[0.001, 0.004, 0.0005, 0.2]);
        assert_eq!(a.buckets, all.buckets);
        assert_eq!(a.counter.count, 4);
        assert_eq!(a.counter.min, 0.0005);
        assert_eq!(a.counter.max, 0.2);
        assert_eq!(a.export().data, all.export().data);
    }
}

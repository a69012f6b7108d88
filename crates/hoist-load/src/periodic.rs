//! Fortio's per-connection loop (`periodic.runOne`): calls one after the other, paced to the
//! connection's share of the rate (with its catch-up, jitter and uniform start), stopping at
//! the planned count, the end of the duration, or the stop flag. Each connection records
//! into its own [`ConnStats`]: no sharing and no locks on the hot path.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use crate::client::{Call, Client, Target};
use crate::histogram::Histogram;
use crate::options::LoadOptions;
use crate::plan::Plan;
use crate::transport::Negotiated;

/// Longest single sleep between checks of the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Read-only state shared by every connection of a run.
pub(crate) struct Shared {
    pub target: Arc<Target>,
    pub plan: Plan,
    pub opts: LoadOptions,
}

/// What one connection measured.
pub(crate) struct ConnStats {
    pub id: usize,
    pub durations: Histogram,
    pub errors: Histogram,
    pub sizes: Histogram,
    pub header_sizes: Histogram,
    pub sleeps: Histogram,
    pub codes: BTreeMap<i32, u64>,
    /// Response bytes, exactly (the size histogram's sum is a float).
    pub bytes: u64,
    pub sockets: u64,
    pub connect_times: Histogram,
    pub negotiated: Option<Negotiated>,
    pub first_error: Option<String>,
}

impl ConnStats {
    pub fn new(id: usize, resolution: f64) -> ConnStats {
        ConnStats {
            id,
            durations: Histogram::new(0.0, resolution),
            errors: Histogram::new(0.0, resolution),
            // Fortio's scales for sizes: 100-byte and 5-byte buckets.
            sizes: Histogram::new(0.0, 100.0),
            header_sizes: Histogram::new(0.0, 5.0),
            sleeps: Histogram::new(-0.001, 0.001),
            codes: BTreeMap::new(),
            bytes: 0,
            sockets: 0,
            connect_times: Histogram::new(0.0, resolution),
            negotiated: None,
            first_error: None,
        }
    }

    fn record(&mut self, call: &Call, latency: f64) {
        self.durations.record(latency);
        if !code_is_ok(call.code) {
            self.errors.record(latency);
        }
        *self.codes.entry(call.code).or_insert(0) += 1;
        self.sizes.record(call.size as f64);
        self.bytes += call.size;
        self.header_sizes.record(call.header_size as f64);
        if self.first_error.is_none() {
            if let Some(e) = &call.error {
                self.first_error = Some(e.to_string());
            }
        }
    }
}

/// Fortio's notion of success: 2xx, and 418.
pub(crate) fn code_is_ok(code: i32) -> bool {
    (200..300).contains(&code) || code == 418
}

/// Fortio's `runOne` for one connection.
pub(crate) async fn run_connection(
    id: usize,
    mut client: Client,
    shared: Arc<Shared>,
    start: Instant,
) -> ConnStats {
    let opts = &shared.opts;
    let plan = &shared.plan;
    let mut stats = ConnStats::new(id, opts.resolution);
    let num_calls = plan.calls_for(id);
    let n = plan.connections as f64;
    let per_conn_qps = plan.qps.map(|q| q / n);
    let use_exactly = plan.exactly.is_some();
    // A duration too long to represent is no limit at all.
    let end_time = plan.duration.and_then(|d| start.checked_add(d));
    let mut rng = Rng::new(id);
    let mut start = start;
    if let (Some(q), true) = (per_conn_qps, opts.uniform) {
        // Spread the connections evenly over one period.
        let period = 1.0 / q;
        let delay = seconds(period * id as f64 / n);
        start = start.checked_add(delay).unwrap_or(start);
        if pause(delay, &shared).await {
            return finish(stats, client);
        }
    }
    let mut i: u64 = 0;
    loop {
        let call_start = Instant::now();
        // Time is up: Fortio still lets a paced connection make its last planned call.
        let time_up = !use_exactly && end_time.is_some_and(|end| call_start > end);
        if time_up && (per_conn_qps.is_none() || (i >= 2 && i + 1 != num_calls)) {
            break;
        }
        if shared.opts.stop.load(Ordering::Relaxed) {
            break;
        }
        let call = client.call().await;
        let latency = call_start.elapsed().as_secs_f64();
        stats.record(&call, latency);
        if let Some(p) = &opts.progress {
            p.fetch_add(1, Ordering::Relaxed);
        }
        if opts.abort_on == Some(call.code) {
            opts.stop.store(true, Ordering::Relaxed);
        }
        i += 1;
        if num_calls > 0 && i >= num_calls {
            break;
        }
        if let Some(q) = per_conn_qps {
            let target = if end_time.is_some() && num_calls > 1 {
                (i as f64 + i as f64 / (num_calls - 1) as f64) / q
            } else {
                i as f64 / q
            };
            let mut sleep = target - start.elapsed().as_secs_f64();
            if opts.jitter {
                sleep += rng.jitter(sleep);
            }
            stats.sleeps.record(sleep);
            if sleep > 0.0 && pause(seconds(sleep), &shared).await {
                break;
            }
        }
    }
    finish(stats, client)
}

fn finish(mut stats: ConnStats, client: Client) -> ConnStats {
    stats.sockets = client.sockets;
    stats.connect_times = client.connect_times;
    stats.negotiated = client.negotiated;
    stats
}

/// Sleeps `d`, waking early when the run is stopped; returns whether it was.
async fn pause(d: Duration, shared: &Shared) -> bool {
    let now = Instant::now();
    let deadline = now.checked_add(d).unwrap_or(now);
    loop {
        if shared.opts.stop.load(Ordering::Relaxed) {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        tokio::time::sleep(left.min(STOP_POLL)).await;
    }
}

/// A pause in seconds as a Duration; absurd rates (`-qps 1e-300`) give absurd pauses, which
/// are capped rather than allowed to overflow.
fn seconds(s: f64) -> Duration {
    const CAP: f64 = 365.0 * 86_400.0;
    if s.is_nan() || s <= 0.0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(s.min(CAP))
}

/// xorshift64*: jitter needs cheap, not cryptographic, randomness.
struct Rng(u64);

impl Rng {
    fn new(id: usize) -> Rng {
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Rng((seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Fortio's `getJitter`: uniform in [-10%, +10%] of `t` (seconds), none when t <= 0.
    fn jitter(&mut self, t: f64) -> f64 {
        if t.is_nan() || t <= 0.0 {
            return 0.0;
        }
        // Nanoseconds, as Fortio; capped (a year) so that absurd pauses cannot overflow.
        let i = ((t.min(365.0 * 86_400.0) * 1e9 / 10.0 + 0.5) as i128).min(i128::from(u64::MAX));
        if i <= 0 {
            return 0.0;
        }
        let span = 2 * i + 1;
        let j = i128::from(self.next()) % span - i;
        j as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        let mut rng = Rng::new(3);
        let mut seen_neg = false;
        let mut seen_pos = false;
        for _ in 0..1000 {
            let j = rng.jitter(0.01);
            assert!(j.abs() <= 0.001 + 1e-12, "{j}");
            seen_neg |= j < 0.0;
            seen_pos |= j > 0.0;
        }
        assert!(seen_neg && seen_pos);
        assert_eq!(rng.jitter(-0.5), 0.0);
        assert!(rng.jitter(f64::INFINITY).is_finite());
        assert_eq!(rng.jitter(f64::NAN), 0.0);
    }

    #[test]
    fn pauses_are_capped_not_overflowed() {
        assert_eq!(seconds(f64::NAN), Duration::ZERO);
        assert_eq!(seconds(-3.0), Duration::ZERO);
        assert_eq!(seconds(0.25), Duration::from_millis(250));
        assert_eq!(seconds(1e300), Duration::from_secs(365 * 86_400));
        assert_eq!(seconds(f64::INFINITY), Duration::from_secs(365 * 86_400));
    }
}

//! Envoy's local rate limit token bucket: it starts full and refills in discrete steps, adding
//! `tokens_per_fill` every `fill_interval` (capped at `max_tokens`), the contract of Envoy's
//! timer-driven bucket, not a GCRA.
//!
//! One bucket is shared by every worker and must stay exact under concurrency: with N tokens,
//! exactly N requests pass per fill, whichever threads they arrive on. The whole state (tokens
//! and the fill epoch they belong to) is one `AtomicU64` changed by compare-and-swap, so a
//! consumption and the refill it depends on are one indivisible step. There is no timer: the
//! refill is computed lazily from a monotonic clock at the next consumption, and the epochs are
//! counted from the bucket's creation, so every fill lands on `created + k * fill_interval`
//! exactly as Envoy's timer ticks would.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Monotonic time since an arbitrary origin. Injected so tests can step time by hand.
pub trait Clock: Send + Sync {
    fn now(&self) -> Duration;
}

/// The process's monotonic clock.
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    pub fn new() -> MonotonicClock {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        MonotonicClock::new()
    }
}

impl Clock for MonotonicClock {
    fn now(&self) -> Duration {
        self.origin.elapsed()
    }
}

/// `envoy.type.v3.TokenBucket`, validated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenBucketSpec {
    /// At least 1.
    pub max_tokens: u32,
    /// At least 1 (Envoy's default when unset).
    pub tokens_per_fill: u32,
    /// Zero only for the filter-level bucket Envoy builds when `token_bucket` is absent: it
    /// holds nothing and never refills.
    pub fill_interval: Duration,
}

impl TokenBucketSpec {
    /// What Envoy builds when a filter-level config has no `token_bucket`.
    pub const EMPTY: TokenBucketSpec = TokenBucketSpec {
        max_tokens: 0,
        tokens_per_fill: 1,
        fill_interval: Duration::ZERO,
    };

    /// Tokens per second, the order in which Envoy consumes matched descriptors (the strictest
    /// first, so that a request refused by one does not drain the others).
    pub fn fill_rate(&self) -> f64 {
        let secs = self.fill_interval.as_secs_f64();
        if secs > 0.0 {
            f64::from(self.tokens_per_fill) / secs
        } else {
            0.0
        }
    }
}

/// Keeps the shared state alone on its cache line: every worker writes it.
#[repr(align(128))]
struct State(AtomicU64);

/// State word: the fill epoch (low 32 bits of the number of whole fill intervals since the
/// bucket was created) in the high half, the tokens in the low half.
fn pack(epoch: u32, tokens: u32) -> u64 {
    (u64::from(epoch) << 32) | u64::from(tokens)
}

fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

pub struct TokenBucket {
    spec: TokenBucketSpec,
    interval_nanos: u64,
    /// Clock reading at creation: epoch 0 starts here.
    created: Duration,
    state: State,
}

impl TokenBucket {
    /// A full bucket; `now` is the clock's current reading.
    pub fn new(spec: TokenBucketSpec, now: Duration) -> TokenBucket {
        TokenBucket {
            spec,
            interval_nanos: u64::try_from(spec.fill_interval.as_nanos()).unwrap_or(u64::MAX),
            created: now,
            state: State(AtomicU64::new(pack(0, spec.max_tokens))),
        }
    }

    pub fn max_tokens(&self) -> u32 {
        self.spec.max_tokens
    }

    /// Takes one token if there is one at `now`.
    pub fn consume(&self, now: Duration) -> bool {
        let epoch = self.epoch(now);
        let mut current = self.state.0.load(Relaxed);
        loop {
            let (e, tokens) = self.refilled(current, epoch);
            if tokens == 0 {
                return false;
            }
            match self
                .state
                .0
                .compare_exchange_weak(current, pack(e, tokens - 1), Relaxed, Relaxed)
            {
                Ok(_) => return true,
                Err(actual) => current = actual,
            }
        }
    }

    /// The tokens left at `now` (the refill due by then counted, nothing written).
    pub fn remaining(&self, now: Duration) -> u32 {
        self.refilled(self.state.0.load(Relaxed), self.epoch(now)).1
    }

    /// Whether the bucket holds `max_tokens` at `now`: such a bucket is the same as a new one
    /// (but for the phase of its fills).
    pub fn is_full(&self, now: Duration) -> bool {
        self.remaining(now) >= self.spec.max_tokens
    }

    /// Envoy's `x-ratelimit-reset` for a timer bucket: the fill interval minus the whole
    /// seconds elapsed since the last fill, in whole seconds. None for a bucket that never
    /// refills.
    pub fn reset_seconds(&self, now: Duration) -> Option<u64> {
        if self.interval_nanos == 0 {
            return None;
        }
        let since_created = now.saturating_sub(self.created).as_nanos();
        let since_fill = since_created % u128::from(self.interval_nanos);
        let elapsed_secs = since_fill / 1_000_000_000;
        let left = u128::from(self.interval_nanos).saturating_sub(elapsed_secs * 1_000_000_000);
        Some(u64::try_from(left / 1_000_000_000).unwrap_or(u64::MAX))
    }

    /// The fill epoch of `now`, truncated to the 32 bits the state keeps.
    fn epoch(&self, now: Duration) -> u32 {
        if self.interval_nanos == 0 {
            return 0;
        }
        let since = now.saturating_sub(self.created).as_nanos();
        (since / u128::from(self.interval_nanos)) as u32
    }

    /// The state word brought forward to `epoch`: one fill per whole interval since the stored
    /// epoch. A stored epoch *ahead* of `epoch` (a thread that read the clock a moment later
    /// has already refilled) is kept as it is. Epochs wrap after 2^32 intervals (6.8 years at
    /// the 50 ms minimum); an idle gap of more than half that would be read as "ahead".
    fn refilled(&self, word: u64, epoch: u32) -> (u32, u32) {
        let (stored, tokens) = unpack(word);
        let elapsed = epoch.wrapping_sub(stored);
        if elapsed == 0 || elapsed > u32::MAX / 2 {
            return (stored, tokens);
        }
        let added = u64::from(elapsed).saturating_mul(u64::from(self.spec.tokens_per_fill));
        let filled = (u64::from(tokens) + added).min(u64::from(self.spec.max_tokens));
        // Bounded by max_tokens, a u32.
        (epoch, filled as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64 as TestTime;
    use std::sync::{Arc, Barrier};

    const MS: Duration = Duration::from_millis(1);

    fn spec(max: u32, per_fill: u32, interval_ms: u64) -> TokenBucketSpec {
        TokenBucketSpec {
            max_tokens: max,
            tokens_per_fill: per_fill,
            fill_interval: Duration::from_millis(interval_ms),
        }
    }

    fn drain(b: &TokenBucket, now: Duration) -> u32 {
        let mut n = 0;
        while b.consume(now) {
            n += 1;
        }
        n
    }

    #[test]
    fn starts_full() {
        let b = TokenBucket::new(spec(5, 1, 1000), Duration::from_secs(7));
        assert_eq!(b.remaining(Duration::from_secs(7)), 5);
        assert!(b.is_full(Duration::from_secs(7)));
        assert_eq!(drain(&b, Duration::from_secs(7)), 5);
        assert!(!b.consume(Duration::from_secs(7)));
    }

    #[test]
    fn refills_in_discrete_steps_on_the_interval_grid() {
        let t0 = Duration::from_secs(100);
        let b = TokenBucket::new(spec(10, 3, 1000), t0);
        assert_eq!(drain(&b, t0), 10);
        // Nothing until a whole interval has passed since creation.
        assert_eq!(b.remaining(t0 + 999 * MS), 0);
        assert!(!b.consume(t0 + 999 * MS));
        // Exactly one fill at the interval boundary.
        assert_eq!(b.remaining(t0 + 1000 * MS), 3);
        assert_eq!(drain(&b, t0 + 1500 * MS), 3);
        // The next fill is on the grid (t0 + 2 s), not 1 s after the last consumption.
        assert!(!b.consume(t0 + 1999 * MS));
        assert_eq!(drain(&b, t0 + 2000 * MS), 3);
        // Two intervals later: two fills at once.
        assert_eq!(b.remaining(t0 + 4000 * MS), 6);
    }

    #[test]
    fn refill_is_capped_at_max_tokens() {
        let b = TokenBucket::new(spec(4, 3, 100), Duration::ZERO);
        assert!(b.consume(Duration::ZERO));
        assert_eq!(b.remaining(100 * MS), 4, "3 + 3 capped at 4");
        assert_eq!(b.remaining(Duration::from_secs(3600)), 4);
        assert!(b.is_full(Duration::from_secs(3600)));
    }

    #[test]
    fn big_tokens_per_fill_and_long_idle_gaps_do_not_overflow() {
        let b = TokenBucket::new(spec(u32::MAX, u32::MAX, 50), Duration::ZERO);
        assert!(b.consume(Duration::ZERO));
        assert_eq!(b.remaining(Duration::ZERO), u32::MAX - 1);
        assert_eq!(b.remaining(50 * MS), u32::MAX);
        let b = TokenBucket::new(spec(1000, 999_999, 50), Duration::ZERO);
        assert_eq!(drain(&b, Duration::ZERO), 1000);
        // A year of 50 ms intervals times a huge fill still caps.
        assert_eq!(b.remaining(Duration::from_secs(365 * 86400)), 1000);
    }

    #[test]
    fn a_stale_clock_reading_never_refills_backwards() {
        let b = TokenBucket::new(spec(1, 1, 100), Duration::ZERO);
        assert_eq!(drain(&b, Duration::ZERO), 1);
        // One thread refilled at epoch 5 and took the token...
        assert!(b.consume(500 * MS));
        // ...another that read the clock earlier (epoch 4) must not count epochs 4..5 again.
        assert!(!b.consume(400 * MS));
        assert_eq!(b.remaining(400 * MS), 0);
        assert_eq!(b.remaining(600 * MS), 1);
    }

    #[test]
    fn an_empty_spec_holds_nothing_and_never_refills() {
        let b = TokenBucket::new(TokenBucketSpec::EMPTY, Duration::ZERO);
        assert!(!b.consume(Duration::ZERO));
        assert!(!b.consume(Duration::from_secs(1_000_000)));
        assert_eq!(b.reset_seconds(Duration::from_secs(5)), None);
    }

    #[test]
    fn reset_seconds_follows_envoys_timer_bucket() {
        let b = TokenBucket::new(spec(1, 1, 60_000), Duration::from_secs(10));
        assert_eq!(b.reset_seconds(Duration::from_secs(10)), Some(60));
        // 10.5 s after the last fill: 60 - 10 whole seconds.
        assert_eq!(b.reset_seconds(Duration::from_millis(20_500)), Some(50));
        // Right after the next fill it starts again.
        assert_eq!(b.reset_seconds(Duration::from_secs(70)), Some(60));
        // Sub-second intervals report 0, as Envoy's seconds truncation does.
        let b = TokenBucket::new(spec(1, 1, 500), Duration::ZERO);
        assert_eq!(b.reset_seconds(200 * MS), Some(0));
    }

    #[test]
    fn fill_rate_orders_descriptors() {
        assert!(spec(10, 1, 1000).fill_rate() < spec(10, 10, 1000).fill_rate());
        assert!(spec(10, 1, 60_000).fill_rate() < spec(10, 1, 1000).fill_rate());
        assert_eq!(TokenBucketSpec::EMPTY.fill_rate(), 0.0);
    }

    /// A clock the test moves by hand, shared with the racing threads.
    struct ManualClock(TestTime);

    impl Clock for ManualClock {
        fn now(&self) -> Duration {
            Duration::from_nanos(self.0.load(Relaxed))
        }
    }

    #[test]
    fn racing_threads_get_exactly_the_tokens_of_each_fill() {
        const THREADS: usize = 8;
        const ATTEMPTS: usize = 20_000;
        const MAX: u32 = 1000;
        const PER_FILL: u32 = 250;
        let clock = Arc::new(ManualClock(TestTime::new(0)));
        let bucket = Arc::new(TokenBucket::new(spec(MAX, PER_FILL, 1000), clock.now()));
        let race = |expected: u32| {
            let barrier = Arc::new(Barrier::new(THREADS));
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    let (bucket, clock, barrier) = (bucket.clone(), clock.clone(), barrier.clone());
                    std::thread::spawn(move || {
                        barrier.wait();
                        (0..ATTEMPTS)
                            .filter(|_| bucket.consume(clock.now()))
                            .count()
                    })
                })
                .collect();
            let won: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
            assert_eq!(won, expected as usize);
        };
        // The initial fill, then one fill per interval, each shared out exactly once.
        race(MAX);
        clock.0.store(1_000_000_000, Relaxed);
        race(PER_FILL);
        clock.0.store(3_000_000_000, Relaxed);
        race(2 * PER_FILL);
    }

    #[test]
    fn racing_threads_across_fill_boundaries_never_exceed_the_budget() {
        // The clock advances while threads race: whatever the interleaving, the passes can
        // never exceed the initial tokens plus one fill per interval elapsed.
        const THREADS: usize = 6;
        const MAX: u32 = 50;
        const PER_FILL: u32 = 7;
        let clock = Arc::new(ManualClock(TestTime::new(0)));
        let bucket = Arc::new(TokenBucket::new(spec(MAX, PER_FILL, 100), clock.now()));
        let barrier = Arc::new(Barrier::new(THREADS + 1));
        let handles: Vec<_> = (0..THREADS)
            .map(|_| {
                let (bucket, clock, barrier) = (bucket.clone(), clock.clone(), barrier.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    (0..50_000).filter(|_| bucket.consume(clock.now())).count()
                })
            })
            .collect();
        barrier.wait();
        for step in 1..=20u64 {
            clock.0.store(step * 100_000_000, Relaxed);
            std::thread::yield_now();
        }
        let won: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
        let budget = MAX as usize + 20 * PER_FILL as usize;
        assert!(won <= budget, "{won} passes > budget {budget}");
        // What is left plus what was taken is the budget, exactly, once the fills are counted.
        let left = bucket.remaining(clock.now()) as usize;
        assert!(won + left <= budget);
    }
}

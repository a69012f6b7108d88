//! The filter at its three lifetimes: the decoded configuration ([`Config`]), one [`Worker`]
//! per worker thread (its stats slot, random numbers, per-connection limiters), and one
//! [`Filter`] per request.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use hoist_config::model::{RateLimit, RawTypedConfig};
use hoist_config::ConfigError;
use hoist_http::{RequestHead, ResponseFlags, ResponseHead};
use hoist_stats::Store;
use http::header::{HeaderName, HeaderValue};

use super::config::{LimitConfig, VhRateLimits};
use super::descriptors::{self, Request};
use super::limiter::{BucketId, Limiter};
use super::token_bucket::{Clock, MonotonicClock};
use crate::chain::BuildContext;
use crate::filter::{FilterStatus, HttpFilter, LocalReply, StreamContext, StreamInfo};

/// The filter's configuration, and what decoding per-route configurations needs.
pub struct Config {
    top: LimitConfig,
    store: Arc<Store>,
    clock: Arc<dyn Clock>,
}

impl Config {
    pub fn decode(raw: &RawTypedConfig, cx: &BuildContext<'_>) -> Result<Config, ConfigError> {
        Config::with_clock(raw, cx.stats.clone(), Arc::new(MonotonicClock::new()))
    }

    /// As `decode`, on a given clock (tests step time by hand).
    pub fn with_clock(
        raw: &RawTypedConfig,
        store: Arc<Store>,
        clock: Arc<dyn Clock>,
    ) -> Result<Config, ConfigError> {
        let top = LimitConfig::decode(raw, &store, clock.clone(), false)?;
        Ok(Config { top, store, clock })
    }

    /// A LocalRateLimit from `typed_per_filter_config`: a limiter of its own.
    pub fn decode_route(&self, raw: &RawTypedConfig) -> Result<LimitConfig, ConfigError> {
        LimitConfig::decode(raw, &self.store, self.clock.clone(), true)
    }
}

/// Connections with limiters before the per-connection map is first swept.
const MIN_SWEEP: usize = 1024;

/// `local_rate_limit_per_downstream_connection`: a limiter per (configuration, connection) on
/// the worker that owns the connection. The filter API has no connection-close hook, so the
/// map is swept whenever it has doubled since the last sweep: limiters whose buckets are all
/// full are dropped, as a full limiter is the same as the new one a later request would get
/// (but for the phase of its fills). A closed connection's limiter goes once it has refilled.
#[derive(Default)]
struct ConnectionLimiters {
    map: HashMap<(u64, u64), Rc<Limiter>>,
    sweep_at: usize,
}

/// The filter on one worker.
pub struct Worker {
    config: Arc<Config>,
    slot: usize,
    /// xorshift64* state for the filter_enabled / filter_enforced draws.
    rng: Cell<u64>,
    connections: RefCell<ConnectionLimiters>,
}

impl Worker {
    pub fn new(config: Arc<Config>, slot: usize) -> Worker {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Worker {
            config,
            slot,
            rng: Cell::new(splitmix64(seed ^ (slot as u64).wrapping_mul(0x9e37_79b9))),
            connections: RefCell::default(),
        }
    }

    pub fn stream(&self) -> Filter<'_> {
        Filter {
            worker: self,
            used: None,
        }
    }

    fn random(&self) -> u64 {
        let mut x = self.rng.get();
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng.set(x);
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn connection_limiter(
        &self,
        config: &LimitConfig,
        connection: u64,
        now: Duration,
    ) -> Rc<Limiter> {
        let mut c = self.connections.borrow_mut();
        let key = (config.id, connection);
        if let Some(l) = c.map.get(&key) {
            return l.clone();
        }
        if c.map.len() >= c.sweep_at {
            c.map.retain(|_, l| !l.is_full(now));
            c.sweep_at = MIN_SWEEP.max(2 * c.map.len());
        }
        let l = Rc::new(Limiter::new(&config.spec, now));
        c.map.insert(key, l.clone());
        l
    }

    #[cfg(test)]
    fn connection_limiters(&self) -> usize {
        self.connections.borrow().map.len()
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    // xorshift must not start at 0.
    (z ^ (z >> 31)) | 1
}

/// Where the limiter that decided a request lives, to read its bucket again when the response
/// goes out (Envoy's x-ratelimit headers show the bucket as it is then).
enum Source {
    Filter,
    Route,
    Connection(Rc<Limiter>),
}

struct Used {
    source: Source,
    bucket: BucketId,
}

pub struct Filter<'w> {
    worker: &'w Worker,
    /// Set when the limiter was consulted and x-ratelimit headers are on.
    used: Option<Used>,
}

/// The `rate_limits` whose descriptors count: the config's own, else the virtual host's of the
/// config's stage without a disable_key (unless `vh_rate_limits: IGNORE`).
fn applicable<'a>(
    config: &'a LimitConfig,
    info: &'a StreamInfo<'_>,
) -> impl Iterator<Item = &'a RateLimit> {
    let (list, from_vh): (&[RateLimit], bool) = if !config.rate_limits.is_empty() {
        (&config.rate_limits, false)
    } else if config.vh_rate_limits == VhRateLimits::Ignore {
        (&[], false)
    } else {
        (info.virtual_host_rate_limits, true)
    };
    let stage = config.stage;
    list.iter()
        .filter(move |r| !from_vh || (r.stage() == stage && r.disable_key.is_empty()))
}

const X_RATELIMIT_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_RATELIMIT_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RATELIMIT_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

impl HttpFilter for Filter<'_> {
    async fn decode_headers(
        &mut self,
        head: &mut RequestHead,
        _end_stream: bool,
        cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        let w = self.worker;
        let (config, source) = match cx.route_config::<LimitConfig>() {
            Some(c) => (c, Source::Route),
            None => (&w.config.top, Source::Filter),
        };
        if !config.filter_enabled.contains(|| w.random()) {
            return FilterStatus::Continue;
        }
        config.stats.enabled.inc(w.slot);
        let now = config.clock.now();
        let matched = if config.spec.descriptors.is_empty() {
            Vec::new()
        } else {
            let request = Request {
                head,
                remote: cx.info.downstream_remote.ip(),
                scheme: if cx.info.tls.is_some() {
                    "https"
                } else {
                    "http"
                },
            };
            descriptors::matched(&config.spec, applicable(config, cx.info), &request)
        };
        let (outcome, source) = match &config.shared {
            Some(l) => (l.request_allowed(&matched, now), source),
            None => {
                let l = w.connection_limiter(config, cx.info.connection_id, now);
                (l.request_allowed(&matched, now), Source::Connection(l))
            }
        };
        if config.x_ratelimit_headers {
            self.used = Some(Used {
                source,
                bucket: outcome.bucket,
            });
        }
        if outcome.allowed {
            config.stats.ok.inc(w.slot);
            return FilterStatus::Continue;
        }
        config.stats.rate_limited.inc(w.slot);
        if !config.filter_enforced.contains(|| w.random()) {
            config
                .request_headers_to_add_when_not_enforced
                .apply(&mut head.headers);
            return FilterStatus::Continue;
        }
        config.stats.enforced.inc(w.slot);
        let mut reply = LocalReply::new(config.status, "local_rate_limited", "local_rate_limited");
        config.response_headers_to_add.apply(&mut reply.headers);
        reply.flags = ResponseFlags::RATE_LIMITED;
        FilterStatus::Reply(reply)
    }

    /// Envoy adds the x-ratelimit headers to every response of a request the limiter saw,
    /// the 429 included.
    fn encode_headers(
        &mut self,
        head: &mut ResponseHead,
        cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        let Some(used) = &self.used else {
            return FilterStatus::Continue;
        };
        let limiter = match &used.source {
            Source::Filter => self.worker.config.top.shared.as_ref(),
            Source::Route => cx
                .route_config::<LimitConfig>()
                .and_then(|c| c.shared.as_ref()),
            Source::Connection(l) => Some(l.as_ref()),
        };
        let Some(limiter) = limiter else {
            return FilterStatus::Continue;
        };
        let bucket = limiter.bucket(used.bucket);
        let now = self.worker.config.clock.now();
        let headers = &mut head.headers;
        headers.append(X_RATELIMIT_LIMIT, HeaderValue::from(bucket.max_tokens()));
        headers.append(
            X_RATELIMIT_REMAINING,
            HeaderValue::from(bucket.remaining(now)),
        );
        if let Some(reset) = bucket.reset_seconds(now) {
            headers.append(X_RATELIMIT_RESET, HeaderValue::from(reset));
        }
        FilterStatus::Continue
    }
}

#[cfg(test)]
#[path = "filter_tests.rs"]
mod tests;

//! remote_jwks: a provider's keys fetched from its `http_uri` through a cluster.
//!
//! As in Envoy, each worker keeps its own copy with its own expiry (`cache_duration`, default
//! 10 minutes) and fetches on demand when a request needs keys it does not have; the request
//! waits for that fetch. With `async_fetch`, one background thread (Envoy's main thread)
//! fetches at start and again before the keys expire, and publishes each new set to every
//! worker; a failed refetch keeps the old keys and retries after `failed_refetch_duration`
//! (default 1 s). Workers pick up a published set with one atomic load per verification.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use hoist_stats::Counter;

use super::fetch::{self, HttpUri};
use super::jwks::Jwks;
use super::upstream::Upstream;

/// Envoy's defaults.
pub const DEFAULT_CACHE_DURATION: Duration = Duration::from_secs(600);
pub const DEFAULT_FAILED_REFETCH: Duration = Duration::from_secs(1);
/// The background fetch comes this long before the keys expire.
const REFETCH_BEFORE_EXPIRY: Duration = Duration::from_secs(5);

pub struct RemoteJwks {
    pub upstream: Upstream,
    pub uri: HttpUri,
    pub timeout: Duration,
    pub cache_duration: Duration,
    /// `async_fetch`: the retry delay after a failed background fetch.
    pub async_fetch: Option<Duration>,
    published: Published,
}

/// The latest set from the background fetcher. `generation` changes after `keys` does, so a
/// worker that sees a new generation finds the new keys under the lock.
#[derive(Default)]
struct Published {
    generation: AtomicU64,
    keys: Mutex<Option<Arc<Jwks>>>,
}

impl RemoteJwks {
    pub fn new(
        upstream: Upstream,
        uri: HttpUri,
        timeout: Duration,
        cache_duration: Duration,
        async_fetch: Option<Duration>,
    ) -> RemoteJwks {
        RemoteJwks {
            upstream,
            uri,
            timeout,
            cache_duration,
            async_fetch,
            published: Published::default(),
        }
    }

    /// One fetch, blocking: the parsed keys, or why not (logged by the caller).
    pub fn fetch(&self) -> Result<Jwks, String> {
        let body = fetch::get(&self.upstream, &self.uri, self.timeout)?;
        Jwks::parse(&body).map_err(|s| format!("invalid JWKS: {}", s.text()))
    }

    pub fn generation(&self) -> u64 {
        self.published.generation.load(Ordering::Acquire)
    }

    /// The set the background fetcher published last, with its generation.
    pub fn published(&self) -> (u64, Option<Arc<Jwks>>) {
        let keys = match self.published.keys.lock() {
            Ok(k) => k.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        (self.generation(), keys)
    }

    fn publish(&self, jwks: Arc<Jwks>) {
        match self.published.keys.lock() {
            Ok(mut k) => *k = Some(jwks),
            Err(poisoned) => *poisoned.into_inner() = Some(jwks),
        }
        self.published.generation.fetch_add(1, Ordering::Release);
    }
}

/// Tells the background fetcher to stop (when the filter's configuration goes away).
#[derive(Default)]
pub struct StopSignal {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl StopSignal {
    pub fn stop(&self) {
        match self.stopped.lock() {
            Ok(mut s) => *s = true,
            Err(p) => *p.into_inner() = true,
        }
        self.wake.notify_all();
    }

    /// Sleeps until `until` or a stop; true when stopped.
    fn sleep_until(&self, until: Instant) -> bool {
        let Ok(mut stopped) = self.stopped.lock() else {
            return true;
        };
        loop {
            if *stopped {
                return true;
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            stopped = match self.wake.wait_timeout(stopped, left) {
                Ok((s, _)) => s,
                Err(_) => return true,
            };
        }
    }
}

/// Fetch outcomes of the background thread, counted on the stats store's main slot.
pub struct MainCounters {
    pub success: Counter,
    pub failed: Counter,
    pub slot: usize,
}

/// Starts the background fetcher for the providers with `async_fetch`. It holds them weakly
/// and ends when they are gone or `stop` is signalled.
pub fn spawn_async_fetcher(
    remotes: Vec<Weak<RemoteJwks>>,
    stop: Arc<StopSignal>,
    counters: MainCounters,
) {
    let spawned = std::thread::Builder::new()
        .name("hoist-jwks-fetch".into())
        .spawn(move || {
            let mut due: Vec<Instant> = vec![Instant::now(); remotes.len()];
            loop {
                for (i, weak) in remotes.iter().enumerate() {
                    if due[i] > Instant::now() {
                        continue;
                    }
                    let Some(remote) = weak.upgrade() else { return };
                    let retry = remote.async_fetch.unwrap_or(DEFAULT_FAILED_REFETCH);
                    due[i] = match remote.fetch() {
                        Ok(jwks) => {
                            remote.publish(Arc::new(jwks));
                            counters.success.inc(counters.slot);
                            let d = remote.cache_duration;
                            let refetch = if d > REFETCH_BEFORE_EXPIRY {
                                d - REFETCH_BEFORE_EXPIRY
                            } else {
                                d
                            };
                            Instant::now() + refetch
                        }
                        Err(e) => {
                            tracing::warn!(
                                "jwt_authn: fetching the JWKS {}{} from cluster {} failed: {e}",
                                remote.uri.authority,
                                remote.uri.path,
                                remote.upstream.cluster
                            );
                            counters.failed.inc(counters.slot);
                            Instant::now() + retry
                        }
                    };
                }
                let next = due.iter().min().copied().unwrap_or_else(Instant::now);
                if stop.sleep_until(next) {
                    return;
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("jwt_authn: cannot start the JWKS fetcher thread: {e}");
    }
}

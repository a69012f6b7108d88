//! `<stat_prefix>.http_local_rate_limit.*`: at the top level of the stats tree (not under the
//! connection manager's `http.<prefix>.`), as Envoy roots them.

use hoist_stats::{Counter, Store};

/// The four counters of one rate limit configuration. Configurations with the same
/// stat_prefix share them, as Envoy's stats are keyed by name.
pub struct Stats {
    /// Requests for which the rate limiter was consulted (the filter enabled for them).
    pub enabled: Counter,
    /// Requests that got a token.
    pub ok: Counter,
    /// Requests that found no token, enforced or not.
    pub rate_limited: Counter,
    /// Requests refused (the local reply sent).
    pub enforced: Counter,
}

impl Stats {
    pub fn new(store: &Store, stat_prefix: &str) -> Stats {
        let counter =
            |name: &str| store.counter(&format!("{stat_prefix}.http_local_rate_limit.{name}"));
        Stats {
            enabled: counter("enabled"),
            ok: counter("ok"),
            rate_limited: counter("rate_limited"),
            enforced: counter("enforced"),
        }
    }
}

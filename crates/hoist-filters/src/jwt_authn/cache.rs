//! Verified tokens, per worker and provider (Envoy's JwtCache, `jwt_cache_config`): a hit
//! skips parsing and the signature check, never the issuer, time and audience checks. Least
//! recently used entries go first; tokens past `jwt_max_token_size` are not kept.

use std::collections::HashMap;
use std::rc::Rc;

use super::jwt::Jwt;
use super::status::Status;

/// Envoy's defaults for `jwt_cache_size` and `jwt_max_token_size`.
pub const DEFAULT_SIZE: usize = 100;
pub const DEFAULT_MAX_TOKEN: usize = 4096;

/// Entries expired by more than this are dropped on lookup (jwt_verify_lib's default skew;
/// the provider's own skew is applied by the caller).
const LOOKUP_SKEW: u64 = 60;

#[derive(Clone, Copy, Debug)]
pub struct CacheConfig {
    pub size: usize,
    pub max_token: usize,
}

pub struct JwtCache {
    /// None: the provider has no jwt_cache_config (every lookup misses).
    config: Option<CacheConfig>,
    /// foldhash, not SipHash: every request hashes its whole token (hundreds of bytes), and
    /// flooding needs no keyed hash here because only tokens whose signature verified are
    /// inserted, at most `jwt_cache_size` of them.
    entries: HashMap<Box<str>, Entry, foldhash::fast::RandomState>,
    clock: u64,
}

struct Entry {
    jwt: Rc<Jwt>,
    last_used: u64,
}

impl JwtCache {
    pub fn new(config: Option<CacheConfig>) -> JwtCache {
        JwtCache {
            config,
            entries: HashMap::default(),
            clock: 0,
        }
    }

    /// The verified JWT of `token`, unless absent or expired at `now` (unix seconds).
    pub fn lookup(&mut self, token: &str, now: u64) -> Option<Rc<Jwt>> {
        self.config?;
        let entry = self.entries.get_mut(token)?;
        if entry.jwt.verify_time(now, LOOKUP_SKEW) == Status::JwtExpired {
            self.entries.remove(token);
            return None;
        }
        self.clock += 1;
        entry.last_used = self.clock;
        Some(entry.jwt.clone())
    }

    pub fn insert(&mut self, token: &str, jwt: Rc<Jwt>) {
        let Some(config) = self.config else { return };
        if token.len() > config.max_token || config.size == 0 {
            return;
        }
        if self.entries.len() >= config.size && !self.entries.contains_key(token) {
            // Eviction scans the entries: with Envoy's default of 100 that is cheaper than
            // keeping a recency list up to date on every hit.
            if let Some(oldest) = self
                .entries
                .iter()
                .min_by_key(|(_, e)| e.last_used)
                .map(|(k, _)| k.clone())
            {
                self.entries.remove(&oldest);
            }
        }
        self.clock += 1;
        self.entries.insert(
            token.into(),
            Entry {
                jwt,
                last_used: self.clock,
            },
        );
    }

    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD;
    use base64::Engine;

    fn jwt(exp: u64) -> (String, Rc<Jwt>) {
        let t = format!(
            "{}.{}.{}",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"HS256"}"#),
            URL_SAFE_NO_PAD.encode(format!(r#"{{"exp":{exp}}}"#)),
            URL_SAFE_NO_PAD.encode("s")
        );
        let j = Rc::new(Jwt::parse(&t).unwrap());
        (t, j)
    }

    #[test]
    fn disabled_cache_never_hits() {
        let mut c = JwtCache::new(None);
        let (t, j) = jwt(1000);
        c.insert(&t, j);
        assert!(c.lookup(&t, 0).is_none());
    }

    #[test]
    fn hits_until_expired_then_forgets() {
        let mut c = JwtCache::new(Some(CacheConfig {
            size: 10,
            max_token: 4096,
        }));
        let (t, j) = jwt(1000);
        c.insert(&t, j);
        assert!(c.lookup(&t, 500).is_some());
        assert!(c.lookup(&t, 1060).is_some(), "within the lookup skew");
        assert!(c.lookup(&t, 1061).is_none());
        assert_eq!(c.len(), 0, "an expired entry is removed");
    }

    #[test]
    fn least_recently_used_goes_first_and_big_tokens_are_not_kept() {
        let mut c = JwtCache::new(Some(CacheConfig {
            size: 2,
            max_token: 200,
        }));
        let (a, ja) = jwt(1001);
        let (b, jb) = jwt(1002);
        let (d, jd) = jwt(1003);
        c.insert(&a, ja);
        c.insert(&b, jb);
        assert!(c.lookup(&a, 0).is_some());
        c.insert(&d, jd);
        assert!(c.lookup(&a, 0).is_some());
        assert!(c.lookup(&b, 0).is_none(), "b was the least recently used");
        assert!(c.lookup(&d, 0).is_some());
        let mut small = JwtCache::new(Some(CacheConfig {
            size: 2,
            max_token: a.len() - 1,
        }));
        let (a, ja) = jwt(1001);
        small.insert(&a, ja);
        assert!(small.lookup(&a, 0).is_none());
    }
}

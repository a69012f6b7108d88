//! envoy.filters.http.jwt_authn: requests must carry JSON Web Tokens that verify against the
//! configured providers, as the matching rule (or the route's PerRouteConfig) requires.
//!
//! - [`config`]: the JwtAuthentication message, decoded and resolved at load;
//! - [`extract`]: where tokens are found; [`jwt`], [`jwks`], [`verify`]: parsing and checking;
//! - [`verifier`]: requirement trees over a request's tokens; [`cache`]: verified tokens;
//! - [`remote`], [`fetch`], [`upstream`]: remote_jwks through a cluster;
//! - [`status`]: Envoy's status texts, the bodies of the 401/403 replies.
//!
//! Per worker: a token cache and a copy of the remote keys per provider, so verification takes
//! no lock (a remote provider with async_fetch costs one atomic load to see a new key set).

mod cache;
mod config;
mod extract;
mod fetch;
mod jwks;
mod jwt;
mod remote;
mod status;
mod upstream;
mod verifier;
mod verify;

#[cfg(test)]
mod tests;

use std::cell::{Cell, RefCell};
use std::sync::{Arc, Once};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use hoist_config::model::RawTypedConfig;
use hoist_config::reader::Node;
use hoist_config::ConfigError;
use hoist_http::RequestHead;
use hoist_stats::{Counter, WorkerCounter};
use http::{HeaderMap, HeaderValue, Method};
use serde_json::Value;

use crate::chain::BuildContext;
use crate::filter::{FilterStatus, HttpFilter, LocalReply, StreamContext};
use cache::JwtCache;
use config::{lookup_requirement, Keys, Settings};
use extract::Extractor;
use jwks::Jwks;
use remote::{MainCounters, RemoteJwks, StopSignal};
use status::Status;
use verifier::Run;

pub const TYPE_NAME: &str = "envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication";
const PER_ROUTE: &str = "envoy.extensions.filters.http.jwt_authn.v3.PerRouteConfig";
/// The dynamic metadata namespace of verified payloads and headers.
pub const METADATA_NAMESPACE: &str = "envoy.filters.http.jwt_authn";
/// Envoy cuts the path in `realm="..."` to this many bytes.
const MAX_REALM_PATH: usize = 256;

/// `http.<stat_prefix>.jwt_authn.*`.
struct Counters {
    allowed: Counter,
    denied: Counter,
    cors_preflight_bypassed: Counter,
    jwks_fetch_success: Counter,
    jwks_fetch_failed: Counter,
    jwt_cache_hit: Counter,
    jwt_cache_miss: Counter,
}

struct Stats {
    allowed: WorkerCounter,
    denied: WorkerCounter,
    cors_preflight_bypassed: WorkerCounter,
    jwks_fetch_success: WorkerCounter,
    jwks_fetch_failed: WorkerCounter,
    jwt_cache_hit: WorkerCounter,
    jwt_cache_miss: WorkerCounter,
}

/// The filter's configuration, shared by all workers.
pub struct Config {
    settings: Settings,
    /// Token locations per provider (index-aligned with `settings.providers`).
    extractors: Vec<Extractor>,
    /// The locations of all providers, for allow_missing[_or_failed].
    all_providers: Extractor,
    counters: Counters,
    main_slot: usize,
    async_fetch: Once,
    stop: Arc<StopSignal>,
}

impl Drop for Config {
    fn drop(&mut self) {
        self.stop.stop();
    }
}

impl Config {
    pub fn decode(raw: &RawTypedConfig, cx: &BuildContext<'_>) -> Result<Config, ConfigError> {
        verify::ensure_crypto_provider();
        let settings = Settings::decode(raw, cx.clusters)?;
        let extractors = settings
            .providers
            .iter()
            .map(|p| Extractor::new([p]))
            .collect();
        let all_providers = Extractor::new(&settings.providers);
        let counter = |name: &str| {
            cx.stats
                .counter(&format!("http.{}.jwt_authn.{name}", cx.stat_prefix))
        };
        let counters = Counters {
            allowed: counter("allowed"),
            denied: counter("denied"),
            cors_preflight_bypassed: counter("cors_preflight_bypassed"),
            jwks_fetch_success: counter("jwks_fetch_success"),
            jwks_fetch_failed: counter("jwks_fetch_failed"),
            jwt_cache_hit: counter("jwt_cache_hit"),
            jwt_cache_miss: counter("jwt_cache_miss"),
        };
        Ok(Config {
            settings,
            extractors,
            all_providers,
            counters,
            main_slot: cx.stats.main_slot(),
            async_fetch: Once::new(),
            stop: Arc::new(StopSignal::default()),
        })
    }

    fn remotes(&self) -> impl Iterator<Item = &Arc<RemoteJwks>> {
        self.settings
            .providers
            .iter()
            .filter_map(|p| match &p.keys {
                Keys::Remote(r) => Some(r),
                Keys::Local(_) => None,
            })
    }

    /// The background fetcher for async_fetch providers starts with the first worker, not at
    /// load, so `--mode validate` fetches nothing.
    fn start_async_fetch(&self) {
        self.async_fetch.call_once(|| {
            let remotes: Vec<_> = self
                .remotes()
                .filter(|r| r.async_fetch.is_some())
                .map(Arc::downgrade)
                .collect();
            if remotes.is_empty() {
                return;
            }
            remote::spawn_async_fetcher(
                remotes,
                self.stop.clone(),
                MainCounters {
                    success: self.counters.jwks_fetch_success.clone(),
                    failed: self.counters.jwks_fetch_failed.clone(),
                    slot: self.main_slot,
                },
            );
        });
    }
}

/// PerRouteConfig: `disabled: true`, or a `requirement_name` from the requirement map
/// (resolved at load: an unknown name is a configuration error, where Envoy answers 403 at
/// request time).
pub enum RouteConfig {
    Disabled,
    Requirement(usize),
}

impl RouteConfig {
    pub fn decode(raw: &RawTypedConfig, config: &Config) -> Result<RouteConfig, ConfigError> {
        let name = raw.type_url.rsplit('/').next().unwrap_or("");
        if name != PER_ROUTE {
            return Err(ConfigError::new(
                raw.yaml_path.clone(),
                format!(
                    "typed_config @type \"{}\" does not match \"type.googleapis.com/{PER_ROUTE}\"",
                    raw.type_url
                ),
            ));
        }
        let node = Node::new(&raw.value, raw.yaml_path.clone());
        let mut m = node.message()?;
        let r = match m.oneof(&["disabled", "requirement_name"], true)? {
            Some("disabled") => {
                if !m.bool("disabled", false)? {
                    return Err(m.error("disabled must be true when set"));
                }
                RouteConfig::Disabled
            }
            _ => RouteConfig::Requirement(lookup_requirement(
                &m.required("requirement_name")?,
                &config.settings.requirement_map,
            )?),
        };
        m.finish()?;
        Ok(r)
    }
}

/// A provider's state on one worker.
struct ProviderWorker {
    cache: RefCell<JwtCache>,
    remote: RemoteWorker,
}

/// This worker's copy of a remote provider's keys.
#[derive(Default)]
struct RemoteWorker {
    keys: RefCell<Option<Arc<Jwks>>>,
    /// None: until the background fetcher replaces them.
    expires: Cell<Option<Instant>>,
    /// The background fetcher's generation these keys came from.
    generation: Cell<u64>,
    fetching: Cell<bool>,
    fetched: tokio::sync::Notify,
}

impl RemoteWorker {
    fn fresh(&self, remote: &RemoteJwks) -> Option<Arc<Jwks>> {
        if remote.async_fetch.is_some() && remote.generation() != self.generation.get() {
            let (generation, keys) = remote.published();
            self.generation.set(generation);
            if let Some(k) = keys {
                *self.keys.borrow_mut() = Some(k);
                self.expires.set(None);
            }
        }
        let keys = self.keys.borrow();
        match self.expires.get() {
            Some(t) if Instant::now() >= t => None,
            _ => keys.clone(),
        }
    }
}

/// Clears `fetching` and wakes the waiters however the fetch ends (a request that goes away
/// mid-fetch included).
struct FetchGuard<'a>(&'a RemoteWorker);

impl Drop for FetchGuard<'_> {
    fn drop(&mut self) {
        self.0.fetching.set(false);
        self.0.fetched.notify_waiters();
    }
}

/// The filter on one worker.
pub struct Worker {
    config: Arc<Config>,
    providers: Vec<ProviderWorker>,
    stats: Stats,
}

impl Worker {
    pub fn new(config: Arc<Config>, slot: usize) -> Worker {
        config.start_async_fetch();
        let providers = config
            .settings
            .providers
            .iter()
            .map(|p| ProviderWorker {
                cache: RefCell::new(JwtCache::new(p.cache)),
                remote: RemoteWorker::default(),
            })
            .collect();
        let c = &config.counters;
        let stats = Stats {
            allowed: c.allowed.bind(slot),
            denied: c.denied.bind(slot),
            cors_preflight_bypassed: c.cors_preflight_bypassed.bind(slot),
            jwks_fetch_success: c.jwks_fetch_success.bind(slot),
            jwks_fetch_failed: c.jwks_fetch_failed.bind(slot),
            jwt_cache_hit: c.jwt_cache_hit.bind(slot),
            jwt_cache_miss: c.jwt_cache_miss.bind(slot),
        };
        Worker {
            config,
            providers,
            stats,
        }
    }

    pub fn stream(&self) -> Filter<'_> {
        Filter { worker: self }
    }

    /// The keys of provider `index`: local ones, this worker's fresh remote copy, or a fetch
    /// the request waits for (one at a time per worker and provider; requests that arrive
    /// meanwhile wait for its outcome).
    async fn keys(&self, index: usize) -> Result<Arc<Jwks>, Status> {
        let remote = match &self.config.settings.providers[index].keys {
            Keys::Local(k) => return Ok(k.clone()),
            Keys::Remote(r) => r,
        };
        let state = &self.providers[index].remote;
        if let Some(k) = state.fresh(remote) {
            return Ok(k);
        }
        if state.fetching.get() {
            state.fetched.notified().await;
            return state.fresh(remote).ok_or(Status::JwksFetchFail);
        }
        state.fetching.set(true);
        let _guard = FetchGuard(state);
        let job = remote.clone();
        match tokio::task::spawn_blocking(move || job.fetch()).await {
            Ok(Ok(jwks)) => {
                self.stats.jwks_fetch_success.inc();
                let keys = Arc::new(jwks);
                *state.keys.borrow_mut() = Some(keys.clone());
                state
                    .expires
                    .set(Some(Instant::now() + remote.cache_duration));
                Ok(keys)
            }
            outcome => {
                let why = match outcome {
                    Ok(Err(e)) => e,
                    Err(e) => e.to_string(),
                    Ok(Ok(_)) => String::new(),
                };
                tracing::warn!(
                    "jwt_authn: fetching the JWKS {}{} from cluster {} failed: {why}",
                    remote.uri.authority,
                    remote.uri.path,
                    remote.upstream.cluster
                );
                self.stats.jwks_fetch_failed.inc();
                Err(Status::JwksFetchFail)
            }
        }
    }
}

/// The filter for one request.
pub struct Filter<'w> {
    worker: &'w Worker,
}

impl HttpFilter for Filter<'_> {
    async fn decode_headers(
        &mut self,
        head: &mut RequestHead,
        _end_stream: bool,
        cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        let worker = self.worker;
        let settings = &worker.config.settings;
        let stats = &worker.stats;
        let scheme = if cx.info.tls.is_some() {
            "https"
        } else {
            "http"
        };
        if settings.bypass_cors_preflight && is_cors_preflight(head) {
            stats.cors_preflight_bypassed.inc();
            stats.allowed.inc();
            return FilterStatus::Continue;
        }
        let requirement = match cx.route_config::<RouteConfig>() {
            Some(RouteConfig::Disabled) => None,
            Some(RouteConfig::Requirement(i)) => Some(*i),
            None => settings
                .rules
                .iter()
                .find(|r| crate::matcher::route_matches(&r.route_match, head, scheme))
                .and_then(|r| r.requirement),
        };
        let Some(requirement) = requirement else {
            stats.allowed.inc();
            return FilterStatus::Continue;
        };
        let mut run = Run {
            worker,
            head,
            now: unix_now(),
            extracted: serde_json::Map::new(),
        };
        let status = run.eval(&settings.requirements[requirement]).await;
        if !run.extracted.is_empty() {
            cx.state.metadata.insert(
                METADATA_NAMESPACE.to_owned(),
                Value::Object(std::mem::take(&mut run.extracted)),
            );
        }
        if status == Status::Ok {
            stats.allowed.inc();
            return FilterStatus::Continue;
        }
        stats.denied.inc();
        // Verification may remove headers, never the path or host: the realm is the request's.
        let realm = realm(run.head, scheme);
        FilterStatus::Reply(reply(status, realm, settings.strip_failure_response))
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn is_cors_preflight(head: &RequestHead) -> bool {
    let non_empty = |name: &str| head.headers.get(name).is_some_and(|v| !v.is_empty());
    head.method == Method::OPTIONS
        && non_empty("origin")
        && non_empty("access-control-request-method")
}

/// `<scheme>://<host><path>`, the path cut at 256 bytes (Envoy's buildOriginalUri).
fn realm(head: &RequestHead, scheme: &str) -> String {
    let mut cut = head.path.len().min(MAX_REALM_PATH);
    while !head.path.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{scheme}://{}{}",
        head.authority.as_deref().unwrap_or(""),
        &head.path[..cut]
    )
}

/// Envoy's rejection: the status text as the body and `www-authenticate: Bearer
/// realm="<url>"`, with `, error="invalid_token"` unless the token was missing. With
/// strip_failure_response, neither.
fn reply(status: Status, realm: String, strip: bool) -> LocalReply {
    if strip {
        return LocalReply::new(status.http_status(), "", status.details());
    }
    let mut value = format!("Bearer realm=\"{realm}\"");
    if status != Status::JwtMissed {
        value.push_str(", error=\"invalid_token\"");
    }
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(&value) {
        headers.insert(http::header::WWW_AUTHENTICATE, v);
    }
    LocalReply {
        headers,
        ..LocalReply::new(status.http_status(), status.text(), status.details())
    }
}

//! Decoding `envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit`, for the filter
//! itself and for `typed_per_filter_config` on a route or virtual host (which must carry its
//! own `token_bucket`: a per-route config is a limiter of its own, with its own bucket).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hoist_config::decoders::rate_limit;
use hoist_config::model::{RateLimit, RawTypedConfig};
use hoist_config::reader::{Message, Node, Result};
use hoist_config::ConfigError;
use hoist_stats::Store;

use super::headers::HeaderAdds;
use super::limiter::{DescriptorSpec, Limiter, LimiterSpec};
use super::stats::Stats;
use super::status::status_code;
use super::token_bucket::{Clock, TokenBucketSpec};

pub const TYPE_NAME: &str = "envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit";

/// Envoy's floor on the fill interval ("local rate limit token bucket fill timer must be >=
/// 50ms").
const MIN_FILL_INTERVAL: Duration = Duration::from_millis(50);

/// `envoy.config.core.v3.RuntimeFractionalPercent`: hoist has no runtime layer, so the
/// `default_value` is the fraction; `runtime_key` is accepted and has no effect.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fraction {
    pub numerator: u32,
    /// 100, 10 000 or 1 000 000.
    pub denominator: u32,
}

impl Fraction {
    /// The default of `filter_enabled` and `filter_enforced`: 0 %.
    pub const NEVER: Fraction = Fraction {
        numerator: 0,
        denominator: 100,
    };

    /// Whether a request drawn with `random` falls in the fraction (Envoy's
    /// `random % denominator < numerator`).
    pub fn contains(&self, random: impl FnOnce() -> u64) -> bool {
        if self.numerator == 0 {
            false
        } else if self.numerator >= self.denominator {
            true
        } else {
            random() % u64::from(self.denominator) < u64::from(self.numerator)
        }
    }
}

/// `vh_rate_limits`: whether the virtual host's `rate_limits` generate descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VhRateLimits {
    /// Unless the route has its own (hoist's routes never do): so, used.
    Override,
    Include,
    Ignore,
}

/// One LocalRateLimit message, ready to run: the filter's own, or a per-route one.
pub struct LimitConfig {
    /// Unique per decoded configuration: keys the per-connection limiters.
    pub id: u64,
    pub stats: Stats,
    pub status: u16,
    pub filter_enabled: Fraction,
    pub filter_enforced: Fraction,
    pub request_headers_to_add_when_not_enforced: HeaderAdds,
    pub response_headers_to_add: HeaderAdds,
    /// `enable_x_ratelimit_headers: DRAFT_VERSION_03`.
    pub x_ratelimit_headers: bool,
    pub stage: u32,
    pub vh_rate_limits: VhRateLimits,
    /// The filter's own `rate_limits`: when set, the virtual host's are not used.
    pub rate_limits: Vec<RateLimit>,
    pub spec: Arc<LimiterSpec>,
    /// The limiter every worker shares; None with
    /// `local_rate_limit_per_downstream_connection` (each connection gets one of its own).
    pub shared: Option<Limiter>,
    pub clock: Arc<dyn Clock>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

impl LimitConfig {
    /// Decodes a LocalRateLimit; `per_route`: from typed_per_filter_config (a token bucket is
    /// then required).
    pub fn decode(
        raw: &RawTypedConfig,
        store: &Store,
        clock: Arc<dyn Clock>,
        per_route: bool,
    ) -> std::result::Result<LimitConfig, ConfigError> {
        let name = raw.type_url.rsplit('/').next().unwrap_or("");
        if name != TYPE_NAME {
            return Err(ConfigError::new(
                raw.yaml_path.clone(),
                format!(
                    "typed_config @type \"{}\" does not match \"type.googleapis.com/{TYPE_NAME}\"",
                    raw.type_url
                ),
            ));
        }
        let node = Node::new(&raw.value, raw.yaml_path.clone());
        let mut m = node.message()?;
        m.unsupported(&["local_cluster_rate_limit", "max_dynamic_descriptors"])?;
        if m.bool("rate_limited_as_resource_exhausted", false)? {
            return Err(m.error(
                "field \"rate_limited_as_resource_exhausted\" is not supported by hoist yet",
            ));
        }
        let stat_prefix = m.required_string("stat_prefix")?;
        let status = match m.field("status")? {
            Some(n) => status_code(&n)?,
            None => 429,
        };
        let default = match m.field("token_bucket")? {
            Some(n) => {
                let b = token_bucket(&n)?;
                if b.fill_interval < MIN_FILL_INTERVAL {
                    return Err(n.error(format!(
                        "fill_interval must be at least 50ms, got {}ms",
                        b.fill_interval.as_millis()
                    )));
                }
                Some(b)
            }
            None if per_route => {
                return Err(m.error(
                    "a per-route local rate limit needs its own \"token_bucket\" (missing required field)",
                ))
            }
            None => None,
        };
        let filter_enabled = fraction(&mut m, "filter_enabled")?;
        let filter_enforced = fraction(&mut m, "filter_enforced")?;
        let request_headers_to_add_when_not_enforced =
            HeaderAdds::decode(&mut m, "request_headers_to_add_when_not_enforced")?;
        let response_headers_to_add = HeaderAdds::decode(&mut m, "response_headers_to_add")?;
        let descriptors = descriptors(&mut m, default)?;
        let stage = m.u32("stage", 0, 0..=10)?;
        let per_connection = m.bool("local_rate_limit_per_downstream_connection", false)?;
        let x_ratelimit_headers = m
            .enumeration("enable_x_ratelimit_headers", &["OFF", "DRAFT_VERSION_03"])?
            .is_some_and(|i| i == 1);
        let vh_rate_limits =
            match m.enumeration("vh_rate_limits", &["OVERRIDE", "INCLUDE", "IGNORE"])? {
                None | Some(0) => VhRateLimits::Override,
                Some(1) => VhRateLimits::Include,
                Some(_) => VhRateLimits::Ignore,
            };
        let always_consume_default = m.bool("always_consume_default_token_bucket", true)?;
        let rate_limits = own_rate_limits(&mut m)?;
        m.finish()?;

        let spec = Arc::new(LimiterSpec::new(
            default.unwrap_or(TokenBucketSpec::EMPTY),
            descriptors,
            always_consume_default,
        ));
        let shared = (!per_connection).then(|| Limiter::new(&spec, clock.now()));
        Ok(LimitConfig {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            stats: Stats::new(store, &stat_prefix),
            status,
            filter_enabled,
            filter_enforced,
            request_headers_to_add_when_not_enforced,
            response_headers_to_add,
            x_ratelimit_headers,
            stage,
            vh_rate_limits,
            rate_limits,
            spec,
            shared,
            clock,
        })
    }
}

/// `envoy.type.v3.TokenBucket`. Durations count in whole milliseconds, as Envoy reads them.
fn token_bucket(node: &Node) -> Result<TokenBucketSpec> {
    let mut m = node.message()?;
    let max_tokens = m.required("max_tokens")?.u32_in(1..=u32::MAX)?;
    let tokens_per_fill = m.u32("tokens_per_fill", 1, 1..=u32::MAX)?;
    let interval_node = m.required("fill_interval")?;
    let fill_interval = interval_node.duration()?;
    let fill_interval =
        Duration::from_millis(u64::try_from(fill_interval.as_millis()).unwrap_or(u64::MAX));
    if fill_interval.is_zero() {
        return Err(interval_node.error("fill_interval must be greater than 0"));
    }
    m.finish()?;
    Ok(TokenBucketSpec {
        max_tokens,
        tokens_per_fill,
        fill_interval,
    })
}

fn fraction(m: &mut Message, field: &str) -> Result<Fraction> {
    let Some(node) = m.field(field)? else {
        return Ok(Fraction::NEVER);
    };
    let mut f = node.message()?;
    // Accepted for compatibility: without a runtime layer the default_value always applies.
    f.string("runtime_key")?;
    let mut d = f.required("default_value")?.message()?;
    let numerator = d.u32("numerator", 0, 0..=u32::MAX)?;
    let denominator = match d.enumeration("denominator", &["HUNDRED", "TEN_THOUSAND", "MILLION"])? {
        None | Some(0) => 100,
        Some(1) => 10_000,
        Some(_) => 1_000_000,
    };
    d.finish()?;
    f.finish()?;
    Ok(Fraction {
        numerator,
        denominator,
    })
}

/// `descriptors[]`: each with entries and a bucket whose fill_interval is a multiple of the
/// filter's own (Envoy refills descriptors on the filter's timer ticks).
fn descriptors(m: &mut Message, default: Option<TokenBucketSpec>) -> Result<Vec<DescriptorSpec>> {
    let items = m.list("descriptors")?;
    let mut out: Vec<DescriptorSpec> = Vec::with_capacity(items.len());
    for item in &items {
        let Some(default) = default else {
            return Err(item.error(
                "descriptors need the config's own \"token_bucket\": their fill_interval must be a multiple of it",
            ));
        };
        let mut d = item.message()?;
        let entry_nodes = d.list("entries")?;
        if entry_nodes.is_empty() {
            return Err(d.error("\"entries\" must have at least one item"));
        }
        let mut entries = Vec::with_capacity(entry_nodes.len());
        for e in &entry_nodes {
            let mut em = e.message()?;
            let key = em.required_string("key")?;
            let value_node = em.required("value")?;
            let value = value_node.string()?;
            if value.is_empty() {
                return Err(value_node.error(
                    "an empty value (Envoy's dynamic descriptors) is not supported by hoist yet",
                ));
            }
            em.finish()?;
            entries.push((key, value));
        }
        let bucket_node = d.required("token_bucket")?;
        let bucket = token_bucket(&bucket_node)?;
        if bucket.fill_interval.as_millis() % default.fill_interval.as_millis() != 0 {
            return Err(bucket_node.error(format!(
                "fill_interval {}ms is not a multiple of the token bucket's fill_interval {}ms",
                bucket.fill_interval.as_millis(),
                default.fill_interval.as_millis()
            )));
        }
        d.finish()?;
        if out.iter().any(|o| o.entries == entries) {
            return Err(item.error("duplicate descriptor: the same entries are listed earlier"));
        }
        out.push(DescriptorSpec { entries, bucket });
    }
    Ok(out)
}

/// The filter's own `rate_limits`; like Envoy, stage and disable_key are refused there (they
/// belong to the route's entries).
fn own_rate_limits(m: &mut Message) -> Result<Vec<RateLimit>> {
    let mut out = Vec::new();
    for item in m.list("rate_limits")? {
        let r = rate_limit(&item)?;
        if r.stage.is_some() || !r.disable_key.is_empty() {
            return Err(item.error(
                "\"stage\" and \"disable_key\" are not supported in the filter's own rate_limits",
            ));
        }
        out.push(r);
    }
    Ok(out)
}

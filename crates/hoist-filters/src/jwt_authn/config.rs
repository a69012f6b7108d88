//! `envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication` decoded and checked at load:
//! providers (with their keys loaded or their cluster resolved), requirements, rules and the
//! requirement map. Every reference (a provider name, a requirement name, a cluster) is
//! resolved here, so a request never meets a dangling name.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hoist_config::decoders::{data_source, route_match};
use hoist_config::model::{Cluster, RawTypedConfig, RouteMatch};
use hoist_config::reader::{Message, Node, Result};
use hoist_config::ConfigError;
use http::HeaderName;

use super::cache::{CacheConfig, DEFAULT_MAX_TOKEN, DEFAULT_SIZE};
use super::fetch::HttpUri;
use super::jwks::Jwks;
use super::jwt::sanitize_audience;
use super::remote::{RemoteJwks, DEFAULT_CACHE_DURATION, DEFAULT_FAILED_REFETCH};
use super::upstream::Upstream;

/// jwt_verify_lib's default clock skew, used when `clock_skew_seconds` is 0.
const DEFAULT_CLOCK_SKEW: u64 = 60;

pub enum Keys {
    Local(Arc<Jwks>),
    Remote(Arc<RemoteJwks>),
}

pub struct Provider {
    pub name: String,
    /// Empty: any issuer.
    pub issuer: String,
    /// Sanitized (see `sanitize_audience`); empty allows any.
    pub audiences: Vec<String>,
    pub keys: Keys,
    pub forward: bool,
    /// `from_headers`: lower-cased name and value prefix.
    pub from_headers: Vec<(HeaderName, String)>,
    pub from_params: Vec<String>,
    pub from_cookies: Vec<String>,
    pub forward_payload_header: Option<HeaderName>,
    pub pad_forward_payload_header: bool,
    pub payload_in_metadata: Option<String>,
    pub header_in_metadata: Option<String>,
    pub clock_skew: u64,
    /// None: no `jwt_cache_config`, nothing is cached.
    pub cache: Option<CacheConfig>,
    /// `claim_to_headers`: header, claim (dotted for nested claims).
    pub claim_to_headers: Vec<(HeaderName, String)>,
}

/// `JwtRequirement`, with provider names resolved to indexes.
#[derive(Debug, Clone)]
pub enum Requirement {
    /// `provider_name`, or `provider_and_audiences` (audiences sanitized; they replace the
    /// provider's).
    Provider {
        provider: usize,
        audiences: Option<Vec<String>>,
    },
    /// `requires_any`: the allow_missing[_or_failed] members become flags, as in Envoy.
    Any {
        children: Vec<Requirement>,
        allow_missing_or_failed: bool,
        allow_missing: bool,
    },
    All(Vec<Requirement>),
    AllowMissingOrFailed,
    AllowMissing,
    /// An empty requirement: anything passes.
    AllowAll,
}

pub struct Rule {
    pub route_match: RouteMatch,
    /// Index into `Settings::requirements`; None: no requirement (the request passes).
    pub requirement: Option<usize>,
}

/// The decoded filter configuration.
pub struct Settings {
    pub providers: Vec<Provider>,
    pub requirements: Vec<Requirement>,
    pub rules: Vec<Rule>,
    /// `requirement_map`: name to index into `requirements`, sorted by name.
    pub requirement_map: BTreeMap<String, usize>,
    pub bypass_cors_preflight: bool,
    pub strip_failure_response: bool,
}

impl Settings {
    pub fn decode(raw: &RawTypedConfig, clusters: &[Cluster]) -> Result<Settings> {
        let node = Node::new(&raw.value, raw.yaml_path.clone());
        let mut m = node.message()?;
        m.unsupported(&["filter_state_rules"])?;
        if let Some(n) = m.field("stat_prefix")? {
            if !n.str()?.is_empty() {
                return Err(n.error("stat_prefix is not supported by hoist yet"));
            }
        }
        let mut providers = Vec::new();
        if let Some(n) = m.field("providers")? {
            for (name, p) in n.entries()? {
                providers.push(provider(name, &p, clusters)?);
            }
        }
        let mut requirements = Vec::new();
        let mut requirement_map = BTreeMap::new();
        if let Some(n) = m.field("requirement_map")? {
            for (name, r) in n.entries()? {
                requirements.push(requirement(&r, &providers)?);
                requirement_map.insert(name.to_owned(), requirements.len() - 1);
            }
        }
        let mut rules = Vec::new();
        for item in m.list("rules")? {
            let mut r = item.message()?;
            let route_match = route_match(&r.required("match")?)?;
            let req = match r.oneof(&["requires", "requirement_name"], false)? {
                Some("requires") => {
                    requirements.push(requirement(&r.required("requires")?, &providers)?);
                    Some(requirements.len() - 1)
                }
                Some(_) => {
                    let n = r.required("requirement_name")?;
                    Some(lookup_requirement(&n, &requirement_map)?)
                }
                None => None,
            };
            r.finish()?;
            rules.push(Rule {
                route_match,
                requirement: req,
            });
        }
        let bypass_cors_preflight = m.bool("bypass_cors_preflight", false)?;
        let strip_failure_response = m.bool("strip_failure_response", false)?;
        m.finish()?;
        Ok(Settings {
            providers,
            requirements,
            rules,
            requirement_map,
            bypass_cors_preflight,
            strip_failure_response,
        })
    }

    /// The first provider with `issuer`, else the first without an issuer (Envoy's
    /// findByIssuer, for allow_missing[_or_failed]).
    pub fn provider_by_issuer(&self, issuer: &str) -> Option<usize> {
        self.providers
            .iter()
            .position(|p| p.issuer == issuer)
            .or_else(|| self.providers.iter().position(|p| p.issuer.is_empty()))
    }
}

/// A requirement name from `requirement_map` (a rule's, or a route's PerRouteConfig).
pub fn lookup_requirement(node: &Node, map: &BTreeMap<String, usize>) -> Result<usize> {
    let name = node.str()?;
    map.get(name).copied().ok_or_else(|| {
        let names: Vec<&str> = map.keys().map(String::as_str).collect();
        node.error(format!(
            "Wrong requirement_name: {name}. It should be one of [{}]",
            names.join(",")
        ))
    })
}

fn header_name(node: &Node) -> Result<HeaderName> {
    let text = node.str()?;
    HeaderName::from_bytes(text.to_ascii_lowercase().as_bytes())
        .map_err(|_| node.error(format!("\"{text}\" is not a valid header name")))
}

fn opt_nonempty(m: &mut Message, name: &str) -> Result<Option<String>> {
    Ok(m.opt_string(name)?.filter(|s| !s.is_empty()))
}

fn provider(name: &str, node: &Node, clusters: &[Cluster]) -> Result<Provider> {
    let mut m = node.message()?;
    m.unsupported(&[
        "subjects",
        "max_lifetime",
        "normalize_payload_in_metadata",
        "failed_status_in_metadata",
    ])?;
    for flag in ["require_expiration", "clear_route_cache"] {
        if m.bool(flag, false)? {
            return Err(m.error(format!("{flag}: true is not supported by hoist yet")));
        }
    }
    let issuer = m.string("issuer")?;
    let audiences = m
        .strings("audiences")?
        .iter()
        .map(|a| sanitize_audience(a).to_owned())
        .collect();
    let keys = match m.oneof(&["local_jwks", "remote_jwks"], true)? {
        Some("local_jwks") => {
            let n = m.required("local_jwks")?;
            let source = data_source(&n)?;
            let text = source
                .read()
                .map_err(|e| n.error(format!("cannot read the JWKS: {e}")))?;
            // Envoy only warns and then refuses every token; an unusable key set is a
            // configuration error here.
            let jwks =
                Jwks::parse(&text).map_err(|s| n.error(format!("invalid JWKS: {}", s.text())))?;
            Keys::Local(Arc::new(jwks))
        }
        _ => Keys::Remote(Arc::new(remote_jwks(
            &m.required("remote_jwks")?,
            clusters,
        )?)),
    };
    let forward = m.bool("forward", false)?;
    let mut from_headers = Vec::new();
    for item in m.list("from_headers")? {
        let mut h = item.message()?;
        let header = header_name(&h.required("name")?)?;
        let prefix = h.string("value_prefix")?;
        h.finish()?;
        from_headers.push((header, prefix));
    }
    let from_params = m.strings("from_params")?;
    let from_cookies = m.strings("from_cookies")?;
    let forward_payload_header = match m.field("forward_payload_header")? {
        Some(n) if !n.str()?.is_empty() => Some(header_name(&n)?),
        _ => None,
    };
    let pad_forward_payload_header = m.bool("pad_forward_payload_header", false)?;
    let payload_in_metadata = opt_nonempty(&mut m, "payload_in_metadata")?;
    let header_in_metadata = opt_nonempty(&mut m, "header_in_metadata")?;
    let clock_skew = match m.u32("clock_skew_seconds", 0, 0..=u32::MAX)? {
        0 => DEFAULT_CLOCK_SKEW,
        s => u64::from(s),
    };
    let cache = match m.field("jwt_cache_config")? {
        Some(n) => {
            let mut c = n.message()?;
            let size = c.u32("jwt_cache_size", 0, 0..=u32::MAX)? as usize;
            let max_token = c.u32("jwt_max_token_size", 0, 0..=u32::MAX)? as usize;
            c.finish()?;
            Some(CacheConfig {
                size: if size == 0 { DEFAULT_SIZE } else { size },
                max_token: if max_token == 0 {
                    DEFAULT_MAX_TOKEN
                } else {
                    max_token
                },
            })
        }
        None => None,
    };
    let mut claim_to_headers = Vec::new();
    for item in m.list("claim_to_headers")? {
        let mut c = item.message()?;
        let header = header_name(&c.required("header_name")?)?;
        let claim = c.required_string("claim_name")?;
        c.finish()?;
        claim_to_headers.push((header, claim));
    }
    m.finish()?;
    Ok(Provider {
        name: name.to_owned(),
        issuer,
        audiences,
        keys,
        forward,
        from_headers,
        from_params,
        from_cookies,
        forward_payload_header,
        pad_forward_payload_header,
        payload_in_metadata,
        header_in_metadata,
        clock_skew,
        cache,
        claim_to_headers,
    })
}

fn remote_jwks(node: &Node, clusters: &[Cluster]) -> Result<RemoteJwks> {
    let mut m = node.message()?;
    m.unsupported(&["retry_policy"])?;
    let mut h = m.required("http_uri")?.message()?;
    let uri_node = h.required("uri")?;
    let uri = HttpUri::parse(uri_node.str()?).map_err(|e| uri_node.error(e))?;
    let cluster_node = h.required("cluster")?;
    let cluster_name = cluster_node.str()?;
    let cluster = clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .ok_or_else(|| {
            cluster_node.error(format!(
                "cluster \"{cluster_name}\" is not defined in static_resources.clusters"
            ))
        })?;
    let upstream =
        Upstream::new(cluster).map_err(|e| ConfigError::new(cluster.yaml_path.clone(), e))?;
    let timeout_node = h.required("timeout")?;
    let timeout = timeout_node.duration()?;
    if timeout.is_zero() {
        return Err(timeout_node.error("timeout must be greater than 0s"));
    }
    h.finish()?;
    let cache_duration = match m.field("cache_duration")? {
        Some(n) => {
            let d = n.duration()?;
            if d < Duration::from_millis(1) {
                return Err(n.error("cache_duration must be at least 1ms"));
            }
            d
        }
        None => DEFAULT_CACHE_DURATION,
    };
    let async_fetch = match m.field("async_fetch")? {
        Some(n) => {
            let mut a = n.message()?;
            // hoist never holds a listener back for the first fetch: a request that comes
            // before it fetches on demand, so fast_listener's value changes nothing.
            a.bool("fast_listener", false)?;
            let retry = a
                .opt_duration("failed_refetch_duration")?
                .filter(|d| !d.is_zero())
                .unwrap_or(DEFAULT_FAILED_REFETCH);
            a.finish()?;
            Some(retry)
        }
        None => None,
    };
    m.finish()?;
    Ok(RemoteJwks::new(
        upstream,
        uri,
        timeout,
        cache_duration,
        async_fetch,
    ))
}

fn provider_index(node: &Node, providers: &[Provider]) -> Result<usize> {
    let name = node.str()?;
    providers
        .iter()
        .position(|p| p.name == name)
        .ok_or_else(|| node.error(format!("Required provider ['{name}'] is not configured.")))
}

/// A `JwtRequirement`.
fn requirement(node: &Node, providers: &[Provider]) -> Result<Requirement> {
    let mut m = node.message()?;
    m.unsupported(&["extract_only_without_validation"])?;
    let which = m.oneof(
        &[
            "provider_name",
            "provider_and_audiences",
            "requires_any",
            "requires_all",
            "allow_missing_or_failed",
            "allow_missing",
        ],
        false,
    )?;
    let r = match which {
        None => Requirement::AllowAll,
        Some("provider_name") => Requirement::Provider {
            provider: provider_index(&m.required("provider_name")?, providers)?,
            audiences: None,
        },
        Some("provider_and_audiences") => {
            let mut p = m.required("provider_and_audiences")?.message()?;
            let provider = provider_index(&p.required("provider_name")?, providers)?;
            let audiences = p
                .strings("audiences")?
                .iter()
                .map(|a| sanitize_audience(a).to_owned())
                .collect();
            p.finish()?;
            Requirement::Provider {
                provider,
                audiences: Some(audiences),
            }
        }
        Some(list @ ("requires_any" | "requires_all")) => {
            let mut l = m.required(list)?.message()?;
            let items = l.list("requirements")?;
            if items.len() < 2 {
                return Err(l.error("requirements must have at least 2 items"));
            }
            let children = items
                .iter()
                .map(|i| requirement(i, providers))
                .collect::<Result<Vec<_>>>()?;
            l.finish()?;
            if list == "requires_all" {
                Requirement::All(children)
            } else {
                any(children)
            }
        }
        Some(empty) => {
            m.required(empty)?.message()?.finish()?;
            if empty == "allow_missing" {
                Requirement::AllowMissing
            } else {
                Requirement::AllowMissingOrFailed
            }
        }
    };
    m.finish()?;
    Ok(r)
}

/// Envoy's AnyVerifier: allow_missing[_or_failed] members become flags; when nothing else is
/// left, one of them is the only child.
fn any(all: Vec<Requirement>) -> Requirement {
    let mut allow_missing_or_failed = false;
    let mut allow_missing = false;
    let mut children = Vec::new();
    for r in all {
        match r {
            Requirement::AllowMissingOrFailed => allow_missing_or_failed = true,
            Requirement::AllowMissing => allow_missing = true,
            other => children.push(other),
        }
    }
    if children.is_empty() {
        children.push(if allow_missing_or_failed {
            Requirement::AllowMissingOrFailed
        } else {
            Requirement::AllowMissing
        });
    }
    Requirement::Any {
        children,
        allow_missing_or_failed,
        allow_missing,
    }
}

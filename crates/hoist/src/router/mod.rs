//! The route table of one connection manager: virtual host selection by authority, then the
//! first route whose match succeeds. Built once at load (payload files are mapped here), shared
//! read-only by every worker.

mod headers;
mod matcher;
mod redirect;

use std::collections::HashMap;
use std::sync::Arc;

use bytes::Bytes;
use hoist_config::model::{
    DataSource, ForwardAction, PathMatch, RateLimit, Redirect, RouteAction, RouteConfiguration,
    RouteMatch, VirtualHost,
};
use hoist_config::ConfigError;
use hoist_filters::{FilterChainConfig, RouteConfig};
use hoist_http::Body;
use hoist_tls::file::{FileRegion, MappedFile};

pub use headers::ResponseMutations;
pub use matcher::MatchInput;
pub use redirect::location as redirect_location;

pub enum Action {
    DirectResponse {
        status: u16,
        body: Body,
    },
    Redirect(Redirect),
    /// `route`: forward to an upstream cluster.
    Forward(ForwardAction),
}

pub struct Route {
    pub name: String,
    route_match: RouteMatch,
    pub action: Action,
    pub response_headers: ResponseMutations,
    /// Per-filter configuration (typed_per_filter_config of the route, else of its virtual
    /// host), indexed like the connection manager's filter chain; resolved once at load.
    pub filter_configs: Vec<Option<RouteConfig>>,
}

impl Route {
    pub fn path_match(&self) -> &PathMatch {
        &self.route_match.path
    }
}

pub struct VirtualHostEntry {
    pub name: String,
    pub routes: Vec<Route>,
    pub response_headers: ResponseMutations,
    pub require_tls: bool,
    /// `rate_limits`: descriptor generators the rate limit filters read.
    pub rate_limits: Vec<RateLimit>,
}

pub struct Router {
    virtual_hosts: Vec<VirtualHostEntry>,
    exact: HashMap<String, usize>,
    /// `*.example.com` style, longest suffix first.
    suffix_wildcards: Vec<(String, usize)>,
    /// `example.*` style, longest prefix first.
    prefix_wildcards: Vec<(String, usize)>,
    catch_all: Option<usize>,
    pub response_headers: ResponseMutations,
}

impl Router {
    pub fn compile(
        rc: &RouteConfiguration,
        yaml_path: &str,
        filters: &FilterChainConfig,
    ) -> Result<Arc<Router>, ConfigError> {
        let mut router = Router {
            virtual_hosts: Vec::with_capacity(rc.virtual_hosts.len()),
            exact: HashMap::new(),
            suffix_wildcards: Vec::new(),
            prefix_wildcards: Vec::new(),
            catch_all: None,
            response_headers: ResponseMutations::compile(&rc.headers, yaml_path)?,
        };
        for (i, vh) in rc.virtual_hosts.iter().enumerate() {
            let vh_path = format!("{yaml_path}.virtual_hosts[{i}]");
            router
                .virtual_hosts
                .push(compile_vhost(vh, &vh_path, filters)?);
            for domain in &vh.domains {
                if domain == "*" {
                    router.catch_all = Some(i);
                } else if let Some(suffix) = domain.strip_prefix('*') {
                    router.suffix_wildcards.push((suffix.to_string(), i));
                } else if let Some(prefix) = domain.strip_suffix('*') {
                    router.prefix_wildcards.push((prefix.to_string(), i));
                } else {
                    router.exact.insert(domain.clone(), i);
                }
            }
        }
        router
            .suffix_wildcards
            .sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        router
            .prefix_wildcards
            .sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        Ok(Arc::new(router))
    }

    /// Envoy's search order: exact, suffix wildcard, prefix wildcard, then `*`. The wildcard must
    /// stand for at least one character. The authority is compared as sent, port included.
    pub fn virtual_host(&self, authority: Option<&str>) -> Option<&VirtualHostEntry> {
        let index = match authority {
            Some(a) => {
                let host = a.to_ascii_lowercase();
                self.exact
                    .get(&host)
                    .copied()
                    .or_else(|| {
                        self.suffix_wildcards
                            .iter()
                            .find(|(s, _)| host.len() > s.len() && host.ends_with(s.as_str()))
                            .map(|(_, i)| *i)
                    })
                    .or_else(|| {
                        self.prefix_wildcards
                            .iter()
                            .find(|(p, _)| host.len() > p.len() && host.starts_with(p.as_str()))
                            .map(|(_, i)| *i)
                    })
                    .or(self.catch_all)
            }
            None => self.catch_all,
        };
        index.and_then(|i| self.virtual_hosts.get(i))
    }
}

impl VirtualHostEntry {
    /// The first route that matches, in configuration order.
    pub fn route(&self, input: &MatchInput<'_>) -> Option<&Route> {
        self.routes
            .iter()
            .find(|r| matcher::route_matches(&r.route_match, input))
    }
}

fn compile_vhost(
    vh: &VirtualHost,
    yaml_path: &str,
    filters: &FilterChainConfig,
) -> Result<VirtualHostEntry, ConfigError> {
    let vh_configs = filter_configs(
        &vh.typed_per_filter_config,
        filters,
        vec![None; filters.len()],
    )?;
    let routes = vh
        .routes
        .iter()
        .map(|r| {
            let action = match &r.action {
                RouteAction::DirectResponse(d) => Action::DirectResponse {
                    status: d.status,
                    body: load_body(d.body.as_ref(), &r.yaml_path)?,
                },
                RouteAction::Redirect(redirect) => Action::Redirect(redirect.clone()),
                RouteAction::Route(forward) => Action::Forward(forward.clone()),
            };
            Ok(Route {
                name: r.name.clone(),
                route_match: r.route_match.clone(),
                action,
                response_headers: ResponseMutations::compile(&r.headers, &r.yaml_path)?,
                filter_configs: filter_configs(
                    &r.typed_per_filter_config,
                    filters,
                    vh_configs.clone(),
                )?,
            })
        })
        .collect::<Result<Vec<_>, ConfigError>>()?;
    Ok(VirtualHostEntry {
        name: vh.name.clone(),
        routes,
        response_headers: ResponseMutations::compile(&vh.headers, yaml_path)?,
        require_tls: vh.require_tls,
        rate_limits: vh.rate_limits.clone(),
    })
}

/// Decodes `typed_per_filter_config` over `inherited` (the virtual host's, for a route).
fn filter_configs(
    typed: &std::collections::BTreeMap<String, hoist_config::model::RawTypedConfig>,
    filters: &FilterChainConfig,
    mut inherited: Vec<Option<RouteConfig>>,
) -> Result<Vec<Option<RouteConfig>>, ConfigError> {
    for (name, raw) in typed {
        if let Some((index, config)) = filters.route_config(name, raw)? {
            inherited[index] = Some(config);
        }
    }
    Ok(inherited)
}

/// A body from a file stays file-backed (mapped once, sent with sendfile or encrypted in place);
/// inline bodies are shared bytes.
fn load_body(source: Option<&DataSource>, route_path: &str) -> Result<Body, ConfigError> {
    let at = || format!("{route_path}.direct_response.body");
    Ok(match source {
        None => Body::Empty,
        Some(DataSource::File { path, .. }) => {
            let file = MappedFile::open(path).map_err(|e| {
                ConfigError::new(at(), format!("cannot open \"{}\": {e}", path.display()))
            })?;
            if file.is_empty() {
                Body::Empty
            } else {
                Body::File(FileRegion::whole(file))
            }
        }
        Some(DataSource::Inline(b)) => Body::Bytes(Bytes::from(b.clone())),
        Some(DataSource::Env { value, .. }) => Body::Bytes(Bytes::from(value.clone())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoist_config::model::HeaderMutations;

    fn vh(name: &str, domains: &[&str]) -> VirtualHost {
        VirtualHost {
            name: name.into(),
            domains: domains.iter().map(|d| d.to_string()).collect(),
            routes: vec![],
            headers: HeaderMutations::default(),
            typed_per_filter_config: Default::default(),
            require_tls: false,
            rate_limits: vec![],
        }
    }

    fn test_build_context() -> hoist_filters::BuildContext<'static> {
        static STORE: std::sync::OnceLock<std::sync::Arc<hoist_stats::Store>> =
            std::sync::OnceLock::new();
        hoist_filters::BuildContext {
            stat_prefix: "test",
            stats: STORE.get_or_init(|| hoist_stats::Store::new(1)),
            workers: 1,
            clusters: &[],
        }
    }

    #[test]
    fn domain_search_order() {
        let rc = RouteConfiguration {
            name: "r".into(),
            virtual_hosts: vec![
                vh("any", &["*"]),
                vh("exact", &["api.example.com"]),
                vh("suffix", &["*.example.com"]),
                vh("longer-suffix", &["*.eu.example.com"]),
                vh("prefix", &["api.*"]),
                vh("port", &["example.com:10443"]),
            ],
            max_direct_response_body_size_bytes: 4096,
            headers: HeaderMutations::default(),
        };
        let none = FilterChainConfig::build(&[], &test_build_context()).unwrap();
        let r = Router::compile(&rc, "route_config", &none).unwrap();
        let name = |a: Option<&str>| r.virtual_host(a).map(|v| v.name.clone()).unwrap();
        assert_eq!(name(Some("API.example.com")), "exact");
        assert_eq!(name(Some("www.example.com")), "suffix");
        assert_eq!(name(Some("x.eu.example.com")), "longer-suffix");
        assert_eq!(name(Some("api.other.org")), "prefix");
        assert_eq!(name(Some("example.com:10443")), "port");
        assert_eq!(name(Some("example.com")), "any");
        assert_eq!(
            name(Some(".example.com")),
            "any",
            "a wildcard stands for one char or more"
        );
        assert_eq!(name(None), "any");
    }
}

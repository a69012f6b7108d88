//! `http_filters` of the connection manager: the filters hoist implements, and the router,
//! which must come last.

use crate::extension::{select, Kind, Slot};
use crate::model::HttpFilter;
use crate::reader::{Message, Result};

const ROUTER: Kind = Kind {
    type_name: "envoy.extensions.filters.http.router.v3.Router",
    names: &["envoy.filters.http.router", "envoy.router"],
    name_only: false,
};

/// HTTP filters hoist implements besides the router. A filter is added by listing its config
/// type here; its typed_config is kept as a `RawTypedConfig` that the filter decodes (with
/// `hoist_config::reader`) when it is built. `name_only` must stay false: the filter needs its
/// config.
const FILTERS: &[Kind] = &[
    Kind {
        type_name: "envoy.extensions.filters.http.buffer.v3.Buffer",
        names: &["envoy.filters.http.buffer", "envoy.buffer"],
        name_only: false,
    },
    Kind {
        type_name: "envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication",
        names: &["envoy.filters.http.jwt_authn"],
        name_only: false,
    },
    Kind {
        type_name: "envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit",
        names: &["envoy.filters.http.local_ratelimit"],
        name_only: false,
    },
    // The WAF: Coraza's Wasm configuration shape, run natively by hoist-waf.
    Kind {
        type_name: "envoy.extensions.filters.http.wasm.v3.Wasm",
        names: &["envoy.filters.http.wasm"],
        name_only: false,
    },
    Kind {
        type_name: "hoist.extensions.filters.http.waf.v3.Waf",
        names: &["hoist.filters.http.waf"],
        name_only: false,
    },
];

/// The decoded `http_filters`.
pub(crate) struct HttpFilters {
    /// The filters before the router, in order.
    pub filters: Vec<HttpFilter>,
    /// The router's name as written (it takes no per-route configuration).
    pub router_name: String,
}

pub(crate) fn http_filters(m: &mut Message) -> Result<HttpFilters> {
    let items = m.list("http_filters")?;
    let kinds: Vec<Kind> = std::iter::once(ROUTER)
        .chain(FILTERS.iter().copied())
        .collect();
    let mut filters = Vec::new();
    let mut router_name = None;
    for (i, item) in items.iter().enumerate() {
        let mut f = item.message()?;
        let is_optional = f.bool("is_optional", false)?;
        let disabled = f.bool("disabled", false)?;
        match select(&mut f, "HTTP filter", &kinds)? {
            Slot::Known {
                index: 0,
                name,
                config,
            } => {
                if i + 1 != items.len() {
                    return Err(item.error(format!(
                        "the router filter \"{name}\" must be the last HTTP filter"
                    )));
                }
                if disabled {
                    return Err(item.error("the router filter cannot be disabled"));
                }
                if let Some(typed) = config {
                    router_config(typed.body)?;
                }
                router_name = Some(name);
            }
            Slot::Known { name, config, .. } => {
                let Some(typed) = config else {
                    return Err(f.error("missing required field \"typed_config\""));
                };
                filters.push(HttpFilter {
                    name,
                    config: typed.into_raw(),
                    disabled,
                });
            }
            // Envoy's contract for is_optional: a filter the proxy does not have is skipped.
            Slot::Unsupported(_) if is_optional => {}
            Slot::Unsupported(e) => return Err(e),
        }
        f.finish()?;
    }
    let Some(router_name) = router_name else {
        let at = items.last().map_or(m.path(), |n| n.path());
        return Err(crate::ConfigError::new(
            at,
            "the last HTTP filter must be the router (envoy.filters.http.router)",
        ));
    };
    Ok(HttpFilters {
        filters,
        router_name,
    })
}

/// `envoy.extensions.filters.http.router.v3.Router`: its options concern upstream requests,
/// which hoist does not make yet.
fn router_config(mut m: Message) -> Result<()> {
    m.unsupported(&[
        "dynamic_stats",
        "start_child_span",
        "upstream_log",
        "upstream_log_options",
        "suppress_envoy_headers",
        "strict_check_headers",
        "respect_expected_rq_timeout",
        "suppress_grpc_request_failure_code_stats",
        "upstream_http_filters",
        "reject_connect_request_early_data",
    ])?;
    m.finish()
}

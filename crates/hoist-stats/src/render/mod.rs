//! The admin's renderings of a [`Store`]: `/stats` text, `?format=json`, `/stats/prometheus`.
//!
//! Each is a port of Envoy's admin (source/server/admin/stats_render.cc, stats_request.cc,
//! prometheus_stats.cc) for the parts hoist serves; histograms show the snapshots of the last
//! [`Store::merge_histograms`].

mod json;
mod prometheus;
mod text;

use crate::params::{StatsFormat, StatsParams, StatsType};
use crate::store::Store;

pub use json::json;
pub use prometheus::prometheus;
pub use text::text;

/// A response body and its content type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    pub content_type: &'static str,
    pub body: String,
}

/// Renders `store` in the format `params` asks for.
pub fn render(store: &Store, params: &StatsParams) -> Rendered {
    match params.format {
        StatsFormat::Text => Rendered {
            content_type: "text/plain; charset=UTF-8",
            body: text(store, params),
        },
        StatsFormat::Json => Rendered {
            content_type: "application/json",
            body: json(store, params),
        },
        StatsFormat::Prometheus => Rendered {
            content_type: "text/plain; charset=UTF-8",
            body: prometheus(store, params),
        },
    }
}

/// Labels for the quantiles in the text form: `P{:g}` of 100 × each supported quantile.
const QUANTILE_LABELS: [&str; 10] = [
    "0", "25", "50", "75", "90", "95", "99", "99.5", "99.9", "100",
];

fn wants_counters(t: StatsType) -> bool {
    matches!(t, StatsType::All | StatsType::Counters)
}

fn wants_gauges(t: StatsType) -> bool {
    matches!(t, StatsType::All | StatsType::Gauges)
}

fn wants_histograms(t: StatsType) -> bool {
    matches!(t, StatsType::All | StatsType::Histograms)
}

/// Counters and gauges that pass the filters, merged into one list sorted by name, as Envoy's
/// text and JSON forms show them.
fn counters_and_gauges(store: &Store, params: &StatsParams) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    if wants_counters(params.stats_type) {
        for c in store.counters() {
            if params.shows(c.name(), c.used()) {
                out.push((c.name().to_owned(), c.value()));
            }
        }
    }
    if wants_gauges(params.stats_type) {
        for g in store.gauges() {
            if params.shows(g.name(), g.used()) {
                out.push((g.name().to_owned(), g.value()));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
pub(crate) mod fixture {
    use std::sync::Arc;

    use crate::{ImportMode, Store, Unit};

    /// A small store like a TLS listener with one connection manager after a few requests.
    pub(crate) fn store() -> Arc<Store> {
        let store = Store::new(2);
        let main = store.main_slot();
        store
            .counter("listener.0.0.0.0_10443.downstream_cx_total")
            .add(0, 2);
        store
            .counter("listener.0.0.0.0_10443.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256")
            .inc(1);
        store
            .counter("http.ingress_http.downstream_rq_2xx")
            .add(0, 3);
        store.counter("http.ingress_http.downstream_rq_5xx").inc(1);
        store
            .counter("http.ingress_http.downstream_rq_total")
            .add(1, 4);
        store.counter("http.ingress_http.downstream_rq_timeout");
        store
            .gauge(
                "http.ingress_http.downstream_cx_active",
                ImportMode::Accumulate,
            )
            .add(0, 1);
        store
            .gauge("server.live", ImportMode::NeverImport)
            .set(main, 1);
        let h = store.histogram("http.ingress_http.downstream_rq_time", Unit::Milliseconds);
        for v in [7, 7, 7, 7] {
            h.record(0, v);
        }
        store.merge_histograms();
        h.record(1, 30);
        store.merge_histograms();
        store.histogram("cluster.backend.upstream_cx_connect_ms", Unit::Milliseconds);
        store
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types() {
        let store = fixture::store();
        let json = render(&store, &StatsParams::from_query("format=json").unwrap());
        assert_eq!(json.content_type, "application/json");
        let text = render(&store, &StatsParams::default());
        assert_eq!(text.content_type, "text/plain; charset=UTF-8");
        assert!(text.body.contains("server.live: 1\n"));
    }
}

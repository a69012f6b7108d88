//! `/stats`: `name: value` lines, then histogram quantile summaries.

use std::fmt::Write;

use super::{counters_and_gauges, wants_histograms, QUANTILE_LABELS};
use crate::numfmt::format_shortest;
use crate::params::StatsParams;
use crate::store::Store;

/// Counters and gauges sorted together by name, then histograms sorted by name as
/// `name: P0(interval,cumulative) P25(...) ...`, or `name: No recorded values`.
pub fn text(store: &Store, params: &StatsParams) -> String {
    let mut out = String::new();
    for (name, value) in counters_and_gauges(store, params) {
        let _ = writeln!(out, "{name}: {value}");
    }
    if !wants_histograms(params.stats_type) {
        return out;
    }
    for h in store.histograms() {
        if !params.shows(h.name(), h.used()) {
            continue;
        }
        if !h.used() {
            let _ = writeln!(out, "{}: No recorded values", h.name());
            continue;
        }
        let (interval, cumulative) = h.statistics();
        let (iq, cq) = (
            interval.computed_quantiles(),
            cumulative.computed_quantiles(),
        );
        let _ = write!(out, "{}:", h.name());
        for (i, label) in QUANTILE_LABELS.iter().enumerate() {
            let _ = write!(
                out,
                " P{label}({},{})",
                format_shortest(iq[i]),
                format_shortest(cq[i])
            );
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixture;

    #[test]
    fn envoy_text_form() {
        let store = fixture::store();
        let expected = "\
http.ingress_http.downstream_cx_active: 1
http.ingress_http.downstream_rq_2xx: 3
http.ingress_http.downstream_rq_5xx: 1
http.ingress_http.downstream_rq_timeout: 0
http.ingress_http.downstream_rq_total: 4
listener.0.0.0.0_10443.downstream_cx_total: 2
listener.0.0.0.0_10443.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256: 1
server.live: 1
cluster.backend.upstream_cx_connect_ms: No recorded values
http.ingress_http.downstream_rq_time: P0(25,5) P25(31.25,6.5625) P50(37.5,8.125) \
P75(43.75,9.6875) P90(47.5,37.5) P95(48.75,43.75) P99(49.75,48.75) P99.5(49.875,49.37499999999999) \
P99.9(49.975,49.875) P100(50,50)
";
        assert_eq!(text(&store, &StatsParams::default()), expected);
    }

    #[test]
    fn filter_usedonly_and_type() {
        let store = fixture::store();
        let p = StatsParams::from_query("filter=rq_[0-9]xx").unwrap();
        assert_eq!(
            text(&store, &p),
            "http.ingress_http.downstream_rq_2xx: 3\nhttp.ingress_http.downstream_rq_5xx: 1\n"
        );
        let p = StatsParams::from_query("usedonly&filter=^http").unwrap();
        let body = text(&store, &p);
        assert!(!body.contains("downstream_rq_timeout"), "{body}");
        assert!(body.contains("downstream_rq_time: P0("), "{body}");
        let p = StatsParams::from_query("type=Gauges").unwrap();
        assert_eq!(
            text(&store, &p),
            "http.ingress_http.downstream_cx_active: 1\nserver.live: 1\n"
        );
        let p = StatsParams::from_query("type=Histograms&filter=cluster").unwrap();
        assert_eq!(
            text(&store, &p),
            "cluster.backend.upstream_cx_connect_ms: No recorded values\n"
        );
    }

    #[test]
    fn used_but_never_merged_is_nan() {
        let store = crate::Store::new(1);
        store.histogram("h", crate::Unit::Milliseconds).record(0, 1);
        assert_eq!(
            text(&store, &StatsParams::default()),
            "h: P0(nan,nan) P25(nan,nan) P50(nan,nan) P75(nan,nan) P90(nan,nan) P95(nan,nan) \
             P99(nan,nan) P99.5(nan,nan) P99.9(nan,nan) P100(nan,nan)\n"
        );
    }
}

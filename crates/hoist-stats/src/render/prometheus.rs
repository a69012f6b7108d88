//! `/stats/prometheus`: Prometheus text exposition with Envoy's tag extraction.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::histogram::BUCKET_BOUNDS;
use crate::numfmt::format_g;
use crate::params::StatsParams;
use crate::store::Store;
use crate::tags::{Tag, TagExtracted};

/// Counters, then gauges, then histograms; within each, one `# TYPE` line per metric family
/// (stats sharing a tag-extracted name), families sorted by that name and their members by
/// full name. `type=` is ignored here, as in Envoy; `filter=` and `usedonly` apply.
pub fn prometheus(store: &Store, params: &StatsParams) -> String {
    let mut out = String::new();

    let counters = store.counters();
    let shown = counters.iter().filter(|c| params.shows(c.name(), c.used()));
    let families = group(shown.map(|c| (c.0.name.extracted(), c.value())));
    write_numeric(&mut out, &families, "counter");

    let gauges = store.gauges();
    let shown = gauges.iter().filter(|g| params.shows(g.name(), g.used()));
    let families = group(shown.map(|g| (g.0.name.extracted(), g.value())));
    write_numeric(&mut out, &families, "gauge");

    let histograms = store.histograms();
    let shown = histograms
        .iter()
        .filter(|h| params.shows(h.name(), h.used()));
    let families = group(shown.map(|h| (h.0.name.extracted(), h)));
    for (family, members) in &families {
        let metric = metric_name(family);
        let _ = writeln!(out, "# TYPE {metric} histogram");
        for (tags, h) in members {
            let (_, cumulative) = h.statistics();
            let labels = format_tags(tags);
            let bucket_labels = if labels.is_empty() {
                String::new()
            } else {
                format!("{labels},")
            };
            for (bound, count) in BUCKET_BOUNDS.iter().zip(cumulative.cumulative_buckets()) {
                let le = format_g(*bound, 32);
                let _ = writeln!(out, "{metric}_bucket{{{bucket_labels}le=\"{le}\"}} {count}");
            }
            let count = cumulative.sample_count();
            let sum = cumulative.sample_sum();
            let _ = writeln!(out, "{metric}_bucket{{{bucket_labels}le=\"+Inf\"}} {count}");
            let _ = writeln!(out, "{metric}_sum{{{labels}}} {sum}");
            let _ = writeln!(out, "{metric}_count{{{labels}}} {count}");
        }
    }
    out
}

type Families<'a, T> = BTreeMap<&'a str, Vec<(&'a [Tag], T)>>;

/// Groups `(extracted, value)` by extracted name. The store lists stats sorted by full name,
/// so each family's members stay in that order, as Envoy sorts them.
fn group<'a, T>(items: impl Iterator<Item = (&'a TagExtracted, T)>) -> Families<'a, T> {
    let mut families: Families<'a, T> = BTreeMap::new();
    for (extracted, value) in items {
        families
            .entry(extracted.name.as_str())
            .or_default()
            .push((extracted.tags.as_slice(), value));
    }
    families
}

fn write_numeric(out: &mut String, families: &Families<'_, u64>, kind: &str) {
    for (family, members) in families {
        let metric = metric_name(family);
        let _ = writeln!(out, "# TYPE {metric} {kind}");
        for (tags, value) in members {
            let _ = writeln!(out, "{metric}{{{}}} {value}", format_tags(tags));
        }
    }
}

/// `envoy_` + the name with every character outside `[a-zA-Z0-9_]` replaced by `_`.
fn metric_name(extracted: &str) -> String {
    format!("envoy_{}", sanitize(extracted))
}

fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

fn format_tags(tags: &[Tag]) -> String {
    let mut out = String::new();
    for (i, tag) in tags.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "{}=\"", sanitize(tag.name));
        // Prometheus' label-value escapes; Envoy's values (addresses, cipher names, prefixes)
        // never contain these characters, so the output matches Envoy's byte for byte.
        for c in tag.value.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        out.push('"');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixture;

    #[test]
    fn envoy_prometheus_form() {
        let store = fixture::store();
        let body = prometheus(&store, &StatsParams::default());
        let histogram = |name: &str, labels: &str, buckets: [u64; 19], sum: u64, count: u64| {
            let sep = if labels.is_empty() { "" } else { "," };
            let mut s = format!("# TYPE {name} histogram\n");
            let les = [
                "0.5", "1", "5", "10", "25", "50", "100", "250", "500", "1000", "2500", "5000",
                "10000", "30000", "60000", "300000", "600000", "1800000", "3600000",
            ];
            for (le, n) in les.iter().zip(buckets) {
                s += &format!("{name}_bucket{{{labels}{sep}le=\"{le}\"}} {n}\n");
            }
            s += &format!("{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {count}\n");
            s += &format!("{name}_sum{{{labels}}} {sum}\n");
            s += &format!("{name}_count{{{labels}}} {count}\n");
            s
        };
        let p = "envoy_http_conn_manager_prefix=\"ingress_http\"";
        let mut expected = format!(
            "\
# TYPE envoy_http_downstream_rq_timeout counter
envoy_http_downstream_rq_timeout{{{p}}} 0
# TYPE envoy_http_downstream_rq_total counter
envoy_http_downstream_rq_total{{{p}}} 4
# TYPE envoy_http_downstream_rq_xx counter
envoy_http_downstream_rq_xx{{envoy_response_code_class=\"2\",{p}}} 3
envoy_http_downstream_rq_xx{{envoy_response_code_class=\"5\",{p}}} 1
# TYPE envoy_listener_downstream_cx_total counter
envoy_listener_downstream_cx_total{{envoy_listener_address=\"0.0.0.0_10443\"}} 2
# TYPE envoy_listener_ssl_ciphers counter
envoy_listener_ssl_ciphers{{envoy_ssl_cipher=\"ECDHE-RSA-AES128-GCM-SHA256\",\
envoy_listener_address=\"0.0.0.0_10443\"}} 1
# TYPE envoy_http_downstream_cx_active gauge
envoy_http_downstream_cx_active{{{p}}} 1
# TYPE envoy_server_live gauge
envoy_server_live{{}} 1
"
        );
        expected += &histogram(
            "envoy_cluster_upstream_cx_connect_ms",
            "envoy_cluster_name=\"backend\"",
            [0; 19],
            0,
            0,
        );
        let mut rq_time = [5u64; 19];
        rq_time[..3].copy_from_slice(&[0, 0, 0]);
        rq_time[3] = 4;
        rq_time[4] = 4;
        expected += &histogram("envoy_http_downstream_rq_time", p, rq_time, 58, 5);
        assert_eq!(body, expected);
    }

    #[test]
    fn filter_and_usedonly_apply() {
        let store = fixture::store();
        let p = StatsParams::from_query("usedonly&filter=rq_").unwrap();
        let body = prometheus(&store, &p);
        assert!(!body.contains("rq_timeout"), "{body}");
        assert!(
            body.contains("# TYPE envoy_http_downstream_rq_xx counter\n"),
            "{body}"
        );
        assert!(
            body.contains("envoy_http_downstream_rq_time_count{"),
            "{body}"
        );
        assert!(!body.contains("cluster"), "{body}");
    }

    #[test]
    fn sanitizes_names() {
        assert_eq!(metric_name("a.b-c:d"), "envoy_a_b_c_d");
    }
}

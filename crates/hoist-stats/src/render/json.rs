//! `/stats?format=json`.

use super::{counters_and_gauges, wants_histograms, QUANTILE_LABELS};
use crate::numfmt::format_g;
use crate::params::StatsParams;
use crate::store::Store;

/// `{"stats":[{"name":..,"value":..},...,{"histograms":{"supported_quantiles":[..],
/// "computed_quantiles":[{"name":..,"values":[{"cumulative":..,"interval":..},...]}]}}]}`,
/// compact, as Envoy's StatsJsonRender streams it: doubles as `%g`, NaN (no samples) as null.
pub fn json(store: &Store, params: &StatsParams) -> String {
    let mut out = String::from("{\"stats\":[");
    let mut first = true;
    for (name, value) in counters_and_gauges(store, params) {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str("{\"name\":");
        push_json_string(&mut out, &name);
        out.push_str(",\"value\":");
        out.push_str(&value.to_string());
        out.push('}');
    }
    let histograms: Vec<_> = if wants_histograms(params.stats_type) {
        store
            .histograms()
            .into_iter()
            .filter(|h| params.shows(h.name(), h.used()))
            .collect()
    } else {
        Vec::new()
    };
    if !histograms.is_empty() {
        if !first {
            out.push(',');
        }
        out.push_str("{\"histograms\":{\"supported_quantiles\":[");
        out.push_str(&QUANTILE_LABELS.join(","));
        out.push_str("],\"computed_quantiles\":[");
        for (i, h) in histograms.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let (interval, cumulative) = h.statistics();
            let (iq, cq) = (
                interval.computed_quantiles(),
                cumulative.computed_quantiles(),
            );
            out.push_str("{\"name\":");
            push_json_string(&mut out, h.name());
            out.push_str(",\"values\":[");
            for q in 0..iq.len() {
                if q > 0 {
                    out.push(',');
                }
                out.push_str("{\"cumulative\":");
                push_json_number(&mut out, cq[q]);
                out.push_str(",\"interval\":");
                push_json_number(&mut out, iq[q]);
                out.push('}');
            }
            out.push_str("]}");
        }
        out.push_str("]}}");
    }
    out.push_str("]}");
    out
}

fn push_json_number(out: &mut String, v: f64) {
    if v.is_finite() {
        out.push_str(&format_g(v, 6));
    } else {
        out.push_str("null");
    }
}

fn push_json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::fixture;

    #[test]
    fn envoy_json_form() {
        let store = fixture::store();
        let nulls = "{\"cumulative\":null,\"interval\":null}";
        let unused = [nulls; 10].join(",");
        let expected = format!(
            "{{\"stats\":[\
{{\"name\":\"http.ingress_http.downstream_cx_active\",\"value\":1}},\
{{\"name\":\"http.ingress_http.downstream_rq_2xx\",\"value\":3}},\
{{\"name\":\"http.ingress_http.downstream_rq_5xx\",\"value\":1}},\
{{\"name\":\"http.ingress_http.downstream_rq_timeout\",\"value\":0}},\
{{\"name\":\"http.ingress_http.downstream_rq_total\",\"value\":4}},\
{{\"name\":\"listener.0.0.0.0_10443.downstream_cx_total\",\"value\":2}},\
{{\"name\":\"listener.0.0.0.0_10443.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256\",\"value\":1}},\
{{\"name\":\"server.live\",\"value\":1}},\
{{\"histograms\":{{\"supported_quantiles\":[0,25,50,75,90,95,99,99.5,99.9,100],\
\"computed_quantiles\":[\
{{\"name\":\"cluster.backend.upstream_cx_connect_ms\",\"values\":[{unused}]}},\
{{\"name\":\"http.ingress_http.downstream_rq_time\",\"values\":[\
{{\"cumulative\":5,\"interval\":25}},\
{{\"cumulative\":6.5625,\"interval\":31.25}},\
{{\"cumulative\":8.125,\"interval\":37.5}},\
{{\"cumulative\":9.6875,\"interval\":43.75}},\
{{\"cumulative\":37.5,\"interval\":47.5}},\
{{\"cumulative\":43.75,\"interval\":48.75}},\
{{\"cumulative\":48.75,\"interval\":49.75}},\
{{\"cumulative\":49.375,\"interval\":49.875}},\
{{\"cumulative\":49.875,\"interval\":49.975}},\
{{\"cumulative\":50,\"interval\":50}}]}}]}}}}]}}"
        );
        let body = json(&store, &StatsParams::default());
        assert_eq!(body, expected);
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["stats"].as_array().unwrap().len(), 9);
    }

    #[test]
    fn filtered_json_is_still_a_document() {
        let store = fixture::store();
        let p = StatsParams::from_query("format=json&filter=nothing-matches").unwrap();
        assert_eq!(json(&store, &p), "{\"stats\":[]}");
        let p = StatsParams::from_query("format=json&type=Histograms&usedonly").unwrap();
        let body = json(&store, &p);
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        let computed = &parsed["stats"][0]["histograms"]["computed_quantiles"];
        assert_eq!(computed.as_array().unwrap().len(), 1);
        assert_eq!(computed[0]["name"], "http.ingress_http.downstream_rq_time");
    }

    #[test]
    fn names_are_escaped() {
        let store = crate::Store::new(1);
        store.counter("a\"b\\c\u{1}").inc(0);
        let body = json(&store, &StatsParams::default());
        assert_eq!(
            body,
            "{\"stats\":[{\"name\":\"a\\\"b\\\\c\\u0001\",\"value\":1}]}"
        );
        let parsed: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(parsed["stats"][0]["name"], "a\"b\\c\u{1}");
    }
}

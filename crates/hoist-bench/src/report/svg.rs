//! Two small SVG line charts, drawn by hand (no plotting dependency): throughput vs payload
//! size for each mode, and server CPU-seconds per GB.

use crate::matrix::CellResult;
use crate::options::{size_bytes, BenchOptions, Mode};
use crate::run::Plan;

use super::View;

const W: f64 = 640.0;
const H: f64 = 360.0;
const LEFT: f64 = 60.0;
const RIGHT: f64 = 150.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 50.0;
const COLORS: [&str; 4] = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"];

struct Series {
    name: String,
    /// (payload size label, value)
    points: Vec<(String, f64)>,
}

pub fn charts(plan: &Plan, v: &View<'_>, o: &BenchOptions) -> (String, String) {
    let cipher = &plan.ciphers[0];
    let mut gbps = Vec::new();
    let mut per_gb = Vec::new();
    for mode in [Mode::Baseline, Mode::Accelerated] {
        let pick = |f: &dyn Fn(&CellResult) -> Option<f64>| -> Vec<(String, f64)> {
            plan.sizes
                .iter()
                .filter_map(|s| {
                    v.hoist(mode, "none", 1, cipher, s)
                        .and_then(f)
                        .map(|x| (s.clone(), x))
                })
                .collect()
        };
        gbps.push(Series {
            name: format!("hoist {}", mode.name()),
            points: pick(&|r| r.measured().map(|(l, _)| l.gbps())),
        });
        per_gb.push(Series {
            name: format!("hoist {}", mode.name()),
            points: pick(&CellResult::cpu_s_per_gb),
        });
    }
    if o.target.is_some() {
        let pick = |f: &dyn Fn(&CellResult) -> Option<f64>| -> Vec<(String, f64)> {
            plan.sizes
                .iter()
                .filter_map(|s| v.target(s).and_then(f).map(|x| (s.clone(), x)))
                .collect()
        };
        gbps.push(Series {
            name: o.target_name.clone(),
            points: pick(&|r| r.measured().map(|(l, _)| l.gbps())),
        });
        per_gb.push(Series {
            name: o.target_name.clone(),
            points: pick(&CellResult::cpu_s_per_gb),
        });
    }
    (
        chart(
            &format!("Throughput vs payload ({cipher})"),
            "Gbps",
            &plan.sizes,
            &gbps,
        ),
        chart(
            "Server CPU per GB served",
            "CPU-s / GB",
            &plan.sizes,
            &per_gb,
        ),
    )
}

fn chart(title: &str, unit: &str, sizes: &[String], series: &[Series]) -> String {
    let max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let top = nice_ceiling(max);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    // Sizes are spread evenly (they are roughly log-spaced already).
    let x_of = |size: &str| {
        let i = sizes.iter().position(|s| s == size).unwrap_or(0) as f64;
        let n = (sizes.len().max(2) - 1) as f64;
        LEFT + plot_w * i / n
    };
    let y_of = |v: f64| TOP + plot_h * (1.0 - if top > 0.0 { v / top } else { 0.0 });
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{LEFT}\" y=\"18\" font-size=\"14\">{}</text>\n",
        escape(title)
    );
    for k in 0..=4 {
        let v = top * f64::from(k) / 4.0;
        let y = y_of(v);
        s.push_str(&format!(
            "<line x1=\"{LEFT}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            W - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            short(v)
        ));
    }
    s.push_str(&format!(
        "<text x=\"14\" y=\"{:.1}\" transform=\"rotate(-90 14 {:.1})\" text-anchor=\"middle\">{}</text>\n",
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(unit)
    ));
    for size in sizes {
        let x = x_of(size);
        let label = size_bytes(size).map_or(size.clone(), |_| size.clone());
        s.push_str(&format!(
            "<text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            H - BOTTOM + 18.0,
            escape(&label)
        ));
    }
    s.push_str(&format!(
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">payload size</text>\n",
        LEFT + plot_w / 2.0,
        H - 12.0
    ));
    for (i, series) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let points: Vec<String> = series
            .points
            .iter()
            .map(|(size, v)| format!("{:.1},{:.1}", x_of(size), y_of(*v)))
            .collect();
        if !points.is_empty() {
            s.push_str(&format!(
                "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"2\" points=\"{}\"/>\n",
                points.join(" ")
            ));
            for p in &points {
                let (x, y) = p.split_once(',').unwrap_or(("0", "0"));
                s.push_str(&format!(
                    "<circle cx=\"{x}\" cy=\"{y}\" r=\"3\" fill=\"{color}\"/>\n"
                ));
            }
        }
        let ly = TOP + 16.0 * i as f64 + 6.0;
        let lx = W - RIGHT + 12.0;
        let note = if series.points.is_empty() {
            " (not measured)"
        } else {
            ""
        };
        s.push_str(&format!(
            "<line x1=\"{lx}\" y1=\"{ly}\" x2=\"{:.1}\" y2=\"{ly}\" stroke=\"{color}\" stroke-width=\"2\"/>\n<text x=\"{:.1}\" y=\"{:.1}\">{}{note}</text>\n",
            lx + 16.0,
            lx + 20.0,
            ly + 4.0,
            escape(&series.name)
        ));
    }
    s.push_str("</svg>\n");
    s
}

/// 1, 2, 2.5 or 5 times a power of ten at or above `v`.
fn nice_ceiling(v: f64) -> f64 {
    if v <= 0.0 {
        return 1.0;
    }
    let p = 10f64.powf(v.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|x| *x >= v)
        .unwrap_or(10.0 * p)
}

fn short(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ceilings() {
        assert_eq!(nice_ceiling(7.3), 10.0);
        assert_eq!(nice_ceiling(2.1), 2.5);
        assert_eq!(nice_ceiling(0.04), 0.05);
        assert_eq!(nice_ceiling(0.0), 1.0);
    }

    #[test]
    fn chart_has_a_line_per_measured_series() {
        let sizes = vec!["1k".to_string(), "1m".to_string()];
        let series = vec![
            Series {
                name: "a".into(),
                points: vec![("1k".into(), 1.0), ("1m".into(), 4.0)],
            },
            Series {
                name: "b".into(),
                points: vec![],
            },
        ];
        let svg = chart("t", "Gbps", &sizes, &series);
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert!(svg.contains("b (not measured)"));
        assert!(svg.ends_with("</svg>\n"));
    }
}

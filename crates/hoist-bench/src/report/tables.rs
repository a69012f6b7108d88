//! The experiment's tables in Markdown: gain by payload, by L7 configuration, AES-128 vs
//! AES-256, CPU at an equal request rate, CPU per GB (hoist vs --target), p99 latency.

use crate::matrix::{CellResult, Subject};
use crate::options::{BenchOptions, Mode};
use crate::run::Plan;

use super::View;

fn gbps(r: Option<&CellResult>) -> Option<f64> {
    r.and_then(|r| r.measured()).map(|(l, _)| l.gbps())
}

fn cell(v: Option<f64>, unit: &str, digits: usize) -> String {
    v.map_or_else(|| "-".to_string(), |x| format!("{x:.digits$}{unit}"))
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".to_string(),
    }
}

pub fn all(plan: &Plan, v: &View<'_>, o: &BenchOptions) -> String {
    let mut md = String::new();
    let target = o.target.as_ref().map(|_| o.target_name.as_str());
    for cipher in &plan.ciphers {
        md.push_str(&format!(
            "## Throughput by payload ({cipher}, no filters, 1 worker)\n\n"
        ));
        md.push_str("| payload | baseline Gbps | accelerated Gbps | gain |");
        if let Some(t) = target {
            md.push_str(&format!(" {t} Gbps |"));
        }
        md.push_str("\n|---|---|---|---|");
        if target.is_some() {
            md.push_str("---|");
        }
        md.push('\n');
        for size in &plan.sizes {
            let b = gbps(v.hoist(Mode::Baseline, "none", 1, cipher, size));
            let a = gbps(v.hoist(Mode::Accelerated, "none", 1, cipher, size));
            md.push_str(&format!(
                "| {size} | {} | {} | {} |",
                cell(b, "", 2),
                cell(a, "", 2),
                ratio(a, b)
            ));
            if target.is_some() {
                md.push_str(&format!(" {} |", cell(gbps(v.target(size)), "", 2)));
            }
            md.push('\n');
        }
        md.push('\n');
    }

    if plan.configs.len() > 1 {
        let cipher = &plan.ciphers[0];
        md.push_str(&format!(
            "## Gain by L7 configuration ({cipher}, 1 worker)\n\n| configuration |"
        ));
        for size in &plan.sizes {
            md.push_str(&format!(" {size} baseline | {size} accelerated |"));
        }
        md.push_str("\n|---|");
        md.push_str(&"---|---|".repeat(plan.sizes.len()));
        md.push('\n');
        for l7 in &plan.configs {
            md.push_str(&format!("| {l7} |"));
            for size in &plan.sizes {
                let b = gbps(v.hoist(Mode::Baseline, l7, 1, cipher, size));
                let a = gbps(v.hoist(Mode::Accelerated, l7, 1, cipher, size));
                md.push_str(&format!(
                    " {} | {} ({}) |",
                    cell(b, "", 2),
                    cell(a, "", 2),
                    ratio(a, b)
                ));
            }
            md.push('\n');
        }
        md.push('\n');
        // What each configuration costs per request, next to no filters: the filter's price
        // whatever the throughput. User-space time is listed apart: filters run there, and it
        // is far steadier run to run than the kernel's loopback share.
        md.push_str(&format!(
            "### Server CPU per request by L7 configuration (baseline, {cipher}, 1 worker)\n\n| configuration |"
        ));
        for size in &plan.sizes {
            md.push_str(&format!(
                " {size} µs/request | vs none | {size} user µs/request | user extra vs none's total |"
            ));
        }
        md.push_str("\n|---|");
        md.push_str(&"---|---|---|---|".repeat(plan.sizes.len()));
        md.push('\n');
        for l7 in &plan.configs {
            md.push_str(&format!("| {l7} |"));
            for size in &plan.sizes {
                let find = |l: &str| v.hoist(Mode::Baseline, l, 1, cipher, size);
                let (this, none) = (
                    find(l7).and_then(CellResult::cpu_us_per_request),
                    find("none").and_then(CellResult::cpu_us_per_request),
                );
                let (user, none_user) = (
                    find(l7).and_then(CellResult::user_us_per_request),
                    find("none").and_then(CellResult::user_us_per_request),
                );
                let extra = match (this, none) {
                    (Some(t), Some(n)) if n > 0.0 => format!("{:+.1}%", (t / n - 1.0) * 100.0),
                    _ => "-".to_string(),
                };
                let user_extra = match (user, none_user, none) {
                    (Some(u), Some(nu), Some(n)) if n > 0.0 => {
                        format!("{:+.1}%", (u - nu) / n * 100.0)
                    }
                    _ => "-".to_string(),
                };
                md.push_str(&format!(
                    " {} | {extra} | {} | {user_extra} |",
                    cell(this, "", 1),
                    cell(user, "", 1)
                ));
            }
            md.push('\n');
        }
        md.push('\n');
    }

    if plan.ciphers.len() > 1 {
        md.push_str("## AES-128 vs AES-256 (Gbps, no filters, 1 worker)\n\n| payload |");
        for c in &plan.ciphers {
            md.push_str(&format!(" {c} baseline | {c} accelerated |"));
        }
        md.push_str("\n|---|");
        md.push_str(&"---|---|".repeat(plan.ciphers.len()));
        md.push('\n');
        for size in &plan.sizes {
            md.push_str(&format!("| {size} |"));
            for c in &plan.ciphers {
                let b = gbps(v.hoist(Mode::Baseline, "none", 1, c, size));
                let a = gbps(v.hoist(Mode::Accelerated, "none", 1, c, size));
                md.push_str(&format!(" {} | {} |", cell(b, "", 2), cell(a, "", 2)));
            }
            md.push('\n');
        }
        md.push('\n');
    }

    md.push_str("## Server CPU per GB served (max rate, no filters, 1 worker)\n\n");
    md.push_str(
        "CPU-seconds of the server process per GB of response bodies; lower is better.\n\n",
    );
    md.push_str("| payload | cipher | baseline | accelerated |");
    if let Some(t) = target {
        md.push_str(&format!(" {t} | {t} / baseline |"));
    }
    md.push_str("\n|---|---|---|---|");
    if target.is_some() {
        md.push_str("---|---|");
    }
    md.push('\n');
    for cipher in &plan.ciphers {
        for size in &plan.sizes {
            let b = v
                .hoist(Mode::Baseline, "none", 1, cipher, size)
                .and_then(CellResult::cpu_s_per_gb);
            let a = v
                .hoist(Mode::Accelerated, "none", 1, cipher, size)
                .and_then(CellResult::cpu_s_per_gb);
            md.push_str(&format!(
                "| {size} | {cipher} | {} | {} |",
                cell(b, " s", 3),
                cell(a, " s", 3)
            ));
            if target.is_some() {
                let t = v.target(size).and_then(CellResult::cpu_s_per_gb);
                md.push_str(&format!(" {} | {} |", cell(t, " s", 3), ratio(t, b)));
            }
            md.push('\n');
        }
    }
    md.push('\n');

    let equal: Vec<&CellResult> = v.results.iter().filter(|r| r.cell.rate.is_some()).collect();
    if !equal.is_empty() {
        md.push_str(&format!(
            "## CPU at an equal request rate ({}, no filters, 1 worker)\n\n",
            plan.ciphers[0]
        ));
        md.push_str("Each server at 70% of the baseline's maximum rate; utilisation of the server's CPUs.\n\n");
        md.push_str("| payload | rate (req/s) | baseline CPU | accelerated CPU | reduction |");
        if let Some(t) = target {
            md.push_str(&format!(" {t} CPU |"));
        }
        md.push_str("\n|---|---|---|---|---|");
        if target.is_some() {
            md.push_str("---|");
        }
        md.push('\n');
        for size in &plan.sizes {
            let at = |f: &dyn Fn(&Subject) -> bool| {
                equal
                    .iter()
                    .find(|r| r.cell.size == *size && f(&r.cell.subject))
                    .and_then(|r| {
                        r.measured()
                            .map(|(_, c)| (r.cell.rate, c.cores_util * 100.0))
                    })
            };
            let b = at(&|s| {
                matches!(
                    s,
                    Subject::Hoist {
                        mode: Mode::Baseline,
                        ..
                    }
                )
            });
            let a = at(&|s| {
                matches!(
                    s,
                    Subject::Hoist {
                        mode: Mode::Accelerated,
                        ..
                    }
                )
            });
            let t = at(&|s| matches!(s, Subject::Target { .. }));
            let Some(rate) = b.and_then(|b| b.0).or(t.and_then(|t| t.0)) else {
                continue;
            };
            let reduction = match (b, a) {
                (Some((_, b)), Some((_, a))) if b > 0.0 => format!("{:.0}%", (1.0 - a / b) * 100.0),
                _ => "-".to_string(),
            };
            md.push_str(&format!(
                "| {size} | {rate:.0} | {} | {} | {reduction} |",
                cell(b.map(|x| x.1), "%", 0),
                cell(a.map(|x| x.1), "%", 0)
            ));
            if target.is_some() {
                md.push_str(&format!(" {} |", cell(t.map(|x| x.1), "%", 0)));
            }
            md.push('\n');
        }
        md.push('\n');
    }

    md.push_str(&format!(
        "## p99 latency at max rate ({}, no filters, 1 worker)\n\n",
        plan.ciphers[0]
    ));
    md.push_str("| payload | baseline | accelerated |");
    if let Some(t) = target {
        md.push_str(&format!(" {t} |"));
    }
    md.push_str("\n|---|---|---|");
    if target.is_some() {
        md.push_str("---|");
    }
    md.push('\n');
    let p99 = |r: Option<&CellResult>| r.and_then(|r| r.measured()).map(|(l, _)| l.p99_s * 1e3);
    for size in &plan.sizes {
        let cipher = &plan.ciphers[0];
        md.push_str(&format!(
            "| {size} | {} | {} |",
            cell(
                p99(v.hoist(Mode::Baseline, "none", 1, cipher, size)),
                " ms",
                2
            ),
            cell(
                p99(v.hoist(Mode::Accelerated, "none", 1, cipher, size)),
                " ms",
                2
            )
        ));
        if target.is_some() {
            md.push_str(&format!(" {} |", cell(p99(v.target(size)), " ms", 2)));
        }
        md.push('\n');
    }
    md.push('\n');
    md
}

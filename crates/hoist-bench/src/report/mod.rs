//! The report directory: report.md (the experiment's tables), results.json (every cell), and
//! SVG charts (throughput vs payload size, server CPU per GB).

mod svg;
mod tables;

use std::fs;
use std::io;
use std::path::Path;

use serde_json::json;

use crate::matrix::{CellResult, Outcome, Subject};
use crate::options::{BenchOptions, Mode};
use crate::run::Plan;

/// The cell's result if it was measured: (subject, cipher, size, rate) identify it.
pub struct View<'a> {
    results: &'a [CellResult],
    /// The main run's rate: None (as fast as possible) unless --rate fixed it.
    main_rate: Option<f64>,
}

impl<'a> View<'a> {
    pub fn find(&self, f: impl Fn(&CellResult) -> bool) -> Option<&'a CellResult> {
        self.results.iter().find(|r| f(r))
    }

    /// A hoist cell of the main run (as fast as possible, or at --rate).
    pub fn hoist(
        &self,
        mode: Mode,
        l7: &str,
        workers: usize,
        cipher: &str,
        size: &str,
    ) -> Option<&'a CellResult> {
        self.find(|r| {
            r.cell.rate == self.main_rate
                && r.cell.cipher == cipher
                && r.cell.size == size
                && matches!(&r.cell.subject, Subject::Hoist { mode: m, l7: l, workers: w } if *m == mode && l == l7 && *w == workers)
        })
    }

    /// A --target cell of the main run.
    pub fn target(&self, size: &str) -> Option<&'a CellResult> {
        self.find(|r| {
            r.cell.rate == self.main_rate
                && r.cell.size == size
                && matches!(r.cell.subject, Subject::Target { .. })
        })
    }
}

pub fn write(out: &Path, plan: &Plan, results: &[CellResult], o: &BenchOptions) -> io::Result<()> {
    let date = httpdate::fmt_http_date(std::time::SystemTime::now());
    let machine = crate::cpu::machine();
    let command: Vec<String> = std::env::args().collect();
    let json = json!({
        "date": date,
        "machine": machine,
        "command": command.join(" "),
        "hoist_version": env!("CARGO_PKG_VERSION"),
        "server_cpus": plan.server_cpus,
        "load_cpus": plan.load_cpus,
        "seconds_per_cell": plan.seconds,
        "connections": o.connections,
        "rate": o.rate,
        "cells": results.iter().map(CellResult::to_json).collect::<Vec<_>>(),
    });
    fs::write(
        out.join("results.json"),
        serde_json::to_vec_pretty(&json).map_err(io::Error::other)?,
    )?;
    let view = View {
        results,
        main_rate: o.rate,
    };
    let (throughput, cpu_per_gb) = svg::charts(plan, &view, o);
    fs::write(out.join("throughput.svg"), throughput)?;
    fs::write(out.join("cpu_per_gb.svg"), cpu_per_gb)?;

    let mut md = String::new();
    md.push_str("# hoist bench report\n\n");
    md.push_str(&format!(
        "- Date: {date}\n- Machine: {machine}\n- Command: `{}`\n",
        command.join(" ")
    ));
    md.push_str(&format!(
        "- Server CPUs {:?}, load generator CPUs {:?}; {} connections; {} s per cell; TLS 1.2, RSA-4096 certificate\n",
        plan.server_cpus, plan.load_cpus, o.connections, plan.seconds
    ));
    if let Some(rate) = o.rate {
        md.push_str(&format!(
            "- Every cell at a fixed {rate} requests/s (--rate): compare server CPU, not throughput\n"
        ));
    }
    md.push_str("- Every request, to every configuration and to --target, carries the same `Authorization: Bearer` JWT (what the jwt configurations check)\n");
    md.push_str("- Gbps = requests/s x mean response size x 8 / 1e9 (application bytes). Server CPU = user+system time of the server process (/proc/<pid>/stat).\n\n");
    md.push_str("![throughput](throughput.svg) ![cpu per GB](cpu_per_gb.svg)\n\n");
    md.push_str(&tables::all(plan, &view, o));
    let skipped: Vec<&CellResult> = results
        .iter()
        .filter(|r| matches!(r.outcome, Outcome::Skipped(_) | Outcome::Failed(_)))
        .collect();
    if !skipped.is_empty() {
        md.push_str("## Cells not measured\n\n| cells | status | reason |\n|---|---|---|\n");
        let mut seen: Vec<(String, String, String)> = Vec::new();
        for r in skipped {
            let (status, why) = match &r.outcome {
                Outcome::Skipped(w) => ("skipped", w.clone()),
                Outcome::Failed(w) => ("failed", w.clone()),
                Outcome::Measured { .. } => continue,
            };
            let key = (
                format!("{} {}", r.cell.subject.label(), r.cell.cipher),
                status.to_string(),
                why,
            );
            if !seen.contains(&key) {
                seen.push(key);
            }
        }
        for (cells, status, why) in seen {
            md.push_str(&format!(
                "| {cells} | {status} | {} |\n",
                why.replace('|', "\\|")
            ));
        }
        md.push('\n');
    }
    fs::write(out.join("report.md"), md)
}

//! Runs the matrix: one hoist per (mode, L7 configuration, cipher, workers), every payload size
//! measured against it, then the equal-rate CPU comparison, then --target.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::configs;
use crate::cpu::{self, CpuTimes};
use crate::load::{self, LoadSpec};
use crate::matrix::{self, Cell, CellResult, CpuUse, Outcome, Subject};
use crate::options::{BenchOptions, Mode, ALL_CIPHERS, ALL_CONFIGS, ALL_SIZES};
use crate::report;
use crate::server::{self, Server};
use crate::workdir::{self, WorkDir};

/// The resolved plan of a run.
pub struct Plan {
    pub sizes: Vec<String>,
    pub ciphers: Vec<String>,
    pub configs: Vec<String>,
    pub modes: Vec<Mode>,
    pub workers: Vec<usize>,
    pub seconds: f64,
    pub server_cpus: Vec<usize>,
    pub load_cpus: Vec<usize>,
    pub hoist: PathBuf,
}

pub fn run(o: &BenchOptions) -> Result<(), String> {
    let plan = plan(o)?;
    let work = o.work_dir.clone().unwrap_or_else(|| o.out.join("work"));
    let wd = workdir::prepare(&work, &plan.sizes)
        .map_err(|e| format!("preparing {}: {e}", work.display()))?;
    let crs = configs::crs_dir();
    let mut config_paths = BTreeMap::new();
    for l7 in &plan.configs {
        for cipher in &plan.ciphers {
            let path = configs::write(&wd, l7, cipher, &plan.sizes, crs.as_deref());
            config_paths.insert((l7.clone(), cipher.clone()), path);
        }
    }
    if o.prepare {
        println!("work directory ready: {}", work.display());
        return Ok(());
    }
    std::fs::create_dir_all(&o.out).map_err(|e| format!("creating {}: {e}", o.out.display()))?;

    // Why whole groups cannot run: a filter hoist does not have yet, or no kernel TLS.
    let mut skip_config = BTreeMap::new();
    for ((l7, cipher), path) in &config_paths {
        let why = match path {
            Ok(p) => server::validate(&plan.hoist, p).err(),
            Err(e) => Some(e.clone()),
        };
        if let Some(why) = why {
            skip_config.insert((l7.clone(), cipher.clone()), why);
        }
    }
    let offload_skip = match config_paths.values().find_map(|p| p.as_ref().ok()) {
        Some(p) if plan.modes.contains(&Mode::Accelerated) => {
            server::offload_unavailable(&plan.hoist, p)
        }
        _ => None,
    };

    let mut cells = Vec::new();
    if !o.target_only {
        for &mode in &plan.modes {
            for l7 in &plan.configs {
                for cipher in &plan.ciphers {
                    for &workers in &plan.workers {
                        for size in &plan.sizes {
                            cells.push(Cell {
                                subject: Subject::Hoist {
                                    mode,
                                    l7: l7.clone(),
                                    workers,
                                },
                                cipher: cipher.clone(),
                                size: size.clone(),
                                rate: o.rate,
                            });
                        }
                    }
                }
            }
        }
    }
    if o.target.is_some() {
        for size in &plan.sizes {
            cells.push(Cell {
                subject: Subject::Target {
                    name: o.target_name.clone(),
                },
                cipher: "as configured".into(),
                size: size.clone(),
                rate: o.rate,
            });
        }
    }
    let groups = cells
        .iter()
        .map(|c| (c.subject.clone(), c.cipher.clone()))
        .collect::<Vec<_>>();
    let servers = {
        let mut g = groups.clone();
        g.dedup();
        g.len()
    };
    let estimate = matrix::estimate_seconds(&cells, plan.seconds, servers);
    println!(
        "hoist bench: {} cells ({} servers), about {} plus the equal-rate runs; server CPUs {}, load CPUs {}",
        cells.len(),
        servers,
        human(estimate),
        cpu::format_cpu_list(&plan.server_cpus),
        cpu::format_cpu_list(&plan.load_cpus),
    );
    if let Some(why) = &offload_skip {
        println!("hoist bench: accelerated cells skipped: {why}");
    }

    let started = Instant::now();
    let mut results: Vec<CellResult> = Vec::new();
    let mut i = 0;
    while i < cells.len() {
        // Cells of one server are consecutive.
        let key = (cells[i].subject.clone(), cells[i].cipher.clone());
        let mut j = i;
        while j < cells.len() && (cells[j].subject.clone(), cells[j].cipher.clone()) == key {
            j += 1;
        }
        let group = &cells[i..j];
        let skip = match &key.0 {
            Subject::Hoist { mode, l7, .. } => skip_config
                .get(&(l7.clone(), key.1.clone()))
                .cloned()
                .or_else(|| {
                    (*mode == Mode::Accelerated)
                        .then(|| offload_skip.clone())
                        .flatten()
                }),
            Subject::Target { .. } => None,
        };
        match skip {
            Some(why) => results.extend(group.iter().map(|c| CellResult {
                cell: c.clone(),
                outcome: Outcome::Skipped(why.clone()),
            })),
            None => {
                let path = config_paths
                    .get(&(cell_l7(&key.0), key.1.clone()))
                    .and_then(|p| p.as_ref().ok());
                results.extend(run_group(
                    o,
                    &plan,
                    &wd,
                    group,
                    path,
                    &started,
                    i,
                    cells.len(),
                ));
            }
        }
        i = j;
    }
    if !o.no_equal_rate {
        results.extend(equal_rate(
            o,
            &plan,
            &wd,
            &config_paths,
            &results,
            offload_skip.as_deref(),
        ));
    }
    eprintln!();
    report::write(&o.out, &plan, &results, o).map_err(|e| format!("writing the report: {e}"))?;
    println!(
        "hoist bench: done in {}; report in {}",
        human(started.elapsed().as_secs_f64()),
        o.out.join("report.md").display()
    );
    Ok(())
}

fn cell_l7(s: &Subject) -> String {
    match s {
        Subject::Hoist { l7, .. } => l7.clone(),
        Subject::Target { .. } => String::new(),
    }
}

#[allow(clippy::too_many_arguments)]
fn run_group(
    o: &BenchOptions,
    plan: &Plan,
    wd: &WorkDir,
    group: &[Cell],
    config: Option<&PathBuf>,
    started: &Instant,
    first_index: usize,
    total: usize,
) -> Vec<CellResult> {
    let server_cpus = cpu::format_cpu_list(&plan.server_cpus);
    let (base_url, pid, _server) = match &group[0].subject {
        Subject::Hoist { mode, workers, .. } => {
            let Some(config) = config else {
                return fail_all(group, "no configuration");
            };
            match Server::start(&plan.hoist, config, *mode, *workers, &server_cpus) {
                Ok(s) => (format!("https://{}", s.addr), Some(s.pid()), Some(s)),
                Err(e) => return fail_all(group, &e),
            }
        }
        Subject::Target { .. } => (o.target.clone().unwrap_or_default(), o.target_pid, None),
    };
    let headers = headers_for(wd);
    let mut out = Vec::new();
    for (k, cell) in group.iter().enumerate() {
        progress(first_index + k + 1, total, cell, started);
        let url = format!("{base_url}/{}", cell.size);
        out.push(CellResult {
            cell: cell.clone(),
            outcome: measure(
                plan,
                &url,
                &headers,
                cell.rate,
                pid,
                plan.seconds,
                o.connections,
                &o.out,
            ),
        });
    }
    out
}

/// Every request carries the jwt configurations' token, whatever the subject: the
/// configurations then differ only in what the server does, so the per-L7 table is the
/// filters' price and not the price of 500 more request bytes.
fn headers_for(wd: &WorkDir) -> Vec<String> {
    match wd.token() {
        Ok(t) => vec![format!("Authorization: Bearer {t}")],
        Err(_) => Vec::new(),
    }
}

/// One measured load run with CPU sampled around it.
#[allow(clippy::too_many_arguments)]
fn measure(
    plan: &Plan,
    url: &str,
    headers: &[String],
    rate: Option<f64>,
    pid: Option<u32>,
    seconds: f64,
    connections: usize,
    out: &Path,
) -> Outcome {
    let load_cpus = cpu::format_cpu_list(&plan.load_cpus);
    let json = out.join("last-load.json");
    let warm = LoadSpec {
        url,
        connections,
        qps: 0.0,
        seconds: 0.5,
        headers,
        cpus: &load_cpus,
    };
    if let Err(e) = load::run(&plan.hoist, &warm, &json) {
        return Outcome::Failed(e);
    }
    let spec = LoadSpec {
        qps: rate.unwrap_or(0.0),
        seconds,
        ..warm
    };
    let proc_before = pid.and_then(cpu::process_seconds);
    let cores_before = cpu::cpu_times(&plan.server_cpus).unwrap_or_default();
    let result = load::run(&plan.hoist, &spec, &json);
    let cores_after = cpu::cpu_times(&plan.server_cpus).unwrap_or_default();
    let proc_after = pid.and_then(cpu::process_seconds);
    match result {
        Ok(load) => {
            let (cores_busy_s, cores_util) = CpuTimes::since(cores_after, cores_before);
            let (process_s, process_user_s) = match (proc_before, proc_after) {
                (Some(a), Some(b)) => (b.total() - a.total(), Some(b.user - a.user)),
                // No process to charge (a --target without --target-pid): the cores' busy time.
                _ => (cores_busy_s, None),
            };
            if load.ok == 0 {
                return Outcome::Failed(format!(
                    "no successful responses ({} errors)",
                    load.errors
                ));
            }
            Outcome::Measured {
                load,
                cpu: CpuUse {
                    process_s,
                    process_user_s,
                    cores_busy_s,
                    cores_util,
                },
            }
        }
        Err(e) => Outcome::Failed(e),
    }
}

/// CPU at an equal request rate: each mode (and --target) at 70% of the baseline's maximum,
/// for the first cipher, no filters, one worker.
fn equal_rate(
    o: &BenchOptions,
    plan: &Plan,
    wd: &WorkDir,
    config_paths: &BTreeMap<(String, String), Result<PathBuf, String>>,
    results: &[CellResult],
    offload_skip: Option<&str>,
) -> Vec<CellResult> {
    let cipher = plan.ciphers[0].clone();
    let baseline_qps = |size: &str| {
        results
            .iter()
            .find_map(|r| match (&r.cell.subject, r.measured()) {
                (
                    Subject::Hoist {
                        mode: Mode::Baseline,
                        l7,
                        workers: 1,
                    },
                    Some((load, _)),
                ) if l7 == "none"
                    && r.cell.cipher == cipher
                    && r.cell.size == size
                    && r.cell.rate.is_none() =>
                {
                    Some(load.qps)
                }
                _ => None,
            })
    };
    let mut cells = Vec::new();
    for size in &plan.sizes {
        let Some(qps) = baseline_qps(size) else {
            continue;
        };
        let rate = (qps * 0.7).max(1.0).round();
        if !o.target_only {
            for &mode in &plan.modes {
                cells.push(Cell {
                    subject: Subject::Hoist {
                        mode,
                        l7: "none".into(),
                        workers: 1,
                    },
                    cipher: cipher.clone(),
                    size: size.clone(),
                    rate: Some(rate),
                });
            }
        }
        if o.target.is_some() {
            cells.push(Cell {
                subject: Subject::Target {
                    name: o.target_name.clone(),
                },
                cipher: "as configured".into(),
                size: size.clone(),
                rate: Some(rate),
            });
        }
    }
    if cells.is_empty() {
        return Vec::new();
    }
    cells.sort_by_key(|c| match &c.subject {
        Subject::Hoist { mode, .. } => (0, *mode as u8),
        Subject::Target { .. } => (1, 0),
    });
    let started = Instant::now();
    let mut out = Vec::new();
    let total = cells.len();
    let mut i = 0;
    while i < cells.len() {
        let subject = cells[i].subject.clone();
        let j = i + cells[i..]
            .iter()
            .take_while(|c| c.subject == subject)
            .count();
        let group = &cells[i..j];
        if matches!(
            subject,
            Subject::Hoist {
                mode: Mode::Accelerated,
                ..
            }
        ) && offload_skip.is_some()
        {
            let why = offload_skip.unwrap_or_default().to_string();
            out.extend(group.iter().map(|c| CellResult {
                cell: c.clone(),
                outcome: Outcome::Skipped(why.clone()),
            }));
        } else {
            let config = config_paths
                .get(&("none".to_string(), cipher.clone()))
                .and_then(|p| p.as_ref().ok());
            out.extend(run_group(o, plan, wd, group, config, &started, i, total));
        }
        i = j;
    }
    out
}

fn fail_all(group: &[Cell], why: &str) -> Vec<CellResult> {
    group
        .iter()
        .map(|c| CellResult {
            cell: c.clone(),
            outcome: Outcome::Failed(why.to_string()),
        })
        .collect()
}

/// One progress line per cell: rewritten in place on a terminal, one line each otherwise.
fn progress(n: usize, total: usize, cell: &Cell, started: &Instant) {
    use std::io::IsTerminal;
    let elapsed = started.elapsed().as_secs_f64();
    let left = if n > 1 {
        elapsed / (n - 1) as f64 * (total + 1 - n) as f64
    } else {
        0.0
    };
    let phase = if cell.rate.is_some() {
        "equal-rate "
    } else {
        ""
    };
    let rate = cell
        .rate
        .map_or_else(|| "max".to_string(), |r| format!("{r} rps"));
    let line = format!(
        "[{phase}{n}/{total}] {} {} /{} at {rate}; about {} left",
        cell.subject.label(),
        cell.cipher,
        cell.size,
        human(left)
    );
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[K{line}");
    } else {
        eprintln!("{line}");
    }
}

fn human(seconds: f64) -> String {
    let s = seconds.round() as u64;
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

fn plan(o: &BenchOptions) -> Result<Plan, String> {
    let pick = |given: &[String], all: &[&str], quick: &[&str]| -> Vec<String> {
        if !given.is_empty() {
            given.to_vec()
        } else if o.quick {
            quick.iter().map(|s| s.to_string()).collect()
        } else {
            all.iter().map(|s| s.to_string()).collect()
        }
    };
    let sizes = pick(&o.sizes, &ALL_SIZES, &["1k", "1m"]);
    for s in &sizes {
        if crate::options::size_bytes(s).is_none() {
            return Err(format!("unknown size {s:?} (use e.g. 1k, 500k, 5m)"));
        }
    }
    let ciphers = pick(&o.ciphers, &ALL_CIPHERS, &["ECDHE-RSA-AES256-GCM-SHA384"]);
    let configs = pick(&o.configs, &ALL_CONFIGS, &["none"]);
    let modes = if o.modes.is_empty() {
        vec![Mode::Baseline, Mode::Accelerated]
    } else {
        o.modes.clone()
    };
    let allowed = cpu::allowed_cpus();
    let server_cpus = match &o.server_cpus {
        Some(s) => cpu::parse_cpu_list(s).ok_or(format!("bad --server-cpus {s:?}"))?,
        None => allowed[..(allowed.len() / 2).max(1)].to_vec(),
    };
    let load_cpus = match &o.load_cpus {
        Some(s) => cpu::parse_cpu_list(s).ok_or(format!("bad --load-cpus {s:?}"))?,
        None => {
            let rest: Vec<usize> = allowed
                .iter()
                .copied()
                .filter(|c| !server_cpus.contains(c))
                .collect();
            if rest.is_empty() {
                server_cpus.clone()
            } else {
                rest
            }
        }
    };
    let mut workers = if o.workers.is_empty() {
        vec![1, server_cpus.len()]
    } else {
        o.workers.clone()
    };
    if o.quick && o.workers.is_empty() {
        workers = vec![1];
    }
    workers.sort_unstable();
    workers.dedup();
    let hoist = match &o.hoist_bin {
        Some(p) => p.clone(),
        None => {
            std::env::current_exe().map_err(|e| format!("cannot find the hoist binary: {e}"))?
        }
    };
    Ok(Plan {
        sizes,
        ciphers,
        configs,
        modes,
        workers,
        seconds: o.duration.unwrap_or(if o.quick { 2.0 } else { 5.0 }),
        server_cpus,
        load_cpus,
        hoist,
    })
}

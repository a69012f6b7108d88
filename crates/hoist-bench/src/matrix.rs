//! The matrix: which cells run, in which order, and how long that takes.

use serde_json::{json, Value};

use crate::load::LoadResult;
use crate::options::Mode;

/// Who serves a cell: hoist in a mode with an L7 configuration and a worker count, or another
/// server given with --target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Hoist {
        mode: Mode,
        l7: String,
        workers: usize,
    },
    Target {
        name: String,
    },
}

impl Subject {
    pub fn label(&self) -> String {
        match self {
            Subject::Hoist { mode, l7, workers } => {
                format!("hoist {} l7={l7} workers={workers}", mode.name())
            }
            Subject::Target { name } => name.clone(),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Cell {
    pub subject: Subject,
    pub cipher: String,
    pub size: String,
    /// None: as fast as possible; Some(r): the equal-rate comparison at r requests/s.
    pub rate: Option<f64>,
}

/// What a cell measured on the server side.
#[derive(Clone, Debug, Default)]
pub struct CpuUse {
    /// User + system seconds of the server process (all threads).
    pub process_s: f64,
    /// The user-space part of `process_s`: what filters cost shows here, without the kernel's
    /// loopback work (which varies run to run with how packets batch).
    pub process_user_s: Option<f64>,
    /// Busy seconds of the server's CPUs (includes softirq work such as loopback receive).
    pub cores_busy_s: f64,
    /// Average utilisation of the server's CPUs, 0..1.
    pub cores_util: f64,
}

#[derive(Clone, Debug)]
pub enum Outcome {
    Measured { load: LoadResult, cpu: CpuUse },
    Skipped(String),
    Failed(String),
}

#[derive(Clone, Debug)]
pub struct CellResult {
    pub cell: Cell,
    pub outcome: Outcome,
}

impl CellResult {
    pub fn measured(&self) -> Option<(&LoadResult, &CpuUse)> {
        match &self.outcome {
            Outcome::Measured { load, cpu } => Some((load, cpu)),
            _ => None,
        }
    }

    /// Server CPU-seconds per GB of response bodies served.
    pub fn cpu_s_per_gb(&self) -> Option<f64> {
        let (load, cpu) = self.measured()?;
        let gb = load.qps * load.mean_size * load.seconds / 1e9;
        (gb > 0.0).then(|| cpu.process_s / gb)
    }

    /// Server CPU-microseconds per request: what a filter costs, independent of throughput.
    pub fn cpu_us_per_request(&self) -> Option<f64> {
        let (load, cpu) = self.measured()?;
        let requests = load.qps * load.seconds;
        (requests > 0.0).then(|| cpu.process_s * 1e6 / requests)
    }

    pub fn user_us_per_request(&self) -> Option<f64> {
        let (load, cpu) = self.measured()?;
        let requests = load.qps * load.seconds;
        (requests > 0.0).then_some(cpu.process_user_s? * 1e6 / requests)
    }

    pub fn to_json(&self) -> Value {
        let c = &self.cell;
        let mut v = json!({
            "subject": c.subject.label(),
            "cipher": c.cipher,
            "size": c.size,
            "rate": c.rate,
        });
        if let Subject::Hoist { mode, l7, workers } = &c.subject {
            v["mode"] = json!(mode.name());
            v["l7"] = json!(l7);
            v["workers"] = json!(workers);
        }
        match &self.outcome {
            Outcome::Measured { load, cpu } => {
                v["status"] = json!("measured");
                v["qps"] = json!(load.qps);
                v["gbps"] = json!(load.gbps());
                v["calls"] = json!(load.calls);
                v["errors"] = json!(load.errors);
                v["mean_size"] = json!(load.mean_size);
                v["latency_avg_ms"] = json!(load.avg_latency_s * 1e3);
                v["latency_p50_ms"] = json!(load.p50_s * 1e3);
                v["latency_p99_ms"] = json!(load.p99_s * 1e3);
                v["seconds"] = json!(load.seconds);
                v["server_cpu_s"] = json!(cpu.process_s);
                v["server_cores_busy_s"] = json!(cpu.cores_busy_s);
                v["server_cores_util"] = json!(cpu.cores_util);
                v["server_cpu_s_per_gb"] = json!(self.cpu_s_per_gb());
                v["server_cpu_us_per_request"] = json!(self.cpu_us_per_request());
                v["server_user_cpu_s"] = json!(cpu.process_user_s);
                v["server_user_us_per_request"] = json!(self.user_us_per_request());
            }
            Outcome::Skipped(why) => {
                v["status"] = json!("skipped");
                v["reason"] = json!(why);
            }
            Outcome::Failed(why) => {
                v["status"] = json!("failed");
                v["reason"] = json!(why);
            }
        }
        v
    }
}

/// Seconds a run of `cells` takes: each cell's load plus a warm-up, plus a start per server.
pub fn estimate_seconds(cells: &[Cell], per_cell: f64, servers: usize) -> f64 {
    cells.len() as f64 * (per_cell + 0.5) + servers as f64 * 2.5
}

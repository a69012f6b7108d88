//! `hoist bench` command line.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

/// Where the TLS record layer runs in a cell.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Mode {
    /// User-space TLS (`--tls-offload off`): the experiment's baseline.
    Baseline,
    /// Kernel TLS (`--tls-offload require`): the accelerated column.
    Accelerated,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Baseline => "baseline",
            Mode::Accelerated => "accelerated",
        }
    }

    pub fn offload_flag(self) -> &'static str {
        match self {
            Mode::Baseline => "off",
            Mode::Accelerated => "require",
        }
    }
}

/// Reproduce the kTLS offload experiment: user-space TLS vs kernel TLS, by cipher, payload size,
/// L7 configuration and worker count, with server and load generator on disjoint cores.
#[derive(Clone, Debug, Parser)]
#[command(name = "hoist bench")]
pub struct BenchOptions {
    /// Report directory (report.md, results.json, charts).
    #[arg(long, default_value = "bench-report")]
    pub out: PathBuf,

    /// Where certificates, payloads and configurations are generated (kept between runs).
    /// Default: <out>/work.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,

    /// A small matrix for smoke tests: one cipher, 1 KB and 1 MB, no filters, short cells.
    #[arg(long)]
    pub quick: bool,

    /// Only generate the work directory (certificates, payloads, configurations), then exit.
    #[arg(long)]
    pub prepare: bool,

    /// Seconds of measured load per cell (default 5, --quick 2).
    #[arg(long)]
    pub duration: Option<f64>,

    /// Payload sizes (default 1k,10k,100k,500k,1m,2m,5m,10m).
    #[arg(long, value_delimiter = ',')]
    pub sizes: Vec<String>,

    /// TLS 1.2 cipher suites, OpenSSL names (default: the experiment's two).
    #[arg(long, value_delimiter = ',')]
    pub ciphers: Vec<String>,

    /// L7 configurations: none, ratelimit, jwt, ratelimit_jwt, waf (default: all five).
    #[arg(long, value_delimiter = ',')]
    pub configs: Vec<String>,

    /// Record-layer modes (default: both).
    #[arg(long, value_delimiter = ',', value_enum)]
    pub modes: Vec<Mode>,

    /// Worker counts (default: 1 and every CPU left to the server).
    #[arg(long, value_delimiter = ',')]
    pub workers: Vec<usize>,

    /// Run every cell at this request rate instead of as fast as possible: compares server CPU
    /// per request (filter costs) without the load generator's limits getting in the way.
    #[arg(long)]
    pub rate: Option<f64>,

    /// Connections of the load generator.
    #[arg(long, default_value_t = 8)]
    pub connections: usize,

    /// CPUs for the server, e.g. "0" or "0-1" (default: the lower half of the allowed CPUs).
    #[arg(long)]
    pub server_cpus: Option<String>,

    /// CPUs for the load generator (default: the CPUs not given to the server).
    #[arg(long)]
    pub load_cpus: Option<String>,

    /// Also measure another server (e.g. nginx, see bench/nginx.sh) with the same client
    /// matrix: https://host:port (it must serve /<size> for every size with the same files).
    #[arg(long)]
    pub target: Option<String>,

    /// Process whose CPU time is charged to --target (e.g. the nginx worker).
    #[arg(long)]
    pub target_pid: Option<u32>,

    /// Name of --target in the report (default: target).
    #[arg(long, default_value = "target")]
    pub target_name: String,

    /// Measure only --target (no hoist cells).
    #[arg(long)]
    pub target_only: bool,

    /// Skip the CPU comparison at an equal request rate.
    #[arg(long)]
    pub no_equal_rate: bool,

    /// The hoist binary to benchmark (default: this executable).
    #[arg(long)]
    pub hoist_bin: Option<PathBuf>,
}

pub const ALL_SIZES: [&str; 8] = ["1k", "10k", "100k", "500k", "1m", "2m", "5m", "10m"];
pub const ALL_CIPHERS: [&str; 2] = ["ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384"];
pub const ALL_CONFIGS: [&str; 5] = ["none", "ratelimit", "jwt", "ratelimit_jwt", "waf"];

/// Bytes of a size name (binary units: 1k = 1024).
pub fn size_bytes(name: &str) -> Option<u64> {
    let (num, unit) = name.split_at(name.find(|c: char| !c.is_ascii_digit())?);
    let n: u64 = num.parse().ok()?;
    match unit {
        "k" => Some(n * 1024),
        "m" => Some(n * 1024 * 1024),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes() {
        assert_eq!(super::size_bytes("1k"), Some(1024));
        assert_eq!(super::size_bytes("500k"), Some(512_000));
        assert_eq!(super::size_bytes("10m"), Some(10_485_760));
        assert_eq!(super::size_bytes("10"), None);
        assert_eq!(super::size_bytes("x"), None);
    }
}

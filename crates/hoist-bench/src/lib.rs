//! `hoist bench`: reproduces the published kTLS offload experiment on whatever machine it runs.
//!
//! It generates what it needs (an RSA-4096 certificate, payload files of 1 KB to 10 MB, the five
//! L7 configurations of the experiment as Envoy YAML, a JWT signing key and token), then runs the
//! matrix: TLS record layer in user space (`--tls-offload off`, the baseline) vs in the kernel
//! (`--tls-offload require`), x cipher x payload size x L7 configuration x worker count, with the
//! server and the load generator (`hoist load`) pinned to disjoint cores. For each cell it
//! records throughput, latency and the server's CPU use sampled from /proc, and writes a report
//! directory: report.md with the experiment's tables, results.json, and SVG charts.
#![forbid(unsafe_code)]

mod configs;
mod cpu;
mod load;
mod matrix;
mod options;
mod report;
mod run;
mod server;
mod workdir;

use std::process::ExitCode;

use clap::Parser;

/// Entry point of `hoist bench ARGS...` (`args` excludes the program name and "bench").
pub fn main(args: &[String]) -> ExitCode {
    let argv = std::iter::once("hoist bench".to_string()).chain(args.iter().cloned());
    let options = match options::BenchOptions::try_parse_from(argv) {
        Ok(o) => o,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    match run::run(&options) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hoist bench: {e}");
            ExitCode::from(1)
        }
    }
}

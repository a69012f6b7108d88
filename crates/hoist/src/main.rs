//! hoist: an L7 proxy configured like Envoy, whose TLS record crypto runs in the kernel (kTLS)
//! and, on NICs that support it, in the NIC. See docs/ARCHITECTURE.md for the path of a
//! connection through these modules.
#![forbid(unsafe_code)]

mod access_log;
mod admin;
mod cli;
mod codec;
mod conn_manager;
mod connection;
mod date;
mod default_config;
mod drain;
mod http1;
mod http2;
mod limits;
mod listener;
mod logging;
mod request_body;
mod request_id;
mod response_body;
mod router;
mod server;
mod stats_scope;
mod stream;
mod upstream;
mod worker;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // Subcommands with their own command lines come before Envoy's: `hoist load` speaks
    // Fortio's flags, `hoist bench` its own.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "load") {
        return hoist_load::cli::main(&args[2..]);
    }
    if args.get(1).is_some_and(|a| a == "bench") {
        let rest: Vec<String> = args[2..]
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        return hoist_bench::main(&rest);
    }
    let options = cli::Options::parse();
    logging::init(options.log_level.as_filter());
    limits::raise_fd_limit();
    server::run(options)
}

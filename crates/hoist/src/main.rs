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
mod listener;
mod logging;
mod request_id;
mod router;
mod server;
mod stats_scope;
mod stream;
mod worker;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // `hoist load ...` is Fortio's command line, not Envoy's: hand it over before clap.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "load") {
        return hoist_load::cli::main(&args[2..]);
    }
    let options = cli::Options::parse();
    logging::init(options.log_level.as_filter());
    server::run(options)
}

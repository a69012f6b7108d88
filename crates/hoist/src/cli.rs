//! The command line, spelled like Envoy's (`-c`, `--config-yaml`, `--mode`, `--concurrency`, ...)
//! plus hoist's own `--tls-offload`.

use std::path::PathBuf;

use clap::{Parser, ValueEnum};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Load the configuration and serve it.
    Serve,
    /// Load and check the configuration (certificates, files, routes), print the verdict, exit.
    Validate,
    /// Load everything and bind the listeners, then exit (Envoy's init_only).
    #[value(name = "init_only")]
    InitOnly,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TlsOffload {
    /// Offload the TLS record layer to the kernel when it can; user-space TLS otherwise.
    Auto,
    /// Never offload (user-space TLS only): the baseline of the experiment.
    Off,
    /// Refuse to start when the kernel cannot offload; close connections that cannot be.
    Require,
}

impl TlsOffload {
    pub fn mode(self) -> hoist_config::model::TlsOffloadMode {
        use hoist_config::model::TlsOffloadMode;
        match self {
            TlsOffload::Auto => TlsOffloadMode::Auto,
            TlsOffload::Off => TlsOffloadMode::Off,
            TlsOffload::Require => TlsOffloadMode::Require,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    Trace,
    Debug,
    Info,
    #[value(alias = "warn")]
    Warning,
    Error,
    Critical,
    Off,
}

impl LogLevel {
    pub fn as_filter(self) -> &'static str {
        match self {
            LogLevel::Trace => "trace",
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warning => "warn",
            LogLevel::Error | LogLevel::Critical => "error",
            LogLevel::Off => "off",
        }
    }
}

/// hoist: an L7 proxy configured like Envoy, whose TLS record crypto runs in the kernel.
///
/// Without -c or --config-yaml, hoist serves a built-in default: HTTPS on 127.0.0.1:10443 with a
/// fresh self-signed certificate, fixed payloads (/1k, /100k, /1m, /5m, /10m) and admin on
/// 127.0.0.1:9901.
#[derive(Clone, Debug, Parser)]
#[command(name = "hoist", version, about, long_about = None)]
pub struct Options {
    /// Path to an Envoy v3 bootstrap configuration (YAML or JSON).
    #[arg(short = 'c', long = "config-path", value_name = "PATH")]
    pub config_path: Option<PathBuf>,

    /// Bootstrap YAML merged over the file given with -c (or used alone).
    #[arg(long = "config-yaml", value_name = "YAML")]
    pub config_yaml: Option<String>,

    #[arg(long, value_enum, default_value = "serve")]
    pub mode: Mode,

    /// Number of worker threads, each pinned to a core with its own SO_REUSEPORT socket per
    /// listener. Default: the number of hardware threads.
    #[arg(long, value_name = "N")]
    pub concurrency: Option<usize>,

    #[arg(short = 'l', long = "log-level", value_enum, default_value = "info")]
    pub log_level: LogLevel,

    /// Accepted for Envoy compatibility (hot restart is not implemented, so it has no effect).
    #[arg(long = "base-id", value_name = "ID", default_value_t = 0)]
    pub base_id: u32,

    /// On SIGTERM/SIGINT, how long in-flight requests may take before hoist exits anyway.
    #[arg(long = "drain-time-s", value_name = "SECONDS", default_value_t = 600)]
    pub drain_time_s: u64,

    /// Write the admin listener's address (host:port) to this file once it is bound.
    #[arg(long = "admin-address-path", value_name = "PATH")]
    pub admin_address_path: Option<PathBuf>,

    /// Where TLS record crypto runs: the kernel (auto, require) or user space (off). A
    /// listener's metadata.filter_metadata.hoist.tls_offload overrides it (docs/KTLS.md).
    #[arg(long = "tls-offload", value_enum, default_value = "auto")]
    pub tls_offload: TlsOffload,
}

impl Options {
    pub fn concurrency(&self) -> usize {
        self.concurrency
            .filter(|n| *n > 0)
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
    }
}

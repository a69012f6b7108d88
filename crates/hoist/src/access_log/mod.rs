//! Envoy's access logs: the substitution formatter (`%START_TIME%`, `%REQ(:PATH)%`, ...) and
//! the file, stdout and stderr loggers.
//!
//! At config load, [`AccessLogger::from_config`] compiles each `access_log` entry (unknown
//! operators and bad syntax are errors naming the YAML path). Each worker takes
//! [`AccessLogger::worker`] and logs a [`LogContext`] per finished request; lines are buffered
//! per worker and written in batches (see [`WorkerAccessLog`]).

// The connection manager that calls this is being written in parallel.
#![allow(dead_code)]

mod context;
mod formatter;
mod operator;
mod sink;
mod time;

#[cfg(test)]
mod tests;

#[allow(unused_imports)]
pub use context::{LogContext, ResponseFlags};
pub use formatter::Formatter;
#[allow(unused_imports)]
pub use sink::{AccessLogSink, AccessLogger, WorkerAccessLog, FLUSH_BYTES, FLUSH_INTERVAL};

use hoist_config::model::access_log as config;

impl AccessLogger {
    /// Compiles the format and opens the sink of one `access_log` entry. Errors start with the
    /// entry's YAML path.
    pub fn from_config(log: &config::AccessLog) -> Result<AccessLogger, String> {
        let at = |e: String| format!("{}: {e}", log.yaml_path);
        let formatter = match &log.format {
            config::LogFormat::Text(format) => Formatter::text(format),
            config::LogFormat::Json(map) => Formatter::json(map),
        }
        .map_err(at)?;
        let sink = match &log.sink {
            config::AccessLogSink::File(path) => AccessLogSink::open_file(path).map_err(|e| {
                at(format!(
                    "cannot open access log file '{}': {e}",
                    path.display()
                ))
            })?,
            config::AccessLogSink::Stdout => AccessLogSink::Stdout,
            config::AccessLogSink::Stderr => AccessLogSink::Stderr,
        };
        Ok(AccessLogger::new(formatter, sink))
    }
}

//! A run's measurements, and Fortio's text report for them (all the lines `fortio load` prints
//! on stderr, in the same order and number formats), plus hoist's throughput line.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use crate::gofmt;
use crate::histogram::{Counter, Histogram, HistogramData};
use crate::options::LoadOptions;
use crate::plan::Plan;
use crate::runner::thread_count;
use crate::transport::Negotiated;

/// The version string in reports and JSON.
pub const VERSION: &str = concat!("hoist-", env!("CARGO_PKG_VERSION"));

/// What one connection did, for the per-connection report lines.
#[derive(Clone, Debug, PartialEq)]
pub struct ConnectionReport {
    /// Connections opened (1 with perfect keep-alive).
    pub sockets: u64,
    /// Connect (and TLS handshake) times in seconds.
    pub connect_times: Counter,
}

/// The result of [`crate::run`]. Durations are in seconds, sizes in bytes.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub url: String,
    pub labels: String,
    pub start_time: SystemTime,
    /// "max" or the requested total rate.
    pub requested_qps: String,
    /// "5s", "exactly 100 calls" (", interrupted after N" when stopped early), "until stop".
    pub requested_duration: String,
    /// Measured calls per second over the measured time.
    pub actual_qps: f64,
    pub actual_duration: Duration,
    /// Connections used (Fortio's NumThreads).
    pub num_connections: usize,
    /// OS threads that drove them.
    pub client_threads: usize,
    /// Every measured call's duration, with the requested percentiles.
    pub histogram: HistogramData,
    /// Durations of the calls that failed (socket error or a status other than 2xx/418).
    pub errors: HistogramData,
    /// Calls per status code; -1 counts socket errors (connect, TLS, timeout, bad response).
    pub ret_codes: BTreeMap<i32, u64>,
    /// Bytes per response, head included (Fortio's "Body/Total Sizes").
    pub sizes: HistogramData,
    pub header_sizes: HistogramData,
    /// Sockets opened per connection, and their sum.
    pub sockets: Vec<u64>,
    pub sockets_used: u64,
    /// All response bytes received by measured calls (application bytes, TLS excluded).
    pub bytes_received: u64,
    /// Unmeasured warm-up calls (one per connection, none with a call count).
    pub warmup_calls: u64,
    /// Connect (and TLS handshake) times over all connections, with the percentiles.
    pub connection_stats: HistogramData,
    pub connections: Vec<ConnectionReport>,
    /// Pauses between paced calls (only with a rate); negative when running behind.
    pub sleep_times: Option<Histogram>,
    /// The address connected to.
    pub resolved: String,
    /// TLS version and cipher suite negotiated (https only).
    pub negotiated: Option<Negotiated>,
    /// The first error seen, for diagnosis.
    pub first_error: Option<String>,
    pub options: LoadOptions,
    pub plan: Plan,
}

impl RunResult {
    /// ActualQPS x mean response size x 8 / 1e9: application-level throughput in Gbit/s.
    pub fn gbps(&self) -> f64 {
        self.actual_qps * self.sizes.avg * 8.0 / 1e9
    }

    /// The whole report as `fortio load` prints it on stderr (start lines included).
    pub fn text_report(&self) -> String {
        let mut out = start_lines(&self.options);
        out.push_str(&self.text_summary());
        out
    }

    /// The report from "Ended after" on: what is printed once the run is over.
    pub fn text_summary(&self) -> String {
        let mut out = String::new();
        let count = self.histogram.count;
        let _ = writeln!(
            out,
            "Ended after {} : {count} calls. qps={}",
            gofmt::duration(self.actual_duration),
            gofmt::g_prec(self.actual_qps, 5)
        );
        if let Some(sleeps) = &self.sleep_times {
            out.push_str(&sleep_lines(sleeps));
        }
        out.push_str(&self.histogram.print("Aggregated Function Time"));
        out.push_str(&self.errors.print("Error cases"));
        out.push_str("# Socket and IP used for each connection:\n");
        for (i, c) in self.connections.iter().enumerate() {
            let timing = c.connect_times.line(", connection timing");
            let _ = write!(
                out,
                "[{i}] {:>3} socket used, resolved to {}{timing}",
                c.sockets, self.resolved
            );
        }
        out.push_str(&self.connection_stats.print("Connection time histogram (s)"));
        let _ = writeln!(
            out,
            "Sockets used: {} (for perfect keepalive, would be {})",
            self.sockets_used, self.num_connections
        );
        let _ = writeln!(
            out,
            "Uniform: {}, Jitter: {}, Catchup allowed: true",
            self.options.uniform, self.options.jitter
        );
        out.push_str("IP addresses distribution:\n");
        let _ = writeln!(out, "{}: {}", self.resolved, self.sockets_used);
        for (code, n) in &self.ret_codes {
            let _ = writeln!(
                out,
                "Code {code:>3} : {n} ({} %)",
                gofmt::f(100.0 * *n as f64 / count as f64, 1)
            );
        }
        out.push_str(&self.header_sizes.counter_line("Response Header Sizes"));
        out.push_str(&self.sizes.counter_line("Response Body/Total Sizes"));
        if let Some(n) = &self.negotiated {
            let _ = writeln!(out, "TLS: {} {}", n.version, n.cipher);
        }
        if let Some(e) = &self.first_error {
            let _ = writeln!(out, "First error: {e}");
        }
        let _ = writeln!(out, "Throughput: {} Gbps", gofmt::g_prec(self.gbps(), 3));
        let _ = writeln!(
            out,
            "All done {count} calls (plus {} warmup) {} ms avg, {} qps",
            self.warmup_calls,
            gofmt::f(1000.0 * self.histogram.avg, 3),
            gofmt::f(self.actual_qps, 1)
        );
        out
    }
}

/// The lines Fortio prints before the run starts ("Fortio ... running at", "Starting at").
pub fn start_lines(opts: &LoadOptions) -> String {
    let plan = Plan::new(opts);
    let threads = thread_count(opts, plan.connections);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut out = format!(
        "Fortio {VERSION} running at {} queries per second, {cores}->{threads} procs",
        gofmt::g(opts.qps)
    );
    match (plan.exactly, plan.duration) {
        (Some(n), _) => {
            let _ = writeln!(out, ", for {n} calls: {}", opts.url);
        }
        (None, Some(d)) => {
            let _ = writeln!(out, ", for {}: {}", gofmt::duration(d), opts.url);
        }
        (None, None) => {
            let _ = writeln!(out, ", until interrupted: {}", opts.url);
        }
    }
    out.push_str(&plan.starting_line(threads));
    out
}

/// Fortio prints the sleep counter, or the whole sleep histogram and a warning when more
/// than 5% of the pauses were negative (the target could not keep up with the rate).
fn sleep_lines(sleeps: &Histogram) -> String {
    let count = sleeps.count();
    let behind = if count == 0 {
        0.0
    } else {
        100.0 * sleeps.first_bucket_count() as f64 / count as f64
    };
    if behind > 5.0 {
        let mut out = sleeps
            .export()
            .with_percentiles(&[50.0])
            .print("Aggregated Sleep Time");
        let _ = writeln!(
            out,
            "WARNING {}% of sleep were falling behind",
            gofmt::f(behind, 2)
        );
        out
    } else {
        sleeps.counter.line("Sleep times")
    }
}

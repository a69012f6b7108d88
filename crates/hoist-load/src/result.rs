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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A result with known numbers: 4 calls over 2 connections (one reconnected), one 503.
    pub(crate) fn sample() -> RunResult {
        let options = LoadOptions {
            url: "https://127.0.0.1:10443/1k".into(),
            connections: 2,
            count: Some(4),
            qps: 0.0,
            percentiles: vec![50.0, 99.0],
            ..LoadOptions::default()
        };
        let plan = Plan::new(&options);
        let mut durations = Histogram::new(0.0, 0.001);
        let mut errors = Histogram::new(0.0, 0.001);
        let mut sizes = Histogram::new(0.0, 100.0);
        let mut heads = Histogram::new(0.0, 5.0);
        for (d, size) in [
            (0.0015, 1124.0),
            (0.0025, 1124.0),
            (0.0025, 1124.0),
            (0.030, 150.0),
        ] {
            durations.record(d);
            sizes.record(size);
            heads.record(100.0);
        }
        errors.record(0.030);
        let mut connect = Histogram::new(0.0, 0.001);
        let mut conn0 = Counter::default();
        conn0.record(0.001);
        let mut conn1 = Counter::default();
        for t in [0.002, 0.003] {
            conn1.record(t);
        }
        for t in [0.001, 0.002, 0.003] {
            connect.record(t);
        }
        RunResult {
            url: options.url.clone(),
            labels: "test".into(),
            start_time: std::time::UNIX_EPOCH + Duration::from_secs(1_783_720_246),
            requested_qps: plan.requested_qps.clone(),
            requested_duration: plan.requested_duration.clone(),
            actual_qps: 2.0,
            actual_duration: Duration::from_secs(2),
            num_connections: 2,
            client_threads: 1,
            histogram: durations.export().with_percentiles(&options.percentiles),
            errors: errors.export().with_percentiles(&options.percentiles),
            ret_codes: [(200, 3), (503, 1)].into_iter().collect(),
            sizes: sizes.export(),
            header_sizes: heads.export(),
            sockets: vec![1, 2],
            sockets_used: 3,
            bytes_received: 3522,
            warmup_calls: 0,
            connection_stats: connect.export().with_percentiles(&options.percentiles),
            connections: vec![
                ConnectionReport {
                    sockets: 1,
                    connect_times: conn0,
                },
                ConnectionReport {
                    sockets: 2,
                    connect_times: conn1,
                },
            ],
            sleep_times: None,
            resolved: "127.0.0.1:10443".into(),
            negotiated: Some(Negotiated {
                version: "TLSv1.2".into(),
                cipher: "ECDHE-RSA-AES256-GCM-SHA384".into(),
            }),
            first_error: None,
            options,
            plan,
        }
    }

    #[test]
    fn summary_lines_read_like_fortio() {
        let text = sample().text_summary();
        let expected = "\
Ended after 2s : 4 calls. qps=2
Aggregated Function Time : count 4 avg 0.009125 +/- 0.01206 min 0.0015 max 0.03 sum 0.0365
# range, mid point, percentile, count
>= 0.0015 <= 0.002 , 0.00175 , 25.00, 1
> 0.002 <= 0.003 , 0.0025 , 75.00, 2
> 0.025 <= 0.03 , 0.0275 , 100.00, 1
# target 50% 0.0025
# target 99% 0.0298
Error cases : count 1 avg 0.03 +/- 0 min 0.03 max 0.03 sum 0.03
# range, mid point, percentile, count
>= 0.03 <= 0.03 , 0.03 , 100.00, 1
# target 50% 0.03
# target 99% 0.03
# Socket and IP used for each connection:
[0]   1 socket used, resolved to 127.0.0.1:10443, connection timing : count 1 avg 0.001 +/- 0 min 0.001 max 0.001 sum 0.001
[1]   2 socket used, resolved to 127.0.0.1:10443, connection timing : count 2 avg 0.0025 +/- 0.0005 min 0.002 max 0.003 sum 0.005
Connection time histogram (s) : count 3 avg 0.002 +/- 0.0008165 min 0.001 max 0.003 sum 0.006
# range, mid point, percentile, count
>= 0.001 <= 0.001 , 0.001 , 33.33, 1
> 0.001 <= 0.002 , 0.0015 , 66.67, 1
> 0.002 <= 0.003 , 0.0025 , 100.00, 1
# target 50% 0.0015
# target 99% 0.00297
Sockets used: 3 (for perfect keepalive, would be 2)
Uniform: false, Jitter: false, Catchup allowed: true
IP addresses distribution:
127.0.0.1:10443: 3
Code 200 : 3 (75.0 %)
Code 503 : 1 (25.0 %)
Response Header Sizes : count 4 avg 100 +/- 0 min 100 max 100 sum 400
Response Body/Total Sizes : count 4 avg 880.5 +/- 421.8 min 150 max 1124 sum 3522
TLS: TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384
Throughput: 1.41e-05 Gbps
All done 4 calls (plus 0 warmup) 9.125 ms avg, 2.0 qps
";
        assert_eq!(text, expected);
    }

    #[test]
    fn gbps_is_qps_times_mean_size() {
        let r = sample();
        // 2 calls/s x 880.5 bytes x 8 bits.
        assert!((r.gbps() - 2.0 * 880.5 * 8.0 / 1e9).abs() < 1e-18);
    }
}

//! Running the load: client threads, each with a single-threaded tokio runtime driving its
//! share of the connections; warm-up; Fortio's per-connection loop (`periodic.runOne`) with
//! its pacing, jitter and uniform start; and the merge of per-connection statistics.
//!
//! Each connection keeps its own histograms (no sharing, no locks on the hot path); they are
//! merged once at the end.

use std::collections::BTreeMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::task::JoinSet;

use crate::client::{build_request, Call, Client, Target};
use crate::histogram::Histogram;
use crate::options::{LoadError, LoadOptions};
use crate::plan::Plan;
use crate::result::{ConnectionReport, RunResult};
use crate::transport::Negotiated;
use crate::url::Target as Url;

/// More connections than this is a typo, not a load test (and would exhaust descriptors).
const MAX_CONNECTIONS: usize = 1_000_000;

/// Longest single sleep between checks of the stop flag.
const STOP_POLL: Duration = Duration::from_millis(50);

/// Read-only state shared by every client thread.
struct Shared {
    target: Arc<Target>,
    plan: Plan,
    opts: LoadOptions,
}

/// What one connection measured.
pub(crate) struct ConnStats {
    pub id: usize,
    pub durations: Histogram,
    pub errors: Histogram,
    pub sizes: Histogram,
    pub header_sizes: Histogram,
    pub sleeps: Histogram,
    pub codes: BTreeMap<i32, u64>,
    /// Response bytes, exactly (the size histogram's sum is a float).
    pub bytes: u64,
    pub sockets: u64,
    pub connect_times: Histogram,
    pub negotiated: Option<Negotiated>,
    pub first_error: Option<String>,
}

impl ConnStats {
    fn new(id: usize, resolution: f64) -> ConnStats {
        ConnStats {
            id,
            durations: Histogram::new(0.0, resolution),
            errors: Histogram::new(0.0, resolution),
            // Fortio's scales for sizes: 100-byte and 5-byte buckets.
            sizes: Histogram::new(0.0, 100.0),
            header_sizes: Histogram::new(0.0, 5.0),
            sleeps: Histogram::new(-0.001, 0.001),
            codes: BTreeMap::new(),
            bytes: 0,
            sockets: 0,
            connect_times: Histogram::new(0.0, resolution),
            negotiated: None,
            first_error: None,
        }
    }

    fn record(&mut self, call: &Call, latency: f64) {
        self.durations.record(latency);
        if !code_is_ok(call.code) {
            self.errors.record(latency);
        }
        *self.codes.entry(call.code).or_insert(0) += 1;
        self.sizes.record(call.size as f64);
        self.bytes += call.size;
        self.header_sizes.record(call.header_size as f64);
        if self.first_error.is_none() {
            if let Some(e) = &call.error {
                self.first_error = Some(e.to_string());
            }
        }
    }
}

/// Fortio's notion of success: 2xx, and 418.
pub(crate) fn code_is_ok(code: i32) -> bool {
    (200..300).contains(&code) || code == 418
}

/// Checks the options, resolves the target and prepares the request.
fn prepare(opts: &LoadOptions) -> Result<(Target, Url), LoadError> {
    if opts.connections == 0 || opts.connections > MAX_CONNECTIONS {
        return Err(LoadError::Options(format!(
            "-c must be between 1 and {MAX_CONNECTIONS}"
        )));
    }
    if opts.resolution.is_nan() || opts.resolution <= 0.0 || opts.resolution.is_infinite() {
        return Err(LoadError::Options("-r must be > 0".into()));
    }
    if let Some(p) = opts.percentiles.iter().find(|&&p| !(p > 0.0 && p < 100.0)) {
        return Err(LoadError::Options(format!(
            "percentile {p} must be > 0 and < 100"
        )));
    }
    if opts.timeout.is_zero() {
        return Err(LoadError::Options("-timeout must be > 0".into()));
    }
    if opts.threads == Some(0) {
        return Err(LoadError::Options("-threads must be at least 1".into()));
    }
    if opts.qps.is_nan() {
        return Err(LoadError::Options("-qps is not a number".into()));
    }
    let url = Url::parse(&opts.url).map_err(|e| LoadError::Url(e.0))?;
    let tls = if url.https {
        let settings = crate::tls::TlsSettings {
            version: opts.tls_version,
            cipher: opts.cipher.as_deref(),
            insecure: opts.insecure,
            ca_cert: opts.ca_cert.as_deref(),
            client_cert: opts.client_cert.as_deref(),
            client_key: opts.client_key.as_deref(),
        };
        let config = crate::tls::client_config(&settings).map_err(|e| LoadError::Tls(e.0))?;
        let name = crate::tls::server_name(&url.host).map_err(|e| LoadError::Tls(e.0))?;
        Some((config, name))
    } else {
        None
    };
    let addr = match opts.resolve {
        Some(ip) => SocketAddr::new(ip, url.port),
        None => (url.host.as_str(), url.port)
            .to_socket_addrs()
            .map_err(|e| LoadError::Resolve(format!("{}: {e}", url.host)))?
            .next()
            .ok_or_else(|| LoadError::Resolve(format!("{}: no address", url.host)))?,
    };
    let target = Target {
        addr,
        tls,
        request: build_request(opts, &url),
        head_request: opts.method().eq_ignore_ascii_case("HEAD"),
        close_requested: opts.http10 || !opts.keepalive,
        timeout: opts.timeout,
    };
    Ok((target, url))
}

/// Client threads to use: `threads`, or min(connections, available cores).
pub(crate) fn thread_count(opts: &LoadOptions, connections: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    opts.threads.unwrap_or(cores).min(connections).max(1)
}

/// Messages from the coordinator to the client threads after the warm-up.
enum Go {
    Start(Instant),
}

/// Runs the load described by `opts` and returns the measurements. Blocks until the run
/// ends (time, count, or `opts.stop`); spawns its own threads.
pub fn run(opts: &LoadOptions) -> Result<RunResult, LoadError> {
    let (target, url) = prepare(opts)?;
    let plan = Plan::new(opts);
    let threads = thread_count(opts, plan.connections);
    let warmup = plan.exactly.is_none();
    let shared = Arc::new(Shared {
        target: Arc::new(target),
        plan: plan.clone(),
        opts: opts.clone(),
    });

    let (report_tx, report_rx) = mpsc::channel::<Result<Vec<(usize, Call)>, String>>();
    let mut handles = Vec::new();
    let mut go_senders = Vec::new();
    for t in 0..threads {
        let ids: Vec<usize> = (t..plan.connections).step_by(threads).collect();
        let (go_tx, go_rx) = mpsc::channel::<Go>();
        go_senders.push(go_tx);
        let shared = Arc::clone(&shared);
        let report_tx = report_tx.clone();
        let handle = std::thread::Builder::new()
            .name(format!("hoist-load-{t}"))
            .spawn(move || client_thread(ids, shared, warmup, report_tx, go_rx))
            .map_err(|e| LoadError::Runtime(format!("cannot start a client thread: {e}")))?;
        handles.push(handle);
    }
    drop(report_tx);

    // Every thread reports its warm-up (empty without warm-up) before anything is measured.
    let mut warmup_failure: Option<String> = None;
    for _ in 0..threads {
        match report_rx.recv() {
            Ok(Ok(calls)) => {
                if opts.allow_initial_errors {
                    continue;
                }
                if let Some((_, call)) = calls.iter().find(|(_, c)| !code_is_ok(c.code)) {
                    warmup_failure.get_or_insert_with(|| {
                        let cause = call
                            .error
                            .as_ref()
                            .map(|e| format!(": {e}"))
                            .unwrap_or_default();
                        format!(
                            "error {} for {} ({} bytes){cause}",
                            call.code, opts.url, call.size
                        )
                    });
                }
            }
            Ok(Err(e)) => {
                warmup_failure.get_or_insert(e);
            }
            Err(_) => {
                warmup_failure.get_or_insert_with(|| "a client thread exited".to_string());
            }
        }
    }
    if let Some(failure) = warmup_failure {
        drop(go_senders);
        for h in handles {
            let _ = h.join();
        }
        return Err(LoadError::Warmup(failure));
    }

    let start_time = SystemTime::now();
    let start = Instant::now();
    for tx in &go_senders {
        // A thread that died shows up when joined.
        let _ = tx.send(Go::Start(start));
    }
    let mut conns: Vec<ConnStats> = Vec::with_capacity(plan.connections);
    for h in handles {
        match h.join() {
            Ok(stats) => conns.extend(stats),
            Err(_) => return Err(LoadError::Runtime("a client thread panicked".into())),
        }
    }
    let elapsed = start.elapsed();
    conns.sort_by_key(|c| c.id);
    Ok(merge(
        opts,
        &plan,
        threads,
        &url,
        shared.target.addr,
        conns,
        start_time,
        elapsed,
        warmup,
    ))
}

#[allow(clippy::too_many_arguments)]
fn merge(
    opts: &LoadOptions,
    plan: &Plan,
    threads: usize,
    url: &Url,
    addr: SocketAddr,
    conns: Vec<ConnStats>,
    start_time: SystemTime,
    elapsed: Duration,
    warmup: bool,
) -> RunResult {
    let mut total = ConnStats::new(0, opts.resolution);
    let mut reports = Vec::with_capacity(conns.len());
    for c in &conns {
        total.durations.merge(&c.durations);
        total.errors.merge(&c.errors);
        total.sizes.merge(&c.sizes);
        total.header_sizes.merge(&c.header_sizes);
        total.sleeps.merge(&c.sleeps);
        total.connect_times.merge(&c.connect_times);
        total.bytes += c.bytes;
        for (code, n) in &c.codes {
            *total.codes.entry(*code).or_insert(0) += n;
        }
        if total.negotiated.is_none() {
            total.negotiated = c.negotiated.clone();
        }
        if total.first_error.is_none() {
            total.first_error = c.first_error.clone();
        }
        reports.push(ConnectionReport {
            sockets: c.sockets,
            connect_times: c.connect_times.counter.clone(),
        });
    }
    let count = total.durations.count();
    let secs = elapsed.as_secs_f64();
    RunResult {
        url: opts.url.clone(),
        labels: opts
            .labels
            .clone()
            .unwrap_or_else(|| default_labels(url, &opts.url)),
        start_time,
        requested_qps: plan.requested_qps.clone(),
        requested_duration: requested_duration(plan, count),
        actual_qps: if secs > 0.0 { count as f64 / secs } else { 0.0 },
        actual_duration: elapsed,
        num_connections: plan.connections,
        client_threads: threads,
        histogram: total.durations.export().with_percentiles(&opts.percentiles),
        errors: total.errors.export().with_percentiles(&opts.percentiles),
        ret_codes: total.codes,
        sizes: total.sizes.export(),
        header_sizes: total.header_sizes.export(),
        sockets: reports.iter().map(|r| r.sockets).collect(),
        sockets_used: reports.iter().map(|r| r.sockets).sum(),
        bytes_received: total.bytes,
        warmup_calls: if warmup { plan.connections as u64 } else { 0 },
        connection_stats: total
            .connect_times
            .export()
            .with_percentiles(&opts.percentiles),
        connections: reports,
        sleep_times: plan.qps.map(|_| total.sleeps.clone()),
        resolved: addr.to_string(),
        negotiated: total.negotiated,
        first_error: total.first_error,
        options: opts.clone(),
        plan: plan.clone(),
    }
}

fn requested_duration(plan: &Plan, count: u64) -> String {
    match plan.exactly {
        Some(n) if n != count => format!("{}, interrupted after {count}", plan.requested_duration),
        _ => plan.requested_duration.clone(),
    }
}

/// Fortio's default labels: the URL without its scheme, " , ", the short host name.
fn default_labels(_url: &Url, raw: &str) -> String {
    let lower = raw.to_ascii_lowercase();
    let short = if lower.starts_with("https://") {
        &raw[8..]
    } else if lower.starts_with("http://") {
        &raw[7..]
    } else {
        raw
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim().split('.').next().unwrap_or("").to_string();
    format!("{short} , {host}")
}

/// One client thread: its runtime, its connections' warm-up, then their measured loops.
fn client_thread(
    ids: Vec<usize>,
    shared: Arc<Shared>,
    warmup: bool,
    report: mpsc::Sender<Result<Vec<(usize, Call)>, String>>,
    go: mpsc::Receiver<Go>,
) -> Vec<ConnStats> {
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            let _ = report.send(Err(format!("cannot start a runtime: {e}")));
            return Vec::new();
        }
    };
    let resolution = shared.opts.resolution;
    let mut clients: Vec<(usize, Client)> = ids
        .iter()
        .map(|&id| (id, Client::new(Arc::clone(&shared.target), resolution)))
        .collect();
    if warmup {
        let (back, calls) = rt.block_on(warm_up(clients));
        clients = back;
        let _ = report.send(Ok(calls));
    } else {
        let _ = report.send(Ok(Vec::new()));
    }
    let Ok(Go::Start(start)) = go.recv() else {
        return Vec::new();
    };
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for (id, client) in clients {
            set.spawn(run_connection(id, client, Arc::clone(&shared), start));
        }
        let mut out = Vec::new();
        while let Some(res) = set.join_next().await {
            if let Ok(stats) = res {
                out.push(stats);
            }
        }
        out
    })
}

/// One unmeasured call per connection, all at once.
async fn warm_up(clients: Vec<(usize, Client)>) -> (Vec<(usize, Client)>, Vec<(usize, Call)>) {
    let mut set = JoinSet::new();
    for (id, mut client) in clients {
        set.spawn(async move {
            let call = client.call().await;
            (id, client, call)
        });
    }
    let mut back = Vec::new();
    let mut calls = Vec::new();
    while let Some(res) = set.join_next().await {
        if let Ok((id, client, call)) = res {
            back.push((id, client));
            calls.push((id, call));
        }
    }
    back.sort_by_key(|(id, _)| *id);
    (back, calls)
}

/// Fortio's `runOne` for one connection.
async fn run_connection(
    id: usize,
    mut client: Client,
    shared: Arc<Shared>,
    start: Instant,
) -> ConnStats {
    let opts = &shared.opts;
    let plan = &shared.plan;
    let mut stats = ConnStats::new(id, opts.resolution);
    let num_calls = plan.calls_for(id);
    let n = plan.connections as f64;
    let per_conn_qps = plan.qps.map(|q| q / n);
    let use_exactly = plan.exactly.is_some();
    // A duration too long to represent is no limit at all.
    let end_time = plan.duration.and_then(|d| start.checked_add(d));
    let mut rng = Rng::new(id);
    let mut start = start;
    if let (Some(q), true) = (per_conn_qps, opts.uniform) {
        // Spread the connections evenly over one period.
        let period = 1.0 / q;
        let delay = seconds(period * id as f64 / n);
        start = start.checked_add(delay).unwrap_or(start);
        if pause(delay, &shared).await {
            return finish(stats, client);
        }
    }
    let mut i: u64 = 0;
    loop {
        let call_start = Instant::now();
        // Time is up: Fortio still lets a paced connection make its last planned call.
        let time_up = !use_exactly && end_time.is_some_and(|end| call_start > end);
        if time_up && (per_conn_qps.is_none() || (i >= 2 && i + 1 != num_calls)) {
            break;
        }
        if shared.opts.stop.load(Ordering::Relaxed) {
            break;
        }
        let call = client.call().await;
        let latency = call_start.elapsed().as_secs_f64();
        stats.record(&call, latency);
        if let Some(p) = &opts.progress {
            p.fetch_add(1, Ordering::Relaxed);
        }
        if opts.abort_on == Some(call.code) {
            opts.stop.store(true, Ordering::Relaxed);
        }
        i += 1;
        if num_calls > 0 && i >= num_calls {
            break;
        }
        if let Some(q) = per_conn_qps {
            let target = if end_time.is_some() && num_calls > 1 {
                (i as f64 + i as f64 / (num_calls - 1) as f64) / q
            } else {
                i as f64 / q
            };
            let mut sleep = target - start.elapsed().as_secs_f64();
            if opts.jitter {
                sleep += rng.jitter(sleep);
            }
            stats.sleeps.record(sleep);
            if sleep > 0.0 && pause(seconds(sleep), &shared).await {
                break;
            }
        }
    }
    finish(stats, client)
}

fn finish(mut stats: ConnStats, client: Client) -> ConnStats {
    stats.sockets = client.sockets;
    stats.connect_times = client.connect_times;
    stats.negotiated = client.negotiated;
    stats
}

/// Sleeps `d`, waking early when the run is stopped; returns whether it was.
async fn pause(d: Duration, shared: &Shared) -> bool {
    let now = Instant::now();
    let deadline = now.checked_add(d).unwrap_or(now);
    loop {
        if shared.opts.stop.load(Ordering::Relaxed) {
            return true;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return false;
        }
        tokio::time::sleep(left.min(STOP_POLL)).await;
    }
}

/// A pause in seconds as a Duration; absurd rates (`-qps 1e-300`) give absurd pauses, which
/// are capped rather than allowed to overflow.
fn seconds(s: f64) -> Duration {
    const CAP: f64 = 365.0 * 86_400.0;
    if s.is_nan() || s <= 0.0 {
        return Duration::ZERO;
    }
    Duration::from_secs_f64(s.min(CAP))
}

/// xorshift64*: jitter needs cheap, not cryptographic, randomness.
struct Rng(u64);

impl Rng {
    fn new(id: usize) -> Rng {
        let seed = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Rng((seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Fortio's `getJitter`: uniform in [-10%, +10%] of `t` (seconds), none when t <= 0.
    fn jitter(&mut self, t: f64) -> f64 {
        if t.is_nan() || t <= 0.0 {
            return 0.0;
        }
        // Nanoseconds, as Fortio; capped (a year) so that absurd pauses cannot overflow.
        let i = ((t.min(365.0 * 86_400.0) * 1e9 / 10.0 + 0.5) as i128).min(i128::from(u64::MAX));
        if i <= 0 {
            return 0.0;
        }
        let span = 2 * i + 1;
        let j = i128::from(self.next()) % span - i;
        j as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jitter_stays_within_ten_percent() {
        let mut rng = Rng::new(3);
        let mut seen_neg = false;
        let mut seen_pos = false;
        for _ in 0..1000 {
            let j = rng.jitter(0.01);
            assert!(j.abs() <= 0.001 + 1e-12, "{j}");
            seen_neg |= j < 0.0;
            seen_pos |= j > 0.0;
        }
        assert!(seen_neg && seen_pos);
        assert_eq!(rng.jitter(-0.5), 0.0);
        assert!(rng.jitter(f64::INFINITY).is_finite());
        assert_eq!(rng.jitter(f64::NAN), 0.0);
    }

    #[test]
    fn pauses_are_capped_not_overflowed() {
        assert_eq!(seconds(f64::NAN), Duration::ZERO);
        assert_eq!(seconds(-3.0), Duration::ZERO);
        assert_eq!(seconds(0.25), Duration::from_millis(250));
        assert_eq!(seconds(1e300), Duration::from_secs(365 * 86_400));
        assert_eq!(seconds(f64::INFINITY), Duration::from_secs(365 * 86_400));
    }

    #[test]
    fn invalid_options_are_rejected_before_connecting() {
        let base = LoadOptions {
            url: "http://127.0.0.1:1/".into(),
            ..LoadOptions::default()
        };
        for opts in [
            LoadOptions {
                connections: 0,
                ..base.clone()
            },
            LoadOptions {
                connections: usize::MAX,
                ..base.clone()
            },
            LoadOptions {
                resolution: 0.0,
                ..base.clone()
            },
            LoadOptions {
                percentiles: vec![100.0],
                ..base.clone()
            },
            LoadOptions {
                threads: Some(0),
                ..base.clone()
            },
            LoadOptions {
                url: "ftp://x/".into(),
                ..base.clone()
            },
            LoadOptions {
                url: "https://h/".into(),
                cipher: Some("NOPE".into()),
                ..base.clone()
            },
        ] {
            assert!(run(&opts).is_err());
        }
    }
}

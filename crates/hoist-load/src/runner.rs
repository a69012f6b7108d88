//! Running the load: options checked and the target prepared, client threads (each a
//! single-threaded tokio runtime driving its share of the connections), the warm-up, the
//! measured loops of [`crate::periodic`], and the merge of the per-connection statistics into
//! a [`RunResult`].

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::task::JoinSet;

use crate::client::{build_request, Call, Client, Target};
use crate::options::{LoadError, LoadOptions};
use crate::periodic::{code_is_ok, run_connection, ConnStats, Shared};
use crate::plan::Plan;
use crate::result::{ConnectionReport, RunResult};
use crate::url::Target as Url;

/// More connections than this is a typo, not a load test (and would exhaust descriptors).
const MAX_CONNECTIONS: usize = 1_000_000;

/// Checks the options, resolves the target and prepares the request.
fn prepare(opts: &LoadOptions) -> Result<Target, LoadError> {
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
    Ok(target)
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
    let target = prepare(opts)?;
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
            .unwrap_or_else(|| default_labels(&opts.url)),
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
fn default_labels(raw: &str) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

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

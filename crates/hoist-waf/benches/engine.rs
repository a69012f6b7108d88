//! Engine CPU per request with the full CRS at paranoia level 1 (the budgets: a 1 KB
//! browser GET ≤ 50 µs, a 10 KB urlencoded POST ≤ 200 µs), on criterion:
//! `cargo bench -p hoist-waf --bench engine` measures (release build, one thread) and prints
//! the time per transaction; `cargo test -p hoist-waf --benches` runs each case once as a
//! smoke test. The CRS comes from `HOIST_CRS_DIR`, else `../shared/crs` next to the workspace.
//! A third case, `get_small_jwt`, is the request `bench/filter-cost.sh` sends through the
//! proxy and the 1 KB text/plain response it gets back: the engine's share of the proxy's
//! per-request cost. A fourth, `get_large_page`, answers with a 512 KB HTML page, as much as
//! base.conf inspects of a response: what the response rules cost past the literal
//! prefilter's 4 KB. `HOIST_WAF_BENCH_SHORTCUTS=0` loads the rules without the engine's
//! shortcuts (`RuleSet::from_str_without_shortcuts`): what evaluating every rule as written
//! costs.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use hoist_waf::{RuleSet, Transaction};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn crs_dir() -> PathBuf {
    match std::env::var_os("HOIST_CRS_DIR") {
        Some(d) => PathBuf::from(d),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/crs"),
    }
}

const BROWSER_HEADERS: &[(&str, &str)] = &[
    ("Host", "shop.example.com"),
    (
        "User-Agent",
        "Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Gecko/20100101 Firefox/128.0",
    ),
    (
        "Accept",
        "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
    ),
    ("Accept-Language", "en-US,en;q=0.5"),
    ("Accept-Encoding", "gzip, deflate, br, zstd"),
    (
        "Referer",
        "https://shop.example.com/products?category=books&page=2",
    ),
    (
        "Cookie",
        "session=3f2a9c1e7b5d4a6f8e0c2b1a9d7f5e3c; theme=dark; consent=analytics%3Dno",
    ),
    ("Upgrade-Insecure-Requests", "1"),
    ("Sec-Fetch-Dest", "document"),
    ("Sec-Fetch-Mode", "navigate"),
    ("Sec-Fetch-Site", "same-origin"),
];

/// A signed RS256 JWT as `bench/filter-cost.sh` sends it.
const BEARER: &str = "Bearer eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCIsImtpZCI6ImJlbmNoIn0.eyJpc3MiOiJob2lzdC1iZW5jaCIsImF1ZCI6ImJlbmNoIiwic3ViIjoibG9hZCIsImlhdCI6MTc5NjAwOTMxNSwiZXhwIjoxODI3NTQ1MzE1fQ.pqLepA21Knrg8inP5W8OSOMJ-f3mZ3EbHRtbN9d0QF0r_cjymm51ZViZn8ELZoKYQ_kPGRCwmVJLsK1RE6Q46NcCmUU9-ykM_Ooe3DUODyHWhHl5Rs70d4ifuaM4tyKwxiiImVs_nAx60cEPWKoyIhbSk4uSqb_S96OuxWI1hH66yFw-mmy5IQNtiBo7H1ekSwYb7SNbaptyMRWTz7YOWHVkkgAOTBsHJlsISe1Y1Itl91nG00Bgd1PlLefavy7Samg4C7op5B3CuFcDP4iZdrpfXhOU4-Q_1JpLx1cj_9w7DdGP-hYfPNVip_HD9RmUGCgwuu9N66R8Ei-7ifo2ew";

fn get_1k(rules: &Arc<RuleSet>) {
    let mut tx = Transaction::new(rules.clone(), "198.51.100.7", "bench");
    tx.process_request_line(
        "GET",
        "/products/item?id=12345&ref=homepage&utm_source=newsletter",
        "HTTP/1.1",
    );
    for (k, v) in BROWSER_HEADERS {
        tx.add_request_header(k, v.as_bytes());
    }
    answer_get(&mut tx, b"text/html", b"");
}

/// What `bench/filter-cost.sh` sends through the proxy (`hoist load` with a JWT) and what it
/// gets back (`payload`: the 1 KB text/plain direct response, which SecResponseBodyAccess
/// and the listed MIME type make phase 4 inspect): the per-transaction cost of a request with
/// few values.
#[inline(never)] // a symbol for `valgrind --toggle-collect`
fn get_small(rules: &Arc<RuleSet>, payload: &[u8]) {
    let mut tx = Transaction::new(rules.clone(), "127.0.0.1", "bench");
    tx.process_request_line("GET", "/1k", "HTTP/1.1");
    tx.add_request_header("Host", b"shop.example.com");
    tx.add_request_header("User-Agent", b"hoist-load/0.1");
    tx.add_request_header("Authorization", BEARER.as_bytes());
    answer_get(&mut tx, b"text/plain", payload);
}

/// `get_small`'s request answered with a large HTML page (`html_page`): the response rules
/// then read a body far past the 4 KB the literal prefilter scans, up to the 512 KB that
/// base.conf's SecResponseBodyLimit inspects.
fn get_large_page(rules: &Arc<RuleSet>, page: &[u8]) {
    let mut tx = Transaction::new(rules.clone(), "127.0.0.1", "bench");
    tx.process_request_line("GET", "/catalog", "HTTP/1.1");
    tx.add_request_header("Host", b"shop.example.com");
    tx.add_request_header("User-Agent", b"hoist-load/0.1");
    answer_get(&mut tx, b"text/html", page);
}

/// An ordinary HTML page of `size` bytes: paragraphs of words and numbers.
fn html_page(size: usize) -> Vec<u8> {
    let mut page =
        String::from("<!DOCTYPE html>\n<html><head><title>Catalog</title></head><body>\n");
    let mut i = 0;
    while page.len() < size {
        page.push_str(&format!(
            "<p class=\"item\">Item {i}: an ordinary product with a short description, \
             in stock since {} and priced at {}.{:02} euros.</p>\n",
            2000 + i % 25,
            10 + i % 90,
            i % 100
        ));
        i += 1;
    }
    page.truncate(size);
    page.into_bytes()
}

/// The rest of a GET once its headers are in: both phases of the request, a 200 response
/// of `content_type` with `body`, and logging.
fn answer_get(tx: &mut Transaction, content_type: &[u8], body: &[u8]) {
    tx.process_request_headers();
    tx.process_request_body();
    tx.set_response_status(200, "HTTP/1.1");
    tx.add_response_header("Content-Type", content_type);
    tx.process_response_headers();
    if !body.is_empty() && tx.wants_response_body() {
        tx.append_response_body(body);
    }
    tx.process_response_body();
    tx.process_logging();
}

fn post_10k(rules: &Arc<RuleSet>, body: &[u8]) {
    let mut tx = Transaction::new(rules.clone(), "198.51.100.7", "bench");
    tx.process_request_line("POST", "/checkout", "HTTP/1.1");
    for (k, v) in BROWSER_HEADERS {
        tx.add_request_header(k, v.as_bytes());
    }
    tx.add_request_header("Content-Type", b"application/x-www-form-urlencoded");
    tx.add_request_header("Content-Length", body.len().to_string().as_bytes());
    tx.process_request_headers();
    tx.append_request_body(body);
    tx.process_request_body();
    tx.process_logging();
}

/// The 1 KB response body `hoist bench --prepare` writes (crates/hoist-bench/src/workdir.rs):
/// incompressible xorshift bytes.
fn bench_payload(size: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(size as usize);
    let mut x: u64 = 0x2545_F491_4F6C_DD1D ^ size;
    while (out.len() as u64) < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let take = (size - out.len() as u64).min(8) as usize;
        out.extend_from_slice(&x.to_le_bytes()[..take]);
    }
    out
}

fn form_body() -> Vec<u8> {
    let mut body = String::new();
    let mut i = 0;
    while body.len() < 10 * 1024 {
        body.push_str(&format!(
            "field{i}=Some+ordinary+text+with+words+and+numbers+{i}&"
        ));
        i += 1;
    }
    body.into_bytes()
}

/// The full CRS at paranoia level 1 as the CRS setup and base.conf load it; `None` when the
/// CRS is not checked out next to the workspace.
fn load_crs() -> Option<Arc<RuleSet>> {
    let crs = crs_dir();
    if !crs.join("rules").is_dir() {
        println!(
            "engine bench: no CRS at {} (set HOIST_CRS_DIR); skipped",
            crs.display()
        );
        return None;
    }
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/base.conf");
    let text = format!(
        "Include {}\nInclude {}\nInclude {}\n",
        base.display(),
        crs.join("crs-setup.conf.example").display(),
        crs.join("rules/*.conf").display()
    );
    let origin = crs.join("bench.conf");
    let loaded = if std::env::var_os("HOIST_WAF_BENCH_SHORTCUTS").is_some_and(|v| v == "0") {
        RuleSet::from_str_without_shortcuts(&text, &origin)
    } else {
        RuleSet::from_str(&text, &origin)
    };
    match loaded {
        Ok(r) => Some(Arc::new(r)),
        Err(e) => panic!("CRS does not load: {e}"),
    }
}

/// One iteration is one whole transaction, so criterion's `time:` line reads directly as
/// CPU per request (µs/transaction); the budgets are 50 µs (GET) and 200 µs (POST).
fn crs_pl1(c: &mut Criterion) {
    let Some(rules) = load_crs() else {
        return;
    };
    let body = form_body();
    let payload = bench_payload(1024);
    if let Some(n) = fixed_iterations() {
        // A fixed count instead of criterion's sampling, for `perf stat` (CPU time and
        // instructions per transaction on a shared machine, where wall time is noisy).
        let case = std::env::var("HOIST_WAF_BENCH_CASE").unwrap_or_default();
        if case == "small" {
            timed("crs pl1: small GET", n, || get_small(&rules, &payload));
            return;
        }
        if case == "large" {
            let page = html_page(512 * 1024);
            timed("crs pl1: GET of a 512 KB HTML page", n, || {
                get_large_page(&rules, &page)
            });
            return;
        }
        if case != "post" {
            timed("crs pl1: 1 KB browser GET", n, || get_1k(&rules));
        }
        if case != "get" {
            timed("crs pl1: 10 KB urlencoded POST", n, || {
                post_10k(&rules, &body)
            });
        }
        return;
    }
    let mut group = c.benchmark_group("crs_pl1");
    group.throughput(Throughput::Elements(1));
    group.bench_function("get_1k_browser", |b| b.iter(|| get_1k(black_box(&rules))));
    group.bench_function("get_small_jwt", |b| {
        b.iter(|| get_small(black_box(&rules), &payload))
    });
    let page = html_page(512 * 1024);
    group.bench_function("get_large_page", |b| {
        b.iter(|| get_large_page(black_box(&rules), &page))
    });
    group.bench_function("post_10k_urlencoded", |b| {
        b.iter(|| post_10k(black_box(&rules), black_box(&body)))
    });
    group.finish();
}

/// `HOIST_WAF_BENCH_ITERS=N`: run each case N times and print CPU and wall µs per transaction
/// (`HOIST_WAF_BENCH_CASE=get` or `post` for one case only, `small` for `get_small` alone,
/// `large` for `get_large_page` alone).
fn fixed_iterations() -> Option<u32> {
    std::env::var("HOIST_WAF_BENCH_ITERS").ok()?.parse().ok()
}

fn timed(name: &str, n: u32, mut f: impl FnMut()) {
    timed_plain_or_cold(name, n, &mut f);
    #[cfg(feature = "rule-profile")]
    print_rule_profile(n);
}

/// The 30 rules (and gate checks, id -1) that took most time, per transaction; the first
/// transaction's one-time work (the constant plan, regex caches) is included. What the timer
/// records around nothing is subtracted per call (`HOIST_WAF_PROFILE_ROWS` rows, default 30).
#[cfg(feature = "rule-profile")]
fn print_rule_profile(n: u32) {
    let mut entries = hoist_waf::rule_profile::take();
    let bias = hoist_waf::rule_profile::bias_nanos();
    let unions: u64 = entries
        .iter()
        .filter(|e| e.id == hoist_waf::rule_profile::UNIONS)
        .map(|e| e.calls)
        .sum();
    entries.retain(|e| e.id != hoist_waf::rule_profile::UNIONS);
    let net =
        |e: &hoist_waf::rule_profile::Entry| (e.nanos as f64 - bias * e.calls as f64).max(0.0);
    let mut entries: Vec<_> = entries.iter().map(|e| (net(e), e)).collect();
    entries.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total: f64 = entries.iter().map(|(t, _)| t).sum();
    let calls: u64 = entries.iter().map(|(_, e)| e.calls).sum();
    let n = f64::from(n.max(1));
    println!(
        "rule profile: {:.1} µs per transaction in timed rules and gate checks, {:.0} timed \
         calls; {bias:.0} ns of timer per call subtracted",
        total / n / 1e3,
        calls as f64 / n
    );
    println!(
        "  gate unions computed (part of the gate checks, id -1): {:.1} per transaction",
        unions as f64 / n
    );
    let rows = std::env::var("HOIST_WAF_PROFILE_ROWS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(30);
    for (t, e) in entries.iter().take(rows) {
        println!(
            "  phase {} rule {:>7}: {:>8.2} µs, {:>6.1} calls per transaction",
            e.phase,
            e.id,
            t / n / 1e3,
            e.calls as f64 / n
        );
    }
}

fn timed_plain_or_cold(name: &str, n: u32, f: &mut impl FnMut()) {
    if let Some(mib) = cold_mib() {
        return timed_cold(name, n, mib, f);
    }
    let cpu = cpu_ticks();
    let start = std::time::Instant::now();
    for _ in 0..n {
        f();
    }
    let n_f = f64::from(n.max(1));
    let wall = start.elapsed().as_secs_f64() * 1e6 / n_f;
    // CPU time (user + system, 10 ms ticks) is what the budget is about, and on a shared
    // machine it moves far less than wall time.
    let cpu = match (cpu, cpu_ticks()) {
        (Some(a), Some(b)) => format!("{:.1} µs CPU", (b - a) as f64 * 1e4 / n_f),
        _ => "CPU time unknown".to_string(),
    };
    println!("{name}: {cpu}, {wall:.1} µs wall per transaction ({n} transactions)");
}

/// `HOIST_WAF_BENCH_COLD=MiB` (with `HOIST_WAF_BENCH_ITERS`): before each transaction,
/// write a buffer of that size, as the proxy's TLS, HTTP and kernel work does between two
/// requests, so the rules, automata and regex caches are no longer in the CPU's caches.
fn cold_mib() -> Option<usize> {
    std::env::var("HOIST_WAF_BENCH_COLD").ok()?.parse().ok()
}

/// `timed` with the caches evicted before each transaction; only the transactions are
/// timed (wall time each, so the median is printed: eviction time is not CPU we want).
fn timed_cold(name: &str, n: u32, mib: usize, f: &mut impl FnMut()) {
    let mut buffer = vec![0u8; mib << 20];
    let mut times = Vec::with_capacity(n as usize);
    for i in 0..n {
        for line in buffer.chunks_mut(64) {
            if let Some(b) = line.first_mut() {
                *b = b.wrapping_add(i as u8);
            }
        }
        black_box(&buffer);
        let start = std::time::Instant::now();
        f();
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    let median = times.get(times.len() / 2).copied().unwrap_or(0.0);
    println!("{name}: {median:.1} µs wall per transaction, median, caches evicted ({mib} MiB) before each ({n} transactions)");
}

/// utime + stime of this process from /proc/self/stat, in clock ticks (Linux: 100 Hz).
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

criterion_group! {
    name = benches;
    // Few samples: a transaction costs up to milliseconds and the machine is shared.
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(5));
    targets = crs_pl1
}
criterion_main!(benches);

//! Engine CPU per request with the full CRS at paranoia level 1 (the budgets: a 1 KB
//! browser GET ≤ 50 µs, a 10 KB urlencoded POST ≤ 200 µs). `cargo bench -p hoist-waf`
//! measures (release build, one thread); under `cargo test` it runs each case once as a smoke
//! test. The CRS comes from `HOIST_CRS_DIR`, else `../shared/crs` next to the workspace.

use hoist_waf::{RuleSet, Transaction};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    tx.process_request_headers();
    tx.process_request_body();
    tx.set_response_status(200, "HTTP/1.1");
    tx.add_response_header("Content-Type", b"text/html");
    tx.process_response_headers();
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

fn measure(name: &str, iterations: u32, mut f: impl FnMut()) {
    let start = Instant::now();
    for _ in 0..iterations {
        f();
    }
    let per = start.elapsed() / iterations.max(1);
    println!(
        "{name}: {:.1} µs per request ({iterations} requests)",
        per.as_secs_f64() * 1e6
    );
}

fn main() {
    let measuring = std::env::args().any(|a| a == "--bench");
    let crs = crs_dir();
    if !crs.join("rules").is_dir() {
        println!(
            "engine bench: no CRS at {} (set HOIST_CRS_DIR); skipped",
            crs.display()
        );
        return;
    }
    let base = Path::new(env!("CARGO_MANIFEST_DIR")).join("conf/base.conf");
    let text = format!(
        "Include {}\nInclude {}\nInclude {}\n",
        base.display(),
        crs.join("crs-setup.conf.example").display(),
        crs.join("rules/*.conf").display()
    );
    let rules = match RuleSet::from_str(&text, &crs.join("bench.conf")) {
        Ok(r) => Arc::new(r),
        Err(e) => panic!("CRS does not load: {e}"),
    };
    let body = form_body();
    let iterations = if measuring { 2000 } else { 1 };
    // Warm caches (page faults, lazy regex state) before timing.
    if measuring {
        let deadline = Instant::now() + Duration::from_millis(500);
        while Instant::now() < deadline {
            get_1k(&rules);
        }
    }
    measure("crs pl1: 1 KB browser GET", iterations, || get_1k(&rules));
    measure("crs pl1: 10 KB urlencoded POST", iterations, || {
        post_10k(&rules, &body)
    });
}

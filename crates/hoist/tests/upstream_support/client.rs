//! Driving hoist in front of origins: start it with routes and clusters, send requests with
//! curl, read which origin answered, wait for stats.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::{config, config_with};
use crate::support::{curl, Hoist, TempDir};

/// hoist with one worker (balancer sequences are then exact), a plain listener and an access
/// log in `dir`.
pub fn start(dir: &TempDir, routes: &str, clusters: &str) -> Hoist {
    let log = dir.path("access.log");
    let cfg = dir.write("hoist.yaml", config(routes, clusters, &log, None));
    Hoist::start(&cfg, &["--concurrency", "1"])
}

/// As start, with extra lines in the connection manager (indented by 10) and the virtual
/// host (indented by 14).
pub fn start_with(dir: &TempDir, routes: &str, clusters: &str, hcm: &str, vhost: &str) -> Hoist {
    let log = dir.path("access.log");
    let cfg = dir.write(
        "hoist.yaml",
        config_with(routes, clusters, &log, hcm, vhost),
    );
    Hoist::start(&cfg, &["--concurrency", "1"])
}

/// Status, response headers (names lower-case; repeated ones joined with ", ") and body.
pub fn exchange(h: &Hoist, path: &str, extra: &[&str]) -> (u16, HashMap<String, String>, String) {
    let u = url(h, path);
    let mut args = vec!["-s", "-i", &u];
    args.extend_from_slice(extra);
    let out = curl(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut headers: HashMap<String, String> = HashMap::new();
    for (k, v) in lines.filter_map(|l| l.split_once(':')) {
        let k = k.trim().to_ascii_lowercase();
        let v = v.trim();
        headers
            .entry(k)
            .and_modify(|e| {
                e.push_str(", ");
                e.push_str(v);
            })
            .or_insert_with(|| v.to_owned());
    }
    (status, headers, body.to_owned())
}

pub fn url(h: &Hoist, path: &str) -> String {
    format!("http://{}{path}", h.addr("plain"))
}

/// Status and body of a GET, with curl's extra arguments.
pub fn get(h: &Hoist, path: &str, extra: &[&str]) -> (u16, String) {
    let u = url(h, path);
    let mut args = vec!["-s", "-w", "\n%{http_code}", &u];
    args.extend_from_slice(extra);
    let out = curl(&args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, status) = text.rsplit_once('\n').unwrap_or(("", &text));
    (status.trim().parse().unwrap_or(0), body.to_owned())
}

/// The name of the origin that answered a GET (None: a local reply or another status).
pub fn origin_of(h: &Hoist, path: &str, extra: &[&str]) -> Option<String> {
    let (status, body) = get(h, path, extra);
    if status != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&body).ok()?;
    v["origin"].as_str().map(str::to_owned)
}

/// How many of `n` GETs each origin answered ("-" counts the others).
pub fn origins_seen(h: &Hoist, path: &str, n: usize, extra: &[&str]) -> HashMap<String, usize> {
    let mut seen = HashMap::new();
    for _ in 0..n {
        let o = origin_of(h, path, extra).unwrap_or_else(|| "-".into());
        *seen.entry(o).or_default() += 1;
    }
    seen
}

/// Waits (up to 30 s) until the stat has the value.
pub fn wait_for_stat(h: &Hoist, name: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while h.stat(name) != want {
        assert!(
            Instant::now() < deadline,
            "{name} never reached {want}: {}",
            h.stat(name)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The access log line containing `needle` (the log is flushed every second).
pub fn log_line(dir: &TempDir, needle: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let text = std::fs::read_to_string(dir.path("access.log")).unwrap_or_default();
        if let Some(l) = text.lines().find(|l| l.contains(needle)) {
            return l.to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "no log line with {needle}:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

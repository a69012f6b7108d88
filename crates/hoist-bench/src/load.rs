//! The load: `hoist load` (Fortio-compatible) on the load CPUs, its JSON report parsed.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// What one load run measured.
#[derive(Clone, Debug, Default)]
pub struct LoadResult {
    pub qps: f64,
    pub seconds: f64,
    pub calls: u64,
    pub ok: u64,
    pub errors: u64,
    /// Mean response body size in bytes.
    pub mean_size: f64,
    pub avg_latency_s: f64,
    pub p50_s: f64,
    pub p99_s: f64,
}

impl LoadResult {
    /// Application bytes per second x 8 (TLS overhead excluded), as the experiment reports.
    pub fn gbps(&self) -> f64 {
        self.qps * self.mean_size * 8.0 / 1e9
    }
}

pub struct LoadSpec<'a> {
    pub url: &'a str,
    pub connections: usize,
    /// 0 = as fast as possible.
    pub qps: f64,
    pub seconds: f64,
    pub headers: &'a [String],
    pub cpus: &'a str,
}

pub fn run(hoist: &Path, spec: &LoadSpec<'_>, json_out: &Path) -> Result<LoadResult, String> {
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", spec.cpus])
        .arg(hoist)
        .arg("load")
        .args(["-c", &spec.connections.to_string()])
        .args(["-qps", &format!("{}", spec.qps)])
        .args(["-t", &format!("{}s", spec.seconds)])
        .arg("-k")
        .args(["-timeout", "30s"])
        .arg("-json")
        .arg(json_out);
    for h in spec.headers {
        cmd.args(["-H", h]);
    }
    cmd.arg(spec.url);
    let out = cmd
        .output()
        .map_err(|e| format!("cannot run hoist load: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "hoist load failed: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        ));
    }
    let json: Value = serde_json::from_slice(&std::fs::read(json_out).map_err(|e| e.to_string())?)
        .map_err(|e| format!("hoist load wrote bad JSON: {e}"))?;
    Ok(parse(&json))
}

/// Reads Fortio's JSON fields (see specs/fortio.md).
pub fn parse(json: &Value) -> LoadResult {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let hist = &json["DurationHistogram"];
    let percentile = |p: f64| {
        hist["Percentiles"]
            .as_array()
            .and_then(|ps| ps.iter().find(|x| (f(&x["Percentile"]) - p).abs() < 1e-9))
            .map_or(0.0, |x| f(&x["Value"]))
    };
    let codes = json["RetCodes"].as_object();
    let ok = codes
        .and_then(|c| c.get("200"))
        .map_or(0, |v| v.as_u64().unwrap_or(0));
    let calls = hist["Count"].as_u64().unwrap_or(0);
    LoadResult {
        qps: f(&json["ActualQPS"]),
        seconds: f(&json["ActualDuration"]) / 1e9,
        calls,
        ok,
        errors: calls.saturating_sub(ok),
        mean_size: f(&json["Sizes"]["Avg"]),
        avg_latency_s: f(&hist["Avg"]),
        p50_s: percentile(50.0),
        p99_s: percentile(99.0),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn parses_fortio_json() {
        let j = serde_json::json!({
            "ActualQPS": 100.0, "ActualDuration": 2_000_000_000u64,
            "DurationHistogram": {"Count": 200, "Avg": 0.01,
                "Percentiles": [{"Percentile": 50, "Value": 0.009}, {"Percentile": 99, "Value": 0.02}]},
            "RetCodes": {"200": 198, "-1": 2},
            "Sizes": {"Avg": 1048576.0}
        });
        let r = super::parse(&j);
        assert_eq!((r.calls, r.ok, r.errors), (200, 198, 2));
        assert!((r.p99_s - 0.02).abs() < 1e-12);
        assert!((r.gbps() - 100.0 * 1048576.0 * 8.0 / 1e9).abs() < 1e-9);
        assert!((r.seconds - 2.0).abs() < 1e-12);
    }
}

//! The server under test: hoist started on the server CPUs with `--tls-offload off|require`,
//! ready once it prints its banner.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::options::Mode;

pub struct Server {
    child: Child,
    pub addr: SocketAddr,
}

impl Server {
    pub fn start(
        hoist: &Path,
        config: &Path,
        mode: Mode,
        workers: usize,
        cpus: &str,
    ) -> Result<Server, String> {
        let mut child = Command::new("taskset")
            .args(["-c", cpus])
            .arg(hoist)
            .arg("-c")
            .arg(config)
            .args([
                "--concurrency",
                &workers.to_string(),
                "--tls-offload",
                mode.offload_flag(),
                "-l",
                "warning",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot start {} under taskset: {e}", hoist.display()))?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let stderr = child.stderr.take().ok_or("no stderr")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let (etx, erx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = etx.send(line);
            }
        });
        let mut addr = None;
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    if let Some(rest) = line.strip_prefix("  listener 'bench' on https://") {
                        addr = rest.parse().ok();
                    }
                    if line.starts_with("hoist ready") {
                        break;
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    let err: Vec<String> = erx.try_iter().collect();
                    return Err(format!("hoist did not start: {}", err.join(" | ")));
                }
            }
        }
        std::thread::spawn(move || for _ in rx {});
        std::thread::spawn(move || for _ in erx {});
        let addr = addr.ok_or("hoist did not print its listener address")?;
        Ok(Server { child, addr })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether `hoist --mode validate` accepts a configuration; the error text when it does not.
pub fn validate(hoist: &Path, config: &Path) -> Result<(), String> {
    let out = Command::new(hoist)
        .args(["--mode", "validate", "-c"])
        .arg(config)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", hoist.display()))?;
    if out.status.success() {
        Ok(())
    } else {
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        // "configuration 'x' is invalid: <path>: <reason>" -> "<path>: <reason>"
        Err(text
            .split_once(" is invalid: ")
            .map_or(text.clone(), |(_, e)| e.to_string()))
    }
}

/// Why the accelerated mode cannot run here (None when it can): hoist refuses to start with
/// `--tls-offload require` when the kernel cannot offload.
pub fn offload_unavailable(hoist: &Path, config: &Path) -> Option<String> {
    let out = Command::new(hoist)
        .args([
            "--mode",
            "init_only",
            "--tls-offload",
            "require",
            "-l",
            "error",
            "-c",
        ])
        .arg(config)
        .output()
        .ok()?;
    if out.status.success() {
        None
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        Some(
            err.lines()
                .last()
                .unwrap_or("kernel TLS offload unavailable")
                .trim()
                .to_string(),
        )
    }
}

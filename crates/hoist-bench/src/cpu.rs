//! CPU accounting from /proc, the way mpstat and top read it: a process's user+system time
//! (/proc/<pid>/stat) and per-CPU busy time (/proc/stat).

use std::fs;

/// Clock ticks per second for /proc times.
fn ticks_per_second() -> f64 {
    rustix::param::clock_ticks_per_second() as f64
}

/// Seconds of CPU (user, system; all threads) the process has used so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessTimes {
    pub user: f64,
    pub system: f64,
}

impl ProcessTimes {
    pub fn total(&self) -> f64 {
        self.user + self.system
    }
}

pub fn process_seconds(pid: u32) -> Option<ProcessTimes> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may contain spaces or parentheses: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some(ProcessTimes {
        user: utime / ticks_per_second(),
        system: stime / ticks_per_second(),
    })
}

/// Busy and total time (in ticks) of a set of CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub busy: u64,
    pub total: u64,
}

/// Busy/total ticks summed over `cpus`, from /proc/stat.
pub fn cpu_times(cpus: &[usize]) -> Option<CpuTimes> {
    let stat = fs::read_to_string("/proc/stat").ok()?;
    Some(parse_cpu_times(&stat, cpus))
}

fn parse_cpu_times(stat: &str, cpus: &[usize]) -> CpuTimes {
    let mut t = CpuTimes::default();
    for line in stat.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        let Some((id, values)) = rest.split_once(' ') else {
            continue;
        };
        let Ok(id) = id.parse::<usize>() else {
            continue;
        };
        if !cpus.contains(&id) {
            continue;
        }
        let v: Vec<u64> = values
            .split_whitespace()
            .filter_map(|x| x.parse().ok())
            .collect();
        // user nice system idle iowait irq softirq steal (guest time is inside user).
        if v.len() < 8 {
            continue;
        }
        let idle = v[3] + v[4];
        let total: u64 = v[..8].iter().sum();
        t.busy += total - idle;
        t.total += total;
    }
    t
}

impl CpuTimes {
    /// Busy seconds and utilisation (0..1 per CPU, averaged) between two samples.
    pub fn since(self, earlier: CpuTimes) -> (f64, f64) {
        let busy = self.busy.saturating_sub(earlier.busy) as f64;
        let total = self.total.saturating_sub(earlier.total) as f64;
        let util = if total > 0.0 { busy / total } else { 0.0 };
        (busy / ticks_per_second(), util)
    }
}

/// Parses a CPU list such as "0", "0-3" or "0,2-3".
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if a > b {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok()?),
        }
    }
    (!out.is_empty()).then_some(out)
}

pub fn format_cpu_list(cpus: &[usize]) -> String {
    cpus.iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// The CPUs this process may use.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => vec![0],
    }
}

/// A one-line description of the machine: CPU model, count, kernel.
pub fn machine() -> String {
    let model = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "?".into(), |k| k.trim().to_string());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!("{model}, {cpus} CPUs, Linux {kernel}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-2,5"), Some(vec![0, 1, 2, 5]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("x"), None);
    }

    #[test]
    fn proc_stat_parsing() {
        let stat = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 40 0 1 2 0 0 0\nintr 1\n";
        assert_eq!(
            parse_cpu_times(stat, &[0]),
            CpuTimes {
                busy: 10,
                total: 50
            }
        );
        assert_eq!(
            parse_cpu_times(stat, &[1]),
            CpuTimes {
                busy: 13,
                total: 53
            }
        );
        assert_eq!(
            parse_cpu_times(stat, &[0, 1]),
            CpuTimes {
                busy: 23,
                total: 103
            }
        );
    }

    #[test]
    fn own_process_time_is_readable() {
        assert!(process_seconds(std::process::id()).is_some());
    }
}

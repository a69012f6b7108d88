//! How a run's calls are split over connections, from Fortio's `periodic.go`
//! (`runQPSSetup`, `runMaxQPSSetup`), with one deliberate difference: `-n N` always makes
//! exactly N calls (Fortio raises N to 2 with a rate, and makes one call per connection even
//! when N is smaller than the connection count at max speed).

use std::time::Duration;

use crate::gofmt;
use crate::options::LoadOptions;

/// The split, and the words the report uses for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    /// Connections actually used (Fortio lowers it for short paced runs).
    pub connections: usize,
    /// Calls per connection when bounded (paced runs, `-n`); 0 when only time bounds it.
    pub calls_per_connection: u64,
    /// Extra calls made by connection 0 so that `-n` is exact.
    pub leftover: u64,
    /// Pacing: total rate, when one was asked for.
    pub qps: Option<f64>,
    pub duration: Option<Duration>,
    pub exactly: Option<u64>,
    /// JSON `RequestedQPS`: "max" or the rate.
    pub requested_qps: String,
    /// JSON `RequestedDuration`: "5s", "exactly 100 calls" or "until stop".
    pub requested_duration: String,
}

impl Plan {
    pub fn new(opts: &LoadOptions) -> Plan {
        let exactly = opts.count.filter(|&n| n > 0);
        let duration = if exactly.is_some() {
            None
        } else {
            opts.duration.filter(|d| !d.is_zero())
        };
        let qps = (opts.qps > 0.0).then_some(opts.qps);
        let mut plan = Plan {
            connections: opts.connections.max(1),
            calls_per_connection: 0,
            leftover: 0,
            qps,
            duration,
            exactly,
            requested_qps: qps.map_or_else(|| "max".to_string(), |q| gofmt::g_prec(q, 9)),
            requested_duration: "until stop".to_string(),
        };
        if let Some(d) = duration {
            plan.requested_duration = gofmt::duration(d);
        }
        if let Some(n) = exactly {
            plan.requested_duration = format!("exactly {n} calls");
        }
        match (qps, exactly, duration) {
            (_, None, None) => {}
            (Some(q), _, _) => {
                let total = match (exactly, duration) {
                    (Some(n), _) => n,
                    (None, Some(d)) => (q * d.as_secs_f64()) as u64,
                    (None, None) => 0,
                };
                let total = if exactly.is_none() {
                    total.max(2)
                } else {
                    total
                };
                if total < 2 {
                    plan.connections = 1;
                } else if (plan.connections as u64).saturating_mul(2) > total {
                    plan.connections = usize::try_from(total / 2).unwrap_or(1).max(1);
                }
                let c = plan.connections as u64;
                plan.calls_per_connection = total / c;
                if exactly.is_some() {
                    plan.leftover = total - plan.calls_per_connection * c;
                }
            }
            (None, Some(n), _) => {
                if (plan.connections as u64) > n {
                    plan.connections = usize::try_from(n).unwrap_or(1);
                }
                let c = plan.connections as u64;
                plan.calls_per_connection = n / c;
                plan.leftover = n % c;
            }
            (None, None, Some(_)) => {}
        }
        plan
    }

    /// Calls connection `id` must make (0 = until the time is up or the run is stopped).
    pub fn calls_for(&self, id: usize) -> u64 {
        if self.exactly.is_none() && self.qps.is_none() {
            return 0;
        }
        self.calls_per_connection + if id == 0 { self.leftover } else { 0 }
    }

    /// Fortio's "Starting at ..." line; `threads` stands where Go prints GOMAXPROCS.
    pub fn starting_line(&self, threads: usize) -> String {
        let c = self.connections;
        match self.qps {
            None => {
                let head = format!("Starting at max qps with {c} thread(s) [gomax {threads}] ");
                match (self.exactly, self.duration) {
                    (Some(n), _) => format!(
                        "{head}for exactly {n} calls ({} per thread + {})\n",
                        self.calls_per_connection, self.leftover
                    ),
                    (None, Some(d)) => format!("{head}for {}\n", gofmt::duration(d)),
                    (None, None) => format!(
                        "Starting at max qps with {c} thread(s) [gomax {threads}] until interrupted\n"
                    ),
                }
            }
            Some(q) => {
                let head = format!(
                    "Starting at {} qps with {c} thread(s) [gomax {threads}]",
                    gofmt::g(q)
                );
                let total = self.calls_per_connection * c as u64;
                match (self.exactly, self.duration) {
                    (Some(n), _) => format!(
                        "{head} : exactly {n}, {} calls each (total {total} + {})\n",
                        self.calls_per_connection, self.leftover
                    ),
                    (None, Some(d)) => format!(
                        "{head} for {} : {} calls each (total {total})\n",
                        gofmt::duration(d),
                        self.calls_per_connection
                    ),
                    (None, None) => format!("{head} until interrupted\n"),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(c: usize, qps: f64, t: Option<u64>, n: Option<u64>) -> Plan {
        Plan::new(&LoadOptions {
            connections: c,
            qps,
            duration: t.map(Duration::from_secs),
            count: n,
            ..LoadOptions::default()
        })
    }

    #[test]
    fn fortio_defaults_8_qps_4_connections_5_seconds() {
        let p = plan(4, 8.0, Some(5), None);
        assert_eq!(
            (p.connections, p.calls_per_connection, p.leftover),
            (4, 10, 0)
        );
        assert_eq!(p.requested_qps, "8");
        assert_eq!(p.requested_duration, "5s");
        assert_eq!(
            p.starting_line(2),
            "Starting at 8 qps with 4 thread(s) [gomax 2] for 5s : 10 calls each (total 40)\n"
        );
    }

    #[test]
    fn exact_counts_are_exact() {
        let p = plan(4, 0.0, Some(5), Some(10));
        assert_eq!(
            (p.connections, p.calls_per_connection, p.leftover),
            (4, 2, 2)
        );
        assert_eq!(p.calls_for(0) + 3 * p.calls_for(1), 10);
        assert_eq!(p.requested_duration, "exactly 10 calls");
        assert_eq!(
            p.starting_line(2),
            "Starting at max qps with 4 thread(s) [gomax 2] for exactly 10 calls (2 per thread + 2)\n"
        );
        // Fewer calls than connections: fewer connections.
        let p = plan(8, 0.0, None, Some(3));
        assert_eq!((p.connections, p.calls_for(0), p.calls_for(2)), (3, 1, 1));
        // Paced: Fortio keeps at least 2 calls per connection.
        let p = plan(4, 10.0, None, Some(5));
        assert_eq!((p.connections, p.calls_for(0), p.calls_for(1)), (2, 3, 2));
        assert_eq!(
            p.starting_line(1),
            "Starting at 10 qps with 2 thread(s) [gomax 1] : exactly 5, 2 calls each (total 4 + 1)\n"
        );
        let p = plan(4, 10.0, None, Some(1));
        assert_eq!((p.connections, p.calls_for(0)), (1, 1));
    }

    #[test]
    fn max_speed_for_a_duration_and_until_stopped() {
        let p = plan(8, 0.0, Some(5), None);
        assert_eq!((p.connections, p.calls_for(3)), (8, 0));
        assert_eq!(p.requested_qps, "max");
        assert_eq!(
            p.starting_line(1),
            "Starting at max qps with 8 thread(s) [gomax 1] for 5s\n"
        );
        let p = plan(2, -1.0, None, None);
        assert_eq!(p.requested_duration, "until stop");
        assert_eq!(
            p.starting_line(1),
            "Starting at max qps with 2 thread(s) [gomax 1] until interrupted\n"
        );
        // Short paced runs lower the connection count (1 qps for 1 s: 2 calls, 1 conn).
        let p = plan(4, 1.0, Some(1), None);
        assert_eq!((p.connections, p.calls_for(0)), (1, 2));
    }
}

//! Outlier detection (Envoy's `outlier_detection`): consecutive 5xx and consecutive gateway
//! failures eject a host from load balancing for base_ejection_time x (times ejected in a
//! row), capped by max_ejection_time; a sweep every `interval` returns hosts whose time is up.
//!
//! Envoy counts in the workers (atomics on the host) and decides in the main thread, so that
//! two workers cannot both eject past max_ejection_percent. hoist does the same with a lock:
//! the counters are shared atomics that every worker bumps without locking, and the decision
//! (already ejected? over the percentage? enforced?) is taken under the cluster's detector
//! mutex by whichever worker's report reached the threshold. The lock is taken only when a
//! counter reaches its threshold and by the sweep, never per request. Ejection state is one
//! atomic flag per host that the balancers read.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hoist_config::model::OutlierDetection;
use hoist_stats::{Counter, Gauge, ImportMode, Store};

use super::attempt::{Attempt, Failure};
use super::conn::ConnectError;
use super::{ClusterInfo, ClusterManager};

/// A host's consecutive-error counters and its ejection flag, shared by all workers.
#[derive(Default)]
pub struct HostMonitor {
    consecutive_5xx: AtomicU32,
    consecutive_gateway_failure: AtomicU32,
    ejected: AtomicBool,
}

impl HostMonitor {
    pub fn ejected(&self) -> bool {
        self.ejected.load(Ordering::Relaxed)
    }

    fn reset(&self) {
        self.consecutive_5xx.store(0, Ordering::Relaxed);
        self.consecutive_gateway_failure.store(0, Ordering::Relaxed);
    }
}

#[derive(Clone, Copy)]
enum Kind {
    Consecutive5xx,
    ConsecutiveGatewayFailure,
}

struct Stats {
    ejections_active: Gauge,
    ejections_enforced_total: Counter,
    ejections_overflow: Counter,
    /// [5xx, gateway failure]
    detected: [Counter; 2],
    enforced: [Counter; 2],
    membership_healthy: Gauge,
    /// Every write happens under the detector's lock, so one slot is enough.
    slot: usize,
}

/// What the detector remembers of one host; guarded by the detector's lock.
#[derive(Default, Clone, Copy)]
struct HostState {
    ejected_at: Option<Instant>,
    /// Envoy's ejection time back-off: +1 per ejection, -1 per sweep spent in service.
    backoff: u32,
}

struct State {
    hosts: Vec<HostState>,
    active: u32,
}

/// One cluster's detector.
pub struct Detector {
    pub config: OutlierDetection,
    state: Mutex<State>,
    stats: Option<Stats>,
}

impl Detector {
    pub fn new(
        config: OutlierDetection,
        hosts: usize,
        store: Option<&Arc<Store>>,
        cluster: &str,
    ) -> Detector {
        let stats = store.map(|store| {
            let scope = format!("cluster.{cluster}.outlier_detection.");
            let c = |n: &str| store.counter(&format!("{scope}{n}"));
            Stats {
                ejections_active: store
                    .gauge(&format!("{scope}ejections_active"), ImportMode::Accumulate),
                ejections_enforced_total: c("ejections_enforced_total"),
                ejections_overflow: c("ejections_overflow"),
                detected: [
                    c("ejections_detected_consecutive_5xx"),
                    c("ejections_detected_consecutive_gateway_failure"),
                ],
                enforced: [
                    c("ejections_enforced_consecutive_5xx"),
                    c("ejections_enforced_consecutive_gateway_failure"),
                ],
                membership_healthy: store.gauge(
                    &format!("cluster.{cluster}.membership_healthy"),
                    ImportMode::NeverImport,
                ),
                slot: store.main_slot(),
            }
        });
        Detector {
            config,
            state: Mutex::new(State {
                hosts: vec![HostState::default(); hosts],
                active: 0,
            }),
            stats,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent at every step, so a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Under the lock: Envoy's onConsecutiveErrorWorker and ejectHost.
    fn on_consecutive(&self, cluster: &ClusterInfo, endpoint: usize, kind: Kind) {
        let Some(e) = cluster.endpoints.get(endpoint) else {
            return;
        };
        let mut st = self.lock();
        if e.outlier.ejected() {
            return;
        }
        let k = kind as usize;
        if let Some(s) = &self.stats {
            s.detected[k].inc(s.slot);
        }
        let total = st.hosts.len().max(1) as u64;
        let percent = 100 * (u64::from(st.active) + 1) / total;
        let allowed = percent <= u64::from(self.config.max_ejection_percent)
            || (self.config.always_eject_one_host && st.active == 0);
        if allowed {
            let enforcing = match kind {
                Kind::Consecutive5xx => self.config.enforcing_consecutive_5xx,
                Kind::ConsecutiveGatewayFailure => {
                    self.config.enforcing_consecutive_gateway_failure
                }
            };
            if crate::request_id::random_u64() % 100 < u64::from(enforcing) {
                let cap = self.config.max_ejection_time;
                let base = self.config.base_ejection_time;
                if let Some(h) = st.hosts.get_mut(endpoint) {
                    h.ejected_at = Some(Instant::now());
                    // Envoy stops growing the multiplier once base x it passes the cap.
                    if base.saturating_mul(h.backoff) < cap.saturating_add(base) {
                        h.backoff += 1;
                    }
                }
                st.active += 1;
                e.outlier.ejected.store(true, Ordering::Relaxed);
                tracing::warn!("cluster {}: {} ejected (outlier)", cluster.name, e.label);
                if let Some(s) = &self.stats {
                    s.ejections_enforced_total.inc(s.slot);
                    s.enforced[k].inc(s.slot);
                    s.ejections_active.set(s.slot, u64::from(st.active));
                    s.membership_healthy.set(s.slot, cluster.available_count());
                }
            }
        } else if let Some(s) = &self.stats {
            s.ejections_overflow.inc(s.slot);
        }
        // Counted afresh, so a host that keeps failing is detected again on its next bout.
        match kind {
            Kind::Consecutive5xx => e.outlier.consecutive_5xx.store(0, Ordering::Relaxed),
            Kind::ConsecutiveGatewayFailure => e
                .outlier
                .consecutive_gateway_failure
                .store(0, Ordering::Relaxed),
        }
    }

    /// The interval sweep: returns hosts whose ejection time is over and lowers the
    /// multiplier of hosts that stayed in service.
    pub fn sweep(&self, cluster: &ClusterInfo, now: Instant) {
        let mut st = self.lock();
        let base = self.config.base_ejection_time;
        let cap = self.config.max_ejection_time;
        let mut returned = 0;
        for (i, h) in st.hosts.iter_mut().enumerate() {
            match h.ejected_at {
                Some(at) => {
                    let time = base.saturating_mul(h.backoff).min(cap);
                    if now.saturating_duration_since(at) >= time {
                        h.ejected_at = None;
                        returned += 1;
                        if let Some(e) = cluster.endpoints.get(i) {
                            uneject(cluster, e);
                        }
                    }
                }
                None => h.backoff = h.backoff.saturating_sub(1),
            }
        }
        if returned > 0 {
            st.active = st.active.saturating_sub(returned);
            self.after_uneject(cluster, st.active);
        }
    }

    /// A passing active health check returns an ejected host at once
    /// (successful_active_health_check_uneject_host).
    pub fn health_check_passed(&self, cluster: &ClusterInfo, endpoint: usize) {
        if !self.config.successful_active_health_check_uneject_host {
            return;
        }
        let Some(e) = cluster.endpoints.get(endpoint) else {
            return;
        };
        if !e.outlier.ejected() {
            return;
        }
        let mut st = self.lock();
        let Some(h) = st.hosts.get_mut(endpoint) else {
            return;
        };
        if h.ejected_at.take().is_some() {
            st.active = st.active.saturating_sub(1);
            uneject(cluster, e);
            self.after_uneject(cluster, st.active);
        }
    }

    fn after_uneject(&self, cluster: &ClusterInfo, active: u32) {
        if let Some(s) = &self.stats {
            s.ejections_active.set(s.slot, u64::from(active));
            s.membership_healthy.set(s.slot, cluster.available_count());
        }
    }
}

fn uneject(cluster: &ClusterInfo, e: &super::EndpointInfo) {
    // A returning host starts with clean counters: the errors that ejected it are spent.
    e.outlier.reset();
    e.outlier.ejected.store(false, Ordering::Relaxed);
    tracing::info!("cluster {}: {} back from ejection", cluster.name, e.label);
}

/// Counts how one attempt on `endpoint` ended (Envoy's putHttpResponseCode; local-origin
/// failures count as the 5xx Envoy maps them to when they are not split out).
pub fn observe(cluster: &ClusterInfo, endpoint: usize, attempt: &Attempt) {
    let code = match attempt {
        Attempt::Response { response, .. } => response.status,
        Attempt::Failed { failure, .. } => match failure {
            // A full pool or a failing downstream body says nothing about the host.
            Failure::Connect(ConnectError::Overflow)
            | Failure::RequestBody
            | Failure::StreamIdle => return,
            Failure::Connect(_) | Failure::Reset => 503,
            Failure::Malformed => 502,
            Failure::GlobalTimeout | Failure::PerTryTimeout => 504,
        },
    };
    put_http_response_code(cluster, endpoint, code);
}

pub fn put_http_response_code(cluster: &ClusterInfo, endpoint: usize, code: u16) {
    let Some(d) = &cluster.outlier else {
        return;
    };
    let Some(e) = cluster.endpoints.get(endpoint) else {
        return;
    };
    let m = &e.outlier;
    if !(500..600).contains(&code) {
        m.reset();
        return;
    }
    // `==`, as Envoy: the threshold fires once; the decision resets the counter.
    if matches!(code, 502..=504) {
        let n = m
            .consecutive_gateway_failure
            .fetch_add(1, Ordering::Relaxed)
            + 1;
        if n == d.config.consecutive_gateway_failure {
            d.on_consecutive(cluster, endpoint, Kind::ConsecutiveGatewayFailure);
        }
    } else {
        m.consecutive_gateway_failure.store(0, Ordering::Relaxed);
    }
    let n = m.consecutive_5xx.fetch_add(1, Ordering::Relaxed) + 1;
    if n == d.config.consecutive_5xx {
        d.on_consecutive(cluster, endpoint, Kind::Consecutive5xx);
    }
}

/// Starts the sweeps (Envoy's interval timer, on the main thread there) on a thread of their
/// own when a cluster has outlier detection; it lives as long as the process.
pub fn spawn(manager: &Arc<ClusterManager>) {
    let detected: Vec<_> = manager
        .clusters
        .iter()
        .filter(|c| c.outlier.is_some())
        .cloned()
        .collect();
    if detected.is_empty() {
        return;
    }
    let spawned = std::thread::Builder::new()
        .name("hoist-outlier".into())
        .spawn(move || {
            let start = Instant::now();
            let mut due: Vec<Instant> = detected
                .iter()
                .map(|c| later(start, c.outlier.as_ref().map(|d| d.config.interval)))
                .collect();
            loop {
                let Some(next) = due.iter().min().copied() else {
                    return;
                };
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
                let now = Instant::now();
                for (c, at) in detected.iter().zip(due.iter_mut()) {
                    let Some(d) = &c.outlier else { continue };
                    if *at <= now {
                        d.sweep(c, now);
                        *at = later(now, Some(d.config.interval));
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("outlier detection cannot start its sweeps: {e}");
    }
}

/// `t + interval`, for any configured interval (a huge one means "not in this process's life").
fn later(t: Instant, interval: Option<Duration>) -> Instant {
    let year = Duration::from_secs(365 * 24 * 3600);
    t.checked_add(interval.unwrap_or(year).min(year))
        .unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::upstream::testing::cluster;
    use hoist_config::model::LbPolicy;

    fn detected(hosts: usize, config: OutlierDetection) -> ClusterInfo {
        let mut c = cluster(LbPolicy::RoundRobin, &vec![1; hosts]);
        c.outlier = Some(Detector::new(config, hosts, None, "c"));
        c
    }

    fn fail(c: &ClusterInfo, endpoint: usize, code: u16, times: u32) {
        for _ in 0..times {
            put_http_response_code(c, endpoint, code);
        }
    }

    fn ejected(c: &ClusterInfo) -> Vec<bool> {
        c.endpoints.iter().map(|e| e.outlier.ejected()).collect()
    }

    #[test]
    fn consecutive_5xx_ejects_and_a_success_in_between_resets() {
        let c = detected(
            2,
            OutlierDetection {
                max_ejection_percent: 50,
                ..OutlierDetection::default()
            },
        );
        fail(&c, 0, 500, 4);
        put_http_response_code(&c, 0, 200);
        fail(&c, 0, 500, 4);
        assert_eq!(ejected(&c), [false, false]);
        fail(&c, 0, 500, 1);
        assert_eq!(ejected(&c), [true, false]);
        assert_eq!(c.available_count(), 1);
        assert_eq!(c.endpoints[0].health_flags(), "/failed_outlier_check");
    }

    #[test]
    fn gateway_failures_are_detected_but_not_enforced_by_default() {
        let config = OutlierDetection {
            consecutive_5xx: 100,
            consecutive_gateway_failure: 3,
            max_ejection_percent: 100,
            ..OutlierDetection::default()
        };
        let c = detected(2, config);
        fail(&c, 0, 503, 3);
        assert_eq!(ejected(&c), [false, false]);
        let c = detected(
            2,
            OutlierDetection {
                enforcing_consecutive_gateway_failure: 100,
                ..config
            },
        );
        // A 500 is a 5xx but no gateway failure: it breaks the run.
        fail(&c, 0, 503, 2);
        fail(&c, 0, 500, 1);
        fail(&c, 0, 503, 2);
        assert_eq!(ejected(&c), [false, false]);
        fail(&c, 0, 504, 1);
        assert_eq!(ejected(&c), [true, false]);
    }

    #[test]
    fn max_ejection_percent_counts_the_host_about_to_go() {
        // 3 hosts, 34 %: one may go (33 %), a second would make 66 %.
        let c = detected(
            3,
            OutlierDetection {
                max_ejection_percent: 34,
                ..OutlierDetection::default()
            },
        );
        fail(&c, 0, 500, 5);
        fail(&c, 1, 500, 5);
        assert_eq!(ejected(&c), [true, false, false]);
        // Envoy's default, 10 %, ejects nobody among 3 hosts unless always_eject_one_host.
        let c = detected(3, OutlierDetection::default());
        fail(&c, 0, 500, 5);
        assert_eq!(ejected(&c), [false, false, false]);
        let c = detected(
            3,
            OutlierDetection {
                always_eject_one_host: true,
                ..OutlierDetection::default()
            },
        );
        fail(&c, 0, 500, 5);
        fail(&c, 1, 500, 5);
        assert_eq!(ejected(&c), [true, false, false]);
    }

    #[test]
    fn ejection_time_grows_with_each_ejection_up_to_the_cap() {
        let c = detected(
            2,
            OutlierDetection {
                max_ejection_percent: 50,
                base_ejection_time: Duration::from_secs(30),
                max_ejection_time: Duration::from_secs(45),
                ..OutlierDetection::default()
            },
        );
        let d = c.outlier.as_ref().unwrap();
        let t0 = Instant::now();
        fail(&c, 0, 500, 5);
        d.sweep(&c, t0 + Duration::from_secs(29));
        assert_eq!(ejected(&c), [true, false]);
        d.sweep(&c, t0 + Duration::from_secs(31));
        assert_eq!(ejected(&c), [false, false]);
        // Ejected again at once: 2 x 30 s, capped at 45 s.
        let t1 = Instant::now();
        fail(&c, 0, 500, 5);
        d.sweep(&c, t1 + Duration::from_secs(44));
        assert_eq!(ejected(&c), [true, false]);
        d.sweep(&c, t1 + Duration::from_secs(46));
        assert_eq!(ejected(&c), [false, false]);
        // A passing health check returns an ejected host without waiting.
        fail(&c, 0, 500, 5);
        assert_eq!(ejected(&c), [true, false]);
        d.health_check_passed(&c, 0);
        assert_eq!(ejected(&c), [false, false]);
        assert_eq!(d.lock().active, 0);
    }
}

//! The registry: get-or-create by full name, and the admin's whole-store operations.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::counter::Counter;
use crate::gauge::{Gauge, ImportMode};
use crate::histogram::{Histogram, Unit};

#[derive(Default)]
struct Registry {
    counters: HashMap<String, Counter>,
    gauges: HashMap<String, Gauge>,
    histograms: HashMap<String, Histogram>,
}

/// All stats of one server. Lookups take a lock; recording through a handle never does.
pub struct Store {
    workers: usize,
    registry: Mutex<Registry>,
}

impl Store {
    /// A store for `workers` worker threads: slots `0..workers` are theirs, slot `workers`
    /// ([`main_slot`](Store::main_slot)) belongs to the main thread.
    pub fn new(workers: usize) -> Arc<Store> {
        Arc::new(Store {
            workers,
            registry: Mutex::new(Registry::default()),
        })
    }

    pub fn workers(&self) -> usize {
        self.workers
    }

    /// The main thread's slot (admin, config load, periodic tasks).
    pub fn main_slot(&self) -> usize {
        self.workers
    }

    fn slots(&self) -> usize {
        self.workers + 1
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        // The registry holds only maps of handles; a panic elsewhere cannot leave it half-built.
        self.registry.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The counter named `name`, created on first use.
    pub fn counter(&self, name: &str) -> Counter {
        let mut reg = self.lock();
        if let Some(c) = reg.counters.get(name) {
            return c.clone();
        }
        let c = Counter::new(name, self.slots());
        reg.counters.insert(name.to_owned(), c.clone());
        c
    }

    /// The gauge named `name`, created on first use (the first caller's import mode sticks).
    pub fn gauge(&self, name: &str, import_mode: ImportMode) -> Gauge {
        let mut reg = self.lock();
        if let Some(g) = reg.gauges.get(name) {
            return g.clone();
        }
        let g = Gauge::new(name, import_mode, self.slots());
        reg.gauges.insert(name.to_owned(), g.clone());
        g
    }

    /// The histogram named `name`, created on first use (the first caller's unit sticks).
    pub fn histogram(&self, name: &str, unit: Unit) -> Histogram {
        let mut reg = self.lock();
        if let Some(h) = reg.histograms.get(name) {
            return h.clone();
        }
        let h = Histogram::new(name, unit, self.slots());
        reg.histograms.insert(name.to_owned(), h.clone());
        h
    }

    /// Admin `POST /reset_counters`: every counter reads 0 from now on. Workers keep writing
    /// their cells; only the per-counter baseline moves, so no increment is lost or torn.
    pub fn reset_counters(&self) {
        for c in self.counters() {
            c.reset();
        }
    }

    /// Envoy's histogram merge (part of the periodic stats flush): sums every histogram's slots
    /// into its cumulative snapshot and keeps the change since the previous merge as the
    /// interval snapshot. Call it from the main thread every flush interval (5 s by default),
    /// and before rendering if the admin should show values newer than the last flush.
    pub fn merge_histograms(&self) {
        for h in self.histograms() {
            h.merge();
        }
    }

    /// All counters, sorted by name.
    pub fn counters(&self) -> Vec<Counter> {
        let mut v: Vec<Counter> = self.lock().counters.values().cloned().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }

    /// All gauges, sorted by name.
    pub fn gauges(&self) -> Vec<Gauge> {
        let mut v: Vec<Gauge> = self.lock().gauges.values().cloned().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }

    /// All histograms, sorted by name.
    pub fn histograms(&self) -> Vec<Histogram> {
        let mut v: Vec<Histogram> = self.lock().histograms.values().cloned().collect();
        v.sort_by(|a, b| a.name().cmp(b.name()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn get_or_create_returns_the_same_stat() {
        let store = Store::new(1);
        store.counter("a").inc(0);
        store.counter("a").add(1, 2);
        assert_eq!(store.counter("a").value(), 3);
        assert_eq!(store.counters().len(), 1);
    }

    #[test]
    fn concurrent_workers_merge_exactly() {
        const WORKERS: usize = 4;
        const PER_WORKER: u64 = 100_000;
        let store = Store::new(WORKERS);
        let threads: Vec<_> = (0..WORKERS)
            .map(|slot| {
                let store = store.clone();
                std::thread::spawn(move || {
                    let c = store.counter("http.ingress.downstream_rq_total").bind(slot);
                    let g = store
                        .gauge("http.ingress.downstream_cx_active", ImportMode::Accumulate)
                        .bind(slot);
                    let h = store
                        .histogram("http.ingress.downstream_rq_time", Unit::Milliseconds)
                        .bind(slot);
                    for i in 0..PER_WORKER {
                        c.inc();
                        g.inc();
                        h.record(i % 7);
                        if i % 2 == 0 {
                            g.dec();
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let n = WORKERS as u64 * PER_WORKER;
        assert_eq!(store.counter("http.ingress.downstream_rq_total").value(), n);
        let active = store.gauge("http.ingress.downstream_cx_active", ImportMode::Accumulate);
        assert_eq!(active.value(), n / 2);
        store.merge_histograms();
        let h = store.histogram("http.ingress.downstream_rq_time", Unit::Milliseconds);
        let (_, cumulative) = h.statistics();
        assert_eq!(cumulative.sample_count(), n);
        let per_worker_sum: u64 = (0..PER_WORKER).map(|i| i % 7).sum();
        assert_eq!(cumulative.sample_sum(), per_worker_sum * WORKERS as u64);
    }

    #[test]
    fn reset_counters_while_workers_hold_their_cells() {
        const WORKERS: usize = 3;
        let store = Store::new(WORKERS);
        let before_reset = Arc::new(Barrier::new(WORKERS + 1));
        let after_reset = Arc::new(Barrier::new(WORKERS + 1));
        let threads: Vec<_> = (0..WORKERS)
            .map(|slot| {
                let (store, b1, b2) = (store.clone(), before_reset.clone(), after_reset.clone());
                std::thread::spawn(move || {
                    let c = store.counter("c").bind(slot);
                    c.add(1000);
                    b1.wait();
                    b2.wait();
                    c.add(7);
                })
            })
            .collect();
        before_reset.wait();
        let c = store.counter("c");
        assert_eq!(c.value(), 3000);
        store.reset_counters();
        assert_eq!(c.value(), 0);
        assert!(c.used(), "reset keeps the used flag, as Envoy does");
        after_reset.wait();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(c.value(), 21);
        store.reset_counters();
        store.counter("c").inc(store.main_slot());
        assert_eq!(c.value(), 1);
    }

    #[test]
    fn gauge_set_is_a_slot_share() {
        let store = Store::new(2);
        let g = store.gauge("server.concurrency", ImportMode::NeverImport);
        assert!(!g.used());
        g.set(store.main_slot(), 2);
        assert_eq!(g.value(), 2);
        g.set(store.main_slot(), 5);
        assert_eq!(g.value(), 5);
        g.add(0, 1);
        assert_eq!(g.value(), 6);
        assert!(g.used());
        assert_eq!(g.import_mode(), ImportMode::NeverImport);
    }
}

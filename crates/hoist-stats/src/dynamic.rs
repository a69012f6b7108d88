//! A worker's cache of counters whose last name segment is known only at run time.

use std::collections::HashMap;
use std::sync::Arc;

use crate::counter::WorkerCounter;
use crate::store::Store;

/// Counters `<prefix><suffix>` bound to one worker's slot, e.g. prefix
/// `listener.0.0.0.0_10443.ssl.ciphers.` and suffixes the negotiated cipher names.
///
/// The first use of a suffix takes the store's registry lock; later uses are a hash lookup in
/// this worker-owned map and the lock-free increment. Keep one per (listener, worker), owned by
/// the worker (e.g. in an `Rc<RefCell<_>>` its connection tasks share), and feed it only
/// suffixes from a bounded set such as the ciphers the listener's TLS config permits.
pub struct DynamicCounters {
    store: Arc<Store>,
    slot: usize,
    prefix: String,
    counters: HashMap<String, WorkerCounter>,
}

impl DynamicCounters {
    pub fn new(store: Arc<Store>, slot: usize, prefix: impl Into<String>) -> DynamicCounters {
        DynamicCounters {
            store,
            slot,
            prefix: prefix.into(),
            counters: HashMap::new(),
        }
    }

    pub fn inc(&mut self, suffix: &str) {
        self.get(suffix).inc();
    }

    /// The bound counter for `suffix`, created and cached on first use.
    pub fn get(&mut self, suffix: &str) -> &WorkerCounter {
        if !self.counters.contains_key(suffix) {
            let name = format!("{}{}", self.prefix, suffix);
            let counter = self.store.counter(&name).bind(self.slot);
            self.counters.insert(suffix.to_owned(), counter);
        }
        // Present: inserted just above if it was missing.
        &self.counters[suffix]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_once_and_counts_per_suffix() {
        let store = Store::new(2);
        let mut w0 = DynamicCounters::new(store.clone(), 0, "listener.0.0.0.0_10443.ssl.ciphers.");
        let mut w1 = DynamicCounters::new(store.clone(), 1, "listener.0.0.0.0_10443.ssl.ciphers.");
        w0.inc("ECDHE-RSA-AES128-GCM-SHA256");
        w0.inc("ECDHE-RSA-AES128-GCM-SHA256");
        w1.inc("ECDHE-RSA-AES128-GCM-SHA256");
        w1.inc("ECDHE-RSA-AES256-GCM-SHA384");
        let c = store.counter("listener.0.0.0.0_10443.ssl.ciphers.ECDHE-RSA-AES128-GCM-SHA256");
        assert_eq!(c.value(), 3);
        let c = store.counter("listener.0.0.0.0_10443.ssl.ciphers.ECDHE-RSA-AES256-GCM-SHA384");
        assert_eq!(c.value(), 1);
        assert_eq!(store.counters().len(), 2);
    }
}

//! Server phases and the drain sequence shared by the main thread and the workers.
//!
//! SIGTERM/SIGINT (or POST /quitquitquit): stop accepting, close idle connections, let in-flight
//! requests finish (their responses carry `connection: close`), and exit when every worker's
//! connections are gone or `--drain-time-s` has passed. POST /drain_listeners only stops
//! accepting.

use std::cell::Cell;
use std::rc::Rc;

use tokio::sync::{watch, Notify};

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Phase {
    /// Listeners no longer accept (POST /drain_listeners, or shutdown).
    pub listeners_stopped: bool,
    /// Shutting down: responses close their connections, idle connections are closed.
    pub draining: bool,
}

pub type PhaseSender = watch::Sender<Phase>;
pub type PhaseReceiver = watch::Receiver<Phase>;

pub fn channel() -> (PhaseSender, PhaseReceiver) {
    watch::channel(Phase::default())
}

/// Resolves once the phase says listeners are stopped.
pub async fn listeners_stopped(rx: &mut PhaseReceiver) {
    // A closed channel means the server is going away: treat it as stopped.
    let _ = rx.wait_for(|p| p.listeners_stopped).await;
}

/// Resolves once the server is draining.
pub async fn draining(rx: &mut PhaseReceiver) {
    let _ = rx.wait_for(|p| p.draining).await;
}

/// Counts a worker's open connections so the drain can wait for them.
#[derive(Clone, Default)]
pub struct ConnectionTracker {
    inner: Rc<TrackerInner>,
}

#[derive(Default)]
struct TrackerInner {
    open: Cell<usize>,
    idle: Notify,
}

/// Held by a connection task; dropping it (however the task ends) counts the connection closed.
pub struct ConnectionGuard {
    inner: Rc<TrackerInner>,
}

impl ConnectionTracker {
    pub fn open(&self) -> ConnectionGuard {
        self.inner.open.set(self.inner.open.get() + 1);
        ConnectionGuard {
            inner: self.inner.clone(),
        }
    }

    pub fn count(&self) -> usize {
        self.inner.open.get()
    }

    /// Resolves when no connection is open.
    pub async fn all_closed(&self) {
        loop {
            let notified = self.inner.idle.notified();
            if self.inner.open.get() == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        let n = self.inner.open.get().saturating_sub(1);
        self.inner.open.set(n);
        if n == 0 {
            self.inner.idle.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn tracker_resolves_when_last_guard_drops() {
        let t = ConnectionTracker::default();
        let a = t.open();
        let b = t.open();
        assert_eq!(t.count(), 2);
        let waiter = t.clone();
        let local = tokio::task::LocalSet::new();
        local
            .run_until(async move {
                let h = tokio::task::spawn_local(async move { waiter.all_closed().await });
                tokio::task::yield_now().await;
                assert!(!h.is_finished());
                drop(a);
                tokio::task::yield_now().await;
                assert!(!h.is_finished());
                drop(b);
                h.await.unwrap();
            })
            .await;
        assert_eq!(t.count(), 0);
    }
}

//! Workers: one thread each, pinned to a core, running a single-threaded tokio runtime that owns
//! its own SO_REUSEPORT socket per listener and every connection it accepts (Envoy's model; a
//! connection never moves between threads, so nothing on the data path takes a lock).

use std::cell::RefCell;
use std::io;
use std::net::TcpListener as StdTcpListener;
use std::rc::Rc;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::LocalSet;

use crate::connection;
use crate::drain::{self, ConnectionTracker, PhaseReceiver};
use crate::listener::ListenerRuntime;
use crate::server::ServerState;
use crate::stats_scope::{HcmWorkerStats, ListenerStats};
use crate::stream::HcmWorker;
use crate::upstream::WorkerClusters;

/// A worker's view of one listener: its stats and, per filter chain, its connection manager's.
pub struct WorkerListener {
    pub rt: Arc<ListenerRuntime>,
    pub stats: ListenerStats,
    /// Index-aligned with `ListenerRuntime::chains()`.
    pub chains: Vec<Rc<HcmWorker>>,
}

/// Per-worker state every connection of the worker can reach.
pub struct Worker {
    pub index: usize,
    pub state: Arc<ServerState>,
    pub phase: PhaseReceiver,
    pub connections: ConnectionTracker,
    /// Every connection manager this worker runs, for flushing their access logs.
    pub hcms: RefCell<Vec<Rc<HcmWorker>>>,
}

pub fn spawn(
    index: usize,
    core: Option<usize>,
    state: Arc<ServerState>,
    sockets: Vec<(Arc<ListenerRuntime>, StdTcpListener)>,
) -> io::Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(format!("hoist-worker-{index}"))
        .spawn(move || {
            if let Some(core) = core {
                pin_to_core(core);
            }
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("worker {index}: cannot start its runtime: {e}");
                    return;
                }
            };
            LocalSet::new().block_on(&runtime, run(index, state, sockets));
        })
}

async fn run(
    index: usize,
    state: Arc<ServerState>,
    sockets: Vec<(Arc<ListenerRuntime>, StdTcpListener)>,
) {
    let worker = Rc::new(Worker {
        index,
        phase: state.phase_receiver(),
        state: state.clone(),
        connections: ConnectionTracker::default(),
        hcms: RefCell::new(Vec::new()),
    });
    let slot = index;
    let clusters = Rc::new(WorkerClusters::new(state.clusters.clone(), slot));
    for (rt, socket) in sockets {
        let listener = match TcpListener::from_std(socket) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("worker {index}: listener {}: {e}", rt.name);
                continue;
            }
        };
        let chains = rt
            .chains()
            .map(|c| {
                let hcm = Rc::new(HcmWorker::new(
                    c.hcm.clone(),
                    HcmWorkerStats::new(&state.stats, &c.hcm.stat_prefix, &rt.stat_scope, slot),
                    slot,
                    clusters.clone(),
                ));
                worker.hcms.borrow_mut().push(hcm.clone());
                hcm
            })
            .collect();
        let wl = Rc::new(WorkerListener {
            stats: ListenerStats::new(&state.stats, &rt.stat_scope, slot),
            rt,
            chains,
        });
        tokio::task::spawn_local(accept_loop(worker.clone(), wl, listener));
    }
    crate::stream::spawn_log_flusher(worker.clone());

    let mut phase = worker.phase.clone();
    drain::draining(&mut phase).await;
    let drain_time = Duration::from_secs(state.options.drain_time_s);
    if tokio::time::timeout(drain_time, worker.connections.all_closed())
        .await
        .is_err()
    {
        tracing::warn!(
            "worker {index}: drain time ({}s) over with {} connection(s) still open; closing them",
            state.options.drain_time_s,
            worker.connections.count()
        );
    }
    crate::stream::flush_logs(&worker);
}

async fn accept_loop(worker: Rc<Worker>, wl: Rc<WorkerListener>, listener: TcpListener) {
    let mut phase = worker.phase.clone();
    loop {
        tokio::select! {
            biased;
            _ = drain::listeners_stopped(&mut phase) => break,
            accepted = listener.accept() => match accepted {
                Ok((tcp, remote)) => {
                    let guard = worker.connections.open();
                    tokio::task::spawn_local(connection::handle(worker.clone(), wl.clone(), tcp, remote, guard));
                }
                Err(e) => {
                    // Out of descriptors or memory: back off instead of spinning; the listener
                    // stays open and accepting resumes when resources free up.
                    tracing::warn!("worker {}: listener {}: accept failed: {e}", worker.index, wl.rt.name);
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    // Dropping the socket here closes this worker's accept queue for the listener.
}

/// Pins the calling thread to one CPU. Failure (a restricted cpuset) is logged, not fatal.
fn pin_to_core(core: usize) {
    let mut set = rustix::thread::CpuSet::new();
    set.set(core);
    if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
        tracing::warn!("cannot pin worker to CPU {core}: {e}");
    }
}

/// The CPUs this process may run on (respects `taskset`), in order.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => Vec::new(),
    }
}

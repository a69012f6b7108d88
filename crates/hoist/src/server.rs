//! The main thread: load and validate the configuration, bind the listeners, start the workers,
//! serve admin, and run the drain when a signal (or /quitquitquit) asks for it.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use hoist_config::model::{Bootstrap, TlsOffloadMode};
use hoist_stats::Store;
use hoist_tls::offload::{self, Capabilities};

use crate::cli::{Mode, Options};
use crate::default_config::{self, DefaultConfig};
use crate::drain::{self, Phase, PhaseReceiver, PhaseSender};
use crate::listener::{ListenerRuntime, OffloadDefaults};
use crate::upstream::ClusterManager;
use crate::worker;

/// What every thread may read about the server.
pub struct ServerState {
    pub options: Options,
    pub bootstrap: Bootstrap,
    pub listeners: Vec<Arc<ListenerRuntime>>,
    /// Actual bound addresses (port 0 resolved), index-aligned with `listeners`.
    pub bound: Vec<SocketAddr>,
    pub stats: Arc<Store>,
    /// static_resources.clusters, compiled.
    pub clusters: Arc<ClusterManager>,
    pub concurrency: usize,
    pub start: Instant,
    pub start_wall: SystemTime,
    pub health_check_failed: AtomicBool,
    phase: PhaseSender,
    /// The config path shown by /server_info and validate (or "<default>").
    pub config_name: String,
}

impl ServerState {
    pub fn phase_receiver(&self) -> PhaseReceiver {
        self.phase.subscribe()
    }

    pub fn phase(&self) -> Phase {
        *self.phase.borrow()
    }

    pub fn stop_listeners(&self) {
        self.phase.send_modify(|p| p.listeners_stopped = true);
    }

    pub fn start_drain(&self) {
        self.phase.send_modify(|p| {
            p.listeners_stopped = true;
            p.draining = true;
        });
    }

    /// Responses should close their connections: draining, or health checks failed (Envoy's
    /// drain-close decision).
    pub fn drain_close(&self) -> bool {
        self.phase().draining || self.health_check_failed.load(Ordering::Relaxed)
    }

    /// LIVE, DRAINING, as /server_info and /ready say it.
    pub fn state_name(&self) -> &'static str {
        if self.phase().draining || self.health_check_failed.load(Ordering::Relaxed) {
            "DRAINING"
        } else {
            "LIVE"
        }
    }
}

pub fn run(options: Options) -> ExitCode {
    // The default configuration's files live as long as the server does.
    let mut default: Option<DefaultConfig> = None;
    let config_name = match &options.config_path {
        Some(p) => p.display().to_string(),
        None if options.config_yaml.is_some() => "<--config-yaml>".to_string(),
        None => "<built-in default>".to_string(),
    };
    let loaded = if options.config_path.is_none() && options.config_yaml.is_none() {
        match default_config::create() {
            Ok(d) => {
                let r = hoist_config::load_str(&d.yaml);
                default = Some(d);
                r
            }
            Err(e) => {
                eprintln!("error: cannot create the built-in default configuration: {e}");
                return ExitCode::from(1);
            }
        }
    } else {
        hoist_config::load(
            options.config_path.as_deref(),
            options.config_yaml.as_deref(),
        )
    };
    let bootstrap = match loaded {
        Ok(b) => b,
        Err(e) => return config_failed(&options, &config_name, &e.to_string()),
    };
    let concurrency = options.concurrency();
    // Created before the listeners: filters register their stats while they are built.
    let stats = Store::new(concurrency);
    // What the kernel can offload, once, before the listeners order their cipher suites by it.
    let caps = (options.mode != Mode::Validate).then(|| {
        let caps = hoist_tls::offload::capabilities();
        tracing::info!("{caps}");
        tracing::debug!(
            "kTLS probe took {}us; failed pairs: {:?}",
            caps.took.as_micros(),
            caps.failures
        );
        caps
    });
    let offload_defaults = OffloadDefaults {
        mode: options.tls_offload.mode(),
        caps,
    };
    let clusters =
        match ClusterManager::build(&bootstrap.clusters, &stats, options.tls_offload.mode()) {
            Ok(c) => Arc::new(c),
            Err(e) => return config_failed(&options, &config_name, &e.to_string()),
        };
    let listeners = match bootstrap
        .listeners
        .iter()
        .map(|l| {
            ListenerRuntime::build(
                l,
                &stats,
                concurrency,
                &offload_defaults,
                &bootstrap.clusters,
            )
            .map(Arc::new)
        })
        .collect::<Result<Vec<_>, _>>()
    {
        Ok(l) => l,
        Err(e) => return config_failed(&options, &config_name, &e.to_string()),
    };
    if options.mode == Mode::Validate {
        println!("configuration '{config_name}' OK");
        return ExitCode::SUCCESS;
    }
    if let Err(msg) = check_offload(&listeners, caps) {
        eprintln!("error: {msg}");
        return ExitCode::from(1);
    }

    // Bind every listener once here: a busy port fails the start with a clear message, and a
    // port 0 is resolved before the workers bind their own sockets to the same address.
    let mut first_sockets = Vec::with_capacity(listeners.len());
    let mut bound = Vec::with_capacity(listeners.len());
    for l in &listeners {
        match ListenerRuntime::bind(l.address).and_then(|s| s.local_addr().map(|a| (s, a))) {
            Ok((s, addr)) => {
                first_sockets.push(s);
                bound.push(addr);
            }
            Err(e) => {
                eprintln!(
                    "error: listener '{}' cannot bind {}: {e}",
                    l.name, l.address
                );
                return ExitCode::from(1);
            }
        }
    }
    let admin_socket = match &bootstrap.admin {
        Some(admin) => match std::net::TcpListener::bind(admin.address.addr)
            .and_then(|s| s.set_nonblocking(true).map(|()| s))
        {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("error: admin cannot bind {}: {e}", admin.address.addr);
                return ExitCode::from(1);
            }
        },
        None => None,
    };
    if options.mode == Mode::InitOnly {
        println!("configuration '{config_name}' initialized; exiting (init_only)");
        return ExitCode::SUCCESS;
    }

    let (phase_tx, _) = drain::channel();
    let state = Arc::new(ServerState {
        stats,
        clusters,
        options: options.clone(),
        bootstrap,
        listeners: listeners.clone(),
        bound: bound.clone(),
        concurrency,
        start: Instant::now(),
        start_wall: SystemTime::now(),
        health_check_failed: AtomicBool::new(false),
        phase: phase_tx,
        config_name,
    });
    crate::stats_scope::register_server_stats(&state);
    crate::upstream::health::spawn(&state.clusters);
    crate::upstream::outlier::spawn(&state.clusters);

    let cpus = worker::allowed_cpus();
    let mut workers = Vec::with_capacity(concurrency);
    let mut first_sockets: Vec<Option<std::net::TcpListener>> =
        first_sockets.into_iter().map(Some).collect();
    for index in 0..concurrency {
        let mut sockets = Vec::with_capacity(listeners.len());
        for (i, l) in listeners.iter().enumerate() {
            let socket = match first_sockets[i].take() {
                Some(s) => Ok(s),
                None => ListenerRuntime::bind(bound[i]),
            };
            match socket {
                Ok(s) => sockets.push((l.clone(), s)),
                Err(e) => {
                    eprintln!(
                        "error: listener '{}' (worker {index}) cannot bind {}: {e}",
                        l.name, bound[i]
                    );
                    return ExitCode::from(1);
                }
            }
        }
        let core = (!cpus.is_empty()).then(|| cpus[index % cpus.len()]);
        match worker::spawn(index, core, state.clone(), sockets) {
            Ok(h) => workers.push(h),
            Err(e) => {
                eprintln!("error: cannot start worker {index}: {e}");
                return ExitCode::from(1);
            }
        }
    }

    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the main runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let admin_addr = admin_socket.as_ref().and_then(|s| s.local_addr().ok());
    print_banner(&state, admin_addr, default.is_some());
    if let (Some(path), Some(addr)) = (&options.admin_address_path, admin_addr) {
        if let Err(e) = std::fs::write(path, addr.to_string()) {
            tracing::warn!("cannot write the admin address to {}: {e}", path.display());
        }
    }
    runtime.block_on(async {
        if let Some(socket) = admin_socket {
            match tokio::net::TcpListener::from_std(socket) {
                Ok(l) => {
                    tokio::spawn(crate::admin::serve(state.clone(), l));
                }
                Err(e) => tracing::error!("admin listener: {e}"),
            }
        }
        wait_for_shutdown(&state).await;
    });
    tracing::info!(
        "draining: no new connections; waiting up to {}s for in-flight requests",
        options.drain_time_s
    );
    for w in workers {
        let _ = w.join();
    }
    tracing::info!("all workers stopped; exiting");
    drop(default);
    ExitCode::SUCCESS
}

fn config_failed(options: &Options, name: &str, err: &str) -> ExitCode {
    if options.mode == Mode::Validate {
        println!("configuration '{name}' is invalid: {err}");
    } else {
        eprintln!("error initializing configuration '{name}': {err}");
    }
    ExitCode::from(1)
}

/// `require` (from the command line or a listener's metadata) refuses to start when the
/// kernel cannot offload a TLS listener at all: no kTLS, or none of a filter chain's cipher
/// suites. Suites the kernel lacks are only warned about: they are offered last, and a
/// connection that still negotiates one is closed.
fn check_offload(
    listeners: &[Arc<ListenerRuntime>],
    caps: Option<&Capabilities>,
) -> Result<(), String> {
    let Some(caps) = caps else {
        return Ok(());
    };
    for l in listeners {
        if !l.inspects_tls || l.offload_mode != TlsOffloadMode::Require {
            continue;
        }
        let source = match l.tls_offload {
            Some(_) => "metadata.filter_metadata.hoist.tls_offload: require",
            None => "--tls-offload require",
        };
        if !caps.available() {
            return Err(format!(
                "listener '{}' requires kernel TLS offload ({source}), but the kernel cannot: {caps}",
                l.name
            ));
        }
        for chain in l.chains() {
            let Some(ctx) = &chain.tls else { continue };
            let suites = ctx.cipher_suites();
            let missing: Vec<&str> = suites
                .iter()
                .filter(|s| !offload::offloadable(caps, **s))
                .map(|s| hoist_tls::names::cipher(s.suite()))
                .collect();
            if missing.len() == suites.len() {
                return Err(format!(
                    "listener '{}' requires kernel TLS offload ({source}), but the kernel offloads none of the cipher suites of {} ({}); {caps}",
                    l.name,
                    ctx.yaml_path(),
                    missing.join(", ")
                ));
            }
            if !missing.is_empty() {
                tracing::warn!(
                    "listener '{}' requires kernel TLS offload: {} cannot be offloaded by this kernel; they are offered last and connections that negotiate them are closed",
                    l.name,
                    missing.join(", ")
                );
            }
        }
    }
    Ok(())
}

async fn wait_for_shutdown(state: &Arc<ServerState>) {
    use tokio::signal::unix::{signal, SignalKind};
    let mut phase = state.phase_receiver();
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            tracing::error!("cannot install signal handlers; serving until killed");
            std::future::pending::<()>().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = int.recv() => tracing::info!("SIGINT received"),
        _ = drain::draining(&mut phase) => tracing::info!("shutdown requested by admin"),
    }
    state.start_drain();
}

fn print_banner(state: &ServerState, admin: Option<SocketAddr>, is_default: bool) {
    println!(
        "hoist {} serving '{}' with {} worker(s)",
        env!("CARGO_PKG_VERSION"),
        state.config_name,
        state.concurrency
    );
    for (l, addr) in state.listeners.iter().zip(&state.bound) {
        let scheme = if l.inspects_tls { "https" } else { "http" };
        println!("  listener '{}' on {scheme}://{addr}", l.name);
    }
    if let Some(a) = admin {
        println!("  admin on http://{a}");
    }
    if is_default {
        if let Some(addr) = state.bound.first() {
            println!("Try:");
            println!("  curl -k https://{addr}/");
            println!("  curl -k -o /dev/null -w '%{{http_code}} %{{size_download}} bytes\\n' https://{addr}/1m");
        }
        if let Some(a) = admin {
            println!("  curl http://{a}/stats?filter=ssl");
        }
    }
    println!("hoist ready (pid {})", std::process::id());
}

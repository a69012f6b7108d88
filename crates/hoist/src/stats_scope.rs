//! The stats hoist keeps, by Envoy's names, bound to a worker's slot once so the data path only
//! does single-writer increments.
//!
//! Scopes: `listener.<address>.` (connections, TLS), `http.<stat_prefix>.` (the connection
//! manager, requests), `listener.<address>.http.<stat_prefix>.` (per-listener request codes), and
//! `server.` (main thread).

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::Arc;

use hoist_stats::{ImportMode, Store, Unit, WorkerCounter, WorkerGauge, WorkerHistogram};
use hoist_tls::offload::{tls_stat, Observed, OffloadEvent, Where};

use crate::server::ServerState;

/// `<scope>ssl.<kind>.<name>` counters whose names are only known at run time (ciphers,
/// versions, curves, sigalgs, offload fallbacks and errors): created on first use and cached,
/// so the store's lock is taken once per name per worker. Listeners and upstream clusters
/// both keep one.
pub struct SslDynamicCounters {
    store: Arc<Store>,
    scope: String,
    slot: usize,
    counters: RefCell<HashMap<String, WorkerCounter>>,
}

impl SslDynamicCounters {
    pub fn new(store: &Arc<Store>, scope: &str, slot: usize) -> SslDynamicCounters {
        SslDynamicCounters {
            store: store.clone(),
            scope: scope.to_owned(),
            slot,
            counters: RefCell::new(HashMap::new()),
        }
    }

    /// Increments `<scope>ssl.<kind>.<name>`.
    pub fn inc(&self, kind: &str, name: &str) {
        let key = format!("ssl.{kind}.{name}");
        let mut map = self.counters.borrow_mut();
        let counter = map.entry(key).or_insert_with_key(|k| {
            self.store
                .counter(&format!("{}{k}", self.scope))
                .bind(self.slot)
        });
        counter.inc();
    }
}

/// Connection- and TLS-level stats of one listener, as one worker sees them.
pub struct ListenerStats {
    pub downstream_cx_total: WorkerCounter,
    pub downstream_cx_active: WorkerGauge,
    pub downstream_cx_destroy: WorkerCounter,
    pub downstream_cx_length_ms: WorkerHistogram,
    pub downstream_pre_cx_timeout: WorkerCounter,
    pub downstream_pre_cx_active: WorkerGauge,
    pub no_filter_chain_match: WorkerCounter,
    pub ssl_handshake: WorkerCounter,
    pub ssl_connection_error: WorkerCounter,
    pub ssl_session_reused: WorkerCounter,
    pub ssl_no_certificate: WorkerCounter,
    /// `ssl.offload.{tx_sw,tx_hw,rx_sw,rx_hw}`: offloaded connections by who does each
    /// direction's crypto; `ssl.offload.none`: connections served with user-space TLS;
    /// `ssl.offload.unknown`: offloaded, but neither sock_diag nor tls_stat could tell sw from
    /// hw (docs/KTLS.md).
    pub offload_tx_sw: WorkerCounter,
    pub offload_tx_hw: WorkerCounter,
    pub offload_rx_sw: WorkerCounter,
    pub offload_rx_hw: WorkerCounter,
    pub offload_none: WorkerCounter,
    pub offload_unknown: WorkerCounter,
    /// `ssl.ciphers.<name>`, `ssl.versions.<v>`, `ssl.curves.<c>`, `ssl.sigalgs.<s>`.
    dynamic: SslDynamicCounters,
}

impl ListenerStats {
    pub fn new(store: &Arc<Store>, scope: &str, slot: usize) -> ListenerStats {
        let c = |n: &str| store.counter(&format!("{scope}{n}")).bind(slot);
        let g = |n: &str| {
            store
                .gauge(&format!("{scope}{n}"), ImportMode::Accumulate)
                .bind(slot)
        };
        ListenerStats {
            downstream_cx_total: c("downstream_cx_total"),
            downstream_cx_active: g("downstream_cx_active"),
            downstream_cx_destroy: c("downstream_cx_destroy"),
            downstream_cx_length_ms: store
                .histogram(
                    &format!("{scope}downstream_cx_length_ms"),
                    Unit::Milliseconds,
                )
                .bind(slot),
            downstream_pre_cx_timeout: c("downstream_pre_cx_timeout"),
            downstream_pre_cx_active: g("downstream_pre_cx_active"),
            no_filter_chain_match: c("no_filter_chain_match"),
            ssl_handshake: c("ssl.handshake"),
            ssl_connection_error: c("ssl.connection_error"),
            ssl_session_reused: c("ssl.session_reused"),
            ssl_no_certificate: c("ssl.no_certificate"),
            offload_tx_sw: c("ssl.offload.tx_sw"),
            offload_tx_hw: c("ssl.offload.tx_hw"),
            offload_rx_sw: c("ssl.offload.rx_sw"),
            offload_rx_hw: c("ssl.offload.rx_hw"),
            offload_none: c("ssl.offload.none"),
            offload_unknown: c("ssl.offload.unknown"),
            dynamic: SslDynamicCounters::new(store, scope, slot),
        }
    }

    /// Counts where an offloaded connection's crypto runs.
    pub fn offload_observed(&self, observed: &Observed) {
        let count = |w: Where, sw: &WorkerCounter, hw: &WorkerCounter| match w {
            Where::Sw => sw.inc(),
            Where::Hw => hw.inc(),
            Where::Unknown => {}
        };
        count(observed.tx, &self.offload_tx_sw, &self.offload_tx_hw);
        count(observed.rx, &self.offload_rx_sw, &self.offload_rx_hw);
        if observed.tx == Where::Unknown || observed.rx == Where::Unknown {
            self.offload_unknown.inc();
        }
    }

    /// `ssl.offload.rekey_{tx,rx}` and `ssl.offload.error.<reason>`.
    pub fn offload_event(&self, event: OffloadEvent) {
        match event {
            OffloadEvent::Rekey(dir) => {
                self.ssl_dynamic("offload", &format!("rekey_{}", dir.as_str()))
            }
            OffloadEvent::Error(reason) => self.ssl_dynamic("offload.error", reason.as_str()),
            // Only client connections receive tickets after the switch.
            OffloadEvent::SessionTicket => {}
        }
    }

    /// Increments `<scope>ssl.<kind>.<name>` (kind: ciphers, versions, curves, sigalgs,
    /// offload.fallback, offload.closed, offload.error).
    pub fn ssl_dynamic(&self, kind: &str, name: &str) {
        self.dynamic.inc(kind, name);
    }
}

/// Connection manager stats (`http.<prefix>.`) plus the per-listener request codes
/// (`listener.<address>.http.<prefix>.`), as one worker sees them.
pub struct HcmWorkerStats {
    pub cx_total: WorkerCounter,
    pub cx_ssl_total: WorkerCounter,
    pub cx_http1_total: WorkerCounter,
    pub cx_http2_total: WorkerCounter,
    pub cx_active: WorkerGauge,
    pub cx_ssl_active: WorkerGauge,
    pub cx_http1_active: WorkerGauge,
    pub cx_http2_active: WorkerGauge,
    pub cx_destroy: WorkerCounter,
    pub cx_destroy_remote: WorkerCounter,
    pub cx_destroy_local: WorkerCounter,
    pub cx_rx_bytes_total: WorkerCounter,
    pub cx_tx_bytes_total: WorkerCounter,
    pub cx_protocol_error: WorkerCounter,
    pub cx_idle_timeout: WorkerCounter,
    pub cx_drain_close: WorkerCounter,
    pub cx_length_ms: WorkerHistogram,
    pub rq_total: WorkerCounter,
    pub rq_http1_total: WorkerCounter,
    pub rq_http2_total: WorkerCounter,
    pub rq_active: WorkerGauge,
    pub rq_completed: WorkerCounter,
    /// downstream_rq_1xx .. downstream_rq_5xx
    pub rq_class: [WorkerCounter; 5],
    pub rq_too_large: WorkerCounter,
    pub rq_timeout: WorkerCounter,
    pub rq_header_timeout: WorkerCounter,
    pub rq_idle_timeout: WorkerCounter,
    pub rq_time: WorkerHistogram,
    pub rq_direct_response: WorkerCounter,
    pub rq_redirect: WorkerCounter,
    pub no_route: WorkerCounter,
    listener_rq_class: [WorkerCounter; 5],
    listener_rq_completed: WorkerCounter,
}

impl HcmWorkerStats {
    pub fn new(
        store: &Arc<Store>,
        stat_prefix: &str,
        listener_scope: &str,
        slot: usize,
    ) -> HcmWorkerStats {
        let scope = format!("http.{stat_prefix}.");
        let c = |n: &str| store.counter(&format!("{scope}{n}")).bind(slot);
        let g = |n: &str| {
            store
                .gauge(&format!("{scope}{n}"), ImportMode::Accumulate)
                .bind(slot)
        };
        let h = |n: &str| {
            store
                .histogram(&format!("{scope}{n}"), Unit::Milliseconds)
                .bind(slot)
        };
        let lc = |n: &str| {
            store
                .counter(&format!("{listener_scope}http.{stat_prefix}.{n}"))
                .bind(slot)
        };
        let class = |f: &dyn Fn(&str) -> WorkerCounter| {
            [1, 2, 3, 4, 5].map(|i| f(&format!("downstream_rq_{i}xx")))
        };
        HcmWorkerStats {
            cx_total: c("downstream_cx_total"),
            cx_ssl_total: c("downstream_cx_ssl_total"),
            cx_http1_total: c("downstream_cx_http1_total"),
            cx_http2_total: c("downstream_cx_http2_total"),
            cx_active: g("downstream_cx_active"),
            cx_ssl_active: g("downstream_cx_ssl_active"),
            cx_http1_active: g("downstream_cx_http1_active"),
            cx_http2_active: g("downstream_cx_http2_active"),
            cx_destroy: c("downstream_cx_destroy"),
            cx_destroy_remote: c("downstream_cx_destroy_remote"),
            cx_destroy_local: c("downstream_cx_destroy_local"),
            cx_rx_bytes_total: c("downstream_cx_rx_bytes_total"),
            cx_tx_bytes_total: c("downstream_cx_tx_bytes_total"),
            cx_protocol_error: c("downstream_cx_protocol_error"),
            cx_idle_timeout: c("downstream_cx_idle_timeout"),
            cx_drain_close: c("downstream_cx_drain_close"),
            cx_length_ms: h("downstream_cx_length_ms"),
            rq_total: c("downstream_rq_total"),
            rq_http1_total: c("downstream_rq_http1_total"),
            rq_http2_total: c("downstream_rq_http2_total"),
            rq_active: g("downstream_rq_active"),
            rq_completed: c("downstream_rq_completed"),
            rq_class: class(&c),
            rq_too_large: c("downstream_rq_too_large"),
            rq_timeout: c("downstream_rq_timeout"),
            rq_header_timeout: c("downstream_rq_header_timeout"),
            rq_idle_timeout: c("downstream_rq_idle_timeout"),
            rq_time: h("downstream_rq_time"),
            rq_direct_response: c("rq_direct_response"),
            rq_redirect: c("rq_redirect"),
            no_route: c("no_route"),
            listener_rq_class: class(&lc),
            listener_rq_completed: lc("downstream_rq_completed"),
        }
    }

    /// Counts a completed request by its status class.
    pub fn completed(&self, status: u16) {
        self.rq_completed.inc();
        self.listener_rq_completed.inc();
        if let Some(i) = (status / 100)
            .checked_sub(1)
            .map(usize::from)
            .filter(|i| *i < 5)
        {
            self.rq_class[i].inc();
            self.listener_rq_class[i].inc();
        }
    }
}

/// `server.*` gauges, kept current by the admin thread when stats are read.
pub fn register_server_stats(state: &Arc<ServerState>) {
    refresh_server_stats(state);
}

/// Sets the `server.` gauges from the live state; called before every stats render.
pub fn refresh_server_stats(state: &ServerState) {
    let main = state.stats.main_slot();
    let set = |name: &str, v: u64| {
        state
            .stats
            .gauge(name, ImportMode::NeverImport)
            .set(main, v)
    };
    set("server.live", u64::from(state.state_name() == "LIVE"));
    set("server.uptime", state.start.elapsed().as_secs());
    set("server.concurrency", state.concurrency as u64);
    set(
        "server.state",
        if state.state_name() == "LIVE" { 0 } else { 1 },
    );
    set("server.total_connections", total_connections(state));
    refresh_tls_stat(state);
}

/// `tls_stat.<Name>` gauges from /proc/net/tls_stat (TlsCurrTxSw, TlsTxDevice, ...), read
/// when stats are rendered; absent while the tls module is not loaded.
fn refresh_tls_stat(state: &ServerState) {
    let main = state.stats.main_slot();
    match tls_stat::read() {
        Ok(Some(stats)) => {
            for s in stats {
                state
                    .stats
                    .gauge(&format!("tls_stat.{}", s.name), ImportMode::NeverImport)
                    .set(main, s.value);
            }
        }
        Ok(None) => {}
        Err(e) => tracing::debug!("{}: {e}", tls_stat::PATH),
    }
}

fn total_connections(state: &ServerState) -> u64 {
    state
        .listeners
        .iter()
        .map(|l| {
            let name = format!("{}downstream_cx_active", l.stat_scope);
            state.stats.gauge(&name, ImportMode::Accumulate).value()
        })
        .sum()
}

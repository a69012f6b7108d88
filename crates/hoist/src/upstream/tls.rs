//! TLS toward an upstream: the rustls client handshake (whole records, so the kernel can take
//! over), then the process-wide offload policy (`--tls-offload`) against the kernel's probe and
//! what was negotiated, exactly as for downstream connections: kernel TLS when possible,
//! user-space rustls otherwise (counted by reason), a failed connect under `require`.
//!
//! Stats, under `cluster.<name>.` (Envoy counts upstream TLS under `cluster.<name>.ssl.*`):
//! `ssl.handshake`, `ssl.connection_error`, `ssl.session_reused`,
//! `ssl.offload.{tx_sw,tx_hw,rx_sw,rx_hw,none,unknown}`, `ssl.offload.fallback.<reason>`,
//! `ssl.offload.closed.<reason>`, `ssl.offload.error.<reason>`, `ssl.offload.rekey_{tx,rx}`,
//! `ssl.offload.session_ticket` (TLS 1.3 tickets stored from control records after the switch),
//! `ssl.offload.rx_expect_no_pad` (TLS 1.3 connections told TLS_RX_EXPECT_NO_PAD).

use std::rc::Rc;
use std::sync::Arc;

use hoist_config::model::TlsOffloadMode;
use hoist_stats::{Store, WorkerCounter};
use hoist_tls::client::UpstreamTls;
use hoist_tls::offload::{self, Observed, OffloadEvent, Plan, SwitchError, Where};
use hoist_tls::UserTlsTransport;
use tokio::net::TcpStream;

use super::conn::{ConnectError, UpstreamStream};
use crate::stats_scope::SslDynamicCounters;

/// A worker's TLS counters for one cluster.
pub struct UpstreamTlsStats {
    pub handshake: WorkerCounter,
    pub connection_error: WorkerCounter,
    pub session_reused: WorkerCounter,
    pub offload_tx_sw: WorkerCounter,
    pub offload_tx_hw: WorkerCounter,
    pub offload_rx_sw: WorkerCounter,
    pub offload_rx_hw: WorkerCounter,
    pub offload_none: WorkerCounter,
    pub offload_unknown: WorkerCounter,
    dynamic: SslDynamicCounters,
}

/// The fixed counters, created at load so they show as 0.
pub const COUNTERS: [&str; 9] = [
    "ssl.handshake",
    "ssl.connection_error",
    "ssl.session_reused",
    "ssl.offload.tx_sw",
    "ssl.offload.tx_hw",
    "ssl.offload.rx_sw",
    "ssl.offload.rx_hw",
    "ssl.offload.none",
    "ssl.offload.unknown",
];

impl UpstreamTlsStats {
    pub fn new(store: &Arc<Store>, scope: &str, slot: usize) -> UpstreamTlsStats {
        let c = |n: &str| store.counter(&format!("{scope}{n}")).bind(slot);
        UpstreamTlsStats {
            handshake: c(COUNTERS[0]),
            connection_error: c(COUNTERS[1]),
            session_reused: c(COUNTERS[2]),
            offload_tx_sw: c(COUNTERS[3]),
            offload_tx_hw: c(COUNTERS[4]),
            offload_rx_sw: c(COUNTERS[5]),
            offload_rx_hw: c(COUNTERS[6]),
            offload_none: c(COUNTERS[7]),
            offload_unknown: c(COUNTERS[8]),
            dynamic: SslDynamicCounters::new(store, scope, slot),
        }
    }

    /// Increments `<scope>ssl.<kind>.<name>`.
    pub fn dynamic(&self, kind: &str, name: &str) {
        self.dynamic.inc(kind, name);
    }

    fn observed(&self, o: &Observed) {
        let count = |w: Where, sw: &WorkerCounter, hw: &WorkerCounter| match w {
            Where::Sw => sw.inc(),
            Where::Hw => hw.inc(),
            Where::Unknown => {}
        };
        count(o.tx, &self.offload_tx_sw, &self.offload_tx_hw);
        count(o.rx, &self.offload_rx_sw, &self.offload_rx_hw);
        if o.tx == Where::Unknown || o.rx == Where::Unknown {
            self.offload_unknown.inc();
        }
    }

    fn event(&self, e: OffloadEvent) {
        match e {
            OffloadEvent::Rekey(dir) => self.dynamic("offload", &format!("rekey_{}", dir.as_str())),
            OffloadEvent::Error(reason) => self.dynamic("offload.error", reason.as_str()),
            OffloadEvent::SessionTicket => self.dynamic("offload", "session_ticket"),
        }
    }
}

/// Handshake on a connected `tcp`, then kernel or user-space TLS by `tls.offload_mode`.
pub async fn handshake(
    cluster: &str,
    tcp: TcpStream,
    tls: &UpstreamTls,
    stats: Option<&Rc<UpstreamTlsStats>>,
) -> Result<UpstreamStream, ConnectError> {
    let established =
        match hoist_tls::connect(tcp, tls.config.clone(), tls.server_name.clone()).await {
            Ok(e) => e,
            Err(e) => {
                if let Some(s) = stats {
                    s.connection_error.inc();
                }
                return Err(ConnectError::Failed(format!("TLS_error: {e}")));
            }
        };
    if let Some(s) = stats {
        s.handshake.inc();
        if established.info.session_reused {
            s.session_reused.inc();
        }
    }
    let count = |kind: &str, reason: offload::Reason| {
        if let Some(s) = stats {
            s.dynamic(kind, reason.as_str());
        }
    };
    let mode = tls.offload_mode;
    let caps = offload::capabilities();
    let plan = offload::plan(
        mode,
        caps,
        established.conn.protocol_version(),
        established.conn.negotiated_cipher_suite(),
    );
    let established = match plan {
        Plan::Offload => match offload::switch(established, caps) {
            Ok(mut t) => {
                let tcp = t.tcp();
                match (tcp.local_addr(), tcp.peer_addr()) {
                    (Ok(local), Ok(remote)) => {
                        let observed = offload::observe(local, remote);
                        tracing::debug!(
                            "cluster {cluster}: upstream kTLS on, tx {} rx {} (from {}){}",
                            observed.tx.as_str(),
                            observed.rx.as_str(),
                            observed.source,
                            if t.rx_expect_no_pad() {
                                ", rx_expect_no_pad"
                            } else {
                                ""
                            }
                        );
                        if let Some(s) = stats {
                            s.observed(&observed);
                        }
                        t.set_offload_label(observed.label());
                    }
                    _ => {
                        if let Some(s) = stats {
                            s.offload_unknown.inc();
                        }
                        t.set_offload_label("unknown");
                    }
                }
                if let Some(s) = stats {
                    if t.rx_expect_no_pad() {
                        s.dynamic("offload", "rx_expect_no_pad");
                    }
                    let s = Rc::clone(s);
                    t.set_event_sink(Box::new(move |e| s.event(e)));
                }
                return Ok(UpstreamStream::Kernel(Box::new(t)));
            }
            Err(SwitchError::Fallback {
                established,
                reason,
                error,
            }) => {
                tracing::debug!("cluster {cluster}: upstream kTLS {reason} ({error})");
                if mode == TlsOffloadMode::Require {
                    count("offload.closed", reason);
                    return Err(ConnectError::Failed(format!(
                        "TLS_error: kernel TLS required: {reason} ({error})"
                    )));
                }
                count("offload.fallback", reason);
                *established
            }
            Err(e) => {
                count("offload.closed", e.reason());
                return Err(ConnectError::Failed(format!("TLS_error: kernel TLS: {e}")));
            }
        },
        Plan::UserSpace(reason) => {
            count("offload.fallback", reason);
            established
        }
        Plan::Close(reason) => {
            count("offload.closed", reason);
            return Err(ConnectError::Failed(format!(
                "TLS_error: kernel TLS required: {reason}"
            )));
        }
    };
    if let Some(s) = stats {
        s.offload_none.inc();
    }
    Ok(UpstreamStream::User(Box::new(UserTlsTransport::new(
        established,
    ))))
}

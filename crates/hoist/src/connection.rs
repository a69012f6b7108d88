//! One downstream connection from accept to close: inspect the ClientHello (Envoy's
//! tls_inspector), pick the filter chain, run the TLS handshake, hand the transport to the HTTP
//! codec. Every way out is counted.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use hoist_config::model::TlsOffloadMode;
use hoist_tls::client_hello::{self, Inspect};
use hoist_tls::handshake::{self, Established};
use hoist_tls::offload::{self, KtlsTransport, Plan, SwitchError};
use hoist_tls::plain::PlainTransport;
use hoist_tls::transport::{TlsInfo, Transport};
use hoist_tls::userspace::UserTlsTransport;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::drain::ConnectionGuard;
use crate::listener::ConnectionFacts;
use crate::worker::{Worker, WorkerListener};

/// Envoy's default `listener_filters_timeout`: how long a client may take to send its hello.
const LISTENER_FILTER_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a TLS handshake may take once the hello is in.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the close_notify of a refused connection may take to leave.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// What the rest of the connection's life needs to know about it.
pub struct ConnInfo {
    pub id: u64,
    pub remote: SocketAddr,
    pub local: SocketAddr,
    pub tls: Option<TlsInfo>,
    pub start: Instant,
}

impl ConnInfo {
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }
}

pub async fn handle(
    worker: Rc<Worker>,
    wl: Rc<WorkerListener>,
    tcp: TcpStream,
    remote: SocketAddr,
    _guard: ConnectionGuard,
) {
    let stats = &wl.stats;
    stats.downstream_cx_total.inc();
    stats.downstream_cx_active.inc();
    let start = Instant::now();
    serve(&worker, &wl, tcp, remote, start).await;
    stats.downstream_cx_active.dec();
    stats.downstream_cx_destroy.inc();
    stats
        .downstream_cx_length_ms
        .record(start.elapsed().as_millis() as u64);
}

async fn serve(
    worker: &Rc<Worker>,
    wl: &Rc<WorkerListener>,
    tcp: TcpStream,
    remote: SocketAddr,
    start: Instant,
) {
    let stats = &wl.stats;
    // Nagle would delay the last segment of every response; hoist coalesces writes itself.
    let _ = tcp.set_nodelay(true);
    let local = tcp.local_addr().unwrap_or(wl.rt.address);
    let mut hello_bytes = Vec::new();
    let mut sni = None;
    let mut alpn = Vec::new();
    let mut is_tls = false;
    if wl.rt.inspects_tls {
        stats.downstream_pre_cx_active.inc();
        let inspected = tokio::time::timeout(
            LISTENER_FILTER_TIMEOUT,
            client_hello::read_client_hello(&tcp, &mut hello_bytes),
        )
        .await;
        stats.downstream_pre_cx_active.dec();
        match inspected {
            Err(_) => {
                stats.downstream_pre_cx_timeout.inc();
                return;
            }
            // The peer went away before saying anything useful.
            Ok(Err(_)) | Ok(Ok(Inspect::NeedMore)) => return,
            Ok(Ok(Inspect::Hello(hello))) => {
                is_tls = true;
                sni = hello.sni;
                alpn = hello.alpn;
            }
            Ok(Ok(Inspect::NotTls)) => {}
            Ok(Ok(Inspect::Malformed)) => {
                stats.ssl_connection_error.inc();
                return;
            }
        }
    }
    let facts = ConnectionFacts {
        sni: sni.as_deref(),
        is_tls,
        alpn: &alpn,
    };
    let Some(index) = wl.rt.select(&facts) else {
        stats.no_filter_chain_match.inc();
        return;
    };
    let (Some(chain), Some(hcm)) = (wl.rt.chains().nth(index), wl.chains.get(index)) else {
        return;
    };
    let mut info = ConnInfo {
        id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
        remote,
        local,
        tls: None,
        start,
    };
    match &chain.tls {
        Some(ctx) => {
            let established = match tokio::time::timeout(
                HANDSHAKE_TIMEOUT,
                handshake::accept(tcp, hello_bytes, ctx),
            )
            .await
            {
                Ok(Ok(e)) => e,
                Ok(Err(e)) => {
                    stats.ssl_connection_error.inc();
                    tracing::debug!(
                        "connection {} from {remote} (filter chain '{}'): TLS handshake failed: {e}",
                        info.id,
                        chain.name
                    );
                    return;
                }
                Err(_) => {
                    stats.ssl_connection_error.inc();
                    tracing::debug!(
                        "connection {} from {remote}: TLS handshake timed out",
                        info.id
                    );
                    return;
                }
            };
            count_handshake(wl, &established.info);
            let transport = match offload(wl, established, info.id) {
                Some(t) => t,
                None => return,
            };
            match transport {
                Record::Kernel(t) => {
                    info.tls = t.tls_info().cloned();
                    crate::codec::serve(
                        *t,
                        BytesMut::new(),
                        hcm,
                        &info,
                        worker,
                        wl.rt.buffer_limit,
                    )
                    .await;
                }
                Record::User(t) => {
                    info.tls = t.tls_info().cloned();
                    crate::codec::serve(
                        *t,
                        BytesMut::new(),
                        hcm,
                        &info,
                        worker,
                        wl.rt.buffer_limit,
                    )
                    .await;
                }
            }
        }
        None => {
            let transport = PlainTransport::new(tcp);
            crate::codec::serve(
                transport,
                BytesMut::from(&hello_bytes[..]),
                hcm,
                &info,
                worker,
                wl.rt.buffer_limit,
            )
            .await;
        }
    }
}

/// Where a TLS connection's record layer runs.
enum Record {
    Kernel(Box<KtlsTransport>),
    User(Box<UserTlsTransport>),
}

/// The listener's offload policy applied to a completed handshake: the kernel when policy,
/// probe and negotiation allow it, else user-space rustls (counted by reason), or a close
/// under `require`. None: the connection is closed.
fn offload(wl: &Rc<WorkerListener>, established: Established, id: u64) -> Option<Record> {
    let stats = &wl.stats;
    let caps = offload::capabilities();
    let plan = offload::plan(
        wl.rt.offload_mode,
        caps,
        established.conn.protocol_version(),
        established.conn.negotiated_cipher_suite(),
    );
    let established = match plan {
        Plan::Offload => match offload::switch(established, caps) {
            Ok(mut t) => {
                let tcp = t.tcp();
                if let (Ok(local), Ok(remote)) = (tcp.local_addr(), tcp.peer_addr()) {
                    let observed = offload::observe(local, remote);
                    tracing::debug!(
                        "connection {id}: kTLS on, tx {} rx {} (from {})",
                        observed.tx.as_str(),
                        observed.rx.as_str(),
                        observed.source
                    );
                    stats.offload_observed(&observed);
                    t.set_offload_label(observed.label());
                } else {
                    t.set_offload_label("unknown");
                    stats.offload_unknown.inc();
                }
                let events = wl.clone();
                t.set_event_sink(Box::new(move |e| events.stats.offload_event(e)));
                return Some(Record::Kernel(Box::new(t)));
            }
            Err(SwitchError::Fallback {
                established,
                reason,
                error,
            }) => {
                if wl.rt.offload_mode == TlsOffloadMode::Require {
                    tracing::debug!(
                        "connection {id}: kTLS {reason} ({error}) under require; closing"
                    );
                    stats.ssl_dynamic("offload.closed", reason.as_str());
                    close_politely(*established);
                    return None;
                }
                tracing::debug!("connection {id}: kTLS {reason} ({error}); user-space TLS");
                stats.ssl_dynamic("offload.fallback", reason.as_str());
                *established
            }
            Err(e) => {
                tracing::debug!("connection {id}: kTLS switch failed: {e}; closing");
                stats.ssl_dynamic("offload.closed", e.reason().as_str());
                return None;
            }
        },
        Plan::UserSpace(reason) => {
            stats.ssl_dynamic("offload.fallback", reason.as_str());
            established
        }
        Plan::Close(reason) => {
            tracing::debug!("connection {id}: cannot offload ({reason}) under require; closing");
            stats.ssl_dynamic("offload.closed", reason.as_str());
            close_politely(established);
            return None;
        }
    };
    stats.offload_none.inc();
    Some(Record::User(Box::new(UserTlsTransport::new(established))))
}

/// Ends a connection that will not be served with close_notify (from user-space rustls), so the
/// client sees a clean end rather than a reset.
fn close_politely(established: Established) {
    let mut t = UserTlsTransport::new(established);
    tokio::task::spawn_local(async move {
        let _ = tokio::time::timeout(CLOSE_TIMEOUT, t.shutdown()).await;
    });
}

fn count_handshake(wl: &WorkerListener, info: &TlsInfo) {
    let stats = &wl.stats;
    stats.ssl_handshake.inc();
    if info.session_reused {
        stats.ssl_session_reused.inc();
    }
    if info.peer_subject.is_none() {
        stats.ssl_no_certificate.inc();
    }
    stats.ssl_dynamic("ciphers", info.cipher);
    stats.ssl_dynamic("versions", info.version);
    if let Some(curve) = info.curve {
        stats.ssl_dynamic("curves", curve);
    }
    if let Some(sigalg) = info.sigalg {
        stats.ssl_dynamic("sigalgs", sigalg);
    }
}

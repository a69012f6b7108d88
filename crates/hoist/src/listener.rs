//! Listeners at runtime: the sockets (one SO_REUSEPORT socket per worker) and filter chain
//! selection from what the client's ClientHello said (SNI, ALPN) or its absence.

use std::net::SocketAddr;
use std::sync::Arc;

use hoist_config::model::{Cluster, FilterChain, FilterChainMatch, Listener, TlsOffloadMode};
use hoist_config::ConfigError;
use hoist_stats::Store;
use hoist_tls::offload::{self, Capabilities};
use hoist_tls::server_config::ServerContext;
use socket2::{Domain, Protocol, Socket, Type};

use crate::conn_manager::HcmRuntime;

/// Accept queue length of each worker's socket.
const BACKLOG: i32 = 1024;

pub struct ChainRuntime {
    pub name: String,
    filter_chain_match: FilterChainMatch,
    pub tls: Option<Arc<ServerContext>>,
    pub hcm: Arc<HcmRuntime>,
}

pub struct ListenerRuntime {
    pub name: String,
    pub address: SocketAddr,
    /// `listener.<address or stat_prefix>.`
    pub stat_scope: String,
    chains: Vec<Arc<ChainRuntime>>,
    default_chain: Option<Arc<ChainRuntime>>,
    /// Whether any chain (or the default) terminates TLS: only then is the ClientHello inspected.
    pub inspects_tls: bool,
    pub buffer_limit: u32,
    /// The listener's own offload policy (metadata.filter_metadata.hoist.tls_offload).
    pub tls_offload: Option<TlsOffloadMode>,
    /// The policy in force: the listener's own, else the command line's.
    pub offload_mode: TlsOffloadMode,
}

/// What the offload policy needs at listener build time.
pub struct OffloadDefaults<'a> {
    /// `--tls-offload`.
    pub mode: TlsOffloadMode,
    /// The probe's result; None when nothing will be served (validate).
    pub caps: Option<&'a Capabilities>,
}

/// What filter chain matching looks at.
pub struct ConnectionFacts<'a> {
    pub sni: Option<&'a str>,
    pub is_tls: bool,
    pub alpn: &'a [Vec<u8>],
}

impl ListenerRuntime {
    pub fn build(
        l: &Listener,
        stats: &Arc<Store>,
        concurrency: usize,
        offload_defaults: &OffloadDefaults<'_>,
        clusters: &[Cluster],
    ) -> Result<ListenerRuntime, ConfigError> {
        let offload_mode = l.tls_offload.unwrap_or(offload_defaults.mode);
        // With offload on, what the kernel can offload is offered first (docs/KTLS.md).
        let caps = offload_defaults
            .caps
            .filter(|c| offload_mode != TlsOffloadMode::Off && c.available());
        let first = |s| caps.is_some_and(|c| offload::offloadable(c, s));
        let build_chain = |c: &FilterChain| -> Result<Arc<ChainRuntime>, ConfigError> {
            let tls = match &c.tls {
                Some(ctx) => Some(
                    ServerContext::build_preferring(ctx, &first)
                        .map_err(|e| ConfigError::new(e.yaml_path.clone(), e.reason.clone()))?,
                ),
                None => None,
            };
            Ok(Arc::new(ChainRuntime {
                name: c.name.clone(),
                filter_chain_match: c.filter_chain_match.clone(),
                tls,
                hcm: HcmRuntime::build(&c.hcm, stats, concurrency, clusters)?,
            }))
        };
        let chains = l
            .filter_chains
            .iter()
            .map(build_chain)
            .collect::<Result<Vec<_>, _>>()?;
        let default_chain = l
            .default_filter_chain
            .as_ref()
            .map(build_chain)
            .transpose()?;
        let inspects_tls = chains
            .iter()
            .chain(default_chain.iter())
            .any(|c| c.tls.is_some());
        let stat_scope = match &l.stat_prefix {
            Some(p) => format!("listener.{p}."),
            None => format!("listener.{}.", l.address.stat_name()),
        };
        Ok(ListenerRuntime {
            name: l.name.clone(),
            address: l.address.addr,
            stat_scope,
            chains,
            default_chain,
            inspects_tls,
            buffer_limit: l.per_connection_buffer_limit_bytes,
            tls_offload: l.tls_offload,
            offload_mode,
        })
    }

    /// The filter chains, then the default chain; `select` returns an index into this order.
    pub fn chains(&self) -> impl Iterator<Item = &Arc<ChainRuntime>> {
        self.chains.iter().chain(self.default_chain.iter())
    }

    /// Envoy's order: server names (exact, then the longest wildcard, then chains without
    /// names), then transport protocol (an exact match beats unspecified), then application
    /// protocols (a match beats unspecified). No match: the default chain, if any.
    pub fn select(&self, facts: &ConnectionFacts<'_>) -> Option<usize> {
        let mut candidates: Vec<&Arc<ChainRuntime>> = match facts.sni {
            Some(sni) => {
                let exact: Vec<_> = self
                    .chains
                    .iter()
                    .filter(|c| c.filter_chain_match.server_names.iter().any(|n| n == sni))
                    .collect();
                if !exact.is_empty() {
                    exact
                } else {
                    let best = self
                        .chains
                        .iter()
                        .flat_map(|c| c.filter_chain_match.server_names.iter())
                        .filter_map(|n| n.strip_prefix('*'))
                        .filter(|suffix| sni.len() > suffix.len() && sni.ends_with(suffix))
                        .map(str::len)
                        .max();
                    match best {
                        Some(len) => self
                            .chains
                            .iter()
                            .filter(|c| {
                                c.filter_chain_match.server_names.iter().any(|n| {
                                    n.strip_prefix('*').is_some_and(|s| {
                                        s.len() == len && sni.ends_with(s) && sni.len() > len
                                    })
                                })
                            })
                            .collect(),
                        None => self.unnamed(),
                    }
                }
            }
            None => self.unnamed(),
        };
        let transport = if facts.is_tls { "tls" } else { "raw_buffer" };
        narrow(
            &mut candidates,
            |c| c.filter_chain_match.transport_protocol.as_deref() == Some(transport),
            |c| c.filter_chain_match.transport_protocol.is_none(),
        );
        narrow(
            &mut candidates,
            |c| {
                c.filter_chain_match
                    .application_protocols
                    .iter()
                    .any(|p| facts.alpn.iter().any(|a| a == p.as_bytes()))
            },
            |c| c.filter_chain_match.application_protocols.is_empty(),
        );
        match candidates.first() {
            Some(c) => self.chains.iter().position(|x| Arc::ptr_eq(x, c)),
            None => self.default_chain.as_ref().map(|_| self.chains.len()),
        }
    }

    fn unnamed(&self) -> Vec<&Arc<ChainRuntime>> {
        self.chains
            .iter()
            .filter(|c| c.filter_chain_match.server_names.is_empty())
            .collect()
    }

    /// Creates one listening socket bound to `addr` with SO_REUSEPORT, so every worker can have
    /// its own and the kernel spreads connections among them.
    pub fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        if addr.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(BACKLOG)?;
        Ok(socket.into())
    }
}

/// Keeps the candidates that match `exact` if any do, else those that are `unspecified`.
fn narrow(
    candidates: &mut Vec<&Arc<ChainRuntime>>,
    exact: impl Fn(&ChainRuntime) -> bool,
    unspecified: impl Fn(&ChainRuntime) -> bool,
) {
    if candidates.iter().any(|c| exact(c)) {
        candidates.retain(|c| exact(c));
    } else {
        candidates.retain(|c| unspecified(c));
    }
}

//! A `DownstreamTlsContext` turned into a rustls server configuration, once at load.
//!
//! Defaults follow Envoy (and so BoringSSL): TLS 1.2 to 1.3, server cipher order, Envoy's six
//! TLS 1.2 suites, X25519 then P-256, session cache and stateless tickets on. Two rustls
//! settings are fixed because kernel TLS depends on them: secret extraction is on, and early
//! data is off (0-RTT data would arrive before the keys could be handed to the kernel).

pub(crate) mod certs;
mod client_auth;
mod tickets;

use std::fmt;
use std::sync::Arc;

use hoist_config::model::tls::{
    CipherSuite as ConfigSuite, Curve, DownstreamTlsContext, TlsVersion,
};
use rustls::crypto::aws_lc_rs::{self, cipher_suite, kx_group};
use rustls::crypto::{CryptoProvider, SupportedKxGroup};
use rustls::server::{
    ProducesTickets, ServerSessionMemoryCache, UnbufferedServerConnection, WebPkiClientVerifier,
};
use rustls::{ServerConfig, SupportedCipherSuite, SupportedProtocolVersion};

pub use certs::Selection;

/// Sessions the stateful cache keeps (BoringSSL's default, SSL_SESSION_CACHE_MAX_SIZE_DEFAULT).
const SESSION_CACHE_SIZE: usize = 20480;

/// A configuration error, with the YAML path of the offending context or certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfigError {
    pub yaml_path: String,
    pub reason: String,
}

impl TlsConfigError {
    pub(crate) fn new(yaml_path: &str, reason: impl Into<String>) -> TlsConfigError {
        TlsConfigError {
            yaml_path: yaml_path.to_string(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for TlsConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.yaml_path, self.reason)
    }
}

impl std::error::Error for TlsConfigError {}

/// The server side of one `DownstreamTlsContext`, shared by all workers.
#[derive(Debug)]
pub struct ServerContext {
    config: Arc<ServerConfig>,
    certs: Arc<certs::CertSet>,
    yaml_path: String,
}

impl ServerContext {
    pub fn build(ctx: &DownstreamTlsContext) -> Result<Arc<ServerContext>, TlsConfigError> {
        ServerContext::build_preferring(ctx, &|_| false)
    }

    /// [`ServerContext::build`], with the cipher suites for which `first` holds moved ahead of
    /// the others; the configured order is kept within each group. With kernel TLS on, hoist
    /// passes "the kernel can offload it", so that clients offering both get an offloadable
    /// suite (the server's order decides: `ignore_client_order`).
    pub fn build_preferring(
        ctx: &DownstreamTlsContext,
        first: &dyn Fn(SupportedCipherSuite) -> bool,
    ) -> Result<Arc<ServerContext>, TlsConfigError> {
        let path = ctx.yaml_path.as_str();
        let versions = versions(ctx.tls_params.min_version, ctx.tls_params.max_version)
            .map_err(|r| TlsConfigError::new(path, r))?;
        let tls12 = versions
            .iter()
            .any(|v| v.version == rustls::ProtocolVersion::TLSv1_2);
        let tls13 = versions
            .iter()
            .any(|v| v.version == rustls::ProtocolVersion::TLSv1_3);

        let mut suites = Vec::new();
        if tls13 {
            // BoringSSL's TLS 1.3 order on CPUs with AES instructions; not configurable in Envoy.
            suites.extend([
                cipher_suite::TLS13_AES_128_GCM_SHA256,
                cipher_suite::TLS13_AES_256_GCM_SHA384,
                cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
            ]);
        }
        if tls12 {
            let configured: Vec<ConfigSuite> = if ctx.tls_params.cipher_suites.is_empty() {
                ConfigSuite::ALL.to_vec()
            } else {
                ctx.tls_params
                    .cipher_suites
                    .iter()
                    .flatten()
                    .copied()
                    .collect()
            };
            for c in configured {
                let s = suite_for(c);
                if !suites.contains(&s) {
                    suites.push(s);
                }
            }
        }

        let (mut suites, rest): (Vec<_>, Vec<_>) = suites.into_iter().partition(|s| first(*s));
        suites.extend(rest);

        let curves: Vec<Curve> = if ctx.tls_params.ecdh_curves.is_empty() {
            vec![Curve::X25519, Curve::P256]
        } else {
            ctx.tls_params.ecdh_curves.clone()
        };
        let mut kx_groups: Vec<&'static dyn SupportedKxGroup> = Vec::new();
        for c in curves {
            let g = group_for(c);
            if !kx_groups.iter().any(|k| k.name() == g.name()) {
                kx_groups.push(g);
            }
        }
        if tls12
            && !tls13
            && kx_groups
                .iter()
                .all(|g| !g.usable_for_version(rustls::ProtocolVersion::TLSv1_2))
        {
            return Err(TlsConfigError::new(
                path,
                "ecdh_curves: no curve usable with TLS 1.2",
            ));
        }

        let provider = Arc::new(CryptoProvider {
            cipher_suites: suites,
            kx_groups,
            ..aws_lc_rs::default_provider()
        });

        if ctx.tls_certificates.is_empty() {
            return Err(TlsConfigError::new(
                path,
                "common_tls_context.tls_certificates: a server context needs at least one certificate",
            ));
        }
        let loaded = ctx
            .tls_certificates
            .iter()
            .map(|c| certs::load(c, &provider))
            .collect::<Result<Vec<_>, _>>()?;
        let certs = Arc::new(certs::CertSet::new(loaded));

        let verifier = match (&ctx.validation_context, ctx.require_client_certificate) {
            (Some(vc), require) => client_auth::verifier(vc, require, provider.clone())?,
            (None, true) => {
                return Err(TlsConfigError::new(
                    path,
                    "require_client_certificate needs common_tls_context.validation_context",
                ))
            }
            (None, false) => WebPkiClientVerifier::no_client_auth(),
        };

        let ticketer: Arc<dyn ProducesTickets> = if !ctx.session_tickets {
            if !ctx.session_ticket_keys.is_empty() {
                tracing::warn!(
                    yaml_path = path,
                    "session_ticket_keys ignored: stateless session resumption is disabled"
                );
            }
            Arc::new(tickets::NoTickets)
        } else if !ctx.session_ticket_keys.is_empty() {
            Arc::new(
                tickets::TicketKeys::new(&ctx.session_ticket_keys).map_err(|(i, r)| {
                    TlsConfigError::new(&format!("{path}.session_ticket_keys.keys[{i}]"), r)
                })?,
            )
        } else {
            aws_lc_rs::Ticketer::new().map_err(|e| {
                TlsConfigError::new(path, format!("cannot create a session ticketer: {e}"))
            })?
        };

        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| TlsConfigError::new(path, format!("tls_params: {e}")))?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(certs::RecordingResolver {
                set: certs.clone(),
                selection: Arc::default(),
            }));
        config.ignore_client_order = true;
        config.alpn_protocols = ctx
            .alpn_protocols
            .iter()
            .map(|p| p.as_bytes().to_vec())
            .collect();
        config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE_SIZE);
        config.ticketer = ticketer;
        config.enable_secret_extraction = true;
        config.max_early_data_size = 0;

        Ok(Arc::new(ServerContext {
            config: Arc::new(config),
            certs,
            yaml_path: ctx.yaml_path.clone(),
        }))
    }

    /// The cipher suites this context can negotiate, in the server's preference order (TLS 1.3
    /// suites first when TLS 1.3 is enabled).
    pub fn cipher_suites(&self) -> &[SupportedCipherSuite] {
        &self.config.crypto_provider().cipher_suites
    }

    /// The ALPN protocols offered, in preference order; empty means no ALPN.
    pub fn alpn(&self) -> &[Vec<u8>] {
        &self.config.alpn_protocols
    }

    pub fn yaml_path(&self) -> &str {
        &self.yaml_path
    }

    /// The shared rustls configuration (without the per-connection certificate recorder).
    pub fn config(&self) -> &Arc<ServerConfig> {
        &self.config
    }

    /// A rustls connection for one accepted socket, and the record of what its handshake
    /// chooses. The configuration is cloned per connection (a handful of reference counts and
    /// small vectors) so that the certificate resolver can report to this connection only.
    pub fn new_connection(
        &self,
    ) -> Result<(UnbufferedServerConnection, Arc<Selection>), rustls::Error> {
        let selection = Arc::new(Selection::default());
        let mut config = (*self.config).clone();
        config.cert_resolver = Arc::new(certs::RecordingResolver {
            set: self.certs.clone(),
            selection: selection.clone(),
        });
        let conn = UnbufferedServerConnection::new(Arc::new(config))?;
        Ok((conn, selection))
    }
}

/// rustls speaks TLS 1.2 and 1.3 only: an older minimum is raised to 1.2 with a warning.
fn versions(
    min: TlsVersion,
    max: TlsVersion,
) -> Result<Vec<&'static SupportedProtocolVersion>, String> {
    let min = if min < TlsVersion::Tls1_2 {
        tracing::warn!(
            ?min,
            "tls_minimum_protocol_version below TLSv1_2 is not supported; using TLSv1_2"
        );
        TlsVersion::Tls1_2
    } else {
        min
    };
    if max < min {
        return Err(format!(
            "tls_params: tls_maximum_protocol_version {max:?} is below the minimum {min:?} (only TLSv1_2 and TLSv1_3 are supported)"
        ));
    }
    let mut v = Vec::new();
    if max >= TlsVersion::Tls1_3 {
        v.push(&rustls::version::TLS13);
    }
    if min <= TlsVersion::Tls1_2 {
        v.push(&rustls::version::TLS12);
    }
    Ok(v)
}

/// The rustls suite for a TLS 1.2 suite of the config model.
pub(crate) fn suite_for(c: ConfigSuite) -> SupportedCipherSuite {
    match c {
        ConfigSuite::EcdheEcdsaAes128GcmSha256 => {
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
        }
        ConfigSuite::EcdheRsaAes128GcmSha256 => cipher_suite::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
        ConfigSuite::EcdheEcdsaAes256GcmSha384 => {
            cipher_suite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
        }
        ConfigSuite::EcdheRsaAes256GcmSha384 => cipher_suite::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
        ConfigSuite::EcdheEcdsaChacha20Poly1305 => {
            cipher_suite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
        }
        ConfigSuite::EcdheRsaChacha20Poly1305 => {
            cipher_suite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
        }
    }
}

fn group_for(c: Curve) -> &'static dyn SupportedKxGroup {
    match c {
        Curve::X25519 => kx_group::X25519,
        Curve::P256 => kx_group::SECP256R1,
        Curve::P384 => kx_group::SECP384R1,
        Curve::X25519Mlkem768 => kx_group::X25519MLKEM768,
    }
}

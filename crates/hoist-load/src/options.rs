//! What a run does: [`LoadOptions`], with Fortio's defaults, and why a run could not start.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use std::time::Duration;

pub use crate::tls::TlsVersion;

/// Fortio's default percentiles (`-p "50,75,90,99,99.9"`).
pub const DEFAULT_PERCENTILES: [f64; 5] = [50.0, 75.0, 90.0, 99.0, 99.9];

/// Everything `hoist load` (and `hoist bench`) can ask of a run. `Default` gives Fortio's
/// defaults: 4 connections, 8 qps in total, 5 s, 3 s timeout, keep-alive.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    /// `http://` or `https://` URL (`http://` is assumed without a scheme).
    pub url: String,
    /// Connections, each making calls one after the other (`-c`; Fortio's "threads").
    pub connections: usize,
    /// Total queries per second over all connections; 0 or less means as fast as possible.
    pub qps: f64,
    /// How long to run (`-t`); `None` runs until `stop` is set. Ignored when `count` is set.
    pub duration: Option<Duration>,
    /// Exactly this many calls in total (`-n`), without warm-up calls.
    pub count: Option<u64>,
    /// Percentiles to report (each > 0 and < 100).
    pub percentiles: Vec<f64>,
    /// Width of the first histogram buckets, in seconds (`-r`).
    pub resolution: f64,
    /// Extra request headers as given with `-H "Name: value"`. `Host` replaces the Host
    /// header, `User-Agent` replaces the default one (an empty value removes it),
    /// `Content-Type` sets the content type.
    pub headers: Vec<(String, String)>,
    /// Accept any server certificate (`-k`).
    pub insecure: bool,
    /// CA certificates (PEM) to verify the server with (`-cacert`); the system bundle
    /// otherwise.
    pub ca_cert: Option<PathBuf>,
    /// Client certificate chain and key (PEM) for mutual TLS (`-cert`, `-key`).
    pub client_cert: Option<PathBuf>,
    pub client_key: Option<PathBuf>,
    /// Offer only this TLS version (`-tls-version 1.2|1.3`).
    pub tls_version: Option<TlsVersion>,
    /// Offer only these cipher suites: OpenSSL or IANA names separated by ':' (`-cipher`).
    pub cipher: Option<String>,
    /// Client threads, each running a single-threaded runtime for its share of the
    /// connections; default min(connections, available cores).
    pub threads: Option<usize>,
    /// Limit for connecting (TCP and TLS handshake) and, separately, for each request and
    /// its whole response (`-timeout`).
    pub timeout: Duration,
    /// Request body; a non-empty payload makes the method POST (`-payload*`).
    pub payload: Vec<u8>,
    /// Content-Type of the payload; setting it also makes the method POST.
    pub content_type: Option<String>,
    /// Method override (`-X`).
    pub method: Option<String>,
    /// Speak HTTP/1.0 (`-http1.0`): no Host header unless given, one request per connection.
    pub http10: bool,
    /// Reuse connections (`-keepalive`, default true); false sends `Connection: close`.
    pub keepalive: bool,
    /// Spread the connections' start times evenly over one period (`-uniform`).
    pub uniform: bool,
    /// Add +/-10% random jitter to each pause (`-jitter`).
    pub jitter: bool,
    /// Do not abort the run when a warm-up call fails (`-allow-initial-errors`).
    pub allow_initial_errors: bool,
    /// Stop the run when a call returns this status (`-abort-on`; -1 for socket errors).
    pub abort_on: Option<i32>,
    /// Connect to this address instead of resolving the URL's host (`-resolve`); Host, SNI
    /// and certificate checks still use the URL's host.
    pub resolve: Option<IpAddr>,
    /// Labels for the JSON result (`-labels`); default "<url without scheme> , <hostname>".
    pub labels: Option<String>,
    /// Set it (from any thread) to end the run early; calls in flight complete.
    pub stop: Arc<AtomicBool>,
    /// When set, incremented after every measured call (for progress displays).
    pub progress: Option<Arc<AtomicU64>>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            url: String::new(),
            connections: 4,
            qps: 8.0,
            duration: Some(Duration::from_secs(5)),
            count: None,
            percentiles: DEFAULT_PERCENTILES.to_vec(),
            resolution: 0.001,
            headers: Vec::new(),
            insecure: false,
            ca_cert: None,
            client_cert: None,
            client_key: None,
            tls_version: None,
            cipher: None,
            threads: None,
            timeout: Duration::from_secs(3),
            payload: Vec::new(),
            content_type: None,
            method: None,
            http10: false,
            keepalive: true,
            uniform: false,
            jitter: false,
            allow_initial_errors: false,
            abort_on: None,
            resolve: None,
            labels: None,
            stop: Arc::new(AtomicBool::new(false)),
            progress: None,
        }
    }
}

impl LoadOptions {
    /// The request method: `-X`, else POST with a payload or content type, else GET.
    pub fn method(&self) -> &str {
        match &self.method {
            Some(m) if !m.is_empty() => m,
            _ if !self.payload.is_empty() || self.content_type.is_some() => "POST",
            _ => "GET",
        }
    }
}

/// Why a run could not start or was aborted before measuring.
#[derive(Debug)]
pub enum LoadError {
    /// An option is out of range or inconsistent.
    Options(String),
    /// The URL cannot be used.
    Url(String),
    /// The TLS configuration cannot be built (cipher, version, certificate files).
    Tls(String),
    /// The host name does not resolve.
    Resolve(String),
    /// A warm-up call failed (and `allow_initial_errors` is off).
    Warmup(String),
    /// A client thread or runtime could not start.
    Runtime(String),
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LoadError::Options(m) => write!(f, "invalid options: {m}"),
            LoadError::Url(m) => write!(f, "invalid URL: {m}"),
            LoadError::Tls(m) => write!(f, "TLS configuration: {m}"),
            LoadError::Resolve(m) => write!(f, "cannot resolve: {m}"),
            LoadError::Warmup(m) => f.write_str(m),
            LoadError::Runtime(m) => write!(f, "runtime: {m}"),
        }
    }
}

impl std::error::Error for LoadError {}

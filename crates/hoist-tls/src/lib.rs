//! Everything between the TCP socket and HTTP bytes.
//!
//! - [`client_hello`]: Envoy's tls_inspector: SNI, ALPN and versions from the ClientHello,
//!   read from the socket in whole records.
//! - [`server_config`]: a `DownstreamTlsContext` as a rustls server configuration;
//!   [`client`]: an `UpstreamTlsContext` as a rustls client configuration.
//! - [`handshake`]: the server handshake over the unbuffered rustls API, reading whole records
//!   only, so that the connection can be handed to kernel TLS afterwards; [`connect`]: the
//!   client handshake toward upstreams, with the same discipline. [`side`]: what the two
//!   directions share, so that everything after the handshake is written once.
//! - [`transport`]: the one trait the HTTP codecs write to (read, write, write a file region),
//!   with its implementations: [`plain`] TCP, [`userspace`] TLS (rustls records), and kernel
//!   TLS ([`offload::KtlsTransport`]).
//! - [`offload`]: kernel TLS: the capability probe, the switch after the handshake, the
//!   transport, and the per-socket software/hardware state.
//! - [`splice`]: bodies forwarded socket -> pipe -> socket with splice(2) (plain and kernel
//!   TLS on both ends).
//! - [`file`]: file-backed payloads (mapped once, sent with sendfile or encrypted in place).
//! - [`names`]: rustls enums under the names Envoy's stats use.
//!
//! This is the only crate of the workspace allowed to hold `unsafe` code (the kTLS socket
//! options and memory-mapped payloads); each block carries a `// SAFETY:` comment.
#![deny(unsafe_code)]

mod buf;
pub mod client;
pub mod client_hello;
pub mod connect;
pub mod file;
pub mod handshake;
pub mod names;
pub mod offload;
pub mod plain;
mod record;
pub mod server_config;
pub mod side;
pub mod splice;
pub mod transport;
pub mod userspace;
mod x509;

pub use client_hello::{read_client_hello, ClientHelloInfo, Inspect};
pub use connect::connect;
pub use handshake::{accept, Established, HandshakeError, HandshakeErrorKind};
pub use offload::KtlsTransport;
pub use plain::PlainTransport;
pub use server_config::{ServerContext, TlsConfigError};
pub use side::Side;
pub use transport::{TlsInfo, Transport};
pub use userspace::UserTlsTransport;

/// Kernel TLS on an upstream (client) connection.
pub type ClientKtlsTransport =
    KtlsTransport<offload::sys::Linux, rustls::client::UnbufferedClientConnection>;
/// User-space TLS on an upstream (client) connection.
pub type ClientUserTlsTransport = UserTlsTransport<rustls::client::UnbufferedClientConnection>;

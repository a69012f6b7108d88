//! Everything between the TCP socket and HTTP bytes.
//!
//! - [`transport`]: the one trait the HTTP codecs write to (read, write, write a file region),
//!   with its implementations: plain TCP, user-space TLS (rustls), and kernel TLS (later).
//! - [`file`]: file-backed payloads (mapped once, sent with sendfile or encrypted in place).
//!
//! This is the only crate of the workspace allowed to hold `unsafe` code (the kTLS socket
//! options and memory-mapped payloads); each block carries a `// SAFETY:` comment.
#![deny(unsafe_code)]

pub mod file;
pub mod transport;

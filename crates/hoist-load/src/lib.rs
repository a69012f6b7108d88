//! `hoist load`: a load generator that speaks Fortio's language (flags, text report, JSON
//! field names) so results can be pasted next to `fortio load`'s, with an HTTP/1.1 client that
//! is correct for any body size and cheap enough not to be the bottleneck.
//!
//! - [`run`] with [`LoadOptions`] is the library entry point (`hoist bench` calls it);
//!   [`RunResult`] carries the histograms, codes, sizes and sockets, renders Fortio's text
//!   report ([`RunResult::text_report`]) and JSON ([`RunResult::to_json`]).
//! - [`cli::main`] is the `hoist load` command line (Go `flag` syntax, see [`flags`]).
//!
//! Inside: [`plan`] splits calls over connections as Fortio's periodic runner does; the
//! runner drives them on client threads, one single-threaded tokio runtime each; every
//! connection owns a [`client`] with a reused read buffer, plain TCP or rustls (aws-lc-rs,
//! unbuffered API) underneath ([`transport`]), and a streaming [`response`] reader that counts
//! body bytes and drops them; [`histogram`] is Fortio's, value for value; [`gofmt`] prints
//! numbers the way Go does.
#![forbid(unsafe_code)]

pub mod cli;
pub mod client;
pub mod flags;
pub mod gofmt;
pub mod histogram;
mod json;
pub mod options;
mod periodic;
pub mod plan;
pub mod response;
mod result;
mod runner;
pub mod tls;
pub mod transport;
pub mod url;

pub use histogram::{Bucket, Counter, HistogramData, Percentile};
pub use options::{LoadError, LoadOptions, TlsVersion, DEFAULT_PERCENTILES};
pub use result::{start_lines, ConnectionReport, RunResult, VERSION};
pub use runner::run;
pub use transport::Negotiated;

//! Envoy-compatible stats for hoist: counters, gauges and histograms written by many workers
//! and merged when the admin reads them.
//!
//! # Thread model
//!
//! Envoy runs N workers, each a single-threaded event loop, plus a main thread that serves the
//! admin. [`Store::new(workers)`](Store::new) gives every stat `workers + 1` *slots*: slot `i`
//! belongs to worker `i`, slot [`Store::main_slot`] to the main thread. A slot is written by one
//! thread only, so the hot path is a relaxed load and a relaxed store on a cache line no other
//! thread writes (cells are 128-byte aligned): no lock, no `lock`-prefixed instruction, no
//! contention. Readers (the admin) sum the slots.
//!
//! # Using it from a worker
//!
//! Creating or looking up a stat by name takes the registry lock; do it once, when a listener
//! or connection manager is set up on the worker, and keep the handle bound to the worker's
//! slot:
//!
//! ```
//! use hoist_stats::{ImportMode, Store, Unit};
//!
//! let store = Store::new(2); // two workers, slots 0 and 1; the main thread has slot 2
//! let worker = 0;
//! let rq_total = store.counter("http.ingress_http.downstream_rq_total").bind(worker);
//! let cx_active = store.gauge("http.ingress_http.downstream_cx_active", ImportMode::Accumulate).bind(worker);
//! let rq_time = store.histogram("http.ingress_http.downstream_rq_time", Unit::Milliseconds).bind(worker);
//!
//! cx_active.inc();
//! rq_total.inc();
//! rq_time.record(3);
//! cx_active.dec();
//! assert_eq!(store.counter("http.ingress_http.downstream_rq_total").value(), 1);
//! ```
//!
//! # Dynamic names
//!
//! Names that depend on the connection (`listener.<addr>.ssl.ciphers.<cipher>`,
//! `ssl.curves.<curve>`, `ssl.versions.<version>`) are created on first use. A worker keeps a
//! [`DynamicCounters`] per prefix: a small map from the suffix to the bound counter, so only the
//! first connection with a new cipher takes the registry lock. The suffixes must come from a
//! bounded set (the ciphers, curves and versions the listener's TLS config allows), never from
//! a free-form peer string, or a peer could grow the store without bound.
//!
//! # Histograms
//!
//! Recording is per slot too. [`Store::merge_histograms`] (Envoy's periodic stats flush, every
//! 5 s by default, on the main thread) sums the slots into a *cumulative* snapshot and keeps the
//! difference from the previous merge as the *interval* snapshot; the admin renders both.
//!
//! # Rendering
//!
//! [`render`] produces the admin's `/stats` text, `?format=json` and `/stats/prometheus`
//! bodies from [`StatsParams`] (parsed from the query string by [`StatsParams::from_query`]).
#![forbid(unsafe_code)]

mod cell;
mod counter;
mod dynamic;
mod gauge;
mod histogram;
mod numfmt;
mod params;
pub mod render;
mod store;
pub mod tags;

pub use counter::{Counter, WorkerCounter};
pub use dynamic::DynamicCounters;
pub use gauge::{Gauge, ImportMode, WorkerGauge};
pub use histogram::{
    Histogram, HistogramStatistics, Unit, WorkerHistogram, BUCKET_BOUNDS, SUPPORTED_QUANTILES,
};
pub use params::{parse_query, StatsFormat, StatsParams, StatsType};
pub use render::{render, Rendered};
pub use store::Store;

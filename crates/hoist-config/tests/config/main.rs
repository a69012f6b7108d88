//! Decoding and error tests: every kind of fault asserts the exact message with its YAML path.

mod common;

mod access_log;
mod bootstrap;
mod hcm;
mod listener;
mod merge;
mod route;
mod tls;

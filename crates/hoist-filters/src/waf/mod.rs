//! The WAF filter: runs a SecLang rule set (the OWASP Core Rule Set) on each request with
//! hoist-waf. Configured as Coraza is on Envoy (envoy.filters.http.wasm with Coraza's JSON) or
//! natively (hoist.filters.http.waf, same JSON as the typed_config body).
//!
//! Request headers are inspected in `decode_headers` (phase 1); the body, when the rules want
//! it (SecRequestBodyAccess), is buffered whole by the chain up to SecRequestBodyLimit and
//! inspected in `decode_data` (phase 2) before it is passed on (past the limit: 413 with
//! SecRequestBodyLimitAction Reject, else its first bytes inspected and all of it passed
//! on); the response head (phase 3) always; the response body (phase 4) with
//! SecResponseBodyAccess and a listed MIME type, up to SecResponseBodyLimit (a proxied body
//! is held back that far, see hoist's `response_body`), else phase 4 runs on no body right
//! after phase 3. A disruptive rule answers 403 (or its `status`).

mod config;

use std::cell::RefCell;
use std::fmt::Write;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use hoist_config::model::RawTypedConfig;
use hoist_config::ConfigError;
use hoist_http::{RequestHead, ResponseHead, Version};
use hoist_stats::{DynamicCounters, Unit, WorkerCounter, WorkerHistogram};
use hoist_waf::{Interruption, RuleSet, Transaction};
use http::HeaderValue;

use crate::chain::BuildContext;
use crate::filter::{FilterStatus, HttpFilter, LocalReply, StreamContext, StreamInfo, StreamState};
use config::WafConfig;
pub use config::{NATIVE_TYPE_NAME, WASM_TYPE_NAME};

pub struct Config {
    waf: WafConfig,
    stats_prefix: String,
    stats: Arc<hoist_stats::Store>,
    tx_total: hoist_stats::Counter,
    tx_interrupted: hoist_stats::Counter,
    request_body_partial: hoist_stats::Counter,
    processing_time: hoist_stats::Histogram,
}

impl Config {
    pub fn decode(raw: &RawTypedConfig, cx: &BuildContext<'_>) -> Result<Config, ConfigError> {
        let waf = WafConfig::decode(raw)?;
        let prefix = format!("http.{}.waf.", cx.stat_prefix);
        Ok(Config {
            waf,
            tx_total: cx.stats.counter(&format!("{prefix}tx_total")),
            tx_interrupted: cx.stats.counter(&format!("{prefix}tx_interrupted")),
            request_body_partial: cx.stats.counter(&format!("{prefix}request_body_partial")),
            processing_time: cx
                .stats
                .histogram(&format!("{prefix}processing_time_us"), Unit::Microseconds),
            stats: cx.stats.clone(),
            stats_prefix: format!("{prefix}interrupted_rule."),
        })
    }

    /// The WAF has no per-route settings (Coraza's Wasm filter has none either).
    pub fn decode_route(&self, raw: &RawTypedConfig) -> Result<(), ConfigError> {
        Err(ConfigError::new(
            raw.yaml_path.clone(),
            "the WAF filter takes no typed_per_filter_config",
        ))
    }
}

/// Per-worker state: stats bound to the worker's slot and a transaction counter for
/// UNIQUE_ID.
pub struct Worker {
    config: Arc<Config>,
    slot: usize,
    tx_total: WorkerCounter,
    tx_interrupted: WorkerCounter,
    /// Request bodies inspected only up to SecRequestBodyLimit (ProcessPartial): the rest
    /// went to the upstream unseen.
    request_body_partial: WorkerCounter,
    processing_time: WorkerHistogram,
    /// interruptions per rule id; the ids come from the loaded rules, a bounded set.
    by_rule: RefCell<DynamicCounters>,
    next_id: std::cell::Cell<u64>,
    ids: RefCell<IdText>,
}

/// REMOTE_ADDR's and UNIQUE_ID's text for the next transaction, written into the same
/// buffers each time: formatting them afresh (`format!`, `IpAddr::to_string`) was ~2,000
/// instructions per request, and the requests of a connection share the address.
#[derive(Default)]
struct IdText {
    client: Option<IpAddr>,
    client_text: String,
    unique_id: String,
}

impl IdText {
    /// UNIQUE_ID is `<worker>-<connection>-<transaction>`.
    fn update(&mut self, client: IpAddr, worker: usize, connection: u64, tx: u64) {
        if self.client != Some(client) {
            self.client_text.clear();
            // Writing to a String does not fail.
            let _ = write!(self.client_text, "{client}");
            self.client = Some(client);
        }
        self.unique_id.clear();
        let mut digits = itoa::Buffer::new();
        self.unique_id.push_str(digits.format(worker));
        self.unique_id.push('-');
        self.unique_id.push_str(digits.format(connection));
        self.unique_id.push('-');
        self.unique_id.push_str(digits.format(tx));
    }
}

impl Worker {
    pub fn new(config: Arc<Config>, slot: usize) -> Worker {
        Worker {
            tx_total: config.tx_total.bind(slot),
            tx_interrupted: config.tx_interrupted.bind(slot),
            request_body_partial: config.request_body_partial.bind(slot),
            processing_time: config.processing_time.bind(slot),
            by_rule: RefCell::new(DynamicCounters::new(
                config.stats.clone(),
                slot,
                config.stats_prefix.clone(),
            )),
            next_id: std::cell::Cell::new(0),
            ids: RefCell::default(),
            slot,
            config,
        }
    }

    pub fn stream(&self) -> Filter<'_> {
        Filter {
            worker: self,
            tx: None,
            interrupted: None,
            elapsed_ns: 0,
        }
    }
}

pub struct Filter<'w> {
    worker: &'w Worker,
    /// Boxed: a transaction is large and the chain's stream enum holds every filter inline.
    tx: Option<Box<Transaction>>,
    interrupted: Option<Interruption>,
    elapsed_ns: u64,
}

/// REQUEST_PROTOCOL as CRS's allowed_http_versions lists it.
fn version_name(v: Version) -> &'static str {
    match v {
        Version::Http10 => "HTTP/1.0",
        Version::Http11 => "HTTP/1.1",
        Version::Http2 => "HTTP/2.0",
    }
}

impl Filter<'_> {
    fn rules_for(&self, authority: Option<&str>) -> Arc<RuleSet> {
        let waf = &self.worker.config.waf;
        authority
            .and_then(|a| waf.per_authority.get(a))
            .unwrap_or(&waf.default)
            .clone()
    }

    /// Runs one engine step, timing it, and turns an interruption into the local reply.
    fn step(&mut self, f: impl FnOnce(&mut Transaction) -> Option<Interruption>) -> FilterStatus {
        let Some(tx) = self.tx.as_mut() else {
            return FilterStatus::Continue;
        };
        let start = Instant::now();
        let interruption = f(tx);
        self.elapsed_ns += u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        match interruption {
            None => FilterStatus::Continue,
            Some(i) => {
                let reply = reply_for(&i);
                self.interrupted = Some(i);
                // The transaction is over: later phases must not run it again.
                self.finish();
                FilterStatus::Reply(reply)
            }
        }
    }

    /// Logs the matched rules (ModSecurity's error-log lines) and closes the transaction.
    fn finish(&mut self) {
        if let Some(mut tx) = self.tx.take() {
            tx.process_logging();
            for m in tx.matched_rules().iter().filter(|m| m.logged()) {
                tracing::warn!(target: "hoist::waf", "{}", m.log_line());
            }
        }
    }
}

fn reply_for(i: &Interruption) -> LocalReply {
    let mut reply = LocalReply::new(i.status, Bytes::new(), "waf_interrupted");
    if let Some(location) = i
        .redirect
        .as_deref()
        .and_then(|l| HeaderValue::from_str(l).ok())
    {
        reply.headers.insert(http::header::LOCATION, location);
    }
    reply
}

impl HttpFilter for Filter<'_> {
    async fn decode_headers(
        &mut self,
        head: &mut RequestHead,
        end_stream: bool,
        cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        let rules = self.rules_for(head.authority.as_deref());
        let id = self.worker.next_id.get().wrapping_add(1);
        self.worker.next_id.set(id);
        let mut ids = self.worker.ids.borrow_mut();
        let client = cx.info.downstream_remote.ip();
        ids.update(client, self.worker.slot, cx.info.connection_id, id);
        let mut tx = Transaction::new(rules, &ids.client_text, &ids.unique_id);
        drop(ids);
        tx.process_request_line(head.method.as_str(), &head.path, version_name(head.version));
        if !head.headers.contains_key(http::header::HOST) {
            if let Some(authority) = &head.authority {
                tx.add_request_header("Host", authority.as_bytes());
            }
        }
        for (name, value) in &head.headers {
            tx.add_request_header(name.as_str(), value.as_bytes());
        }
        self.tx = Some(Box::new(tx));
        let status = self.step(|tx| tx.process_request_headers().cloned());
        if !matches!(status, FilterStatus::Continue) {
            return status;
        }
        // Phase 1 may have switched body access (ctl:requestBodyAccess).
        let body_access = self.tx.as_ref().is_some_and(|tx| tx.request_body_access());
        if end_stream || !body_access {
            return self.step(|tx| tx.process_request_body().cloned());
        }
        FilterStatus::StopAndBuffer
    }

    fn buffer_limit(&self) -> Option<u64> {
        self.tx
            .as_ref()
            .map(|tx| u64::try_from(tx.request_body_limit()).unwrap_or(u64::MAX))
    }

    /// SecRequestBodyLimitAction ProcessPartial, or an engine that would not block: the
    /// engine cuts the body at its limit itself (`append_request_body`).
    fn partial_body(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.request_body_partial())
    }

    async fn decode_data(&mut self, body: &Bytes, _cx: &mut StreamContext<'_>) -> FilterStatus {
        let mut partial = false;
        let status = self.step(|tx| {
            partial = !tx.append_request_body(body) && tx.request_body_partial();
            tx.process_request_body().cloned()
        });
        if partial {
            self.worker.request_body_partial.inc();
        }
        status
    }

    fn encode_headers(
        &mut self,
        head: &mut ResponseHead,
        _cx: &mut StreamContext<'_>,
    ) -> FilterStatus {
        if self.interrupted.is_some() {
            // Our own local reply going out: nothing to inspect.
            return FilterStatus::Continue;
        }
        let status = self.step(|tx| {
            tx.set_response_status(head.status, "HTTP/1.1");
            for (name, value) in &head.headers {
                tx.add_response_header(name.as_str(), value.as_bytes());
            }
            tx.process_response_headers().cloned()
        });
        if !matches!(status, FilterStatus::Continue) || self.wants_response_body() {
            return status;
        }
        // No body to inspect (SecResponseBodyAccess Off, or a MIME type not listed): phase 4
        // still runs, on an empty RESPONSE_BODY, as in ModSecurity and Coraza; CRS checks the
        // outbound anomaly score there (959100).
        self.step(|tx| tx.process_response_body().cloned())
    }

    fn wants_response_body(&self) -> bool {
        self.tx.as_ref().is_some_and(|tx| tx.wants_response_body())
    }

    fn response_body_limit(&self) -> Option<u64> {
        self.tx
            .as_ref()
            .map(|tx| u64::try_from(tx.response_body_limit()).unwrap_or(u64::MAX))
    }

    fn encode_data(&mut self, body: &[u8], _cx: &mut StreamContext<'_>) -> FilterStatus {
        self.step(|tx| {
            tx.append_response_body(body);
            tx.process_response_body().cloned()
        })
    }

    fn log(&mut self, _info: &StreamInfo<'_>, _state: &StreamState, _status: u16) {
        let w = self.worker;
        let started = self.tx.is_some() || self.interrupted.is_some();
        self.finish();
        if !started {
            return;
        }
        w.tx_total.inc();
        w.processing_time.record(self.elapsed_ns / 1000);
        if let Some(i) = &self.interrupted {
            w.tx_interrupted.inc();
            w.by_rule.borrow_mut().inc(&i.rule_id.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_text_matches_the_formatted_values() {
        let mut ids = IdText::default();
        let cases: [(IpAddr, usize, u64, u64); 4] = [
            ("127.0.0.1".parse().unwrap(), 0, 0, 1),
            ("127.0.0.1".parse().unwrap(), 3, 17, 1_000_000),
            ("::1".parse().unwrap(), 12, u64::MAX, 9),
            ("10.1.2.3".parse().unwrap(), 1, 42, 10),
        ];
        for (ip, worker, conn, tx) in cases {
            ids.update(ip, worker, conn, tx);
            assert_eq!(ids.client_text, ip.to_string());
            assert_eq!(ids.unique_id, format!("{worker}-{conn}-{tx}"));
        }
    }
}

//! One request/response exchange as the connection manager accounts for it: request
//! preparation (x-request-id), router stats, completion stats and the access log. Both codecs
//! call into this, so HTTP/1.1 and HTTP/2 requests are counted and logged the same way.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use hoist_http::{RequestHead, Version};
use http::HeaderValue;

use crate::access_log::{LogContext, WorkerAccessLog};
use crate::conn_manager::{HcmRuntime, Outcome, Reply};
use crate::connection::ConnInfo;
use crate::stats_scope::HcmWorkerStats;
use crate::worker::Worker;

/// A connection manager as one worker runs it: the shared configuration, this worker's stats
/// handles and access-log buffers.
pub struct HcmWorker {
    pub rt: Arc<HcmRuntime>,
    pub stats: HcmWorkerStats,
    loggers: RefCell<Vec<WorkerAccessLog>>,
}

/// What `finish_stream` needs to know about a finished exchange.
pub struct StreamRecord<'a> {
    pub start_wall: SystemTime,
    /// None when the request never got a valid head (a codec error).
    pub head: Option<&'a RequestHead>,
    pub version: Version,
    pub reply: &'a Reply,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    /// Until the last response byte was handed to the transport.
    pub duration: Duration,
    pub conn: &'a ConnInfo,
}

impl HcmWorker {
    pub fn new(rt: Arc<HcmRuntime>, stats: HcmWorkerStats) -> HcmWorker {
        let loggers = rt.access_logs.iter().map(|l| l.worker()).collect();
        HcmWorker {
            rt,
            stats,
            loggers: RefCell::new(loggers),
        }
    }

    /// Envoy's request preparation that matters without upstreams: `x-request-id`.
    pub fn prepare_request(&self, head: &mut RequestHead, _conn: &ConnInfo) {
        if self.rt.generate_request_id && !head.headers.contains_key("x-request-id") {
            if let Ok(v) = HeaderValue::from_str(&crate::request_id::uuid4()) {
                head.headers.insert("x-request-id", v);
            }
        }
    }

    pub fn count_outcome(&self, outcome: Outcome) {
        match outcome {
            Outcome::DirectResponse => self.stats.rq_direct_response.inc(),
            Outcome::Redirect => self.stats.rq_redirect.inc(),
            Outcome::NoRoute => self.stats.no_route.inc(),
            Outcome::LocalReply => {}
        }
    }

    pub fn finish_stream(&self, r: &StreamRecord<'_>) {
        let status = r.reply.head.status;
        self.stats.completed(status);
        self.stats.rq_time.record(r.duration.as_millis() as u64);
        self.stats.rq_active.dec();
        let mut loggers = self.loggers.borrow_mut();
        if loggers.is_empty() {
            return;
        }
        let ctx = LogContext {
            request_complete: Some(r.duration),
            response_complete: Some(r.duration),
            method: r.head.map(|h| h.method.as_str()),
            path: r.head.map(|h| h.path.as_str()),
            authority: r.head.and_then(|h| h.authority.as_deref()),
            scheme: Some(r.conn.scheme()),
            protocol: Some(r.version.as_str()),
            request_headers: r.head.map(|h| &h.headers),
            response_headers: Some(&r.reply.head.headers),
            response_code: Some(status),
            response_code_details: Some(r.reply.details),
            response_flags: r.reply.flags,
            bytes_received: r.bytes_received,
            bytes_sent: r.bytes_sent,
            downstream_remote: Some(r.conn.remote),
            downstream_direct_remote: Some(r.conn.remote),
            downstream_local: Some(r.conn.local),
            tls: r.conn.tls.as_ref(),
            route_name: r.reply.route_name.as_deref(),
            connection_id: Some(r.conn.id),
            ..LogContext::new(r.start_wall)
        };
        for logger in loggers.iter_mut() {
            if let Err(e) = logger.log(&ctx) {
                tracing::warn!("access log write failed: {e}");
            }
        }
    }

    /// Writes buffered lines that have waited a second or more (`all`: every buffered line).
    pub fn flush_logs(&self, all: bool) {
        let now = Instant::now();
        for logger in self.loggers.borrow_mut().iter_mut() {
            let r = if all {
                logger.flush()
            } else {
                logger.flush_if_due(now)
            };
            if let Err(e) = r {
                tracing::warn!("access log write failed: {e}");
            }
        }
    }
}

/// Envoy flushes file access logs every second (file_flush_interval); so does each worker.
pub fn spawn_log_flusher(worker: Rc<Worker>) {
    tokio::task::spawn_local(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            for hcm in worker.hcms.borrow().iter() {
                hcm.flush_logs(false);
            }
        }
    });
}

/// At shutdown: everything buffered goes out.
pub fn flush_logs(worker: &Worker) {
    for hcm in worker.hcms.borrow().iter() {
        hcm.flush_logs(true);
    }
}

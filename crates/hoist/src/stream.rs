//! One request/response exchange as the connection manager accounts for it: request
//! preparation (x-request-id), router stats, completion stats and the access log. Both codecs
//! call into this, so HTTP/1.1 and HTTP/2 requests are counted and logged the same way.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use hoist_filters::{
    Decision, LocalReply, StreamFilters, StreamInfo, StreamState, WorkerFilterChain,
};
use hoist_http::{Body, RequestHead, Version};
use http::HeaderValue;

use crate::access_log::{LogContext, WorkerAccessLog};
use crate::conn_manager::{HcmRuntime, Outcome, Reply, Routing};
use crate::connection::ConnInfo;
use crate::request_body::{self, Prefixed, Read};
use crate::response_body;
use crate::router::Action;
use crate::stats_scope::HcmWorkerStats;
use crate::upstream::forward::{self, Source};
use crate::upstream::WorkerClusters;
use crate::worker::Worker;

/// A connection manager as one worker runs it: the shared configuration, this worker's stats
/// handles and access-log buffers.
pub struct HcmWorker {
    pub rt: Arc<HcmRuntime>,
    pub stats: HcmWorkerStats,
    filters: WorkerFilterChain,
    loggers: RefCell<Vec<WorkerAccessLog>>,
    /// The worker's clusters (pools, balancers), shared by its connection managers.
    clusters: Rc<WorkerClusters>,
}

/// A request body as the codec delivers it, whatever the protocol.
#[allow(async_fn_in_trait)] // Used on single-threaded workers only.
pub trait RequestBody {
    /// Why the body could not be read (the codec's error, a timeout, a reset).
    type Error;
    /// The next piece of the body; Ok(None) at its end.
    async fn next_chunk(&mut self) -> Result<Option<Bytes>, Self::Error>;
}

/// A request the connection manager has answered (not yet written).
pub struct Handled<'w> {
    pub reply: Reply,
    pub filters: StreamFilters<'w>,
    pub state: StreamState,
    /// The request body was left unread (a filter answered first): the HTTP/1.1 codec then
    /// discards it or closes the connection.
    pub body_unread: bool,
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
    pub fn new(
        rt: Arc<HcmRuntime>,
        stats: HcmWorkerStats,
        slot: usize,
        clusters: Rc<WorkerClusters>,
    ) -> HcmWorker {
        let loggers = rt.access_logs.iter().map(|l| l.worker()).collect();
        HcmWorker {
            filters: rt.filters.worker(slot),
            rt,
            stats,
            loggers: RefCell::new(loggers),
            clusters,
        }
    }

    /// Everything between a parsed head and the reply: route, the HTTP filters in order
    /// (request headers, the body if a filter asked for it, response headers and body), the
    /// router's action, and the response headers filters add. `end_stream`: no body follows.
    /// `buffer_limit` bounds a buffered body (per_connection_buffer_limit_bytes) unless a
    /// filter names its own limit.
    pub async fn handle<B: RequestBody>(
        &self,
        head: &mut RequestHead,
        body: &mut B,
        end_stream: bool,
        conn: &ConnInfo,
        buffer_limit: u64,
    ) -> Result<Handled<'_>, B::Error> {
        let routing = self.rt.route(head, conn);
        let (route_name, has_route, route_configs, rate_limits) = match &routing {
            Routing::Route { vh, route } => (
                Some(route.name.as_str()),
                true,
                route.filter_configs.as_slice(),
                vh.rate_limits.as_slice(),
            ),
            Routing::Reply(_) => (None, false, &[][..], &[][..]),
        };
        let info = StreamInfo {
            downstream_remote: self.rt.downstream_remote(head, conn),
            downstream_local: conn.local,
            tls: conn.tls.as_ref(),
            connection_id: conn.id,
            route_name: route_name.filter(|n| !n.is_empty()),
            has_route,
            virtual_host_rate_limits: rate_limits,
        };
        let mut state = StreamState::default();
        let mut filters = self.filters.stream();
        let mut body_unread = false;
        let forwarding = matches!(
            &routing,
            Routing::Route { route, .. } if matches!(route.action, Action::Forward(_))
        );
        // A body a filter read whole, for the upstream.
        let mut buffered: Option<Bytes> = None;
        // Or its first pieces, read for filters that inspect only so much (ProcessPartial):
        // streamed to the upstream ahead of the rest.
        let mut first_pieces: Option<Bytes> = None;
        let mut decision = if filters.is_empty() {
            Decision::Continue
        } else {
            filters
                .decode_headers(head, end_stream, &info, &mut state, route_configs)
                .await
        };
        if matches!(decision, Decision::NeedBody) {
            let limit = filters.body_limit(buffer_limit);
            decision = match request_body::read(body, limit).await? {
                Read::Whole(whole) => {
                    let d = filters
                        .decode_body(head, &whole, &info, &mut state, route_configs)
                        .await;
                    buffered = Some(whole);
                    d
                }
                Read::Partial(first) => {
                    let d = filters
                        .decode_body(head, &first, &info, &mut state, route_configs)
                        .await;
                    first_pieces = Some(first);
                    match d {
                        Decision::Continue if !forwarding => {
                            // As below: nothing takes the rest, so it is read and dropped.
                            while body.next_chunk().await?.is_some() {}
                        }
                        Decision::Continue => {}
                        _ => body_unread = true,
                    }
                    d
                }
                Read::TooLarge => {
                    self.stats.rq_too_large.inc();
                    body_unread = true;
                    Decision::Reply(LocalReply::new(
                        413,
                        "Payload Too Large",
                        "request_payload_too_large",
                    ))
                }
            };
        } else if matches!(decision, Decision::Continue) && !end_stream && forwarding {
            // The router streams it to the upstream.
        } else if matches!(decision, Decision::Continue) && !end_stream {
            // Nothing hoist answers by itself needs the body: take it and drop it, so the
            // connection stays in step (and a malformed body is still refused).
            while body.next_chunk().await?.is_some() {}
        } else if !end_stream {
            body_unread = true;
        }
        let mut reply = match (decision, routing) {
            (Decision::Reply(r), _) => self.filter_reply(r, &mut state),
            (_, Routing::Reply(r)) => *r,
            (_, Routing::Route { vh, route }) => match &route.action {
                Action::Forward(action) => {
                    let cx = forward::Context {
                        clusters: &self.clusters,
                        conn,
                        use_remote_address: self.rt.use_remote_address,
                        via: self.rt.via.as_ref(),
                        xff_num_trusted_hops: self.rt.xff_num_trusted_hops,
                        stream_idle_timeout: self.rt.stream_idle_timeout,
                        path_match: route.path_match(),
                    };
                    let mut stream = Prefixed::new(first_pieces.take(), body);
                    let source = match buffered.take() {
                        Some(b) => Source::Buffered(b),
                        None if end_stream => Source::None,
                        None => Source::Stream(&mut stream),
                    };
                    let f = forward::forward(&cx, action, head, source).await?;
                    if f.flags
                        .contains(hoist_http::ResponseFlags::STREAM_IDLE_TIMEOUT)
                    {
                        self.stats.rq_idle_timeout.inc();
                    }
                    body_unread |= f.body_unread;
                    self.rt.forwarded(head, vh, route, conn, f)
                }
                _ => self.rt.act(head, vh, route, conn),
            },
        };
        if !filters.is_empty() {
            if let Some(r) =
                filters.encode_headers(&mut reply.head, &info, &mut state, route_configs)
            {
                reply = self.filter_reply(r, &mut state);
            } else if filters.wants_response_body() {
                let replaced = match &reply.body {
                    Body::Empty => filters.encode_data(&[], &info, &mut state, route_configs),
                    Body::Bytes(b) => filters.encode_data(b, &info, &mut state, route_configs),
                    Body::File(f) => {
                        filters.encode_data(f.bytes(), &info, &mut state, route_configs)
                    }
                    // The answer to HEAD has no body to hold back (and its stream's
                    // length is the GET's, which an in-memory body would not keep).
                    Body::Stream(_) if head.method == http::Method::HEAD => {
                        filters.encode_data(&[], &info, &mut state, route_configs)
                    }
                    // A proxied body: held back up to the filters' limit (see
                    // `response_body`).
                    Body::Stream(s) => {
                        let limit = filters.response_body_limit();
                        match response_body::gather(s, limit).await.into_parts() {
                            Some((inspected, body)) => {
                                reply.body = body;
                                filters.encode_data(&inspected, &info, &mut state, route_configs)
                            }
                            None => None,
                        }
                    }
                };
                if let Some(r) = replaced {
                    reply = self.filter_reply(r, &mut state);
                }
            }
        }
        for (name, value) in state.response_headers_to_add.iter() {
            reply.head.headers.append(name.clone(), value.clone());
        }
        reply.flags = reply.flags | state.response_flags;
        Ok(Handled {
            reply,
            filters,
            state,
            body_unread,
        })
    }

    /// A filter's local reply as a full reply (date, server, its headers and flags).
    fn filter_reply(&self, r: LocalReply, state: &mut StreamState) -> Reply {
        state.response_flags = state.response_flags | r.flags;
        let body = if r.body.is_empty() {
            Body::Empty
        } else {
            Body::Bytes(r.body)
        };
        let mut reply =
            self.rt
                .local_reply(r.status, body, r.flags, r.details, Outcome::LocalReply);
        for (name, value) in r.headers.iter() {
            reply.head.headers.append(name.clone(), value.clone());
        }
        reply
    }

    /// Envoy's request preparation that matters without upstreams: `x-request-id`.
    pub fn prepare_request(&self, head: &mut RequestHead, _conn: &ConnInfo) {
        if self.rt.generate_request_id && !head.headers.contains_key("x-request-id") {
            if let Ok(v) = HeaderValue::from_bytes(&crate::request_id::uuid4()) {
                head.headers.insert("x-request-id", v);
            }
        }
    }

    pub fn count_outcome(&self, outcome: Outcome) {
        match outcome {
            Outcome::DirectResponse => self.stats.rq_direct_response.inc(),
            Outcome::Redirect => self.stats.rq_redirect.inc(),
            Outcome::NoRoute => self.stats.no_route.inc(),
            Outcome::LocalReply | Outcome::Forwarded => {}
        }
    }

    /// Counts and logs a finished exchange; the filters, when the request reached them, see
    /// its end too.
    pub fn finish_stream(
        &self,
        r: &StreamRecord<'_>,
        filters: Option<(&mut StreamFilters<'_>, &StreamState)>,
    ) {
        if let Some((filters, state)) = filters {
            let info = StreamInfo {
                downstream_remote: r
                    .head
                    .map_or(r.conn.remote, |h| self.rt.downstream_remote(h, r.conn)),
                downstream_local: r.conn.local,
                tls: r.conn.tls.as_ref(),
                connection_id: r.conn.id,
                route_name: r.reply.route_name.as_deref(),
                has_route: r.reply.route_name.is_some(),
                virtual_host_rate_limits: &[],
            };
            filters.log(&info, state, r.reply.head.status);
        }
        self.account(r);
    }

    fn account(&self, r: &StreamRecord<'_>) {
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
            downstream_remote: Some(
                r.head
                    .map_or(r.conn.remote, |h| self.rt.downstream_remote(h, r.conn)),
            ),
            downstream_direct_remote: Some(r.conn.remote),
            downstream_local: Some(r.conn.local),
            tls: r.conn.tls.as_ref(),
            route_name: r.reply.route_name.as_deref(),
            connection_id: Some(r.conn.id),
            upstream_host: r.reply.upstream_host,
            upstream_cluster: r.reply.upstream_cluster.as_deref(),
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

//! The HTTP/1.1 side of the connection manager: a keep-alive loop over the codec, with Envoy's
//! timeouts, drain behaviour and local replies for codec errors.
//!
//! Timeouts, as Envoy applies them to HTTP/1.1:
//! - `common_http_protocol_options.idle_timeout`: no request in progress for that long closes
//!   the connection (`downstream_cx_idle_timeout`);
//! - `request_headers_timeout`: from the first byte of a request to the end of its head, 408;
//! - `request_timeout`: from the first byte of a request until it was fully received, 408;
//! - `stream_idle_timeout`: no progress while receiving a request body, 408.

use std::future::Future;
use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use bytes::{Bytes, BytesMut};
use hoist_http::h1::{BodyFraming, H1Conn, H1Error};
use hoist_http::{Body, RequestHead, Version};
use hoist_tls::transport::Transport;
use tokio::io::AsyncWriteExt;

use crate::access_log::ResponseFlags;
use crate::codec::Traffic;
use crate::conn_manager::HcmRuntime;
use crate::conn_manager::{Outcome, Reply};
use crate::connection::ConnInfo;
use crate::drain;
use crate::stream::{HcmWorker, RequestBody, StreamRecord};
use crate::worker::Worker;

/// What hoist reads and drops of what a client still sends after hoist closed its side.
const MAX_DISCARDED_BODY: u64 = 1 << 20;
/// After the last response, how long hoist keeps reading what the client still sends so that
/// closing does not reset the connection under the reply (a lingering close, as nginx does).
const LINGER: Duration = Duration::from_secs(2);

/// Why a request ended before it was answered.
enum Abort {
    /// The codec refused the request (400, 413, 431, 501, 505) or the peer went away.
    Codec(H1Error),
    /// One of the request timeouts fired: status, details, stat.
    Timeout(&'static str, &'static str, TimeoutKind),
}

#[derive(Clone, Copy)]
enum TimeoutKind {
    Headers,
    Request,
    StreamIdle,
}

pub async fn serve<T: Transport>(
    transport: T,
    buf: BytesMut,
    hcm: &Rc<HcmWorker>,
    info: &ConnInfo,
    worker: &Rc<Worker>,
    buffer_limit: u32,
) -> Traffic {
    let rt = &hcm.rt;
    let stats = &hcm.stats;
    let mut conn = H1Conn::with_buffer(transport, rt.limits, buf);
    let mut phase = worker.phase.clone();
    // Whether the peer ended the connection (then there is nothing to linger for).
    let mut peer_closed = false;
    loop {
        // Idle between requests: the idle timeout applies, and a drain closes the connection.
        let waited = tokio::select! {
            biased;
            r = within(rt.idle_timeout, conn.wait_for_request()) => r,
            _ = drain::draining(&mut phase) => {
                stats.cx_drain_close.inc();
                break;
            }
        };
        match waited {
            None => {
                stats.cx_idle_timeout.inc();
                break;
            }
            Some(Ok(true)) => {}
            Some(Ok(false)) => {
                peer_closed = !conn.should_close();
                stats.cx_destroy_remote.inc();
                break;
            }
            Some(Err(e)) => {
                peer_closed = !e.wants_reply();
                refuse(
                    &mut conn,
                    Abort::Codec(e),
                    hcm,
                    info,
                    None,
                    Instant::now(),
                    SystemTime::now(),
                )
                .await;
                break;
            }
        }
        let start = Instant::now();
        let start_wall = SystemTime::now();
        let mut head = match receive_head(&mut conn, hcm, start).await {
            Ok(Some(head)) => head,
            Ok(None) => {
                peer_closed = true;
                break;
            }
            Err(abort) => {
                peer_closed = matches!(&abort, Abort::Codec(e) if !e.wants_reply());
                refuse(&mut conn, abort, hcm, info, None, start, start_wall).await;
                break;
            }
        };
        stats.rq_total.inc();
        stats.rq_http1_total.inc();
        stats.rq_active.inc();
        hcm.prepare_request(&mut head, info);
        let end_stream = matches!(
            conn.request_info().framing,
            BodyFraming::None | BodyFraming::Length(0)
        );
        // Like Envoy, take the whole request before the reply (answering `Expect:
        // 100-continue` ourselves): a malformed body is then a 400, and the connection stays
        // in step. Filters may ask for the body or answer first.
        let handled = {
            let mut body = H1Body {
                conn: &mut conn,
                rt,
                start,
            };
            hcm.handle(
                &mut head,
                &mut body,
                end_stream,
                info,
                u64::from(buffer_limit),
            )
            .await
        };
        let mut handled = match handled {
            Ok(h) => h,
            Err(abort) => {
                peer_closed = matches!(&abort, Abort::Codec(e) if !e.wants_reply());
                refuse(&mut conn, abort, hcm, info, Some(&head), start, start_wall).await;
                break;
            }
        };
        hcm.count_outcome(handled.reply.outcome);
        let keep_alive = conn.request_info().keep_alive;
        let drain_close = worker.state.drain_close();
        let close = !keep_alive || drain_close;
        let is_head = head.method == http::Method::HEAD;
        let reply = &handled.reply;
        let written = conn
            .write_response(&reply.head, &reply.body, is_head, close)
            .await;
        let duration = start.elapsed();
        let (bytes_sent, write_ok) = match written {
            Ok(n) => (n, true),
            Err(_) => (0, false),
        };
        // A filter answered without the body: drop a little of it, or close.
        let body_left = handled.body_unread
            && write_ok
            && !close
            && !matches!(conn.discard_body(MAX_DISCARDED_BODY).await, Ok(true));
        let record = StreamRecord {
            start_wall,
            head: Some(&head),
            version: head.version,
            reply: &handled.reply,
            bytes_received: conn.request_body_bytes(),
            bytes_sent,
            duration,
            conn: info,
        };
        hcm.finish_stream(&record, Some((&mut handled.filters, &handled.state)));
        if body_left {
            break;
        }
        if drain_close && keep_alive {
            stats.cx_drain_close.inc();
        }
        if !write_ok {
            peer_closed = true;
            break;
        }
        if close || conn.should_close() {
            break;
        }
    }
    let traffic = Traffic {
        rx: conn.bytes_read(),
        tx: conn.bytes_written(),
    };
    if peer_closed {
        let mut transport = conn.into_transport();
        let _ = tokio::time::timeout(Duration::from_secs(1), transport.shutdown()).await;
    } else {
        // A clean end from our side: close_notify on TLS, FIN, and a lingering read so the
        // client sees the last response rather than a reset caused by unread bytes.
        let _ = tokio::time::timeout(LINGER, conn.lingering_close(MAX_DISCARDED_BODY)).await;
        stats.cx_destroy_local.inc();
    }
    traffic
}

/// Reads the request head within request_headers_timeout and request_timeout.
async fn receive_head<T: Transport>(
    conn: &mut H1Conn<T>,
    hcm: &HcmWorker,
    start: Instant,
) -> Result<Option<RequestHead>, Abort> {
    let rt = &hcm.rt;
    let (limit, kind) = match (rt.request_headers_timeout, rt.request_timeout) {
        (Some(h), Some(r)) if r < h => (Some(r), TimeoutKind::Request),
        (Some(h), _) => (Some(h), TimeoutKind::Headers),
        (None, r) => (r, TimeoutKind::Request),
    };
    match within(
        limit.map(|l| l.saturating_sub(start.elapsed())),
        conn.read_request(),
    )
    .await
    {
        Some(r) => r.map_err(Abort::Codec),
        None => Err(timeout_abort(kind)),
    }
}

/// The HTTP/1.1 request body for the connection manager: each piece must come within
/// stream_idle_timeout, the whole request within request_timeout.
struct H1Body<'c, T: Transport> {
    conn: &'c mut H1Conn<T>,
    rt: &'c HcmRuntime,
    start: Instant,
}

impl<T: Transport> RequestBody for H1Body<'_, T> {
    type Error = Abort;

    async fn next_chunk(&mut self) -> Result<Option<Bytes>, Abort> {
        let left = self
            .rt
            .request_timeout
            .map(|r| r.saturating_sub(self.start.elapsed()));
        let (limit, kind) = match (self.rt.stream_idle_timeout, left) {
            (Some(idle), Some(left)) if idle < left => (Some(idle), TimeoutKind::StreamIdle),
            (_, Some(left)) => (Some(left), TimeoutKind::Request),
            (idle, None) => (idle, TimeoutKind::StreamIdle),
        };
        match within(limit, self.conn.read_body_chunk()).await {
            None => Err(timeout_abort(kind)),
            Some(r) => r.map_err(Abort::Codec),
        }
    }
}

fn timeout_abort(kind: TimeoutKind) -> Abort {
    match kind {
        TimeoutKind::Headers => {
            Abort::Timeout("request header timeout", "request_header_timeout", kind)
        }
        TimeoutKind::Request => Abort::Timeout("request timeout", "request_overall_timeout", kind),
        TimeoutKind::StreamIdle => Abort::Timeout("stream timeout", "stream_idle_timeout", kind),
    }
}

/// Answers a request that cannot be served (a codec error or a timeout) and logs it as Envoy
/// does; the caller then closes the connection. `head` is the request whose body failed
/// (already counted as a request), None when there was no valid head.
async fn refuse<T: Transport>(
    conn: &mut H1Conn<T>,
    abort: Abort,
    hcm: &Rc<HcmWorker>,
    info: &ConnInfo,
    head: Option<&RequestHead>,
    start: Instant,
    start_wall: SystemTime,
) {
    let stats = &hcm.stats;
    if let Abort::Codec(e) = &abort {
        if !e.wants_reply() {
            // The peer went away or the socket failed: nobody to answer.
            if head.is_some() {
                stats.rq_active.dec();
            }
            return;
        }
    }
    if head.is_none() {
        stats.rq_total.inc();
        stats.rq_active.inc();
    }
    let (mut reply, bytes_sent) = match &abort {
        Abort::Codec(e) => {
            stats.cx_protocol_error.inc();
            if matches!(e.status(), 413 | 431) {
                stats.rq_too_large.inc();
            }
            let reply = hcm.rt.local_reply(
                e.status(),
                Body::Empty,
                ResponseFlags::DOWNSTREAM_PROTOCOL_ERROR,
                e.details(),
                Outcome::LocalReply,
            );
            let _ = conn.write_error(e, &reply.head.headers).await;
            // The codec's error body is the reason phrase.
            let sent = http::StatusCode::from_u16(e.status())
                .ok()
                .and_then(|s| s.canonical_reason())
                .map_or(0, |r| r.len() as u64);
            (reply, sent)
        }
        Abort::Timeout(text, details, kind) => {
            let (flags, counter) = match kind {
                TimeoutKind::StreamIdle => {
                    (ResponseFlags::STREAM_IDLE_TIMEOUT, &stats.rq_idle_timeout)
                }
                TimeoutKind::Headers => (ResponseFlags::NONE, &stats.rq_header_timeout),
                TimeoutKind::Request => (ResponseFlags::NONE, &stats.rq_timeout),
            };
            counter.inc();
            let body = Body::Bytes(Bytes::from_static(text.as_bytes()));
            let reply: Reply = hcm
                .rt
                .local_reply(408, body, flags, details, Outcome::LocalReply);
            let sent = conn
                .write_response(&reply.head, &reply.body, false, true)
                .await
                .unwrap_or(0);
            (reply, sent)
        }
    };
    if matches!(abort, Abort::Codec(_)) {
        reply.head.headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain"),
        );
    }
    let record = StreamRecord {
        start_wall,
        head,
        version: head.map_or(Version::Http11, |h| h.version),
        reply: &reply,
        bytes_received: if head.is_some() {
            conn.request_body_bytes()
        } else {
            0
        },
        bytes_sent,
        duration: start.elapsed(),
        conn: info,
    };
    hcm.finish_stream(&record, None);
}

/// Runs `f` within `limit` (no limit: None). None means the time ran out.
async fn within<F: Future>(limit: Option<Duration>, f: F) -> Option<F::Output> {
    match limit {
        Some(d) => tokio::time::timeout(d, f).await.ok(),
        None => Some(f.await),
    }
}

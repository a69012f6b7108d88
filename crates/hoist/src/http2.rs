//! The HTTP/2 side of the connection manager, on the h2 crate: each stream is a local task on
//! the worker; the connection task drives the socket and the drain (GOAWAY).

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::{Buf, Bytes, BytesMut};
use h2::server::SendResponse;
use h2::RecvStream;
use hoist_http::{Body, RequestHead, Version};
use hoist_tls::file::FileRegion;
use hoist_tls::transport::Transport;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::codec::Traffic;
use crate::connection::ConnInfo;
use crate::drain;
use crate::stream::{HcmWorker, RequestBody, StreamRecord};
use crate::worker::Worker;

/// Request body bytes hoist reads and drops per stream before resetting it.
const MAX_DISCARDED_BODY: u64 = 1 << 20;

pub async fn serve<T: Transport>(
    transport: T,
    buf: BytesMut,
    hcm: &Rc<HcmWorker>,
    info: &ConnInfo,
    worker: &Rc<Worker>,
    buffer_limit: u32,
) -> Traffic {
    let rt = &hcm.rt;
    let traffic = Rc::new(TrafficCells::default());
    let io = Prefixed {
        prefix: buf.freeze(),
        inner: transport,
        traffic: traffic.clone(),
    };
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(rt.http2.max_concurrent_streams)
        .initial_window_size(rt.http2.initial_stream_window_size)
        .initial_connection_window_size(rt.http2.initial_connection_window_size)
        .max_header_list_size(rt.limits.max_request_headers_kb.saturating_mul(1024))
        // per_connection_buffer_limit_bytes bounds what a stream may queue for a slow reader.
        .max_send_buffer_size(buffer_limit as usize);
    let handshake = builder.handshake::<_, Bytes>(io);
    let mut conn = match tokio::time::timeout(Duration::from_secs(15), handshake).await {
        Ok(Ok(c)) => c,
        _ => {
            hcm.stats.cx_protocol_error.inc();
            return Traffic::default();
        }
    };
    let info = Rc::new(ConnSnapshot::new(info, buffer_limit));
    let activity = Rc::new(Activity {
        streams: Cell::new(0),
        last: Cell::new(Instant::now()),
    });
    let mut phase = worker.phase.clone();
    // Set when GOAWAY went out: the connection then has drain_timeout to finish its streams.
    let mut going_away: Option<Instant> = None;
    loop {
        let idle_deadline = match (rt.idle_timeout, activity.streams.get()) {
            (Some(idle), 0) => Some(activity.last.get() + idle),
            _ => None,
        };
        let drain_deadline = going_away.map(|t| t + rt.drain_timeout);
        let accepted = tokio::select! {
            a = conn.accept() => a,
            _ = drain::draining(&mut phase), if going_away.is_none() => {
                going_away = Some(Instant::now());
                hcm.stats.cx_drain_close.inc();
                conn.graceful_shutdown();
                continue;
            }
            _ = sleep_until(idle_deadline), if idle_deadline.is_some() && going_away.is_none() => {
                if activity.streams.get() == 0 {
                    hcm.stats.cx_idle_timeout.inc();
                    going_away = Some(Instant::now());
                    conn.graceful_shutdown();
                }
                continue;
            }
            _ = sleep_until(drain_deadline), if drain_deadline.is_some() => break,
        };
        match accepted {
            Some(Ok((request, respond))) => {
                activity.streams.set(activity.streams.get() + 1);
                tokio::task::spawn_local(stream(
                    request,
                    respond,
                    hcm.clone(),
                    info.clone(),
                    activity.clone(),
                ));
            }
            Some(Err(e)) => {
                if e.is_go_away() || e.is_reset() || e.is_io() {
                    break;
                }
                hcm.stats.cx_protocol_error.inc();
                break;
            }
            None => break,
        }
        if worker.state.drain_close() && going_away.is_none() {
            going_away = Some(Instant::now());
            conn.graceful_shutdown();
        }
    }
    // Let the last frames (GOAWAY, end of streams) out before the socket is dropped.
    let _ = tokio::time::timeout(Duration::from_secs(1), poll_fn(|cx| conn.poll_closed(cx))).await;
    hcm.stats.cx_destroy_local.inc();
    Traffic {
        rx: traffic.rx.get(),
        tx: traffic.tx.get(),
    }
}

/// Open streams and when the last one ended, for the connection's idle timeout.
struct Activity {
    streams: Cell<usize>,
    last: Cell<Instant>,
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d.into()).await,
        None => std::future::pending().await,
    }
}

/// Byte counts shared between the I/O wrapper (owned by h2) and the connection task.
#[derive(Default)]
struct TrafficCells {
    rx: Cell<u64>,
    tx: Cell<u64>,
}

/// The parts of ConnInfo a stream task needs (streams outlive the borrow of the connection).
struct ConnSnapshot {
    info: ConnInfo,
    /// per_connection_buffer_limit_bytes: the most of a request body filters may buffer.
    buffer_limit: u64,
}

impl ConnSnapshot {
    fn new(c: &ConnInfo, buffer_limit: u32) -> Self {
        ConnSnapshot {
            info: ConnInfo {
                id: c.id,
                remote: c.remote,
                local: c.local,
                tls: c.tls.clone(),
                start: c.start,
            },
            buffer_limit: u64::from(buffer_limit),
        }
    }
}

async fn stream(
    request: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
    hcm: Rc<HcmWorker>,
    conn: Rc<ConnSnapshot>,
    activity: Rc<Activity>,
) {
    exchange(request, respond, &hcm, &conn).await;
    activity
        .streams
        .set(activity.streams.get().saturating_sub(1));
    activity.last.set(Instant::now());
}

async fn exchange(
    request: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    hcm: &HcmWorker,
    conn: &ConnSnapshot,
) {
    let info = &conn.info;
    let stats = &hcm.stats;
    let start = Instant::now();
    let start_wall = SystemTime::now();
    stats.rq_total.inc();
    stats.rq_http2_total.inc();
    stats.rq_active.inc();
    let (parts, mut body) = request.into_parts();
    let mut head = RequestHead {
        path: parts
            .uri
            .path_and_query()
            .map_or_else(|| "/".to_string(), |p| p.as_str().to_string()),
        authority: parts.uri.authority().map(|a| a.as_str().to_string()),
        method: parts.method,
        version: Version::Http2,
        headers: parts.headers,
    };
    hcm.prepare_request(&mut head, info);
    let end_stream = body.is_end_stream();
    let handled = {
        let mut source = H2Body {
            body: &mut body,
            received: 0,
        };
        let r = hcm
            .handle(&mut head, &mut source, end_stream, info, conn.buffer_limit)
            .await;
        r.map(|h| (h, source.received))
    };
    let Ok((mut handled, mut bytes_received)) = handled else {
        // The client reset the stream while sending its body.
        hcm.stats.rq_active.dec();
        return;
    };
    hcm.count_outcome(handled.reply.outcome);
    let reply = &handled.reply;
    let is_head = head.method == http::Method::HEAD;
    let mut response = http::Response::new(());
    *response.status_mut() = http::StatusCode::from_u16(reply.head.status)
        .unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
    *response.headers_mut() = reply.head.headers.clone();
    let unknown_length = matches!(&reply.body, Body::Stream(s) if s.length.is_none());
    if is_head
        && reply
            .head
            .headers
            .contains_key(http::header::CONTENT_LENGTH)
        && reply.body.is_empty()
    {
        // A proxied HEAD response: the upstream's length stands.
    } else if !matches!(reply.head.status, 204 | 304) && !unknown_length {
        response.headers_mut().insert(
            http::header::CONTENT_LENGTH,
            http::HeaderValue::from(reply.body.len()),
        );
    }
    let end = is_head || reply.body.is_empty();
    let mut bytes_sent = 0;
    if let Ok(mut send) = respond.send_response(response, end) {
        if !end {
            bytes_sent = send_body(&mut send, &reply.body, hcm.rt.stream_idle_timeout)
                .await
                .unwrap_or_else(|sent| {
                    hcm.stats.rq_idle_timeout.inc();
                    send.send_reset(h2::Reason::CANCEL);
                    sent
                });
        }
    }
    let duration = start.elapsed();
    if handled.body_unread {
        bytes_received += discard(&mut body).await;
    }
    let record = StreamRecord {
        start_wall,
        head: Some(&head),
        version: Version::Http2,
        reply: &handled.reply,
        bytes_received,
        bytes_sent,
        duration,
        conn: info,
    };
    hcm.finish_stream(&record, Some((&mut handled.filters, &handled.state)));
}

/// The HTTP/2 request body for the connection manager; flow-control window is returned as the
/// data is consumed.
struct H2Body<'b> {
    body: &'b mut RecvStream,
    received: u64,
}

impl RequestBody for H2Body<'_> {
    type Error = h2::Error;

    async fn next_chunk(&mut self) -> Result<Option<Bytes>, h2::Error> {
        match self.body.data().await {
            Some(Ok(chunk)) => {
                self.received += chunk.len() as u64;
                let _ = self.body.flow_control().release_capacity(chunk.len());
                Ok(Some(chunk))
            }
            Some(Err(e)) => Err(e),
            None => Ok(None),
        }
    }
}

/// Sends a body within the peer's flow-control window. File bodies are sent as views of the
/// mapping (no copy into a heap buffer before h2 frames them). A peer that grants no window
/// for stream_idle_timeout gets the stream reset: Err(bytes sent until then).
async fn send_body(
    send: &mut h2::SendStream<Bytes>,
    body: &Body,
    idle: Option<Duration>,
) -> Result<u64, u64> {
    let mut data = match body {
        Body::Empty => return Ok(0),
        Body::Stream(stream) => return send_stream(send, stream, idle).await,
        Body::Bytes(b) => b.clone(),
        Body::File(region) => Bytes::from_owner(RegionBytes(region.clone())),
    };
    let total = data.len() as u64;
    while !data.is_empty() {
        let sent = total - data.len() as u64;
        send.reserve_capacity(data.len().min(1 << 20));
        let capacity = poll_fn(|cx| send.poll_capacity(cx));
        let granted = match idle {
            Some(d) => tokio::time::timeout(d, capacity).await.map_err(|_| sent)?,
            None => capacity.await,
        };
        let granted = match granted {
            Some(Ok(n)) => n,
            // The peer reset the stream or the connection went away.
            Some(Err(_)) | None => return Ok(sent),
        };
        if granted == 0 {
            continue;
        }
        let chunk = data.split_to(granted.min(data.len()));
        if send.send_data(chunk, data.is_empty()).is_err() {
            return Ok(sent);
        }
    }
    Ok(total)
}

/// Sends a streamed body piece by piece: the next piece is taken from the producer only once
/// the peer's window took the previous one, so a slow client slows the upstream. A producer
/// failure resets the stream (the client must not take a cut body for a whole one).
async fn send_stream(
    send: &mut h2::SendStream<Bytes>,
    stream: &hoist_http::body::StreamBody,
    idle: Option<Duration>,
) -> Result<u64, u64> {
    let Some(mut rx) = stream.take() else {
        send.send_reset(h2::Reason::INTERNAL_ERROR);
        return Ok(0);
    };
    let mut sent = 0u64;
    while let Some(piece) = rx.recv().await {
        let Ok(mut data) = piece else {
            send.send_reset(h2::Reason::INTERNAL_ERROR);
            return Ok(sent);
        };
        while !data.is_empty() {
            send.reserve_capacity(data.len());
            let capacity = poll_fn(|cx| send.poll_capacity(cx));
            let granted = match idle {
                Some(d) => tokio::time::timeout(d, capacity).await.map_err(|_| sent)?,
                None => capacity.await,
            };
            let granted = match granted {
                Some(Ok(n)) => n,
                Some(Err(_)) | None => return Ok(sent),
            };
            if granted == 0 {
                continue;
            }
            let chunk = data.split_to(granted.min(data.len()));
            sent += chunk.len() as u64;
            if send.send_data(chunk, false).is_err() {
                return Ok(sent);
            }
        }
    }
    if stream.length.is_some_and(|n| n != sent) {
        send.send_reset(h2::Reason::INTERNAL_ERROR);
        return Ok(sent);
    }
    let _ = send.send_data(Bytes::new(), true);
    Ok(sent)
}

/// Reads and drops the request body, returning its size; stops (resetting the stream) past
/// MAX_DISCARDED_BODY.
async fn discard(body: &mut RecvStream) -> u64 {
    let mut received = 0u64;
    while let Some(chunk) = body.data().await {
        let Ok(chunk) = chunk else { break };
        received += chunk.len() as u64;
        let _ = body.flow_control().release_capacity(chunk.len());
        if received > MAX_DISCARDED_BODY {
            break;
        }
    }
    received
}

struct RegionBytes(FileRegion);

impl AsRef<[u8]> for RegionBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.bytes()
    }
}

/// The transport with the bytes read before the codec was chosen put back in front, and
/// byte counts for the connection stats.
struct Prefixed<T> {
    prefix: Bytes,
    inner: T,
    traffic: Rc<TrafficCells>,
}

impl<T: Transport> AsyncRead for Prefixed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = &mut *self;
        if !this.prefix.is_empty() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            this.traffic.rx.set(this.traffic.rx.get() + n as u64);
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        let r = Pin::new(&mut this.inner).poll_read(cx, buf);
        this.traffic
            .rx
            .set(this.traffic.rx.get() + (buf.filled().len() - before) as u64);
        r
    }
}

impl<T: Transport> AsyncWrite for Prefixed<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, data);
        if let Poll::Ready(Ok(n)) = &r {
            self.traffic.tx.set(self.traffic.tx.get() + *n as u64);
        }
        r
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = &r {
            self.traffic.tx.set(self.traffic.tx.get() + *n as u64);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

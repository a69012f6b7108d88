//! The HTTP/1.1 side of the connection manager: a keep-alive loop over the codec, with Envoy's
//! timeouts, drain behaviour and local replies for codec errors.

use std::rc::Rc;
use std::time::{Duration, Instant, SystemTime};

use bytes::BytesMut;
use hoist_http::h1::{H1Conn, H1Error};
use hoist_http::{Body, Version};
use hoist_tls::transport::Transport;
use tokio::io::AsyncWriteExt;

use crate::codec::Traffic;
use crate::conn_manager::Outcome;
use crate::connection::ConnInfo;
use crate::drain;
use crate::stream::{HcmWorker, StreamRecord};
use crate::worker::Worker;

/// What hoist reads and drops of what a client still sends after hoist closed its side.
const MAX_DISCARDED_BODY: u64 = 1 << 20;
/// After an error reply, how long hoist keeps reading what the client still sends so that
/// closing does not reset the connection under the reply (a lingering close, as nginx does).
const LINGER: Duration = Duration::from_secs(2);

pub async fn serve<T: Transport>(
    transport: T,
    buf: BytesMut,
    hcm: &Rc<HcmWorker>,
    info: &ConnInfo,
    worker: &Rc<Worker>,
) -> Traffic {
    let rt = &hcm.rt;
    let stats = &hcm.stats;
    let mut conn = H1Conn::with_buffer(transport, rt.limits.clone(), buf);
    let mut phase = worker.phase.clone();
    // Whether the peer ended the connection (then there is nothing to linger for).
    let mut peer_closed = false;
    loop {
        // Waiting for a request: idle timeout, and on drain an idle connection just closes.
        let next = async {
            match rt.idle_timeout {
                Some(d) => tokio::time::timeout(d, conn.read_request()).await,
                None => Ok(conn.read_request().await),
            }
        };
        let read = tokio::select! {
            biased;
            r = next => r,
            _ = drain::draining(&mut phase) => {
                stats.cx_drain_close.inc();
                break;
            }
        };
        let mut head = match read {
            Err(_) => {
                stats.cx_idle_timeout.inc();
                break;
            }
            Ok(Ok(None)) => {
                peer_closed = !conn.should_close();
                if peer_closed {
                    stats.cx_destroy_remote.inc();
                }
                break;
            }
            Ok(Ok(Some(head))) => head,
            Ok(Err(e)) => {
                peer_closed = !e.wants_reply();
                codec_error(&mut conn, &e, hcm, info, None).await;
                break;
            }
        };
        let start = Instant::now();
        let start_wall = SystemTime::now();
        stats.rq_total.inc();
        stats.rq_http1_total.inc();
        stats.rq_active.inc();
        hcm.prepare_request(&mut head, info);
        // Like Envoy, take the whole request (answering `Expect: 100-continue` ourselves) before
        // the reply: a malformed body is then a 400, and the connection stays usable.
        if let Err(e) = drain_body(&mut conn).await {
            peer_closed = !e.wants_reply();
            codec_error(&mut conn, &e, hcm, info, Some(&head)).await;
            break;
        }
        let reply = hcm.rt.respond(&head, info.scheme());
        hcm.count_outcome(reply.outcome);
        let keep_alive = conn.request_info().keep_alive;
        let drain_close = worker.state.drain_close();
        let close = !keep_alive || drain_close;
        let is_head = head.method == http::Method::HEAD;
        let written = conn.write_response(&reply.head, &reply.body, is_head, close).await;
        let duration = start.elapsed();
        let (bytes_sent, write_ok) = match written {
            Ok(n) => (n, true),
            Err(_) => (0, false),
        };
        let keep = write_ok && !close && !conn.should_close();
        hcm.finish_stream(&StreamRecord {
            start_wall,
            start,
            head: Some(&head),
            version: head.version,
            reply: &reply,
            bytes_received: conn.request_body_bytes(),
            bytes_sent,
            duration,
            conn: info,
        });
        if drain_close && keep_alive {
            stats.cx_drain_close.inc();
        }
        if !write_ok {
            peer_closed = true;
        }
        if !keep {
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

/// A request the codec refused: answer with its status (400, 413, 431, 501, 505) and log it as
/// Envoy does (flag DPE). The caller then closes with a lingering close. `head` is the request
/// whose body failed (already counted as a request), None when the head itself was refused.
async fn codec_error<T: Transport>(
    conn: &mut H1Conn<T>,
    e: &H1Error,
    hcm: &Rc<HcmWorker>,
    info: &ConnInfo,
    head: Option<&hoist_http::RequestHead>,
) {
    let stats = &hcm.stats;
    if !e.wants_reply() {
        // The peer went away or the socket failed: nobody to answer.
        if head.is_some() {
            stats.rq_active.dec();
        }
        return;
    }
    if head.is_none() {
        stats.rq_total.inc();
        stats.rq_active.inc();
    }
    let status = e.status();
    stats.cx_protocol_error.inc();
    if status == 431 || status == 413 {
        stats.rq_too_large.inc();
    }
    let start = Instant::now();
    let start_wall = SystemTime::now();
    let mut reply = hcm.rt.local_reply(
        status,
        Body::Empty,
        crate::access_log::ResponseFlags::DOWNSTREAM_PROTOCOL_ERROR,
        e.details(),
        Outcome::LocalReply,
    );
    let _ = conn.write_error(e, &reply.head.headers).await;
    // The codec's error body is the reason phrase.
    let bytes_sent = http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .map_or(0, |r| r.len() as u64);
    reply.head.headers.insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
    hcm.finish_stream(&StreamRecord {
        start_wall,
        start,
        head,
        version: head.map_or(Version::Http11, |h| h.version),
        reply: &reply,
        bytes_received: 0,
        bytes_sent,
        duration: start.elapsed(),
        conn: info,
    });
}

/// Reads the request body and drops it: nothing hoist answers by itself needs it. Sends
/// `100 Continue` first when the client asked for it, as Envoy does.
async fn drain_body<T: Transport>(conn: &mut H1Conn<T>) -> Result<(), H1Error> {
    while conn.read_body_chunk().await?.is_some() {}
    Ok(())
}

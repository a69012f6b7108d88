//! Picks the HTTP codec for a connection (codec_type, ALPN, or the HTTP/2 connection preface on
//! plaintext) and keeps the connection manager's connection-level stats around it.

use std::rc::Rc;

use bytes::BytesMut;
use hoist_config::model::CodecType;
use hoist_tls::transport::Transport;
use tokio::io::AsyncReadExt;

use crate::connection::ConnInfo;
use crate::stream::HcmWorker;
use crate::worker::Worker;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Bytes a connection moved, in plaintext, for `downstream_cx_{rx,tx}_bytes_total`.
#[derive(Default)]
pub struct Traffic {
    pub rx: u64,
    pub tx: u64,
}

pub async fn serve<T: Transport>(
    mut transport: T,
    mut buf: BytesMut,
    hcm: &Rc<HcmWorker>,
    info: &ConnInfo,
    worker: &Rc<Worker>,
    buffer_limit: u32,
) {
    let use_h2 = match hcm.rt.codec_type {
        CodecType::Http1 => false,
        CodecType::Http2 => true,
        CodecType::Auto => match &info.tls {
            Some(tls) => tls.alpn.as_deref() == Some(b"h2"),
            None => match starts_with_preface(&mut transport, &mut buf, hcm).await {
                Some(h2) => h2,
                None => return,
            },
        },
    };
    let stats = &hcm.stats;
    stats.cx_total.inc();
    stats.cx_active.inc();
    if info.tls.is_some() {
        stats.cx_ssl_total.inc();
        stats.cx_ssl_active.inc();
    }
    let traffic = if use_h2 {
        stats.cx_http2_total.inc();
        stats.cx_http2_active.inc();
        let t = crate::http2::serve(transport, buf, hcm, info, worker, buffer_limit).await;
        stats.cx_http2_active.dec();
        t
    } else {
        stats.cx_http1_total.inc();
        stats.cx_http1_active.inc();
        let t = crate::http1::serve(transport, buf, hcm, info, worker, buffer_limit).await;
        stats.cx_http1_active.dec();
        t
    };
    stats.cx_rx_bytes_total.add(traffic.rx);
    stats.cx_tx_bytes_total.add(traffic.tx);
    if info.tls.is_some() {
        stats.cx_ssl_active.dec();
    }
    stats.cx_active.dec();
    stats.cx_destroy.inc();
    stats
        .cx_length_ms
        .record(info.start.elapsed().as_millis() as u64);
}

/// Reads just enough of a plaintext connection to tell an HTTP/2 prior-knowledge preface from
/// HTTP/1.1. None: the peer closed or stayed silent past the idle timeout.
async fn starts_with_preface<T: Transport>(
    transport: &mut T,
    buf: &mut BytesMut,
    hcm: &HcmWorker,
) -> Option<bool> {
    loop {
        let n = buf.len().min(H2_PREFACE.len());
        if buf[..n] != H2_PREFACE[..n] {
            return Some(false);
        }
        if n == H2_PREFACE.len() {
            return Some(true);
        }
        buf.reserve(4096);
        let read = transport.read_buf(buf);
        let got = match hcm.rt.idle_timeout {
            Some(d) => tokio::time::timeout(d, read).await.ok()?,
            None => read.await,
        };
        match got {
            Ok(0) | Err(_) => return None,
            Ok(_) => {}
        }
    }
}

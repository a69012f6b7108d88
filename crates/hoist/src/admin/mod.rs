//! The admin listener: Envoy's admin endpoints on the main thread, over the same HTTP/1.1 codec
//! as the data path (plaintext, as Envoy's admin is).

mod certs;
mod config_dump;
mod handlers;
mod tls_offload;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use hoist_http::h1::{H1Conn, H1Limits};
use hoist_http::{Body, ResponseHead};
use hoist_tls::plain::PlainTransport;
use http::header::{self, HeaderValue};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};

use crate::server::ServerState;

/// An admin response before framing.
pub struct AdminResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Bytes,
}

impl AdminResponse {
    pub fn text(status: u16, body: impl Into<Bytes>) -> Self {
        AdminResponse {
            status,
            content_type: "text/plain; charset=UTF-8",
            body: body.into(),
        }
    }

    pub fn json(value: &serde_json::Value) -> Self {
        let mut body = serde_json::to_vec_pretty(value).unwrap_or_default();
        body.push(b'\n');
        AdminResponse {
            status: 200,
            content_type: "application/json",
            body: body.into(),
        }
    }
}

pub async fn serve(state: Arc<ServerState>, listener: TcpListener) {
    loop {
        match listener.accept().await {
            Ok((tcp, _)) => {
                tokio::spawn(connection(state.clone(), tcp));
            }
            Err(e) => {
                tracing::warn!("admin: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn connection(state: Arc<ServerState>, tcp: TcpStream) {
    let _ = tcp.set_nodelay(true);
    let limits = H1Limits {
        max_request_headers_kb: 60,
        max_headers_count: 100,
    };
    let mut conn = H1Conn::new(PlainTransport::new(tcp), limits);
    loop {
        let head = match tokio::time::timeout(Duration::from_secs(300), conn.read_request()).await {
            Ok(Ok(Some(head))) => head,
            Ok(Err(e)) => {
                let _ = conn.write_error(&e, &http::HeaderMap::new()).await;
                break;
            }
            _ => break,
        };
        let keep_alive = conn.request_info().keep_alive;
        // Admin requests carry no body worth reading; take it so the connection stays in step.
        let body_ok = loop {
            match conn.read_body_chunk().await {
                Ok(Some(_)) => continue,
                Ok(None) => break true,
                Err(_) => break false,
            }
        };
        if !body_ok {
            break;
        }
        let response = handlers::dispatch(&state, &head);
        let mut rh = ResponseHead::new(response.status);
        rh.headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(response.content_type),
        );
        rh.headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static("no-cache, max-age=0"),
        );
        rh.headers.insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        rh.headers.insert(header::DATE, crate::date::date_header());
        rh.headers
            .insert(header::SERVER, HeaderValue::from_static("envoy"));
        let is_head = head.method == http::Method::HEAD;
        let body = Body::Bytes(response.body);
        let written = conn.write_response(&rh, &body, is_head, !keep_alive).await;
        handlers::after_response(&state, &head);
        if written.is_err() || !keep_alive {
            break;
        }
    }
    let _ = conn.into_transport().shutdown().await;
}

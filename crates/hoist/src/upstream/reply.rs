//! The router's local replies, with Envoy's statuses, bodies, flags and details.

use bytes::Bytes;
use hoist_http::{Body, ResponseFlags, ResponseHead};
use http::header::{self, HeaderValue};

use super::attempt::NoBody;
use super::conn::ConnectError;
use super::forward::{Forwarded, Source};
use super::pool::WorkerCluster;

pub const BEFORE_HEADERS: &str = "upstream connect error or disconnect/reset before headers. ";

/// 503 UO: a circuit breaker is open.
pub fn overflow(cluster: &WorkerCluster) -> Forwarded {
    if let Some(s) = &cluster.stats {
        s.response(503);
    }
    let mut f = local(
        503,
        &format!("{BEFORE_HEADERS}reset reason: overflow"),
        ResponseFlags::UPSTREAM_OVERFLOW,
        "upstream_reset_before_response_started{overflow}",
        &Source::<NoBody>::None,
    );
    f.cluster = Some(cluster.info.name.clone());
    f
}

pub fn connect_failure(e: &ConnectError, cluster: &WorkerCluster) -> Forwarded {
    let reason = match e {
        ConnectError::Timeout => "reset reason: connection timeout".to_owned(),
        ConnectError::Overflow => "reset reason: overflow".to_owned(),
        ConnectError::Failed(why) => {
            format!("reset reason: remote connection failure, transport failure reason: {why}")
        }
    };
    if let Some(s) = &cluster.stats {
        s.response(503);
    }
    let mut f = local(
        503,
        &format!("{BEFORE_HEADERS}{reason}"),
        ResponseFlags::UPSTREAM_CONNECTION_FAILURE,
        "upstream_reset_before_response_started{remote_connection_failure}",
        &Source::<NoBody>::None,
    );
    f.cluster = Some(cluster.info.name.clone());
    f
}

pub fn reset_before_headers(cluster: &WorkerCluster) -> Forwarded {
    if let Some(s) = &cluster.stats {
        s.response(503);
    }
    let mut f = local(
        503,
        &format!("{BEFORE_HEADERS}reset reason: connection termination"),
        ResponseFlags::UPSTREAM_CONNECTION_TERMINATION,
        "upstream_reset_before_response_started{connection_termination}",
        &Source::<NoBody>::None,
    );
    f.cluster = Some(cluster.info.name.clone());
    f
}

pub fn local<B>(
    status: u16,
    text: &str,
    flags: ResponseFlags,
    details: &'static str,
    body: &Source<'_, B>,
) -> Forwarded {
    let mut head = ResponseHead::new(status);
    if !text.is_empty() {
        head.headers
            .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    }
    Forwarded {
        head,
        body: if text.is_empty() {
            Body::Empty
        } else {
            Body::Bytes(Bytes::from(text.to_owned()))
        },
        flags,
        details,
        from_upstream: false,
        upstream_host: None,
        cluster: None,
        body_unread: matches!(body, Source::Stream(_)),
    }
}

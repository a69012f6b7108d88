//! The %OPERATORS%: parsing one command and evaluating it against a [`LogContext`].

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Duration;

use http::{HeaderMap, HeaderName};

use super::context::LogContext;
use super::time::TimeFormat;

/// A header operand of REQ/RESP/TRAILER: a regular header or one of the pseudo-headers.
#[derive(Clone, Debug, PartialEq, Eq)]
enum HeaderKey {
    Method,
    Path,
    Authority,
    Scheme,
    Status,
    Named(HeaderName),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeaderSource {
    Request,
    Response,
    Trailer,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Op {
    StartTime(TimeFormat),
    Header {
        source: HeaderSource,
        main: HeaderKey,
        alt: Option<HeaderKey>,
    },
    Protocol,
    ResponseCode,
    ResponseCodeDetails,
    ResponseFlags,
    BytesReceived,
    BytesSent,
    Duration,
    RequestDuration,
    ResponseDuration,
    ResponseTxDuration,
    Address(Downstream, AddressPart),
    TlsVersion,
    TlsCipher,
    PeerSubject,
    RequestedServerName,
    TlsOffload,
    UpstreamHost,
    UpstreamCluster,
    UpstreamTransportFailureReason,
    RouteName,
    Hostname,
    ConnectionId,
    StreamId,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Downstream {
    Remote,
    DirectRemote,
    Local,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AddressPart {
    Full,
    WithoutPort,
    Port,
}

/// A compiled operator with its `:Z` truncation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Operator {
    op: Op,
    max_length: Option<usize>,
}

/// What an operator yields; JSON keeps the kind, text prints it.
pub(super) enum Value<'a> {
    Missing,
    Str(Cow<'a, [u8]>),
    Num(u64),
}

/// Envoy's CommandSyntaxChecker flags, reduced to what these operators need.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Syntax {
    CommandOnly,
    ParamsOptional,
    ParamsRequiredLengthAllowed,
}

impl Operator {
    /// Compiles `%COMMAND(subcommand):length%`. Error texts are Envoy's where Envoy has one.
    pub(super) fn parse(
        command: &str,
        sub: Option<&str>,
        max_length: Option<usize>,
    ) -> Result<Operator, String> {
        use AddressPart::*;
        use Downstream::*;
        let (syntax, op) = match command {
            "START_TIME" => (
                Syntax::ParamsOptional,
                Op::StartTime(match sub {
                    Some(f) if !f.is_empty() => TimeFormat::parse(f)?,
                    _ => TimeFormat::envoy_default(),
                }),
            ),
            "REQ" | "RESP" | "TRAILER" => {
                let source = match command {
                    "REQ" => HeaderSource::Request,
                    "RESP" => HeaderSource::Response,
                    _ => HeaderSource::Trailer,
                };
                let sub = sub.filter(|s| !s.is_empty());
                let sub = sub.ok_or_else(|| format!("{command} requires parameters"))?;
                let (main, alt) = parse_headers(command, source, sub)?;
                (
                    Syntax::ParamsRequiredLengthAllowed,
                    Op::Header { source, main, alt },
                )
            }
            "PROTOCOL" => (Syntax::CommandOnly, Op::Protocol),
            "RESPONSE_CODE" => (Syntax::CommandOnly, Op::ResponseCode),
            "RESPONSE_CODE_DETAILS" => (Syntax::CommandOnly, Op::ResponseCodeDetails),
            "RESPONSE_FLAGS" => (Syntax::CommandOnly, Op::ResponseFlags),
            "BYTES_RECEIVED" => (Syntax::CommandOnly, Op::BytesReceived),
            "BYTES_SENT" => (Syntax::CommandOnly, Op::BytesSent),
            "DURATION" => (Syntax::CommandOnly, Op::Duration),
            "REQUEST_DURATION" => (Syntax::CommandOnly, Op::RequestDuration),
            "RESPONSE_DURATION" => (Syntax::CommandOnly, Op::ResponseDuration),
            "RESPONSE_TX_DURATION" => (Syntax::CommandOnly, Op::ResponseTxDuration),
            "DOWNSTREAM_REMOTE_ADDRESS" => (Syntax::CommandOnly, Op::Address(Remote, Full)),
            "DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT" => {
                (Syntax::CommandOnly, Op::Address(Remote, WithoutPort))
            }
            "DOWNSTREAM_REMOTE_PORT" => (Syntax::CommandOnly, Op::Address(Remote, Port)),
            "DOWNSTREAM_DIRECT_REMOTE_ADDRESS" => {
                (Syntax::CommandOnly, Op::Address(DirectRemote, Full))
            }
            "DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT" => {
                (Syntax::CommandOnly, Op::Address(DirectRemote, WithoutPort))
            }
            "DOWNSTREAM_DIRECT_REMOTE_PORT" => {
                (Syntax::CommandOnly, Op::Address(DirectRemote, Port))
            }
            "DOWNSTREAM_LOCAL_ADDRESS" => (Syntax::CommandOnly, Op::Address(Local, Full)),
            "DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT" => {
                (Syntax::CommandOnly, Op::Address(Local, WithoutPort))
            }
            "DOWNSTREAM_LOCAL_PORT" => (Syntax::CommandOnly, Op::Address(Local, Port)),
            "DOWNSTREAM_TLS_VERSION" => (Syntax::CommandOnly, Op::TlsVersion),
            "DOWNSTREAM_TLS_CIPHER" => (Syntax::CommandOnly, Op::TlsCipher),
            "DOWNSTREAM_PEER_SUBJECT" => (Syntax::CommandOnly, Op::PeerSubject),
            "REQUESTED_SERVER_NAME" => (Syntax::CommandOnly, Op::RequestedServerName),
            "DOWNSTREAM_TLS_OFFLOAD" => (Syntax::CommandOnly, Op::TlsOffload),
            "UPSTREAM_HOST" => (Syntax::CommandOnly, Op::UpstreamHost),
            "UPSTREAM_CLUSTER" => (Syntax::CommandOnly, Op::UpstreamCluster),
            "UPSTREAM_TRANSPORT_FAILURE_REASON" => {
                (Syntax::CommandOnly, Op::UpstreamTransportFailureReason)
            }
            "ROUTE_NAME" => (Syntax::CommandOnly, Op::RouteName),
            "HOSTNAME" => (Syntax::CommandOnly, Op::Hostname),
            "CONNECTION_ID" => (Syntax::CommandOnly, Op::ConnectionId),
            "STREAM_ID" => (Syntax::CommandOnly, Op::StreamId),
            _ => return Err(format!("Not supported field in StreamInfo: {command}")),
        };
        let has_params = sub.is_some_and(|s| !s.is_empty());
        if syntax == Syntax::CommandOnly && (has_params || max_length.is_some()) {
            return Err(format!("{command} does not take any parameters or length"));
        }
        if syntax != Syntax::ParamsRequiredLengthAllowed && max_length.is_some() {
            return Err(format!("{command} does not allow length to be specified."));
        }
        Ok(Operator { op, max_length })
    }

    pub(super) fn evaluate<'a>(&self, ctx: &LogContext<'a>) -> Value<'a> {
        let value = self.op.evaluate(ctx);
        match (value, self.max_length) {
            (Value::Str(s), Some(max)) if s.len() > max => Value::Str(match s {
                Cow::Borrowed(b) => Cow::Borrowed(&b[..max]),
                Cow::Owned(mut v) => {
                    v.truncate(max);
                    Cow::Owned(v)
                }
            }),
            (value, _) => value,
        }
    }
}

/// `H` or `H?ALT`, each a header name (case-insensitive) or a pseudo-header.
fn parse_headers(
    command: &str,
    source: HeaderSource,
    sub: &str,
) -> Result<(HeaderKey, Option<HeaderKey>), String> {
    let mut parts = sub.split('?');
    let main = parts.next().unwrap_or_default();
    let alt = parts.next();
    if parts.next().is_some() {
        return Err(format!(
            "More than 1 alternative header specified in token: {sub}"
        ));
    }
    let main = header_key(command, source, main)?;
    let alt = alt.map(|a| header_key(command, source, a)).transpose()?;
    Ok((main, alt))
}

fn header_key(command: &str, source: HeaderSource, name: &str) -> Result<HeaderKey, String> {
    let lower = name.to_ascii_lowercase();
    let key = match (source, lower.as_str()) {
        (HeaderSource::Request, ":method") => HeaderKey::Method,
        (HeaderSource::Request, ":path") => HeaderKey::Path,
        (HeaderSource::Request, ":authority") => HeaderKey::Authority,
        (HeaderSource::Request, ":scheme") => HeaderKey::Scheme,
        (HeaderSource::Response, ":status") => HeaderKey::Status,
        (_, n) if n.starts_with(':') => {
            return Err(format!("{command}: unsupported pseudo-header '{name}'"));
        }
        (_, n) => HeaderKey::Named(
            HeaderName::from_bytes(n.as_bytes())
                .map_err(|_| format!("{command}: invalid header name '{name}'"))?,
        ),
    };
    Ok(key)
}

impl Op {
    fn evaluate<'a>(&self, ctx: &LogContext<'a>) -> Value<'a> {
        match self {
            Op::StartTime(format) => {
                let mut out = Vec::with_capacity(32);
                format.format(ctx.start_time, &mut out);
                Value::Str(Cow::Owned(out))
            }
            Op::Header { source, main, alt } => {
                let first = header(ctx, *source, main);
                match (first, alt) {
                    (Value::Missing, Some(alt)) => header(ctx, *source, alt),
                    (value, _) => value,
                }
            }
            Op::Protocol => str_value(ctx.protocol),
            Op::ResponseCode => Value::Num(ctx.response_code.map_or(0, u64::from)),
            Op::ResponseCodeDetails => str_value(ctx.response_code_details),
            Op::ResponseFlags => {
                Value::Str(Cow::Owned(ctx.response_flags.short_string().into_bytes()))
            }
            Op::BytesReceived => Value::Num(ctx.bytes_received),
            Op::BytesSent => Value::Num(ctx.bytes_sent),
            Op::Duration => millis(ctx.response_complete),
            Op::RequestDuration => millis(ctx.request_complete),
            Op::ResponseDuration => millis(ctx.first_response_byte),
            Op::ResponseTxDuration => match (ctx.response_complete, ctx.first_response_byte) {
                (Some(done), Some(first)) => millis(done.checked_sub(first)),
                _ => Value::Missing,
            },
            Op::Address(peer, part) => {
                let addr = match peer {
                    Downstream::Remote => ctx.downstream_remote,
                    Downstream::DirectRemote => ctx.downstream_direct_remote,
                    Downstream::Local => ctx.downstream_local,
                };
                address(addr, *part)
            }
            Op::TlsVersion => str_value(ctx.tls.map(|t| t.version)),
            Op::TlsCipher => str_value(ctx.tls.map(|t| t.cipher)),
            Op::PeerSubject => str_value(ctx.tls.and_then(|t| t.peer_subject.as_deref())),
            Op::RequestedServerName => str_value(ctx.tls.and_then(|t| t.sni.as_deref())),
            Op::TlsOffload => str_value(ctx.tls.map(|t| t.offload)),
            Op::UpstreamHost => address(ctx.upstream_host, AddressPart::Full),
            Op::UpstreamCluster => str_value(ctx.upstream_cluster),
            Op::UpstreamTransportFailureReason => str_value(ctx.upstream_transport_failure_reason),
            Op::RouteName => str_value(ctx.route_name),
            Op::Hostname => str_value(ctx.hostname),
            Op::ConnectionId => ctx.connection_id.map_or(Value::Missing, Value::Num),
            Op::StreamId => match ctx.request_headers {
                Some(h) => header_value(h, &HeaderName::from_static("x-request-id")),
                None => Value::Missing,
            },
        }
    }
}

fn header<'a>(ctx: &LogContext<'a>, source: HeaderSource, key: &HeaderKey) -> Value<'a> {
    let map = match source {
        HeaderSource::Request => ctx.request_headers,
        HeaderSource::Response => ctx.response_headers,
        HeaderSource::Trailer => ctx.response_trailers,
    };
    match key {
        HeaderKey::Method => str_value(ctx.method),
        HeaderKey::Path => str_value(ctx.path),
        HeaderKey::Scheme => str_value(ctx.scheme),
        HeaderKey::Authority => match (ctx.authority, map) {
            (Some(a), _) => str_value(Some(a)),
            (None, Some(h)) => header_value(h, &http::header::HOST),
            (None, None) => Value::Missing,
        },
        HeaderKey::Status => match ctx.response_code {
            Some(code) => Value::Str(Cow::Owned(code.to_string().into_bytes())),
            None => Value::Missing,
        },
        HeaderKey::Named(name) => match map {
            Some(h) => header_value(h, name),
            None => Value::Missing,
        },
    }
}

/// The first value of `name`, as Envoy's header formatters take it.
fn header_value<'a>(headers: &'a HeaderMap, name: &HeaderName) -> Value<'a> {
    match headers.get(name) {
        Some(v) => Value::Str(Cow::Borrowed(v.as_bytes())),
        None => Value::Missing,
    }
}

fn str_value(s: Option<&str>) -> Value<'_> {
    match s {
        Some(s) => Value::Str(Cow::Borrowed(s.as_bytes())),
        None => Value::Missing,
    }
}

/// Whole milliseconds, truncated, as Envoy's duration formatters print them.
fn millis(d: Option<Duration>) -> Value<'static> {
    match d {
        Some(d) => Value::Num(u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
        None => Value::Missing,
    }
}

fn address(addr: Option<SocketAddr>, part: AddressPart) -> Value<'static> {
    match (addr, part) {
        (None, _) => Value::Missing,
        (Some(a), AddressPart::Full) => Value::Str(Cow::Owned(a.to_string().into_bytes())),
        (Some(a), AddressPart::WithoutPort) => {
            Value::Str(Cow::Owned(a.ip().to_string().into_bytes()))
        }
        (Some(a), AddressPart::Port) => Value::Num(u64::from(a.port())),
    }
}

//! The HTTP connection manager: what happens to a request once a codec has parsed its head,
//! whatever the protocol. Route, act (direct response, redirect, local reply), finalize the
//! response headers. The codec drivers (http1.rs, http2.rs) own the I/O, the stats and the
//! access log around it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hoist_config::model::{Cluster, CodecType, HttpConnectionManager};
use hoist_config::ConfigError;
use hoist_filters::{BuildContext, FilterChainConfig};
use hoist_http::h1::H1Limits;
use hoist_http::{Body, RequestHead, ResponseHead};
use hoist_stats::Store;
use http::header::{self, HeaderValue};

use crate::access_log::{AccessLogger, LogContext, ResponseFlags};
use crate::connection::ConnInfo;
use crate::date::date_header;
use crate::router::{Action, MatchInput, Route, Router, VirtualHostEntry};

/// A connection manager's configuration, compiled once and shared by all workers.
pub struct HcmRuntime {
    pub stat_prefix: String,
    pub codec_type: CodecType,
    pub router: Arc<Router>,
    /// The HTTP filters before the router, in order.
    pub filters: FilterChainConfig,
    pub access_logs: Vec<AccessLogger>,
    server_name: HeaderValue,
    server_header_append_if_absent: bool,
    pub limits: H1Limits,
    pub idle_timeout: Option<Duration>,
    pub stream_idle_timeout: Option<Duration>,
    pub request_timeout: Option<Duration>,
    pub request_headers_timeout: Option<Duration>,
    pub drain_timeout: Duration,
    pub generate_request_id: bool,
    pub use_remote_address: bool,
    /// HCM `via`, checked as a header value at load.
    pub via: Option<HeaderValue>,
    pub xff_num_trusted_hops: u32,
    pub http2: hoist_config::model::Http2Options,
}

/// What the connection manager decided for one request.
pub struct Reply {
    pub head: ResponseHead,
    pub body: Body,
    pub route_name: Option<Arc<str>>,
    pub flags: ResponseFlags,
    /// Envoy's %RESPONSE_CODE_DETAILS%.
    pub details: &'static str,
    pub outcome: Outcome,
    /// %UPSTREAM_HOST% and %UPSTREAM_CLUSTER% of a forwarded request.
    pub upstream_host: Option<std::net::SocketAddr>,
    pub upstream_cluster: Option<String>,
}

/// Where routing led: a route to act on, or a reply already decided.
pub enum Routing<'a> {
    Route {
        vh: &'a VirtualHostEntry,
        route: &'a Route,
    },
    Reply(Box<Reply>),
}

/// Which router stat the request counts toward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    DirectResponse,
    Redirect,
    NoRoute,
    LocalReply,
    /// The response came from an upstream.
    Forwarded,
}

impl HcmRuntime {
    pub fn build(
        m: &HttpConnectionManager,
        stats: &Arc<Store>,
        concurrency: usize,
        clusters: &[Cluster],
    ) -> Result<Arc<HcmRuntime>, ConfigError> {
        let filters = FilterChainConfig::build(
            &m.http_filters,
            &BuildContext {
                stat_prefix: &m.stat_prefix,
                stats,
                workers: concurrency,
                clusters,
            },
        )?;
        let route_path = format!("{}.route_config", m.yaml_path);
        let router = Router::compile(&m.route_config, &route_path, &filters)?;
        let access_logs = m
            .access_log
            .iter()
            .map(|l| AccessLogger::from_config(l).map_err(|e| ConfigError::new("", e)))
            .collect::<Result<Vec<_>, _>>()?;
        let server_name = HeaderValue::from_str(&m.server_name).map_err(|_| {
            ConfigError::new(
                format!("{}.server_name", m.yaml_path),
                "not a valid header value",
            )
        })?;
        let via = m
            .via
            .as_deref()
            .map(HeaderValue::from_str)
            .transpose()
            .map_err(|_| {
                ConfigError::new(format!("{}.via", m.yaml_path), "not a valid header value")
            })?;
        Ok(Arc::new(HcmRuntime {
            via,
            xff_num_trusted_hops: m.xff_num_trusted_hops,
            stat_prefix: m.stat_prefix.clone(),
            codec_type: m.codec_type,
            router,
            filters,
            access_logs,
            server_name,
            server_header_append_if_absent: m.server_header_append_if_absent,
            limits: H1Limits {
                max_request_headers_kb: m.max_request_headers_kb,
                max_headers_count: m.max_headers_count,
            },
            idle_timeout: m.idle_timeout,
            stream_idle_timeout: m.stream_idle_timeout,
            request_timeout: m.request_timeout,
            request_headers_timeout: m.request_headers_timeout,
            drain_timeout: m.drain_timeout,
            generate_request_id: m.generate_request_id,
            use_remote_address: m.use_remote_address,
            http2: m.http2.clone(),
        }))
    }

    /// Picks the virtual host and route, or the local reply when there is none (404 `NR`, or
    /// the redirect of a virtual host that requires TLS).
    pub fn route<'a>(&'a self, head: &RequestHead, conn: &ConnInfo) -> Routing<'a> {
        let scheme = conn.scheme();
        let Some(vh) = self.router.virtual_host(head.authority.as_deref()) else {
            return Routing::Reply(Box::new(self.no_route()));
        };
        if vh.require_tls && scheme != "https" {
            let location = format!(
                "https://{}{}",
                head.authority.as_deref().unwrap_or(""),
                head.path
            );
            let mut reply = self.local_reply(
                301,
                Body::Empty,
                ResponseFlags::NONE,
                "tls_redirect",
                Outcome::Redirect,
            );
            if let Ok(v) = HeaderValue::from_str(&location) {
                reply.head.headers.insert(header::LOCATION, v);
            }
            return Routing::Reply(Box::new(reply));
        }
        let input = MatchInput { head, scheme };
        match vh.route(&input) {
            Some(route) => Routing::Route { vh, route },
            None => {
                tracing::trace!(
                    "{} {}: no route in virtual host '{}'",
                    head.method,
                    head.path,
                    vh.name
                );
                Routing::Reply(Box::new(self.no_route()))
            }
        }
    }

    fn no_route(&self) -> Reply {
        self.local_reply(
            404,
            Body::Empty,
            ResponseFlags::NO_ROUTE_FOUND,
            "route_not_found",
            Outcome::NoRoute,
        )
    }

    /// The route's action: a direct response or a redirect, with the response header
    /// mutations of the route, the virtual host and the route configuration.
    pub fn act(
        &self,
        head: &RequestHead,
        vh: &VirtualHostEntry,
        route: &Route,
        conn: &ConnInfo,
    ) -> Reply {
        let scheme = conn.scheme();
        let (mut response, body, details, outcome) = match &route.action {
            Action::DirectResponse { status, body } => {
                let mut r = ResponseHead::new(*status);
                if !body.is_empty() {
                    r.headers
                        .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
                }
                (r, body.clone(), "direct_response", Outcome::DirectResponse)
            }
            Action::Forward(_) => {
                // The stream forwards these (stream.rs); reaching here is a bug, answered as
                // Envoy answers a route it cannot serve.
                (
                    ResponseHead::new(503),
                    Body::Empty,
                    "cluster_not_found",
                    Outcome::LocalReply,
                )
            }
            Action::Redirect(redirect) => {
                let authority = head.authority.as_deref().unwrap_or("");
                let location = crate::router::redirect_location(
                    redirect,
                    route.path_match(),
                    scheme,
                    authority,
                    &head.path,
                );
                let mut r = ResponseHead::new(redirect.response_code);
                if let Ok(v) = HeaderValue::from_str(&location) {
                    r.headers.insert(header::LOCATION, v);
                }
                (r, Body::Empty, "redirect", Outcome::Redirect)
            }
        };
        self.mutate_response(head, vh, route, conn, &mut response);
        self.finalize(&mut response);
        let route_name: Option<Arc<str>> =
            (!route.name.is_empty()).then(|| Arc::from(route.name.as_str()));
        Reply {
            head: response,
            body,
            route_name,
            flags: ResponseFlags::NONE,
            details,
            outcome,
            upstream_host: None,
            upstream_cluster: None,
        }
    }

    /// A forwarded request's response (or the router's local reply for it), with the route's
    /// response header mutations. An upstream's date is kept; server is ours, as in Envoy.
    pub fn forwarded(
        &self,
        head: &RequestHead,
        vh: &VirtualHostEntry,
        route: &Route,
        conn: &ConnInfo,
        f: crate::upstream::forward::Forwarded,
    ) -> Reply {
        let mut response = f.head;
        self.mutate_response(head, vh, route, conn, &mut response);
        if f.from_upstream && response.headers.contains_key(header::DATE) {
            response
                .headers
                .insert(header::SERVER, self.server_name.clone());
            self.append_via(&mut response);
        } else {
            self.finalize(&mut response);
        }
        Reply {
            head: response,
            body: f.body,
            route_name: (!route.name.is_empty()).then(|| Arc::from(route.name.as_str())),
            flags: f.flags,
            details: f.details,
            outcome: if f.from_upstream {
                Outcome::Forwarded
            } else {
                Outcome::LocalReply
            },
            upstream_host: f.upstream_host,
            upstream_cluster: f.cluster,
        }
    }

    fn mutate_response(
        &self,
        head: &RequestHead,
        vh: &VirtualHostEntry,
        route: &Route,
        conn: &ConnInfo,
        response: &mut ResponseHead,
    ) {
        // Envoy applies the most specific level first, so the outer levels win on overwrite.
        let levels = [
            &route.response_headers,
            &vh.response_headers,
            &self.router.response_headers,
        ];
        if levels.iter().any(|l| l.needs_context()) {
            let ctx = header_context(head, conn, response.status);
            for level in levels {
                level.apply(&mut response.headers, Some(&ctx));
            }
        } else {
            for level in levels {
                level.apply(&mut response.headers, None);
            }
        }
    }

    /// A reply hoist makes itself (Envoy's sendLocalReply): no route, codec errors, drain.
    pub fn local_reply(
        &self,
        status: u16,
        body: Body,
        flags: ResponseFlags,
        details: &'static str,
        outcome: Outcome,
    ) -> Reply {
        let mut head = ResponseHead::new(status);
        if !body.is_empty() {
            head.headers
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        }
        self.finalize(&mut head);
        Reply {
            head,
            body,
            route_name: None,
            flags,
            details,
            outcome,
            upstream_host: None,
            upstream_cluster: None,
        }
    }

    /// The downstream address as Envoy's connection manager settles it (what
    /// %DOWNSTREAM_REMOTE_ADDRESS% and the filters see): the peer, or the trusted client
    /// address x-forwarded-for gives under use_remote_address / xff_num_trusted_hops, with
    /// port 0 as Envoy prints it.
    pub fn downstream_remote(&self, head: &RequestHead, conn: &ConnInfo) -> SocketAddr {
        crate::upstream::trusted_client_address(
            head,
            self.use_remote_address,
            self.xff_num_trusted_hops,
        )
        .map_or(conn.remote, |ip| SocketAddr::new(ip, 0))
    }

    /// The headers every response gets: date, server, and via when configured.
    pub fn finalize(&self, head: &mut ResponseHead) {
        head.headers.insert(header::DATE, date_header());
        if !(self.server_header_append_if_absent && head.headers.contains_key(header::SERVER)) {
            head.headers
                .insert(header::SERVER, self.server_name.clone());
        }
        self.append_via(head);
    }

    /// HCM `via`, on every response as Envoy does.
    fn append_via(&self, head: &mut ResponseHead) {
        if let Some(via) = &self.via {
            crate::upstream::append_via(&mut head.headers, via);
        }
    }
}

/// What a `%COMMAND%` in a response header value can see: the request, the connection and
/// the status being sent.
fn header_context<'a>(head: &'a RequestHead, conn: &'a ConnInfo, status: u16) -> LogContext<'a> {
    LogContext {
        method: Some(head.method.as_str()),
        path: Some(head.path.as_str()),
        authority: head.authority.as_deref(),
        scheme: Some(conn.scheme()),
        protocol: Some(head.version.as_str()),
        request_headers: Some(&head.headers),
        response_code: Some(status),
        downstream_remote: Some(conn.remote),
        downstream_direct_remote: Some(conn.remote),
        downstream_local: Some(conn.local),
        tls: conn.tls.as_ref(),
        connection_id: Some(conn.id),
        ..LogContext::new(std::time::SystemTime::now())
    }
}

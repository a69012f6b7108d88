//! The admin endpoints, Envoy's names and semantics.

use std::sync::atomic::Ordering;

use hoist_http::RequestHead;
use serde_json::json;

use super::AdminResponse;
use crate::server::ServerState;

/// A request's query: raw (for the stats parameters, parsed as Envoy parses them) and decoded.
struct Query<'a> {
    raw: &'a str,
    pairs: Vec<(String, String)>,
}

impl Query<'_> {
    fn has(&self, key: &str) -> bool {
        self.pairs.iter().any(|(k, _)| k == key)
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

struct Endpoint {
    path: &'static str,
    help: &'static str,
    /// Mutating endpoints answer POST only; a GET is a 400, as the admin has always said.
    mutates: bool,
    handler: fn(&ServerState, &Query<'_>) -> AdminResponse,
}

const ENDPOINTS: &[Endpoint] = &[
    Endpoint {
        path: "/certs",
        help: "print certs on machine",
        mutates: false,
        handler: certs,
    },
    Endpoint {
        path: "/clusters",
        help: "upstream cluster status",
        mutates: false,
        handler: clusters,
    },
    Endpoint {
        path: "/config_dump",
        help: "dump current Envoy configs (private keys redacted)",
        mutates: false,
        handler: config_dump,
    },
    Endpoint {
        path: "/drain_listeners",
        help: "drain listeners (stop accepting new connections)",
        mutates: true,
        handler: drain_listeners,
    },
    Endpoint {
        path: "/healthcheck/fail",
        help: "cause the server to fail health checks",
        mutates: true,
        handler: healthcheck_fail,
    },
    Endpoint {
        path: "/healthcheck/ok",
        help: "cause the server to pass health checks",
        mutates: true,
        handler: healthcheck_ok,
    },
    Endpoint {
        path: "/help",
        help: "print out list of admin commands",
        mutates: false,
        handler: help,
    },
    Endpoint {
        path: "/listeners",
        help: "print listener info",
        mutates: false,
        handler: listeners,
    },
    Endpoint {
        path: "/logging",
        help: "query/change logging levels (?level=<level>)",
        mutates: true,
        handler: logging,
    },
    Endpoint {
        path: "/quitquitquit",
        help: "exit the server (after draining in-flight requests)",
        mutates: true,
        handler: quit,
    },
    Endpoint {
        path: "/ready",
        help: "print server state, return 200 if LIVE, otherwise return 503",
        mutates: false,
        handler: ready,
    },
    Endpoint {
        path: "/reset_counters",
        help: "reset all counters to zero",
        mutates: true,
        handler: reset_counters,
    },
    Endpoint {
        path: "/server_info",
        help: "print server version/status information",
        mutates: false,
        handler: server_info,
    },
    Endpoint {
        path: "/tls_offload",
        help: "kernel TLS offload: probe result, policy and sw/hw counters per listener, /proc/net/tls_stat",
        mutates: false,
        handler: tls_offload,
    },
    Endpoint {
        path: "/stats",
        help: "print server stats (?filter=<regex>, ?format=json|prometheus, ?usedonly, ?type=)",
        mutates: false,
        handler: stats,
    },
    Endpoint {
        path: "/stats/prometheus",
        help: "print server stats in prometheus format",
        mutates: false,
        handler: stats_prometheus,
    },
];

pub fn dispatch(state: &ServerState, head: &RequestHead) -> AdminResponse {
    let path = head.path_only();
    let query = Query {
        raw: head.query().unwrap_or(""),
        pairs: hoist_stats::parse_query(head.query().unwrap_or("")),
    };
    let path = if path == "/" { "/help" } else { path };
    let Some(ep) = ENDPOINTS.iter().find(|e| e.path == path) else {
        return AdminResponse::text(
            404,
            format!("invalid path. admin commands are:\n{}", help_text()),
        );
    };
    let method = &head.method;
    if ep.mutates && method != http::Method::POST {
        return AdminResponse::text(
            400,
            format!("Method {method} not allowed, POST required.\n"),
        );
    }
    let read_only =
        method == http::Method::GET || method == http::Method::HEAD || method == http::Method::POST;
    if !ep.mutates && !read_only {
        return AdminResponse::text(400, format!("Method {method} not allowed.\n"));
    }
    (ep.handler)(state, &query)
}

/// Work that must happen after the response went out (exiting, for /quitquitquit).
pub fn after_response(state: &ServerState, head: &RequestHead) {
    if head.path_only() == "/quitquitquit" && head.method == http::Method::POST {
        state.start_drain();
    }
}

fn help_text() -> String {
    let mut s = String::from("admin commands are:\n");
    for e in ENDPOINTS {
        let method = if e.mutates { " (POST)" } else { "" };
        s.push_str(&format!("  {}{}: {}\n", e.path, method, e.help));
    }
    s
}

fn help(_: &ServerState, _: &Query<'_>) -> AdminResponse {
    AdminResponse::text(200, help_text())
}

fn ready(state: &ServerState, _: &Query<'_>) -> AdminResponse {
    let name = state.state_name();
    AdminResponse::text(if name == "LIVE" { 200 } else { 503 }, format!("{name}\n"))
}

fn quit(_: &ServerState, _: &Query<'_>) -> AdminResponse {
    AdminResponse::text(200, "OK\n")
}

fn reset_counters(state: &ServerState, _: &Query<'_>) -> AdminResponse {
    state.stats.reset_counters();
    AdminResponse::text(200, "OK\n")
}

fn healthcheck_fail(state: &ServerState, _: &Query<'_>) -> AdminResponse {
    state.health_check_failed.store(true, Ordering::Relaxed);
    AdminResponse::text(200, "OK\n")
}

fn healthcheck_ok(state: &ServerState, _: &Query<'_>) -> AdminResponse {
    state.health_check_failed.store(false, Ordering::Relaxed);
    AdminResponse::text(200, "OK\n")
}

fn drain_listeners(state: &ServerState, q: &Query<'_>) -> AdminResponse {
    state.stop_listeners();
    if q.has("graceful") {
        // Graceful: connections still open get `connection: close` on their next response.
        state.health_check_failed.store(true, Ordering::Relaxed);
    }
    AdminResponse::text(200, "OK\n")
}

fn logging(_: &ServerState, q: &Query<'_>) -> AdminResponse {
    if let Some(level) = q.get("level") {
        if let Err(e) = crate::logging::set_level(level) {
            return AdminResponse::text(400, format!("error: {e}\n"));
        }
    } else if let Some((k, _)) = q.pairs.first() {
        return AdminResponse::text(
            400,
            format!("error: hoist has one logger; use ?level=<level> (got \"{k}\")\n"),
        );
    }
    AdminResponse::text(
        200,
        format!("active loggers:\n  hoist: {}\n", crate::logging::level()),
    )
}

fn clusters(state: &ServerState, q: &Query<'_>) -> AdminResponse {
    if format(q) == Some("json") {
        AdminResponse::json(&state.clusters.admin_json())
    } else {
        AdminResponse::text(200, state.clusters.admin_text())
    }
}

fn listeners(state: &ServerState, q: &Query<'_>) -> AdminResponse {
    if format(q) == Some("json") {
        let statuses: Vec<_> = state
            .listeners
            .iter()
            .zip(&state.bound)
            .map(|(l, a)| {
                json!({
                    "name": l.name,
                    "local_address": {"socket_address": {"address": a.ip().to_string(), "port_value": a.port()}}
                })
            })
            .collect();
        return AdminResponse::json(&json!({ "listener_statuses": statuses }));
    }
    let mut s = String::new();
    for (l, a) in state.listeners.iter().zip(&state.bound) {
        s.push_str(&format!("{}::{}\n", l.name, a));
    }
    AdminResponse::text(200, s)
}

fn server_info(state: &ServerState, _: &Query<'_>) -> AdminResponse {
    let uptime = format!("{}s", state.start.elapsed().as_secs());
    let o = &state.options;
    AdminResponse::json(&json!({
        "version": format!("hoist/{}/RELEASE/rustls", env!("CARGO_PKG_VERSION")),
        "state": state.state_name(),
        "hot_restart_version": "disabled",
        "command_line_options": {
            "base_id": o.base_id.to_string(),
            "concurrency": state.concurrency,
            "config_path": o.config_path.as_ref().map(|p| p.display().to_string()).unwrap_or_default(),
            "config_yaml": o.config_yaml.clone().unwrap_or_default(),
            "log_level": format!("{:?}", o.log_level).to_lowercase(),
            "drain_time": format!("{}s", o.drain_time_s),
            "mode": format!("{:?}", o.mode),
            "tls_offload": format!("{:?}", o.tls_offload).to_lowercase(),
        },
        "node": {"id": state.bootstrap.node.id, "cluster": state.bootstrap.node.cluster},
        "uptime_current_epoch": uptime,
        "uptime_all_epochs": uptime,
    }))
}

fn tls_offload(state: &ServerState, _: &Query<'_>) -> AdminResponse {
    AdminResponse::json(&super::tls_offload::report(state))
}

fn config_dump(state: &ServerState, _: &Query<'_>) -> AdminResponse {
    AdminResponse::json(&super::config_dump::dump(state))
}

fn certs(state: &ServerState, _: &Query<'_>) -> AdminResponse {
    AdminResponse::json(&super::certs::certs(state))
}

fn format<'a>(q: &'a Query<'_>) -> Option<&'a str> {
    q.get("format")
}

fn stats(state: &ServerState, q: &Query<'_>) -> AdminResponse {
    render_stats(state, q.raw, None)
}

fn stats_prometheus(state: &ServerState, q: &Query<'_>) -> AdminResponse {
    render_stats(state, q.raw, Some(hoist_stats::StatsFormat::Prometheus))
}

fn render_stats(
    state: &ServerState,
    raw_query: &str,
    format: Option<hoist_stats::StatsFormat>,
) -> AdminResponse {
    let mut params = match hoist_stats::StatsParams::from_query(raw_query) {
        Ok(p) => p,
        Err(e) => return AdminResponse::text(400, e),
    };
    if let Some(f) = format {
        params.format = f;
    }
    crate::stats_scope::refresh_server_stats(state);
    // Histograms are merged on read as well as every flush interval, so /stats is current.
    state.stats.merge_histograms();
    let rendered = hoist_stats::render(&state.stats, &params);
    AdminResponse {
        status: 200,
        content_type: rendered.content_type,
        body: rendered.body.into(),
    }
}

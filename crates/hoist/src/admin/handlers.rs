//! The admin endpoints, Envoy's names and semantics.

use std::sync::atomic::Ordering;

use hoist_http::RequestHead;
use serde_json::json;

use super::{parse_query, AdminResponse};
use crate::server::ServerState;

struct Endpoint {
    path: &'static str,
    help: &'static str,
    /// Mutating endpoints answer POST only; a GET is a 400, as the admin has always said.
    mutates: bool,
    handler: fn(&ServerState, &[(String, String)]) -> AdminResponse,
}

const ENDPOINTS: &[Endpoint] = &[
    Endpoint { path: "/certs", help: "print certs on machine", mutates: false, handler: certs },
    Endpoint { path: "/clusters", help: "upstream cluster status", mutates: false, handler: clusters },
    Endpoint { path: "/config_dump", help: "dump current Envoy configs (private keys redacted)", mutates: false, handler: config_dump },
    Endpoint { path: "/drain_listeners", help: "drain listeners (stop accepting new connections)", mutates: true, handler: drain_listeners },
    Endpoint { path: "/healthcheck/fail", help: "cause the server to fail health checks", mutates: true, handler: healthcheck_fail },
    Endpoint { path: "/healthcheck/ok", help: "cause the server to pass health checks", mutates: true, handler: healthcheck_ok },
    Endpoint { path: "/help", help: "print out list of admin commands", mutates: false, handler: help },
    Endpoint { path: "/listeners", help: "print listener info", mutates: false, handler: listeners },
    Endpoint { path: "/logging", help: "query/change logging levels (?level=<level>)", mutates: true, handler: logging },
    Endpoint { path: "/quitquitquit", help: "exit the server (after draining in-flight requests)", mutates: true, handler: quit },
    Endpoint { path: "/ready", help: "print server state, return 200 if LIVE, otherwise return 503", mutates: false, handler: ready },
    Endpoint { path: "/reset_counters", help: "reset all counters to zero", mutates: true, handler: reset_counters },
    Endpoint { path: "/server_info", help: "print server version/status information", mutates: false, handler: server_info },
    Endpoint { path: "/stats", help: "print server stats (?filter=<regex>, ?format=json|prometheus, ?usedonly, ?type=)", mutates: false, handler: stats },
    Endpoint { path: "/stats/prometheus", help: "print server stats in prometheus format", mutates: false, handler: stats_prometheus },
];

pub fn dispatch(state: &ServerState, head: &RequestHead) -> AdminResponse {
    let path = head.path_only();
    let query = parse_query(head.query());
    let path = if path == "/" { "/help" } else { path };
    let Some(ep) = ENDPOINTS.iter().find(|e| e.path == path) else {
        return AdminResponse::text(404, format!("invalid path. admin commands are:\n{}", help_text()));
    };
    let method = &head.method;
    if ep.mutates && method != http::Method::POST {
        return AdminResponse::text(400, format!("Method {method} not allowed, POST required.\n"));
    }
    if !ep.mutates && !(method == http::Method::GET || method == http::Method::HEAD || method == http::Method::POST) {
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

fn help(_: &ServerState, _: &[(String, String)]) -> AdminResponse {
    AdminResponse::text(200, help_text())
}

fn ready(state: &ServerState, _: &[(String, String)]) -> AdminResponse {
    let name = state.state_name();
    AdminResponse::text(if name == "LIVE" { 200 } else { 503 }, format!("{name}\n"))
}

fn quit(_: &ServerState, _: &[(String, String)]) -> AdminResponse {
    AdminResponse::text(200, "OK\n")
}

fn reset_counters(state: &ServerState, _: &[(String, String)]) -> AdminResponse {
    state.stats.reset_counters();
    AdminResponse::text(200, "OK\n")
}

fn healthcheck_fail(state: &ServerState, _: &[(String, String)]) -> AdminResponse {
    state.health_check_failed.store(true, Ordering::Relaxed);
    AdminResponse::text(200, "OK\n")
}

fn healthcheck_ok(state: &ServerState, _: &[(String, String)]) -> AdminResponse {
    state.health_check_failed.store(false, Ordering::Relaxed);
    AdminResponse::text(200, "OK\n")
}

fn drain_listeners(state: &ServerState, q: &[(String, String)]) -> AdminResponse {
    state.stop_listeners();
    if q.iter().any(|(k, _)| k == "graceful") {
        // Graceful: connections still open get `connection: close` on their next response.
        state.health_check_failed.store(true, Ordering::Relaxed);
    }
    AdminResponse::text(200, "OK\n")
}

fn logging(_: &ServerState, q: &[(String, String)]) -> AdminResponse {
    if let Some((_, level)) = q.iter().find(|(k, _)| k == "level") {
        if let Err(e) = crate::logging::set_level(level) {
            return AdminResponse::text(400, format!("error: {e}\n"));
        }
    } else if let Some((k, _)) = q.first() {
        return AdminResponse::text(
            400,
            format!("error: hoist has one logger; use ?level=<level> (got \"{k}\")\n"),
        );
    }
    AdminResponse::text(200, format!("active loggers:\n  hoist: {}\n", crate::logging::level()))
}

fn clusters(_: &ServerState, q: &[(String, String)]) -> AdminResponse {
    if format(q) == Some("json") {
        AdminResponse::json(&json!({ "cluster_statuses": [] }))
    } else {
        AdminResponse::text(200, "")
    }
}

fn listeners(state: &ServerState, q: &[(String, String)]) -> AdminResponse {
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

fn server_info(state: &ServerState, _: &[(String, String)]) -> AdminResponse {
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

fn config_dump(state: &ServerState, _: &[(String, String)]) -> AdminResponse {
    AdminResponse::json(&super::config_dump::dump(state))
}

fn certs(state: &ServerState, _: &[(String, String)]) -> AdminResponse {
    AdminResponse::json(&super::certs::certs(state))
}

fn format(q: &[(String, String)]) -> Option<&str> {
    q.iter().find(|(k, _)| k == "format").map(|(_, v)| v.as_str())
}

fn stats(state: &ServerState, q: &[(String, String)]) -> AdminResponse {
    crate::stats_scope::refresh_server_stats(state);
    let mut options = hoist_stats::RenderOptions::default();
    for (k, v) in q {
        match k.as_str() {
            "filter" => match regex::Regex::new(v) {
                Ok(r) => options.filter = Some(r),
                Err(e) => return AdminResponse::text(400, format!("Invalid regex: {e}\n")),
            },
            "usedonly" => options.used_only = true,
            "type" => match hoist_stats::StatType::parse(v) {
                Some(t) => options.stat_type = Some(t),
                None => return AdminResponse::text(400, format!("invalid type: {v}\n")),
            },
            _ => {}
        }
    }
    match format(q) {
        Some("json") => AdminResponse {
            status: 200,
            content_type: "application/json",
            body: hoist_stats::render::json(&state.stats, &options).into(),
        },
        Some("prometheus") => prometheus(state, options),
        None | Some("text") => AdminResponse::text(200, hoist_stats::render::text(&state.stats, &options)),
        Some(other) => AdminResponse::text(400, format!("usage: /stats?format=json|prometheus|text (got {other})\n")),
    }
}

fn stats_prometheus(state: &ServerState, q: &[(String, String)]) -> AdminResponse {
    crate::stats_scope::refresh_server_stats(state);
    let mut options = hoist_stats::RenderOptions::default();
    if q.iter().any(|(k, _)| k == "usedonly") {
        options.used_only = true;
    }
    prometheus(state, options)
}

fn prometheus(state: &ServerState, options: hoist_stats::RenderOptions) -> AdminResponse {
    AdminResponse {
        status: 200,
        content_type: "text/plain; version=0.0.4",
        body: hoist_stats::render::prometheus(&state.stats, &options).into(),
    }
}

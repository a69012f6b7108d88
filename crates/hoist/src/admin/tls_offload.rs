//! GET /tls_offload: where TLS record crypto runs, at a glance. The probe's verdict on the
//! kernel, each listener's policy and its `ssl.offload.*` counters, the totals (does the NIC do
//! any of it?), and /proc/net/tls_stat.

use serde_json::{json, Map, Value};

use hoist_tls::offload::{self, tls_stat, Capabilities};

use crate::server::ServerState;

pub fn report(state: &ServerState) -> Value {
    let caps = offload::capabilities();
    let counters = state.stats.counters();
    let mut totals: Map<String, Value> = Map::new();
    let mut add = |key: &str, v: u64| {
        let t = totals.entry(key.to_string()).or_insert(json!(0));
        *t = json!(t.as_u64().unwrap_or(0) + v);
    };
    let listeners: Vec<Value> = state
        .listeners
        .iter()
        .zip(&state.bound)
        .map(|(l, addr)| {
            let prefix = format!("{}ssl.offload.", l.stat_scope);
            let mut c = Map::new();
            for counter in &counters {
                if let Some(suffix) = counter.name().strip_prefix(&prefix) {
                    c.insert(suffix.to_string(), json!(counter.value()));
                    add(suffix, counter.value());
                }
            }
            json!({
                "name": l.name,
                "address": addr.to_string(),
                "stat_prefix": l.stat_scope.trim_end_matches('.'),
                "tls": l.inspects_tls,
                "policy": mode_name(l.offload_mode),
                "policy_source": if l.tls_offload.is_some() { "listener metadata" } else { "command line" },
                "counters": c,
            })
        })
        .collect();
    let tls_stat = match tls_stat::read() {
        Ok(Some(s)) => {
            let m: Map<String, Value> = s.into_iter().map(|t| (t.name, json!(t.value))).collect();
            Value::Object(m)
        }
        _ => Value::Null,
    };
    let get = |k: &str| totals.get(k).and_then(Value::as_u64).unwrap_or(0);
    let dev = |k: &str| tls_stat.get(k).and_then(Value::as_u64).unwrap_or(0);
    let summary = json!({
        "nic_offload_seen": get("tx_hw") + get("rx_hw") + dev("TlsTxDevice") + dev("TlsRxDevice") > 0,
        "connections": {
            "tx_hw": get("tx_hw"),
            "tx_sw": get("tx_sw"),
            "rx_hw": get("rx_hw"),
            "rx_sw": get("rx_sw"),
            "user_space": get("none"),
            "unknown": get("unknown"),
        },
        "verdict": verdict(caps, get("tx_hw") + get("rx_hw"), get("tx_sw") + get("rx_sw"), get("none")),
    });
    json!({
        "summary": summary,
        "probe": probe(caps),
        "command_line": mode_name(state.options.tls_offload.mode()),
        "listeners": listeners,
        "tls_stat": tls_stat,
    })
}

fn probe(caps: &Capabilities) -> Value {
    let pairs = |set: &std::collections::BTreeSet<offload::probe::Pair>| -> Vec<String> {
        set.iter()
            .map(|(v, c)| format!("{} {}", v.name(), c.name()))
            .collect()
    };
    json!({
        "available": caps.available(),
        "line": caps.summary(),
        "unavailable_reason": caps.unavailable,
        "tx": pairs(&caps.tx),
        "rx": pairs(&caps.rx),
        "rekey": caps.rekey,
        "failures": caps.failures,
        "probe_time_us": caps.took.as_micros() as u64,
    })
}

/// One sentence on where the crypto of the connections so far ran.
fn verdict(caps: &Capabilities, hw: u64, sw: u64, user: u64) -> String {
    match (hw > 0, sw > 0) {
        _ if !caps.available() => format!("user space: the kernel has no TLS offload ({caps})"),
        (true, false) => "NIC: every offloaded direction so far ran on the NIC (hw)".to_string(),
        (true, true) => {
            "mixed: some directions on the NIC (hw), some in the kernel (sw)".to_string()
        }
        (false, true) => {
            "kernel: offloaded connections run in kernel software (sw), none on the NIC".to_string()
        }
        (false, false) if user > 0 => "user space: no connection was offloaded".to_string(),
        (false, false) => "no TLS connection yet".to_string(),
    }
}

fn mode_name(m: offload::TlsOffloadMode) -> &'static str {
    match m {
        offload::TlsOffloadMode::Auto => "auto",
        offload::TlsOffloadMode::Off => "off",
        offload::TlsOffloadMode::Require => "require",
    }
}

//! Fixtures: small valid configurations built as JSON (JSON is YAML) so that each test can
//! change one node at depth and assert the exact error.

use std::path::PathBuf;

use hoist_config::model::Bootstrap;
use hoist_config::ConfigError;
use serde_json::{json, Value};

pub const HCM_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager";
pub const ROUTER_TYPE: &str = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router";
pub const TLS_TYPE: &str =
    "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext";

/// JSON pointers into [`plain`] / [`tls`] and the YAML paths errors use for them.
pub const LISTENER: &str = "/static_resources/listeners/0";
pub const LISTENER_PATH: &str = "static_resources.listeners[0]";
pub const CHAIN: &str = "/static_resources/listeners/0/filter_chains/0";
pub const CHAIN_PATH: &str = "static_resources.listeners[0].filter_chains[0]";
pub const HCM: &str = "/static_resources/listeners/0/filter_chains/0/filters/0/typed_config";
pub const HCM_PATH: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config";
pub const TLS: &str = "/static_resources/listeners/0/filter_chains/0/transport_socket/typed_config";
pub const TLS_PATH: &str =
    "static_resources.listeners[0].filter_chains[0].transport_socket.typed_config";
pub const VHOST: &str = "/static_resources/listeners/0/filter_chains/0/filters/0/typed_config/route_config/virtual_hosts/0";
pub const VHOST_PATH: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0]";
pub const ROUTE: &str = "/static_resources/listeners/0/filter_chains/0/filters/0/typed_config/route_config/virtual_hosts/0/routes/0";
pub const ROUTE_PATH: &str = "static_resources.listeners[0].filter_chains[0].filters[0].typed_config.route_config.virtual_hosts[0].routes[0]";

/// Absolute path of a file in tests/data.
pub fn data(name: &str) -> String {
    format!("{}/tests/data/{name}", env!("CARGO_MANIFEST_DIR"))
}

pub fn hcm() -> Value {
    json!({
        "@type": HCM_TYPE,
        "stat_prefix": "ingress_http",
        "route_config": {
            "virtual_hosts": [{
                "name": "local",
                "domains": ["*"],
                "routes": [{
                    "match": {"prefix": "/"},
                    "direct_response": {"status": 200, "body": {"inline_string": "hello"}}
                }]
            }]
        },
        "http_filters": [{
            "name": "envoy.filters.http.router",
            "typed_config": {"@type": ROUTER_TYPE}
        }]
    })
}

/// One plain-HTTP listener with one route.
pub fn plain() -> Value {
    json!({
        "static_resources": {
            "listeners": [{
                "name": "http",
                "address": {"socket_address": {"address": "127.0.0.1", "port_value": 8080}},
                "filter_chains": [{
                    "filters": [{
                        "name": "envoy.filters.network.http_connection_manager",
                        "typed_config": hcm()
                    }]
                }]
            }]
        }
    })
}

pub fn tls_socket(cert: &str, key: &str) -> Value {
    json!({
        "name": "envoy.transport_sockets.tls",
        "typed_config": {
            "@type": TLS_TYPE,
            "common_tls_context": {
                "tls_certificates": [{
                    "certificate_chain": {"filename": data(cert)},
                    "private_key": {"filename": data(key)}
                }]
            }
        }
    })
}

/// [`plain`] with a TLS transport socket holding the RSA test certificate.
pub fn tls() -> Value {
    let mut v = plain();
    set(
        &mut v,
        &format!("{CHAIN}/transport_socket"),
        tls_socket("rsa.crt", "rsa.key"),
    );
    v
}

/// Sets the node at `pointer` (its parent must exist), adding a key or replacing a value.
pub fn set(v: &mut Value, pointer: &str, value: Value) {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
    let slot = v
        .pointer_mut(parent)
        .unwrap_or_else(|| panic!("no node at {parent}"));
    match slot {
        Value::Object(map) => {
            map.insert(key.to_owned(), value);
        }
        Value::Array(items) => {
            let i: usize = key.parse().expect("index");
            if i == items.len() {
                items.push(value);
            } else {
                items[i] = value;
            }
        }
        _ => panic!("{parent} is not a container"),
    }
}

/// Removes the node at `pointer`.
pub fn remove(v: &mut Value, pointer: &str) {
    let (parent, key) = pointer.rsplit_once('/').expect("pointer has a parent");
    match v.pointer_mut(parent) {
        Some(Value::Object(map)) => {
            map.shift_remove(key)
                .unwrap_or_else(|| panic!("no {key} in {parent}"));
        }
        Some(Value::Array(items)) => {
            items.remove(key.parse::<usize>().expect("index"));
        }
        _ => panic!("no container at {parent}"),
    }
}

pub fn load(v: &Value) -> Result<Bootstrap, ConfigError> {
    hoist_config::load_str(&v.to_string())
}

#[track_caller]
pub fn ok(v: &Value) -> Bootstrap {
    match load(v) {
        Ok(b) => b,
        Err(e) => panic!("expected the configuration to load, got: {e}"),
    }
}

#[track_caller]
pub fn error(v: &Value) -> String {
    match load(v) {
        Ok(_) => panic!("expected an error, the configuration loaded"),
        Err(e) => e.to_string(),
    }
}

#[track_caller]
pub fn yaml_error(yaml: &str) -> String {
    match hoist_config::load_str(yaml) {
        Ok(_) => panic!("expected an error, the configuration loaded"),
        Err(e) => e.to_string(),
    }
}

/// A directory under the system temp dir, removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("hoist-config-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    /// Writes `contents` to `name` in this directory and returns the file's path as a string.
    pub fn file(&self, name: &str, contents: &[u8]) -> String {
        let path = self.0.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create dir");
        }
        std::fs::write(&path, contents).expect("write file");
        path.to_string_lossy().into_owned()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

//! /config_dump: the loaded configuration in Envoy's ConfigDump shape, with secrets redacted.

use serde_json::{json, Map, Value};

use crate::server::ServerState;

/// Keys whose DataSource contents are secret wherever they appear (Envoy redacts these).
const SECRET_KEYS: &[&str] = &[
    "private_key",
    "password",
    "session_ticket_keys",
    "hmac_secret",
    "secret",
];

pub fn dump(state: &ServerState) -> Value {
    let mut bootstrap = state.bootstrap.source.clone();
    redact(&mut bootstrap, false);
    let updated = httpdate::fmt_http_date(state.start_wall);
    let listeners: Vec<Value> = bootstrap
        .pointer("/static_resources/listeners")
        .and_then(Value::as_array)
        .map(|ls| {
            ls.iter()
                .map(|l| {
                    let mut listener = l.clone();
                    if let Some(obj) = listener.as_object_mut() {
                        let mut with_type = Map::new();
                        with_type.insert(
                            "@type".into(),
                            Value::String(
                                "type.googleapis.com/envoy.config.listener.v3.Listener".into(),
                            ),
                        );
                        with_type.extend(std::mem::take(obj));
                        *obj = with_type;
                    }
                    json!({"listener": listener, "last_updated": updated})
                })
                .collect()
        })
        .unwrap_or_default();
    json!({
        "configs": [
            {
                "@type": "type.googleapis.com/envoy.admin.v3.BootstrapConfigDump",
                "bootstrap": bootstrap,
                "last_updated": updated,
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.ClustersConfigDump",
                "static_clusters": [],
            },
            {
                "@type": "type.googleapis.com/envoy.admin.v3.ListenersConfigDump",
                "static_listeners": listeners,
            },
        ]
    })
}

/// Replaces inline secret material with "[redacted]"; file names and variable names stay (they
/// are not secret and operators need them).
fn redact(v: &mut Value, inside_secret: bool) {
    match v {
        Value::Object(map) => {
            for (k, child) in map.iter_mut() {
                let secret = inside_secret || SECRET_KEYS.contains(&k.as_str());
                let is_inline = matches!(
                    k.as_str(),
                    "inline_string" | "inline_bytes" | "inlineString" | "inlineBytes"
                );
                if secret && is_inline {
                    *child = Value::String("[redacted]".into());
                } else {
                    redact(child, secret);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                redact(item, inside_secret);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_inline_keys_only() {
        let mut v = json!({
            "tls_certificates": [{
                "certificate_chain": {"inline_string": "CERT"},
                "private_key": {"inline_string": "KEY"}
            }, {
                "private_key": {"filename": "/etc/key.pem"}
            }],
            "session_ticket_keys": {"keys": [{"inline_bytes": "AAAA"}]}
        });
        redact(&mut v, false);
        assert_eq!(
            v["tls_certificates"][0]["certificate_chain"]["inline_string"],
            "CERT"
        );
        assert_eq!(
            v["tls_certificates"][0]["private_key"]["inline_string"],
            "[redacted]"
        );
        assert_eq!(
            v["tls_certificates"][1]["private_key"]["filename"],
            "/etc/key.pem"
        );
        assert_eq!(
            v["session_ticket_keys"]["keys"][0]["inline_bytes"],
            "[redacted]"
        );
    }
}

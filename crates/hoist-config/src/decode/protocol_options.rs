//! A cluster's HTTP protocol options: `typed_extension_protocol_options` with Envoy's
//! `envoy.extensions.upstreams.http.v3.HttpProtocolOptions` (which HTTP version to speak to the
//! endpoints) and `common_http_protocol_options` (per-connection limits), which Envoy accepts
//! both inside HttpProtocolOptions and, deprecated, at the cluster's top level.

use std::time::Duration;

use crate::extension::TypedConfig;
use crate::model::{UpstreamHttp2Options, UpstreamProtocol};
use crate::reader::{Message, Node, Result};

pub(crate) const HTTP_PROTOCOL_OPTIONS: &str =
    "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

/// The per-connection limits of `common_http_protocol_options`, starting from the cluster's
/// defaults.
pub(crate) struct ConnectionLimits {
    pub idle_timeout: Option<Duration>,
    pub max_requests_per_connection: Option<u32>,
}

/// Reads `common_http_protocol_options` into `limits`.
pub(crate) fn common_http_protocol_options(
    node: &Node,
    limits: &mut ConnectionLimits,
) -> Result<()> {
    let mut o = node.message()?;
    o.unsupported(&[
        "max_connection_duration",
        "max_headers_count",
        "max_response_headers_kb",
        "max_stream_duration",
        "headers_with_underscores_action",
    ])?;
    if let Some(d) = o.opt_duration("idle_timeout")? {
        limits.idle_timeout = (!d.is_zero()).then_some(d);
    }
    if let Some(max) = o.opt_u32("max_requests_per_connection", 0..=u32::MAX)? {
        limits.max_requests_per_connection = (max > 0).then_some(max);
    }
    o.finish()
}

/// Reads `typed_extension_protocol_options` (a map from extension name to its config): only
/// HttpProtocolOptions is known. `common_set`: whether the cluster also has the deprecated
/// top-level `common_http_protocol_options` (Envoy refuses both).
pub(crate) fn typed_extension_protocol_options(
    node: &Node,
    limits: &mut ConnectionLimits,
    common_set: bool,
) -> Result<UpstreamProtocol> {
    let mut protocol = UpstreamProtocol::Http1;
    for (key, value) in node.entries()? {
        let typed = TypedConfig::read(&value)?;
        if key != HTTP_PROTOCOL_OPTIONS || typed.type_name != HTTP_PROTOCOL_OPTIONS {
            return Err(value.error(format!(
                "protocol options \"{key}\" ({}) are not supported by hoist (only {HTTP_PROTOCOL_OPTIONS} is)",
                typed.type_url
            )));
        }
        protocol = http_protocol_options(typed.body, limits, common_set)?;
    }
    Ok(protocol)
}

fn http_protocol_options(
    mut m: Message,
    limits: &mut ConnectionLimits,
    common_set: bool,
) -> Result<UpstreamProtocol> {
    m.unsupported(&[
        "upstream_http_protocol_options",
        "use_downstream_protocol_config",
        "http_filters",
        "header_validation_config",
        "outlier_detection",
    ])?;
    if let Some(n) = m.field("common_http_protocol_options")? {
        if common_set {
            return Err(n.error(
                "common_http_protocol_options is set both here and at the cluster's top level",
            ));
        }
        common_http_protocol_options(&n, limits)?;
    }
    let protocol = match m.oneof(&["explicit_http_config", "auto_config"], true)? {
        Some("explicit_http_config") => explicit_http_config(&m.required("explicit_http_config")?)?,
        _ => UpstreamProtocol::Auto(auto_config(&m.required("auto_config")?)?),
    };
    m.finish()?;
    Ok(protocol)
}

fn explicit_http_config(node: &Node) -> Result<UpstreamProtocol> {
    let mut m = node.message()?;
    m.unsupported(&["http3_protocol_options"])?;
    let protocol = match m.oneof(&["http_protocol_options", "http2_protocol_options"], true)? {
        Some("http2_protocol_options") => UpstreamProtocol::Http2(http2_protocol_options(
            &m.required("http2_protocol_options")?,
        )?),
        _ => {
            super::hcm::http1_options(&m.required("http_protocol_options")?)?;
            UpstreamProtocol::Http1
        }
    };
    m.finish()?;
    Ok(protocol)
}

fn auto_config(node: &Node) -> Result<UpstreamHttp2Options> {
    let mut m = node.message()?;
    m.unsupported(&[
        "http3_protocol_options",
        "alternate_protocols_cache_options",
    ])?;
    if let Some(n) = m.field("http_protocol_options")? {
        super::hcm::http1_options(&n)?;
    }
    let h2 = match m.field("http2_protocol_options")? {
        Some(n) => http2_protocol_options(&n)?,
        None => UpstreamHttp2Options::default(),
    };
    m.finish()?;
    Ok(h2)
}

/// The largest window and stream count Envoy allows (2^31 - 1).
const MAX_WINDOW: u32 = 2_147_483_647;

fn http2_protocol_options(node: &Node) -> Result<UpstreamHttp2Options> {
    let mut m = node.message()?;
    m.unsupported(super::hcm::HTTP2_UNSUPPORTED)?;
    let d = UpstreamHttp2Options::default();
    let o = UpstreamHttp2Options {
        max_concurrent_streams: m.u32(
            "max_concurrent_streams",
            d.max_concurrent_streams,
            1..=MAX_WINDOW,
        )?,
        initial_stream_window_size: m.u32(
            "initial_stream_window_size",
            d.initial_stream_window_size,
            65_535..=MAX_WINDOW,
        )?,
        initial_connection_window_size: m.u32(
            "initial_connection_window_size",
            d.initial_connection_window_size,
            65_535..=MAX_WINDOW,
        )?,
    };
    m.finish()?;
    Ok(o)
}

#[cfg(test)]
mod tests {
    use crate::model::{Cluster, UpstreamHttp2Options, UpstreamProtocol};
    use crate::reader::Node;
    use serde_json::{json, Value};
    use std::time::Duration;

    fn decode(options: Value, extra: Value) -> std::result::Result<Cluster, String> {
        let mut c = json!({"name": "a", "load_assignment": {"endpoints": [{"lb_endpoints": [
            {"endpoint": {"address": {"socket_address": {"address": "127.0.0.1", "port_value": 1}}}}]}]},
            "typed_extension_protocol_options": {super::HTTP_PROTOCOL_OPTIONS: options}});
        if let (Some(c), Value::Object(extra)) = (c.as_object_mut(), extra) {
            c.extend(extra);
        }
        let root = json!({ "clusters": [c] });
        let node = Node::new(&root["clusters"], "static_resources.clusters");
        let list = node.list().map_err(|e| e.to_string())?;
        let mut out = super::super::cluster::clusters(&list).map_err(|e| e.to_string())?;
        Ok(out.remove(0))
    }

    fn any(body: Value) -> Value {
        let mut v = json!({"@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"});
        if let (Some(v), Value::Object(body)) = (v.as_object_mut(), body) {
            v.extend(body);
        }
        v
    }

    #[test]
    fn explicit_http2_with_windows_and_streams() {
        let c = decode(
            any(json!({"explicit_http_config": {"http2_protocol_options": {
                "max_concurrent_streams": 10, "initial_stream_window_size": 65536,
                "initial_connection_window_size": 1048576}}})),
            json!({}),
        )
        .unwrap();
        assert_eq!(
            c.protocol,
            UpstreamProtocol::Http2(UpstreamHttp2Options {
                max_concurrent_streams: 10,
                initial_stream_window_size: 65536,
                initial_connection_window_size: 1_048_576,
            })
        );
        let c = decode(
            any(json!({"explicit_http_config": {"http2_protocol_options": {}}})),
            json!({}),
        )
        .unwrap();
        assert_eq!(
            c.protocol,
            UpstreamProtocol::Http2(UpstreamHttp2Options::default())
        );
    }

    #[test]
    fn explicit_http1_auto_and_common_options() {
        let c = decode(
            any(json!({"explicit_http_config": {"http_protocol_options": {}},
                "common_http_protocol_options": {"idle_timeout": "5s", "max_requests_per_connection": 7}})),
            json!({}),
        )
        .unwrap();
        assert_eq!(c.protocol, UpstreamProtocol::Http1);
        assert_eq!(c.idle_timeout, Some(Duration::from_secs(5)));
        assert_eq!(c.max_requests_per_connection, Some(7));
        let c = decode(
            any(json!({"auto_config": {"http_protocol_options": {},
                "http2_protocol_options": {"max_concurrent_streams": 3}}})),
            json!({}),
        )
        .unwrap();
        let h2 = UpstreamHttp2Options {
            max_concurrent_streams: 3,
            ..UpstreamHttp2Options::default()
        };
        assert_eq!(c.protocol, UpstreamProtocol::Auto(h2));
    }

    #[test]
    fn refusals_name_the_field() {
        let err = |options: Value, extra: Value| decode(options, extra).unwrap_err();
        let e = err(any(json!({})), json!({}));
        assert!(
            e.contains("exactly one of explicit_http_config, auto_config"),
            "{e}"
        );
        let e = err(
            any(
                json!({"explicit_http_config": {"http2_protocol_options": {"hpack_table_size": 1}}}),
            ),
            json!({}),
        );
        assert!(
            e.contains("explicit_http_config.http2_protocol_options: field \"hpack_table_size\" is not supported"),
            "{e}"
        );
        let e = err(
            any(
                json!({"explicit_http_config": {"http2_protocol_options": {"initial_stream_window_size": 100}}}),
            ),
            json!({}),
        );
        assert!(e.contains("initial_stream_window_size"), "{e}");
        let e = err(
            any(json!({"explicit_http_config": {"http3_protocol_options": {}}})),
            json!({}),
        );
        assert!(
            e.contains("\"http3_protocol_options\" is not supported"),
            "{e}"
        );
        let e = err(
            any(json!({"use_downstream_protocol_config": {}})),
            json!({}),
        );
        assert!(e.contains("use_downstream_protocol_config"), "{e}");
        let e = err(
            any(
                json!({"explicit_http_config": {"http_protocol_options": {}},
                "common_http_protocol_options": {}}),
            ),
            json!({"common_http_protocol_options": {}}),
        );
        assert!(
            e.contains("both here and at the cluster's top level"),
            "{e}"
        );
        let e = err(
            json!({"@type": "type.googleapis.com/envoy.extensions.upstreams.tcp.v3.TcpProtocolOptions"}),
            json!({}),
        );
        assert!(e.contains("not supported by hoist"), "{e}");
    }
}

//! `envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`.

use std::time::Duration;

use super::access_log::access_logs;
use super::headers::header_value;
use super::http_filters::http_filters;
use super::route::route_configuration;
use crate::model::{CodecType, Http2Options, HttpConnectionManager};
use crate::reader::{Message, Node, Result};

const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_secs(300);
const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(3600);
const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_MAX_HEADERS_COUNT: u32 = 100;
const DEFAULT_MAX_REQUEST_HEADERS_KB: u32 = 60;
/// HTTP/2 flow-control windows: RFC 9113 minimum and Envoy's maximum.
const WINDOW_RANGE: std::ops::RangeInclusive<u32> = 65_535..=2_147_483_647;

pub(crate) fn http_connection_manager(mut m: Message) -> Result<HttpConnectionManager> {
    m.unsupported(&[
        "rds",
        "scoped_routes",
        "add_user_agent",
        "tracing",
        "http1_safe_max_connection_duration",
        "http3_protocol_options",
        "scheme_header_transformation",
        "stream_flush_timeout",
        "delayed_close_timeout",
        "access_log_flush_interval",
        "flush_access_log_on_new_request",
        "access_log_options",
        "original_ip_detection_extensions",
        "early_header_mutation_extensions",
        "internal_address_config",
        "skip_xff_append",
        "preserve_external_request_id",
        "always_set_request_id_in_response",
        "forward_client_cert_details",
        "set_current_client_cert_details",
        "forward_client_cert_matcher",
        "proxy_100_continue",
        "represent_ipv4_remote_address_as_ipv4_mapped_ipv6",
        "upgrade_configs",
        "normalize_path",
        "merge_slashes",
        "path_with_escaped_slashes_action",
        "request_id_extension",
        "local_reply_config",
        "strip_matching_host_port",
        "strip_any_host_port",
        "stream_error_on_invalid_http_message",
        "path_normalization_options",
        "strip_trailing_host_dot",
        "proxy_status_config",
        "typed_header_validation_config",
        "append_x_forwarded_port",
        "append_local_overload",
        "add_proxy_protocol_connection_state",
        "forward_proto_config",
    ])?;
    let yaml_path = m.path().to_owned();
    let stat_prefix = m.required_string("stat_prefix")?;
    let codec_type = match m.field("codec_type")? {
        None => CodecType::Auto,
        Some(n) => match n.enumeration(&["AUTO", "HTTP1", "HTTP2", "HTTP3"])? {
            0 => CodecType::Auto,
            1 => CodecType::Http1,
            2 => CodecType::Http2,
            _ => return Err(n.error("codec_type HTTP3 is not supported by hoist yet")),
        },
    };
    // Filters first: route-level typed_per_filter_config keys must name one of them.
    let filters = http_filters(&mut m)?;
    let route_config = route_configuration(&m.required("route_config")?, &filters)?;
    let access_log = access_logs(&mut m)?;
    let server_name = match m.field("server_name")? {
        Some(n) => Some(header_value(&n)?).filter(|s| !s.is_empty()),
        None => None,
    }
    .unwrap_or_else(|| "envoy".to_owned());
    let server_header_append_if_absent = match m.field("server_header_transformation")? {
        None => false,
        Some(n) => match n.enumeration(&["OVERWRITE", "APPEND_IF_ABSENT", "PASS_THROUGH"])? {
            0 => false,
            1 => true,
            _ => {
                return Err(n.error(
                    "server_header_transformation PASS_THROUGH is not supported by hoist yet",
                ))
            }
        },
    };
    let stream_idle_timeout = timeout(
        &mut m,
        "stream_idle_timeout",
        Some(DEFAULT_STREAM_IDLE_TIMEOUT),
    )?;
    let request_timeout = timeout(&mut m, "request_timeout", None)?;
    let request_headers_timeout = timeout(&mut m, "request_headers_timeout", None)?;
    let drain_timeout = m
        .opt_duration("drain_timeout")?
        .unwrap_or(DEFAULT_DRAIN_TIMEOUT);
    let max_request_headers_kb = m.u32(
        "max_request_headers_kb",
        DEFAULT_MAX_REQUEST_HEADERS_KB,
        1..=8192,
    )?;
    let use_remote_address = m.bool("use_remote_address", false)?;
    let generate_request_id = m.bool("generate_request_id", true)?;
    let xff_num_trusted_hops = m.u32("xff_num_trusted_hops", 0, 0..=u32::MAX)?;
    let via = match m.field("via")? {
        Some(n) => {
            let v = header_value(&n)?;
            (!v.is_empty()).then_some(v)
        }
        None => None,
    };
    let (idle_timeout, max_headers_count) = match m.field("common_http_protocol_options")? {
        Some(n) => common_options(&n)?,
        None => (Some(DEFAULT_IDLE_TIMEOUT), DEFAULT_MAX_HEADERS_COUNT),
    };
    if let Some(n) = m.field("http_protocol_options")? {
        http1_options(&n)?;
    }
    let http2 = match m.field("http2_protocol_options")? {
        Some(n) => http2_options(&n)?,
        None => Http2Options::default(),
    };
    m.finish()?;
    Ok(HttpConnectionManager {
        stat_prefix,
        codec_type,
        route_config,
        http_filters: filters.filters,
        access_log,
        server_name,
        server_header_append_if_absent,
        stream_idle_timeout,
        request_timeout,
        request_headers_timeout,
        idle_timeout,
        max_headers_count,
        max_request_headers_kb,
        drain_timeout,
        use_remote_address,
        generate_request_id,
        via,
        xff_num_trusted_hops,
        http2,
        yaml_path,
    })
}

/// A timeout where an explicit zero disables it.
fn timeout(m: &mut Message, name: &str, default: Option<Duration>) -> Result<Option<Duration>> {
    Ok(match m.opt_duration(name)? {
        Some(d) if d.is_zero() => None,
        Some(d) => Some(d),
        None => default,
    })
}

/// `common_http_protocol_options`: idle_timeout and max_headers_count.
fn common_options(node: &Node) -> Result<(Option<Duration>, u32)> {
    let mut m = node.message()?;
    m.unsupported(&[
        "max_connection_duration",
        "max_response_headers_kb",
        "max_stream_duration",
        "headers_with_underscores_action",
        "max_requests_per_connection",
    ])?;
    let idle = timeout(&mut m, "idle_timeout", Some(DEFAULT_IDLE_TIMEOUT))?;
    let max_headers = m.u32("max_headers_count", DEFAULT_MAX_HEADERS_COUNT, 1..=u32::MAX)?;
    m.finish()?;
    Ok((idle, max_headers))
}

/// `http_protocol_options` (downstream and upstream): hoist's HTTP/1.1 has no knobs yet, so only
/// the empty message passes.
pub(crate) fn http1_options(node: &Node) -> Result<()> {
    let mut m = node.message()?;
    m.unsupported(&[
        "allow_absolute_url",
        "accept_http_10",
        "default_host_for_http_10",
        "header_key_format",
        "enable_trailers",
        "allow_chunked_length",
        "override_stream_error_on_invalid_http_message",
        "send_fully_qualified_url",
        "use_balsa_parser",
        "allow_custom_methods",
        "ignore_http_11_upgrade",
    ])?;
    m.finish()
}

/// Http2ProtocolOptions fields hoist does not implement, downstream and upstream alike.
pub(crate) const HTTP2_UNSUPPORTED: &[&str] = &[
    "hpack_table_size",
    "allow_connect",
    "allow_metadata",
    "max_outbound_frames",
    "max_outbound_control_frames",
    "max_consecutive_inbound_frames_with_empty_payload",
    "max_inbound_priority_frames_per_stream",
    "max_inbound_window_update_frames_per_data_frame_sent",
    "stream_error_on_invalid_http_messaging",
    "override_stream_error_on_invalid_http_message",
    "custom_settings_parameters",
    "connection_keepalive",
    "use_oghttp2_codec",
    "max_metadata_size",
    "enable_huffman_encoding",
];

fn http2_options(node: &Node) -> Result<Http2Options> {
    let mut m = node.message()?;
    m.unsupported(HTTP2_UNSUPPORTED)?;
    let defaults = Http2Options::default();
    let options = Http2Options {
        max_concurrent_streams: m.u32(
            "max_concurrent_streams",
            defaults.max_concurrent_streams,
            1..=2_147_483_647,
        )?,
        initial_stream_window_size: m.u32(
            "initial_stream_window_size",
            defaults.initial_stream_window_size,
            WINDOW_RANGE,
        )?,
        initial_connection_window_size: m.u32(
            "initial_connection_window_size",
            defaults.initial_connection_window_size,
            WINDOW_RANGE,
        )?,
    };
    m.finish()?;
    Ok(options)
}

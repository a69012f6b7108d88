//! `envoy.config.core.v3`: addresses and data sources.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use base64::Engine;

use crate::model::{DataSource, SocketAddress};
use crate::reader::{Node, Result};

/// `envoy.config.core.v3.Address` with a TCP `socket_address` whose address is an IP literal.
pub(crate) fn address(node: &Node) -> Result<SocketAddress> {
    let mut m = node.message()?;
    m.unsupported(&["pipe", "envoy_internal_address"])?;
    let sock = m.required("socket_address")?;
    m.finish()?;

    let mut s = sock.message()?;
    s.unsupported(&["named_port", "resolver_name", "network_namespace_filepath"])?;
    if let Some(protocol) = s.field("protocol")? {
        if protocol.enumeration(&["TCP", "UDP"])? != 0 {
            return Err(protocol.error("protocol UDP is not supported by hoist yet"));
        }
    }
    let addr_node = s.required("address")?;
    let text = addr_node.str()?;
    // Envoy writes IPv6 addresses bare; brackets are tolerated.
    let bare = text
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or(text);
    let ip: IpAddr = bare.parse().map_err(|_| {
        addr_node.error(format!(
            "address \"{text}\" is not an IP address (hoist does not resolve host names)"
        ))
    })?;
    let port = s.u32("port_value", 0, 0..=65535)?;
    // Accepted: on Linux an IPv6 socket is dual-stack unless the system says otherwise.
    s.bool("ipv4_compat", false)?;
    s.finish()?;
    Ok(SocketAddress {
        addr: SocketAddr::new(ip, u16::try_from(port).unwrap_or(0)),
    })
}

/// `envoy.config.core.v3.DataSource`. Files must be readable now; their size is recorded and
/// their contents are left on disk (a body stays file-backed).
pub fn data_source(node: &Node) -> Result<DataSource> {
    let mut m = node.message()?;
    m.unsupported(&["watched_directory"])?;
    let which = m.oneof(
        &[
            "filename",
            "inline_string",
            "inline_bytes",
            "environment_variable",
        ],
        true,
    )?;
    let source = match which {
        Some("filename") => {
            let n = m.required("filename")?;
            file(&n)?
        }
        Some("inline_string") => DataSource::Inline(m.string("inline_string")?.into_bytes()),
        Some("inline_bytes") => {
            let n = m.required("inline_bytes")?;
            let text = n.str()?;
            DataSource::Inline(decode_base64(text).ok_or_else(|| {
                n.error("inline_bytes is not valid base64 (proto-JSON bytes are base64)")
            })?)
        }
        _ => {
            let n = m.required("environment_variable")?;
            let name = n.string()?;
            if name.is_empty() {
                return Err(n.error("must not be empty"));
            }
            let value = std::env::var_os(&name)
                .ok_or_else(|| n.error(format!("environment variable \"{name}\" is not set")))?;
            DataSource::Env {
                name,
                value: value.into_encoded_bytes(),
            }
        }
    };
    m.finish()?;
    Ok(source)
}

fn file(node: &Node) -> Result<DataSource> {
    let name = node.string()?;
    if name.is_empty() {
        return Err(node.error("must not be empty"));
    }
    let path = PathBuf::from(&name);
    let cannot = |e: std::io::Error| node.error(format!("cannot read \"{name}\": {e}"));
    // Opening proves readability (metadata alone would not); nothing is read yet.
    let meta = std::fs::File::open(&path)
        .and_then(|f| f.metadata())
        .map_err(cannot)?;
    if !meta.is_file() {
        return Err(node.error(format!("cannot read \"{name}\": not a regular file")));
    }
    Ok(DataSource::File {
        path,
        size: meta.len(),
    })
}

/// Proto-JSON accepts standard and URL-safe base64, padded or not.
fn decode_base64(text: &str) -> Option<Vec<u8>> {
    use base64::engine::general_purpose::{STANDARD_PAD_INDIFFERENT, URL_SAFE_PAD_INDIFFERENT};
    STANDARD_PAD_INDIFFERENT
        .decode(text)
        .or_else(|_| URL_SAFE_PAD_INDIFFERENT.decode(text))
        .ok()
}

/// How a data source is named in errors about its contents.
pub(crate) fn describe_source(source: &DataSource) -> String {
    match source {
        DataSource::File { path, .. } => format!("\"{}\"", path.display()),
        DataSource::Inline(_) => "the inline data".to_owned(),
        DataSource::Env { name, .. } => format!("environment variable \"{name}\""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_accepts_both_alphabets_with_or_without_padding() {
        assert_eq!(decode_base64("aGk/Pw==").as_deref(), Some(&b"hi??"[..]));
        assert_eq!(decode_base64("aGk_Pw").as_deref(), Some(&b"hi??"[..]));
        assert_eq!(decode_base64("!!"), None);
    }
}

//! Header names and `envoy.config.core.v3.HeaderValueOption`, and the four
//! `*_headers_to_{add,remove}` lists route configurations, virtual hosts and routes share.

use crate::model::{HeaderAppendAction, HeaderMutations, HeaderValueOption};
use crate::reader::{Message, Node, Result};

/// Envoy's limit on a header name or value in configuration.
const MAX_HEADER_BYTES: usize = 16384;

/// Reads the four header mutation lists of `m`.
pub(crate) fn header_mutations(m: &mut Message) -> Result<HeaderMutations> {
    Ok(HeaderMutations {
        request_headers_to_add: options(m, "request_headers_to_add")?,
        request_headers_to_remove: removals(m, "request_headers_to_remove")?,
        response_headers_to_add: options(m, "response_headers_to_add")?,
        response_headers_to_remove: removals(m, "response_headers_to_remove")?,
    })
}

fn options(m: &mut Message, field: &str) -> Result<Vec<HeaderValueOption>> {
    m.list(field)?.iter().map(header_value_option).collect()
}

fn removals(m: &mut Message, field: &str) -> Result<Vec<String>> {
    m.list(field)?.iter().map(mutable_header_name).collect()
}

/// One `envoy.config.core.v3.HeaderValueOption`.
pub fn header_value_option(node: &Node) -> Result<HeaderValueOption> {
    let mut m = node.message()?;
    let header = m.required("header")?;
    let append = m.opt_bool("append")?;
    let action = m.enumeration(
        "append_action",
        &[
            "APPEND_IF_EXISTS_OR_ADD",
            "ADD_IF_ABSENT",
            "OVERWRITE_IF_EXISTS_OR_ADD",
            "OVERWRITE_IF_EXISTS",
        ],
    )?;
    let append_action = match (append, action) {
        (Some(_), Some(_)) => {
            return Err(m.error("only one of append, append_action may be set"));
        }
        (Some(true), None) | (None, None) | (None, Some(0)) => {
            HeaderAppendAction::AppendIfExistsOrAdd
        }
        (Some(false), None) | (None, Some(2)) => HeaderAppendAction::OverwriteIfExistsOrAdd,
        (None, Some(1)) => HeaderAppendAction::AddIfAbsent,
        (None, Some(_)) => HeaderAppendAction::OverwriteIfExists,
    };
    let keep_empty_value = m.bool("keep_empty_value", false)?;
    m.finish()?;

    let mut h = header.message()?;
    h.unsupported(&["raw_value"])?;
    let key = mutable_header_name(&h.required("key")?)?;
    let value_node = h.field("value")?;
    let value = match &value_node {
        Some(n) => header_value(n)?,
        None => String::new(),
    };
    h.finish()?;
    Ok(HeaderValueOption {
        key,
        value,
        append_action,
        keep_empty_value,
    })
}

/// A header name a configuration may add or remove: a valid token, lower-cased, and not one
/// hoist owns (pseudo-headers, host).
fn mutable_header_name(node: &Node) -> Result<String> {
    let name = header_name(node)?;
    if name.starts_with(':') || name == "host" {
        return Err(node.error(format!(
            "header \"{name}\" may not be modified: :-prefixed and host headers are set by hoist"
        )));
    }
    Ok(name)
}

/// A header name (possibly a `:pseudo` header, as matchers use), lower-cased.
pub(crate) fn header_name(node: &Node) -> Result<String> {
    let name = node.str()?;
    let token = name.strip_prefix(':').unwrap_or(name);
    if token.is_empty() || name.len() > MAX_HEADER_BYTES || !token.bytes().all(is_tchar) {
        return Err(node.error(format!(
            "{} is not a valid header name",
            crate::reader::describe(node.value())
        )));
    }
    Ok(name.to_ascii_lowercase())
}

/// A header value: no NUL, CR or LF (Envoy's HTTP_HEADER_VALUE rule).
pub(crate) fn header_value(node: &Node) -> Result<String> {
    let value = node.string()?;
    if value.len() > MAX_HEADER_BYTES || value.contains(['\0', '\r', '\n']) {
        return Err(node.error(format!(
            "{} is not a valid header value (no NUL, CR or LF; at most {MAX_HEADER_BYTES} bytes)",
            crate::reader::describe(node.value())
        )));
    }
    Ok(value)
}

/// RFC 9110 token characters.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

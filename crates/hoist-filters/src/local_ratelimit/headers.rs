//! `response_headers_to_add` and `request_headers_to_add_when_not_enforced`: lists of
//! `HeaderValueOption` compiled once at load.

use hoist_config::decoders::header_value_option;
use hoist_config::model::HeaderAppendAction;
use hoist_config::reader::{Message, Result};
use http::header::{HeaderMap, HeaderName, HeaderValue};

/// Envoy's `max_items` on both lists.
const MAX_ITEMS: usize = 10;

struct HeaderAdd {
    name: HeaderName,
    value: HeaderValue,
    action: HeaderAppendAction,
}

#[derive(Default)]
pub struct HeaderAdds(Vec<HeaderAdd>);

impl HeaderAdds {
    /// Reads the repeated `HeaderValueOption` field `field` of `m`.
    pub fn decode(m: &mut Message, field: &str) -> Result<HeaderAdds> {
        let items = m.list(field)?;
        if items.len() > MAX_ITEMS {
            return Err(m.error(format!(
                "\"{field}\" has {} items; at most {MAX_ITEMS} are allowed",
                items.len()
            )));
        }
        let mut adds = Vec::with_capacity(items.len());
        for item in &items {
            let o = header_value_option(item)?;
            // hoist's filters have no access to the request formatter Envoy evaluates these
            // with; a value using it would be sent verbatim, so it is refused.
            if o.value.replace("%%", "").contains('%') {
                return Err(item.error(format!(
                    "header \"{}\": %COMMAND% operators in values are not supported by this filter yet",
                    o.key
                )));
            }
            // Envoy drops an empty value unless keep_empty_value is set.
            if o.value.is_empty() && !o.keep_empty_value {
                continue;
            }
            let name = HeaderName::from_bytes(o.key.as_bytes())
                .map_err(|_| item.error(format!("invalid header name \"{}\"", o.key)))?;
            let value = HeaderValue::from_str(&o.value.replace("%%", "%"))
                .map_err(|_| item.error(format!("invalid value for header \"{}\"", o.key)))?;
            adds.push(HeaderAdd {
                name,
                value,
                action: o.append_action,
            });
        }
        Ok(HeaderAdds(adds))
    }

    pub fn apply(&self, headers: &mut HeaderMap) {
        for h in &self.0 {
            match h.action {
                HeaderAppendAction::AppendIfExistsOrAdd => {
                    headers.append(h.name.clone(), h.value.clone());
                }
                HeaderAppendAction::AddIfAbsent => {
                    if !headers.contains_key(&h.name) {
                        headers.insert(h.name.clone(), h.value.clone());
                    }
                }
                HeaderAppendAction::OverwriteIfExistsOrAdd => {
                    headers.insert(h.name.clone(), h.value.clone());
                }
                HeaderAppendAction::OverwriteIfExists => {
                    if headers.contains_key(&h.name) {
                        headers.insert(h.name.clone(), h.value.clone());
                    }
                }
            }
        }
    }
}

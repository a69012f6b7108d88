//! Header mutations (`*_headers_to_add` / `*_headers_to_remove`), compiled once at load.

use hoist_config::model::{HeaderAppendAction, HeaderMutations, HeaderValueOption};
use hoist_config::ConfigError;
use http::header::{HeaderMap, HeaderName, HeaderValue};

#[derive(Clone, Debug)]
struct HeaderAdd {
    name: HeaderName,
    value: HeaderValue,
    action: HeaderAppendAction,
}

/// The response-side mutations of one level (route, virtual host or route configuration).
#[derive(Clone, Debug, Default)]
pub struct ResponseMutations {
    add: Vec<HeaderAdd>,
    remove: Vec<HeaderName>,
}

impl ResponseMutations {
    pub fn compile(m: &HeaderMutations, yaml_path: &str) -> Result<Self, ConfigError> {
        let add = m
            .response_headers_to_add
            .iter()
            // Envoy drops an empty value unless keep_empty_value is set.
            .filter(|o| !o.value.is_empty() || o.keep_empty_value)
            .map(|o| compile_add(o, yaml_path))
            .collect::<Result<Vec<_>, _>>()?;
        let remove = m
            .response_headers_to_remove
            .iter()
            .map(|n| header_name(n, yaml_path))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ResponseMutations { add, remove })
    }

    /// Removes first, then adds, as Envoy's HeaderParser does.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for name in &self.remove {
            headers.remove(name);
        }
        for h in &self.add {
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

fn header_name(name: &str, yaml_path: &str) -> Result<HeaderName, ConfigError> {
    HeaderName::from_bytes(name.as_bytes())
        .map_err(|_| ConfigError::new(yaml_path, format!("invalid header name \"{name}\"")))
}

fn compile_add(o: &HeaderValueOption, yaml_path: &str) -> Result<HeaderAdd, ConfigError> {
    let value = HeaderValue::from_str(&o.value).map_err(|_| {
        ConfigError::new(
            yaml_path,
            format!("invalid value for header \"{}\": {:?}", o.key, o.value),
        )
    })?;
    Ok(HeaderAdd {
        name: header_name(&o.key, yaml_path)?,
        value,
        action: o.append_action,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opt(k: &str, v: &str, action: HeaderAppendAction) -> HeaderValueOption {
        HeaderValueOption {
            key: k.into(),
            value: v.into(),
            append_action: action,
            keep_empty_value: false,
        }
    }

    #[test]
    fn actions() {
        let m = HeaderMutations {
            response_headers_to_add: vec![
                opt("x-append", "2", HeaderAppendAction::AppendIfExistsOrAdd),
                opt("x-absent", "new", HeaderAppendAction::AddIfAbsent),
                opt("x-over", "new", HeaderAppendAction::OverwriteIfExistsOrAdd),
                opt("x-only-if", "new", HeaderAppendAction::OverwriteIfExists),
                opt("x-empty", "", HeaderAppendAction::OverwriteIfExistsOrAdd),
            ],
            response_headers_to_remove: vec!["x-gone".into()],
            ..Default::default()
        };
        let c = ResponseMutations::compile(&m, "p").unwrap();
        let mut h = HeaderMap::new();
        h.insert("x-append", "1".parse().unwrap());
        h.insert("x-absent", "old".parse().unwrap());
        h.insert("x-over", "old".parse().unwrap());
        h.insert("x-gone", "v".parse().unwrap());
        c.apply(&mut h);
        let all: Vec<_> = h.get_all("x-append").iter().collect();
        assert_eq!(all, ["1", "2"]);
        assert_eq!(h["x-absent"], "old");
        assert_eq!(h["x-over"], "new");
        assert!(!h.contains_key("x-only-if"));
        assert!(!h.contains_key("x-empty"));
        assert!(!h.contains_key("x-gone"));
    }

    #[test]
    fn bad_value_names_path() {
        let m = HeaderMutations {
            response_headers_to_add: vec![opt("x-a", "bad\u{1}", HeaderAppendAction::default())],
            ..Default::default()
        };
        let e = ResponseMutations::compile(&m, "routes[0]").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("routes[0]: invalid value for header \"x-a\""));
    }
}

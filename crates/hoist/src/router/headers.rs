//! Header mutations (`*_headers_to_add` / `*_headers_to_remove`), compiled once at load.
//!
//! A value with `%COMMAND%` operators is compiled with the access-log formatter and evaluated
//! per response, as Envoy does (`%DOWNSTREAM_REMOTE_ADDRESS%`, `%START_TIME%`, `%REQ(x)%`...);
//! `%%` is a literal percent sign.

use hoist_config::model::{HeaderAppendAction, HeaderMutations, HeaderValueOption};
use hoist_config::ConfigError;
use http::header::{HeaderMap, HeaderName, HeaderValue};

use crate::access_log::{Formatter, LogContext};

#[derive(Clone, Debug)]
enum Value {
    Literal(HeaderValue),
    Formatted(Formatter),
}

#[derive(Clone, Debug)]
struct HeaderAdd {
    name: HeaderName,
    value: Value,
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

    /// Whether any value needs a context to be evaluated.
    pub fn needs_context(&self) -> bool {
        self.add
            .iter()
            .any(|h| matches!(h.value, Value::Formatted(_)))
    }

    /// Removes first, then adds, as Envoy's HeaderParser does. `ctx` evaluates formatted values
    /// (without one they are skipped; callers pass one when `needs_context`).
    pub fn apply(&self, headers: &mut HeaderMap, ctx: Option<&LogContext<'_>>) {
        for name in &self.remove {
            headers.remove(name);
        }
        for h in &self.add {
            let value = match &h.value {
                Value::Literal(v) => v.clone(),
                Value::Formatted(f) => {
                    let Some(ctx) = ctx else { continue };
                    let mut out = Vec::new();
                    f.format(ctx, &mut out);
                    // Like Envoy, a value that evaluates to nothing adds nothing.
                    match HeaderValue::from_bytes(&out) {
                        Ok(v) if !out.is_empty() => v,
                        _ => continue,
                    }
                }
            };
            match h.action {
                HeaderAppendAction::AppendIfExistsOrAdd => {
                    headers.append(h.name.clone(), value);
                }
                HeaderAppendAction::AddIfAbsent => {
                    if !headers.contains_key(&h.name) {
                        headers.insert(h.name.clone(), value);
                    }
                }
                HeaderAppendAction::OverwriteIfExistsOrAdd => {
                    headers.insert(h.name.clone(), value);
                }
                HeaderAppendAction::OverwriteIfExists => {
                    if headers.contains_key(&h.name) {
                        headers.insert(h.name.clone(), value);
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
    let invalid = || {
        ConfigError::new(
            yaml_path,
            format!("invalid value for header \"{}\": {:?}", o.key, o.value),
        )
    };
    let value = if o.value.contains('%') {
        let f = Formatter::text(&o.value)
            .map_err(|e| ConfigError::new(yaml_path, format!("header \"{}\": {e}", o.key)))?;
        // A value whose operators were all `%%` is a literal after all.
        if o.value.replace("%%", "").contains('%') {
            Value::Formatted(f)
        } else {
            Value::Literal(
                HeaderValue::from_str(&o.value.replace("%%", "%")).map_err(|_| invalid())?,
            )
        }
    } else {
        Value::Literal(HeaderValue::from_str(&o.value).map_err(|_| invalid())?)
    };
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
        c.apply(&mut h, None);
        let all: Vec<_> = h.get_all("x-append").iter().collect();
        assert_eq!(all, ["1", "2"]);
        assert_eq!(h["x-absent"], "old");
        assert_eq!(h["x-over"], "new");
        assert!(!h.contains_key("x-only-if"));
        assert!(!h.contains_key("x-empty"));
        assert!(!h.contains_key("x-gone"));
    }

    #[test]
    fn formatted_values_use_the_context() {
        let m = HeaderMutations {
            response_headers_to_add: vec![
                opt(
                    "x-peer",
                    "%DOWNSTREAM_REMOTE_ADDRESS%",
                    HeaderAppendAction::default(),
                ),
                opt("x-pct", "100%%", HeaderAppendAction::default()),
                opt("x-missing", "%REQ(x-nope)%", HeaderAppendAction::default()),
            ],
            ..Default::default()
        };
        let c = ResponseMutations::compile(&m, "p").unwrap();
        assert!(c.needs_context());
        let mut ctx = LogContext::new(std::time::SystemTime::now());
        ctx.downstream_remote = Some("10.1.2.3:4567".parse().unwrap());
        let mut h = HeaderMap::new();
        c.apply(&mut h, Some(&ctx));
        assert_eq!(h["x-peer"], "10.1.2.3:4567");
        assert_eq!(h["x-pct"], "100%");
        // A missing value formats as "-", as in Envoy's header formatter.
        assert_eq!(h["x-missing"], "-");
    }

    #[test]
    fn bad_format_is_a_config_error() {
        let m = HeaderMutations {
            response_headers_to_add: vec![opt(
                "x-a",
                "%NOT_AN_OPERATOR%",
                HeaderAppendAction::default(),
            )],
            ..Default::default()
        };
        let e = ResponseMutations::compile(&m, "routes[1]").unwrap_err();
        assert!(
            e.to_string().starts_with("routes[1]: header \"x-a\": "),
            "{e}"
        );
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

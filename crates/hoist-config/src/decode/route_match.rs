//! `envoy.config.route.v3.RouteMatch` and the matchers it uses: header and query parameter
//! matchers, `envoy.type.matcher.v3.StringMatcher` and `RegexMatcher`.

use regex::{Regex, RegexBuilder};

use super::headers::header_name;
use crate::model::{
    HeaderMatchSpec, HeaderMatcher, PathMatch, QueryParameterMatchSpec, QueryParameterMatcher,
    RouteMatch, StringMatch, StringMatcher,
};
use crate::reader::{Node, Result};

/// Upper bound on a compiled regex, so a configuration cannot make hoist build a huge
/// automaton (RE2's program size limit plays this role in Envoy).
pub(crate) const REGEX_SIZE_LIMIT: usize = 1 << 20;

pub fn route_match(node: &Node) -> Result<RouteMatch> {
    let mut m = node.message()?;
    m.unsupported(&[
        "connect_matcher",
        "path_match_policy",
        "runtime_fraction",
        "cookies",
        "grpc",
        "tls_context",
        "dynamic_metadata",
        "filter_state",
    ])?;
    let which = m.oneof(
        &["prefix", "path", "safe_regex", "path_separated_prefix"],
        true,
    )?;
    let path = match which {
        Some("prefix") => PathMatch::Prefix(m.string("prefix")?),
        Some("path") => PathMatch::Path(m.string("path")?),
        Some("safe_regex") => PathMatch::SafeRegex(regex_matcher(&m.required("safe_regex")?)?),
        _ => {
            let n = m.required("path_separated_prefix")?;
            let prefix = n.string()?;
            // Envoy's rule: no query or fragment, and no trailing slash.
            if prefix.is_empty() || prefix.contains(['?', '#']) || prefix.ends_with('/') {
                return Err(n.error(format!(
                    "path_separated_prefix \"{prefix}\" must be non-empty, without '?' or '#', and not end in '/'"
                )));
            }
            PathMatch::PathSeparatedPrefix(prefix)
        }
    };
    let case_sensitive = m.bool("case_sensitive", true)?;
    let headers = m
        .list("headers")?
        .iter()
        .map(header_matcher)
        .collect::<Result<Vec<_>>>()?;
    let query_parameters = m
        .list("query_parameters")?
        .iter()
        .map(query_parameter_matcher)
        .collect::<Result<Vec<_>>>()?;
    m.finish()?;
    Ok(RouteMatch {
        path,
        case_sensitive,
        headers,
        query_parameters,
    })
}

pub fn header_matcher(node: &Node) -> Result<HeaderMatcher> {
    let mut m = node.message()?;
    let name = header_name(&m.required("name")?)?;
    let which = m.oneof(
        &[
            "exact_match",
            "safe_regex_match",
            "range_match",
            "present_match",
            "prefix_match",
            "suffix_match",
            "contains_match",
            "string_match",
        ],
        false,
    )?;
    let legacy = |pattern| {
        HeaderMatchSpec::String(StringMatcher {
            pattern,
            ignore_case: false,
        })
    };
    let spec = match which {
        // No specifier means "present", as in Envoy.
        None => HeaderMatchSpec::Present(true),
        Some("present_match") => HeaderMatchSpec::Present(m.bool("present_match", true)?),
        Some("exact_match") => legacy(StringMatch::Exact(m.string("exact_match")?)),
        Some("prefix_match") => legacy(StringMatch::Prefix(m.string("prefix_match")?)),
        Some("suffix_match") => legacy(StringMatch::Suffix(m.string("suffix_match")?)),
        Some("contains_match") => legacy(StringMatch::Contains(m.string("contains_match")?)),
        Some("safe_regex_match") => legacy(StringMatch::SafeRegex(regex_matcher(
            &m.required("safe_regex_match")?,
        )?)),
        Some("range_match") => {
            let mut r = m.required("range_match")?.message()?;
            let start = r.field("start")?.map(|n| n.i64()).transpose()?.unwrap_or(0);
            let end = r.field("end")?.map(|n| n.i64()).transpose()?.unwrap_or(0);
            r.finish()?;
            HeaderMatchSpec::Range { start, end }
        }
        _ => HeaderMatchSpec::String(string_matcher(&m.required("string_match")?)?),
    };
    let invert_match = m.bool("invert_match", false)?;
    let treat_missing_as_empty = m.bool("treat_missing_header_as_empty", false)?;
    m.finish()?;
    Ok(HeaderMatcher {
        name,
        spec,
        invert_match,
        treat_missing_as_empty,
    })
}

fn query_parameter_matcher(node: &Node) -> Result<QueryParameterMatcher> {
    let mut m = node.message()?;
    let name = m.required_string("name")?;
    let spec = match m.oneof(&["string_match", "present_match"], false)? {
        Some("string_match") => {
            QueryParameterMatchSpec::String(string_matcher(&m.required("string_match")?)?)
        }
        // present_match (true or false) and no specifier all mean "present" in Envoy.
        _ => {
            m.opt_bool("present_match")?;
            QueryParameterMatchSpec::Present
        }
    };
    m.finish()?;
    Ok(QueryParameterMatcher { name, spec })
}

/// `envoy.type.matcher.v3.StringMatcher`.
pub fn string_matcher(node: &Node) -> Result<StringMatcher> {
    let mut m = node.message()?;
    m.unsupported(&["custom"])?;
    let which = m.oneof(
        &["exact", "prefix", "suffix", "safe_regex", "contains"],
        true,
    )?;
    let non_empty = |m: &mut crate::reader::Message, field: &str| -> Result<String> {
        let n = m.required(field)?;
        let s = n.string()?;
        if s.is_empty() {
            return Err(n.error("must not be empty"));
        }
        Ok(s)
    };
    let pattern = match which {
        Some("exact") => StringMatch::Exact(m.string("exact")?),
        Some("prefix") => StringMatch::Prefix(non_empty(&mut m, "prefix")?),
        Some("suffix") => StringMatch::Suffix(non_empty(&mut m, "suffix")?),
        Some("contains") => StringMatch::Contains(non_empty(&mut m, "contains")?),
        _ => StringMatch::SafeRegex(regex_matcher(&m.required("safe_regex")?)?),
    };
    let ignore_case = m.bool("ignore_case", false)?;
    m.finish()?;
    Ok(StringMatcher {
        pattern,
        ignore_case,
    })
}

/// `envoy.type.matcher.v3.RegexMatcher`, compiled to match the whole value as RE2's
/// `FullMatch` does.
pub(crate) fn regex_matcher(node: &Node) -> Result<Regex> {
    let mut m = node.message()?;
    if let Some(engine) = m.field("google_re2")? {
        let mut e = engine.message()?;
        e.unsupported(&["max_program_size"])?;
        e.finish()?;
    }
    let regex_node = m.required("regex")?;
    let pattern = regex_node.string()?;
    if pattern.is_empty() {
        return Err(regex_node.error("must not be empty"));
    }
    m.finish()?;
    // Compiled alone first so that a syntax error points into the operator's pattern, not
    // into the anchors added around it.
    let build = |p: &str| RegexBuilder::new(p).size_limit(REGEX_SIZE_LIMIT).build();
    build(&pattern)
        .and_then(|_| build(&format!("^(?:{pattern})$")))
        .map_err(|e| regex_node.error(format!("invalid regex \"{pattern}\": {}", regex_reason(&e))))
}

/// The one-line reason of a regex error (the full message draws the pattern over several
/// lines).
pub(crate) fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix("error: "))
        .unwrap_or(text.lines().last().unwrap_or(""))
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn compile(pattern: &str) -> std::result::Result<Regex, String> {
        let v = json!({ "regex": pattern });
        regex_matcher(&Node::new(&v, "m")).map_err(|e| e.to_string())
    }

    #[test]
    fn regexes_match_the_whole_value() {
        let r = compile("/api/[0-9]+").unwrap();
        assert!(r.is_match("/api/12"));
        assert!(!r.is_match("/api/12/x"));
        assert!(!r.is_match("x/api/12"));
        // Alternation binds inside the group, not to the anchors.
        let r = compile("a|b").unwrap();
        assert!(r.is_match("b"));
        assert!(!r.is_match("ab"));
    }

    #[test]
    fn regex_errors_are_one_line_and_name_the_pattern() {
        assert_eq!(
            compile("(a").unwrap_err(),
            "m.regex: invalid regex \"(a\": unclosed group"
        );
    }

    #[test]
    fn huge_regexes_are_refused() {
        let err = compile("(a{1000}){1000}").unwrap_err();
        assert!(err.starts_with("m.regex: invalid regex"), "{err}");
        assert!(err.contains("size limit"), "{err}");
    }
}

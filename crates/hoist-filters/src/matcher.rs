//! Envoy's RouteMatch semantics (path, headers, query parameters) for filters that select by
//! request, such as jwt_authn's `rules`. The same semantics as the router's matcher
//! (crates/hoist/src/router/matcher.rs), on the request head a filter sees.

use std::borrow::Cow;

use hoist_config::model::{
    HeaderMatcher, PathMatch, QueryParameterMatchSpec, QueryParameterMatcher, RouteMatch,
};
use hoist_http::RequestHead;

/// Whether `m` matches the request. `scheme` is the request's `:scheme` ("http"/"https").
pub fn route_matches(m: &RouteMatch, head: &RequestHead, scheme: &str) -> bool {
    path_matches(&m.path, m.case_sensitive, &head.path)
        && m.headers.iter().all(|h| header_matches(h, head, scheme))
        && m.query_parameters
            .iter()
            .all(|q| query_matches(q, head.query()))
}

fn path_matches(p: &PathMatch, case_sensitive: bool, full_path: &str) -> bool {
    let without_query = full_path.split_once('?').map_or(full_path, |(p, _)| p);
    match p {
        // Envoy matches a prefix against the whole :path, query string included.
        PathMatch::Prefix(prefix) => starts_with(full_path, prefix, case_sensitive),
        PathMatch::Path(path) => {
            if case_sensitive {
                without_query == path
            } else {
                without_query.eq_ignore_ascii_case(path)
            }
        }
        PathMatch::SafeRegex(re) => re.is_match(without_query),
        PathMatch::PathSeparatedPrefix(prefix) => {
            starts_with(without_query, prefix, case_sensitive)
                && (without_query.len() == prefix.len()
                    || without_query.as_bytes().get(prefix.len()) == Some(&b'/'))
        }
    }
}

fn starts_with(s: &str, prefix: &str, case_sensitive: bool) -> bool {
    if case_sensitive {
        s.starts_with(prefix)
    } else {
        s.len() >= prefix.len()
            && s.as_bytes()[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
    }
}

/// The value a header matcher sees: pseudo-headers from the head, other headers with several
/// values joined by "," (as Envoy does). Borrowed unless values had to be joined.
pub fn header_value<'a>(
    name: &str,
    head: &'a RequestHead,
    scheme: &'a str,
) -> Option<Cow<'a, str>> {
    match name {
        ":method" => Some(Cow::Borrowed(head.method.as_str())),
        ":path" => Some(Cow::Borrowed(&head.path)),
        ":authority" => head.authority.as_deref().map(Cow::Borrowed),
        ":scheme" => Some(Cow::Borrowed(scheme)),
        _ => {
            let mut values = head.headers.get_all(name).iter();
            let first = values.next()?;
            let first = std::str::from_utf8(first.as_bytes()).unwrap_or("");
            match values.next() {
                None => Some(Cow::Borrowed(first)),
                Some(second) => {
                    let mut joined = String::from(first);
                    for v in std::iter::once(second).chain(values) {
                        joined.push(',');
                        joined.push_str(std::str::from_utf8(v.as_bytes()).unwrap_or(""));
                    }
                    Some(Cow::Owned(joined))
                }
            }
        }
    }
}

/// Envoy's HeaderMatcher on a request.
pub fn header_matches(h: &HeaderMatcher, head: &RequestHead, scheme: &str) -> bool {
    h.matches(header_value(&h.name, head, scheme).as_deref())
}

fn query_matches(q: &QueryParameterMatcher, query: Option<&str>) -> bool {
    let Some(query) = query else {
        return false;
    };
    // The first occurrence of the parameter decides, as in Envoy.
    let value = query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (k == q.name).then_some(v)
    });
    match (&q.spec, value) {
        (_, None) => false,
        (QueryParameterMatchSpec::Present, Some(_)) => true,
        (QueryParameterMatchSpec::String(sm), Some(v)) => sm.matches(v),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use hoist_config::model::{HeaderMatchSpec, StringMatch, StringMatcher};
    use hoist_http::Version;

    fn head(path: &str) -> RequestHead {
        let mut headers = http::HeaderMap::new();
        headers.append("x-a", "1".parse().unwrap());
        headers.append("x-a", "2".parse().unwrap());
        RequestHead {
            method: http::Method::GET,
            path: path.into(),
            version: Version::Http11,
            authority: Some("example.com".into()),
            headers,
        }
    }

    fn rm(path: PathMatch) -> RouteMatch {
        RouteMatch {
            path,
            case_sensitive: true,
            headers: vec![],
            query_parameters: vec![],
        }
    }

    fn exact(name: &str, s: &str, invert: bool) -> HeaderMatcher {
        HeaderMatcher {
            name: name.into(),
            spec: HeaderMatchSpec::String(StringMatcher {
                pattern: StringMatch::Exact(s.into()),
                ignore_case: false,
            }),
            invert_match: invert,
            treat_missing_as_empty: false,
        }
    }

    #[test]
    fn paths_headers_and_queries() {
        let h = head("/api/v1?debug=1");
        assert!(route_matches(
            &rm(PathMatch::Prefix("/api".into())),
            &h,
            "https"
        ));
        assert!(!route_matches(
            &rm(PathMatch::Path("/api".into())),
            &h,
            "https"
        ));
        assert!(route_matches(
            &rm(PathMatch::Path("/api/v1".into())),
            &h,
            "https"
        ));
        let sep = rm(PathMatch::PathSeparatedPrefix("/api".into()));
        assert!(route_matches(&sep, &h, "https"));
        assert!(!route_matches(&sep, &head("/apiv1"), "https"));

        let mut m = rm(PathMatch::Prefix("/".into()));
        m.headers = vec![exact("x-a", "1,2", false)];
        assert!(route_matches(&m, &h, "https"), "values are joined with ','");
        m.headers = vec![exact(":scheme", "https", false)];
        assert!(route_matches(&m, &h, "https"));
        assert!(!route_matches(&m, &h, "http"));
        m.headers = vec![exact("x-missing", "v", true)];
        assert!(
            !route_matches(&m, &h, "https"),
            "missing never matches a value"
        );

        let mut q = rm(PathMatch::Prefix("/".into()));
        q.query_parameters = vec![QueryParameterMatcher {
            name: "debug".into(),
            spec: QueryParameterMatchSpec::Present,
        }];
        assert!(route_matches(&q, &h, "https"));
        assert!(!route_matches(&q, &head("/api"), "https"));
    }
}

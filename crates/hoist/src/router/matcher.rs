//! Route matching: path (prefix, exact, regex, separated prefix), headers, query parameters,
//! with Envoy's semantics for each.

use hoist_config::model::{
    HeaderMatcher, PathMatch, QueryParameterMatchSpec, QueryParameterMatcher, RouteMatch,
};
use hoist_http::RequestHead;

/// What the matchers look at, derived once per request.
pub struct MatchInput<'a> {
    pub head: &'a RequestHead,
    /// `:scheme` ("http" or "https").
    pub scheme: &'a str,
}

pub fn route_matches(m: &RouteMatch, input: &MatchInput<'_>) -> bool {
    path_matches(&m.path, m.case_sensitive, &input.head.path)
        && m.headers.iter().all(|h| header_matches(h, input))
        && m.query_parameters
            .iter()
            .all(|q| query_matches(q, input.head.query()))
}

fn path_matches(p: &PathMatch, case_sensitive: bool, full_path: &str) -> bool {
    let without_query = match full_path.find('?') {
        Some(i) => &full_path[..i],
        None => full_path,
    };
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
/// values joined by "," (as Envoy does).
fn header_value(name: &str, input: &MatchInput<'_>) -> Option<String> {
    match name {
        ":method" => Some(input.head.method.as_str().to_string()),
        ":path" => Some(input.head.path.clone()),
        ":authority" => input.head.authority.clone(),
        ":scheme" => Some(input.scheme.to_string()),
        _ => {
            let mut values = input.head.headers.get_all(name).iter().peekable();
            values.peek()?;
            let joined: Vec<&str> = values.map(|v| v.to_str().unwrap_or("")).collect();
            Some(joined.join(","))
        }
    }
}

fn header_matches(h: &HeaderMatcher, input: &MatchInput<'_>) -> bool {
    h.matches(header_value(&h.name, input).as_deref())
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
    use super::*;
    use hoist_config::model::{HeaderMatchSpec, StringMatch, StringMatcher};
    use hoist_http::Version;

    fn head(path: &str) -> RequestHead {
        let mut headers = http::HeaderMap::new();
        headers.append("x-a", "1".parse().unwrap());
        headers.append("x-a", "2".parse().unwrap());
        headers.insert("x-n", "42".parse().unwrap());
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

    fn check(m: &RouteMatch, path: &str) -> bool {
        let h = head(path);
        route_matches(
            m,
            &MatchInput {
                head: &h,
                scheme: "https",
            },
        )
    }

    #[test]
    fn paths() {
        assert!(check(&rm(PathMatch::Prefix("/a".into())), "/abc?x"));
        assert!(!check(&rm(PathMatch::Prefix("/b".into())), "/abc"));
        assert!(check(&rm(PathMatch::Path("/1m".into())), "/1m?cache=no"));
        assert!(!check(&rm(PathMatch::Path("/1m".into())), "/1m/"));
        let mut ci = rm(PathMatch::Path("/ABC".into()));
        ci.case_sensitive = false;
        assert!(check(&ci, "/abc"));
        let re = regex::Regex::new("^(?:/x/[0-9]+)$").unwrap();
        assert!(check(&rm(PathMatch::SafeRegex(re.clone())), "/x/12?q=1"));
        assert!(!check(&rm(PathMatch::SafeRegex(re)), "/x/12/"));
        let sep = rm(PathMatch::PathSeparatedPrefix("/api".into()));
        assert!(check(&sep, "/api"));
        assert!(check(&sep, "/api/v1"));
        assert!(check(&sep, "/api?x=1"));
        assert!(!check(&sep, "/apiv1"));
    }

    fn hm(name: &str, spec: HeaderMatchSpec, invert: bool) -> HeaderMatcher {
        HeaderMatcher {
            name: name.into(),
            spec,
            invert_match: invert,
            treat_missing_as_empty: false,
        }
    }

    fn exact(s: &str) -> HeaderMatchSpec {
        HeaderMatchSpec::String(StringMatcher {
            pattern: StringMatch::Exact(s.into()),
            ignore_case: false,
        })
    }

    #[test]
    fn headers() {
        let mut m = rm(PathMatch::Prefix("/".into()));
        m.headers = vec![hm("x-a", exact("1,2"), false)];
        assert!(check(&m, "/"));
        m.headers = vec![hm(":method", exact("GET"), false)];
        assert!(check(&m, "/"));
        m.headers = vec![hm(":method", exact("POST"), true)];
        assert!(check(&m, "/"));
        m.headers = vec![hm("x-missing", exact("v"), true)];
        assert!(
            !check(&m, "/"),
            "inverted matcher on a missing header does not match"
        );
        m.headers = vec![hm("x-missing", HeaderMatchSpec::Present(false), false)];
        assert!(check(&m, "/"));
        m.headers = vec![hm(
            "x-n",
            HeaderMatchSpec::Range { start: 40, end: 43 },
            false,
        )];
        assert!(check(&m, "/"));
        m.headers = vec![hm(
            "x-n",
            HeaderMatchSpec::Range { start: 40, end: 42 },
            false,
        )];
        assert!(!check(&m, "/"));
    }

    #[test]
    fn query() {
        let mut m = rm(PathMatch::Prefix("/".into()));
        m.query_parameters = vec![QueryParameterMatcher {
            name: "debug".into(),
            spec: QueryParameterMatchSpec::Present,
        }];
        assert!(check(&m, "/?a=1&debug"));
        assert!(!check(&m, "/?a=1"));
        assert!(!check(&m, "/"));
        m.query_parameters = vec![QueryParameterMatcher {
            name: "a".into(),
            spec: QueryParameterMatchSpec::String(StringMatcher {
                pattern: StringMatch::Prefix("1".into()),
                ignore_case: false,
            }),
        }];
        assert!(check(&m, "/?a=12"));
        assert!(!check(&m, "/?a=21"));
    }
}

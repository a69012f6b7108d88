//! Route matching for the router. Envoy's RouteMatch semantics (path: prefix, exact, regex,
//! separated prefix; headers; query parameters) live in one place, hoist_filters::matcher,
//! which filters such as jwt_authn's `rules` use too; this is the router's entry to it.

use hoist_config::model::RouteMatch;
use hoist_http::RequestHead;

/// What the matchers look at, derived once per request.
pub struct MatchInput<'a> {
    pub head: &'a RequestHead,
    /// `:scheme` ("http" or "https").
    pub scheme: &'a str,
}

pub fn route_matches(m: &RouteMatch, input: &MatchInput<'_>) -> bool {
    hoist_filters::matcher::route_matches(m, input.head, input.scheme)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hoist_config::model::{
        HeaderMatchSpec, HeaderMatcher, PathMatch, QueryParameterMatchSpec, QueryParameterMatcher,
        StringMatch, StringMatcher,
    };
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

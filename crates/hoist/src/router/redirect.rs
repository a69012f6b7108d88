//! The `redirect` route action: builds the Location of a redirect the way Envoy does.

use hoist_config::model::{PathMatch, Redirect, RedirectPath};

/// `matched` is the route's path matcher (a `prefix_rewrite` replaces the matched prefix).
pub fn location(
    r: &Redirect,
    matched: &PathMatch,
    scheme: &str,
    authority: &str,
    path: &str,
) -> String {
    let (host, port) = split_host_port(authority);
    let new_scheme = r.scheme.as_deref().unwrap_or(scheme);
    let host = r.host.as_deref().unwrap_or(host);
    // Keep the request's port only when neither the scheme nor the port is being redirected.
    let port = match (r.port, port) {
        (Some(p), _) => Some(p.to_string()),
        (None, Some(p)) if new_scheme == scheme => Some(p.to_string()),
        _ => None,
    };
    let (path_only, query) = match path.find('?') {
        Some(i) => (&path[..i], Some(&path[i..])),
        None => (path, None),
    };
    let mut new_path = match &r.path {
        RedirectPath::Keep => path_only.to_string(),
        // path_redirect may carry its own query, which then replaces the request's.
        RedirectPath::Path(p) => p.clone(),
        RedirectPath::PrefixRewrite(rewrite) => match matched {
            PathMatch::Prefix(prefix) | PathMatch::PathSeparatedPrefix(prefix)
                if path_only.len() >= prefix.len() =>
            {
                format!("{rewrite}{}", &path_only[prefix.len()..])
            }
            _ => rewrite.clone(),
        },
    };
    let path_has_query = matches!(&r.path, RedirectPath::Path(p) if p.contains('?'));
    if !r.strip_query && !path_has_query {
        if let Some(q) = query {
            new_path.push_str(q);
        }
    }
    match port {
        Some(p) => format!("{new_scheme}://{host}:{p}{new_path}"),
        None => format!("{new_scheme}://{host}{new_path}"),
    }
}

fn split_host_port(authority: &str) -> (&str, Option<&str>) {
    // [v6]:port, host:port, or a bare host.
    if let Some(end) = authority.rfind(']') {
        return match authority[end..].strip_prefix("]:") {
            Some(port) => (&authority[..=end], Some(port)),
            None => (authority, None),
        };
    }
    match authority.rsplit_once(':') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => (h, Some(p)),
        _ => (authority, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn redirect() -> Redirect {
        Redirect {
            scheme: None,
            host: None,
            port: None,
            path: RedirectPath::Keep,
            response_code: 301,
            strip_query: false,
        }
    }

    #[test]
    fn https_redirect_drops_port() {
        let r = Redirect {
            scheme: Some("https".into()),
            ..redirect()
        };
        let p = PathMatch::Prefix("/".into());
        assert_eq!(
            location(&r, &p, "http", "example.com:8080", "/a?b=1"),
            "https://example.com/a?b=1"
        );
    }

    #[test]
    fn host_port_path() {
        let r = Redirect {
            host: Some("new.example".into()),
            port: Some(8443),
            path: RedirectPath::Path("/x".into()),
            strip_query: true,
            ..redirect()
        };
        let p = PathMatch::Prefix("/".into());
        assert_eq!(
            location(&r, &p, "https", "old:1", "/a?q"),
            "https://new.example:8443/x"
        );
    }

    #[test]
    fn prefix_rewrite_keeps_rest_and_query() {
        let r = Redirect {
            path: RedirectPath::PrefixRewrite("/v2/".into()),
            ..redirect()
        };
        let p = PathMatch::Prefix("/v1/".into());
        assert_eq!(
            location(&r, &p, "https", "h:10443", "/v1/users/7?x=1"),
            "https://h:10443/v2/users/7?x=1"
        );
    }

    #[test]
    fn ipv6_authority() {
        assert_eq!(split_host_port("[::1]:443"), ("[::1]", Some("443")));
        assert_eq!(split_host_port("[::1]"), ("[::1]", None));
        assert_eq!(split_host_port("h"), ("h", None));
    }
}

//! The request target (RFC 9112 §3.2): origin-form `/a?b`, absolute-form `http://host/a?b`
//! (the form proxies receive; its authority overrides Host), asterisk-form for `OPTIONS *`.
//! Authority-form belongs to CONNECT, which hoist does not implement.

use http::uri::{Authority, Scheme, Uri};
use http::Method;

use super::H1Error;

/// The path (origin-form, or `*`) and, for absolute-form, the authority it named.
pub(crate) struct Target {
    pub path: String,
    pub authority: Option<String>,
}

pub(crate) fn parse_target(method: &Method, target: &str) -> Result<Target, H1Error> {
    if *method == Method::CONNECT {
        return Err(H1Error::ConnectNotSupported);
    }
    // A fragment is the client's business and never part of a request target (RFC 9112
    // §3.2); Envoy refuses a path with one by default, and so does hoist, rather than route
    // and match on text no origin was meant to see.
    if target.contains('#') {
        return Err(H1Error::InvalidUrl);
    }
    if target.starts_with('/') {
        return Ok(Target {
            path: target.to_owned(),
            authority: None,
        });
    }
    if target == "*" {
        if *method == Method::OPTIONS {
            return Ok(Target {
                path: target.to_owned(),
                authority: None,
            });
        }
        return Err(H1Error::InvalidUrl);
    }
    absolute_form(target)
}

fn absolute_form(target: &str) -> Result<Target, H1Error> {
    let uri: Uri = target.parse().map_err(|_| H1Error::InvalidUrl)?;
    match uri.scheme() {
        Some(s) if *s == Scheme::HTTP || *s == Scheme::HTTPS => {}
        _ => return Err(H1Error::InvalidUrl),
    }
    let authority = match uri.authority() {
        Some(a) if !a.host().is_empty() => a.as_str().to_owned(),
        _ => return Err(H1Error::InvalidUrl),
    };
    let path = match uri.path_and_query().map(|pq| pq.as_str()) {
        None | Some("") => "/".to_owned(),
        Some(pq) if pq.starts_with('?') => format!("/{pq}"),
        Some(pq) => pq.to_owned(),
    };
    Ok(Target {
        path,
        authority: Some(authority),
    })
}

/// A Host header's value must be `uri-host [ ":" port ]` (RFC 9110 §7.2).
pub(crate) fn valid_host(value: &[u8]) -> bool {
    // Userinfo is no part of Host, though Authority accepts it.
    if value.contains(&b'@') {
        return false;
    }
    let Ok(authority) = Authority::try_from(value) else {
        return false;
    };
    // Authority does not check the port; a port is digits only.
    let host_len = authority.host().len();
    match authority.as_str().as_bytes().get(host_len..) {
        Some([]) => true,
        Some([b':', port @ ..]) => port.iter().all(u8::is_ascii_digit),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: &str, target: &str) -> Result<(String, Option<String>), H1Error> {
        let m = Method::from_bytes(method.as_bytes()).unwrap();
        parse_target(&m, target).map(|t| (t.path, t.authority))
    }

    #[test]
    fn origin_form() {
        assert_eq!(parse("GET", "/a/b?x=1").unwrap(), ("/a/b?x=1".into(), None));
        assert_eq!(parse("GET", "/").unwrap(), ("/".into(), None));
    }

    #[test]
    fn absolute_form_gives_authority() {
        assert_eq!(
            parse("GET", "http://example.com:8080/a?b=c").unwrap(),
            ("/a?b=c".into(), Some("example.com:8080".into()))
        );
        assert_eq!(
            parse("GET", "HTTPS://example.com").unwrap(),
            ("/".into(), Some("example.com".into()))
        );
        assert_eq!(
            parse("GET", "http://example.com?q").unwrap(),
            ("/?q".into(), Some("example.com".into()))
        );
        for bad in [
            "ftp://example.com/",
            "http:///a",
            "example.com/a",
            "http//x/",
            "a",
        ] {
            assert!(
                matches!(parse("GET", bad), Err(H1Error::InvalidUrl)),
                "{bad}"
            );
        }
    }

    #[test]
    fn asterisk_only_for_options() {
        assert_eq!(parse("OPTIONS", "*").unwrap(), ("*".into(), None));
        assert!(matches!(parse("GET", "*"), Err(H1Error::InvalidUrl)));
    }

    #[test]
    fn connect_is_refused() {
        assert!(matches!(
            parse("CONNECT", "example.com:443"),
            Err(H1Error::ConnectNotSupported)
        ));
    }

    #[test]
    fn host_values() {
        for good in [
            "example.com",
            "example.com:80",
            "[::1]:8080",
            "127.0.0.1",
            "a-b.c_d",
        ] {
            assert!(valid_host(good.as_bytes()), "{good}");
        }
        for bad in ["exa mple.com", "a/b", "user@host", "a?b", "[::1", "h:port"] {
            assert!(!valid_host(bad.as_bytes()), "{bad}");
        }
    }
}

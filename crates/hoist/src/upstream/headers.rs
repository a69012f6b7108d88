//! The request and response as they cross the proxy: Envoy's router rewrites (prefix, host,
//! x-forwarded-*, x-envoy-* headers), hop-by-hop headers removed both ways, and the framing
//! of the body sent upstream.

use hoist_config::model::{ForwardAction, HostRewrite, PathMatch};
use hoist_http::h1::RequestFraming;
use hoist_http::{RequestHead, Version};
use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::forward::{Context, Source};

/// Headers that belong to one connection (RFC 9110 §7.6.1), never forwarded either way.
const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
    "trailer",
    "expect",
];

pub fn rewrite_request(cx: &Context<'_>, action: &ForwardAction, head: &mut RequestHead) {
    if let Some(r) = &action.regex_rewrite {
        // The path only: the query string is kept as it was.
        let (path, query) = match head.path.find('?') {
            Some(i) => head.path.split_at(i),
            None => (head.path.as_str(), ""),
        };
        let rewritten = format!(
            "{}{query}",
            r.pattern.replace_all(path, r.substitution.as_str())
        );
        if rewritten != head.path {
            let original = std::mem::replace(&mut head.path, rewritten);
            if let Ok(v) = HeaderValue::from_str(&original) {
                head.headers.insert("x-envoy-original-path", v);
            }
        }
    }
    if let Some(rewrite) = &action.prefix_rewrite {
        let matched = match cx.path_match {
            PathMatch::Prefix(p) | PathMatch::PathSeparatedPrefix(p) => Some(p.len()),
            PathMatch::Path(_) => Some(head.path_only().len()),
            PathMatch::SafeRegex(_) => None,
        };
        if let Some(n) = matched.filter(|n| *n <= head.path.len() && head.path.is_char_boundary(*n))
        {
            let original = head.path.clone();
            head.path = format!("{rewrite}{}", &original[n..]);
            if let Ok(v) = HeaderValue::from_str(&original) {
                head.headers.insert("x-envoy-original-path", v);
            }
        }
    }
    // auto_host_rewrite is applied per attempt, once the endpoint is known.
    if let HostRewrite::Literal(h) = &action.host_rewrite {
        head.authority = Some(h.clone());
    }
    if let Some(a) = head.authority.as_deref() {
        if let Ok(v) = HeaderValue::from_str(a) {
            head.headers.insert(header::HOST, v);
        }
    }
    // Envoy with use_remote_address: the peer is the client, appended to x-forwarded-for, and
    // the scheme hoist saw is the one forwarded. Without it, both come from the client as sent.
    let scheme = HeaderValue::from_static(cx.conn.scheme());
    if cx.use_remote_address {
        let ip = cx.conn.remote.ip().to_canonical().to_string();
        let xff = match head.headers.get("x-forwarded-for").map(|v| v.to_str()) {
            Some(Ok(prev)) if !prev.is_empty() => format!("{prev},{ip}"),
            _ => ip,
        };
        if let Ok(v) = HeaderValue::from_str(&xff) {
            head.headers.insert("x-forwarded-for", v);
        }
        head.headers.insert("x-forwarded-proto", scheme);
    } else if !head.headers.contains_key("x-forwarded-proto") {
        head.headers.insert("x-forwarded-proto", scheme);
    }
    // Envoy: the time the upstream has to answer, the per-try timeout when it is the shorter.
    let per_try = action.retry_policy.as_ref().and_then(|p| p.per_try_timeout);
    let expected = match (action.timeout, per_try) {
        (Some(t), Some(p)) => Some(t.min(p)),
        (t, p) => t.or(p),
    };
    if let Some(t) = expected {
        head.headers.insert(
            "x-envoy-expected-rq-timeout-ms",
            HeaderValue::from(t.as_millis() as u64),
        );
    }
    if let Some(via) = cx.via {
        append_via(&mut head.headers, via);
    }
}

/// Envoy's trusted client address, when x-forwarded-for supplies it (None: the peer is the
/// client). With use_remote_address, the N-th address from the right of x-forwarded-for as
/// received (N = xff_num_trusted_hops; N = 0: the peer); without it, the (N+1)-th from the
/// right. Too few addresses, or one that is not an IP: the peer.
pub fn trusted_client_address(
    head: &RequestHead,
    use_remote_address: bool,
    trusted_hops: u32,
) -> Option<std::net::IpAddr> {
    let from_right = if use_remote_address {
        if trusted_hops == 0 {
            return None;
        }
        trusted_hops as usize
    } else {
        trusted_hops as usize + 1
    };
    let values: Vec<&str> = head
        .headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    let mut addresses = values.iter().flat_map(|v| v.split(','));
    let count = addresses.clone().count();
    count
        .checked_sub(from_right)
        .and_then(|i| addresses.nth(i))
        .and_then(|a| a.trim().parse::<std::net::IpAddr>().ok())
        .map(|ip| ip.to_canonical())
}

/// Envoy's Utility::appendVia: `via` joins an existing value after a comma.
pub fn append_via(headers: &mut HeaderMap, via: &HeaderValue) {
    let joined = match headers.get(header::VIA).map(|v| v.as_bytes()) {
        Some(prev) if !prev.is_empty() => {
            HeaderValue::from_bytes(&[prev, b", ", via.as_bytes()].concat()).ok()
        }
        _ => Some(via.clone()),
    };
    if let Some(v) = joined {
        headers.insert(header::VIA, v);
    }
}

/// The response (from the upstream or a local reply of the router) as it leaves the router:
/// x-envoy-attempt-count when the virtual host asks for it (`via` is the connection
/// manager's, on every response).
pub fn decorate_response(
    action: &ForwardAction,
    head: &mut hoist_http::ResponseHead,
    attempts: u32,
) {
    if action.include_attempt_count_in_response && attempts > 0 {
        head.headers
            .insert("x-envoy-attempt-count", HeaderValue::from(attempts));
    }
}

/// How the request body is framed toward the upstream, and whether that is chunked.
pub fn request_framing<B>(head: &RequestHead, body: &Source<'_, B>) -> (RequestFraming, bool) {
    match body {
        Source::None => (RequestFraming::None, false),
        Source::Buffered(b) => (RequestFraming::Length(b.len() as u64), false),
        Source::Stream(_) => {
            let length = head
                .headers
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok());
            match length {
                // HTTP/1.1 lengths were checked by the codec; an HTTP/2 one is re-checked by
                // the upstream and h2 (a stream longer than it announced is reset).
                Some(n) if head.version != Version::Http2 || n > 0 => {
                    (RequestFraming::Length(n), false)
                }
                _ => (RequestFraming::Chunked, true),
            }
        }
    }
}

/// The request's headers as the upstream gets them.
pub fn upstream_headers(head: &RequestHead) -> HeaderMap {
    let mut h = head.headers.clone();
    strip_hop_by_hop(&mut h);
    h.remove(header::CONTENT_LENGTH);
    // HTTP/2 clients may split cookies into several fields; HTTP/1.1 wants one
    // (RFC 9113 §8.2.3).
    if h.get_all(header::COOKIE).iter().count() > 1 {
        let joined: Vec<&[u8]> = h
            .get_all(header::COOKIE)
            .iter()
            .map(|v| v.as_bytes())
            .collect();
        if let Ok(v) = HeaderValue::from_bytes(&joined.join(&b"; "[..])) {
            h.insert(header::COOKIE, v);
        }
    }
    h
}

pub fn strip_hop_by_hop(h: &mut HeaderMap) {
    let named: Vec<HeaderName> = h
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().to_ascii_lowercase().as_bytes()).ok())
        .collect();
    for name in named {
        h.remove(name);
    }
    for name in HOP_BY_HOP {
        h.remove(name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trusted_client_address_follows_envoys_rules() {
        let peer: std::net::IpAddr = "192.0.2.9".parse().unwrap();
        let mut head = RequestHead {
            method: http::Method::GET,
            path: "/".into(),
            version: Version::Http11,
            authority: None,
            headers: HeaderMap::new(),
        };
        let t = |h: &RequestHead, remote, n| {
            trusted_client_address(h, remote, n)
                .unwrap_or(peer)
                .to_string()
        };
        // No x-forwarded-for: the peer, whatever the settings.
        assert_eq!(t(&head, false, 0), "192.0.2.9");
        assert_eq!(t(&head, true, 1), "192.0.2.9");
        head.headers.insert(
            "x-forwarded-for",
            HeaderValue::from_static("10.0.0.1, 10.0.0.2,10.0.0.3"),
        );
        assert_eq!(t(&head, true, 0), "192.0.2.9");
        assert_eq!(t(&head, true, 1), "10.0.0.3");
        assert_eq!(t(&head, true, 2), "10.0.0.2");
        assert_eq!(t(&head, true, 4), "192.0.2.9");
        assert_eq!(t(&head, false, 0), "10.0.0.3");
        assert_eq!(t(&head, false, 2), "10.0.0.1");
        assert_eq!(t(&head, false, 3), "192.0.2.9");
        head.headers
            .insert("x-forwarded-for", HeaderValue::from_static("junk"));
        assert_eq!(t(&head, false, 0), "192.0.2.9");
    }

    #[test]
    fn hop_by_hop_and_named_headers_go_cookies_join() {
        let mut headers = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-secret"),
            ("x-secret", "1"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("content-length", "3"),
            ("cookie", "a=1"),
            ("cookie", "b=2"),
            ("x-kept", "yes"),
        ] {
            headers.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        let head = RequestHead {
            method: http::Method::GET,
            path: "/".into(),
            version: Version::Http2,
            authority: None,
            headers,
        };
        let out = upstream_headers(&head);
        let mut names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        names.sort_unstable();
        assert_eq!(names, vec!["cookie", "x-kept"]);
        assert_eq!(out[header::COOKIE], "a=1; b=2");
    }
}

//! The target URL: scheme, authority and request target, as Fortio's fast client uses them
//! (`http://` assumed when the scheme is missing, the Host header is the URL's host[:port]
//! as written, the request line carries path and query, the fragment is dropped).

use std::fmt;

/// A parsed `http://` or `https://` URL.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub https: bool,
    /// Host name or IP literal, without brackets (for DNS, SNI and certificate checks).
    pub host: String,
    pub port: u16,
    /// The authority as written in the URL (host and optional port): the Host header.
    pub authority: String,
    /// Path and query ("/" when the URL has none).
    pub request_target: String,
}

/// A URL we cannot use.
#[derive(Debug, PartialEq, Eq)]
pub struct UrlError(pub String);

impl fmt::Display for UrlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Target {
    pub fn parse(url: &str) -> Result<Target, UrlError> {
        let url = url.trim_start_matches([' ', '\t', '\r', '\n']);
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        let (https, rest) = if lower.starts_with("https://") {
            (true, &url[8..])
        } else if lower.starts_with("http://") {
            (false, &url[7..])
        } else if url.contains("://") {
            return Err(UrlError(format!(
                "unsupported scheme in {url:?} (http:// and https:// only)"
            )));
        } else {
            (false, url)
        };
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..end];
        let mut request_target = rest[end..].to_string();
        if let Some(hash) = request_target.find('#') {
            request_target.truncate(hash);
        }
        if !request_target.starts_with('/') {
            request_target.insert(0, '/');
        }
        if request_target.bytes().any(|b| b <= b' ' || b == 0x7f) {
            return Err(UrlError(format!(
                "URL path contains spaces or control characters: {url:?}"
            )));
        }
        if authority.contains('@') {
            return Err(UrlError(format!(
                "user info in URLs is not supported: {url:?}"
            )));
        }
        let default_port = if https { 443 } else { 80 };
        let (host, port) = split_host_port(authority, default_port)
            .ok_or_else(|| UrlError(format!("invalid host or port in URL {url:?}")))?;
        if host.is_empty() {
            return Err(UrlError(format!("missing host in URL {url:?}")));
        }
        Ok(Target {
            https,
            host,
            port,
            authority: authority.to_string(),
            request_target,
        })
    }
}

/// "host", "host:port", "[v6]", "[v6]:port".
fn split_host_port(authority: &str, default_port: u16) -> Option<(String, u16)> {
    if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => default_port,
            p => p.strip_prefix(':')?.parse().ok()?,
        };
        return Some((host.to_string(), port));
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            let port = if port.is_empty() {
                default_port
            } else {
                port.parse().ok()?
            };
            Some((host.to_string(), port))
        }
        Some(_) => None,
        None => Some((authority.to_string(), default_port)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_ports_and_targets() {
        let t = Target::parse("https://127.0.0.1:10443/10m?x=1#frag").unwrap();
        assert!(t.https);
        assert_eq!(t.host, "127.0.0.1");
        assert_eq!(t.port, 10443);
        assert_eq!(t.authority, "127.0.0.1:10443");
        assert_eq!(t.request_target, "/10m?x=1");

        let t = Target::parse("HTTP://example.com").unwrap();
        assert!(!t.https);
        assert_eq!((t.host.as_str(), t.port), ("example.com", 80));
        assert_eq!(t.request_target, "/");

        // Fortio assumes http:// when the scheme is missing.
        let t = Target::parse("localhost:8080?a").unwrap();
        assert_eq!(
            (t.host.as_str(), t.port, t.https),
            ("localhost", 8080, false)
        );
        assert_eq!(t.request_target, "/?a");

        let t = Target::parse("https://[::1]:8443/p").unwrap();
        assert_eq!((t.host.as_str(), t.port), ("::1", 8443));
        assert_eq!(t.authority, "[::1]:8443");
        let t = Target::parse("https://[::1]/").unwrap();
        assert_eq!(t.port, 443);
    }

    #[test]
    fn rejects_what_cannot_be_requested() {
        assert!(Target::parse("ftp://x/").is_err());
        assert!(Target::parse("http://:80/").is_err());
        assert!(Target::parse("http://h:99999/").is_err());
        assert!(Target::parse("http://h:x/").is_err());
        assert!(Target::parse("http://a:b:c/").is_err());
        assert!(Target::parse("http://u@h/").is_err());
        assert!(Target::parse("http://h/a b").is_err());
        assert!(Target::parse("").is_err());
    }
}

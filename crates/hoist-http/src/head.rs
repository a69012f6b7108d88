//! Request and response heads, the same for HTTP/1.1 and HTTP/2.

use http::{HeaderMap, Method};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    Http2,
}

impl Version {
    /// As Envoy's %PROTOCOL% prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2",
        }
    }
}

/// A request head. `path` is the request target in origin form (`/a/b?x=1`), as received; an
/// absolute-form target (`http://host/a`) is split into `authority` and `path` by the codec.
#[derive(Clone, Debug)]
pub struct RequestHead {
    pub method: Method,
    pub path: String,
    pub version: Version,
    /// `Host` (HTTP/1.1) or `:authority` (HTTP/2); None when the request had neither.
    pub authority: Option<String>,
    /// Regular headers; names are lower-case. `host` stays in here for HTTP/1.1.
    pub headers: HeaderMap,
}

impl RequestHead {
    /// Path without the query string.
    pub fn path_only(&self) -> &str {
        match self.path.find('?') {
            Some(i) => &self.path[..i],
            None => &self.path,
        }
    }

    /// Query string without the `?`, if any.
    pub fn query(&self) -> Option<&str> {
        self.path.find('?').map(|i| &self.path[i + 1..])
    }
}

#[derive(Clone, Debug)]
pub struct ResponseHead {
    pub status: u16,
    pub headers: HeaderMap,
}

impl ResponseHead {
    pub fn new(status: u16) -> Self {
        ResponseHead {
            status,
            headers: HeaderMap::new(),
        }
    }
}

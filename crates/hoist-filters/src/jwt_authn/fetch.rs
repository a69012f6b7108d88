//! One HTTP/1.1 GET to a cluster (the JWKS of a remote_jwks provider): connect to its first
//! endpoint, TLS when the cluster says so, `Connection: close`, the whole exchange within
//! `http_uri.timeout`, the response bounded. Blocking: callers run it on a thread that may
//! block (the async fetcher's, or tokio's blocking pool for an on-demand fetch).

use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use hoist_config::model::DnsLookupFamily;

use super::upstream::Upstream;

/// A JWKS is a few KiB; more than this is not one.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
const MAX_HEADERS: usize = 64;

/// `http_uri.uri` split the way Envoy sends it: Host and request target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpUri {
    pub authority: String,
    pub path: String,
}

impl HttpUri {
    /// Err: the URI is not `http(s)://host[:port][/path]`.
    pub fn parse(uri: &str) -> Result<HttpUri, String> {
        let rest = uri
            .strip_prefix("https://")
            .or_else(|| uri.strip_prefix("http://"))
            .ok_or_else(|| format!("\"{uri}\" is not an http:// or https:// URI"))?;
        let (authority, path) = match rest.find(['/', '?']) {
            Some(i) if rest.as_bytes()[i] == b'/' => (&rest[..i], rest[i..].to_owned()),
            Some(i) => (&rest[..i], format!("/{}", &rest[i..])),
            None => (rest, "/".to_owned()),
        };
        let path = path.split('#').next().unwrap_or("/").to_owned();
        let valid = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic());
        if !valid(authority) || !valid(&path) || authority.contains('@') {
            return Err(format!("\"{uri}\" has no valid host and path"));
        }
        Ok(HttpUri {
            authority: authority.to_owned(),
            path,
        })
    }
}

/// GETs `uri` from `upstream`; Ok: the body of a 200 response.
pub fn get(upstream: &Upstream, uri: &HttpUri, timeout: Duration) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + timeout;
    let tcp = connect(upstream, deadline)?;
    let request = format!(
        "GET {} HTTP/1.1\r\nhost: {}\r\naccept: application/json\r\nuser-agent: hoist\r\nconnection: close\r\n\r\n",
        uri.path, uri.authority
    );
    let raw = match &upstream.tls {
        Some(tls) => {
            let conn = rustls::ClientConnection::new(tls.config.clone(), tls.server_name.clone())
                .map_err(|e| format!("TLS: {e}"))?;
            exchange(
                rustls::StreamOwned::new(conn, tcp.try_clone().map_err(io)?),
                &tcp,
                request.as_bytes(),
                deadline,
            )?
        }
        None => exchange(
            tcp.try_clone().map_err(io)?,
            &tcp,
            request.as_bytes(),
            deadline,
        )?,
    };
    response_body(&raw, true)?.ok_or_else(|| "truncated response".to_owned())
}

fn io(e: std::io::Error) -> String {
    e.to_string()
}

fn remaining(deadline: Instant) -> Result<Duration, String> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        Err("timed out".to_owned())
    } else {
        Ok(left)
    }
}

fn connect(up: &Upstream, deadline: Instant) -> Result<TcpStream, String> {
    let mut addrs: Vec<SocketAddr> = if up.resolve {
        (up.host.as_str(), up.port)
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve {}: {e}", up.host))?
            .collect()
    } else {
        let ip: IpAddr = up
            .host
            .parse()
            .map_err(|_| format!("{} is not an IP address", up.host))?;
        vec![SocketAddr::new(ip, up.port)]
    };
    match up.family {
        DnsLookupFamily::V4Only => addrs.retain(SocketAddr::is_ipv4),
        DnsLookupFamily::V6Only => addrs.retain(SocketAddr::is_ipv6),
        DnsLookupFamily::V4Preferred => addrs.sort_by_key(|a| a.is_ipv6()),
        DnsLookupFamily::V6Preferred => addrs.sort_by_key(|a| a.is_ipv4()),
    }
    let mut last = format!("no address for {}", up.host);
    for addr in addrs {
        let limit = remaining(deadline)?.min(up.connect_timeout);
        match TcpStream::connect_timeout(&addr, limit) {
            Ok(s) => {
                let _ = s.set_nodelay(true);
                return Ok(s);
            }
            Err(e) => last = format!("connect {addr}: {e}"),
        }
    }
    Err(last)
}

/// Writes the request and reads the response until it is complete, the peer closes, or the
/// deadline passes. `tcp` is the socket under `stream`, for the timeouts.
fn exchange<S: Read + Write>(
    mut stream: S,
    tcp: &TcpStream,
    request: &[u8],
    deadline: Instant,
) -> Result<Vec<u8>, String> {
    tcp.set_write_timeout(Some(remaining(deadline)?))
        .map_err(io)?;
    tcp.set_read_timeout(Some(remaining(deadline)?))
        .map_err(io)?;
    stream.write_all(request).map_err(io)?;
    stream.flush().map_err(io)?;
    let mut raw = Vec::with_capacity(8192);
    let mut buf = [0u8; 16 * 1024];
    loop {
        tcp.set_read_timeout(Some(remaining(deadline)?))
            .map_err(io)?;
        match stream.read(&mut buf) {
            Ok(0) => return Ok(raw),
            Ok(n) => {
                raw.extend_from_slice(&buf[..n]);
                if raw.len() > MAX_RESPONSE_BYTES + 16 * 1024 {
                    return Err("response too large".to_owned());
                }
                if response_body(&raw, false)?.is_some() {
                    return Ok(raw);
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // A peer that closes without close_notify: what was read may still be whole.
            Err(e) if e.kind() == ErrorKind::UnexpectedEof => return Ok(raw),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err("timed out".to_owned())
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// The body of a complete 200 response in `raw`; Ok(None): not complete yet. Framing by
/// content-length or chunked; a response with neither ends when the peer closes (`eof`).
fn response_body(raw: &[u8], eof: bool) -> Result<Option<Vec<u8>>, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut resp = httparse::Response::new(&mut headers);
    let head_len = match resp.parse(raw) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("invalid response: {e}")),
    };
    let code = resp.code.unwrap_or(0);
    if code != 200 {
        return Err(format!("status {code}"));
    }
    let body = &raw[head_len..];
    let header = |name: &str| {
        resp.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| String::from_utf8_lossy(h.value).trim().to_ascii_lowercase())
    };
    if header("transfer-encoding").is_some_and(|v| v.ends_with("chunked")) {
        return dechunk(body);
    }
    if let Some(len) = header("content-length") {
        let len: usize = len.parse().map_err(|_| "invalid content-length")?;
        if len > MAX_RESPONSE_BYTES {
            return Err("response too large".to_owned());
        }
        return Ok((body.len() >= len).then(|| body[..len].to_vec()));
    }
    if body.len() > MAX_RESPONSE_BYTES {
        return Err("response too large".to_owned());
    }
    Ok(eof.then(|| body.to_vec()))
}

/// A chunked body; Ok(None) until the last chunk has arrived.
fn dechunk(mut body: &[u8]) -> Result<Option<Vec<u8>>, String> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = body.windows(2).position(|w| w == b"\r\n") else {
            return Ok(None);
        };
        let line = String::from_utf8_lossy(&body[..eol]);
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| "invalid chunk size")?;
        body = &body[eol + 2..];
        if size == 0 {
            return Ok(Some(out));
        }
        if out.len() + size > MAX_RESPONSE_BYTES {
            return Err("response too large".to_owned());
        }
        if body.len() < size + 2 {
            return Ok(None);
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn uris_split_into_host_and_path() {
        let u = HttpUri::parse("https://idp.example.com:8443/.well-known/jwks.json?x=1").unwrap();
        assert_eq!(u.authority, "idp.example.com:8443");
        assert_eq!(u.path, "/.well-known/jwks.json?x=1");
        assert_eq!(HttpUri::parse("http://h").unwrap().path, "/");
        assert!(HttpUri::parse("ftp://h/x").is_err());
        assert!(HttpUri::parse("https:///x").is_err());
    }

    #[test]
    fn responses_framed_by_length_or_chunks() {
        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 4\r\n\r\nabcd";
        assert_eq!(response_body(r, false).unwrap().unwrap(), b"abcd");
        assert_eq!(response_body(&r[..r.len() - 1], false).unwrap(), None);
        assert_eq!(
            response_body(&r[..r.len() - 1], true).unwrap(),
            None,
            "short of its length"
        );
        let eof = b"HTTP/1.1 200 OK\r\n\r\nxyz";
        assert_eq!(response_body(eof, false).unwrap(), None);
        assert_eq!(response_body(eof, true).unwrap().unwrap(), b"xyz");
        let c = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nab\r\n1;x\r\nc\r\n0\r\n\r\n";
        assert_eq!(response_body(c, false).unwrap().unwrap(), b"abc");
        assert!(response_body(b"HTTP/1.1 404 Not Found\r\n\r\n", false).is_err());
        assert!(response_body(
            b"HTTP/1.1 200 OK\r\ncontent-length: 99999999\r\n\r\n",
            false
        )
        .is_err());
    }
}

//! One connection's HTTP/1.1 client: the prepared request, keep-alive, reconnection when the
//! server closes, one retry when a reused connection turns out dead (as Fortio does), and
//! timeouts. Every call yields Fortio's triple: status code (-1 for a socket error), total
//! response size and header size.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::ServerName;
use rustls::ClientConfig;

use crate::histogram::Histogram;
use crate::options::LoadOptions;
use crate::response::ResponseReader;
use crate::transport::{Negotiated, ReadEnd, Transport, TransportError};
use crate::url::Target as Url;

/// Fortio's code for a transport error.
pub const SOCKET_ERROR: i32 = -1;

/// What every connection of a run sends, and where.
pub struct Target {
    pub addr: SocketAddr,
    pub tls: Option<(Arc<ClientConfig>, ServerName<'static>)>,
    pub request: Vec<u8>,
    /// HEAD requests get no body whatever the headers say.
    pub head_request: bool,
    /// We asked for the connection to close after each response.
    pub close_requested: bool,
    pub timeout: Duration,
}

/// The User-Agent sent unless `-H "User-Agent: ..."` replaces it.
pub fn user_agent() -> String {
    format!("hoist-load/{}", env!("CARGO_PKG_VERSION"))
}

/// The request bytes, built once per run like Fortio's fast client does: request line, Host
/// (HTTP/1.1, or when given), `Connection: close` without keep-alive, the headers, then the
/// payload.
pub fn build_request(opts: &LoadOptions, url: &Url) -> Vec<u8> {
    let mut host = url.authority.clone();
    let mut host_given = false;
    let mut agent = Some(user_agent());
    let mut content_type = opts.content_type.clone();
    let mut extra: Vec<(&str, &str)> = Vec::new();
    for (name, value) in &opts.headers {
        let name = name.trim();
        if name.eq_ignore_ascii_case("host") {
            host = value.trim().to_string();
            host_given = true;
        } else if name.eq_ignore_ascii_case("user-agent") {
            agent = (!value.is_empty()).then(|| value.trim().to_string());
        } else if name.eq_ignore_ascii_case("content-type") {
            content_type = Some(value.trim().to_string());
        } else {
            extra.push((name, value.trim()));
        }
    }
    let has_body = !opts.payload.is_empty() || content_type.is_some();
    if !opts.payload.is_empty() && content_type.is_none() {
        content_type = Some("application/octet-stream".to_string());
    }
    let version = if opts.http10 { "1.0" } else { "1.1" };
    let mut req = format!(
        "{} {} HTTP/{version}\r\n",
        opts.method(),
        url.request_target
    );
    if !opts.http10 || host_given {
        req.push_str(&format!("Host: {host}\r\n"));
    }
    if !opts.http10 && !opts.keepalive {
        req.push_str("Connection: close\r\n");
    }
    if let Some(agent) = agent {
        req.push_str(&format!("User-Agent: {agent}\r\n"));
    }
    let mut has_length = false;
    for (name, value) in extra {
        has_length |= name.eq_ignore_ascii_case("content-length");
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    if let Some(ct) = content_type {
        req.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    if has_body && !has_length {
        req.push_str(&format!("Content-Length: {}\r\n", opts.payload.len()));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(&opts.payload);
    bytes
}

/// The outcome of one call.
#[derive(Debug)]
pub struct Call {
    pub code: i32,
    pub size: u64,
    pub header_size: u64,
    pub error: Option<TransportError>,
}

/// A connection's client; calls are made one at a time.
pub struct Client {
    target: Arc<Target>,
    transport: Option<Transport>,
    reader: ResponseReader,
    /// Connections opened (or attempted), Fortio's "sockets used".
    pub sockets: u64,
    /// Time to connect (and handshake), per attempt.
    pub connect_times: Histogram,
    pub negotiated: Option<Negotiated>,
}

impl Client {
    pub fn new(target: Arc<Target>, resolution: f64) -> Client {
        Client {
            target,
            transport: None,
            reader: ResponseReader::new(),
            sockets: 0,
            connect_times: Histogram::new(0.0, resolution),
            negotiated: None,
        }
    }

    /// Sends the request and reads the whole response.
    pub async fn call(&mut self) -> Call {
        let mut retried = false;
        loop {
            let reused = self.transport.is_some();
            let mut transport = match self.transport.take() {
                Some(t) => t,
                None => match self.connect().await {
                    Ok(t) => t,
                    Err(e) => return self.failed(e),
                },
            };
            self.reader
                .start(self.target.head_request, self.target.close_requested);
            let exchange = exchange(&mut transport, &self.target.request, &mut self.reader);
            match tokio::time::timeout(self.target.timeout, exchange).await {
                Ok(Ok(end)) => {
                    let s = self.reader.summary();
                    if s.keep_alive && !end.trailing_garbage {
                        self.transport = Some(transport);
                    }
                    return Call {
                        code: i32::from(s.status),
                        size: s.total_bytes,
                        header_size: s.header_bytes,
                        error: None,
                    };
                }
                Ok(Err(e)) => {
                    // An idle keep-alive connection the server closed: reconnect once.
                    if reused && !retried && self.reader.bytes_so_far() == 0 {
                        retried = true;
                        continue;
                    }
                    return self.failed(e);
                }
                Err(_) => return self.failed(TransportError::Timeout),
            }
        }
    }

    fn failed(&self, error: TransportError) -> Call {
        Call {
            code: SOCKET_ERROR,
            size: self.reader.bytes_so_far(),
            header_size: self.reader.summary().header_bytes,
            error: Some(error),
        }
    }

    async fn connect(&mut self) -> Result<Transport, TransportError> {
        self.sockets += 1;
        self.reader.start(false, false);
        let started = Instant::now();
        let tls = self.target.tls.as_ref().map(|(c, n)| (c, n));
        let result = tokio::time::timeout(
            self.target.timeout,
            Transport::connect(self.target.addr, tls),
        )
        .await;
        self.connect_times.record(started.elapsed().as_secs_f64());
        let transport = result.map_err(|_| TransportError::Timeout)??;
        if self.negotiated.is_none() {
            self.negotiated = transport.negotiated();
        }
        Ok(transport)
    }
}

async fn exchange(
    transport: &mut Transport,
    request: &[u8],
    reader: &mut ResponseReader,
) -> Result<ReadEnd, TransportError> {
    transport.send(request).await?;
    transport.read_response(reader).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(opts: &LoadOptions) -> String {
        let url = Url::parse(&opts.url).unwrap();
        String::from_utf8(build_request(opts, &url)).unwrap()
    }

    #[test]
    fn get_request_like_fortio() {
        let opts = LoadOptions {
            url: "http://example.com:8080/p?q=1".into(),
            headers: vec![("X-A".into(), " b".into())],
            ..LoadOptions::default()
        };
        assert_eq!(
            request(&opts),
            format!(
                "GET /p?q=1 HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: {}\r\nX-A: b\r\n\r\n",
                user_agent()
            )
        );
    }

    #[test]
    fn post_with_payload_and_overrides() {
        let opts = LoadOptions {
            url: "https://h/".into(),
            payload: b"hello".to_vec(),
            keepalive: false,
            headers: vec![
                ("Host".into(), " virtual.example ".into()),
                ("User-Agent".into(), String::new()),
            ],
            ..LoadOptions::default()
        };
        assert_eq!(
            request(&opts),
            "POST / HTTP/1.1\r\nHost: virtual.example\r\nConnection: close\r\nContent-Type: application/octet-stream\r\nContent-Length: 5\r\n\r\nhello"
        );
    }

    #[test]
    fn http10_without_host_and_method_override() {
        let opts = LoadOptions {
            url: "http://h/x".into(),
            http10: true,
            method: Some("HEAD".into()),
            headers: vec![("User-Agent".into(), "ua".into())],
            ..LoadOptions::default()
        };
        assert_eq!(request(&opts), "HEAD /x HTTP/1.0\r\nUser-Agent: ua\r\n\r\n");
    }
}

//! Opening a connection to an endpoint: resolve (DNS clusters), TCP connect within
//! connect_timeout, then the TLS handshake when the cluster has an UpstreamTlsContext, after
//! which the record layer runs in the kernel or in user space (tls.rs).

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use hoist_config::model::DnsLookupFamily;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use hoist_tls::splice::SpliceSource;
use hoist_tls::{ClientKtlsTransport, ClientUserTlsTransport};

use super::tls::{handshake, UpstreamTlsStats};
use super::{ClusterInfo, EndpointInfo};

/// An upstream byte stream: plain TCP, kernel TLS, or TLS in user space (rustls).
pub enum UpstreamStream {
    Plain(TcpStream),
    Kernel(Box<ClientKtlsTransport>),
    User(Box<ClientUserTlsTransport>),
}

/// Why no connection could be made.
pub enum ConnectError {
    Timeout,
    /// The circuit breakers: too many connections and too many requests waiting for one.
    Overflow,
    /// Refused, unreachable, resolution failed, TLS handshake failed: the detail for the reply.
    Failed(String),
}

/// [`connect_with`] without TLS stats (health checks).
pub async fn connect(
    cluster: &ClusterInfo,
    endpoint: &EndpointInfo,
) -> Result<UpstreamStream, ConnectError> {
    connect_with(cluster, endpoint, None).await
}

pub async fn connect_with(
    cluster: &ClusterInfo,
    endpoint: &EndpointInfo,
    tls_stats: Option<&Rc<UpstreamTlsStats>>,
) -> Result<UpstreamStream, ConnectError> {
    let attempt = async {
        let addr = resolve(cluster, endpoint).await?;
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| ConnectError::Failed(format!("delayed connect error: {e}")))?;
        let _ = tcp.set_nodelay(true);
        match &cluster.tls {
            None => Ok(UpstreamStream::Plain(tcp)),
            Some(tls) => handshake(&cluster.name, tcp, tls, tls_stats).await,
        }
    };
    // Envoy's connect_timeout covers the TCP connect and the TLS handshake.
    match tokio::time::timeout(cluster.connect_timeout, attempt).await {
        Ok(r) => r,
        Err(_) => Err(ConnectError::Timeout),
    }
}

async fn resolve(cluster: &ClusterInfo, e: &EndpointInfo) -> Result<SocketAddr, ConnectError> {
    if let Ok(ip) = e.host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, e.port));
    }
    if !cluster.resolve {
        return Err(ConnectError::Failed(format!("\"{}\" is not an IP", e.host)));
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((e.host.as_str(), e.port))
        .await
        .map_err(|err| ConnectError::Failed(format!("DNS resolution failed: {err}")))?
        .collect();
    let v4 = addrs.iter().find(|a| a.is_ipv4());
    let v6 = addrs.iter().find(|a| a.is_ipv6());
    let pick = match cluster.family {
        DnsLookupFamily::V4Only => v4,
        DnsLookupFamily::V6Only => v6,
        DnsLookupFamily::V4Preferred => v4.or(v6),
        DnsLookupFamily::V6Preferred => v6.or(v4),
    };
    pick.copied()
        .ok_or_else(|| ConnectError::Failed(format!("no address for \"{}\"", e.host)))
}

impl UpstreamStream {
    /// Whether an idle pooled connection still looks usable: nothing to read (a close or
    /// stray bytes from the upstream mean it must not carry another request).
    pub fn idle_ok(&self) -> bool {
        // On a kTLS socket a pending record makes this read return data or fail (EIO for a
        // non-data record): either way the connection is not reused.
        let tcp = self.tcp();
        let mut probe = [0u8; 1];
        matches!(tcp.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }
}

impl UpstreamStream {
    /// A duplicate of the socket to splice a body from: plain TCP, or kernel TLS with nothing
    /// read ahead into user space. None for user-space TLS.
    pub fn splice_source(&self) -> Option<SpliceSource> {
        let (tcp, ktls) = match self {
            UpstreamStream::Plain(t) => (t, false),
            UpstreamStream::Kernel(t) if !t.read_buffered() => (t.tcp(), true),
            _ => return None,
        };
        SpliceSource::new(tcp, ktls).ok()
    }

    /// The protocol ALPN chose (None on plain TCP or without ALPN).
    pub fn alpn(&self) -> Option<&[u8]> {
        use hoist_tls::transport::Transport;
        let info = match self {
            UpstreamStream::Plain(_) => None,
            UpstreamStream::Kernel(t) => t.tls_info(),
            UpstreamStream::User(t) => t.tls_info(),
        };
        info.and_then(|i| i.alpn.as_deref())
    }

    pub fn tcp(&self) -> &TcpStream {
        match self {
            UpstreamStream::Plain(t) => t,
            UpstreamStream::Kernel(t) => t.tcp(),
            UpstreamStream::User(t) => t.tcp(),
        }
    }
}

impl AsyncRead for UpstreamStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            UpstreamStream::Kernel(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
            UpstreamStream::User(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for UpstreamStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_write(cx, data),
            UpstreamStream::Kernel(s) => Pin::new(s.as_mut()).poll_write(cx, data),
            UpstreamStream::User(s) => Pin::new(s.as_mut()).poll_write(cx, data),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_flush(cx),
            UpstreamStream::Kernel(s) => Pin::new(s.as_mut()).poll_flush(cx),
            UpstreamStream::User(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            UpstreamStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            UpstreamStream::Kernel(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
            UpstreamStream::User(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

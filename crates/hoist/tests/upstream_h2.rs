//! HTTP/2 toward upstream clusters (`explicit_http_config.http2_protocol_options`), against an
//! h2c origin written here on the h2 crate (prior knowledge over plain TCP) that counts its
//! connections and streams: bodies byte-exact both ways through HTTP/1.1 and HTTP/2
//! downstreams, many concurrent requests multiplexed on one upstream connection, a stream reset
//! by the origin (503, and retried with retry_on: reset), and a GOAWAY after which requests go
//! on a new connection. auto_config over plain TCP speaks HTTP/1.1 (origin.py).
#![allow(clippy::unwrap_used)]

mod support;
mod upstream_support;

use std::future::poll_fn;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::RecvStream;
use support::{curl, payload, sha256_hex, Hoist, TempDir};
use upstream_support::{cluster, config, route, Origin};

/// An h2c origin on a thread of its own. Paths: `/bytes/N` (N bytes of [`pattern`]; `/stream/N`
/// the same without content-length), `/echo`
/// (the request body back), `/slow` (answers after a pause), `/info` (what arrived),
/// `/reset` (RST_STREAM), `/goaway` (answers, and shuts the connection down gracefully).
struct H2Origin {
    port: u16,
    connections: Arc<AtomicUsize>,
    streams: Arc<AtomicUsize>,
}

impl H2Origin {
    fn start() -> H2Origin {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let streams = Arc::new(AtomicUsize::new(0));
        let (c, s) = (connections.clone(), streams.clone());
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        continue;
                    };
                    c.fetch_add(1, Ordering::SeqCst);
                    tokio::spawn(serve(tcp, s.clone()));
                }
            });
        });
        H2Origin {
            port,
            connections,
            streams,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    fn streams(&self) -> usize {
        self.streams.load(Ordering::SeqCst)
    }
}

async fn serve(tcp: tokio::net::TcpStream, streams: Arc<AtomicUsize>) {
    let Ok(mut conn) = h2::server::handshake(tcp).await else {
        return;
    };
    while let Some(Ok((req, respond))) = conn.accept().await {
        streams.fetch_add(1, Ordering::SeqCst);
        let goaway = req.uri().path() == "/goaway";
        tokio::spawn(handle(req, respond));
        if goaway {
            conn.graceful_shutdown();
        }
    }
}

/// A body that no prefix of a shifted copy matches (so a lost or repeated piece shows).
fn pattern(n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| (i % 251) as u8 ^ (i / 251 % 256) as u8)
        .collect()
}

async fn handle(req: http::Request<RecvStream>, mut respond: SendResponse<Bytes>) {
    let path = req.uri().path().to_owned();
    let info = format!(
        "method={} authority={} host-header={} connection-header={}",
        req.method(),
        req.uri()
            .authority()
            .map(|a| a.to_string())
            .unwrap_or_default(),
        req.headers().contains_key("host"),
        req.headers().contains_key("connection"),
    );
    let mut body = req.into_body();
    let mut got = Vec::new();
    while let Some(Ok(d)) = body.data().await {
        let _ = body.flow_control().release_capacity(d.len());
        got.extend_from_slice(&d);
    }
    // /stream/N: as /bytes/N without a content-length.
    let sized = !path.starts_with("/stream/");
    let out = match path.as_str() {
        "/reset" => {
            respond.send_reset(h2::Reason::INTERNAL_ERROR);
            return;
        }
        "/echo" => got,
        "/slow" => {
            tokio::time::sleep(Duration::from_millis(300)).await;
            b"slow".to_vec()
        }
        "/info" | "/goaway" => info.into_bytes(),
        p => match p
            .strip_prefix("/bytes/")
            .or_else(|| p.strip_prefix("/stream/"))
            .and_then(|n| n.parse().ok())
        {
            Some(n) => pattern(n),
            None => b"?".to_vec(),
        },
    };
    let mut response = http::Response::builder().status(200);
    if sized {
        response = response.header("content-length", out.len());
    }
    let response = response.body(()).unwrap();
    let Ok(mut send) = respond.send_response(response, out.is_empty()) else {
        return;
    };
    let mut data = Bytes::from(out);
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let Some(Ok(n)) = poll_fn(|cx| send.poll_capacity(cx)).await else {
            return;
        };
        let piece = data.split_to(n.min(data.len()));
        if send.send_data(piece, data.is_empty()).is_err() {
            return;
        }
    }
}

const H2: &str = r#"    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {initial_stream_window_size: 65536, initial_connection_window_size: 131072}
"#;

fn start(dir: &TempDir, port: u16) -> Hoist {
    let routes = route(
        "{prefix: /retried/}",
        "{cluster: h2c, prefix_rewrite: /, retry_policy: {retry_on: reset, num_retries: 2}}",
    ) + &route("{prefix: /}", "{cluster: h2c}");
    let log = dir.path("access.log");
    let cfg = dir.write(
        "hoist.yaml",
        config(&routes, &cluster("h2c", &[(port, 1)], H2), &log, None),
    );
    Hoist::start(&cfg, &["--concurrency", "1"])
}

fn url(h: &Hoist, path: &str) -> String {
    format!("http://{}{path}", h.addr("plain"))
}

/// Status and body of a curl run (`-w` appends the status on its own line).
fn fetch(args: &[&str]) -> (u16, Vec<u8>) {
    let mut all = vec!["-w", "\n%{http_code}"];
    all.extend_from_slice(args);
    let out = curl(&all);
    let mut body = out.stdout;
    let split = body.iter().rposition(|b| *b == b'\n').unwrap();
    let status = String::from_utf8_lossy(&body[split + 1..]).parse().unwrap();
    body.truncate(split);
    (status, body)
}

const VERSIONS: [&str; 2] = ["--http1.1", "--http2-prior-knowledge"];

#[test]
fn bodies_are_byte_exact_both_ways_over_one_connection() {
    let dir = TempDir::new("upstream-h2-bodies");
    let origin = H2Origin::start();
    let h = start(&dir, origin.port);
    let upload = payload(&dir, "upload.bin", 1_300_000);
    let sent = std::fs::read(&upload).unwrap();
    let expected = sha256_hex(&pattern(1_500_000));
    for v in VERSIONS {
        let (status, body) = fetch(&[v, &url(&h, "/bytes/1500000")]);
        assert_eq!(status, 200, "{v}");
        assert_eq!(body.len(), 1_500_000, "{v}");
        assert_eq!(sha256_hex(&body), expected, "{v}");
        let (status, body) = fetch(&[v, &url(&h, "/stream/1500000")]);
        assert_eq!(status, 200, "{v}");
        assert_eq!(sha256_hex(&body), expected, "{v}");
        let data = format!("@{}", upload.display());
        let (status, body) = fetch(&[v, "--data-binary", &data, &url(&h, "/echo")]);
        assert_eq!(status, 200, "{v}");
        assert_eq!(sha256_hex(&body), sha256_hex(&sent), "{v}");
        let (status, body) = fetch(&[v, "-H", "host: origin.test", &url(&h, "/info")]);
        assert_eq!(status, 200, "{v}");
        assert_eq!(
            String::from_utf8_lossy(&body),
            "method=GET authority=origin.test host-header=false connection-header=false",
            "{v}"
        );
    }
    assert_eq!(origin.streams(), 8);
    assert_eq!(origin.connections(), 1);
    assert_eq!(h.stat("cluster.h2c.upstream_cx_total"), 1);
    assert_eq!(h.stat("cluster.h2c.upstream_rq_2xx"), 8);
}

#[test]
fn concurrent_requests_share_one_connection() {
    let dir = TempDir::new("upstream-h2-concurrent");
    let origin = H2Origin::start();
    let h = start(&dir, origin.port);
    let target = url(&h, "/slow");
    let clients: Vec<_> = (0..20)
        .map(|i| {
            let target = target.clone();
            std::thread::spawn(move || fetch(&[VERSIONS[i % 2], &target]))
        })
        .collect();
    for c in clients {
        let (status, body) = c.join().unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, b"slow");
    }
    assert_eq!(origin.streams(), 20);
    assert_eq!(origin.connections(), 1);
    assert_eq!(h.stat("cluster.h2c.upstream_cx_total"), 1);
}

#[test]
fn resets_and_goaway() {
    let dir = TempDir::new("upstream-h2-reset");
    let origin = H2Origin::start();
    let h = start(&dir, origin.port);
    let (status, body) = fetch(&[&url(&h, "/reset")]);
    assert_eq!(status, 503);
    assert!(
        String::from_utf8_lossy(&body).contains("reset before headers"),
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(origin.streams(), 1);
    // retry_on: reset, num_retries: 2: three streams, then the 503.
    let (status, _) = fetch(&["--http2-prior-knowledge", &url(&h, "/retried/reset")]);
    assert_eq!(status, 503);
    assert_eq!(origin.streams(), 4);
    assert_eq!(h.stat("cluster.h2c.upstream_rq_retry"), 2);
    // The reset streams left the connection usable.
    let (status, _) = fetch(&[&url(&h, "/info")]);
    assert_eq!(status, 200);
    assert_eq!(origin.connections(), 1);
    // A GOAWAY: the answer still arrives, and the next request opens a new connection.
    let (status, _) = fetch(&[&url(&h, "/goaway")]);
    assert_eq!(status, 200);
    for v in VERSIONS {
        let (status, _) = fetch(&[v, &url(&h, "/info")]);
        assert_eq!(status, 200, "{v}");
    }
    assert_eq!(origin.connections(), 2);
    assert_eq!(h.stat("cluster.h2c.upstream_cx_total"), 2);
}

#[test]
fn auto_config_over_plain_tcp_speaks_http1() {
    let dir = TempDir::new("upstream-h2-auto");
    let origin = Origin::start("a");
    let extra = r#"    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        auto_config: {http2_protocol_options: {}}
"#;
    let log = dir.path("access.log");
    let cfg = dir.write(
        "hoist.yaml",
        config(
            &route("{prefix: /}", "{cluster: web}"),
            &cluster("web", &[(origin.port, 1)], extra),
            &log,
            None,
        ),
    );
    let h = Hoist::start(&cfg, &["--concurrency", "1"]);
    let (status, body) = fetch(&[&url(&h, "/")]);
    assert_eq!(status, 200);
    assert!(String::from_utf8_lossy(&body).contains("\"origin\": \"a\""));
}

/// nginx (Debian's package) over TLS: `h2_port` offers h2 and http/1.1 by ALPN, `h1_port` only
/// HTTP/1.1. `/proto` answers with the protocol the request arrived in; other paths are files
/// of `root`.
struct TlsNginx {
    _process: upstream_support::NginxProcess,
    h2_port: u16,
    h1_port: u16,
}

impl TlsNginx {
    fn start(dir: &TempDir, cert: &support::Cert, root: &std::path::Path) -> TlsNginx {
        let (h2_port, h1_port) = (upstream_support::free_port(), upstream_support::free_port());
        let http = format!(
            r#"    ssl_certificate {cert};
    ssl_certificate_key {key};
    server {{
        listen 127.0.0.1:{h2_port} ssl http2;
        root {root};
        location /proto {{ return 200 "proto=$server_protocol\n"; }}
    }}
    server {{
        listen 127.0.0.1:{h1_port} ssl;
        root {root};
        location /proto {{ return 200 "proto=$server_protocol\n"; }}
    }}"#,
            cert = cert.cert.display(),
            key = cert.key.display(),
            root = root.display(),
        );
        TlsNginx {
            _process: upstream_support::NginxProcess::start(dir, &http, &[h2_port, h1_port]),
            h2_port,
            h1_port,
        }
    }
}

/// A TLS cluster extra with HttpProtocolOptions `protocol` (YAML flow mapping) and no
/// alpn_protocols: hoist offers what the protocol options need.
fn tls_extra(ca: &std::path::Path, protocol: &str) -> String {
    format!(
        r#"    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        {protocol}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: origin.test
        common_tls_context:
          validation_context:
            trusted_ca: {{filename: {}}}
"#,
        ca.display()
    )
}

#[test]
fn tls_origins_by_alpn() {
    let dir = TempDir::new("upstream-h2-tls");
    let (ca, cert) = upstream_support::ca_and_leaf(&dir, "origin.test");
    let root = dir.path("root");
    std::fs::create_dir_all(&root).unwrap();
    let big = payload(&dir, "root/big.bin", 2_000_000);
    let big_sha = sha256_hex(&std::fs::read(&big).unwrap());
    let nginx = TlsNginx::start(&dir, &cert, &root);
    let explicit = "explicit_http_config: {http2_protocol_options: {}}";
    let auto = "auto_config: {http_protocol_options: {}, http2_protocol_options: {}}";
    let clusters = cluster("h2", &[(nginx.h2_port, 1)], &tls_extra(&ca, explicit))
        + &cluster("auto2", &[(nginx.h2_port, 1)], &tls_extra(&ca, auto))
        + &cluster("auto1", &[(nginx.h1_port, 1)], &tls_extra(&ca, auto));
    let routes = route("{prefix: /h2/}", "{cluster: h2, prefix_rewrite: /}")
        + &route("{prefix: /auto2/}", "{cluster: auto2, prefix_rewrite: /}")
        + &route("{prefix: /auto1/}", "{cluster: auto1, prefix_rewrite: /}");
    let log = dir.path("access.log");
    let cfg = dir.write("hoist.yaml", config(&routes, &clusters, &log, None));
    let h = Hoist::start(&cfg, &["--concurrency", "1"]);
    for v in VERSIONS {
        let (status, body) = fetch(&[v, &url(&h, "/h2/proto")]);
        assert_eq!(
            (status, body.as_slice()),
            (200, &b"proto=HTTP/2.0\n"[..]),
            "{v}"
        );
        let (status, body) = fetch(&[v, &url(&h, "/h2/big.bin")]);
        assert_eq!(status, 200, "{v}");
        assert_eq!(sha256_hex(&body), big_sha, "{v}");
        let (status, body) = fetch(&[v, &url(&h, "/auto2/proto")]);
        assert_eq!(
            (status, body.as_slice()),
            (200, &b"proto=HTTP/2.0\n"[..]),
            "{v}"
        );
        let (status, body) = fetch(&[v, &url(&h, "/auto1/proto")]);
        assert_eq!(
            (status, body.as_slice()),
            (200, &b"proto=HTTP/1.1\n"[..]),
            "{v}"
        );
        let (status, body) = fetch(&[v, &url(&h, "/auto1/big.bin")]);
        assert_eq!(status, 200, "{v}");
        assert_eq!(sha256_hex(&body), big_sha, "{v}");
    }
    // The HTTP/2 clusters multiplexed everything on one connection each.
    assert_eq!(h.stat("cluster.h2.upstream_cx_total"), 1);
    assert_eq!(h.stat("cluster.auto2.upstream_cx_total"), 1);
}

#[test]
fn max_requests_per_connection_idle_timeout_and_route_timeout() {
    let dir = TempDir::new("upstream-h2-limits");
    let origin = H2Origin::start();
    let extra = r#"    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        common_http_protocol_options: {max_requests_per_connection: 2}
        explicit_http_config: {http2_protocol_options: {max_concurrent_streams: 4}}
"#;
    let idle = H2Origin::start();
    let idle_extra = r#"    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        common_http_protocol_options: {idle_timeout: 0.2s}
        explicit_http_config: {http2_protocol_options: {}}
"#;
    let routes = route(
        "{prefix: /late/}",
        "{cluster: h2c, prefix_rewrite: /, timeout: 0.05s}",
    ) + &route("{prefix: /idle/}", "{cluster: idle, prefix_rewrite: /}")
        + &route("{prefix: /}", "{cluster: h2c}");
    let log = dir.path("access.log");
    let clusters = cluster("h2c", &[(origin.port, 1)], extra)
        + &cluster("idle", &[(idle.port, 1)], idle_extra);
    let cfg = dir.write("hoist.yaml", config(&routes, &clusters, &log, None));
    let h = Hoist::start(&cfg, &["--concurrency", "1"]);
    for _ in 0..4 {
        let (status, _) = fetch(&[&url(&h, "/info")]);
        assert_eq!(status, 200);
    }
    // Two streams per connection.
    assert_eq!(origin.connections(), 2);
    assert_eq!(h.stat("cluster.h2c.upstream_cx_total"), 2);
    assert!(h.stat("cluster.h2c.upstream_cx_max_requests") >= 1);
    // /slow answers after 300 ms: the route's 50 ms run out first.
    let (status, body) = fetch(&[&url(&h, "/late/slow")]);
    assert_eq!(status, 504);
    assert_eq!(body, b"upstream request timeout");
    assert_eq!(h.stat("cluster.h2c.upstream_rq_timeout"), 1);
    // A connection idle for longer than idle_timeout takes no new stream.
    let (status, _) = fetch(&[&url(&h, "/idle/info")]);
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_millis(500));
    let (status, _) = fetch(&[&url(&h, "/idle/info")]);
    assert_eq!(status, 200);
    assert_eq!(idle.connections(), 2);
    assert_eq!(h.stat("cluster.idle.upstream_cx_idle_timeout"), 1);
}

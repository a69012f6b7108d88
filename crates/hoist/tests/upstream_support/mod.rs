//! Helpers for the upstream tests: the Python test origin (origin.py) and configurations with
//! routes to clusters.
#![allow(dead_code)]
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub mod client;

use crate::support::Cert;

/// A running origin.py; killed when dropped.
pub struct Origin {
    child: Child,
    pub port: u16,
}

impl Origin {
    pub fn start(name: &str) -> Origin {
        Origin::spawn(name, None)
    }

    pub fn start_tls(name: &str, cert: &Cert) -> Origin {
        Origin::spawn(name, Some(cert))
    }

    fn spawn(name: &str, tls: Option<&Cert>) -> Origin {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstream_support/origin.py");
        let mut cmd = Command::new("python3");
        cmd.arg(script).arg(name);
        if let Some(c) = tls {
            cmd.arg(&c.cert).arg(&c.key);
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 is installed");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().expect("origin prints its port");
        Origin { child, port }
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A STATIC cluster over 127.0.0.1 ports: `(port, weight)`; `extra` goes under the cluster
/// (indented by 4: lb_policy, connect_timeout, transport_socket).
pub fn cluster(name: &str, endpoints: &[(u16, u32)], extra: &str) -> String {
    let mut e = String::new();
    for (port, weight) in endpoints {
        e.push_str(&format!(
            "        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}\n          load_balancing_weight: {weight}\n"
        ));
    }
    format!(
        "  - name: {name}\n{extra}    load_assignment:\n      cluster_name: {name}\n      endpoints:\n      - lb_endpoints:\n{e}"
    )
}

/// As cluster, with each endpoint in a locality of its priority: `(port, priority)`.
pub fn cluster_by_priority(name: &str, endpoints: &[(u16, u32)], extra: &str) -> String {
    let mut e = String::new();
    for (port, priority) in endpoints {
        e.push_str(&format!(
            "      - priority: {priority}\n        lb_endpoints:\n        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}\n"
        ));
    }
    format!(
        "  - name: {name}\n{extra}    load_assignment:\n      cluster_name: {name}\n      endpoints:\n{e}"
    )
}

/// A connection manager with `routes` (YAML list items indented by 8), an access log to
/// `log`, use_remote_address; `extra` lines are indented by 10.
fn hcm(routes: &str, log: &Path, extra: &str) -> String {
    hcm_with(routes, log, extra, "")
}

/// As hcm, with `vhost` lines (indented by 14) in the virtual host.
fn hcm_with(routes: &str, log: &Path, extra: &str, vhost: &str) -> String {
    format!(
        r#"      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress
          use_remote_address: true
{extra}          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: {}
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
{vhost}              routes:
{routes}          http_filters:
          - name: envoy.filters.http.router
            typed_config: {{"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}
"#,
        log.display()
    )
}

/// A bootstrap with a plain listener "plain", optionally a TLS listener "tls" with the same
/// routes (h2 and http/1.1 by ALPN), and `clusters` (list items).
pub fn config(routes: &str, clusters: &str, log: &Path, tls: Option<&Cert>) -> String {
    let mut listeners = format!(
        "  - name: plain\n    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}\n    filter_chains:\n    - filters:\n{}",
        hcm(routes, log, "")
    );
    if let Some(c) = tls {
        listeners.push_str(&format!(
            r#"  - name: tls
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: {{filename: {}}}
              private_key: {{filename: {}}}
      filters:
{}"#,
            c.cert.display(),
            c.key.display(),
            // HTTP/2 windows bound what a client may send ahead of the upstream (Envoy's
            // default, 256 MiB, would let one upload fill memory, in Envoy as in hoist).
            hcm(
                routes,
                log,
                "          http2_protocol_options: {initial_stream_window_size: 1048576, initial_connection_window_size: 1048576}\n"
            )
        ));
    }
    format!(
        "admin:\n  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}\nstatic_resources:\n  listeners:\n{listeners}  clusters:\n{clusters}"
    )
}

/// A bootstrap with one plain listener "plain" whose connection manager has `hcm_extra` lines
/// (indented by 10, e.g. `via` or use_remote_address's companions) and whose virtual host has
/// `vhost_extra` lines (indented by 14).
pub fn config_with(
    routes: &str,
    clusters: &str,
    log: &Path,
    hcm_extra: &str,
    vhost_extra: &str,
) -> String {
    format!(
        "admin:\n  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}\nstatic_resources:\n  listeners:\n  - name: plain\n    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}\n    filter_chains:\n    - filters:\n{}  clusters:\n{clusters}",
        hcm_with(routes, log, hcm_extra, vhost_extra)
    )
}

/// One route item: `match` (flow YAML) and `route` (flow YAML).
pub fn route(m: &str, r: &str) -> String {
    format!("              - match: {m}\n                route: {r}\n")
}

/// A CA (PEM file) and a certificate for `name` it signed (PEM files): webpki refuses a
/// self-signed CA certificate as a server's own.
pub fn ca_and_leaf(dir: &crate::support::TempDir, name: &str) -> (std::path::PathBuf, Cert) {
    let ca_key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "upstream test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    let cert = params.signed_by(&key, &issuer).unwrap();
    (
        dir.write("upstream-ca.pem", ca_cert.pem()),
        Cert {
            cert: dir.write("upstream.crt", cert.pem()),
            key: dir.write("upstream.key", key.serialize_pem()),
        },
    )
}

/// A running nginx (Debian's package) with a configuration of the test's own; stopped when
/// dropped.
pub struct NginxProcess {
    child: Child,
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl NginxProcess {
    /// Writes nginx.conf under `dir` with `http` (server blocks and http-level directives)
    /// inside the http block, after the head every test needs (pid, logs and temp paths inside
    /// `dir`), starts nginx in the foreground and waits until each of `ports` accepts.
    pub fn start(dir: &crate::support::TempDir, http: &str, ports: &[u16]) -> NginxProcess {
        let prefix = dir.path("nginx");
        std::fs::create_dir_all(prefix.join("logs")).unwrap();
        let conf = dir.write(
            "nginx.conf",
            format!(
                r#"worker_processes 1;
pid {prefix}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {prefix}/body;
    proxy_temp_path {prefix}/proxy;
    fastcgi_temp_path {prefix}/fastcgi;
    uwsgi_temp_path {prefix}/uwsgi;
    scgi_temp_path {prefix}/scgi;
{http}
}}
"#,
                prefix = prefix.display(),
            ),
        );
        let child = Command::new("/usr/sbin/nginx")
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf)
            .args(["-e", "stderr", "-g", "daemon off;"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("nginx is installed");
        // A liveness bound for nginx's start, not a timing assertion.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        for &port in ports {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                assert!(std::time::Instant::now() < deadline, "nginx did not start");
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        NginxProcess { child }
    }
}

impl Drop for NginxProcess {
    /// SIGTERM, not SIGKILL: the master stops its workers only when it is told to; killed, it
    /// would leave them running.
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// nginx serving the files of `root` over HTTP and HTTPS with keep-alive.
pub struct Nginx {
    _process: NginxProcess,
    pub http_port: u16,
    pub https_port: u16,
}

impl Nginx {
    pub fn start(dir: &crate::support::TempDir, root: &Path, cert: &Cert) -> Nginx {
        let (http_port, https_port) = (free_port(), free_port());
        let http = format!(
            r#"    keepalive_timeout 300s;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{http_port};
        listen 127.0.0.1:{https_port} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        root {root};
        default_type application/octet-stream;
    }}"#,
            cert = cert.cert.display(),
            key = cert.key.display(),
            root = root.display(),
        );
        Nginx {
            _process: NginxProcess::start(dir, &http, &[https_port]),
            http_port,
            https_port,
        }
    }
}

//! Shared helpers for the integration tests: start the real hoist binary on a configuration,
//! find its ports, drive it with real peers (curl, openssl), and stop it.
#![allow(dead_code)]
// Test helpers: a failed unwrap here is a failed test.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_hoist");

/// A loopback port that refuses connections for as long as this value lives. The socket is
/// bound but never listens, so a connect gets a reset, and no other process can be given the
/// port meanwhile: a port bound and released at once can be handed to a parallel test's origin,
/// which then answers where the test expects a connect failure.
pub struct RefusingPort {
    _socket: socket2::Socket,
    pub port: u16,
}

impl RefusingPort {
    pub fn new() -> RefusingPort {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket
            .bind(&SocketAddr::from(([127, 0, 0, 1], 0)).into())
            .unwrap();
        let port = socket.local_addr().unwrap().as_socket().unwrap().port();
        RefusingPort {
            _socket: socket,
            port,
        }
    }
}

/// A scratch directory removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("hoist-test-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    pub fn write(&self, name: &str, data: impl AsRef<[u8]>) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running hoist process.
pub struct Hoist {
    pub child: Child,
    pub listeners: HashMap<String, SocketAddr>,
    pub admin: Option<SocketAddr>,
    /// Everything hoist printed on stdout so far (banner) and stderr (collected on stop).
    pub stdout: Vec<String>,
    stderr_rx: mpsc::Receiver<String>,
}

impl Hoist {
    /// Starts `hoist -c <config> <args>` and waits for its banner.
    pub fn start(config: &Path, args: &[&str]) -> Hoist {
        let mut all = vec!["-c", config.to_str().unwrap()];
        all.extend_from_slice(args);
        Hoist::start_args(&all)
    }

    pub fn start_args(args: &[&str]) -> Hoist {
        Hoist::start_cmd(Command::new(BIN), args)
    }

    /// Starts hoist from a prepared command (working directory, environment) with `args`.
    pub fn start_cmd(mut cmd: Command, args: &[&str]) -> Hoist {
        let mut child = cmd
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start hoist");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let (etx, erx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if etx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut h = Hoist {
            child,
            listeners: HashMap::new(),
            admin: None,
            stdout: Vec::new(),
            stderr_rx: erx,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    h.parse_banner_line(&line);
                    let done = line.starts_with("hoist ready");
                    h.stdout.push(line);
                    if done {
                        break;
                    }
                }
                Err(_) => {
                    let _ = h.child.kill();
                    let err: Vec<String> = h.stderr_rx.try_iter().collect();
                    panic!(
                        "hoist did not print its banner; stdout={:?} stderr={err:?}",
                        h.stdout
                    );
                }
            }
        }
        // Keep draining stdout so hoist never blocks on a full pipe.
        std::thread::spawn(move || for _ in rx {});
        h
    }

    fn parse_banner_line(&mut self, line: &str) {
        // "  listener 'name' on https://127.0.0.1:1234"
        if let Some(rest) = line.strip_prefix("  listener '") {
            if let Some((name, url)) = rest.split_once("' on ") {
                let addr = url.split("://").nth(1).unwrap_or("");
                if let Ok(a) = addr.parse() {
                    self.listeners.insert(name.to_string(), a);
                }
            }
        }
        if let Some(url) = line.strip_prefix("  admin on http://") {
            self.admin = url.parse().ok();
        }
    }

    pub fn addr(&self, listener: &str) -> SocketAddr {
        *self
            .listeners
            .get(listener)
            .unwrap_or_else(|| panic!("no listener {listener}: {:?}", self.listeners))
    }

    pub fn admin_get(&self, path: &str) -> (u16, String) {
        http_request(self.admin.expect("admin"), "GET", path)
    }

    pub fn admin_post(&self, path: &str) -> (u16, String) {
        http_request(self.admin.expect("admin"), "POST", path)
    }

    /// A stat's merged value from /stats (0 when absent).
    pub fn stat(&self, name: &str) -> u64 {
        let (_, body) = self.admin_get(&format!("/stats?filter=^{}$", regex_escape(name)));
        body.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Waits (up to 10 s) until a stat has the value: a worker counts an exchange once its
    /// response is written, so a client can be done before the count is.
    pub fn wait_stat(&self, name: &str, want: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.stat(name);
            if got == want {
                return;
            }
            assert!(Instant::now() < deadline, "{name} is {got}, never {want}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits for the exit status (panics after `limit`).
    pub fn terminate(&mut self, limit: Duration) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        self.wait(limit)
    }

    pub fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("hoist did not exit within {limit:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn stderr_lines(&self) -> Vec<String> {
        self.stderr_rx.try_iter().collect()
    }
}

impl Drop for Hoist {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// A minimal HTTP/1.1 request over plain TCP, returning status and body (Connection: close).
pub fn http_request(addr: SocketAddr, method: &str, path: &str) -> (u16, String) {
    let raw = raw_exchange(addr, format!("{method} {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\nContent-Length: 0\r\n\r\n").as_bytes());
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    (status, body)
}

/// Writes `request` and reads until the server closes (or 10 s pass).
pub fn raw_exchange(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// Runs curl with the given arguments; returns its output.
pub fn curl(args: &[&str]) -> Output {
    Command::new("curl")
        .args(["-sS", "--max-time", "60"])
        .args(args)
        .output()
        .expect("curl is installed")
}

/// The peak resident memory of process `pid` (VmHWM), in KiB.
pub fn vm_hwm_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(data);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// Certificates made with the openssl CLI (RSA) or rcgen (ECDSA), written into `dir`.
pub struct Cert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub fn rsa_cert(dir: &TempDir, name: &str, cn: &str, bits: u32) -> Cert {
    let cert = dir.path(&format!("{name}.crt"));
    let key = dir.path(&format!("{name}.key"));
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            &format!("rsa:{bits}"),
            "-nodes",
            "-days",
            "30",
            "-subj",
        ])
        .arg(format!("/CN={cn}"))
        .arg("-addext")
        .arg(format!(
            "subjectAltName=DNS:{cn},DNS:localhost,IP:127.0.0.1"
        ))
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "openssl req failed");
    Cert { cert, key }
}

pub fn ecdsa_cert(dir: &TempDir, name: &str, cn: &str) -> Cert {
    let mut params =
        rcgen::CertificateParams::new(vec![cn.to_string(), "localhost".to_string()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, cn);
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let c = params.self_signed(&key).unwrap();
    Cert {
        cert: dir.write(&format!("{name}.crt"), c.pem()),
        key: dir.write(&format!("{name}.key"), key.serialize_pem()),
    }
}

/// A payload file of `size` bytes with a non-repeating-looking pattern.
pub fn payload(dir: &TempDir, name: &str, size: usize) -> PathBuf {
    let mut data = Vec::with_capacity(size);
    let mut x: u32 = 0x1234_5678 ^ size as u32;
    while data.len() < size {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data.push(b'a' + (x % 26) as u8);
    }
    dir.write(name, data)
}

/// The HTTP connection manager YAML block shared by many tests: a direct response per
/// `(path, body file)`, and `/` with a short inline text.
pub fn hcm_yaml(indent: usize, stat_prefix: &str, routes: &[(&str, &Path)], extra: &str) -> String {
    let mut r = String::new();
    for (path, file) in routes {
        r.push_str(&format!(
            "        - match: {{path: {path}}}\n          direct_response: {{status: 200, body: {{filename: {}}}}}\n",
            file.display()
        ));
    }
    let block = format!(
        r#"- name: envoy.filters.network.http_connection_manager
  typed_config:
    "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
    stat_prefix: {stat_prefix}
{extra}    route_config:
      max_direct_response_body_size_bytes: 11000000
      virtual_hosts:
      - name: all
        domains: ["*"]
        routes:
{r}        - match: {{prefix: /}}
          direct_response: {{status: 200, body: {{inline_string: "hello from hoist\n"}}}}
    http_filters:
    - name: envoy.filters.http.router
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#
    );
    let pad = " ".repeat(indent);
    block.lines().map(|l| format!("{pad}{l}\n")).collect()
}

/// A bootstrap with admin on an ephemeral port and the given listener blocks (already indented
/// as list items under `listeners:`).
pub fn bootstrap(listeners: &str) -> String {
    format!(
        "admin:\n  address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}\nstatic_resources:\n  listeners:\n{listeners}"
    )
}

/// A plaintext listener on an ephemeral port serving `routes`.
pub fn plain_listener(
    name: &str,
    stat_prefix: &str,
    routes: &[(&str, &Path)],
    hcm_extra: &str,
) -> String {
    format!(
        "  - name: {name}\n    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}\n    filter_chains:\n    - filters:\n{}",
        hcm_yaml(6, stat_prefix, routes, hcm_extra)
    )
}

/// A TLS listener: `tls_extra` goes under common_tls_context (indented by 12), e.g. tls_params.
pub fn tls_listener(name: &str, cert: &Cert, tls_extra: &str, routes: &[(&str, &Path)]) -> String {
    format!(
        r#"  - name: {name}
    address: {{socket_address: {{address: 127.0.0.1, port_value: 0}}}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
{tls_extra}            tls_certificates:
            - certificate_chain: {{filename: {}}}
              private_key: {{filename: {}}}
      filters:
{}"#,
        cert.cert.display(),
        cert.key.display(),
        hcm_yaml(6, "ingress_https", routes, "")
    )
}

/// Inserts `block` (YAML lines, indented as if at column 0) before the first line containing
/// `marker`, indented like that line.
pub fn insert_before(yaml: &str, marker: &str, block: &str) -> String {
    let mut out = String::new();
    let mut done = false;
    for line in yaml.lines() {
        if !done && line.contains(marker) {
            let indent = line.len() - line.trim_start().len();
            for b in block.lines() {
                out.push_str(&" ".repeat(indent));
                out.push_str(b);
                out.push('\n');
            }
            done = true;
        }
        out.push_str(line);
        out.push('\n');
    }
    assert!(done, "marker {marker:?} not found");
    out
}

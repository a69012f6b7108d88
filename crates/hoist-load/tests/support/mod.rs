//! nginx from the distribution as an independent origin: a generated configuration on free
//! ports of 127.0.0.1 (plain and TLS with an openssl certificate), payload files, a gzip
//! location (chunked responses, or close-delimited ones for HTTP/1.0), and a location that
//! closes every second connection.
#![allow(dead_code)]
// Test helpers: a failed unwrap here is a failed test.
#![allow(clippy::unwrap_used)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const KB1: usize = 1024;
pub const MB10: usize = 10 * 1024 * 1024;

pub struct Nginx {
    child: Child,
    pub dir: PathBuf,
    pub plain: u16,
    pub tls: u16,
    /// The CA that signed nginx's certificate (for -cacert).
    pub ca: PathBuf,
}

/// A loopback port that refuses connections while this value lives: bound, never listening, so
/// no parallel test's server can be given it (as a port bound and released at once can be).
pub struct RefusingPort {
    _socket: socket2::Socket,
    pub port: u16,
}

impl RefusingPort {
    pub fn new() -> RefusingPort {
        let socket =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        socket.bind(&addr.into()).unwrap();
        let port = socket.local_addr().unwrap().as_socket().unwrap().port();
        RefusingPort {
            _socket: socket,
            port,
        }
    }
}

/// A port nothing listens on right now, for a server about to bind it.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn write_payload(path: &Path, size: usize) {
    let mut data = Vec::with_capacity(size);
    let mut x: u32 = 0x2545_F491 ^ size as u32;
    while data.len() < size {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        data.push(b'a' + (x % 26) as u8);
    }
    std::fs::write(path, data).unwrap();
}

impl Nginx {
    /// Starts nginx, or returns None (with a message) when it is not installed.
    pub fn start(tag: &str) -> Option<Nginx> {
        let Ok(bin) = which("nginx") else {
            eprintln!("skipping: nginx is not installed");
            return None;
        };
        let dir = std::env::temp_dir().join(format!("hoist-load-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("www/gzip")).unwrap();
        write_payload(&dir.join("www/1k"), KB1);
        write_payload(&dir.join("www/10m"), MB10);
        // Compressible text, large enough for several gzip chunks.
        let text: String = (0..8000)
            .map(|i| format!("line {i} of a compressible text\n"))
            .collect();
        std::fs::write(dir.join("www/gzip/text"), text).unwrap();
        // A CA and a server certificate it signs (webpki rejects a self-signed CA certificate
        // used as the server's own).
        let ca = dir.join("ca.pem");
        openssl(
            &dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=hoist-load test CA",
                "-keyout",
                "ca.key",
                "-out",
                "ca.pem",
            ],
        );
        openssl(
            &dir,
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "key.pem",
                "-out",
                "leaf.csr",
            ],
        );
        std::fs::write(
            dir.join("leaf.ext"),
            "basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=DNS:localhost,IP:127.0.0.1\n",
        )
        .unwrap();
        openssl(
            &dir,
            &[
                "x509",
                "-req",
                "-in",
                "leaf.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "2",
                "-extfile",
                "leaf.ext",
                "-out",
                "cert.pem",
            ],
        );
        let plain = free_port();
        let tls = free_port();
        let d = dir.display();
        let conf = format!(
            r#"daemon off;
worker_processes 1;
pid {d}/nginx.pid;
error_log {d}/error.log;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {d}/tmp-body;
    proxy_temp_path {d}/tmp-proxy;
    fastcgi_temp_path {d}/tmp-fastcgi;
    uwsgi_temp_path {d}/tmp-uwsgi;
    scgi_temp_path {d}/tmp-scgi;
    default_type application/octet-stream;
    sendfile on;
    keepalive_requests 100000;
    server {{
        listen 127.0.0.1:{plain};
        listen 127.0.0.1:{tls} ssl;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_ciphers ECDHE-RSA-AES256-GCM-SHA384:ECDHE-RSA-AES128-GCM-SHA256;
        root {d}/www;
        location /gzip/ {{
            gzip on;
            gzip_types application/octet-stream;
            gzip_min_length 0;
            gzip_http_version 1.0;
        }}
        location /closing/ {{
            alias {d}/www/;
            keepalive_requests 2;
        }}
        location = /echo {{
            return 200 "$request_method $content_length\n";
        }}
    }}
}}
"#
        );
        let conf_path = dir.join("nginx.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let child = Command::new(bin)
            .arg("-p")
            .arg(&dir)
            .arg("-c")
            .arg(&conf_path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let nginx = Nginx {
            child,
            dir,
            plain,
            tls,
            ca,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", plain)).is_err()
            || TcpStream::connect(("127.0.0.1", tls)).is_err()
        {
            assert!(
                Instant::now() < deadline,
                "nginx did not start: {}",
                std::fs::read_to_string(nginx.dir.join("error.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Some(nginx)
    }

    pub fn http(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.plain)
    }

    pub fn https(&self, path: &str) -> String {
        format!("https://127.0.0.1:{}{path}", self.tls)
    }

    /// Head and raw (still chunked or compressed) body sizes of a response, as curl saw them.
    pub fn curl_sizes(&self, args: &[&str], url: &str) -> (usize, usize) {
        let head = self.dir.join("curl-head");
        let body = self.dir.join("curl-body");
        let ok = Command::new("curl")
            .args(["-s", "--raw", "--max-time", "20"])
            .args(args)
            .arg("-D")
            .arg(&head)
            .arg("-o")
            .arg(&body)
            .arg(url)
            .status()
            .unwrap()
            .success();
        assert!(ok, "curl {url} failed");
        (
            std::fs::metadata(&head).unwrap().len() as usize,
            std::fs::metadata(&body).unwrap().len() as usize,
        )
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM lets the master stop its worker too.
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let ok = Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "openssl {args:?} failed");
}

fn which(name: &str) -> Result<PathBuf, ()> {
    for dir in [
        "/usr/sbin",
        "/usr/bin",
        "/usr/local/sbin",
        "/usr/local/bin",
        "/sbin",
    ] {
        let p = Path::new(dir).join(name);
        if p.is_file() {
            return Ok(p);
        }
    }
    Err(())
}

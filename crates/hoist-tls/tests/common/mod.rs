//! Shared by the integration tests: certificates (rcgen, and openssl for RSA), a 10 MB
//! file-backed body, contexts built from the config model, and a small TLS test server.
//!
//! The server inspects the ClientHello, runs the handshake, then speaks a line protocol on the
//! transport: `GET <n>` answers `OK <n>\n` and n body bytes (write_file), `INFO` one line with
//! the negotiated parameters, `ECHO <text>` the text, `QUIT` closes (close_notify then FIN).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hoist_config::model::core::DataSource;
use hoist_config::model::tls::{
    DownstreamTlsContext, TlsCertificate, TlsParams, ValidationContext,
};
use hoist_tls::file::{FileRegion, MappedFile};
use hoist_tls::{
    accept, read_client_hello, Inspect, PlainTransport, ServerContext, TlsInfo, Transport,
    UserTlsTransport,
};
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

pub const BODY_LEN: usize = 10 * 1024 * 1024;

/// The body file's byte at `i`: not periodic over any short span, so misplaced records show.
pub fn pattern(i: usize) -> u8 {
    ((i as u64).wrapping_mul(2_654_435_761) >> 13) as u8 ^ (i >> 16) as u8
}

#[derive(Clone, Debug)]
pub struct CertFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

pub struct Pki {
    pub dir: PathBuf,
    pub ca: PathBuf,
    /// ECDSA P-256 and RSA-2048 certificates for the same name, a.test.
    pub ecdsa_a: CertFiles,
    pub rsa_a: CertFiles,
    /// RSA-2048 for b.test.
    pub rsa_b: CertFiles,
    /// Client certificate signed by the CA: CN "hoist client", SAN URI spiffe://hoist/client.
    pub client: CertFiles,
    /// Client certificate signed by the CA with another SAN.
    pub other_client: CertFiles,
    pub body: PathBuf,
}

pub fn tmp_dir(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("hoist-tls-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

pub fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(make_pki)
}

fn write_pair(dir: &Path, name: &str, cert_pem: &str, key_pem: &str) -> CertFiles {
    let files = CertFiles {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    };
    std::fs::write(&files.cert, cert_pem).unwrap();
    std::fs::write(&files.key, key_pem).unwrap();
    files
}

fn openssl_rsa(dir: &Path, name: &str, cn: &str) -> CertFiles {
    let files = CertFiles {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    };
    let status = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30", "-keyout",
        ])
        .arg(&files.key)
        .arg("-out")
        .arg(&files.cert)
        .args([
            "-subj",
            &format!("/CN={cn}"),
            "-addext",
            &format!("subjectAltName=DNS:{cn}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "openssl req failed");
    files
}

fn make_pki() -> Pki {
    let dir = tmp_dir("pki");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "hoist test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let ca_path = dir.join("ca.crt");
    std::fs::write(&ca_path, ca.pem()).unwrap();

    let mut a = CertificateParams::new(vec!["a.test".to_string()]).unwrap();
    a.distinguished_name.push(DnType::CommonName, "a.test");
    let a_key = KeyPair::generate().unwrap();
    let ecdsa_a = write_pair(
        &dir,
        "ecdsa_a",
        &a.signed_by(&a_key, &ca).unwrap().pem(),
        &a_key.serialize_pem(),
    );

    let client_cert = |name: &str, uri: &str| {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name
            .push(DnType::CommonName, "hoist client");
        p.distinguished_name
            .push(DnType::OrganizationName, "Hoist, Inc");
        p.subject_alt_names = vec![SanType::URI(uri.try_into().unwrap())];
        let k = KeyPair::generate().unwrap();
        write_pair(
            &dir,
            name,
            &p.signed_by(&k, &ca).unwrap().pem(),
            &k.serialize_pem(),
        )
    };
    let client = client_cert("client", "spiffe://hoist/client");
    let other_client = client_cert("other_client", "spiffe://hoist/other");

    let rsa_a = openssl_rsa(&dir, "rsa_a", "a.test");
    let rsa_b = openssl_rsa(&dir, "rsa_b", "b.test");

    let body = dir.join("body.bin");
    let bytes: Vec<u8> = (0..BODY_LEN).map(pattern).collect();
    std::fs::write(&body, bytes).unwrap();

    Pki {
        dir,
        ca: ca_path,
        ecdsa_a,
        rsa_a,
        rsa_b,
        client,
        other_client,
        body,
    }
}

pub fn file_source(path: &Path) -> DataSource {
    DataSource::File {
        path: path.to_path_buf(),
        size: std::fs::metadata(path).unwrap().len(),
    }
}

/// A context with `certs`, everything else at Envoy's defaults.
pub fn context(certs: &[&CertFiles]) -> DownstreamTlsContext {
    DownstreamTlsContext {
        tls_params: TlsParams::default(),
        tls_certificates: certs
            .iter()
            .enumerate()
            .map(|(i, c)| TlsCertificate {
                certificate_chain: file_source(&c.cert),
                private_key: file_source(&c.key),
                yaml_path: format!("test.common_tls_context.tls_certificates[{i}]"),
            })
            .collect(),
        alpn_protocols: Vec::new(),
        validation_context: None,
        require_client_certificate: false,
        session_tickets: true,
        session_ticket_keys: Vec::new(),
        yaml_path: "test".into(),
    }
}

pub fn validation(sans: Vec<hoist_config::model::tls::SanMatch>) -> ValidationContext {
    ValidationContext {
        trusted_ca: file_source(&pki().ca),
        subject_alt_names: sans,
        yaml_path: "test.common_tls_context.validation_context".into(),
    }
}

/// What the server saw, in order.
#[derive(Clone, Debug)]
pub enum Event {
    NotTls(Vec<u8>),
    InspectFailed(String),
    Handshake(TlsInfo),
    HandshakeFailed {
        reason: &'static str,
        detail: String,
    },
    /// A read or write on the transport failed.
    SessionError {
        kind: std::io::ErrorKind,
        detail: String,
    },
    /// The session ended: "eof" (the peer closed) or "quit".
    SessionEnd(&'static str),
}

#[derive(Default)]
pub struct Events {
    list: Mutex<Vec<Event>>,
    cond: Condvar,
}

impl Events {
    fn push(&self, e: Event) {
        self.list.lock().unwrap().push(e);
        self.cond.notify_all();
    }

    pub fn snapshot(&self) -> Vec<Event> {
        self.list.lock().unwrap().clone()
    }

    /// Waits (bounded, as a guard against hangs only) for an event `f` accepts.
    pub fn wait_for(&self, what: &str, f: impl Fn(&Event) -> bool) -> Event {
        let list = self.wait_until(what, |list| list.iter().any(&f));
        list.into_iter()
            .find(|e| f(e))
            .expect("present: checked by wait_until")
    }

    /// Waits (bounded) until `f` accepts the whole list of events; returns that list.
    pub fn wait_until(&self, what: &str, f: impl Fn(&[Event]) -> bool) -> Vec<Event> {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut list = self.list.lock().unwrap();
        loop {
            if f(&list) {
                return list.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "no {what} event; events: {:?}", *list);
            list = self.cond.wait_timeout(list, left).unwrap().0;
        }
    }

    /// How many events `f` accepts, once at least `n` are there.
    pub fn wait_count(&self, what: &str, n: usize, f: impl Fn(&Event) -> bool) {
        self.wait_until(what, |list| list.iter().filter(|e| f(e)).count() >= n);
    }
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub events: Arc<Events>,
}

impl TestServer {
    pub fn start(ctx: &DownstreamTlsContext) -> TestServer {
        TestServer::start_with(ServerContext::build(ctx).unwrap())
    }

    pub fn start_with(ctx: Arc<ServerContext>) -> TestServer {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let events = Arc::new(Events::default());
        let ev = events.clone();
        let body = MappedFile::open(&pki().body).unwrap();
        std::thread::spawn(move || {
            rt.block_on(async move {
                loop {
                    let Ok((tcp, _)) = listener.accept().await else {
                        return;
                    };
                    tokio::spawn(connection(tcp, ctx.clone(), body.clone(), ev.clone()));
                }
            })
        });
        TestServer { addr, events }
    }

    pub fn port(&self) -> String {
        self.addr.port().to_string()
    }

    pub fn connect_arg(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }
}

const GUARD: Duration = Duration::from_secs(20);

async fn connection(
    tcp: TcpStream,
    ctx: Arc<ServerContext>,
    body: Arc<MappedFile>,
    ev: Arc<Events>,
) {
    let mut buf = Vec::new();
    match tokio::time::timeout(GUARD, read_client_hello(&tcp, &mut buf)).await {
        Ok(Ok(Inspect::Hello(_))) => {}
        Ok(Ok(Inspect::NotTls)) => {
            ev.push(Event::NotTls(buf.clone()));
            return serve(PlainTransport::with_buffered(tcp, buf), body, ev).await;
        }
        other => return ev.push(Event::InspectFailed(format!("{other:?}"))),
    }
    match tokio::time::timeout(GUARD, accept(tcp, buf, &ctx)).await {
        Ok(Ok(est)) => {
            ev.push(Event::Handshake(est.info.clone()));
            serve(UserTlsTransport::new(est), body, ev).await
        }
        Ok(Err(e)) => ev.push(Event::HandshakeFailed {
            reason: e.reason(),
            detail: e.to_string(),
        }),
        Err(_) => ev.push(Event::HandshakeFailed {
            reason: "timeout",
            detail: String::new(),
        }),
    }
}

pub fn info_line(i: &TlsInfo) -> String {
    format!(
        "version={} cipher={} curve={} sigalg={} sni={} alpn={} reused={} subject={}\n",
        i.version,
        i.cipher,
        i.curve.unwrap_or("-"),
        i.sigalg.unwrap_or("-"),
        i.sni.as_deref().unwrap_or("-"),
        i.alpn
            .as_deref()
            .map(String::from_utf8_lossy)
            .unwrap_or_default(),
        i.session_reused,
        i.peer_subject.as_deref().unwrap_or("-"),
    )
}

async fn serve<T: Transport>(t: T, body: Arc<MappedFile>, ev: Arc<Events>) {
    let mut r = BufReader::new(t);
    let mut line = Vec::new();
    loop {
        line.clear();
        let res = match r.read_until(b'\n', &mut line).await {
            Ok(0) => {
                let _ = r.get_mut().shutdown().await;
                return ev.push(Event::SessionEnd("eof"));
            }
            Ok(_) => command(r.get_mut(), &line, &body).await,
            Err(e) => Err(e),
        };
        match res {
            Ok(true) => {}
            Ok(false) => {
                let _ = r.get_mut().shutdown().await;
                return ev.push(Event::SessionEnd("quit"));
            }
            Err(e) => {
                return ev.push(Event::SessionError {
                    kind: e.kind(),
                    detail: e.to_string(),
                })
            }
        }
    }
}

/// Runs one command; false when the client asked to quit.
async fn command<T: Transport>(
    t: &mut T,
    line: &[u8],
    body: &Arc<MappedFile>,
) -> std::io::Result<bool> {
    let text = String::from_utf8_lossy(line);
    let text = text.trim();
    let (cmd, arg) = text.split_once(' ').unwrap_or((text, ""));
    match cmd {
        "GET" => {
            let n: usize = arg.parse().unwrap_or(0).min(BODY_LEN);
            let region = FileRegion {
                file: body.clone(),
                offset: 0,
                len: n as u64,
            };
            t.write_file(format!("OK {n}\n").as_bytes(), &region)
                .await?;
        }
        "INFO" => {
            let line = t
                .tls_info()
                .map(info_line)
                .unwrap_or_else(|| "plain\n".into());
            t.write_all(line.as_bytes()).await?;
            t.flush().await?;
        }
        "ECHO" => {
            t.write_all(format!("{arg}\n").as_bytes()).await?;
            t.flush().await?;
        }
        "QUIT" => return Ok(false),
        _ => {
            t.write_all(b"?\n").await?;
            t.flush().await?;
        }
    }
    Ok(true)
}

/// Waits for a child process, killing it if it outlives the guard (a hang, not a timing).
pub fn wait_guarded(mut child: Child) -> Output {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "child process hung; stdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `openssl s_client -connect <server> <args>` with `input` on stdin; with `-ign_eof` it
/// keeps reading after stdin ends, until the server closes.
pub fn s_client(server: &TestServer, args: &[&str], input: &str) -> (bool, String, String) {
    let mut child = Command::new("openssl")
        .args(["s_client", "-connect", &server.connect_arg(), "-ign_eof"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        let _ = stdin.write_all(input.as_bytes());
    }
    // Drain stdout/stderr while waiting, or a large response fills the pipe.
    let out = drain_and_wait(child);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn drain_and_wait(mut child: Child) -> Output {
    use std::io::Read;
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = so.read_to_end(&mut v);
        v
    });
    let t2 = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = se.read_to_end(&mut v);
        v
    });
    let status = wait_guarded(child).status;
    Output {
        status,
        stdout: t1.join().unwrap(),
        stderr: t2.join().unwrap(),
    }
}

/// The `INFO` line in s_client's output, as key=value pairs.
pub fn parse_info(stdout: &str) -> std::collections::HashMap<String, String> {
    // s_client may print its session dump around the data, even inside a line.
    let line = stdout
        .lines()
        .find_map(|l| l.find("version=").map(|i| &l[i..]))
        .unwrap_or_else(|| panic!("no INFO line in: {stdout}"));
    let mut map = std::collections::HashMap::new();
    // The subject may contain spaces: it is the last field.
    let (head, subject) = line.split_once(" subject=").unwrap();
    for kv in head.split(' ') {
        let (k, v) = kv.split_once('=').unwrap();
        map.insert(k.to_string(), v.to_string());
    }
    map.insert("subject".into(), subject.to_string());
    map
}

//! The built-in configuration served when hoist starts without -c/--config-yaml: HTTPS on
//! 127.0.0.1:10443 with a fresh self-signed certificate, fixed payloads, admin on 127.0.0.1:9901.
//!
//! The certificate and payload files are written to a private directory so that the default
//! goes through exactly the path an operator's configuration does (files, sendfile, mapping).

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The payload routes: path and size in bytes.
pub const PAYLOADS: [(&str, u64); 5] = [
    ("1k", 1024),
    ("100k", 100 * 1024),
    ("1m", 1024 * 1024),
    ("5m", 5 * 1024 * 1024),
    ("10m", 10 * 1024 * 1024),
];

pub struct DefaultConfig {
    pub yaml: String,
    /// Removed when hoist exits.
    pub dir: PathBuf,
}

impl Drop for DefaultConfig {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

pub fn create() -> io::Result<DefaultConfig> {
    let dir = std::env::temp_dir().join(format!("hoist-default-{}", std::process::id()));
    fs::create_dir_all(&dir)?;
    let mut config = DefaultConfig {
        yaml: String::new(),
        dir,
    };
    let cert =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])
            .map_err(|e| {
                io::Error::other(format!("generating the self-signed certificate: {e}"))
            })?;
    let cert_path = config.dir.join("cert.pem");
    let key_path = config.dir.join("key.pem");
    fs::write(&cert_path, cert.cert.pem())?;
    write_private(&key_path, cert.signing_key.serialize_pem().as_bytes())?;
    for (name, size) in PAYLOADS {
        write_payload(&config.dir.join(format!("{name}.bin")), size)?;
    }
    config.yaml = render(&config.dir, &cert_path, &key_path);
    Ok(config)
}

/// Payload bytes: 64-byte text lines, so `curl` shows something readable and every byte is
/// checkable (`sha256sum` against the file).
pub fn write_payload(path: &Path, size: u64) -> io::Result<()> {
    let mut out = io::BufWriter::new(fs::File::create(path)?);
    let mut written = 0u64;
    let mut line_no = 0u64;
    while written < size {
        let line = format!("hoist payload line {line_no:010} {}\n", "x".repeat(33));
        let take = (size - written).min(line.len() as u64) as usize;
        out.write_all(&line.as_bytes()[..take])?;
        written += take as u64;
        line_no += 1;
    }
    out.flush()
}

fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}

fn render(dir: &Path, cert: &Path, key: &Path) -> String {
    let mut routes = String::new();
    for (name, _) in PAYLOADS {
        routes.push_str(&format!(
            "              - name: payload_{name}\n                match: {{path: /{name}}}\n                direct_response: {{status: 200, body: {{filename: {}}}}}\n",
            dir.join(format!("{name}.bin")).display()
        ));
    }
    format!(
        r#"admin:
  address: {{socket_address: {{address: 127.0.0.1, port_value: 9901}}}}
static_resources:
  listeners:
  - name: https
    address: {{socket_address: {{address: 127.0.0.1, port_value: 10443}}}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
            tls_certificates:
            - certificate_chain: {{filename: {cert}}}
              private_key: {{filename: {key}}}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: ingress_https
          route_config:
            name: payloads
            max_direct_response_body_size_bytes: 10485760
            virtual_hosts:
            - name: payloads
              domains: ["*"]
              routes:
{routes}              - name: index
                match: {{path: /}}
                direct_response:
                  status: 200
                  body: {{inline_string: "hoist is running. Payloads: /1k /100k /1m /5m /10m. Admin: http://127.0.0.1:9901/help\n"}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#,
        cert = cert.display(),
        key = key.display(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_sizes_and_content() {
        let dir = std::env::temp_dir().join(format!("hoist-payload-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let p = dir.join("p.bin");
        write_payload(&p, 1000).unwrap();
        let data = fs::read(&p).unwrap();
        assert_eq!(data.len(), 1000);
        assert!(data.starts_with(b"hoist payload line 0000000000 x"));
        assert_eq!(data[63], b'\n');
        fs::remove_dir_all(&dir).unwrap();
    }
}

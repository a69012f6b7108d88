//! `hoist load [flags] URL`: Fortio's `load` command line, report on stderr, `-json` output.

use std::ffi::OsString;
use std::io::Write as _;
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::flags::{self, FlagError, Kind, Parsed, Spec};
use crate::options::{LoadOptions, TlsVersion};
use crate::result::start_lines;

const fn value(
    name: &'static str,
    placeholder: &'static str,
    help: &'static str,
    default: &'static str,
) -> Spec {
    Spec {
        name,
        kind: Kind::Value,
        placeholder,
        help,
        default,
    }
}

const fn boolean(name: &'static str, help: &'static str, default: &'static str) -> Spec {
    Spec {
        name,
        kind: Kind::Bool,
        placeholder: "",
        help,
        default,
    }
}

/// The flags of `hoist load`: Fortio's load flags, and hoist's TLS and thread choices.
pub const SPECS: &[Spec] = &[
    value("c", "int", "Number of connections/goroutine/threads", "4"),
    value("qps", "float", "Queries Per Seconds or 0 for no wait/max qps", "8"),
    value("t", "duration", "How long (duration) to run the test or 0 to run until ^C", "5s"),
    value("n", "int", "Run for exactly this number of calls instead of duration. Default (0) is to use duration (-t).", ""),
    value("p", "string", "List of pXX to calculate", "\"50,75,90,99,99.9\""),
    value("r", "float", "Resolution of the histogram lowest buckets in seconds", "0.001"),
    value("H", "key:value", "Additional HTTP header(s). Multiple key:value pairs can be passed using multiple -H.", ""),
    boolean("k", "Do not verify certs in HTTPS/TLS connections", ""),
    boolean("https-insecure", "Long form of the -k flag", ""),
    boolean("h2", "Attempt to use HTTP/2.0 / h2 (not supported yet by hoist load)", ""),
    boolean("http1.0", "Use HTTP/1.0 (instead of HTTP/1.1)", ""),
    boolean("keepalive", "Keep connection alive (only for fast HTTP/1.1)", "true"),
    value("timeout", "duration", "Connection and read timeout value (for HTTP)", "3s"),
    value("payload", "string", "Payload string to send along", ""),
    value("payload-size", "int", "Additional random payload size, replaces -payload when set > 0, must be smaller than -maxpayloadsizekb. Setting this switches HTTP to POST.", ""),
    value("payload-file", "path", "File path to be use as payload (POST for HTTP), replaces -payload when set.", ""),
    value("content-type", "string", "Sets http content type. Setting this value switches the request method from GET to POST.", ""),
    value("X", "string", "HTTP method to use instead of GET/POST depending on payload/content-type", ""),
    value("json", "path", "JSON output to provided file path or '-' for stdout (empty = no json output)", ""),
    value("labels", "string", "Additional config data/labels to add to the resulting JSON, defaults to target URL and hostname", ""),
    boolean("uniform", "set to true to de-synchronize parallel clients' requests uniformly", ""),
    boolean("jitter", "set to true to de-synchronize parallel clients' by 10%", ""),
    boolean("allow-initial-errors", "Allow and don't abort on initial warmup errors", ""),
    value("abort-on", "int", "HTTP status code that if encountered aborts the run. e.g., 503 or -1 for socket errors.", ""),
    value("cacert", "path", "Path to a custom CA certificate file to be used for the TLS client connections, if empty, use the system CA bundle", ""),
    value("cert", "path", "Path to the certificate file to be used for client TLS", ""),
    value("key", "path", "Path to the key file matching the -cert", ""),
    value("resolve", "IP", "Resolve host name to this IP", ""),
    value("tls-version", "1.2|1.3", "Offer only this TLS version (hoist)", ""),
    value("cipher", "name", "Offer only these cipher suites, OpenSSL names separated by ':' e.g. ECDHE-RSA-AES256-GCM-SHA384 or TLS_AES_128_GCM_SHA256 (hoist)", ""),
    value("threads", "int", "Client threads, each driving its share of the connections (hoist; default min(c, cores))", ""),
];

fn usage() -> String {
    format!(
        "Usage: hoist load [flags] URL\n\
         A Fortio-compatible load generator: same flags, report and JSON as `fortio load`.\n\
         Flags:\n{}",
        flags::usage(SPECS)
    )
}

/// Entry point for `hoist load`; `args` are the arguments after `load`.
pub fn main(args: &[OsString]) -> ExitCode {
    let args: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let parsed = match flags::parse(SPECS, &args) {
        Ok(p) => p,
        Err(FlagError::Help) => {
            eprint!("{}", usage());
            return ExitCode::SUCCESS;
        }
        Err(FlagError::Invalid(msg)) => {
            eprintln!("{msg}");
            eprint!("{}", usage());
            return ExitCode::from(1);
        }
    };
    let json_path = parsed
        .last("json")
        .map(str::to_string)
        .filter(|p| !p.is_empty());
    let opts = match options_from(&parsed) {
        Ok(o) => o,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(1);
        }
    };
    watch_interrupt(Arc::clone(&opts.stop));
    eprint!("{}", start_lines(&opts));
    let result = match crate::run(&opts) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("Aborting because of {e}");
            return ExitCode::from(1);
        }
    };
    eprint!("{}", result.text_summary());
    if let Some(path) = json_path {
        let mut text = match serde_json::to_string_pretty(&result.to_json()) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("Unable to json serialize result: {e}");
                return ExitCode::from(1);
            }
        };
        text.push('\n');
        let (written, name) = if path == "-" {
            let mut out = std::io::stdout().lock();
            (
                out.write_all(text.as_bytes()).and_then(|()| out.flush()),
                "stdout".to_string(),
            )
        } else {
            (std::fs::write(&path, text.as_bytes()), path.clone())
        };
        if let Err(e) = written {
            eprintln!("Unable to write json to {name}: {e}");
            return ExitCode::from(1);
        }
        eprintln!(
            "Successfully wrote {} bytes of Json data to {name}",
            text.len()
        );
    }
    ExitCode::SUCCESS
}

/// Ctrl-C ends the run gracefully (the report is still printed), as in Fortio.
fn watch_interrupt(stop: Arc<AtomicBool>) {
    let _ = std::thread::Builder::new()
        .name("hoist-load-signal".into())
        .spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                if tokio::signal::ctrl_c().await.is_ok() {
                    stop.store(true, Ordering::Relaxed);
                }
            });
        });
}

fn int(p: &Parsed, name: &str) -> Result<Option<i64>, String> {
    p.last(name)
        .map(|v| flags::parse_int(v).ok_or_else(|| invalid(v, name)))
        .transpose()
}

fn float(p: &Parsed, name: &str) -> Result<Option<f64>, String> {
    p.last(name)
        .map(|v| flags::parse_float(v).ok_or_else(|| invalid(v, name)))
        .transpose()
}

fn duration(p: &Parsed, name: &str) -> Result<Option<Duration>, String> {
    p.last(name)
        .map(|v| flags::parse_duration(v).ok_or_else(|| invalid(v, name)))
        .transpose()
}

fn boolean_flag(p: &Parsed, name: &str) -> bool {
    p.last(name) == Some("true")
}

fn string(p: &Parsed, name: &str) -> Option<String> {
    p.last(name).filter(|v| !v.is_empty()).map(str::to_string)
}

fn invalid(v: &str, name: &str) -> String {
    format!("invalid value {v:?} for flag -{name}: parse error")
}

/// The run's options from the flags (everything but -json).
pub fn options_from(p: &Parsed) -> Result<LoadOptions, String> {
    if p.args.len() != 1 {
        return Err(format!(
            "Error: hoist load needs exactly one URL or destination (got {})\n{}",
            p.args.len(),
            usage()
        ));
    }
    if boolean_flag(p, "h2") {
        return Err("-h2 is not supported yet by hoist load (HTTP/1.1 only)".into());
    }
    let mut o = LoadOptions {
        url: p.args[0].trim_start().to_string(),
        ..LoadOptions::default()
    };
    if let Some(c) = int(p, "c")? {
        o.connections = usize::try_from(c.max(1)).unwrap_or(1);
    }
    if let Some(q) = float(p, "qps")? {
        o.qps = q;
    }
    if let Some(t) = duration(p, "t")? {
        o.duration = (!t.is_zero()).then_some(t);
    }
    if let Some(n) = int(p, "n")? {
        o.count = u64::try_from(n).ok().filter(|&n| n > 0);
    }
    if let Some(list) = p.last("p") {
        o.percentiles = parse_percentiles(list)?;
    }
    if let Some(r) = float(p, "r")? {
        if r > 0.0 {
            o.resolution = r;
        }
    }
    for h in p.all("H") {
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| format!("invalid extra header '{h}', expecting Key: Value"))?;
        o.headers.push((k.trim().to_string(), v.to_string()));
    }
    o.insecure = boolean_flag(p, "k") || boolean_flag(p, "https-insecure");
    o.http10 = boolean_flag(p, "http1.0");
    o.keepalive = p.last("keepalive") != Some("false");
    if let Some(t) = duration(p, "timeout")? {
        o.timeout = t;
    }
    o.payload = payload(p)?;
    o.content_type = string(p, "content-type");
    o.method = string(p, "X");
    o.labels = string(p, "labels");
    o.uniform = boolean_flag(p, "uniform");
    o.jitter = boolean_flag(p, "jitter");
    o.allow_initial_errors = boolean_flag(p, "allow-initial-errors");
    o.abort_on = int(p, "abort-on")?
        .filter(|&c| c != 0)
        .map(|c| i32::try_from(c).map_err(|_| invalid(&c.to_string(), "abort-on")))
        .transpose()?;
    o.ca_cert = string(p, "cacert").map(PathBuf::from);
    o.client_cert = string(p, "cert").map(PathBuf::from);
    o.client_key = string(p, "key").map(PathBuf::from);
    o.resolve = string(p, "resolve")
        .map(|ip| ip.parse::<IpAddr>().map_err(|_| invalid(&ip, "resolve")))
        .transpose()?;
    o.tls_version = string(p, "tls-version")
        .map(|v| TlsVersion::parse(&v).ok_or_else(|| invalid(&v, "tls-version")))
        .transpose()?;
    o.cipher = string(p, "cipher");
    o.threads = int(p, "threads")?
        .map(|t| {
            usize::try_from(t)
                .ok()
                .filter(|&t| t > 0)
                .ok_or_else(|| invalid(&t.to_string(), "threads"))
        })
        .transpose()?;
    Ok(o)
}

/// Fortio's `-payload-file` > `-payload-size` > `-payload`.
fn payload(p: &Parsed) -> Result<Vec<u8>, String> {
    if let Some(path) = string(p, "payload-file") {
        return std::fs::read(&path)
            .map_err(|e| format!("Payload file read operation failed: {path}: {e}"));
    }
    if let Some(size) = int(p, "payload-size")?.filter(|&s| s > 0) {
        let size = usize::try_from(size).map_err(|_| invalid(&size.to_string(), "payload-size"))?;
        return Ok(random_payload(size));
    }
    Ok(p.last("payload").unwrap_or("").as_bytes().to_vec())
}

/// Printable pseudo-random bytes (what Fortio's random payload looks like on the wire).
fn random_payload(size: usize) -> Vec<u8> {
    let mut x: u32 = 0x9E37_79B9;
    (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            b'!' + (x % 94) as u8
        })
        .collect()
}

/// Fortio's `ParsePercentiles`: comma-separated, each > 0 and < 100, not empty.
pub fn parse_percentiles(list: &str) -> Result<Vec<f64>, String> {
    let mut out = Vec::new();
    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let p = flags::parse_float(item).ok_or_else(|| invalid(list, "p"))?;
        if !(p > 0.0 && p < 100.0) {
            return Err(format!(
                "percentile {} must be > 0 and < 100",
                crate::gofmt::g(p)
            ));
        }
        out.push(p);
    }
    if out.is_empty() {
        return Err("list can't be empty".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(a: &[&str]) -> Result<LoadOptions, String> {
        let args: Vec<String> = a.iter().map(|s| s.to_string()).collect();
        let parsed = flags::parse(SPECS, &args).map_err(|e| format!("{e:?}"))?;
        options_from(&parsed)
    }

    #[test]
    fn fortio_command_lines() {
        let o = opts(&[
            "-c",
            "8",
            "-qps=0",
            "--t",
            "10s",
            "-H",
            "X-A: 1",
            "-H",
            "Host:v.example",
            "-k",
            "-p",
            "50, 99.9",
            "https://127.0.0.1:10443/10m",
        ])
        .unwrap();
        assert_eq!(o.connections, 8);
        assert_eq!(o.qps, 0.0);
        assert_eq!(o.duration, Some(Duration::from_secs(10)));
        assert_eq!(
            o.headers,
            vec![
                ("X-A".into(), " 1".into()),
                ("Host".into(), "v.example".into())
            ]
        );
        assert!(o.insecure);
        assert_eq!(o.percentiles, vec![50.0, 99.9]);
        assert_eq!(o.url, "https://127.0.0.1:10443/10m");

        let o = opts(&[
            "-n",
            "100",
            "-keepalive=false",
            "-http1.0",
            "-tls-version",
            "1.2",
            "-cipher",
            "ECDHE-RSA-AES256-GCM-SHA384",
            "-threads",
            "1",
            "-abort-on",
            "-1",
            "-resolve",
            "127.0.0.1",
            "-timeout",
            "500ms",
            "-X",
            "PUT",
            "-payload",
            "abc",
            "u",
        ])
        .unwrap();
        assert_eq!(o.count, Some(100));
        assert!(!o.keepalive && o.http10);
        assert_eq!(o.tls_version, Some(TlsVersion::Tls12));
        assert_eq!(o.cipher.as_deref(), Some("ECDHE-RSA-AES256-GCM-SHA384"));
        assert_eq!(o.threads, Some(1));
        assert_eq!(o.abort_on, Some(-1));
        assert_eq!(o.resolve, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(o.timeout, Duration::from_millis(500));
        assert_eq!(o.method(), "PUT");
        assert_eq!(o.payload, b"abc");
        // -t 0 runs until interrupted; -payload-size wins over -payload.
        let o = opts(&["-t", "0", "-payload", "x", "-payload-size", "64", "u"]).unwrap();
        assert_eq!(o.duration, None);
        assert_eq!(o.payload.len(), 64);
        assert_eq!(o.method(), "POST");
    }

    #[test]
    fn bad_command_lines() {
        assert!(opts(&["-h2", "u"]).unwrap_err().contains("not supported"));
        assert!(opts(&[]).is_err());
        assert!(opts(&["a", "b"]).is_err());
        assert!(opts(&["-c", "x", "u"])
            .unwrap_err()
            .contains("invalid value \"x\" for flag -c"));
        assert!(opts(&["-t", "5", "u"]).is_err());
        assert!(opts(&["-tls-version", "1.1", "u"]).is_err());
        assert!(opts(&["-resolve", "nohost", "u"]).is_err());
        assert!(opts(&["-H", "novalue", "u"]).is_err());
        assert!(opts(&["-payload-file", "/nonexistent/file", "u"]).is_err());
        assert!(opts(&["-threads", "0", "u"]).is_err());
    }

    #[test]
    fn percentile_lists() {
        assert_eq!(
            parse_percentiles("50,75,90,99,99.9").unwrap(),
            vec![50.0, 75.0, 90.0, 99.0, 99.9]
        );
        assert_eq!(parse_percentiles(" 90 ,").unwrap(), vec![90.0]);
        assert_eq!(
            parse_percentiles("100").unwrap_err(),
            "percentile 100 must be > 0 and < 100"
        );
        assert!(parse_percentiles("").is_err());
        assert!(parse_percentiles("a").is_err());
    }
}

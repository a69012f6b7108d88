//! /proc/net/tls_stat: the kernel's TLS counters for the network namespace (TlsCurrTxSw,
//! TlsTxDevice, TlsDecryptError, ...). The file exists only while the tls module is loaded; its
//! set of names grows with kernel versions, so every well-formed line is kept.

use std::io;
use std::path::Path;

pub const PATH: &str = "/proc/net/tls_stat";

/// One `Name value` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsStat {
    pub name: String,
    pub value: u64,
}

/// Reads and parses the file; `Ok(None)` when it does not exist (no tls module).
pub fn read() -> io::Result<Option<Vec<TlsStat>>> {
    read_from(Path::new(PATH))
}

pub fn read_from(path: &Path) -> io::Result<Option<Vec<TlsStat>>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(parse(&text))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Parses `Name<whitespace>value` lines; anything else (a name with odd characters, a value
/// that is not a number) is skipped, since the names become stat names.
pub fn parse(text: &str) -> Vec<TlsStat> {
    text.lines()
        .filter_map(|line| {
            let mut it = line.split_whitespace();
            let name = it.next()?;
            let value = it.next()?.parse().ok()?;
            if it.next().is_some() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            {
                return None;
            }
            Some(TlsStat {
                name: name.to_string(),
                value,
            })
        })
        .collect()
}

/// The value of `name`, 0 when absent.
pub fn value(stats: &[TlsStat], name: &str) -> u64 {
    stats.iter().find(|s| s.name == name).map_or(0, |s| s.value)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// /proc/net/tls_stat of a 6.1 kernel with one kTLS connection open.
    const CAPTURED_6_1: &str = "TlsCurrTxSw                     \t1\n\
TlsCurrRxSw                     \t1\n\
TlsCurrTxDevice                 \t0\n\
TlsCurrRxDevice                 \t0\n\
TlsTxSw                         \t3\n\
TlsRxSw                         \t3\n\
TlsTxDevice                     \t0\n\
TlsRxDevice                     \t0\n\
TlsDecryptError                 \t0\n\
TlsRxDeviceResync               \t0\n\
TlsDecryptRetry                 \t0\n\
TlsRxNoPadViolation             \t0\n";

    #[test]
    fn parses_the_kernel_format() {
        let s = parse(CAPTURED_6_1);
        assert_eq!(s.len(), 12);
        assert_eq!(value(&s, "TlsCurrTxSw"), 1);
        assert_eq!(value(&s, "TlsTxSw"), 3);
        assert_eq!(value(&s, "TlsTxRekeyOk"), 0);
        assert_eq!(s[0].name, "TlsCurrTxSw");
    }

    #[test]
    fn skips_malformed_lines() {
        let s = parse("TlsTxSw 5\nbad line here\nTls.Dot 3\nTlsRxSw x\n\nTlsRxSw 7\n");
        assert_eq!(
            s,
            vec![
                TlsStat {
                    name: "TlsTxSw".into(),
                    value: 5
                },
                TlsStat {
                    name: "TlsRxSw".into(),
                    value: 7
                }
            ]
        );
    }

    #[test]
    fn missing_file_is_none() {
        let r = read_from(Path::new("/nonexistent/tls_stat")).expect("read");
        assert!(r.is_none());
    }
}

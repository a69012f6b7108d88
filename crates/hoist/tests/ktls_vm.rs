//! Kernel TLS for real: hoist in the qemu guest (vm/run, Debian's 6.1 kernel with tls.ko, and
//! the trixie-backports 7.x kernel for TLS 1.3 rekeying) with `--tls-offload require`, served
//! to curl, openssl s_client and this binary's own rustls peer (ktls_peer/) inside the guest.
//!
//! One boot per kernel; the guest script prints `KTLS ...` lines the host asserts on. Needs
//! `vm/setup --backports`; without it these tests fail and say so, HOIST_SKIP_VM_TESTS=1 skips
//! them (vm_support::require_vm).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod ktls_peer;
mod support;
mod vm_support;

use std::path::PathBuf;

use support::{ecdsa_cert, TempDir, BIN};
use vm_support::{require_vm, vm_run};

const PORT: u16 = 10443;
const ADMIN: u16 = 9901;
const SIZES: [(&str, usize); 8] = [
    ("0", 0),
    ("16383", 16383),
    ("16384", 16384),
    ("16385", 16385),
    ("1k", 1024),
    ("100k", 100 * 1024),
    ("1m", 1024 * 1024),
    ("10m", 10 * 1024 * 1024),
];

/// Runs inside the guest only (the host tests start it there with `--ignored`).
#[test]
#[ignore = "the kTLS VM tests run this inside the guest"]
fn guest_peer() {
    let rekey = std::env::var("HOIST_PEER_REKEY").is_ok_and(|v| v == "yes");
    let only_rekey = std::env::var("HOIST_PEER_ONLY").is_ok_and(|v| v == "key_update");
    let peer = ktls_peer::Peer::from_env();
    if only_rekey {
        peer.key_update_only(rekey);
    } else {
        peer.run_all(rekey);
    }
}

/// A TLS listener of the guest configuration.
struct GuestListener {
    name: &'static str,
    port: u16,
    /// metadata.filter_metadata.hoist.tls_offload, if any.
    offload: Option<&'static str>,
    /// Lines under common_tls_context (12 spaces in), e.g. tls_params.
    tls_extra: &'static str,
}

const DEFAULT_LISTENER: GuestListener = GuestListener {
    name: "ktls",
    port: PORT,
    offload: None,
    tls_extra: "",
};

fn config(listeners: &[GuestListener]) -> String {
    let mut routes = String::new();
    for (name, _) in SIZES {
        routes.push_str(&format!(
            "              - match: {{path: /{name}}}\n                direct_response: {{status: 200, body: {{filename: /root/data/{name}.bin}}}}\n"
        ));
    }
    let mut out = format!(
        "admin:\n  address: {{socket_address: {{address: 127.0.0.1, port_value: {ADMIN}}}}}\nstatic_resources:\n  listeners:\n"
    );
    for l in listeners {
        let metadata = l.offload.map_or(String::new(), |m| {
            format!("    metadata: {{filter_metadata: {{hoist: {{tls_offload: {m}}}}}}}\n")
        });
        out.push_str(&format!(
            r#"  - name: {name}
{metadata}    address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}
    filter_chains:
    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            alpn_protocols: [h2, http/1.1]
{tls_extra}            tls_certificates:
            - certificate_chain: {{filename: /root/cert.pem}}
              private_key: {{filename: /root/key.pem}}
      filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: {name}
          access_log:
          - name: envoy.access_loggers.file
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog
              path: /tmp/access.log
              log_format:
                text_format_source:
                  inline_string: "%DOWNSTREAM_TLS_VERSION% %DOWNSTREAM_TLS_OFFLOAD%\n"
          route_config:
            max_direct_response_body_size_bytes: 11000000
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
{routes}              - match: {{prefix: /}}
                direct_response: {{status: 200, body: {{inline_string: "hello\n"}}}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#,
            name = l.name,
            port = l.port,
            tls_extra = l.tls_extra,
        ));
    }
    out
}

/// The guest script's common part: start hoist with `require`, wait, print the probe line.
const START: &str = r#"set -u
hoist="$1"; peer="$2"
fail() { echo "KTLS FAIL: $*"; tail -n 40 /tmp/hoist.err; exit 1; }
tls() { awk -v k="$1" '$1 == k { print $2 }' /proc/net/tls_stat; }
admin() { wget -q -O- "http://127.0.0.1:9901$1"; }
"$hoist" -c /root/hoist.yaml --concurrency 1 --tls-offload require -l debug >/tmp/hoist.out 2>/tmp/hoist.err &
pid=$!
tries=0
until grep -q '^hoist ready' /tmp/hoist.out; do
  kill -0 "$pid" 2>/dev/null || fail "hoist exited before it was ready"
  tries=$((tries + 1))
  # A liveness bound (10 min of emulated time), not a timing assertion.
  [ "$tries" -le 6000 ] || fail "hoist never said it was ready"
  sleep 0.1
done
echo "KTLS probe: $(grep -o 'kTLS: .*' /tmp/hoist.err | head -n 1)"
export HOIST_PEER_ADDR=127.0.0.1:10443 HOIST_PEER_CERT=/root/cert.pem HOIST_PEER_DATA=/root/data
"#;

/// The end: the offload stats, sock_diag's verdicts, the access log, hoist exits cleanly.
const FINISH: &str = r#"admin '/stats?filter=ssl\.offload' | sed 's/^/KTLS stat /'
admin '/stats?filter=^tls_stat\.TlsTxSw$' | sed 's/^/KTLS gauge /'
echo "KTLS prometheus: $(admin /stats/prometheus | grep -c '^envoy_tls_stat_TlsTxSw{} ')"

echo "KTLS tls_offload: $(admin /tls_offload | tr -d '\n ')"
echo "KTLS diag sock_diag: $(grep -c 'kTLS on, tx sw rx sw (from sock_diag)' /tmp/hoist.err)"
echo "KTLS diag other: $(grep 'kTLS on, ' /tmp/hoist.err | grep -vc 'tx sw rx sw (from sock_diag)')"
echo "KTLS access sw: $(grep -c ' sw$' /tmp/access.log) other: $(grep -vc ' sw$' /tmp/access.log)"
grep -q panicked /tmp/hoist.err && fail "hoist panicked"
kill -TERM "$pid"
wait "$pid"
echo "KTLS hoist exit: $?"
"#;

fn guest_script_6_1() -> String {
    let mut s = String::from(START);
    s.push_str(
        r#"tx0=$(tls TlsTxSw); rx0=$(tls TlsRxSw)
want=$(sha256sum /root/data/10m.bin | cut -d' ' -f1)
for c in ECDHE-ECDSA-AES128-GCM-SHA256 ECDHE-ECDSA-AES256-GCM-SHA384 ECDHE-ECDSA-CHACHA20-POLY1305; do
  curl -sk --tls-max 1.2 --ciphers "$c" -o /tmp/b "https://localhost:10443/10m" || fail "curl $c"
  got=$(sha256sum /tmp/b | cut -d' ' -f1)
  [ "$got" = "$want" ] || fail "10m over $c: $got != $want"
  echo "KTLS body TLSv1.2 $c ok"
done
for c in TLS_AES_128_GCM_SHA256 TLS_AES_256_GCM_SHA384 TLS_CHACHA20_POLY1305_SHA256; do
  curl -sk --tlsv1.3 --tls13-ciphers "$c" -o /tmp/b "https://localhost:10443/10m" || fail "curl $c"
  got=$(sha256sum /tmp/b | cut -d' ' -f1)
  [ "$got" = "$want" ] || fail "10m over $c: $got != $want"
  echo "KTLS body TLSv1.3 $c ok"
done
echo "KTLS tls_stat TlsTxSw $tx0 $(tls TlsTxSw) TlsRxSw $rx0 $(tls TlsRxSw)"
want=$(sha256sum /root/data/1m.bin | cut -d' ' -f1)
curl -sk --http2 -o /tmp/b -w '%{http_version}' "https://localhost:10443/1m" >/tmp/h2.out || fail "curl --http2"
[ "$(sha256sum /tmp/b | cut -d' ' -f1)" = "$want" ] || fail "1m over HTTP/2 differs"
echo "KTLS body HTTP/$(cat /tmp/h2.out) ok"
"$peer" --ignored --exact guest_peer --nocapture --test-threads 1 >/tmp/peer.out 2>&1 || { cat /tmp/peer.out; fail "peer"; }
grep -o 'PEER [a-z_]* [A-Za-z0-9._]* ok' /tmp/peer.out
# openssl s_client: a request, then `K` (KeyUpdate, update requested), then another request.
{ printf 'GET /1k HTTP/1.1\r\nhost: a\r\n\r\n'; sleep 5; echo K; sleep 5; printf 'GET /1k HTTP/1.1\r\nhost: a\r\n\r\n'; sleep 5; } |
  timeout 120 openssl s_client -connect 127.0.0.1:10443 -tls1_3 >/tmp/sclient.out 2>&1
echo "KTLS s_client responses: $(grep -c '^HTTP/1.1 200' /tmp/sclient.out) keyupdate: $(grep -c KEYUPDATE /tmp/sclient.out)"
# Keep-alive: 20 requests on one connection, every body checked.
set --
i=0; while [ $i -lt 20 ]; do set -- "$@" -o "/tmp/ka$i" "https://localhost:10443/16385"; i=$((i+1)); done
curl -sk -w '%{num_connects}\n' "$@" >/tmp/ka.out || fail "keep-alive curl"
want=$(sha256sum /root/data/16385.bin | cut -d' ' -f1)
ok=0; i=0; while [ $i -lt 20 ]; do [ "$(sha256sum /tmp/ka$i | cut -d' ' -f1)" = "$want" ] && ok=$((ok+1)); i=$((i+1)); done
echo "KTLS keepalive bodies: $ok connects: $(awk '{s+=$1} END {print s}' /tmp/ka.out)"
# 100 concurrent connections (one curl, --parallel: process start-up is slow under emulation),
# each fetching a pseudo-random size, every body checked.
set --
seed=7; i=0
while [ $i -lt 100 ]; do
  seed=$(( (seed * 1103515245 + 12345) % 2147483648 ))
  case $(( seed % 5 )) in 0) s=0;; 1) s=16383;; 2) s=16384;; 3) s=16385;; *) s=1k;; esac
  echo "$s" >"/tmp/cs$i"
  set -- "$@" -o "/tmp/cc$i" "https://localhost:10443/$s"
  i=$((i+1))
done
curl -sk --parallel --parallel-immediate --parallel-max 100 -w '%{num_connects}\n' "$@" >/tmp/cc.out || fail "parallel curl"
ok=0; i=0
while [ $i -lt 100 ]; do
  s=$(cat "/tmp/cs$i")
  [ "$(sha256sum "/tmp/cc$i" | cut -d' ' -f1)" = "$(sha256sum "/root/data/$s.bin" | cut -d' ' -f1)" ] && ok=$((ok+1))
  i=$((i+1))
done
echo "KTLS concurrent ok: $ok connects: $(awk '{s+=$1} END {print s}' /tmp/cc.out)"
"#,
    );
    s.push_str(FINISH);
    s
}

fn guest_script_backports() -> String {
    let mut s = String::from(START);
    s.push_str(
        r#"want=$(sha256sum /root/data/1m.bin | cut -d' ' -f1)
curl -sk --tlsv1.3 -o /tmp/b "https://localhost:10443/1m" || fail "curl"
[ "$(sha256sum /tmp/b | cut -d' ' -f1)" = "$want" ] || fail "1m body differs"
echo "KTLS body TLSv1.3 ok"
HOIST_PEER_REKEY=yes HOIST_PEER_ONLY=key_update "$peer" --ignored --exact guest_peer --nocapture --test-threads 1 >/tmp/peer.out 2>&1 || { cat /tmp/peer.out; fail "peer"; }
grep -o 'PEER [a-z_]* [A-Za-z0-9._]* ok' /tmp/peer.out
echo "KTLS rekey stats: $(grep -E '^TlsRxRekeyOk|^TlsTxRekeyOk' /proc/net/tls_stat | tr -s ' \t' ' ' | tr '\n' ' ')"
"#,
    );
    s.push_str(FINISH);
    s
}

/// Boots `kernel` with hoist, the peer and the files; returns the console. `vm_args` go to
/// vm/run before the others (`--modules ...`).
fn boot(kernel: &str, listeners: &[GuestListener], vm_args: &[&str], script: String) -> String {
    boot_with_config(kernel, config(listeners), vm_args, script)
}

/// [`boot`] with a whole hoist configuration.
fn boot_with_config(kernel: &str, yaml: String, vm_args: &[&str], script: String) -> String {
    let dir = TempDir::new(&format!("ktls-vm-{kernel}"));
    let cert = ecdsa_cert(&dir, "ktls", "localhost");
    let data = dir.path("data");
    std::fs::create_dir_all(&data).unwrap();
    for (name, size) in SIZES {
        let body: Vec<u8> = (0..size)
            .map(|i| ((i as u64).wrapping_mul(2_654_435_761) >> 13) as u8 ^ (i >> 16) as u8)
            .collect();
        std::fs::write(data.join(format!("{name}.bin")), body).unwrap();
    }
    let yaml = dir.write("hoist.yaml", yaml);
    let script = dir.write("ktls.sh", script);
    let hoist: PathBuf = std::fs::canonicalize(BIN).unwrap();
    let peer = std::env::current_exe().unwrap();
    let file = |src: &std::path::Path, dst: &str| format!("{}:{dst}", src.display());
    let mut args: Vec<String> = vm_args.iter().map(|a| a.to_string()).collect();
    let run_args = [
        "--kernel",
        kernel,
        "--timeout",
        "900",
        "--mem",
        "1536M",
        "--with",
        &format!("{},{},openssl,curl", hoist.display(), peer.display()),
        "--file",
        &file(&yaml, "/root/hoist.yaml"),
        "--file",
        &file(&cert.cert, "/root/cert.pem"),
        "--file",
        &file(&cert.key, "/root/key.pem"),
        "--file",
        &file(&data, "/root/data"),
        "--file",
        &file(&script, "/root/ktls.sh"),
        "--",
        "sh",
        "/root/ktls.sh",
        hoist.to_str().unwrap(),
        peer.to_str().unwrap(),
    ];
    args.extend(run_args.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let run = vm_run(&args);
    assert_eq!(run.code, Some(0), "vm/run failed:\n{}", run.output);
    run.output
}

/// The value of `KTLS stat <name>: <n>` (the listener scope of the guest config).
fn stat(out: &str, name: &str) -> u64 {
    let key = format!("KTLS stat listener.127.0.0.1_{PORT}.ssl.offload.{name}: ");
    out.lines()
        .find_map(|l| l.strip_prefix(&key))
        .map_or(0, |v| v.trim().parse().unwrap())
}

fn number_after(out: &str, prefix: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|v| v.split_whitespace().next())
        .map_or(u64::MAX, |v| v.parse().unwrap_or(u64::MAX))
}

#[test]
fn ktls_on_debian_6_1() {
    if !require_vm("6.1") {
        return;
    }
    let out = boot("6.1", &[DEFAULT_LISTENER], &[], guest_script_6_1());
    assert!(
        out.contains(
            "KTLS probe: kTLS: TX+RX for TLS1.2/1.3 AES-128-GCM AES-256-GCM CHACHA20-POLY1305; rekey: no"
        ),
        "{out}"
    );
    for c in [
        "TLSv1.2 ECDHE-ECDSA-AES128-GCM-SHA256",
        "TLSv1.2 ECDHE-ECDSA-AES256-GCM-SHA384",
        "TLSv1.2 ECDHE-ECDSA-CHACHA20-POLY1305",
        "TLSv1.3 TLS_AES_128_GCM_SHA256",
        "TLSv1.3 TLS_AES_256_GCM_SHA384",
        "TLSv1.3 TLS_CHACHA20_POLY1305_SHA256",
    ] {
        assert!(out.contains(&format!("KTLS body {c} ok")), "{c}:\n{out}");
    }
    // The kernel did the records: its software counters grew by the six curl connections.
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("KTLS tls_stat "))
        .unwrap_or_else(|| panic!("{out}"));
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(v.len(), 4, "{line}");
    assert!(v[1] >= v[0] + 6 && v[3] >= v[2] + 6, "{line}");
    for case in [
        "same_flight TLSv1.2",
        "same_flight TLSv1.3",
        "pipelined TLSv1.2",
        "pipelined TLSv1.3",
        "client_close_notify TLSv1.2",
        "client_close_notify TLSv1.3",
        "garbage TLSv1.2",
        "garbage TLSv1.3",
        "boundaries TLSv1.2",
        "boundaries TLSv1.3",
        "slow_reader TLSv1.3",
        "key_update clean_close",
    ] {
        assert!(out.contains(&format!("PEER {case} ok")), "{case}:\n{out}");
    }
    assert!(out.contains("KTLS body HTTP/2 ok"), "{out}");
    assert!(
        out.contains("KTLS keepalive bodies: 20 connects: 1\n"),
        "{out}"
    );
    assert_eq!(number_after(&out, "KTLS concurrent ok: "), 100, "{out}");
    // curl may reuse a connection whose transfer ended before another started.
    let concurrent = number_after(&out, "KTLS concurrent ok: 100 connects: ");
    assert!((50..=100).contains(&concurrent), "{out}");
    // curl x6 + HTTP/2, peer: 5 cases x 2 versions + slow reader + key update, s_client: 1,
    // keep-alive: 1, concurrent: as many as curl opened.
    let offloaded = 7 + 10 + 2 + 1 + 1 + concurrent;
    assert_eq!(stat(&out, "tx_sw"), offloaded, "{out}");
    assert_eq!(stat(&out, "rx_sw"), offloaded, "{out}");
    assert_eq!(stat(&out, "none"), 0, "{out}");
    assert_eq!(stat(&out, "unknown"), 0, "{out}");
    assert!(!out.contains(".ssl.offload.fallback."), "{out}");
    assert!(!out.contains(".ssl.offload.closed."), "{out}");
    assert_eq!(stat(&out, "error.decrypt_error"), 2, "{out}");
    assert_eq!(stat(&out, "error.rekey_unsupported"), 2, "{out}");
    // s_client got the first answer, sent its KeyUpdate, and the connection ended cleanly.
    assert_eq!(number_after(&out, "KTLS s_client responses: "), 1, "{out}");
    assert_eq!(
        number_after(&out, "KTLS diag sock_diag: "),
        offloaded,
        "{out}"
    );
    assert_eq!(number_after(&out, "KTLS diag other: "), 0, "{out}");
    // One access log line per request, all "sw": curl 7, same_flight 2, pipelined 2 x 3,
    // client_close_notify 2, boundaries 2 x 4, slow_reader 1, key_update 1 (its second
    // request is never read), s_client 1, keep-alive 20, concurrent 100.
    let requests = 7 + 2 + 6 + 2 + 8 + 1 + 1 + 1 + 20 + 100;
    assert!(
        out.contains(&format!("KTLS access sw: {requests} other: 0\n")),
        "{out}"
    );
    assert!(out.contains("\"nic_offload_seen\":false"), "{out}");
    let gauge = number_after(&out, "KTLS gauge tls_stat.TlsTxSw: ");
    assert!((offloaded..u64::MAX).contains(&gauge), "{out}");
    assert_eq!(number_after(&out, "KTLS prometheus: "), 1, "{out}");
    assert!(out.contains("\"verdict\":\"kernel:"), "{out}");
    assert!(out.contains("KTLS hoist exit: 0"), "{out}");
}

#[test]
fn ktls_rekey_on_the_backports_kernel() {
    if !require_vm("backports") {
        return;
    }
    let out = boot(
        "backports",
        &[DEFAULT_LISTENER],
        &[],
        guest_script_backports(),
    );
    assert!(
        out.contains(
            "KTLS probe: kTLS: TX+RX for TLS1.2/1.3 AES-128-GCM AES-256-GCM CHACHA20-POLY1305; rekey: yes"
        ),
        "{out}"
    );
    assert!(out.contains("KTLS body TLSv1.3 ok"), "{out}");
    assert!(out.contains("PEER key_update rekeyed ok"), "{out}");
    assert_eq!(stat(&out, "rekey_rx"), 1, "{out}");
    assert_eq!(stat(&out, "rekey_tx"), 1, "{out}");
    assert_eq!(stat(&out, "tx_sw"), 2, "{out}");
    assert_eq!(number_after(&out, "KTLS diag sock_diag: "), 2, "{out}");
    assert!(out.contains("KTLS hoist exit: 0"), "{out}");
}

/// A kernel whose crypto API has no ChaCha20-Poly1305 (its modules left out, autoloading off):
/// `require` still starts (AES-GCM can be offloaded) and warns; it offers AES-GCM before a
/// configured-first ChaCha20 and closes a client that can only do ChaCha20, while an `auto`
/// listener serves that client in user space.
#[test]
fn ktls_kernel_without_chacha() {
    if !require_vm("6.1") {
        return;
    }
    let listeners = [
        GuestListener {
            tls_extra: "            tls_params:\n              tls_maximum_protocol_version: TLSv1_3\n              cipher_suites: [ECDHE-ECDSA-CHACHA20-POLY1305, ECDHE-ECDSA-AES128-GCM-SHA256]\n",
            ..DEFAULT_LISTENER
        },
        GuestListener {
            name: "auto",
            port: PORT + 1,
            offload: Some("auto"),
            tls_extra: "",
        },
    ];
    let mut script = String::from(START);
    script.push_str(
        r#"echo "KTLS warnings: $(grep -c 'TLS_CHACHA20_POLY1305_SHA256, ECDHE-ECDSA-CHACHA20-POLY1305 cannot be offloaded by this kernel' /tmp/hoist.err)"
want=$(sha256sum /root/data/1m.bin | cut -d' ' -f1)
fetch() { curl -sk "$@" -o /tmp/b && [ "$(sha256sum /tmp/b | cut -d' ' -f1)" = "$want" ]; }
fetch --tls-max 1.2 --ciphers ECDHE-ECDSA-CHACHA20-POLY1305 https://localhost:10443/1m && fail "ChaCha20 served under require"
echo "KTLS chacha require: closed"
fetch --tls-max 1.2 --ciphers ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-ECDSA-AES128-GCM-SHA256 https://localhost:10443/1m || fail "both ciphers"
echo "KTLS both ciphers require: served"
fetch --tls-max 1.2 --ciphers ECDHE-ECDSA-CHACHA20-POLY1305 https://localhost:10444/1m || fail "ChaCha20 under auto"
echo "KTLS chacha auto: served"
admin '/stats?filter=ssl\.ciphers' | sed 's/^/KTLS stat /'
"#,
    );
    script.push_str(FINISH);
    let out = boot(
        "6.1",
        &listeners,
        &[
            "--modules",
            "tls,gcm,ctr,ghash-generic,ghash-clmulni-intel,aesni-intel,inet_diag,tcp_diag",
        ],
        script,
    );
    assert!(
        out.contains("KTLS probe: kTLS: TX+RX for TLS1.2/1.3 AES-128-GCM AES-256-GCM; rekey: no"),
        "{out}"
    );
    assert_eq!(number_after(&out, "KTLS warnings: "), 1, "{out}");
    assert!(out.contains("KTLS chacha require: closed"), "{out}");
    assert!(out.contains("KTLS both ciphers require: served"), "{out}");
    assert!(out.contains("KTLS chacha auto: served"), "{out}");
    let auto = |name: &str| {
        let key = format!(
            "KTLS stat listener.127.0.0.1_{}.ssl.offload.{name}: ",
            PORT + 1
        );
        out.lines()
            .find_map(|l| l.strip_prefix(&key))
            .map_or(0, |v| v.trim().parse::<u64>().unwrap())
    };
    assert_eq!(stat(&out, "closed.cipher_unsupported"), 1, "{out}");
    assert_eq!(stat(&out, "tx_sw"), 1, "{out}");
    assert_eq!(auto("fallback.cipher_unsupported"), 1, "{out}");
    assert_eq!(auto("none"), 1, "{out}");
    // The client offered ChaCha20 first, the configuration listed it first: AES-GCM won.
    assert!(
        out.contains(&format!(
            "KTLS stat listener.127.0.0.1_{PORT}.ssl.ciphers.ECDHE-ECDSA-AES128-GCM-SHA256: 1"
        )),
        "{out}"
    );
    assert!(out.contains("KTLS hoist exit: 0"), "{out}");
}

/// An upstream cluster of the guest configuration: TLS to an `openssl s_server -WWW` origin.
fn upstream_cluster(name: &str, port: u16, tls_params: &str) -> String {
    format!(
        r#"  - name: {name}
    connect_timeout: 60s
    type: STATIC
    load_assignment:
      cluster_name: {name}
      endpoints:
      - lb_endpoints:
        - endpoint: {{address: {{socket_address: {{address: 127.0.0.1, port_value: {port}}}}}}}
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: localhost
        common_tls_context:
          tls_params: {{{tls_params}}}
"#
    )
}

/// hoist as a proxy: kTLS downstream (`require`), routes /o12/ and /o13/ to TLS 1.2 and TLS 1.3
/// origins (openssl s_server in the guest), so every body goes kTLS (upstream) -> hoist ->
/// kTLS (downstream).
fn upstream_config() -> String {
    // A second listener of the same process is the Content-Length origin for splice: its file
    // bodies go out with sendfile over kTLS, come in over the upstream kTLS socket, and are
    // spliced into the downstream kTLS socket.
    let origin = GuestListener {
        name: "origin",
        port: ORIGIN_PORT,
        offload: None,
        tls_extra: "",
    };
    let mut out = config(&[DEFAULT_LISTENER, origin]);
    // The first listener's catch-all route gives way to the upstream routes.
    let catch_all = "              - match: {prefix: /}\n";
    let upstream_routes = "              - match: {prefix: /o12/}\n                route: {cluster: origin12, prefix_rewrite: /, timeout: 0s}\n              - match: {prefix: /o13/}\n                route: {cluster: origin13, prefix_rewrite: /, timeout: 0s}\n              - match: {prefix: /s/}\n                route: {cluster: self, prefix_rewrite: /, timeout: 0s}\n";
    out = out.replacen(catch_all, &format!("{upstream_routes}{catch_all}"), 1);
    out.push_str("  clusters:\n");
    out.push_str(&upstream_cluster(
        "origin12",
        10445,
        "tls_maximum_protocol_version: TLSv1_2",
    ));
    out.push_str(&upstream_cluster(
        "origin13",
        10446,
        "tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_3",
    ));
    out.push_str(&upstream_cluster(
        "self",
        ORIGIN_PORT,
        "tls_minimum_protocol_version: TLSv1_3, tls_maximum_protocol_version: TLSv1_3",
    ));
    out
}

const ORIGIN_PORT: u16 = 10447;

fn guest_script_upstream() -> String {
    let mut s = String::from(START);
    s.push_str(
        r#"cd /root/data
openssl s_server -quiet -WWW -accept 10445 -cert /root/cert.pem -key /root/key.pem -tls1_2 >/tmp/o12.out 2>&1 &
openssl s_server -quiet -WWW -accept 10446 -cert /root/cert.pem -key /root/key.pem -tls1_3 >/tmp/o13.out 2>&1 &
cd /
sleep 2
tx0=$(tls TlsTxSw); rx0=$(tls TlsRxSw)
for o in o12 o13; do
  for f in 10m 16385 1m; do
    want=$(sha256sum /root/data/$f.bin | cut -d' ' -f1)
    curl -sk --tls-max 1.2 -o /tmp/b "https://localhost:10443/$o/$f.bin" || fail "curl $o $f"
    got=$(sha256sum /tmp/b | cut -d' ' -f1)
    [ "$got" = "$want" ] || fail "$o/$f: $got != $want"
    echo "KTLS upstream body $o $f ok"
  done
done
echo "KTLS tls_stat TlsTxSw $tx0 $(tls TlsTxSw) TlsRxSw $rx0 $(tls TlsRxSw)"
# splice: kTLS (upstream) -> pipe -> kTLS (downstream), one keep-alive upstream connection.
for f in 10m 1m 100k; do
  want=$(sha256sum /root/data/$f.bin | cut -d' ' -f1)
  curl -sk --http1.1 -o /tmp/b "https://localhost:10443/s/$f" || fail "curl s $f"
  got=$(sha256sum /tmp/b | cut -d' ' -f1)
  [ "$got" = "$want" ] || fail "s/$f: $got != $want"
  echo "KTLS upstream body s $f ok"
done
admin '/stats?filter=^cluster\.(origin1[23]|self)\.(ssl|upstream_cx_total|upstream_rq_splice)' | sed 's/^/KTLS stat /'
echo "KTLS upstream diag sock_diag: $(grep -c 'upstream kTLS on, tx sw rx sw (from sock_diag)' /tmp/hoist.err)"
echo "KTLS nopad violations: $(tls TlsRxNoPadViolation)"
"#,
    );
    s.push_str(FINISH);
    s
}

fn cluster_stat(out: &str, cluster: &str, name: &str) -> u64 {
    let key = format!("KTLS stat cluster.{cluster}.{name}: ");
    out.lines()
        .find_map(|l| l.strip_prefix(&key))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// Upstream kTLS: hoist connects to TLS 1.2 and TLS 1.3 origins, the kernel takes the upstream
/// sockets after the handshake (`require`: a fallback would fail the request), bodies arrive
/// byte-exact, sock_diag says `sw` for the upstream sockets, and TLS 1.3 tickets, which arrive
/// after the switch as control records, resume the next connections (s_server -WWW closes
/// after each response, so every request opens a new upstream connection).
#[test]
fn ktls_upstream_on_debian_6_1() {
    if !require_vm("6.1") {
        return;
    }
    let out = boot_with_config("6.1", upstream_config(), &[], guest_script_upstream());
    for o in ["o12", "o13"] {
        for f in ["10m", "16385", "1m"] {
            assert!(
                out.contains(&format!("KTLS upstream body {o} {f} ok")),
                "{o} {f}:\n{out}"
            );
        }
    }
    for c in ["origin12", "origin13"] {
        assert_eq!(cluster_stat(&out, c, "upstream_cx_total"), 3, "{c}:\n{out}");
        assert_eq!(cluster_stat(&out, c, "ssl.handshake"), 3, "{c}:\n{out}");
        assert_eq!(cluster_stat(&out, c, "ssl.offload.tx_sw"), 3, "{c}:\n{out}");
        assert_eq!(cluster_stat(&out, c, "ssl.offload.rx_sw"), 3, "{c}:\n{out}");
        assert_eq!(cluster_stat(&out, c, "ssl.offload.none"), 0, "{c}:\n{out}");
        // Each later connection resumed the session of an earlier one.
        assert_eq!(
            cluster_stat(&out, c, "ssl.session_reused"),
            2,
            "{c}:\n{out}"
        );
    }
    // Spliced kTLS -> kTLS over one pooled upstream connection, itself kTLS.
    for f in ["10m", "1m", "100k"] {
        assert!(
            out.contains(&format!("KTLS upstream body s {f} ok")),
            "{f}:\n{out}"
        );
    }
    assert_eq!(cluster_stat(&out, "self", "upstream_cx_total"), 1, "{out}");
    assert_eq!(cluster_stat(&out, "self", "ssl.offload.tx_sw"), 1, "{out}");
    // 100k may arrive mostly with the response head (then it is copied: below 64 KiB left).
    let spliced_bodies = cluster_stat(&out, "self", "upstream_rq_splice");
    assert!((2..=3).contains(&spliced_bodies), "{out}");
    assert_eq!(
        cluster_stat(&out, "self", "upstream_rq_splice_declined"),
        0,
        "{out}"
    );
    let spliced = cluster_stat(&out, "self", "upstream_rq_splice_bytes");
    let total = 10 * 1024 * 1024 + 1024 * 1024 + 100 * 1024;
    assert!(spliced > total - 256 * 1024 && spliced <= total, "{out}");
    // TLS_RX_EXPECT_NO_PAD toward the TLS 1.3 upstreams (6.1 has it), and they did not pad.
    assert_eq!(
        cluster_stat(&out, "origin13", "ssl.offload.rx_expect_no_pad"),
        3,
        "{out}"
    );
    assert_eq!(
        cluster_stat(&out, "self", "ssl.offload.rx_expect_no_pad"),
        1,
        "{out}"
    );
    assert_eq!(
        cluster_stat(&out, "origin12", "ssl.offload.rx_expect_no_pad"),
        0,
        "{out}"
    );
    assert_eq!(number_after(&out, "KTLS nopad violations: "), 0, "{out}");
    // TLS 1.3 tickets came as kTLS control records after the switch.
    assert!(
        cluster_stat(&out, "origin13", "ssl.offload.session_ticket") >= 3,
        "{out}"
    );
    assert!(!out.contains(".ssl.offload.fallback."), "{out}");
    assert!(!out.contains(".ssl.offload.closed."), "{out}");
    assert!(!out.contains(".ssl.offload.error."), "{out}");
    assert_eq!(
        number_after(&out, "KTLS upstream diag sock_diag: "),
        7,
        "{out}"
    );
    // Downstream and upstream sockets of the six requests: 12 kernel TX contexts at least.
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix("KTLS tls_stat "))
        .unwrap_or_else(|| panic!("{out}"));
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert_eq!(v.len(), 4, "{line}");
    assert!(v[1] >= v[0] + 12 && v[3] >= v[2] + 12, "{line}");
    assert!(out.contains("KTLS hoist exit: 0"), "{out}");
}

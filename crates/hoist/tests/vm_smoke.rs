//! The kTLS guest (vm/run: qemu booting Debian's 6.1 kernel with tls.ko) is usable for hoist's
//! kTLS tests: the tls module is loaded, and the hoist binary with its libraries validates a
//! configuration and serves plain HTTP to a client in the guest. Also that vm/run hands back
//! the guest command's exit status and that `--modules none` really leaves kTLS out (the
//! fallback tests depend on both).
//!
//! Needs `vm/setup` to have run (CI does it in vm/ci-setup.sh). Without it these tests fail and
//! say so; HOIST_SKIP_VM_TESTS=1 skips them with a printed notice (vm_support::require_vm).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

mod support;
mod vm_support;

use std::path::PathBuf;

use support::{TempDir, BIN};
use vm_support::{require_vm, vm_run};

/// The guest's listener; the guest has a network namespace of its own, so no clash is possible.
const PORT: u16 = 18080;
const BODY: &str = "hello from the ktls guest";

fn config() -> String {
    format!(
        r#"static_resources:
  listeners:
  - name: smoke
    address: {{socket_address: {{address: 127.0.0.1, port_value: {PORT}}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: smoke
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - match: {{prefix: /}}
                direct_response: {{status: 200, body: {{inline_string: "{BODY}\n"}}}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
"#
    )
}

/// The guest side: busybox sh. Every check prints a SMOKE line the host asserts on; the first
/// failure exits non-zero with the reason.
fn guest_script() -> String {
    format!(
        r#"set -u
hoist="$1"
fail() {{ echo "SMOKE FAIL: $*"; exit 1; }}
[ -e /proc/net/tls_stat ] || fail "no /proc/net/tls_stat: the tls module is not loaded"
grep -q '^tls ' /proc/modules || fail "tls is not in /proc/modules"
echo "SMOKE tls_stat: $(grep -c '^Tls' /proc/net/tls_stat) counters on $(uname -r)"
yaml=$(cat /root/hoist.yaml)
out=$("$hoist" --mode validate --config-yaml "$yaml" 2>&1) || fail "validate exited $?: $out"
echo "SMOKE validate: $out"
"$hoist" --concurrency 1 --config-yaml "$yaml" >/tmp/hoist.out 2>&1 &
pid=$!
tries=0
until grep -q '^hoist ready' /tmp/hoist.out; do
  kill -0 "$pid" 2>/dev/null || {{ cat /tmp/hoist.out; fail "hoist exited before it was ready"; }}
  tries=$((tries + 1))
  # A liveness bound (10 min of emulated time), not a timing assertion.
  [ "$tries" -le 6000 ] || {{ cat /tmp/hoist.out; fail "hoist never said it was ready"; }}
  sleep 0.1
done
body=$(wget -q -O- http://127.0.0.1:{PORT}/) || fail "wget http://127.0.0.1:{PORT}/ failed"
echo "SMOKE body: $body"
kill -0 "$pid" 2>/dev/null || fail "hoist died after serving"
kill -TERM "$pid"
wait "$pid"
echo "SMOKE hoist stopped: $?"
"#
    )
}

#[test]
fn hoist_validates_and_serves_in_the_ktls_guest() {
    if !require_vm("6.1") {
        return;
    }
    let dir = TempDir::new("vm-smoke");
    let script = dir.write("smoke.sh", guest_script());
    let yaml = dir.write("hoist.yaml", config());
    let bin: PathBuf = std::fs::canonicalize(BIN).unwrap();
    let run = vm_run(&[
        "--timeout",
        "600",
        "--with",
        bin.to_str().unwrap(),
        "--file",
        &format!("{}:/root/smoke.sh", script.display()),
        "--file",
        &format!("{}:/root/hoist.yaml", yaml.display()),
        "--",
        "sh",
        "/root/smoke.sh",
        bin.to_str().unwrap(),
    ]);
    let out = run.output;
    assert_eq!(run.code, Some(0), "vm/run failed:\n{out}");
    assert!(out.contains("SMOKE tls_stat: "), "{out}");
    assert!(
        out.contains("SMOKE validate: configuration '<--config-yaml>' OK"),
        "{out}"
    );
    assert!(out.contains(&format!("SMOKE body: {BODY}\n")), "{out}");
}

#[test]
fn vm_run_returns_the_guest_status_and_can_leave_ktls_out() {
    if !require_vm("6.1") {
        return;
    }
    // 7 only when the guest ran this very script and no tls module was loaded behind its back.
    let run = vm_run(&[
        "--modules",
        "none",
        "--",
        "sh",
        "-c",
        "if [ -e /proc/net/tls_stat ]; then echo tls loaded; exit 3; fi; exit 7",
    ]);
    assert_eq!(run.code, Some(7), "{}", run.output);
}

//! Driving vm/run (qemu booting a Debian kernel with kTLS) from a host-side test. A test file
//! uses it with `mod vm_support;` and starts with `if !vm_support::require_vm("6.1") { return; }`.
//! See vm/README.md for what the guest holds and vm_smoke.rs for a complete example.
#![allow(dead_code)]
// Test helpers: a failed unwrap here is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's vm/ directory.
pub fn vm_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../vm")
}

/// Whether vm/run can boot `kernel` ("6.1" or "backports") here, or what is missing.
pub fn vm_ready(kernel: &str) -> Result<(), String> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join("qemu-system-x86_64").is_file()))
        .unwrap_or(false);
    if !on_path {
        return Err("qemu-system-x86_64 is not installed".into());
    }
    for file in ["vmlinuz", "base.cpio.gz", "applets"] {
        if !vm_dir().join("build").join(kernel).join(file).is_file() {
            return Err(format!("vm/build/{kernel}/{file} is missing"));
        }
    }
    Ok(())
}

/// True when the VM tests should run. With HOIST_SKIP_VM_TESTS=1 they are skipped with a
/// notice; otherwise a missing prerequisite fails the test with the command that fixes it.
pub fn require_vm(kernel: &str) -> bool {
    if std::env::var("HOIST_SKIP_VM_TESTS").is_ok_and(|v| v == "1") {
        eprintln!("notice: HOIST_SKIP_VM_TESTS=1, the kTLS VM tests are skipped");
        return false;
    }
    if let Err(why) = vm_ready(kernel) {
        let setup = if kernel == "6.1" {
            "vm/setup"
        } else {
            "vm/setup --backports"
        };
        panic!(
            "the kTLS VM is not set up ({why}): run {setup} (CI: vm/ci-setup.sh), \
             or set HOIST_SKIP_VM_TESTS=1 to skip the VM tests"
        );
    }
    true
}

/// What a vm/run invocation returned: the guest command's exit code (124: timeout, 125: the VM
/// failed) and the guest's console (stdout and stderr together) followed by vm/run's stderr.
pub struct VmRun {
    pub code: Option<i32>,
    pub output: String,
}

/// Runs `vm/run ARGS` to completion.
pub fn vm_run(args: &[&str]) -> VmRun {
    let out = Command::new(vm_dir().join("run"))
        .args(args)
        .output()
        .unwrap();
    VmRun {
        code: out.status.code(),
        output: format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    }
}

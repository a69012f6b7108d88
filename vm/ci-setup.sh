#!/usr/bin/env bash
# CI: what the kTLS VM needs (qemu, busybox-static, cpio; binutils for stripping, xz for the
# backports kernel's modules), then vm/setup for both kernels. Called from .ci/run before the
# tests; safe to run again (installs nothing present, downloads nothing cached).
set -euo pipefail
cd "$(dirname "$0")/.."

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
# vm/setup copies this binary into the guest, which has no libc: it must be the static build.
if ! command -v busybox >/dev/null || ldd "$(command -v busybox)" >/dev/null 2>&1; then
  need+=(busybox-static)
fi
command -v cpio >/dev/null || need+=(cpio)
command -v objcopy >/dev/null || need+=(binutils)
command -v xz >/dev/null || need+=(xz-utils)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -q
  as_root apt-get install -y -q --no-install-recommends "${need[@]}"
fi

# 6.1 is what the VM tests boot; the backports kernel (software TLS 1.3 KeyUpdate) takes about
# ten seconds more and is only a warning when its suite cannot be reached.
vm/setup
vm/setup --backports || echo "vm/ci-setup.sh: warning: no backports kernel (vm/setup --backports failed)" >&2

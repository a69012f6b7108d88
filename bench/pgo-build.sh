#!/usr/bin/env bash
# A profile-guided (PGO) release build of hoist: LLVM lays out and inlines the code by where a
# real run spent its time. The WAF engine's rule walk is branchy, data-driven code, the kind
# PGO helps; see docs/BENCHMARKS.md for what it measured.
#
#   bench/pgo-build.sh [training seconds per configuration=8] [rate=4000]
#
# 1. Builds hoist with `-Cprofile-generate` (target dir target/pgo-generate).
# 2. Trains it: bench/filter-cost.sh with that binary serving and loading the configurations
#    in L7S (default "none waf": TLS, HTTP/1.1, the router, the JWT-free path and the full CRS
#    at paranoia level 1 with body inspection), at `rate` requests/s. The instrumented binary
#    is several times slower, hence the low rate. hoist writes its profile when it exits
#    (SIGTERM, as filter-cost.sh stops it).
# 3. Merges the profiles with llvm-profdata (rustup's llvm-tools component:
#    `rustup component add llvm-tools`) and builds hoist with `-Cprofile-use` into
#    target/pgo (binary: target/pgo/release/hoist).
#
# Environment: HOIST_CRS_DIR for the waf configuration (as filter-cost.sh), L7S, HOST_HEADER
# (default shop.example.com). Needs what filter-cost.sh needs. Takes two release builds
# (~5-10 minutes each on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-8}
rate=${2:-4000}
profiles=target/pgo-profiles
sysroot=$(rustc --print sysroot)
profdata=$(find "$sysroot/lib/rustlib" -name llvm-profdata -type f 2>/dev/null | head -1)
if [ -z "$profdata" ]; then
  echo "llvm-profdata not found under $sysroot: rustup component add llvm-tools" >&2
  exit 1
fi

rm -rf "$profiles" && mkdir -p "$profiles/raw"
echo "== 1/3: instrumented build"
RUSTFLAGS="-Cprofile-generate=$PWD/$profiles/raw" \
  cargo build --release -p hoist --target-dir target/pgo-generate
# Build scripts and proc macros ran instrumented too; only the training's profiles count.
rm -f "$profiles"/raw/*.profraw

echo "== 2/3: training (${secs} s per configuration at $rate requests/s)"
HOIST=target/pgo-generate/release/hoist L7S=${L7S:-none waf} \
  HOST_HEADER=${HOST_HEADER:-shop.example.com} bench/filter-cost.sh 1 "$rate" "$secs"
shopt -s nullglob
raw=("$profiles"/raw/*.profraw)
[ ${#raw[@]} -gt 0 ] || { echo "the training wrote no profile" >&2; exit 1; }
"$profdata" merge -o "$profiles/hoist.profdata" "${raw[@]}"

echo "== 3/3: optimized build"
# Functions the training never ran have no profile: not worth a warning each.
RUSTFLAGS="-Cprofile-use=$PWD/$profiles/hoist.profdata -Cllvm-args=-pgo-warn-missing-function=false" \
  cargo build --release -p hoist --target-dir target/pgo
echo "target/pgo/release/hoist (profile: $profiles/hoist.profdata, ${#raw[@]} raw profile file(s) merged)"

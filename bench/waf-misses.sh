#!/usr/bin/env bash
# Simulated cache misses per WAF transaction: how much memory the engine touches, which sets
# what a request costs through the proxy (docs/BENCHMARKS.md, "a cold engine") more than the
# instruction count does.
#
#   bench/waf-misses.sh [small|get|post=small] [engine bench binary]
#
# Runs the engine benchmark's fixed-count mode under callgrind's cache model with a 256 KiB
# last level (smaller than what one transaction touches, so a line not reused within the
# transaction counts as a miss) for 10 and 30 transactions, only the transaction function
# collected, and prints the difference per transaction: instructions (Ir), data reads and
# writes (Dr, Dw), L1 instruction and data misses (I1mr, D1mr, D1mw) and last-level misses
# (ILmr, DLmr, DLmw). The binary is the one `cargo bench -p hoist-waf --bench engine
# --no-run` prints; the CRS comes from HOIST_CRS_DIR (default ../shared/crs). Needs valgrind.
set -euo pipefail
cd "$(dirname "$0")/.."
case=${1:-small}
# shellcheck source=bench/waf-engine-bin.sh
. bench/waf-engine-bin.sh
fn=$(case_function "$case") || { echo "usage: $0 [small|get|post] [binary]" >&2; exit 2; }

events() { # transactions -> the nine event totals
  HOIST_WAF_BENCH_ITERS=$1 HOIST_WAF_BENCH_CASE=$case valgrind --tool=callgrind \
    --cache-sim=yes --LL=262144,8,64 --toggle-collect="$fn" \
    --callgrind-out-file="$tmp/out" "$bin" --bench 2>&1 |
    sed -n 's/.*Collected : //p' | grep -v '^0$' | tail -1
}

read -r -a a <<<"$(events 10)"
read -r -a b <<<"$(events 30)"
names=(Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw)
line="$case:"
for i in "${!names[@]}"; do
  line+=" ${names[$i]}=$(((b[i] - a[i]) / 20))"
done
echo "$line per transaction (10 vs 30 transactions, $bin)"

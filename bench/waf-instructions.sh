#!/usr/bin/env bash
# Instructions per WAF transaction, counted by valgrind (callgrind): a figure that does not
# move with the machine's load, for A/B comparisons of the engine on a shared host where the
# same binary's CPU time varies by 20-50 % between runs.
#
#   bench/waf-instructions.sh [get|post|both=both|small|cold-small|cold-get|cold-post] [binary]
#
# Runs the engine benchmark's fixed-count mode twice per case (N1 and N2 transactions, only the
# transaction function counted) and prints (count(N2) - count(N1)) / (N2 - N1): the steady
# state, without the rule set's load or the regexes' first-use cache building. The binary is
# the one `cargo bench -p hoist-waf --bench engine --no-run` prints; the CRS comes from
# HOIST_CRS_DIR (default ../shared/crs). Needs valgrind; takes about a minute per case.
#
# cold-*: the same transactions with 64 MiB written before each (HOIST_WAF_BENCH_COLD=64) and
# valgrind's cache simulation on (last level 32 MiB, 16-way, 64-byte lines): prints the
# last-level misses per transaction (instruction reads, data reads, data writes), i.e. how
# many cache lines a transaction touches that are not in the CPU's caches when it starts. In
# the proxy a request finds much of the engine's memory evicted by TLS, the kernel and other
# tenants of the machine; this count does not move with the machine's load as timings do.
set -euo pipefail
cd "$(dirname "$0")/.."
cases=${1:-both}
# shellcheck source=bench/waf-engine-bin.sh
. bench/waf-engine-bin.sh

count() { # case function transactions
  HOIST_WAF_BENCH_ITERS=$3 HOIST_WAF_BENCH_CASE=$1 valgrind --tool=callgrind \
    --callgrind-out-file="$tmp/out" --toggle-collect="$2" "$bin" --bench 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p' | grep -v '^0$' | tail -1
}

misses() { # case function transactions
  HOIST_WAF_BENCH_ITERS=$3 HOIST_WAF_BENCH_CASE=$1 HOIST_WAF_BENCH_COLD=64 valgrind \
    --tool=callgrind --cache-sim=yes --LL=33554432,16,64 --callgrind-out-file="$tmp/out" \
    --toggle-collect="$2" "$bin" --bench >/dev/null 2>&1
  callgrind_annotate --show=Ir,ILmr,DLmr,DLmw "$tmp/out" 2>/dev/null | awk '/PROGRAM TOTALS/ {
    gsub(/\([^)]*\)/, ""); gsub(",", ""); print $1, $2, $3, $4 }'
}

cold() { # case function n1 n2
  local a b
  a=$(misses "$1" "$2" "$3")
  b=$(misses "$1" "$2" "$4")
  awk -v a="$a" -v b="$b" -v n=$(($4 - $3)) -v c="$1" -v bin="$bin" 'BEGIN {
    split(a, x, " "); split(b, y, " ")
    for (i = 1; i <= 4; i++) d[i] = (y[i] - x[i]) / n
    printf "%s, caches evicted: %d instructions, %d last-level misses per transaction " \
      "(instructions %d, data reads %d, data writes %d; %s)\n",
      c, d[1], d[2] + d[3] + d[4], d[2], d[3], d[4], bin }'
}

one() { # case function n1 n2
  local a b
  a=$(count "$1" "$2" "$3")
  b=$(count "$1" "$2" "$4")
  echo "$1: $(((b - a) / ($4 - $3))) instructions per transaction ($3 vs $4 transactions, $bin)"
}

case $cases in
  get) one get engine::get_1k 10 50 ;;
  small) one small engine::get_small 10 50 ;;
  post) one post engine::post_10k 2 6 ;;
  both)
    one get engine::get_1k 10 50
    one post engine::post_10k 2 6
    ;;
  cold-small) cold small engine::get_small 4 12 ;;
  cold-get) cold get engine::get_1k 4 12 ;;
  cold-post) cold post engine::post_10k 2 6 ;;
  *) echo "usage: $0 [get|post|both|small|cold-small|cold-get|cold-post] [binary]" >&2; exit 2 ;;
esac

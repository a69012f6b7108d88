#!/usr/bin/env bash
# Where the proxy's time goes under one L7 configuration: `perf record` with DWARF call
# graphs of hoist serving bench/filter-cost.sh's load (GET /1k or /$SIZE over TLS with the
# RS256 token and `Host: shop.example.com`), then the symbols with the largest share of the
# samples, children included (a function's own time and its callees').
#
#   bench/filter-profile.sh [l7=waf] [rate=15000] [seconds=6] [report lines=60]
#
# Unlike filter-cost.sh's CPU times and filter-instructions.sh's counts this shows the
# kernel's share (the loopback send path runs the client's receive on the server's core)
# and where cache misses stall (a sample lands on the instruction after a missing load).
# perf's own overhead lowers the rate the server keeps; the shares, not the rate, are the
# result. The recording stays in $OUT (default bench-report/filter-profile-<l7>.data) for
# `perf report -i` and `perf annotate -i`. Environment as filter-cost.sh (HOIST, WORK,
# CIPHER, SERVER_CPU, LOAD_CPU, HOIST_CRS_DIR for "waf"), and FREQ (samples per second,
# default 700: DWARF stacks are 16 KB each). Needs perf.
set -euo pipefail
cd "$(dirname "$0")/.."
l7=${1:-waf}
rate=${2:-15000}
secs=${3:-6}
lines=${4:-60}
L7S=$l7
# shellcheck source=bench/filter-setup.sh
. bench/filter-setup.sh
command -v perf >/dev/null || { echo "perf not installed" >&2; exit 1; }
OUT=${OUT:-bench-report/filter-profile-$l7.data}
mkdir -p "$(dirname "$OUT")"
tmp=$(mktemp -d /tmp/hoist-filter-profile.XXXXXX)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT

filter_config "$l7" "$tmp/config.yaml"
taskset -c "$SERVER_CPU" "$HOIST" -c "$tmp/config.yaml" --concurrency 1 --tls-offload off \
  >"$tmp/server.log" 2>&1 &
server=$!
sleep 1
load=(taskset -c "$LOAD_CPU" "$HOIST" load -k -c 8 -qps "$rate"
      -H "Authorization: Bearer $token" -H "Host: shop.example.com")
url=https://127.0.0.1:18443/$SIZE
"${load[@]}" -t 2s "$url" >/dev/null 2>&1   # warm-up: handshakes, the JWT cache
perf record -F "${FREQ:-700}" --call-graph dwarf,16384 -p "$server" -o "$OUT" \
  -- sleep "$secs" >/dev/null 2>&1 &
recorder=$!
"${load[@]}" -t "$((secs + 1))s" "$url" >"$tmp/load.out" 2>&1
wait "$recorder" || true
kill "$server"; wait "$server" 2>/dev/null || true
server=
echo "$l7: $(grep -oP 'All done \K[0-9]+ calls.*' "$tmp/load.out") (perf running; $OUT)"
perf report -i "$OUT" --children --sort sym --stdio -g none --percent-limit 0.5 2>/dev/null |
  grep -v '^#' | grep -v '^$' | grep -v '(inlined)' | head -n "$lines" | cut -c1-160

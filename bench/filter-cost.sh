#!/usr/bin/env bash
# What each L7 configuration costs per request, next to no filters, in one interleaved run.
#
# For each repetition and each configuration of `hoist bench` (none, ratelimit, jwt,
# ratelimit_jwt): start hoist on one core with that configuration, drive it from the other core
# with `hoist load` at a fixed rate (1 KB responses, or SIZE, every request carrying the same RS256
# token, so the configurations differ only in server work), and print the server's CPU per
# request: user and system from /proc/<pid>/stat, and the exact run time from
# /proc/<pid>/task/*/schedstat. Interleaving the configurations spreads the machine's drift
# over all of them; run several repetitions and compare means.
#
#   bench/filter-cost.sh [repetitions=5] [rate=15000] [seconds=10]
#
# A configuration that cannot keep the rate saturates the core; its CPU per request is still
# what it costs. Environment: L7S (default "none ratelimit jwt ratelimit_jwt"; "waf" needs the
# Core Rule Set, found as hoist bench finds it or through HOIST_CRS_DIR), HOIST (default
# target/release/hoist), SIZE (the response: default 1k; the experiment's 2m needs a rate far
# lower), WORK (hoist bench work directory, default bench-report/work), CIPHER (default
# ECDHE-RSA-AES128-GCM-SHA256), SERVER_CPU (0), LOAD_CPU (1), HOST_HEADER (default: the URL's
# 127.0.0.1:18443; a name such as shop.example.com is what a browser sends, and spares the WAF
# the two warnings CRS logs per request for a numeric Host: 920350 and the 980170 score
# summary it causes).
# POST=1 sends the engine benchmark's 10 KB urlencoded form (191 fields) as a POST to the same
# URL instead of a GET: the WAF then inspects a request body (phase 2, every argument).
#
# Each line also gives the server core's softirq time per request (from /proc/stat, whatever
# ran on that core): on loopback the kernel delivers each response to the client inside the
# server's send, so part of the server's system time is the client's receive path. A
# configuration that leaves the core's caches colder makes that path slower too (measured for
# the WAF: the same NET_RX count per request, 2-4 µs more softirq time per request).
#
# With the WAF, each line also gives the engine's own time per request, from the filter's
# processing_time_us histogram (its sum and count on the admin port, before and after the
# run): wall time inside the engine's calls, so what the rest of the WAF configuration's cost
# is (the filter's glue, wake-ups, caches left colder for TLS and the kernel) is the
# difference. Two variants of the WAF configuration split that difference further (see
# filter-setup.sh): waf_engine_off (the filter and its transactions, no rule run) and
# waf_no_rules (the CRS setup without its rule files), as in
#   L7S="none waf waf_engine_off waf_no_rules" HOST_HEADER=shop.example.com \
#     bench/filter-cost.sh 3 15000 6
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-5}
rate=${2:-15000}
secs=${3:-10}
L7S=${L7S:-none ratelimit jwt ratelimit_jwt}
# shellcheck source=bench/filter-setup.sh
. bench/filter-setup.sh
tmp=$(mktemp -d /tmp/hoist-filter-cost.XXXXXX)
server=
trap '[ -z "$server" ] || kill "$server" 2>/dev/null || true; rm -rf "$tmp"' EXIT
post_flags "$tmp"

# "sum count" of the WAF filter's processing_time_us histogram on the admin port that
# filter_config sets (19901); "0 0" without the filter.
waf_time() {
  curl -s --max-time 5 http://127.0.0.1:19901/stats/prometheus |
    awk '/waf_processing_time_us_sum/ {s = $2} /waf_processing_time_us_count/ {c = $2}
         END {print s + 0, c + 0}'
}

one() {
  local l7=$1
  filter_config "$l7" "$tmp/config.yaml"
  taskset -c "$SERVER_CPU" "$HOIST" -c "$tmp/config.yaml" --concurrency 1 --tls-offload off \
    >"$tmp/server.log" 2>&1 &
  local pid=$!
  server=$pid
  sleep 1
  local load
  load_command "$rate"
  local url=https://127.0.0.1:18443/$SIZE
  "${load[@]}" -t 2s "$url" >/dev/null 2>&1   # warm-up: handshakes, the JWT cache
  local u0 s0 u1 s1 r0 r1
  read -r u0 s0 < <(awk '{print $14, $15}' /proc/$pid/stat); r0=$(run_time_ns $pid)
  local q0 q1
  local w0 w1
  w0=$(waf_time)
  q0=$(awk -v c="cpu$SERVER_CPU" '$1 == c {print $8}' /proc/stat)
  "${load[@]}" -t "${secs}s" "$url" >"$tmp/load.out" 2>&1
  q1=$(awk -v c="cpu$SERVER_CPU" '$1 == c {print $8}' /proc/stat)
  w1=$(waf_time)
  read -r u1 s1 < <(awk '{print $14, $15}' /proc/$pid/stat); r1=$(run_time_ns $pid)
  kill $pid; wait $pid 2>/dev/null || true
  server=
  local n; n=$(grep -oP 'All done \K[0-9]+' "$tmp/load.out")
  local hz; hz=$(getconf CLK_TCK)
  python3 -c "
n=$n; hz=$hz
(ws0, wc0), (ws1, wc1) = [tuple(map(float, w.split())) for w in ('$w0', '$w1')]
engine = f'; WAF engine {(ws1-ws0)/(wc1-wc0):.1f} µs per transaction' if wc1 > wc0 else ''
print(f'$l7: {n} requests; server CPU per request: total {($r1-$r0)/1e3/n:.2f} µs'
      f' (user {($u1-$u0)*1e6/hz/n:.1f}, system {($s1-$s0)*1e6/hz/n:.1f});'
      f' core softirq {($q1-$q0)*1e6/hz/n:.1f}{engine}')"
}

for i in $(seq "$reps"); do
  echo "== repetition $i: $rate requests/s for $secs s"
  for l7 in $L7S; do one "$l7"; done
done

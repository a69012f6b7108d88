#!/usr/bin/env bash
# Instructions per request through the proxy, per L7 configuration, counted by valgrind
# (callgrind): the figure `bench/filter-cost.sh` measures in CPU time, without the host's
# noise (on a shared 2-core VM its waf/none ratio moved from 0.26 to 0.38 between
# repetitions). The same request as filter-cost.sh: GET /1k (or /$SIZE) over TLS with the
# RS256 token and `Host: shop.example.com`, one connection, one request at a time.
#
#   bench/filter-instructions.sh [requests=400] [warm-up requests=50]
#
# For each configuration in L7S (default "none waf"): start hoist under callgrind on one core,
# send the warm-up requests (JWT cache, the WAF's first-use regex caches), then count two
# runs of `requests` and 2 x `requests` requests, each on a new connection
# (`callgrind_control -z` before, `-d` after), and print their difference per request: the
# steady state, without the TLS handshake each run pays once. Every thread is counted, user
# space only (the kernel's TCP and loopback work is not). The last column is how many of the
# requests each configuration serves per instruction, relative to the first (0.5: half). Environment as
# filter-cost.sh: HOIST, WORK, CIPHER, SERVER_CPU, LOAD_CPU, HOIST_CRS_DIR. Needs valgrind
# and callgrind_control; takes about a minute per configuration (the Core Rule Set loads
# under valgrind).
#
# LL_CACHE=<bytes> (a power of two, e.g. 524288 for a 512 KB L2) adds callgrind's cache model
# (32 KB 8-way L1s, that last level 16-way, 64-byte lines) and prints per request the L1 data
# misses and the last level's misses: how much of the core's cache a configuration goes
# through, which the kernel's work on the same core then pays for (see docs/BENCHMARKS.md,
# "the core's softirq time"). Slower: about twice the time.
set -euo pipefail
cd "$(dirname "$0")/.."
requests=${1:-400}
warmup=${2:-50}
L7S=${L7S:-none waf}
for tool in valgrind callgrind_control; do
  command -v "$tool" >/dev/null || { echo "$tool not found (apt install valgrind)" >&2; exit 1; }
done
# shellcheck source=bench/filter-setup.sh
. bench/filter-setup.sh
tmp=$(mktemp -d /tmp/hoist-filter-instr.XXXXXX)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"' EXIT
url=https://127.0.0.1:18443/$SIZE

send() { # count: requests on one connection, one at a time; fails unless all got 200
  local out
  out=$(taskset -c "$LOAD_CPU" "$HOIST" load -k -c 1 -qps 0 -n "$1" \
    -H "Authorization: Bearer $token" -H "Host: shop.example.com" "$url" 2>&1)
  grep -q "^Code 200 : $1 " <<<"$out" || { echo "load failed: $out" >&2; return 1; }
}

cache=()
[ -z "${LL_CACHE:-}" ] || cache=(--cache-sim=yes --I1=32768,8,64 --D1=32768,8,64
                                 "--LL=$LL_CACHE,16,64")

events() { # callgrind dump: its event totals, in the order of its `events:` line
  local line
  line=$(sed -n 's/^totals: //p' "$1" 2>/dev/null | head -1)
  [ -n "$line" ] || { echo "no callgrind dump at $1" >&2; exit 1; }
  echo "$line"
}

one() { # configuration: sets `result` to its instructions (and misses) per request
  local l7=$1
  filter_config "$l7" "$tmp/config.yaml"
  rm -f "$tmp"/cg.out*
  taskset -c "$SERVER_CPU" valgrind --tool=callgrind "${cache[@]}" --callgrind-out-file="$tmp/cg.out" \
    "$HOIST" -c "$tmp/config.yaml" --concurrency 1 --tls-offload off >"$tmp/server.log" 2>&1 &
  server=$!
  local up=
  for _ in $(seq 1 240); do
    if curl -sk -o /dev/null "$url"; then up=1; break; fi
    sleep 1
  done
  [ -n "$up" ] || { echo "$l7: hoist did not start under valgrind" >&2; cat "$tmp/server.log" >&2; exit 1; }
  send "$warmup"
  local counts=()
  for n in "$requests" "$((2 * requests))"; do
    callgrind_control -z "$server" >/dev/null 2>&1
    send "$n"
    callgrind_control -d "$server" >/dev/null 2>&1
    counts+=("$(events "$tmp/cg.out.$(( ${#counts[@]} + 1 ))")")
  done
  kill "$server"; wait "$server" 2>/dev/null || true
  server=
  # Per request: the second run's totals less the first's, over the requests between them.
  result=$(python3 -c "
a = [int(x) for x in '${counts[0]}'.split()]
b = [int(x) for x in '${counts[1]}'.split()]
d = [(y - x) / $requests for x, y in zip(a, b)]
# events: Ir, or Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw with the cache model
# (the difference of two runs: a count near 0 can come out a little negative; shown as 0)
extra = f' {max(0, d[4] + d[5]):.0f} {max(0, d[6] + d[7] + d[8]):.0f}' if len(d) == 9 else ''
print(f'{d[0]:.0f}{extra}')")
}

first=
for l7 in $L7S; do
  one "$l7"
  read -r n d1 ll <<<"$result"
  misses=
  [ -z "${LL_CACHE:-}" ] || misses=", $d1 L1 data misses, $ll misses of a $((LL_CACHE / 1024)) KB last level"
  if [ -z "$first" ]; then
    first=$n
    echo "$l7: $n instructions per request$misses ($requests requests after $warmup)"
  else
    python3 -c "print(f'$l7: $n instructions per request$misses ($requests requests after $warmup);'
      f' serves {$first / $n:.2f} x the requests of ${L7S%% *} per instruction')"
  fi
done

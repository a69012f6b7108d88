# Sourced by bench/filter-cost.sh and bench/filter-instructions.sh (after `cd` to the repo
# root and setting L7S's default): the settings both read from the environment, the work
# directory `hoist bench --prepare` fills for the configurations in L7S, the token both send,
# and `filter_config`, which writes a configuration with fixed ports.
HOIST=${HOIST:-target/release/hoist}
WORK=${WORK:-bench-report/work}
CIPHER=${CIPHER:-ECDHE-RSA-AES128-GCM-SHA256}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
# The response size requested (a payload `hoist bench --prepare` writes: 1k, 10k, 100k, 500k,
# 1m, 2m, 5m, 10m), served as text/plain: the WAF configuration inspects up to 512 KB of it.
SIZE=${SIZE:-1k}
[ -x "$HOIST" ] || { echo "$HOIST not found: cargo build --release -p hoist" >&2; exit 1; }
# Two variants of "waf" split what the WAF adds to a request (see filter-cost.sh):
# waf_engine_off is "waf" with SecRuleEngine Off: the filter still makes a transaction per
# request, hands it the headers and buffers the response body for it, but no rule runs;
# waf_no_rules loads base.conf and the CRS setup without the rule files. `hoist bench
# --prepare` knows only "waf".
prepared=$(printf '%s\n' $L7S | sed 's/^waf_.*/waf/' | sort -u | paste -sd, -)
"$HOIST" bench --prepare --out "$(dirname "$WORK")" --work-dir "$WORK" --sizes "$SIZE" \
  --configs "$prepared" >/dev/null
token=$(cat "$WORK/jwt/token.txt")

# filter_config L7 OUT: the generated configuration of L7 with the listener on 18443 and the
# admin port on 19901 instead of ephemeral ones.
filter_config() {
  # A variant: its sed edit of "waf", and a command that fails if the edit found nothing
  # to change (the variant would then measure the WAF itself).
  local base=$1 variant=() applied=(true)
  case $1 in
    waf_engine_off)
      base=waf variant=(-e 's/\\"SecRuleEngine On\\"/\\"SecRuleEngine Off\\"/')
      applied=(grep -q 'SecRuleEngine Off' "$2") ;;
    waf_no_rules)
      base=waf variant=(-e 's/,\\"Include [^"]*\/rules\/\*\.conf\\"//')
      applied=(not_in 'rules/\*\.conf' "$2") ;;
    waf_*) echo "unknown WAF variant $1 (waf_engine_off, waf_no_rules)" >&2; exit 2 ;;
  esac
  sed -e '0,/port_value: 0}}/s//port_value: 19901}}/' \
      -e 's/    address: {socket_address: {address: 127.0.0.1, port_value: 0}}/    address: {socket_address: {address: 127.0.0.1, port_value: 18443}}/' \
      "${variant[@]}" "$WORK/configs/$base-$CIPHER.yaml" > "$2"
  "${applied[@]}" || { echo "$1: the edit of the waf configuration did not apply" >&2; exit 1; }
}

# not_in PATTERN FILE: true when no line of FILE matches PATTERN.
not_in() { ! grep -q "$1" "$2"; }

# post_flags DIR: with POST=1, writes the engine benchmark's 10 KB urlencoded form
# (crates/hoist-waf/benches/engine.rs `form_body`, 191 fields) to DIR/form and sets `post`
# to the load flags that send it as a POST to the same URL; without, `post` is empty.
post_flags() {
  post=()
  [ "${POST:-0}" = 1 ] || return 0
  python3 - "$1/form" <<'PY'
import sys
body, i = "", 0
while len(body) < 10 * 1024:
    body += f"field{i}=Some+ordinary+text+with+words+and+numbers+{i}&"
    i += 1
open(sys.argv[1], "w").write(body)
PY
  post=(-payload-file "$1/form" -content-type application/x-www-form-urlencoded)
}

# load_command RATE: sets `load` to the `hoist load` command the cost scripts drive a server
# with from LOAD_CPU: 8 connections at RATE requests/s, the token, HOST_HEADER when set, and
# the form with POST=1 (after `post_flags`).
load_command() {
  load=(taskset -c "$LOAD_CPU" "$HOIST" load -k -c 8 -qps "$1" -H "Authorization: Bearer $token")
  [ -z "${HOST_HEADER:-}" ] || load+=(-H "Host: $HOST_HEADER")
  load+=("${post[@]}")
}

# run_time_ns PID: the CPU time the process's threads have run, in ns (schedstat). Printed
# with %.0f: mawk's plain `print` rounds numbers past 2^31 to six digits.
run_time_ns() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%.0f\n", s}'; }

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
"$HOIST" bench --prepare --out "$(dirname "$WORK")" --work-dir "$WORK" --sizes "$SIZE" \
  --configs "${L7S// /,}" >/dev/null
token=$(cat "$WORK/jwt/token.txt")

# filter_config L7 OUT: the generated configuration of L7 with the listener on 18443 and the
# admin port on 19901 instead of ephemeral ones.
filter_config() {
  sed -e '0,/port_value: 0}}/s//port_value: 19901}}/' \
      -e 's/    address: {socket_address: {address: 127.0.0.1, port_value: 0}}/    address: {socket_address: {address: 127.0.0.1, port_value: 18443}}/' \
      "$WORK/configs/$1-$CIPHER.yaml" > "$2"
}

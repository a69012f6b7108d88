#!/usr/bin/env bash
# Instructions per rule of one engine benchmark case, counted by valgrind (callgrind): for
# each rule a transaction evaluates, its chain and its actions (gate checks, leaps and the
# rules passed over are not in it). A figure per rule that does not move with the machine's
# load, unlike the rule-profile build's timers, and that leaves the rule set as it is, unlike
# taking a rule out with SecRuleRemoveById (which also regroups the gate runs around it).
#
#   bench/waf-rule-instructions.sh [small|get|post=small] [binary]
#
# The binary is the engine benchmark built with the probe (see crates/hoist-waf/src/rule_probe.rs):
#   cargo bench -p hoist-waf --bench engine --features hoist-waf/rule-probe --no-run
# First lists the rules the case's transaction evaluates (the third of three transactions,
# the constant plan built by then), then runs it under callgrind at 10 and 30 transactions
# and prints, per rule, the difference divided by 20, largest first. Up to 128 rules (the
# probe's functions); any more are left out with a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
case=${1:-small}
# shellcheck source=bench/waf-engine-bin.sh
. bench/waf-engine-bin.sh
fn=$(case_function "$case") || { echo "usage: $0 [small|get|post] [binary]" >&2; exit 2; }

listed() { # transactions
  HOIST_WAF_PROBE_LIST=1 HOIST_WAF_BENCH_ITERS=$1 HOIST_WAF_BENCH_CASE=$case "$bin" --bench \
    2>&1 >/dev/null | sed -n 's/^rule-probe: //p'
}
listed 2 >"$tmp/two"
listed 3 >"$tmp/three"
if [ ! -s "$tmp/three" ]; then
  echo "no rule-probe lines: build with --features hoist-waf/rule-probe" >&2
  exit 1
fi
ids=$(tail -n "$(($(wc -l <"$tmp/three") - $(wc -l <"$tmp/two")))" "$tmp/three" | awk '!seen[$1]++')
count=$(echo "$ids" | wc -l)
if [ "$count" -gt 128 ]; then
  echo "warning: $count rules evaluated, only the first 128 are counted" >&2
  ids=$(echo "$ids" | head -128)
fi
ids=$(echo "$ids" | tr '\n' ' ')

probes() { # transactions
  HOIST_WAF_PROBE_IDS="$ids" HOIST_WAF_BENCH_ITERS=$1 HOIST_WAF_BENCH_CASE=$case valgrind \
    --tool=callgrind --callgrind-out-file="$tmp/out" --toggle-collect="$fn" "$bin" --bench \
    >/dev/null 2>&1
  # Inclusive cost per probe function (the largest line per name: the function's own).
  callgrind_annotate --inclusive=yes --threshold=100 "$tmp/out" 2>/dev/null |
    sed -n 's/^ *\([0-9,]*\) .*rule_probe::probe::p\([0-9][0-9][0-9]\).*/\2 \1/p' | tr -d , |
    sort -k1,1 -k2,2nr | awk '!seen[$1]++'
}
probes 10 >"$tmp/a"
probes 30 >"$tmp/b"
echo "$case: instructions per transaction by rule (30 vs 10 transactions, $bin)"
join -a 2 -e 0 -o 0,1.2,2.2 "$tmp/a" "$tmp/b" | awk -v ids="$ids" '
  BEGIN { n = split(ids, id, " ") }
  { d = ($3 - $2) / 20; total += d; printf "%8d %s\n", d, id[$1 + 1] }
  END { printf "%8d in all (%d rules)\n", total, n }' | sort -rn

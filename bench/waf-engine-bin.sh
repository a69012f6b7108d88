# Sourced by the bench/waf-*.sh scripts: sets `bin` to the engine bench binary (the script's
# second argument, else the one `cargo bench -p hoist-waf --bench engine --no-run` builds)
# and HOIST_CRS_DIR (default ../shared/crs); exits when either tool is missing.
bin=${2:-}
if [ -z "$bin" ]; then
  bin=$(cargo bench -p hoist-waf --bench engine --no-run 2>&1 |
    sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)
fi
[ -x "$bin" ] || { echo "engine bench binary not found: $bin" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
export HOIST_CRS_DIR=${HOIST_CRS_DIR:-$(cd .. && pwd)/shared/crs}

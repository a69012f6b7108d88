# Sourced by the bench/waf-*.sh scripts: sets `bin` to the engine bench binary (the script's
# second argument, else the one `cargo bench -p hoist-waf --bench engine --no-run` builds),
# HOIST_CRS_DIR (default ../shared/crs) and `tmp` (a scratch directory, removed on exit); exits
# when the binary or valgrind is missing.
bin=${2:-}
if [ -z "$bin" ]; then
  bin=$(cargo bench -p hoist-waf --bench engine --no-run 2>&1 |
    sed -n 's/.*Executable .*(\(.*\))$/\1/p' | tail -1)
fi
[ -x "$bin" ] || { echo "engine bench binary not found: $bin" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind not installed" >&2; exit 1; }
export HOIST_CRS_DIR=${HOIST_CRS_DIR:-$(cd .. && pwd)/shared/crs}
# Scratch space for valgrind's output, removed on exit.
tmp=$(mktemp -d /tmp/hoist-waf.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# The engine benchmark's function for a case (small, get, post): what valgrind's
# --toggle-collect counts. Fails for any other case.
case_function() {
  case $1 in
    small) echo engine::get_small ;;
    get) echo engine::get_1k ;;
    post) echo engine::post_10k ;;
    *) return 1 ;;
  esac
}

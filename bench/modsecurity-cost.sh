#!/usr/bin/env bash
# The reference for hoist's WAF budget: what the same Core Rule Set costs in ModSecurity v3
# (libmodsecurity, the C++ engine CRS is written for) inside nginx, measured the way
# bench/filter-cost.sh measures hoist. Both run one worker on one core, serve the same 1 KB
# text/plain payload over TLS 1.2 with the same cipher and certificate, load base.conf (the
# WAF's recommended settings: SecResponseBodyAccess On for text/plain), crs-setup.conf.example
# and rules/*.conf, and are driven by the same `hoist load` command from the other core.
#
#   bench/modsecurity-cost.sh [repetitions=3] [rate=15000] [seconds=6]
#
# For each repetition and each configuration in CONFS (default "nginx nginx_modsec": nginx
# without and with `modsecurity on`) it prints the server's CPU per request (nginx's master
# and worker, from /proc/<pid>/task/*/schedstat), as filter-cost.sh does for hoist. Run
# `L7S="none waf" HOST_HEADER=shop.example.com bench/filter-cost.sh` next to it for hoist's
# figures on the same machine. POST=1 sends the engine benchmark's 10 KB urlencoded form
# instead of a GET (crates/hoist-waf/benches/engine.rs `form_body`), as a POST to the same
# path. Needs nginx and libnginx-mod-http-modsecurity (Debian), and the CRS (HOIST_CRS_DIR,
# default ../shared/crs). Environment as filter-cost.sh: HOIST, WORK, CIPHER, SERVER_CPU,
# LOAD_CPU, HOST_HEADER. KEEP=1 leaves the work directory (nginx's configuration and logs,
# the last load report) in /tmp.
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-3}
rate=${2:-15000}
secs=${3:-6}
CONFS=${CONFS:-nginx nginx_modsec}
L7S=waf
# shellcheck source=bench/filter-setup.sh
. bench/filter-setup.sh
CRS=$(realpath "${HOIST_CRS_DIR:-../shared/crs}")
module=/usr/lib/nginx/modules/ngx_http_modsecurity_module.so
command -v nginx >/dev/null && [ -f "$module" ] || {
  echo "needs nginx and libnginx-mod-http-modsecurity (apt-get install libnginx-mod-http-modsecurity)" >&2
  exit 1
}
[ -d "$CRS/rules" ] || { echo "no CRS at $CRS (set HOIST_CRS_DIR)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/hoist-modsec-cost.XXXXXX)
master=
trap '[ -z "$master" ] || kill "$master" 2>/dev/null || true; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
post_flags "$tmp"
work=$(realpath "$WORK")

# The rules as hoist's waf configuration loads them (its directives_map), in ModSecurity's
# form: one file of Includes.
cat >"$tmp/modsec.conf" <<EOF
Include $work/waf/base.conf
Include $CRS/crs-setup.conf.example
Include $CRS/rules/*.conf
SecRuleEngine On
EOF

# nginx_config CONF OUT
nginx_config() {
  local modsec=""
  [ "$1" = nginx_modsec ] && modsec="modsecurity on; modsecurity_rules_file $tmp/modsec.conf;"
  cat >"$2" <<EOF
load_module $module;
worker_processes 1;
daemon off;
pid $tmp/nginx.pid;
error_log $tmp/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $tmp/body;
  client_max_body_size 1m;
  client_body_buffer_size 64k;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  server {
    listen 127.0.0.1:18444 ssl;
    ssl_certificate $work/certs/server.crt;
    ssl_certificate_key $work/certs/server.key;
    ssl_protocols TLSv1.2;
    ssl_ciphers $CIPHER;
    $modsec
    # A POST to a static file is answered 405 by nginx; served as for a GET instead.
    error_page 405 =200 \$uri;
    location = /$SIZE {
      types { }
      default_type text/plain;
      alias $work/payloads/$SIZE.bin;
    }
  }
}
EOF
}

# The server's CPU so far: master and worker.
server_ns() { echo $(($(run_time_ns "$master") + $(run_time_ns "$(pgrep -P "$master")"))); }

one() {
  local conf=$1
  nginx_config "$conf" "$tmp/nginx.conf"
  mkdir -p "$tmp/body"
  taskset -c "$SERVER_CPU" nginx -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/error.log" \
    >"$tmp/nginx.out" 2>&1 &
  master=$!
  # Loading the CRS takes ModSecurity a few seconds.
  local up=
  for _ in $(seq 100); do
    kill -0 "$master" 2>/dev/null || break
    curl -sk --max-time 2 -o /dev/null "https://127.0.0.1:18444/$SIZE" && { up=1; break; }
    sleep 0.2
  done
  [ -n "$up" ] || {
    echo "$conf: nginx did not answer on 127.0.0.1:18444" >&2
    cat "$tmp/nginx.out" "$tmp/error.log" >&2
    exit 1
  }
  local load
  load_command "$rate"
  local url=https://127.0.0.1:18444/$SIZE
  "${load[@]}" -t 2s "$url" >/dev/null 2>&1   # warm-up
  local r0 r1
  r0=$(server_ns)
  "${load[@]}" -t "${secs}s" "$url" >"$tmp/load.out" 2>&1
  r1=$(server_ns)
  kill "$master"; wait "$master" 2>/dev/null || true
  master=
  local n ok
  n=$(grep -oP 'All done \K[0-9]+' "$tmp/load.out")
  ok=$(grep -oP 'Code 200 : \K[0-9]+' "$tmp/load.out" || echo 0)
  python3 -c "
n=$n
print(f'$conf: {n} requests ({$ok} answered 200); server CPU per request: total {($r1-$r0)/1e3/n:.2f} µs')"
}

for i in $(seq "$reps"); do
  echo "== repetition $i: $rate requests/s for $secs s"
  for conf in $CONFS; do one "$conf"; done
done

#!/usr/bin/env bash
# hoist and nginx as reverse proxies to the same origin, side by side (issue 7's benchmark).
#
# An nginx origin (one worker, on the load CPU) serves `hoist bench`'s payload files over plain
# HTTP and over TLS. Each proxy in turn runs with one worker on the server CPU, HTTPS downstream
# (TLS 1.2, ECDHE-RSA-AES256-GCM-SHA384, RSA-4096), keep-alive upstream connections, and is
# loaded with `hoist load` from the load CPU, as fast as it goes. Printed per proxy and case:
# requests/s and the proxy process's CPU per request and per GB (user + system from
# /proc/<pid>/stat), so the two are compared per CPU-second.
#   - 1k: upstream plain HTTP;  - 5m: upstream TLS as well ("TLS on both sides").
#
#   bench/proxy.sh [--plain] [seconds=8]
#
# --plain: plain HTTP on both sides for both cases (no TLS anywhere), the setting in which
# hoist forwards the 5m body with splice(2) (docs/KTLS.md, "splice"); compare with the default
# run for the gain.
#
# Environment: HOIST (default target/release/hoist), WORK (hoist bench work directory, default
# bench-report/work), SERVER_CPU (0), LOAD_CPU (1), CONNECTIONS (8), OFFLOAD (hoist's
# --tls-offload, default off; auto puts both TLS sides in the kernel where it has kTLS).
set -euo pipefail
cd "$(dirname "$0")/.."
plain=0
if [ "${1:-}" = "--plain" ]; then plain=1; shift; fi
secs=${1:-8}
OFFLOAD=${OFFLOAD:-off}
HOIST=${HOIST:-target/release/hoist}
WORK=${WORK:-bench-report/work}
SERVER_CPU=${SERVER_CPU:-0}
LOAD_CPU=${LOAD_CPU:-1}
CONNECTIONS=${CONNECTIONS:-8}
CIPHER=ECDHE-RSA-AES256-GCM-SHA384
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "nginx not found: apt-get install nginx-light" >&2; exit 1; }
[ -x "$HOIST" ] || { echo "$HOIST not found: cargo build --release -p hoist" >&2; exit 1; }
"$HOIST" bench --prepare --out "$(dirname "$WORK")" --work-dir "$WORK" --sizes 1k,5m >/dev/null
work=$(cd "$WORK" && pwd)
run=$(mktemp -d /tmp/hoist-bench-proxy.XXXXXX)
chmod 755 "$run"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for c in origin proxy; do
    [ -s "$run/$c.pid" ] && kill "$(cat "$run/$c.pid")" 2>/dev/null || true
  done
  sleep 0.3; rm -rf "$run"
}
trap cleanup EXIT
mask() { # nginx's worker_cpu_affinity bit string for one CPU
  local m=$((1 << $1)) bits=""
  while [ $m -gt 0 ]; do bits="$((m & 1))$bits"; m=$((m >> 1)); done
  echo "$bits"
}

common="access_log off; sendfile on; tcp_nodelay on; keepalive_requests 10000000; keepalive_timeout 300s;"
tls="ssl_certificate $work/certs/server.crt; ssl_certificate_key $work/certs/server.key; ssl_protocols TLSv1.2; ssl_ciphers $CIPHER;"
cat > "$run/origin.conf" <<CONF
worker_processes 1; worker_cpu_affinity $(mask "$LOAD_CPU"); pid $run/origin.pid;
error_log $run/origin.err warn; events { worker_connections 4096; }
http { $common
  server { listen 127.0.0.1:18081; root $work/payloads; default_type application/octet-stream;
           location ~ "^/([0-9]+[km])$" { try_files /\$1.bin =404; } }
  server { listen 127.0.0.1:18082 ssl; $tls root $work/payloads; default_type application/octet-stream;
           location ~ "^/([0-9]+[km])$" { try_files /\$1.bin =404; } } }
CONF
# --plain: the proxies listen without TLS and fetch /5m from the plain origin too.
listen_tls="ssl; $tls"; up5m="https://tls"; scheme=https; cluster5m=tls
if [ "$plain" = 1 ]; then listen_tls=";"; up5m="http://plain"; scheme=http; cluster5m=plain; fi
cat > "$run/proxy.conf" <<CONF
worker_processes 1; worker_cpu_affinity $(mask "$SERVER_CPU"); pid $run/proxy.pid;
error_log $run/proxy.err warn; events { worker_connections 4096; }
http { $common
  upstream plain { server 127.0.0.1:18081; keepalive 64; }
  upstream tls { server 127.0.0.1:18082; keepalive 64; }
  server { listen 127.0.0.1:18443 $listen_tls
    proxy_http_version 1.1; proxy_set_header Connection ""; proxy_buffering on;
    location = /1k { proxy_pass http://plain; }
    location = /5m { proxy_pass $up5m; proxy_ssl_session_reuse on; } } }
CONF
listener_tls="    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          \"@type\": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_params: {tls_minimum_protocol_version: TLSv1_2, tls_maximum_protocol_version: TLSv1_2, cipher_suites: [$CIPHER]}
            tls_certificates:
            - certificate_chain: {filename: $work/certs/server.crt}
              private_key: {filename: $work/certs/server.key}
"
filters_prefix="      "
if [ "$plain" = 1 ]; then listener_tls=""; filters_prefix="    - "; fi
cat > "$run/hoist.yaml" <<YAML
admin: {address: {socket_address: {address: 127.0.0.1, port_value: 19901}}}
static_resources:
  listeners:
  - name: proxy
    address: {socket_address: {address: 127.0.0.1, port_value: 18443}}
    filter_chains:
${listener_tls}${filters_prefix}filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
          stat_prefix: proxy
          route_config:
            virtual_hosts:
            - name: all
              domains: ["*"]
              routes:
              - {match: {path: /1k}, route: {cluster: plain}}
              - {match: {path: /5m}, route: {cluster: $cluster5m}}
          http_filters:
          - name: envoy.filters.http.router
            typed_config: {"@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}
  clusters:
  - name: plain
    type: STATIC
    load_assignment:
      cluster_name: plain
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 18081}}}}]}]
  - name: tls
    type: STATIC
    load_assignment:
      cluster_name: tls
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 127.0.0.1, port_value: 18082}}}}]}]
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
YAML

cpu_s() { awk -v hz="$(getconf CLK_TCK)" '{printf "%.3f", ($14 + $15) / hz}' /proc/"$1"/stat; }
measure() { # name pid path
  local name=$1 pid=$2 path=$3
  taskset -c "$LOAD_CPU" "$HOIST" load -k -c "$CONNECTIONS" -qps 0 -t 2s \
    "$scheme://127.0.0.1:18443$path" >/dev/null 2>&1 || true
  local c0 c1; c0=$(cpu_s "$pid")
  taskset -c "$LOAD_CPU" "$HOIST" load -k -c "$CONNECTIONS" -qps 0 -t "${secs}s" \
    "$scheme://127.0.0.1:18443$path" >"$run/load.out" 2>&1 || true
  c1=$(cpu_s "$pid")
  local n bytes codes
  n=$(grep -oP 'All done \K[0-9]+' "$run/load.out" || echo 0)
  codes=$(grep -E '^Code ' "$run/load.out" | tr '\n' ' ')
  bytes=$(grep -oP 'Response Body/Total Sizes : count [0-9]+ avg \K[0-9.]+' "$run/load.out" || echo 0)
  python3 -c "
n=$n; cpu=$c1-$c0; b=$bytes
print(f'$name $path: {n/$secs:.0f} req/s, proxy CPU {cpu:.2f} s: {n/cpu if cpu else 0:.0f} requests per CPU-s,'
      f' {n*b/1e9/cpu if cpu else 0:.3f} GB per CPU-s  [$codes]')"
}

"$NGINX" -c "$run/origin.conf" -p "$run" -g 'daemon on;'
sleep 0.5
"$NGINX" -c "$run/proxy.conf" -p "$run" -g 'daemon on;'
sleep 0.5
nginx_worker=$(pgrep -P "$(cat "$run/proxy.pid")" | head -1)
echo "origin: nginx on CPU $LOAD_CPU; proxies on CPU $SERVER_CPU; load on CPU $LOAD_CPU; $secs s per case$([ "$plain" = 1 ] && echo '; plain HTTP both sides')"
for path in /1k /5m; do measure "nginx $("$NGINX" -v 2>&1 | sed 's/.*\///')" "$nginx_worker" "$path"; done
kill "$(cat "$run/proxy.pid")"; rm -f "$run/proxy.pid"; sleep 0.5

taskset -c "$SERVER_CPU" "$HOIST" -c "$run/hoist.yaml" --concurrency 1 --tls-offload "$OFFLOAD" \
  >"$run/hoist.log" 2>&1 &
hoist_pid=$!; pids+=("$hoist_pid")
sleep 1
kill -0 "$hoist_pid" 2>/dev/null || { cat "$run/hoist.log" >&2; exit 1; }
for path in /1k /5m; do measure "hoist" "$hoist_pid" "$path"; done
# How the 5m bodies travelled (splice needs plain or kTLS on both sides).
curl -s "http://127.0.0.1:19901/stats?filter=upstream_rq_splice" | sed 's/^/hoist stat /'

#!/usr/bin/env bash
# hoist and nginx side by side in one run.
#
# Starts nginx from Debian's package (nginx-light or nginx) with one worker pinned to the server
# CPU, the same RSA-4096 certificate and payload files as `hoist bench`, TLS 1.2 with the same
# cipher, sendfile on, keep-alive; then runs `hoist bench --target` so the same client matrix
# measures hoist (baseline and, where the kernel allows, kTLS) and nginx, and stops nginx.
#
#   bench/nginx.sh [extra hoist bench options]        e.g. bench/nginx.sh --sizes 1m,5m
#
# Environment: HOIST (binary, default target/release/hoist), OUT (report dir, default
# bench-report), SERVER_CPU (default 0), LOAD_CPUS (default: the other CPUs), CIPHER (default
# ECDHE-RSA-AES256-GCM-SHA384), PORT (default 18443).
set -euo pipefail
cd "$(dirname "$0")/.."

HOIST=${HOIST:-target/release/hoist}
OUT=${OUT:-bench-report}
SERVER_CPU=${SERVER_CPU:-0}
CIPHER=${CIPHER:-ECDHE-RSA-AES256-GCM-SHA384}
PORT=${PORT:-18443}
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || { echo "nginx not found: apt-get install nginx-light" >&2; exit 1; }
[ -x "$HOIST" ] || { echo "$HOIST not found: cargo build --release -p hoist" >&2; exit 1; }

"$HOIST" bench --prepare --out "$OUT" >/dev/null
work=$(cd "$OUT/work" && pwd)
run=$(mktemp -d /tmp/hoist-bench-nginx.XXXXXX)
chmod 755 "$run"
mask=$(( 1 << SERVER_CPU ))
mask_bin=""
while [ $mask -gt 0 ]; do mask_bin="$(( mask & 1 ))$mask_bin"; mask=$(( mask >> 1 )); done

cat > "$run/nginx.conf" <<CONF
worker_processes 1;
worker_cpu_affinity $mask_bin;
pid $run/nginx.pid;
error_log $run/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_requests 10000000;
    keepalive_timeout 300s;
    ssl_session_cache shared:SSL:10m;
    server {
        listen 127.0.0.1:$PORT ssl;
        ssl_certificate $work/certs/server.crt;
        ssl_certificate_key $work/certs/server.key;
        ssl_protocols TLSv1.2;
        ssl_ciphers $CIPHER;
        ssl_prefer_server_ciphers on;
        root $work/payloads;
        default_type application/octet-stream;
        location ~ "^/([0-9]+[km])$" { try_files /\$1.bin =404; }
    }
}
CONF

"$NGINX" -c "$run/nginx.conf" -p "$run" -g 'daemon on;'
stop() { "$NGINX" -c "$run/nginx.conf" -p "$run" -s stop 2>/dev/null || true; rm -rf "$run"; }
trap stop EXIT
for _ in $(seq 50); do [ -s "$run/nginx.pid" ] && break; sleep 0.1; done
worker=$(pgrep -P "$(cat "$run/nginx.pid")" | head -1)
[ -n "$worker" ] || { echo "nginx worker not found; see $run/error.log" >&2; exit 1; }
echo "nginx $("$NGINX" -v 2>&1 | sed 's/.*nginx\///') worker pid $worker on CPU $SERVER_CPU, https://127.0.0.1:$PORT"

args=(--out "$OUT" --target "https://127.0.0.1:$PORT" --target-pid "$worker" --target-name nginx
      --ciphers "$CIPHER" --configs none --server-cpus "$SERVER_CPU")
[ -n "${LOAD_CPUS:-}" ] && args+=(--load-cpus "$LOAD_CPUS")
"$HOIST" bench "${args[@]}" "$@"

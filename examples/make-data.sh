#!/usr/bin/env bash
# Creates what the example configurations read: certificates (RSA-4096, as in the published
# experiment; ECDSA P-256; one per SNI name) and payload files of 1 KiB to 10 MiB.
# Run from anywhere; files go to examples/data/ (ignored by git). Idempotent.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$here/data"
mkdir -p "$out/certs" "$out/payloads"
cd "$out"
# One run at a time (tests may start it concurrently): a half-written key or payload must
# never be seen.
exec 9>"$out/.lock"
flock 9

cert() { # name keyspec cn
  local name=$1 keyspec=$2 cn=$3
  [ -s "certs/$name.crt" ] && [ -s "certs/$name.key" ] && return 0
  if [ "$keyspec" = ec ]; then
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 365 \
      -subj "/CN=$cn" -addext "subjectAltName=DNS:$cn,DNS:localhost,IP:127.0.0.1" \
      -keyout "certs/$name.key" -out "certs/$name.crt" 2>/dev/null
  else
    openssl req -x509 -newkey "$keyspec" -nodes -days 365 \
      -subj "/CN=$cn" -addext "subjectAltName=DNS:$cn,DNS:localhost,IP:127.0.0.1" \
      -keyout "certs/$name.key" -out "certs/$name.crt" 2>/dev/null
  fi
  chmod 600 "certs/$name.key"
}

cert server-rsa4096 rsa:4096 localhost
cert server-ecdsa ec localhost
cert a.example rsa:2048 a.example
cert b.example ec b.example

payload() { # name bytes
  local f="payloads/$1.bin"
  [ -f "$f" ] && [ "$(stat -c %s "$f")" = "$2" ] && return 0
  head -c "$2" /dev/urandom > "$f.tmp" && mv "$f.tmp" "$f"
}
payload 1k 1024
payload 10k 10240
payload 100k 102400
payload 500k 512000
payload 1m 1048576
payload 2m 2097152
payload 5m 5242880
payload 10m 10485760
echo "examples/data ready: $(ls certs | wc -l) certificate files, $(ls payloads | wc -l) payloads"

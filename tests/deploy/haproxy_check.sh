#!/usr/bin/env bash
# deploy/haproxy.cfg and deploy/haproxy-postgres.cfg parse (`haproxy -c`), without a
# warning, with their variables unset (the defaults a real deployment edits) and with
# the cluster's kind of values.
# 77 without haproxy.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
command -v haproxy >/dev/null || { echo "SKIP: haproxy is missing (.ci/install-deps test)"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj /CN=localhost \
  -days 1 -keyout "$tmp/k.pem" -out "$tmp/c.pem" 2>/dev/null
cat "$tmp/c.pem" "$tmp/k.pem" >"$tmp/lb.pem"
# A warning is a failure too (a keyword another overrides, a setting ignored).
check() {
  local out
  out=$(env -i PATH="$PATH" CORING_LB_CERT="$tmp/lb.pem" CORING_LB_SOCKET="$tmp/s.sock" "$@" \
    haproxy -c -f "$root/deploy/haproxy.cfg" -f "$root/deploy/haproxy-postgres.cfg" 2>&1) \
    || { echo "FAIL: haproxy -c: $out"; exit 1; }
  if grep -E '\[(WARNING|ALERT)\]' <<<"$out"; then
    echo "FAIL: haproxy -c warns (above)"
    exit 1
  fi
}
check
check CORING_LB_HTTP=127.0.0.1:1 CORING_LB_HTTPS=127.0.0.1:1 CORING_LB_STATS=127.0.0.1:1 \
  CORING_LB_METRICS=127.0.0.1:1 \
  CORING_LB_LOG=stdout CORING_HOST1=10.213.42.11:8080 CORING_HOST2=10.213.42.12:8080 \
  CORING_PG_PRIMARY=127.0.0.1:1 CORING_PG_REPLICAS=127.0.0.1:1 CORING_PG1=10.213.42.21:5432 \
  CORING_PG2=10.213.42.22:5432 CORING_PG3=10.213.42.23:5432 CORING_PATRONI_PORT=8008
echo "PASS: haproxy -c accepts deploy/haproxy.cfg and deploy/haproxy-postgres.cfg, without a warning"

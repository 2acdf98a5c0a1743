#!/usr/bin/env bash
# tests/perf/compression_smoke.sh CORING_BIN LEVELS_TOOL: perf/compression.sh
# for 1 s a case, then checks that every part printed its rows: the levels
# table, coring's rows (GET /users and /todos, each coding, requests made,
# the compressed bytes fewer than identity's) and nginx's when it is
# installed. A smoke test of the script, not a benchmark: no CPU figure is
# compared with anything.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
coring=${1:?coring binary}
levels=${2:?coring-compress-levels binary}

command -v wrk >/dev/null || { echo "SKIP: wrk is not installed"; exit 77; }
cpus=$(/usr/bin/python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
((cpus >= 2)) || { echo "SKIP: $cpus CPU available, the script pins to CPUs 0 and 1"; exit 77; }

out=$("$repo/perf/compression.sh" --coring "$coring" --levels-tool "$levels" --seconds 1 --todos 30)
echo "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
for coding in gzip br zstd; do
  grep -Eq "^\./users\.json +[0-9]+ +$coding +1 +[0-9]+ +[0-9.]+$" <<<"$out" || fail "no $coding level 1 row"
done
for route in /users /todos; do
  identity=$(awk -v r="$route" '$1 == "coring" && $2 == r && $3 == "identity" {print $(NF - 1)}' <<<"$out")
  [[ -n $identity ]] || fail "no coring $route identity row"
  for coding in gzip br zstd; do
    row=$(awk -v r="$route" -v c="$coding" '$1 == "coring" && $2 == r && $3 == c' <<<"$out")
    [[ -n $row ]] || fail "no coring $route $coding row"
    reqs=$(awk '{print $4}' <<<"$row") bytes=$(awk '{print $(NF - 1)}' <<<"$row")
    ((reqs > 0)) || fail "coring $route $coding: no requests"
    ((bytes < identity)) || fail "coring $route $coding: $bytes bytes, identity $identity"
  done
done
if [[ -x ${NGINX_BIN:-/usr/sbin/nginx} ]]; then
  grep -Eq '^nginx +/users +gzip +[1-9][0-9]* requests' <<<"$out" || fail "no nginx gzip row"
fi
echo "compression smoke: ok"

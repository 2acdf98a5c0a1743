#!/usr/bin/env bash
# tests/perf/compression_smoke.sh CORING_BIN LEVELS_TOOL: perf/compression.sh
# for 1 s a case, then checks that every part printed its rows: the levels
# table, coring's rows (GET /users and /todos, each coding, requests made,
# the compressed bytes fewer than identity's) and nginx's when it is
# installed; and that --out wrote compression.md with both tables. A smoke
# test of the script, not a benchmark: no CPU figure is compared with
# anything.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
coring=${1:?coring binary}
levels=${2:?coring-compress-levels binary}

command -v wrk >/dev/null || { echo "SKIP: wrk is not installed"; exit 77; }
cpus=$(/usr/bin/python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
((cpus >= 2)) || { echo "SKIP: $cpus CPU available, the script pins to CPUs 0 and 1"; exit 77; }

md_dir=$(mktemp -d "${TMPDIR:-/tmp}/coring-compression-smoke.XXXXXX")
trap 'rm -rf "$md_dir"' EXIT
out=$("$repo/perf/compression.sh" --coring "$coring" --levels-tool "$levels" --seconds 1 --todos 30 \
      --runs 1 --out "$md_dir")
echo "$out"
fail() { echo "FAIL: $*" >&2; exit 1; }
md=$md_dir/compression.md
[[ -s $md ]] || fail "--out wrote no compression.md"
grep -q '^## Compression' "$md" || fail "compression.md has no section heading"
grep -Eq '^\| users\.json \| [0-9]+ \| zstd \| 1 \| [0-9]+ \| [0-9.]+ \| [0-9.]+ \|$' "$md" ||
  fail "compression.md: no levels row for users.json zstd 1"
grep -Eq '^\| coring \| /todos \| identity \| [1-9][0-9]* \| [0-9.]+ \([0-9.]+-[0-9.]+\) \| 1\.00 \| [0-9]+ \| 1\.000 \|$' "$md" ||
  fail "compression.md: no coring /todos identity row"
grep -Eq '^\| coring \| /todos \| br \| [1-9][0-9]* \| [0-9.]+ \([0-9.]+-[0-9.]+\) \| [0-9.]+ \| [0-9]+ \| 0\.[0-9]+ \|$' "$md" ||
  fail "compression.md: no coring /todos br row with its ratio to identity"
[[ -s $md_dir/output.txt ]] || fail "--out wrote no output.txt"
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

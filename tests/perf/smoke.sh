#!/usr/bin/env bash
# tests/perf/smoke.sh CORING_BIN OUT_DIR: perf/run --quick hello, then check
# the report (tests/perf/check_report.py) and what perf/publish writes from it
# (tests/perf/check_publish.py, into OUT_DIR/publish). A smoke test of the harness, not
# a benchmark: no figure is compared with anything.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
coring=${1:?coring binary}
out=${2:?output directory}

command -v wrk >/dev/null || { echo "SKIP: wrk is not installed"; exit 77; }
cpus=$(/usr/bin/python3 -c 'import os; print(len(os.sched_getaffinity(0)))')
((cpus >= 2)) || { echo "SKIP: $cpus CPU available, perf/run needs 2"; exit 77; }

# Peers without a build step by default, a C one and a node one (a Rust or
# Go build would dominate the test's time; floor's is one cc -O2 of one
# file; each Python or node peer adds ~15 s and checks no more of the
# harness); every peer not installed here is reported "not run"
# (--no-install: the test installs nothing beyond .ci/install-deps test).
servers=${PERF_SMOKE_SERVERS:-coring,floor,nginx,fastify}
rm -rf "$out"
"$repo/perf/run" --quick hello --no-install --coring "$coring" --servers "$servers" --out "$out"
/usr/bin/python3 "$here/check_report.py" "$out" hello
/usr/bin/python3 "$here/check_publish.py" "$out" "$out/publish"

# perf/check's path through perf/run --baseline: the same binary as both
# builds, GET / only, 2 rounds of 1 s. Its verdict on identical builds is
# noise (exit 0 or 1); what is checked is that both were measured and compared.
rc=0
"$repo/perf/check" --base-bin "$coring" --head-bin "$coring" --base self --head self \
  --cases get-c50 --runs 2 --duration 1 --no-install --out "$out/check" || rc=$?
((rc <= 1)) || { echo "FAIL: perf/check exited $rc"; exit 1; }
grep -Eq '^get-c50 \(coring\) .* (same|faster|SLOWER)$' "$out/check/check.txt" ||
  { echo "FAIL: perf/check.txt has no verdict for get-c50:"; cat "$out/check/check.txt"; exit 1; }
echo "ok perf/check: $(grep '^get-c50' "$out/check/check.txt")"

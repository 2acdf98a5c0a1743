#!/usr/bin/env bash
# perf/db_cost.sh: what one users request costs on both sides of the
# database connection: the server's CPU, PostgreSQL's CPU (postmaster, its
# backends, WAL writer and the other helpers, together) and the round trips
# (pipeline Syncs, from coring's /metrics). perf/run reports only the
# server's CPU; this is the other half, for comparing coring configurations
# (for example --db-routing spread against pack, docs/database.md).
#
#   perf/db_cost.sh --coring BIN [--case get-user|list-users|post-user|post-conflict]
#                   [--conflict-every N] [--connections N] [--seconds S] [--rounds R]
#                   [-- CORING_ARGS...]
#
# Starts a throw-away cluster (db/pg-local start DIR throwaway, as perf/run's
# users scenario), seeds 10,000 users with coring, then per round starts coring
# (1 worker thread, CPU 0, with CORING_ARGS), warms up 2 s with wrk (1
# thread, CPU 1), measures S seconds, and stops it. PostgreSQL is not pinned
# (as in perf/run). Prints one line per round; removes the cluster at the end.
# post-conflict: POST /users where one request in N (--conflict-every,
# default 8) asks for an email already taken (409); the round's line
# counts the answers that were not 2xx.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bin='' case=post-user conns=64 secs=5 rounds=1 every=8
while [[ $# -gt 0 ]]; do
  case $1 in
    --coring) bin=$2; shift 2 ;;
    --case) case=$2; shift 2 ;;
    --connections) conns=$2; shift 2 ;;
    --seconds) secs=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --conflict-every) every=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "db_cost.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "db_cost.sh: --coring BIN: no executable at '$bin'" >&2; exit 2; }
[[ $every =~ ^[1-9][0-9]*$ ]] || { echo "db_cost.sh: --conflict-every N: a positive integer" >&2; exit 2; }
# The wrk scripts share perf/wrk/report.lua.
export LUA_PATH="$repo/perf/wrk/?.lua;;"
case $case in
  get-user) script=(-s "$repo/perf/wrk/get_user.lua"); path=/users/; extra=(-- 10000) ;;
  list-users) script=(-s "$repo/perf/wrk/get.lua"); path=/users; extra=() ;;
  post-user) script=(-s "$repo/perf/wrk/post_user.lua"); path=/users; extra=() ;;
  post-conflict) script=(-s "$repo/perf/wrk/post_user.lua"); path=/users; extra=(-- "$every") ;;
  *) echo "db_cost.sh: --case: get-user, list-users, post-user or post-conflict" >&2; exit 2 ;;
esac
for tool in wrk taskset curl; do
  command -v $tool >/dev/null || { echo "db_cost.sh: needs $tool (.ci/install-deps perf)" >&2; exit 1; }
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/coring-db-cost.XXXXXX")
chmod 755 "$dir"
server=
cleanup() {
  [[ -n $server ]] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  "$repo/db/pg-local" stop "$dir" immediate >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
"$repo/db/pg-local" start "$dir" throwaway >"$dir/start.log" 2>&1 || { cat "$dir/start.log" >&2; exit 1; }
DATABASE_URL=$("$repo/db/pg-local" url "$dir")
export DATABASE_URL
postmaster=$(head -n 1 "$dir/data/postmaster.pid")
tck=$(getconf CLK_TCK)
port=$((20000 + RANDOM % 20000))

# start_coring ARGS...: coring on CPU 0 at $port, until it answers.
start_coring() {
  taskset -c 0 "$bin" --host 127.0.0.1 --port "$port" --threads 1 --apps users --log-level warn \
    "$@" >>"$dir/server.log" 2>&1 &
  server=$!
  for _ in $(seq 300); do
    curl -fs -o /dev/null "http://127.0.0.1:$port/users/1" && return 0
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
  done
  echo "db_cost.sh: coring did not answer; its log:" >&2; cat "$dir/server.log" >&2; exit 1
}
stop_coring() { kill "$server"; wait "$server" 2>/dev/null || true; server=; }
# ticks PID...: utime + stime of those processes, clock ticks.
ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo $t; }
pg_pids() { echo "$postmaster"; awk -v pm="$postmaster" '$4 == pm {print $1}' /proc/[0-9]*/stat 2>/dev/null; }
metric() { curl -fs "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}'; }

start_coring --seed-users 10000
stop_coring
echo "case=$case connections=$conns seconds=$secs coring args: ${*:-(none)}"
for r in $(seq "$rounds"); do
  start_coring "$@"
  url=http://127.0.0.1:$port$path
  taskset -c 1 wrk -t1 -c"$conns" -d2s "${script[@]}" "$url" "${extra[@]}" >/dev/null 2>&1
  mapfile -t pgs < <(pg_pids)
  s0=$(ticks "$server"); p0=$(ticks "${pgs[@]}"); q0=$(metric db_queries_total); t0=$(metric db_round_trips_total)
  out=$(taskset -c 1 wrk -t1 -c"$conns" -d"${secs}s" "${script[@]}" "$url" "${extra[@]}" 2>&1)
  s1=$(ticks "$server"); p1=$(ticks "${pgs[@]}"); q1=$(metric db_queries_total); t1=$(metric db_round_trips_total)
  stop_coring
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  non2xx=$(awk '/Non-2xx/ {print $NF}' <<<"$out")
  n=$(awk -v r="$rps" -v s="$secs" 'BEGIN {print r * s}')
  awk -v r="$r" -v rps="$rps" -v n="$n" -v s=$((s1 - s0)) -v p=$((p1 - p0)) -v tck="$tck" \
      -v q=$((q1 - q0)) -v t=$((t1 - t0)) -v bad="${non2xx:-0}" 'BEGIN {
    printf "round %d: %.0f req/s, server CPU %.2f µs/req, PostgreSQL CPU %.2f µs/req, %.1f queries per round trip, %d not 2xx\n",
      r, rps, s / tck / n * 1e6, p / tck / n * 1e6, t ? q / t : 0, bad }'
done

#!/usr/bin/env bash
# perf/ab.sh: two coring binaries side by side on the same routes, in
# server CPU microseconds per request (utime + stime from /proc/PID/stat
# over the requests wrk made, perf/lib/proc.sh), requests per second, wrk's
# p99 latency, and io_uring submits per request (the rise of
# coring_ring_submits_total on /metrics over the requests wrk made; each
# submit is at most one io_uring_enter(2), so this is perf/syscalls' count
# without strace slowing the server; "-" for a binary without the counter).
# For a before/after of a change that should cost nothing (a refactor) or
# save something (a performance change): build both, then
#   perf/ab.sh --a OLD/apps/coring --b NEW/apps/coring [--rounds 3]
#              [--seconds 5] [--connections 50] [--todos 100] [--pipeline N]
#              [--case 'APP PATH']... [--a-args 'FLAGS'] [--b-args 'FLAGS']
# --a-args/--b-args add options to A's/B's command line: one binary with a
# feature off (A) and on (B) is `--a BIN --b BIN --b-args '--rate-limit 1000000'`.
# Cases (default): hello GET /, todo GET /todos (with --todos items, created
# first through POST) and GET /todos/1, each binary with one worker thread
# on the memory store; --case 'todo /todos' (repeatable) picks others.
# --pipeline N sends N requests per write (perf/wrk/pipeline.lua, as
# perf/run's pipeline16 case): req/s and CPU are then per response.
# The server is pinned to CPU 0, wrk (one thread) to CPU 1; rounds
# alternate A and B so that drift on a shared machine hits both alike.
# Every wrk run is bounded by --seconds.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/proc.sh
source "$here/lib/proc.sh"

a="" b="" a_args="" b_args="" rounds=3 seconds=5 conns=50 todos=100 pipeline=0 cases=()
while (($#)); do
  case $1 in
    --a) a=$2; shift ;;
    --b) b=$2; shift ;;
    --a-args) a_args=$2; shift ;;
    --b-args) b_args=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --connections) conns=$2; shift ;;
    --todos) todos=$2; shift ;;
    --pipeline) pipeline=$2; shift ;;
    --case) cases+=("$2"); shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "ab.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
((${#cases[@]})) || cases=("hello /" "todo /todos" "todo /todos/1")
[[ -x $a && -x $b ]] || { echo "ab.sh: --a PATH and --b PATH to two built coring binaries" >&2; exit 2; }
command -v wrk >/dev/null || { echo "ab.sh: wrk is needed (.ci/install-deps perf)" >&2; exit 77; }

port=$((20000 + RANDOM % 20000))
# ring_submits: the server's io_uring submits so far (coring_ring_submits_total,
# every thread), or nothing when /metrics lacks it. Read before and after
# the wrk run; the reads' own few submits are noise against 100k requests.
ring_submits() {
  curl -s "http://127.0.0.1:$port/metrics" |
    awk '/^coring_ring_submits_total/ {n += $2; f = 1} END {if (f) print n}'
}

# run_case LABEL BINARY APPS PATH: prints one result line.
run_case() {
  local label=$1 bin=$2 apps=$3 path=$4 pid t0 t1 out reqs i s0 s1 p99 extra=()
  [[ $label == A ]] && read -r -a extra <<<"$a_args"
  [[ $label == B ]] && read -r -a extra <<<"$b_args"
  taskset -c 0 "$bin" --host 127.0.0.1 --port "$port" --threads 1 --apps "$apps" \
    --log-level warn "${extra[@]}" &
  pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  if [[ $apps == todo ]]; then
    for ((i = 0; i < todos; i++)); do
      curl -s -o /dev/null -H 'content-type: application/json' \
        -d "{\"title\":\"todo number $i\"}" "http://127.0.0.1:$port/todos"
    done
  fi
  s0=$(ring_submits)
  t0=$(proc_cpu_ticks "$pid")
  local script=()
  ((pipeline > 0)) && script=(-s "$here/wrk/pipeline.lua" "http://127.0.0.1:$port$path" -- "$pipeline")
  ((pipeline > 0)) || script=("http://127.0.0.1:$port$path")
  out=$(LUA_PATH="$here/wrk/?.lua;;" taskset -c 1 wrk -t1 -c"$conns" -d"${seconds}s" --latency "${script[@]}")
  t1=$(proc_cpu_ticks "$pid")
  s1=$(ring_submits)
  kill "$pid"; wait "$pid" || true
  reqs=$(awk '/requests in/ {print $1}' <<<"$out")
  p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
  awk -v l="$label" -v p="$path" -v r="$reqs" -v s="$seconds" -v t=$((t1 - t0)) -v hz="$CLK_TCK" \
    -v p99="${p99:--}" -v s0="$s0" -v s1="$s1" \
    'BEGIN { sub_ = (s0 == "" || s1 == "") ? "     -" : sprintf("%6.4f", (s1 - s0) / r)
             printf "%-2s %-10s %9.0f req/s %8.3f us CPU/request  p99 %8s  %s submits/request\n",
                    l, p, r / s, t / hz * 1e6 / r, p99, sub_ }'
}

for ((round = 1; round <= rounds; round++)); do
  echo "round $round"
  for c in "${cases[@]}"; do
    read -r apps path <<<"$c"
    if ((round % 2)); then
      run_case A "$a" "$apps" "$path"; run_case B "$b" "$apps" "$path"
    else
      run_case B "$b" "$apps" "$path"; run_case A "$a" "$apps" "$path"
    fi
  done
done

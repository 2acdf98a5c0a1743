#!/usr/bin/env bash
# perf/metrics_cost.sh: what metrics cost on GET /, in server CPU
# microseconds per request (utime + stime of /proc/PID/stat over the
# requests wrk made, perf/lib/proc.sh), side by side:
#   base      - another coring binary (e.g. main, built without metrics), optional
#   no-scrape - this coring, /metrics never read
#   scrape-1s - this coring, /metrics read every second by a curl loop
# Server pinned to CPU 0 with one worker thread, wrk to CPU 1 (taskset);
# rounds alternate the cases so that drift hits each alike.
#   perf/metrics_cost.sh --coring build-perf/apps/coring [--base PATH]
#                        [--rounds 2] [--seconds 5] [--connections 32]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lib/proc.sh
source "$here/lib/proc.sh"

coring="" base="" rounds=2 seconds=5 conns=32
while (($#)); do
  case $1 in
    --coring) coring=$2; shift ;;
    --base) base=$2; shift ;;
    --rounds) rounds=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --connections) conns=$2; shift ;;
    *) echo "metrics_cost.sh: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
[[ -x $coring ]] || { echo "metrics_cost.sh: --coring PATH to a built coring" >&2; exit 2; }
command -v wrk >/dev/null || { echo "metrics_cost.sh: wrk is needed" >&2; exit 77; }

port=$((20000 + RANDOM % 20000))
run_case() { # NAME BINARY SCRAPE(0/1): prints "NAME requests cpu_us_per_request"
  local name=$1 bin=$2 scrape=$3 pid spid="" t0 t1 reqs
  taskset -c 0 "$bin" --host 127.0.0.1 --port "$port" --threads 1 --apps hello --log-level warn &
  pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
  if ((scrape)); then
    (for _ in $(seq $((seconds + 5))); do
       curl -s -o /dev/null "http://127.0.0.1:$port/metrics"; sleep 1
     done) &
    spid=$!
  fi
  t0=$(proc_cpu_ticks "$pid")
  reqs=$(taskset -c 1 wrk -t1 -c"$conns" -d"${seconds}s" "http://127.0.0.1:$port/" |
         awk '/requests in/ {print $1}')
  t1=$(proc_cpu_ticks "$pid")
  [[ -n $spid ]] && kill "$spid" 2>/dev/null && wait "$spid" 2>/dev/null || true
  kill "$pid"; wait "$pid" || true
  awk -v n="$name" -v r="$reqs" -v t=$((t1 - t0)) -v hz="$CLK_TCK" \
    'BEGIN { printf "%-10s %10d requests %8.3f us CPU/request\n", n, r, t / hz * 1e6 / r }'
}

for ((i = 1; i <= rounds; i++)); do
  echo "round $i"
  [[ -n $base ]] && run_case base "$base" 0
  run_case no-scrape "$coring" 0
  run_case scrape-1s "$coring" 1
done

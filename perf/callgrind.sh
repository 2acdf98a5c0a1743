#!/usr/bin/env bash
# perf/callgrind.sh: instructions the whole coring process executes per
# response (callgrind's Ir, every thread), a figure that the load of a
# shared machine does not move, for before/after comparisons that the
# CPU-time figures of perf/ab.sh cannot resolve (a few percent).
#   perf/callgrind.sh --bin PATH [--apps hello] [--path /] [--connections 50]
#                     [--pipeline N] [--seconds 8] [--todos 100] [--out FILE]
#                     [--header 'NAME: VALUE']...
# The server runs under valgrind --tool=callgrind with one worker thread;
# wrk warms it for 2 s, the counters are zeroed (callgrind_control -z), wrk
# runs --seconds, the counters are dumped, and the line printed is the
# dump's total over the responses wrk counted. Valgrind serialises the
# threads and slows the server about 50 times: the figure is instructions,
# not time, and the batching per loop turn under valgrind is not the
# batching at full speed (compare two binaries in the same conditions).
# With --apps todo, --todos items are created first through POST, as
# perf/ab.sh does. --header adds a field to every request wrk sends (a
# traceparent: docs/tracing.md). users needs DATABASE_URL (perf/README.md, "PostgreSQL"). Every wrk run
# is bounded; the server is killed (SIGKILL) after the dump.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin="" apps=hello path=/ conns=50 pipeline=0 seconds=8 todos=100 out=""
headers=()
while (($#)); do
  case $1 in
    --bin) bin=$2; shift ;;
    --apps) apps=$2; shift ;;
    --path) path=$2; shift ;;
    --connections) conns=$2; shift ;;
    --pipeline) pipeline=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --todos) todos=$2; shift ;;
    --out) out=$2; shift ;;
    --header) headers+=(-H "$2"); shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "callgrind.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x $bin ]] || { echo "callgrind.sh: --bin PATH to a built coring binary" >&2; exit 2; }
for tool in valgrind callgrind_control wrk; do
  command -v $tool >/dev/null || { echo "callgrind.sh: $tool is needed (.ci/install-deps perf)" >&2; exit 77; }
done
dir=$(mktemp -d "${TMPDIR:-/tmp}/coring-callgrind.XXXXXX")
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
valgrind --tool=callgrind --callgrind-out-file="$dir/callgrind.out" "$bin" --host 127.0.0.1 \
  --port "$port" --threads 1 --apps "$apps" --log-level warn >"$dir/server.log" 2>&1 &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$port$path" && break; sleep 0.2; done
kill -0 $pid 2>/dev/null || { cat "$dir/server.log" >&2; exit 1; }
if [[ $apps == todo ]]; then
  for ((i = 0; i < todos; i++)); do
    curl -s -o /dev/null -H 'content-type: application/json' \
      -d "{\"title\":\"todo number $i\"}" "http://127.0.0.1:$port/todos"
  done
fi
load() {
  local script=("http://127.0.0.1:$port$path")
  ((pipeline > 0)) && script=(-s "$here/wrk/pipeline.lua" "http://127.0.0.1:$port$path" -- "$pipeline")
  LUA_PATH="$here/wrk/?.lua;;" wrk -t1 -c"$conns" -d"$1s" ${headers[@]+"${headers[@]}"} "${script[@]}"
}
load 2 >/dev/null
callgrind_control -z $pid >/dev/null 2>&1
load "$seconds" >"$dir/wrk.txt"
callgrind_control -d $pid >/dev/null 2>&1
sleep 1
kill -9 $pid 2>/dev/null || true
wait $pid 2>/dev/null || true
n=$(awk '/requests in/ {print $1}' "$dir/wrk.txt")
dump=$(ls -t "$dir"/callgrind.out.* | head -1)
ir=$(awk '/^(summary|totals):/ {print $2; exit}' "$dump")
[[ -n $out ]] && cp "$dump" "$out"
rm -rf "$dir"
printf '%s %s%s c=%s: %s responses, %s instructions, %d per response\n' "$apps" "$path" \
  "$( ((pipeline > 0)) && echo " ${pipeline}-deep")" "$conns" "$n" "$ir" $((ir / n))

# shellcheck shell=bash
# perf/lib/wrk.sh: run wrk pinned to CLIENT_CPU, bounded in time.
#
# One wrk thread (-t1) on CLIENT_CPU: the client's ceiling is one core's
# worth of wrk (see perf/README.md), the same for every server. Scripts live
# in perf/wrk/ and share perf/wrk/report.lua through LUA_PATH. A script's
# argument may name a file the scenario wrote for this server (the ids of
# GET /todos/{id}): "@DIR@" in it stands for the server's results directory.
# A script that stops itself after a number of requests (perf/wrk/cep_count.lua)
# has a line "-- perf-duration: N": wrk then runs with -dNs, a cap, whatever
# the harness's duration. An executable "before-wrk" in that directory runs
# before each wrk run (the cep scenario empties its cache table there).

WRK_BIN=${WRK_BIN:-wrk}
WRK_ARG_DIR=${WRK_ARG_DIR:-}

# wrk_argv URL CONNECTIONS SECONDS SCRIPT[:ARG]: fill WRK_ARGV.
wrk_argv() {
  local url=$1 conns=$2 secs=$3 spec=$4 script arg=""
  script=${spec%%:*}
  [[ $spec == *:* ]] && arg=${spec#*:}
  arg=${arg//@DIR@/$WRK_ARG_DIR}
  WRK_ARGV=(taskset -c "$CLIENT_CPU" "$WRK_BIN" -t1 "-c$conns" "-d${secs}s" --latency
            -s "$PERF_DIR/wrk/$script" "$url")
  [[ -n $arg ]] && WRK_ARGV+=(-- "$arg")
  return 0
}

# wrk_run OUTDIR URL CONNECTIONS SECONDS SCRIPT[:ARG]: run wrk; writes
# OUTDIR/wrk.txt (stdout), OUTDIR/wrk.err, and sets WRK_CPU_S to the CPU
# seconds (user+system) wrk used and WRK_COMMAND. Returns wrk's status.
wrk_run() {
  local out=$1 url=$2 conns=$3 secs=$4 spec=$5 pid rc=0 cap
  mkdir -p "$out"
  cap=$(sed -n 's/^-- perf-duration: \([0-9][0-9]*\)$/\1/p' "$PERF_DIR/wrk/${spec%%:*}" 2>/dev/null | head -n1)
  [[ -n $cap ]] && secs=$cap
  if [[ -n $WRK_ARG_DIR && -x $WRK_ARG_DIR/before-wrk ]]; then
    "$WRK_ARG_DIR/before-wrk" >"$out/before-wrk.log" 2>&1 || log "  before-wrk failed (see $(rel "$out/before-wrk.log"))"
  fi
  wrk_argv "$url" "$conns" "$secs" "$spec"
  # shellcheck disable=SC2034 # read by the caller
  WRK_COMMAND="LUA_PATH='perf/wrk/?.lua;;' $(quote "${WRK_ARGV[@]}")"
  # The client's CPU time is the difference of this shell's children times
  # (bash `times`, line 2) around the run: wrk is the only child reaped in
  # between. `times` runs in this shell (a builtin with a redirection, no fork).
  times >"$out/times.before"
  # wrk stops itself after SECONDS; timeout is the backstop if it hangs, and
  # passes a SIGTERM from cleanup on to wrk.
  LUA_PATH="$PERF_DIR/wrk/?.lua;;" timeout -k 5 $((secs + 30)) "${WRK_ARGV[@]}" \
    >"$out/wrk.txt" 2>"$out/wrk.err" </dev/null &
  pid=$!
  cleanup_register "$pid"
  wait "$pid" || rc=$?
  cleanup_unregister "$pid"
  times >"$out/times.after"
  # shellcheck disable=SC2034 # read by the caller
  WRK_CPU_S=$(awk 'function sec(v, p) { split(v, p, "m"); sub("s", "", p[2]); return p[1] * 60 + p[2] }
      FNR == 2 { t = sec($1) + sec($2); if (FILENAME ~ /before$/) b = t; else a = t }
      END { printf "%.3f", a - b }' "$out/times.before" "$out/times.after")
  return "$rc"
}

# shellcheck shell=bash
# perf/lib/common.sh: paths, logging and cleanup shared by perf/run and the
# other perf/lib files. Sourced, never run. Every path is computed from this
# file's location, so the harness runs from any checkout and any directory.

PERF_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_DIR=$(cd "$PERF_DIR/.." && pwd)
PERF_PY=${PERF_PY:-/usr/bin/python3}
export PERF_DIR REPO_DIR PERF_PY

log() { printf '[perf %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Processes this script started and must stop, by PID. cleanup_register adds
# one; cleanup_unregister drops one that was already stopped.
declare -a CLEANUP_PIDS=()
cleanup_register() { CLEANUP_PIDS+=("$1"); }
cleanup_unregister() {
  local pid=$1 i
  for i in "${!CLEANUP_PIDS[@]}"; do
    [[ ${CLEANUP_PIDS[$i]} == "$pid" ]] && unset "CLEANUP_PIDS[$i]"
  done
  return 0
}

# stop_pid PID [SECONDS]: SIGTERM, wait up to SECONDS (default 5), then
# SIGKILL. Only ever called with PIDs this script started.
stop_pid() {
  local pid=$1 wait_s=${2:-5} i
  kill -0 "$pid" 2>/dev/null || { wait "$pid" 2>/dev/null || true; return 0; }
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < wait_s * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    log "pid $pid ignored SIGTERM for ${wait_s}s: SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
  fi
  wait "$pid" 2>/dev/null || true
}

# Commands run by cleanup_all after those PIDs are stopped, for what was not
# started as a child (a PostgreSQL cluster a scenario started with pg_ctl):
# cleanup_register_cmd WORDS...
declare -a CLEANUP_CMDS=()
cleanup_register_cmd() { CLEANUP_CMDS+=("$(printf '%q ' "$@")"); }

cleanup_all() {
  local pid c
  for pid in "${CLEANUP_PIDS[@]}"; do
    stop_pid "$pid" 3
  done
  CLEANUP_PIDS=()
  for c in "${CLEANUP_CMDS[@]}"; do
    eval "$c" >/dev/null 2>&1 || true
  done
  CLEANUP_CMDS=()
}

# raise_nofile MIN: raise the soft open-files limit (wrk -c1000 needs one fd
# per connection, and so does the server, which inherits the limit).
raise_nofile() {
  local min=$1 hard want
  hard=$(ulimit -Hn)
  want=65536
  [[ $hard != unlimited && $hard -lt $want ]] && want=$hard
  ulimit -n "$want" 2>/dev/null || true
  (( $(ulimit -n) >= min )) || log "warning: open-files limit $(ulimit -n) < $min (hard $hard): cases with more connections will see socket errors"
}

# free_port: print a TCP port on 127.0.0.1 that nothing listens on, below the
# ephemeral range so that wrk's own connections never take it. The search
# starts at a random port: another perf/run on the same machine, asking at
# the same moment, then rarely gets the same one before either binds it.
free_port() {
  "$PERF_PY" - <<'EOF'
import random, socket
start = random.randrange(18080, 27000)
for port in list(range(start, 28000)) + list(range(18080, start)):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("no free port")
EOF
}

now_ns() { date +%s%N; }

# shellcheck shell=bash
# perf/lib/server.sh: build, start and stop the servers perf/run compares.
#
# "coring" is the server under test, built here from the tree. Every other
# server is a peer: a directory perf/peers/<name>/ with an executable `peer`
# that answers `apps`, `setup`, `version` and `exec PORT RUNDIR` (see
# perf/peers/nginx/peer). Adding a peer means adding such a directory and
# naming it in a scenario's case lines; nothing here changes.

CORING_BUILD_DIR=${CORING_BUILD_DIR:-$REPO_DIR/build-perf}
CORING_BIN=${CORING_BIN:-$CORING_BUILD_DIR/apps/coring}
CORING_APPS=${CORING_APPS:-hello,todo}
# Per app (a scenario's SCENARIO_APP), so that nothing leaks into another
# scenario: CORING_ARGS_FOR[app] replaces "--apps $CORING_APPS" on coring's
# command line (users: "--apps users"); a function scenario_up_<app>, if a
# scenario defines one, runs once in perf/run's shell before the first server
# of that app starts (a database, a fake upstream; it exports what the
# servers read, such as DATABASE_URL); its failure stops perf/run.
declare -A CORING_ARGS_FOR=() SCENARIO_UP_DONE=()

# rel TEXT: TEXT with this checkout's path dropped, for the records.
rel() {
  local s=$1
  s=${s//"$REPO_DIR/"/}
  printf '%s' "${s//"$REPO_DIR"/.}"
}

# quote WORDS...: a command line to paste into a shell, relative to the repo
# root; only words that need it are quoted.
quote() {
  local out="" w q
  for w in "$@"; do
    if [[ $w =~ ^[A-Za-z0-9_./:=,@%+-]+$ ]]; then q=$w; else printf -v q '%q' "$w"; fi
    out+=${out:+ }$q
  done
  rel "$out"
}

# shellcheck disable=SC2034 # used by the files that source this one
CORING_BUILD_COMMANDS=(
  "cmake -S . -B build-perf -DCMAKE_BUILD_TYPE=Release -DCORING_TESTS=OFF"
  "cmake --build build-perf -j2 --target coring"
)

# coring_build LOGFILE: configure and build coring (Release) into build-perf.
coring_build() {
  local log=$1
  (
    cd "$REPO_DIR" || exit
    cmake -S . -B "$CORING_BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DCORING_TESTS=OFF &&
      cmake --build "$CORING_BUILD_DIR" -j2 --target coring
  ) >"$log" 2>&1
}

# A name NAME@base (perf/run --baseline PATH) is the server NAME (coring or
# a coring-* peer, which run CORING_BIN) run from the binary BASELINE_BIN.
peer_cmd() {
  if [[ $1 == *@base ]]; then
    CORING_BIN=$BASELINE_BIN "$PERF_DIR/peers/${1%@base}/peer" "${@:2}"
  else
    "$PERF_DIR/peers/$1/peer" "${@:2}"
  fi
}

# binary_of NAME: the coring binary that NAME (coring or coring@base) runs.
binary_of() { if [[ $1 == *@base ]]; then echo "$BASELINE_BIN"; else echo "$CORING_BIN"; fi; }

# server_supports NAME APP: whether NAME implements APP.
server_supports() {
  [[ $1 == coring || $1 == coring@base ]] && return 0
  [[ -x $PERF_DIR/peers/${1%@base}/peer ]] || return 1
  # Not `peer apps | grep -q`: grep exits at the first match and, with
  # pipefail, the peer's SIGPIPE on the next line would read as "no".
  local apps
  apps=$(peer_cmd "$1" apps) || return 1
  grep -qx "$2" <<<"$apps"
}

server_version() {
  local v
  if [[ $1 == coring || $1 == coring@base ]]; then
    v=$("$(binary_of "$1")" --version 2>&1 | head -n1)
  else
    v=$(peer_cmd "$1" version 2>&1 | head -n1)
  fi
  if [[ $1 == *@base ]]; then echo "$v (baseline: $BASELINE_LABEL)"; else echo "$v"; fi
}

# server_layout NAME CPUS APP: one line, the processes/threads NAME runs.
server_layout() {
  if [[ $1 == coring || $1 == coring@base ]]; then
    echo "1 process, $2 worker thread(s) (--threads $2)"
  else
    peer_cmd "$1" layout "$2" "$3" 2>/dev/null | head -n1 || true
  fi
}

# server_size NAME: "BYTES what" of what NAME runs from disk.
server_size() {
  if [[ $1 == coring || $1 == coring@base ]]; then
    echo "$(stat -L -c %s "$(binary_of "$1")") release binary (dynamically linked: liburing, simdjson)"
  else
    peer_cmd "$1" size 2>/dev/null | head -n1 || true
  fi
}

# server_argv NAME PORT RUNDIR CPULIST NCPUS APP: fill SERVER_ARGV with the
# pinned command line and SERVER_ENV with the environment a peer reads
# (PERF_CPUS: cores given; PERF_APP: the app this case measures).
server_argv() {
  local name=$1 port=$2 rundir=$3 cpus=$4 n=$5 app=$6 apps
  if [[ -z ${SCENARIO_UP_DONE[$app]:-} ]] && declare -F "scenario_up_$app" >/dev/null; then
    SCENARIO_UP_DONE[$app]=1
    "scenario_up_$app" || die "app $app: could not set up what its servers need (scenario_up_$app)"
  fi
  SERVER_ENV=(PERF_CPUS="$n" PERF_APP="$app")
  # coring-* peers (perf/peers/coring.sh) start from coring's own options.
  [[ $name == coring-* ]] && SERVER_ENV+=(PERF_CORING_ARGS="${CORING_ARGS_FOR[$app]:---apps $CORING_APPS}")
  if [[ $name == coring || $name == coring@base ]]; then
    read -r -a apps <<<"${CORING_ARGS_FOR[$app]:---apps $CORING_APPS}"
    SERVER_ARGV=(taskset -c "$cpus" "$(binary_of "$name")" --host 127.0.0.1 --port "$port"
                 --threads "$n" "${apps[@]}" --log-level warn)
  else
    [[ $name == *@base ]] && SERVER_ENV+=(CORING_BIN="$BASELINE_BIN")
    SERVER_ARGV=(taskset -c "$cpus" "$PERF_DIR/peers/${name%@base}/peer" exec "$port" "$rundir")
  fi
}

# server_start NAME PORT RUNDIR LOGFILE CPULIST NCPUS APP [CGROUP]: start NAME
# pinned to CPULIST in the background, in CGROUP if given; sets SERVER_PID
# (the server itself: the subshell execs taskset, which execs the server)
# and SERVER_COMMAND (for the records).
server_start() {
  local name=$1 port=$2 rundir=$3 log=$4 cg=${8:-}
  server_argv "$name" "$port" "$rundir" "$5" "$6" "$7"
  (
    [[ -n $cg ]] && { echo "$BASHPID" >"$cg/cgroup.procs"; } 2>/dev/null
    exec env "${SERVER_ENV[@]}" "${SERVER_ARGV[@]}"
  ) >"$log" 2>&1 </dev/null &
  SERVER_PID=$!
  cleanup_register "$SERVER_PID"
  SERVER_COMMAND=$(quote env "${SERVER_ENV[@]}" "${SERVER_ARGV[@]}")
  SERVER_COMMAND=${SERVER_COMMAND//"$rundir"/<rundir>}
}

# server_wait URL PID: until the server answers HTTP (20 s at most).
server_wait() {
  "$PERF_PY" "$PERF_DIR/lib/http_client.py" wait "$1" --pid "$2" --timeout 20
}

server_stop() {
  stop_pid "$1" 5
  cleanup_unregister "$1"
}

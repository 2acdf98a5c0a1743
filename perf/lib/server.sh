# shellcheck shell=bash
# perf/lib/server.sh: build, start and stop the servers perf/run compares.
#
# "coring" is the server under test, built here from the tree. Every other
# server is a peer: a directory perf/peers/<name>/ with an executable `peer`
# that answers `apps`, `setup`, `version` and `exec PORT RUNDIR` (see
# perf/peers/nginx/peer). Adding a peer means adding such a directory and
# naming it in a scenario's case lines; nothing here changes.

CORING_BUILD_DIR=${CORING_BUILD_DIR:-$REPO_DIR/build-perf}
CORING_BIN=$CORING_BUILD_DIR/apps/coring
CORING_APPS=${CORING_APPS:-hello,todo}
SERVER_CPU=${PERF_SERVER_CPU:-0}
# shellcheck disable=SC2034 # used by the files that source this one
CLIENT_CPU=${PERF_CLIENT_CPU:-1}

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

peer_cmd() { "$PERF_DIR/peers/$1/peer" "${@:2}"; }

# server_supports NAME APP: whether NAME implements APP.
server_supports() {
  [[ $1 == coring ]] && return 0
  [[ -x $PERF_DIR/peers/$1/peer ]] || return 1
  peer_cmd "$1" apps | grep -qx "$2"
}

server_version() {
  if [[ $1 == coring ]]; then
    "$CORING_BIN" --version 2>&1 | head -n1
  else
    peer_cmd "$1" version 2>&1 | head -n1
  fi
}

# server_argv NAME PORT RUNDIR: fill SERVER_ARGV with the pinned command line.
server_argv() {
  local name=$1 port=$2 rundir=$3
  if [[ $name == coring ]]; then
    SERVER_ARGV=(taskset -c "$SERVER_CPU" "$CORING_BIN" --host 127.0.0.1 --port "$port"
                 --threads 1 --apps "$CORING_APPS" --log-level warn)
  else
    SERVER_ARGV=(taskset -c "$SERVER_CPU" "$PERF_DIR/peers/$name/peer" exec "$port" "$rundir")
  fi
}

# server_start NAME PORT RUNDIR LOGFILE: start NAME pinned to SERVER_CPU in
# the background; sets SERVER_PID (the server itself: taskset and peer exec)
# and SERVER_COMMAND (for the records).
server_start() {
  local name=$1 port=$2 rundir=$3 log=$4
  server_argv "$name" "$port" "$rundir"
  "${SERVER_ARGV[@]}" >"$log" 2>&1 </dev/null &
  SERVER_PID=$!
  cleanup_register "$SERVER_PID"
  SERVER_COMMAND=$(quote "${SERVER_ARGV[@]}")
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

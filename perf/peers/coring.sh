# shellcheck shell=bash
# perf/peers/coring.sh: what the coring-* peers share. Each is coring itself,
# the binary perf/run measures (CORING_BIN), one or a few flags apart,
# measured beside coring in the same rounds: not a different server. It
# starts with coring's own options for the case's app (PERF_CORING_ARGS,
# which perf/lib/server.sh sets from the scenario's CORING_ARGS_FOR) and
# then its flags, so the two differ in those flags only. Sourced by their
# `peer` scripts.

# coring_variant_peer APPS FLAGS ARGS...: answer the peer interface
# (ARGS: apps | setup | version | layout CPUS APP | size | exec PORT RUNDIR)
# for coring with FLAGS (one string, split on spaces) serving APPS (a
# space-separated list of the apps whose cases it may run in).
coring_variant_peer() {
  local apps=$1 flags=$2 bin=${CORING_BIN:-$PERF_PEERS_DIR/../../build-perf/apps/coring}
  shift 2
  local -a extra app_args
  read -r -a extra <<<"$flags"
  case "${1:-}" in
    apps) tr ' ' '\n' <<<"$apps" ;;
    setup) [[ -x $bin ]] || { echo "no coring binary at $bin (perf/run builds it first)" >&2; return 1; } ;;
    version) echo "$("$bin" --version) $flags" ;;
    layout) echo "1 process, ${2:-1} worker thread(s) (--threads ${2:-1}), $flags" ;;
    size) echo "$(stat -L -c %s "$bin") release binary (the same as coring's)" ;;
    exec)
      local port=${2:?port}
      read -r -a app_args <<<"${PERF_CORING_ARGS:?the options coring runs the app with, set by perf/lib/server.sh}"
      exec "$bin" --host 127.0.0.1 --port "$port" --threads "${PERF_CPUS:-1}" "${app_args[@]}" \
        "${extra[@]}" --log-level warn
      ;;
    *) echo "usage: peer apps|setup|version|layout CPUS APP|size|exec PORT RUNDIR" >&2; return 2 ;;
  esac
}

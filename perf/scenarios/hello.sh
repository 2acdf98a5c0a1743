# shellcheck shell=bash
# perf/scenarios/hello.sh: coring's hello app, GET / -> {"message":"hello world"}.
# Sourced by perf/run. A scenario file sets SCENARIO_APP and SCENARIO_CASES and
# defines scenario_prepare; see perf/README.md ("Adding a scenario").

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_APP=hello

# One case per entry, whitespace-separated:
#   name  connections  method  path  wrk-script[:arg]  peers(comma list)  quick|full  description...
# "quick" cases also run under --quick. coring always runs first.
# shellcheck disable=SC2034 # read by perf/run
SCENARIO_CASES=(
  "get-c50          50    GET  /  get.lua          nginx,fastify  quick  GET / keep-alive, 50 connections"
  "get-c1000        1000  GET  /  get.lua          nginx,fastify  full   GET / keep-alive, 1000 connections"
  "pipeline16-c256  256   GET  /  pipeline.lua:16  nginx          quick  GET / with 16 requests pipelined per write, 256 connections"
)

# scenario_prepare CASE BASE_URL: runs once the server answers and before the
# warm-up; prints what it checked; non-zero fails this server for this case.
scenario_prepare() {
  local case=$1 url=$2
  "$PERF_PY" "$PERF_DIR/lib/http_client.py" check-hello "$url/" || return 1
  if [[ $case == pipeline* ]]; then
    "$PERF_PY" "$PERF_DIR/lib/http_client.py" check-pipeline "$url/" --depth 16 || return 1
  fi
}

# scenario_notes CASE: one line for the report, or nothing.
scenario_notes() {
  case $1 in
    pipeline*) echo "wrk counts every response, so req/s is responses/s; latency is per batch of 16, and wrk's high percentiles often come back empty (—) here." ;;
  esac
}

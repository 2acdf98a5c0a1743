# shellcheck shell=bash
# perf/scenarios/hello.sh: coring's hello app, GET / -> {"message":"hello world"}.
# Sourced by perf/run. A scenario file sets SCENARIO_APP, SCENARIO_PROBE (the
# path cold starts wait on) and SCENARIO_CASES and defines scenario_prepare;
# see perf/README.md ("Adding a scenario").

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_APP=hello
# shellcheck disable=SC2034
SCENARIO_PROBE=/

HELLO_PEERS=floor,nginx,fastapi,fastify,express,go-nethttp,go-fasthttp,rust-hyper
# coring-pin-on: coring with --pin on beside coring (unpinned, the default),
# for the shape where wrk shares a core with the server (docs/configuration.md).
HELLO_PIN=coring-pin-on
# coring-batch-wait-off: coring with --batch-wait 0 (each loop turn returns at
# its first completion) beside coring (200 us, the default; docs/runtime.md).
HELLO_BATCH=coring-batch-wait-off
# The cost of issue 43's features on GET /, each beside coring in the same
# rounds: coring-ratelimit-on (--rate-limit at its largest: every request
# admitted, the lookup paid), coring-deadline-on (--deadline 5s; hello has no
# deadline by default), coring-trace-off (--trace-context off; on by default).
HELLO_FEATURES=coring-ratelimit-on,coring-deadline-on,coring-trace-off
# The coring-* peers run the binary perf/run measures.
export CORING_BIN

# One case per entry, whitespace-separated:
#   name  connections  method  path  wrk-script[:arg]  peers(comma list)  mode  description...
# mode: quick = also under --quick; quick1 = also under --quick, 1-core shape
# only; full = full runs only. coring always runs first. Every case runs in
# every shape of --cpus (1 and 2 cores).
# shellcheck disable=SC2034 # read by perf/run
SCENARIO_CASES=(
  "get-c50          50    GET  /  get.lua          $HELLO_PIN,$HELLO_BATCH,$HELLO_FEATURES,$HELLO_PEERS  quick   GET / keep-alive, 50 connections"
  "get-c1000        1000  GET  /  get.lua          $HELLO_PIN,$HELLO_BATCH,$HELLO_PEERS  full    GET / keep-alive, 1000 connections"
  "pipeline16-c256  256   GET  /  pipeline.lua:16  $HELLO_BATCH,$HELLO_FEATURES,floor,nginx  full    GET / with 16 requests pipelined per write, 256 connections"
)

# scenario_prepare CASE BASE_URL SERVER_DIR: runs once the server answers and
# before the warm-up; prints what it checked; non-zero fails this server for
# this case. SERVER_DIR is where the server's results go (files for wrk).
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
    pipeline*) echo "wrk counts every response, so req/s is responses/s; latency is per batch of 16, and wrk's high percentiles often come back empty (—) here. floor answers each request end it reads and parses nothing (perf/peers/floor). coring-ratelimit-on, coring-deadline-on and coring-trace-off: coring with --rate-limit 1000000, --deadline 5s, --trace-context off." ;;
    get*) echo "floor is a minimal C epoll server that answers every request end it reads with one fixed response and parses nothing: the kernel's loopback cost per request (perf/peers/floor); coring-pin-on is coring with --pin on (coring's default is off); coring-batch-wait-off is coring with --batch-wait 0 (coring's default is 200 us); coring-ratelimit-on, coring-deadline-on and coring-trace-off are coring with --rate-limit 1000000 (every request admitted: the lookup's cost), --deadline 5s (hello has none by default) and --trace-context off (on by default: a traceresponse on every response)." ;;
  esac
}

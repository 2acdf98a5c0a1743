# shellcheck shell=bash
# perf/scenarios/todo.sh: coring's todo app (in-memory todo list, JSON API).
# Sourced by perf/run; format described in perf/scenarios/hello.sh.

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_APP=todo
# shellcheck disable=SC2034
SCENARIO_PROBE=/todos

# coring-nocache (perf/peers/coring-nocache): the binary perf/run built with
# --todo-list-cache off, so every case shows coring both ways.
TODO_PEERS=coring-nocache,fastapi,fastify,express,go-nethttp,go-fasthttp,rust-hyper
export CORING_BIN

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_CASES=()
for c in 50 100 500 1000; do
  mode=full
  ((c == 100)) && mode=quick1
  SCENARIO_CASES+=(
    "get-todos-c$c  $c  GET   /todos       get.lua               $TODO_PEERS  $mode  GET /todos with 100 todos preloaded, $c connections"
    "get-todo-c$c   $c  GET   /todos/{id}  get_todo.lua:@DIR@/ids.txt  $TODO_PEERS  $mode  GET /todos/{id} over the ids of 100 preloaded todos, $c connections"
    "post-todo-c$c  $c  POST  /todos       post_todo.lua         $TODO_PEERS  $mode  POST /todos (one JSON body, 201 + Location), $c connections"
  )
done
unset c mode

TODO_PRELOAD=100

# post-todo-* creates a todo per request (millions in a run): lift coring's
# store bound (--todo-max-items, default 25,000) far above that, as the
# peers have none. 8M: 4M a thread on two threads; ~1.2 GB at its titles.
# shellcheck disable=SC2034 # read by perf/lib/server.sh
CORING_ARGS_FOR[todo]="--apps $CORING_APPS --todo-max-items 8000000"

scenario_prepare() {
  local case=$1 url=$2 dir=$3 py=("$PERF_PY" "$PERF_DIR/lib/http_client.py")
  case $case in
    get-todos*)
      # Same 100 titles ("todo 1".."todo 100") on every server.
      "${py[@]}" preload "$url" --count "$TODO_PRELOAD" || return 1
      "${py[@]}" check-todos "$url" --count "$TODO_PRELOAD" || return 1
      ;;
    get-todo-*)
      # The ids come from the server itself (coring's are sharded by thread).
      "${py[@]}" preload "$url" --count "$TODO_PRELOAD" || return 1
      "${py[@]}" ids "$url" --out "$dir/ids.txt" || return 1
      "${py[@]}" check-todo "$url" --ids "$dir/ids.txt" || return 1
      ;;
    post-todo*)
      "${py[@]}" check-post "$url" || return 1
      ;;
  esac
}

scenario_notes() {
  case $1 in
    get-todos*) echo "Each server starts empty; 100 todos (titles \"todo 1\"..\"todo 100\") are POSTed before the warm-up: the response body is about 4.6 KB. coring caches the list's JSON (--todo-list-cache on, its default: each thread keeps the body it built until a write on any thread, exact after each write's response); no write happens during the runs, so coring answers every GET from that cache. coring-nocache is the same binary with --todo-list-cache off: it serialises the list per request, as every peer does (shards asked at once, merged by id)." ;;
    get-todo-*) echo "100 todos are POSTed first; wrk cycles over the ids the server's own GET /todos lists (perf/wrk/get_todo.lua), so every request hits an existing todo. The list cache plays no part here (coring-nocache: --todo-list-cache off)." ;;
    post-todo*) echo "Every request creates a todo, so the in-memory list grows through warm-up and runs; that is part of what is measured. A write only marks its shard changed (coring-nocache: --todo-list-cache off, the same cost)." ;;
  esac
}

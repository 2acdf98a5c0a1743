# shellcheck shell=bash
# perf/scenarios/todo.sh: coring's todo app (in-memory todo list, JSON API).
# Sourced by perf/run; format described in perf/scenarios/hello.sh.

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_APP=todo

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_CASES=(
  "get-todos-c100  100  GET   /todos  get.lua        fastify  quick  GET /todos with 100 todos preloaded, 100 connections"
  "post-todo-c100  100  POST  /todos  post_todo.lua  fastify  quick  POST /todos (one JSON body, 201 + Location), 100 connections"
)

TODO_PRELOAD=100

scenario_prepare() {
  local case=$1 url=$2 py=("$PERF_PY" "$PERF_DIR/lib/http_client.py")
  case $case in
    get-todos*)
      # Same 100 titles ("todo 1".."todo 100") on every server.
      "${py[@]}" preload "$url" --count "$TODO_PRELOAD" || return 1
      "${py[@]}" check-todos "$url" --count "$TODO_PRELOAD" || return 1
      ;;
    post-todo*)
      "${py[@]}" check-post "$url" || return 1
      ;;
  esac
}

scenario_notes() {
  case $1 in
    get-todos*) echo "Each server starts empty; 100 todos (titles \"todo 1\"..\"todo 100\") are POSTed before the warm-up: the response body is about 4.6 KB." ;;
    post-todo*) echo "Every request creates a todo, so the in-memory list grows through warm-up and runs (to millions of entries on a fast server); that is part of what is measured." ;;
  esac
}

# shellcheck shell=bash
# perf/scenarios/users.sh: coring's users app (PostgreSQL) against its peers.
# Sourced by perf/run; format described in perf/scenarios/hello.sh.
#
# Every server of the scenario uses one throw-away PostgreSQL cluster that
# the scenario starts (perf/lib/pg.sh: no fsync, Unix socket), seeded once
# with 10,000 users (ids 1..10000) by `coring --seed-users 10000`. coring
# runs `--apps users` with its defaults (--db-pool 2 per thread). Before
# the GET /users/{id} cases are measured, pgbench measures what PostgreSQL
# itself answers for the same query (a reference, not a ceiling: pgbench is
# a one-thread client on wrk's core; see users_ceiling).

# shellcheck source=../lib/pg.sh
source "$PERF_DIR/lib/pg.sh"

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_APP=users
# shellcheck disable=SC2034
SCENARIO_PROBE=/users/1
CORING_ARGS_FOR[users]="--apps users"

# coring-pack and coring-spread (perf/peers/): coring with --db-routing pack
# and spread beside coring (fill, the default; docs/database.md).
USERS_PEERS=coring-pack,coring-spread,fastapi-sqlalchemy,rust-hyper-pg
# coring-coalesce-off: coring with --db-coalesce off, each insert its own
# INSERT as the peers send theirs (on, coring's default, sends concurrent
# inserts as one INSERT ... SELECT FROM unnest; docs/database.md). Only
# inserts have a batch form, so only the POST case runs it.
POST_PEERS=$USERS_PEERS,coring-coalesce-off
# The coring-* peers run the binary perf/run measures.
export CORING_BIN

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_CASES=(
  "get-user-c10     10   GET   /users/{id}  get_user.lua:$PG_SEED_USERS  $USERS_PEERS  quick1  GET /users/{id}, random ids over the 10,000 seeded users, 10 connections"
  "get-user-c256    256  GET   /users/{id}  get_user.lua:$PG_SEED_USERS  $USERS_PEERS  quick1  GET /users/{id}, random ids over the 10,000 seeded users, 256 connections"
  "list-users-c10   10   GET   /users       get.lua                      $USERS_PEERS  quick1  GET /users (the first 50 users by id, ~6 KB), 10 connections"
  "list-users-c256  256  GET   /users       get.lua                      $USERS_PEERS  full    GET /users (the first 50 users by id, ~6 KB), 256 connections"
  "post-user-c64    64   POST  /users       post_user.lua                $POST_PEERS   quick1  POST /users with a unique email per request (201 + Location), 64 connections"
)

# The hook perf/lib/server.sh runs before the first users server starts.
scenario_up_users() { pg_up; }

# users_ceiling CONNS OUTFILE: pgbench's prepared primary-key SELECT (coring's
# statement, random id over the seeded users; the time format's colons are
# put in by replace(), as pgbench would take ":MI" for a variable) at CONNS
# connections, one
# thread on wrk's CPU, $runs runs of $duration s; the median tps into
# OUTFILE (a case's reference.txt, shown under its table).
users_ceiling() {
  local conns=$1 out=$2 script tps=() i t
  script=$(dirname "$out")/pgbench-get-user.sql
  cat >"$script" <<SQL
\\set id random(1, $PG_SEED_USERS)
SELECT id, name, email, replace(to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24|MI|SS.US"Z"'), '|', ':') FROM users WHERE id = :id;
SQL
  # pgbench's -T counts the time its one thread takes to open the
  # connections (at 256, seconds here: every one forks a backend); a run
  # that spent over a fifth of -T connecting is run again with -T raised by
  # twice that time, so that the clients query for about $duration s.
  local T=$duration conn_ms txt err
  for ((i = 1; i <= runs; i++)); do
    txt=$(dirname "$out")/pgbench-$i.txt err=$(dirname "$out")/pgbench-$i.err
    taskset -c "$CLIENT_CPU" pgbench -n -M prepared -c "$conns" -j 1 -T "$T" -f "$script" \
      -h "$(pg_socket)" -p 5432 -U coring coring 2>"$err" >"$txt"
    conn_ms=$(sed -n 's/^initial connection time = \([0-9]*\).*/\1/p' "$txt")
    # No connection time printed: no transaction ended within -T (at 256
    # connections on 2 loaded cores, connecting alone can take all of it);
    # count it as -T and 4 s more.
    [[ -n $conn_ms ]] || conn_ms=$((T * 1000 + 4000))
    if ((conn_ms * 5 > T * 1000)); then
      T=$((duration + 2 * (conn_ms / 1000 + 1)))
      echo "pgbench took $conn_ms ms or more to connect: run $i again with -T $T"
      taskset -c "$CLIENT_CPU" pgbench -n -M prepared -c "$conns" -j 1 -T "$T" -f "$script" \
        -h "$(pg_socket)" -p 5432 -U coring coring 2>"$err" >"$txt"
    fi
    t=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time)$/\1/p' "$txt")
    [[ -n $t ]] && tps+=("$t")
  done
  if ((${#tps[@]} == 0)); then
    # The reference is beside the servers, not one of them: say it was not
    # measured and let the case go on (report.py shows why).
    {
      echo "name=pgbench -M prepared, $conns connections"
      echo "failed=pgbench ended no transaction in -T $T s (raw/.../pgbench-*.txt and .err of this case)"
    } >"$out"
    echo "pgbench gave no tps at $conns connections: the reference is left out"
    return 0
  fi
  {
    echo "name=pgbench -M prepared, $conns connections, same SELECT by random id (median of ${#tps[@]} run(s) of -T ${T} s)"
    echo "note=pgbench is one client thread on wrk's CPU, measured as a server is: a peer, not PostgreSQL's ceiling (coring, 2 pipelined connections a thread, can pass it)"
    echo "rps=$(printf '%s\n' "${tps[@]}" | sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')"
    echo "command=pgbench -n -M prepared -c $conns -j 1 -T $T -f pgbench-get-user.sql (taskset -c $CLIENT_CPU)"
  } >"$out"
  echo "ok pgbench reference at $conns connections: ${tps[*]} tps"
}

scenario_prepare() {
  local case=$1 url=$2 dir=$3 py=("$PERF_PY" "$PERF_DIR/lib/db_checks.py")
  case $case in
    get-user-*)
      "${py[@]}" check-user "$url" --count "$PG_SEED_USERS" || return 1
      # The ceiling once per case, before coring (the first server) is measured.
      if [[ ${dir##*/} == coring ]]; then
        # CASE is <name>-<N>cpu: get-user-c10-1cpu -> 10 connections.
        local conns=${case#get-user-c}
        users_ceiling "${conns%%-*}" "${dir%/*}/reference.txt" || return 1
      fi
      ;;
    list-users-*) "${py[@]}" check-list "$url" || return 1 ;;
    post-user-*) "${py[@]}" check-post-user "$url" || return 1 ;;
  esac
}

scenario_notes() {
  case $1 in
    get-user-*) echo "One throw-away PostgreSQL 15 cluster (no fsync) for every server, 10,000 seeded users; each request reads one row by primary key. The servers' CPU µs/req does not include PostgreSQL's own CPU. The reference line below the table is pgbench on the same query and connection count (coring's pool is 2 connections per thread, pipelined). coring-pack and coring-spread are the same binary with --db-routing pack and spread (coring's default is fill)." ;;
    list-users-*) echo "Each request reads the first 50 rows by id (~6 KB of JSON). PostgreSQL's CPU is not in the servers' CPU µs/req. coring-pack, coring-spread: --db-routing pack, spread." ;;
    post-user-*) echo "Every request inserts a user (unique email per request, perf/wrk/post_user.lua): the table grows during the run. The cluster runs without fsync (throw-away), so commits do not wait on the disk. coring coalesces the inserts queued together on a connection into one INSERT ... SELECT FROM unnest (each request still gets its own row, and its own 409 on a conflict); the peers send one INSERT per request, and so does coring-coalesce-off (--db-coalesce off): compare with both. coring-pack, coring-spread: --db-routing pack, spread." ;;
  esac
}

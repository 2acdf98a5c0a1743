# shellcheck shell=bash
# perf/lib/pg.sh: the PostgreSQL cluster (and the fake ViaCEP upstream) that
# the users and cep scenarios share. Sourced by those scenario files; the
# functions run in perf/run's shell from their scenario_up_<app> hooks.
#
# One throw-away cluster per perf/run invocation (db/pg-local start DIR
# throwaway: fsync, synchronous_commit and full_page_writes off, so that a
# busy shared disk does not decide the figures), on a Unix socket in a fresh
# /tmp directory, stopped and removed when perf/run exits. Every server of a
# scenario uses the same cluster. Its schema is applied by coring itself
# (its migrations run at start-up), and the users table is seeded once with
# 10,000 users by `coring --seed-users 10000` (ids 1..10000).

PG_SEED_USERS=10000
PG_MAX_CONNECTIONS=400 # pgbench -c 256 next to the servers' own pools
PG_DIR=${PG_DIR:-}

# pg_psql ARGS...: psql on the scenario cluster.
pg_psql() { "$REPO_DIR/db/pg-local" psql "$PG_DIR" "$@"; }

# pg_socket: the directory of the cluster's Unix socket.
pg_socket() { echo "$PG_DIR/run"; }

# pg_up: create, start, migrate and seed the cluster once; exports
# DATABASE_URL (libpq key=value conninfo) for the servers.
pg_up() {
  [[ -n ${PG_STARTED:-} ]] && return 0
  local pgctl=$REPO_DIR/db/pg-local port pid i
  [[ -x $CORING_BIN ]] || { log "pg: no coring binary to apply the schema with"; return 1; }
  PG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/coring-perf-pg.XXXXXX")
  chmod 755 "$PG_DIR"   # the postgres user must reach it when we are root
  cleanup_register_cmd "$pgctl" stop "$PG_DIR" immediate
  cleanup_register_cmd rm -rf "$PG_DIR"
  log "pg: starting a throw-away PostgreSQL cluster (no fsync) on a Unix socket"
  "$pgctl" start "$PG_DIR" throwaway >"$raw/pg-start.log" 2>&1 || { cat "$raw/pg-start.log" >&2; return 1; }
  # Room for pgbench -c 256 beside the servers' pools: takes a restart.
  pg_psql -c "ALTER SYSTEM SET max_connections = $PG_MAX_CONNECTIONS" >>"$raw/pg-start.log" 2>&1 || return 1
  "$pgctl" stop "$PG_DIR" fast >>"$raw/pg-start.log" 2>&1 && "$pgctl" start "$PG_DIR" >>"$raw/pg-start.log" 2>&1 || return 1
  PG_STARTED=1
  DATABASE_URL=$("$pgctl" url "$PG_DIR")
  export DATABASE_URL
  # Migrations and the seed: coring once, then stopped.
  port=$(free_port)
  DATABASE_URL=$DATABASE_URL "$CORING_BIN" --host 127.0.0.1 --port "$port" --threads 1 \
    --apps users,cep --seed-users "$PG_SEED_USERS" --log-level info >"$raw/pg-seed.log" 2>&1 </dev/null &
  pid=$!
  cleanup_register "$pid"
  "$PERF_PY" "$PERF_DIR/lib/http_client.py" wait "http://127.0.0.1:$port/users/1" --pid "$pid" --timeout 60 \
    >>"$raw/pg-seed.log" 2>&1 || { stop_pid "$pid"; cleanup_unregister "$pid"; cat "$raw/pg-seed.log" >&2; return 1; }
  stop_pid "$pid"
  cleanup_unregister "$pid"
  i=$(pg_psql -At -c "SELECT count(*) || ' ' || min(id) || ' ' || max(id) FROM users")
  [[ $i == "$PG_SEED_USERS 1 $PG_SEED_USERS" ]] || { log "pg: seeded users: got '$i'"; return 1; }
  pg_psql -c "VACUUM ANALYZE" >/dev/null 2>&1 || true
  {
    echo "command.pg=db/pg-local start <dir> throwaway; ALTER SYSTEM SET max_connections = $PG_MAX_CONNECTIONS; restart"
    echo "command.seed=coring --apps users,cep --seed-users $PG_SEED_USERS (migrations + seed, then stopped)"
    echo "version.postgresql=$(pg_psql -At -c 'SHOW server_version' 2>/dev/null)"
  } >>"$raw/meta.txt"
  log "pg: up, $PG_SEED_USERS users seeded (ids 1..$PG_SEED_USERS)"
}

# CEPs: the fake upstream serves make-data.py's records plus CEP_DERIVED derived
# ones; the benchmark uses CEP_BENCH of them, the checks others.
CEP_DERIVED=4000
CEP_BENCH=3000
CEP_DELAY_MS=20

# fake_viacep_up: build and start coring-fake-viacep (1 thread, pinned to the
# client's CPU, added latency CEP_DELAY_MS); exports VIACEP_URL and sets
# FAKE_URL, CEP_DATA (the data file) and CEP_LIST (the benchmark CEPs, 8
# digits, one a line, in a fixed shuffled order).
fake_viacep_up() {
  [[ -n ${FAKE_URL:-} ]] && return 0
  local bin=$CORING_BUILD_DIR/apps/coring-fake-viacep port pid
  log "cep: building coring-fake-viacep and its data (make-data.py --derived $CEP_DERIVED)"
  (cd "$REPO_DIR" && cmake --build "$CORING_BUILD_DIR" -j2 --target coring-fake-viacep) >"$raw/fake-viacep-build.log" 2>&1 ||
    { tail -n 20 "$raw/fake-viacep-build.log" >&2; return 1; }
  CEP_DATA=$raw/viacep.jsonl
  "$REPO_DIR/apps/fake_viacep/make-data.py" --derived "$CEP_DERIVED" >"$CEP_DATA" 2>"$raw/viacep-data.log" || return 1
  CEP_LIST=$raw/ceps.txt
  # Records after the first (01001-000 and the OpenCEP sample sort early):
  # a fixed shuffle of CEP_BENCH of them; the checks use CEPs outside it.
  "$PERF_PY" - "$CEP_DATA" "$CEP_BENCH" >"$CEP_LIST" <<'EOF' || return 1
import json, random, sys
ceps = [json.loads(l)["cep"].replace("-", "") for l in open(sys.argv[1], encoding="utf-8") if l.strip()]
n = int(sys.argv[2])
if len(ceps) < n + 10:
    sys.exit("not enough CEPs")
bench = ceps[:n]
random.Random(20240601).shuffle(bench)
print("\n".join(bench))
EOF
  port=$(free_port)
  taskset -c "$CLIENT_CPU" "$bin" --host 127.0.0.1 --port "$port" --threads 1 --data "$CEP_DATA" \
    --delay-ms "$CEP_DELAY_MS" >"$raw/fake-viacep.log" 2>&1 </dev/null &
  pid=$!
  cleanup_register "$pid"
  "$PERF_PY" "$PERF_DIR/lib/http_client.py" wait "http://127.0.0.1:$port/_fake/stats" --pid "$pid" --timeout 20 \
    >/dev/null || { cat "$raw/fake-viacep.log" >&2; return 1; }
  FAKE_URL=http://127.0.0.1:$port
  VIACEP_URL=$FAKE_URL/ws
  export VIACEP_URL
  {
    echo "command.fake_viacep=taskset -c $CLIENT_CPU coring-fake-viacep --threads 1 --data <make-data.py --derived $CEP_DERIVED> --delay-ms $CEP_DELAY_MS"
  } >>"$raw/meta.txt"
  log "cep: fake ViaCEP up at $FAKE_URL ($(wc -l <"$CEP_DATA") records, ${CEP_DELAY_MS} ms added latency)"
}

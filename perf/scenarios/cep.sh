# shellcheck shell=bash
# perf/scenarios/cep.sh: coring's cep app (PostgreSQL cache-aside in front of
# ViaCEP) against its peer. Sourced by perf/run; format described in
# perf/scenarios/hello.sh.
#
# One throw-away PostgreSQL cluster (perf/lib/pg.sh) and one
# coring-fake-viacep (1 thread, on wrk's CPU) answering every lookup after
# a fixed added latency of 20 ms, for every server. The CEPs: make-data.py
# --derived 4000, of which a fixed shuffle of 3,000 is the benchmark set
# and others serve the checks.
#
#   cold-20k-c50  the published comparison: 20,000 requests at 50 connections
#                 over the 3,000 CEPs, cycling through them, with the table
#                 emptied (TRUNCATE cep_addresses) before every wrk run of
#                 every server (warm-up included): the first 3,000 requests
#                 miss (upstream + INSERT), the other 17,000 hit. wrk is
#                 time-based: perf/wrk/cep_count.lua stops it after 20,000
#                 responses (see there); -d is only a 300 s cap.
#   hit-c50       the cache-hit path: the server first GETs every CEP once
#                 (filling the table through itself), then wrk cycles over
#                 the same CEPs for the usual duration: every request is a
#                 primary-key SELECT and no upstream call.

# shellcheck source=../lib/pg.sh
source "$PERF_DIR/lib/pg.sh"

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_APP=cep
# shellcheck disable=SC2034
SCENARIO_PROBE=/api/v1/cep/01310100  # in the fake's data (OpenCEP sample)
CORING_ARGS_FOR[cep]="--apps cep"

CEP_PEERS=fastapi-psycopg
CEP_REQUESTS=20000

# shellcheck disable=SC2034 # read by perf/run
SCENARIO_CASES=(
  "cold-20k-c50  50  GET  /api/v1/cep/{cep}  cep_count.lua:@DIR@/ceps.txt:$CEP_REQUESTS  $CEP_PEERS  quick1  20,000 requests over 3,000 CEPs starting uncached (misses: fake upstream + 20 ms), 50 connections"
  "hit-c50       50  GET  /api/v1/cep/{cep}  cep.lua:@DIR@/ceps.txt                      $CEP_PEERS  quick1  the same 3,000 CEPs, all cached (primary-key SELECT), 50 connections"
)

scenario_up_cep() { pg_up && fake_viacep_up; }

scenario_prepare() {
  local case=$1 url=$2 dir=$3 py=("$PERF_PY" "$PERF_DIR/lib/db_checks.py") check down missing
  # The checks use CEPs outside the benchmark set: the data's last two.
  check=$(tail -n1 "$CEP_DATA" | sed 's/^{"cep":"\([0-9]*\)-\([0-9]*\)".*/\1\2/')
  down=$(tail -n2 "$CEP_DATA" | head -n1 | sed 's/^{"cep":"\([0-9]*\)-\([0-9]*\)".*/\1\2/')
  missing=99999999
  grep -q '"cep":"99999-999"' "$CEP_DATA" && { echo "FAIL 99999-999 is in the fake's data"; return 1; }
  pg_psql -c "DELETE FROM cep_addresses WHERE cep IN ('$check', '$down')" >/dev/null || return 1
  "${py[@]}" check-cep "$url" --fake "$FAKE_URL" --cep "$check" --down-cep "$down" --missing "$missing" || return 1
  cp "$CEP_LIST" "$dir/ceps.txt"
  case $case in
    cold-*)
      # perf/lib/wrk.sh runs this before each of this server's wrk runs.
      printf '#!/bin/sh\nexec %q psql %q -c "TRUNCATE cep_addresses"\n' "$REPO_DIR/db/pg-local" "$PG_DIR" >"$dir/before-wrk"
      chmod +x "$dir/before-wrk"
      echo "ok before every wrk run: TRUNCATE cep_addresses (each run starts uncached)"
      ;;
    hit-*)
      pg_psql -c "TRUNCATE cep_addresses" >/dev/null || return 1
      "${py[@]}" fill-cep "$url" --ceps "$dir/ceps.txt" --threads 50 || return 1
      ;;
  esac
}

scenario_notes() {
  case $1 in
    cold-*) echo "Count-bounded: each run is 20,000 requests (perf/wrk/cep_count.lua stops wrk at the 20,000th response; a few already read are counted too), so req/s = 20,000 ÷ the time taken. The table is emptied before every run (warm-up included): 3,000 misses (fake ViaCEP, +20 ms each, then INSERT) and 17,000 hits. non-2xx + socket err are the failed requests. One PostgreSQL (no fsync) and one fake upstream for every server; their CPU is not in the servers' CPU µs/req." ;;
    hit-*) echo "Every CEP was fetched once through the server before the warm-up, so every request is a primary-key SELECT (no upstream). PostgreSQL's CPU is not in the servers' CPU µs/req." ;;
  esac
}

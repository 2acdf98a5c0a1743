#!/usr/bin/env bash
# perf/compression.sh: what response compression costs and saves
# (docs/compression.md), on GET /users (50 users), GET /todos (--todos
# items) and POST /embed (with --embed-model DIR), in two parts:
#   1. levels: each coding at each level on the bodies coring serves,
#      without HTTP (perf/tools/coring-compress-levels): CPU us per
#      compression and bytes out;
#   2. server: coring, then nginx (`gzip on`, gzip_comp_level 1 as coring's
#      gzip, serving the same bodies as static files) in the same run, under
#      wrk sending one Accept-Encoding (identity, gzip, br, zstd): server CPU
#      us per response (utime + stime over the requests wrk made,
#      perf/lib/proc.sh) and bytes per response (header + body, as curl
#      receives it).
# Server on CPU 0 (one worker thread; nginx one worker), wrk on CPU 1.
# --runs N (default 3) measures each server's rows N times, the codings
# taking turns within a round, so that a noisy moment lands on one row of
# one round, not on one coding; a line is printed per row and round.
# Every wrk run is bounded by --seconds; PostgreSQL is a throw-away cluster
# (db/pg-local), removed at exit.
# --out DIR also writes DIR/compression.md (both parts as Markdown tables,
# each coding's CPU and bytes beside identity's, with the command, the
# commit and the machine: perf/publish --attach puts it in perf/RESULTS.md)
# and DIR/output.txt (what it printed).
#   perf/compression.sh --coring build-rel/apps/coring [--seconds 5]
#                       [--connections 16] [--todos 100] [--embed-model DIR]
#                       [--levels-tool PATH] [--no-nginx] [--runs N] [--out DIR]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/proc.sh
source "$repo/perf/lib/proc.sh"

bin="" seconds=5 runs=3 conns=16 todos=100 model="" levels_tool="" nginx=1 out=""
command_line="perf/compression.sh $*"
while (($#)); do
  case $1 in
    --coring) bin=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --runs) runs=$2; shift ;;
    --connections) conns=$2; shift ;;
    --todos) todos=$2; shift ;;
    --embed-model) model=$2; shift ;;
    --levels-tool) levels_tool=$2; shift ;;
    --no-nginx) nginx=0 ;;
    --out) out=$2; shift ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "compression.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x $bin ]] || { echo "compression.sh: --coring PATH to a built coring" >&2; exit 2; }
[[ $runs =~ ^[1-9][0-9]?$ ]] || { echo "compression.sh: --runs 1..99" >&2; exit 2; }
if [[ -n $out ]]; then
  mkdir -p "$out" || exit 2
  out=$(realpath "$out")
fi
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
# Everything printed from here on also goes to DIR/output.txt.
if [[ -n $out ]]; then exec > >(tee "$out/output.txt"); fi
[[ -n $levels_tool ]] || levels_tool=$(dirname "$bin")/../perf/tools/coring-compress-levels
levels_tool=$(realpath -m "$levels_tool")
for tool in wrk taskset curl; do
  command -v $tool >/dev/null || { echo "compression.sh: needs $tool (.ci/install-deps perf)" >&2; exit 77; }
done
nginx_bin=${NGINX_BIN:-/usr/sbin/nginx}
if ((nginx)) && [[ ! -x $nginx_bin ]]; then
  echo "compression.sh: no nginx at $nginx_bin: nginx rows left out"; nginx=0
fi

dir=$(mktemp -d "${TMPDIR:-/tmp}/coring-compression.XXXXXX")
chmod 755 "$dir"
server=""
cleanup() {
  if [[ -n $server ]]; then kill "$server" 2>/dev/null; wait "$server" 2>/dev/null; fi
  "$repo/db/pg-local" stop "$dir/pg" immediate >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT
mkdir "$dir/pg" "$dir/bodies"
chmod 755 "$dir/pg"
"$repo/db/pg-local" start "$dir/pg" throwaway >"$dir/pg.log" 2>&1 || { cat "$dir/pg.log" >&2; exit 1; }
DATABASE_URL=$("$repo/db/pg-local" url "$dir/pg")
export DATABASE_URL
port=$((20000 + RANDOM % 20000))
base=http://127.0.0.1:$port

apps=users,todo embed_args=()
if [[ -n $model ]]; then apps+=,embed; embed_args=(--embed-model "$model"); fi
taskset -c 0 "$bin" --host 127.0.0.1 --port "$port" --threads 1 --apps "$apps" --log-level warn \
  --seed-users 10000 "${embed_args[@]}" >"$dir/coring.log" 2>&1 &
server=$!
for _ in $(seq 300); do
  curl -fs -o /dev/null "$base/readyz" && break
  kill -0 "$server" 2>/dev/null || { cat "$dir/coring.log" >&2; exit 1; }
  sleep 0.1
done
for i in $(seq "$todos"); do
  curl -fs -o /dev/null -H 'Content-Type: application/json' \
    -d "{\"title\":\"todo $i: a title of the length people write\"}" "$base/todos"
done
curl -fs "$base/users" -o "$dir/bodies/users.json"
curl -fs "$base/todos" -o "$dir/bodies/todos.json"
routes=("/users" "/todos")
if [[ -n $model ]]; then
  echo '{"text":"The quick brown fox jumps over the lazy dog, twice in one sentence."}' >"$dir/embed.jsonl"
  curl -fs -H 'Content-Type: application/json' -d @"$dir/embed.jsonl" "$base/embed" -o "$dir/bodies/embed.json"
  routes+=("/embed")
else
  echo "compression.sh: no --embed-model: POST /embed left out"
fi

echo "== 1. levels (no HTTP): us CPU per compression, bytes out"
if [[ -x $levels_tool ]]; then
  (cd "$dir/bodies" && "$levels_tool" --iterations 200 ./*.json) | tee "$dir/levels.txt" | column -t
else
  echo "no $levels_tool (build the perf/tools target coring-compress-levels): left out"
fi

export LUA_PATH="$repo/perf/wrk/?.lua;;"
# measure NAME URL CODING: one line of the server part (POST /embed
# through perf/wrk/embed.lua, the others GET).
measure() {
  local name=$1 url=$2 coding=$3 t0 t1 reqs bytes
  local ae=(-H "Accept-Encoding: $coding") post=() script=() tail=()
  if [[ $url == */embed ]]; then
    post=(-H 'Content-Type: application/json' -d @"$dir/embed.jsonl")
    script=(-s "$repo/perf/wrk/embed.lua") tail=(-- "$dir/embed.jsonl")
  fi
  bytes=$(curl -s "${ae[@]}" "${post[@]}" -o /dev/null -w '%{size_header} %{size_download}' "$url" |
          awk '{print $1 + $2}')
  t0=$(proc_cpu_ticks "$server")
  reqs=$(taskset -c 1 wrk -t1 -c"$conns" -d"${seconds}s" "${ae[@]}" "${script[@]}" "$url" "${tail[@]}" |
         awk '/requests in/ {print $1}')
  t1=$(proc_cpu_ticks "$server")
  awk -v n="$name" -v u="/${url##*/}" -v c="$coding" -v r="$reqs" -v t=$((t1 - t0)) \
    -v hz="$CLK_TCK" -v b="$bytes" \
    'BEGIN { printf "%-8s %-8s %-8s %10d requests %9.2f us CPU/response %7d bytes/response\n",
             n, u, c, r, r ? t / hz * 1e6 / r : 0, b }' | tee -a "$dir/server.txt"
}

echo "== 2. server: us CPU per response, bytes per response (header + body)"
for _ in $(seq "$runs"); do
  for route in "${routes[@]}"; do
    for coding in identity gzip br zstd; do
      measure coring "$base$route" "$coding"
    done
  done
done
kill "$server"; wait "$server" 2>/dev/null || true; server=""

if ((nginx)); then
  mkdir -p "$dir/nginx/tmp" "$dir/nginx/docroot"
  cp "$dir"/bodies/*.json "$dir/nginx/docroot/"
  cat >"$dir/nginx/nginx.conf" <<EOF
worker_processes 1;
pid nginx.pid;
error_log error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    server_tokens off;
    keepalive_requests 1000000;
    tcp_nodelay on;
    client_body_temp_path tmp/client_body;
    proxy_temp_path tmp/proxy;
    fastcgi_temp_path tmp/fastcgi;
    uwsgi_temp_path tmp/uwsgi;
    scgi_temp_path tmp/scgi;
    gzip on;
    gzip_comp_level 1;
    gzip_min_length 1024;
    gzip_types application/json;
    gzip_vary on;
    server {
        listen 127.0.0.1:$port;
        root $dir/nginx/docroot;
        default_type application/json;
        location / { try_files \$uri.json =404; }
    }
}
EOF
  taskset -c 0 "$nginx_bin" -p "$dir/nginx/" -e "$dir/nginx/error.log" -c "$dir/nginx/nginx.conf" \
    -g 'daemon off;' &
  server=$!
  for _ in $(seq 50); do curl -fs -o /dev/null "$base/users" && break; sleep 0.1; done
  for _ in $(seq "$runs"); do
    for route in /users /todos; do
      for coding in identity gzip; do
        measure nginx "$base$route" "$coding"
      done
    done
  done
fi

[[ -n $out ]] || exit 0
# DIR/compression.md: both parts as tables; each row beside the identity
# row of the same server and route.
nginx_version=$( ((nginx)) && "$nginx_bin" -v 2>&1 | sed 's/^nginx version: //' || echo "not run")
{
  echo "## Compression: CPU and bytes per response, each coding and level"
  echo
  echo "- command: \`$command_line\`"
  echo "- started $started, finished $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "- coring commit $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
       "(\`$("$bin" --version 2>&1 | head -1)\`), nginx $nginx_version"
  echo "- server on CPU 0 (one worker thread; nginx one worker), wrk on CPU 1:" \
       "\`wrk -t1 -c$conns -d${seconds}s\` per row and round; CPU from /proc/PID/stat"
  echo "- bodies: GET /users (the first page: 50 of the 10,000 seeded users), GET /todos ($todos todos)," \
       "POST /embed (one sentence, 384 floats) where --embed-model was given;" \
       "nginx serves the same bodies as static files with \`gzip on; gzip_comp_level 1\`" \
       "(coring's gzip level), gzip only (nginx-light has no brotli or zstd module)"
  echo "- read the ÷ identity columns across servers (what a coding adds), not the absolute CPU:" \
       "coring's /users asks PostgreSQL and nginx reads a file; coring's /todos comes from its todo" \
       "list cache, which keeps each coding's compressed body (docs/compression.md), so a compressed" \
       "/todos is fewer bytes to write and no compression, where nginx compresses every response;" \
       "/embed's CPU is the encoder's"
  echo
  if [[ -s $dir/levels.txt ]]; then
    echo "### Levels (no HTTP): each body compressed 200 times on one thread, CPU per compression"
    echo
    echo "| body | bytes in | coding | level | bytes out | out ÷ in | µs CPU per compression |"
    echo "| --- | ---: | --- | ---: | ---: | ---: | ---: |"
    awk 'NR > 1 { f = $1; sub(/^\.\//, "", f)
                  printf "| %s | %d | %s | %d | %d | %.3f | %.2f |\n", f, $2, $3, $4, $5, $2 ? $5 / $2 : 0, $6 }' \
      "$dir/levels.txt"
    echo
  fi
  echo "### Per response: the server's CPU and the bytes on the wire (header + body), $runs round(s)"
  echo
  echo "CPU: the median of the rounds (lowest-highest); ÷ identity: medians divided."
  echo
  /usr/bin/python3 - "$dir/server.txt" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1], encoding="utf-8"):
    f = line.split()
    rows.setdefault((f[0], f[1], f[2]), []).append((int(f[3]), float(f[5]), int(f[8])))
print("| server | route | Accept-Encoding | requests (all rounds) | µs CPU per response | ÷ identity "
      "| bytes per response | ÷ identity |")
print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |")
med = {k: (statistics.median(c for _, c, _ in v), statistics.median(b for _, _, b in v)) for k, v in rows.items()}
for (name, route, coding), v in rows.items():
    cpu, size = med[(name, route, coding)]
    base = med.get((name, route, "identity"), (0, 0))
    cpus = [c for _, c, _ in v]
    print(f"| {name} | {route} | {coding} | {sum(r for r, _, _ in v)} | {cpu:.2f} ({min(cpus):.2f}-{max(cpus):.2f}) "
          f"| {cpu / base[0] if base[0] else float('nan'):.2f} | {size:.0f} "
          f"| {size / base[1] if base[1] else float('nan'):.3f} |")
PY
} >"$out/compression.md"
echo "compression.sh: wrote $out/compression.md"

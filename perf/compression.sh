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
# Every wrk run is bounded by --seconds; PostgreSQL is a throw-away cluster
# (db/pg-local), removed at exit.
#   perf/compression.sh --coring build-rel/apps/coring [--seconds 5]
#                       [--connections 16] [--todos 100] [--embed-model DIR]
#                       [--levels-tool PATH] [--no-nginx]
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=lib/proc.sh
source "$repo/perf/lib/proc.sh"

bin="" seconds=5 conns=16 todos=100 model="" levels_tool="" nginx=1
while (($#)); do
  case $1 in
    --coring) bin=$2; shift ;;
    --seconds) seconds=$2; shift ;;
    --connections) conns=$2; shift ;;
    --todos) todos=$2; shift ;;
    --embed-model) model=$2; shift ;;
    --levels-tool) levels_tool=$2; shift ;;
    --no-nginx) nginx=0 ;;
    -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) echo "compression.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ -x $bin ]] || { echo "compression.sh: --coring PATH to a built coring" >&2; exit 2; }
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
  (cd "$dir/bodies" && "$levels_tool" --iterations 200 ./*.json) | column -t
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
             n, u, c, r, r ? t / hz * 1e6 / r : 0, b }'
}

echo "== 2. server: us CPU per response, bytes per response (header + body)"
for route in "${routes[@]}"; do
  for coding in identity gzip br zstd; do
    measure coring "$base$route" "$coding"
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
  for route in /users /todos; do
    for coding in identity gzip; do
      measure nginx "$base$route" "$coding"
    done
  done
fi

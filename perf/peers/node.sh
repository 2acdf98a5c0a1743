# shellcheck shell=bash
# perf/peers/node.sh: what the node peers (fastify, express) share. Sourced by
# their `peer` scripts.

# node_setup DIR: check node >= 20 and npm, then `npm ci` from the committed
# lock file, only when the lock file changed since the last install.
node_setup() {
  local dir=$1 major
  command -v node >/dev/null || { echo "not installed: node (apt-get install nodejs npm)" >&2; return 1; }
  command -v npm >/dev/null || { echo "not installed: npm (apt-get install npm)" >&2; return 1; }
  major=$(node -p 'process.versions.node.split(".")[0]')
  ((major >= 20)) || { echo "node $(node -v) is too old: need >= 20" >&2; return 1; }
  if [[ ! -f "$dir/node_modules/.package-lock.json" ||
        "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]]; then
    (cd "$dir" && npm ci --omit=dev --no-audit --no-fund --loglevel=error) ||
      { echo "npm ci failed (no registry access?)" >&2; return 1; }
  fi
}

# node_version DIR PACKAGE: "PACKAGE x.y.z, node vN".
node_version() {
  (cd "$1" && node -p "'$2 ' + require('$2/package.json').version + ', node ' + process.version")
}

# node_workers CPUS APP: processes to run. hello: one per core (node:cluster);
# todo: one, since its todos live in the process's memory.
node_workers() { if [[ $2 == hello ]]; then echo "$1"; else echo 1; fi; }

node_layout() {
  local w
  w=$(node_workers "$1" "$2")
  if ((w > 1)); then echo "node:cluster, $w worker processes + primary"; else echo "1 node process"; fi
}

# node_size DIR: bytes of the node binary + node_modules.
node_size() {
  local nb nm
  nb=$(stat -L -c %s "$(command -v node)")
  nm=$(du -sb "$1/node_modules" | awk '{ print $1 }')
  echo "$((nb + nm)) node binary + node_modules"
}

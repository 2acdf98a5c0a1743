#!/usr/bin/env bash
# ctest's deploy_cluster: deploy/cluster up, host 1 restarted in place by hand
# (a hand-over, as an operator would, outside deploy/cluster), then deploy/cluster test (whose
# check 5 is the fault run's smoke: the primary killed under keyed writes,
# then back), then deploy/cluster down whatever happened (it removes what a
# failed up made). The whole fault run is `deploy/cluster faults`.
#   tests/deploy/cluster.sh CORING_BINARY
# Skipped (77), with the reason, when not root, when a network namespace
# cannot be made (a container without CAP_SYS_ADMIN), or when haproxy,
# PostgreSQL's server binaries, Patroni or etcd are missing. Two runs on one
# machine would use the same namespace names: a lock makes the second wait
# for the first.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export CORING_BIN=${1:?usage: cluster.sh CORING_BINARY}
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "deploy/cluster needs root (network namespaces)"
command -v haproxy >/dev/null || skip "haproxy is missing (.ci/install-deps test)"
ls /usr/lib/postgresql/*/bin/pg_basebackup >/dev/null 2>&1 || skip "PostgreSQL server binaries are missing (.ci/install-deps test)"
for tool in patroni etcd etcdctl; do
  command -v "$tool" >/dev/null || skip "$tool is missing (.ci/install-deps deploy)"
done
probe=coring-probe-$$
ip netns add "$probe" 2>/dev/null || skip "ip netns add fails here (no CAP_SYS_ADMIN?)"
ip netns delete "$probe"

exec 9>/run/lock/coring-cluster.lock
flock -w 600 9 || { echo "FAIL: another deploy/cluster run held the lock for 600 s"; exit 1; }
# up's stdout is its key=value lines alone (issue 45): checked here.
out=$("$root/deploy/cluster" up)
status=$?
if [ "$status" -eq 0 ] && grep -vqE '^[a-z_0-9]+=[^ ]+$' <<<"$out"; then
  echo "FAIL: deploy/cluster up printed more than key=value lines on stdout:"
  echo "$out"
  status=1
fi
echo "$out"
if [ "$status" -eq 3 ]; then
  echo "FAIL: a cluster is already up (not made by this test): deploy/cluster down removes it"
  exit 1
fi
state=${CORING_CLUSTER_STATE:-/run/coring-cluster}
logs=${CORING_CLUSTER_LOGS:-/var/log/coring-cluster}

# Host 1 restarted in place by hand, as an operator would without
# deploy/cluster (docs/deploy.md, "Restarting a host"): its pid from its
# namespace, a new coring started with the host's environment file and
# --take-over on its hand-over socket, its output into the old one's log
# pipe (multilog holds the folder); the old one drains and exits. The checks
# after it find the new process themselves.
hand_restart() {
  local pid="" p deadline
  for p in $(ip netns pids coring-h1); do
    [ "$(readlink -f "/proc/$p/exe")" = "$(readlink -f "$CORING_BIN")" ] && pid=$p
  done
  [ -n "$pid" ] || { echo "FAIL: hand restart: no coring in coring-h1"; return 1; }
  ip netns exec coring-h1 setsid sh -c "set -a; . '$state/h1.env'; exec '$CORING_BIN' \
    --handover-socket '$state/h1-handover/sock' --take-over" </dev/null >>"/proc/$pid/fd/1" 2>&1 &
  deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "FAIL: hand restart: pid $pid still there"; return 1; }
    sleep 0.1
  done
  until "$root/deploy/cluster" status | grep -q '^name=h1 .*haproxy=UP'; do
    [ "$SECONDS" -lt "$deadline" ] || { echo "FAIL: hand restart: host1 not UP in 30 s"; return 1; }
    sleep 0.5
  done
  echo "hand restart: host1 was pid $pid, now $("$root/deploy/cluster" status | sed -n 's/^name=h1 pid=\([0-9]*\).*/\1/p'), UP"
}

[ "$status" -eq 0 ] && { hand_restart; status=$?; }
[ "$status" -eq 0 ] && { "$root/deploy/cluster" test; status=$?; }
if [ "$status" -ne 0 ] && [ -d "$logs" ]; then
  # What the logs say (down leaves them; the next up empties them).
  echo "--- $logs/haproxy: requests not answered 2xx (last 20)"
  cat "$logs"/haproxy/@* "$logs/haproxy/current" 2>/dev/null \
    | grep -E ' -?[0-9]+/-?[0-9]+/-?[0-9]+/-?[0-9]+/[0-9]+ (-1|[013-9][0-9][0-9]) ' | tail -20
  for f in h1 h2 pg1 pg2 pg3 pg1-etcd pg2-etcd pg3-etcd; do
    echo "--- $logs/$f/current (last 5 lines)"
    tail -5 "$logs/$f/current" 2>/dev/null
  done
fi
"$root/deploy/cluster" down
exit "$status"

#!/usr/bin/env bash
# ctest's deploy_cluster: deploy/cluster up && deploy/cluster test (whose
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
"$root/deploy/cluster" up
status=$?
if [ "$status" -eq 3 ]; then
  echo "FAIL: a cluster is already up (not made by this test): deploy/cluster down removes it"
  exit 1
fi
[ "$status" -eq 0 ] && { "$root/deploy/cluster" test; status=$?; }
state=${CORING_CLUSTER_STATE:-/run/coring-cluster}
if [ "$status" -ne 0 ] && [ -d "$state" ]; then
  # What the logs say, before down removes them.
  echo "--- $state/haproxy.log: requests not answered 2xx (last 20)"
  grep -E ' -?[0-9]+/-?[0-9]+/-?[0-9]+/-?[0-9]+/[0-9]+ (-1|[013-9][0-9][0-9]) ' "$state/haproxy.log" | tail -20
  for f in h1 h2 pg1 pg2 pg3 pg1-etcd pg2-etcd pg3-etcd; do
    echo "--- $state/$f.log (last 5 lines)"
    tail -5 "$state/$f.log" 2>/dev/null
  done
fi
"$root/deploy/cluster" down
exit "$status"

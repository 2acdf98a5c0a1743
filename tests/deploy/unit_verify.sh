#!/usr/bin/env bash
# deploy/coring.service and deploy/coring.socket pass `systemd-analyze verify` without a single
# message (an unknown key is only a warning there, with exit 0, so any output
# fails), and keeps the settings docs/deploy.md promises, TimeoutStopSec=
# above deploy/coring.env's drain grace + shutdown timeout among them.
#   tests/deploy/unit_verify.sh CORING_BINARY
# ExecStart= is pointed at CORING_BINARY in a temporary copy: verify checks
# that the command exists. 77 without systemd-analyze.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
binary=${1:?usage: unit_verify.sh CORING_BINARY}
unit=$root/deploy/coring.service env_file=$root/deploy/coring.env
command -v systemd-analyze >/dev/null || { echo "SKIP: systemd-analyze is missing (.ci/install-deps test)"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
sed "s|^ExecStart=.*|ExecStart=$binary|" "$unit" >"$tmp/coring.service"
cp "$root/deploy/coring.socket" "$tmp/coring.socket"
status=0
out=$(systemd-analyze verify "$tmp/coring.service" "$tmp/coring.socket" 2>&1) || status=$?
if [ "$status" -ne 0 ] || [ -n "$out" ]; then
  echo "FAIL: systemd-analyze verify (exit $status):"
  echo "$out"
  exit 1
fi

fail=0
for want in Type=notify WatchdogSec= Requires=coring.socket EnvironmentFile= DynamicUser=yes ProtectSystem=strict NoNewPrivileges=yes \
            LimitNOFILE= KillSignal=SIGTERM TimeoutStopSec= Restart=on-failure; do
  grep -q "^$want" "$unit" || { echo "FAIL: $unit has no $want line"; fail=1; }
done
value() { sed -n "s/^$1=\([0-9]*\).*/\1/p" "$2" | tail -1; }
stop=$(value TimeoutStopSec "$unit") grace=$(value CORING_DRAIN_GRACE "$env_file")
shutdown=$(value CORING_SHUTDOWN_TIMEOUT "$env_file")
if [ -z "$stop" ] || [ -z "$grace" ] || [ -z "$shutdown" ] || [ "$stop" -le $((grace + shutdown)) ]; then
  echo "FAIL: TimeoutStopSec=${stop:-?} is not above CORING_DRAIN_GRACE=${grace:-?} + CORING_SHUTDOWN_TIMEOUT=${shutdown:-?}"
  fail=1
fi
# Every CORING_* variable of the example is a flag of the binary.
help=$("$binary" --help 2>&1)
for var in $(sed -n 's/^#\{0,1\}\(CORING_[A-Z0-9_]*\)=.*/\1/p' "$env_file"); do
  flag=--$(echo "${var#CORING_}" | tr 'A-Z_' 'a-z-')
  grep -q -- "$flag" <<<"$help" || { echo "FAIL: $env_file sets $var, but coring has no $flag"; fail=1; }
done
[ "$fail" -eq 0 ] && echo "PASS: systemd-analyze verify is silent; TimeoutStopSec=$stop > $grace + $shutdown s"
exit "$fail"

#!/usr/bin/env bash
# deploy/alerts.yml: `promtool check rules` (syntax, PromQL, templates), then
# `promtool test rules` on tests/deploy/alerts_test.yml (the rules on made-up
# series: each alert fires when its condition holds). 77 without promtool
# (Debian's prometheus package: .ci/install-deps deploy).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
command -v promtool >/dev/null || { echo "SKIP: promtool is missing (.ci/install-deps deploy)"; exit 77; }
promtool check rules "$root/deploy/alerts.yml"
cd "$root/tests/deploy"
promtool test rules alerts_test.yml
echo "PASS: deploy/alerts.yml checked, and its tests pass"

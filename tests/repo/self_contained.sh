#!/usr/bin/env bash
# tests/repo/self_contained.sh: a clone of coring is the whole product. No
# tracked file may build a path to ../shared (the developers' reference shelf,
# absent beside a user's clone), written out or joined ("..", "shared").
# Exit 77 (skipped) outside a git checkout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
git rev-parse --git-dir >/dev/null 2>&1 || { echo "SKIP: not a git checkout"; exit 77; }
self=tests/repo/self_contained.sh
hits=$(git ls-files -z | grep -zv "^$self\$" |
  xargs -0 grep -nIE -e '\.\./shared' -e "[\"']\.\.[\"'][[:space:]]*,[[:space:]]*[\"']shared[\"']" \
  2>/dev/null || true)
if [ -n "$hits" ]; then
  echo "files that reach for ../shared (copy what they need into the repository):"
  echo "$hits"
  exit 1
fi
echo "no tracked file refers to ../shared"

#!/usr/bin/env bash
# tests/repo/self_contained.sh: a clone of coring is the whole product. No
# tracked file may build a path to the developers' reference shelf, the
# folder named "shared" beside their checkouts (a user's clone has none),
# whether written out as a relative path or joined from its parts.
# Exit 77 (skipped) outside a git checkout.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
git rev-parse --git-dir >/dev/null 2>&1 || { echo "SKIP: not a git checkout"; exit 77; }
shelf=shared
q="[\"']"
hits=$(git ls-files -z |
  xargs -0 grep -nIE -e "\.\./$shelf" -e "$q\.\.$q[[:space:]]*,[[:space:]]*$q$shelf$q" \
  2>/dev/null || true)
if [ -n "$hits" ]; then
  echo "files that reach for the $shelf folder beside the checkout (copy what they need into the repository):"
  echo "$hits"
  exit 1
fi
echo "no tracked file reaches outside the repository for data"

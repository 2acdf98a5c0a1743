#!/usr/bin/env bash
# tests/repo/layering.sh: every #include of the runtime points down the
# layers (the README's Layout section):
#
#   core -> net -> db | http -> apps
#
# A file of a layer may include headers of its own layer and of the layers
# below it; db and http are siblings and include neither the other. A
# header is placed by its path: coring/<layer>/... (public headers; the
# embed encoder's coring/embed/ is part of apps), or the file a quoted
# include names, relative to the including file or to the repository root
# (apps/cep/cep_code.h, net/src/loop.h). Another layer's src/ headers are
# its internals and are refused even below. tests/ and perf/ may include
# anything; no layer includes them. System and third-party headers
# (<liburing.h>, <simdjson.h>) are not checked.
# Exit 1 with each offending include as FILE:LINE: HEADER (why).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
if git rev-parse --git-dir >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- core net db http apps | grep -E '\.(c|h|cpp|hpp|cc|S)$')
else
  mapfile -t files < <(find core net db http apps -type f \( -name '*.c' -o -name '*.h' -o -name '*.cpp' \
                       -o -name '*.hpp' -o -name '*.cc' -o -name '*.S' \))
fi
exec /usr/bin/python3 - "${files[@]}" <<'PY'
import os, re, sys

RANK = {"core": 0, "net": 1, "db": 2, "http": 2, "apps": 3, "tests": 4, "perf": 4}
PUBLIC = {"core": "core", "net": "net", "db": "db", "http": "http", "apps": "apps", "embed": "apps"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')

def layer_of(path):
    return path.split(os.sep, 1)[0]

def header_layer(src, header, quoted):
    """(layer, private) for @header as included by @src; None: not ours."""
    m = re.match(r"coring/([^/]+)/", header)
    if m:
        return PUBLIC.get(m.group(1), "?" + m.group(1)), False
    if not quoted:
        return None
    for base in (os.path.dirname(src), "."):
        path = os.path.normpath(os.path.join(base, header))
        if not path.startswith("..") and os.path.isfile(path):
            top = layer_of(path)
            if top not in RANK:
                return None
            parts = path.split(os.sep)
            return top, len(parts) > 1 and parts[1] == "src"
    return None

bad = []
for src in sys.argv[1:]:
    mine = layer_of(src)
    with open(src, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            found = header_layer(src, m.group(2), m.group(1) == '"')
            if found is None:
                continue
            theirs, private = found
            if theirs.startswith("?"):
                bad.append(f"{src}:{n}: {m.group(2)} (no layer named {theirs[1:]})")
            elif theirs == mine:
                continue
            elif RANK[theirs] > RANK[mine]:
                bad.append(f"{src}:{n}: {m.group(2)} (layer {theirs}, above {mine})")
            elif RANK[theirs] == RANK[mine]:
                bad.append(f"{src}:{n}: {m.group(2)} (layer {theirs}, a sibling of {mine}: "
                           f"neither includes the other)")
            elif private:
                bad.append(f"{src}:{n}: {m.group(2)} (an internal header of layer {theirs}: "
                           f"use its coring/{theirs}/ headers)")
if bad:
    print("includes against the layering (core -> net -> db | http -> apps):")
    print("\n".join(bad))
    sys.exit(1)
print(f"every include of {len(sys.argv) - 1} files points down the layers")
PY

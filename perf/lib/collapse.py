#!/usr/bin/python3
"""perf/lib/collapse.py: `perf script` output -> collapsed stacks (the
"folded" format of Brendan Gregg's stackcollapse-perf.pl: one line per
distinct stack, root first, frames joined by ';', then the sample count).
Standard library only.

  collapse.py [--prefix NAME] < perf-script.txt > stacks.folded
"""

import argparse
import collections
import re
import sys

FRAME = re.compile(r"^\s*[0-9a-f]+\s+(.+?)(?:\s+\((.*)\))?$")


def collapse(lines, prefix=None):
    counts = collections.Counter()
    comm, frames = None, []

    def flush():
        if comm is not None:
            stack = ([prefix] if prefix else []) + [comm] + frames[::-1]
            counts[";".join(stack)] += 1

    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            flush()
            comm, frames = None, []
            continue
        if comm is None:
            if not line[0].isspace():
                comm = line.split()[0] if line.split() else "?"
            continue
        m = FRAME.match(line)
        if m:
            sym = m.group(1)
            sym = re.sub(r"\+0x[0-9a-f]+$", "", sym)
            if sym == "[unknown]" and m.group(2):
                sym = "[" + m.group(2).rsplit("/", 1)[-1] + "]"
            frames.append(sym.replace(";", ":"))
    flush()
    return counts


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--prefix")
    a = ap.parse_args()
    for stack, n in sorted(collapse(sys.stdin, a.prefix).items()):
        print(f"{stack} {n}")


if __name__ == "__main__":
    main()

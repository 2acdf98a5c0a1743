#!/usr/bin/python3
"""perf/lib/coldstart.py: cold start and idle memory of a server. Standard
library only.

  coldstart.py --url URL --launches N --out FILE [--cgroup DIR] [--body JSON] -- ARGV...

Launches ARGV (the server's pinned command line) N times, one after the
other. For each: the time from just before the exec to the first 200 from
URL (polled every 2 ms over fresh connections; a GET, or a POST of --body
JSON), then SIGTERM (SIGKILL after 5 s). After the last launch's first 200
it waits IDLE_S and reads the idle memory: VmRSS summed over the server's
process tree, and the cgroup's current usage when --cgroup DIR is given
(the server is moved there before it execs). Writes JSON to FILE: every
launch's ms, their median, idle RSS. Only ever stops the processes it
started, by PID.
"""

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.parse

POLL_S = 0.002
IDLE_S = 0.5
child = None


def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        if not os.path.isdir(f"/proc/{p}"):
            continue
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def rss_kb(pid):
    total = 0
    for p in tree(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def cgroup_kb(cg):
    for name in ("memory.current", "memory.usage_in_bytes"):
        try:
            with open(os.path.join(cg, name)) as f:
                return int(f.read()) // 1024
        except OSError:
            continue
    return None


def status_of(host, port, path, body=None):
    """Status of one GET (a POST of the JSON BODY when given) on a fresh
    connection, or None if nothing answers."""
    head = f"{'GET' if body is None else 'POST'} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall((head + "\r\n").encode() + (body or b""))
            line = s.makefile("rb").readline()
        parts = line.split()
        return int(parts[1]) if len(parts) > 1 else None
    except (OSError, ValueError):
        return None


def stop(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(5)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def on_signal(signum, _frame):
    if child is not None:
        stop(child)
    sys.exit(128 + signum)


def main():
    global child
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--launches", type=int, default=5)
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--out", required=True)
    ap.add_argument("--log", default=os.devnull)
    ap.add_argument("--cgroup")
    # A probe that must POST (the embed app): --body JSON, by default from
    # $PERF_PROBE_BODY_<app> for the $PERF_APP perf/run gives the servers, so
    # that a scenario's exported setting applies to its own app only.
    ap.add_argument("--body", default=os.environ.get("PERF_PROBE_BODY_" + os.environ.get("PERF_APP", "")))
    ap.add_argument("argv", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    argv = a.argv[1:] if a.argv[:1] == ["--"] else a.argv
    u = urllib.parse.urlsplit(a.url)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    def enter_cgroup():
        if a.cgroup:
            try:
                with open(os.path.join(a.cgroup, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
            except OSError:
                pass

    result = {"url_path": u.path or "/", "method": "GET" if a.body is None else "POST",
              "launches_ms": [], "error": None, "idle_rss_kb": None, "idle_cgroup_kb": None}
    with open(a.log, "ab") as log:
        for i in range(a.launches):
            t0 = time.monotonic()
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                     preexec_fn=enter_cgroup)
            ms = None
            while time.monotonic() - t0 < a.timeout:
                if status_of(u.hostname, u.port, u.path or "/",
                             None if a.body is None else a.body.encode()) == 200:
                    ms = (time.monotonic() - t0) * 1000
                    break
                if child.poll() is not None:
                    break
                time.sleep(POLL_S)
            if ms is None:
                result["error"] = (f"launch {i + 1}: exited with {child.returncode}" if child.poll() is not None
                                   else f"launch {i + 1}: no 200 in {a.timeout:.0f} s")
                stop(child)
                break
            result["launches_ms"].append(round(ms, 1))
            if i == a.launches - 1:
                time.sleep(IDLE_S)
                result["idle_rss_kb"] = rss_kb(child.pid)
                if a.cgroup:
                    result["idle_cgroup_kb"] = cgroup_kb(a.cgroup)
                result["processes"] = len(tree(child.pid))
            stop(child)
            child = None
    if result["launches_ms"]:
        result["median_ms"] = round(statistics.median(result["launches_ms"]), 1)
    with open(a.out, "w") as f:
        json.dump(result, f)
    print(json.dumps(result))
    sys.exit(0 if result["error"] is None else 1)


if __name__ == "__main__":
    main()

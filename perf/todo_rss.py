#!/usr/bin/python3
"""Resident memory of coring per stored todo.

Starts coring (todo app, one worker thread by default) on 127.0.0.1,
POSTs N todos (default 100,000) whose titles are L bytes (default 20),
pipelined 100 at a time on one connection, and prints the server's VmRSS
before, after the inserts, and after one GET /todos (which builds and
keeps the list's JSON), and its peak (VmHWM), with the difference per todo.

  perf/todo_rss.py --binary build/apps/coring [--todos N] [--title-bytes L] [--threads N]
                   [--escaped]
"""

import argparse
import http.client
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.dont_write_bytecode = True
import coring_server as cs  # noqa: E402

BATCH = 100


def peak_kib(pid):
    """The process's peak resident set size (VmHWM), KiB."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise SystemExit("todo_rss: no VmHWM for pid %d" % pid)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.environ.get("CORING_BINARY", "build/apps/coring"))
    ap.add_argument("--todos", type=int, default=100000)
    ap.add_argument("--title-bytes", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--escaped", action="store_true",
                    help="titles of U+0001 (6 bytes each in JSON): the largest list for a title size")
    args = ap.parse_args()
    if not 1 <= args.title_bytes <= 1000:
        ap.error("--title-bytes: 1 to 1000")

    cs._BINARY = os.path.abspath(args.binary)
    srv = cs.CoringServer(threads=args.threads, apps="todo",
                          args=["--todo-max-items", str((args.todos + 1000) * args.threads)]).start()
    try:
        with srv.connect(timeout=60) as c:
            # Warm up: first requests, the JSON parser, an empty list.
            hdr = {"Content-Type": "application/json"}
            for _ in range(10):
                c.request("GET", "/todos")
            time.sleep(0.3)
            before = srv.rss_kib()
            t0 = time.monotonic()
            done = 0
            fill = "\u0001" if args.escaped else "t"
            while done < args.todos:
                n = min(BATCH, args.todos - done)
                data = b"".join(
                    cs.build_request("POST", "/todos", hdr,
                                     json.dumps({"title": ("%09d" % (done + i)).ljust(args.title_bytes, fill)}))
                    for i in range(n))
                c.send(data)
                for _ in range(n):
                    resp = c.read_response("POST")
                    if resp.status != 201:
                        raise SystemExit("todo_rss: POST /todos -> %r" % resp)
                done += n
            took = time.monotonic() - t0
            time.sleep(0.3)
            stored = srv.rss_kib()
            # http.client reads a 100 MB body in linear time.
            h = http.client.HTTPConnection(srv.host, srv.port, timeout=120)
            h.request("GET", "/todos")
            resp = h.getresponse()
            body = resp.read()
            h.close()
            if resp.status != 200:
                raise SystemExit("todo_rss: GET /todos -> %d %r" % (resp.status, body[:200]))
            count = len(json.loads(body))
            time.sleep(0.3)
            after_list = srv.rss_kib()
            peak = peak_kib(srv.pid)
        srv.stop(expect_status=0)
    finally:
        srv.kill()
    if count != args.todos:
        raise SystemExit("todo_rss: GET /todos listed %d todos, want %d" % (count, args.todos))
    per = (stored - before) * 1024.0 / args.todos
    per_listed = (after_list - before) * 1024.0 / args.todos
    print("todo_rss: %d todos of %d-byte titles on %d thread(s) in %.1f s" % (args.todos, args.title_bytes,
                                                                         args.threads, took))
    print("todo_rss: VmRSS %d KiB before, %d KiB after the inserts, %d KiB after one GET /todos (%d-byte body)"
          % (before, stored, after_list, len(body)))
    print("todo_rss: %.0f bytes per todo stored, %.0f with the cached list, %.0f at the peak of the listing"
          % (per, per_listed, (peak - before) * 1024.0 / args.todos))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Resident memory of coring per idle keep-alive connection.

Starts coring (one worker thread by default) on 127.0.0.1, answers one
request on each of N connections (default 10,000), leaves them idle, and
prints the server's VmRSS before and after and the difference per
connection. Needs RLIMIT_NOFILE above N + 100 in this process and the
server (the soft limit is raised to the hard one); exits 77 when the hard
limit is too low.

  perf/idle_rss.py --binary build/apps/coring [--connections N] [--threads N]
                   [--max-kib-per-connection K]   (exit 1 when over K)
"""

import argparse
import os
import resource
import selectors
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.dont_write_bytecode = True
import coring_server as cs  # noqa: E402

REQUEST = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.environ.get("CORING_BINARY", "build/apps/coring"))
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-kib-per-connection", type=float)
    args = ap.parse_args()

    soft = cs.raise_nofile_limit()
    if soft < args.connections + 100:
        print("idle_rss: RLIMIT_NOFILE is %d, need %d for %d connections: skipped"
              % (soft, args.connections + 100, args.connections))
        return 77
    cs._BINARY = os.path.abspath(args.binary)
    srv = cs.CoringServer(threads=args.threads, apps="hello",
                          args=["--keepalive-timeout", "600", "--header-timeout", "600"]).start()
    try:
        with srv.connect() as c:  # warm up: first request, JSON parser, date cache
            for _ in range(10):
                c.request("GET", "/plaintext")
        time.sleep(0.3)
        before = srv.rss_kib()

        socks = []
        sel = selectors.DefaultSelector()
        t0 = time.monotonic()
        for _ in range(args.connections):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((srv.host, srv.port))
            socks.append(s)
            sel.register(s, selectors.EVENT_WRITE)
        pending = {s: b"" for s in socks}
        sent = set()
        while pending and time.monotonic() - t0 < 120:
            for key, ev in sel.select(1.0):
                s = key.fileobj
                if s not in sent:
                    s.send(REQUEST)
                    sent.add(s)
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                data = s.recv(4096)
                if not data:
                    raise SystemExit("idle_rss: a connection closed early")
                pending[s] += data
                if pending[s].endswith(b"Hello, World!"):
                    del pending[s]
                    sel.unregister(s)
        if pending:
            raise SystemExit("idle_rss: %d connections got no answer in 120 s" % len(pending))
        time.sleep(1.0)
        after = srv.rss_kib()
        per = (after - before) / args.connections
        print("idle_rss: %d idle keep-alive connections, %d thread(s): RSS %d KiB before, %d KiB after, "
              "%.2f KiB per connection" % (args.connections, args.threads, before, after, per))
        if not srv.running():
            raise SystemExit("idle_rss: the server died")
        for s in socks:
            s.close()
        srv.stop(expect_status=0)
        if args.max_kib_per_connection is not None and per > args.max_kib_per_connection:
            print("idle_rss: over the bound of %.1f KiB per connection" % args.max_kib_per_connection)
            return 1
        return 0
    finally:
        srv.kill()


if __name__ == "__main__":
    sys.exit(main())

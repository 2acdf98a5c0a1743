#!/usr/bin/python3
"""Soak: mixed traffic on every app at 500 connections for 2 minutes (20 s with
--quick), with RSS sampled after warm-up and at the end.

Each connection loops over a mix of hello and todo requests (create, read,
update, delete, list, plus a 404 and a 400 that the mix asks for), one
request at a time, keep-alive. Passes when every response has the status
its request expects and the server's RSS at the end is within --max-drift
(10%) of its RSS after warm-up (the first quarter of the run). Bounded:
it stops after --seconds whatever happens, on 127.0.0.1 only.

  perf/soak.py --binary build/apps/coring [--quick | --seconds S]
               [--connections N] [--threads N] [--max-drift 0.10]
"""

import argparse
import json
import os
import re
import selectors
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
sys.dont_write_bytecode = True
import coring_server as cs  # noqa: E402

H = "Host: 127.0.0.1\r\n"


def req(method, path, body=None):
    out = "%s %s HTTP/1.1\r\n%s" % (method, path, H)
    if body is not None:
        out += "Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    else:
        out += "\r\n"
    return out.encode()


# (request builder taking the connection's current todo id, expected status, what to keep)
MIX = [
    (lambda tid: req("GET", "/"), 200, None),
    (lambda tid: req("GET", "/json"), 200, None),
    (lambda tid: req("GET", "/plaintext"), 200, None),
    (lambda tid: req("POST", "/todos", '{"title":"soak","completed":false}'), 201, "id"),
    (lambda tid: req("GET", "/todos/%d" % tid), 200, None),
    (lambda tid: req("PATCH", "/todos/%d" % tid, '{"completed":true}'), 200, None),
    (lambda tid: req("GET", "/health"), 200, None),
    (lambda tid: req("GET", "/todos/18446744073709551615"), 404, None),
    (lambda tid: req("POST", "/todos", '{"title":'), 400, None),
    (lambda tid: req("DELETE", "/todos/%d" % tid), 204, None),
    (lambda tid: req("HEAD", "/json"), 200, None),
]
STATUS_RE = re.compile(rb"^HTTP/1\.1 (\d{3}) ")
CL_RE = re.compile(rb"\r\ncontent-length: *(\d+)", re.I)


class Client:
    def __init__(self, sock):
        self.sock = sock
        self.step = 0
        self.tid = 0
        self.buf = b""
        self.out = b""

    def next_request(self):
        build, _, _ = MIX[self.step % len(MIX)]
        self.out = build(self.tid)

    def take_response(self):
        """A whole response from buf: (status, body) or None."""
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            return None
        head = self.buf[:end + 2]
        m = STATUS_RE.match(head)
        if not m:
            raise SystemExit("soak: bad response head %r" % head[:200])
        status = int(m.group(1))
        cl = CL_RE.search(head)
        is_head = MIX[self.step % len(MIX)][0](0).startswith(b"HEAD")
        n = 0 if status == 204 or is_head or not cl else int(cl.group(1))
        if len(self.buf) < end + 4 + n:
            return None
        body = self.buf[end + 4:end + 4 + n]
        self.buf = self.buf[end + 4 + n:]
        return status, body


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.environ.get("CORING_BINARY", "build/apps/coring"))
    ap.add_argument("--seconds", type=float, default=120)
    ap.add_argument("--quick", action="store_true", help="20 s (CI)")
    ap.add_argument("--connections", type=int, default=500)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-drift", type=float, default=0.10)
    args = ap.parse_args()
    if args.quick:
        args.seconds = 20
    cs.raise_nofile_limit()
    cs._BINARY = os.path.abspath(args.binary)
    srv = cs.CoringServer(threads=args.threads, apps="hello,todo").start()
    counts, errors = {}, []
    try:
        sel = selectors.DefaultSelector()
        clients = []
        for _ in range(args.connections):
            s = socket.create_connection((srv.host, srv.port), timeout=5)
            s.setblocking(False)
            c = Client(s)
            c.next_request()
            clients.append(c)
            sel.register(s, selectors.EVENT_WRITE, c)
        t0 = time.monotonic()
        warm_at, warm_rss, done = t0 + args.seconds / 4, None, 0
        last_progress = t0
        while time.monotonic() - t0 < args.seconds:
            now = time.monotonic()
            if warm_rss is None and now >= warm_at:
                warm_rss = srv.rss_kib()
            if now - last_progress > 10:
                raise SystemExit("soak: no response for 10 s")
            for key, ev in sel.select(0.5):
                c = key.data
                if ev & selectors.EVENT_WRITE:
                    n = c.sock.send(c.out)
                    c.out = c.out[n:]
                    if not c.out:
                        sel.modify(c.sock, selectors.EVENT_READ, c)
                    continue
                data = c.sock.recv(65536)
                if not data:
                    raise SystemExit("soak: the server closed a connection; stderr:\n" + srv.stderr_text())
                c.buf += data
                r = c.take_response()
                if r is None:
                    continue
                status, body = r
                _, want, keep = MIX[c.step % len(MIX)]
                counts[status] = counts.get(status, 0) + 1
                if status != want:
                    errors.append("step %d: %d, expected %d: %r" % (c.step % len(MIX), status, want, body[:200]))
                    if len(errors) > 20:
                        raise SystemExit("soak: errors: %s" % errors)
                if keep == "id" and status == 201:
                    c.tid = json.loads(body)["id"]
                done += 1
                last_progress = time.monotonic()
                c.step += 1
                c.next_request()
                sel.modify(c.sock, selectors.EVENT_WRITE, c)
        elapsed = time.monotonic() - t0
        time.sleep(0.5)
        end_rss = srv.rss_kib()
        for c in clients:
            c.sock.close()
        srv.stop(expect_status=0)
    finally:
        srv.kill()
    drift = (end_rss - warm_rss) / warm_rss
    print("soak: %d connections, %.0f s, %d responses (%.0f/s), statuses %s; RSS %d KiB after warm-up, "
          "%d KiB at the end: drift %+.1f%%" % (args.connections, elapsed, done, done / elapsed,
                                                 dict(sorted(counts.items())), warm_rss, end_rss, drift * 100))
    ok = True
    if errors:
        print("soak: unexpected statuses: %s" % errors[:10])
        ok = False
    if abs(drift) > args.max_drift:
        print("soak: RSS drift over %.0f%%" % (args.max_drift * 100))
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

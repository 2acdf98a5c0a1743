#!/usr/bin/python3
"""Instructions per request of one route, counted by callgrind (the same
figure whatever the machine's load): the server runs under
`valgrind --tool=callgrind` with one thread, answers --warmup requests,
then --requests more; the Ir of the second stretch over its count is the
figure (callgrind_control zeroes the counters between the two, so
start-up and shut-down are not counted).

    perf/callgrind_request.py --binary BUILD/apps/coring --apps hello \
        [--method GET] [--path /] [--body JSON] [--requests 2000] [--extra-args '...']

Prints `PATH: N instructions per request (R requests)`. Loopback only;
each request waits for its answer (no pipelining); bounded by --requests
and a 300 s limit.
"""
import argparse
import glob
import os
import re
import shlex
import socket
import subprocess
import sys
import tempfile
import time


def request(sock, method, path, body):
    head = "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n" % (method, path)
    if body is not None:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    sock.sendall(head.encode() + b"\r\n" + (body or b""))
    buf = b""
    while b"\r\n\r\n" not in buf:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("connection closed")
        buf += chunk
    head, rest = buf.split(b"\r\n\r\n", 1)
    m = re.search(rb"\r\ncontent-length: *([0-9]+)", head, re.I)
    want = int(m.group(1)) if m else 0
    while len(rest) < want:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("connection closed")
        rest += chunk
    return int(head.split(b" ", 2)[1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", required=True)
    ap.add_argument("--apps", default="hello")
    ap.add_argument("--method", default="GET")
    ap.add_argument("--path", default="/")
    ap.add_argument("--body")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--extra-args", default="")
    a = ap.parse_args()
    body = a.body.encode() if a.body is not None else None
    tmp = tempfile.mkdtemp(prefix="coring-callgrind-")
    out = os.path.join(tmp, "callgrind.out")
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out + ".%p",
           a.binary, "--host", "127.0.0.1", "--port", "0", "--threads", "1", "--apps", a.apps,
           "--log-level", "warn"] + shlex.split(a.extra_args)
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    port = None
    lines = []
    while port is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise SystemExit("server exited:\n" + "".join(lines[-20:]))
        lines.append(line)
        m = re.search(r"listening on http://[^ ]*:([0-9]+)", line)
        if m:
            port = int(m.group(1))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=60) as s:
            for _ in range(a.warmup):
                request(s, a.method, a.path, body)
            subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True,
                           stdout=subprocess.DEVNULL)
            status = None
            for _ in range(a.requests):
                status = request(s, a.method, a.path, body)
                if time.monotonic() > deadline:
                    raise SystemExit("over 300 s")
            subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True,
                           stdout=subprocess.DEVNULL)
    finally:
        proc.terminate()
        proc.wait(60)
    # callgrind_control -d wrote part 1: the measured stretch alone.
    dumps = glob.glob(out + ".*.1")
    if len(dumps) != 1:
        raise SystemExit("no callgrind dump (part 1) in %s" % tmp)
    with open(dumps[0]) as f:
        m = re.search(r"^(?:summary|totals): *([0-9]+)", f.read(), re.M)
    if not m:
        raise SystemExit("no totals in %s" % dumps[0])
    ir = int(m.group(1))
    print("%s %s: %.0f instructions per request (%d requests, status %s)"
          % (a.method, a.path, ir / a.requests, a.requests, status))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""GET / latency on an open connection while a burst of connections arrives.

One server at a time, on CPU 0, one worker (coring --threads 1 --apps
hello; with --peer nginx, nginx from Debian with perf/peers/nginx's
configuration, one worker, in the same run). A probe keeps one keep-alive
connection and sends GET / on it one request at a time, about 1 ms apart,
recording each latency; meanwhile a burst of N connections (default
10,000) is opened at once by a second process, each sending GET / as soon
as it is connected, reading the answer and closing. Prints, per server,
the burst's length, the connections answered, and the probe's p50, p99
and max over the requests it sent during the burst. The probe and the
burst run on CPU 1 (the probe at a higher priority when allowed, so that
the burst's own process does not delay it). Nothing is asserted; every
run is bounded (60 s a burst). Needs RLIMIT_NOFILE above N + 100.

  perf/burst.py --binary build-rel/apps/coring [--connections N] [--peer nginx]
                [--rounds R] [--server-nice N]
"""

import argparse
import os
import selectors
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, os.path.join(HERE, "lib"))
sys.dont_write_bytecode = True
import coring_server as cs  # noqa: E402
import nginx_peer  # noqa: E402

REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
BURST_LIMIT_S = 60


def answered(buf):
    head, sep, body = buf.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def burst(port, n):
    """The burst's process: @n connections at once, each GET / then close.
    Prints "answered failed seconds"."""
    t0 = time.monotonic()
    sel = selectors.DefaultSelector()
    state = {}
    for _ in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex((cs.HOST, port))
        state[s] = None
        sel.register(s, selectors.EVENT_WRITE)
    ok = failed = 0
    while state and time.monotonic() - t0 < BURST_LIMIT_S:
        for key, _ in sel.select(0.5):
            s = key.fileobj
            try:
                if state[s] is None:
                    s.send(REQUEST)
                    state[s] = b""
                    sel.modify(s, selectors.EVENT_READ)
                    continue
                data = s.recv(4096)
            except OSError:
                data = b""
            if data:
                state[s] += data
                if not answered(state[s]):
                    continue
                ok += 1
            else:
                failed += 1
            sel.unregister(s)
            s.close()
            del state[s]
    print(ok, failed + len(state), "%.3f" % (time.monotonic() - t0))


SERVER_NICE = [0]  # --server-nice


def on_cpu0_normal_priority():
    """preexec_fn of the servers: CPU 0, and not the probe's priority."""
    os.sched_setaffinity(0, {0})
    os.setpriority(os.PRIO_PROCESS, 0, SERVER_NICE[0])


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def probe_during_burst(port, n):
    """Probe on one connection while the burst process runs; returns a
    result line."""
    conn = cs.Conn(cs.HOST, port, timeout=10, nodelay=True)
    lat = []
    try:
        for _ in range(50):  # warm: the connection, the server's first requests
            conn.request("GET", "/")
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--burst-child", str(port),
                                  str(n)], stdout=subprocess.PIPE, text=True,
                                 preexec_fn=lambda: os.setpriority(os.PRIO_PROCESS, 0, 0))
        t_start = time.monotonic()
        while child.poll() is None and time.monotonic() - t_start < BURST_LIMIT_S + 5:
            t0 = time.perf_counter()
            resp = conn.request("GET", "/")
            lat.append(time.perf_counter() - t0)
            if resp.status != 200:
                raise SystemExit("burst: the probe's GET / answered %d" % resp.status)
            time.sleep(0.001)
        out, _ = child.communicate(timeout=BURST_LIMIT_S + 10)
    finally:
        conn.close()
    ok, failed, secs = out.split()
    s = sorted(lat)
    return ("%d connections in %s s (%s answered, %s not); probe: %d requests, p50 %.2f ms, "
            "p99 %.2f ms, max %.2f ms" % (n, secs, ok, failed, len(s), percentile(s, 0.5) * 1000,
                                          percentile(s, 0.99) * 1000, s[-1] * 1000))


def run_coring(binary, n):
    srv = cs.CoringServer(threads=1, apps="hello",
                          preexec_fn=on_cpu0_normal_priority)
    cs._BINARY = os.path.abspath(binary)
    srv.start()
    try:
        return probe_during_burst(srv.port, n)
    finally:
        srv.stop()


def run_nginx(n):
    port = cs.free_port()
    with nginx_peer.one_worker("burst", n, port, cs.can_connect, preexec_fn=on_cpu0_normal_priority):
        return probe_during_burst(port, n)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--burst-child":
        cs.raise_nofile_limit()
        burst(int(sys.argv[2]), int(sys.argv[3]))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.environ.get("CORING_BINARY", "build-rel/apps/coring"))
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--peer", choices=["nginx"])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--server-nice", type=int, default=0,
                    help="the servers' nice value (root may give them a higher priority on a "
                         "machine other processes keep busy; the same for every server)")
    args = ap.parse_args()
    SERVER_NICE[0] = args.server_nice
    if cs.raise_nofile_limit() < args.connections + 100:
        print("burst: RLIMIT_NOFILE under %d: skipped" % (args.connections + 100))
        return 77
    if os.cpu_count() and os.cpu_count() >= 2:
        os.sched_setaffinity(0, {1})
    try:
        os.setpriority(os.PRIO_PROCESS, 0, -10)
    except OSError:
        pass  # not allowed: the burst's process may delay the probe
    for r in range(args.rounds):
        print("burst: round %d: coring: %s" % (r, run_coring(args.binary, args.connections)))
        sys.stdout.flush()
        if args.peer == "nginx":
            print("burst: round %d: nginx:  %s" % (r, run_nginx(args.connections)))
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())

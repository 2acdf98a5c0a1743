#!/usr/bin/python3
"""Resident memory per idle keep-alive connection: coring, and nginx beside it.

Starts coring (one worker thread by default, every app mounted, with
--access-log) on 127.0.0.1, warms it up with 600 requests on one
keep-alive connection (each read takes the next of the thread's provided
buffers: what they cost once is in the baseline), reads its VmRSS, answers
one `GET /` on each of N connections (default 10,000), leaves them idle,
and reads VmRSS again: the difference over N is the cost of an idle
connection. With --peer nginx, nginx from Debian (perf/peers/nginx's
configuration, one worker, worker_connections raised for N) gets the same
warm-up, the same N connections and the same request in the same run, and
its worker's figure is printed beside coring's. users and cep need
PostgreSQL: without DATABASE_URL a throw-away cluster is started
(db/pg-local) for the run. Needs RLIMIT_NOFILE above N + 100 (the soft limit
is raised to the hard one); exits 77 when the hard limit is too low.

  perf/idle_rss.py --binary build/apps/coring [--connections N] [--threads N]
                   [--apps LIST] [--no-access-log] [--peer nginx]
                   [--max-kib-per-connection K]   (exit 1 when coring is over K)
"""

import argparse
import os
import selectors
import socket
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
sys.path.insert(0, os.path.join(HERE, "lib"))
sys.dont_write_bytecode = True
import coring_server as cs  # noqa: E402
import nginx_peer  # noqa: E402

REQUEST = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
ALL_APPS = "hello,todo,users,cep,embed"


def vm_rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise SystemExit("idle_rss: no VmRSS for pid %d" % pid)


def warm_up(host, port):
    """600 requests on one keep-alive connection."""
    with cs.Conn(host, port, timeout=10) as c:
        for _ in range(600):
            resp = c.request("GET", "/")
            if resp.status != 200:
                raise SystemExit("idle_rss: warm-up GET / answered %d" % resp.status)


def open_idle(host, port, n, deadline):
    """@n sockets that each sent REQUEST and read a whole answer, left open."""
    socks, pending = [], {}
    sel = selectors.DefaultSelector()
    while (len(socks) < n or pending) and time.monotonic() < deadline:
        while len(pending) < 512 and len(socks) + len(pending) < n:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((host, port))
            pending[s] = None
            sel.register(s, selectors.EVENT_WRITE)
        for key, _ in sel.select(1.0):
            s = key.fileobj
            if pending[s] is None:
                s.send(REQUEST)
                pending[s] = b""
                sel.modify(s, selectors.EVENT_READ)
                continue
            data = s.recv(4096)
            if not data:
                raise SystemExit("idle_rss: a connection closed early")
            pending[s] += data
            head, _, body = pending[s].partition(b"\r\n\r\n")
            length = [int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:")]
            if length and len(body) >= length[0]:
                del pending[s]
                sel.unregister(s)
                socks.append(s)
    sel.close()
    if len(socks) < n:
        raise SystemExit("idle_rss: %d of %d connections answered in time" % (len(socks), n))
    return socks


def measure(name, pid_of_server, host, port, n, detail):
    """Warm up, then N idle connections: prints and returns KiB per connection."""
    warm_up(host, port)
    time.sleep(0.5)
    before = vm_rss_kib(pid_of_server)
    t0 = time.monotonic()
    socks = open_idle(host, port, n, t0 + 120)
    opened = time.monotonic() - t0
    time.sleep(1.5)
    after = vm_rss_kib(pid_of_server)
    per = (after - before) / n
    print("idle_rss: %-6s %d idle keep-alive connections (opened and answered in %.1f s), %s: "
          "RSS %d KiB before, %d KiB after, %.2f KiB per connection"
          % (name, n, opened, detail, before, after, per))
    sys.stdout.flush()
    for s in socks:
        s.close()
    return per


def run_coring(args):
    env_url = os.environ.get("DATABASE_URL")
    pg = None
    apps = args.apps.split(",")
    if not env_url and ("users" in apps or "cep" in apps):
        pg = cs.LocalPostgres("idle-rss-")
        pg.run("start", "throwaway")
        os.environ["DATABASE_URL"] = pg.url()
    cs._BINARY = os.path.abspath(args.binary)
    extra = ["--keepalive-timeout", "600", "--header-timeout", "600"]
    if not args.no_access_log:
        extra.append("--access-log")
    srv = cs.CoringServer(threads=args.threads, apps=args.apps, args=extra)
    try:
        srv.start()
        detail = "%d thread(s), apps %s%s" % (args.threads, args.apps,
                                              "" if args.no_access_log else ", --access-log")
        per = measure("coring", srv.pid, srv.host, srv.port, args.connections, detail)
        if not srv.running():
            raise SystemExit("idle_rss: coring died")
        srv.stop(expect_status=0)
        return per
    finally:
        srv.kill()
        if pg:
            pg.remove()
            del os.environ["DATABASE_URL"]


def nginx_worker(master_pid, deadline):
    while time.monotonic() < deadline:
        try:
            with open("/proc/%d/task/%d/children" % (master_pid, master_pid)) as f:
                kids = [int(p) for p in f.read().split()]
        except OSError:
            kids = []
        if kids:
            return kids[0]
        time.sleep(0.05)
    raise SystemExit("idle_rss: nginx started no worker")


def run_nginx(args):
    port = cs.free_port()
    with nginx_peer.one_worker("idle_rss", args.connections, port, cs.can_connect,
                               keepalive_timeout="600s") as proc:
        worker = nginx_worker(proc.pid, time.monotonic() + 10)
        return measure("nginx", worker, cs.HOST, port, args.connections, "1 worker (its RSS)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--binary", default=os.environ.get("CORING_BINARY", "build/apps/coring"))
    ap.add_argument("--connections", type=int, default=10000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--apps", default=ALL_APPS)
    ap.add_argument("--no-access-log", action="store_true")
    ap.add_argument("--peer", choices=["nginx"])
    ap.add_argument("--max-kib-per-connection", type=float)
    args = ap.parse_args()

    soft = cs.raise_nofile_limit()
    if soft < args.connections + 100:
        print("idle_rss: RLIMIT_NOFILE is %d, need %d for %d connections: skipped"
              % (soft, args.connections + 100, args.connections))
        return 77
    per = run_coring(args)
    if args.peer == "nginx":
        peer = run_nginx(args)
        print("idle_rss: per idle keep-alive connection: coring %.2f KiB, nginx %.2f KiB (%.2fx)"
              % (per, peer, per / peer if peer > 0 else float("inf")))
    if args.max_kib_per_connection is not None and per > args.max_kib_per_connection:
        print("idle_rss: over the bound of %.1f KiB per connection" % args.max_kib_per_connection)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

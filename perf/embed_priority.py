#!/usr/bin/python3
"""perf/embed_priority.py: GET / latency on a core that also runs inference.

  perf/embed_priority.py [--binary PATH] [--cpus 0] [--client-cpu 1]
                         [--placements shared,batch,idle] [--rounds 3] [--seconds 5]
                         [--embed-connections 4] [--get-interval-ms 5]

Issue 16 ("Embeddings"): inference threads must not take the rings' core
from other routes. For each round and each --placements value in turn
(interleaved, so that a noisy neighbour hits every placement alike) this
starts coring under `taskset -c CPUS` with one ring thread per CPU given,
--apps hello,embed and --embed-placement P, loads POST /embed with wrk
(perf/wrk/embed.lua over perf/lib/embed.py's 200 sentences,
--embed-connections connections, on --client-cpu) and, on the same client
CPU, sends GET / on one keep-alive connection open-loop: one request due
every --get-interval-ms, its latency counted from when it was due, so a
ring held off its core shows in every GET it delayed. Prints per round and
placement GET / p50/p99/max and embed req/s, then the median of the
rounds' p99 per placement and its ratio to the first placement's.

The model is the embed scenario's (perf/results/models/minilm-random,
written by perf/lib/embed.py model). Wrap it in `flock LOCKFILE`
on a shared machine. Every loop is bounded by --seconds; traffic only on
127.0.0.1.
"""

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

PERF_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_DIR = os.path.dirname(PERF_DIR)
MODEL = os.path.join(PERF_DIR, "results", "models", "minilm-random")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit("coring exited with status %s" % proc.returncode)
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                if s.recv(100).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            time.sleep(0.1)
    sys.exit("coring did not answer GET / within %d s" % timeout)


def read_response(sock, buf):
    """Read one Content-Length response from @sock; returns the rest."""
    while True:
        end = buf.find(b"\r\n\r\n")
        if end >= 0:
            m = re.search(rb"(?i)content-length:\s*(\d+)", buf[:end])
            total = end + 4 + (int(m.group(1)) if m else 0)
            if len(buf) >= total:
                return buf[total:]
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("closed by the server")
        buf += chunk


def probe(port, seconds, interval, out, stop):
    """Open-loop GET /: latencies in ms from each request's due time."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        buf = b""
        start = time.monotonic()
        k = 0
        while not stop.is_set() and time.monotonic() - start < seconds and k < 100000:
            due = start + k * interval
            now = time.monotonic()
            if due > now:
                time.sleep(due - now)
            s.sendall(req)
            buf = read_response(s, buf)
            out.append((time.monotonic() - due) * 1e3)
            k += 1


def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def one(a, placement):
    port = free_port()
    ncpu = len(a.cpus.split(","))
    cmd = ["taskset", "-c", a.cpus, a.binary, "--host", "127.0.0.1", "--port", str(port),
           "--threads", str(a.ring_threads or ncpu), "--apps", "hello,embed", "--embed-model", MODEL,
           "--embed-placement", placement, "--log-level", "warn"]
    srv = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    try:
        wait_ready(port, srv)
        wrk = subprocess.Popen(["taskset", "-c", a.client_cpu, "wrk", "-t1", "-c%d" % a.embed_connections,
                                "-d%ds" % a.seconds, "--latency", "-s", os.path.join(PERF_DIR, "wrk", "embed.lua"),
                                "http://127.0.0.1:%d/embed" % port, "--", os.path.join(MODEL, "pool.txt")],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(0.5)  # the embed load first: the probe measures beside it
        lat, stop = [], threading.Event()
        os.sched_setaffinity(0, {int(a.client_cpu)})
        probe(port, a.seconds - 1, a.get_interval_ms / 1e3, lat, stop)
        out, _ = wrk.communicate(timeout=a.seconds + 60)
        m = re.search(r"Requests/sec:\s*([\d.]+)", out)
        rps = float(m.group(1)) if m else float("nan")
    finally:
        srv.send_signal(signal.SIGTERM)
        try:
            srv.wait(20)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()
    return {"p50": pct(lat, 50), "p99": pct(lat, 99), "max": max(lat), "n": len(lat), "embed_rps": rps}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=os.path.join(REPO_DIR, "build-rel", "apps", "coring"))
    ap.add_argument("--cpus", default="0", help="the server's CPUs (taskset -c)")
    ap.add_argument("--ring-threads", type=int, default=0, help="--threads (default: one per CPU given)")
    ap.add_argument("--client-cpu", default="1")
    ap.add_argument("--placements", default="shared,batch,idle")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=5)
    ap.add_argument("--embed-connections", type=int, default=4)
    ap.add_argument("--get-interval-ms", type=float, default=5.0)
    a = ap.parse_args()
    if not (2 <= a.seconds <= 60 and 1 <= a.rounds <= 10):
        sys.exit("--seconds 2..60, --rounds 1..10")
    subprocess.run(["/usr/bin/python3", os.path.join(PERF_DIR, "lib", "embed.py"), "model", MODEL],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["/usr/bin/python3", os.path.join(PERF_DIR, "lib", "embed.py"), "pool", MODEL,
                    os.path.join(MODEL, "pool.txt")], check=True, stdout=subprocess.DEVNULL)
    placements = a.placements.split(",")
    results = {p: [] for p in placements}
    print("server CPUs %s, client CPU %s, %d embed connections, GET / due every %.1f ms, %d s a run"
          % (a.cpus, a.client_cpu, a.embed_connections, a.get_interval_ms, a.seconds))
    for r in range(a.rounds):
        for p in placements:
            res = one(a, p)
            results[p].append(res)
            print("round %d %-7s GET / p50 %7.2f ms  p99 %7.2f ms  max %7.2f ms  (%d GETs)  embed %.1f req/s"
                  % (r + 1, p, res["p50"], res["p99"], res["max"], res["n"], res["embed_rps"]), flush=True)
    base = statistics.median(x["p99"] for x in results[placements[0]])
    for p in placements:
        p99 = statistics.median(x["p99"] for x in results[p])
        rps = statistics.median(x["embed_rps"] for x in results[p])
        print("median %-7s GET / p99 %7.2f ms (%.3fx %s's)  embed %.1f req/s"
              % (p, p99, p99 / base if base else float("nan"), placements[0], rps))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Integration tests of logging under a slow stderr: a ring thread never
waits for stderr (issue 13).

coring runs with --access-log and its stderr in a 4 KiB pipe that nobody
reads for 5 s while clients keep sending requests. Before lines went
through a logger thread, the ring thread blocked in write(2) as soon as the
pipe was full and every request stalled. Then the pipe is read, coring is
stopped with SIGTERM and must exit 0 with its final lines present, every
request's access line either written or counted as dropped.
"""

import sys

sys.dont_write_bytecode = True

import fcntl  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

STALL_S = 5.0           # how long nobody reads coring's stderr
CLIENTS = 4             # keep-alive connections sending GET / in a loop
MAX_REQUESTS = 200000   # bound on the load, whatever the speed
P99_BOUND_S = 0.100     # answers while stderr is stalled (a stalled ring: seconds)
EXIT_GIVE_UP_S = 5.0    # the exit flush's bound (core/src/log.c LOG_EXIT_WAIT_MS)


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))] if v else float("inf")


class SlowStderrTest(cs.CoringTestCase):
    def start(self, args):
        rd, wr = os.pipe()
        fcntl.fcntl(wr, fcntl.F_SETPIPE_SZ, 4096)
        cmd = [cs.binary(), "--host", cs.HOST, "--port", "0", "--threads", "1", "--apps", "hello"] + args
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=wr)
        os.close(wr)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        # Read up to the start-up line only, then leave the pipe alone.
        head = b""
        deadline = time.monotonic() + cs.START_TIMEOUT
        port = None
        while port is None and time.monotonic() < deadline:
            b = os.read(rd, 1)
            if not b:
                break
            head += b
            m = cs.LISTEN_RE.search(head.decode("utf-8", "replace"))
            if m and head.endswith(b"\n"):
                port = int(m.group(2))
        self.assertIsNotNone(port, "no start-up line: %r" % head)
        return proc, rd, port

    def load(self, port, stop, results):
        """GET / in a loop on one keep-alive connection until @stop."""
        conn = cs.Conn(cs.HOST, port, timeout=STALL_S + 5)
        try:
            while not stop.is_set() and len(results) < MAX_REQUESTS:
                t0 = time.monotonic()
                try:
                    resp = conn.request("GET", "/")
                    status = resp.status
                except OSError:
                    status = None
                t1 = time.monotonic()
                results.append((t1, t1 - t0, status))
                if status is None:
                    return
        finally:
            conn.close()

    def test_access_log_into_a_pipe_nobody_reads(self):
        proc, rd, port = self.start(["--access-log"])
        stop = threading.Event()
        results = []
        workers = [threading.Thread(target=self.load, args=(port, stop, results)) for _ in range(CLIENTS)]
        t_start = time.monotonic()
        for w in workers:
            w.start()
        time.sleep(STALL_S)
        stop.set()
        for w in workers:
            w.join(STALL_S + 10)
        elapsed = time.monotonic() - t_start

        # Now read coring's stderr, and stop it.
        out = []
        reader = threading.Thread(target=lambda: out.append(b"".join(iter(lambda: os.read(rd, 65536), b""))))
        reader.start()
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(cs.STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            status = None
        reader.join(10)
        os.close(rd)
        text = out[0].decode("utf-8", "replace") if out else ""

        answered = [r for r in results if r[2] == 200]
        latencies = [r[1] for r in results]
        p99 = percentile(latencies, 0.99)
        per_second = [0] * int(STALL_S)
        for t, _, s in answered:
            i = int(t - t_start)
            if s == 200 and 0 <= i < len(per_second):
                per_second[i] += 1
        written = len(re.findall(r"\] GET / 200 ", text))
        dropped = sum(int(k) for k in re.findall(r"log buffer full: dropped (\d+) lines", text))
        print("\n%d requests in %.1f s with stderr unread (%.0f/s), per second %s; p50 %.2f ms, "
              "p99 %.2f ms, max %.2f ms; access lines written %d, dropped %d"
              % (len(results), elapsed, len(results) / elapsed, per_second,
                 percentile(latencies, 0.5) * 1e3, p99 * 1e3, max(latencies, default=0) * 1e3,
                 written, dropped))

        self.assertEqual(len(answered), len(results), "requests not answered 200 while stderr was stalled")
        self.assertTrue(all(per_second), "a second without any answer: %s" % per_second)
        self.assertLess(p99, P99_BOUND_S, "p99 %.1f ms while stderr was stalled" % (p99 * 1e3))
        self.assertEqual(status, 0, "exit status after SIGTERM; stderr tail:\n%s" % text[-2000:])
        self.assertIn("received SIGTERM: draining", text)
        self.assertRegex(text, r"INFO  \[main\] stopped\n$", "the final line is missing")
        self.assertGreater(dropped, 0, "a 4 KiB pipe held every line?")
        self.assertEqual(written + dropped, len(answered),
                         "each request's access line is written or counted as dropped")

    def test_lines_at_exit_are_written(self):
        # A clean stop with a reader: nothing buffered is lost.
        proc, rd, port = self.start(["--access-log"])
        for i in range(50):
            with cs.Conn(cs.HOST, port) as c:
                self.assertEqual(c.request("GET", "/?n=%d" % i).status, 200)
        proc.send_signal(signal.SIGTERM)
        text = b""
        while True:
            b = os.read(rd, 65536)
            if not b:
                break
            text += b
        os.close(rd)
        self.assertEqual(proc.wait(cs.STOP_TIMEOUT), 0)
        text = text.decode()
        self.assertEqual(len(re.findall(r"GET /\?n=\d+ 200", text)), 50, text)
        self.assertTrue(text.endswith("stopped\n"), text[-300:])

    def test_exit_with_stderr_never_read(self):
        # Nobody ever reads: the exit flush gives up after 5 s instead of
        # holding the process in write(2) for ever.
        proc, rd, port = self.start(["--access-log"])
        self.addCleanup(os.close, rd)
        with cs.Conn(cs.HOST, port) as c:
            for i in range(2000):  # far more access lines than the 4 KiB pipe holds
                self.assertEqual(c.request("GET", "/?n=%d" % i).status, 200)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            status = proc.wait(EXIT_GIVE_UP_S + cs.STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail("still running %.0f s after SIGTERM, its stderr full" % (time.monotonic() - t0))
        took = time.monotonic() - t0
        sys.stderr.write("\nexit with stderr never read: status %d after %.1f s\n" % (status, took))
        self.assertEqual(status, 0)


if __name__ == "__main__":
    cs.main()

#!/usr/bin/python3
"""Integration tests of logging under a slow stderr: a ring thread never
waits for stderr (issue 13).

coring runs with --access-log and its stderr in a 4 KiB pipe that nobody
reads for 5 s while clients keep sending requests. Before lines went
through a logger thread, the ring thread blocked in write(2) as soon as the
pipe was full and every request stalled. Then the pipe is read, coring is
stopped with SIGTERM and must exit 0 with its final lines present, every
request's access line either written or counted as dropped.

JsonLogTest (issue 14): --log-format json --access-log, stderr parsed as
JSON lines: every field of the access line, X-Request-Id kept, replaced
when invalid, made unique, and carried into a line an app logs while
serving (the cep app's upstream warning).
"""

import sys

sys.dont_write_bytecode = True

import fcntl  # noqa: E402
import json  # noqa: E402
import socket  # noqa: E402
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


RFC3339_MS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")
MADE_ID_RE = re.compile(r"^[0-9a-f]{16}-[0-9a-f]{8,}$")
UNIQUE_REQUESTS = 2000   # made ids checked for uniqueness


class JsonLogTest(cs.CoringTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = cs.CoringServer(threads=2, apps="hello",
                                     args=["--log-format", "json", "--access-log"]).start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(expect_status=0)

    def json_lines(self):
        with self.server._lock:
            lines = list(self.server._lines)
        out = []
        for line in lines:
            try:
                out.append(json.loads(line))
            except ValueError:
                self.fail("not a JSON line: %r" % line)
        return out

    def access_lines(self, pred, want=1, timeout=5.0):
        """The access lines matching @pred, once @want of them are there
        (lines leave through the logger thread every 10 ms)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [o for o in self.json_lines() if "status" in o and pred(o)]
            if len(found) >= want or time.monotonic() > deadline:
                return found
            time.sleep(0.02)

    def test_every_line_is_json_with_ts_level_thread_msg(self):
        with cs.Conn(cs.HOST, self.server.port) as c:
            self.assertEqual(c.request("GET", "/?every-line").status, 200)
        self.access_lines(lambda o: o["target"] == "/?every-line")
        objs = self.json_lines()
        self.assertTrue(any("listening on http://" in o["msg"] for o in objs), objs[:3])
        for o in objs:
            self.assertRegex(o["ts"], RFC3339_MS_RE)
            self.assertIn(o["level"], ("debug", "info", "warn", "error"))
            self.assertIsInstance(o["thread"], str)
            self.assertIsInstance(o["msg"], str)

    def test_access_line_fields(self):
        target = '/?q="x"&u=%C3%A9'
        with cs.Conn(cs.HOST, self.server.port) as c:
            local_port = c.sock.getsockname()[1]
            resp = c.request("GET", target, headers={"User-Agent": 'probe "1" \xc3\xa9 \xff'.encode("latin-1").decode("latin-1")})
            raw_len = len(resp.raw_head) + len(resp.body)
            r10 = c.request("GET", "/?ten", version="HTTP/1.0", headers={"Connection": "keep-alive"})
        self.assertEqual(resp.status, 200)
        self.assertEqual(r10.status, 200)
        [line] = self.access_lines(lambda o: o["target"] == target)
        print("\naccess line: %s" % json.dumps(line))
        self.assertEqual(line["level"], "info")
        self.assertRegex(line["thread"], r"^t\d+$")
        self.assertEqual(line["method"], "GET")
        self.assertEqual(line["protocol"], "HTTP/1.1")
        self.assertEqual(line["status"], 200)
        self.assertEqual(line["client"], cs.HOST)
        self.assertEqual(line["client_port"], local_port)
        self.assertEqual(line["bytes"], raw_len)
        self.assertIsInstance(line["duration_ms"], float)
        self.assertGreaterEqual(line["duration_ms"], 0)
        # Latin-1 bytes on the wire: é as UTF-8 is kept, a lone 0xff is U+FFFD.
        self.assertEqual(line["user_agent"], 'probe "1" \u00e9 \ufffd')
        self.assertEqual(line["request_id"], resp.header("X-Request-Id"))
        [ten] = self.access_lines(lambda o: o["target"] == "/?ten")
        self.assertEqual(ten["protocol"], "HTTP/1.0")

    def test_incoming_request_id_is_kept_and_logged(self):
        rid = "abc-123_!~" + "x" * 118   # 128 bytes, the longest kept
        with cs.Conn(cs.HOST, self.server.port) as c:
            resp = c.request("GET", "/?kept", headers={"X-Request-Id": rid})
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.header("X-Request-Id"), rid)
        [line] = self.access_lines(lambda o: o["target"] == "/?kept")
        self.assertEqual(line["request_id"], rid)
        self.assertNotIn("invalid_request_id", line)

    def test_invalid_request_id_is_replaced(self):
        cases = {"space": "a b", "long": "y" * 129, "utf8": "caf\u00e9"}
        with cs.Conn(cs.HOST, self.server.port) as c:
            for name, rid in cases.items():
                resp = c.request("GET", "/?bad=" + name, headers={"X-Request-Id": rid})
                self.assertEqual(resp.status, 200, name)
                made = resp.header("X-Request-Id")
                self.assertRegex(made, MADE_ID_RE, name)
                [line] = self.access_lines(lambda o, n=name: o["target"] == "/?bad=" + n)
                self.assertEqual(line["request_id"], made, name)
                self.assertIn("invalid_request_id", line, name)

    def test_a_long_user_agent_is_cut_and_the_request_id_kept(self):
        """Issue 39: a User-Agent of 1,772 bytes fitted whole, and the
        request id after it no longer did: the line had none. Now the
        identifying fields are whole and the User-Agent is cut and named."""
        ua = "Mozilla/5.0 " + "u" * 1760   # 1,772 bytes
        with cs.Conn(cs.HOST, self.server.port) as c:
            resp = c.request("GET", "/?long-ua", headers={"User-Agent": ua, "X-Request-Id": "trace-1"})
        self.assertEqual(resp.status, 200)
        self.assertEqual(resp.header("X-Request-Id"), "trace-1")
        [line] = self.access_lines(lambda o: o["target"] == "/?long-ua")
        self.assertEqual(line.get("request_id"), "trace-1", line)
        self.assertEqual(line["method"], "GET")
        self.assertEqual(line["status"], 200)
        self.assertEqual(line["client"], cs.HOST)
        self.assertTrue(ua.startswith(line["user_agent"]), line["user_agent"][:40])
        self.assertLess(len(line["user_agent"]), len(ua))
        self.assertEqual(line.get("truncated"), ["user_agent"])
        with self.server._lock:
            raw = [ln for ln in self.server._lines if '"target":"/?long-ua"' in ln]
        self.assertLessEqual(len(raw[0].encode()) + 1, 2048)   # the newline included

    def test_made_ids_are_unique(self):
        ids = set()
        t0 = time.monotonic()
        for k in range(4):
            with cs.Conn(cs.HOST, self.server.port) as c:
                for i in range(UNIQUE_REQUESTS // 4):
                    resp = c.request("GET", "/?u=%d-%d" % (k, i))
                    self.assertEqual(resp.status, 200)
                    rid = resp.header("X-Request-Id")
                    self.assertRegex(rid, MADE_ID_RE)
                    ids.add(rid)
        print("\n%d requests, %d distinct ids in %.2f s" % (UNIQUE_REQUESTS, len(ids), time.monotonic() - t0))
        self.assertEqual(len(ids), UNIQUE_REQUESTS)


class AppLineRequestIdTest(cs.CoringTestCase):
    """A warning the cep app logs while serving (its upstream refuses the
    connection) carries the request's id."""

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-logs-")

    def test_app_warning_carries_the_request_id(self):
        dead = socket.socket()
        dead.bind((cs.HOST, 0))
        port = dead.getsockname()[1]
        dead.close()   # nothing listens there: connection refused
        saved = dict(os.environ)
        os.environ["DATABASE_URL"] = self.postgres.url()
        os.environ["VIACEP_URL"] = "http://127.0.0.1:%d/ws" % port
        try:
            server = cs.CoringServer(threads=1, apps="cep",
                                     args=["--log-format", "json", "--access-log"]).start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        try:
            with cs.Conn(cs.HOST, server.port) as c:
                resp = c.request("GET", "/api/v1/cep/01001000", headers={"X-Request-Id": "cep-req-1"})
            self.assertGreaterEqual(resp.status, 500, resp)
            deadline = time.monotonic() + 5
            warn = access = None
            while time.monotonic() < deadline and not (warn and access):
                with server._lock:
                    objs = [json.loads(line) for line in server._lines]
                warn = next((o for o in objs if o["msg"].startswith("cep: upstream") and o["level"] == "warn"), None)
                access = next((o for o in objs if o.get("target") == "/api/v1/cep/01001000"), None)
                time.sleep(0.02)
            print("\napp line: %s" % json.dumps(warn))
            self.assertIsNotNone(warn, server.stderr_text())
            self.assertEqual(warn["level"], "warn")
            self.assertEqual(warn.get("request_id"), "cep-req-1", warn)
            self.assertEqual(access["request_id"], "cep-req-1")
        finally:
            server.stop(expect_status=0)


if __name__ == "__main__":
    cs.main()

#!/usr/bin/python3
"""Hostile clients, resource limits and faults: slowloris and slow bodies, a
pipelining client that never reads, --max-connections, descriptor exhaustion
(EMFILE), a JSON body nested 100,000 deep, SIGTERM under load, SIGHUP.

Every load here is bounded in time and count and stays on 127.0.0.1."""

import sys

sys.dont_write_bytecode = True

import errno  # noqa: E402
import os  # noqa: E402
import pwd  # noqa: E402
import resource  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

H = b"Host: 127.0.0.1\r\n"
JSON_CT = b"Content-Type: application/json\r\n"
JSON_HDR = {"Content-Type": "application/json"}
GET_JSON = b"GET /json HTTP/1.1\r\n" + H + b"\r\n"


class Base(cs.CoringTestCase):
    def setUp(self):
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.kill()

    def start(self, threads=1, args=(), **kw):
        srv = cs.CoringServer(threads=threads, args=args, **kw).start()
        self.servers.append(srv)
        return srv

    def connect(self, srv, **kw):
        c = srv.connect(**kw)
        self.addCleanup(c.close)
        return c

    def assert_serves(self, srv, what):
        with srv.connect() as c:
            resp = c.request("GET", "/json")
        self.assertEqual(resp.status, 200, "%s: %r" % (what, resp))

    def cpu_share(self, srv, seconds=1.0, during=None):
        """The server's CPU use over @seconds, in cores, while @during() runs in a loop."""
        t0, c0 = time.monotonic(), srv.cpu_seconds()
        end = t0 + seconds
        while time.monotonic() < end:
            if during:
                during()
            else:
                time.sleep(0.05)
        return (srv.cpu_seconds() - c0) / (time.monotonic() - t0)


class SlowClientTest(Base):
    def trickle(self, c, limit):
        """Send a byte every second until the server answers or closes; return
        (seconds taken, the bytes received)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit:
            try:
                c.send(b"a")
            except OSError:
                return time.monotonic() - t0, b""
            c.sock.settimeout(1.0)
            try:
                data = c.sock.recv(4096)
                return time.monotonic() - t0, data
            except socket.timeout:
                continue
            except ConnectionResetError:
                return time.monotonic() - t0, b""
        self.fail("a client sending a byte a second was not cut within %d s" % limit)

    def test_slowloris_header(self):
        srv = self.start(args=["--header-timeout", "3", "--keepalive-timeout", "60"])
        c = self.connect(srv)
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        took, data = self.trickle(c, 10)
        self.assertLess(took, 5.5, "slowloris cut after %.1f s with --header-timeout 3" % took)
        if data:
            self.assertIn(b" 408 ", data[:20])
        self.assert_serves(srv, "after slowloris")

    def slow_body(self, head, what):
        # The body timeout is one deadline for the whole body, not per read.
        srv = self.start(args=["--body-timeout", "3", "--header-timeout", "60"])
        c = self.connect(srv)
        c.send(b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + head)
        took, data = self.trickle(c, 10)
        self.assertLess(took, 5.5, "%s cut after %.1f s with --body-timeout 3" % (what, took))
        if data:
            self.assertIn(b" 408 ", data[:20])
        self.assert_serves(srv, "after a " + what)

    def test_slow_body(self):
        self.slow_body(b"Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{", "slow body")

    def test_slow_chunked_body(self):
        self.slow_body(b"Transfer-Encoding: chunked\r\n\r\n64\r\n", "slow chunked body")


class PipelineFloodTest(Base):
    def test_client_that_never_reads(self):
        # A client writes pipelined requests as fast as it can and never reads.
        # The server must stop reading once its output cannot leave (back-pressure):
        # the client's send blocks, the server's memory stays bounded, and it keeps
        # serving everyone else.
        srv = self.start(threads=1)
        self.assert_serves(srv, "warm-up")
        rss0 = srv.rss_kib()
        c = self.connect(srv)
        c.sock.setblocking(False)
        batch = GET_JSON * 1000
        sent, stalled_since, t0 = 0, None, time.monotonic()
        while time.monotonic() - t0 < 6:
            try:
                sent += c.sock.send(batch)
                stalled_since = None
            except BlockingIOError:
                stalled_since = stalled_since or time.monotonic()
                if time.monotonic() - stalled_since > 1.0:
                    break  # the server stopped reading
                time.sleep(0.01)
        requests = sent // len(GET_JSON)
        self.assertIsNotNone(stalled_since, "the server read %d requests in 6 s from a client that never "
                             "reads its answers: no back-pressure" % requests)
        self.assertGreater(requests, 1000, "too few requests sent to test anything")
        rss1 = srv.rss_kib()
        self.assertLess(rss1 - rss0, 32 * 1024, "RSS grew %d KiB (from %d) for a client that never reads"
                        % (rss1 - rss0, rss0))
        for _ in range(3):
            self.assert_serves(srv, "while a client floods without reading")
        self.assertLess(self.cpu_share(srv, 1.0), 0.5, "the server spins while blocked on a non-reader")
        sys.stderr.write("\n  pipeline flood: %d requests accepted before back-pressure, RSS %d -> %d KiB\n"
                         % (requests, rss0, rss1))


class ConnectionLimitTest(Base):
    def test_max_connections(self):
        srv = self.start(threads=1, args=["--max-connections", "8"])
        held = [self.connect(srv) for _ in range(8)]
        for c in held:
            self.assertEqual(c.request("GET", "/json").status, 200)
        # Beyond the limit: accepted and closed at once, without an answer.
        extra = [self.connect(srv) for _ in range(40)]
        t0 = time.monotonic()
        for i, c in enumerate(extra):
            c.sock.settimeout(2)
            try:
                c.send(GET_JSON)
            except OSError:
                pass
            self.assertTrue(c.closed_by_peer(timeout=2), "connection %d beyond --max-connections 8 still open" % i)
        self.assertLess(time.monotonic() - t0, 4)

        refused = [0]

        def hammer():  # about 500 connections a second
            try:
                s = socket.create_connection((cs.HOST, srv.port), timeout=1)
                s.close()
                refused[0] += 1
            except OSError:
                pass
            time.sleep(0.002)
        # Refusing costs an accept and a close per connection, so the share
        # follows the client's rate: unthrottled, it measured 29% to 61% of
        # a core here, and the bound failed CI on and off. At a fixed rate
        # the work is a few percent, while a spinning accept loop would take
        # the whole core.
        cpu = self.cpu_share(srv, 1.0, during=hammer)
        self.assertGreater(refused[0], 100, "the client could not connect")
        self.assertLess(cpu, 0.5, "%.0f%% of a core while refusing connections over the limit" % (cpu * 100))
        # Once the client stops, nothing is left running.
        idle = self.cpu_share(srv, 0.5)
        sys.stderr.write("\n  refusing %d connections over the limit: %.0f%% of a core, then %.0f%% idle\n"
                         % (refused[0], cpu * 100, idle * 100))
        self.assertLess(idle, 0.1, "%.0f%% of a core after the refused connections" % (idle * 100))
        for c in held:  # the ones within the limit still work
            self.assertEqual(c.request("GET", "/plaintext").status, 200)
        for c in held:
            c.close()
        deadline = time.monotonic() + 3
        while True:
            try:
                self.assert_serves(srv, "after the held connections closed")
                break
            except (AssertionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def test_descriptor_exhaustion(self):
        # RLIMIT_NOFILE 64 and a connection limit above it: accept fails with
        # EMFILE. The server must back off (not spin), survive, and serve again
        # once descriptors are free.
        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
        srv = self.start(threads=1, args=["--max-connections", "1000"], preexec_fn=limit)
        conns = []
        for _ in range(120):
            try:
                conns.append(socket.create_connection((cs.HOST, srv.port), timeout=2))
            except OSError:
                break
        time.sleep(0.3)
        cpu = self.cpu_share(srv, 1.0)
        self.assertLess(cpu, 0.5, "%.0f%% of a core with accept failing on EMFILE" % (cpu * 100))
        self.assertTrue(srv.running(), "exited on EMFILE; stderr:\n" + srv.stderr_text())
        for s in conns:
            s.close()
        deadline = time.monotonic() + 5
        while True:
            try:
                self.assert_serves(srv, "after descriptors were freed")
                break
            except (AssertionError, OSError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.assertIn("accept:", srv.stderr_text(200), "EMFILE not logged")


class BodyLimitTest(Base):
    def test_deeply_nested_json(self):
        srv = self.start(threads=1)
        c = self.connect(srv)
        for body in (b"[" * 100000 + b"]" * 100000, b'{"a":' * 100000 + b"1" + b"}" * 100000):
            resp = c.request("POST", "/todos", headers={"Content-Type": "application/json"}, body=body)
            self.assertJsonError(resp, 400, "JSON nested 100,000 deep")
        self.assert_serves(srv, "after deep JSON")

    def test_json_nested_64_deep_is_taken_65_is_not(self):
        """docs/hardening.md: JSON bodies nest at most 64 deep, 64 objects or
        arrays inside each other around any value. The limit counted the
        value too, so 64 around a number were 400 (issue 39)."""
        srv = self.start(threads=1)
        c = self.connect(srv)
        for kind, open_, close_ in (("arrays", b"[", b"]"), ("objects", b'{"a":', b"}")):
            for inner in (b"1", b"{}"):
                # The body's own object is the first of the 64.
                deep = open_ * 63 + inner + close_ * 63
                resp = c.request("POST", "/todos", JSON_HDR, body=b'{"title":"deep","x":' + deep + b"}")
                self.assertEqual(resp.status, 201, "64 %s around %s: %r" % (kind, inner, resp.body))
                deeper = open_ * 64 + inner + close_ * 64
                resp = c.request("POST", "/todos", JSON_HDR, body=b'{"title":"deep","x":' + deeper + b"}")
                self.assertJsonError(resp, 400, "65 %s around %s" % (kind, inner))
                self.assertIn(b"too deep", resp.body)

    def test_body_limit(self):
        srv = self.start(threads=1, args=["--max-body-bytes", "1000"])
        c = self.connect(srv)
        resp = c.request("POST", "/todos", JSON_HDR, body=b'{"title":"' + b"a" * 1000 + b'"}')
        self.assertJsonError(resp, 413, "body over --max-body-bytes")
        c = self.connect(srv)
        c.send(b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\n"
               + b"100\r\n" + b"a" * 256 + b"\r\n" * 1 + b"400\r\n" + b"a" * 1024 + b"\r\n0\r\n\r\n")
        self.assertJsonError(c.read_response(), 413, "chunked body over --max-body-bytes")
        self.assert_serves(srv, "after bodies over the limit")


class FaultTest(Base):
    def test_sigterm_under_load(self):
        # 16 clients hammer the server; SIGTERM arrives mid-flight. Every response
        # a client gets must be whole and correct; a connection may end only
        # between responses; new connections are refused soon after; exit 0
        # within the drain deadline.
        srv = self.start(threads=2, args=["--shutdown-timeout", "5"])
        stop = threading.Event()
        stats = {"ok": 0, "closed": 0}
        errors = []
        lock = threading.Lock()

        def client(k):
            while not stop.is_set():
                try:
                    c = srv.connect(timeout=5)
                except OSError:
                    return  # refused: the server is draining
                try:
                    while True:
                        if k % 2:
                            c.send(GET_JSON * 4)
                            for _ in range(4):
                                r = c.read_response()
                                if r.status != 200 or r.body != b'{"message":"Hello, World!"}':
                                    raise AssertionError("bad response %r" % r)
                                with lock:
                                    stats["ok"] += 1
                        else:
                            r = c.request("POST", "/todos", JSON_HDR, body={"title": "load %d" % k})
                            if r.status != 201:
                                raise AssertionError("bad response %r" % r)
                            tid = r.json()["id"]
                            r = c.request("DELETE", "/todos/%d" % tid)
                            if r.status != 204:
                                raise AssertionError("bad response %r" % r)
                            with lock:
                                stats["ok"] += 2
                        if r.header("Connection", "").lower() == "close":
                            break
                except cs.ProtocolError as e:
                    # Closed between responses: allowed while draining (the client retries).
                    if c.buf or "closed after" in str(e) or not srv_signalled.is_set():
                        errors.append("client %d: %s" % (k, e))
                        return
                    with lock:
                        stats["closed"] += 1
                except (OSError, AssertionError) as e:
                    if not srv_signalled.is_set() or isinstance(e, AssertionError):
                        errors.append("client %d: %r" % (k, e))
                        return
                finally:
                    c.close()

        srv_signalled = threading.Event()
        threads = [threading.Thread(target=client, args=(k,), daemon=True) for k in range(16)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        before = stats["ok"]
        srv_signalled.set()
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        status = srv.wait(8)
        took = time.monotonic() - t0
        stop.set()
        for t in threads:
            t.join(6)
        self.assertEqual(status, 0, "exit status %r after SIGTERM under load; stderr:\n%s" % (status, srv.stderr_text()))
        self.assertLess(took, 6.5, "exit took %.1f s with --shutdown-timeout 5" % took)
        self.assertFalse(errors, "client errors: %s" % errors[:5])
        self.assertGreater(before, 100, "too little load before SIGTERM")
        self.assertFalse(cs.can_connect(srv.port, timeout=0.5), "connections accepted after exit")
        sys.stderr.write("\n  SIGTERM under load: %d responses before, %d total, %d connections closed between "
                         "responses, exit in %.2f s\n" % (before, stats["ok"], stats["closed"], took))

    def test_sighup_is_ignored(self):
        # coring logs to stderr only, so there is nothing to reopen: SIGHUP is ignored.
        srv = self.start(threads=1)
        c = self.connect(srv)
        self.assertEqual(c.request("GET", "/json").status, 200)
        srv.send_signal(signal.SIGHUP)
        time.sleep(0.3)
        self.assertTrue(srv.running(), "SIGHUP stopped the server")
        self.assertEqual(c.request("GET", "/json").status, 200)
        srv.stop(expect_status=0)


class SecurityTest(Base):
    def test_user_drops_root(self):
        if os.geteuid() != 0:
            self.skipTest("--user needs the suite to run as root")
        try:
            pw = pwd.getpwnam("nobody")
        except KeyError:
            self.skipTest("no user 'nobody'")
        srv = self.start(threads=2, args=["--user", "nobody"])
        tasks = os.listdir("/proc/%d/task" % srv.pid)
        self.assertGreaterEqual(len(tasks), 3)
        for tid in tasks:
            with open("/proc/%d/task/%s/status" % (srv.pid, tid)) as f:
                ids = {line.split(":")[0]: line.split()[1:] for line in f if line.startswith(("Uid", "Gid", "Groups"))}
            self.assertEqual(ids["Uid"], [str(pw.pw_uid)] * 4, "thread %s: %r" % (tid, ids))
            self.assertEqual(ids["Gid"], [str(pw.pw_gid)] * 4, "thread %s: %r" % (tid, ids))
            self.assertNotIn("0", ids["Groups"], "thread %s kept group root: %r" % (tid, ids))
        c = self.connect(srv)  # io_uring works unprivileged
        for _ in range(3):
            self.assertEqual(c.request("GET", "/json").status, 200)
        r = c.request("POST", "/todos", JSON_HDR, body={"title": "as nobody"})
        self.assertEqual(r.status, 201)
        self.assertIn("running as user nobody", srv.stderr_text())
        srv.stop(expect_status=0)

    def test_user_unknown(self):
        srv = cs.CoringServer(threads=1, args=["--user", "no-such-user-coring"])
        with self.assertRaises(AssertionError):
            srv.start()
        srv.kill()
        self.assertNotEqual(srv.proc.returncode, 0)
        self.assertIn("no such user", srv.stderr_text())

    def test_request_bytes_not_echoed_or_logged_raw(self):
        srv = self.start(threads=1, args=["--access-log"])
        evil = [
            ("GET", "/todos/%0d%0aSet-Cookie:%20x=1"),
            ("GET", "/\\x1b[31m/%1b%5b"),
            ("BREW", "/x?%00"),
        ]
        for method, path in evil:
            for value in ("a\xffb\x80", "a\x1bb"):
                with srv.connect() as c:
                    r = c.request(method, path, headers={"X-Evil": value})
                    self.check_not_echoed(r)
        c = self.connect(srv)
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: \xff\x80\r\n\r\n")
        self.assertEqual(c.read_response().status, 200)
        time.sleep(0.2)
        for line in srv.stderr_text(200).splitlines():
            self.assertFalse(any(ord(ch) < 0x20 and ch != "\t" for ch in line), "control byte logged: %r" % line)
            self.assertNotIn("\ufffd", line, "raw non-ASCII request byte logged: %r" % line)

    def check_not_echoed(self, r):
        """No response header carries request bytes (a request-target or a field)."""
        self.assertIn(r.status, (400, 404, 405, 501), r)
        self.assertFalse(r.has_header("Set-Cookie"), r)
        for k, v in r.headers:
            self.assertNotIn("%0d", v.lower(), r)
            self.assertNotIn("x-evil", k.lower(), r)
            self.assertNotIn("\xff", v, r)


if __name__ == "__main__":
    cs.main()

#!/usr/bin/python3
"""Integration tests of the coring process: command line, start-up, timeouts, limits
and graceful shutdown (SIGTERM/SIGINT). Servers here run with --threads 1 unless a
test says otherwise."""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

H = b"Host: 127.0.0.1\r\n"


def run_cli(*args, timeout=10):
    """Run the binary with @args; return CompletedProcess (text). Fails on a hang."""
    try:
        return subprocess.run([cs.binary()] + list(args), stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=timeout, text=True, errors="replace")
    except subprocess.TimeoutExpired as e:
        raise AssertionError("coring %s did not exit within %d s (stderr so far %r)"
                             % (" ".join(args), timeout, e.stderr)) from None


class CommandLineTest(cs.CoringTestCase):
    def test_help(self):
        r = run_cli("--help")
        self.assertEqual(r.returncode, 0, "--help exit status; stderr %r" % r.stderr)
        self.assertRegex(r.stdout, r"(?i)usage", "--help stdout has no usage: %r" % r.stdout)
        for flag in ("--host", "--port", "--threads", "--apps", "--keepalive-timeout", "--shutdown-timeout",
                     "--max-body-bytes", "--log-level", "--version"):
            self.assertIn(flag, r.stdout, "--help does not mention %s" % flag)
        self.assertNotIn("listening on", r.stderr, "--help started a server")

    def test_version(self):
        r = run_cli("--version")
        self.assertEqual(r.returncode, 0, "--version exit status; stderr %r" % r.stderr)
        want = cs.option("expect_version")
        out = r.stdout.strip()
        if want:
            self.assertIn(want, out, "--version printed %r, expected it to contain %r" % (out, want))
        else:
            self.assertRegex(out, r"\b\d+\.\d+\.\d+\b", "--version printed no version: %r" % out)
        self.assertLessEqual(len(out.splitlines()), 3, "--version output is long: %r" % out)
        self.assertNotIn("listening on", r.stderr, "--version started a server")

    def test_unknown_flag(self):
        r = run_cli("--no-such-flag")
        self.assertNotEqual(r.returncode, 0, "unknown flag accepted; stderr %r" % r.stderr)
        self.assertGreater(r.returncode, 0, "unknown flag: killed by signal %d" % -r.returncode)
        self.assertIn("no-such-flag", r.stderr, "stderr does not name the unknown flag: %r" % r.stderr)
        self.assertNotIn("listening on", r.stderr)

    def test_bad_values(self):
        for args in (["--port", "notaport"], ["--port", "70000"], ["--threads", "-2"], ["--threads", "x"],
                     ["--log-level", "loud"], ["--apps", "hello,nosuchapp"], ["--max-body-bytes", "lots"],
                     ["--port"]):
            r = run_cli(*args)
            self.assertGreater(r.returncode, 0, "%s: exit status %d (stderr %r)" % (args, r.returncode, r.stderr))
            self.assertTrue(r.stderr.strip(), "%s: nothing on stderr" % args)
            self.assertNotIn("listening on", r.stderr, "%s started a server" % args)

    def test_option_messages_say_what_is_wrong(self):
        for args, want in ((["--port"], "option '--port' needs a value"),
                           (["--access-log=yes"], "option '--access-log' takes no value"),
                           (["--no-such-flag"], "unknown option '--no-such-flag'"),
                           (["--host", "localhost"], "--host: expected a numeric IPv4 or IPv6 address")):
            r = run_cli(*args)
            self.assertEqual(r.returncode, 2, "%s: stderr %r" % (args, r.stderr))
            self.assertIn(want, r.stderr, args)

    def test_help_lists_every_environment_variable(self):
        r = run_cli("--help")
        env = r.stdout.split("Environment:", 1)[1].split("Apps:", 1)[0]
        for var in ("DATABASE_URL", "VIACEP_URL", "OPENBLAS_CORETYPE"):
            self.assertIn(var, env, "--help's Environment section lacks " + var)
        self.assertRegex(env, r"DATABASE_URL[^\n]*\n[^\n]*mounted \(users, cep; --list-apps says which\)")

    def test_check_config(self):
        r = run_cli("--check-config", "--apps", "nosuchapp")
        self.assertEqual(r.returncode, 2)
        self.assertIn("unknown app 'nosuchapp'", r.stderr)

    def test_check_config_runs_the_start_up_checks_that_need_no_network(self):
        """Issue 45: --check-config said "configuration OK" for a
        configuration that exits 1 at start ("DATABASE_URL is not set").
        Each refusal here is the start's, without its network steps
        (connecting, migrating, binding)."""
        def check(env, *args):
            env = {k: v for k, v in dict(os.environ, **env).items() if v is not None}
            return subprocess.run([cs.binary(), "--check-config", "--port", "0"] + list(args), env=env,
                                  stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=10)
        cases = (
            ({"DATABASE_URL": None}, ["--apps", "users"], "DATABASE_URL is not set"),
            ({"DATABASE_URL": None}, ["--apps", "todo", "--todo-store", "postgres"], "DATABASE_URL is not set"),
            ({"DATABASE_URL": "postgresql://x@h/db?nosuchoption=1"}, ["--apps", "users"],
             'DATABASE_URL: libpq does not take it: invalid URI query parameter: "nosuchoption"'),
            ({"DATABASE_URL": "host=h dbname"}, ["--apps", "cep"], "DATABASE_URL: libpq does not take it"),
            ({"DATABASE_URL": cs.CHECK_DATABASE_URL, "DATABASE_READ_URL": "postgres://[::1"}, ["--apps", "users"],
             "DATABASE_READ_URL: libpq does not take it"),
            ({"DATABASE_URL": cs.CHECK_DATABASE_URL, "VIACEP_URL": "ftp://viacep"}, ["--apps", "cep"],
             "VIACEP_URL must be an http:// or https:// URL"),
            ({}, ["--apps", "hello", "--user", "no-such-user-here"], "no such user"),
            # The embed app's check hook: with a model, the kernels' word is one and the model opens.
            ({}, ["--apps", "embed", "--embed-model", "/nonexistent/model"],
             "embed: cannot load the model: /nonexistent/model/config.json"),
            ({"CORING_EMBED_KERNELS": "fastest"}, ["--apps", "embed", "--embed-model", "/nonexistent/model"],
             "CORING_EMBED_KERNELS=fastest"),
        )
        for env, args, want in cases:
            r = check(env, *args)
            what = "%s %s: %r" % (env, args, r.stderr)
            self.assertEqual(r.returncode, 2, what)
            self.assertIn(want, r.stderr, what)
            self.assertNotIn("configuration OK", r.stdout, what)
            self.assertNotIn("listening on", r.stderr, what)
        # Set and well-formed, though nothing listens there: nothing connects.
        t0 = time.monotonic()
        r = check({"DATABASE_URL": cs.CHECK_DATABASE_URL, "DATABASE_READ_URL": "host=/nowhere port=1"},
                  "--apps", "users,cep,todo", "--todo-store", "postgres")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("configuration OK", r.stdout)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(check({"DATABASE_URL": None}, "--apps", "hello,todo").returncode, 0)

    def test_port_in_use(self):
        blocker = socket.socket()
        self.addCleanup(blocker.close)
        blocker.bind((cs.HOST, 0))  # no SO_REUSEPORT: coring cannot share this port
        blocker.listen(1)
        port = blocker.getsockname()[1]
        r = run_cli("--host", cs.HOST, "--port", str(port), "--threads", "1")
        self.assertGreater(r.returncode, 0, "started on a port already in use? stderr %r" % r.stderr)
        self.assertNotIn("listening on", r.stderr)
        self.assertTrue(r.stderr.strip(), "no error message for a port in use")


class SecondInstanceTest(cs.CoringTestCase):
    def test_second_instance_on_the_same_port_is_refused(self):
        # Every listener is SO_REUSEPORT: without a check, a second coring on
        # the first one's port binds and the kernel splits connections.
        first = cs.CoringServer(threads=2)
        first.start()
        self.addCleanup(first.kill)
        second = subprocess.Popen([cs.binary(), "--host", cs.HOST, "--port", str(first.port), "--threads", "2",
                                   "--apps", "hello,todo"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True, errors="replace")
        try:
            _, err = second.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            second.kill()
            _, err = second.communicate()
            self.fail("a second coring on port %d still runs 5 s later (it shares the port); stderr %r"
                      % (first.port, err))
        self.assertGreater(second.returncode, 0, "second instance exit status; stderr %r" % err)
        self.assertIn("Address already in use", err)
        self.assertNotIn("listening on", err)
        for i in range(50):
            with first.connect() as c:
                resp = c.request("GET", "/")
                self.assertEqual(resp.status, 200, "connection %d: %r" % (i, resp))
        first.stop(expect_status=0)


class ServerTestBase(cs.CoringTestCase):
    def start(self, threads=1, args=(), apps="hello,todo"):
        srv = cs.CoringServer(threads=threads, apps=apps, args=list(args))
        srv.start()
        self.addCleanup(srv.kill)
        return srv

    def connect(self, srv, **kw):
        c = srv.connect(**kw)
        self.addCleanup(c.close)
        return c


class StartupTest(ServerTestBase):
    def test_listening_line_and_serving(self):
        srv = self.start(threads=1)
        self.assertEqual(srv.host, cs.HOST, "listening line host: %s" % srv.stderr_text(5))
        self.assertGreater(srv.port, 0)
        resp = self.connect(srv).request("GET", "/")
        self.assertEqual(resp.status, 200, repr(resp))
        srv.stop(expect_status=0)

    def test_apps_hello_only(self):
        srv = self.start(apps="hello")
        c = self.connect(srv)
        self.assertEqual(c.request("GET", "/json").status, 200)
        self.assertJsonError(c.request("GET", "/todos"), 404, "GET /todos with --apps hello")
        srv.stop(expect_status=0)

    def test_apps_todo_only(self):
        srv = self.start(apps="todo")
        c = self.connect(srv)
        self.assertEqual(c.request("GET", "/health").status, 200)
        self.assertJsonError(c.request("GET", "/plaintext"), 404, "GET /plaintext with --apps todo")
        srv.stop(expect_status=0)

    def test_limits_flags(self):
        srv = self.start(args=["--max-body-bytes", "100", "--max-header-bytes", "4096", "--max-headers", "10"])
        ok = json.dumps({"title": "t" * 80}).encode()  # 95 bytes
        with srv.connect() as c:
            resp = c.request("POST", "/todos", {"Content-Type": "application/json"}, ok)
            self.assertEqual(resp.status, 201, "95-byte body with --max-body-bytes 100: %r" % resp)
        big = json.dumps({"title": "t" * 100}).encode()
        cases = [
            ("101+ byte body", cs.build_request("POST", "/todos", {"Content-Type": "application/json"}, big), 413),
            ("5 KiB header section", cs.build_request("GET", "/", {"X-Pad": "p" * 5000}), 431),
            ("11 header fields", cs.build_request("GET", "/", [("X-H%d" % i, "v") for i in range(10)]), 431),
        ]
        for name, data, status in cases:
            with srv.connect() as c:
                c.send(data)
                self.assertJsonError(c.read_response(), status, name)
                self.assertTrue(c.closed_by_peer(), "%s: connection not closed" % name)
        srv.stop(expect_status=0)


class PinTest(ServerTestBase):
    """--pin on|off: worker thread i pinned to the i-th CPU of the process's mask, or
    free to run on any CPU of it. Read from /proc/PID/task/TID/status
    (Cpus_allowed_list) of the threads named ring-N."""

    def ring_masks(self, srv):
        masks = {}
        for tid in os.listdir("/proc/%d/task" % srv.pid):
            try:
                with open("/proc/%d/task/%s/comm" % (srv.pid, tid)) as f:
                    comm = f.read().strip()
                with open("/proc/%d/task/%s/status" % (srv.pid, tid)) as f:
                    status = f.read()
            except OSError:
                continue
            if re.fullmatch(r"ring-\d+", comm):
                masks[comm] = re.search(r"^Cpus_allowed_list:\s*(\S+)", status, re.M).group(1)
        return masks

    def test_pin_on_and_off(self):
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            self.skipTest("needs 2 CPUs in the affinity mask")
        process_mask = None
        for value, expect_pinned in (("on", True), ("off", False)):
            srv = self.start(threads=2, apps="hello", args=["--pin", value])
            resp = self.connect(srv).request("GET", "/")
            self.assertEqual(resp.status, 200, repr(resp))
            with open("/proc/%d/status" % srv.pid) as f:
                process_mask = re.search(r"^Cpus_allowed_list:\s*(\S+)", f.read(), re.M).group(1)
            masks = self.ring_masks(srv)
            self.assertEqual(sorted(masks), ["ring-0", "ring-1"], "--pin %s: worker threads %r" % (value, masks))
            if expect_pinned:
                self.assertEqual(masks, {"ring-0": str(cpus[0]), "ring-1": str(cpus[1])},
                                 "--pin on: each worker on its own CPU")
            else:
                self.assertEqual(set(masks.values()), {process_mask},
                                 "--pin off: workers keep the process's mask %s" % process_mask)
            srv.stop(expect_status=0)

    def test_pin_bad_value(self):
        r = run_cli("--pin", "maybe")
        self.assertEqual(r.returncode, 2, "stderr %r" % r.stderr)
        self.assertIn("--pin: expected on or off", r.stderr)


class TimeoutTest(ServerTestBase):
    def test_keepalive_timeout(self):
        srv = self.start(args=["--keepalive-timeout", "1"])
        c = self.connect(srv)
        self.assertEqual(c.request("GET", "/").status, 200)
        t0 = time.monotonic()
        self.assertTrue(c.closed_by_peer(timeout=4), "idle connection still open 4 s after its last "
                        "response with --keepalive-timeout 1")
        self.assertGreater(time.monotonic() - t0, 0.5, "idle connection closed long before the keep-alive timeout")
        self.assertEqual(self.connect(srv).request("GET", "/").status, 200)
        srv.stop(expect_status=0)

    def test_header_timeout(self):
        srv = self.start(args=["--header-timeout", "1", "--keepalive-timeout", "30"])
        c = self.connect(srv)
        c.send(b"GET / HTTP/1.1\r\nHo")
        t0 = time.monotonic()
        c.sock.settimeout(4)
        try:
            resp = c.read_response()
        except cs.ProtocolError:
            resp = None  # closed without a response: acceptable
        except socket.timeout:
            self.fail("a request stuck in its headers was not timed out within 4 s (--header-timeout 1)")
        if resp is not None:
            self.assertJsonError(resp, 408, "header timeout")
            self.assertTrue(c.closed_by_peer(4), "connection open after 408")
        self.assertGreater(time.monotonic() - t0, 0.5, "timed out long before --header-timeout")
        self.assertEqual(self.connect(srv).request("GET", "/").status, 200)
        srv.stop(expect_status=0)

    def test_header_timeout_is_one_deadline_not_per_read(self):
        # Slowloris: a byte every 0.3 s must not keep a request alive past
        # the header timeout, however often bytes arrive.
        srv = self.start(args=["--header-timeout", "2", "--keepalive-timeout", "30"])
        c = self.connect(srv)
        c.send(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        t0 = time.monotonic()
        closed = False
        while time.monotonic() - t0 < 6:
            try:
                c.send(b"a")
            except OSError:
                closed = True
                break
            c.sock.settimeout(0.3)
            try:
                data = c.sock.recv(4096)
            except socket.timeout:
                continue
            self.assertIn(b" 408 ", data[:20], "expected 408 for a request whose headers trickle in")
            closed = True
            break
        elapsed = time.monotonic() - t0
        self.assertTrue(closed, "a slowloris client held its request open for 6 s with --header-timeout 2")
        self.assertLess(elapsed, 4, "slowloris cut after %.1f s with --header-timeout 2" % elapsed)
        self.assertEqual(self.connect(srv).request("GET", "/").status, 200)
        srv.stop(expect_status=0)

    def test_silent_new_connection_gets_the_header_timeout(self):
        srv = self.start(args=["--header-timeout", "1", "--keepalive-timeout", "30"])
        c = self.connect(srv)
        t0 = time.monotonic()
        self.assertTrue(c.closed_by_peer(timeout=4), "a connection that never sent a byte was kept past "
                        "--header-timeout 1 (it got the 30 s keep-alive timeout?)")
        self.assertGreater(time.monotonic() - t0, 0.5)
        srv.stop(expect_status=0)

    def test_header_deadline_restarts_with_each_request(self):
        # A steady pipelining client whose writes end mid-request: each
        # request gets its own header deadline, so no 408 comes.
        srv = self.start(args=["--header-timeout", "2", "--keepalive-timeout", "30"])
        c = self.connect(srv, nodelay=True)
        req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        stream = req * 200
        sent = 0
        answered = 0
        t0 = time.monotonic()
        while time.monotonic() - t0 < 3.5 and sent < len(stream):
            # 7 bytes first, then two requests' worth: every write ends 7
            # bytes into a request, so the server never has a clean cut.
            chunk = stream[sent:sent + (7 if sent == 0 else len(req) * 2)]
            c.send(chunk)
            sent += len(chunk)
            time.sleep(0.05)
            c.sock.settimeout(0.05)
            try:
                data = c.sock.recv(65536)
            except socket.timeout:
                data = b""
            self.assertNotIn(b" 408 ", data, "408 for a client sending a request every 50 ms")
            self.assertTrue(data or time.monotonic() - t0 < 3.5, "connection closed")
            answered += data.count(b"HTTP/1.1 200")
        self.assertGreater(time.monotonic() - t0, 2.5, "the client did not run past the header timeout")
        self.assertGreater(answered, 50)
        srv.stop(expect_status=0)


class ShutdownTest(ServerTestBase):
    def test_sigterm_with_idle_keepalive_connection(self):
        srv = self.start(args=["--shutdown-timeout", "10"])
        c = self.connect(srv)
        self.assertEqual(c.request("GET", "/").status, 200)
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        status = srv.wait(3)
        elapsed = time.monotonic() - t0
        self.assertIsNotNone(status, "not exited 3 s after SIGTERM with one idle keep-alive connection "
                             "(--shutdown-timeout 10); stderr:\n" + srv.stderr_text())
        self.assertEqual(status, 0, "exit status after SIGTERM; stderr:\n" + srv.stderr_text())
        self.assertLess(elapsed, 3)
        self.assertTrue(c.closed_by_peer(timeout=2), "idle connection not closed at shutdown")

    def test_keepalive_request_just_after_sigterm_is_answered(self):
        # A keep-alive client idle at SIGTERM, unaware of it, sends its
        # next request 100 ms later: inside the drain's idle grace, it is
        # answered (with Connection: close), then the connection closes,
        # rather than being closed under the request (issue 41 item 4).
        srv = self.start(threads=2, args=["--shutdown-timeout", "10", "--drain-idle-grace", "1000"])
        conns = [self.connect(srv) for _ in range(4)]
        for c in conns:
            self.assertEqual(c.request("GET", "/plaintext").status, 200)
        srv.send_signal(signal.SIGTERM)
        time.sleep(0.1)
        for i, c in enumerate(conns):
            try:
                resp = c.request("GET", "/plaintext")
            except (OSError, cs.ProtocolError) as e:
                self.fail("keep-alive connection %d: no answer to a request 100 ms after SIGTERM (%s); "
                          "stderr:\n%s" % (i, e, srv.stderr_text()))
            self.assertEqual(resp.status, 200, repr(resp))
            self.assertIn("close", resp.tokens("Connection"), "the drain's answer must say Connection: close")
            self.assertTrue(c.closed_by_peer(timeout=2), "connection %d open after its answer in the drain" % i)
        self.assertEqual(srv.wait(5), 0, srv.stderr_text())

    def test_idle_connection_closed_after_the_drain_idle_grace(self):
        # An idle keep-alive client that sends nothing has had its chance
        # once the grace is over: closed then, not before, and well
        # before the shutdown timeout.
        srv = self.start(args=["--shutdown-timeout", "20", "--drain-idle-grace", "1500"])
        c = self.connect(srv)
        self.assertEqual(c.request("GET", "/").status, 200)
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        self.assertFalse(c.closed_by_peer(timeout=0.8), "idle connection closed before the drain's idle grace "
                         "(1.5 s) was over")
        self.assertTrue(c.closed_by_peer(timeout=8), "idle connection still open 8.8 s after SIGTERM "
                        "(--drain-idle-grace 1500)")
        elapsed = time.monotonic() - t0
        self.assertGreater(elapsed, 1.4, "closed %.2f s after SIGTERM, inside the grace" % elapsed)
        self.assertLess(elapsed, 10, "closed %.2f s after SIGTERM: the shutdown timeout, not the grace" % elapsed)
        self.assertEqual(srv.wait(5), 0, srv.stderr_text())

    def test_drain_idle_grace_zero_closes_idle_connections_at_once(self):
        srv = self.start(args=["--shutdown-timeout", "10", "--drain-idle-grace", "0"])
        c = self.connect(srv)
        self.assertEqual(c.request("GET", "/").status, 200)
        srv.send_signal(signal.SIGTERM)
        self.assertTrue(c.closed_by_peer(timeout=1), "idle connection open 1 s after SIGTERM with "
                        "--drain-idle-grace 0")
        self.assertEqual(srv.wait(3), 0, srv.stderr_text())

    def test_sigterm_under_cross_core_load(self):
        # Many threads, pipelined GET /todos (every shard is asked through
        # cross-core messages), then SIGTERM: a worker that drained first
        # must keep answering the others' messages until all are done.
        srv = self.start(threads=6, args=["--shutdown-timeout", "3"])
        for i in range(6):
            self.assertEqual(self.connect(srv).request("POST", "/todos", {"Content-Type": "application/json"},
                                                       b'{"title":"t%d"}' % i).status, 201)
        stop = time.monotonic() + 3
        errors = []

        def load():
            try:
                with cs.Conn(cs.HOST, srv.port) as c:
                    while time.monotonic() < stop:
                        c.send(b"GET /todos HTTP/1.1\r\nHost: x\r\n\r\n" * 4)
                        for _ in range(4):
                            r = c.read_response()
                            if r.status != 200:
                                errors.append(r.status)
            except (OSError, cs.ProtocolError):
                pass  # closed by the drain: expected

        threads = [threading.Thread(target=load) for _ in range(24)]
        for t in threads:
            t.start()
        time.sleep(1)
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        status = srv.wait(8)
        for t in threads:
            t.join()
        self.assertIsNotNone(status, "still running 8 s after SIGTERM under cross-core load "
                             "(--shutdown-timeout 3); stderr:\n" + srv.stderr_text())
        self.assertEqual(status, 0, srv.stderr_text())
        self.assertLess(time.monotonic() - t0, 4.5)
        self.assertEqual(errors, [], "non-200 answers during the drain")

    def test_sigint(self):
        srv = self.start(args=["--shutdown-timeout", "10"])
        self.assertEqual(self.connect(srv).request("GET", "/json").status, 200)
        srv.stop(expect_status=0, timeout=3, sig=signal.SIGINT)

    def drain(self, threads):
        srv = self.start(threads=threads, args=["--shutdown-timeout", "10"])
        body = b'{"title":"drained!"}'
        self.assertEqual(len(body), 20)
        c = self.connect(srv, nodelay=True)
        c.send(b"POST /todos HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\nContent-Length: 20\r\n\r\n"
               + body[:10])
        time.sleep(0.3)  # let the server read the headers and wait for the body
        srv.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 3
        refused = False
        while time.monotonic() < deadline:
            if not cs.can_connect(srv.port, timeout=0.5):
                refused = True
                break
            time.sleep(0.05)
        self.assertTrue(refused, "new connections still accepted 3 s after SIGTERM")
        self.assertIsNone(srv.proc.poll(), "exited (status %r) with a request in flight; stderr:\n%s"
                          % (srv.proc.poll(), srv.stderr_text()))
        c.send(body[10:])
        try:
            resp = c.read_response("POST")
        except cs.ProtocolError as e:
            self.fail("in-flight request not answered after SIGTERM: %s; stderr:\n%s" % (e, srv.stderr_text()))
        self.assertEqual(resp.status, 201, "in-flight POST after SIGTERM: %r" % resp)
        self.assertCommonHeaders(resp, "drained POST")
        self.assertEqual(resp.json()["title"], "drained!")
        self.assertTrue(c.closed_by_peer(timeout=3), "connection kept open after the drained response")
        status = srv.wait(5)
        self.assertIsNotNone(status, "not exited 5 s after its last request was answered; stderr:\n"
                             + srv.stderr_text())
        self.assertEqual(status, 0, "exit status after draining; stderr:\n" + srv.stderr_text())

    def test_sigterm_drains_inflight_request(self):
        self.drain(threads=1)

    def test_sigterm_drains_inflight_request_two_threads(self):
        self.drain(threads=2)

    def test_shutdown_timeout_bounds_exit(self):
        srv = self.start(threads=2, args=["--shutdown-timeout", "2"])
        c = self.connect(srv)
        c.send(b"POST /todos HTTP/1.1\r\n" + H + b"Content-Length: 50\r\n\r\n{")  # never completed
        idle = self.connect(srv)
        self.assertEqual(idle.request("GET", "/").status, 200)
        time.sleep(0.2)
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        status = srv.wait(6)
        self.assertIsNotNone(status, "not exited 6 s after SIGTERM with --shutdown-timeout 2; stderr:\n"
                             + srv.stderr_text())
        self.assertLess(time.monotonic() - t0, 5, "exit took longer than the shutdown timeout allows")
        self.assertEqual(status, 0, "exit status after the shutdown timeout; stderr:\n" + srv.stderr_text())
        self.assertTrue(c.closed_by_peer(timeout=1), "stuck connection not closed at exit")

    def test_sigterm_after_traffic_on_many_connections(self):
        srv = self.start(threads=2, args=["--shutdown-timeout", "10"])
        conns = [self.connect(srv) for _ in range(50)]
        for c in conns:
            self.assertEqual(c.request("GET", "/plaintext").status, 200)
        srv.stop(expect_status=0, timeout=3)
        for i, c in enumerate(conns):
            self.assertTrue(c.closed_by_peer(timeout=1), "connection %d open after exit" % i)


if __name__ == "__main__":
    socket.setdefaulttimeout(cs.SOCK_TIMEOUT)
    cs.main()

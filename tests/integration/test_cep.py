#!/usr/bin/python3
"""Integration tests of the CEP app: PostgreSQL cache-aside in front of ViaCEP.

A throw-away PostgreSQL cluster (db/pg-local) and the fake ViaCEP upstream
(coring-fake-viacep, loaded with apps/fake_viacep/make-data.py's records
built from apps/fake_viacep/data) run for the class; coring runs with VIACEP_URL
pointing at the fake. Covered: hit, miss-then-hit (one upstream call), not
found and the negative cache (per thread, and shared by two processes
through PostgreSQL), invalid CEPs, a slow upstream (503 in about
the timeout), upstream 500 / garbage / a 10 MB body (503, nothing stored),
100 concurrent misses for one CEP (one upstream call), PostgreSQL down
(503), and --cep-upstream off.
"""

import sys

sys.dont_write_bytecode = True

import concurrent.futures  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

import coring_server as cs  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAKE_DATA = os.path.join(ROOT, "apps", "fake_viacep", "make-data.py")
EXTRA_DATA = os.path.join(ROOT, "apps", "fake_viacep", "extra.jsonl")
UPSTREAM_TIMEOUT_MS = 1000
SHOWN = ("cep", "logradouro", "complemento", "bairro", "localidade", "uf", "ibge", "ddd", "source")


class FakeViaCep:
    """The fake upstream process."""

    def __init__(self, binary, data_files):
        cmd = [binary, "--host", "127.0.0.1", "--port", "0", "--threads", "1"]
        for f in data_files:
            cmd += ["--data", f]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, text=True)
        self.port = None
        deadline = time.monotonic() + 10
        lines = []
        while time.monotonic() < deadline and self.port is None:
            line = self.proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
        if self.port is None:
            self.proc.kill()
            raise AssertionError("fake ViaCEP did not start: %s" % "".join(lines))
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()

    def call(self, method, path, body=None):
        with cs.Conn("127.0.0.1", self.port) as c:
            h = {"Content-Type": "application/json"} if body is not None else {}
            return c.request(method, path, h, json.dumps(body).encode() if body is not None else None)

    def behave(self, **kw):
        assert self.call("PUT", "/_fake/behaviour", kw).status == 204

    def reset(self):
        assert self.call("POST", "/_fake/reset").status == 204

    def requests(self):
        return self.call("GET", "/_fake/stats").json()["requests"]

    def stop(self):
        cs.end_process(self.proc)


def start_postgres_and_fake(cls, prefix):
    """For test class @cls: a throw-away PostgreSQL (cls.postgres, cls.tmp,
    DATABASE_URL) and the fake ViaCEP on make-data.py's records and
    extra.jsonl (cls.fake, cls.records by CEP, VIACEP_URL), both ended
    with the class. Skips without --fake-viacep."""
    fake_bin = cs.option("fake_viacep")
    if not fake_bin:
        raise unittest.SkipTest("pass --fake-viacep PATH (the coring-fake-viacep binary)")
    cls.postgres = cs.LocalPostgres.for_class(cls, prefix)
    cls.tmp = cls.postgres.tmp
    os.environ["DATABASE_URL"] = cls.postgres.url()

    data = os.path.join(cls.tmp, "viacep.jsonl")
    with open(data, "w") as f:
        subprocess.run(["/usr/bin/python3", MAKE_DATA], stdout=f, check=True, timeout=60)
    cls.records = {}
    for path in (data, EXTRA_DATA):
        with open(path, encoding="utf-8") as f:
            for line in f:
                r = json.loads(line)
                cls.records[r["cep"]] = r
    cls.fake = FakeViaCep(fake_bin, [data, EXTRA_DATA])
    cls.addClassCleanup(cls.fake.stop)
    os.environ["VIACEP_URL"] = "http://127.0.0.1:%d/ws" % cls.fake.port


class FakeUpstreamTestCase(cs.CoringTestCase):
    """A test class whose server (cls.server, started by its setUpClass
    after start_postgres_and_fake) stops cleanly with the class, and whose
    fake ViaCEP is reset before each test."""
    server = None

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    def setUp(self):
        self.fake.reset()


class CepTest(FakeUpstreamTestCase):
    @classmethod
    def setUpClass(cls):
        start_postgres_and_fake(cls, "coring-cep-")
        # One thread, so that every request shares one single-flight table.
        cls.server = cs.CoringServer(threads=1, apps="cep", args=[
            "--db-timeout", "3", "--cep-timeout-ms", str(UPSTREAM_TIMEOUT_MS),
            "--cep-negative-ttl", "60"]).start()
        cls.addClassCleanup(cls.server.kill)

    @classmethod
    def pg(cls, cmd, *args):
        return cls.postgres.run(cmd, *args)

    def sql(self, query):
        return self.postgres.sql(query)

    def get(self, cep, server=None):
        with (server or self.server).connect(timeout=15) as c:
            return c.request("GET", "/api/v1/cep/" + cep)

    def assertAddress(self, resp, cep, source):
        self.assertEqual(resp.status, 200, resp)
        self.assertCommonHeaders(resp, cep)
        doc = resp.json()
        self.assertEqual(list(doc.keys()), list(SHOWN), "response shape")
        want = self.records[cep]
        for k in SHOWN[:-1]:
            self.assertEqual(doc[k], want[k], "field %s of %s" % (k, cep))
        self.assertEqual(doc["source"], source, resp)

    def stored(self, cep8):
        return self.sql("SELECT cep FROM cep_addresses WHERE cep = '%s'" % cep8)

    # -- the tests --------------------------------------------------------
    def test_invalid_ceps_touch_nothing(self):
        for bad in ("0100100", "010010000", "01001-00", "0100a000", "ABCDEFGH", "01001_000",
                    "%2001001000", "01001--000", "-"):
            resp = self.get(bad)
            self.assertJsonError(resp, 400, bad)
            self.assertEqual(resp.json()["error"], "invalid CEP")
        self.assertEqual(self.fake.requests(), 0, "an invalid CEP reached the upstream")

    def test_miss_then_hit(self):
        self.assertEqual(self.stored("01001000"), [])
        self.assertAddress(self.get("01001-000"), "01001-000", "viacep")
        self.assertEqual(self.fake.requests(), 1)
        self.assertAddress(self.get("01001000"), "01001-000", "database")
        self.assertAddress(self.get("01001-000"), "01001-000", "database")
        self.assertEqual(self.fake.requests(), 1, "a cached CEP went to the upstream again")
        row = self.sql("SELECT unidade, estado, regiao, gia, siafi, fetched_at IS NOT NULL "
                       "FROM cep_addresses WHERE cep = '01001000'")
        self.assertEqual(row, [["", "São Paulo", "Sudeste", "1004", "7107", "t"]],
                         "the stored row keeps every ViaCEP field")

    def test_record_with_empty_street_fields(self):
        self.assertAddress(self.get("12140000"), "12140-000", "viacep")
        self.assertAddress(self.get("12140-000"), "12140-000", "database")

    def test_not_found_and_negative_cache(self):
        resp = self.get("99999-999")
        self.assertJsonError(resp, 404, "unknown CEP")
        self.assertEqual(self.fake.requests(), 1)
        for _ in range(5):
            self.assertJsonError(self.get("99999999"), 404, "unknown CEP again")
        self.assertEqual(self.fake.requests(), 1, "the negative cache did not stop upstream calls")
        self.assertEqual(self.stored("99999999"), [])

    def test_unknown_cep_shared_by_processes(self):
        # The shared negative cache (cep_unknown): a second coring process on
        # the same database, both with 2 threads, asked on many connections
        # (SO_REUSEPORT spreads them over the threads): one upstream call.
        other = cs.CoringServer(threads=2, apps="cep", args=["--cep-negative-ttl", "60"]).start()
        try:
            first = cs.CoringServer(threads=2, apps="cep", args=["--cep-negative-ttl", "60"]).start()
            try:
                self.assertJsonError(self.get("99999-990", first), 404, "unknown CEP")
                self.assertEqual(self.fake.requests(), 1)
                for i in range(8):
                    for server in (other, first):
                        self.assertJsonError(self.get("99999990", server), 404,
                                             "unknown CEP, round %d" % i)
                calls = self.fake.requests()
                print("upstream calls for one unknown CEP over 2 processes x 2 threads: %d" % calls)
                self.assertEqual(calls, 1, "another thread or process asked ViaCEP again")
                rows = self.sql("SELECT expires_at > now() + interval '50 s' FROM cep_unknown "
                                "WHERE cep = '99999990'")
                self.assertEqual(rows, [["t"]], "cep_unknown row with the TTL's expiry")
            finally:
                first.stop(expect_status=0)
        finally:
            other.stop(expect_status=0)

    def test_erro_as_a_string(self):
        self.fake.behave(body="erro_string")
        self.assertJsonError(self.get("99999-998"), 404, '"erro": "true"')

    def assertUnavailableAndNothingStored(self, cep, what):
        t0 = time.monotonic()
        resp = self.get(cep)
        elapsed = time.monotonic() - t0
        self.assertJsonError(resp, 503, what)
        self.assertEqual(resp.json()["error"], "upstream unavailable", what)
        self.assertEqual(self.stored(cep.replace("-", "")), [], what + ": something was stored")
        return elapsed

    def test_slow_upstream_times_out(self):
        self.fake.behave(delay_ms=4000)
        elapsed = self.assertUnavailableAndNothingStored("20031-050", "slow upstream")
        self.assertGreater(elapsed, UPSTREAM_TIMEOUT_MS / 1000 * 0.8, "503 before the timeout")
        self.assertLess(elapsed, UPSTREAM_TIMEOUT_MS / 1000 + 1.5, "503 long after the timeout")

    def test_upstream_500(self):
        self.fake.behave(status=500)
        self.assertUnavailableAndNothingStored("22021-001", "upstream 500")

    def test_upstream_garbage(self):
        self.fake.behave(body="garbage")
        self.assertUnavailableAndNothingStored("28950-000", "garbage from upstream")

    def test_upstream_huge_body(self):
        self.fake.behave(body="huge")
        self.assertUnavailableAndNothingStored("29260-000", "10 MB from upstream")

    def test_upstream_down(self):
        saved = os.environ["VIACEP_URL"]
        dead = cs.free_port()
        os.environ["VIACEP_URL"] = "http://127.0.0.1:%d/ws" % dead
        try:
            server = cs.CoringServer(threads=1, apps="cep", args=["--db-timeout", "3"]).start()
        finally:
            os.environ["VIACEP_URL"] = saved
        try:
            self.assertJsonError(self.get("29650-000", server), 503, "upstream refusing connections")
        finally:
            server.stop(expect_status=0)

    def test_upstream_resets_connections(self):
        # An upstream that accepts and resets every connection (SO_LINGER 0).
        import socket
        import struct
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(16)
        lsock.settimeout(0.2)
        done = threading.Event()

        def reset_all():
            while not done.is_set():
                try:
                    c, _ = lsock.accept()
                except OSError:
                    continue
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.close()

        t = threading.Thread(target=reset_all, daemon=True)
        t.start()
        saved = os.environ["VIACEP_URL"]
        os.environ["VIACEP_URL"] = "http://127.0.0.1:%d/ws" % lsock.getsockname()[1]
        try:
            server = cs.CoringServer(threads=1, apps="cep", args=["--db-timeout", "3"]).start()
        finally:
            os.environ["VIACEP_URL"] = saved
        try:
            t0 = time.monotonic()
            self.assertJsonError(self.get("59178-000", server), 503, "upstream resetting connections")
            self.assertLess(time.monotonic() - t0, 3)
            self.assertEqual(self.stored("59178000"), [])
        finally:
            server.stop(expect_status=0)
            done.set()
            t.join(2)
            lsock.close()

    def test_concurrent_misses_share_one_upstream_call(self):
        # The upstream answers after 1.5 s, so that all 100 requests are in
        # before it does even on a loaded machine (one that comes after the
        # flight would rightly be answered from the database), with a
        # timeout well past that delay.
        self.fake.behave(delay_ms=1500)
        cep = "30130-001"
        server = cs.CoringServer(threads=1, apps="cep", args=[
            "--db-timeout", "3", "--cep-timeout-ms", "8000"]).start()
        try:
            with concurrent.futures.ThreadPoolExecutor(max_workers=100) as pool:
                resps = list(pool.map(lambda _: self.get(cep, server), range(100)))
            for r in resps:
                self.assertAddress(r, cep, "viacep")
            self.assertEqual(self.fake.requests(), 1, "100 concurrent misses made %d upstream "
                             "calls" % self.fake.requests())
            self.assertAddress(self.get(cep, server), cep, "database")
        finally:
            server.kill()

    def test_waiting_handlers_hold_no_receive_buffer(self):
        """A handler waiting on the upstream holds no provided receive buffer: with
        --recv-buffers 8 and 20 requests waiting on one thread, other connections
        still read into provided buffers (the server never warns that they ran out)
        and are served."""
        with open(__file__, encoding="utf-8") as f:
            used = f.read()
        cep = next(c for c in sorted(self.records)
                   if re.fullmatch(r"\d{5}-\d{3}", c) and c not in used and not self.stored(c.replace("-", "")))
        self.fake.behave(delay_ms=2500)
        server = cs.CoringServer(threads=1, apps="hello,cep", args=[
            "--recv-buffers", "8", "--db-timeout", "3", "--cep-timeout-ms", "8000"]).start()
        try:
            results = []
            lock = threading.Lock()

            def ask():
                r = self.get(cep, server)
                with lock:
                    results.append(r)
            waiting = [threading.Thread(target=ask, daemon=True) for _ in range(20)]
            for t in waiting:
                t.start()
                time.sleep(0.02)
            time.sleep(0.2)
            for _ in range(30):
                with server.connect() as c:
                    self.assertEqual(c.request("GET", "/").status, 200)
            with lock:
                early = len(results)
            for t in waiting:
                t.join(20)
            self.assertEqual(early, 0, "the slow requests were answered before the others ran")
            self.assertEqual(len(results), 20)
            for r in results:
                self.assertAddress(r, cep, "viacep")
            log = server.stderr_text(last=2000)
            self.assertNotIn("every provided receive buffer is in use", log,
                             "requests waiting on the upstream held provided buffers")
        finally:
            server.stop(expect_status=0)

    def test_upstream_off(self):
        server = cs.CoringServer(threads=1, apps="cep", args=["--cep-upstream", "off"]).start()
        try:
            self.assertJsonError(self.get("35400-000", server), 404, "--cep-upstream off")
            self.assertEqual(self.fake.requests(), 0)
            # Stored through the other server, then served by this one.
            self.assertAddress(self.get("45530-000"), "45530-000", "viacep")
            self.assertAddress(self.get("45530-000", server), "45530-000", "database")
        finally:
            server.stop(expect_status=0)

    def sigterm_during_a_miss(self, shutdown_timeout, cep):
        server = cs.CoringServer(threads=1, apps="cep", args=[
            "--db-timeout", "3", "--cep-timeout-ms", "4000",
            "--shutdown-timeout", str(shutdown_timeout)]).start()
        self.fake.behave(delay_ms=1500)
        result = {}

        def ask():
            try:
                result["resp"] = self.get(cep, server)
            except (OSError, cs.ProtocolError) as e:
                result["error"] = e

        t = threading.Thread(target=ask)
        t.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        server.send_signal(signal.SIGTERM)
        t.join(15)
        status = server.wait(15)
        self.assertIsNotNone(status, "still running 15 s after SIGTERM; stderr:\n" + server.stderr_text())
        self.assertEqual(status, 0, server.stderr_text())
        return result, time.monotonic() - t0

    def test_sigterm_during_a_miss_finishes_it(self):
        # SIGTERM while the upstream call is in flight: the curl timer and
        # socket watchers and the database driver keep running for the
        # request in flight, which stores its row and answers.
        result, _ = self.sigterm_during_a_miss(5, "53990-000")
        self.assertIn("resp", result, "no answer to the request in flight at SIGTERM: %r" % result)
        self.assertAddress(result["resp"], "53990-000", "viacep")
        # The drain began while the handler ran: its answer is the
        # connection's last, and says so.
        self.assertIn("close", result["resp"].tokens("Connection"),
                      "an answer finished in the drain must say Connection: close")
        self.assertEqual(self.stored("53990000"), [["53990000"]], "the row was not stored")

    def test_sigterm_during_a_miss_past_the_deadline_does_not_hang(self):
        # The upstream call outlasts the drain deadline: the request is cut,
        # and coring still exits 0 soon after the call ends.
        result, elapsed = self.sigterm_during_a_miss(1, "57030-170")
        self.assertLess(elapsed, 4, "exit took %.1f s (deadline 1 s, upstream 1.5 s)" % elapsed)
        # Cut at the deadline: one last 503 with Connection: close, not a
        # silent close that a balancer or client takes for a lost request
        # and sends again (issue 40 item 7).
        self.assertIn("resp", result, "no answer to the request cut at the drain deadline: %r" % result)
        self.assertJsonError(result["resp"], 503, "the request cut at the drain deadline")
        self.assertEqual(result["resp"].json()["error"], "shutting down")
        self.assertIn("close", result["resp"].tokens("Connection"),
                      "the deadline's 503 must say Connection: close")

    def test_outbound_connections_are_capped(self):
        # 300 concurrent misses on distinct CEPs against an upstream that
        # answers after 2 s: at most --cep-max-connections connections to
        # it at once (this server's sockets in /proc/net/tcp), at
        # most that many left idle, and what does not fit in the wait queue
        # (32 a connection) is answered 503 at once.
        cap, clients, delay_ms = 4, 300, 2000
        self.fake.behave(delay_ms=delay_ms)
        # No deadline: under load a miss queued behind the cap may take a
        # lookup, 3 s of upstream and a write, past cep's 4 s deadline; this
        # test is about the cap (test_deadlines.py is about the deadline).
        server = cs.CoringServer(threads=1, apps="cep", args=[
            "--db-timeout", "3", "--cep-timeout-ms", "3000", "--cep-max-connections", str(cap),
            "--deadline", "off"]).start()
        try:
            stop = threading.Event()
            peak = [0]

            def sample():
                while not stop.is_set():
                    peak[0] = max(peak[0], established_to(self.fake.port, server.pid))
                    time.sleep(0.01)

            def one(i):
                t0 = time.monotonic()
                try:
                    with server.connect(timeout=15) as c:
                        resp = c.request("GET", "/api/v1/cep/%08d" % (76500000 + i))
                    if resp.status == 503 and resp.json() == {"error": "upstream busy"}:
                        return "busy", time.monotonic() - t0
                    return resp.status, time.monotonic() - t0
                except OSError as e:
                    return repr(e), time.monotonic() - t0

            sampler = threading.Thread(target=sample)
            sampler.start()
            try:
                with concurrent.futures.ThreadPoolExecutor(clients) as pool:
                    results = list(pool.map(one, range(clients)))
            finally:
                stop.set()
                sampler.join()
            time.sleep(0.3)
            idle = established_to(self.fake.port, server.pid)
            statuses = {}
            for st, _ in results:
                statuses[st] = statuses.get(st, 0) + 1
            busy = [secs for st, secs in results if st == "busy"]
            print("\n%d concurrent misses, cap %d: at most %d upstream connections at once, %d "
                  "left open afterwards; statuses %s; 'upstream busy' answered in %.2f s (median)"
                  % (clients, cap, peak[0], idle, statuses, sorted(busy)[len(busy) // 2] if busy else 0))
            self.assertTrue(set(statuses) <= {200, 404, 503, "busy"}, statuses)
            self.assertGreaterEqual(statuses.get(200, 0) + statuses.get(404, 0), cap,
                                    "the first fetches through the cap were answered")
            self.assertLessEqual(peak[0], cap, "upstream connections at once")
            self.assertLessEqual(idle, cap, "upstream connections left open")
            # 300 - 4 - 128 = 168 when every request arrives before the first
            # upstream answer; fewer on a slow machine, but never none.
            self.assertTrue(busy, "no fetch past the wait queue was refused")
            timed_out = sorted(secs for st, secs in results if st == 503)
            if timed_out:
                self.assertLess(sorted(busy)[len(busy) // 2], timed_out[len(timed_out) // 2],
                                "refusals (median) waited as long as the fetches that timed out")
        finally:
            server.stop(expect_status=0)
            self.fake.behave(delay_ms=0)

    def test_descriptor_budget_counts_outbound_sockets(self):
        # RLIMIT_NOFILE 256, one thread, the cep app (2 database and up to
        # 8 upstream connections, + 2 for curl): --max-connections' default
        # leaves room for them, so at most 256 - (32 + 4) - (2 + 8 + 2)
        # client connections are kept and a miss still reaches the upstream
        # with the server full of clients.
        import resource
        import select
        import socket

        nofile, cap = 256, 8

        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
        server = cs.CoringServer(threads=1, apps="cep", preexec_fn=limit, args=[
            "--db-timeout", "3", "--cep-timeout-ms", "3000",
            "--cep-max-connections", str(cap)]).start()
        budget = nofile - (32 + 4) - (2 + cap + 2)
        conns = []
        try:
            for _ in range(budget + 20):
                conns.append(socket.create_connection((cs.HOST, server.port), timeout=2))
            # Until every connection is held or closed, and that for 1 s:
            # multishot accept puts descriptors in the server's table before
            # the ring thread sees them (and closes those past the limit).
            closed = []
            deadline = time.monotonic() + 15
            last, since = None, time.monotonic()
            while time.monotonic() < deadline:
                readable, _, _ = select.select([c for c in conns if c not in closed], [], [], 0.1)
                closed += [c for c in readable if c.recv(1, socket.MSG_DONTWAIT) == b""]
                held = established_from(server.port, server.pid)
                if (held, len(closed)) != last:
                    last, since = (held, len(closed)), time.monotonic()
                elif held + len(closed) == len(conns) and time.monotonic() - since > 1.0:
                    break
            kept = [c for c in conns if c not in closed]
            print("\nRLIMIT_NOFILE %d, cep with %d upstream connections: %d client connections held "
                  "(budget %d), %d closed at once" % (nofile, cap, held, budget, len(closed)))
            self.assertLessEqual(held, budget, "client connections past the descriptor budget")
            self.assertEqual(held + len(closed), len(conns), "connections neither held nor closed")
            # Free one slot and miss with the server otherwise full.
            kept.pop().close()
            time.sleep(0.2)
            t0 = time.monotonic()
            resp = self.get("01310-100", server)
            print("miss answered in %.2f s" % (time.monotonic() - t0))
            self.assertIn(resp.status, (200, 404), resp)
        finally:
            for c in conns:
                c.close()
            server.stop(expect_status=0)
        self.assertNotIn("Too many open files", server.stderr_text(200))

    def test_zz_postgres_down(self):
        # Last (zz): stops and restarts the cluster.
        self.assertAddress(self.get("41820-020"), "41820-020", "viacep")
        self.pg("stop", "fast")
        try:
            t0 = time.monotonic()
            resp = self.get("41820-020")
            self.assertJsonError(resp, 503, "PostgreSQL down")
            self.assertEqual(resp.json()["error"], "database unavailable")
            self.assertLess(time.monotonic() - t0, 4, "503 took longer than the query timeout")
        finally:
            self.pg("start", "throwaway")
        deadline = time.monotonic() + 20
        while True:
            resp = self.get("41820-020")
            if resp.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        self.assertAddress(resp, "41820-020", "database")


def established_to(port, pid):
    """TCP connections in ESTABLISHED state from process @pid to port @port
    (IPv4 and IPv6): its socket inodes matched against /proc/net/tcp*."""
    return _established(pid, lambda local, remote: remote == port)


def established_from(port, pid):
    """Connections in ESTABLISHED state that process @pid holds on its
    listening port @port (accepted ones)."""
    return _established(pid, lambda local, remote: local == port)


def _established(pid, match):
    inodes = set()
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            try:
                link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
            except OSError:
                continue
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    except FileNotFoundError:
        return 0
    # Distinct sockets, not rows: the kernel prints /proc/net/tcp a chunk
    # per read(2), and when sockets come and go between chunks the same
    # socket can be printed twice (seq_file resumes by position).
    found = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(name) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local = int(fields[1].rsplit(":", 1)[1], 16)
                    remote = int(fields[2].rsplit(":", 1)[1], 16)
                    if fields[3] == "01" and fields[9] in inodes and match(local, remote):
                        found.add(fields[9])
        except FileNotFoundError:
            pass
    return len(found)


if __name__ == "__main__":
    cs.main()

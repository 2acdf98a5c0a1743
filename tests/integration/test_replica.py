#!/usr/bin/python3
"""Integration test of DATABASE_READ_URL with a real streaming replica.

A primary (db/pg-local) and a hot standby made from it with
`pg_basebackup -R` (tests/integration/pg_cluster.py), replaying with a
300 ms recovery_min_apply_delay so that a user just created is never on
the replica yet (replication lag made certain, not left to chance). coring
(users app, 2 threads) runs with DATABASE_URL=primary and
DATABASE_READ_URL=replica. In order:

1. read after write: POST /users then at once GET /users/{id} on a fresh
   connection, 20 times: never a 404 (the miss on the replica is asked
   again of the primary); once replicated, reads are served by the replica
   (db_reads_total{target="replica"}).
2. replica stopped (pg_ctl stop -m fast) under a reading client: no failed
   request, reads on the primary, /readyz 200 with
   "database_read":"primary (replica unreachable: ...)"; replica started
   again: reads on it again, "database_read":"replica".
3. primary stopped: POST answers 503 {"error":...} in under 1 s, GET of an
   existing user, of an existing todo and of the todo list still 200 (from
   the replica: issue 45, item 10); primary started again: POST 201 again,
   without restarting coring.
4. a stalled replica: reads answered by the primary within the timeout.
5. replication lag (issue 45): /metrics has db_replica_lag_seconds and
   _bytes per thread; a second coring with --replica-max-lag 0.1 under
   steady writes (each replayed 300 ms late) sees the lag past 0.1 s, sends
   its reads to the primary and says so in /readyz; once the writes stop
   and the replica catches up, reads go back to it.

Todos (--todo-store postgres) read like users: test 1 does the same
read-after-write with POST /todos and GET /todos/{id}.

Exit 77 (skipped) when PostgreSQL's server binaries are missing.
"""

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
import unittest  # noqa: E402

import coring_server as cs  # noqa: E402
import pg_cluster  # noqa: E402

THREADS = 2
APPLY_DELAY_MS = 300
JSON_HDR = {"Content-Type": "application/json"}
METRIC_RE = re.compile(r'^(db_reads_total\{target="(replica|primary)"\}|db_replica_up) (\d+)$', re.M)


class ReplicaTest(cs.CoringTestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        t0 = time.monotonic()
        cls.primary = cs.LocalPostgres.for_class(cls, "coring-primary-")
        cls.replica = pg_cluster.Replica.for_class(cls, cls.primary, port=5433,
                                                   apply_delay_ms=APPLY_DELAY_MS)
        os.environ["DATABASE_URL"] = cls.primary.url()
        os.environ["DATABASE_READ_URL"] = cls.replica.url()
        # No deadline (users' and todo's 3 s would race --db-timeout 3):
        # these tests are about the replica's and the query's timeouts.
        cls.server = cs.CoringServer(threads=THREADS, apps="users,todo",
                                     args=["--db-timeout", "3", "--todo-store", "postgres",
                                           "--deadline", "off"]).start()
        cls.addClassCleanup(cls.server.kill)
        # The replica gets the tables once the migrations have been replayed
        # there: its connections prepare the statements after that.
        cls.wait_metric_cls(lambda m: m["up"] == THREADS, "replica connections up", timeout=15)
        print("clusters and coring ready in %.1f s" % (time.monotonic() - t0))

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    # -- helpers ---------------------------------------------------------------
    @classmethod
    def req(cls, method, path, body=None, timeout=5):
        with cls.server.connect(timeout=timeout) as c:
            h = JSON_HDR if body is not None else {}
            return c.request(method, path, h, json.dumps(body).encode() if body is not None else None)

    @classmethod
    def metrics(cls):
        resp = cls.req("GET", "/metrics")
        assert resp.status == 200, resp
        out = {"replica": 0, "primary": 0, "up": None}
        for m in METRIC_RE.finditer(resp.body.decode()):
            out[m.group(2) or "up"] = int(m.group(3))
        return out

    @classmethod
    def wait_metric_cls(cls, cond, what, timeout=10):
        deadline = time.monotonic() + timeout
        m = cls.metrics()
        while not cond(m):
            if time.monotonic() > deadline:
                raise AssertionError("%s: not within %.0f s; metrics %r; stderr:\n%s"
                                     % (what, timeout, m, cls.server.stderr_text()))
            time.sleep(0.1)
            m = cls.metrics()
        return m

    def readyz(self):
        resp = self.req("GET", "/readyz")
        return resp, resp.json()

    def create_user(self, tag):
        resp = self.req("POST", "/users", {"name": "Replica " + tag,
                                           "email": "%s.%d@replica.example.com"
                                                    % (tag, time.monotonic_ns())})
        return resp

    def reads_on_replica(self, ids, what):
        """GET each of @ids; all 200; returns the metrics after."""
        before = self.metrics()
        for i in ids:
            resp = self.req("GET", "/users/%d" % i)
            self.assertEqual(resp.status, 200, "%s: user %d: %r" % (what, i, resp))
        after = self.metrics()
        return before, after

    def start_reader(self, ids, stop, results, limit=5000, seconds=20):
        """A client that GETs @ids round robin on one keep-alive connection
        (a new one when closed) until @stop is set: at most @limit requests
        and @seconds seconds. Statuses (or exceptions) go to @results."""
        def run():
            deadline = time.monotonic() + seconds
            conn = None
            n = 0
            while not stop.is_set() and n < limit and time.monotonic() < deadline:
                try:
                    if conn is None:
                        conn = self.server.connect()
                    resp = conn.request("GET", "/users/%d" % ids[n % len(ids)])
                    results.append(resp.status)
                    if resp.header("Connection", "").lower() == "close":
                        conn.close()
                        conn = None
                except Exception as e:  # noqa: BLE001 - any failure is a failed request
                    results.append(repr(e))
                    if conn is not None:
                        conn.close()
                    conn = None
                n += 1
                time.sleep(0.002)
            if conn is not None:
                conn.close()
        t = threading.Thread(target=run, daemon=True)
        t.start()
        return t

    def create_todo(self, tag):
        return self.req("POST", "/todos", {"title": "replica %s %d" % (tag, time.monotonic_ns())})

    def existing_todos(self, n=3):
        ids = []
        for k in range(n):
            resp = self.create_todo("existing%d" % k)
            self.assertEqual(resp.status, 201, resp)
            ids.append(resp.json()["id"])
        self.assertTrue(self.replica.wait_for("SELECT count(*) FROM todos WHERE id IN (%s)"
                                              % ",".join(map(str, ids)), [[str(n)]]),
                        "the todos did not reach the replica; its log:\n" + self.replica.log_tail())
        return ids

    def existing_ids(self, n=5):
        ids = []
        for k in range(n):
            resp = self.create_user("existing%d" % k)
            self.assertEqual(resp.status, 201, resp)
            ids.append(resp.json()["id"])
        self.assertTrue(self.replica.wait_for("SELECT count(*) FROM users WHERE id IN (%s)"
                                              % ",".join(map(str, ids)), [[str(n)]]),
                        "the users did not reach the replica; its log:\n" + self.replica.log_tail())
        return ids

    # -- the tests, in order ------------------------------------------------------
    def test_1_read_after_write(self):
        before = self.metrics()
        ids = []
        for k in range(20):
            resp = self.create_user("raw%d" % k)
            self.assertEqual(resp.status, 201, resp)
            uid = resp.json()["id"]
            got = self.req("GET", "/users/%d" % uid)  # a fresh connection, at once
            self.assertEqual(got.status, 200, "user %d read right after its POST: %r" % (uid, got))
            self.assertEqual(got.json()["id"], uid)
            ids.append(uid)
        mid = self.metrics()
        print("20 reads right after their write: %d answered by the replica, %d by the primary"
              % (mid["replica"] - before["replica"], mid["primary"] - before["primary"]))
        self.assertGreaterEqual(mid["primary"] - before["primary"], 1,
                                "no miss was retried on the primary (lag %d ms)" % APPLY_DELAY_MS)
        self.assertTrue(self.replica.wait_for("SELECT count(*) FROM users WHERE id IN (%s)"
                                              % ",".join(map(str, ids)), [[str(len(ids))]]),
                        "the users did not reach the replica; its log:\n" + self.replica.log_tail())
        b, a = self.reads_on_replica(ids, "replicated users")
        self.assertEqual(a["replica"] - b["replica"], len(ids), "reads not served by the replica")
        self.assertEqual(a["primary"], b["primary"], "replicated users read on the primary")
        resp, doc = self.readyz()
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(doc["checks"]["database_read"], "replica", doc)

    def test_1_todo_read_after_write(self):
        before = self.metrics()
        ids = []
        for k in range(20):
            resp = self.create_todo("raw%d" % k)
            self.assertEqual(resp.status, 201, resp)
            tid = resp.json()["id"]
            got = self.req("GET", "/todos/%d" % tid)  # a fresh connection, at once
            self.assertEqual(got.status, 200, "todo %d read right after its POST: %r" % (tid, got))
            self.assertEqual(got.json()["id"], tid)
            ids.append(tid)
        mid = self.metrics()
        print("20 todo reads right after their write: %d answered by the replica, %d by the primary"
              % (mid["replica"] - before["replica"], mid["primary"] - before["primary"]))
        self.assertGreaterEqual(mid["primary"] - before["primary"], 1, "no todo miss retried on the primary")
        self.assertTrue(self.replica.wait_for("SELECT count(*) FROM todos WHERE id IN (%s)"
                                              % ",".join(map(str, ids)), [[str(len(ids))]]),
                        "the todos did not reach the replica; its log:\n" + self.replica.log_tail())
        before = self.metrics()
        for i in ids:
            self.assertEqual(self.req("GET", "/todos/%d" % i).status, 200)
        self.assertEqual(self.req("GET", "/todos").status, 200)
        after = self.metrics()
        self.assertEqual(after["replica"] - before["replica"], len(ids) + 1, "todo reads not on the replica")
        self.assertEqual(after["primary"], before["primary"], "replicated todos read on the primary")

    def test_2_replica_down_and_back(self):
        ids = self.existing_ids()
        stop, results = threading.Event(), []
        reader = self.start_reader(ids, stop, results)
        try:
            time.sleep(0.3)
            t0 = time.monotonic()
            self.replica.stop("fast")
            print("replica stopped in %.2f s" % (time.monotonic() - t0))
            m = self.wait_metric_cls(lambda m: m["up"] == 0, "replica seen down", timeout=5)
            b, a = self.reads_on_replica(ids, "replica down")
            self.assertGreaterEqual(a["primary"] - b["primary"], len(ids), "reads not on the primary")
            resp, doc = self.readyz()
            self.assertEqual(resp.status, 200, "replica down must not make coring unready: %r" % resp)
            self.assertTrue(doc["checks"]["database_read"].startswith(
                "primary (replica unreachable: "), doc)
            time.sleep(0.3)
            self.replica.start()
            t0 = time.monotonic()
            m = self.wait_metric_cls(lambda m: m["up"] == THREADS, "replica back", timeout=10)
            print("replica used again %.2f s after it started" % (time.monotonic() - t0))
            time.sleep(0.3)
        finally:
            stop.set()
            reader.join(10)
        failed = [r for r in results if r != 200]
        print("reader: %d requests across the replica's stop and start, %d failed"
              % (len(results), len(failed)))
        self.assertGreater(len(results), 20, "the reader did not run")
        self.assertEqual(failed, [], "requests failed while the replica went away and came back")
        b, a = self.reads_on_replica(ids, "replica back")
        self.assertEqual(a["replica"] - b["replica"], len(ids), "reads not back on the replica")
        resp, doc = self.readyz()
        self.assertEqual(doc["checks"]["database_read"], "replica", doc)

    def test_3_primary_down_and_back(self):
        ids = self.existing_ids(3)
        todos = self.existing_todos(3)
        self.primary.run("stop", "fast")
        try:
            time.sleep(0.2)
            t0 = time.monotonic()
            resp = self.create_user("primarydown")
            took = time.monotonic() - t0
            print("POST with the primary down: %d in %.3f s" % (resp.status, took))
            self.assertJsonError(resp, 503, "POST, primary down")
            self.assertLess(took, 1.0, "the 503 was not at once")
            for i in ids:
                got = self.req("GET", "/users/%d" % i)
                self.assertEqual(got.status, 200, "GET from the replica, primary down: %r" % got)
            for i in todos:
                got = self.req("GET", "/todos/%d" % i)
                self.assertEqual(got.status, 200, "GET /todos/%d, primary down: %r" % (i, got))
            got = self.req("GET", "/todos")
            self.assertEqual(got.status, 200, "GET /todos, primary down: %r" % got)
            self.assertTrue(set(todos) <= {t["id"] for t in got.json()}, got)
            self.assertJsonError(self.create_todo("primarydown"), 503, "POST /todos, primary down")
        finally:
            self.primary.run("start", "throwaway")
        t0 = time.monotonic()
        deadline = t0 + 15
        while True:
            resp = self.create_user("primaryback")
            if resp.status == 201 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        print("POST 201 again %.2f s after the primary started" % (time.monotonic() - t0))
        self.assertEqual(resp.status, 201, resp)
        # One thread's POST succeeded; the others reconnect on their own
        # backoff. The next test writes from any thread: wait for all
        # (/readyz is 200 once every worker thread has a primary connection).
        while True:
            ready, _ = self.readyz()
            if ready.status == 200 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(ready.status, 200, "not ready again within 15 s: %r" % ready)

    def replica_backends(self):
        """PIDs of the replica's client backends (children of its postmaster
        serving a connection: "postgres: coring coring [local] ...")."""
        with open(os.path.join(self.replica.data, "postmaster.pid")) as f:
            postmaster = f.readline().strip()
        pids = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % entry) as f:
                    ppid = f.read().rsplit(")", 1)[1].split()[1]
                with open("/proc/%s/cmdline" % entry, "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if ppid == postmaster and b"[local]" in cmd:
                pids.append(int(entry))
        return pids

    def test_4_stalled_replica(self):
        """A replica that holds its queries (here its backends stopped, as a
        hot standby holds one while it replays a lock) costs a read half the
        query timeout, then the primary answers: 200, not a 503."""
        ids = self.existing_ids(2)
        self.wait_metric_cls(lambda m: m["up"] == THREADS, "replica connections up", timeout=15)
        pids = []
        for pid in self.replica_backends():
            # A backend of the test's own psql check (existing_ids) may have
            # exited since the scan: only coring's stay.
            try:
                os.kill(pid, signal.SIGSTOP)
                pids.append(pid)
            except ProcessLookupError:
                pass
        self.assertTrue(pids, "no replica backend found")
        try:
            for i in ids:
                t0 = time.monotonic()
                got = self.req("GET", "/users/%d" % i, timeout=10)
                took = time.monotonic() - t0
                print("GET with the replica stalled: %d in %.2f s" % (got.status, took))
                self.assertEqual(got.status, 200, "GET, replica stalled: %r" % got)
                self.assertLess(took, 3.0, "not within the query timeout (--db-timeout 3)")
        finally:
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass

    def test_5_replica_lag(self):
        """Issue 45: the replica's lag in /metrics, and --replica-max-lag."""
        # Measured each second on every thread (unknown, -1, while a
        # connection of test 4's stall is reconnecting).
        self.wait_metric_cls(lambda m: m["up"] == THREADS, "replica connections up", timeout=15)
        deadline = time.monotonic() + 10
        while True:
            text = self.req("GET", "/metrics").body.decode()
            found = {name: [float(v) for v in re.findall(r'^%s\{thread="\d+"\} (\S+)$' % name, text, re.M)]
                     for name in ("db_replica_lag_seconds", "db_replica_lag_bytes")}
            if all(len(v) == THREADS and min(v) >= 0 for v in found.values()) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        print("lag per thread, idle: %r" % found)
        for name, values in found.items():
            self.assertEqual(len(values), THREADS, "%s per thread: %r" % (name, values))
            self.assertTrue(all(v >= 0 for v in values), "%s measured: %r" % (name, values))
        self.assertIn("db_replica_lag_exceeded 0", text)

        srv = cs.CoringServer(threads=THREADS, apps="users",
                              args=["--db-timeout", "3", "--replica-max-lag", "0.1"]).start()
        self.addCleanup(srv.kill)

        def get(path):
            with srv.connect() as c:
                return c.request("GET", path)

        def lag():
            text = get("/metrics").body.decode()
            secs = [float(v) for v in re.findall(r'^db_replica_lag_seconds\{thread="\d+"\} (\S+)$', text, re.M)]
            nbytes = [float(v) for v in re.findall(r'^db_replica_lag_bytes\{thread="\d+"\} (\S+)$', text, re.M)]
            exceeded = int(re.search(r"^db_replica_lag_exceeded (\d+)$", text, re.M).group(1))
            reads = {"replica": 0, "primary": 0}
            reads.update({m.group(1): int(m.group(2))
                          for m in re.finditer(r'^db_reads_total\{target="(replica|primary)"\} (\d+)$', text, re.M)})
            return secs, nbytes, exceeded, reads

        ids = self.existing_ids(2)
        stop = threading.Event()

        def write():
            with srv.connect() as c:
                while not stop.is_set():
                    c.request("POST", "/users", JSON_HDR, json.dumps(
                        {"name": "Lag", "email": "lag.%d@replica.example.com" % time.monotonic_ns()}).encode())
                    time.sleep(0.05)
        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        try:
            deadline = time.monotonic() + 10
            seen = None
            while time.monotonic() < deadline:
                secs, nbytes, exceeded, _ = lag()
                if exceeded == THREADS:
                    seen = (secs, nbytes)
                    break
                time.sleep(0.2)
            self.assertIsNotNone(seen, "the replica's lag (%d ms apply delay) never past 0.1 s on every "
                                       "thread: %r; stderr:\n%s" % (APPLY_DELAY_MS, lag(), srv.stderr_text()))
            print("under writes: lag %s s, %s bytes per thread" % (seen[0], seen[1]))
            self.assertTrue(all(v > 0.1 for v in seen[0]), seen)
            _, _, _, before = lag()
            for i in ids:
                self.assertEqual(get("/users/%d" % i).status, 200)
            _, _, _, after = lag()
            self.assertGreaterEqual(after["primary"] - before["primary"], len(ids), "reads not on the primary")
            doc = get("/readyz").json()
            self.assertRegex(doc["checks"]["database_read"],
                             r"^primary \(replica lags [\d.]+ s, past --replica-max-lag 0\.100 s\)$", doc)
        finally:
            stop.set()
            writer.join(10)
        t0 = time.monotonic()
        while time.monotonic() - t0 < 10:
            secs, _, exceeded, _ = lag()
            if exceeded == 0:
                break
            time.sleep(0.2)
        print("lag back within the bound %.1f s after the writes stopped: %s" % (time.monotonic() - t0, secs))
        self.assertEqual(exceeded, 0, secs)
        _, _, _, before = lag()
        for i in ids:
            self.assertEqual(get("/users/%d" % i).status, 200)
        _, _, _, after = lag()
        self.assertEqual(after["replica"] - before["replica"], len(ids), "reads not back on the replica")
        self.assertEqual(get("/readyz").json()["checks"]["database_read"], "replica")
        srv.stop(expect_status=0)

    def test_6_start_waits_for_a_writable_primary(self):
        """The lead's note on issue 45: a start whose primary is read-only
        (a standby, mid-failover) or down waits --db-start-wait for it
        instead of exiting at the first refusal."""
        def run(url, *args):
            env = dict(os.environ, DATABASE_URL=url)
            env.pop("DATABASE_READ_URL", None)
            t0 = time.monotonic()
            r = subprocess.run([cs.binary(), "--host", cs.HOST, "--port", "0", "--apps", "users"] + list(args),
                               env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
            return r, time.monotonic() - t0
        r, took = run(self.replica.url())
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("read-only", r.stderr)
        self.assertLess(took, 2.0, "no --db-start-wait: one try")
        r, took = run(self.replica.url(), "--db-start-wait", "2")
        print("a read-only primary, --db-start-wait 2: exit %d after %.1f s" % (r.returncode, took))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("database not writable yet", r.stderr)
        self.assertIn("database migrations failed", r.stderr)
        self.assertGreaterEqual(took, 2.0)

        # A first try slower than the wait (a server that takes the
        # connection and never answers: libpq's connect_timeout of 3 s
        # ends it) still gets the wait: it counts from the first refusal.
        # Seen failing under load in the suite (the first try took past
        # the 2 s, no retry), and always with this server.
        mute = socket.socket()
        mute.bind((cs.HOST, 0))
        mute.listen(8)
        self.addCleanup(mute.close)
        r, took = run("postgresql://coring@%s:%d/coring?connect_timeout=3" % mute.getsockname(),
                      "--db-start-wait", "1")
        print("a primary that never answers, --db-start-wait 1: exit %d after %.1f s"
              % (r.returncode, took))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("database not reachable yet", r.stderr)
        self.assertGreaterEqual(took, 6.0, "one try of 3 s, then the wait of 1 s: a second try")

        # The primary down at the start, up 1.5 s later: the start goes on.
        self.primary.run("stop", "fast")
        restarted = threading.Timer(1.5, lambda: self.primary.run("start", "throwaway"))
        restarted.start()
        self.addCleanup(restarted.join)
        saved = os.environ.pop("DATABASE_READ_URL")
        try:
            srv = cs.CoringServer(threads=1, apps="users", args=["--db-start-wait", "30"])
            t0 = time.monotonic()
            srv.start()
            self.addCleanup(srv.kill)
        finally:
            os.environ["DATABASE_READ_URL"] = saved
        print("the primary down at the start: listening %.1f s later" % (time.monotonic() - t0))
        self.assertIn("database not reachable yet", srv.stderr_text())
        with srv.connect() as c:
            resp = c.request("POST", "/users", JSON_HDR,
                             json.dumps({"name": "W", "email": "wait.%d@replica.example.com"
                                                               % time.monotonic_ns()}).encode())
        self.assertEqual(resp.status, 201, resp)
        srv.stop(expect_status=0)


if __name__ == "__main__":
    if pg_cluster.server_bindir() is None:
        print("skipped: PostgreSQL's server binaries (pg_ctl, pg_basebackup) are not installed")
        sys.exit(77)
    cs.main()

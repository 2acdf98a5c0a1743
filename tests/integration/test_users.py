#!/usr/bin/python3
"""Integration tests of the users app against a real PostgreSQL.

The class set-up starts a throw-away cluster in a temporary folder with
db/pg-local (Unix socket only), runs coring with DATABASE_URL pointing at
it, and removes both at the end, also when a test fails. Covered: every
route and error, 200 concurrent clients, PostgreSQL stopped and started
again under load, backends killed with pg_terminate_backend, and inserts
coalesced into one statement: conflicts inside a batch, the queries its
failure rolls back, emails that are prefixes of one another.
"""

import sys

sys.dont_write_bytecode = True

import contextlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

ROOT = cs.ROOT
JSON_HDR = {"Content-Type": "application/json"}
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$")
DB_TIMEOUT = 3          # --db-timeout, seconds
BACKOFF_MAX = 2.0       # db_config's cap on the delay between reconnects, seconds
SEEDED = 60


def pg(cmd, *args, timeout=90):
    return UsersTest.postgres.run(cmd, *args, timeout=timeout)



@contextlib.contextmanager
def running_clients(clients, target):
    """Run @clients threads of target(k, stop, results) for the block; yield
    (results, threads): the list they share and the threads, joined (bounded)
    after the stop event is set on the way out."""
    stop = threading.Event()
    results = []
    workers = [threading.Thread(target=target, args=(k, stop, results)) for k in range(clients)]
    for w in workers:
        w.start()
    try:
        yield results, workers
    finally:
        stop.set()
        for w in workers:
            w.join(DB_TIMEOUT + 10)

class UsersTest(cs.CoringTestCase):
    server = None
    postgres = None

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-users-")
        # Deadlocks between Sync groups (test_deadlocked_groups_are_sent_again)
        # cost deadlock_timeout each, and a resent group can meet a second:
        # at the default 1 s two of them and the lock waits behind them pass
        # --db-timeout (3 s) and answer 503. 100 ms keeps them well inside.
        cls.postgres.sql("ALTER SYSTEM SET deadlock_timeout = '100ms'")
        cls.postgres.sql("SELECT pg_reload_conf()")
        os.environ["DATABASE_URL"] = cls.postgres.url()
        cls.server = cls.start_server(["--seed-users", str(SEEDED)])
        cls.addClassCleanup(cls.server.kill)

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    @classmethod
    def start_server(cls, extra=()):
        # No deadline (users' 3 s would race --db-timeout 3): these tests are
        # about the query timeout; test_deadlines.py is about deadlines.
        return cs.CoringServer(threads=2, apps="users",
                               args=["--db-timeout", str(DB_TIMEOUT), "--deadline", "off"]
                               + list(extra)).start()

    def setUp(self):
        self.conn = self.server.connect()

    def tearDown(self):
        self.conn.close()

    # -- helpers ----------------------------------------------------------
    def req(self, method, path, body=None, conn=None, server=None):
        h = dict(JSON_HDR) if body is not None else {}
        if server is not None:
            with server.connect() as c:
                resp = c.request(method, path, h, body)
        else:
            resp = (conn or self.conn).request(method, path, h, body)
        self.assertCommonHeaders(resp, "%s %s" % (method, path))
        return resp

    def assertUser(self, doc, name=None, email=None, what=""):
        self.assertIsInstance(doc, dict, what)
        self.assertEqual(set(doc), {"id", "name", "email", "created_at"}, "%s: %r" % (what, doc))
        self.assertIsInstance(doc["id"], int, what)
        self.assertGreater(doc["id"], 0, what)
        self.assertRegex(doc["created_at"], RFC3339_UTC, what)
        if name is not None:
            self.assertEqual(doc["name"], name, what)
        if email is not None:
            self.assertEqual(doc["email"], email, what)

    def create(self, name, email, conn=None):
        resp = self.req("POST", "/users", {"name": name, "email": email}, conn=conn)
        self.assertEqual(resp.status, 201, "POST /users: %r" % resp)
        doc = resp.json()
        self.assertUser(doc, name, email, "POST /users")
        self.assertEqual(resp.header("Location"), "/users/%d" % doc["id"])
        return doc

    def unique_email(self, tag="u"):
        return "%s-%d-%d@example.com" % (tag, time.monotonic_ns(), random.randrange(1 << 30))

    # -- routes ---------------------------------------------------------------
    def test_create_then_get(self):
        email = self.unique_email("ana")
        doc = self.create("Ana ✓", email)
        resp = self.req("GET", "/users/%d" % doc["id"])
        self.assertEqual(resp.status, 200, repr(resp))
        self.assertTrue(resp.header("Content-Type").startswith("application/json"))
        self.assertEqual(resp.json(), doc)

    def test_created_at_is_the_database_time(self):
        # created_at comes back as a binary timestamptz (microseconds since
        # 2000-01-01) and is written as RFC 3339 by the app: it must be the
        # instant the database holds, to the microsecond, also before 2000
        # and before 1970 (negative values on either epoch).
        doc = self.create("Time", self.unique_email("time"))
        sql_rfc3339 = ("to_char(created_at AT TIME ZONE 'UTC', "
                       "'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')")
        out = pg("psql", "-tAc", "SELECT %s FROM users WHERE id = %d" % (sql_rfc3339, doc["id"]))
        self.assertEqual(doc["created_at"], out.strip())
        for stored, shown in (("1999-12-31 23:59:59.999999+00", "1999-12-31T23:59:59.999999Z"),
                              ("1969-12-31 23:59:59.5+00", "1969-12-31T23:59:59.500000Z"),
                              ("2000-01-01 00:00:00+00", "2000-01-01T00:00:00.000000Z"),
                              ("2038-01-19 03:14:08.000001+00", "2038-01-19T03:14:08.000001Z")):
            pg("psql", "-tAc", "UPDATE users SET created_at = '%s' WHERE id = %d" % (stored, doc["id"]))
            resp = self.req("GET", "/users/%d" % doc["id"])
            self.assertEqual(resp.status, 200, repr(resp))
            self.assertEqual(resp.json()["created_at"], shown, stored)

    def test_get_missing_and_bad_ids(self):
        self.assertJsonError(self.req("GET", "/users/987654321"), 404, "missing user")
        # Past 64 bits is 400, as on /todos (it was 404: issue 39).
        for huge in ("99999999999999999999", "9223372036854775808", "99999999999999999999999"):
            self.assertJsonError(self.req("GET", "/users/" + huge), 400, "huge id " + huge)
        self.assertJsonError(self.req("GET", "/users/9223372036854775807"), 404, "largest id")
        self.assertJsonError(self.req("GET", "/users/abc"), 400, "non-numeric id")
        self.assertJsonError(self.req("GET", "/users/-1"), 400, "negative id")
        self.assertEqual(self.req("DELETE", "/users/1").status, 405)

    def test_list_default_limit_and_order(self):
        docs = self.req("GET", "/users").json()
        self.assertEqual(len(docs), 50, "default page size (seeded %d users)" % SEEDED)
        ids = [d["id"] for d in docs]
        self.assertEqual(ids, sorted(ids))
        for d in docs:
            self.assertUser(d, what="GET /users")

    def test_list_paging(self):
        first = self.req("GET", "/users?limit=3").json()
        self.assertEqual(len(first), 3)
        nxt = self.req("GET", "/users?limit=3&after_id=%d" % first[-1]["id"]).json()
        self.assertEqual(len(nxt), 3)
        self.assertGreater(nxt[0]["id"], first[-1]["id"])
        both = self.req("GET", "/users?limit=6").json()
        self.assertEqual(both, first + nxt)
        full = self.req("GET", "/users?limit=100").json()
        self.assertGreaterEqual(len(full), SEEDED)
        self.assertLessEqual(len(full), 100)
        self.assertEqual(self.req("GET", "/users?after_id=9223372036854775807").json(), [])

    def test_list_bad_parameters(self):
        for q in ("limit=0", "limit=101", "limit=abc", "limit=", "after_id=-1", "after_id=x",
                  "limit=99999999999999999999"):
            self.assertJsonError(self.req("GET", "/users?" + q), 400, q)

    def test_list_parameters_are_percent_decoded_and_given_once(self):
        # RFC 3986 section 2.1: %33 is "3"; a name sent twice is refused
        # rather than one of its values picked at random.
        self.assertEqual(len(self.req("GET", "/users?limit=%33").json()), 3)
        self.assertEqual(len(self.req("GET", "/users?%6cimit=2&after_id=0").json()), 2)
        for q, word in (("limit=1&limit=2", "limit"), ("after_id=0&after_id=0", "after_id")):
            resp = self.req("GET", "/users?" + q)
            self.assertJsonError(resp, 400, q)
            self.assertEqual(resp.json()["error"], word + " must be given once")
        self.assertJsonError(self.req("GET", "/users?limit=1%"), 400, "malformed escape")

    def test_duplicate_email(self):
        email = self.unique_email("dup")
        self.create("First", email)
        resp = self.req("POST", "/users", {"name": "Second", "email": email.upper()})
        self.assertJsonError(resp, 409, "same email, other case")
        self.assertJsonError(self.req("POST", "/users", {"name": "Third", "email": email}), 409)

    def test_invalid_bodies(self):
        ok = self.unique_email("v")
        cases = [
            (b"", 400), (b"{", 400), (b"not json", 400), (b'{"name": "a", "email": ', 400),
            ([], 422), (b'"a string"', 422), (b"42", 422), ({}, 422),
            ({"email": ok}, 422), ({"name": "", "email": ok}, 422), ({"name": "   ", "email": ok}, 422),
            ({"name": 5, "email": ok}, 422), ({"name": None, "email": ok}, 422),
            ({"name": "A"}, 422), ({"name": "A", "email": ""}, 422),
            ({"name": "A", "email": "no-at.example.com"}, 422),
            ({"name": "A", "email": "two@@example.com"}, 422),
            ({"name": "A", "email": "a@b@example.com"}, 422),
            ({"name": "A", "email": "@example.com"}, 422), ({"name": "A", "email": "a@"}, 422),
            ({"name": "A", "email": "a b@example.com"}, 422),
            ({"name": "x" * 101, "email": ok}, 422),
            ({"name": "A", "email": "a@" + "e" * 300}, 422),
            ({"name": "A\u0000B", "email": ok}, 422),
        ]
        for body, status in cases:
            resp = self.req("POST", "/users", body)
            self.assertJsonError(resp, status, "body %r" % (body,))
        # Limits are in characters: 100 of them, 3 bytes each, are fine.
        self.create("é" * 100, ok)
        self.assertEqual(self.req("POST", "/users", b"{").json()["error"],
                         "invalid JSON: the JSON document has an improper structure: missing or "
                         "superfluous commas, braces, missing keys, etc.")
        ok2 = self.unique_email("w")
        for body, message in (({"email": ok2}, "name is required"),
                              ({"name": 5, "email": ok2}, "name must be a string"),
                              ({"name": "A", "email": " "}, "email must not be empty"),
                              ({"name": "A\u0000B", "email": ok2}, "name must not contain NUL"),
                              (b"[]", "body must be a JSON object"),
                              (b"", "request body must be a JSON object")):
            self.assertEqual(self.req("POST", "/users", body).json()["error"], message, body)
        # The connection survived all of the above.
        self.assertEqual(self.req("GET", "/users?limit=1").status, 200)

    def test_control_characters_in_email(self):
        for bad in ("a\u007f@example.com", "a@exam\u007fple.com", "a\u0085@example.com",
                    "a@example.com\u009f", "a\u0080b@example.com", "a\u0001@example.com",
                    "a@example.com\n", "a\t@example.com"):
            resp = self.req("POST", "/users", {"name": "A", "email": bad})
            self.assertJsonError(resp, 422, "email %r" % bad)
        # Non-ASCII that is not a control character stays allowed.
        self.create("Ana", self.unique_email("\u00e1"))
        self.create("Ana", self.unique_email("\u00bfx"))

    def test_body_must_be_declared_json(self):
        body = json.dumps({"name": "Cross Site", "email": self.unique_email("cs")}).encode()
        for ct in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                   "application/json-seq", None):
            headers = {"Content-Type": ct} if ct else {}
            resp = self.conn.request("POST", "/users", headers, body)
            self.assertJsonError(resp, 415, "Content-Type %r" % ct)
            self.assertIn("Content-Type: application/json", resp.json()["error"])
        for ct in ("application/json; charset=utf-8", "APPLICATION/JSON"):
            body = json.dumps({"name": "Json", "email": self.unique_email("ct")}).encode()
            resp = self.conn.request("POST", "/users", {"Content-Type": ct}, body)
            self.assertEqual(resp.status, 201, "Content-Type %r: %r" % (ct, resp))

    # -- load -------------------------------------------------------------------
    def test_concurrent_clients(self):
        known = {d["id"]: d for d in self.req("GET", "/users?limit=100").json()}
        ids = list(known)
        clients, reads = 200, 50
        errors = []
        counts = [0] * clients
        start = threading.Barrier(clients)

        def client(k):
            try:
                rnd = random.Random(k)
                with self.server.connect(timeout=20) as c:
                    start.wait(30)
                    for _ in range(reads):
                        uid = rnd.choice(ids)
                        r = c.request("GET", "/users/%d" % uid)
                        if r.status != 200 or r.json() != known[uid]:
                            errors.append("client %d: GET /users/%d -> %r" % (k, uid, r))
                            return
                        counts[k] += 1
                    email = "load-%d-%d@example.com" % (k, time.monotonic_ns())
                    r = c.request("POST", "/users", JSON_HDR, {"name": "Load %d" % k, "email": email})
                    if r.status != 201 or r.json()["email"] != email:
                        errors.append("client %d: POST -> %r" % (k, r))
                        return
                    uid = r.json()["id"]
                    r2 = c.request("GET", "/users/%d" % uid)
                    if r2.status != 200 or r2.json() != r.json():
                        errors.append("client %d: GET own user -> %r" % (k, r2))
                        return
                    counts[k] += 1
            except Exception as e:  # noqa: BLE001 - report every failure
                errors.append("client %d: %r" % (k, e))

        cs.raise_nofile_limit()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertEqual(errors[:5], [], "%d failing clients" % len(errors))
        self.assertEqual(sum(counts), clients * (reads + 1), "answers lost")
        self.assertLess(time.monotonic() - t0, 60)

    def _load(self, stop, results, path="/users/1"):
        """Loop GET @path on one connection until @stop; record (status, seconds)."""
        c = None
        while not stop.is_set():
            try:
                if c is None:
                    c = self.server.connect(timeout=DB_TIMEOUT + 5)
                t = time.monotonic()
                r = c.request("GET", path)
                results.append((r.status, time.monotonic() - t, r.json() if r.status == 503 else None))
            except Exception as e:  # noqa: BLE001
                results.append(("error", repr(e), None))
                if c is not None:
                    c.close()
                c = None
                time.sleep(0.05)
        if c is not None:
            c.close()

    def _wait_for_200(self, seconds):
        deadline = time.monotonic() + seconds
        last = None
        while time.monotonic() < deadline:
            with self.server.connect() as c:
                last = c.request("GET", "/users/1")
            if last.status == 200:
                return
            time.sleep(0.1)
        self.fail("no 200 within %.0f s; last answer %r; stderr:\n%s"
                  % (seconds, last, self.server.stderr_text()))

    @contextlib.contextmanager
    def _under_load(self, clients):
        """Run @clients looping GET /users/1 for the block; yield their shared results."""
        with running_clients(clients, lambda k, stop, results: self._load(stop, results)) as (results, _):
            yield results

    def test_postgres_stopped_and_started_under_load(self):
        with self._under_load(8) as results:
            time.sleep(0.5)
            pg("stop", "fast")
            down_from = len(results)
            time.sleep(1.5)
            down = results[down_from:]
            pg("start")
            self._wait_for_200(10)
            # Each thread's connections come back on their own backoff schedule.
            time.sleep(BACKOFF_MAX + 0.5)
            up_from = len(results)
            time.sleep(0.5)
        self.assertTrue(down, "no answers while PostgreSQL was down")
        for status, secs, doc in down:
            self.assertIn(status, (200, 503), "answer while down: %r %r" % (status, secs))
            self.assertLess(secs, 1.5, "a request hung while PostgreSQL was down")
            if status == 503:
                self.assertEqual(doc, {"error": "database unavailable"})
        self.assertIn(503, [s for s, _, _ in down])
        after = results[up_from:]
        self.assertTrue(after)
        self.assertEqual({s for s, _, _ in after}, {200}, "answers after PostgreSQL came back; stderr:\n%s"
                         % self.server.stderr_text())

    def test_terminated_backends(self):
        with self._under_load(4) as results:
            time.sleep(0.3)
            out = pg("psql", "-tAc", "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                     "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
            self.assertGreaterEqual(int(out.strip()), 2, "backends terminated")
            time.sleep(0.3)
            self._wait_for_200(5)
            time.sleep(BACKOFF_MAX / 2)
            mark = len(results)
            time.sleep(0.3)
        for status, secs, _ in results:
            self.assertIn(status, (200, 503), "answer around the kill: %r %r" % (status, secs))
            self.assertLess(secs, DB_TIMEOUT, "a request hung after its backend was killed; stderr:\n%s"
                            % self.server.stderr_text())
        self.assertEqual({s for s, _, _ in results[mark:]}, {200})
        # And a plain request afterwards, on a new connection.
        self.assertEqual(self.req("GET", "/users/1").status, 200)

    # -- shared Syncs and several in flight ------------------------------------
    def _post_all(self, bodies):
        """POST each of @bodies at once (cs.send_all); the responses in order."""
        return cs.send_all(self.server, [("POST", "/users", body) for body in bodies])

    def _db_metric(self, name):
        return self.server.metric(name) or 0.0

    def test_concurrent_inserts_share_round_trips(self):
        """64 POSTs at once take fewer round trips (Syncs) than inserts:
        writes share a Sync (each had one of its own before)."""
        tag = self.unique_email("share").split("@")[0]
        bodies = [{"name": "Share %d" % i, "email": "%s-%d@example.com" % (tag, i)}
                  for i in range(64)]
        trips0 = self._db_metric("db_round_trips_total")
        got = self._post_all(bodies)
        trips = self._db_metric("db_round_trips_total") - trips0
        print("64 concurrent POST /users: %d round trips (Syncs)" % trips)
        self.assertEqual([r.status for r in got], [201] * 64, got[:3])
        rows = pg("psql", "-tAc", "SELECT count(*) FROM users WHERE email LIKE '%s-%%'" % tag)
        self.assertEqual(int(rows.strip()), 64)
        self.assertLess(trips, 64, "each insert had a round trip of its own")

    def _coalesced_inserts(self, label):
        """64 POSTs at once with distinct emails and names: each 201 carries
        its own request's name and email and a distinct id, which the
        database holds for that email. Returns the batches and the
        queries coalesced into them meanwhile (from /metrics)."""
        tag = self.unique_email(label).split("@")[0]
        bodies = [{"name": "Batch %d" % i, "email": "%s-%d@example.com" % (tag, i)}
                  for i in range(64)]
        batches0 = self._db_metric("db_batches_total")
        coalesced0 = self._db_metric("db_coalesced_queries_total")
        got = self._post_all(bodies)
        batches = self._db_metric("db_batches_total") - batches0
        coalesced = self._db_metric("db_coalesced_queries_total") - coalesced0
        self.assertEqual([r.status for r in got], [201] * 64, got[:3])
        for body, r in zip(bodies, got):
            self.assertEqual((r.json()["name"], r.json()["email"]), (body["name"], body["email"]))
        ids = [r.json()["id"] for r in got]
        self.assertEqual(len(set(ids)), 64, "ids answered twice")
        rows = self.postgres.sql("SELECT id, email FROM users WHERE email LIKE '%s-%%'" % tag)
        self.assertEqual({int(i): e for i, e in rows},
                         {r.json()["id"]: r.json()["email"] for r in got})
        return batches, coalesced

    def test_concurrent_inserts_are_coalesced(self):
        """Inserts queued together go out as one INSERT of the batch form
        (db.h, "Coalescing"), and each request still gets its own row;
        with --db-coalesce off every insert goes out alone."""
        batches, coalesced = self._coalesced_inserts("coalesce")
        print("64 concurrent POST /users: %d batches, %d inserts in them" % (batches, coalesced))
        self.assertGreater(batches, 0, "no insert was coalesced")
        self.assertGreaterEqual(coalesced, 2 * batches)
        server = self.start_server(["--db-coalesce", "off"])
        self.addCleanup(server.kill)
        self.server = server  # the helpers talk to it
        self.assertEqual(self._coalesced_inserts("alone"), (0, 0))
        server.stop(expect_status=0)

    def test_a_failed_batch_sends_its_inserts_again_alone(self):
        """A batch holding one taken email fails whole; its inserts go
        again each in a Sync group of its own, so the one at fault cannot
        roll the others back a second time (no 'group' resend) and each
        gets its own answer."""
        tag = self.unique_email("alone").split("@")[0]
        group0 = self._db_metric('db_queries_resent_total{reason="group"}')
        batch0 = self._db_metric('db_queries_resent_total{reason="batch"}')
        for rnd in range(5):
            taken = "%s-%d-taken@example.com" % (tag, rnd)
            self.create("Taken", taken)
            emails = [taken] + ["%s-%d-%d@example.com" % (tag, rnd, i) for i in range(15)]
            got = self._post_all([{"name": "A", "email": e} for e in emails])
            self.assertEqual([r.status for r in got], [409] + [201] * 15, got[:2])
        resent = self._db_metric('db_queries_resent_total{reason="batch"}') - batch0
        print("inserts sent again alone after a failed batch: %d" % resent)
        self.assertEqual(self._db_metric('db_queries_resent_total{reason="group"}') - group0, 0)

    def test_a_duplicate_kept_out_of_a_batch_does_not_roll_it_back(self):
        """16 POSTs at once, one email twice: the second of the pair stays
        out of the batch (one key per batch) and the batch ends its Sync
        group, so the duplicate fails in a transaction of its own and
        rolls no one back ('group' resends stay 0)."""
        tag = self.unique_email("twice").split("@")[0]
        group0 = self._db_metric('db_queries_resent_total{reason="group"}')
        for rnd in range(10):
            emails = ["%s-%d-%d@example.com" % (tag, rnd, i) for i in range(15)]
            emails.append(emails[rnd])
            got = self._post_all([{"name": "T", "email": e} for e in emails])
            statuses = [r.status for r in got]
            self.assertEqual(sorted(statuses), [201] * 15 + [409], statuses)
            self.assertEqual(sorted([statuses[rnd], statuses[15]]), [201, 409])
        self.assertEqual(self._db_metric('db_queries_resent_total{reason="group"}') - group0, 0)

    def test_a_deadlocked_batch_sends_its_inserts_again_alone(self):
        """A batch that PostgreSQL rolls back for a deadlock (40P01) sends
        its inserts again, each in a Sync group of its own, and both still
        answer 201. Forced: another session holds an uncommitted insert of
        email y and sleeps 1.5 s; POSTs of x and then y ride in one batch,
        which inserts x and waits for the session's y; the session wakes
        and inserts x, waiting for the batch. The batch's backend finds the
        cycle when its deadlock_timeout (2.5 s, set for this server's
        connections) fires, before the session's (60 s); the session then
        rolls back, so the inserts sent again are created. A try proves
        nothing, and is made again (12 at most), when the two POSTs did
        not ride in one batch (read in two loop turns), or rode in it y
        first, or after the session woke: then no deadlock."""
        url = os.environ["DATABASE_URL"]
        os.environ["DATABASE_URL"] = url + " options='-c deadlock_timeout=2500'"
        try:
            server = cs.CoringServer(threads=1, apps="users",
                                     args=["--db-timeout", "10", "--db-pool", "1",
                                           "--deadline", "off"]).start()
        finally:
            os.environ["DATABASE_URL"] = url
        self.addCleanup(server.kill)
        self.server = server  # the helpers talk to it
        tag = self.unique_email("dlbatch").split("@")[0]
        metrics = ("db_batches_total", 'db_queries_resent_total{reason="deadlock"}',
                   'db_queries_resent_total{reason="batch"}', "db_round_trips_total")
        for attempt in range(12):
            x, y = ("%s-%d-%s@example.com" % (tag, attempt, k) for k in "xy")
            before = [self._db_metric(m) for m in metrics]
            script = ("SET deadlock_timeout = '60s';\n SET lock_timeout = '20s';\n BEGIN;\n"
                      "INSERT INTO users (name, email) VALUES ('S', '%s');\n"
                      "SELECT pg_sleep(1.5);\n"
                      "INSERT INTO users (name, email) VALUES ('S', '%s');\n"
                      "ROLLBACK;\n" % (y, x))
            with subprocess.Popen([cs.PG_LOCAL, "psql", self.postgres.dir, "-c", script],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.PIPE, text=True) as session:
                try:
                    deadline = time.monotonic() + 10
                    while self.postgres.sql("SELECT count(*) FROM pg_stat_activity "
                                            "WHERE wait_event = 'PgSleep'") != [["1"]]:
                        self.assertLess(time.monotonic(), deadline, "the session never slept")
                        time.sleep(0.01)
                    got = self._post_all([{"name": "B", "email": e} for e in (x, y)])
                    _, err = session.communicate(timeout=30)
                finally:
                    if session.poll() is None:
                        session.kill()
            self.assertNotIn("deadlock", err, "the session, not the batch, was rolled back")
            self.assertEqual([r.status for r in got], [201, 201], got)
            batches, deadlocked, failed, trips = (a - b for a, b in zip(
                [self._db_metric(m) for m in metrics], before))
            if not batches or not deadlocked:
                continue  # no batch, or no deadlock in it: this try proved nothing
            self.assertEqual(deadlocked, 2, "both inserts of the deadlocked batch sent again")
            self.assertEqual(failed, 0, "a deadlock is counted as one, not as a failed batch")
            self.assertGreaterEqual(trips, 3, "the batch, then each insert in a group of its own")
            rows = self.postgres.sql("SELECT email, name FROM users WHERE email IN ('%s', '%s') "
                                     "ORDER BY email" % (x, y))
            self.assertEqual(rows, [[x, "B"], [y, "B"]], "the batch's rows, not the session's")
            print("a batch deadlocked and was sent again alone at try %d" % (attempt + 1))
            server.stop(expect_status=0)
            return
        self.fail("in 12 tries the two POSTs never rode in one batch that deadlocked: "
                  "the test proved nothing")

    def test_conflicting_inserts_roll_back_no_one_else(self):
        """Concurrent POSTs where some conflict (an email already taken, or
        the same new email twice): each conflict answers 409, every other
        insert is created (and in the database), although PostgreSQL rolls
        back the whole Sync group of a failing insert."""
        tag = self.unique_email("conflict").split("@")[0]
        for rnd in range(3):
            taken = ["%s-%d-taken%d@example.com" % (tag, rnd, i) for i in range(8)]
            for e in taken:
                self.create("Taken", e)
            fresh = ["%s-%d-new%d@example.com" % (tag, rnd, i) for i in range(32)]
            twice = ["%s-%d-twice%d@example.com" % (tag, rnd, i) for i in range(8)]
            emails = taken + fresh + twice + twice
            random.Random(rnd).shuffle(emails)
            got = self._post_all([{"name": "C", "email": e} for e in emails])
            by_email = {}
            for e, r in zip(emails, got):
                by_email.setdefault(e, []).append(r)
            for e in taken:
                self.assertEqual([r.status for r in by_email[e]], [409], e)
            for e in fresh:
                self.assertEqual([r.status for r in by_email[e]], [201], "%s: %r" % (e, by_email[e]))
            for e in twice:
                self.assertEqual(sorted(r.status for r in by_email[e]), [201, 409], e)
            created = {r.json()["id"]: e for e in fresh + twice for r in by_email[e] if r.status == 201}
            rows = self.postgres.sql("SELECT id, email FROM users WHERE email LIKE '%s-%d-%%'"
                                     % (tag, rnd))
            in_db = {int(i): e for i, e in rows}
            self.assertEqual(len(in_db), len(taken) + len(fresh) + len(twice), "rows in the database")
            for uid, e in created.items():
                self.assertEqual(in_db.get(uid), e, "201 for id %d (%s), not in the database" % (uid, e))
        # A batch holding a conflict fails whole; its inserts go again alone.
        print("inserts sent again after a failed batch: %d"
              % self._db_metric('db_queries_resent_total{reason="batch"}'))

    # -- coalescing end to end (issue 39) --------------------------------------
    def _send_all(self, requests, server=None):
        """cs.send_all on @server (the class's by default)."""
        return cs.send_all(server or self.server, requests)

    def test_conflicts_inside_coalesced_batches_and_the_queries_around_them(self):
        """Coalescing on, one thread, one connection: POSTs of taken, new and
        twice-sent emails and GETs of existing users, all at once, so that
        batches hold conflicts and share their Sync groups with reads. A
        failed batch sends its inserts again one by one, and the queries of
        its group that it rolled back or that PostgreSQL skipped go again:
        each POST answers 201 with its own row or 409, each GET its user,
        and the table holds exactly the rows answered 201. (Only a test with
        --db-coalesce off caught a broken re-send of skipped queries.)"""
        server = cs.CoringServer(threads=1, apps="users",
                                 args=["--db-timeout", str(DB_TIMEOUT), "--db-pool", "1"]).start()
        self.addCleanup(server.kill)
        tag = self.unique_email("inbatch").split("@")[0]
        metrics = ("db_batches_total", 'db_queries_resent_total{reason="batch"}',
                   'db_queries_resent_total{reason="group"}')
        before = [server.metric(m) or 0.0 for m in metrics]
        known = {}
        for i in range(8):
            doc = self.create("Known", "%s-known%d@example.com" % (tag, i))
            known[doc["id"]] = doc["email"]
        for rnd in range(4):
            taken = ["%s-%d-taken%d@example.com" % (tag, rnd, i) for i in range(6)]
            for e in taken:
                self.create("Taken", e)
            fresh = ["%s-%d-new%d@example.com" % (tag, rnd, i) for i in range(20)]
            # Odd rounds send some emails twice: the second stays out of the
            # batch, which then ends its group; even rounds none, so the
            # batch's group goes on after it with reads.
            twice = ["%s-%d-twice%d@example.com" % (tag, rnd, i) for i in range(6 * (rnd % 2))]
            requests = [("POST", "/users", {"name": "N", "email": e}) for e in taken + fresh + twice + twice]
            requests += [("GET", "/users/%d" % uid, None) for uid in list(known) * 2]
            random.Random(rnd).shuffle(requests)
            got = self._send_all(requests, server)
            by_email = {}
            for (method, path, body), r in zip(requests, got):
                ctx = "round %d, %s %s: %r" % (rnd, method, path, r)
                if method == "GET":
                    self.assertEqual(r.status, 200, ctx)
                    self.assertEqual(r.json()["email"], known[int(path.rsplit("/", 1)[1])], ctx)
                    continue
                by_email.setdefault(body["email"], []).append(r)
                if r.status == 201:
                    self.assertUser(r.json(), "N", body["email"], ctx)
                else:
                    self.assertJsonError(r, 409, ctx)
            for e in taken:
                self.assertEqual([r.status for r in by_email[e]], [409], e)
            for e in fresh:
                self.assertEqual([r.status for r in by_email[e]], [201], e)
            for e in twice:
                self.assertEqual(sorted(r.status for r in by_email[e]), [201, 409], e)
            answered = {r.json()["id"]: e for e in fresh + twice for r in by_email[e] if r.status == 201}
            rows = self.postgres.sql("SELECT id, email, name FROM users WHERE email LIKE '%s-%d-%%'"
                                     % (tag, rnd))
            self.assertEqual({int(i): e for i, e, n in rows if n == "N"}, answered, "round %d" % rnd)
            self.assertEqual(sorted(e for _, e, n in rows if n == "Taken"), sorted(taken))
        batches, batch_resent, group_resent = (
            (server.metric(m) or 0.0) - b for m, b in zip(metrics, before))
        print("4 rounds: %d batches, %d inserts sent again after a failed batch, %d queries "
              "sent again after their group failed" % (batches, batch_resent, group_resent))
        self.assertGreater(batches, 0, "no batch: the test proved nothing")
        self.assertGreater(batch_resent, 0, "no batch held a conflict: the test proved nothing")
        self.assertGreater(group_resent, 0, "no query was rolled back with a batch: the test proved nothing")
        server.stop(expect_status=0)

    def test_an_email_that_is_a_prefix_of_another_in_one_batch(self):
        """POSTs at once, one email a prefix of the other (a@x.co and
        a@x.com), coalesced into one INSERT: each gets its own row, not the
        other's (the batch's rows go to requests by email, byte for byte and
        whole). Shorter first, longer first, and chains of three; rounds go
        on until each shape has ridden in a batch twice (a round read in
        two loop turns proves nothing about batches)."""
        server = cs.CoringServer(threads=1, apps="users",
                                 args=["--db-timeout", str(DB_TIMEOUT), "--db-pool", "1"]).start()
        self.addCleanup(server.kill)
        tag = self.unique_email("prefix").split("@")[0]
        shapes = ("shorter first", "longer first", "a chain of three")
        batched = dict.fromkeys(shapes, 0)
        rnd = 0
        while min(batched.values()) < 2:
            self.assertLess(rnd, 60, "POSTs sent together seldom shared a batch: %r" % batched)
            shape = shapes[rnd % 3]
            short = "%s-%d@example.co" % (tag, rnd)
            emails = {"shorter first": [short, short + "m"], "longer first": [short + "m", short],
                      "a chain of three": [short + "m.br", short, short + "m"]}[shape]
            batches0 = server.metric("db_batches_total") or 0.0
            got = self._send_all([("POST", "/users", {"name": "P%d" % i, "email": e})
                                  for i, e in enumerate(emails)], server)
            if (server.metric("db_batches_total") or 0.0) > batches0:
                batched[shape] += 1
            for i, (e, r) in enumerate(zip(emails, got)):
                self.assertEqual(r.status, 201, "round %d, %s: %r" % (rnd, e, r))
                self.assertUser(r.json(), "P%d" % i, e, "round %d (%s)" % (rnd, shape))
            ids = [r.json()["id"] for r in got]
            self.assertEqual(len(set(ids)), len(ids), "one id answered twice: %r" % ids)
            rows = self.postgres.sql("SELECT id, email FROM users WHERE id IN (%s)" % ",".join(map(str, ids)))
            self.assertEqual({int(i): e for i, e in rows}, dict(zip(ids, emails)), "round %d" % rnd)
            rnd += 1
        print("%d rounds, in a batch: %r" % (rnd, batched))
        server.stop(expect_status=0)

    def test_other_routings_answer_the_same(self):
        """--db-routing pack (queries join the Sync group being formed) and
        spread (the least loaded connection) rather than fill (the first
        connection until it is deep, the default): the concurrent clients
        get the same answers, and conflicting inserts still roll back no one
        else."""
        for routing in ("pack", "spread"):
            with self.subTest(routing=routing):
                server = self.start_server(["--db-routing", routing])
                self.addCleanup(server.kill)
                self.server = server  # this test's helpers talk to it
                self.test_concurrent_clients()
                self.test_conflicting_inserts_roll_back_no_one_else()
                server.stop(expect_status=0)

    def test_deadlocked_groups_are_sent_again(self):
        """Many emails POSTed twice at once, shuffled: two Sync groups on two
        connections that insert the same emails in opposite orders deadlock,
        and PostgreSQL rolls one back (40P01). Each email still answers one
        201 and one 409, never a 500; the rolled-back inserts were sent
        again (the run goes on until the server has counted a deadlock; a
        round deadlocks about one time in ten, so 200 rounds, a few seconds
        each at most, leave no real chance of a false failure). With
        --db-coalesce off: coalesced, the inserts of one connection go out
        as one statement and a duplicate waits for the next group, so two
        connections deadlock far more rarely (0 in 200 rounds seen), and
        this is the Sync groups' retry under test."""
        server = self.start_server(["--db-coalesce", "off"])
        self.addCleanup(server.kill)
        self.server = server  # the helpers talk to it
        tag = self.unique_email("deadlock").split("@")[0]
        resent0 = self._db_metric('db_queries_resent_total{reason="deadlock"}')
        rounds = 0
        while rounds < 200:
            twice = ["%s-%d-%d@example.com" % (tag, rounds, i) for i in range(48)]
            emails = twice + twice
            random.Random(rounds).shuffle(emails)
            got = self._post_all([{"name": "D", "email": e} for e in emails])
            by_email = {}
            for e, r in zip(emails, got):
                by_email.setdefault(e, []).append(r.status)
            for e in twice:
                self.assertEqual(sorted(by_email[e]), [201, 409], e)
            rounds += 1
            if self._db_metric('db_queries_resent_total{reason="deadlock"}') > resent0:
                break
        else:
            self.fail("no deadlock in 200 rounds of 48 emails POSTed twice: the test proved nothing")
        print("a deadlock, resent, after %d rounds" % rounds)
        server.stop(expect_status=0)

    def _mixed_load(self, k, stop, results):
        """Loop a POST and a GET of it on one connection until @stop; record
        (what, status, seconds, email)."""
        c = None
        n = 0
        while not stop.is_set():
            try:
                if c is None:
                    c = self.server.connect(timeout=DB_TIMEOUT + 5)
                email = "mixed-%d-%d-%d@example.com" % (k, n, time.monotonic_ns())
                n += 1
                t = time.monotonic()
                r = c.request("POST", "/users", JSON_HDR, {"name": "M", "email": email})
                results.append(("POST", r.status, time.monotonic() - t, email))
                if r.status == 201:
                    t = time.monotonic()
                    r2 = c.request("GET", "/users/%d" % r.json()["id"])
                    results.append(("GET", r2.status, time.monotonic() - t, email))
            except Exception as e:  # noqa: BLE001
                results.append(("error", repr(e), 0, None))
                if c is not None:
                    c.close()
                c = None
                time.sleep(0.05)
        if c is not None:
            c.close()

    def _client_backends(self):
        out = pg("psql", "-tAc", "SELECT pid FROM pg_stat_activity WHERE backend_type = "
                 "'client backend' AND pid <> pg_backend_pid()")
        return [int(x) for x in out.split()]

    @contextlib.contextmanager
    def _under_mixed_load(self, clients):
        workers = []
        try:
            with running_clients(clients, self._mixed_load) as (results, workers):
                yield results
        finally:
            self.assertFalse(any(w.is_alive() for w in workers), "a client hung")

    def test_backends_killed_with_several_syncs_in_flight(self):
        """pg_terminate_backend under 24 clients writing and reading: every
        request gets an answer (201/200; 503, or 504 for a POST whose
        outcome is unknown) within the query timeout, none hangs, every 201
        is in the database, and all is 2xx again."""
        with self._under_mixed_load(24) as results:
            time.sleep(0.5)
            for _ in range(3):
                out = pg("psql", "-tAc", "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                         "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
                self.assertGreaterEqual(int(out.strip()), 2, "backends terminated")
                time.sleep(0.4)
            self._wait_for_200(5)
            time.sleep(BACKOFF_MAX + 0.5)
            mark = len(results)
            time.sleep(0.5)
        counts = {}
        for what, status, secs, _ in results:
            counts[(what, status)] = counts.get((what, status), 0) + 1
        print("answers around the kills: %r" % sorted(counts.items(), key=str))
        for what, status, secs, email in results:
            self.assertIn((what, status), (("POST", 201), ("POST", 503), ("POST", 504), ("GET", 200),
                                           ("GET", 503)),
                          "answer around the kill: %r %r %r" % (what, status, secs))
            self.assertLess(secs, DB_TIMEOUT + 1, "a request hung: %r %r; stderr:\n%s"
                            % (what, email, self.server.stderr_text()))
        created = {e for what, status, _, e in results if what == "POST" and status == 201}
        self.assertTrue(created)
        rows = self.postgres.sql("SELECT email FROM users WHERE email LIKE 'mixed-%'")
        missing = created - {r[0] for r in rows}
        self.assertEqual(missing, set(), "answered 201 but not in the database")
        after = {(w, s) for w, s, _, _ in results[mark:]}
        self.assertTrue(after)
        self.assertLessEqual(after, {("POST", 201), ("GET", 200)}, "answers after the kills")

    def test_stalled_backends_time_out_with_several_syncs_in_flight(self):
        """Backends stopped (SIGSTOP) under 16 clients: each request waiting
        on them answers within the query timeout (however many queries
        keep arriving behind it): 503, or 504 for a POST sent to them, whose
        outcome is unknown; once they run again, all is 2xx."""
        pids = self._client_backends()
        self.assertTrue(pids)
        with self._under_mixed_load(16) as results:
            time.sleep(0.5)
            for pid in pids:
                os.kill(pid, signal.SIGSTOP)
            stalled_from = len(results)
            try:
                time.sleep(DB_TIMEOUT + 1.5)
            finally:
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
            stalled = results[stalled_from:]
            self._wait_for_200(10)
            time.sleep(BACKOFF_MAX + 0.5)
            mark = len(results)
            time.sleep(0.5)
        print("answers while stalled: %r" % sorted({(w, s) for w, s, _, _ in stalled}, key=str))
        self.assertIn(503, [s for _, s, _, _ in stalled], "no 503 while the backends were stopped")
        for what, status, secs, email in results:
            self.assertIn((what, status), (("POST", 201), ("POST", 503), ("POST", 504), ("GET", 200),
                                           ("GET", 503)), "%r %r" % (what, status))
            self.assertLess(secs, DB_TIMEOUT + 1.5, "a request outlived the query timeout: %r %r"
                            % (what, email))
        after = {(w, s) for w, s, _, _ in results[mark:]}
        self.assertTrue(after)
        self.assertLessEqual(after, {("POST", 201), ("GET", 200)}, "answers after the stall; stderr:\n%s"
                             % self.server.stderr_text())

    # -- start-up -------------------------------------------------------------
    def test_restart_keeps_users_and_applies_no_migration_twice(self):
        doc = self.create("Persisted", self.unique_email("p"))
        other = self.start_server()
        try:
            resp = self.req("GET", "/users/%d" % doc["id"], server=other)
            self.assertEqual(resp.json(), doc)
        finally:
            other.stop(expect_status=0)
        self.assertNotIn("applied migration", other.stderr_text(200))
        out = pg("psql", "-tAc", "SELECT string_agg(version::text, ',' ORDER BY version) FROM schema_migrations"
                 " WHERE app = 'users'")
        files = sorted(int(f.split("_")[0]) for f in os.listdir(os.path.join(ROOT, "apps", "users", "migrations"))
                       if f.endswith(".sql"))
        self.assertEqual(out.strip(), ",".join(map(str, files)), "each migration recorded once")

    def test_no_database_url_fails_clearly(self):
        env = dict(os.environ)
        env.pop("DATABASE_URL", None)
        p = subprocess.run([cs.binary(), "--host", cs.HOST, "--port", "0", "--apps", "users"], env=env,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           timeout=10, text=True)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("DATABASE_URL", p.stderr)


if __name__ == "__main__":
    cs.main()

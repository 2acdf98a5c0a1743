#!/usr/bin/python3
"""The users app when PostgreSQL misbehaves under one request: db/'s
answers to a slow statement, an error at commit, a write whose outcome
cannot be known, and coalesced inserts whose rows a trigger changes
(docs/database.md, "What happens on failure").

Each test runs its own server with one worker thread and one connection
(--db-pool 1) on the class's throw-away cluster, so that the requests it
sends at once share that connection and its Sync groups. Triggers and
locks made for a test are removed at its end.
"""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

JSON_HDR = {"Content-Type": "application/json"}
UNKNOWN = {"error": "outcome unknown: the database did not confirm the write, which may or may "
                    "not have been done; a retry with the same Idempotency-Key is safe"}


class UsersFaultsTest(cs.CoringTestCase):
    postgres = None

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-users-faults-")
        os.environ["DATABASE_URL"] = cls.postgres.url()
        # The schema (migrations are applied at start-up), for the triggers.
        cs.CoringServer(threads=1, apps="users").start().stop(expect_status=0)

    # -- helpers ----------------------------------------------------------
    def start_server(self, *args, timeout=3):
        """A server on the class's cluster: one thread, one connection,
        --db-timeout @timeout (seconds), no deadline (these tests are about
        the database's timeouts and faults; test_deadlines.py is about
        deadlines), and @args; killed at the test's end."""
        server = cs.CoringServer(threads=1, apps="users", args=[
            "--db-pool", "1", "--db-timeout", str(timeout), "--deadline", "off"]
            + list(args)).start()
        self.addCleanup(server.kill)
        return server

    def sql(self, query):
        return self.postgres.sql(query)

    def tag(self, what):
        return "%s-%d" % (what, time.monotonic_ns())


    def backend(self):
        """The PID of the test's server's one connection (its backend: no
        psql, no other server runs meanwhile)."""
        deadline = time.monotonic() + 10
        while True:
            pids = [int(p) for p, in self.sql(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' "
                "AND pid <> pg_backend_pid() AND application_name <> 'psql'")]
            if len(pids) == 1:
                return pids[0]
            self.assertLess(time.monotonic(), deadline, "backends: %r" % pids)
            time.sleep(0.05)

    def session(self, script):
        """psql running @script against the class's cluster, in the
        background; killed (its transaction rolled back) at the test's end."""
        p = subprocess.Popen([cs.PG_LOCAL, "psql", self.postgres.dir, "-c", script],
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)

        def end():
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=30)
            # Its backend, asleep, would not notice its client gone.
            self.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                     "application_name = 'psql' AND pid <> pg_backend_pid()")
            self.wait_sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
                          [["0"]])
        self.addCleanup(end)
        return p

    def wait_sql(self, query, want, timeout=10):
        """Poll @query until it returns @want (rows)."""
        deadline = time.monotonic() + timeout
        while self.sql(query) != want:
            self.assertLess(time.monotonic(), deadline, "%s: never %r" % (query, want))
            time.sleep(0.02)

    def create(self, server, email):
        r = cs.send_all(server, [("POST", "/users", {"name": "Known", "email": email})])[0]
        self.assertEqual(r.status, 201, r)
        return r.json()

    def metric(self, server, series):
        return server.metric(series) or 0.0

    def wait_for_log(self, server, text, timeout=5):
        """Wait for a line of @server's log holding @text (logs are written
        off the hot path, a moment after the answers)."""
        deadline = time.monotonic() + timeout
        while text not in server.stderr_text(200):
            if time.monotonic() > deadline:
                self.fail("no %r in the log within %d s:\n%s"
                          % (text, timeout, server.stderr_text()))
            time.sleep(0.05)

    def idle_after(self, pid, timeout=10):
        """Wait until backend @pid runs nothing (idle, waiting for its
        client: no statement, no lock wait, no commit): whatever ran for
        the request that failed ended with it."""
        self.wait_sql("SELECT state, wait_event FROM pg_stat_activity WHERE pid = %d" % pid,
                      [["idle", "ClientRead"]], timeout)

    def many(self, server, count, known, tag, clients=8):
        """@count requests (GETs of user @known and POSTs of new users, in
        turn) from @clients clients at once, each waiting for its answer
        before the next; returns [(method, status, seconds)]."""
        results, lock = [], threading.Lock()

        def client(k):
            with server.connect(timeout=20) as c:
                for i in range(k, count, clients):
                    t = time.monotonic()
                    if i % 2:
                        r = c.request("POST", "/users", JSON_HDR,
                                      {"name": "Other", "email": "%s-%d@x" % (tag, i)})
                    else:
                        r = c.request("GET", "/users/%d" % known)
                    with lock:
                        results.append(("POST" if i % 2 else "GET", r.status,
                                        time.monotonic() - t))
        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        self.assertFalse(any(t.is_alive() for t in threads), "a client hung")
        return results

    # -- slow statements ------------------------------------------------------
    def test_a_statement_waiting_on_a_lock_fails_alone(self):
        """A session holds an uncommitted insert of an email; a POST of the
        same email waits on its lock. The server ends that wait itself
        (lock_timeout, set just under --db-timeout on coring's sessions):
        that request answers 503 (its insert did not take effect; 504 if
        its own wait ran out first), while 200 other requests on the same
        connection, sent meanwhile, all succeed; the connection stays up,
        and the backend is left running nothing."""
        server = self.start_server(timeout=5)
        known = self.create(server, self.tag("known") + "@x")
        pid = self.backend()
        self.assertEqual(self.sql("SELECT setting FROM pg_settings WHERE name = 'lock_timeout'"),
                         [["0"]], "the server's own default")
        email = self.tag("locked") + "@x"
        self.session("BEGIN; INSERT INTO users (name, email) VALUES ('Session', '%s'); "
                     "SELECT pg_sleep(30); ROLLBACK;" % email)
        self.wait_sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
                      [["1"]])
        lost0 = self.metric(server, "db_connections_lost_total")
        with server.connect(timeout=20) as c:
            t0 = time.monotonic()
            c.send(cs.build_request("POST", "/users", JSON_HDR, {"name": "Waits", "email": email}))
            self.wait_sql("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %d" % pid,
                          [["Lock"]])
            others = self.many(server, 200, known["id"], self.tag("other"))
            resp = c.read_response("POST")
            took = time.monotonic() - t0
        print("the locked insert: %d in %.2f s; the others: %r" % (
            resp.status, took, sorted({(m, s) for m, s, _ in others})))
        self.assertIn((resp.status, resp.json()), ((503, {"error": "database unavailable"}),
                                                   (504, UNKNOWN)), resp)
        self.assertEqual(sorted({(m, s) for m, s, _ in others}), [("GET", 200), ("POST", 201)],
                         "stderr:\n%s" % server.stderr_text())
        self.assertEqual(len(others), 200)
        self.assertEqual(self.metric(server, "db_connections_lost_total"), lost0,
                         "the connection was dropped")
        self.assertEqual(self.backend(), pid, "the same backend serves")
        self.idle_after(pid)
        server.stop(expect_status=0)

    def test_a_commit_past_the_query_timeout_is_cancelled_on_the_server(self):
        """A deferred trigger sleeps at one insert's commit, where no
        statement_timeout applies: its waiter gives up at --db-timeout
        (504: its Sync reached the server), and the driver sends a cancel
        request for it (PQcancel, on a helper thread), which ends the
        commit with 57014: the insert is rolled back, the backend runs
        nothing any more, the connection stays up and serves the next
        requests."""
        self.sql("CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS $$ "
                 "BEGIN IF NEW.name = 'Slow commit' THEN PERFORM pg_sleep(60); END IF; "
                 "RETURN NULL; END $$")
        self.addCleanup(self.sql, "DROP FUNCTION slow_commit() CASCADE")
        self.sql("CREATE CONSTRAINT TRIGGER slow_commit AFTER INSERT ON users DEFERRABLE "
                 "INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION slow_commit()")
        server = self.start_server(timeout=2)
        known = self.create(server, self.tag("known") + "@x")
        pid = self.backend()
        lost0 = self.metric(server, "db_connections_lost_total")
        cancels0 = self.metric(server, "db_cancel_requests_total")
        email = self.tag("slow") + "@x"
        t0 = time.monotonic()
        resp = cs.send_all(server, [("POST", "/users", {"name": "Slow commit", "email": email})])[0]
        took = time.monotonic() - t0
        print("the slow commit: %d in %.2f s" % (resp.status, took))
        self.assertEqual((resp.status, resp.json()), (504, UNKNOWN), resp)
        self.idle_after(pid, timeout=5)
        self.assertEqual(self.metric(server, "db_cancel_requests_total") - cancels0, 1)
        self.assertEqual(self.sql("SELECT count(*) FROM users WHERE email = '%s'" % email), [["0"]],
                         "the cancelled commit was rolled back")
        others = self.many(server, 40, known["id"], self.tag("after"))
        self.assertEqual(sorted({(m, s) for m, s, _ in others}), [("GET", 200), ("POST", 201)])
        self.assertEqual(self.metric(server, "db_connections_lost_total"), lost0,
                         "the connection was dropped; stderr:\n%s" % server.stderr_text())
        self.assertEqual(self.backend(), pid)
        server.stop(expect_status=0)

    # -- errors at commit ---------------------------------------------------
    def test_a_deferred_constraint_fails_only_its_own_write_at_commit(self):
        """A constraint trigger, deferred to the commit, rejects one name:
        its insert succeeds, then the implicit transaction of its Sync
        group fails at the Sync (23514). That request answers 422; the
        other inserts and reads sent with it answer 201 and 200, the
        connection stays up; coalesced (one batch) or not."""
        self.sql("CREATE FUNCTION reject_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$ "
                 "BEGIN IF NEW.name = 'Rejected at commit' THEN RAISE check_violation USING "
                 "MESSAGE = 'rejected at commit'; END IF; RETURN NULL; END $$")
        self.addCleanup(self.sql, "DROP FUNCTION reject_at_commit() CASCADE")
        self.sql("CREATE CONSTRAINT TRIGGER reject_at_commit AFTER INSERT ON users DEFERRABLE "
                 "INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION reject_at_commit()")
        for coalesce in ("on", "off"):
            with self.subTest(coalesce=coalesce):
                server = self.start_server("--db-coalesce", coalesce)
                known = cs.send_all(server, [("POST", "/users", {"name": "Known", "email":
                                                                   self.tag("known") + "@x"})])[0]
                self.assertEqual(known.status, 201, known)
                lost0 = self.metric(server, "db_connections_lost_total")
                tag = self.tag("commit-" + coalesce)
                requests = []
                for i in range(24):
                    name = "Rejected at commit" if i == 7 else "Fine %d" % i
                    requests.append(("POST", "/users", {"name": name,
                                                        "email": "%s-%d@x" % (tag, i)}))
                    if i % 4 == 0:
                        requests.append(("GET", "/users/%d" % known.json()["id"], None))
                got = cs.send_all(server, requests)
                for (method, _, body), r in zip(requests, got):
                    if method == "GET":
                        self.assertEqual(r.status, 200, r)
                    elif body["name"] == "Rejected at commit":
                        self.assertEqual(r.status, 422, r)
                        self.assertEqual(r.json(), {"error": "invalid user"})
                    else:
                        self.assertEqual(r.status, 201, "%r: %r; stderr:\n%s"
                                         % (body, r, server.stderr_text()))
                        self.assertEqual(r.json()["email"], body["email"])
                rows = self.sql("SELECT email FROM users WHERE email LIKE '%s-%%'" % tag)
                self.assertEqual(sorted(e for e, in rows),
                                 sorted("%s-%d@x" % (tag, i) for i in range(24) if i != 7))
                self.assertEqual(self.metric(server, "db_connections_lost_total"), lost0,
                                 "the connection was dropped")
                print("coalesce %s: sent again: commit %d, batch %d, group %d" % (coalesce, *(
                    self.metric(server, 'db_queries_resent_total{reason="%s"}' % k)
                    for k in ("commit", "batch", "group"))))
                server.stop(expect_status=0)


    # -- coalesced writes ---------------------------------------------------
    def coalesced_round(self, server, bodies, tries=10):
        """POST @bodies (a function of the try's number giving the list)
        all at once until at least one batch went out (db_batches_total),
        at most @tries times; returns (bodies, responses) of that round."""
        for attempt in range(tries):
            batches0 = self.metric(server, "db_batches_total")
            sent = bodies(attempt)
            got = cs.send_all(server, [("POST", "/users", b) for b in sent])
            if self.metric(server, "db_batches_total") > batches0:
                return sent, got
        self.fail("no insert was coalesced in %d tries: the test proved nothing" % tries)

    def test_coalesced_inserts_get_their_rows_when_a_trigger_changes_the_key(self):
        """A trigger stores the emails in lower case: the batch returns
        each row with its email as stored, not as asked, and each request
        still gets the row inserted for it (matched by its place in the
        batch, not by the key's bytes) and answers 201 with it."""
        self.sql("CREATE FUNCTION lower_email() RETURNS trigger LANGUAGE plpgsql AS $$ "
                 "BEGIN NEW.email := lower(NEW.email); RETURN NEW; END $$")
        self.addCleanup(self.sql, "DROP FUNCTION lower_email() CASCADE")
        self.sql("CREATE TRIGGER lower_email BEFORE INSERT ON users FOR EACH ROW "
                 "EXECUTE FUNCTION lower_email()")
        server = self.start_server()
        tag = self.tag("Lower")
        bodies, got = self.coalesced_round(server, lambda n: [
            {"name": "Lower %d" % i, "email": "%s-%d-%d@Example.COM" % (tag, n, i)}
            for i in range(24)])
        for body, r in zip(bodies, got):
            self.assertEqual(r.status, 201, "%r: %r; stderr:\n%s" % (body, r, server.stderr_text()))
            self.assertEqual((r.json()["name"], r.json()["email"]),
                             (body["name"], body["email"].lower()))
        rows = self.sql("SELECT id, name FROM users WHERE email LIKE '%s-%%'" % tag.lower())
        self.assertEqual({int(i): n for i, n in rows if n.startswith("Lower")},
                         {r.json()["id"]: r.json()["name"] for r in got})
        server.stop(expect_status=0)

    def test_a_writing_batch_without_one_row_per_member_is_refused(self):
        """A trigger skips one name's row: a batch holding it returns one
        row fewer than it has members, which cannot be matched. Its
        requests answer 500 (it committed: sending them again would write
        twice), the batch form is refused for the process (logged), and
        the next inserts go out one by one and answer 201."""
        self.sql("CREATE FUNCTION skip_named() RETURNS trigger LANGUAGE plpgsql AS $$ "
                 "BEGIN IF NEW.name = 'Skipped' THEN RETURN NULL; END IF; RETURN NEW; END $$")
        self.addCleanup(self.sql, "DROP FUNCTION skip_named() CASCADE")
        self.sql("CREATE TRIGGER skip_named BEFORE INSERT ON users FOR EACH ROW "
                 "EXECUTE FUNCTION skip_named()")
        server = self.start_server()
        tag = self.tag("skip")
        bodies, got = self.coalesced_round(server, lambda n: [
            {"name": "Skipped" if i == 3 else "Kept", "email": "%s-%d-%d@x" % (tag, n, i)}
            for i in range(16)])
        statuses = [r.status for r in got]
        print("a batch that skipped a row: %r" % statuses)
        self.assertIn(500, statuses, "no batch was refused; stderr:\n%s" % server.stderr_text())
        self.assertLessEqual(set(statuses), {201, 500, 503}, got)
        self.wait_for_log(server, "not one row per member")
        stored = {e for e, in self.sql("SELECT email FROM users WHERE email LIKE '%s-%%'" % tag)}
        for body, r in zip(bodies, got):
            if r.status == 201:
                self.assertIn(body["email"], stored)
            if r.status == 500:
                self.assertEqual(r.json(), {"error": "database error"})
        batches = self.metric(server, "db_batches_total")
        again = cs.send_all(server, [("POST", "/users", {"name": "After", "email": "%s-after-%d@x"
                                                           % (tag, i)}) for i in range(16)])
        self.assertEqual([r.status for r in again], [201] * 16, again)
        self.assertEqual(self.metric(server, "db_batches_total"), batches, "coalesced again")
        server.stop(expect_status=0)

    # -- unknown outcomes -----------------------------------------------------
    def test_a_write_sent_to_a_stalled_server_answers_504_and_a_read_503(self):
        """The connection's backend stopped (SIGSTOP): a POST's insert and
        its Sync reach the server, which may run and commit them (and does,
        once it runs again), but no outcome comes within --db-timeout: 504,
        "outcome unknown", never 503, which says nothing was done. A read
        in the same plight answers 503."""
        server = self.start_server(timeout=2)
        known = self.create(server, self.tag("known") + "@x")
        email = self.tag("stalled") + "@x"
        pid = self.backend()
        unknown0 = self.metric(server, 'db_query_errors_total{kind="unknown"}')
        os.kill(pid, signal.SIGSTOP)
        try:
            t0 = time.monotonic()
            post, get = cs.send_all(server, [
                ("POST", "/users", {"name": "Stalled", "email": email}),
                ("GET", "/users/%d" % known["id"], None)])
            took = time.monotonic() - t0
        finally:
            os.kill(pid, signal.SIGCONT)
        print("stalled backend: POST %d, GET %d, in %.2f s" % (post.status, get.status, took))
        self.assertEqual((post.status, post.json()), (504, UNKNOWN), post)
        self.assertIsNone(post.header("Retry-After"))
        self.assertEqual((get.status, get.json()), (503, {"error": "database unavailable"}), get)
        self.assertLess(took, 2 + 1.5, "the answers came long after --db-timeout")
        self.assertGreater(self.metric(server, 'db_query_errors_total{kind="unknown"}'), unknown0)
        # Once the backend runs again, the insert answered 504 may well be
        # there: that is why 504 and not 503. Never twice.
        deadline = time.monotonic() + 10
        while cs.send_all(server, [("GET", "/users/%d" % known["id"], None)])[0].status != 200:
            self.assertLess(time.monotonic(), deadline, server.stderr_text())
            time.sleep(0.1)
        rows = self.sql("SELECT count(*) FROM users WHERE email = '%s'" % email)
        print("the insert answered 504 is there %s time(s)" % rows[0][0])
        self.assertIn(rows, ([["0"]], [["1"]]))
        server.stop(expect_status=0)

    def test_a_write_cut_by_the_drain_deadline_answers_504(self):
        """The backend stopped (SIGSTOP) with a POST's insert and Sync sent,
        then SIGTERM with a drain deadline shorter than --db-timeout: the
        deadline cancels the request's wait, and the write, which may
        commit once the backend runs again, answers 504 "outcome unknown"
        (not the drain's 503 "shutting down", which says nothing was
        done)."""
        server = self.start_server("--shutdown-timeout", "1", timeout=8)
        self.create(server, self.tag("warm") + "@x")
        email = self.tag("drained") + "@x"
        pid = self.backend()
        os.kill(pid, signal.SIGSTOP)
        try:
            c = server.connect(timeout=20)
            c.send(cs.build_request("POST", "/users", {"Content-Type": "application/json"},
                                    {"name": "Drained", "email": email}))
            time.sleep(0.5)  # the insert and its Sync go out, the backend sits on them
            server.send_signal(signal.SIGTERM)
            t0 = time.monotonic()
            post = c.read_response("POST")
            took = time.monotonic() - t0
            c.close()
        finally:
            os.kill(pid, signal.SIGCONT)
        print("write at the drain deadline: %d %s after %.2f s" % (post.status, post.json(), took))
        self.assertEqual((post.status, post.json()), (504, UNKNOWN), post)
        self.assertLess(took, 8, "answered at --db-timeout, not at the drain deadline")
        self.assertEqual(server.wait(timeout=20), 0, server.stderr_text())

    def test_a_write_whose_backend_is_terminated_after_its_sync_answers_504(self):
        """A session holds an uncommitted insert of an email; a POST of the
        same email waits on it, its insert and Sync sent; the connection's
        backend is then terminated (pg_terminate_backend): the POST never
        learns its outcome and answers 504. The session rolls back."""
        server = self.start_server(timeout=10)
        self.create(server, self.tag("warm") + "@x")
        email = self.tag("terminated") + "@x"
        self.session("BEGIN; INSERT INTO users (name, email) VALUES ('Session', '%s'); "
                     "SELECT pg_sleep(30); ROLLBACK;" % email)
        self.wait_sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'",
                      [["1"]])
        pid = self.backend()
        with server.connect(timeout=20) as c:
            c.send(cs.build_request("POST", "/users", JSON_HDR, {"name": "Waits", "email": email}))
            self.wait_sql("SELECT wait_event_type FROM pg_stat_activity WHERE pid = %d" % pid,
                          [["Lock"]])
            self.assertEqual(self.sql("SELECT pg_terminate_backend(%d)" % pid), [["t"]])
            t0 = time.monotonic()
            resp = c.read_response("POST")
        print("terminated backend: POST %d in %.2f s" % (resp.status, time.monotonic() - t0))
        self.assertEqual((resp.status, resp.json()), (504, UNKNOWN), resp)
        server.stop(expect_status=0)

    # -- the drain deadline ---------------------------------------------------
    def test_the_drain_deadline_outlasts_the_longest_request(self):
        """Not given, --shutdown-timeout is the longest a users request
        may take (two queries: 2 x --db-timeout) plus 1 s, when that is
        more than 10 s: the drain never cuts a request that keeps to its
        timeouts. Given shorter, start-up says so."""
        server = self.start_server(timeout=7)  # 2 x 7 + 1 = 15 s
        server.send_signal(signal.SIGTERM)
        self.assertEqual(server.wait(20), 0, server.stderr_text())
        self.wait_for_log(server, "deadline 15.0 s")
        server = self.start_server("--shutdown-timeout", "4", timeout=3)
        self.wait_for_log(server, "--shutdown-timeout: 4 s is shorter than a request of the apps "
                          "mounted may take (users: 2 x --db-timeout 3 s = 6 s")
        server.stop(expect_status=0)
        server = self.start_server(timeout=2)  # 2 x 2 + 1 = 5 s: the 10 s stays
        self.assertNotIn("is shorter than", server.stderr_text())
        server.send_signal(signal.SIGTERM)
        self.assertEqual(server.wait(20), 0, server.stderr_text())
        self.wait_for_log(server, "deadline 10.0 s")

if __name__ == "__main__":
    cs.main()

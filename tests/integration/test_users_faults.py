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
import time  # noqa: E402

import coring_server as cs  # noqa: E402

JSON_HDR = {"Content-Type": "application/json"}


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
        --db-timeout @timeout (seconds), and @args; killed at the test's end."""
        server = cs.CoringServer(threads=1, apps="users", args=[
            "--db-pool", "1", "--db-timeout", str(timeout)] + list(args)).start()
        self.addCleanup(server.kill)
        return server

    def sql(self, query):
        return self.postgres.sql(query)

    def tag(self, what):
        return "%s-%d" % (what, time.monotonic_ns())

    def send_all(self, server, requests, timeout=20):
        """Send each of @requests, (method, path, body), on its own
        connection, all before any answer is read, so that the server
        reads them in few loop turns; returns the responses in order."""
        cs.raise_nofile_limit()
        conns = [server.connect(timeout=timeout) for _ in requests]
        try:
            for c, (method, path, body) in zip(conns, requests):
                c.send(cs.build_request(method, path, JSON_HDR if body is not None else {}, body))
            return [c.read_response(method) for c, (method, _, _) in zip(conns, requests)]
        finally:
            for c in conns:
                c.close()

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
                known = self.send_all(server, [("POST", "/users", {"name": "Known", "email":
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
                got = self.send_all(server, requests)
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
            got = self.send_all(server, [("POST", "/users", b) for b in sent])
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
        again = self.send_all(server, [("POST", "/users", {"name": "After", "email": "%s-after-%d@x"
                                                           % (tag, i)}) for i in range(16)])
        self.assertEqual([r.status for r in again], [201] * 16, again)
        self.assertEqual(self.metric(server, "db_batches_total"), batches, "coalesced again")
        server.stop(expect_status=0)

if __name__ == "__main__":
    cs.main()

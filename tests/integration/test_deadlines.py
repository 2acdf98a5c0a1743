#!/usr/bin/python3
"""Per-route deadlines (docs/deadlines.md, issue 43 item 2), on the real
binary with a throw-away PostgreSQL and the fake ViaCEP:

- a locked row: the test's own transaction holds an uncommitted row with an
  email; POST /users with that email waits on it (the unique index) until
  the users deadline, is answered 504 {"error":"deadline exceeded"} at the
  deadline (+-100 ms), the connection stays usable, and pg_stat_activity
  then shows no query of coring's still running (PQcancel);
- a stalled upstream: the fake ViaCEP delays; a cep lookup is answered 504
  at its deadline and http_client_transfers_open is back to 0;
- the metric http_deadline_exceeded_total counts both, per route.
- a full inference queue: embed with one inference thread busy with a
  long batch; requests queued behind it are answered 504 at their
  deadline, their jobs leave the queue (embed_jobs_dropped_total,
  embed_queue_texts back to 0) and never run (embed_texts_total counts the
  long batch's texts only).
The drain's deadline goes the same path (test_cep.py's
test_sigterm_during_a_miss_past_the_deadline_does_not_hang, and
test_lifecycle.py's drain tests).
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import concurrent.futures  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import coring_server as cs  # noqa: E402
import test_cep  # noqa: E402

DEADLINE_S = 1.0
ORIGIN = "http://app.example"
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SLACK_S = 0.1  # the acceptance's +-100 ms


class DeadlineTest(test_cep.FakeUpstreamTestCase):
    @classmethod
    def setUpClass(cls):
        test_cep.start_postgres_and_fake(cls, "coring-deadline-")
        # The components' own timeouts well past the deadline: what answers
        # at 1 s is the deadline.
        # --access-log and CORS: a cut answer keeps what the request set
        # before its handler (the peer for the access line, CORS lines,
        # traceresponse).
        cls.server = cs.CoringServer(threads=1, apps="users,cep", args=[
            "--deadline", "users=%gs,cep=%gs" % (DEADLINE_S, DEADLINE_S),
            "--db-timeout", "5", "--cep-timeout-ms", "5000", "--access-log",
            "--cors-origins", ORIGIN]).start()
        cls.addClassCleanup(cls.server.kill)

    def metric(self, series):
        v = self.server.metric(series)
        return 0.0 if v is None else float(v)

    def wait_for(self, what, check, timeout=2.0):
        end = time.monotonic() + timeout
        while True:
            value = check()
            if value or time.monotonic() > end:
                return value
            time.sleep(0.05)

    def assertDeadlineAnswer(self, resp, elapsed, what):
        self.assertJsonError(resp, 504, what)
        self.assertEqual(resp.json()["error"], "deadline exceeded", what)
        self.assertGreater(elapsed, DEADLINE_S - SLACK_S, "%s: answered %.3f s, before the deadline"
                           % (what, elapsed))
        self.assertLess(elapsed, DEADLINE_S + SLACK_S, "%s: answered %.3f s, past the deadline"
                        % (what, elapsed))

    def coring_queries(self):
        """Queries of coring's (not this test's psql) running now."""
        return self.postgres.sql(
            "SELECT pid, state, query FROM pg_stat_activity WHERE state = 'active' "
            "AND pid <> pg_backend_pid() AND query ILIKE '%users%' "
            "AND backend_type = 'client backend' AND application_name NOT LIKE 'psql%'")

    def test_locked_row(self):
        email = "locked-%d@example.com" % os.getpid()
        # The test's transaction: an uncommitted row with that email, which
        # coring's insert of the same email waits on (unique index).
        holder = subprocess.Popen(
            [cs.PG_LOCAL, "psql", self.postgres.dir, "-qAt", "-v", "ON_ERROR_STOP=1"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.addCleanup(holder.kill)
        holder.stdin.write("BEGIN;\nINSERT INTO users (name, email) VALUES ('holder', '%s');\n"
                           "SELECT 'locked';\n" % email)
        holder.stdin.flush()
        self.assertEqual(holder.stdout.readline().strip(), "locked")
        before = self.metric('http_deadline_exceeded_total{route="/users",method="POST"}')
        with self.server.connect(timeout=10) as c:
            t0 = time.monotonic()
            resp = c.request("POST", "/users", {"Content-Type": "application/json"},
                             json.dumps({"name": "Ana", "email": email}).encode())
            elapsed = time.monotonic() - t0
            self.assertDeadlineAnswer(resp, elapsed, "POST /users on a locked row")
            # The request was read whole and answered whole: the connection
            # goes on.
            self.assertNotIn("close", resp.tokens("Connection"), resp)
            again = c.request("GET", "/users?limit=1")
            self.assertEqual(again.status, 200, again)
        # PQcancel is asynchronous: poll briefly.
        left = self.wait_for("no query", lambda: not self.coring_queries() or None, 2.0)
        self.assertTrue(left, "coring's query still runs after its deadline: %r"
                        % self.coring_queries())
        holder.stdin.write("ROLLBACK;\n")
        holder.stdin.close()
        holder.wait(10)
        self.assertEqual(
            self.metric('http_deadline_exceeded_total{route="/users",method="POST"}'),
            before + 1)

    def test_stalled_upstream(self):
        self.fake.behave(delay_ms=3000)
        series = 'http_deadline_exceeded_total{route="/api/v1/cep/{cep}",method="GET"}'
        before = self.metric(series)
        with self.server.connect(timeout=10) as c:
            t0 = time.monotonic()
            resp = c.request("GET", "/api/v1/cep/20031-050", {
                "Origin": ORIGIN, "traceparent": "00-%s-00f067aa0ba902b7-01" % TRACE})
            elapsed = time.monotonic() - t0
        self.assertDeadlineAnswer(resp, elapsed, "GET /api/v1/cep on a stalled upstream")
        self.assertEqual(resp.header("Access-Control-Allow-Origin"), ORIGIN,
                         "a browser cannot read the cut answer: %r" % resp)
        self.assertTrue((resp.header("traceresponse") or "").startswith("00-%s-" % TRACE),
                        "the cut answer lost its traceresponse: %r" % resp)
        self.assertIsNone(resp.header("Retry-After"), "the handler's header outlived its answer")
        self.assertTrue(self.wait_for("transfers", lambda: self.metric(
            "http_client_transfers_open") == 0 or None, 1.0),
            "a transfer is still open after the deadline")
        self.assertEqual(self.metric(series), before + 1)

    def test_a_waiter_is_not_failed_by_its_leaders_deadline(self):
        """Two lookups of one CEP share one upstream call; the first's
        deadline cuts it. The second, which joined later with time left, is
        not answered the first's failure: it asks the upstream again (now
        quick) and gets the address."""
        self.fake.behave(delay_ms=1300)
        results = {}

        def lookup(name):
            with self.server.connect(timeout=10) as c:
                t0 = time.monotonic()
                resp = c.request("GET", "/api/v1/cep/01001-000")
                results[name] = (resp, time.monotonic() - t0)

        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(lookup, "leader")
            time.sleep(0.5)
            self.fake.behave(delay_ms=0)  # read when a call starts: the leader's stays slow
            time.sleep(0.1)
            second = pool.submit(lookup, "waiter")
            first.result()
            second.result()
        resp, elapsed = results["leader"]
        self.assertDeadlineAnswer(resp, elapsed, "the leader")
        resp, elapsed = results["waiter"]
        self.assertEqual(resp.status, 200, "the waiter got its leader's failure: %r" % resp)
        self.assertLess(elapsed, DEADLINE_S, "the waiter ran to its own deadline")


class EmbedDeadlineTest(cs.CoringTestCase):
    """A full inference queue: one inference thread, a long batch ahead."""

    # Of ~500 tokens each, one batch: seconds on one thread, even alone on
    # a fast machine (8 took under a second there). ThreadSanitizer's build
    # runs 32 in about a minute: 4 there, still far past the deadlines.
    LONG_TEXTS = 32

    def setUp(self):
        if cs.sanitizer() == "tsan":
            self.LONG_TEXTS = 4
        tmp = tempfile.mkdtemp(prefix="coring-deadline-embed-")
        self.addCleanup(shutil.rmtree, tmp, True)
        vocab = os.path.join(tmp, "vocab.txt")
        with open(vocab, "w") as f:
            f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"])
                    + "\n")
        model = os.path.join(tmp, "model")
        # MiniLM's shapes, 512 positions.
        subprocess.run(["/usr/bin/python3", test_cep.ROOT + "/apps/embed/make_model.py", "--out",
                        model, "--vocab", vocab, "--max-positions", "512",
                        "--max-seq-length", "512"],
                       check=True, timeout=120, stdout=subprocess.DEVNULL)
        self.server = cs.CoringServer(threads=1, apps="embed", args=[
            "--embed-model", model, "--embed-threads", "1", "--embed-max-batch", str(self.LONG_TEXTS),
            "--deadline", "%gs" % DEADLINE_S]).start()
        self.addCleanup(self.server.kill)

    def metric(self, series):
        v = self.server.metric(series)
        return 0.0 if v is None else float(v)

    def embed(self, texts):
        with self.server.connect(timeout=30) as c:
            t0 = time.monotonic()
            resp = c.request("POST", "/embed", {"Content-Type": "application/json"},
                             json.dumps({"texts": texts}).encode())
            return resp, time.monotonic() - t0

    def test_full_queue(self):
        long_text = " ".join(["hello world"] * 250)
        t0 = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            first = pool.submit(self.embed, [long_text] * self.LONG_TEXTS)
            time.sleep(0.3)  # the long batch is taken by the one inference thread
            queued = [pool.submit(self.embed, ["hello"]), pool.submit(self.embed, ["world"])]
            for f in queued:
                resp, elapsed = f.result(30)
                self.assertJsonError(resp, 504, "a queued embed")
                self.assertEqual(resp.json()["error"], "deadline exceeded")
                self.assertLess(elapsed, DEADLINE_S + SLACK_S, "queued embed answered %.3f s"
                                % elapsed)
                self.assertGreater(elapsed, DEADLINE_S - SLACK_S)
            resp, elapsed = first.result(30)
        # The long batch itself ran past its deadline too: cut, its result
        # dropped when it comes.
        self.assertJsonError(resp, 504, "the long batch")
        self.assertEqual(self.metric("embed_jobs_dropped_total"), 2)
        self.assertEqual(self.metric("embed_queue_texts"), 0)
        # The batch that ran ends; nothing of the queued requests runs after it.
        end = time.monotonic() + 60
        while self.metric("embed_texts_total") < self.LONG_TEXTS and time.monotonic() < end:
            time.sleep(0.2)
        print("\nthe long batch ran %.1f s (the queued requests' deadlines: %.1f s)"
              % (time.monotonic() - t0, 0.3 + DEADLINE_S))
        time.sleep(0.5)
        self.assertEqual(self.metric("embed_texts_total"), self.LONG_TEXTS,
                         "a queued job ran after its deadline")
        self.server.stop(expect_status=0)


if __name__ == "__main__":
    cs.main()

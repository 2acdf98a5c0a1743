#!/usr/bin/python3
"""Integration tests of W3C Trace Context (issue 43 item 4, docs/tracing.md).

A throw-away PostgreSQL and the fake ViaCEP (coring-fake-viacep, which
records the trace fields of its last lookup: GET /_fake/last-request) run
for the class; coring serves users and cep with --log-format json and
--access-log. A request with a sampled traceparent is followed: its trace
id comes back in traceresponse with coring's new span id, is in its access
line (with that span id) and in a line the app logs, reaches ViaCEP in a
traceparent with another new span id (tracestate as sent), and reaches
PostgreSQL as a sqlcommenter comment on the request's query, found in
pg_stat_activity. An invalid traceparent starts a new trace (and its
tracestate is not passed on); with --trace-context off there is no
traceresponse and no trace id in the log.
"""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402
import test_cep  # noqa: E402

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
STATE = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"
HEX32 = re.compile(r"^[0-9a-f]{32}$")
TRACERESPONSE = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")


class TraceTest(test_cep.FakeUpstreamTestCase):
    @classmethod
    def setUpClass(cls):
        test_cep.start_postgres_and_fake(cls, "coring-trace-")
        cls.ceps = [cep for cep in cls.records if cls.records[cep].get("logradouro")][:20]
        cls.server = cs.CoringServer(threads=1, apps="users,cep", args=[
            "--trace-sql", "on", "--log-format", "json", "--access-log", "--db-timeout", "3"]).start()
        cls.addClassCleanup(cls.server.kill)

    def next_cep(self):
        return self.ceps.pop()

    def lines(self, server=None):
        with (server or self.server)._lock:
            return [json.loads(line) for line in (server or self.server)._lines
                    if line.startswith("{")]

    def access_line(self, target, server=None):
        """The access line of the request for @target (waits for the logger)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            found = [o for o in self.lines(server) if o.get("target") == target]
            if found:
                return found[-1]
            time.sleep(0.02)
        self.fail("no access line for %s:\n%s" % (target, (server or self.server).stderr_text()))

    def get(self, path, headers=None, server=None):
        with (server or self.server).connect(timeout=15) as c:
            return c.request("GET", path, headers=headers or {})

    def traceresponse(self, resp):
        value = resp.header("traceresponse")
        self.assertIsNotNone(value, "no traceresponse: %r" % resp)
        m = TRACERESPONSE.match(value)
        self.assertIsNotNone(m, value)
        return m.group(1), m.group(2), m.group(3)

    # -- the tests --------------------------------------------------------
    def test_a_sampled_trace_reaches_the_log_viacep_and_postgres(self):
        cep = self.next_cep()
        target = "/api/v1/cep/" + cep
        resp = self.get(target, {"traceparent": "00-%s-%s-01" % (TRACE, PARENT),
                                 "tracestate": STATE, "X-Request-Id": "trace-req-1"})
        self.assertEqual(resp.status, 200, resp)
        trace, span, flags = self.traceresponse(resp)
        self.assertEqual((trace, flags), (TRACE, "01"))
        self.assertNotEqual(span, PARENT, "coring's span is new")
        self.assertEqual(resp.header("X-Request-Id"), "trace-req-1", "the request id stays")

        line = self.access_line(target)
        print("\naccess line: %s" % json.dumps(line))
        self.assertEqual((line.get("trace_id"), line.get("span_id")), (TRACE, span), line)
        self.assertEqual(line.get("request_id"), "trace-req-1")

        last = self.fake.call("GET", "/_fake/last-request").json()
        print("ViaCEP received: %s" % json.dumps(last))
        m = TRACERESPONSE.match(last["traceparent"] or "")
        self.assertIsNotNone(m, last)
        self.assertEqual((m.group(1), m.group(3)), (TRACE, "01"), last)
        self.assertNotIn(m.group(2), (PARENT, span), "the upstream call has a span of its own")
        self.assertEqual(last["tracestate"], STATE)

        # The cache lookup and the store of this CEP ran with the comment.
        rows = self.postgres.sql(
            "SELECT query FROM pg_stat_activity WHERE query LIKE '%%traceparent=''00-%s-%s-01''%%' "
            "AND query NOT LIKE '%%pg_stat_activity%%'" % (TRACE, span))
        print("pg_stat_activity: %s" % rows)
        self.assertTrue(rows, "no query of the trace in pg_stat_activity")
        self.assertIn("cep_addresses", rows[0][0])

    def test_a_users_query_carries_the_trace_and_unsampled_ones_do_not(self):
        resp = self.get("/users/1", {"traceparent": "00-%s-%s-01" % (TRACE, PARENT)})
        self.assertIn(resp.status, (200, 404), resp)
        _, span, _ = self.traceresponse(resp)
        rows = self.postgres.sql(
            "SELECT query FROM pg_stat_activity WHERE query LIKE '%%%s-%s%%' "
            "AND query NOT LIKE '%%pg_stat_activity%%'" % (TRACE, span))
        self.assertTrue(rows, "no query of the trace in pg_stat_activity")
        self.assertIn("users", rows[0][0])

        other = "a" * 32
        resp = self.get("/users/1", {"traceparent": "00-%s-%s-00" % (other, PARENT)})
        self.assertEqual(self.traceresponse(resp)[0], other)
        rows = self.postgres.sql("SELECT query FROM pg_stat_activity WHERE query LIKE '%%%s%%' "
                                 "AND query NOT LIKE '%%pg_stat_activity%%'" % other)
        self.assertEqual(rows, [], "an unsampled trace's query carries a comment")

    def test_an_app_line_carries_the_trace(self):
        self.fake.behave(status=500)
        cep = self.next_cep()
        resp = self.get("/api/v1/cep/" + cep, {"traceparent": "00-%s-%s-01" % (TRACE, PARENT)})
        self.assertGreaterEqual(resp.status, 500, resp)
        _, span, _ = self.traceresponse(resp)
        deadline = time.monotonic() + 5
        warn = None
        while time.monotonic() < deadline and not warn:
            warn = next((o for o in self.lines() if o.get("level") == "warn" and
                         o.get("msg", "").startswith("cep: upstream") and
                         o.get("span_id") == span), None)
            time.sleep(0.02)
        self.assertIsNotNone(warn, self.server.stderr_text())
        self.assertEqual(warn.get("trace_id"), TRACE, warn)

    def test_an_invalid_traceparent_starts_a_new_trace(self):
        for i, bad in enumerate(("00-%s-%s-01" % (TRACE.upper(), PARENT),
                                 "00-%s-0000000000000000-01" % TRACE,
                                 "ff-%s-%s-01" % (TRACE, PARENT),
                                 "00-%s-%s-01-extra" % (TRACE, PARENT))):
            with self.subTest(bad=bad):
                self.fake.reset()
                cep = self.next_cep()
                target = "/api/v1/cep/" + cep
                resp = self.get(target, {"traceparent": bad, "tracestate": STATE})
                self.assertEqual(resp.status, 200, resp)
                trace, span, flags = self.traceresponse(resp)
                self.assertNotEqual(trace, TRACE)
                self.assertRegex(trace, HEX32)
                self.assertNotEqual(trace, "0" * 32)
                self.assertEqual(flags, "00")
                line = self.access_line(target)
                self.assertEqual((line.get("trace_id"), line.get("span_id")), (trace, span))
                last = self.fake.call("GET", "/_fake/last-request").json()
                self.assertTrue((last["traceparent"] or "").startswith("00-%s-" % trace), last)
                self.assertIsNone(last["tracestate"], "tracestate passed on without a valid traceparent")

    def test_no_traceparent_starts_a_trace_with_new_ids_each_time(self):
        seen = set()
        for i in range(3):
            trace, span, flags = self.traceresponse(self.get("/users/1"))
            self.assertEqual(flags, "00")
            seen.add(trace)
            seen.add(span)
        self.assertEqual(len(seen), 6)

    def test_trace_sql_off_by_default_sends_no_comment(self):
        """Without --trace-sql on, a client's sampled flag leaves the
        database path as it is: the prepared statement, no comment."""
        other = "b" * 32
        env = dict(os.environ, DATABASE_URL=self.postgres.url())
        with cs.CoringServer(threads=1, apps="users", args=["--db-timeout", "3"],
                             popen={"env": env}) as server:
            resp = self.get("/users/1", {"traceparent": "00-%s-%s-01" % (other, PARENT)}, server)
            self.assertIn(resp.status, (200, 404), resp)
            self.assertEqual(self.traceresponse(resp)[0], other)
            rows = self.postgres.sql("SELECT query FROM pg_stat_activity WHERE query LIKE "
                                     "'%%%s%%' AND query NOT LIKE '%%pg_stat_activity%%'" % other)
            self.assertEqual(rows, [], "--trace-sql off, yet the query carries the trace")

    def test_off_no_traceresponse_and_no_trace_in_the_log(self):
        with cs.CoringServer(threads=1, apps="hello",
                             args=["--log-format", "json", "--access-log",
                                   "--trace-context", "off"]) as server:
            resp = self.get("/?off", {"traceparent": "00-%s-%s-01" % (TRACE, PARENT)}, server)
            self.assertEqual(resp.status, 200)
            self.assertIsNone(resp.header("traceresponse"), resp)
            line = self.access_line("/?off", server)
            self.assertNotIn("trace_id", line)
            self.assertNotIn("span_id", line)


if __name__ == "__main__":
    cs.main()

#!/usr/bin/python3
"""GET /livez and GET /readyz (apps/ops/health.c, docs/health.md).

Covered: /livez answers 200 whatever --apps says; /readyz answers 200 with
every check ok, 503 naming the database once the test stops PostgreSQL
(db/pg-local) and 200 again once it is back (coring reconnects), 200
with embed "not configured" without --embed-model and "ok" with a tiny
model (apps/embed/make_model.py), and 503 during a drain: a request started
before SIGTERM on an open connection gets 503 "draining" while another
request holds the drain; with --drain-grace, 503 on new connections at
once while they are still served, exit 0 after the grace, and a second
SIGTERM during it exits 1 at once.
"""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAKE_MODEL = os.path.join(ROOT, "apps", "embed", "make_model.py")
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]
H = b"Host: 127.0.0.1\r\n"


class HealthTestBase(cs.CoringTestCase):
    def start(self, apps, threads=1, args=()):
        srv = cs.CoringServer(threads=threads, apps=apps, args=list(args))
        srv.start()
        self.addCleanup(srv.kill)
        return srv

    def get(self, srv, path):
        with srv.connect() as c:
            return c.request("GET", path)

    def assertReadiness(self, resp, status, what):
        ctx = " (%s) %r" % (what, resp)
        self.assertEqual(resp.status, status, "status" + ctx)
        self.assertCommonHeaders(resp, what)
        self.assertEqual(resp.header("Cache-Control"), "no-store", "Cache-Control" + ctx)
        doc = resp.json()
        self.assertEqual(doc.get("status"), "ready" if status == 200 else "not ready", ctx)
        self.assertIsInstance(doc.get("checks"), dict, ctx)
        if status == 200:
            self.assertNotIn("error", doc, ctx)
            for name, value in doc["checks"].items():
                # "ok", or a note on a check that holds nothing back
                # (embed without --embed-model: "not configured: ...").
                self.assertTrue(value == "ok" or value.startswith("not configured"),
                                "check %s%s" % (name, ctx))
        else:
            self.assertJsonError(resp, 503, what)
        return doc


class LivezTest(HealthTestBase):
    def test_livez_whatever_apps(self):
        for apps in ("hello", "todo", "hello,todo"):
            srv = self.start(apps)
            resp = self.get(srv, "/livez")
            self.assertEqual(resp.status, 200, "--apps %s: %r" % (apps, resp))
            self.assertCommonHeaders(resp, "livez")
            self.assertEqual(resp.json(), {"status": "alive"})
            self.assertEqual(self.get(srv, "/readyz").status, 200, "--apps %s readyz" % apps)
            srv.stop(expect_status=0)

    def test_todo_health_keeps_its_meaning(self):
        srv = self.start("todo")
        resp = self.get(srv, "/health")
        self.assertEqual((resp.status, resp.body), (200, b"OK"))
        srv.stop(expect_status=0)

    def test_readyz_hello_only(self):
        srv = self.start("hello", threads=2)
        doc = self.assertReadiness(self.get(srv, "/readyz"), 200, "hello only")
        self.assertEqual(doc["checks"], {"server": "ok"})
        with srv.connect() as c:
            resp = c.request("HEAD", "/readyz")
            self.assertEqual(resp.status, 200)
            self.assertEqual(resp.body, b"")
        srv.stop(expect_status=0)


class DrainTest(HealthTestBase):
    def test_readyz_is_503_once_a_drain_begins(self):
        srv = self.start("hello,todo", args=["--shutdown-timeout", "10"])
        # A: a POST whose body is half sent holds the drain.
        holder = srv.connect(nodelay=True)
        self.addCleanup(holder.close)
        body = b'{"title":"held"}'
        holder.send(b"POST /todos HTTP/1.1\r\n" + H + b"Content-Type: application/json\r\nContent-Length: "
                    + str(len(body)).encode() + b"\r\n\r\n" + body[:5])
        # B: a keep-alive connection that was ready, and whose next request
        # has begun (its header section is half sent) when SIGTERM comes.
        probe = srv.connect(nodelay=True)
        self.addCleanup(probe.close)
        self.assertReadiness(probe.request("GET", "/readyz"), 200, "before SIGTERM")
        probe.send(b"GET /readyz HTTP/1.1\r\n" + H)
        time.sleep(0.3)
        srv.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and cs.can_connect(srv.port, timeout=0.5):
            time.sleep(0.05)
        self.assertIsNone(srv.proc.poll(), "exited with requests in flight; stderr:\n" + srv.stderr_text())
        t0 = time.monotonic()
        probe.send(b"\r\n")
        resp = probe.read_response("GET")
        print("readyz during the drain answered in %.1f ms" % ((time.monotonic() - t0) * 1e3))
        doc = self.assertReadiness(resp, 503, "during the drain")
        self.assertTrue(doc["checks"]["server"].startswith("draining"), doc)
        self.assertIn("close", resp.tokens("Connection"), resp)
        holder.send(body[5:])
        self.assertEqual(holder.read_response("POST").status, 201)
        status = srv.wait(5)
        self.assertEqual(status, 0, "exit status after the drain; stderr:\n" + srv.stderr_text())

    def test_drain_grace_not_ready_but_serving(self):
        """--drain-grace 1.5: after SIGTERM /readyz answers 503 at once on new
        connections, while new connections and a keep-alive one are still
        served; the process exits 0, and not before the grace is over."""
        grace = 1.5
        srv = self.start("hello,todo", threads=2, args=["--drain-grace", str(grace), "--shutdown-timeout", "5"])
        keep = srv.connect(nodelay=True)
        self.addCleanup(keep.close)
        self.assertEqual(keep.request("GET", "/").status, 200)
        self.assertReadiness(self.get(srv, "/readyz"), 200, "before SIGTERM")
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        # /readyz on a new connection each time, until 503.
        resp = self.get(srv, "/readyz")
        while resp.status == 200 and time.monotonic() - t0 < 1.0:
            time.sleep(0.01)
            resp = self.get(srv, "/readyz")
        took = time.monotonic() - t0
        print("/readyz 503 on a new connection %.1f ms after SIGTERM" % (took * 1e3))
        doc = self.assertReadiness(resp, 503, "during the drain grace")
        self.assertTrue(doc["checks"]["server"].startswith("draining: shutdown began"), doc)
        self.assertLess(took, 0.3, "/readyz not 503 within 0.3 s of SIGTERM")
        # During the grace: new connections and the keep-alive one are served as usual.
        served = 0
        while time.monotonic() - t0 < grace - 0.3:
            r = self.get(srv, "/")
            self.assertEqual(r.status, 200, "GET / on a new connection %.2f s into the grace: %r"
                             % (time.monotonic() - t0, r))
            r = keep.request("GET", "/")
            self.assertEqual(r.status, 200, r)
            self.assertNotIn("close", r.tokens("Connection"), r)
            served += 1
            time.sleep(0.05)
        print("served %d new connections during the grace" % served)
        self.assertGreater(served, 0)
        self.assertIsNone(srv.proc.poll(), "exited during the grace; stderr:\n" + srv.stderr_text())
        status = srv.wait(8)
        exited = time.monotonic() - t0
        print("exited %.2f s after SIGTERM (grace %.1f s)" % (exited, grace))
        self.assertEqual(status, 0, "exit status after the grace; stderr:\n" + srv.stderr_text())
        self.assertGreaterEqual(exited, grace - 0.1, "exited before the grace was over")
        text = srv.stderr_text(last=200)
        self.assertIn("received SIGTERM: not ready; accepting for the drain grace of 1.5 s, "
                      "then draining (deadline 5.0 s)", text)
        self.assertIn("drain grace over: draining", text)

    def test_second_signal_during_the_grace_exits_at_once(self):
        srv = self.start("hello", args=["--drain-grace", "30"])
        srv.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and self.get(srv, "/readyz").status == 200:
            time.sleep(0.01)
        t0 = time.monotonic()
        srv.send_signal(signal.SIGTERM)
        status = srv.wait(5)
        print("exited %.2f s after the second SIGTERM" % (time.monotonic() - t0))
        self.assertEqual(status, 1, "exit status after a second SIGTERM; stderr:\n" + srv.stderr_text())
        self.assertIn("second SIGTERM during the drain grace: exiting now", srv.stderr_text())


class EmbedReadinessTest(HealthTestBase):
    def test_no_model_then_model(self):
        srv = self.start("hello,embed")
        # Without --embed-model embed is not configured: it does not hold
        # readiness (the default --apps mounts it), and the check says so.
        doc = self.assertReadiness(self.get(srv, "/readyz"), 200, "embed without a model")
        self.assertIn("not configured", doc["checks"]["embed"])
        srv.stop(expect_status=0)

        tmp = self.tmpdir()
        vocab = os.path.join(tmp, "vocab.txt")
        with open(vocab, "w") as f:
            f.write("\n".join(VOCAB) + "\n")
        model = os.path.join(tmp, "model")
        t0 = time.monotonic()
        subprocess.run(["/usr/bin/python3", MAKE_MODEL, "--out", model, "--vocab", vocab, "--layers", "1",
                        "--hidden", "8", "--heads", "2", "--intermediate", "16", "--max-positions", "32",
                        "--max-seq-length", "32"], check=True, timeout=120, stdout=subprocess.DEVNULL)
        print("tiny model made in %.2f s" % (time.monotonic() - t0))
        srv = self.start("hello,embed", args=["--embed-model", model, "--embed-threads", "1"])
        doc = self.assertReadiness(self.get(srv, "/readyz"), 200, "embed with a model")
        self.assertEqual(doc["checks"], {"server": "ok", "embed": "ok"})
        srv.stop(expect_status=0)

    def tmpdir(self):
        import shutil
        import tempfile
        d = tempfile.mkdtemp(prefix="coring-health-")
        self.addCleanup(shutil.rmtree, d, True)
        return d


class DatabaseReadinessTest(HealthTestBase):
    postgres = None

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-health-")
        os.environ["DATABASE_URL"] = cls.postgres.url()

    def wait_status(self, srv, status, seconds):
        deadline = time.monotonic() + seconds
        t0 = time.monotonic()
        while True:
            resp = self.get(srv, "/readyz")
            if resp.status == status or time.monotonic() > deadline:
                print("readyz %d after %.2f s" % (resp.status, time.monotonic() - t0))
                return resp
            time.sleep(0.05)

    def test_readyz_follows_postgres(self):
        srv = self.start("hello,users,cep", threads=2, args=["--cep-upstream", "off"])
        doc = self.assertReadiness(self.get(srv, "/readyz"), 200, "PostgreSQL up")
        self.assertEqual(doc["checks"], {"server": "ok", "database": "ok"})

        self.postgres.run("stop", "fast")
        resp = self.wait_status(srv, 503, 5)
        doc = self.assertReadiness(resp, 503, "PostgreSQL stopped")
        self.assertTrue(doc["checks"]["database"].startswith("unreachable"), doc)
        self.assertTrue(doc["error"].startswith("database: unreachable"), doc)
        # Every thread's answer says so, not only the one that noticed first.
        for _ in range(8):
            self.assertEqual(self.get(srv, "/readyz").status, 503)
        with srv.connect() as c:
            self.assertEqual(c.request("GET", "/users").status, 503, "GET /users while PostgreSQL is down")

        self.postgres.run("start", "throwaway")
        resp = self.wait_status(srv, 200, 20)
        self.assertReadiness(resp, 200, "PostgreSQL back")
        for _ in range(8):
            self.assertEqual(self.get(srv, "/readyz").status, 200)
        with srv.connect() as c:
            self.assertEqual(c.request("GET", "/users").status, 200, "GET /users once PostgreSQL is back")
        srv.stop(expect_status=0)


if __name__ == "__main__":
    cs.main()

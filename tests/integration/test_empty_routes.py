#!/usr/bin/python3
"""Every route of every app on an empty server, on 1 and on 2 threads.

Empty stores and first requests take paths that load tests never do (a
list of nothing gathered from every shard: qsort(NULL, 0, ...) was one).
Run under `tests/run --sanitize`, which stops the server on the first
ASan or UBSan report, this catches such bugs: each server must exit 0 on
SIGTERM, and must still answer afterwards.

hello, todo and embed always run (embed on a one-layer model with a
ten-token vocabulary, made by apps/embed/make_model.py in a temporary
folder, and once without a model). users and cep run against a throw-away
PostgreSQL (db/pg-local), cep with --cep-upstream off; without a
PostgreSQL server to start they are skipped, and the test says so.
"""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import subprocess  # noqa: E402

import coring_server as cs  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAKE_MODEL = os.path.join(ROOT, "apps", "embed", "make_model.py")
JSON_HDR = {"Content-Type": "application/json"}
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world", "##s", "a", "##a"]

# (method, path, body or None, statuses allowed). Nothing here creates
# anything before the reads, so every read sees an empty store.
HELLO = [("GET", "/", None, {200}), ("HEAD", "/", None, {200}), ("GET", "/plaintext", None, {200}),
         ("GET", "/json", None, {200}), ("HEAD", "/json", None, {200})]
TODO = [("GET", "/health", None, {200}), ("GET", "/todos", None, {200}), ("HEAD", "/todos", None, {200}),
        ("GET", "/todos?x=1", None, {200}), ("GET", "/todos/1", None, {404}), ("GET", "/todos/0", None, {404}),
        ("GET", "/todos/2", None, {404}), ("PATCH", "/todos/1", {"title": "x"}, {404}),
        ("PATCH", "/todos/2", {"completed": True}, {404}), ("DELETE", "/todos/1", None, {404}),
        ("DELETE", "/todos/2", None, {404}), ("POST", "/todos", {}, {422}), ("POST", "/todos", b"{", {400}),
        ("GET", "/todos", None, {200}),
        # Now one todo, then none again.
        ("POST", "/todos", {"title": "only"}, {201}), ("GET", "/todos", None, {200}),
        ("DELETE", "/todos/1", None, {204, 404}), ("DELETE", "/todos/2", None, {204, 404}),
        ("GET", "/todos", None, {200})]
USERS = [("GET", "/users", None, {200}), ("GET", "/users?limit=1&after_id=0", None, {200}),
         ("GET", "/users/1", None, {404}), ("GET", "/users/9223372036854775807", None, {404}),
         ("POST", "/users", {}, {422}), ("POST", "/users", b"{", {400}),
         ("POST", "/users", {"name": "First", "email": "first@example.com"}, {201}),
         ("GET", "/users", None, {200})]
CEP = [("GET", "/api/v1/cep/01001000", None, {404}), ("GET", "/api/v1/cep/01001-000", None, {404}),
       ("GET", "/api/v1/cep/x", None, {400})]
EMBED = [("POST", "/embed", {"text": "hello"}, {200}), ("POST", "/embed", {"texts": ["a", "worlds"]}, {200}),
         ("POST", "/v1/embeddings", {"input": "hello"}, {200}), ("POST", "/embed", {}, {422}),
         ("POST", "/v1/embeddings", {}, {422})]
EMBED_NO_MODEL = [("POST", "/embed", {"text": "hello"}, {503}),
                  ("POST", "/v1/embeddings", {"input": "hello"}, {503})]


class EmptyServer(cs.CoringTestCase):
    model = None
    tmp = None
    postgres = None

    @classmethod
    def setUpClass(cls):
        # A throw-away PostgreSQL for users and cep; its folder holds the model too.
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-empty-")
        cls.tmp = cls.postgres.tmp
        vocab = os.path.join(cls.tmp, "vocab.txt")
        with open(vocab, "w") as f:
            f.write("\n".join(VOCAB) + "\n")
        cls.model = os.path.join(cls.tmp, "model")
        subprocess.run(["/usr/bin/python3", MAKE_MODEL, "--out", cls.model, "--vocab", vocab, "--layers", "1",
                        "--hidden", "8", "--heads", "2", "--intermediate", "16", "--max-positions", "64", "--max-seq-length", "64"],
                       check=True, timeout=120, stdout=subprocess.DEVNULL)

    def run_routes(self, threads, apps, routes, args=(), env=None):
        old = dict(os.environ)
        os.environ.update(env or {})
        try:
            srv = cs.CoringServer(threads=threads, apps=apps, args=list(args)).start()
        finally:
            os.environ.clear()
            os.environ.update(old)
        try:
            self.routes_on(srv, threads, routes)
        except (AssertionError, OSError) as e:
            # A sanitizer report ends the server: show it.
            raise AssertionError("%s\nserver stderr:\n%s" % (e, srv.stderr_text(30))) from None
        finally:
            srv.kill()

    def routes_on(self, srv, threads, routes):
        # Each read on new connections (SO_REUSEPORT spreads them over
        # the threads) while the stores are empty, then every route in
        # order on one connection.
        for method, path, body, allowed in routes:
            if method == "POST":
                break
            if method == "GET":
                for _ in range(threads):
                    with srv.connect(timeout=30) as c:
                        self.call(c, method, path, body, allowed, threads)
        with srv.connect(timeout=30) as c:
            for method, path, body, allowed in routes:
                self.call(c, method, path, body, allowed, threads)
        srv.stop(expect_status=0)

    def call(self, conn, method, path, body, allowed, threads):
        resp = conn.request(method, path, JSON_HDR if body is not None else {}, body)
        what = "%s %s on %d thread(s): %r" % (method, path, threads, resp)
        self.assertIn(resp.status, allowed, what)
        self.assertCommonHeaders(resp, what)
        if method == "GET" and path in ("/todos", "/todos?x=1", "/users"):
            self.assertIsInstance(resp.json(), list, what)

    def test_hello_todo_embed(self):
        for threads in (1, 2):
            with self.subTest(threads=threads):
                self.run_routes(threads, "hello,todo,embed", HELLO + TODO + EMBED,
                                ["--embed-model", self.model, "--embed-threads", "1"])
                self.run_routes(threads, "embed", EMBED_NO_MODEL)

    def test_users_cep(self):
        for threads in (1, 2):
            with self.subTest(threads=threads):
                self.run_routes(threads, "users,cep", USERS + CEP, ["--cep-upstream", "off"],
                                env={"DATABASE_URL": self.postgres.url()})
                # Empty again for the next server (the schema stays).
                self.postgres.run("psql", "-q", "-c", "TRUNCATE users, cep_addresses RESTART IDENTITY")


if __name__ == "__main__":
    cs.main()

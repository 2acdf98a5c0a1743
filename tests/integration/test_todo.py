#!/usr/bin/python3
"""Integration tests of the todo app (and the hello routes' 404/405 neighbours).

Every test runs on the store that `--store memory|postgres` names (default
memory, coring's default; ctest runs both: integration_todo and
integration_todo_pg). On postgres the module starts a throw-away
PostgreSQL (db/pg-local, Unix socket only) and every coring it starts gets
--todo-store postgres and DATABASE_URL; a test that needs an empty store
empties the table first (empty_store()). Memory-only: none; what the tests
of the bound (StoreBoundTest) say of shards holds for the table too.
"""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

import coring_server as cs  # noqa: E402

JSON_HDR = {"Content-Type": "application/json"}
NOBODY = object()  # error(): send no body
U64_MAX = 18446744073709551615

STORE = "memory"   # --store (see the end of the file)
POSTGRES = None    # the cluster on --store postgres


def setUpModule():
    global POSTGRES
    if STORE != "postgres":
        return
    POSTGRES = cs.LocalPostgres("coring-todo-")
    unittest.addModuleCleanup(POSTGRES.remove)
    POSTGRES.run("start", "throwaway")
    os.environ["DATABASE_URL"] = POSTGRES.url()


def empty_store():
    """On postgres: empty the table todos (and its count) before a test that
    needs an empty store; no server may be running on it. A new database
    would cost a CREATE DATABASE, seconds on a busy machine."""
    if STORE == "postgres":
        POSTGRES.sql("DO $$ BEGIN IF to_regclass('todos') IS NOT NULL THEN "
                     "TRUNCATE todos RESTART IDENTITY; END IF; END $$")


def todo_server(threads=2, args=()):
    """A coring (hello and todo) on the store under test, not started."""
    store = ["--todo-store", "postgres"] if STORE == "postgres" else []
    return cs.CoringServer(threads=threads, args=store + list(args))


class TodoTest(cs.SharedServerTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = todo_server().start()

    def setUp(self):
        self.conn = self.server.connect()

    def tearDown(self):
        self.conn.close()

    # -- helpers ----------------------------------------------------------
    def req(self, method, path, body=None, headers=None, conn=None):
        h = dict(JSON_HDR) if body is not None else {}
        h.update(headers or {})
        resp = (conn or self.conn).request(method, path, h, body)
        self.assertCommonHeaders(resp, "%s %s" % (method, path))
        if method != "HEAD" and resp.status not in (204, 304):
            self.assertEqual(int(resp.header("Content-Length")), len(resp.body),
                             "Content-Length vs body for %s %s" % (method, path))
        return resp

    def assertJsonType(self, resp, what):
        self.assertTrue(resp.header("Content-Type", "").lower().startswith("application/json"),
                        "%s: Content-Type %r is not application/json" % (what, resp.header("Content-Type")))

    def assertTodo(self, doc, title=None, completed=None, what=""):
        self.assertIsInstance(doc, dict, "%s: todo is not an object: %r" % (what, doc))
        self.assertEqual(set(doc), {"id", "title", "completed"}, "%s: todo fields: %r" % (what, doc))
        self.assertIsInstance(doc["id"], int, "%s: id is not an integer: %r" % (what, doc))
        self.assertNotIsInstance(doc["id"], bool, "%s: id is a bool: %r" % (what, doc))
        self.assertTrue(0 <= doc["id"] <= U64_MAX, "%s: id not a u64: %r" % (what, doc))
        self.assertIsInstance(doc["title"], str, "%s: title: %r" % (what, doc))
        self.assertIsInstance(doc["completed"], bool, "%s: completed: %r" % (what, doc))
        if title is not None:
            self.assertEqual(doc["title"], title, "%s: title" % what)
        if completed is not None:
            self.assertEqual(doc["completed"], completed, "%s: completed" % what)

    def create(self, title, completed=None, conn=None):
        body = {"title": title}
        if completed is not None:
            body["completed"] = completed
        resp = self.req("POST", "/todos", body, conn=conn)
        self.assertEqual(resp.status, 201, "POST /todos %r: %r" % (body, resp))
        self.assertJsonType(resp, "POST /todos")
        doc = resp.json()
        self.assertTodo(doc, title, bool(completed), "POST /todos")
        self.assertEqual(resp.header("Location"), "/todos/%d" % doc["id"], "Location header: %r" % resp)
        return doc

    def error(self, method, path, body, status, what=None):
        """@body: bytes sent as is, NOBODY, or a Python value sent as JSON."""
        h = dict(JSON_HDR) if body is not NOBODY else {}
        if body is NOBODY:
            body = None
        elif not isinstance(body, bytes):
            body = json.dumps(body).encode()
        resp = self.conn.request(method, path, h, body)
        self.assertJsonError(resp, status, what or "%s %s %r" % (method, path, body))
        return resp

    def all_todos(self):
        resp = self.req("GET", "/todos")
        self.assertEqual(resp.status, 200, "GET /todos: %r" % resp)
        self.assertJsonType(resp, "GET /todos")
        docs = resp.json()
        self.assertIsInstance(docs, list, "GET /todos is not an array: %r" % resp.body[:300])
        for d in docs:
            self.assertTodo(d, what="GET /todos item")
        ids = [d["id"] for d in docs]
        self.assertEqual(ids, sorted(ids), "GET /todos not ordered by id: %r" % ids)
        self.assertEqual(len(ids), len(set(ids)), "GET /todos has duplicate ids: %r" % ids)
        return docs

    # -- health -----------------------------------------------------------
    def test_concurrent_patches_across_threads_keep_their_titles(self):
        # A PATCH for another thread's todo travels there as a message; its
        # title must not be overwritten meanwhile by the next request parsed
        # on the sending thread.
        ids = [self.req("POST", "/todos", b'{"title":"p"}').json()["id"] for _ in range(40)]
        wrong = []

        def patcher(k):
            with self.server.connect() as c:
                for i in range(60):
                    title = "w%d-r%d-%s" % (k, i, "x" * (i % 23))
                    tid = ids[(k * 7 + i) % len(ids)]
                    r = c.request("PATCH", "/todos/%d" % tid, dict(JSON_HDR),
                                  json.dumps({"title": title}).encode())
                    if r.status != 200 or r.json().get("title") != title:
                        wrong.append((title, r.status, r.body[:80]))

        threads = [threading.Thread(target=patcher, args=(k,)) for k in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(wrong[:5], [], "%d of 960 PATCHes answered another title" % len(wrong))

    def test_health(self):
        resp = self.req("GET", "/health")
        self.assertEqual((resp.status, resp.body), (200, b"OK"), repr(resp))

    def test_head_health(self):
        get = self.req("GET", "/health")
        head = self.req("HEAD", "/health")
        self.assertEqual(head.status, 200, repr(head))
        self.assertEqual(head.header("Content-Length"), get.header("Content-Length"), repr(head))
        self.assertEqual(head.header("Content-Type"), get.header("Content-Type"), repr(head))
        # No body: the next response on this connection must start right away.
        self.assertEqual(self.req("GET", "/health").body, b"OK")

    # -- create / read ----------------------------------------------------
    def test_create_default_not_completed(self):
        doc = self.create("buy milk")
        self.assertFalse(doc["completed"])

    def test_create_completed_true(self):
        self.create("done already", completed=True)

    def test_create_completed_false_explicit(self):
        self.create("explicitly not done", completed=False)

    def test_get_one(self):
        doc = self.create("read me back", completed=True)
        resp = self.req("GET", "/todos/%d" % doc["id"])
        self.assertEqual(resp.status, 200, repr(resp))
        self.assertJsonType(resp, "GET /todos/{id}")
        self.assertEqual(resp.json(), doc)

    def test_get_one_from_other_connections(self):
        # Connections land on either thread; a todo must be visible from all of them.
        doc = self.create("seen everywhere")
        for i in range(8):
            with self.server.connect() as c:
                resp = self.req("GET", "/todos/%d" % doc["id"], conn=c)
                self.assertEqual(resp.status, 200, "connection %d: %r" % (i, resp))
                self.assertEqual(resp.json(), doc, "connection %d" % i)

    def test_list_after_two_posts(self):
        a = self.create("first of two")
        b = self.create("second of two", completed=True)
        self.assertNotEqual(a["id"], b["id"], "two todos got the same id")
        docs = self.all_todos()
        self.assertIn(a, docs, "first todo missing from GET /todos")
        self.assertIn(b, docs, "second todo missing from GET /todos")
        # all_todos() checked that the list is sorted ascending by id.

    def test_large_list(self):
        # Enough todos for a GET /todos response well over 100 KB.
        c = self.server.connect()
        with c:
            n = 600
            c.send(b"".join(cs.build_request("POST", "/todos", JSON_HDR, json.dumps({"title": "%04d " % i + "L" * 200}))
                            for i in range(n)))
            made = []
            for i in range(n):
                resp = c.read_response("POST")
                self.assertEqual(resp.status, 201, "pipelined POST %d: %r" % (i + 1, resp))
                made.append(resp.json())
        docs = self.all_todos()
        self.assertGreater(len(json.dumps(docs)), 100000)
        ids = {d["id"] for d in docs}
        self.assertTrue(all(d["id"] in ids for d in made), "a created todo is missing from a large GET /todos")

    def test_list_with_query_string(self):
        doc = self.create("query string")
        resp = self.req("GET", "/todos?limit=1&x=%20")
        self.assertEqual(resp.status, 200, "a query string must not change the route: %r" % resp)
        self.assertIn(doc, resp.json())

    def test_ids_unique_across_connections(self):
        # Several connections (spread over the threads) create todos; ids are unique
        # and GET /todos, from any connection, lists every one of them, sorted.
        conns = [self.server.connect() for _ in range(12)]
        try:
            made = []
            for round_ in range(4):
                for i, c in enumerate(conns):
                    made.append(self.create("conn %d round %d" % (i, round_), conn=c))
            ids = [d["id"] for d in made]
            self.assertEqual(len(set(ids)), len(ids), "duplicate ids across connections: %r" % sorted(ids))
            for c in conns[:3]:
                resp = self.req("GET", "/todos", conn=c)
                listed = resp.json()
                lids = [d["id"] for d in listed]
                self.assertEqual(lids, sorted(lids), "GET /todos not sorted by id")
                for d in made:
                    self.assertIn(d, listed, "todo %r missing from GET /todos" % d)
        finally:
            for c in conns:
                c.close()

    def test_title_escapes_round_trip(self):
        title = 'quote " backslash \\ slash / newline \n tab \t ctl \x01 é 漢字 😀'
        doc = self.create(title)
        resp = self.req("GET", "/todos/%d" % doc["id"])
        self.assertEqual(resp.json()["title"], title)
        # The body must be valid UTF-8 and valid JSON (json() checks both).

    def test_title_unicode_escape_in_request(self):
        resp = self.req("POST", "/todos", b'{"title": "caf\\u00e9 \\ud83d\\ude00"}')
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertEqual(resp.json()["title"], "caf\u00e9 \U0001F600")

    def test_title_with_nul_refused(self):
        # PostgreSQL's text cannot hold U+0000: both stores refuse it alike.
        doc = self.create("no nul here")
        for title in ("a\u0000b", "\u0000"):
            self.error("POST", "/todos", {"title": title}, 422)
            self.error("PATCH", "/todos/%d" % doc["id"], {"title": title}, 422)
        self.assertEqual(self.req("GET", "/todos/%d" % doc["id"]).json(), doc)

    def test_title_1000_bytes_ok(self):
        self.create("x" * 1000)
        self.create("é" * 500)  # 1,000 bytes of UTF-8

    def test_unknown_field_ignored(self):
        resp = self.req("POST", "/todos", {"title": "extra fields", "priority": 3, "tags": ["a"],
                                           "nested": {"x": None}})
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertTodo(resp.json(), "extra fields", False, "unknown field")

    # -- update -----------------------------------------------------------
    def test_patch_title(self):
        doc = self.create("old title", completed=True)
        resp = self.req("PATCH", "/todos/%d" % doc["id"], {"title": "new title"})
        self.assertEqual(resp.status, 200, repr(resp))
        self.assertJsonType(resp, "PATCH")
        self.assertEqual(resp.json(), {"id": doc["id"], "title": "new title", "completed": True})
        self.assertEqual(self.req("GET", "/todos/%d" % doc["id"]).json(), resp.json())

    def test_patch_completed(self):
        doc = self.create("to complete")
        resp = self.req("PATCH", "/todos/%d" % doc["id"], {"completed": True})
        self.assertEqual(resp.status, 200, repr(resp))
        self.assertEqual(resp.json(), {"id": doc["id"], "title": "to complete", "completed": True})
        with self.server.connect() as c:
            self.assertEqual(self.req("GET", "/todos/%d" % doc["id"], conn=c).json(), resp.json())

    def test_patch_both(self):
        doc = self.create("both")
        resp = self.req("PATCH", "/todos/%d" % doc["id"], {"title": "both changed", "completed": True})
        self.assertEqual(resp.status, 200, repr(resp))
        self.assertEqual(resp.json(), {"id": doc["id"], "title": "both changed", "completed": True})
        resp = self.req("PATCH", "/todos/%d" % doc["id"], {"completed": False, "ignored": 1})
        self.assertEqual(resp.json(), {"id": doc["id"], "title": "both changed", "completed": False})

    def test_patch_from_other_connection(self):
        doc = self.create("patched elsewhere")
        for i in range(4):
            with self.server.connect() as c:
                resp = self.req("PATCH", "/todos/%d" % doc["id"], {"title": "patched %d" % i}, conn=c)
                self.assertEqual(resp.status, 200, "connection %d: %r" % (i, resp))
        self.assertEqual(self.req("GET", "/todos/%d" % doc["id"]).json()["title"], "patched 3")

    def test_patch_with_neither_field_is_422_and_changes_nothing(self):
        # Without the 422 check these answered 200 with the todo as it was,
        # and every test passed (issue 39).
        doc = self.create("left alone", completed=True)
        path = "/todos/%d" % doc["id"]
        for body in ({}, {"ignored": 1}):
            resp = self.error("PATCH", path, body, 422)
            self.assertIn("nothing to update", resp.json()["error"], repr(body))
            self.assertEqual(self.req("GET", path).json(), doc, "after PATCH %r" % body)

    def test_patch_absent(self):
        self.error("PATCH", "/todos/%d" % U64_MAX, {"title": "x"}, 404)

    def test_patch_errors(self):
        doc = self.create("patch errors")
        path = "/todos/%d" % doc["id"]
        self.error("PATCH", path, b'{"title": ', 400)
        self.error("PATCH", path, {"completed": "yes"}, 422)
        self.error("PATCH", path, {"title": ""}, 422)
        self.error("PATCH", path, {"title": 7}, 422)
        self.error("PATCH", path, {"title": "y" * 1001}, 422)
        self.error("PATCH", path, [1, 2], 422)
        self.error("PATCH", "/todos/abc", {"title": "x"}, 400)
        # Nothing changed.
        self.assertEqual(self.req("GET", path).json(), doc)

    # -- delete -----------------------------------------------------------
    def test_delete(self):
        doc = self.create("delete me")
        path = "/todos/%d" % doc["id"]
        # Pipeline DELETE and GET /health: a 204 with a body would corrupt the next response.
        self.conn.send(cs.build_request("DELETE", path) + cs.build_request("GET", "/health"))
        resp = self.conn.read_response("DELETE")
        self.assertEqual(resp.status, 204, repr(resp))
        self.assertCommonHeaders(resp, "DELETE")
        self.assertIsNone(resp.header("Content-Type"), "204 with Content-Type: %r" % resp)
        nxt = self.conn.read_response("GET")
        self.assertEqual((nxt.status, nxt.body), (200, b"OK"),
                         "response after 204 (did the 204 carry a body?): %r" % nxt)
        self.error("GET", path, NOBODY, 404, "GET after DELETE")
        self.error("DELETE", path, NOBODY, 404, "second DELETE")
        self.error("PATCH", path, {"title": "x"}, 404, "PATCH after DELETE")
        self.assertNotIn(doc["id"], [d["id"] for d in self.all_todos()], "deleted todo still listed")

    def test_delete_absent(self):
        self.error("DELETE", "/todos/%d" % U64_MAX, NOBODY, 404)

    # -- errors -------------------------------------------------------------
    def test_get_999_then_keeps_serving(self):
        if any(d["id"] == 999 for d in self.all_todos()):
            self.skipTest("a todo with id 999 exists")
        self.error("GET", "/todos/999", NOBODY, 404)
        resp = self.req("GET", "/health")
        self.assertEqual((resp.status, resp.body), (200, b"OK"), "same connection after 404: %r" % resp)
        with self.server.connect() as c:
            self.assertEqual(self.req("GET", "/health", conn=c).status, 200, "new connection after 404")

    def test_get_u64_max_absent(self):
        self.error("GET", "/todos/%d" % U64_MAX, NOBODY, 404)

    def test_bad_ids(self):
        for bad in ("abc", "-1", "18446744073709551616", "99999999999999999999999", "1.5", "1a", "0x10",
                    "1e3"):
            for method, body in (("GET", NOBODY), ("DELETE", NOBODY), ("PATCH", {"title": "x"})):
                self.error(method, "/todos/" + bad, body, 400, "%s /todos/%s" % (method, bad))

    def test_invalid_json(self):
        for body in (b'{"title": ', b"not json", b'{"title": "x",}', b'{"title": "x"} trailing',
                     b'{"title": "\xff\xfe"}', b""):
            self.error("POST", "/todos", body, 400, "POST /todos body %r" % body)

    def test_title_missing_or_wrong_type(self):
        for body in ({}, {"completed": True}, {"title": None}, {"title": 5}, {"title": True},
                     {"title": ["a"]}, {"title": {"a": 1}}, {"title": ""}):
            self.error("POST", "/todos", body, 422)

    def test_title_too_long(self):
        self.error("POST", "/todos", {"title": "y" * 1001}, 422, "1,001-byte ASCII title")
        self.error("POST", "/todos", {"title": "€" * 334}, 422, "1,002-byte title of 334 characters")

    def test_completed_not_bool(self):
        for value in ("yes", "true", 1, 0, None, [], {}):
            self.error("POST", "/todos", {"title": "x", "completed": value}, 422)

    def test_root_not_object(self):
        for body in ([], [{"title": "x"}], "title", 42, None, True):  # None is sent as null
            self.error("POST", "/todos", body, 422)

    def test_errors_create_nothing(self):
        before = self.all_todos()
        self.error("POST", "/todos", {"title": ""}, 422)
        self.error("POST", "/todos", b"{", 400)
        after = self.all_todos()
        self.assertEqual(before, after, "a rejected POST changed the list")

    def test_connection_survives_errors(self):
        # A 4xx from a handler is not a framing error: the connection stays usable.
        self.error("POST", "/todos", {"title": 5}, 422)
        self.error("POST", "/todos", b"nope", 400)
        self.error("GET", "/todos/abc", NOBODY, 400)
        self.error("GET", "/nope", NOBODY, 404)
        self.error("DELETE", "/todos", NOBODY, 405)
        self.assertEqual(self.req("GET", "/health").status, 200)

    # -- routing ------------------------------------------------------------
    def test_405_with_allow(self):
        cases = [
            ("DELETE", "/todos", {"get", "head", "post"}),
            ("PUT", "/todos", {"get", "head", "post"}),
            ("PATCH", "/todos", {"get", "head", "post"}),
            ("PUT", "/todos/1", {"get", "head", "patch", "delete"}),
            ("POST", "/todos/1", {"get", "head", "patch", "delete"}),
            ("POST", "/health", {"get", "head"}),
            ("DELETE", "/health", {"get", "head"}),
            ("POST", "/", {"get", "head"}),
            ("PUT", "/json", {"get", "head"}),
            ("POST", "/plaintext", {"get", "head"}),
        ]
        for method, path, allowed in cases:
            body = {"title": "x"} if method in ("PUT", "POST", "PATCH") else NOBODY
            resp = self.error(method, path, body, 405, "%s %s" % (method, path))
            allow = set(resp.tokens("Allow"))
            self.assertTrue(allowed <= allow, "%s %s: Allow %r lacks %r" % (method, path, allow, allowed))
            self.assertNotIn(method.lower(), allow, "%s %s: Allow %r lists the refused method"
                             % (method, path, allow))

    def test_404(self):
        for path in ("/nope", "/todos/1/extra", "/todo", "/healthz", "/TODOS"):
            self.error("GET", path, NOBODY, 404, "GET %s" % path)
        self.assertEqual(self.req("GET", "/health").status, 200)

    def test_head_routes(self):
        doc = self.create("head me")
        for path in ("/todos", "/todos/%d" % doc["id"], "/health", "/", "/json", "/plaintext"):
            get = self.req("GET", path)
            head = self.req("HEAD", path)
            self.assertEqual(head.status, 200, "HEAD %s: %r" % (path, head))
            self.assertEqual(head.header("Content-Type"), get.header("Content-Type"), "HEAD %s" % path)
            if path != "/todos":  # the list may change between the two requests
                self.assertEqual(head.header("Content-Length"), get.header("Content-Length"),
                                 "HEAD %s Content-Length" % path)
        # HEAD of an absent todo is a 404 without a body.
        head = self.req("HEAD", "/todos/%d" % U64_MAX)
        self.assertEqual(head.status, 404, repr(head))
        self.assertEqual(self.req("GET", "/health").body, b"OK", "HEAD 404 left a body on the wire")

    def test_hello_routes(self):
        for path, ctype, body in (("/", "application/json", {"message": "hello world"}),
                                  ("/json", "application/json", {"message": "Hello, World!"}),
                                  ("/plaintext", "text/plain", None)):
            resp = self.req("GET", path)
            self.assertEqual(resp.status, 200, repr(resp))
            self.assertTrue(resp.header("Content-Type", "").startswith(ctype), repr(resp))
            if body is None:
                self.assertEqual(resp.body, b"Hello, World!")
            else:
                self.assertEqual(resp.json(), body)

    def test_post_body_split_from_headers(self):
        # Headers first, body in a later segment.
        body = json.dumps({"title": "late body"}).encode()
        head = cs.build_request("POST", "/todos", JSON_HDR, body)[:-len(body)]
        c = self.server.connect(nodelay=True)
        with c:
            c.send(head)
            time.sleep(0.1)
            c.send(body)
            resp = c.read_response("POST")
            self.assertEqual(resp.status, 201, repr(resp))
            self.assertEqual(resp.json()["title"], "late body")

    # -- Content-Type (cross-site writes) ------------------------------------
    def test_body_must_be_declared_json(self):
        # A browser sends text/plain and forms cross-site without a CORS
        # preflight: such bodies must not create or change todos (415).
        doc = self.create("before the 415s")
        before = self.all_todos()
        body = json.dumps({"title": "cross-site"}).encode()
        for ct in ("text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
                   "multipart/form-data; boundary=x", "application/jsonp", "json", "", None):
            headers = {"Content-Type": ct} if ct is not None else {}
            for method, path in (("POST", "/todos"), ("PATCH", "/todos/%d" % doc["id"])):
                resp = self.conn.request(method, path, headers, body)
                self.assertJsonError(resp, 415, "%s %s with Content-Type %r" % (method, path, ct))
                self.assertIn("Content-Type: application/json", resp.json()["error"])
        resp = self.conn.request("POST", "/todos", [("Content-Type", "application/json"),
                                                    ("Content-Type", "text/plain")], body)
        self.assertJsonError(resp, 415, "two Content-Type fields")
        self.assertEqual(self.all_todos(), before, "a 415 changed the list")
        for ct in ("application/json; charset=utf-8", "Application/JSON", "application/json;charset=UTF-8",
                   "application/json ;charset=utf-8"):
            resp = self.req("POST", "/todos", body, headers={"Content-Type": ct})
            self.assertEqual(resp.status, 201, "Content-Type %r: %r" % (ct, resp))
        resp = self.req("PATCH", "/todos/%d" % doc["id"], {"completed": True},
                        headers={"Content-Type": "application/json; charset=utf-8"})
        self.assertEqual(resp.status, 200, resp)

    def test_invalid_json_message_does_not_repeat_itself(self):
        # simdjson's reason after the prefix, said once (issue 17).
        resp = self.error("POST", "/todos", b"{", 400)
        self.assertEqual(resp.json()["error"],
                         "invalid JSON: the JSON document has an improper structure: missing or "
                         "superfluous commas, braces, missing keys, etc.")
        resp = self.error("POST", "/todos", b'{"title": "abc', 400)
        self.assertEqual(resp.json()["error"], "invalid JSON: a string is opened, but never closed.")
        resp = self.error("POST", "/todos", b'{"title": "\xff"}', 400)
        self.assertEqual(resp.json()["error"], "invalid UTF-8 in JSON")


class StoreBoundTest(cs.CoringTestCase):
    """--todo-max-items: the store's bound, split over the worker threads."""

    def post(self, conn, title):
        return conn.request("POST", "/todos", JSON_HDR, {"title": title})

    def test_full_store_answers_507_and_stays_consistent(self):
        empty_store()
        with todo_server(threads=1, args=["--todo-max-items", "5"]) as srv:
            with srv.connect() as c:
                ids = [self.post(c, "t%d" % i).json()["id"] for i in range(5)]
                for _ in range(3):
                    resp = self.post(c, "one too many")
                    self.assertJsonError(resp, 507, "POST into a full store")
                    self.assertEqual(resp.reason, "Insufficient Storage")
                listed = c.request("GET", "/todos").json()
                self.assertEqual([d["id"] for d in listed], ids, "the list after 507s")
                # A PATCH still works, a DELETE makes room for one more.
                self.assertEqual(c.request("PATCH", "/todos/%d" % ids[0], JSON_HDR, {"title": "x"}).status, 200)
                self.assertEqual(c.request("DELETE", "/todos/%d" % ids[1]).status, 204)
                resp = self.post(c, "after a delete")
                self.assertEqual(resp.status, 201, resp)
                self.assertJsonError(self.post(c, "full again"), 507)
                listed = c.request("GET", "/todos").json()
                self.assertEqual(len(listed), 5)
                self.assertEqual(listed[0]["title"], "x")
                if STORE == "postgres":
                    # The count follows rows deleted by another client too.
                    POSTGRES.sql("DELETE FROM todos WHERE id = %d" % listed[-1]["id"])
                    self.assertEqual(self.post(c, "after psql's delete").status, 201)
                    self.assertJsonError(self.post(c, "full once more"), 507)
            srv.stop(expect_status=0)

    def test_bound_is_for_the_whole_store(self):
        # 2 threads, 4 todos in all: each thread's shard takes 2. Connections
        # land on either thread, so POST on many until both are full.
        empty_store()
        with todo_server(threads=2, args=["--todo-max-items", "4"]) as srv:
            created, full = 0, 0
            for i in range(40):
                with srv.connect() as c:
                    resp = self.post(c, "t%d" % i)
                    if resp.status == 201:
                        created += 1
                    else:
                        self.assertJsonError(resp, 507, "POST %d" % i)
                        full += 1
            with srv.connect() as c:
                listed = c.request("GET", "/todos").json()
            self.assertLessEqual(created, 4, "more todos than --todo-max-items")
            self.assertEqual(len(listed), created)
            self.assertGreater(full, 0)
            srv.stop(expect_status=0)

    def test_concurrent_posts_stay_within_the_bound(self):
        # 16 clients POST at once until full. memory: each shard's share is
        # exact; postgres: concurrent inserts may pass the count together,
        # by at most the inserts in flight (one per database connection:
        # 2 threads x --db-pool 2 here).
        limit, slack = 40, (4 if STORE == "postgres" else 0)
        empty_store()
        with todo_server(threads=2, args=["--todo-max-items", str(limit), "--db-pool", "2"]) as srv:
            answers = []

            def client(k):
                with srv.connect() as c:
                    for i in range(12):
                        resp = self.post(c, "c%d-%d" % (k, i))
                        answers.append(resp.status)
                        if resp.status != 201:
                            break

            threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            with srv.connect() as c:
                listed = c.request("GET", "/todos").json()
            created = answers.count(201)
            print("%s: %d created of --todo-max-items %d, %d answered 507"
                  % (STORE, created, limit, answers.count(507)))
            self.assertEqual(set(answers), {201, 507}, "answers: %r" % sorted(set(answers)))
            self.assertEqual(len(listed), created)
            self.assertLessEqual(created, limit + slack)
            srv.stop(expect_status=0)

    def test_flag_is_checked(self):
        for bad in ("0", "-1", "x", ""):
            with self.assertRaises(AssertionError):
                todo_server(threads=1, args=["--todo-max-items", bad]).start()


class StoreTest(cs.CoringTestCase):
    """--todo-store: what the store is shared by, and how it is refused."""

    def post(self, srv, title):
        with srv.connect() as c:
            resp = c.request("POST", "/todos", JSON_HDR, {"title": title})
        self.assertEqual(resp.status, 201, resp)
        return resp.json()

    def get(self, srv, path):
        with srv.connect() as c:
            return c.request("GET", path)

    def send(self, srv, method, path, body=None):
        with srv.connect() as c:
            return c.request(method, path, JSON_HDR if body is not None else None, body)

    def test_two_processes(self):
        # postgres: two coring processes on one database hold one list (the
        # point of the store); memory: each process holds its own.
        empty_store()
        with todo_server() as a, todo_server() as b:
            doc = self.post(a, "made on a")
            on_b = self.get(b, "/todos/%d" % doc["id"])
            if STORE == "memory":
                self.assertJsonError(on_b, 404, "memory: GET on b of a todo made on a")
                self.assertNotIn(doc, self.get(b, "/todos").json(), "memory: b lists a's todo")
                mine = self.post(b, "made on b")
                self.assertNotIn(mine, self.get(a, "/todos").json(), "memory: a lists b's todo")
                return
            self.assertEqual((on_b.status, on_b.json()), (200, doc), "GET on b of a todo made on a")
            mine = self.post(b, "made on b")
            self.assertGreater(mine["id"], doc["id"], "ids from one sequence")
            for srv in (a, b):
                self.assertEqual(self.get(srv, "/todos").json(), [doc, mine])
            patched = self.send(b, "PATCH", "/todos/%d" % doc["id"], {"completed": True})
            self.assertEqual(patched.status, 200, patched)
            self.assertEqual(self.get(a, "/todos/%d" % doc["id"]).json(), patched.json(),
                             "a reads b's PATCH")
            self.assertEqual(self.send(a, "DELETE", "/todos/%d" % mine["id"]).status, 204)
            self.assertJsonError(self.get(b, "/todos/%d" % mine["id"]), 404, "b after a's DELETE")
            self.assertJsonError(self.send(b, "DELETE", "/todos/%d" % mine["id"]), 404)
            a.stop(expect_status=0)
            b.stop(expect_status=0)

    def test_readyz_checks_the_database_only_on_postgres(self):
        with todo_server() as srv:
            resp = self.get(srv, "/readyz")
            self.assertEqual(resp.status, 200, resp)
            expected = {"server": "ok"}
            if STORE == "postgres":
                expected["database"] = "ok"
            self.assertEqual(resp.json()["checks"], expected)
            srv.stop(expect_status=0)

    def test_store_flag_is_checked(self):
        for bad in ("", "Memory", "pg", "postgresql", "memory,postgres"):
            proc = subprocess.run([cs.binary(), "--todo-store", bad, "--check-config"],
                                  capture_output=True, text=True, timeout=10)
            self.assertEqual(proc.returncode, 2, "--todo-store %r: %r" % (bad, proc))
            self.assertIn("--todo-store: expected memory or postgres", proc.stderr)
        for good in ("memory", "postgres"):
            proc = subprocess.run([cs.binary(), "--todo-store", good, "--check-config"],
                                  capture_output=True, text=True, timeout=10, env=cs.check_env())
            self.assertEqual(proc.returncode, 0, "--todo-store %s: %r" % (good, proc))
        text = subprocess.run([cs.binary(), "--help"], capture_output=True, text=True, timeout=10).stdout
        entry = text[text.index("  --todo-store"):].split("\n  --", 1)[0]
        self.assertIn("per", entry)
        self.assertIn("process", entry.replace("\n", " "))

    def test_postgres_needs_database_url(self):
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CORING_TODO_STORE")}
        proc = subprocess.run([cs.binary(), "--host", cs.HOST, "--port", "0", "--apps", "todo",
                               "--todo-store", "postgres"], env=env, capture_output=True, text=True,
                              timeout=20, stdin=subprocess.DEVNULL)
        self.assertEqual(proc.returncode, 1, proc)
        self.assertIn("DATABASE_URL is not set", proc.stderr)
        self.assertIn("--todo-store postgres", proc.stderr)
        self.assertNotIn("listening on", proc.stderr)


class DatabaseDownTest(cs.CoringTestCase):
    """postgres only: the store's answers while its database is away."""

    def test_503_while_postgres_is_down(self):
        if STORE != "postgres":
            self.skipTest("the memory store has no database")
        # The module's cluster, stopped and started again: a cluster of
        # its own would cost an initdb (seconds on a busy machine).
        pg = POSTGRES
        self.addCleanup(lambda: pg.running() or pg.run("start"))
        with todo_server(args=["--db-timeout", "2"]) as srv:
            with srv.connect() as c:
                doc = c.request("POST", "/todos", JSON_HDR, {"title": "before"}).json()
            pg.run("stop", "fast")
            deadline = time.monotonic() + 5
            while True:
                with srv.connect() as c:
                    resp = c.request("GET", "/todos/%d" % doc["id"])
                if resp.status == 503 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            self.assertJsonError(resp, 503, "GET while PostgreSQL is down")
            self.assertEqual(resp.json(), {"error": "database unavailable"})
            self.assertEqual(resp.header("Retry-After"), "1")
            with srv.connect() as c:
                for method, path, body in (("GET", "/todos", None), ("POST", "/todos", {"title": "x"}),
                                           ("PATCH", "/todos/%d" % doc["id"], {"title": "x"}),
                                           ("DELETE", "/todos/%d" % doc["id"], None)):
                    resp = c.request(method, path, JSON_HDR if body else None, body)
                    self.assertJsonError(resp, 503, "%s %s while PostgreSQL is down" % (method, path))
                resp = c.request("GET", "/readyz")
                self.assertEqual(resp.status, 503, resp)
                self.assertTrue(resp.json()["checks"]["database"].startswith("unreachable"), resp.json())
            pg.run("start")
            deadline = time.monotonic() + 20
            while True:
                with srv.connect() as c:
                    resp = c.request("GET", "/todos/%d" % doc["id"])
                if resp.status == 200 or time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            self.assertEqual((resp.status, resp.json()), (200, doc), "once PostgreSQL is back")
            srv.stop(expect_status=0)


def main():
    """--store memory|postgres (default memory), then coring_server's main()."""
    global STORE
    if "--store" in sys.argv:
        i = sys.argv.index("--store")
        STORE = sys.argv[i + 1]
        del sys.argv[i:i + 2]
        if STORE not in ("memory", "postgres"):
            sys.exit("--store: expected memory or postgres, got %r" % STORE)
    socket.setdefaulttimeout(cs.SOCK_TIMEOUT)
    cs.main()


if __name__ == "__main__":
    main()

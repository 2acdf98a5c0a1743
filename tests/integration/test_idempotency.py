#!/usr/bin/python3
"""Idempotency-Key on POST /users and POST /todos (apps/idempotency.c).

On PostgreSQL (users, and todos on --todo-store postgres): two coring
processes on one throw-away cluster (db/pg-local), so that a retry is also
tried on the other host. A retry with the same key and fields gets the
first answer again, byte for byte, with Idempotent-Replayed: true, and one
row; other fields: 422; a key whose first request is still being
performed (its advisory lock held by a psql session, as another host
would hold it): 409; concurrent duplicates: one row; keys past their 24
hours are deleted by the keyed POSTs that follow. On the memory store
(--todo-store memory): the same answers, one process, and the bound on the
keys it keeps.
"""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402

import coring_server as cs  # noqa: E402

JSON_HDR = {"Content-Type": "application/json"}


def post(server, path, body, key=None, raw_key=None):
    h = dict(JSON_HDR)
    if key is not None:
        h["Idempotency-Key"] = key
    data = json.dumps(body).encode()
    with server.connect() as c:
        if raw_key is not None:  # several fields, or bytes as they are
            head = "POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n" % path
            for k in raw_key:
                head += "Idempotency-Key: %s\r\n" % k
            head += "Content-Length: %d\r\n\r\n" % len(data)
            c.send(head.encode("latin-1") + data)
            return c.read_response()
        return c.request("POST", path, h, data)


def new_key():
    return str(uuid.uuid4())


class KeyedPosts:
    """The checks both stores pass (todos) and the users app's."""

    def assertFirst(self, resp, what=""):
        self.assertEqual(resp.status, 201, "%s: %r" % (what, resp))
        self.assertIsNone(resp.header("Idempotent-Replayed"), what)

    def assertReplay(self, resp, first, what=""):
        self.assertEqual(resp.status, 201, "%s: %r" % (what, resp))
        self.assertEqual(resp.header("Idempotent-Replayed"), "true", what)
        self.assertEqual(resp.body, first.body, what)
        self.assertEqual(resp.header("Location"), first.header("Location"), what)
        self.assertEqual(resp.header("Content-Type"), first.header("Content-Type"), what)

    def test_todo_replayed_once(self):
        key, title = new_key(), "keyed " + new_key()
        first = post(self.server, "/todos", {"title": title}, key)
        self.assertFirst(first, "first")
        again = post(self.other, "/todos", {"title": title}, key)
        self.assertReplay(again, first, "retry")
        # The same fields in another order and spacing are the same request.
        third = post(self.server, "/todos", {"completed": False, "title": title}, key)
        self.assertReplay(third, first, "completed: false given")
        self.assertEqual(self.todos_titled(title), 1)
        got = self.get(self.server, first.header("Location"))
        self.assertEqual(got.body, first.body, "GET of the todo made: the same JSON")

    def test_todo_other_body_is_422(self):
        key, title = new_key(), "keyed " + new_key()
        self.assertFirst(post(self.server, "/todos", {"title": title}, key))
        for body in ({"title": title + "!"}, {"title": title, "completed": True}):
            resp = post(self.server, "/todos", body, key)
            self.assertJsonError(resp, 422, repr(body))
            self.assertIn("Idempotency-Key", resp.json()["error"])
        self.assertEqual(self.todos_titled(title + "!"), 0)

    def test_todo_concurrent_duplicates_make_one(self):
        key, title = new_key(), "race " + new_key()
        answers = self.race("/todos", {"title": title}, key)
        made = [a for a in answers if a.status == 201 and not a.header("Idempotent-Replayed")]
        self.assertEqual(len(made), 1, [(a.status, a.body) for a in answers])
        for a in answers:
            if a.status == 201:
                self.assertEqual(a.body, made[0].body)
            else:
                self.assertJsonError(a, 409, "concurrent duplicate")
                self.assertEqual(a.header("Retry-After"), "1")
        self.assertEqual(self.todos_titled(title), 1)

    def test_key_syntax(self):
        title = "syntax " + new_key()
        # An RFC 8941 string and the bare key it holds are one key.
        first = post(self.server, "/todos", {"title": title}, '"k\\"ey-%s"' % title[7:])
        self.assertFirst(first, "quoted")
        self.assertReplay(post(self.server, "/todos", {"title": title}, 'k"ey-%s' % title[7:]),
                          first, "bare")
        for bad in ('', '"', '"abc', '"a";x=1', 'a b', '"\\n"', "x" * 256, '"%s"' % ("x" * 256),
                    "caf\xe9"):
            resp = post(self.server, "/todos", {"title": title}, raw_key=[bad])
            self.assertJsonError(resp, 400, repr(bad))
        resp = post(self.server, "/todos", {"title": title}, raw_key=["a", "b"])
        self.assertJsonError(resp, 400, "two fields")
        self.assertEqual(resp.json()["error"], "Idempotency-Key must be given once")
        self.assertEqual(post(self.server, "/todos", {"title": title}, "x" * 255).status, 201)
        self.assertEqual(self.todos_titled(title), 2)

    def test_no_key_is_not_kept(self):
        title = "plain " + new_key()
        for _ in range(2):
            resp = post(self.server, "/todos", {"title": title})
            self.assertFirst(resp)
        self.assertEqual(self.todos_titled(title), 2)

    def test_failed_request_is_not_kept(self):
        # A body that fails validation is answered before the key is used.
        key = new_key()
        self.assertJsonError(post(self.server, "/todos", {"title": ""}, key), 422)
        self.assertFirst(post(self.server, "/todos", {"title": "after " + key}, key))

    def race(self, path, body, key):
        """16 POSTs of @body with @key at once, half on each server: their answers."""
        answers = []

        def send(server):
            answers.append(post(server, path, body, key))
        threads = [threading.Thread(target=send, args=(s,)) for s in (self.server, self.other) * 8]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        return answers

    def get(self, server, path):
        with server.connect() as c:
            return c.request("GET", path)


class PostgresKeysTest(KeyedPosts, cs.CoringTestCase):
    """users and todo on one PostgreSQL, served by two coring processes."""

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-idem-")
        os.environ["DATABASE_URL"] = cls.postgres.url()
        servers = []
        for _ in range(2):
            s = cs.CoringServer(threads=2, apps="todo,users",
                                args=["--todo-store", "postgres"]).start()
            cls.addClassCleanup(s.kill)
            servers.append(s)
        cls.server, cls.other = servers

    @classmethod
    def tearDownClass(cls):
        for s in (cls.server, cls.other):
            s.stop(expect_status=0)

    def todos_titled(self, title):
        return int(self.postgres.sql("SELECT count(*) FROM todos WHERE title = '%s'"
                                     % title.replace("'", "''"))[0][0])

    def users_with(self, email):
        return int(self.postgres.sql("SELECT count(*) FROM users WHERE email = '%s'" % email)[0][0])

    def test_user_replayed_once_from_either_host(self):
        key, email = new_key(), "k-%s@example.com" % new_key()
        # The answer is built in SQL: every character class the JSON writer
        # escapes, and some it passes through, must come out as GET's.
        name = 'Ana "Q" \\ \x01\t ✓ é'
        first = post(self.server, "/users", {"name": name, "email": email}, key)
        self.assertFirst(first)
        doc = first.json()
        self.assertEqual((doc["name"], doc["email"]), (name, email))
        self.assertEqual(first.header("Location"), "/users/%d" % doc["id"])
        got = self.get(self.other, first.header("Location"))
        self.assertEqual(got.body, first.body, "GET /users/{id}: the same bytes as the keyed answer")
        for server in (self.other, self.server):
            self.assertReplay(post(server, "/users", {"name": name, "email": email}, key), first)
        self.assertEqual(self.users_with(email), 1)

    def test_user_key_with_other_body_is_422_and_conflict_without_key_is_409(self):
        key, email = new_key(), "o-%s@example.com" % new_key()
        self.assertFirst(post(self.server, "/users", {"name": "A", "email": email}, key))
        self.assertJsonError(post(self.server, "/users", {"name": "B", "email": email}, key), 422)
        other = "p-%s@example.com" % new_key()
        self.assertJsonError(post(self.server, "/users", {"name": "A", "email": other}, key), 422)
        self.assertEqual(self.users_with(other), 0)
        # The email taken, another key: the app's own 409, nothing kept.
        key2 = new_key()
        resp = post(self.server, "/users", {"name": "C", "email": email}, key2)
        self.assertJsonError(resp, 409)
        self.assertEqual(resp.json()["error"], "a user with this email already exists")
        self.assertEqual(self.postgres.sql("SELECT count(*) FROM idempotency_keys WHERE key = '%s'"
                                           % key2), [["0"]])

    def test_key_in_flight_elsewhere_is_409(self):
        # Another host performing the key holds its advisory lock until its
        # commit: a psql session holds it here.
        key, email = new_key(), "f-%s@example.com" % new_key()
        psql = subprocess.Popen([cs.PG_LOCAL, "psql", self.postgres.dir, "-X", "-q"],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        self.addCleanup(psql.kill)
        psql.stdin.write("BEGIN; SELECT pg_advisory_xact_lock(hashtextextended('POST /users ' "
                         "|| '%s', 0));\n" % key)
        psql.stdin.flush()
        deadline = time.monotonic() + 20
        while self.postgres.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'") == [["0"]]:
            self.assertLess(time.monotonic(), deadline, "psql never took the lock")
            time.sleep(0.05)
        resp = post(self.server, "/users", {"name": "F", "email": email}, key)
        self.assertJsonError(resp, 409, "in flight")
        self.assertEqual(resp.header("Retry-After"), "1")
        self.assertIn("still being performed", resp.json()["error"])
        self.assertEqual(self.users_with(email), 0)
        psql.stdin.write("COMMIT;\n")
        psql.stdin.close()
        psql.wait(20)
        self.assertFirst(post(self.server, "/users", {"name": "F", "email": email}, key))

    def test_user_concurrent_duplicates_make_one(self):
        key, email = new_key(), "r-%s@example.com" % new_key()
        answers = self.race("/users", {"name": "R", "email": email}, key)
        made = [a for a in answers if a.status == 201 and not a.header("Idempotent-Replayed")]
        self.assertEqual(len(made), 1, [(a.status, a.body) for a in answers])
        for a in answers:
            self.assertIn(a.status, (201, 409), a.body)
            if a.status == 201:
                self.assertEqual(a.body, made[0].body)
            else:
                self.assertIn("still being performed", a.json()["error"])
        self.assertEqual(self.users_with(email), 1)

    def test_expired_keys_are_deleted_by_later_posts(self):
        key, title = new_key(), "old " + new_key()
        first = post(self.server, "/todos", {"title": title}, key)
        self.assertFirst(first)
        self.assertReplay(post(self.server, "/todos", {"title": title}, key), first)
        # 23 hours old: still kept.
        self.postgres.sql("UPDATE idempotency_keys SET created_at = now() - interval '23 hours' "
                          "WHERE key = '%s'" % key)
        self.assertFirst(post(self.server, "/todos", {"title": "gc " + new_key()}, new_key()))
        self.assertReplay(post(self.server, "/todos", {"title": title}, key), first, "23 hours")
        # Past 24 hours: the next keyed POST deletes it (the oldest first),
        # and the key is then new again.
        self.postgres.sql("UPDATE idempotency_keys SET created_at = now() - interval '25 hours' "
                          "WHERE key = '%s'" % key)
        self.assertFirst(post(self.server, "/users", {"name": "G", "email": "gc-%s@example.com"
                                                      % new_key()}, new_key()))
        self.assertEqual(self.postgres.sql("SELECT count(*) FROM idempotency_keys WHERE key = '%s'"
                                           % key), [["0"]])
        again = post(self.server, "/todos", {"title": title}, key)
        self.assertFirst(again, "after expiry")
        self.assertNotEqual(again.json()["id"], first.json()["id"])
        self.assertEqual(self.todos_titled(title), 2)


class MemoryKeysTest(KeyedPosts, cs.CoringTestCase):
    """The in-memory todo store: keys per process, on the shard the key
    hashes to, at most --todo-max-items of them."""

    MAX_ITEMS = 64

    @classmethod
    def setUpClass(cls):
        cls.server = cs.CoringServer(threads=2, apps="todo",
                                     args=["--todo-max-items", str(cls.MAX_ITEMS)]).start()
        cls.addClassCleanup(cls.server.kill)
        cls.other = cls.server

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(expect_status=0)

    def todos_titled(self, title):
        with self.server.connect() as c:
            todos = c.request("GET", "/todos").json()
        return sum(1 for t in todos if t["title"] == title)

    def delete_all(self):
        with self.server.connect() as c:
            for t in c.request("GET", "/todos").json():
                self.assertEqual(c.request("DELETE", "/todos/%d" % t["id"]).status, 204)

    def test_keys_past_the_bound_are_forgotten_oldest_first(self):
        # Each shard keeps at most its share of --todo-max-items keys, as
        # it keeps todos: the keys outlive their todos, and the oldest go
        # first. Keys hash to either shard: send twice the bound.
        self.delete_all()
        first_key, first_title = new_key(), "first " + new_key()
        first = post(self.server, "/todos", {"title": first_title}, first_key)
        self.assertFirst(first)
        for i in range(2 * self.MAX_ITEMS):
            self.delete_all()
            self.assertFirst(post(self.server, "/todos", {"title": "fill %d" % i}, new_key()))
        again = post(self.server, "/todos", {"title": first_title}, first_key)
        self.assertFirst(again, "a forgotten key is new again")
        self.delete_all()


if __name__ == "__main__":
    cs.main()

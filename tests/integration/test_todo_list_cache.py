#!/usr/bin/python3
"""GET /todos and the list cache (--todo-list-cache on|off), on the memory store.

"Exact" (docs/todo.md): a GET /todos read after the response to a write
(POST, PATCH, DELETE, on any connection and any thread) has been received
lists that write. Each test here writes on one connection and, as soon as
the write's response is in, sends GET /todos on connections that landed on
every worker thread (one pipelined write each, then reads every answer),
and checks each body against the list the writes made: hundreds of times,
with the writes spread over every thread's shard, on 2 and 3 threads, with
the cache on and off.

A connection's thread is known from the id of a todo POSTed on it: a todo
made on thread t of T has (id - 1) % T == t (apps/todo/todo.c).
"""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import socket  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

JSON_HDR = {"Content-Type": "application/json"}
ROUNDS = 600          # writes per server
TIME_LIMIT_S = 6.0    # per server: stop the rounds early past it (a slow machine)


class ListCacheExactTest(cs.CoringTestCase):
    def connections_on_every_thread(self, srv, threads, per_thread, model):
        """Open connections until each of the @threads threads has @per_thread of
        them (at most 200 tries); each one's probe todo goes into @model.
        Returns {thread: [conn, ...]}."""
        by_thread = {t: [] for t in range(threads)}
        extra = []
        for _ in range(200):
            if all(len(v) >= per_thread for v in by_thread.values()):
                break
            c = srv.connect()
            resp = c.request("POST", "/todos", JSON_HDR, json.dumps({"title": "probe"}).encode())
            self.assertEqual(resp.status, 201, resp)
            doc = resp.json()
            model[doc["id"]] = doc
            t = (doc["id"] - 1) % threads
            if len(by_thread[t]) < per_thread:
                by_thread[t].append(c)
            else:
                extra.append(c)
        for c in extra:
            c.close()
        for t, conns in by_thread.items():
            self.assertEqual(len(conns), per_thread,
                             "no connection landed on thread %d of %d in 200 tries" % (t, threads))
        return by_thread

    def expect_list(self, model):
        return [model[k] for k in sorted(model)]

    def check_exact(self, threads, cache):
        srv = cs.CoringServer(threads=threads, args=["--todo-list-cache", cache]).start()
        try:
            model = {}
            conns = self.connections_on_every_thread(srv, threads, 2, model)
            writers = [c for t in range(threads) for c in conns[t][:1]]
            readers = [c for t in range(threads) for c in conns[t][1:]]
            get = cs.build_request("GET", "/todos", {}, None, "HTTP/1.1", True)
            # Prime every thread's cache, so that each later write must make it stale.
            for r in readers:
                self.assertEqual(r.request("GET", "/todos").json(), self.expect_list(model))
            start = time.monotonic()
            rounds = 0
            for i in range(ROUNDS):
                if time.monotonic() - start > TIME_LIMIT_S:
                    break
                w = writers[i % len(writers)]
                ids = sorted(model)
                kind = i % 4
                if kind in (0, 1) or len(ids) < 2:
                    resp = w.request("POST", "/todos", JSON_HDR,
                                     json.dumps({"title": "t%d" % i}).encode())
                    self.assertEqual(resp.status, 201, resp)
                    doc = resp.json()
                    model[doc["id"]] = doc
                    what = "POST on thread %d" % ((doc["id"] - 1) % threads)
                elif kind == 2:
                    # A todo of another thread's shard than the last write's, in turn.
                    tid = ids[(i // 4) % len(ids)]
                    body = {"title": "p%d" % i, "completed": bool(i & 8)}
                    resp = w.request("PATCH", "/todos/%d" % tid, JSON_HDR, json.dumps(body).encode())
                    self.assertEqual(resp.status, 200, resp)
                    model[tid] = resp.json()
                    what = "PATCH of %d (thread %d)" % (tid, (tid - 1) % threads)
                else:
                    tid = ids[(i // 4 * 7) % len(ids)]
                    resp = w.request("DELETE", "/todos/%d" % tid)
                    self.assertEqual(resp.status, 204, resp)
                    del model[tid]
                    what = "DELETE of %d (thread %d)" % (tid, (tid - 1) % threads)
                # The write's response is in: every thread's next GET must list it.
                for r in readers:
                    r.send(get)
                want = self.expect_list(model)
                for k, r in enumerate(readers):
                    resp = r.read_response("GET")
                    self.assertEqual(resp.status, 200, resp)
                    self.assertEqual(resp.json(), want,
                                     "round %d, after %s: GET /todos on thread %d is stale (cache %s)"
                                     % (i, what, k % threads, cache))
                rounds += 1
            print("threads=%d cache=%s: %d writes, each followed by a GET on every thread, in %.1f s"
                  % (threads, cache, rounds, time.monotonic() - start), file=sys.stderr)
            self.assertGreaterEqual(rounds, 50, "too few rounds to mean anything")
            for c in writers + readers:
                c.close()
        finally:
            srv.stop(expect_status=0)

    def test_exact_on_two_threads_cache_on(self):
        self.check_exact(2, "on")

    def test_exact_on_three_threads_cache_on(self):
        self.check_exact(3, "on")

    def test_exact_on_two_threads_cache_off(self):
        self.check_exact(2, "off")

    def test_one_thread_cache_on_and_off_agree(self):
        for cache in ("on", "off"):
            with self.subTest(cache=cache):
                srv = cs.CoringServer(threads=1, args=["--todo-list-cache", cache]).start()
                try:
                    with srv.connect() as c:
                        self.assertEqual(c.request("GET", "/todos").body, b"[]")
                        made = []
                        for k in range(5):
                            resp = c.request("POST", "/todos", JSON_HDR,
                                             json.dumps({"title": "x%d" % k}).encode())
                            made.append(resp.json())
                            self.assertEqual(c.request("GET", "/todos").json(), made)
                        self.assertEqual(c.request("DELETE", "/todos/%d" % made[0]["id"]).status, 204)
                        self.assertEqual(c.request("GET", "/todos").json(), made[1:])
                finally:
                    srv.stop(expect_status=0)

    def test_flag_checked_and_listed(self):
        bad = subprocess.run([cs.binary(), "--check-config", "--todo-list-cache", "maybe"],
                             capture_output=True, text=True, timeout=20)
        self.assertEqual(bad.returncode, 2, bad)
        self.assertIn("expected on or off", bad.stderr)
        out = subprocess.run([cs.binary(), "--help"], capture_output=True, text=True, timeout=20)
        self.assertIn("--todo-list-cache on|off", out.stdout)


if __name__ == "__main__":
    socket.setdefaulttimeout(cs.SOCK_TIMEOUT)
    cs.main()

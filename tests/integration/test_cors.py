#!/usr/bin/python3
"""CORS (--cors-origins) and OPTIONS, in raw HTTP against the real binary.

- Without --cors-origins: OPTIONS on a known path answers 204 with Allow
  (RFC 9110 section 9.3.7), not 405; OPTIONS * lists every method of any
  route; an unknown path stays 404; a 405 carries Allow (RFC 9110 section
  15.5.6); no CORS header is ever sent, not even to a preflight.
- With a list of origins: a preflight (OPTIONS with Origin and
  Access-Control-Request-Method) from a listed origin, for a method the
  route has, answers 204 with the grant (Fetch standard, CORS protocol);
  for a method it lacks, from another origin, or on an unknown path, there
  is no grant. Actual requests from a listed origin get
  Access-Control-Allow-Origin; every response says Vary: Origin.
- With '*': Access-Control-Allow-Origin: * for any origin, never
  Access-Control-Allow-Credentials.
- Bad lists are refused at start with exit status 2.

The browser's side of the same protocol is tests/integration/test_cors_browser.py.
"""

import sys

sys.dont_write_bytecode = True

import subprocess  # noqa: E402
import unittest  # noqa: E402

import coring_server as cs  # noqa: E402

A = "http://a.example:8000"
B = "https://b.example"
OTHER = "https://evil.example"
CORS_HEADERS = ("access-control-allow-origin", "access-control-allow-methods",
                "access-control-allow-headers", "access-control-max-age",
                "access-control-expose-headers", "access-control-allow-credentials")


def preflight(origin, method, headers=None):
    h = [("Origin", origin), ("Access-Control-Request-Method", method)]
    if headers:
        h.append(("Access-Control-Request-Headers", headers))
    return h


class CorsCase(cs.CoringTestCase):
    args = []
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = cs.CoringServer(threads=2, args=cls.args).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    def req(self, method, path, headers=None, body=None):
        with self.server.connect() as c:
            return c.request(method, path, headers, body)

    def assertNoCors(self, resp, what):
        for name in CORS_HEADERS:
            self.assertIsNone(resp.header(name), "%s: %s must not be sent: %r" % (what, name, resp))

    def assertAllow(self, resp, want, what):
        self.assertEqual(set(resp.tokens("Allow")), want, "%s: Allow: %r" % (what, resp))


class OptionsWithoutCorsTest(CorsCase):

    def test_options_known_route_is_204_with_allow(self):
        cases = [("/todos", {"get", "head", "post", "options"}),
                 ("/todos/1", {"get", "head", "patch", "delete", "options"}),
                 ("/", {"get", "head", "options"}),
                 ("/todos?x=1", {"get", "head", "post", "options"})]
        for path, want in cases:
            resp = self.req("OPTIONS", path)
            self.assertEqual(resp.status, 204, "OPTIONS %s: %r" % (path, resp))
            self.assertCommonHeaders(resp, "OPTIONS " + path)
            self.assertAllow(resp, want, "OPTIONS " + path)
            self.assertNoCors(resp, "OPTIONS " + path)
            self.assertIsNone(resp.header("Vary"), "no Vary without CORS: %r" % resp)

    def test_options_star(self):
        resp = self.req("OPTIONS", "*")
        self.assertEqual(resp.status, 204, repr(resp))
        # hello and todo: GET, POST, PATCH, DELETE routes (and HEAD with GET).
        self.assertAllow(resp, {"get", "head", "post", "patch", "delete", "options"}, "OPTIONS *")

    def test_options_unknown_path_is_404(self):
        resp = self.req("OPTIONS", "/no/such/path")
        self.assertJsonError(resp, 404, "OPTIONS unknown path")

    def test_405_carries_allow_with_options(self):
        resp = self.req("DELETE", "/todos")
        self.assertJsonError(resp, 405, "DELETE /todos")
        self.assertAllow(resp, {"get", "head", "post", "options"}, "DELETE /todos")

    def test_preflight_without_cors_gets_no_grant(self):
        resp = self.req("OPTIONS", "/todos", preflight(A, "POST", "content-type"))
        self.assertEqual(resp.status, 204, repr(resp))
        self.assertAllow(resp, {"get", "head", "post", "options"}, "preflight, CORS off")
        self.assertNoCors(resp, "preflight, CORS off")
        resp = self.req("GET", "/", [("Origin", A)])
        self.assertEqual(resp.status, 200, repr(resp))
        self.assertNoCors(resp, "GET with Origin, CORS off")


class CorsOriginsTest(CorsCase):
    args = ["--cors-origins", " %s,%s " % (A, B)]

    def test_preflight_allowed(self):
        for origin in (A, B):
            resp = self.req("OPTIONS", "/todos/7", preflight(origin, "PATCH", "content-type,x-request-id"))
            what = "preflight PATCH /todos/7 from %s" % origin
            self.assertEqual(resp.status, 204, "%s: %r" % (what, resp))
            self.assertCommonHeaders(resp, what)
            self.assertEqual(resp.header("Access-Control-Allow-Origin"), origin, what)
            self.assertEqual(set(resp.tokens("Access-Control-Allow-Methods")),
                             {"get", "head", "patch", "delete"}, "%s: %r" % (what, resp))
            self.assertEqual(set(resp.tokens("Access-Control-Allow-Headers")),
                             {"content-type", "x-request-id"}, "%s: %r" % (what, resp))
            self.assertEqual(resp.header("Access-Control-Max-Age"), "600", what)
            self.assertEqual(set(resp.tokens("Vary")),
                             {"origin", "access-control-request-method", "access-control-request-headers"},
                             "%s: %r" % (what, resp))
            self.assertIsNone(resp.header("Access-Control-Allow-Credentials"), what)

    def test_preflight_post_and_delete(self):
        resp = self.req("OPTIONS", "/todos", preflight(A, "POST", "content-type"))
        self.assertEqual(resp.status, 204, repr(resp))
        self.assertEqual(resp.header("Access-Control-Allow-Origin"), A, repr(resp))
        self.assertEqual(set(resp.tokens("Access-Control-Allow-Methods")), {"get", "head", "post"})
        resp = self.req("OPTIONS", "/todos/1", preflight(A, "DELETE"))
        self.assertEqual(resp.status, 204, repr(resp))
        self.assertEqual(resp.header("Access-Control-Allow-Origin"), A, repr(resp))
        self.assertIsNone(resp.header("Access-Control-Allow-Headers"), "none asked for: %r" % resp)

    def test_preflight_grants_idempotency_key(self):
        # A page's POST /users or /todos that carries an Idempotency-Key,
        # to be retried safely (docs/users.md): the browser sends it only
        # once the preflight granted it.
        resp = self.req("OPTIONS", "/todos", preflight(A, "POST", "content-type,idempotency-key"))
        self.assertEqual(resp.status, 204, repr(resp))
        self.assertEqual(set(resp.tokens("Access-Control-Allow-Headers")),
                         {"content-type", "idempotency-key"}, repr(resp))

    def test_preflight_only_grants_safe_headers(self):
        resp = self.req("OPTIONS", "/todos", preflight(A, "POST", "content-type, x-evil ,cookie,authorization"))
        self.assertEqual(resp.status, 204, repr(resp))
        self.assertEqual(set(resp.tokens("Access-Control-Allow-Headers")), {"content-type", "authorization"},
                         repr(resp))

    def test_preflight_wrong_method_no_grant(self):
        for path, method in (("/todos", "DELETE"), ("/todos/1", "POST"), ("/", "PUT"),
                             ("/todos/1", "patch"), ("/todos/1", "FROB")):
            what = "preflight %s %s" % (method, path)
            resp = self.req("OPTIONS", path, preflight(A, method))
            self.assertIn(resp.status, (204,), "%s: %r" % (what, resp))
            self.assertNoCors(resp, what)
            self.assertIn("options", resp.tokens("Allow"), "%s: %r" % (what, resp))
            self.assertIn("origin", resp.tokens("Vary"), "%s: %r" % (what, resp))

    def test_preflight_other_origin_no_grant(self):
        for origin in (OTHER, "http://a.example", "http://a.example:8001", "HTTP://A.EXAMPLE:8000",
                       A + "/", "null", ""):
            what = "preflight from %r" % origin
            resp = self.req("OPTIONS", "/todos", preflight(origin, "POST", "content-type"))
            self.assertEqual(resp.status, 204, "%s: %r" % (what, resp))
            self.assertNoCors(resp, what)
            self.assertIn("origin", resp.tokens("Vary"), "%s: %r" % (what, resp))

    def test_preflight_unknown_path_is_404(self):
        resp = self.req("OPTIONS", "/no/such", preflight(A, "GET"))
        self.assertJsonError(resp, 404, "preflight unknown path")
        self.assertIsNone(resp.header("Access-Control-Allow-Methods"), repr(resp))

    def test_actual_requests_from_allowed_origin(self):
        with self.server.connect() as c:
            resp = c.request("POST", "/todos", [("Origin", A), ("Content-Type", "application/json")],
                             {"title": "cors"})
            self.assertEqual(resp.status, 201, repr(resp))
            tid = resp.json()["id"]
            for method, path, body, status in (("GET", "/", None, 200), ("GET", "/todos/%d" % tid, None, 200),
                                               ("PATCH", "/todos/%d" % tid, {"completed": True}, 200),
                                               ("DELETE", "/todos/%d" % tid, None, 204),
                                               ("GET", "/todos/%d" % tid, None, 404),
                                               ("PUT", "/todos", None, 405)):
                headers = [("Origin", B)]
                if body is not None:
                    headers.append(("Content-Type", "application/json"))
                resp = c.request(method, path, headers, body)
                what = "%s %s from %s" % (method, path, B)
                self.assertEqual(resp.status, status, "%s: %r" % (what, resp))
                self.assertEqual(resp.header("Access-Control-Allow-Origin"), B, "%s: %r" % (what, resp))
                self.assertEqual(resp.tokens("Access-Control-Expose-Headers"), ["x-request-id"], what)
                self.assertEqual(resp.tokens("Vary"), ["origin"], "%s: %r" % (what, resp))
                self.assertIsNone(resp.header("Access-Control-Allow-Methods"), what)
                self.assertIsNone(resp.header("Access-Control-Allow-Credentials"), what)

    def test_other_origin_and_no_origin_get_no_cors_headers(self):
        for headers in ([("Origin", OTHER)], [], [("Origin", "null")], [("Origin", A), ("Origin", A)]):
            resp = self.req("GET", "/", headers)
            what = "GET / with %r" % headers
            self.assertEqual(resp.status, 200, "%s: %r" % (what, resp))
            self.assertNoCors(resp, what)
            # A cache must not give one origin's answer to another (Fetch, CORS and HTTP caches).
            self.assertEqual(resp.tokens("Vary"), ["origin"], "%s: %r" % (what, resp))

    def test_options_not_preflight_from_allowed_origin(self):
        resp = self.req("OPTIONS", "/todos", [("Origin", A)])
        self.assertEqual(resp.status, 204, repr(resp))
        self.assertAllow(resp, {"get", "head", "post", "options"}, "OPTIONS with Origin only")
        self.assertEqual(resp.header("Access-Control-Allow-Origin"), A, repr(resp))
        self.assertIsNone(resp.header("Access-Control-Allow-Methods"), repr(resp))


class CorsAnyOriginTest(CorsCase):
    args = ["--cors-origins", "*"]

    def test_any_origin(self):
        for origin in (A, OTHER, "null"):
            resp = self.req("OPTIONS", "/todos", preflight(origin, "POST", "content-type"))
            self.assertEqual(resp.status, 204, repr(resp))
            self.assertEqual(resp.header("Access-Control-Allow-Origin"), "*", repr(resp))
            self.assertEqual(set(resp.tokens("Access-Control-Allow-Methods")), {"get", "head", "post"})
            self.assertIsNone(resp.header("Access-Control-Allow-Credentials"), repr(resp))
            resp = self.req("GET", "/json", [("Origin", origin)])
            self.assertEqual(resp.status, 200, repr(resp))
            self.assertEqual(resp.header("Access-Control-Allow-Origin"), "*", repr(resp))
            self.assertIsNone(resp.header("Access-Control-Allow-Credentials"), repr(resp))
        resp = self.req("OPTIONS", "/todos", preflight(A, "DELETE"))
        self.assertNoCors(resp, "preflight for a method /todos lacks, under *")


class CorsConfigTest(cs.CoringTestCase):

    def check(self, value):
        return subprocess.run([cs.binary(), "--check-config", "--cors-origins", value], timeout=10,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=cs.check_env())

    def test_refused_lists(self):
        for value, word in (("", "empty"), ("null", "null"), ("https://a.example/", "path"),
                            ("https://a.example:443", "default port"), ("http://a.example:80", "default port"),
                            ("a.example", "scheme://host"), ("*,https://a.example", "alone"),
                            ("https://a.example:0", "port"), ("https://a.example:99999", "port"),
                            ("https://user@a.example", "user info"), ("https://a.example,", "empty"),
                            ("https://a.example/x?y", "path")):
            r = self.check(value)
            self.assertEqual(r.returncode, 2, "%r: %r" % (value, r))
            self.assertIn("--cors-origins", r.stderr, "%r: %r" % (value, r.stderr))
            self.assertIn(word, r.stderr, "%r: %r" % (value, r.stderr))

    def test_accepted_lists(self):
        for value in ("*", "https://a.example", "http://127.0.0.1:5173, https://App.Example:8443",
                      "http://[::1]:3000"):
            r = self.check(value)
            self.assertEqual(r.returncode, 0, "%r: %r" % (value, r))


if __name__ == "__main__":
    cs.main()

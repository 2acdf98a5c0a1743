#!/usr/bin/python3
"""Integration tests of coring's HTTP/1.1 layer: keep-alive, pipelining, concurrency,
fragmented input, malformed requests, Connection handling, chunked bodies, 100-continue."""

import sys

sys.dont_write_bytecode = True

import email.utils  # noqa: E402
import errno  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import selectors  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

HELLO = {"message": "hello world"}
H = b"Host: 127.0.0.1\r\n"
JSON_CT = b"Content-Type: application/json\r\n"
KIB = 1024


def chunked(body, sizes):
    """@body encoded as chunks of the given sizes (the rest in one last chunk), then 0."""
    out, i = b"", 0
    for n in sizes:
        out += b"%x\r\n%s\r\n" % (n, body[i:i + n])
        i += n
    if i < len(body):
        out += b"%x\r\n%s\r\n" % (len(body) - i, body[i:])
    return out + b"0\r\n\r\n"


# (name, request bytes, expected status or tuple of acceptable ones)
MALFORMED = [
    ("bare CR in a header value", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\rb\r\n\r\n", 400),
    ("bare CR ending the request line", b"GET / HTTP/1.1\r" + H + b"\r\n", 400),
    ("obs-fold", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\r\n  folded\r\n\r\n", 400),
    ("Transfer-Encoding and Content-Length",
     b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
     b"0\r\n\r\n", 400),
    ("differing Content-Length fields",
     b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400),
    ("differing Content-Length list", b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Content-Length: 2, 3\r\n\r\n{}",
     400),
    ("Content-Length +3", b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Content-Length: +3\r\n\r\n{}x", 400),
    ("Content-Length -1", b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Content-Length: -1\r\n\r\n", 400),
    ("Content-Length not a number", b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Content-Length: 1x\r\n\r\n{",
     400),
    ("unknown Transfer-Encoding gzip",
     b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: gzip\r\n\r\n", 501),
    ("HTTP/2.0", b"GET / HTTP/2.0\r\n" + H + b"\r\n", 505),
    ("malformed HTTP-version", b"GET / HTTX/1.1\r\n" + H + b"\r\n", 400),
    ("missing Host in HTTP/1.1", b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400),
    ("two Host fields", b"GET / HTTP/1.1\r\n" + H + b"Host: example.com\r\n\r\n", 400),
    ("header section over 16 KiB",
     b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-Pad-%02d: %s\r\n" % (i, b"a" * 1000) for i in range(17)) + b"\r\n",
     431),
    ("more than 100 header fields",
     b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-H%d: v\r\n" % i for i in range(120)) + b"\r\n", 431),
    ("request target over 16 KiB", b"GET /" + b"a" * (16 * KIB + 100) + b" HTTP/1.1\r\n" + H + b"\r\n", 414),
    ("body over 1 MiB",
     b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Content-Length: 1048577\r\n\r\n", 413),
    ("NUL in a header value", b"GET / HTTP/1.1\r\n" + H + b"X-A: a\x00b\r\n\r\n", 400),
    ("space before the colon", b"GET / HTTP/1.1\r\n" + H + b"X-A : b\r\n\r\n", 400),
    ("empty field name", b"GET / HTTP/1.1\r\n" + H + b": b\r\n\r\n", 400),
    ("field line without a colon", b"GET / HTTP/1.1\r\n" + H + b"X-A b\r\n\r\n", 400),
    ("invalid method characters", b"G{T / HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("control character in the target", b"GET /\x01 HTTP/1.1\r\n" + H + b"\r\n", 400),
    ("chunked with a junk size",
     b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n", 400),
    ("chunk data without its CRLF",
     b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\n2\r\n{}XX0\r\n\r\n", 400),
    ("chunk size overflowing 64 bits",
     b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\n"
     b"10000000000000000000\r\n{}\r\n0\r\n\r\n", (400, 413)),
]


class HttpTest(cs.SharedServerTestCase):
    @classmethod
    def setUpClass(cls):
        cls.nofile = cs.raise_nofile_limit()  # inherited by the server too
        super().setUpClass()

    def connect(self, **kw):
        c = self.server.connect(**kw)
        self.addCleanup(c.close)
        return c

    def get_ok(self, conn, path="/", what=""):
        resp = conn.request("GET", path)
        self.assertEqual(resp.status, 200, "GET %s %s: %r" % (path, what, resp))
        self.assertCommonHeaders(resp, "GET %s %s" % (path, what))
        return resp

    def check_hello(self, resp, path, what=""):
        ctx = "%s (%s): %r" % (path, what, resp)
        self.assertEqual(resp.status, 200, ctx)
        self.assertCommonHeaders(resp, ctx)
        self.assertEqual(int(resp.header("Content-Length")), len(resp.body), ctx)
        if path == "/":
            self.assertEqual(resp.json(), HELLO, ctx)
        elif path == "/json":
            self.assertEqual(resp.json(), {"message": "Hello, World!"}, ctx)
        elif path == "/plaintext":
            self.assertEqual(resp.body, b"Hello, World!", ctx)
            self.assertTrue(resp.header("Content-Type").startswith("text/plain"), ctx)
        else:
            raise AssertionError("no expectation for " + path)

    # -- basics ---------------------------------------------------------------
    def test_get_root_exact(self):
        c = self.connect()
        resp = c.request("GET", "/")
        self.check_hello(resp, "/")
        self.assertEqual(resp.body, b'{"message":"hello world"}')
        self.assertTrue(resp.header("Content-Type").startswith("application/json"), repr(resp))
        self.assertEqual(resp.version, "HTTP/1.1", repr(resp))
        self.assertEqual(resp.reason, "OK", repr(resp))

    def test_date_is_now(self):
        c = self.connect()
        resp = self.get_ok(c)
        date = email.utils.parsedate_to_datetime(resp.header("Date")).timestamp()
        self.assertLess(abs(date - time.time()), 5, "Date %r is not the current time" % resp.header("Date"))

    def test_head_root(self):
        c = self.connect()
        get = self.get_ok(c)
        # HEAD then GET in one send: a HEAD response with a body would corrupt the GET's.
        c.send(cs.build_request("HEAD", "/") + cs.build_request("GET", "/plaintext"))
        head = c.read_response("HEAD")
        self.assertEqual(head.status, 200, repr(head))
        self.assertCommonHeaders(head, "HEAD /")
        self.assertEqual(head.header("Content-Length"), get.header("Content-Length"),
                         "HEAD / Content-Length differs from GET's: %r" % head)
        self.assertEqual(head.header("Content-Type"), get.header("Content-Type"), repr(head))
        self.check_hello(c.read_response("GET"), "/plaintext", "the response after HEAD (did HEAD send a body?)")

    def test_lowercase_header_names(self):
        c = self.connect()
        c.send(b"GET /json HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: CLOSE\r\n\r\n")
        self.check_hello(c.read_response(), "/json")
        self.assertTrue(c.closed_by_peer(), "connection: CLOSE (any case) not honoured")

    # -- keep-alive and pipelining ----------------------------------------------
    def test_keepalive_1000_requests(self):
        c = self.connect()
        paths = ["/", "/json", "/plaintext"]
        for i in range(1000):
            p = paths[i % 3]
            c.send(cs.build_request("GET", p))
            resp = c.read_response()
            self.check_hello(resp, p, "request %d on one connection" % (i + 1))
            self.assertNotIn("close", resp.tokens("Connection"), "request %d: %r" % (i + 1, resp))
        self.assertFalse(c.eof, "connection closed after 1000 requests")

    def test_pipelined_three_in_one_send(self):
        c = self.connect()
        paths = ["/", "/json", "/plaintext"]
        c.send(b"".join(cs.build_request("GET", p) for p in paths))
        for i, p in enumerate(paths):
            self.check_hello(c.read_response(), p, "pipelined response %d of 3" % (i + 1))
        self.check_hello(c.request("GET", "/json"), "/json", "after the pipeline")

    def test_pipelined_mixed_100(self):
        c = self.connect()
        reqs, expect = [], []
        for i in range(100):
            k = i % 4
            if k == 0:
                reqs.append(cs.build_request("GET", "/plaintext"))
                expect.append(("GET", "/plaintext"))
            elif k == 1:
                reqs.append(cs.build_request("POST", "/todos", {"Content-Type": "application/json"},
                                             json.dumps({"title": "pipelined %d" % i})))
                expect.append(("POST", "pipelined %d" % i))
            elif k == 2:
                reqs.append(cs.build_request("HEAD", "/json"))
                expect.append(("HEAD", "/json"))
            else:
                reqs.append(cs.build_request("GET", "/"))
                expect.append(("GET", "/"))
        c.send(b"".join(reqs))
        for i, (method, what) in enumerate(expect):
            resp = c.read_response(method)
            ctx = "pipelined response %d (%s %s): %r" % (i + 1, method, what, resp)
            if method == "POST":
                self.assertEqual(resp.status, 201, ctx)
                self.assertEqual(resp.json()["title"], what, ctx)
            elif method == "HEAD":
                self.assertEqual(resp.status, 200, ctx)
                self.assertTrue(resp.has_header("Content-Length"), ctx)
            else:
                self.check_hello(resp, what, ctx)

    def test_pipeline_ending_with_close(self):
        c = self.connect()
        c.send(cs.build_request("GET", "/") + cs.build_request("GET", "/json")
               + cs.build_request("GET", "/plaintext", {"Connection": "close"})
               + cs.build_request("GET", "/"))
        self.check_hello(c.read_response(), "/")
        self.check_hello(c.read_response(), "/json")
        last = c.read_response()
        self.check_hello(last, "/plaintext")
        self.assertIn("close", last.tokens("Connection"), "no Connection: close: %r" % last)
        self.assertTrue(c.closed_by_peer(), "the request after Connection: close was answered or "
                        "the connection stayed open")

    def test_pipeline_then_malformed(self):
        c = self.connect()
        c.send(cs.build_request("GET", "/json") + b"GET / HTTP/1.1\r\n" + H + b"X-A : b\r\n\r\n")
        self.check_hello(c.read_response(), "/json", "the valid request before a malformed one")
        bad = c.read_response()
        self.assertJsonError(bad, 400, "malformed request after a valid one")
        self.assertTrue(c.closed_by_peer(), "connection not closed after the 400")

    # -- concurrency ------------------------------------------------------------
    def test_1000_concurrent_connections(self):
        n = 1000
        if self.nofile < n + 200:
            self.skipTest("RLIMIT_NOFILE is %d, need %d" % (self.nofile, n + 200))
        req = cs.build_request("GET", "/")
        sel = selectors.DefaultSelector()
        socks, bufs, status = [], {}, {}
        deadline = time.monotonic() + 25
        try:
            for i in range(n):
                s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                s.setblocking(False)
                socks.append(s)
                err = s.connect_ex((self.server.host, self.server.port))
                self.assertIn(err, (0, errno.EINPROGRESS), "connect %d: %s" % (i, errno.errorcode.get(err)))
                sel.register(s, selectors.EVENT_WRITE, i)
            pending = n
            while pending and time.monotonic() < deadline:
                for key, ev in sel.select(timeout=0.5):
                    s, i = key.fileobj, key.data
                    if ev & selectors.EVENT_WRITE:
                        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                        if err:
                            status[i] = "connect failed: %s" % errno.errorcode.get(err, err)
                            sel.unregister(s)
                            pending -= 1
                            continue
                        s.send(req)  # small: fits in the empty send buffer
                        sel.modify(s, selectors.EVENT_READ, i)
                        bufs[i] = b""
                        continue
                    try:
                        chunk = s.recv(65536)
                    except ConnectionResetError:
                        chunk = b""
                    if not chunk:
                        status[i] = "closed after %r" % bufs[i][:100]
                        sel.unregister(s)
                        pending -= 1
                        continue
                    bufs[i] += chunk
                    r = parse_simple(bufs[i])
                    if r is not None:
                        status[i] = r
                        sel.unregister(s)  # stays open until all are done
                        pending -= 1
            bad = {i: st for i, st in status.items() if st != (200, json.dumps(HELLO, separators=(",", ":")))}
            missing = n - len(status)
            self.assertEqual(missing, 0, "%d of %d connections got no response within the deadline" % (missing, n))
            self.assertEqual(len(bad), 0, "%d of %d connections failed; first: %r"
                             % (len(bad), n, sorted(bad.items())[:5]))
            # All 1000 still open: the server keeps them; one more request on a few of them.
            for s in socks[:: n // 10]:
                s.setblocking(True)
                s.settimeout(cs.SOCK_TIMEOUT)
                s.sendall(req)
                buf = b""
                while parse_simple(buf) is None:
                    chunk = s.recv(65536)
                    self.assertTrue(chunk, "an idle connection among 1000 was closed")
                    buf += chunk
                self.assertEqual(parse_simple(buf)[0], 200)
        finally:
            sel.close()
            for s in socks:
                s.close()
        c = self.connect()
        self.get_ok(c, "/", "after 1000 concurrent connections")

    # -- fragmented input -------------------------------------------------------
    def test_request_one_byte_per_send(self):
        c = self.connect(nodelay=True)
        data = cs.build_request("GET", "/json", {"Accept": "*/*", "User-Agent": "tiny-sends"})
        for b in data:
            c.send(bytes([b]))
            time.sleep(0.002)
        self.check_hello(c.read_response(), "/json", "request sent one byte per send")
        self.check_hello(c.request("GET", "/"), "/", "next request on the same connection")

    def test_post_one_byte_per_send(self):
        c = self.connect(nodelay=True)
        data = cs.build_request("POST", "/todos", {"Content-Type": "application/json"},
                                json.dumps({"title": "byte by byte"}))
        for b in data:
            c.send(bytes([b]))
            time.sleep(0.002)
        resp = c.read_response("POST")
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertEqual(resp.json()["title"], "byte by byte")

    def test_chunked_one_byte_per_send(self):
        c = self.connect(nodelay=True)
        body = json.dumps({"title": "chunked tiny"}).encode()
        data = (b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\n"
                + chunked(body, [3, 5, 1]))
        for b in data:
            c.send(bytes([b]))
            time.sleep(0.002)
        resp = c.read_response("POST")
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertEqual(resp.json()["title"], "chunked tiny")

    # -- malformed requests -----------------------------------------------------
    def test_malformed_requests(self):
        self.assertGreaterEqual(len(MALFORMED), 15)
        for name, data, want in MALFORMED:
            with self.subTest(name):
                c = self.server.connect()
                try:
                    c.send(data)
                    try:
                        resp = c.read_response()
                    except cs.ProtocolError as e:
                        self.fail("%s: no response to %r: %s" % (name, data[:120], e))
                    wants = want if isinstance(want, tuple) else (want,)
                    self.assertIn(resp.status, wants, "%s: request %r: expected %s, got %r"
                                  % (name, data[:120], want, resp))
                    self.assertJsonError(resp, resp.status, name)
                    self.assertTrue(c.closed_by_peer(), "%s: connection not closed after %d" % (name, resp.status))
                finally:
                    c.close()
                with self.server.connect() as c2:
                    self.check_hello(c2.request("GET", "/"), "/", "new connection after: " + name)

    def test_unknown_method_is_not_a_framing_error(self):
        # A valid token the server does not route is 405 or 501, not a crash; keep-alive stays.
        c = self.connect()
        resp = c.request("BREW", "/")
        self.assertIn(resp.status, (405, 501), repr(resp))
        self.assertJsonError(resp, resp.status, "BREW /")
        self.check_hello(c.request("GET", "/"), "/", "after an unknown method")

    # -- Connection handling ----------------------------------------------------
    def test_connection_close_honoured(self):
        c = self.connect()
        resp = c.request("GET", "/", {"Connection": "close"})
        self.check_hello(resp, "/")
        self.assertIn("close", resp.tokens("Connection"), "response lacks Connection: close: %r" % resp)
        self.assertTrue(c.closed_by_peer(), "server did not close after Connection: close")

    def test_connection_close_on_post(self):
        c = self.connect()
        resp = c.request("POST", "/todos", {"Content-Type": "application/json", "Connection": "close"},
                         json.dumps({"title": "then close"}))
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertIn("close", resp.tokens("Connection"), repr(resp))
        self.assertTrue(c.closed_by_peer(), "server did not close after Connection: close")

    def test_http10_closes_by_default(self):
        c = self.connect()
        c.send(b"GET / HTTP/1.0\r\n\r\n")
        resp = c.read_response()
        self.check_hello(resp, "/", "HTTP/1.0")
        self.assertNotIn("keep-alive", resp.tokens("Connection"), repr(resp))
        self.assertTrue(c.closed_by_peer(), "HTTP/1.0 request without keep-alive: connection left open")

    def test_http10_keepalive(self):
        c = self.connect()
        for i in range(3):
            c.send(b"GET /json HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            resp = c.read_response()
            self.check_hello(resp, "/json", "HTTP/1.0 keep-alive request %d" % (i + 1))
            self.assertIn("keep-alive", resp.tokens("Connection"),
                          "HTTP/1.0 keep-alive response lacks Connection: keep-alive: %r" % resp)
        c.send(b"GET / HTTP/1.0\r\n\r\n")
        self.check_hello(c.read_response(), "/", "last HTTP/1.0 request")
        self.assertTrue(c.closed_by_peer(), "HTTP/1.0 request without keep-alive: connection left open")

    def test_http11_keepalive_by_default(self):
        c = self.connect()
        resp = self.get_ok(c)
        self.assertNotIn("close", resp.tokens("Connection"), repr(resp))
        self.assertFalse(c.closed_by_peer(timeout=0.5), "HTTP/1.1 connection closed after one request")
        self.get_ok(c, "/", "second request")

    # -- request bodies ---------------------------------------------------------
    def test_chunked_post(self):
        c = self.connect()
        body = json.dumps({"title": "chunked title", "completed": True}).encode()
        c.send(b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\n"
               + chunked(body, [1, 10, 7]))
        resp = c.read_response("POST")
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertCommonHeaders(resp, "chunked POST")
        doc = resp.json()
        self.assertEqual((doc["title"], doc["completed"]), ("chunked title", True), repr(resp))
        got = c.request("GET", "/todos/%d" % doc["id"])
        self.assertEqual(got.json(), doc, "GET after chunked POST on the same connection")

    def test_chunked_extensions_trailers_uppercase_hex(self):
        c = self.connect()
        body = json.dumps({"title": "x" * 30}).encode()  # 43 bytes: 0x1A + 0x11
        data = (b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\n"
                + b"1A;name=value\r\n" + body[:26] + b"\r\n"
                + b"%X\r\n" % (len(body) - 26) + body[26:] + b"\r\n"
                + b"0\r\nX-Trailer: yes\r\n\r\n")
        c.send(data + cs.build_request("GET", "/plaintext"))
        resp = c.read_response("POST")
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertEqual(resp.json()["title"], "x" * 30)
        self.check_hello(c.read_response(), "/plaintext", "pipelined after a chunked body with trailers")

    def test_chunked_post_split_sends(self):
        c = self.connect(nodelay=True)
        body = json.dumps({"title": "slow chunks"}).encode()
        c.send(b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\n")
        enc = chunked(body, [4, 4, 4])
        for part in (enc[:3], enc[3:9], enc[9:20], enc[20:]):
            time.sleep(0.05)
            c.send(part)
        resp = c.read_response("POST")
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertEqual(resp.json()["title"], "slow chunks")

    def test_expect_100_continue(self):
        c = self.connect()
        body = json.dumps({"title": "after continue"}).encode()
        c.send(b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Expect: 100-continue\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body))
        interim = c.read_response("POST")
        self.assertEqual(interim.status, 100, "expected 100 Continue before sending the body, got %r" % interim)
        self.assertTrue(interim.raw_head.startswith(b"HTTP/1.1 100 Continue\r\n"), repr(interim.raw_head))
        c.send(body)
        resp = c.read_response("POST")
        self.assertEqual(resp.status, 201, repr(resp))
        self.assertCommonHeaders(resp, "POST after 100 Continue")
        self.assertEqual(resp.json()["title"], "after continue")
        self.get_ok(c, "/", "after 100-continue")

    def test_expect_100_continue_too_large(self):
        # The body would be refused: the final status comes at once, without 100 Continue.
        c = self.connect()
        c.send(b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Expect: 100-continue\r\n"
               b"Content-Length: 5000000\r\n\r\n")
        resp = c.read_response("POST")
        self.assertJsonError(resp, 413, "Expect: 100-continue with a body over the limit")

    def test_post_then_get_pipelined_body_boundary(self):
        # The body ends exactly at Content-Length; the next bytes are the next request.
        c = self.connect()
        body = json.dumps({"title": "boundary"}).encode()
        c.send(cs.build_request("POST", "/todos", {"Content-Type": "application/json"}, body)
               + cs.build_request("GET", "/plaintext"))
        self.assertEqual(c.read_response("POST").status, 201)
        self.check_hello(c.read_response(), "/plaintext", "request right after a body")

    def test_expect_100_continue_body_sent_at_once(self):
        # A client may send the body without waiting; an optional 100 then the final response.
        c = self.connect()
        body = json.dumps({"title": "no wait"}).encode()
        c.send(b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Expect: 100-continue\r\n"
               b"Content-Length: %d\r\n\r\n" % len(body) + body + cs.build_request("GET", "/json"))
        resp = c.read_response("POST")
        if resp.status == 100:
            resp = c.read_response("POST")
        self.assertEqual(resp.status, 201, repr(resp))
        self.check_hello(c.read_response(), "/json", "after an Expect request whose body came at once")

    def test_body_of_1_mib(self):
        # A body at the limit is read in full (title too long: 422) and the connection stays usable.
        c = self.connect()
        body = json.dumps({"title": "z" * (1024 * 1024 - 13)}).encode()
        self.assertEqual(len(body), 1024 * 1024)
        resp = c.request("POST", "/todos", {"Content-Type": "application/json"}, body)
        self.assertJsonError(resp, 422, "1 MiB body with a too-long title")
        self.check_hello(c.request("GET", "/"), "/", "after a 1 MiB body")

    def test_chunked_body_of_many_chunks(self):
        c = self.connect()
        body = json.dumps({"title": "c" * 300000}).encode()
        c.send(b"POST /todos HTTP/1.1\r\n" + H + JSON_CT + b"Transfer-Encoding: chunked\r\n\r\n"
               + chunked(body, [1000] * 250 + [7] * 100))
        self.assertJsonError(c.read_response("POST"), 422, "300 KB chunked body with a too-long title")
        self.check_hello(c.request("GET", "/plaintext"), "/plaintext", "after a large chunked body")

    def test_headers_at_the_limits(self):
        # 100 fields (Host + 99) and a header section just under 16 KiB are accepted.
        c = self.connect()
        resp = c.request("GET", "/", [("X-H%d" % i, "v") for i in range(99)])
        self.check_hello(resp, "/", "100 header fields")
        big = cs.build_request("GET", "/", {"X-Big": "b" * 15000})
        self.assertLess(len(big), 16 * KIB)
        c.send(big)
        self.check_hello(c.read_response(), "/", "a 15 KB header section")

    def test_pipelined_1000_in_one_send(self):
        # Every request differs (GET /todos/<id> of 1,000 todos, each with
        # its own title), so that a read which ends inside a request and
        # keeps the wrong bytes for the next read cannot go unseen: with
        # requests repeating every few bytes, the wrong bytes were the same
        # bytes (issue 39).
        c = self.connect()
        ids = []
        for i in range(1000):
            resp = c.request("POST", "/todos", {"Content-Type": "application/json"},
                             json.dumps({"title": "pipelined-1000 #%d" % i}))
            self.assertEqual(resp.status, 201, resp)
            ids.append(resp.json()["id"])
        c.send(b"".join(cs.build_request("GET", "/todos/%d" % ids[i]) for i in range(1000)))
        for i in range(1000):
            resp = c.read_response()
            ctx = "pipelined response %d of 1000: %r" % (i + 1, resp)
            self.assertEqual(resp.status, 200, ctx)
            self.assertEqual((resp.json()["id"], resp.json()["title"]), (ids[i], "pipelined-1000 #%d" % i), ctx)
        for todo in ids:
            self.assertEqual(c.request("DELETE", "/todos/%d" % todo).status, 204)

    def test_request_split_across_reads(self):
        # A read that ends 10 bytes into the second request of a pipeline:
        # the server answers the first, keeps those 10 bytes, and parses
        # the second when the rest comes 100 ms later (issue 39: keeping
        # the read's first bytes instead of its tail passed every test).
        c = self.connect()
        second = cs.build_request("GET", "/json")
        for first in ("/plaintext", "/json", "/"):
            c.send(cs.build_request("GET", first) + second[:10])
            self.check_hello(c.read_response(), first, "the request before the split")
            time.sleep(0.1)
            c.send(second[10:])
            self.check_hello(c.read_response(), "/json", "the request split across reads after %s" % first)
        self.check_hello(c.request("GET", "/plaintext"), "/plaintext", "after the split requests")

    def test_pipelined_client_not_reading(self):
        # The client writes 20,000 requests before reading anything: the server must apply
        # back-pressure (stop reading while its sends block) and answer all, in order.
        c = self.connect()
        n = 20000
        data = b"".join(cs.build_request("GET", "/json" if i % 2 else "/plaintext") for i in range(n))
        err = []

        def writer():
            try:
                c.sock.sendall(data)
            except OSError as e:
                err.append(e)
        t = threading.Thread(target=writer, daemon=True)
        t.start()
        time.sleep(0.5)  # the buffers fill both ways
        c.sock.settimeout(8)
        for i in range(n):
            resp = c.read_response()
            if resp.status != 200 or resp.body != (b'{"message":"Hello, World!"}' if i % 2 else b"Hello, World!"):
                self.fail("response %d of %d: %r" % (i + 1, n, resp))
        t.join(5)
        self.assertFalse(err, "sending the requests failed: %r" % err)

    def test_absolute_form_target(self):
        # RFC 9112 3.2.2: a server MUST accept the absolute-form; it routes by its path.
        c = self.connect()
        resp = c.request("GET", "http://127.0.0.1/json")
        self.check_hello(resp, "/json", "absolute-form target")

    # -- every response -------------------------------------------------------
    def test_every_response_has_date_and_server(self):
        c = self.connect()
        for method, path, body in (("GET", "/", None), ("GET", "/nope", None), ("DELETE", "/todos", None),
                                   ("GET", "/todos", None), ("HEAD", "/json", None),
                                   ("POST", "/todos", "{"), ("GET", "/health", None)):
            resp = c.request(method, path, {"Content-Type": "application/json"} if body else None, body)
            self.assertCommonHeaders(resp, "%s %s" % (method, path))
        c2 = self.server.connect()
        with c2:
            c2.send(b"GET / HTTP/1.1\r\n" + H + b"X-A : b\r\n\r\n")
            self.assertCommonHeaders(c2.read_response(), "400 for a malformed request")


def parse_simple(buf):
    """(status, body as str) once @buf holds a full Content-Length response, else None."""
    i = buf.find(b"\r\n\r\n")
    if i < 0:
        return None
    head = buf[:i].decode("latin-1")
    m = re.match(r"HTTP/1\.[01] (\d{3})", head)
    cl = re.search(r"(?im)^content-length:\s*(\d+)\s*$", head)
    if not m or not cl:
        return ("bad head", head)
    n = int(cl.group(1))
    if len(buf) < i + 4 + n:
        return None
    return (int(m.group(1)), buf[i + 4:i + 4 + n].decode("utf-8", "replace"))


if __name__ == "__main__":
    socket.setdefaulttimeout(cs.SOCK_TIMEOUT)
    cs.main()

#!/usr/bin/python3
"""Request-smuggling and framing conformance table (RFC 9110, RFC 9112).

One row per case: (name, raw request bytes, expected status, must_close).
  - expected status: the status of the first response (no interim 100 Continue
    may come before it), or CLOSED when the server must close without
    answering;
  - must_close: True when the server must close the connection after its
    answer (a framing error: nothing after it can be trusted); False when the
    connection must stay usable, which is checked with a second request on it.
After every row a second request on a new connection must succeed, so no row
may leave the server broken.

Choices where the RFCs allow more than one answer:
  - a bare LF anywhere in the header section is rejected (RFC 9112 2.2 lets a
    recipient take it as a line end, but a proxy in front that keeps it
    inside a field value then sees other headers than we do); --allow-bare-lf
    accepts it there (checked below with a server of its own); inside the
    chunked coding, whose grammar is CRLF only (7.1), it is always rejected;
  - chunk extensions are checked against chunk-ext (7.1.1), at most 16 KiB of
    them in a body, each size line at most 4 KiB;
  - a method that is not RFC 9110's, nor PATCH, nor one a route serves gets
    501 (RFC 9110 9.1, 15.6.2) and the connection stays open;
  - an empty Host is rejected: the target of every request here is an "http"
    URI, whose host is never empty (RFC 9110 4.2.1, 7.2);
  - identical repeated Content-Length values are taken as one (RFC 9110 8.6);
  - CONNECT is answered 501 and the connection closed (a client may have sent
    tunnel bytes behind it);
  - HTTP/1.2 is served as HTTP/1.1 (RFC 9110 2.5); HTTP/2.0 gets 505.
"""

import sys

sys.dont_write_bytecode = True

import coring_server as cs  # noqa: E402

CLOSED = "closed"
H = b"Host: 127.0.0.1\r\n"
BODY = b'{"title":"t"}'                      # 13 bytes: POST /todos answers 201
CT = b"Content-Type: application/json\r\n"
POST = b"POST /todos HTTP/1.1\r\n" + H + CT
TE = b"Transfer-Encoding: chunked\r\n"
CHUNKED_BODY = b"d\r\n" + BODY + b"\r\n0\r\n\r\n"
GET = b"GET / HTTP/1.1\r\n"


def post_chunked(chunks, extra=b""):
    return POST + extra + TE + b"\r\n" + chunks


TABLE = [
    # -- Content-Length ----------------------------------------------------------------------
    ("CL and TE", POST + b"Content-Length: 13\r\n" + TE + b"\r\n" + CHUNKED_BODY, 400, True),
    ("TE and CL", POST + TE + b"Content-Length: 13\r\n\r\n" + CHUNKED_BODY, 400, True),
    ("TE and CL 0", POST + TE + b"Content-Length: 0\r\n\r\n" + CHUNKED_BODY, 400, True),
    ("duplicate equal CL", POST + b"Content-Length: 13\r\nContent-Length: 13\r\n\r\n" + BODY, 201, False),
    ("equal CL list", POST + b"Content-Length: 13, 13\r\n\r\n" + BODY, 201, False),
    ("differing CL fields", POST + b"Content-Length: 13\r\nContent-Length: 14\r\n\r\n" + BODY + b"x", 400, True),
    ("differing CL list", POST + b"Content-Length: 13, 12\r\n\r\n" + BODY, 400, True),
    ("CL +13", POST + b"Content-Length: +13\r\n\r\n" + BODY, 400, True),
    ("CL -1", POST + b"Content-Length: -1\r\n\r\n" + BODY, 400, True),
    ("CL 0x10", POST + b"Content-Length: 0x10\r\n\r\n" + BODY, 400, True),
    ("CL empty", POST + b"Content-Length:\r\n\r\n" + BODY, 400, True),
    ("CL with inner space", POST + b"Content-Length: 1 3\r\n\r\n" + BODY, 400, True),
    ("CL 1e3", POST + b"Content-Length: 1e3\r\n\r\n" + BODY, 400, True),
    ("CL over 64 bits", POST + b"Content-Length: 99999999999999999999999\r\n\r\n" + BODY, 400, True),
    ("CL 2^64", POST + b"Content-Length: 18446744073709551616\r\n\r\n" + BODY, 400, True),
    ("CL over the body limit", POST + b"Content-Length: 18446744073709551615\r\n\r\n", 413, True),
    ("CL 0 on GET", GET + H + b"Content-Length: 0\r\n\r\n", 200, False),
    # -- Transfer-Encoding -------------------------------------------------------------------
    ("TE chunked", post_chunked(CHUNKED_BODY), 201, False),
    ("TE Chunked upper case", POST + b"Transfer-Encoding: CHUNKED\r\n\r\n" + CHUNKED_BODY, 201, False),
    ("TE chunked not last", POST + b"Transfer-Encoding: chunked, gzip\r\n\r\n" + CHUNKED_BODY, 400, True),
    ("TE chunked twice in a list", POST + b"Transfer-Encoding: chunked, chunked\r\n\r\n" + CHUNKED_BODY, 400,
     True),
    ("TE chunked in two fields", POST + TE + TE + b"\r\n" + CHUNKED_BODY, 400, True),
    ("TE unknown coding", POST + b"Transfer-Encoding: gzip\r\n\r\n" + BODY, 501, True),
    ("TE gzip then chunked", POST + b"Transfer-Encoding: gzip, chunked\r\n\r\n" + CHUNKED_BODY, 501, True),
    ("TE identity", POST + b"Transfer-Encoding: identity\r\n\r\n" + BODY, 501, True),
    ("TE xchunked", POST + b"Transfer-Encoding: xchunked\r\n\r\n" + CHUNKED_BODY, 501, True),
    ("TE chunked with a parameter", POST + b"Transfer-Encoding: chunked;q=1\r\n\r\n" + CHUNKED_BODY, 400, True),
    ("TE empty", POST + b"Transfer-Encoding:\r\n\r\n" + BODY, 400, True),
    ("TE in HTTP/1.0", b"POST /todos HTTP/1.0\r\n" + CT + TE + b"\r\n" + CHUNKED_BODY, 400, True),
    ("TE with a control byte", POST + b"Transfer-Encoding: chunked\x0b\r\n\r\n" + CHUNKED_BODY, 400, True),
    # -- chunked coding ------------------------------------------------------------------------
    ("chunk size 123x", post_chunked(b"123x\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk size 0x0d", post_chunked(b"0xd\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk size -1", post_chunked(b"-1\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk size with leading space", post_chunked(b" d\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk size ended by a bare LF", post_chunked(b"d\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("last chunk ended by a bare LF", post_chunked(b"d\r\n" + BODY + b"\r\n0\n\r\n"), 400, True),
    ("chunk size ended by a bare CR", post_chunked(b"d\r" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk size over 64 bits", post_chunked(b"10000000000000000d\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk size 2^64-1", post_chunked(b"ffffffffffffffff\r\n" + BODY + b"\r\n0\r\n\r\n"), 413, True),
    ("chunk data then junk", post_chunked(b"d\r\n" + BODY + b"XX\r\n0\r\n\r\n"), 400, True),
    ("chunk data then bare LF", post_chunked(b"d\r\n" + BODY + b"\n0\r\n\r\n"), 400, True),
    ("chunk data then bare CR", post_chunked(b"d\r\n" + BODY + b"\r0\r\n\r\n"), 400, True),
    ("chunk extensions", post_chunked(b"d;a=1;b=\"x\"\r\n" + BODY + b"\r\n0;z\r\n\r\n"), 201, False),
    ("chunk extension with a bare LF", post_chunked(b"d;a=1\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk extension with a control byte", post_chunked(b"d;a=\x01\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk extensions with BWS and quoted-pairs",
     post_chunked(b"d ; a = \"x\\\"y\" ;b\r\n" + BODY + b"\r\n0;c=d\r\n\r\n"), 201, False),
    ("chunk extension without a name", post_chunked(b"d;\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk extension without a value", post_chunked(b"d;a=\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk extension with a space in a value", post_chunked(b"d;a=b c\r\n" + BODY + b"\r\n0\r\n\r\n"), 400,
     True),
    ("chunk extension with a separator in a name", post_chunked(b"d;a@b\r\n" + BODY + b"\r\n0\r\n\r\n"), 400,
     True),
    ("chunk extension with BWS before CRLF", post_chunked(b"d;a \r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk extension with an open quoted-string", post_chunked(b"d;a=\"x\r\n" + BODY + b"\r\n0\r\n\r\n"), 400,
     True),
    ("chunk extension with text after its quoted-string",
     post_chunked(b"d;a=\"x\"y\r\n" + BODY + b"\r\n0\r\n\r\n"), 400, True),
    ("chunk-size line over 4 KiB", post_chunked(b"d;a=" + b"x" * 4100 + b"\r\n" + BODY + b"\r\n0\r\n\r\n"), 400,
     True),
    ("chunk extensions 12 KiB in all",
     post_chunked(b"".join(b"1;e=" + b"x" * 1000 + b"\r\n" + BODY[i:i + 1] + b"\r\n" for i in range(12))
                  + b"1\r\n" + BODY[12:] + b"\r\n0\r\n\r\n"), 201, False),
    ("chunk extensions over 16 KiB in all",
     post_chunked(b"".join(b"1;e=" + b"x" * 1300 + b"\r\n" + BODY[i:i + 1] + b"\r\n" for i in range(13))
                  + b"0\r\n\r\n"), 400, True),
    ("trailers", post_chunked(b"d\r\n" + BODY + b"\r\n0\r\nX-T: 1\r\nX-U: 2\r\n\r\n"), 201, False),
    ("trailer with obs-fold", post_chunked(b"d\r\n" + BODY + b"\r\n0\r\nX-T: 1\r\n 2\r\n\r\n"), 400, True),
    ("trailer without a colon", post_chunked(b"d\r\n" + BODY + b"\r\n0\r\nX-T 1\r\n\r\n"), 400, True),
    ("trailer ended by a bare LF", post_chunked(b"d\r\n" + BODY + b"\r\n0\r\nX-T: 1\n\r\n"), 400, True),
    # -- line endings, bare CR and LF ----------------------------------------------------------
    ("bare CR in the request line", b"GET /\r HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("request line ended by a bare CR", b"GET / HTTP/1.1\r" + H + b"\r\n", 400, True),
    ("bare CR in a header value", GET + H + b"X-A: a\rb\r\n\r\n", 400, True),
    ("bare CR ending a header line", GET + H + b"X-A: a\rX-B: b\r\n\r\n", 400, True),
    ("bare LF inside the request line", b"GET /a\nb HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("lines ended by bare LF", b"GET / HTTP/1.1\nHost: 127.0.0.1\nX-A: a\n\n", 400, True),
    ("request line ended by a bare LF", b"GET / HTTP/1.1\n" + H + b"\r\n", 400, True),
    ("header line ended by a bare LF", GET + b"Host: 127.0.0.1\n\r\n", 400, True),
    ("header section ended by a bare LF", GET + H + b"\n", 400, True),
    ("bare LF before the request line", b"\n" + GET + H + b"\r\n", 400, True),
    # A proxy that keeps the LF in the value of Dummy sees no Content-Length.
    ("bare LF hiding a Content-Length in a field",
     GET + H + b"Dummy: x\nContent-Length: 23\r\n\r\nGET /404 HTTP/1.1\r\nX: \r\n\r\n", 400, True),
    ("empty lines before the request", b"\r\n\r\n" + GET + H + b"\r\n", 200, False),
    ("obs-fold", GET + H + b"X-A: a\r\n b\r\n\r\n", 400, True),
    ("obs-fold with a tab", GET + H + b"X-A: a\r\n\tb\r\n\r\n", 400, True),
    ("whitespace before the first header", GET + b" X-A: a\r\n" + H + b"\r\n", 400, True),
    ("space before the colon", GET + H + b"Content-Length : 0\r\n\r\n", 400, True),
    ("tab before the colon", GET + H + b"Transfer-Encoding\t: chunked\r\n\r\n", 400, True),
    # -- request line ----------------------------------------------------------------------
    ("two spaces after the method", b"GET  / HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("space after the version", b"GET / HTTP/1.1 \r\n" + H + b"\r\n", 400, True),
    ("lower-case version", b"GET / http/1.1\r\n" + H + b"\r\n", 400, True),
    ("HTTP/1.2 served as 1.1", b"GET / HTTP/1.2\r\n" + H + b"\r\n", 200, False),
    ("HTTP/2.0", b"GET / HTTP/2.0\r\n" + H + b"\r\n", 505, True),
    ("HTTP/0.9 request", b"GET /\r\n\r\n", 400, True),
    ("TLS handshake", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + b"\x00" * 40, 400, True),
    # -- Host --------------------------------------------------------------------------------
    ("missing Host in HTTP/1.1", b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n", 400, True),
    ("missing Host in HTTP/1.0", b"GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", 200, False),
    ("two Host fields", GET + H + b"Host: example.com\r\n\r\n", 400, True),
    ("two equal Host fields", GET + H + H + b"\r\n", 400, True),
    ("Host list", GET + b"Host: a.example, b.example\r\n\r\n", 400, True),
    ("Host with a space", GET + b"Host: a b\r\n\r\n", 400, True),
    ("Host with a path", GET + b"Host: example.com/x\r\n\r\n", 400, True),
    ("Host with userinfo", GET + b"Host: user@example.com\r\n\r\n", 400, True),
    ("Host with a bad port", GET + b"Host: example.com:8x\r\n\r\n", 400, True),
    ("Host with an open IPv6 literal", GET + b"Host: [::1\r\n\r\n", 400, True),
    ("Host IPv6 literal and port", GET + b"Host: [::1]:8080\r\n\r\n", 200, False),
    ("Host empty", GET + b"Host:\r\n\r\n", 400, True),
    ("Host port only", GET + b"Host: :8080\r\n\r\n", 400, True),
    ("Host IP literal that is no IPv6 address", GET + b"Host: [zz]\r\n\r\n", 400, True),
    ("Host IPv6 literal with two ::", GET + b"Host: [1::2::3]\r\n\r\n", 400, True),
    ("Host IPvFuture literal", GET + b"Host: [v1.x:y]\r\n\r\n", 200, False),
    ("Host IPv4 and port", GET + b"Host: 127.0.0.1:8080\r\n\r\n", 200, False),
    ("Host name and port", GET + b"Host: localhost:8080\r\n\r\n", 200, False),
    # -- request-target forms ----------------------------------------------------------------
    ("absolute-form", b"GET http://127.0.0.1/json HTTP/1.1\r\n" + H + b"\r\n", 200, False),
    ("absolute-form without a path", b"GET http://127.0.0.1 HTTP/1.1\r\n" + H + b"\r\n", 200, False),
    ("absolute-form with an empty host", b"GET http:///json HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("absolute-form missing //", b"GET http:/json HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("relative target", b"GET json HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("CONNECT", b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", 501, True),
    ("OPTIONS *", b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n", 204, False),
    ("GET *", b"GET * HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    # -- methods (RFC 9110 9.1, 15.5.6, 15.6.2) ------------------------------------------------
    ("unknown method FROB", b"FROB / HTTP/1.1\r\n" + H + b"\r\n", 501, False),
    ("unknown method MKCOLA on a route", b"MKCOLA /todos HTTP/1.1\r\n" + H + b"\r\n", 501, False),
    ("unknown method on an unknown path", b"FROB /no/such/path HTTP/1.1\r\n" + H + b"\r\n", 501, False),
    ("unknown method with a body", b"FROB /todos HTTP/1.1\r\n" + H + b"Content-Length: 13\r\n\r\n" + BODY, 501,
     False),
    ("lower-case get", b"get / HTTP/1.1\r\n" + H + b"\r\n", 501, False),
    ("known method the path does not allow", b"PATCH / HTTP/1.1\r\n" + H + b"\r\n", 405, False),
    ("TRACE the path does not allow", b"TRACE /todos HTTP/1.1\r\n" + H + b"\r\n", 405, False),
    # -- NUL and control bytes ---------------------------------------------------------------
    ("NUL in the method", b"G\x00T / HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("NUL in the target", b"GET /\x00 HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("NUL in a header name", GET + H + b"X-\x00A: a\r\n\r\n", 400, True),
    ("NUL in a header value", GET + H + b"X-A: a\x00b\r\n\r\n", 400, True),
    ("control byte in a header value", GET + H + b"X-A: a\x1bb\r\n\r\n", 400, True),
    ("DEL in a header value", GET + H + b"X-A: a\x7fb\r\n\r\n", 400, True),
    ("DEL in the target", b"GET /\x7f HTTP/1.1\r\n" + H + b"\r\n", 400, True),
    ("non-ASCII in a header name", GET + H + b"X-\xc3\xa9: a\r\n\r\n", 400, True),
    ("obs-text in a header value", GET + H + b"X-A: caf\xc3\xa9\r\n\r\n", 200, False),
    # -- sizes ---------------------------------------------------------------------------------
    ("method of 33 bytes", b"A" * 33 + b" / HTTP/1.1\r\n" + H + b"\r\n", 501, True),
    ("target over 16 KiB", b"GET /" + b"a" * 17000 + b" HTTP/1.1\r\n" + H + b"\r\n", 414, True),
    ("header name over 16 KiB", GET + H + b"X" * 17000 + b": a\r\n\r\n", 431, True),
    ("header value over 16 KiB", GET + H + b"X-A: " + b"a" * 17000 + b"\r\n\r\n", 431, True),
    ("101 header fields", GET + H + b"".join(b"X-%d: a\r\n" % i for i in range(100)) + b"\r\n", 431, True),
    # -- Expect ------------------------------------------------------------------------------
    ("Expect 100-continue with an unknown coding",
     POST + b"Expect: 100-continue\r\nTransfer-Encoding: gzip\r\n\r\n", 501, True),
    ("Expect 100-continue with CL and TE",
     POST + b"Expect: 100-continue\r\nContent-Length: 13\r\n" + TE + b"\r\n", 400, True),
    ("Expect 100-continue over the body limit",
     POST + b"Expect: 100-continue\r\nContent-Length: 2000000\r\n\r\n", 413, True),
    # Refused before its body matters: the final status, not 100 Continue (RFC 9110 10.1.1),
    # and the connection closed (the client may or may not send the body: what follows
    # cannot be framed).
    ("Expect 100-continue with a form body on a JSON route",
     b"POST /todos HTTP/1.1\r\n" + H + b"Content-Type: application/x-www-form-urlencoded\r\n"
     b"Expect: 100-continue\r\nContent-Length: 13\r\n\r\n", 415, True),
    ("Expect 100-continue with an unknown method",
     b"FROB /todos HTTP/1.1\r\n" + H + CT + b"Expect: 100-continue\r\nContent-Length: 13\r\n\r\n",
     501, True),
    ("Expect 100-continue with a method the path has not",
     b"PUT /todos HTTP/1.1\r\n" + H + CT + b"Expect: 100-continue\r\nContent-Length: 13\r\n\r\n",
     405, True),
    ("Expect 100-continue on a path no route has",
     b"POST /nowhere HTTP/1.1\r\n" + H + CT + b"Expect: 100-continue\r\nContent-Length: 13\r\n\r\n",
     404, True),
    ("Expect 100-continue chunked on a path no route has",
     b"POST /nowhere HTTP/1.1\r\n" + H + CT + b"Expect: 100-continue\r\n" + TE + b"\r\n", 404, True),
]


# (name, raw request, status, the "error" of the JSON body)
MESSAGES = [
    ("chunked over the body limit", post_chunked(b"200000\r\n"), 413, "body too large"),
    ("CL over the body limit", POST + b"Content-Length: 2000000\r\n\r\n", 413, "body too large"),
    ("TE chunked in two fields", POST + TE + TE + b"\r\n" + CHUNKED_BODY, 400, "chunked applied more than once"),
    ("TE chunked twice in a list", POST + b"Transfer-Encoding: chunked, chunked\r\n\r\n", 400,
     "chunked applied more than once"),
    ("TE chunked not last", POST + b"Transfer-Encoding: chunked, gzip\r\n\r\n", 400,
     "chunked is not the final coding"),
    ("invalid chunk extension", post_chunked(b"d;a=b c\r\n"), 400, "invalid chunk extension"),
    ("bare LF", GET + H + b"Dummy: x\nContent-Length: 23\r\n\r\n", 400, "bare LF"),
    ("unknown method", b"FROB / HTTP/1.1\r\n" + H + b"\r\n", 501, "method not implemented"),
]


class ConformanceTest(cs.SharedServerTestCase):

    def test_messages(self):
        for name, data, want, message in MESSAGES:
            with self.subTest(name):
                with self.server.connect() as c:
                    c.send(data)
                    resp = c.read_response()
                    self.assertEqual(resp.status, want, "%s: %r" % (name, resp))
                    self.assertEqual(resp.json().get("error"), message, "%s: %r" % (name, resp))

    def test_405_keeps_allow(self):
        with self.server.connect() as c:
            c.send(b"PATCH / HTTP/1.1\r\n" + H + b"\r\n")
            resp = c.read_response()
            self.assertEqual(resp.status, 405, repr(resp))
            self.assertIn("get", resp.tokens("Allow"), repr(resp))

    def test_table_size(self):
        self.assertGreaterEqual(len(TABLE), 40)
        names = [row[0] for row in TABLE]
        self.assertEqual(len(names), len(set(names)), "duplicate row names")

    def test_table(self):
        for name, data, want, must_close in TABLE:
            with self.subTest(name):
                self.check_row(name, data, want, must_close)
                with self.server.connect() as c2:
                    resp = c2.request("GET", "/json")
                    self.assertEqual(resp.status, 200, "%s: a new connection after it: %r" % (name, resp))
                self.assertTrue(self.server.running(), "%s: the server exited" % name)

    def check_row(self, name, data, want, must_close):
        ctx = "%s: request %r" % (name, data[:160])
        with self.server.connect() as c:
            c.send(data)
            if want == CLOSED:
                self.assertTrue(c.closed_by_peer(), ctx + ": not closed")
                return
            try:
                resp = c.read_response("HEAD" if data.startswith(b"HEAD") else "GET")
            except cs.ProtocolError as e:
                self.fail("%s: no response: %s" % (ctx, e))
            self.assertEqual(resp.status, want, "%s: expected %s first (no 100 Continue), got %r"
                             % (ctx, want, resp))
            self.assertCommonHeaders(resp, name)
            if resp.status >= 400:
                self.assertJsonError(resp, want, name)
            if must_close:
                self.assertEqual(resp.header("Connection", "").lower(), "close", ctx + ": no Connection: close")
                self.assertTrue(c.closed_by_peer(), "%s: connection not closed after %d" % (ctx, want))
            else:
                self.assertNotEqual(resp.header("Connection", "").lower(), "close", ctx + ": Connection: close")
                again = c.request("GET", "/json")
                self.assertEqual(again.status, 200, "%s: the same connection then: %r" % (ctx, again))


class AllowBareLfTest(cs.CoringTestCase):
    """--allow-bare-lf: a bare LF ends a line of the header section again."""

    ROWS = [
        ("lines ended by bare LF", b"GET / HTTP/1.1\nHost: 127.0.0.1\nX-A: a\n\n"),
        ("request line ended by a bare LF", b"GET / HTTP/1.1\n" + H + b"\r\n"),
        ("bare LF before the request line", b"\n" + GET + H + b"\r\n"),
    ]

    def test_bare_lf_accepted(self):
        with cs.CoringServer(threads=1, args=["--allow-bare-lf"]) as srv:
            for name, data in self.ROWS:
                with self.subTest(name), srv.connect() as c:
                    c.send(data)
                    resp = c.read_response()
                    self.assertEqual(resp.status, 200, "%s: %r" % (name, resp))
                    self.assertEqual(c.request("GET", "/json").status, 200, name)
            # Inside the chunked coding it stays an error.
            with srv.connect() as c:
                c.send(post_chunked(b"d\n" + BODY + b"\r\n0\r\n\r\n"))
                self.assertEqual(c.read_response().status, 400)
            srv.stop(expect_status=0)


if __name__ == "__main__":
    cs.main()

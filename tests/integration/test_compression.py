#!/usr/bin/python3
"""Response compression over real HTTP (docs/compression.md).

Every coding is decoded by a decoder independent of coring's compressors:
Python's gzip module (zlib), the zstandard and brotli modules (Debian
python3-zstandard, python3-brotli), and curl --compressed; the decoded body
is the identity one. Negotiation edge cases (q=0, "*", identity;q=0),
Vary on every compressible response, HEAD, 204, the minimum size, the todo
list cache after writes, --compression off and a list, CORING_COMPRESSION.
GET /users needs PostgreSQL (a throw-away cluster, as test_users.py).
"""

import sys

sys.dont_write_bytecode = True

import gzip  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import unittest  # noqa: E402

import coring_server as cs  # noqa: E402

try:
    import zstandard
except ImportError:  # the nix check's python3 has no modules
    zstandard = None
try:
    import brotli
except ImportError:
    brotli = None

SEEDED = 300


def decode(coding, data):
    """@data decoded from @coding by an independent decoder."""
    if coding == "gzip":
        return gzip.decompress(data)
    if coding == "zstd":
        # coring writes the content size in the frame; max_output_size
        # covers a frame without it too.
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=64 << 20)
    if coding == "br":
        return brotli.decompress(data)
    raise AssertionError("unknown coding %r" % coding)


def decoder_missing(coding):
    return (coding == "zstd" and zstandard is None) or (coding == "br" and brotli is None)


class CompressionTest(cs.CoringTestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-compression-")
        os.environ["DATABASE_URL"] = cls.postgres.url()
        cls.server = cs.CoringServer(threads=2, apps="hello,todo,users",
                                     args=["--seed-users", str(SEEDED)]).start()
        cls.addClassCleanup(cls.server.kill)
        with cls.server.connect() as c:
            for i in range(40):
                r = c.request("POST", "/todos", {"Content-Type": "application/json"},
                              {"title": "a todo long enough to make the list compressible %d" % i})
                assert r.status == 201, r

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    def get(self, path, accept=None, method="GET", server=None):
        headers = {"Accept-Encoding": accept} if accept is not None else {}
        with (server or self.server).connect() as c:
            return c.request(method, path, headers)

    def assertIdentity(self, resp, vary=True, what=""):
        ctx = " (%s) %r" % (what, resp)
        self.assertIsNone(resp.header("Content-Encoding"), "identity" + ctx)
        if vary:
            self.assertEqual(resp.tokens("vary"), ["accept-encoding"], "Vary" + ctx)
        else:
            self.assertFalse(resp.has_header("Vary"), "no Vary" + ctx)

    def test_each_coding_decodes(self):
        for path in ("/users", "/todos", "/users?limit=100"):
            plain = self.get(path)
            self.assertEqual(plain.status, 200, repr(plain))
            self.assertIdentity(plain, what=path)
            self.assertGreater(len(plain.body), 1024, path)
            for coding in ("gzip", "br", "zstd"):
                with self.subTest(path=path, coding=coding):
                    if decoder_missing(coding):
                        self.skipTest("no Python module to decode %s" % coding)
                    resp = self.get(path, coding)
                    self.assertEqual(resp.status, 200, repr(resp))
                    self.assertCommonHeaders(resp, coding)
                    self.assertEqual(resp.header("Content-Encoding"), coding, repr(resp))
                    self.assertEqual(resp.tokens("vary"), ["accept-encoding"], repr(resp))
                    self.assertEqual(int(resp.header("Content-Length")), len(resp.body))
                    self.assertLess(len(resp.body), len(plain.body) / 2, "it compressed")
                    self.assertEqual(decode(coding, resp.body), plain.body)
                    json.loads(decode(coding, resp.body))

    def test_curl_compressed(self):
        curl = shutil.which("curl")
        if not curl:
            self.skipTest("no curl")
        url = "http://%s:%d/users" % (self.server.host, self.server.port)
        plain = self.get("/users").body
        out = subprocess.run([curl, "-sS", "--compressed", "-D", "/dev/stderr", url],
                             capture_output=True, timeout=30, check=True)
        head = out.stderr.decode("latin-1").lower()
        self.assertRegex(head, r"content-encoding: (zstd|br|gzip)\r\n", head)
        self.assertEqual(out.stdout, plain)
        for coding in ("gzip", "br", "zstd"):
            out = subprocess.run([curl, "-sS", "--compressed", "-H", "Accept-Encoding: " + coding,
                                  "-D", "/dev/stderr", url], capture_output=True, timeout=30, check=True)
            self.assertIn("content-encoding: %s\r\n" % coding, out.stderr.decode("latin-1").lower())
            self.assertEqual(out.stdout, plain, coding)

    def test_negotiation(self):
        cases = [
            ("gzip, deflate, br, zstd", "zstd"),   # equal q: zstd, br, gzip
            ("gzip, br", "br"),
            ("zstd;q=0.5, gzip;q=0.8", "gzip"),
            ("zstd;q=0, br;q=0, *", "gzip"),
            ("*", "zstd"),
            ("gzip;q=0.5, identity", None),        # identity rated higher
            ("gzip;q=0", None),                    # q=0: not acceptable
            ("*;q=0", None),
            ("identity;q=0", None),                # nothing acceptable: identity, not 406
            ("identity;q=0, *;q=0", None),
            ("compress, deflate", None),           # nothing we have
            ("gzip;q=2", None),                    # does not parse: ignored
            ("", None),
        ]
        for accept, want in cases:
            with self.subTest(accept=accept):
                resp = self.get("/users", accept)
                self.assertEqual(resp.status, 200, repr(resp))
                self.assertEqual(resp.header("Content-Encoding"), want, repr(resp))
                self.assertEqual(resp.tokens("vary"), ["accept-encoding"], repr(resp))

    def test_head_is_not_compressed(self):
        plain = self.get("/users")
        resp = self.get("/users", "gzip, br, zstd", method="HEAD")
        self.assertEqual(resp.status, 200)
        self.assertIdentity(resp, what="HEAD")
        self.assertEqual(int(resp.header("Content-Length")), len(plain.body))
        # The connection stays in step: nothing followed the head.
        with self.server.connect() as c:
            c.request("HEAD", "/users", {"Accept-Encoding": "gzip"})
            self.assertEqual(c.request("GET", "/").json()["message"], "hello world")

    def test_no_content_is_not_compressed(self):
        with self.server.connect() as c:
            r = c.request("POST", "/todos", {"Content-Type": "application/json"}, {"title": "x"})
            r = c.request("DELETE", "/todos/%d" % r.json()["id"], {"Accept-Encoding": "gzip"})
            self.assertEqual(r.status, 204)
            self.assertIdentity(r, vary=False, what="204")
            self.assertCommonHeaders(r, "204")

    def test_minimum_size(self):
        small = self.get("/", "gzip")
        self.assertEqual(small.body, b'{"message":"hello world"}')
        self.assertIdentity(small, vary=False, what="under 1024 bytes")
        err = self.get("/users/999999999", "gzip")
        self.assertEqual(err.status, 404)
        self.assertIdentity(err, vary=False, what="a small error")
        with cs.CoringServer(threads=1, apps="hello",
                             args=["--compression-min-bytes", "20"]) as srv:
            r = self.get("/", "gzip", server=srv)
            self.assertEqual(r.header("Content-Encoding"), "gzip", repr(r))
            self.assertEqual(gzip.decompress(r.body), b'{"message":"hello world"}')
            r = self.get("/plaintext", "gzip", server=srv)  # 13 bytes: under 20
            self.assertIdentity(r, vary=False, what="under --compression-min-bytes")
            srv.stop(expect_status=0)

    def test_todo_list_cache_stays_exact(self):
        """The cached list's encoded bodies follow every write."""
        for coding in ("gzip", "br", "zstd"):
            if decoder_missing(coding):
                continue
            with self.subTest(coding=coding):
                with self.server.connect() as c:
                    before = c.request("GET", "/todos", {"Accept-Encoding": coding})
                    again = c.request("GET", "/todos", {"Accept-Encoding": coding})
                    self.assertEqual(again.body, before.body, "a hit sends the same bytes")
                    r = c.request("POST", "/todos", {"Content-Type": "application/json"},
                                  {"title": "added for " + coding})
                    self.assertEqual(r.status, 201)
                    after = c.request("GET", "/todos", {"Accept-Encoding": coding})
                    self.assertEqual(after.header("Content-Encoding"), coding)
                    titles = [t["title"] for t in json.loads(decode(coding, after.body))]
                    self.assertIn("added for " + coding, titles)
                    self.assertEqual(json.loads(decode(coding, after.body)),
                                     c.request("GET", "/todos").json())

    def test_off_and_lists(self):
        with cs.CoringServer(threads=1, apps="hello,todo", args=["--compression", "off",
                                                                 "--compression-min-bytes", "1"]) as srv:
            self.assertIdentity(self.get("/", "gzip, br, zstd", server=srv), vary=False, what="off")
            srv.stop(expect_status=0)
        with cs.CoringServer(threads=1, apps="hello,todo", args=["--compression", "gzip",
                                                                 "--compression-min-bytes", "1"]) as srv:
            self.assertEqual(self.get("/", "zstd, br, gzip;q=0.1", server=srv).header("Content-Encoding"),
                             "gzip")
            self.assertIdentity(self.get("/", "zstd, br", server=srv), what="gzip only")
            srv.stop(expect_status=0)
        os.environ.update(CORING_COMPRESSION="off", CORING_COMPRESSION_MIN_BYTES="1")
        try:
            with cs.CoringServer(threads=1, apps="hello") as srv:
                self.assertIdentity(self.get("/", "gzip", server=srv), vary=False,
                                    what="CORING_COMPRESSION=off")
                srv.stop(expect_status=0)
        finally:
            del os.environ["CORING_COMPRESSION"], os.environ["CORING_COMPRESSION_MIN_BYTES"]
        bad = cs.run_cli(["--compression", "deflate", "--check-config"], cs.clean_env())
        self.assertEqual(bad.returncode, 2, bad)
        self.assertIn("--compression", bad.stderr)


if __name__ == "__main__":
    cs.main()

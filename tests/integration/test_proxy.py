#!/usr/bin/python3
"""Integration test of --trusted-proxies: the client behind a reverse proxy.

coring (hello, --access-log, JSON lines) on 127.0.0.1; this test is the
peer, 127.0.0.1. Each request sends an X-Forwarded-For of its own, and the
access line's "client" says whom coring took for the client
(coring/http/proxy.h):

- without --trusted-proxies, and with a list that does not hold the peer
  (10.0.0.0/8), the header is a spoof: the client is the peer, 127.0.0.1;
- with the peer trusted (127.0.0.1), the rightmost entry that is not a
  trusted proxy is the client: "6.6.6.6, 203.0.113.7" gives 203.0.113.7,
  and with 203.0.113.0/24 trusted too, 6.6.6.6; several X-Forwarded-For
  fields read as one list; a port and brackets dropped; an entry that is
  not an address stops the walk at the last trusted hop;
- a bad list is refused at start (exit 2, the entry named).
"""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

import coring_server as cs  # noqa: E402


class ProxyCase(cs.CoringTestCase):
    args = []
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = cs.CoringServer(threads=1, apps="hello", args=["--log-format", "json", "--access-log"]
                                     + cls.args).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    def client_of(self, tag, *xff):
        """The access line's client for GET /?TAG sent with the X-Forwarded-For fields @xff."""
        headers = [("X-Forwarded-For", v) for v in xff]
        with cs.Conn(cs.HOST, self.server.port) as c:
            self.assertEqual(c.request("GET", "/?" + tag, headers=headers).status, 200)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with self.server._lock:
                lines = list(self.server._lines)
            for line in lines:
                o = json.loads(line)
                if o.get("target") == "/?" + tag:
                    return o["client"]
            time.sleep(0.02)
        self.fail("no access line for /?%s" % tag)


class NoTrustedProxiesTest(ProxyCase):
    def test_forwarded_for_is_ignored(self):
        self.assertEqual(self.client_of("none", "6.6.6.6"), cs.HOST)
        self.assertEqual(self.client_of("none-empty"), cs.HOST)


class UntrustedPeerTest(ProxyCase):
    args = ["--trusted-proxies", "10.0.0.0/8, ::1"]

    def test_spoofed_forwarded_for_from_an_untrusted_peer_is_ignored(self):
        self.assertEqual(self.client_of("spoof", "6.6.6.6"), cs.HOST)
        self.assertEqual(self.client_of("spoof-chain", "6.6.6.6, 10.1.2.3"), cs.HOST)


class TrustedPeerTest(ProxyCase):
    args = ["--trusted-proxies", "127.0.0.1"]

    def test_rightmost_untrusted_hop(self):
        self.assertEqual(self.client_of("one", "203.0.113.7"), "203.0.113.7")
        # The client made up "6.6.6.6"; the proxy appended what it saw.
        self.assertEqual(self.client_of("chain", "6.6.6.6, 203.0.113.7"), "203.0.113.7")
        # Several fields are one list, the last field's last entry rightmost.
        self.assertEqual(self.client_of("fields", "6.6.6.6", "198.51.100.9"), "198.51.100.9")
        self.assertEqual(self.client_of("v6", "2001:db8::7"), "2001:db8::7")
        self.assertEqual(self.client_of("ports", "[2001:DB8::8]:4711"), "2001:db8::8")
        self.assertEqual(self.client_of("port4", "203.0.113.9:4711"), "203.0.113.9")

    def test_no_or_bad_forwarded_for_gives_the_peer(self):
        self.assertEqual(self.client_of("bare"), cs.HOST)
        self.assertEqual(self.client_of("unknown", "unknown"), cs.HOST)
        self.assertEqual(self.client_of("junk", "203.0.113.7, not-an-address"), cs.HOST)


class TrustedChainTest(ProxyCase):
    args = ["--trusted-proxies", "127.0.0.0/8,203.0.113.0/24"]

    def test_every_trusted_hop_is_skipped(self):
        self.assertEqual(self.client_of("chain2", "6.6.6.6, 203.0.113.7"), "6.6.6.6")
        self.assertEqual(self.client_of("spoof2", "1.1.1.1, 6.6.6.6, 203.0.113.7"), "6.6.6.6")
        # Every hop trusted: the leftmost is as far as can be known.
        self.assertEqual(self.client_of("alltrusted", "203.0.113.5, 203.0.113.7"), "203.0.113.5")
        # An entry that is not an address: the last trusted hop read.
        self.assertEqual(self.client_of("junk2", "x, 203.0.113.7"), "203.0.113.7")


class BadListTest(unittest.TestCase):
    def test_bad_lists_are_refused(self):
        for value, word in (("", "empty"), ("10.0.0.0/33", "prefix"), ("10.0.0.1/8", "past its prefix"),
                            ("localhost", "not an IPv4 or IPv6 address"), ("10.0.0.0/8,,::1", "empty")):
            r = subprocess.run([cs.binary(), "--check-config", "--apps", "hello", "--trusted-proxies", value],
                               capture_output=True, text=True, timeout=10)
            self.assertEqual(r.returncode, 2, "%r: %r" % (value, r))
            self.assertIn("--trusted-proxies", r.stderr, value)
            self.assertIn(word, r.stderr, value)
        r = subprocess.run([cs.binary(), "--check-config", "--apps", "hello", "--trusted-proxies",
                            " 10.0.0.0/8 , fd00::/8,127.0.0.1 "], capture_output=True, text=True, timeout=10)
        self.assertEqual(r.returncode, 0, r)


if __name__ == "__main__":
    cs.main()

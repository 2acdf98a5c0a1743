#!/usr/bin/python3
"""Integration test of --rate-limit (docs/rate-limits.md).

coring --threads 2 (hello) with --rate-limit 100 and the default burst
(100). For 3 s, 64 keep-alive connections from 127.0.0.1 send GET / as
fast as they are answered, far above 100 a second, landing on both worker
threads (SO_REUSEPORT spreads them); the 200s they get are the burst plus
100 a second of the time they sent, within 5 % (the client's window is
not quite the server's), not the threads times it. Meanwhile:

- a client from another address (127.0.0.2, its socket bound to it) sends
  20 a second and gets every one: a bucket of its own;
- GET /livez from 127.0.0.1, whose bucket is empty, is never refused (an
  exempt path);
- every 429 carries {"error":"rate limit exceeded"}, Retry-After (an
  integer >= 1) and RateLimit-Policy and RateLimit, which parse as
  structured-field lists (RFC 8941 section 3.1) with the values
  docs/rate-limits.md gives; the connection stays open after it;
- http_rate_limited_total counts exactly the 429s the clients saw.

Behind --trusted-proxies 127.0.0.1, two X-Forwarded-For clients get a
bucket each, and an untrusted peer's X-Forwarded-For is not believed.
Options that make no sense are refused at start (exit 2).
"""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import re  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402

import coring_server as cs  # noqa: E402

RATE = 100
FLOOD_SECONDS = 3.0
FLOOD_CONNECTIONS = 64
OTHER = "127.0.0.2"


class BoundConn(cs.Conn):
    """A Conn whose socket is bound to the local address @source first."""

    def __init__(self, host, port, source, timeout=cs.SOCK_TIMEOUT):
        self.sock = socket.create_connection((host, port), timeout=timeout,
                                             source_address=(source, 0))
        self.sock.settimeout(timeout)
        self.buf = b""
        self.eof = False
        self.reset = False


# -- RFC 8941 section 3.1 lists of items, the types these fields use ----------

KEY = re.compile(r"[a-z*][a-z0-9_.*-]*")
TOKEN = re.compile(r"[A-Za-z*][!#$%&'*+.^_`|~0-9A-Za-z:/-]*")
INTEGER = re.compile(r"-?[0-9]{1,15}")


def parse_bare_item(s, i):
    """(value, next index) of the bare item at s[i]: a string, an integer or a token."""
    if s[i] == '"':
        out, i = [], i + 1
        while True:
            if i >= len(s):
                raise ValueError("unterminated string")
            c = s[i]
            if c == "\\":
                if i + 1 >= len(s) or s[i + 1] not in '"\\':
                    raise ValueError("bad escape")
                out.append(s[i + 1])
                i += 2
            elif c == '"':
                return "".join(out), i + 1
            elif ord(c) < 0x20 or ord(c) > 0x7e:
                raise ValueError("bad character in string")
            else:
                out.append(c)
                i += 1
    m = INTEGER.match(s, i)
    if m and not (m.end() < len(s) and s[m.end()] == "."):
        return int(m.group()), m.end()
    m = TOKEN.match(s, i)
    if m:
        return m.group(), m.end()
    raise ValueError("no bare item at %d in %r" % (i, s))


def parse_sf_list(s):
    """[(bare item, {param: value})] of the sf-list @s, or ValueError."""
    items, i = [], 0
    s = s.strip(" ")
    while True:
        value, i = parse_bare_item(s, i)
        params = {}
        while i < len(s) and s[i] == ";":
            i += 1
            while i < len(s) and s[i] == " ":
                i += 1
            m = KEY.match(s, i)
            if not m:
                raise ValueError("bad key at %d in %r" % (i, s))
            i = m.end()
            v = True
            if i < len(s) and s[i] == "=":
                v, i = parse_bare_item(s, i + 1)
            params[m.group()] = v
        items.append((value, params))
        while i < len(s) and s[i] in " \t":
            i += 1
        if i == len(s):
            return items
        if s[i] != ",":
            raise ValueError("expected ',' at %d in %r" % (i, s))
        i += 1
        while i < len(s) and s[i] in " \t":
            i += 1
        if i == len(s):
            raise ValueError("trailing comma in %r" % s)


class StructuredFieldParserTest(unittest.TestCase):
    """The parser the checks below rely on takes what RFC 8941 does, not more."""

    def test_parser(self):
        self.assertEqual(parse_sf_list('"default";q=100;w=1'), [("default", {"q": 100, "w": 1})])
        self.assertEqual(parse_sf_list('a, "b";x'), [("a", {}), ("b", {"x": True})])
        for bad in ['"default";q=100;', '"default" q=1', '"default";Q=1', '"default",',
                    '"unterminated', '"default";q=1.5x']:
            with self.assertRaises(ValueError, msg=bad):
                parse_sf_list(bad)


class FloodTest(cs.CoringTestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = cs.CoringServer(threads=2, apps="hello",
                                     args=["--rate-limit", str(RATE)]).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    def check_refusal(self, resp):
        """A 429 as docs/rate-limits.md says: body, Retry-After, the RateLimit fields."""
        self.assertEqual(resp.json(), {"error": "rate limit exceeded"})
        self.assertTrue(resp.header("Content-Type", "").startswith("application/json"))
        retry = resp.header("Retry-After")
        self.assertRegex(retry or "", r"^[0-9]+$", "Retry-After: delay-seconds")
        self.assertGreaterEqual(int(retry), 1)
        policy = parse_sf_list(resp.header("RateLimit-Policy"))
        self.assertEqual(policy, [("default", {"q": RATE, "w": 1})])
        state = parse_sf_list(resp.header("RateLimit"))
        self.assertEqual(len(state), 1)
        self.assertEqual(state[0][0], "default")
        self.assertEqual(state[0][1].get("r"), 0)
        self.assertEqual(state[0][1].get("t"), int(retry))
        self.assertFalse("close" in resp.tokens("Connection"), "a 429 keeps the connection")

    def test_flood_is_held_to_the_rate_across_threads(self):
        srv = self.server
        limited_before = srv.metric("http_rate_limited_total")
        conns = [srv.connect() for _ in range(FLOOD_CONNECTIONS)]
        counts = {"ok": 0, "limited": 0, "other": []}
        refusal = []
        lock = threading.Lock()
        start = threading.Barrier(FLOOD_CONNECTIONS + 2)
        stop = threading.Event()

        def flood(c):
            ok = limited = 0
            start.wait()
            while not stop.is_set():
                resp = c.request("GET", "/")
                if resp.status == 200:
                    ok += 1
                elif resp.status == 429:
                    limited += 1
                    if not refusal:
                        refusal.append(resp)
                else:
                    with lock:
                        counts["other"].append(resp.status)
            with lock:
                counts["ok"] += ok
                counts["limited"] += limited

        other = {"sent": 0, "ok": 0, "statuses": []}

        def other_client():
            with BoundConn(srv.host, srv.port, OTHER) as c:
                start.wait()
                next_at = time.monotonic()
                while not stop.is_set():
                    resp = c.request("GET", "/")
                    other["sent"] += 1
                    other["ok"] += resp.status == 200
                    if resp.status != 200:
                        other["statuses"].append(resp.status)
                    next_at += 0.05  # 20 a second
                    time.sleep(max(0.0, next_at - time.monotonic()))

        threads = [threading.Thread(target=flood, args=(c,)) for c in conns]
        threads.append(threading.Thread(target=other_client))
        for t in threads:
            t.start()
        start.wait()
        began = time.monotonic()
        # An exempt path from the flooded address, while its bucket is empty.
        time.sleep(0.5)
        with srv.connect() as c:
            livez = [c.request("GET", "/livez").status for _ in range(50)]
        time.sleep(max(0.0, began + FLOOD_SECONDS - time.monotonic()))
        stop.set()
        for t in threads:
            t.join(30)
        window = time.monotonic() - began
        for c in conns:
            c.close()

        self.assertEqual(counts["other"], [], "statuses other than 200 and 429")
        sent = counts["ok"] + counts["limited"]
        self.assertGreater(sent, 4 * RATE * window, "the flood must be well above the rate")
        expected = RATE + RATE * window  # the burst (default: the rate), then the rate
        print("flood: %d requests in %.2f s, %d admitted (%.1f/s past the burst), expected %.0f"
              % (sent, window, counts["ok"], (counts["ok"] - RATE) / window, expected))
        self.assertLessEqual(abs(counts["ok"] - expected), 0.05 * expected + 2,
                             "admitted %d, expected %.0f within 5 %%" % (counts["ok"], expected))
        self.assertEqual(set(livez), {200}, "/livez is exempt")
        self.assertGreater(other["sent"], 30)
        self.assertEqual(other["statuses"], [], "127.0.0.2 has a bucket of its own")
        self.assertTrue(refusal)
        self.check_refusal(refusal[0])
        self.assertEqual(srv.metric("http_rate_limited_total") - limited_before,
                         counts["limited"])

    def test_refusal_keeps_the_connection_and_admitted_carry_no_fields(self):
        # Its own address: the flood's bucket is not this one's.
        with BoundConn(self.server.host, self.server.port, "127.0.0.3") as c:
            first = c.request("GET", "/")
            self.assertEqual(first.status, 200)
            self.assertIsNone(first.header("RateLimit"), "admitted responses carry no fields")
            self.assertIsNone(first.header("RateLimit-Policy"))
            statuses = [c.request("GET", "/").status for _ in range(RATE + 20)]
            self.assertIn(429, statuses)
            # The same connection, still served after its 429s: /metrics is
            # exempt, and the next refusal comes on it too.
            self.assertEqual(c.request("GET", "/metrics").status, 200)
            refused = None
            for _ in range(4 * RATE):
                resp = c.request("GET", "/json")
                if resp.status == 429:
                    refused = resp
                    break
            self.assertIsNotNone(refused)
            self.check_refusal(refused)
        self.server.check_one_answer()


class ProxyTest(cs.CoringTestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = cs.CoringServer(threads=2, apps="hello",
                                     args=["--rate-limit", "5", "--rate-burst", "3",
                                           "--trusted-proxies", "127.0.0.1"]).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

    def statuses(self, n, xff=None, source=None):
        headers = [("X-Forwarded-For", xff)] if xff else []
        src = source or cs.HOST
        with BoundConn(self.server.host, self.server.port, src) as c:
            return [c.request("GET", "/", headers=headers).status for _ in range(n)]

    def test_forwarded_clients_get_their_own_buckets(self):
        self.assertEqual(self.statuses(5, "203.0.113.1"), [200, 200, 200, 429, 429])
        self.assertEqual(self.statuses(5, "203.0.113.2"), [200, 200, 200, 429, 429])
        # The proxy's own requests (no X-Forwarded-For) are the proxy's bucket.
        self.assertEqual(self.statuses(3), [200, 200, 200])

    def test_untrusted_peer_cannot_choose_its_bucket(self):
        # 127.0.0.4 is not trusted: its X-Forwarded-For is a spoof, its
        # bucket its own address's whatever the header says.
        got = [self.statuses(1, "198.51.100.%d" % i, source="127.0.0.4")[0] for i in range(5)]
        self.assertEqual(got, [200, 200, 200, 429, 429])


class OptionsTest(unittest.TestCase):
    def refused(self, args, words):
        r = cs.run_cli(["--check-config", "--apps", "hello"] + args, cs.clean_env())
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(words, r.stderr)

    def test_refused(self):
        self.refused(["--rate-limit", "10", "--rate-limit-exempt", "livez"], "starts with '/'")
        self.refused(["--rate-burst", "10"], "needs --rate-limit")
        self.refused(["--rate-limit", "-1"], "--rate-limit")
        self.refused(["--rate-limit", "10", "--rate-burst", "0"], "--rate-burst")

    def test_accepted(self):
        for args in (["--rate-limit", "off"], ["--rate-limit", "0"],
                     ["--rate-limit", "10", "--rate-limit-exempt", ""]):
            r = cs.run_cli(["--check-config", "--apps", "hello"] + args,
                           cs.clean_env())
            self.assertEqual(r.returncode, 0, "%s: %s" % (args, r.stderr))


if __name__ == "__main__":
    cs.main()

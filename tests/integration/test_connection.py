#!/usr/bin/python3
"""Integration tests of the connection loop's memory and CPU bounds.

- A connection gives back the buffers of a large request once it is
  answered: 200 connections that each POST a ~1 MB body and then idle cost
  no more than 32 KiB each over the same connections idle after a small
  request (RSS from /proc/PID/status).
- A connection between requests holds no coroutine: 2,000 keep-alive
  connections idle after a GET / (with --access-log) are idle connections
  in the runtime's metrics, with no coroutine alive for them, and cost the
  server's RSS at most 1 KiB each.
- Memory returns to the system after a burst: 200 connections that POST
  a ~1 MB body each at the same time (answered 422, nothing stored) and
  then close leave the server's RSS within 4 MiB of what it was before,
  2 s after they closed.
- A chunked body is decoded once, not again from its first chunk on every
  read: while a 1 MB body of 1-byte chunks trickles in, a concurrent
  `GET /` on the same (single) worker thread keeps its p99 under 10 ms,
  and the upload costs the server CPU within a small factor of the same
  body sent with Content-Length in as many pieces (/proc/PID/stat).
- A header section sent a byte at a time (slowloris) is searched from
  where the last read stopped, not from its first byte: 4, 8 and 16 KiB of
  it cost the request parser the same few bytes read per byte sent
  (http_parser_read_bytes_total), where a search from the first byte costs
  n/2 per byte; and a body trickled in behind a large header section costs
  no parse of that section per read. The server's CPU (/proc/PID/stat) for
  each is printed, not asserted.

Each test prints its figures.
"""

import sys

sys.dont_write_bytecode = True

import selectors  # noqa: E402
import socket  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

BIG = 1000 * 1000            # body bytes, under the 1 MiB default limit
CONNECTIONS = 200
IDLE_BOUND_KIB = 32          # per connection, over the small-request baseline


def post_todo_head(length=None, chunked=False):
    lines = ["POST /todos HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    else:
        lines.append("Content-Length: %d" % length)
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def big_todo(size=BIG):
    """A valid JSON todo whose title is too long: read whole, parsed, answered 422."""
    prefix, suffix = b'{"title":"', b'"}'
    return prefix + b"x" * (size - len(prefix) - len(suffix)) + suffix


def warm_up(test, server, request):
    """Send @request (a large body the todo app refuses, 422) on 24
    connections that then close, so that the baseline already holds the
    per-thread memory a large body touches: malloc's, the JSON parser's,
    and every provided receive buffer (512 x 16 KiB a thread, used in turn:
    ~12 uploads a thread)."""
    for _ in range(24):
        with server.connect(timeout=30) as c:
            c.send(request)
            test.assertEqual(c.read_response("POST").status, 422)


class IdleBuffersTest(cs.CoringTestCase):
    def test_idle_connections_give_back_large_request_buffers(self):
        limit = cs.raise_nofile_limit()
        if limit < CONNECTIONS + 64:
            self.skipTest("RLIMIT_NOFILE %d is too low" % limit)
        body = big_todo()
        request = post_todo_head(len(body)) + body
        with cs.CoringServer(threads=2, apps="hello,todo") as server:
            # Under a sanitizer only the behaviour is checked: fewer of them.
            skip_bound = cs.sanitizer() is not None
            n = 20 if skip_bound else CONNECTIONS
            warm_up(self, server, request)
            conns = []
            try:
                for _ in range(n):
                    c = server.connect(timeout=30)
                    conns.append(c)
                    resp = c.request("GET", "/")
                    self.assertEqual(resp.status, 200, resp)
                time.sleep(0.3)
                baseline = server.rss_kib()
                for c in conns:
                    c.send(request)
                    resp = c.read_response("POST")
                    self.assertJsonError(resp, 422, "1 MB title")
                # Every connection is still open and served.
                for c in conns[:: n // 10]:
                    self.assertEqual(c.request("GET", "/").status, 200)
                time.sleep(0.3)
                after = server.rss_kib()
            finally:
                for c in conns:
                    c.close()
        growth = after - baseline
        print("\nidle RSS: %d KiB with %d connections idle after GET /, %d KiB after each "
              "POSTed %d bytes: %+d KiB, %.1f KiB a connection (bound %d)"
              % (baseline, n, after, BIG, growth, growth / n, IDLE_BOUND_KIB),
              file=sys.stderr)
        if skip_bound:
            self.skipTest("sanitizer build: RSS bound not asserted")
        self.assertLessEqual(growth, n * IDLE_BOUND_KIB,
                             "idle connections kept their large request's buffers")


def idle_after_one_get(server, n, deadline):
    """@n sockets to @server, each having sent GET / and read its answer
    (non-blocking, a few hundred handshakes at a time); raises when not all
    are answered by @deadline."""
    request = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    socks, pending = [], {}
    sel = selectors.DefaultSelector()
    while (len(socks) < n or pending) and time.monotonic() < deadline:
        while len(pending) < 256 and len(socks) + len(pending) < n:
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex((server.host, server.port))
            pending[s] = None
            sel.register(s, selectors.EVENT_WRITE)
        for key, ev in sel.select(0.5):
            s = key.fileobj
            if pending[s] is None:
                s.send(request)
                pending[s] = b""
                sel.modify(s, selectors.EVENT_READ)
                continue
            data = s.recv(4096)
            if not data:
                raise AssertionError("a connection closed before its answer")
            pending[s] += data
            if pending[s].endswith(b"}"):
                del pending[s]
                sel.unregister(s)
                socks.append(s)
    sel.close()
    if len(socks) < n:
        for s in socks + list(pending):
            s.close()
        raise AssertionError("%d of %d connections answered in time" % (len(socks), n))
    return socks


class IdleConnectionTest(cs.CoringTestCase):
    N = 2000
    BOUND_KIB = 1.0           # RSS per idle connection (perf/idle_rss.py measures it beside nginx)

    def test_idle_connections_hold_no_coroutine(self):
        if cs.raise_nofile_limit() < self.N + 100:
            self.skipTest("RLIMIT_NOFILE under %d" % (self.N + 100))
        args = ["--access-log", "--keepalive-timeout", "120"]
        with cs.CoringServer(threads=1, apps="hello,todo", args=args) as server:
            # Each read takes the next of the thread's 512 provided buffers
            # and touches its first page: 2 MiB touched once, whatever the
            # connections, is in the baseline.
            with server.connect() as c:
                for _ in range(600):
                    self.assertEqual(c.request("GET", "/").status, 200)
            time.sleep(0.3)
            baseline = server.rss_kib()
            socks = idle_after_one_get(server, self.N, time.monotonic() + 60)
            try:
                time.sleep(1.0)
                after = server.rss_kib()
                idle = server.metric('coring_connections_idle{thread="0"}')
                alive = server.metric('coring_coroutines_alive{thread="0"}')
                # Still served, each of them.
                for s in socks[:: self.N // 10]:
                    s.setblocking(True)
                    s.settimeout(5)
                    s.send(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n")
                    self.assertIn(b"Hello, World!", s.recv(4096))
            finally:
                for s in socks:
                    s.close()
        per = (after - baseline) / self.N
        print("\n%d idle connections: %s idle in the runtime, %s coroutines alive, RSS %d -> %d KiB, "
              "%.2f KiB a connection (bound %.1f)" % (self.N, idle, alive, baseline, after, per, self.BOUND_KIB),
              file=sys.stderr)
        self.assertIsNotNone(idle, "no coring_connections_idle metric")
        self.assertGreaterEqual(idle, self.N, "connections between requests not idle in the runtime")
        # The /metrics request's own connection, and services.
        self.assertLess(alive, 10, "coroutines alive with %d connections idle" % self.N)
        if cs.sanitizer() is None:
            self.assertLessEqual(per, self.BOUND_KIB, "RSS per idle keep-alive connection")


def upload_all(conns, request, deadline):
    """Send @request on every socket of @conns at once (non-blocking, a
    piece to each writable socket in turn, so that every body is in flight
    together), then read each one's response; returns the responses."""
    sel = selectors.DefaultSelector()
    for c in conns:
        c.sock.setblocking(False)
        sel.register(c.sock, selectors.EVENT_WRITE, [c, 0])
    while sel.get_map() and time.monotonic() < deadline:
        for key, _ in sel.select(0.5):
            state = key.data
            try:
                state[1] += key.fileobj.send(request[state[1]:state[1] + 65536])
            except BlockingIOError:
                continue
            if state[1] == len(request):
                sel.unregister(key.fileobj)
    sel.close()
    if time.monotonic() >= deadline:
        raise AssertionError("uploads not sent before the deadline")
    for c in conns:
        c.sock.settimeout(max(1.0, deadline - time.monotonic()))
    return [c.read_response("POST") for c in conns]


class BurstMemoryTest(cs.CoringTestCase):
    BOUND_KIB = 4096          # RSS over the baseline, 2 s after the burst closed
    SETTLE_S = 2.0

    def test_memory_returns_after_a_burst_of_large_bodies(self):
        limit = cs.raise_nofile_limit()
        if limit < CONNECTIONS + 64:
            self.skipTest("RLIMIT_NOFILE %d is too low" % limit)
        body = big_todo()
        request = post_todo_head(len(body)) + body
        with cs.CoringServer(threads=1, apps="hello,todo") as server:
            skip_bound = cs.sanitizer() is not None
            n = 20 if skip_bound else CONNECTIONS
            warm_up(self, server, request)
            time.sleep(self.SETTLE_S)
            baseline = server.rss_kib()
            conns = [server.connect(timeout=30) for _ in range(n)]
            try:
                responses = upload_all(conns, request, time.monotonic() + 60)
                peak = server.rss_kib()
            finally:
                for c in conns:
                    c.close()
            for resp in responses:
                self.assertJsonError(resp, 422, "1 MB title")
            time.sleep(self.SETTLE_S)
            after = server.rss_kib()
            with server.connect() as c:
                self.assertEqual(c.request("GET", "/").status, 200)
        print("\nburst RSS: %d KiB before, %d KiB with %d connections' %d-byte bodies answered, "
              "%d KiB %.1f s after they closed: %+d KiB (bound %d)"
              % (baseline, peak, n, BIG, after, self.SETTLE_S, after - baseline, self.BOUND_KIB),
              file=sys.stderr)
        if skip_bound:
            self.skipTest("sanitizer build: RSS bound not asserted")
        self.assertLessEqual(after - baseline, self.BOUND_KIB,
                             "memory a burst of large bodies took stayed with the process")


class Probe(threading.Thread):
    """GET / on one keep-alive connection every ~2 ms; records latencies (s)."""

    def __init__(self, server):
        super().__init__(daemon=True)
        self.conn = server.connect(timeout=10, nodelay=True)
        self.stop = threading.Event()
        self.latencies = []
        self.error = None

    def run(self):
        try:
            deadline = time.monotonic() + 60
            while not self.stop.is_set() and time.monotonic() < deadline:
                t0 = time.perf_counter()
                resp = self.conn.request("GET", "/")
                self.latencies.append(time.perf_counter() - t0)
                if resp.status != 200:
                    raise AssertionError("GET / answered %r" % resp)
                time.sleep(0.002)
        except Exception as e:  # reported by the test
            self.error = e
        finally:
            self.conn.close()

    def p99_ms(self):
        s = sorted(self.latencies)
        return s[min(len(s) - 1, int(len(s) * 0.99))] * 1000 if s else float("inf")


class ChunkedCostTest(cs.CoringTestCase):
    PIECE = 600               # bytes a send while trickling
    P99_BOUND_MS = 10.0
    CPU_FACTOR = 5.0          # 6 bytes of coding a body byte, each through the decoder

    def upload(self, server, head, body, piece):
        """Send @head then @body in @piece-byte sends ~0.5 ms apart, while a probe
        measures GET /; returns (server CPU s, wall s, probe, response)."""
        probe = Probe(server)
        with server.connect(timeout=30, nodelay=True) as c:
            probe.start()
            time.sleep(0.05)
            cpu0, t0 = server.cpu_seconds(), time.monotonic()
            resp = None
            try:
                c.send(head)
                for i in range(0, len(body), piece):
                    c.send(body[i:i + piece])
                    time.sleep(0.0005)
                resp = c.read_response("POST")
            except (OSError, cs.ProtocolError) as e:
                # Reported with the figures: the server cut the upload short.
                resp = e
            cpu, wall = server.cpu_seconds() - cpu0, time.monotonic() - t0
            probe.stop.set()
            probe.join(15)
            # The connection stays usable after the answer.
            if isinstance(resp, cs.Response):
                self.assertEqual(c.request("GET", "/").status, 200)
        if probe.error:
            raise probe.error
        return cpu, wall, probe, resp

    def test_chunked_body_cost_is_linear(self):
        with cs.CoringServer(threads=1, apps="hello,todo", args=["--body-timeout", "60"]) as server:
            # Under a sanitizer only the behaviour is checked: a smaller body.
            skip_bounds = cs.sanitizer() is not None
            body = big_todo(BIG // 10 if skip_bounds else BIG)
            chunked = b"".join(b"1\r\n" + body[i:i + 1] + b"\r\n" for i in range(len(body))) + b"0\r\n\r\n"
            # The Content-Length upload in as many sends as the chunked one.
            pieces = -(-len(chunked) // self.PIECE)
            cl_cpu, cl_wall, cl_probe, resp = self.upload(
                server, post_todo_head(len(body)), body, max(1, len(body) // pieces))
            ch_cpu, ch_wall, ch_probe, ch_resp = self.upload(
                server, post_todo_head(chunked=True), chunked, self.PIECE)
            self.assertTrue(server.running())
        print("\nContent-Length upload of %d bytes in %d pieces: server CPU %.3f s, wall %.1f s, "
              "GET / p99 %.2f ms (%d probes)"
              % (len(body), pieces, cl_cpu, cl_wall, cl_probe.p99_ms(), len(cl_probe.latencies)),
              file=sys.stderr)
        print("chunked upload of %d bytes in 1-byte chunks (%d bytes, %d-byte pieces): server CPU "
              "%.3f s, wall %.1f s, GET / p99 %.2f ms (%d probes); CPU ratio %.2f (bound %.1f)"
              % (len(body), len(chunked), self.PIECE, ch_cpu, ch_wall, ch_probe.p99_ms(),
                 len(ch_probe.latencies), ch_cpu / max(cl_cpu, 0.01), self.CPU_FACTOR),
              file=sys.stderr)
        self.assertIsInstance(resp, cs.Response, "Content-Length upload cut short")
        self.assertJsonError(resp, 422, "Content-Length upload")
        self.assertIsInstance(ch_resp, cs.Response, "chunked upload cut short")
        self.assertJsonError(ch_resp, 422, "chunked upload")
        if skip_bounds:
            self.skipTest("sanitizer build: latency and CPU bounds not asserted")
        self.assertLess(ch_probe.p99_ms(), self.P99_BOUND_MS,
                        "GET / p99 while a chunked body trickles in")
        # 0.01 s: the clock's tick, so that a tiny Content-Length figure does
        # not make the ratio meaningless.
        self.assertLessEqual(ch_cpu, self.CPU_FACTOR * max(cl_cpu, 0.01) + 0.1,
                             "chunked upload CPU vs Content-Length upload CPU")


class TrickleCostTest(cs.CoringTestCase):
    SIZES_KIB = (4, 8, 16)
    PAUSE_S = 0.0001          # between bytes, so that most reads take one byte
    PER_BYTE_BOUND = 16       # parser bytes read per byte sent (quadratic: n/2)
    GROWTH_BOUND = 1.5        # per-byte cost at 16 KiB over that at 4 KiB

    def trickle(self, server, head, trickled, method="GET"):
        """Send @head at once, then @trickled a byte per send; return (the
        response, server CPU s, bytes the parser read meanwhile)."""
        read0 = server.metric("http_parser_read_bytes_total")
        with server.connect(timeout=30, nodelay=True) as c:
            cpu0 = server.cpu_seconds()
            c.send(head)
            for i in range(len(trickled)):
                c.send(trickled[i:i + 1])
                time.sleep(self.PAUSE_S)
            resp = c.read_response(method)
            cpu = server.cpu_seconds() - cpu0
        read = server.metric("http_parser_read_bytes_total") - read0
        return resp, cpu, read

    def test_trickled_header_costs_linear_parsing(self):
        args = ["--header-timeout", "60", "--max-header-bytes", "65536"]
        with cs.CoringServer(threads=1, apps="hello", args=args) as server:
            per_byte = {}
            for kib in self.SIZES_KIB:
                n = kib * 1024
                start = b"GET /json HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "
                section = start + b"a" * (n - len(start) - 4) + b"\r\n\r\n"
                resp, cpu, read = self.trickle(server, b"", section)
                self.assertEqual(resp.status, 200, "GET /json after a %d KiB header" % kib)
                per_byte[kib] = read / n
                print("\nslowloris: a %d KiB header section a byte at a time: server CPU %.3f s, "
                      "the parser read %d bytes (%.2f per byte)" % (kib, cpu, read, per_byte[kib]),
                      file=sys.stderr)
            self.assertTrue(server.running())
        for kib in self.SIZES_KIB:
            self.assertLessEqual(per_byte[kib], self.PER_BYTE_BOUND,
                                 "parser bytes read per header byte at %d KiB" % kib)
        self.assertLessEqual(per_byte[16], self.GROWTH_BOUND * per_byte[4],
                             "parser bytes read per byte grow with the header's size: quadratic")

    def test_body_behind_large_header_not_parsed_per_read(self):
        args = ["--body-timeout", "60", "--max-header-bytes", "65536"]
        with cs.CoringServer(threads=1, apps="hello", args=args) as server:
            body = b"x" * 4096
            start = b"POST /json HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: %d\r\nX-Pad: " % len(body)
            head = start + b"a" * (16 * 1024 - len(start) - 4) + b"\r\n\r\n"
            resp, cpu, read = self.trickle(server, head, body, method="POST")
            self.assertEqual(resp.status, 405, "POST /json")
            print("\na %d-byte body a byte at a time behind a %d-byte header section: server CPU "
                  "%.3f s, the parser read %d bytes (%.2f per byte sent)"
                  % (len(body), len(head), cpu, read, read / (len(head) + len(body))),
                  file=sys.stderr)
        # The section found and parsed, then parsed again once the body is
        # whole; a parse per body read would be 4096 times the section.
        self.assertLessEqual(read, 4 * (len(head) + len(body)),
                             "parser bytes read for a body trickled behind a large header")


if __name__ == "__main__":
    cs.main()

#!/usr/bin/python3
"""Integration tests of the connection loop's memory and CPU bounds.

- A connection gives back the buffers of a large request once it is
  answered: 200 connections that each POST a ~1 MB body and then idle cost
  no more than 32 KiB each over the same connections idle after a small
  request (RSS from /proc/PID/status).

Each test prints its figures.
"""

import sys

sys.dont_write_bytecode = True

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


def big_todo():
    """A valid JSON todo whose title is too long: read whole, parsed, answered 422."""
    prefix, suffix = b'{"title":"', b'"}'
    return prefix + b"x" * (BIG - len(prefix) - len(suffix)) + suffix


class IdleBuffersTest(cs.CoringTestCase):
    def test_idle_connections_give_back_large_request_buffers(self):
        limit = cs.raise_nofile_limit()
        if limit < CONNECTIONS + 64:
            self.skipTest("RLIMIT_NOFILE %d is too low" % limit)
        body = big_todo()
        request = post_todo_head(len(body)) + body
        with cs.CoringServer(threads=2, apps="hello,todo") as server:
            # Warm up on connections that then close, so that the baseline
            # already holds the per-thread memory a large body touches:
            # malloc's, the JSON parser's, and every provided receive buffer
            # (512 x 16 KiB a thread, used in turn: ~12 uploads a thread).
            for _ in range(24):
                with server.connect(timeout=30) as c:
                    c.send(request)
                    self.assertEqual(c.read_response("POST").status, 422)
            conns = []
            try:
                for _ in range(CONNECTIONS):
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
                for c in conns[:: CONNECTIONS // 10]:
                    self.assertEqual(c.request("GET", "/").status, 200)
                time.sleep(0.3)
                after = server.rss_kib()
            finally:
                for c in conns:
                    c.close()
        growth = after - baseline
        print("\nidle RSS: %d KiB with %d connections idle after GET /, %d KiB after each "
              "POSTed %d bytes: %+d KiB, %.1f KiB a connection (bound %d)"
              % (baseline, CONNECTIONS, after, BIG, growth, growth / CONNECTIONS, IDLE_BOUND_KIB),
              file=sys.stderr)
        self.assertLessEqual(growth, CONNECTIONS * IDLE_BOUND_KIB,
                             "idle connections kept their large request's buffers")


if __name__ == "__main__":
    cs.main()

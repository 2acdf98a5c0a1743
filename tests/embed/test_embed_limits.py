#!/usr/bin/python3
"""The embed app's bounds and input checks, on the real binary.

- A worst-case body for WordPiece (64 texts of 100-character words that
  end in a character the vocabulary lacks, ~1 MB) must not hold the ring
  thread: on a one-thread server, a concurrent client's GET / keeps its
  p99 under 10 ms while the body is tokenized and encoded.

The model is tests/embed/make_model.py's, tiny (1 layer, hidden 32), on
the MiniLM vocabulary.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import coring_server  # noqa: E402
from coring_server import CoringServer, CoringTestCase  # noqa: E402

PY = "/usr/bin/python3"
JSON_HDR = {"Content-Type": "application/json"}
HIDDEN = 32

# 100 code points (WordPiece's limit), the last one (U+2603) in no token:
# every start position of the word is tried before it becomes [UNK].
WORST_WORD = "a" * 99 + "\u2603"
WORST_TEXTS = 64
WORST_WORDS = 155  # per text: 155 x 103 bytes x 64 texts = 1.02 MB, under the 1 MiB JSON limit
WORST_REQUESTS = 3  # one after the other, while GET / is measured
P99_BOUND_MS = 10.0
ATTEMPTS = 3
GET_INTERVAL_S = 0.002


class Model:
    tmp = None
    folder = None

    @classmethod
    def setup(cls):
        if cls.folder:
            return cls.folder
        cls.tmp = tempfile.TemporaryDirectory(prefix="coring-embed-limits-")
        folder = os.path.join(cls.tmp.name, "tiny")
        res = subprocess.run([PY, os.path.join(HERE, "make_model.py"), "--out", folder, "--layers", "1",
                              "--hidden", str(HIDDEN), "--heads", "4", "--intermediate", "64"],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise AssertionError("make_model.py failed:\n%s" % res.stderr[-3000:])
        cls.folder = folder
        return folder


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


class RingStaysResponsive(CoringTestCase):
    def measure(self, srv, body):
        """GET / due every 2 ms while WORST_REQUESTS worst-case bodies are
        embedded one after the other: (latencies in ms, embed seconds)."""
        done = threading.Event()
        result = {"seconds": []}

        def embed():
            try:
                with srv.connect(timeout=120) as c:
                    for _ in range(WORST_REQUESTS):
                        t0 = time.monotonic()
                        resp = c.request("POST", "/embed", JSON_HDR, body)
                        result["seconds"].append(time.monotonic() - t0)
                        result["status"] = resp.status
                        if resp.status != 200:
                            break
                        result["count"] = len(resp.json()["embeddings"])
            finally:
                done.set()

        lat = []
        with srv.connect(timeout=30, nodelay=True) as g:
            self.assertEqual(g.request("GET", "/").status, 200)
            worker = threading.Thread(target=embed)
            worker.start()
            # Open-loop: a GET is due every 2 ms, and its latency counts
            # from when it was due, so a stalled ring shows in every GET
            # it delayed, not only in the one that waited.
            start = time.monotonic()
            k = 0
            while not done.is_set() and k < 30000 and time.monotonic() - start < 60:
                due = start + k * GET_INTERVAL_S
                now = time.monotonic()
                if due > now:
                    time.sleep(due - now)
                resp = g.request("GET", "/")
                lat.append((time.monotonic() - due) * 1e3)
                self.assertEqual(resp.status, 200)
                k += 1
            worker.join(120)
        self.assertEqual(result.get("status"), 200, result)
        self.assertEqual(result.get("count"), WORST_TEXTS)
        self.assertGreaterEqual(len(lat), 20, "too few GETs during the embed requests")
        return lat, result["seconds"]

    def test_worst_case_wordpiece_does_not_hold_the_ring(self):
        folder = Model.setup()
        text = " ".join([WORST_WORD] * WORST_WORDS)
        body = json.dumps({"texts": [text] * WORST_TEXTS}, ensure_ascii=False).encode("utf-8")
        self.assertLess(len(body), 1 << 20)
        with CoringServer(threads=1, apps="hello,embed",
                          args=["--embed-model", folder, "--embed-threads", "1",
                                "--max-body-bytes", str(2 << 20)]) as srv:
            # Warm up: the thread's JSON parser grows its buffers (~15 bytes
            # a byte of document, kept) on its first 1 MB body, a one-off
            # cost of page faults that is not the tokenizer's.
            with srv.connect(timeout=120) as c:
                t0 = time.monotonic()
                self.assertEqual(c.request("POST", "/embed", JSON_HDR, body).status, 200)
                first = time.monotonic() - t0
            # Other processes on a small shared machine can stall the client
            # or the server: up to ATTEMPTS tries, the best must hold. A ring
            # held by the tokenizer (seconds) fails every one of them.
            best = None
            for attempt in range(1, ATTEMPTS + 1):
                lat, seconds = self.measure(srv, body)
                p50, p99, worst = percentile(lat, 50), percentile(lat, 99), max(lat)
                sys.stderr.write("\n[embed worst case] try %d: %d-byte body of %d texts: %s s (first ever: "
                                 "%.2f s); concurrent GET / (due every %.0f ms, %d requests): p50 %.2f ms, "
                                 "p99 %.2f ms, max %.2f ms"
                                 % (attempt, len(body), WORST_TEXTS, ", ".join("%.2f" % x for x in seconds),
                                    first, GET_INTERVAL_S * 1e3, len(lat), p50, p99, worst))
                best = p99 if best is None else min(best, p99)
                if best < P99_BOUND_MS:
                    break
            sys.stderr.write("\n")
            srv.stop(expect_status=0)
        self.assertLess(best, P99_BOUND_MS, "GET / p99 %.2f ms while a worst-case embed body ran" % best)


if __name__ == "__main__":
    coring_server.main()

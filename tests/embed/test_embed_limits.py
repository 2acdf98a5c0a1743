#!/usr/bin/python3
"""The embed app's bounds and input checks, on the real binary.

- A worst-case body for WordPiece (64 texts of 100-character words that
  end in a character the vocabulary lacks, ~1 MB) must not hold the ring
  thread: on a one-thread server, a concurrent client's GET / keeps its
  p99 under 10 ms while the body is tokenized and encoded.
- /v1/embeddings serves only its own model (404 model_not_found, OpenAI's
  error object), takes `dimensions` only when it is the model's size,
  refuses control characters in `model`, and answers every error in
  OpenAI's shape.
  The same while a 1 MiB chunked body of 1-byte chunks trickles in on
  another connection of that thread.
- Both routes take a body only as Content-Type: application/json (415).
- Without a model, a malformed request is still the client's error (400,
  422, 415), and only a well-formed one gets 503 "no model loaded".
- Where the inference threads run (--embed-placement): with CPUs in the
  affinity mask beyond the ring threads' (auto), pinned to those, at the
  rings' priority; with none (auto on one CPU, or batch), SCHED_BATCH at
  nice 10 while the rings stay SCHED_OTHER at nice 0; idle: SCHED_IDLE;
  shared: as the rings. Read from /proc/PID/task/TID/{comm,stat} and the threads'
  affinity.

The model is apps/embed/make_model.py's, tiny (1 layer, hidden 32), on
the MiniLM vocabulary.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time

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
TRICKLE_PIECE = 600  # bytes a send of the chunked upload


class Model:
    tmp = None
    folder = None

    @classmethod
    def setup(cls):
        if cls.folder:
            return cls.folder
        cls.tmp = tempfile.TemporaryDirectory(prefix="coring-embed-limits-")
        folder = os.path.join(cls.tmp.name, "tiny")
        res = subprocess.run([PY, os.path.join(HERE, "..", "..", "apps", "embed", "make_model.py"), "--out", folder, "--layers", "1",
                              "--hidden", str(HIDDEN), "--heads", "4", "--intermediate", "64"],
                             capture_output=True, text=True)
        if res.returncode != 0:
            raise AssertionError("make_model.py failed:\n%s" % res.stderr[-3000:])
        cls.folder = folder
        return folder


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100.0 * (len(v) - 1))))]


def chunked_coding():
    """A 1 MiB todo title in 1-byte chunks: 6 MiB of chunked coding. Made
    before any measuring thread starts: building it holds Python's GIL for
    most of a second, which would stall the test's own GET loop."""
    body = b'{"title":"' + b"x" * (1 << 20) + b'"}'
    return b"".join(b"1\r\n" + body[i:i + 1] + b"\r\n" for i in range(len(body))) + b"0\r\n\r\n"


def trickle_chunked(srv, coding, result):
    """POST /todos @coding, sent TRICKLE_PIECE bytes at a time; the answer's
    status goes in result["chunked"] (422: the title is too long, known
    only after the whole body)."""
    head = (b"POST /todos HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n")
    with srv.connect(timeout=120) as c:
        c.send(head)
        for i in range(0, len(coding), TRICKLE_PIECE):
            c.send(coding[i:i + TRICKLE_PIECE])
            time.sleep(0.0005)
        result["chunked"] = c.read_response("POST").status


class RingStaysResponsive(CoringTestCase):
    def measure(self, srv, body, chunked=None):
        """GET / due every 2 ms while WORST_REQUESTS worst-case bodies are
        embedded one after the other (with @chunked, a chunked coding: while
        it trickles in on another connection, embeds going on until it is in): (latencies in ms,
        embed seconds)."""
        done = threading.Event()
        result = {"seconds": []}
        trickle = None
        if chunked is not None:
            trickle = threading.Thread(target=trickle_chunked, args=(srv, chunked, result))
            trickle.start()

        def embed():
            try:
                with srv.connect(timeout=120) as c:
                    for k in range(100):
                        if k >= WORST_REQUESTS and not (trickle and trickle.is_alive()):
                            break
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
        if trickle:
            trickle.join(120)
            self.assertEqual(result.get("chunked"), 422, "the chunked upload's answer")
        self.assertEqual(result.get("status"), 200, result)
        self.assertEqual(result.get("count"), WORST_TEXTS)
        self.assertGreaterEqual(len(lat), 20, "too few GETs during the embed requests")
        return lat, result["seconds"]

    def test_worst_case_wordpiece_does_not_hold_the_ring(self):
        self.ring_stays_responsive(chunked=False)

    def test_worst_embed_and_trickled_chunked_body_together(self):
        self.ring_stays_responsive(chunked=True)

    def ring_stays_responsive(self, chunked):
        folder = Model.setup()
        coding = chunked_coding() if chunked else None
        text = " ".join([WORST_WORD] * WORST_WORDS)
        body = json.dumps({"texts": [text] * WORST_TEXTS}, ensure_ascii=False).encode("utf-8")
        self.assertLess(len(body), 1 << 20)
        with CoringServer(threads=1, apps="hello,todo,embed",
                          args=["--embed-model", folder, "--embed-threads", "1",
                                "--max-body-bytes", str(2 << 20), "--body-timeout", "60"]) as srv:
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
                lat, seconds = self.measure(srv, body, coding)
                p50, p99, worst = percentile(lat, 50), percentile(lat, 99), max(lat)
                sys.stderr.write("\n[embed worst case%s] try %d: %d-byte body of %d texts: %s s (first ever: "
                                 "%.2f s); concurrent GET / (due every %.0f ms, %d requests): p50 %.2f ms, "
                                 "p99 %.2f ms, max %.2f ms"
                                 % (" + trickled chunked 1 MiB" if chunked else "", attempt, len(body), WORST_TEXTS, ", ".join("%.2f" % x for x in seconds),
                                    first, GET_INTERVAL_S * 1e3, len(lat), p50, p99, worst))
                best = p99 if best is None else min(best, p99)
                if best < P99_BOUND_MS or coring_server.sanitizer():
                    break
            sys.stderr.write("\n")
            srv.stop(expect_status=0)
        if coring_server.sanitizer():
            self.skipTest("%s build: the p99 bound is not asserted" % coring_server.sanitizer())
        self.assertLess(best, P99_BOUND_MS, "GET / p99 %.2f ms while a worst-case embed body ran" % best)


SCHED_OTHER, SCHED_BATCH, SCHED_IDLE = 0, 3, 5


def threads_of(pid):
    """{tid: (comm, nice, policy, affinity)} of process @pid (proc(5):
    stat's fields 19 and 41, counted from 1)."""
    out = {}
    for tid in os.listdir("/proc/%d/task" % pid):
        base = "/proc/%d/task/%s/" % (pid, tid)
        with open(base + "comm") as f:
            comm = f.read().strip()
        with open(base + "stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        # fields[0] is stat's field 3 (state).
        out[int(tid)] = (comm, int(fields[19 - 3]), int(fields[41 - 3]), os.sched_getaffinity(int(tid)))
    return out


class Placement(CoringTestCase):
    def start(self, threads, extra=(), cpus=None):
        folder = Model.setup()
        pre = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
        return CoringServer(threads=threads, apps="hello,embed", preexec_fn=pre,
                            args=["--embed-model", folder] + list(extra))

    def inference_threads(self, srv, settled=None):
        with srv.connect(timeout=30) as c:  # the pool is up: an embedding comes back
            self.assertEqual(c.request("POST", "/embed", JSON_HDR, {"text": "hello"}).status, 200)
        # One thread answered; the others place themselves when they first
        # run, which a SCHED_IDLE thread on a busy machine may do late:
        # wait (bounded) until every one shows what @settled expects.
        deadline = time.monotonic() + 10
        while True:
            all_threads = threads_of(srv.pid)
            pool = [t for t in all_threads.values() if t[0].startswith("embed-")]
            if settled is None or (pool and all(settled(t) for t in pool)) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        pool = [t for t in all_threads.values() if t[0].startswith("embed-")]
        self.assertTrue(pool, "no thread named embed-N: %r" % all_threads)
        return pool, [t for t in all_threads.values() if not t[0].startswith("embed-")]

    def test_spare_cpus_take_the_pool(self):
        mask = sorted(os.sched_getaffinity(0))
        if len(mask) < 2:
            self.skipTest("needs 2 CPUs in the affinity mask, has %d" % len(mask))
        with self.start(1, ["--pin", "on"]) as srv:
            pool, others = self.inference_threads(srv)
            self.assertEqual(len(pool), len(mask) - 1, "one inference thread per spare CPU")
            for comm, nice, policy, cpus in pool:
                self.assertEqual(cpus, set(mask[1:]), "%s runs on the ring's CPU too" % comm)
                self.assertEqual((nice, policy), (0, SCHED_OTHER), comm)
            self.assertIn("on the CPUs the 1 ring thread(s) leave", srv.stderr_text())
            srv.stop(expect_status=0)

    def test_no_spare_cpu_runs_the_pool_below_the_rings(self):
        first = min(os.sched_getaffinity(0))
        cases = [(1, (), {first}, "auto on one CPU", SCHED_BATCH, "(SCHED_BATCH, nice 10)"),
                 (1, ["--embed-placement", "idle"], None, "idle", SCHED_IDLE, "(SCHED_IDLE)")]
        if len(os.sched_getaffinity(0)) >= 2:
            cases.append((1, ["--embed-placement", "batch"], None, "batch with a spare CPU", SCHED_BATCH,
                          "(SCHED_BATCH, nice 10)"))
            # Unpinned rings (--pin off, the default) may run on any CPU: auto never picks spare.
            cases.append((1, ["--pin", "off"], None, "auto with unpinned rings", SCHED_BATCH,
                          "(SCHED_BATCH, nice 10)"))
        for threads, extra, cpus, what, want, log in cases:
            with self.start(threads, extra, cpus) as srv:
                pool, others = self.inference_threads(srv, lambda t, want=want: t[1:3] == (10, want))
                for comm, nice, policy, _ in pool:
                    self.assertEqual((nice, policy), (10, want), "%s (%s)" % (comm, what))
                for comm, nice, policy, _ in others:
                    self.assertEqual((nice, policy), (0, SCHED_OTHER), "%s (%s)" % (comm, what))
                self.assertIn("below the ring threads " + log, srv.stderr_text())
                srv.stop(expect_status=0)

    def test_shared_keeps_the_rings_priority(self):
        with self.start(1, ["--embed-placement", "shared"]) as srv:
            pool, _ = self.inference_threads(srv)
            self.assertEqual(len(pool), len(os.sched_getaffinity(0)))
            for comm, nice, policy, cpus in pool:
                self.assertEqual((nice, policy, cpus), (0, SCHED_OTHER, os.sched_getaffinity(0)), comm)
            srv.stop(expect_status=0)

    def test_unknown_placement_is_refused(self):
        res = subprocess.run([coring_server.binary(), "--embed-placement", "fast", "--check-config"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(res.returncode, 2, res)
        self.assertIn("expected auto, spare, batch, idle or shared", res.stderr)


class EmbedClient(CoringTestCase):
    """Requests to cls.server, and the check of OpenAI's error object."""

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(expect_status=0)

    def post(self, path, body, headers=JSON_HDR):
        with self.server.connect(timeout=30) as conn:
            return conn.request("POST", path, headers, body)

    def assertOpenAiError(self, resp, status, param=None, code=None, what=""):
        ctx = " (%s) %r" % (what, resp)
        self.assertEqual(resp.status, status, "status" + ctx)
        self.assertTrue(resp.header("Content-Type", "").startswith("application/json"), ctx)
        doc = resp.json()
        self.assertEqual(set(doc), {"error"}, ctx)
        err = doc["error"]
        self.assertIsInstance(err, dict, "not OpenAI's error object" + ctx)
        self.assertEqual(set(err), {"message", "type", "param", "code"}, ctx)
        self.assertIsInstance(err["message"], str, ctx)
        self.assertTrue(err["message"], ctx)
        self.assertEqual(err["type"], "invalid_request_error" if status < 500 else "server_error", ctx)
        self.assertEqual(err["param"], param, ctx)
        self.assertEqual(err["code"], code, ctx)
        return err


class Checks(EmbedClient):
    @classmethod
    def setUpClass(cls):
        cls.folder = Model.setup()
        cls.name = os.path.basename(cls.folder)
        cls.server = CoringServer(threads=1, apps="embed", args=["--embed-model", cls.folder])
        cls.server.start()

    def test_floats_are_shortest_round_trip(self):
        """Every number of an /embed answer, normalized and not, is the
        shortest text that reads back as its float32: numpy's (Dragon4,
        unique=True) digits, in no more characters than %.9g's."""
        import re
        import numpy as np
        texts = ["the quick brown fox %d jumps over the lazy dog" % i for i in range(16)]
        count = 0
        for normalize in (True, False):
            resp = self.post("/embed", {"texts": texts, "normalize": normalize})
            self.assertEqual(resp.status, 200, resp)
            doc = json.loads(resp.body)
            numbers = re.findall(rb"-?[0-9][0-9.]*(?:e-?[0-9]+)?", resp.body.split(b"[", 1)[1])
            self.assertEqual(len(numbers), len(texts) * HIDDEN, resp.body[:200])
            flat = [x for vec in doc["embeddings"] for x in vec]
            for raw, value in zip(numbers, flat):
                text = raw.decode()
                f = np.float32(text)
                self.assertEqual(np.float32(value), f, text)
                want = np.format_float_scientific(f, unique=True, trim="-")
                digits = lambda t: len(t.split("e")[0].lstrip("-").replace(".", "").lstrip("0").rstrip("0")) or 1
                self.assertEqual(digits(text), digits(want), "%s is not the shortest (%s)" % (text, want))
                self.assertLessEqual(len(text), len("%.9g" % f), text)
                count += 1
        sys.stderr.write("\n[embed floats] %d numbers checked against numpy\n" % count)

    def test_unknown_model_is_404_model_not_found(self):
        for model in ("all-MiniLM-L6-v2", "text-embedding-3-small", "x/" + self.name + "x", self.name + "/",
                      "a/b/" + self.name, ""):
            resp = self.post("/v1/embeddings", {"input": "hello", "model": model})
            err = self.assertOpenAiError(resp, 404, "model", "model_not_found", model)
            if model:
                self.assertNotIn(model, err["message"], "the client's model name is echoed")

    def test_served_model_is_accepted_and_named(self):
        for model in (self.name, "sentence-transformers/" + self.name):
            resp = self.post("/v1/embeddings", {"input": "hello", "model": model})
            self.assertEqual(resp.status, 200, resp)
            self.assertEqual(resp.json()["model"], self.name)

    def test_control_characters_in_model_are_refused(self):
        for model in ("a\u0000b", self.name + "\u0000", "a\u007fb", "a\nb", "\u001b[31m"):
            resp = self.post("/v1/embeddings", {"input": "hello", "model": model})
            self.assertOpenAiError(resp, 422, "model", None, repr(model))
            self.assertNotIn(b'"model":"a"', resp.body)

    def test_dimensions(self):
        resp = self.post("/v1/embeddings", {"input": "hello", "dimensions": HIDDEN})
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(len(resp.json()["data"][0]["embedding"]), HIDDEN)
        for d in (HIDDEN - 1, HIDDEN + 1, 1, 0, -1, 1536, "32", 32.5, None, True):
            resp = self.post("/v1/embeddings", {"input": "hello", "dimensions": d})
            self.assertOpenAiError(resp, 422, "dimensions", None, "dimensions %r" % d)

    def test_every_openai_error_has_openai_shape(self):
        cases = [(b"{", 400, None), (b"[]", 422, None), ({}, 422, "input"), ({"input": ""}, 422, "input"),
                 ({"input": [1]}, 422, "input"), ({"input": ["a"] * 65}, 422, "input"),
                 ({"input": "a", "model": 3}, 422, "model"),
                 ({"input": "a", "encoding_format": "base64"}, 422, "encoding_format")]
        for body, status, param in cases:
            self.assertOpenAiError(self.post("/v1/embeddings", body), status, param, None, repr(body))
        resp = self.post("/v1/embeddings", b"{", {})
        self.assertOpenAiError(resp, 415, None, None, "no Content-Type")

    def test_invalid_json_message_does_not_repeat_itself(self):
        resp = self.post("/embed", b"{")
        want = ("invalid JSON: the JSON document has an improper structure: missing or "
                "superfluous commas, braces, missing keys, etc.")
        self.assertJsonError(resp, 400, "invalid JSON")
        self.assertEqual(resp.json()["error"], want)
        err = self.assertOpenAiError(self.post("/v1/embeddings", b"{"), 400)
        self.assertEqual(err["message"], want)

    def test_content_type_must_be_json(self):
        body = json.dumps({"text": "hello"}).encode()
        for ct in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                   "application/jsonx", "application/json-patch+json", "text/json", None):
            headers = {"Content-Type": ct} if ct else {}
            resp = self.post("/embed", body, headers)
            self.assertJsonError(resp, 415, "Content-Type %r" % ct)
            self.assertIn("Content-Type: application/json", resp.json()["error"])
            resp = self.post("/v1/embeddings", {"input": "hello"}, headers)
            self.assertOpenAiError(resp, 415, None, None, "Content-Type %r" % ct)
        # Two Content-Type fields: refused, whatever they say.
        with self.server.connect(timeout=30) as conn:
            resp = conn.request("POST", "/embed", [("Content-Type", "application/json"),
                                                   ("Content-Type", "text/plain")], body)
            self.assertJsonError(resp, 415, "two Content-Type fields")
        for ct in ("application/json", "application/json; charset=utf-8", "Application/JSON",
                   "APPLICATION/JSON;charset=UTF-8", "application/json ; charset=utf-8"):
            resp = self.post("/embed", body, {"Content-Type": ct})
            self.assertEqual(resp.status, 200, "Content-Type %r: %r" % (ct, resp))
            resp = self.post("/v1/embeddings", {"input": "hello"}, {"Content-Type": ct})
            self.assertEqual(resp.status, 200, "Content-Type %r: %r" % (ct, resp))


class NoModel(EmbedClient):
    """coring without --embed-model: the request is checked before the
    model, so invalid JSON is 400, not 503 (issue 39: the model came first)."""

    @classmethod
    def setUpClass(cls):
        cls.server = CoringServer(threads=1, apps="embed")
        cls.server.start()

    def test_a_malformed_request_is_400_before_the_model_is_503(self):
        for body, status in ((b"{", 400), (b"", 400), (b"\xff", 400), (b"[1]", 422), (b'"x"', 422)):
            self.assertJsonError(self.post("/embed", body), status, "/embed %r" % body)
            self.assertOpenAiError(self.post("/v1/embeddings", body), status, None, None, repr(body))
        self.assertJsonError(self.post("/embed", b"{", {"Content-Type": "text/plain"}), 415)
        resp = self.post("/embed", {"text": "hello"})
        self.assertJsonError(resp, 503, "well-formed, no model")
        self.assertEqual(resp.json()["error"], "no model loaded")
        err = self.assertOpenAiError(self.post("/v1/embeddings", {"input": "hello"}), 503)
        self.assertEqual(err["message"], "no model loaded")


if __name__ == "__main__":
    coring_server.main()

#!/usr/bin/python3
"""The embed app against implementations nobody on this project wrote.

- Token ids: coring's tokenizer (the embed_tokenize test program) against
  Hugging Face's JavaScript tokenizer (tokenize.mjs, @huggingface/tokenizers
  from npm) on tests/data/minilm/tokenizer.json, for every sentence of
  sentences.json.
- Embeddings: the real coring binary's POST /embed, one text per request
  and all texts in one request, against reference.py (a plain BERT in
  PyTorch, float64) on the same random-weight models: one of
  all-MiniLM-L6-v2's exact shapes and a tiny one (2 layers, hidden 32).
  Every value must be within 1e-4.
- The HTTP API: /v1/embeddings, errors, 503 without a model.

Environment (set by CMake): EMBED_TOKENIZE (the embed_tokenize binary),
EMBED_JS_DIR (a folder with tokenize.mjs after `npm ci`), and
CORING_EMBED_KERNELS, passed on to the server: ctest runs the embedding
checks once as it is (auto: AVX-512 here) and once with "portable"
(embed_reference_portable), and the log must name the kernels asked for.
"""

import concurrent.futures
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import coring_server  # noqa: E402
from coring_server import CoringServer, CoringTestCase  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data", "minilm")
TOLERANCE = 1e-4
MAX_IDS = 256
PY = "/usr/bin/python3"
PORTABLE = os.environ.get("CORING_EMBED_KERNELS") == "portable"
# What the start-up log must say of the element-wise kernels and int8 product.
ELEMENTWISE = r"element-wise kernels portable C" if PORTABLE else r"element-wise kernels (AVX-512|portable C)"
with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
    AVX512 = " avx512f" in f.read()
INT8 = r"int8 linear layers on portable C" if PORTABLE else r"int8 linear layers on (AVX-512 VNNI|portable C)"

with open(os.path.join(HERE, "sentences.json"), encoding="utf-8") as f:
    SENTENCES = json.load(f)


def run(cmd, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if res.returncode != 0:
        raise AssertionError("%s failed (%d):\n%s" % (cmd, res.returncode, res.stderr[-3000:]))
    return res.stdout


def ids_lines(text):
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def truncate(ids):
    """tokenizers' truncation: max_length 256, right side, [SEP] kept."""
    return ids if len(ids) <= MAX_IDS else ids[:MAX_IDS - 1] + [ids[-1]]


def max_diff(a, b):
    assert len(a) == len(b), (len(a), len(b))
    return max(abs(x - y) for x, y in zip(a, b))


class Models:
    """Models, Hugging Face ids and torch references, made once."""
    tmp = None
    hf_ids = None
    dirs = {}
    refs = {}

    @classmethod
    def setup(cls):
        if cls.tmp:
            return
        cls.tmp = tempfile.TemporaryDirectory(prefix="coring-embed-")
        js_dir = os.environ.get("EMBED_JS_DIR")
        if not js_dir:
            raise unittest.SkipTest("EMBED_JS_DIR is not set (run through ctest)")
        out = run(["node", os.path.join(js_dir, "tokenize.mjs"), os.path.join(DATA, "tokenizer.json"),
                   os.path.join(HERE, "sentences.json")])
        cls.hf_ids = [truncate(ids) for ids in ids_lines(out)]
        ids_path = os.path.join(cls.tmp.name, "ids.jsonl")
        with open(ids_path, "w") as f:
            for ids in cls.hf_ids:
                f.write(json.dumps(ids) + "\n")
        shapes = {
            "minilm": [],
            "tiny": ["--layers", "2", "--hidden", "32", "--heads", "4", "--intermediate", "64",
                     "--prefix", "bert.", "--seed", "7"],
        }
        for name, extra in shapes.items():
            folder = os.path.join(cls.tmp.name, name)
            run([PY, os.path.join(HERE, "..", "..", "apps", "embed", "make_model.py"), "--out", folder] + extra)
            cls.dirs[name] = folder
            cls.refs[name] = json.loads(run([PY, os.path.join(HERE, "reference.py"), folder, ids_path]))


class TokenIds(unittest.TestCase):
    def test_ids_match_hugging_face_tokenizer(self):
        Models.setup()
        tool = os.environ.get("EMBED_TOKENIZE")
        mine = ids_lines(run([tool, os.path.join(DATA, "vocab.txt"), os.path.join(HERE, "sentences.json"),
                              str(MAX_IDS)]))
        self.assertEqual(len(mine), len(SENTENCES))
        for sentence, got, want in zip(SENTENCES, mine, Models.hf_ids):
            self.assertEqual(got, want, "token ids differ for %r" % sentence[:80])
        self.assertGreaterEqual(len(SENTENCES), 30)
        self.assertEqual(len(mine[-1]), MAX_IDS, "the long sentence must be truncated at 256 ids")


class Embeddings(CoringTestCase):
    server = None
    model = "minilm"

    @classmethod
    def setUpClass(cls):
        Models.setup()
        # --deadline off: the vectors are under test, not the time (the
        # portable path on a loaded machine outlasts embed's 5 s default).
        cls.server = CoringServer(threads=2, apps="hello,embed",
                                  args=["--embed-model", Models.dirs[cls.model], "--embed-threads", "2",
                                        "--embed-max-batch", "8", "--max-body-bytes", "200000",
                                        "--deadline", "off"])
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        if cls.server:
            cls.server.stop(expect_status=0)

    def post(self, path, body, conn=None):
        own = conn is None
        conn = conn or self.server.connect(timeout=30)
        try:
            return conn.request("POST", path, {"Content-Type": "application/json"}, body)
        finally:
            if own:
                conn.close()

    def embed(self, body, conn=None):
        resp = self.post("/embed", body, conn)
        self.assertEqual(resp.status, 200, resp)
        return resp.json()

    def check(self, got, want, what):
        diff = max_diff(got, want)
        self.assertLessEqual(diff, TOLERANCE, "%s: max abs diff %.3g" % (what, diff))
        return diff

    def test_log_names_the_kernels(self):
        log = self.server.stderr_text()
        self.assertRegex(log, ELEMENTWISE)
        packed = "float32 linear layers on AVX-512 with weights packed at load"
        if PORTABLE:
            self.assertNotIn(packed, log)
        elif AVX512:
            self.assertIn(packed, log)

    def test_one_text_splits_across_the_idle_inference_thread(self):
        # --embed-threads 2 and one request at a time: every pass finds the
        # other inference thread idle and splits across it (the unbatched
        # and torch checks of this class then run split passes).
        self.assertIn("embed: split passes on", self.server.stderr_text())

        def split_passes():
            n = self.server.metric("embed_split_passes_total", timeout=30)
            self.assertIsNotNone(n, "no embed_split_passes_total on /metrics")
            return n

        before = split_passes()
        with self.server.connect(timeout=30) as conn:
            for text in SENTENCES[:3]:
                self.embed({"text": text}, conn)
        after = split_passes()
        sys.stderr.write("\n[%s] split passes: %d of 3 single-text requests\n"
                         % (self.model, after - before))
        self.assertGreaterEqual(after - before, 1)

    def test_unbatched_matches_torch(self):
        ref = Models.refs[self.model]["normalized"]
        worst = 0
        with self.server.connect(timeout=30) as conn:
            for i, text in enumerate(SENTENCES):
                got = self.embed({"text": text}, conn)["embedding"]
                worst = max(worst, self.check(got, ref[i], "sentence %d %r" % (i, text[:40])))
                self.assertAlmostEqual(math.sqrt(sum(x * x for x in got)), 1.0, places=5)
        sys.stderr.write("\n[%s] unbatched: max abs diff vs torch %.3g over %d sentences\n"
                         % (self.model, worst, len(SENTENCES)))

    def test_batched_matches_torch(self):
        ref = Models.refs[self.model]["normalized"]
        got = self.embed({"texts": SENTENCES})["embeddings"]
        self.assertEqual(len(got), len(SENTENCES))
        worst = max(self.check(g, r, "sentence %d" % i) for i, (g, r) in enumerate(zip(got, ref)))
        sys.stderr.write("\n[%s] batched: max abs diff vs torch %.3g\n" % (self.model, worst))

    def test_concurrent_requests_are_batched_correctly(self):
        ref = Models.refs[self.model]["normalized"]

        def one(i):
            return i, self.embed({"text": SENTENCES[i]})["embedding"]

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            for i, got in ex.map(one, list(range(len(SENTENCES))) * 2):
                self.check(got, ref[i], "concurrent sentence %d" % i)

    def test_normalize_false_gives_the_mean_pooled_vector(self):
        ref = Models.refs[self.model]["pooled"]
        got = self.embed({"texts": SENTENCES[:5], "normalize": False})["embeddings"]
        for i in range(5):
            self.check(got[i], ref[i], "unnormalized %d" % i)

    def test_openai_shape(self):
        ref = Models.refs[self.model]["normalized"]
        resp = self.post("/v1/embeddings", {"input": SENTENCES[:3], "model": self.model})
        self.assertEqual(resp.status, 200, resp)
        doc = resp.json()
        self.assertEqual(doc["object"], "list")
        self.assertEqual(doc["model"], self.model)
        self.assertEqual([d["index"] for d in doc["data"]], [0, 1, 2])
        for i, d in enumerate(doc["data"]):
            self.assertEqual(d["object"], "embedding")
            self.check(d["embedding"], ref[i], "openai %d" % i)
        tokens = sum(len(Models.hf_ids[i]) for i in range(3))
        self.assertEqual(doc["usage"], {"prompt_tokens": tokens, "total_tokens": tokens})
        one = self.post("/v1/embeddings", {"input": SENTENCES[0]}).json()
        self.assertEqual(len(one["data"]), 1)
        self.assertEqual(one["model"], self.model)


class TinyModel(Embeddings):
    """The same checks on a 2-layer, hidden-32 model whose tensors carry "bert."."""
    model = "tiny"


class Int8Model(CoringTestCase):
    """--embed-int8 on the MiniLM-shaped model: close to torch's float64
    vectors (not within 1e-4: that is the price of int8), and the same
    whether a text is embedded alone (a pass split across the two
    inference threads) or in a batch."""
    MIN_COSINE = 0.999
    MAX_ABS = 5e-3

    @classmethod
    def setUpClass(cls):
        Models.setup()
        cls.server = CoringServer(threads=1, apps="embed",
                                  args=["--embed-model", Models.dirs["minilm"], "--embed-int8",
                                        "--embed-threads", "2", "--max-body-bytes", "200000",
                                        "--deadline", "off"])  # as above
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(expect_status=0)

    def embed(self, body, conn):
        resp = conn.request("POST", "/embed", {"Content-Type": "application/json"}, body)
        self.assertEqual(resp.status, 200, resp)
        return resp.json()

    def test_close_to_torch_batched_and_alone(self):
        ref = Models.refs["minilm"]["normalized"]
        splits_before = self.server.metric("embed_split_passes_total", timeout=30)
        with self.server.connect(timeout=30) as conn:
            batched = self.embed({"texts": SENTENCES}, conn)["embeddings"]
            worst, lowest = 0, 1
            for i, text in enumerate(SENTENCES):
                alone = self.embed({"text": text}, conn)["embedding"]
                self.assertLessEqual(max_diff(alone, batched[i]), 1e-6, "sentence %d: batched differs" % i)
                cos = sum(a * b for a, b in zip(alone, ref[i]))
                worst, lowest = max(worst, max_diff(alone, ref[i])), min(lowest, cos)
                self.assertGreaterEqual(cos, self.MIN_COSINE, "sentence %d %r" % (i, text[:40]))
                self.assertLessEqual(max_diff(alone, ref[i]), self.MAX_ABS, "sentence %d" % i)
        splits = self.server.metric("embed_split_passes_total", timeout=30) - splits_before
        sys.stderr.write("\n[minilm int8] vs torch: max abs diff %.3g, lowest cosine %.6f; "
                         "%d split passes\n" % (worst, lowest, splits))
        self.assertGreaterEqual(splits, 1, "no int8 pass split across the idle inference thread")

    def test_log_says_int8(self):
        self.assertRegex(self.server.stderr_text(), INT8)
        self.assertRegex(self.server.stderr_text(), ELEMENTWISE)


class BadKernelsValue(CoringTestCase):
    def test_unknown_value_is_a_start_up_error(self):
        Models.setup()
        cmd = [coring_server.binary(), "--port", "0", "--apps", "embed", "--embed-model", Models.dirs["tiny"]]
        env = dict(os.environ, CORING_EMBED_KERNELS="avx1024")
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
        self.assertEqual(res.returncode, 1, res.stderr)
        self.assertIn("CORING_EMBED_KERNELS=avx1024", res.stderr)


class Errors(CoringTestCase):
    @classmethod
    def setUpClass(cls):
        Models.setup()
        cls.server = CoringServer(threads=1, apps="embed",
                                  args=["--embed-model", Models.dirs["tiny"], "--max-body-bytes", "4096"])
        cls.server.start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop(expect_status=0)

    def post(self, path, body):
        with self.server.connect(timeout=30) as conn:
            return conn.request("POST", path, {"Content-Type": "application/json"}, body)

    def test_bad_bodies(self):
        cases = [
            ("/embed", b"", 400), ("/embed", b"{", 400), ("/embed", b'{"text": "\xff\xfe"}', 400),
            ("/embed", b"[]", 422), ("/embed", {}, 422), ("/embed", {"text": ""}, 422),
            ("/embed", {"text": 5}, 422), ("/embed", {"text": None}, 422), ("/embed", {"texts": "x"}, 422),
            ("/embed", {"texts": []}, 422), ("/embed", {"texts": ["a", 1]}, 422),
            ("/embed", {"texts": ["a", ""]}, 422), ("/embed", {"texts": ["a"] * 65}, 422),
            ("/embed", {"text": "a", "texts": ["b"]}, 422), ("/embed", {"text": "a", "normalize": 1}, 422),
            ("/embed", {"text": "x" * 5000}, 413),
        ]
        for path, body, status in cases:
            self.assertJsonError(self.post(path, body), status, "%s %r" % (path, body))
        # /v1/embeddings answers OpenAI's error object.
        for body in ({}, {"input": [[1, 2]]}, {"input": ""}, {"input": "a", "model": 3},
                     {"input": "a", "encoding_format": "base64"}):
            resp = self.post("/v1/embeddings", body)
            self.assertEqual(resp.status, 422, "%r: %r" % (body, resp))
            err = resp.json()["error"]
            self.assertEqual(err["type"], "invalid_request_error", "%r: %r" % (body, resp))
            self.assertTrue(err["message"], "%r: %r" % (body, resp))
        # 64 texts are fine, and the connection and server still work.
        resp = self.post("/embed", {"texts": ["a"] * 64})
        self.assertEqual(resp.status, 200, resp)
        self.assertEqual(len(resp.json()["embeddings"]), 64)

    def test_get_is_405(self):
        with self.server.connect(timeout=30) as conn:
            self.assertJsonError(conn.request("GET", "/embed"), 405)


class Saturated(CoringTestCase):
    def test_full_queue_answers_503_with_retry_after_and_recovers(self):
        # One inference thread, room for 4 texts: 24 clients each sending 4
        # long texts at once must overflow the queue.
        Models.setup()
        long_text = " ".join(SENTENCES[i % len(SENTENCES)] for i in range(6))
        body = {"texts": [long_text] * 4}
        with CoringServer(threads=1, apps="embed",
                          args=["--embed-model", Models.dirs["minilm"], "--embed-threads", "1",
                                "--embed-max-batch", "4", "--embed-max-queue", "4"]) as srv:
            statuses = []

            def client():
                with srv.connect(timeout=60) as conn:
                    resp = conn.request("POST", "/embed", {"Content-Type": "application/json"}, body)
                    statuses.append(resp.status)
                    if resp.status == 503:
                        self.assertJsonError(resp, 503, "queue full")
                        self.assertIsNotNone(resp.header("Retry-After"), "503 without Retry-After")

            threads = [threading.Thread(target=client) for _ in range(24)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(120)
            self.assertEqual(len(statuses), 24, "some clients got no answer")
            self.assertIn(503, statuses, "a full queue never answered 503: %r" % statuses)
            self.assertIn(200, statuses)
            self.assertEqual(set(statuses) - {200, 503}, set(), statuses)
            with srv.connect(timeout=60) as conn:
                resp = conn.request("POST", "/embed", {"Content-Type": "application/json"}, {"text": "after"})
                self.assertEqual(resp.status, 200, "not serving after the flood")
            srv.stop(expect_status=0)


class NoModel(CoringTestCase):
    def test_routes_answer_503_and_the_rest_runs(self):
        with CoringServer(threads=1, apps="hello,embed") as srv:
            with srv.connect(timeout=30) as conn:
                resp = conn.request("POST", "/embed", {"Content-Type": "application/json"}, {"text": "hello"})
                self.assertJsonError(resp, 503, "/embed")
                self.assertEqual(resp.json(), {"error": "no model loaded"})
                resp = conn.request("POST", "/v1/embeddings", {"Content-Type": "application/json"},
                                    {"input": "hello"})
                self.assertEqual(resp.status, 503, resp)
                self.assertEqual(resp.json(), {"error": {"message": "no model loaded", "type": "server_error",
                                                         "param": None, "code": None}})
                self.assertEqual(conn.request("GET", "/json").status, 200)
            srv.stop(expect_status=0)

    def test_bad_model_folder_is_a_clear_start_up_error(self):
        with tempfile.TemporaryDirectory() as empty:
            # embed alone: with every app, no DATABASE_URL is said first (the
            # model is loaded in the app's start(), after the database's).
            cmd = [coring_server.binary(), "--port", "0", "--apps", "embed", "--embed-model", empty]
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            self.assertEqual(res.returncode, 1, res.stderr)
            self.assertIn("config.json", res.stderr)


if __name__ == "__main__":
    coring_server.main()

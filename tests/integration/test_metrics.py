#!/usr/bin/python3
"""GET /metrics (issue 14): Prometheus' own tools read it.

- `promtool check metrics` (Debian `prometheus`) passes on the output;
- a real Prometheus server, started here on 127.0.0.1 with a temporary
  config (scrape_interval 1s) and TSDB folder, scrapes coring, and a query
  through its HTTP API (/api/v1/query) returns exactly the number of GET /
  this test sent;
- requests are labelled with the route pattern (/todos/{id}), never the raw
  path, and unknown paths add no series (route="unmatched").

Exits 77 (a skip in ctest) when promtool or prometheus is missing: install
them with `.ci/install-deps test`. Prometheus is stopped by its PID.
"""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402
import urllib.parse  # noqa: E402
import urllib.request  # noqa: E402

import coring_server as cs  # noqa: E402

PROMTOOL = shutil.which("promtool") or "/usr/bin/promtool"
PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"
if not (os.access(PROMTOOL, os.X_OK) and os.access(PROMETHEUS, os.X_OK)):
    print("SKIP: promtool and prometheus (Debian package prometheus) are needed: "
          "run .ci/install-deps test")
    sys.exit(77)


def get(server, path, timeout=5):
    url = "http://%s:%d%s" % (server.host, server.port, path)
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def samples(text, name):
    """{labels-string: value} of the samples of @name (exact metric name)."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"^%s(\{[^}]*\})? (\S+)$" % re.escape(name), line)
        if m:
            out[m.group(1) or ""] = float(m.group(2))
    return out


class MetricsText(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = cs.CoringServer(threads=2, apps="hello,todo").start()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_promtool_check_metrics_passes(self):
        for path in ("/", "/json", "/todos", "/todos/1", "/no/such/path"):
            get(self.server, path)
        status, headers, text = get(self.server, "/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(headers["Content-Type"], "text/plain; version=0.0.4; charset=utf-8")
        p = subprocess.run([PROMTOOL, "check", "metrics"], input=text.encode(),
                           capture_output=True, timeout=30)
        print("promtool check metrics: rc %d %s" % (p.returncode, p.stdout.decode() + p.stderr.decode()))
        self.assertEqual(p.returncode, 0, p.stdout.decode() + p.stderr.decode())
        for family in ("http_requests_total", "http_request_duration_seconds",
                       "http_connections_open", "http_connections_total",
                       "http_request_size_bytes_total", "http_response_size_bytes_total",
                       "http_parser_read_bytes_total",
                       "process_cpu_seconds_total", "process_resident_memory_bytes",
                       "process_open_fds", "process_start_time_seconds"):
            self.assertIn("# TYPE %s " % family, text)
        self.assertRegex(text, r'\ncoring_build_info\{version="[^"]+",[^}]*\} 1\n')
        # The runtime, one series per worker thread.
        for family in ("coring_ring_sqes_submitted_total", "coring_ring_submits_total",
                       "coring_ring_cqes_reaped_total", "coring_ring_cq_overflows_total",
                       "coring_provided_buffers_exhausted_total", "coring_messages_sent_total",
                       "coring_messages_retried_total", "coring_messages_stale_total",
                       "coring_coroutines_alive", "coring_stack_pool_stacks"):
            self.assertEqual(sorted(samples(text, family)), ['{thread="0"}', '{thread="1"}'], family)
        self.assertGreater(sum(samples(text, "coring_ring_sqes_submitted_total").values()), 0)
        self.assertEqual(sum(samples(text, "coring_messages_stale_total").values()), 0)

    def test_routes_are_labelled_by_pattern_and_unknown_paths_add_no_series(self):
        for i in range(3):
            get(self.server, "/todos/%d" % (1000 + i))
        _, _, text = get(self.server, "/metrics")
        self.assertIn('route="/todos/{id}",method="GET",status="404"', text)
        self.assertNotIn('route="/todos/1000"', text)
        before = len(samples(text, "http_requests_total"))
        for i in range(50):
            get(self.server, "/scan/%d/admin.php" % i)
        _, _, text = get(self.server, "/metrics")
        self.assertNotIn("/scan/", text)
        after = samples(text, "http_requests_total")
        # At most the unmatched 404 series and the /metrics series are new.
        self.assertLessEqual(len(after), before + 2, "series: %s" % sorted(after))
        self.assertGreaterEqual(after['{route="unmatched",method="GET",status="404"}'], 50)


    def test_requests_refused_before_routing_are_counted_by_status(self):
        def refused():
            _, _, text = get(self.server, "/metrics")
            return samples(text, "http_requests_refused_total")
        before = refused()
        sent = {"400": [b"GET / HTTP/1.1\r\nHost: x\r\nno colon here\r\n\r\n"] * 3,
                "431": [b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200000 + b"\r\n\r\n"] * 2}
        for status, raws in sent.items():
            for raw in raws:
                with self.server.connect() as c:
                    c.send(raw)
                    self.assertEqual(c.read_response("GET").status, int(status))
        after = refused()
        for status, raws in sent.items():
            key = '{status="%s"}' % status
            self.assertEqual(after.get(key, 0) - before.get(key, 0), len(raws), key)
        # Refused requests stay out of http_requests_total: no route saw them.
        _, _, text = get(self.server, "/metrics")
        self.assertNotIn('status="431"', "\n".join(l for l in text.splitlines()
                                                   if l.startswith("http_requests_total")))

    def test_no_sample_repeats_when_a_pattern_has_several_methods(self):
        # GET and POST /todos, GET, PATCH and DELETE /todos/{id}: the series
        # labelled by route alone (request and response bytes) must have one
        # sample per pattern, not one per (method, pattern) route.
        def call(method, path, body=None):
            req = urllib.request.Request("http://%s:%d%s" % (self.server.host, self.server.port, path),
                                         data=body, method=method,
                                         headers={"Content-Type": "application/json"} if body else {})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    return r.status, r.headers, r.read()
            except urllib.error.HTTPError as e:
                return e.code, e.headers, e.read()
        status, headers, _ = call("POST", "/todos", b'{"title":"metrics"}')
        self.assertEqual(status, 201)
        where = headers["Location"]
        call("GET", "/todos")
        call("GET", where)
        call("PATCH", where, b'{"completed":true}')
        call("DELETE", where)
        _, _, text = get(self.server, "/metrics")
        seen = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key = line.rsplit(" ", 1)[0]
                seen[key] = seen.get(key, 0) + 1
        repeated = sorted(k for k, n in seen.items() if n > 1)
        self.assertEqual(repeated, [], "samples repeated in /metrics")
        self.assertIn('http_request_size_bytes_total{route="/todos"}', seen)
        self.assertIn('http_requests_total{route="/todos/{id}",method="DELETE",status="204"}', seen)


class RealPrometheus(unittest.TestCase):
    N = 37  # GET / requests the test sends

    def test_prometheus_scrapes_and_counts_the_requests_sent(self):
        server = cs.CoringServer(threads=2, apps="hello").start()
        tmp = tempfile.mkdtemp(prefix="coring-prom-")
        prom = None
        log = open(os.devnull, "w")
        try:
            port = cs.free_port()
            config = os.path.join(tmp, "prometheus.yml")
            with open(config, "w") as f:
                f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                        "scrape_configs:\n  - job_name: coring\n    static_configs:\n"
                        "      - targets: ['%s:%d']\n" % (server.host, server.port))
            log.close()
            log = open(os.path.join(tmp, "prometheus.log"), "w")
            prom = subprocess.Popen([PROMETHEUS, "--config.file=" + config,
                                     "--storage.tsdb.path=" + os.path.join(tmp, "data"),
                                     "--web.listen-address=%s:%d" % (cs.HOST, port)],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=log)
            for _ in range(self.N):
                status, _, body = get(server, "/")
                self.assertEqual(status, 200)
            query = 'sum(http_requests_total{job="coring",route="/",method="GET",status="200"})'
            url = "http://%s:%d/api/v1/query?%s" % (cs.HOST, port, urllib.parse.urlencode({"query": query}))
            seen, last, start = None, None, time.monotonic()
            while time.monotonic() - start < 40:
                try:
                    with urllib.request.urlopen(url, timeout=5) as r:
                        last = json.load(r)
                    result = last["data"]["result"]
                    if result:
                        seen = float(result[0]["value"][1])
                        if seen >= self.N:
                            break
                except (OSError, ValueError, KeyError):
                    pass
                if prom.poll() is not None:
                    break
                time.sleep(0.5)
            took = time.monotonic() - start
            print("Prometheus saw %s GET / (sent %d) after %.1f s" % (seen, self.N, took))
            if seen is None:
                log.flush()
                with open(os.path.join(tmp, "prometheus.log")) as f:
                    print(f.read()[-3000:])
            self.assertEqual(seen, self.N, "last answer: %s" % last)
        finally:
            if prom is not None and prom.poll() is None:
                os.kill(prom.pid, signal.SIGTERM)
                try:
                    prom.wait(10)
                except subprocess.TimeoutExpired:
                    os.kill(prom.pid, signal.SIGKILL)
                    prom.wait()
            log.close()
            server.stop()
            shutil.rmtree(tmp, ignore_errors=True)


class DbMetrics(unittest.TestCase):
    """The pool's metrics move when the users app queries PostgreSQL."""

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-metrics-")
        os.environ["DATABASE_URL"] = cls.postgres.url()
        cls.server = cs.CoringServer(threads=2, apps="users").start()
        cls.addClassCleanup(cls.server.kill)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_queries_and_round_trips_are_counted(self):
        _, _, text = get(self.server, "/metrics")
        q0 = samples(text, "db_queries_total").get("", 0)
        for i in range(20):
            status, _, _ = get(self.server, "/users/%d" % (i + 1))
            self.assertIn(status, (200, 404))
        _, _, text = get(self.server, "/metrics")
        queries = samples(text, "db_queries_total")[""]
        trips = samples(text, "db_round_trips_total")[""]
        print("db: %d queries, %d round trips" % (queries, trips))
        self.assertGreaterEqual(queries - q0, 20)
        self.assertGreater(trips, 0)
        self.assertGreaterEqual(samples(text, "db_query_duration_seconds_count")[""], 20)
        self.assertEqual(samples(text, "db_queries_waiting")[""], 0)
        self.assertIn('route="/users/{id}",method="GET"', text)


class EmbedMetrics(unittest.TestCase):
    """The inference threads' own blocks reach the sums: texts, tokens,
    batches and forward passes (a one-layer model made by make_model.py)."""

    def test_texts_tokens_and_batches_are_counted(self):
        tmp = tempfile.mkdtemp(prefix="coring-metrics-embed-")
        try:
            vocab = os.path.join(tmp, "vocab.txt")
            with open(vocab, "w") as f:
                f.write("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world"]) + "\n")
            model = os.path.join(tmp, "model")
            subprocess.run(["/usr/bin/python3", os.path.join(cs.ROOT, "apps", "embed", "make_model.py"),
                            "--out", model, "--vocab", vocab, "--layers", "1", "--hidden", "8",
                            "--heads", "2", "--intermediate", "16", "--max-positions", "64",
                            "--max-seq-length", "64"], check=True, timeout=120, stdout=subprocess.DEVNULL)
            server = cs.CoringServer(threads=2, apps="embed",
                                     args=["--embed-model", model, "--embed-threads", "1"]).start()
            try:
                for _ in range(3):
                    req = urllib.request.Request(
                        "http://%s:%d/embed" % (server.host, server.port),
                        data=json.dumps({"texts": ["hello world", "hello"]}).encode(),
                        headers={"Content-Type": "application/json"})
                    with urllib.request.urlopen(req, timeout=10) as r:
                        self.assertEqual(r.status, 200)
                _, _, text = get(server, "/metrics")
            finally:
                server.stop()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print("embed: texts %s tokens %s" % (samples(text, "embed_texts_total"), samples(text, "embed_tokens_total")))
        self.assertEqual(samples(text, "embed_texts_total")[""], 6)
        self.assertEqual(samples(text, "embed_tokens_total")[""], 3 * (4 + 3))  # [CLS] .. [SEP]
        self.assertGreaterEqual(samples(text, "embed_batch_size_count")[""], 3)
        self.assertEqual(samples(text, "embed_batch_size_sum")[""], 6)
        self.assertGreaterEqual(samples(text, "embed_forward_duration_seconds_count")[""], 3)
        self.assertEqual(samples(text, "embed_queue_texts")[""], 0)


if __name__ == "__main__":
    cs.main()

#!/usr/bin/python3
"""CORS in a real browser: headless Chromium, driven through chromedriver's
W3C WebDriver HTTP API (Python standard library only).

A page is served by a tiny HTTP server of this test on its own loopback
port, a second origin (http://127.0.0.1:PAGE_PORT). From it, fetch() makes
a JSON POST /todos, a PATCH /todos/{id} and a DELETE /todos/{id} against
coring (http://127.0.0.1:CORING_PORT):

- coring started with --cors-origins naming the page's origin: the three
  succeed (201, 200, 204), each after the browser's own preflight;
- coring started with another origin allowed: each fails with the
  TypeError fetch() gives for a CORS failure, and coring never sees the
  POST (the store stays empty: the preflight stopped it).

Needs /usr/bin/chromium and /usr/bin/chromedriver (Debian `chromium`,
`chromium-driver`; `.ci/install-deps test` installs them); skipped, saying
so, without them. Under 30 s.
"""

import sys

sys.dont_write_bytecode = True

import http.server  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import unittest  # noqa: E402
import urllib.error  # noqa: E402
import urllib.request  # noqa: E402

import coring_server as cs  # noqa: E402

CHROMIUM = os.environ.get("CORING_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CORING_CHROMEDRIVER", "/usr/bin/chromedriver")
DRIVER_START_TIMEOUT = 10.0
SCRIPT_TIMEOUT_MS = 10000

PAGE = b"""<!doctype html>
<html><head><meta charset="utf-8"><title>cors page</title></head>
<body><p>A page on another origin than coring's.</p></body></html>
"""

# Runs in the page: each call on its own, so that a failure of one does not
# hide the others. Reports [name, status or null, error name, error message].
SCRIPT = """
const done = arguments[arguments.length - 1];
const base = arguments[0], existing = arguments[1];
const json = {'Content-Type': 'application/json'};
async function call(name, url, init, read) {
  try {
    const r = await fetch(url, init);
    const body = r.status === 204 ? null : await r.json();
    return [name, r.status, null, read && body ? read(body) : null];
  } catch (e) {
    return [name, null, e.name, String(e.message)];
  }
}
(async () => {
  const out = [];
  const post = await call('POST', base + '/todos',
      {method: 'POST', headers: json, body: JSON.stringify({title: 'from a browser'})}, b => b.id);
  out.push(post);
  const id = post[1] === 201 ? post[3] : existing;
  out.push(await call('PATCH', base + '/todos/' + id,
      {method: 'PATCH', headers: json, body: JSON.stringify({completed: true})}, b => b.completed));
  out.push(await call('DELETE', base + '/todos/' + id, {method: 'DELETE'}));
  done(out);
})();
"""


class PageHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(PAGE)))
        self.end_headers()
        self.wfile.write(PAGE)

    def log_message(self, *args):
        pass


class WebDriver:
    """One chromedriver process (killed by its PID) and one Chromium session."""

    def __init__(self):
        self.port = cs.free_port()
        self.profile = tempfile.mkdtemp(prefix="coring-cors-chromium-")
        self.proc = subprocess.Popen([CHROMEDRIVER, "--port=%d" % self.port, "--allowed-ips="],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.session = None
        deadline = time.monotonic() + DRIVER_START_TIMEOUT
        while True:
            try:
                if self.call("GET", "/status", timeout=1)["value"].get("ready"):
                    break
            except (OSError, ValueError):
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                raise AssertionError("chromedriver did not get ready within %.0f s" % DRIVER_START_TIMEOUT)
            time.sleep(0.1)
        caps = {"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM,
                                   "args": ["--headless=new", "--no-sandbox", "--disable-gpu",
                                            "--disable-dev-shm-usage", "--no-first-run",
                                            "--user-data-dir=" + self.profile]}}}}
        try:
            self.session = self.call("POST", "/session", caps, timeout=20)["value"]["sessionId"]
            self.call("POST", "/session/%s/timeouts" % self.session, {"script": SCRIPT_TIMEOUT_MS})
        except Exception:
            self.close()
            raise

    def call(self, method, path, body=None, timeout=15):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://%s:%d%s" % (cs.HOST, self.port, path), data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            raise AssertionError("WebDriver %s %s: %s %s" % (method, path, e.code, e.read()[:500]))

    def open(self, url):
        self.call("POST", "/session/%s/url" % self.session, {"url": url})

    def run_async(self, script, *args):
        return self.call("POST", "/session/%s/execute/async" % self.session,
                         {"script": script, "args": list(args)}, timeout=SCRIPT_TIMEOUT_MS / 1000 + 5)["value"]

    def close(self):
        if self.session:
            try:
                self.call("DELETE", "/session/%s" % self.session, timeout=10)
            except Exception:
                pass
            self.session = None
        if self.proc.poll() is None:
            self.proc.kill()  # by its PID
            self.proc.wait(5)
        shutil.rmtree(self.profile, True)


@unittest.skipUnless(os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK),
                     "no %s or %s: install them with `.ci/install-deps test` (Debian chromium, "
                     "chromium-driver)" % (CHROMIUM, CHROMEDRIVER))
class BrowserCorsTest(cs.CoringTestCase):

    @classmethod
    def setUpClass(cls):
        cls.page = http.server.ThreadingHTTPServer((cs.HOST, 0), PageHandler)
        cls.page_thread = threading.Thread(target=cls.page.serve_forever, daemon=True)
        cls.page_thread.start()
        cls.page_origin = "http://%s:%d" % (cs.HOST, cls.page.server_address[1])
        cls.started = time.monotonic()
        try:
            cls.driver = WebDriver()
        except Exception:
            cls.page.shutdown()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.driver.close()
        cls.page.shutdown()
        cls.page.server_close()
        print("browser test: %.1f s" % (time.monotonic() - cls.started))

    def run_page(self, cors_origins):
        """The page's three calls against a coring allowing @cors_origins; (results, todos left)."""
        with cs.CoringServer(threads=2, args=["--cors-origins", cors_origins]) as srv:
            with srv.connect() as c:
                resp = c.request("POST", "/todos", {"Content-Type": "application/json"}, {"title": "seed"})
                self.assertEqual(resp.status, 201, repr(resp))
                seed = resp.json()["id"]
            self.driver.open(self.page_origin + "/")
            base = "http://%s:%d" % (srv.host, srv.port)
            results = self.driver.run_async(SCRIPT, base, seed)
            with srv.connect() as c:
                todos = c.request("GET", "/todos").json()
            srv.stop(expect_status=0)
        print("--cors-origins %s: %s" % (cors_origins, json.dumps(results)))
        return results, todos

    def test_allowed_origin(self):
        results, todos = self.run_page(self.page_origin)
        self.assertEqual([r[0] for r in results], ["POST", "PATCH", "DELETE"], repr(results))
        post, patch, delete = results
        self.assertEqual(post[1], 201, "POST from the allowed origin: %r" % (post,))
        self.assertEqual(patch[1], 200, "PATCH from the allowed origin: %r" % (patch,))
        self.assertIs(patch[3], True, "PATCH's answer read by the page: %r" % (patch,))
        self.assertEqual(delete[1], 204, "DELETE from the allowed origin: %r" % (delete,))
        self.assertEqual([t["title"] for t in todos], ["seed"], "the page's todo was made and deleted")

    def test_origin_not_allowed(self):
        results, todos = self.run_page("http://127.0.0.1:1")
        self.assertEqual([r[0] for r in results], ["POST", "PATCH", "DELETE"], repr(results))
        for name, status, error, message in results:
            self.assertIsNone(status, "%s succeeded from an origin not allowed: %r" % (name, results))
            self.assertEqual(error, "TypeError", "%s: %r" % (name, results))
            self.assertIn("fetch", message.lower(), "%s: %r" % (name, results))
        # The preflights failed: the browser sent none of the requests.
        self.assertEqual([(t["title"], t["completed"]) for t in todos], [("seed", False)], repr(todos))


if __name__ == "__main__":
    cs.main()

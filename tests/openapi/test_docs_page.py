#!/usr/bin/python3
"""GET /docs in a real browser: headless Chromium (Debian's chromium and
chromium-driver), driven through chromedriver's W3C WebDriver API from the
standard library, opens coring's /docs; the rendered page must list every
operation of /openapi.json, and a "Try it out" of POST /todos, with a body
the test types, must reach coring and get 201 (the todo is then in
GET /todos). Skipped, naming `.ci/install-deps test`, when Chromium is
missing, and when the build had no npm (/docs is 503 then: docs/openapi.md).
"""
import json
import os
import subprocess
import sys
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import coring_server as cs  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
PAGE_TIMEOUT = 15  # seconds for the page to render, and for the answer to show
TITLE = "typed in the docs page"


class WebDriver:
    """The few W3C WebDriver commands this test needs, over plain HTTP."""

    def __init__(self):
        self.port = cs.free_port()
        self.proc = subprocess.Popen([CHROMEDRIVER, "--port=%d" % self.port, "--allowed-ips=127.0.0.1"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                self.call("GET", "/status")
                break
            except OSError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    self.quit()
                    raise AssertionError("chromedriver did not start")
                time.sleep(0.1)
        caps = {"browserName": "chrome", "goog:chromeOptions": {
            "binary": CHROMIUM,
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--no-first-run", "--window-size=1280,4000"]}}
        self.session = self.call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["sessionId"]

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read() or b"{}").get("value")
        except urllib.error.HTTPError as e:
            raise AssertionError("webdriver %s %s: %s" % (method, path, e.read()[:500]))

    def s(self, method, path, body=None):
        return self.call(method, "/session/%s%s" % (self.session, path), body)

    def open(self, url):
        self.s("POST", "/url", {"url": url})

    def find_all(self, css):
        found = self.s("POST", "/elements", {"using": "css selector", "value": css})
        return [next(iter(e.values())) for e in found]  # {ELEMENT-key: id}

    def wait_for(self, css, timeout=PAGE_TIMEOUT):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.find_all(css)
            if found:
                return found
            time.sleep(0.1)
        raise AssertionError("no %r on the page within %d s" % (css, timeout))

    def script(self, js, *args):
        return self.s("POST", "/execute/sync", {"script": js, "args": list(args)})

    def click(self, element):
        self.s("POST", "/element/%s/click" % element, {})

    def type(self, element, text):
        self.s("POST", "/element/%s/clear" % element, {})
        self.s("POST", "/element/%s/value" % element, {"text": text})

    def quit(self):
        try:
            if getattr(self, "session", None):
                self.call("DELETE", "/session/%s" % self.session)
        except (OSError, AssertionError):
            pass
        cs.end_process(self.proc)


class DocsPageTest(cs.CoringTestCase):
    @classmethod
    def setUpClass(cls):
        if not (os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK)):
            raise unittest.SkipTest("no %s or %s: run .ci/install-deps test" % (CHROMIUM, CHROMEDRIVER))
        cls.server = cs.CoringServer(threads=2, apps="hello,todo").start()
        cls.addClassCleanup(cls.server.kill)
        cls.base = "http://127.0.0.1:%d" % cls.server.port
        with cls.server.connect() as c:
            r = c.request("GET", "/docs")
        if r.status == 503:
            raise unittest.SkipTest("coring was built without Swagger UI (no npm): %s" % r.body[:200])
        cls.driver = WebDriver()
        cls.addClassCleanup(cls.driver.quit)

    def test_lists_every_operation_and_try_it_out_posts(self):
        t0 = time.monotonic()
        with self.server.connect() as c:
            doc = c.request("GET", "/openapi.json").json()
        want = sorted("%s %s" % (m.upper(), p) for p, item in doc["paths"].items() for m in item
                      if m in ("get", "post", "put", "patch", "delete"))
        d = self.driver
        d.open(self.base + "/docs")
        d.wait_for(".opblock")
        shown = sorted(d.script(
            "return [...document.querySelectorAll('.opblock')].map(b =>"
            " b.querySelector('.opblock-summary-method').textContent.trim() + ' ' +"
            " b.querySelector('.opblock-summary-path').getAttribute('data-path'))"))
        print("page lists %d operations, the document %d" % (len(shown), len(want)))
        self.assertEqual(shown, want, "the operations the page lists against /openapi.json's")

        # Try it out: POST /todos with a body typed here.
        d.click(d.wait_for("#operations-todo-createTodo .opblock-summary-control")[0])
        d.click(d.wait_for("#operations-todo-createTodo .try-out__btn")[0])
        body = d.wait_for("#operations-todo-createTodo textarea.body-param__text")[0]
        d.type(body, json.dumps({"title": TITLE}))
        d.click(d.wait_for("#operations-todo-createTodo button.execute")[0])
        status = d.wait_for("#operations-todo-createTodo .live-responses-table tr.response .response-col_status")[0]
        deadline = time.monotonic() + PAGE_TIMEOUT
        text = ""
        while time.monotonic() < deadline:
            text = d.s("GET", "/element/%s/text" % status)
            if text.strip():
                break
            time.sleep(0.1)
        self.assertEqual(text.strip()[:3], "201", "the page's answer to POST /todos: %r" % text)
        with self.server.connect() as c:
            todos = c.request("GET", "/todos").json()
        self.assertIn(TITLE, [t["title"] for t in todos], "the todo the page created is in GET /todos")
        print("docs page test took %.1f s" % (time.monotonic() - t0))


if __name__ == "__main__":
    cs.main()

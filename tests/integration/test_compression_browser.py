#!/usr/bin/python3
"""Compression in a real browser: headless Chromium (driven as in
test_cors_browser.py, through chromedriver's WebDriver API) fetches GET
/users from coring with its own Accept-Encoding, and gets the same JSON
as an identity request, sent compressed: the page reads Content-Encoding
and the Resource Timing sizes (encodedBodySize below decodedBodySize).

Needs /usr/bin/chromium and /usr/bin/chromedriver (Debian `chromium`,
`chromium-driver`); skipped, saying so, without them. PostgreSQL: a
throw-away cluster, as test_users.py. Under 30 s.
"""

import sys

sys.dont_write_bytecode = True

import json  # noqa: E402
import os  # noqa: E402
import unittest  # noqa: E402

import coring_server as cs  # noqa: E402
from test_cors_browser import CHROMEDRIVER, CHROMIUM, WebDriver  # noqa: E402

# Runs in a page of coring's own origin: the fetch and what the browser
# saw of it.
SCRIPT = """
const done = arguments[arguments.length - 1];
(async () => {
  try {
    const r = await fetch('/users?limit=100', {cache: 'no-store'});
    const body = await r.json();
    await new Promise(ok => setTimeout(ok, 50));
    const t = performance.getEntriesByType('resource').filter(e => e.name.includes('/users'));
    const e = t[t.length - 1] || {};
    done({status: r.status, encoding: r.headers.get('content-encoding'), vary: r.headers.get('vary'),
          body: body, encoded: e.encodedBodySize, decoded: e.decodedBodySize});
  } catch (err) {
    done({error: String(err)});
  }
})();
"""


@unittest.skipUnless(os.access(CHROMIUM, os.X_OK) and os.access(CHROMEDRIVER, os.X_OK),
                     "no %s or %s: install them with `.ci/install-deps test` (Debian chromium, "
                     "chromium-driver)" % (CHROMIUM, CHROMEDRIVER))
class BrowserCompressionTest(cs.CoringTestCase):

    @classmethod
    def setUpClass(cls):
        cls.postgres = cs.LocalPostgres.for_class(cls, "coring-compression-browser-")
        os.environ["DATABASE_URL"] = cls.postgres.url()
        cls.driver = WebDriver()
        cls.addClassCleanup(cls.driver.close)

    def test_users_compressed_same_json(self):
        with cs.CoringServer(threads=2, apps="users", args=["--seed-users", "200"]) as srv:
            with srv.connect() as c:
                plain = c.request("GET", "/users?limit=100")
            self.assertEqual(plain.status, 200)
            self.driver.open("http://%s:%d/livez" % (srv.host, srv.port))
            seen = self.driver.run_async(SCRIPT)
            srv.stop(expect_status=0)
        print("browser: %s" % json.dumps({k: v for k, v in seen.items() if k != "body"}))
        self.assertNotIn("error", seen, repr(seen))
        self.assertEqual(seen["status"], 200)
        self.assertIn(seen["encoding"], ("zstd", "br", "gzip"), "the browser's fetch came compressed")
        self.assertEqual((seen["vary"] or "").lower(), "accept-encoding")
        self.assertEqual(seen["body"], plain.json(), "the same JSON as identity")
        self.assertEqual(seen["decoded"], len(plain.body), repr(seen))
        self.assertLess(seen["encoded"], seen["decoded"] / 2, repr(seen))


if __name__ == "__main__":
    cs.main()

#!/usr/bin/env python3
"""The notes service's test: test_notes.py PATH-TO-NOTES.

Starts the service on a free port of 127.0.0.1 with the DATABASE_URL of
the environment (a PostgreSQL to create its table in; without one the test
is skipped, exit 77), and checks what a client sees: the JSON route, a note
kept and read back, the errors, the routes in /openapi.json and /readyz,
and a drain on SIGTERM that exits 0. Python's standard library only.
"""
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import unittest

NOTES = None


class NotesTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc = subprocess.Popen([NOTES, "--host", "127.0.0.1", "--port", "0", "--threads", "1"],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE, text=True)
        cls.log = []
        for line in cls.proc.stderr:  # the start-up line says where it listens
            cls.log.append(line)
            m = re.search(r"listening on http://[^:]+:(\d+)", line)
            if m:
                cls.port = int(m.group(1))
                break
        else:
            raise AssertionError("notes did not start:\n" + "".join(cls.log))
        threading.Thread(target=lambda: cls.log.extend(cls.proc.stderr), daemon=True).start()

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.kill()
            cls.proc.wait()

    def request(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        headers = {"Content-Type": "application/json"} if body is not None else {}
        conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        return resp.status, json.loads(data) if data else None

    def test_about(self):
        status, body = self.request("GET", "/about")
        self.assertEqual(status, 200)
        self.assertEqual(body["service"], "notes")
        self.assertRegex(body["coring"], r"^\d+\.\d+\.\d+$")

    def test_keep_and_read_a_note(self):
        status, note = self.request("POST", "/notes", {"body": "buy milk"})
        self.assertEqual(status, 201, note)
        self.assertEqual(note["body"], "buy milk")
        self.assertEqual(self.request("GET", "/notes/%d" % note["id"]), (200, note))

    def test_errors(self):
        self.assertEqual(self.request("GET", "/notes/999999999")[0], 404)
        self.assertEqual(self.request("GET", "/notes/abc"), (400, {"error": "id must be a positive integer"}))
        self.assertEqual(self.request("POST", "/notes", {"body": 7})[0], 422)
        self.assertEqual(self.request("POST", "/notes", {"body": "x" * 281})[0], 422,
                         "over --notes-max-body (280 by default)")

    def test_the_server_around_it(self):
        status, doc = self.request("GET", "/openapi.json")
        self.assertEqual(status, 200)
        for path in ("/about", "/notes", "/notes/{id}", "/", "/readyz"):
            self.assertIn(path, doc["paths"], "the notes app's, hello's and the server's routes")
        status, ready = self.request("GET", "/readyz")
        self.assertEqual((status, ready["checks"]["database"]), (200, "ok"), ready)
        self.assertEqual(self.request("GET", "/")[0], 200, "coring's hello app, mounted beside")
        listed = subprocess.run([NOTES, "--list-apps"], capture_output=True, text=True, check=True).stdout
        self.assertRegex(listed, r"(?m)^notes +mounted +database ")

    def test_zz_drain_on_sigterm(self):
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(timeout=20), 0, "".join(self.log))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    NOTES = os.path.abspath(sys.argv.pop(1))
    if not os.environ.get("DATABASE_URL"):
        print("SKIP: set DATABASE_URL to a PostgreSQL the test may create its table in")
        sys.exit(77)
    unittest.main(verbosity=2)

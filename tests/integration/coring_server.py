#!/usr/bin/python3
"""Helpers for coring's integration tests (Python standard library only).

- CoringServer: starts the `coring` binary on 127.0.0.1 with --port 0,
  waits for the `listening on http://HOST:PORT` line on stderr, and stops it
  with SIGTERM sent to its own PID.
- Conn / Response: a raw-socket HTTP/1.1 client that sends exact bytes and
  reads exactly one response at a time (Content-Length, chunked or
  close-delimited body), so that malformed requests and pipelining can be
  tested byte for byte.
- LocalPostgres: a throw-away PostgreSQL cluster (db/pg-local) in a
  temporary folder of a test class's own, stopped and removed at the end.
- main(): parses `--binary PATH` (or $CORING_BINARY) and runs unittest.
"""

import argparse
import functools
import json
import os
import re
import resource
import signal
import socket
import subprocess
import shutil
import sys
import tempfile
import threading
import time
import unittest

HOST = "127.0.0.1"
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PG_LOCAL = os.path.join(ROOT, "db", "pg-local")
SOCK_TIMEOUT = 5.0      # every socket operation; tests stay well under 10 s each
START_TIMEOUT = 10.0    # wait for the `listening on` line
STOP_TIMEOUT = 10.0     # wait for exit after SIGTERM

_BINARY = os.environ.get("CORING_BINARY")
_EXTRA = {}

LISTEN_RE = re.compile(r"listening on http://([^\s:/]+):(\d+)")


def binary():
    if not _BINARY:
        raise unittest.SkipTest("no coring binary: pass --binary PATH or set CORING_BINARY")
    return _BINARY


def option(name, default=None):
    """Extra command-line options given to the test script (see main())."""
    return _EXTRA.get(name, default)


@functools.lru_cache(maxsize=None)
def sanitizer():
    """"tsan" or "asan" when the binary under test is built with
    ThreadSanitizer or AddressSanitizer, else None. Their CPU, memory and
    latency say nothing of coring's: timing and memory bounds are printed,
    not asserted, under them."""
    with open(binary(), "rb") as f:
        data = f.read()
    if b"__tsan_init" in data:
        return "tsan"
    if b"__asan_init" in data:
        return "asan"
    return None


def clean_env(**extra):
    """The test's environment without any CORING_ variable, plus @extra."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CORING_")}
    env.update(extra)
    return env


# --check-config checks that DATABASE_URL is set, and that libpq takes it,
# when a mounted app needs PostgreSQL, without connecting: the URL the tests
# of options give it when they check a configuration with every app.
CHECK_DATABASE_URL = "postgresql://coring@127.0.0.1:1/coring"


def check_env(**extra):
    """The test's environment with DATABASE_URL = CHECK_DATABASE_URL, plus @extra."""
    env = dict(os.environ, DATABASE_URL=CHECK_DATABASE_URL)
    env.update(extra)
    return env


def run_cli(args, env, timeout=10):
    """The binary under test run with @args and @env to its exit (a
    command-line check: --help, --check-config, a refused flag)."""
    return subprocess.run([binary()] + list(args), env=env, stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=timeout, text=True, errors="replace")


def raise_nofile_limit():
    """Raise RLIMIT_NOFILE's soft limit to the hard limit; return the new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft


class CoringServer:
    """One coring process. Use start()/stop(), or as a context manager."""

    def __init__(self, threads=2, apps="hello,todo", args=(), preexec_fn=None, popen=None):
        self.threads = threads
        self.preexec_fn = preexec_fn  # run in the child before exec (e.g. setrlimit)
        self.popen = dict(popen or {})  # more subprocess.Popen arguments (env, pass_fds)
        self.apps = apps
        self.args = list(args)
        self.proc = None
        self.host = None
        self.port = None
        self.pid = None
        self._lines = []
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._reader = None

    # -- process control ------------------------------------------------
    def command(self):
        cmd = [binary(), "--host", HOST, "--port", "0"]
        if self.threads is not None:
            cmd += ["--threads", str(self.threads)]
        if self.apps is not None:
            cmd += ["--apps", self.apps]
        return cmd + self.args

    def start(self):
        cmd = self.command()
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, preexec_fn=self.preexec_fn, **self.popen)
        self.pid = self.proc.pid
        self._reader = threading.Thread(target=self._drain_stderr, daemon=True)
        self._reader.start()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self._ready.wait(0.05):
                break
            if self.proc.poll() is not None:
                self._reader.join(1.0)
                if self._ready.is_set():
                    break
                raise AssertionError("coring exited with status %s before listening; command %s; stderr:\n%s"
                                     % (self.proc.returncode, cmd, self.stderr_text()))
        if not self._ready.is_set():
            self.kill()
            raise AssertionError("no 'listening on http://HOST:PORT' line on stderr within %.0f s; "
                                 "command %s; stderr:\n%s" % (START_TIMEOUT, cmd, self.stderr_text()))
        return self

    def _drain_stderr(self):
        for raw in iter(self.proc.stderr.readline, b""):
            line = raw.decode("utf-8", "replace").rstrip("\n")
            with self._lock:
                if len(self._lines) < 20000:
                    self._lines.append(line)
            if not self._ready.is_set():
                m = LISTEN_RE.search(line)
                if m:
                    self.host, self.port = m.group(1), int(m.group(2))
                    self._ready.set()
        self.proc.stderr.close()

    def rss_kib(self):
        """The server's resident set size (VmRSS), KiB."""
        with open("/proc/%d/status" % self.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise AssertionError("no VmRSS for pid %d" % self.pid)

    def cpu_seconds(self):
        """User + system CPU time the server has used so far, seconds."""
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stderr_text(self, last=40):
        with self._lock:
            return "\n".join(self._lines[-last:])

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def send_signal(self, sig=signal.SIGTERM):
        if self.running():
            os.kill(self.pid, sig)

    def wait(self, timeout=STOP_TIMEOUT):
        """Wait for exit; return the exit status, or None after @timeout."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self):
        """SIGKILL this server by its PID (clean-up only)."""
        if self.running():
            os.kill(self.pid, signal.SIGKILL)
            self.proc.wait(5)
        if self._reader is not None:
            self._reader.join(2.0)

    def stop(self, expect_status=None, timeout=STOP_TIMEOUT, sig=signal.SIGTERM):
        """Send @sig (SIGTERM) by PID and wait; assert the status if asked."""
        if self.proc is None:
            return None
        if self.running():
            os.kill(self.pid, sig)
        status = self.wait(timeout)
        if status is None:
            self.kill()
            raise AssertionError("coring (pid %d) did not exit within %.1f s of signal %d; stderr:\n%s"
                                 % (self.pid, timeout, sig, self.stderr_text()))
        if self._reader is not None:
            self._reader.join(2.0)
        self.check_one_answer()
        if expect_status is not None and status != expect_status:
            raise AssertionError("coring exited with status %d, expected %d (negative = killed by "
                                 "that signal); stderr:\n%s" % (status, expect_status, self.stderr_text()))
        return status

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.kill()
        if exc[0] is None:
            self.check_one_answer()
        return False

    def check_one_answer(self):
        """A handler that answered one request twice (http/src/response.c
        logs it, the first of the process, in a release build) fails the test."""
        with self._lock:
            twice = [line for line in self._lines if "the request was already answered" in line]
        if twice:
            raise AssertionError("a handler answered a request twice: %s" % twice[0])

    # -- clients ---------------------------------------------------------
    def metric(self, series, timeout=SOCK_TIMEOUT):
        """The value of @series (a name with its labels as /metrics spells
        them, e.g. 'db_queries_resent_total{reason="deadlock"}') on
        /metrics, or None when the page does not have it."""
        with self.connect(timeout=timeout) as c:
            resp = c.request("GET", "/metrics")
        if resp.status != 200:
            raise ProtocolError("GET /metrics: %d" % resp.status)
        m = re.search(r"^%s (\S+)$" % re.escape(series), resp.body.decode(), re.M)
        return float(m.group(1)) if m else None

    def connect(self, timeout=SOCK_TIMEOUT, nodelay=False):
        return Conn(self.host, self.port, timeout=timeout, nodelay=nodelay)


class LocalPostgres:
    """A db/pg-local cluster in DIR/pg of a temporary folder DIR (`tmp`, for
    the test's other files). for_class() makes one for a test class, started
    (throwaway: no fsync) unless start=False, and registers its removal."""

    def __init__(self, prefix):
        # World-searchable so that the postgres user can reach it when we are root.
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.tmp, 0o755)
        self.dir = os.path.join(self.tmp, "pg")
        os.mkdir(self.dir)
        os.chmod(self.dir, 0o755)

    @classmethod
    def for_class(cls, test_class, prefix, start=True):
        pg = cls(prefix)
        test_class.addClassCleanup(pg.remove)
        if start:
            pg.run("start", "throwaway")
        return pg

    def run(self, cmd, *args, timeout=90):
        """db/pg-local CMD DIR ARGS...; returns its stdout, raises on failure."""
        return subprocess.run([PG_LOCAL, cmd, self.dir] + list(args), check=True, timeout=timeout,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True).stdout

    def url(self):
        return self.run("url").strip()

    def running(self):
        return subprocess.run([PG_LOCAL, "status", self.dir], timeout=60).returncode == 0

    def sql(self, query):
        """Rows of @query, each a list of its columns as text."""
        out = self.run("psql", "-At", "-F", "|", "-c", query, timeout=30)
        return [line.split("|") for line in out.splitlines() if line]

    def remove(self):
        subprocess.run([PG_LOCAL, "stop", self.dir, "immediate"], timeout=60)
        shutil.rmtree(self.tmp, True)


class ProtocolError(AssertionError):
    pass


class Response:
    def __init__(self, version, status, reason, headers, body, raw_head):
        self.version = version          # "HTTP/1.1"
        self.status = status            # int
        self.reason = reason            # str
        self.headers = headers          # [(name, value)] as received
        self.body = body                # bytes (decoded if chunked)
        self.raw_head = raw_head        # bytes of status line + headers + empty line

    def header(self, name, default=None):
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return default

    def header_all(self, name):
        name = name.lower()
        return [v for k, v in self.headers if k.lower() == name]

    def has_header(self, name):
        return self.header(name) is not None

    def tokens(self, name):
        """Comma-separated tokens of every @name field, lower-cased."""
        out = []
        for v in self.header_all(name):
            out += [t.strip().lower() for t in v.split(",") if t.strip()]
        return out

    def json(self):
        try:
            return json.loads(self.body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise AssertionError("response body is not JSON (%s): %r" % (e, self.body[:300]))

    def __repr__(self):
        return "<%s %d %s; headers %r; body %r>" % (self.version, self.status, self.reason,
                                                  self.headers, self.body[:300])


class Conn:
    """A raw TCP connection with a receive buffer (responses may arrive pipelined)."""

    def __init__(self, host, port, timeout=SOCK_TIMEOUT, nodelay=False):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        if nodelay:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.eof = False
        self.reset = False      # the peer reset the connection (RST) rather than closing it

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def send(self, data):
        self.sock.sendall(data)

    def _fill(self):
        if self.eof:
            return False
        try:
            chunk = self.sock.recv(65536)
        except ConnectionResetError:
            self.reset = True
            chunk = b""
        if not chunk:
            self.eof = True
            return False
        self.buf += chunk
        return True

    def _read_until(self, sep, limit=1 << 20):
        while True:
            i = self.buf.find(sep)
            if i >= 0:
                out, self.buf = self.buf[:i + len(sep)], self.buf[i + len(sep):]
                return out
            if len(self.buf) > limit:
                raise ProtocolError("no %r within %d bytes: %r" % (sep, limit, self.buf[:200]))
            if not self._fill():
                raise ProtocolError("connection %s before %r; had %r"
                                    % ("reset (RST)" if self.reset else "closed", sep, self.buf[:300]))

    def _read_exact(self, n):
        while len(self.buf) < n:
            if not self._fill():
                raise ProtocolError("connection closed after %d of %d body bytes: %r"
                                    % (len(self.buf), n, self.buf[:200]))
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def read_response(self, method="GET"):
        """Read one response (interim 1xx ones included). @method: the request's method
        (a HEAD response has no body)."""
        head = self._read_until(b"\r\n\r\n", limit=64 * 1024)
        lines = head[:-4].split(b"\r\n")
        m = re.match(rb"^(HTTP/\d\.\d) (\d{3}) ?(.*)$", lines[0])
        if not m:
            raise ProtocolError("bad status line %r (response head %r)" % (lines[0], head[:300]))
        version, status, reason = m.group(1).decode(), int(m.group(2)), m.group(3).decode("latin-1")
        headers = []
        for line in lines[1:]:
            if b":" not in line:
                raise ProtocolError("bad header line %r in %r" % (line, head[:500]))
            k, v = line.split(b":", 1)
            if k != k.strip() or not k:
                raise ProtocolError("bad header name %r in %r" % (k, head[:500]))
            headers.append((k.decode("latin-1"), v.strip(b" \t").decode("latin-1")))
        resp = Response(version, status, reason, headers, b"", head)
        if method == "HEAD" or 100 <= status < 200 or status in (204, 304):
            return resp
        te = resp.tokens("transfer-encoding")
        if te:
            if te[-1] != "chunked":
                raise ProtocolError("unsupported Transfer-Encoding %r" % te)
            resp.body = self._read_chunked()
        elif resp.has_header("content-length"):
            cls = set(resp.header_all("content-length"))
            if len(cls) != 1 or not next(iter(cls)).isdigit():
                raise ProtocolError("bad Content-Length %r" % cls)
            resp.body = self._read_exact(int(next(iter(cls))))
        else:
            while self._fill():
                pass
            resp.body, self.buf = self.buf, b""
        return resp

    def _read_chunked(self):
        body = b""
        while True:
            line = self._read_until(b"\r\n", limit=4096)
            size = line[:-2].split(b";", 1)[0].strip()
            try:
                n = int(size, 16)
            except ValueError:
                raise ProtocolError("bad chunk size line %r" % line)
            if n == 0:
                while self._read_until(b"\r\n", limit=16384) != b"\r\n":
                    pass
                return body
            body += self._read_exact(n)
            if self._read_exact(2) != b"\r\n":
                raise ProtocolError("chunk data not followed by CRLF")

    def request(self, method, path, headers=None, body=None, version="HTTP/1.1", host=True):
        """Send one well-formed request and read its final response."""
        self.send(build_request(method, path, headers, body, version, host))
        resp = self.read_response(method)
        while 100 <= resp.status < 200:
            resp = self.read_response(method)
        return resp

    def closed_by_peer(self, timeout=SOCK_TIMEOUT):
        """True when the peer closes (EOF or reset) within @timeout with no more bytes;
        False on timeout. Bytes that arrive instead raise ProtocolError."""
        if self.buf:
            raise ProtocolError("unexpected bytes after the response: %r" % self.buf[:200])
        if self.eof:
            return True
        old = self.sock.gettimeout()
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(4096)
        except (ConnectionResetError, BrokenPipeError):
            self.reset = self.eof = True
            return True
        except socket.timeout:
            return False
        finally:
            self.sock.settimeout(old)
        if chunk:
            raise ProtocolError("expected the connection to be closed, got bytes %r" % chunk[:200])
        self.eof = True
        return True


def send_all(server, requests, timeout=20):
    """Send each of @requests, (method, path, body: JSON-encoded and sent
    as application/json, or None), on a connection of its own to @server,
    all before any answer is read, so that the server reads them in few
    loop turns (queries of theirs then share its database round trips);
    returns the responses in order."""
    raise_nofile_limit()
    conns = [server.connect(timeout=timeout) for _ in requests]
    try:
        for c, (method, path, body) in zip(conns, requests):
            hdrs = {"Content-Type": "application/json"} if body is not None else {}
            c.send(build_request(method, path, hdrs, body))
        return [c.read_response(method) for c, (method, _, _) in zip(conns, requests)]
    finally:
        for c in conns:
            c.close()


def build_request(method, path, headers=None, body=None, version="HTTP/1.1", host=True):
    if isinstance(body, str):
        body = body.encode("utf-8")
    elif body is not None and not isinstance(body, (bytes, bytearray)):
        body = json.dumps(body).encode("utf-8")
    lines = ["%s %s %s" % (method, path, version)]
    hdrs = list((headers or {}).items()) if isinstance(headers, dict) else list(headers or [])
    names = {k.lower() for k, _ in hdrs}
    if host and "host" not in names:
        lines.append("Host: 127.0.0.1")
    for k, v in hdrs:
        lines.append("%s: %s" % (k, v))
    if body is not None and "content-length" not in names and "transfer-encoding" not in names:
        lines.append("Content-Length: %d" % len(body))
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return data + (body or b"")


def end_process(proc, timeout=10):
    """SIGTERM a helper process the test started (subprocess.Popen), wait up
    to @timeout seconds, then SIGKILL it. Nothing when it already exited."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def free_port():
    """A loopback TCP port nobody listens on now (the kernel's pick): for a
    helper server of the test's, or a dead upstream. Racy by nature: bind it
    soon."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def can_connect(port, timeout=1.0):
    """True when a TCP connection to 127.0.0.1:@port is accepted (by the kernel)."""
    try:
        s = socket.create_connection((HOST, port), timeout=timeout)
    except (ConnectionRefusedError, ConnectionResetError, socket.timeout, OSError):
        return False
    s.close()
    return True


class CoringTestCase(unittest.TestCase):
    """Assertions shared by the test files."""

    maxDiff = 4000

    def assertCommonHeaders(self, resp, what=""):
        """Date, Server: coring; Content-Length and Content-Type unless 1xx/204/304."""
        ctx = " (%s) %r" % (what, resp)
        self.assertTrue(resp.has_header("Date"), "no Date header" + ctx)
        self.assertRegex(resp.header("Date"), r"^[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT$",
                         "Date is not an IMF-fixdate" + ctx)
        self.assertEqual(resp.header("Server"), "coring", "Server header" + ctx)
        if resp.status in (204, 304) or resp.status < 200:
            if resp.status == 204:
                self.assertIsNone(resp.header("Content-Length"),
                                  "204 must not carry Content-Length (RFC 9110 8.6)" + ctx)
            return
        self.assertEqual(len(resp.header_all("Content-Length")), 1, "exactly one Content-Length" + ctx)
        self.assertTrue(resp.has_header("Content-Type"), "no Content-Type" + ctx)

    def assertJsonError(self, resp, status, what=""):
        ctx = " (%s) %r" % (what, resp)
        self.assertEqual(resp.status, status, "status" + ctx)
        self.assertCommonHeaders(resp, what)
        self.assertTrue(resp.header("Content-Type", "").lower().startswith("application/json"),
                        "error Content-Type is not application/json" + ctx)
        doc = resp.json()
        self.assertIsInstance(doc, dict, "error body is not a JSON object" + ctx)
        self.assertIsInstance(doc.get("error"), str, 'error body has no string "error"' + ctx)
        self.assertTrue(doc["error"], 'empty "error" message' + ctx)
        self.assertEqual(int(resp.header("Content-Length")), len(resp.body), "Content-Length" + ctx)



class SharedServerTestCase(CoringTestCase):
    """One coring (hello and todo, 2 threads) for the whole class; it must
    exit 0 on SIGTERM at the end."""

    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = CoringServer(threads=2).start()

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop(expect_status=0)

def main():
    """Parse --binary and other --name value options, then run unittest."""
    global _BINARY
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--binary")
    ap.add_argument("--expect-version")
    ap.add_argument("--fake-viacep")
    ap.add_argument("--cycles")
    ns, rest = ap.parse_known_args(sys.argv[1:])
    if ns.binary:
        _BINARY = os.path.abspath(ns.binary)
    if ns.expect_version:
        _EXTRA["expect_version"] = ns.expect_version
    if ns.fake_viacep:
        _EXTRA["fake_viacep"] = os.path.abspath(ns.fake_viacep)
    if ns.cycles:
        _EXTRA["cycles"] = int(ns.cycles)
    if not _BINARY or not os.access(_BINARY, os.X_OK):
        sys.stderr.write("coring binary not found or not executable: %r (use --binary PATH)\n" % _BINARY)
        sys.exit(2)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)

#!/usr/bin/python3
"""Integration tests of apps/run, the README's run command, around its local
PostgreSQL cluster and its signals.

apps/run runs the binary under test (CORING_BIN) with its cluster in a
temporary folder (CORING_LOCAL_PG), so that nothing of the checkout's own
.pgdata or build/ is touched. Covered:
- a bad flag fails at once, before PostgreSQL is created or started, and
  does not stop a cluster that another apps/run is using;
- a second apps/run stopped with SIGTERM leaves the first one's cluster
  running and the first still answers from PostgreSQL;
- apps/run --restart: the server restarts in place on the same port (the
  new coring takes the listeners over), PostgreSQL keeps running, and the
  first apps/run still stops it at the end;
- one Ctrl-C in a terminal (a pseudo-terminal: the interrupt character,
  which the line discipline turns into SIGINT for the foreground process
  group) drains and exits 0, and stops the cluster: 10 times; the same in
  front of coring itself. (The bug this guards against, the interrupt
  reaching coring twice, failed 4 of 7 tries; 10 rounds miss it 2 times in
  10,000.)
"""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import pty  # noqa: E402
import select  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
APPS_RUN = os.path.join(ROOT, "apps", "run")
PG_LOCAL = cs.PG_LOCAL
CTRL_C_ROUNDS = 10


def pg_running(pgdir):
    return subprocess.run([PG_LOCAL, "status", pgdir], timeout=60).returncode == 0


def run_env(pgdir):
    env = dict(os.environ, CORING_BIN=cs.binary(), CORING_LOCAL_PG=pgdir)
    env.pop("DATABASE_URL", None)
    return env


class AppsRun:
    """apps/run with stderr read on a thread, like CoringServer."""

    def __init__(self, pgdir, args):
        self.proc = subprocess.Popen([APPS_RUN, "--host", "127.0.0.1", "--port", "0"] + args,
                                     env=run_env(pgdir), stdin=subprocess.DEVNULL,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.port = None
        self.lines = []
        deadline = time.monotonic() + 60
        while self.port is None:
            if time.monotonic() > deadline:
                self.proc.kill()
                raise AssertionError("apps/run did not start: %s" % "".join(self.lines))
            line = self.proc.stderr.readline().decode(errors="replace")
            if not line:
                raise AssertionError("apps/run exited: %s" % "".join(self.lines))
            self.lines.append(line)
            m = cs.LISTEN_RE.search(line)
            if m:
                self.port = int(m.group(2))
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        for line in self.proc.stderr:
            self.lines.append(line.decode(errors="replace"))

    def get(self, path):
        with cs.Conn("127.0.0.1", self.port) as c:
            return c.request("GET", path)

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        status = self.proc.wait(timeout=60)
        self.reader.join(timeout=10)
        self.proc.stderr.close()
        return status


class AppsRunTest(cs.CoringTestCase):
    pgdir = None

    @classmethod
    def setUpClass(cls):
        # apps/run creates and starts the cluster itself (durable, as users get it).
        cls.pgdir = cs.LocalPostgres.for_class(cls, "coring-apps-run-", start=False).dir

    def tearDown(self):
        # Every test leaves the cluster stopped, as apps/run should.
        if pg_running(self.pgdir):
            subprocess.run([PG_LOCAL, "stop", self.pgdir], timeout=60)
            self.fail("PostgreSQL was left running")

    def test_bad_flag_starts_nothing(self):
        fresh = os.path.join(self.pgdir, "never")
        r = subprocess.run([APPS_RUN, "--bogus"], env=run_env(fresh), stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("unknown option '--bogus'", r.stderr)
        self.assertFalse(os.path.exists(fresh), "apps/run created a cluster before checking its flags")

    def test_bad_flag_leaves_running_cluster(self):
        first = AppsRun(self.pgdir, ["--threads", "1", "--apps", "hello,users"])
        try:
            self.assertEqual(first.get("/users/1").status, 404)
            r = subprocess.run([APPS_RUN, "--bogus"], env=run_env(self.pgdir),
                               stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertTrue(pg_running(self.pgdir), "a failed apps/run stopped the cluster")
            self.assertEqual(first.get("/users/1").status, 404)
        finally:
            self.assertEqual(first.stop(), 0, "".join(first.lines))
        self.assertFalse(pg_running(self.pgdir), "the first apps/run did not stop its cluster")

    def test_second_run_leaves_first_cluster(self):
        first = AppsRun(self.pgdir, ["--threads", "1", "--apps", "users"])
        try:
            second = AppsRun(self.pgdir, ["--threads", "1", "--apps", "users"])
            self.assertEqual(second.get("/users/1").status, 404)
            self.assertEqual(second.stop(), 0, "".join(second.lines))
            self.assertIn("left running", "".join(second.lines))
            self.assertTrue(pg_running(self.pgdir), "the second apps/run stopped the first's cluster")
            for _ in range(5):
                resp = first.get("/users/1")
                self.assertEqual(resp.status, 404, resp.body)  # not 503 database unavailable
        finally:
            self.assertEqual(first.stop(), 0, "".join(first.lines))
        self.assertFalse(pg_running(self.pgdir))

    def test_database_as_the_binary_says(self):
        # The todo app needs PostgreSQL only on --todo-store postgres: apps/run
        # asks the binary (coring --list-apps), it names no app itself.
        run = AppsRun(self.pgdir, ["--threads", "1", "--apps", "todo", "--todo-store", "postgres"])
        try:
            self.assertTrue(pg_running(self.pgdir), "no PostgreSQL for todo on --todo-store postgres")
            self.assertEqual(run.get("/todos/1").status, 404)
        finally:
            self.assertEqual(run.stop(), 0, "".join(run.lines))
        fresh = os.path.join(self.pgdir, "never")
        hello = AppsRun(fresh, ["--threads", "1", "--apps", "hello,todo"])
        try:
            self.assertEqual(hello.get("/").status, 200)
            self.assertFalse(os.path.exists(fresh), "a cluster for apps that need none")
        finally:
            self.assertEqual(hello.stop(), 0, "".join(hello.lines))

    def test_restart_in_place_keeps_postgres(self):
        nothing = subprocess.run([APPS_RUN, "--restart"], env=run_env(self.pgdir), stdin=subprocess.DEVNULL,
                                 capture_output=True, text=True, timeout=60)
        self.assertEqual(nothing.returncode, 1, nothing.stderr)
        self.assertIn("no apps/run serves", nothing.stderr)
        first = AppsRun(self.pgdir, ["--threads", "1", "--apps", "hello,users"])
        try:
            self.assertEqual(first.get("/users/1").status, 404)
            r = subprocess.run([APPS_RUN, "--restart"], env=run_env(self.pgdir), stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=60)
            self.assertEqual(r.returncode, 0, r.stderr)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and "[main] stopped" not in "".join(first.lines):
                time.sleep(0.1)
            log = "".join(first.lines)
            self.assertIn("restarting coring in place", log)
            self.assertIn("took over 1 listening socket(s) on port %d" % first.port, log)
            self.assertIn("hand-over: the successor serves", log)
            self.assertEqual(log.count("stopped"), 1, log)  # the old coring drained, PostgreSQL did not stop
            self.assertTrue(pg_running(self.pgdir), "the restart stopped PostgreSQL")
            for _ in range(5):
                resp = first.get("/users/1")
                self.assertEqual(resp.status, 404, resp.body)  # served from PostgreSQL by the new coring
        finally:
            self.assertEqual(first.stop(), 0, "".join(first.lines))
        self.assertFalse(pg_running(self.pgdir), "apps/run did not stop its cluster after a restart")

    def ctrl_c(self, argv, env):
        """Run @argv on a pseudo-terminal, wait for the start-up line, type
        the interrupt character once; return (exit status, output)."""
        pid, master = pty.fork()
        if pid == 0:
            try:
                os.execve(argv[0], argv, env)
            finally:
                os._exit(127)
        out = b""
        typed = False
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                ready, _, _ = select.select([master], [], [], 0.5)
                if ready:
                    try:
                        chunk = os.read(master, 4096)
                    except OSError:  # EIO: every process on the terminal has gone
                        break
                    if not chunk:
                        break
                    out += chunk
                if not typed:
                    m = cs.LISTEN_RE.search(out.decode(errors="replace"))
                    if m:
                        with cs.Conn("127.0.0.1", int(m.group(2))) as c:
                            self.assertEqual(c.request("GET", "/").status, 200)
                        os.write(master, b"\x03")
                        typed = True
            else:
                os.kill(pid, signal.SIGKILL)
        finally:
            os.close(master)
        _, status = os.waitpid(pid, 0)
        text = out.decode(errors="replace")
        self.assertTrue(typed, "never saw the start-up line: " + text)
        return os.waitstatus_to_exitcode(status), text

    def test_one_ctrl_c_drains_and_exits_0(self):
        argv = [APPS_RUN, "--host", "127.0.0.1", "--port", "0", "--threads", "2",
                "--apps", "hello,users"]
        for i in range(CTRL_C_ROUNDS):
            status, out = self.ctrl_c(argv, run_env(self.pgdir))
            self.assertEqual(status, 0, "round %d: %s" % (i, out))
            self.assertNotIn("second SIGINT", out, "round %d" % i)
            self.assertIn("PostgreSQL stopped", out, "round %d: %s" % (i, out))
            self.assertFalse(pg_running(self.pgdir), "round %d: PostgreSQL still running" % i)
        sys.stderr.write("\n%d Ctrl-C rounds in front of apps/run: each exited 0\n" % CTRL_C_ROUNDS)

    def test_one_ctrl_c_in_front_of_coring(self):
        argv = [cs.binary(), "--host", "127.0.0.1", "--port", "0", "--threads", "2",
                "--apps", "hello"]
        for i in range(5):
            status, out = self.ctrl_c(argv, dict(os.environ))
            self.assertEqual(status, 0, "round %d: %s" % (i, out))
            self.assertNotIn("second SIGINT", out)


class QuietBuildTest(cs.CoringTestCase):
    """apps/run builds quietly, and --help needs no build (issue 39: every
    call, --help included, printed eleven "Built target" lines first). A
    cmake of the test's own, first on PATH, stands in for the build: it
    says what a build says, links the binary under test into the build
    folder (CORING_BUILD_DIR, a temporary one) and records each call."""

    FAKE_CMAKE = """#!/bin/sh
echo "$*" >> "$FAKE_CMAKE_CALLS"
case "$*" in
  --build*)
    if [ -n "$FAKE_CMAKE_FAIL" ]; then echo "$FAKE_CMAKE_FAIL"; exit 2; fi
    mkdir -p "$CORING_BUILD_DIR/apps" && ln -sf "$FAKE_CMAKE_BINARY" "$CORING_BUILD_DIR/apps/coring"
    for t in coring_core coring_net coring_http coring_db coring; do echo "[100%] Built target $t"; done ;;
  *) echo "-- Configuring done" ;;
esac
"""

    def setUp(self):
        import tempfile
        self.tmp = tempfile.mkdtemp(prefix="coring-apps-run-build-")
        self.addCleanup(lambda: subprocess.run(["rm", "-rf", self.tmp]))
        bindir = os.path.join(self.tmp, "bin")
        os.mkdir(bindir)
        with open(os.path.join(bindir, "cmake"), "w") as f:
            f.write(self.FAKE_CMAKE)
        os.chmod(os.path.join(bindir, "cmake"), 0o755)
        self.calls = os.path.join(self.tmp, "calls")
        self.build = os.path.join(self.tmp, "build")
        self.env = dict(os.environ, PATH=bindir + ":" + os.environ["PATH"],
                        CORING_BUILD_DIR=self.build, FAKE_CMAKE_CALLS=self.calls,
                        FAKE_CMAKE_BINARY=cs.binary())
        for name in ("CORING_BIN", "DATABASE_URL", "FAKE_CMAKE_FAIL"):
            self.env.pop(name, None)

    def run_apps_run(self, *args, **env):
        return subprocess.run([APPS_RUN] + list(args), env=dict(self.env, **env),
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)

    def cmake_calls(self):
        if not os.path.exists(self.calls):
            return []
        with open(self.calls) as f:
            return f.read().splitlines()

    def test_a_build_that_works_says_nothing(self):
        r = self.run_apps_run("--check-config", "--apps", "hello")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.cmake_calls()), 2, self.cmake_calls())   # configure, build
        self.assertNotIn("Built target", r.stdout + r.stderr)
        self.assertNotIn("Configuring", r.stdout + r.stderr)
        self.assertIn("configuration OK", r.stdout + r.stderr)
        # The first build (no binary yet) says that it builds, once.
        self.assertIn("apps/run: building coring", r.stderr)
        r = self.run_apps_run("--check-config", "--apps", "hello")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr, "")
        self.assertEqual(len(self.cmake_calls()), 4)

    def test_a_build_that_fails_shows_its_output(self):
        r = self.run_apps_run("--check-config", FAKE_CMAKE_FAIL="error: apps/main.c:1: broken")
        self.assertEqual(r.returncode, 1)
        self.assertIn("error: apps/main.c:1: broken", r.stderr)
        self.assertIn("-- Configuring done", r.stderr)
        self.assertIn("apps/run: the build failed", r.stderr)

    def test_help_needs_no_build_once_built(self):
        r = self.run_apps_run("--check-config", "--apps", "hello")
        self.assertEqual(r.returncode, 0, r.stderr)
        before = len(self.cmake_calls())
        for flag in ("--help", "--version"):
            r = self.run_apps_run(flag)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "", flag)
            self.assertEqual(len(self.cmake_calls()), before, "%s ran cmake" % flag)
        self.assertIn("Usage: coring", self.run_apps_run("--help").stdout)


if __name__ == "__main__":
    cs.main()

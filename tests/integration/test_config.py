#!/usr/bin/python3
"""Configuration by environment variables (apps/options.c,
docs/configuration.md): --foo-bar is CORING_FOO_BAR, flag over variable over
default, empty is unset, switches take 1/true/yes/on and 0/false/no/off, a
bad value is refused at start (exit 2) naming the variable, --check-config
checks variables too, and docs/configuration.md lists exactly the flags of
--help, each with its variable."""

import sys

sys.dont_write_bytecode = True

import os  # noqa: E402
import re  # noqa: E402
import time  # noqa: E402

import coring_server as cs  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DOC = os.path.join(ROOT, "docs", "configuration.md")
COMMANDS = {"help", "version", "check-config", "list-routes", "list-apps", "openapi"}  # no variable


clean_env = cs.clean_env
run_cli = cs.run_cli


def variable(flag):
    return "CORING_" + flag.upper().replace("-", "_")


class EnvServer(cs.CoringServer):
    """A coring started with only @args on its command line and @env."""

    def __init__(self, args, env):
        super().__init__(threads=None, apps=None, args=args)
        self.env = env

    def command(self):
        return [cs.binary()] + self.args

    def start(self):
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(self.env)
        try:
            return super().start()
        finally:
            os.environ.clear()
            os.environ.update(saved)


class EnvironmentTest(cs.CoringTestCase):
    def start(self, args, **env):
        srv = EnvServer(args, clean_env(**env))
        srv.start()
        self.addCleanup(srv.kill)
        return srv

    def listening_line(self, srv):
        for line in srv.stderr_text(200).splitlines():
            if "listening on" in line:
                return line
        self.fail("no listening line:\n" + srv.stderr_text())

    def test_variables_set_port_threads_apps(self):
        port = cs.free_port()
        srv = self.start([], CORING_HOST=cs.HOST, CORING_PORT=str(port), CORING_THREADS="2", CORING_APPS="hello")
        line = self.listening_line(srv)
        self.assertEqual(srv.port, port, line)
        self.assertIn("threads=2 ", line + " ")
        self.assertIn("apps=hello", line)
        self.assertNotIn("apps=hello,", line)
        with srv.connect() as c:
            self.assertEqual(c.request("GET", "/json").status, 200)
            self.assertEqual(c.request("GET", "/todos").status, 404, "todo mounted despite CORING_APPS=hello")
        srv.stop(expect_status=0)

    def test_flag_wins_over_variable(self):
        # A variable whose flag is given is not read: a bad one is no error.
        srv = self.start(["--host", cs.HOST, "--port", "0", "--threads", "1", "--apps", "hello,todo"],
                         CORING_PORT="notaport", CORING_THREADS="3", CORING_APPS="nosuchapp")
        line = self.listening_line(srv)
        self.assertIn("threads=1 ", line + " ")
        self.assertIn("apps=hello,todo", line)
        srv.stop(expect_status=0)

    def test_bad_variable_refused_with_its_name(self):
        for name, value, want in (("CORING_PORT", "abc", "expected a number from 0 to 65535"),
                                  ("CORING_PORT", "70000", "expected a number"),
                                  ("CORING_THREADS", "x", "expected a number"),
                                  ("CORING_APPS", "hello,nosuchapp", "unknown app 'nosuchapp'"),
                                  ("CORING_LOG_LEVEL", "loud", "expected debug, info"),
                                  ("CORING_HOST", "localhost", "numeric IPv4 or IPv6"),
                                  ("CORING_RECV_BUFFERS", "3", "power of 2"),
                                  ("CORING_CEP_UPSTREAM", "maybe", "expected on or off"),
                                  ("CORING_ACCESS_LOG", "maybe", "expected 1, true, yes or on")):
            for args in ([], ["--check-config"]):
                r = run_cli(args + ["--port", "0"] if name != "CORING_PORT" else args,
                            clean_env(**{name: value}))
                what = "%s=%s %s: stderr %r" % (name, value, args, r.stderr)
                self.assertEqual(r.returncode, 2, what)
                self.assertIn("coring: %s=%s: " % (name, value), r.stderr, what)
                self.assertIn(want, r.stderr, what)
                self.assertNotIn("listening on", r.stderr, what)

    def test_check_config_with_good_and_empty_variables(self):
        r = run_cli(["--check-config"], clean_env(DATABASE_URL=cs.CHECK_DATABASE_URL,
                                                  CORING_PORT="9", CORING_THREADS="2", CORING_APPS="users",
                                                  CORING_ACCESS_LOG="TRUE", CORING_EMBED_INT8="off",
                                                  CORING_SEED_USERS="5", CORING_MAX_BODY_BYTES=""))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("configuration OK", r.stdout)
        # Empty is unset: not checked, not an error.
        r = run_cli(["--check-config"], clean_env(DATABASE_URL=cs.CHECK_DATABASE_URL, CORING_PORT="",
                                                  CORING_ACCESS_LOG=""))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = run_cli(["--check-config"], clean_env(CORING_SEED_USERS="0"))
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("CORING_SEED_USERS=0", r.stderr)

    def test_commands_have_no_variable(self):
        r = run_cli(["--check-config", "--port", "0"], clean_env(DATABASE_URL=cs.CHECK_DATABASE_URL,
                                                                 CORING_HELP="1", CORING_VERSION="1"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("Usage", r.stdout)

    def access_lines(self, srv):
        return [line for line in srv.stderr_text(500).splitlines() if "GET /json" in line]

    def test_switch_variable(self):
        for value, on in (("1", True), ("on", True), ("Yes", True), ("true", True), ("0", False), ("off", False),
                          ("FALSE", False), ("no", False)):
            srv = self.start(["--host", cs.HOST, "--port", "0", "--threads", "1", "--apps", "hello"],
                             CORING_ACCESS_LOG=value)
            with srv.connect() as c:
                self.assertEqual(c.request("GET", "/json").status, 200)
            deadline = time.monotonic() + 3
            while on and not self.access_lines(srv) and time.monotonic() < deadline:
                time.sleep(0.05)
            srv.stop(expect_status=0)
            self.assertEqual(bool(self.access_lines(srv)), on,
                             "CORING_ACCESS_LOG=%s: stderr:\n%s" % (value, srv.stderr_text()))


class DocumentationTest(cs.CoringTestCase):
    def help_flags(self):
        r = run_cli(["--help"], clean_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        flags = re.findall(r"^  --([a-z0-9-]+)", r.stdout, re.M)
        self.assertGreater(len(flags), 30, r.stdout)
        return r.stdout, flags

    def test_page_lists_exactly_the_flags_of_help(self):
        _, flags = self.help_flags()
        with open(DOC) as f:
            rows = re.findall(r"^\| `--([a-z0-9-]+)[^`]*` \| ([^|]*) \|", f.read(), re.M)
        documented = [name for name, _ in rows]
        self.assertEqual(sorted(set(flags) - set(documented)), [], "flags in --help missing from docs/configuration.md")
        self.assertEqual(sorted(set(documented) - set(flags)), [], "flags in docs/configuration.md not in --help")
        self.assertEqual(len(documented), len(set(documented)), "a flag twice in docs/configuration.md")
        for name, var in rows:
            want = "—" if name in COMMANDS else "`%s`" % variable(name)
            self.assertEqual(var.strip(), want, "docs/configuration.md: variable of --" + name)

    def test_help_shows_each_variable_under_its_flag(self):
        text, flags = self.help_flags()
        lines = text.splitlines()
        for i, line in enumerate(lines):
            m = re.match(r"^  --([a-z0-9-]+)", line)
            if not m:
                continue
            name = m.group(1)
            below = lines[i + 1] if i + 1 < len(lines) else ""
            if name in COMMANDS:
                self.assertNotIn("CORING_", below, "--%s is a command, with no variable" % name)
            else:
                self.assertTrue(below.startswith("  %s=" % variable(name)),
                                "--help: the line under --%s is %r, not its variable" % (name, below))


if __name__ == "__main__":
    cs.main()

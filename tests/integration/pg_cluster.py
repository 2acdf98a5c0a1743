#!/usr/bin/python3
"""A PostgreSQL primary and a streaming replica for the tests (stdlib only).

- Primary: a db/pg-local cluster (coring_server.LocalPostgres), listening on
  its Unix socket only.
- Replica: made from the primary with `pg_basebackup -R` (PostgreSQL's own
  streaming replication: a hot standby that follows the primary's WAL and
  answers reads), in a folder of its own with its own socket directory and
  its own port number, so that the two never share a socket file.

PostgreSQL refuses to run as root: as root, like db/pg-local, every server
command runs as Debian's `postgres` user (runuser) and the folders belong to
it. server_bindir() is None when PostgreSQL's server binaries are missing
(a test then skips: exit 77).

    primary = coring_server.LocalPostgres.for_class(cls, "coring-replica-")
    replica = pg_cluster.Replica.for_class(cls, primary, port=5433)
    os.environ["DATABASE_URL"] = primary.url()
    os.environ["DATABASE_READ_URL"] = replica.url()
    replica.stop("fast"); replica.start()
"""

import os
import shutil
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def server_bindir():
    """The folder of pg_ctl, pg_basebackup and psql (the newest Debian
    version first, then PATH), or None."""
    base = "/usr/lib/postgresql"
    versions = []
    if os.path.isdir(base):
        versions = sorted((v for v in os.listdir(base) if v.isdigit()), key=int, reverse=True)
    for v in versions:
        d = os.path.join(base, v, "bin")
        if os.access(os.path.join(d, "pg_ctl"), os.X_OK):
            return d
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl and os.access(os.path.join(os.path.dirname(pg_ctl), "pg_basebackup"), os.X_OK):
        return os.path.dirname(pg_ctl)
    return None


def _as_owner():
    """The prefix that runs a command as the cluster's owner."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


def _chown_to_owner(path):
    if os.geteuid() == 0:
        shutil.chown(path, "postgres", "postgres")


class Replica:
    """A hot standby of @primary (a LocalPostgres, running) in DIR/replica of
    a temporary folder DIR: data in DIR/replica/data, socket in
    DIR/replica/run (port @port names the socket file), log DIR/replica/log.
    @apply_delay_ms: recovery_min_apply_delay (commits become visible on the
    replica that long after the primary's: a replication lag made on
    purpose), or None."""

    def __init__(self, primary, port=5433, apply_delay_ms=None, prefix="coring-replica-"):
        self.bindir = server_bindir()
        if self.bindir is None:
            raise RuntimeError("PostgreSQL server binaries not found")
        self.primary = primary
        self.port = port
        self.tmp = tempfile.mkdtemp(prefix=prefix)
        os.chmod(self.tmp, 0o755)  # the postgres user must reach it when we are root
        self.dir = os.path.join(self.tmp, "replica")
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "run")
        self.log = os.path.join(self.dir, "log")
        os.mkdir(self.dir)
        os.mkdir(self.sock)
        os.chmod(self.dir, 0o755)
        for d in (self.dir, self.sock):
            _chown_to_owner(d)
        primary_sock = os.path.join(primary.dir, "run")
        self._run("pg_basebackup", "-D", self.data, "-R", "-X", "stream", "-c", "fast", "-N",
                  "-h", primary_sock, "-p", "5432", "-U", "coring", timeout=120)
        conf = ["listen_addresses = ''", "unix_socket_directories = '%s'" % self.sock,
                "port = %d" % port, "hot_standby = on",
                # The replica's walreceiver retries the primary every 1 s.
                "wal_retrieve_retry_interval = '1s'"]
        if apply_delay_ms:
            conf.append("recovery_min_apply_delay = '%dms'" % apply_delay_ms)
        with open(os.path.join(self.data, "postgresql.conf"), "a") as f:
            f.write("\n# pg_cluster.Replica\n" + "\n".join(conf) + "\n")

    @classmethod
    def for_class(cls, test_class, primary, **kw):
        """A replica of @primary, started, removed at the class's end."""
        r = cls(primary, **kw)
        test_class.addClassCleanup(r.remove)
        r.start()
        return r

    def _run(self, tool, *args, timeout=60, check=True):
        return subprocess.run(_as_owner() + [os.path.join(self.bindir, tool)] + list(args),
                              cwd="/", check=check, timeout=timeout, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def start(self):
        """Start it (pg_ctl -w: returns once it accepts connections)."""
        r = self._run("pg_ctl", "-D", self.data, "-l", self.log, "-w", "-t", "60", "start",
                      timeout=90, check=False)
        if r.returncode != 0:
            raise AssertionError("replica did not start: %s\n%s" % (r.stderr, self.log_tail()))

    def stop(self, mode="fast"):
        """pg_ctl stop -m @mode (fast: connections are closed at once)."""
        if self.running():
            self._run("pg_ctl", "-D", self.data, "-m", mode, "-w", "-t", "60", "stop", timeout=90)

    def running(self):
        return self._run("pg_ctl", "-D", self.data, "status", check=False).returncode == 0

    def url(self):
        """The libpq conninfo for DATABASE_READ_URL."""
        return "host='%s' port=%d dbname=coring user=coring" % (self.sock, self.port)

    def sql(self, query):
        """Rows of @query on the replica, each a list of its columns as text."""
        r = subprocess.run([os.path.join(self.bindir, "psql"), "-X", "-q", "-At", "-F", "|",
                            "-h", self.sock, "-p", str(self.port), "-U", "coring", "-d", "coring",
                            "-c", query], check=True, timeout=30, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        return [line.split("|") for line in r.stdout.splitlines() if line]

    def wait_for(self, query, want, timeout=15):
        """Poll @query on the replica until it returns @want (rows); True when
        it did within @timeout seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.sql(query) == want:
                    return True
            except subprocess.CalledProcessError:
                pass
            time.sleep(0.1)
        return False

    def log_tail(self, lines=30):
        """The last @lines of the replica's server log (for failure messages)."""
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError as e:
            return "(no log: %s)" % e

    def remove(self):
        if os.path.exists(os.path.join(self.data, "PG_VERSION")):
            self._run("pg_ctl", "-D", self.data, "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.tmp, True)

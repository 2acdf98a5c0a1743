#!/usr/bin/python3
"""Deepest coroutine stack use of each app, for sizing --stack-size.

Runs coring (one worker thread, --access-log: the access line is formatted
while the request's stack is in use) once per scenario with
CORING_STACK_REPORT set, so that every coroutine stack is painted with a pattern and the pool
reports the deepest use at exit (see cr_stack_pool_deepest in
core/include/coring/core/coro.h), drives the scenario's requests, stops
the server with SIGTERM and prints the figure:

  hello   GET /, POST /todos, GET /todos (the HTTP layer, JSON)
  users   POST /users, GET /users/1, GET /users (libpq: connect, pipelined
          queries) on a throw-away PostgreSQL cluster (db/pg-local)
  users-tcp  the same over TCP to localhost (getaddrinfo; a relay to the socket)
  cep     GET /api/v1/cep/... miss then hit (libcurl against
          coring-fake-viacep over plain HTTP at localhost, libpq)
  cep-tls the same over https:// (OpenSSL's ClientHello; the fake speaks
          plain HTTP, so the handshake fails: 503)
  embed   POST /embed, POST /v1/embeddings (tokenizer, JSON; inference runs
          on its own threads) with --embed-model DIR

  perf/stack_use.py --binary build/apps/coring [--fake-viacep PATH]
                    [--embed-model DIR] [--no-postgres]

Scenarios whose prerequisites are missing are skipped and say so.
"""

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.dont_write_bytecode = True
import coring_server as cs  # noqa: E402

PG_LOCAL = os.path.join(ROOT, "db", "pg-local")
REPORT_RE = re.compile(r"deepest coroutine stack use (\d+) of (\d+) bytes")


def tcp_relay(unix_path):
    """Listen on a loopback port; relay each connection to @unix_path (daemon
    threads, for this process's life). Returns the port."""
    lsock = socket.socket()
    lsock.bind(("127.0.0.1", 0))
    lsock.listen(16)

    def pump(src, dst):
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def accept():
        while True:
            c, _ = lsock.accept()
            u = socket.socket(socket.AF_UNIX)
            u.connect(unix_path)
            threading.Thread(target=pump, args=(c, u), daemon=True).start()
            threading.Thread(target=pump, args=(u, c), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return lsock.getsockname()[1]


def run(apps, requests, args=(), env=None):
    """Start coring with @apps, send each (method, path, body) of @requests on one
    connection, stop it; returns (deepest bytes, usable bytes, statuses)."""
    old = dict(os.environ)
    os.environ["CORING_STACK_REPORT"] = "1"
    os.environ.update(env or {})
    try:
        server = cs.CoringServer(threads=1, apps=apps, args=["--access-log", *args]).start()
    finally:
        os.environ.clear()
        os.environ.update(old)
    statuses = []
    try:
        with server.connect(timeout=20) as c:
            for method, path, body in requests:
                headers = {"Content-Type": "application/json"} if body is not None else None
                statuses.append(c.request(method, path, headers=headers, body=body).status)
    finally:
        server.stop(expect_status=0)
    m = REPORT_RE.search(server.stderr_text(last=200))
    if not m:
        raise AssertionError("no stack report on stderr:\n" + server.stderr_text())
    return int(m.group(1)), int(m.group(2)), statuses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", required=True)
    ap.add_argument("--fake-viacep")
    ap.add_argument("--embed-model")
    ap.add_argument("--no-postgres", action="store_true")
    a = ap.parse_args()
    cs._BINARY = os.path.abspath(a.binary)

    results = []
    results.append(("hello", run("hello,todo", [
        ("GET", "/", None), ("POST", "/todos", {"title": "a" * 900}), ("GET", "/todos", None)])))

    tmp = tempfile.mkdtemp(prefix="coring-stack-")
    os.chmod(tmp, 0o755)
    pgdir = os.path.join(tmp, "pg")
    os.mkdir(pgdir)
    os.chmod(pgdir, 0o755)
    fake = None
    try:
        url = None
        if not a.no_postgres:
            subprocess.run([PG_LOCAL, "start", pgdir, "throwaway"], check=True, timeout=120,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            url = subprocess.run([PG_LOCAL, "url", pgdir], check=True, timeout=30, text=True,
                                 stdout=subprocess.PIPE).stdout.strip()
            results.append(("users", run("users", [
                ("POST", "/users", {"name": "Ana", "email": "ana@example.com"}),
                ("GET", "/users/1", None), ("GET", "/users?limit=10", None)],
                env={"DATABASE_URL": url})))
            # libpq's TCP path (getaddrinfo("localhost"), connect): through a
            # relay from a loopback port to the cluster's Unix socket.
            port = tcp_relay(os.path.join(pgdir, "run", ".s.PGSQL.5432"))
            results.append(("users-tcp", run("users", [
                ("POST", "/users", {"name": "Bo", "email": "bo@example.com"}),
                ("GET", "/users/1", None)],
                env={"DATABASE_URL": "host=localhost port=%d dbname=coring user=coring" % port})))
        if url and a.fake_viacep:
            sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
            from test_cep import EXTRA_DATA, FakeViaCep
            fake = FakeViaCep(os.path.abspath(a.fake_viacep), [EXTRA_DATA])
            results.append(("cep", run("cep", [
                ("GET", "/api/v1/cep/01001-000", None), ("GET", "/api/v1/cep/01001000", None)],
                env={"DATABASE_URL": url, "VIACEP_URL": "http://localhost:%d/ws" % fake.port})))
            # libcurl with OpenSSL: a TLS handshake begun against the fake,
            # which answers in plain HTTP, so it fails (503) after the
            # ClientHello and the first record read. No full handshake:
            # nothing here serves TLS.
            results.append(("cep-tls", run("cep", [("GET", "/api/v1/cep/01310-100", None)],
                env={"DATABASE_URL": url, "VIACEP_URL": "https://localhost:%d/ws" % fake.port})))
        else:
            print("cep: skipped (needs PostgreSQL and --fake-viacep)", file=sys.stderr)
        if a.embed_model:
            results.append(("embed", run("embed", [
                ("POST", "/embed", {"text": "Hello, wörld! Ünïcode and punctuation, please."}),
                ("POST", "/v1/embeddings", {"input": ["a", "b c d"], "model": "m"})],
                args=["--embed-model", a.embed_model])))
        else:
            print("embed: skipped (needs --embed-model DIR)", file=sys.stderr)
    finally:
        if fake:
            fake.stop()
        if not a.no_postgres:
            subprocess.run([PG_LOCAL, "stop", pgdir, "immediate"], timeout=60,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, True)
    for name, (deepest, usable, statuses) in results:
        print("%-9s deepest coroutine stack use %6d bytes (%.1f KiB) of %d; statuses %s"
              % (name, deepest, deepest / 1024, usable, statuses))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""perf/lib/db_checks.py: checks and preparation for the scenarios on
PostgreSQL (users, cep), in the manner of http_client.py (standard library
only; one line per check, non-zero exit on a mismatch).

  check-user URL --count N       GET /users/{id} is 200 + that user for ids 1, N/2, N;
                                 404 {"error"} for a missing id; 400 {"error"} for "abc"
  check-list URL                 GET /users is 200, the first 50 users by id (1..50)
  check-post-user URL            POST /users: 201 + Location + the user; GET Location
                                 gives it back; the same email in capitals is 409;
                                 an email without "@" is 422
  check-cep URL --fake F --cep C --down-cep D --missing M
                                 /api/v1/cep/abc is 400; C (not cached) is 200 from
                                 "viacep", then from "database" with the same fields;
                                 M (unknown upstream) is 404; D while the fake upstream
                                 answers 500 is 503 (the fake is put back after)
  fill-cep URL --ceps FILE [--threads N]
                                 GET every CEP of FILE once (N at a time): all 200
"""

import argparse
import http.client
import os
import re
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from http_client import expect_json, fail, json_body, request, split  # noqa: E402

USER_KEYS = {"id", "name", "email", "created_at"}
RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)$")
CEP_KEYS = {"cep", "logradouro", "complemento", "bairro", "localidade", "uf", "ibge", "ddd", "source"}


def is_user(v):
    return (isinstance(v, dict) and set(v) == USER_KEYS and isinstance(v["id"], int)
            and isinstance(v["name"], str) and isinstance(v["email"], str)
            and isinstance(v["created_at"], str) and RFC3339_UTC.match(v["created_at"]) is not None)


def error_answer(base, path, want, method="GET", body=None):
    v, _, _ = expect_json(want, base + path, method, body)
    if not (isinstance(v, dict) and isinstance(v.get("error"), str)):
        fail(f"{method} {path}: body {v!r}, want {{\"error\": ...}}")


def cmd_check_user(a):
    base = a.url.rstrip("/")
    for i in (1, a.count // 2, a.count):
        v, headers, body = expect_json(200, f"{base}/users/{i}")
        if not is_user(v) or v["id"] != i:
            fail(f"GET /users/{i}: body {v!r}, want a user (id, name, email, created_at RFC 3339 UTC)")
    error_answer(base, f"/users/{a.count * 1000 + 7}", 404)
    error_answer(base, "/users/abc", 400)
    print(f"ok GET /users/{{id}} -> 200 + the user for ids 1..{a.count}; missing -> 404, \"abc\" -> 400 {{\"error\"}}")


def cmd_check_list(a):
    v, headers, body = expect_json(200, a.url.rstrip("/") + "/users")
    if not isinstance(v, list) or not all(is_user(u) for u in v):
        fail(f"GET /users: not an array of users: {body[:200]!r}")
    if [u["id"] for u in v] != list(range(1, 51)):
        fail(f"GET /users: ids {[u['id'] for u in v][:5]}..., want 1..50")
    print(f"ok GET /users -> 200, users 1..50, {len(body)} bytes")


def cmd_check_post_user(a):
    base = a.url.rstrip("/")
    tag = os.urandom(6).hex()
    user = {"name": "Check User", "email": f"check-{tag}@example.com"}
    v, headers, body = expect_json(201, base + "/users", "POST", user)
    if not is_user(v) or v["name"] != user["name"] or v["email"] != user["email"]:
        fail(f"POST /users: body {v!r}")
    loc = headers.get("location", "")
    if not loc.endswith(f"/users/{v['id']}"):
        fail(f"POST /users: Location {loc!r}, want /users/{v['id']}")
    status, headers, body = request(f"{base}/users/{v['id']}")
    if status != 200 or json_body(status, headers, body, "GET the new user") != v:
        fail(f"GET /users/{v['id']} after POST -> {status} {body[:200]!r}, want the same user")
    error_answer(base, "/users", 409, "POST", {"name": "Again", "email": user["email"].upper()})
    error_answer(base, "/users", 422, "POST", {"name": "Bad", "email": "no-at-sign.example.com"})
    print(f"ok POST /users -> 201 + Location {loc} + the user; same email (any case) -> 409; bad email -> 422")


def cep_get(base, cep):
    status, headers, body = request(f"{base}/api/v1/cep/{cep}")
    return status, headers, body


def cmd_check_cep(a):
    base = a.url.rstrip("/")
    fake = a.fake.rstrip("/")
    error_answer(base, "/api/v1/cep/abc", 400)
    first = None
    for want_source in ("viacep", "database"):
        status, headers, body = cep_get(base, a.cep)
        if status != 200:
            fail(f"GET /api/v1/cep/{a.cep} ({want_source}) -> {status}, want 200: {body[:200]!r}")
        v = json_body(status, headers, body, f"GET /api/v1/cep/{a.cep}")
        if not isinstance(v, dict) or set(v) != CEP_KEYS or not all(isinstance(x, str) for x in v.values()):
            fail(f"GET /api/v1/cep/{a.cep}: body {v!r}, want the keys {sorted(CEP_KEYS)}")
        if v["cep"] != a.cep[:5] + "-" + a.cep[5:]:
            fail(f"GET /api/v1/cep/{a.cep}: cep {v['cep']!r}")
        if v["source"] != want_source:
            fail(f"GET /api/v1/cep/{a.cep}: source {v['source']!r}, want {want_source!r}")
        if first is None:
            first = v
        elif {k: x for k, x in v.items() if k != "source"} != {k: x for k, x in first.items() if k != "source"}:
            fail(f"GET /api/v1/cep/{a.cep}: the cached answer {v!r} differs from the first {first!r}")
    error_answer(base, f"/api/v1/cep/{a.missing}", 404)
    put = lambda body: request(fake + "/_fake/behaviour", "PUT", body)  # noqa: E731
    try:
        if put({"status": 500})[0] != 204:
            fail("could not make the fake upstream answer 500")
        error_answer(base, f"/api/v1/cep/{a.down_cep}", 503)
    finally:
        put({"status": 200})
    print(f"ok GET /api/v1/cep/{{cep}}: abc -> 400; {a.cep} -> 200 from viacep, then from the database; "
          f"unknown -> 404; upstream 500 -> 503 {{\"error\"}}")


def cmd_fill_cep(a):
    base = a.url.rstrip("/")
    with open(a.ceps) as f:
        ceps = [line.strip() for line in f if line.strip()]
    host, port, _ = split(base)
    lock = threading.Lock()
    todo = list(ceps)
    bad = []

    def worker():
        conn = http.client.HTTPConnection(host, port, timeout=30)
        try:
            while True:
                with lock:
                    if not todo or bad:
                        return
                    cep = todo.pop()
                conn.request("GET", f"/api/v1/cep/{cep}")
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    with lock:
                        bad.append(f"{cep} -> {resp.status}")
        except (OSError, http.client.HTTPException) as e:
            with lock:
                bad.append(f"{type(e).__name__}: {e}")
        finally:
            conn.close()

    threads = [threading.Thread(target=worker) for _ in range(a.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if bad:
        fail(f"filling the cache: {bad[0]}")
    status, headers, body = cep_get(base, ceps[0])
    v = json_body(status, headers, body, f"GET /api/v1/cep/{ceps[0]}")
    if status != 200 or v.get("source") != "database":
        fail(f"GET /api/v1/cep/{ceps[0]} after filling: {status} {v!r}, want 200 from the database")
    print(f"ok cached {len(ceps)} CEPs through the server (GET each once, {a.threads} at a time), all 200")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("check-user")
    s.add_argument("url")
    s.add_argument("--count", type=int, default=10000)
    s.set_defaults(fn=cmd_check_user)
    s = sub.add_parser("check-list")
    s.add_argument("url")
    s.set_defaults(fn=cmd_check_list)
    s = sub.add_parser("check-post-user")
    s.add_argument("url")
    s.set_defaults(fn=cmd_check_post_user)
    s = sub.add_parser("check-cep")
    s.add_argument("url")
    s.add_argument("--fake", required=True)
    s.add_argument("--cep", required=True)
    s.add_argument("--down-cep", required=True)
    s.add_argument("--missing", required=True)
    s.set_defaults(fn=cmd_check_cep)
    s = sub.add_parser("fill-cep")
    s.add_argument("url")
    s.add_argument("--ceps", required=True)
    s.add_argument("--threads", type=int, default=32)
    s.set_defaults(fn=cmd_fill_cep)
    a = p.parse_args()
    try:
        a.fn(a)
    except (OSError, http.client.HTTPException, ValueError) as e:
        fail(f"{a.cmd}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()

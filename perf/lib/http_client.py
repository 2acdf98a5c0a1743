#!/usr/bin/python3
"""perf/lib/http_client.py: the small HTTP steps around a benchmark run.

Standard library only. Every check prints one line saying what it saw and
exits non-zero on a mismatch, so that a server that answers the wrong thing
is never measured as if it were right.

  wait URL --pid PID [--timeout S]   until anything answers HTTP at URL
  check-hello URL                    GET / is 200 {"message":"hello world"}
  check-pipeline URL --depth N       N GETs in one write get N 200s, in order
  preload URL --count N              POST N todos ("todo 1".."todo N")
  check-todos URL --count N          GET /todos is 200, N todos ordered by id
  check-post URL                     POST /todos is 201 + Location + the todo
  ids URL --out FILE                 write the ids GET /todos lists, one a line
  check-todo URL --ids FILE          GET /todos/{id} is 200 + that todo for
                                     ids of FILE, 404 + {"error"} for a missing one
"""

import argparse
import http.client
import json
import os
import socket
import sys
import time
import urllib.parse

TIMEOUT_S = 5


def split(url):
    u = urllib.parse.urlsplit(url)
    return u.hostname, u.port or 80, (u.path or "/")


def request(url, method="GET", body=None, headers=None):
    """One request on a fresh connection: (status, headers dict, body bytes)."""
    host, port, path = split(url)
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        data = None if body is None else json.dumps(body).encode()
        hdrs = dict(headers or {})
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=hdrs)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def fail(message):
    print(f"FAIL {message}")
    sys.exit(1)


def json_body(status, headers, body, what):
    ctype = headers.get("content-type", "")
    if not ctype.startswith("application/json"):
        fail(f"{what}: content-type {ctype!r}, want application/json")
    try:
        return json.loads(body)
    except ValueError:
        fail(f"{what}: body is not JSON: {body[:200]!r}")


def expect_json(want, url, method="GET", body=None):
    """request(), then fail unless the status is @want and the body is
    JSON: (parsed body, headers dict, body bytes)."""
    status, headers, raw = request(url, method, body)
    what = f"{method} {split(url)[2]}"
    if status != want:
        fail(f"{what} -> {status}, want {want}: {raw[:200]!r}")
    return json_body(status, headers, raw, what), headers, raw


def is_todo(v):
    return (isinstance(v, dict) and set(v) == {"id", "title", "completed"}
            and isinstance(v["id"], int) and isinstance(v["title"], str)
            and isinstance(v["completed"], bool))


def cmd_wait(a):
    deadline = time.monotonic() + a.timeout
    last = ""
    while time.monotonic() < deadline:
        if a.pid and not os.path.exists(f"/proc/{a.pid}"):
            fail(f"server pid {a.pid} exited before answering")
        try:
            status, _, _ = request(a.url)
            print(f"ok answering: GET {split(a.url)[2]} -> {status}")
            return
        except (OSError, http.client.HTTPException) as e:
            last = str(e)
        time.sleep(0.1)
    fail(f"no answer from {a.url} in {a.timeout}s ({last})")


def cmd_check_hello(a):
    v, headers, body = expect_json(200, a.url)
    if v != {"message": "hello world"}:
        fail(f"GET / body {v!r}")
    print("ok GET / -> 200 {\"message\":\"hello world\"}")


def read_response(f):
    """Read one HTTP/1.1 response from a buffered socket file: status code."""
    line = f.readline()
    if not line:
        fail("connection closed mid-pipeline")
    parts = line.split()
    status = int(parts[1])
    length = None
    while True:
        h = f.readline()
        if h in (b"\r\n", b"\n", b""):
            break
        k, _, v = h.partition(b":")
        k = k.strip().lower()
        if k == b"content-length":
            length = int(v.strip())
        elif k == b"transfer-encoding" and b"chunked" in v.lower():
            fail("chunked response: not expected for GET /")
    if length is None:
        fail("response without Content-Length")
    f.read(length)
    return status


def cmd_check_pipeline(a):
    host, port, path = split(a.url)
    one = f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    with socket.create_connection((host, port), timeout=TIMEOUT_S) as s:
        s.sendall(one * a.depth)
        f = s.makefile("rb")
        statuses = [read_response(f) for _ in range(a.depth)]
    if statuses != [200] * a.depth:
        fail(f"{a.depth} pipelined GET {path}: statuses {statuses}")
    print(f"ok {a.depth} pipelined GET {path} -> {a.depth} x 200")


def cmd_preload(a):
    base = a.url.rstrip("/")
    host, port, _ = split(base)
    conn = http.client.HTTPConnection(host, port, timeout=TIMEOUT_S)
    try:
        for i in range(1, a.count + 1):
            data = json.dumps({"title": f"todo {i}", "completed": False}).encode()
            conn.request("POST", "/todos", body=data,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            if resp.status != 201:
                fail(f"preload POST /todos #{i} -> {resp.status}, want 201")
    finally:
        conn.close()
    print(f"ok preloaded {a.count} todos")


def cmd_check_todos(a):
    v, headers, body = expect_json(200, a.url.rstrip("/") + "/todos")
    if not isinstance(v, list) or not all(is_todo(t) for t in v):
        fail(f"GET /todos: not an array of todos: {body[:200]!r}")
    if a.count is not None and len(v) != a.count:
        fail(f"GET /todos: {len(v)} todos, want {a.count}")
    ids = [t["id"] for t in v]
    if ids != sorted(ids) or len(set(ids)) != len(ids):
        fail("GET /todos: not ordered by id")
    print(f"ok GET /todos -> 200, {len(v)} todos, {len(body)} bytes")


def cmd_check_post(a):
    title = "write the benchmark report"
    v, headers, _ = expect_json(201, a.url.rstrip("/") + "/todos", "POST",
                                {"title": title, "completed": False})
    if not is_todo(v) or v["title"] != title or v["completed"] is not False:
        fail(f"POST /todos body {v!r}")
    loc = headers.get("location", "")
    if not loc.endswith(f"/todos/{v['id']}"):
        fail(f"POST /todos Location {loc!r}, want /todos/{v['id']}")
    print(f"ok POST /todos -> 201, Location {loc}")


def cmd_ids(a):
    v, headers, body = expect_json(200, a.url.rstrip("/") + "/todos")
    ids = [t["id"] for t in v if is_todo(t)]
    if not ids:
        fail("GET /todos: no todos to take ids from")
    with open(a.out, "w") as f:
        f.write("".join(f"{i}\n" for i in ids))
    print(f"ok {len(ids)} ids from GET /todos ({ids[0]}..{ids[-1]})")


def cmd_check_todo(a):
    base = a.url.rstrip("/")
    with open(a.ids) as f:
        ids = [int(line) for line in f if line.strip()]
    for i in (ids[0], ids[len(ids) // 2], ids[-1]):
        v, headers, body = expect_json(200, f"{base}/todos/{i}")
        if not is_todo(v) or v["id"] != i:
            fail(f"GET /todos/{i} body {v!r}")
    missing = max(ids) + 1000003
    v, headers, body = expect_json(404, f"{base}/todos/{missing}")
    if not (isinstance(v, dict) and isinstance(v.get("error"), str)):
        fail(f"GET /todos/{missing}: body {v!r}, want {{\"error\": ...}}")
    print(f"ok GET /todos/{{id}} -> 200 + the todo for {len(ids)} ids; a missing id -> 404 {{\"error\"}}")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("wait")
    s.add_argument("url")
    s.add_argument("--pid", type=int)
    s.add_argument("--timeout", type=float, default=20)
    s.set_defaults(fn=cmd_wait)
    s = sub.add_parser("check-hello")
    s.add_argument("url")
    s.set_defaults(fn=cmd_check_hello)
    s = sub.add_parser("check-pipeline")
    s.add_argument("url")
    s.add_argument("--depth", type=int, default=16)
    s.set_defaults(fn=cmd_check_pipeline)
    s = sub.add_parser("preload")
    s.add_argument("url")
    s.add_argument("--count", type=int, default=100)
    s.set_defaults(fn=cmd_preload)
    s = sub.add_parser("check-todos")
    s.add_argument("url")
    s.add_argument("--count", type=int)
    s.set_defaults(fn=cmd_check_todos)
    s = sub.add_parser("check-post")
    s.add_argument("url")
    s.set_defaults(fn=cmd_check_post)
    s = sub.add_parser("ids")
    s.add_argument("url")
    s.add_argument("--out", required=True)
    s.set_defaults(fn=cmd_ids)
    s = sub.add_parser("check-todo")
    s.add_argument("url")
    s.add_argument("--ids", required=True)
    s.set_defaults(fn=cmd_check_todo)
    a = p.parse_args()
    try:
        a.fn(a)
    except (OSError, http.client.HTTPException, ValueError) as e:
        fail(f"{a.cmd}: {type(e).__name__}: {e}")


if __name__ == "__main__":
    main()

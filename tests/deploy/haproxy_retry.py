#!/usr/bin/python3
"""deploy/haproxy.cfg replays only what may be sent twice.

HAProxy runs the template on loopback in front of two stand-in hosts that
pass their health checks (GET /readyz, /livez: 200) and close every other
connection as soon as a request has arrived, with no answer: HAProxy's
"empty-response", a host dying mid-request. A GET, a DELETE and a POST
carrying an Idempotency-Key are sent again (1 + `retries 3` = 4 arrivals);
a POST or PATCH without a key arrives once and its client gets the 502.

    tests/deploy/haproxy_retry.py        (77 without haproxy)
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))


class DyingHost:
    """A listener on 127.0.0.1 that answers health checks and drops the rest."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.arrivals = []  # (method, path, has key)
        self.lock = threading.Lock()
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.one, args=(conn,), daemon=True).start()

    def one(self, conn):
        conn.settimeout(5)
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split()[:2]
                fields = {k.strip().lower(): v.strip() for k, v in
                          (line.split(":", 1) for line in lines[1:] if ":" in line)}
                length = int(fields.get("content-length", "0"))
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                if path in ("/readyz", "/livez"):
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    continue
                with self.lock:
                    self.arrivals.append((method, path, "idempotency-key" in fields))
                return  # closed with no answer
        except OSError:
            pass
        finally:
            conn.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def send(port, method, path, headers=()):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    body = b'{"title":"x"}' if method in ("POST", "PATCH") else b""
    head = "%s %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n" % (method, path)
    for h in headers:
        head += h + "\r\n"
    if body:
        head += "Content-Type: application/json\r\nContent-Length: %d\r\n" % len(body)
    s.sendall(head.encode() + b"\r\n" + body)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    return int(out.split(b" ", 2)[1]) if out.startswith(b"HTTP/") else None


def main():
    if not shutil.which("haproxy"):
        print("SKIP: haproxy is missing (.ci/install-deps test)")
        return 77
    tmp = tempfile.mkdtemp(prefix="coring-haproxy-retry-")
    hosts = [DyingHost(), DyingHost()]
    proc = None
    try:
        pem = os.path.join(tmp, "lb.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost", "-days",
                        "1", "-keyout", pem + ".key", "-out", pem + ".crt"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(pem, "w") as out:
            for part in (pem + ".crt", pem + ".key"):
                with open(part) as f:
                    out.write(f.read())
        lb = free_port()
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "CORING_LB_HTTP": "127.0.0.1:%d" % lb,
               "CORING_LB_HTTPS": "127.0.0.1:%d" % free_port(),
               "CORING_LB_STATS": "127.0.0.1:%d" % free_port(),
               "CORING_LB_METRICS": "127.0.0.1:%d" % free_port(),
               "CORING_LB_CERT": pem, "CORING_LB_SOCKET": os.path.join(tmp, "s.sock"),
               "CORING_LB_LOG": "stdout",
               "CORING_HOST1": "127.0.0.1:%d" % hosts[0].port,
               "CORING_HOST2": "127.0.0.1:%d" % hosts[1].port}
        proc = subprocess.Popen(["haproxy", "-db", "-f", os.path.join(ROOT, "deploy", "haproxy.cfg")],
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(3.5)  # rise 2 x inter 1 s: both hosts UP
        if proc.poll() is not None:
            print("FAIL: haproxy exited with %s" % proc.returncode)
            return 1
        cases = [("GET", "/todos/1", (), 4), ("DELETE", "/todos/1", (), 4),
                 ("POST", "/todos", ("Idempotency-Key: k1",), 4),
                 ("POST", "/todos", (), 1), ("PATCH", "/todos/1", (), 1)]
        failed = 0
        for method, path, headers, want in cases:
            for h in hosts:
                with h.lock:
                    h.arrivals.clear()
            status = send(lb, method, path, headers)
            time.sleep(0.2)
            arrived = sum(len(h.arrivals) for h in hosts)
            what = "%s %s%s" % (method, path, " with a key" if headers else "")
            ok = arrived == want and status == 502
            failed += not ok
            print("%s: %s arrived %d time(s) (want %d), answered %s"
                  % ("PASS" if ok else "FAIL", what, arrived, want, status))
        return 1 if failed else 0
    finally:
        if proc is not None:
            proc.kill()
            proc.wait(5)
        shutil.rmtree(tmp, True)


if __name__ == "__main__":
    sys.exit(main())

"""nginx beside coring in one run: perf/peers/nginx's configuration with one
worker, room for N connections, started in a folder of its own and stopped
(by its PID) at the end. perf/burst.py and perf/idle_rss.py use it."""
import contextlib
import os
import shutil
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "..", "peers", "nginx", "nginx.conf.template")


@contextlib.contextmanager
def one_worker(what, connections, port, can_connect, keepalive_timeout=None, preexec_fn=None):
    """Yields nginx's master process once @port accepts (or 10 s passed):
    one worker with room for @connections, keepalive_timeout
    @keepalive_timeout (a string such as "600s") when given. @what names
    the caller in the error when nginx is missing (NGINX_BIN, default
    /usr/sbin/nginx); @can_connect(port) says when it listens."""
    nginx = os.environ.get("NGINX_BIN", "/usr/sbin/nginx")
    if not os.access(nginx, os.X_OK):
        raise SystemExit("%s: --peer nginx: no %s (apt-get install nginx-light)" % (what, nginx))
    rundir = tempfile.mkdtemp(prefix="%s-nginx-" % what)
    os.makedirs(os.path.join(rundir, "tmp"))
    with open(TEMPLATE) as f:
        conf = f.read().replace("@PORT@", str(port)).replace("@WORKERS@", "1")
    conf = conf.replace("worker_rlimit_nofile 16384;", "worker_rlimit_nofile %d;" % (connections + 1000))
    conf = conf.replace("worker_connections 8192;", "worker_connections %d;" % (connections + 500))
    if keepalive_timeout:
        conf = conf.replace("keepalive_timeout 75s;", "keepalive_timeout %s;" % keepalive_timeout)
    with open(os.path.join(rundir, "nginx.conf"), "w") as f:
        f.write(conf)
    proc = subprocess.Popen([nginx, "-p", rundir + "/", "-e", os.path.join(rundir, "error.log"),
                             "-c", os.path.join(rundir, "nginx.conf"), "-g", "daemon off;"],
                            stdin=subprocess.DEVNULL, preexec_fn=preexec_fn)
    try:
        deadline = time.monotonic() + 10
        while not can_connect(port) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(rundir, True)

#!/usr/bin/python3
"""sd_notify(3): what coring tells a service manager, read from a
NOTIFY_SOCKET the test owns (a datagram socket, as systemd's): READY=1 once
it serves, WATCHDOG=1 while every worker's loop turns (WATCHDOG_USEC set),
none while one ring is blocked (the CORING_TEST_STALL_RING test hook,
docs/operating.md), and STOPPING=1 when the drain begins."""

import os
import shutil
import signal
import socket
import tempfile
import threading
import time
import unittest

from coring_server import CoringServer, CoringTestCase, clean_env, main

WATCHDOG_USEC = 1000000   # WATCHDOG=1 every 0.5 s; a ring is stale 0.5 s after its last tick
STALL_AFTER_MS = 1500     # ring 1 blocks 1.5 s after it started ...
STALL_FOR_MS = 2500       # ... for 2.5 s


class Listener(threading.Thread):
    """Collects (monotonic time, message) from the notify socket."""

    def __init__(self, path):
        super().__init__(daemon=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []
        self.lock = threading.Lock()
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                continue
            with self.lock:
                self.messages.append((time.monotonic(), data.decode()))

    def times_of(self, line):
        with self.lock:
            return [t for t, m in self.messages if line in m.split("\n")]

    def all(self):
        with self.lock:
            return [m for _, m in self.messages]


class NotifyTest(CoringTestCase):
    def test_ready_watchdog_stopping(self):
        tmp = tempfile.mkdtemp(prefix="coring-notify-")
        self.addCleanup(shutil.rmtree, tmp, True)
        listener = Listener(os.path.join(tmp, "notify"))
        listener.start()
        self.addCleanup(listener.done.set)
        env = clean_env(NOTIFY_SOCKET=listener.sock.getsockname(), WATCHDOG_USEC=str(WATCHDOG_USEC),
                        CORING_TEST_STALL_RING="1,%d,%d" % (STALL_AFTER_MS, STALL_FOR_MS))
        server = CoringServer(threads=2, apps="hello", popen={"env": env})
        with server:
            started = time.monotonic()
            deadline = started + (STALL_AFTER_MS + STALL_FOR_MS) / 1000 + 2.5
            while time.monotonic() < deadline:
                time.sleep(0.1)
            server.stop(expect_status=0)
            time.sleep(0.3)
        messages = listener.all()
        ready = listener.times_of("READY=1")
        self.assertEqual(len(ready), 1, messages)
        self.assertTrue(any(m.startswith("READY=1\nSTATUS=serving on") for m in messages), messages)
        self.assertEqual(len(listener.times_of("STOPPING=1")), 1, messages)
        self.assertIn("STATUS=draining: SIGTERM", "\n".join(messages))
        self.assertIn("test hook CORING_TEST_STALL_RING: blocking this ring", server.stderr_text(200))

        beats = listener.times_of("WATCHDOG=1")
        gaps = [b - a for a, b in zip(beats, beats[1:])]
        print("WATCHDOG=1 at (s after start): %s" % ["%.2f" % (t - started) for t in beats])
        print("gaps (s): %s" % ["%.2f" % g for g in gaps])
        self.assertGreaterEqual(len(beats), 4, messages)
        # While ring 1 is blocked (2.5 s), no WATCHDOG=1 once its last
        # heartbeat is 0.5 s old: one gap of about 2 s; every other gap
        # about half the interval.
        longest = max(gaps)
        self.assertGreaterEqual(longest, (STALL_FOR_MS - 500) / 1000 - 0.4,
                                "WATCHDOG=1 went on while a ring was blocked: %s" % gaps)
        at = gaps.index(longest)
        self.assertTrue(any(b < beats[at] for b in beats), "WATCHDOG=1 before the stall")
        self.assertGreater(len(beats) - (at + 1), 1, "WATCHDOG=1 again once the ring turns")


if __name__ == "__main__":
    main()

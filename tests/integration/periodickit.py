# SPDX-License-Identifier: MIT
"""Shared helpers for the periodic tests (test_periodic.py, test_periodic_locks.py,
test_periodic_fleet.py). Not a test file itself (run.py only runs test_*.py).

The doc/behaviours.md fixture entry E (`* * * * *`, class P, until_executed, retry 0, args
`[{"k":"v"}]`) is used where the minute matters (the published JSON, the pjid, the first
slot's job); scenarios that need several slots use 6-field crons with a seconds field, and
scenarios that must see one slot only use a yearly cron (its slot cannot change during a
test). Slots fire on time; the ticker's catch-up look (`tick_interval`, what retries a
failed or blocked slot) runs every 0.2 s, so "the next tick" is quick.
"""

import hashlib
import json
import os
import time

from runkit import JobTestCase, loads, wait_for  # noqa: F401

TICK = 0.2
YEARLY = "0 0 1 1 *"
E_ARGS = '[{"k":"v"}]'
SCHEDULE_HASH = b"periodic:schedule"
DISABLED = b"periodic:disabled"


def pjid(cron, cls, canonical_args):
    """SHA-1 hex of `<cron>|<class>|<canonical args>` (doc/protocol.md §4.3)."""
    return hashlib.sha1(("%s|%s|%s" % (cron, cls, canonical_args)).encode()).hexdigest()


def entry(cron, cls="P", args=None, retry=None, unique=None):
    """A periodic conf entry (args: JSON text)."""
    e = {"cron": cron, "class": cls}
    if args is not None:
        e["args"] = args
    if retry is not None:
        e["retry"] = retry
    if unique:
        e["unique"] = "until_executed"
    return e


E = entry("* * * * *", "P", E_ARGS, retry=0, unique=True)
E_PJID = pjid("* * * * *", "P", E_ARGS)


def running_key(p):
    return ("periodic:running:" + p).encode()


def last_slot_key(p):
    return ("periodic:last_slot:" + p).encode()


def slot_lock_key(p, slot):
    return ("periodic:lock:%s:%d" % (p, slot)).encode()


def every_slot(n, t):
    """The slot of `*/n * * * * *` (n divides 60) at instant t: the latest multiple of n at
    or before the whole second of t (issue 12: a slot fires at its second, not after it)."""
    s = int(t)
    return s - s % n


def creation_slots(n, j):
    """The slots a job of `*/n * * * * *` may carry for its created_at: the one it was
    created in, or the one before when it was created just after a boundary (the tick that
    claimed it began before the boundary; the claim's round trips took it past)."""
    return (every_slot(n, j["created_at"]), every_slot(n, j["created_at"] - 0.5))


def yearly_slot(t=None):
    """The slot of `0 0 1 1 *` in the local zone (the daemon's zone: same environment)."""
    y = time.localtime(t).tm_year
    start = int(time.mktime((y, 1, 1, 0, 0, 0, 0, 0, -1)))
    if int(t if t is not None else time.time()) < start:
        start = int(time.mktime((y - 1, 1, 1, 0, 0, 0, 0, 0, -1)))
    return start


def avoid_minute_boundary(margin=8, period=60):
    """Sleep past the next boundary of `period` s (a minute unless told) when it is less
    than `margin` s away, so that a slot of that period stays the same for a while."""
    left = period - time.time() % period
    if left < margin:
        time.sleep(left + 0.5)


class PeriodicTestCase(JobTestCase):
    """JobTestCase plus periodic views. periodic_daemon() starts a daemon reading `other`
    (so periodic jobs stay on `default` where the test reads them) with a fast ticker."""

    def periodic_daemon(self, entries, queues=("other",), **settings):
        settings.setdefault("tick_interval", TICK)
        return self.daemon(queues=list(queues), periodic=list(entries), **settings)

    def jobs(self, queue="default"):
        """The jobs on a queue, oldest first, parsed."""
        return [loads(x) for x in reversed(self.r.lrange((b"cogworker:queue:" + queue.encode()), 0, -1))]

    def jobs_of(self, p, queue="default"):
        return [j for j in self.jobs(queue) if j.get("periodic_pjid") == p]

    def wait_jobs(self, p, n=1, timeout=10, queue="default"):
        return wait_for(lambda: (lambda js: js if len(js) >= n else None)(self.jobs_of(p, queue)),
                        timeout=timeout, message="%d job(s) of %s" % (n, p))

    def last_slot(self, p):
        v = self.r.get(last_slot_key(p))
        return None if v is None else v.decode()

    def slots_file(self, d):
        """Lines of <runs>.slots written by tests/handlers/slot: [(slot, jid, start, end)]."""
        try:
            with open(d.runs + ".slots") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            return []
        out = []
        for line in lines:
            parts = line.split()
            if len(parts) == 4:
                out.append((int(parts[0]), parts[1], float(parts[2]), float(parts[3])))
        return out

    def settle_ticks(self, n=5):
        """Let the ticker run n more ticks."""
        time.sleep(n * TICK + 0.1)


class CuttingProxy:
    """A TCP proxy in front of the test's redis-server that plays "Redis went away" at one
    precise moment: the first time a client sends a command containing every byte string
    of `trigger` (e.g. the LPUSH of a periodic job), that connection is cut before the
    command reaches Redis, and for `down_for` seconds every new connection is closed at
    once. Used for PT-8, which needs the push *and* the rollback after it to fail.

        proxy = CuttingProxy(server.port, [b"LPUSH", b"cogworker:queue:default"], 3)
        url = proxy.url
    """

    def __init__(self, upstream_port, trigger, down_for):
        import socket
        import threading
        self.upstream_port = upstream_port
        self.trigger = list(trigger)
        self.down_for = down_for
        self.armed = True
        self.cut_at = None
        self.down_until = 0.0
        self._socks = []
        self._lock = threading.Lock()
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return "redis://127.0.0.1:%d/0" % self.port

    def _accept(self):
        import socket
        import threading
        while not self._stop:
            try:
                c, _ = self._listener.accept()
            except OSError:
                return
            if time.time() < self.down_until:
                c.close()
                continue
            try:
                u = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=5)
            except OSError:
                c.close()
                continue
            u.settimeout(None)
            with self._lock:
                self._socks += [c, u]
            threading.Thread(target=self._pump, args=(c, u, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(u, c, False), daemon=True).start()

    def _pump(self, src, dst, from_client):
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if data and from_client and self.armed and all(t in data for t in self.trigger):
                self.armed = False
                self.cut_at = time.time()
                self.down_until = time.time() + self.down_for
                data = b""
            if not data:
                for s in (src, dst):
                    try:
                        s.close()
                    except OSError:
                        pass
                return
            try:
                dst.sendall(data)
            except OSError:
                return

    def close(self):
        self._stop = True
        self._listener.close()
        with self._lock:
            for s in self._socks:
                try:
                    s.close()
                except OSError:
                    pass

# SPDX-License-Identifier: MIT
"""Shared helpers for the tests of running jobs and failure routing (test_run.py,
test_failures.py, test_on_death.py, test_bookkeeping_faults.py, test_unique.py,
test_handler_misbehaviour.py). Not a test file itself (run.py only runs test_*.py).

    class T(JobTestCase):
        def test_x(self):
            d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
            p = self.push(job("F", retry=3))
            entry = self.wait_member(RETRY)          # the one retry entry (bytes)

Everything is observed the way a user would: keys in Redis, the daemon's log, the files
the test handlers write.
"""

import hashlib
import json
import os
import time
import unittest

from harness import (DaemonTestCase, binary, free_port, handler, job, new_jid,  # noqa: F401
                     wait_for)

RETRY = b"cogworker:retry"
DEAD = b"cogworker:dead"
SCHEDULE = b"cogworker:schedule"
PROCESSED = b"cogworker:stats:processed"
FAILED = b"cogworker:stats:failed"
UNSETTLED = b"cogworker:unsettled"
QUEUE = "cogworker:queue:"

FAILURE_FIELDS = {"error_class", "error_message", "failed_at", "retry_count"}
HEX24 = "0123456789abcdef"

# ACL user without RENAME: KeyGuard cannot quarantine, wrong-typed keys stay (doc/behaviours.md §0.4 "guard off")
GUARD_OFF_USER = ("cw", "pw")


def _binary_has(phrase):
    try:
        with open(binary("cogworkerd"), "rb") as f:
            return phrase in f.read()
    except OSError:
        return False


def reconcile_available():
    """Whether the daemon under test has the reconcile step (doc/protocol.md §7.11): its binary
    carries the log phrase the protocol fixes for a requeued stray. Scenarios that need a
    reconcile (pending settlements filed after a Redis fault) are skipped without it."""
    return _binary_has(b"requeued stray in-progress job")


NEEDS_RECONCILE = unittest.skipUnless(
    reconcile_available(),
    "needs the reconcile step of the scheduled poller (src/recovery.c), not built yet")


def sh(script, *args):
    """argv running a /bin/sh script (no shell reads the payload: args are positional)."""
    return ["/bin/sh", "-c", script, "sh"] + [str(a) for a in args]


def canonical_digest(cls, queue, canonical_args):
    """cogworker's unique digest (§4.3): SHA-1 hex of class|queue|canonical args JSON.
    canonical_args is given as text (bytes or str), written out by the test."""
    if isinstance(canonical_args, str):
        canonical_args = canonical_args.encode()
    return hashlib.sha1(cls.encode() + b"|" + queue.encode() + b"|" + canonical_args).hexdigest()


def loads(b):
    return json.loads(b.decode("utf-8") if isinstance(b, bytes) else b)


class JobTestCase(DaemonTestCase):
    """DaemonTestCase plus what the job-running scenarios share."""

    # -- Redis views

    def now(self):
        """Redis TIME as a float (doc/behaviours.md §0.1: `now` is Redis's clock)."""
        s, us = self.r.time()
        return s + us / 1e6

    def members(self, key):
        """[(member bytes, score)] of a ZSET, oldest score first."""
        return self.r.zrange(key, 0, -1, withscores=True)

    def inprogress(self, d):
        return self.r.lrange(("cogworker:inprogress:" + d.identity).encode(), 0, -1)

    def qlen(self, queue="default"):
        return self.r.llen((QUEUE + queue).encode())

    def attempts(self, jid):
        return [loads(e) for e in self.r.lrange(("cogworker:job_attempts:" + jid).encode(), 0, -1)]

    def bucket(self):
        return ("cogworker:throughput:%d" % int(self.now() // 3600)).encode()

    def bucket_total(self, field, since):
        """`field` of the throughput buckets summed from the hour of `since` to now: a
        test that straddles an hour counts in two."""
        total = 0
        for h in range(int(since // 3600), int(self.now() // 3600) + 1):
            v = self.r.hget("cogworker:throughput:%d" % h, field)
            total += int(v) if v is not None else 0
        return total

    def counter(self, key):
        v = self.r.get(key)
        return int(v) if v is not None else 0

    def wait_counter(self, key, n, timeout=5):
        """The counter once it reads n, else its value after timeout: the processed counter
        and its throughput field are flushed once a second (src/batch.c), so a test reads
        them as cogworker's Web UI does, a moment after the job."""
        deadline = time.monotonic() + timeout
        while self.counter(key) != n and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.counter(key)

    def wait_processed_field(self, buckets, n, timeout=5):
        """Sum of the `processed` field over the throughput hashes `buckets`, once it is n
        (else after timeout); see wait_counter."""
        def total():
            return sum(int(self.r.hget(b, "processed") or 0) for b in buckets)
        deadline = time.monotonic() + timeout
        while total() != n and time.monotonic() < deadline:
            time.sleep(0.05)
        return total()

    # -- waiting

    def wait_member(self, key, count=1, timeout=10, jid=None):
        """Wait until the ZSET holds `count` members (or a member for `jid`); return the
        single (member, score) pair, or all pairs when count > 1."""
        def ready():
            m = self.members(key)
            if jid is not None:
                m = [x for x in m if loads(x[0]).get("jid") == jid]
                return m if m else None
            return m if len(m) >= count else None
        got = wait_for(ready, timeout=timeout, message="%d member(s) in %s" % (count, key))
        return got[0] if (count == 1 or jid is not None) else got

    def wait_settled(self, d, timeout=10):
        """Wait until the daemon's in-progress list is empty and nothing is busy."""
        wait_for(lambda: not self.inprogress(d) and d.proc.poll() is None,
                 timeout=timeout, message="empty in-progress list")

    def wait_runs(self, d, jid, n=1, timeout=10):
        wait_for(lambda: d.runs_of(jid) >= n, timeout=timeout,
                 message="%d run(s) of %s" % (n, jid))

    def wait_done(self, d, cls, jid, timeout=10):
        return d.wait_log("done: %s jid=%s" % (cls, jid), timeout=timeout)

    def wait_fail(self, d, cls, jid, count=1, timeout=10):
        return d.wait_log("fail: %s jid=%s" % (cls, jid), timeout=timeout, count=count)

    # -- acting as the poller: move a retry entry back onto its queue

    def graduate(self, member, key=RETRY):
        """What the scheduled poller does when a retry entry is due: take it out of the set
        and push it onto its queue. The tests do it by hand so that they do not depend on
        the poller (another issue) and do not wait for the backoff."""
        q = loads(member).get("queue") or "default"
        self.assertEqual(self.r.zrem(key, member), 1)
        self.r.lpush((QUEUE + q).encode(), member)

    # -- faults

    def ro_on(self):
        """[RO]: the server becomes a read-only replica of a closed port (data kept)."""
        self.r.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))
        self.addCleanup(self.ro_off)

    def ro_off(self):
        self.r.execute_command("REPLICAOF", "NO", "ONE")

    def guard_off_url(self):
        """A redis URL for an ACL user without RENAME (doc/behaviours.md §0.4 "guard off")."""
        user, pw = GUARD_OFF_USER
        self.r.execute_command("ACL", "SETUSER", user, "on", ">" + pw, "~*", "&*", "+@all",
                               "-rename")
        return "redis://%s:%s@127.0.0.1:%d/0" % (user, pw, self.server.port)

    # -- assertions

    def assert_failure_entry(self, pushed, member, extra=FAILURE_FIELDS):
        """member is the pushed payload (bytes) with exactly the `extra` members appended
        after its own (every original byte kept, in order)."""
        if isinstance(pushed, str):
            pushed = pushed.encode()
        self.assertTrue(member.startswith(pushed[:-1] + b","),
                        "stored entry does not keep the pushed bytes:\n%r\n%r" % (pushed, member))
        added = loads(b"{" + member[len(pushed):])
        self.assertEqual(set(added), set(extra), member)
        return loads(member)

    def assert_valid_message(self, msg):
        self.assertIsInstance(msg, str)
        self.assertLessEqual(len(msg), 10000)
        msg.encode("utf-8")     # a str from json.loads is valid unless it has lone surrogates
        self.assertFalse(any(0xD800 <= ord(c) <= 0xDFFF for c in msg), "lone surrogate")

    def read(self, path, default=None):
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return default

    def path(self, name):
        return os.path.join(self.workdir, name)

    def pid_gone(self, pid):
        """True when pid no longer runs (a zombie counts as gone)."""
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            return state in ("Z", "X")
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return True


def order_cmd(order_file, name):
    """An on_death command that swallows its stdin and appends `name` to order_file."""
    return sh('cat >/dev/null; echo "$2" >> "$1"', order_file, name)


def capture_cmd(out_file):
    """An on_death command that appends its stdin, exactly, to out_file."""
    return sh('cat >> "$1"', out_file)


def recorder_cmd(out_file, server):
    return handler("recorder", out_file, server.port)


def parse_records(text):
    """Records written by tests/handlers/recorder: [{entry, time, inprogress, dead}]. Only
    the complete ones: the recorder writes a record line by line, and one read between its
    lines (seen on a loaded host) held a record without inprogress and dead."""
    out = []
    if not text:
        return out
    for block in text.decode("utf-8").split("--\n")[:-1]:
        if not block.strip():
            continue
        rec = {}
        for line in block.split("\n"):
            k, _, v = line.partition("=")
            rec[k] = v
        out.append(rec)
    return out

# SPDX-License-Identifier: MIT
"""Shared helpers for the tests of the scheduled poller, KeyGuard and orphan recovery
(test_poller.py, test_keyguard.py, test_orphans.py, test_reconcile.py). Not a test file
itself (run.py only runs test_*.py).

Time is simulated as doc/behaviours.md §0.3 says: a "dead" fake process has no presence key
and a `cogworker:last_beat` stamp backdated past the threshold; a daemon's checks are made
frequent through its conf (orphan_check_interval, poll_interval, heartbeat_interval)
instead of waiting for cogworker's 60 s rhythm.

    class T(PollerTestCase):
        def test_x(self):
            self.dead_fake("dead-host:1:abc", [A], last_beat=self.now() - 301)
            d = self.daemon(**FAST)
            self.wait_queue("default", [A])
"""

import json
import time

from harness import Daemon, handler, job, new_jid, wait_for  # noqa: F401
from observe import Monitor
from runkit import JobTestCase, loads, sh  # noqa: F401

QUEUE = "cogworker:queue:"
INPROGRESS = "cogworker:inprogress:"
IDENTITIES = b"cogworker:inprogress_identities"
LAST_BEAT = b"cogworker:last_beat"
PARKING = b"cogworker:repeat_orphans"
UNSETTLED = b"cogworker:unsettled"
DEAD = b"cogworker:dead"
RETRY = b"cogworker:retry"
SCHEDULE = b"cogworker:schedule"
FAILED = b"cogworker:stats:failed"
ORPH = "cogworker:orphanings:"
RECORDS = b"cogworker:quarantine:cogworker:unsettled:records"

# Checks every second; cogworker's thresholds unless a test says otherwise.
FAST = {"orphan_check_interval": 1, "poll_interval": 1, "heartbeat_interval": 1,
        "process_ttl": 3}
# The end-to-end settings: recovery in seconds.
E2E = {"heartbeat_interval": 1, "process_ttl": 3, "orphan_threshold": 4,
       "orphan_check_interval": 1}

FIRST_CHECK = "first orphan check completed"


class PollerTestCase(JobTestCase):
    """JobTestCase plus fake processes, ACL users and queue views."""

    # -- fake processes (doc/behaviours.md §0.3)

    def dead_fake(self, ident, jobs, registered=True, last_beat=None):
        """A dead process: its in-progress list (index 0 = newest fetch, so RPUSH in
        fetch order), no presence key, optionally a last_beat stamp (a number or text)."""
        key = (INPROGRESS + ident).encode()
        for j in jobs:
            self.r.rpush(key, j)
        if registered:
            self.r.sadd(IDENTITIES, ident)
        if last_beat is not None:
            self.r.hset(LAST_BEAT, ident, last_beat if isinstance(last_beat, (str, bytes))
                        else int(last_beat))
        return key

    def live_fake(self, ident, jobs):
        self.r.hset(b"cogworker:process:" + ident.encode(),
                    mapping={"info": "{}", "busy": "0", "quiet": "false"})
        self.r.expire(b"cogworker:process:" + ident.encode(), 60)
        key = (INPROGRESS + ident).encode()
        for j in jobs:
            self.r.rpush(key, j)
        return key

    def make_dead(self, ident, age=301):
        """A real process's presence gone and its last beat backdated (doc/behaviours.md §0.3)."""
        self.r.delete(b"cogworker:process:" + ident.encode())
        self.r.hset(LAST_BEAT, ident, int(self.now()) - age)

    # -- ACL users

    def acl_url(self, user, *rules):
        """A redis URL for an ACL user with all permissions minus `rules` (e.g. -rename)."""
        self.r.execute_command("ACL", "SETUSER", user, "reset", "on", ">pw", "~*", "&*",
                               "+@all", *rules)
        return "redis://%s:pw@127.0.0.1:%d/0" % (user, self.server.port)

    def guard_off(self):
        return self.acl_url("cw", "-rename")

    # -- views

    def queue(self, name="default"):
        return self.r.lrange((QUEUE + name).encode(), 0, -1)

    def wait_queue(self, name, expected, timeout=10):
        expected = [e.encode() if isinstance(e, str) else e for e in expected]
        wait_for(lambda: sorted(self.queue(name)) == sorted(expected), timeout=timeout,
                 message="queue %s = %r (is %r)" % (name, expected, self.queue(name)))

    def list_of(self, ident):
        return self.r.lrange((INPROGRESS + ident).encode(), 0, -1)

    def monitor(self):
        """[MON] for the rest of the test."""
        mon = Monitor(self.server).start()
        self.addCleanup(mon.stop)
        return mon

    @staticmethod
    def passes(mon):
        """Times of the orphan checks seen so far: every pass reads the parking list with
        LRANGE cogworker:repeat_orphans 0 99 (the tests never read it that way)."""
        return [e[0] for e in mon.commands("LRANGE")
                if e[2][1:] == [PARKING, b"0", b"99"]]

    def wait_passes(self, mon, n=2, timeout=10):
        """Wait until n more orphan checks have completed their reads."""
        start = len(self.passes(mon))
        wait_for(lambda: len(self.passes(mon)) >= start + n, timeout=timeout,
                 message="%d more orphan check(s)" % n)

    def dead_entries(self):
        return [loads(m) for m in self.r.zrange(DEAD, 0, -1)]


def payload(cls="Work", queue="default", jid=None, **extra):
    """A job payload (str) with numbers whose text matters (cJSON would mangle them)."""
    return job(cls, args=[12345678901234567890, 1.1], queue=queue, jid=jid or new_jid(),
               **extra)


def set_redis_option(daemon, **opts):
    """Make the daemon's conf carry extra redis settings (command_timeout, ...)."""
    orig = daemon.write_conf

    def write_conf():
        orig()
        with open(daemon.conf_path) as f:
            text = f.read()
        extra = " ".join("%s = %s;" % (k, json.dumps(v)) for k, v in opts.items())
        text = text.replace("redis = { url = ", "redis = { %s url = " % extra, 1)
        with open(daemon.conf_path, "w") as f:
            f.write(text)
    daemon.write_conf = write_conf
    return daemon


def sleep(s):
    time.sleep(s)

# SPDX-License-Identifier: MIT
"""The running lock of periodic jobs and deferred releases (doc/behaviours.md groups RL and DR;
doc/protocol.md §7.17, §7.20, §6.13, §6.19).

The periodic jobs here are pushed by the test, with the fields the ticker writes
(`periodic_pjid`, `periodic_slot`, `periodic_until_executed`) and their running lock set
beforehand, as CLAIM would have: so each scenario controls the lock's owner and TTL.

Not here: DR-4 and DR-5 are [unit] (they need exactly one command of a sequence to fail).

Run: python3 tests/integration/run.py test_periodic_locks
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job, new_jid, wait_for  # noqa: E402
from observe import Monitor  # noqa: E402
from periodickit import PeriodicTestCase, pjid, running_key  # noqa: E402
from runkit import DEAD, RETRY, canonical_digest, loads  # noqa: E402

PJ = pjid("*/5 * * * *", "P", "[]")
LOCK = running_key(PJ)


def periodic_job(jid=None, retry=0, **extra):
    return job("P", jid=jid or new_jid(), retry=retry, periodic_pjid=PJ, periodic_slot=1800,
               periodic_until_executed=True, **extra)


def gate():
    return [{"class": "P", "command": handler("gate")}]


class RunningLock(PeriodicTestCase):

    def start_gated(self, retry=0, lock_owner=None, ttl=86400, **settings):
        d = self.daemon(handlers=gate(), **settings)
        j = periodic_job(retry=retry)
        jid = loads(j)["jid"]
        self.r.set(LOCK, lock_owner or jid, ex=ttl)
        self.push(j)
        self.wait_runs(d, jid)
        return d, jid

    def test_rl01_job_without_pjid_touches_no_periodic_key(self):
        with Monitor(self.server) as mon:
            d = self.daemon(handlers=[{"class": "P", "command": handler("ok")}])
            j = job("P")
            jid = loads(j)["jid"]
            self.push(j)
            self.wait_done(d, "P", jid)
            time.sleep(0.3)
            entries = mon.entries()
        self.assertEqual(d.runs_of(jid), 1)
        touched = [e for e in entries if any(b"periodic:running" in a or b"periodic:lock" in a
                                             or b"periodic:last_slot" in a for a in e[2])]
        self.assertEqual(touched, [])

    def test_rl02_success_releases_the_lock(self):
        d, jid = self.start_gated()
        d.open_gate(jid, 0)
        self.wait_done(d, "P", jid)
        self.assertIsNone(self.r.get(LOCK))

    def test_rl03_retryable_failure_extends_the_lock(self):
        d, jid = self.start_gated(retry=3)
        d.open_gate(jid, 1)
        member, score = self.wait_member(RETRY)
        self.wait_fail(d, "P", jid)
        wait_for(lambda: self.r.ttl(LOCK) > 86400, message="the lock extended")
        self.assertEqual(self.r.get(LOCK), jid.encode())
        expected = score - self.now() + 86400
        self.assertLessEqual(abs(self.r.ttl(LOCK) - expected), 2, (self.r.ttl(LOCK), expected))

    def test_rl04_terminal_failure_releases_the_lock(self):
        d, jid = self.start_gated(retry=0)
        d.open_gate(jid, 1)
        self.wait_member(DEAD)
        wait_for(lambda: self.r.get(LOCK) is None, message="the lock released")

    def test_rl05_start_shortens_the_lock_and_beats_keep_it_alive(self):
        d, jid = self.start_gated(heartbeat_interval=1)
        wait_for(lambda: 0 < self.r.ttl(LOCK) <= 420, message="TTL down to active_ttl")
        time.sleep(4.5)                 # four beats; without refreshes the TTL would be 415
        ttl = self.r.ttl(LOCK)
        self.assertTrue(418 <= ttl <= 420, ttl)
        self.assertEqual(self.r.get(LOCK), jid.encode())
        d.open_gate(jid, 0)
        self.wait_done(d, "P", jid)
        self.assertIsNone(self.r.get(LOCK))

    def test_rl06_a_newer_runs_lock_is_never_touched(self):
        d, jid = self.start_gated(lock_owner="newer", ttl=5000, heartbeat_interval=1)
        t0 = time.time()
        time.sleep(2.5)                 # start, then beats
        d.open_gate(jid, 0)
        self.wait_done(d, "P", jid)
        self.assertEqual(self.r.get(LOCK), b"newer")
        self.assertGreaterEqual(self.r.ttl(LOCK), 5000 - (time.time() - t0) - 1)
        # ... nor by a terminal failure of another run.
        j2 = periodic_job(retry=0)
        jid2 = loads(j2)["jid"]
        self.push(j2)
        self.wait_runs(d, jid2)
        d.open_gate(jid2, 1)
        self.wait_member(DEAD)
        self.wait_fail(d, "P", jid2)
        self.assertEqual(self.r.get(LOCK), b"newer")
        self.assertGreaterEqual(self.r.ttl(LOCK), 5000 - (time.time() - t0) - 1)

    def test_rl07_a_damaged_lock_does_not_stop_the_job(self):
        url = self.guard_off_url()
        self.r.rpush(LOCK, b"x")
        d = self.daemon(handlers=[{"class": "P", "command": handler("ok")}], url=url)
        j = periodic_job()
        jid = loads(j)["jid"]
        self.push(j)
        self.wait_done(d, "P", jid)
        self.assertEqual(d.runs_of(jid), 1)
        logged = [l for l in d.log_lines(LOCK.decode()) if "WRONGTYPE" in l]
        self.assertTrue(logged, d.log())
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)
        # processed is flushed once a second (src/batch.c)
        wait_for(lambda: self.r.get(b"cogworker:stats:processed") == b"1", timeout=5)
        self.assertEqual(self.r.get(b"cogworker:stats:processed"), b"1")

    def test_rl08_dead_exit_code_releases_the_lock(self):
        d = self.daemon(handlers=[{"class": "P", "command": handler("exit", 3),
                                   "dead_exit_codes": [3]}])
        j = periodic_job(retry=10)
        jid = loads(j)["jid"]
        self.r.set(LOCK, jid, ex=86400)
        self.push(j)
        member, _ = self.wait_member(DEAD)
        self.assertEqual(loads(member)["jid"], jid)
        wait_for(lambda: self.r.get(LOCK) is None, message="the lock released")
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_rl09_active_ttl_outlives_threshold_plus_a_check(self):
        d, jid = self.start_gated(orphan_threshold=900)
        wait_for(lambda: self.r.ttl(LOCK) <= 1020, message="TTL down to active_ttl")
        ttl = self.r.ttl(LOCK)
        self.assertTrue(960 < ttl <= 1020, ttl)
        d.open_gate(jid, 0)


class DeferredReleases(PeriodicTestCase):

    def test_dr01_release_that_failed_is_done_at_the_next_beat(self):
        d = self.daemon(handlers=gate(), heartbeat_interval=5)
        j = periodic_job()
        jid = loads(j)["jid"]
        self.r.set(LOCK, jid, ex=86400)
        self.push(j)
        self.wait_runs(d, jid)
        self.ro_on()
        d.open_gate(jid, 0)
        d.wait_log("release of %s deferred" % LOCK.decode(), timeout=10)
        time.sleep(3)
        self.assertEqual(self.r.get(LOCK), jid.encode())
        self.ro_off()
        off = time.time()
        wait_for(lambda: self.r.get(LOCK) is None, timeout=8, message="the deferred release")
        self.assertLess(time.time() - off, 7)
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 1)

    def test_dr02_deferred_release_is_owner_checked(self):
        d = self.daemon(handlers=gate(), heartbeat_interval=1)
        j = job("P", unique="until_executed")
        jid = loads(j)["jid"]
        ukey = ("cogworker:unique:" + canonical_digest("P", "default", "[]")).encode()
        self.r.set(ukey, jid, ex=86400)
        self.push(j)
        self.wait_runs(d, jid)
        with Monitor(self.server) as mon:
            self.ro_on()
            d.open_gate(jid, 0)
            d.wait_log("release of %s deferred" % ukey.decode(), timeout=10)
            time.sleep(3)
            self.ro_off()
            self.r.set(ukey, b"someone-else")
            off = time.time()
            time.sleep(4)               # several beats (and ticks)
            retried = [e for e in mon.entries() if e[0] > off and ukey in e[2]
                       and e[2][0].upper() in (b"EVAL", b"EVALSHA")]
        self.assertTrue(retried, "the deferred release was never retried")
        self.assertEqual(self.r.get(ukey), b"someone-else")
        self.assertEqual(d.runs_of(jid), 1)

    def test_dr03_release_failing_for_another_reason_is_dropped(self):
        url = self.guard_off_url()
        d = self.daemon(handlers=gate(), heartbeat_interval=1, url=url)
        j = job("P", unique="until_executed")
        jid = loads(j)["jid"]
        ukey = ("cogworker:unique:" + canonical_digest("P", "default", "[]")).encode()
        self.r.set(ukey, jid, ex=86400)
        self.push(j)
        self.wait_runs(d, jid)
        self.r.delete(ukey)
        self.r.rpush(ukey, b"x")
        with Monitor(self.server) as mon:
            d.open_gate(jid, 0)
            self.wait_done(d, "P", jid)
            time.sleep(4)               # several beats
            attempts = [e for e in mon.entries() if ukey in e[2]
                        and e[2][0].upper() in (b"EVAL", b"EVALSHA")]
        self.assertEqual(len(attempts), 1, attempts)
        self.assertTrue([l for l in d.log_lines(ukey.decode()) if "WRONGTYPE" in l], d.log())
        self.assertEqual(self.r.type(ukey), b"list")


if __name__ == "__main__":
    unittest.main()

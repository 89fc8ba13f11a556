# SPDX-License-Identifier: MIT
"""UJ — unique jobs, the daemon side (doc/behaviours.md §19, doc/protocol.md §7.18).

The daemon recomputes a unique job's lock key from the job: SHA-1 hex of
`<class>|<queue>|<args in canonical cogworker JSON>` (§4.3, §4.5). The tests write the
canonical JSON out by hand (as a Ruby process would generate it) rather than computing it
with Python's json module, so a digest mismatch cannot hide behind a shared mistake.

Run: python3 tests/integration/run.py test_unique
"""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, wait_for  # noqa: E402
from runkit import DEAD, RETRY, JobTestCase, canonical_digest  # noqa: E402


def raw_job(cls, args_text, jid, queue="default", retry=None, unique="until_executed"):
    """A job whose args are exactly args_text (not re-encoded by Python)."""
    parts = ['"class":"%s"' % cls, '"args":%s' % args_text, '"queue":"%s"' % queue,
             '"jid":"%s"' % jid]
    if retry is not None:
        parts.append('"retry":%s' % retry)
    if unique is not None:
        parts.append('"unique":"%s"' % unique)
    parts.append('"created_at":1767225600.5,"enqueued_at":1767225600.5')
    return "{" + ",".join(parts) + "}"


def lock_key(cls, queue, canonical):
    return ("cogworker:unique:" + canonical_digest(cls, queue, canonical)).encode()


class Unique(JobTestCase):

    def ud(self, **settings):
        return self.daemon(handlers=[{"class": "U", "command": handler("ok")},
                                     {"class": "F", "command": handler("fail")}],
                           queues=["default", "other"], **settings)

    def test_uj1_exactly_the_computed_key_is_released(self):
        d = self.ud()
        jid = "c" * 24
        canonical = '[1,"a",{"b":null},2.5,"\u00e9/\\n"]'
        lock = lock_key("U", "default", canonical)
        decoy = lock_key("U", "default", '[1,"a",{"b":null},2.5,"\u00e9/"]')
        self.r.set(lock, jid, ex=3600)
        self.r.set(decoy, jid, ex=3600)
        self.push(raw_job("U", canonical, jid))
        self.wait_done(d, "U", jid)
        wait_for(lambda: not self.r.exists(lock), timeout=5, message="lock released")
        self.assertEqual(self.r.get(decoy), jid.encode())
        self.wait_settled(d)

    def test_uj1_canonical_json_of_args_written_differently(self):
        """The pushed args text is not canonical (spaces, escapes, float spellings); the
        digest is of the canonical form, as Ruby regenerates it."""
        d = self.ud()
        cases = [
            ('[1, "a", {"b": null}, 2.5, "\\u00e9\\/\\n"]',
             '[1,"a",{"b":null},2.5,"\u00e9/\\n"]'),
            ('[1.00, 1E16, 0.0001, 0.00001, 12345678901234567890, -0.5, 100.0]',
             '[1.0,1.0e+16,0.0001,1.0e-05,12345678901234567890,-0.5,100.0]'),
            ('["\\u0001\\t\\b\\f\\r\\"\\\\", {"z": 1, "a": []}, true, false]',
             '["\\u0001\\t\\b\\f\\r\\"\\\\",{"z":1,"a":[]},true,false]'),
        ]
        for i, (pushed, canonical) in enumerate(cases):
            jid = "%024x" % (0xabc000 + i)
            lock = lock_key("U", "default", canonical)
            self.r.set(lock, jid, ex=3600)
            self.push(raw_job("U", pushed, jid))
            self.wait_done(d, "U", jid)
            wait_for(lambda: not self.r.exists(lock), timeout=5,
                     message="lock for %s released" % canonical)
        self.wait_settled(d)

    def test_uj1_digest_uses_the_jobs_queue(self):
        d = self.ud()
        jid = "d" * 24
        on_other = lock_key("U", "other", "[3]")
        on_default = lock_key("U", "default", "[3]")
        self.r.set(on_other, jid, ex=3600)
        self.r.set(on_default, jid, ex=3600)
        self.push(raw_job("U", "[3]", jid, queue="other"), queue="other")
        self.wait_done(d, "U", jid)
        wait_for(lambda: not self.r.exists(on_other), timeout=5, message="lock released")
        self.assertTrue(self.r.exists(on_default))

    def test_uj2_after_a_run_an_identical_push_takes_the_lock_again(self):
        d = self.ud()
        jid = "e" * 24
        lock = lock_key("U", "default", '["x"]')
        self.assertTrue(self.r.set(lock, jid, nx=True, ex=3600))
        self.push(raw_job("U", '["x"]', jid))
        self.wait_done(d, "U", jid)
        self.wait_settled(d)
        self.assertTrue(self.r.set(lock, "f" * 24, nx=True, ex=3600))

    def test_uj3_uj5_retryable_failure_keeps_and_extends_the_lock(self):
        d = self.ud(unique_lock_ttl=100)
        jid = "1" * 24
        lock = lock_key("F", "default", '["r"]')
        self.r.set(lock, jid, ex=20)
        self.push(raw_job("F", '["r"]', jid, retry=3))
        _, score = self.wait_member(RETRY)
        self.wait_settled(d)
        delay = score - self.now()
        self.assertEqual(self.r.get(lock), jid.encode())
        self.assertAlmostEqual(self.r.ttl(lock), delay + 100, delta=5)

    def test_uj4_success_releases(self):
        d = self.ud()
        jid = "2" * 24
        lock = lock_key("U", "default", "[]")
        self.r.set(lock, jid, ex=3600)
        self.push(raw_job("U", "[]", jid))
        self.wait_done(d, "U", jid)
        wait_for(lambda: not self.r.exists(lock), timeout=5, message="lock released")

    def test_uj6_terminal_failure_releases(self):
        d = self.ud()
        jid = "3" * 24
        lock = lock_key("F", "default", '["t"]')
        self.r.set(lock, jid, ex=3600)
        self.push(raw_job("F", '["t"]', jid, retry=0))
        self.wait_member(DEAD)
        wait_for(lambda: not self.r.exists(lock), timeout=5, message="lock released")
        self.wait_settled(d)

    def test_uj7_lock_of_another_jid_untouched(self):
        d = self.ud()
        other = "9" * 24
        ok_lock = lock_key("U", "default", '["o"]')
        fail_lock = lock_key("F", "default", '["o"]')
        self.r.set(ok_lock, other, ex=1000)
        self.r.set(fail_lock, other, ex=1000)
        self.push(raw_job("U", '["o"]', "4" * 24))
        self.push(raw_job("F", '["o"]', "5" * 24, retry="false"))
        self.wait_done(d, "U", "4" * 24)
        self.wait_member(DEAD)
        self.wait_settled(d)
        for lock in (ok_lock, fail_lock):
            self.assertEqual(self.r.get(lock), other.encode())
            self.assertGreater(self.r.ttl(lock), 990)

    def test_uj7_retryable_failure_does_not_extend_another_jids_lock(self):
        d = self.ud()
        other = "8" * 24
        lock = lock_key("F", "default", '["p"]')
        self.r.set(lock, other, ex=1000)
        self.push(raw_job("F", '["p"]', "6" * 24, retry=3))
        self.wait_member(RETRY)
        self.wait_settled(d)
        self.assertEqual(self.r.get(lock), other.encode())
        self.assertLessEqual(self.r.ttl(lock), 1000)

    def _monitor(self):
        out = open(self.path("monitor"), "wb")
        proc = subprocess.Popen(["redis-cli", "-p", str(self.server.port), "monitor"],
                                stdout=out, stderr=subprocess.STDOUT)

        def stop():
            if proc.poll() is None:
                proc.terminate()
                proc.wait()
            out.close()
        self.addCleanup(stop)
        wait_for(lambda: b"OK" in (self.read(self.path("monitor")) or b""), timeout=5,
                 message="MONITOR running")
        return stop

    def test_uj8_no_unique_key_touched_without_unique(self):
        d = self.ud()
        stop = self._monitor()
        a, b = "7" * 24, "a" * 24
        self.push(raw_job("U", '["m"]', a, unique=None))
        self.push(raw_job("F", '["m"]', b, retry=0, unique=None))
        self.wait_done(d, "U", a)
        self.wait_member(DEAD)
        self.wait_settled(d)
        time.sleep(0.3)
        stop()
        seen = self.read(self.path("monitor"))
        self.assertIn(b"cogworker:inprogress:", seen)        # the monitor saw the runs
        self.assertNotIn(b"cogworker:unique:", seen)

    def test_uj8_control_unique_job_touches_its_key(self):
        """The positive control of UJ-8: with `unique`, MONITOR shows the lock's key."""
        d = self.ud()
        stop = self._monitor()
        jid = "b" * 24
        self.push(raw_job("U", '["m"]', jid))
        self.wait_done(d, "U", jid)
        self.wait_settled(d)
        time.sleep(0.3)
        stop()
        self.assertIn(lock_key("U", "default", '["m"]'), self.read(self.path("monitor")))

    def test_uj9_other_unique_values_are_not_unique(self):
        d = self.ud()
        cases = [("until_and_while_executing", "c1"), ("UNTIL_EXECUTED", "c2"),
                 ("until_executed ", "c3")]
        locks = []
        for value, tag in cases:
            jid = tag * 12
            lock = lock_key("U", "default", '["%s"]' % tag)
            self.r.set(lock, jid, ex=3600)
            locks.append((lock, jid))
            self.push(raw_job("U", '["%s"]' % tag, jid, unique=value))
        jid = "c4" * 12
        p = ('{"class":"U","args":["c4"],"queue":"default","jid":"%s","unique":true}' % jid)
        lock = lock_key("U", "default", '["c4"]')
        self.r.set(lock, jid, ex=3600)
        locks.append((lock, jid))
        self.push(p)
        for _, jid in locks:
            self.wait_done(d, "U", jid)
        self.wait_settled(d)
        time.sleep(0.3)
        for lock, jid in locks:
            self.assertEqual(self.r.get(lock), jid.encode())


if __name__ == "__main__":
    import unittest
    unittest.main()

# SPDX-License-Identifier: MIT
"""Bookkeeping never changes the outcome: PX-9 … PX-13 (doc/behaviours.md §13, [WT] faults) and
BE-1, BE-2 (§17).

Every daemon here runs "guard off" (doc/behaviours.md §0.4): as an ACL user without RENAME, so
KeyGuard cannot quarantine the wrong-typed keys and the fault stays in place while the
job runs. BE-1/BE-2 here give `status:<jid>` and the history keys the wrong type with
status and history off; test_bookkeeping.py (class Faults) runs them with both on.

Run: python3 tests/integration/run.py test_bookkeeping_faults
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job  # noqa: E402
from runkit import (DEAD, FAILED, PROCESSED, RETRY, JobTestCase,  # noqa: E402
                    canonical_digest, loads)


class GuardOff(JobTestCase):

    def guarded_daemon(self, **settings):
        url = self.guard_off_url()
        handlers = [{"class": "R", "command": handler("ok")},
                    {"class": "F", "command": handler("fail")},
                    {"class": "G", "command": handler("gate")}]
        return self.daemon(url=url, handlers=handlers, **settings)

    def assert_nothing_left(self, d):
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(self.inprogress(d), [])

    def test_guard_is_really_off(self):
        """The fixture itself: the ACL user cannot RENAME, so wrong-typed keys stay."""
        url = self.guard_off_url()
        self.assertIn("cw:pw@", url)
        c = self.server.client(username="cw", password="pw")
        self.addCleanup(c.close)
        c.set("x", 1)
        with self.assertRaises(Exception):
            c.rename("x", "y")

    def run_long_enough_to_be_registered(self, d):
        """A job whose workers entry is written: one still running at a flush (they come
        once a second, src/batch.c); a shorter one is never written, nor removed."""
        p = self.push(job("G"))
        jid = loads(p)["jid"]
        self.wait_runs(d, jid)
        d.wait_log("register failed (ignored)", timeout=10)
        d.open_gate(jid)
        self.wait_done(d, "G", jid)
        return jid

    def test_px9_wrong_typed_workers_hash_and_processed_counter(self):
        d = self.guarded_daemon()
        self.r.set(("cogworker:workers:" + d.identity).encode(), b"a string")
        self.r.rpush(PROCESSED, b"a list")
        jid = self.run_long_enough_to_be_registered(d)
        self.wait_settled(d)
        self.assertEqual(d.runs_of(jid), 1)
        self.assert_nothing_left(d)
        d.wait_log("deregister failed (ignored)", timeout=10)
        d.wait_log("stats failed (ignored)", timeout=10)
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(self.qlen(), 0)

    def test_px10_wrong_typed_attempts_log(self):
        d = self.guarded_daemon()
        p = job("F", retry=3)
        jid = loads(p)["jid"]
        self.r.set(("cogworker:job_attempts:" + jid).encode(), b"a string")
        self.push(p)
        member, score = self.wait_member(RETRY)
        self.wait_settled(d)
        e = loads(member)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertGreater(score, self.now() + 10)
        time.sleep(3)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(self.r.zcard(RETRY), 1)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(self.r.get(("cogworker:job_attempts:" + jid).encode()), b"a string")

    def test_px11_wrong_typed_counters_retry_false_goes_to_dead_once(self):
        d = self.guarded_daemon()
        p = job("F", retry=False)
        jid = loads(p)["jid"]
        self.r.rpush(FAILED, b"a list")
        self.r.set(self.bucket(), b"a string")
        self.r.set(("cogworker:job_attempts:" + jid).encode(), b"a string")
        self.push(p)
        member, _ = self.wait_member(DEAD)
        self.wait_settled(d)
        e = self.assert_failure_entry(p, member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", e["error_message"])
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(self.r.zcard(DEAD), 1)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(self.inprogress(d), [])

    def test_px12_wrong_typed_processed_and_bucket_success_acked(self):
        d = self.guarded_daemon()
        self.r.rpush(PROCESSED, b"a list")
        self.r.set(self.bucket(), b"a string")
        p = self.push(job("R"))
        jid = loads(p)["jid"]
        self.wait_done(d, "R", jid)
        self.wait_settled(d)
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 1)
        self.assert_nothing_left(d)

    def test_px13_wrong_typed_workers_hash_job_runs_once(self):
        d = self.guarded_daemon()
        self.r.set(("cogworker:workers:" + d.identity).encode(), b"a string")
        jid = self.run_long_enough_to_be_registered(d)
        self.wait_settled(d)
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 1)
        self.assert_nothing_left(d)
        self.assertEqual(self.wait_counter(PROCESSED, 1), 1)

    def _be_fixture(self, cls, retry=None):
        pjid = "a" * 40
        p = job(cls, ["be", 1], retry=retry, unique="until_executed", periodic_pjid=pjid,
                periodic_slot=1767225600)
        jid = loads(p)["jid"]
        self.r.rpush(("status:" + jid).encode(), b"wrong")
        self.r.set(b"cogworker:history:all", b"wrong")
        self.r.set(b"cogworker:history:success", b"wrong")
        self.r.set(b"cogworker:history:failed", b"wrong")
        self.r.rpush(("periodic:running:" + pjid).encode(), b"wrong")
        self.r.sadd(("cogworker:unique:" + canonical_digest(cls, "default", '["be",1]'))
                    .encode(), b"wrong")
        return p, jid

    def test_be1_success_with_every_lock_and_record_wrong_typed(self):
        d = self.guarded_daemon()
        p, jid = self._be_fixture("R")
        self.push(p)
        self.wait_done(d, "R", jid)
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertEqual(self.wait_counter(PROCESSED, 1), 1)
        self.assertEqual(self.counter(FAILED), 0)
        self.assertEqual(d.runs_of(jid), 1)
        self.assert_nothing_left(d)
        self.assertEqual(d.log_lines("fail: R jid=%s" % jid), [])

    def test_be2_failure_keeps_the_handlers_error(self):
        d = self.guarded_daemon()
        p, jid = self._be_fixture("F", retry=3)
        self.push(p)
        member, _ = self.wait_member(RETRY)
        self.wait_settled(d)
        e = self.assert_failure_entry(p, member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", e["error_message"])
        self.assertNotIn("WRONGTYPE", e["error_message"])
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(d.runs_of(jid), 1)

    def test_be2_terminal_failure_with_wrong_typed_locks_goes_to_dead(self):
        d = self.guarded_daemon()
        p, jid = self._be_fixture("F", retry=False)
        self.push(p)
        member, _ = self.wait_member(DEAD)
        self.wait_settled(d)
        e = self.assert_failure_entry(p, member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(d.runs_of(jid), 1)
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(self.qlen(), 0)


if __name__ == "__main__":
    import unittest
    unittest.main()

# SPDX-License-Identifier: MIT
"""AM: at-most-once handlers (doc/behaviours.md §36, doc/protocol.md §7.32): a job of a
handler with on_orphan = "dead", orphaned by a kill -9 of its daemon, is buried as
Cogworker::ProcessDied by whoever recovers it, with on_death, and never runs again; a job
of any other handler runs again, as ever.

Real kill -9 with the end-to-end timings (recovery in about 5 s).

Run: python3 tests/integration/run.py test_at_most_once
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job, wait_for  # noqa: E402
from runkit import DEAD, JobTestCase, loads, parse_records, recorder_cmd  # noqa: E402

E2E = {"heartbeat_interval": 1, "process_ttl": 3, "orphan_threshold": 4,
       "orphan_check_interval": 1, "concurrency": 2}
ONCE_SET = "cogworker:at_most_once:"


class AtMostOnceTest(JobTestCase):

    def handlers(self, once, rec):
        return [{"class": "Charge", "command": handler("slow", 30),
                 "on_death": recorder_cmd(rec, self.server),
                 **({"on_orphan": "dead"} if once else {})},
                {"class": "Report", "command": handler("slow", 30)}]

    def crash_with_both_running(self, d1):
        charge, report = job("Charge"), job("Report")
        self.push(charge)
        self.push(report)
        for p in (charge, report):
            self.wait_runs(d1, loads(p)["jid"])
        ident = d1.identity
        d1.kill()
        return loads(charge)["jid"], loads(report)["jid"], ident

    def test_am1_kill9_buries_the_at_most_once_job_and_reruns_the_other(self):
        rec = self.path("deaths")
        d1 = self.daemon(handlers=self.handlers(True, rec), **E2E)
        wait_for(lambda: self.r.smembers(ONCE_SET + d1.identity) == {b"Charge"}, timeout=5,
                 message="at-most-once classes published")
        charge, report, ident = self.crash_with_both_running(d1)
        d2 = self.daemon(handlers=self.handlers(True, rec), **E2E)
        member, _ = self.wait_member(DEAD, jid=charge, timeout=20)
        entry = loads(member)
        self.assertEqual(entry["error_class"], "Cogworker::ProcessDied")
        self.assertIn('on_orphan = "dead"', entry["error_message"])
        self.wait_runs(d2, report, n=2, timeout=10)            # the other one runs again
        d2.wait_log("jid=%s orphaned by a dead process, moved to dead" % charge)
        wait_for(lambda: parse_records(self.read(rec, b"")), timeout=10, message="on_death")
        self.assertEqual(parse_records(self.read(rec))[0]["entry"].encode(), member)
        time.sleep(1.5)                                        # a few more passes
        self.assertEqual(d2.runs_of(charge), 1, "never run twice")
        self.assertEqual(self.r.zcard(DEAD), 1)
        self.assertFalse(self.r.exists(ONCE_SET + ident), "forgotten with the dead list")

    def test_am2_the_dead_owners_declaration_holds_for_any_cogworkerd(self):
        """The recoverer's own conf lacks on_orphan: what the dead process published
        decides (cogworker:at_most_once:<id>), so it still is not run again."""
        rec = self.path("deaths")
        d1 = self.daemon(handlers=self.handlers(True, rec), **E2E)
        wait_for(lambda: self.r.exists(ONCE_SET + d1.identity), timeout=5,
                 message="published")
        charge, report, _ = self.crash_with_both_running(d1)
        d2 = self.daemon(handlers=self.handlers(False, rec), **E2E)
        self.wait_member(DEAD, jid=charge, timeout=20)
        self.wait_runs(d2, report, n=2, timeout=10)
        time.sleep(1.5)
        self.assertEqual(d2.runs_of(charge), 1)

    def test_am5_the_published_set_expires_once_its_owner_is_dead(self):
        """A Ruby worker that recovers a dead cogworkerd's list never deletes its set: the
        set has a TTL that each beat renews, so a live owner's stays and a dead one's
        runs out (7 days, the horizon of the orphan counter; watched counting down here)."""
        d1 = self.daemon(handlers=self.handlers(True, "/dev/null"), **E2E)
        key = ONCE_SET + d1.identity
        wait_for(lambda: self.r.exists(key), timeout=5, message="published")
        ttl = 7 * 86400 * 1000
        first = self.r.pttl(key)
        self.assertGreater(first, ttl - 2000, "the set has a TTL of 7 days")
        self.assertLessEqual(first, ttl)
        time.sleep(2.5)                                     # two beats renew it
        self.assertGreater(self.r.pttl(key), ttl - 1500, "renewed by the beat")
        d1.kill()                                           # nobody recovers its empty list
        at_death = self.r.pttl(key)
        time.sleep(2.5)
        after = self.r.pttl(key)
        self.assertGreater(after, 0)
        self.assertLess(after, at_death - 2000, "no longer renewed: it runs out")
        self.assertEqual(self.r.smembers(key), {b"Charge"})

    def test_am3_without_the_setting_it_runs_again(self):
        rec = self.path("deaths")
        d1 = self.daemon(handlers=self.handlers(False, rec), **E2E)
        charge, report, _ = self.crash_with_both_running(d1)
        d2 = self.daemon(handlers=self.handlers(False, rec), **E2E)
        self.wait_runs(d2, charge, n=2, timeout=20)
        self.wait_runs(d2, report, n=2, timeout=10)
        self.assertEqual(self.r.zcard(DEAD), 0)

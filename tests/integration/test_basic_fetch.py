# SPDX-License-Identifier: MIT
"""Basic fetch, `fetch = "basic"` (doc/behaviours.md group BF; doc/protocol.md §7.8).

BF-6 and BF-7 (the basic-mode shutdown requeue) are in test_shutdown.py.

Run: python3 tests/integration/run.py test_basic_fetch
"""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, handler, job, wait_for  # noqa: E402
from observe import Monitor  # noqa: E402

PROCESSED = b"cogworker:stats:processed"
PAUSED = b"cogworker:paused_queues"


def qkey(q):
    return ("cogworker:queue:" + q).encode()


def jid_of(j):
    return json.loads(j)["jid"]


class BasicFetch(DaemonTestCase):

    def basic(self, **kw):
        kw.setdefault("handlers", [{"class": "G", "command": handler("gate")},
                                   {"class": "K", "command": handler("ok")}])
        return self.daemon(fetch="basic", **kw)

    def test_bf1_brpop_with_timeout_2_and_no_inprogress_list(self):
        with Monitor(self.server) as mon:
            d = self.basic()
            j = job("G")
            self.push(j)
            wait_for(lambda: d.runs_of(jid_of(j)) == 1)
            self.assertEqual(self.r.llen(qkey("default")), 0)
            d.open_gate(jid_of(j))
            wait_for(lambda: self.r.get(PROCESSED) == b"1")
            brpops = mon.commands("BRPOP")
        self.assertTrue(brpops)
        for e in brpops:       # 30 s (IDLE_BLOCK), cut short by CLIENT UNBLOCK (issue 12)
            self.assertIn(e[2][1:], ([qkey("default"), b"30"], [qkey("default"), b"2"]))
        self.assertIn([qkey("default"), b"30"], [e[2][1:] for e in brpops])
        self.assertEqual(self.r.keys(b"cogworker:inprogress:*"), [])
        self.assertFalse(self.r.sismember(b"cogworker:inprogress_identities", d.identity))

    def test_bf2_paused_queue_not_popped_and_not_named(self):
        self.r.sadd(PAUSED, "default")
        with Monitor(self.server) as mon:
            d = self.basic(queues=["default", "low"])
            j = job("K")
            self.push(j)
            time.sleep(3.0)
            brpops = mon.commands("BRPOP")
        self.assertEqual(d.runs_of(jid_of(j)), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [j.encode()])
        self.assertTrue(brpops, "no BRPOP on the unpaused queue")
        for e in brpops:
            self.assertNotIn(qkey("default"), e[2])

    def test_bf3_only_the_unpaused_queue_runs(self):
        self.r.sadd(PAUSED, "default")
        jd = job("K", queue="default")
        jl = job("K", queue="low")
        self.push(jd, "default")
        self.push(jl, "low")
        d = self.basic(queues=["default", "low"])
        wait_for(lambda: d.runs_of(jid_of(jl)) == 1)
        time.sleep(2.5)
        self.assertEqual(d.runs_of(jid_of(jd)), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [jd.encode()])

    def test_bf4_resume_is_seen_within_about_2s(self):
        self.r.sadd(PAUSED, "default")
        d = self.basic()
        j = job("K")
        self.push(j)
        time.sleep(2.5)
        self.assertEqual(d.runs_of(jid_of(j)), 0)
        t0 = time.monotonic()
        self.r.srem(PAUSED, "default")
        wait_for(lambda: d.runs_of(jid_of(j)) == 1, timeout=4)
        self.assertLess(time.monotonic() - t0, 3.0)

    def test_bf5_every_queue_paused_no_empty_brpop(self):
        self.r.sadd(PAUSED, "default", "low")
        with Monitor(self.server) as mon:
            self.basic(queues=["default", "low"])
            t0 = time.time()
            time.sleep(6.5)
            ent = [e for e in mon.entries() if e[0] >= t0]
        self.assertEqual([e for e in ent if e[2][0].upper() == b"BRPOP"], [])
        reads = [e[0] for e in ent
                 if e[2][0].upper() == b"SMEMBERS" and e[2][1] == PAUSED]
        # issue 12: the fetchers wait without Redis calls; the waker reads the set for the
        # resume, 50 ms after it learned of the pause, doubling to every 0.5 s (not a busy
        # loop, not a stall)
        self.assertGreaterEqual(len(reads), 8, reads)
        self.assertLessEqual(len(reads), 20, reads)
        gaps = [b - a for a, b in zip(reads, reads[1:])]
        for g in gaps:
            self.assertGreater(g, 0.04, gaps)
            self.assertLess(g, 1.0, gaps)
        for g in gaps[4:]:
            self.assertGreater(g, 0.3, gaps)

    def test_bf_many_jobs_each_run_once(self):
        d = self.basic(concurrency=3, queues=["default", "low"])
        jobs = [job("K", queue=q) for q in ("default", "low") for _ in range(10)]
        for j in jobs:
            self.push(j, json.loads(j)["queue"])
        wait_for(lambda: self.r.get(PROCESSED) == b"20", timeout=15)
        for j in jobs:
            self.assertEqual(d.runs_of(jid_of(j)), 1)
        self.assertEqual(self.r.llen(qkey("default")) + self.r.llen(qkey("low")), 0)


if __name__ == "__main__":
    unittest.main()

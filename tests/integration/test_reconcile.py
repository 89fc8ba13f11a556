# SPDX-License-Identifier: MIT
"""RC — reconcile and pending settlements (doc/behaviours.md §4, doc/protocol.md §7.7, §7.11).

D's reconcile follows each orphan check; checks run every second or two through the conf
(orphan_check_interval) instead of every 60 s, so "two reconciles" take seconds.

Not covered: RC-5 and RC-9 are [unit] behaviours (an acknowledge failing exactly twice;
the interrupt step failing before it writes).

Run: python3 tests/integration/run.py test_reconcile
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pollkit import (DEAD, FAST, ORPH, UNSETTLED, PollerTestCase, handler, loads,  # noqa: E402
                     payload, sh, wait_for)
from runkit import parse_records  # noqa: E402

GATE = [{"class": "G", "command": handler("gate")}]
FAIL = [{"class": "F", "command": handler("fail")}]


class ReconcileTest(PollerTestCase):

    def own_lranges(self, mon, d):
        key = ("cogworker:inprogress:" + d.identity).encode()
        return [e[0] for e in mon.commands("LRANGE") if e[2][1:] == [key, b"0", b"-1"]]

    def test_rc1_stray_requeued_on_the_second_look_only(self):
        d = self.daemon(orphan_check_interval=2, poll_interval=1)
        mon = self.monitor()
        j = payload(queue="elsewhere")
        jid = loads(j)["jid"]
        self.r.lpush(("cogworker:inprogress:" + d.identity).encode(), j)
        pushed = time.time()
        wait_for(lambda: self.queue("elsewhere"), timeout=8, message="stray requeued")
        requeued = time.time()
        looks = [t for t in self.own_lranges(mon, d) if pushed < t < requeued]
        self.assertGreaterEqual(len(looks), 2, "left in place on the first look")
        self.assertGreater(requeued - pushed, 2 - 0.2)
        self.assertEqual(self.queue("elsewhere"), [j.encode()])
        self.assertEqual(self.list_of(d.identity), [])
        d.wait_log("requeued stray in-progress job jid=%s" % jid)

    def test_rc2_running_job_is_never_a_stray_whatever_the_workers_hash_says(self):
        d = self.daemon(handlers=GATE, **FAST)
        mon = self.monitor()
        p = payload("G")
        jid = loads(p)["jid"]
        self.push(p)
        wait_for(lambda: d.runs_of(jid) == 1, timeout=5)
        self.r.delete(("cogworker:workers:" + d.identity).encode())
        self.wait_passes(mon, 3)
        self.assertEqual(self.list_of(d.identity), [p.encode()])
        self.assertEqual(self.queue("default"), [])
        d.open_gate(jid)
        wait_for(lambda: not self.list_of(d.identity), timeout=5)
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 1)

    def test_rc3_pending_ack_settled_by_reconcile_never_requeued(self):
        d = self.daemon(handlers=GATE, **FAST)
        p = payload("G")
        jid = loads(p)["jid"]
        self.push(p)
        wait_for(lambda: d.runs_of(jid) == 1, timeout=5)
        self.ro_on()
        d.open_gate(jid)
        d.wait_log("couldn't acknowledge finished job jid=%s yet" % jid)
        time.sleep(3)
        self.assertEqual(self.list_of(d.identity), [p.encode()])
        self.ro_off()
        wait_for(lambda: not self.list_of(d.identity), timeout=5, message="settled")
        time.sleep(2)
        self.assertEqual(self.queue("default"), [])
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(d.log_lines("requeued stray"), [])

    def test_rc4_pending_ack_dropped_at_stop(self):
        d = self.daemon(handlers=GATE, shutdown_timeout=2, **FAST)
        p = payload("G")
        jid = loads(p)["jid"]
        self.push(p)
        wait_for(lambda: d.runs_of(jid) == 1, timeout=5)
        self.r.set(ORPH + jid, 2)
        self.ro_on()
        d.open_gate(jid)
        d.wait_log("couldn't acknowledge finished job jid=%s yet" % jid)
        self.ro_off()
        self.assertEqual(d.stop(), 0)
        self.assertEqual(self.queue("default"), [])
        self.assertEqual(self.r.lrange(("cogworker:inprogress:" + d.identity).encode(), 0, -1),
                         [])
        self.assertEqual(d.runs_of(jid), 1)
        self.assertFalse(self.r.exists(ORPH + jid))

    def test_rc7_a_payload_runs_until_every_copy_finished(self):
        script = ('echo "$COGWORKER_JID" >> "$RUNS"; '
                  'if mkdir "$GATES/first" 2>/dev/null; then exit 0; fi; sleep 5')
        d = self.daemon(handlers=[{"class": "Two", "command": sh(script)}], concurrency=2,
                        **FAST)
        p = payload("Two")
        jid = loads(p)["jid"]
        self.push(p)
        self.push(p)
        wait_for(lambda: d.runs_of(jid) == 2, timeout=5)
        wait_for(lambda: len(self.list_of(d.identity)) == 1, timeout=5, message="one copy done")
        mon = self.monitor()
        self.wait_passes(mon, 3)
        self.assertEqual(self.list_of(d.identity), [p.encode()])
        self.assertEqual(self.queue("default"), [])
        wait_for(lambda: not self.list_of(d.identity), timeout=8)
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 2)
        self.assertEqual(self.queue("default"), [])


class GuardOffReconcileTest(PollerTestCase):

    def test_rc6_rc10_and_or24_pending_dead_filing_completed_by_reconcile(self):
        deaths = self.path("deaths")
        self.r.set(DEAD, "x")
        d = self.daemon(url=self.guard_off(), handlers=FAIL,
                        on_death=handler("recorder", deaths, self.server.port), **FAST)
        mon = self.monitor()
        p = payload("F", retry=False)
        jid = loads(p)["jid"]
        self.r.set(ORPH + jid, 2)
        self.push(p)
        wait_for(lambda: d.runs_of(jid) == 1, timeout=5)
        self.wait_passes(mon, 3)
        self.assertEqual(self.list_of(d.identity), [p.encode()])
        self.assertEqual(self.queue("default"), [])
        self.assertEqual(d.runs_of(jid), 1)
        self.r.delete(DEAD)
        wait_for(lambda: self.r.zcard(DEAD) == 1, timeout=5)
        wait_for(lambda: not self.list_of(d.identity), timeout=2)
        self.wait_passes(mon, 3)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertFalse(self.r.exists(ORPH + jid))
        [entry] = self.r.zrange(DEAD, 0, -1)
        self.assertEqual(loads(entry)["jid"], jid)
        recs = parse_records(self.read(deaths))
        self.assertEqual(len(recs), 1, recs)
        self.assertEqual(recs[0]["entry"], entry.decode())
        self.assertEqual(recs[0]["dead"], "1")          # it ran after the entry was filed

    def test_rc8_filing_handed_over_at_stop_and_filed_by_another_process(self):
        self.r.set(DEAD, "x")
        d = self.daemon(url=self.guard_off(), handlers=FAIL, shutdown_timeout=2, **FAST)
        p = payload("F", retry=False)
        jid = loads(p)["jid"]
        self.push(p)
        wait_for(lambda: d.runs_of(jid) == 1, timeout=5)
        d.wait_log("kept in memory, filed later")
        self.assertEqual(d.stop(), 0)
        [rec] = self.r.lrange(UNSETTLED, 0, -1)
        rec = loads(rec)
        self.assertEqual(rec["set"], "cogworker:dead")
        self.assertIsInstance(rec["score"], (int, float))
        filed = loads(rec["payload"])
        self.assertEqual(filed["jid"], jid)
        self.assertEqual(filed["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(self.list_of(d.identity), [])
        self.assertEqual(self.queue("default"), [])
        self.r.delete(DEAD)
        d2 = self.daemon(handlers=FAIL, **FAST)
        wait_for(lambda: self.r.zcard(DEAD) == 1 and self.r.llen(UNSETTLED) == 0, timeout=5)
        self.assertEqual(loads(self.r.zrange(DEAD, 0, -1)[0])["jid"], jid)
        self.assertEqual(d2.runs_of(jid), 1)


if __name__ == "__main__":
    import unittest
    unittest.main()

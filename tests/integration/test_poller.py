# SPDX-License-Identifier: MIT
"""SP — the scheduled and retry poller (doc/behaviours.md §7, doc/protocol.md §7.14).

In this group D reads only the queue `other`, so graduated jobs stay visible on
`default`. Polls are made frequent through the conf (poll_interval = 1) instead of
waiting for cogworker's 5 s.

Run: python3 tests/integration/run.py test_poller
"""

import json
import os
import re
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pollkit import (DEAD, FAILED, RETRY, SCHEDULE, PollerTestCase, handler,  # noqa: E402
                     loads, new_jid, payload, set_redis_option, wait_for)

OTHER = {"queues": ["other"], "poll_interval": 1}


class ScheduledPollTest(PollerTestCase):

    def test_sp1_due_entry_graduates_byte_identical_but_enqueued_at(self):
        now = self.now()
        jid = new_jid()
        entry = ('{"class":"Work","args":[12345678901234567890,1.10,{"x":1e3}],'
                 '"queue":"default","jid":"%s","at":%.6f,"created_at":%.6f,'
                 '"enqueued_at":1.5,"lock_run":"keep"}' % (jid, now - 10, now - 20))
        self.r.zadd(SCHEDULE, {entry: now - 10})
        self.daemon(**OTHER)
        wait_for(lambda: self.queue("default"), timeout=5, message="graduation")
        [got] = self.queue("default")
        got = got.decode()
        stamp = re.search(r'"enqueued_at":([0-9.e+-]+)', got).group(1)
        self.assertEqual(got.replace(stamp, "1.5", 1), entry,
                         "every byte but enqueued_at must be kept")
        self.assertAlmostEqual(float(stamp), self.now(), delta=5)
        self.assertEqual(self.r.zcard(SCHEDULE), 0)
        self.assertIn(b"default", self.r.smembers(b"cogworker:queues"))

    def test_sp1_jobs_scheduled_2s_ahead_arrive_within_poll_interval_of_due(self):
        self.daemon(queues=["other"], poll_interval=2)
        lateness = []
        for _ in range(3):
            due = self.now() + 2
            self.r.zadd(SCHEDULE, {payload(): due})
            wait_for(lambda: self.queue("default"), timeout=6, message="graduation")
            lateness.append(self.now() - due)
            self.r.delete(b"cogworker:queue:default")
        self.assertLessEqual(max(lateness), 2 + 0.3, lateness)

    def test_sp2_future_entry_stays(self):
        later = payload()
        self.r.zadd(SCHEDULE, {later: self.now() + 3600})
        mon = self.monitor()
        self.daemon(**OTHER)
        # three polls, seen as ZRANGEBYSCORE of the schedule
        wait_for(lambda: len(mon.commands("ZRANGEBYSCORE")) >= 6, timeout=6)
        self.assertEqual(self.queue("default"), [])
        self.assertEqual(self.r.zrange(SCHEDULE, 0, -1), [later.encode()])

    def test_sp3_redis_down_then_due_entry_graduates_after_it_returns(self):
        d = self.daemon(start=False, **OTHER)
        set_redis_option(d, command_timeout=1.0)
        d.start()
        d.wait_log("first orphan check completed")
        p = payload()
        self.r.zadd(SCHEDULE, {p: self.now() + 3})
        self.server.pause()
        time.sleep(8)
        self.server.resume()
        back = time.monotonic()
        wait_for(lambda: self.queue("default"), timeout=8, message="graduation after outage")
        self.assertLess(time.monotonic() - back, 6)
        self.assertEqual(loads(self.queue("default")[0])["jid"], loads(p)["jid"])
        self.assertEqual(self.r.zcard(SCHEDULE), 0)
        d.wait_log("Scheduled poll: Redis unavailable")
        d.wait_log("Scheduled poll: Redis available again")
        self.assertIsNone(d.proc.poll())

    def test_sp4_graduated_retry_has_fresh_latency(self):
        day_old = self.now() - 86400
        p = payload(enqueued_at=day_old, retry_count=1, error_class="X", error_message="y")
        self.r.zadd(RETRY, {p: self.now() - 1})
        self.daemon(**OTHER)
        wait_for(lambda: self.queue("default"), timeout=5)
        oldest = loads(self.r.lindex(b"cogworker:queue:default", -1))
        self.assertLess(self.now() - oldest["enqueued_at"], 5)

    def test_sp5_not_json_is_buried_and_counted_and_the_valid_job_graduates(self):
        started = self.now()
        recorder = self.path("deaths")
        good = payload()
        self.r.zadd(RETRY, {"{not json": self.now() - 20, good: self.now() - 10})
        self.daemon(on_death=handler("recorder", recorder, self.server.port), **OTHER)
        wait_for(lambda: self.r.zcard(RETRY) == 0 and self.queue("default"), timeout=5)
        self.assertEqual(self.queue("default")[0].split(b'"enqueued_at"')[0],
                         good.encode().split(b'"enqueued_at"')[0])
        [dead] = self.dead_entries()
        self.assertEqual(dead["class"], "(unparseable)")
        self.assertEqual(dead["raw_payload"], "{not json")
        self.assertIs(dead["retry"], False)
        self.assertRegex(dead["jid"], "^[0-9a-f]{24}$")
        self.assertIn("not a job (JSON object with a queue) in cogworker:retry",
                      dead["error_message"])
        self.assertEqual(self.r.get(FAILED), b"1")
        self.assertEqual(self.bucket_total("failed", started), 1)
        time.sleep(1.5)
        self.assertFalse(os.path.exists(recorder), "no on_death for an unparseable entry")

    def test_sp6_non_job_entries_are_buried(self):
        now = self.now()
        bad = ["[1]", json.dumps({"class": "W", "jid": new_jid()}),
               json.dumps({"class": "W", "queue": None, "jid": new_jid()})]
        self.r.zadd(RETRY, {b: now - 5 for b in bad})
        self.daemon(**OTHER)
        wait_for(lambda: self.r.zcard(DEAD) == 3, timeout=5)
        raws = sorted(e["raw_payload"] for e in self.dead_entries())
        self.assertEqual(raws, sorted(bad))
        for e in self.dead_entries():
            self.assertEqual(e["class"], "(unparseable)")
            self.assertIn("not a job (JSON object with a queue)", e["error_message"])
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_sp9_at_most_50_per_set_per_poll_and_none_lost(self):
        now = self.now()
        entries = [payload() for _ in range(120)]
        self.r.zadd(SCHEDULE, {e: now - 5 for e in entries})
        mon = self.monitor()
        self.daemon(**OTHER)
        wait_for(lambda: self.r.llen(b"cogworker:queue:default") == 120, timeout=8)
        # issue 12: the looks at the head (WITHSCORES LIMIT 0 1) are not batch reads

        def batch_reads():
            return [e[2] for e in mon.commands("ZRANGEBYSCORE") if e[2][1] == SCHEDULE and
                    b"WITHSCORES" not in e[2]]
        # MONITOR's reader thread may lag behind the queue on a loaded host: let it catch up
        wait_for(lambda: len(batch_reads()) >= 3, timeout=5, message="120 entries, 50 a read")
        reads = batch_reads()
        for args in reads:
            self.assertEqual(args[2], b"-inf")
            self.assertEqual(args[4:], [b"LIMIT", b"0", b"50"])
        # all 120 after three reads, back to back (a full batch is followed at once)
        self.assertLessEqual(len(reads), 5)
        jids = [loads(x)["jid"] for x in self.queue("default")]
        self.assertEqual(sorted(jids), sorted(loads(e)["jid"] for e in entries))
        self.assertEqual(self.r.zcard(SCHEDULE), 0)

    def test_sp10_two_daemons_graduate_each_entry_once(self):
        self.daemon(**OTHER)
        self.daemon(**OTHER)
        now = self.now()
        entries = [payload() for _ in range(200)]
        self.r.zadd(SCHEDULE, {e: now - 1 for e in entries})
        wait_for(lambda: self.r.zcard(SCHEDULE) == 0, timeout=10)
        time.sleep(0.5)
        jids = [loads(x)["jid"] for x in self.queue("default")]
        self.assertEqual(len(jids), 200)
        self.assertEqual(sorted(jids), sorted(loads(e)["jid"] for e in entries))

    def test_sp11_quiet_pauses_graduation_resume_restarts_it(self):
        d = self.daemon(orphan_check_interval=1, **OTHER)
        signals = ("cogworker:signal:" + d.identity).encode()
        # A signal published before the daemon subscribed is lost: wait for its subscriber.
        wait_for(lambda: self.r.execute_command("PUBSUB", "NUMSUB", signals)[1] == 1,
                 message="the daemon's subscriber")
        self.assertEqual(self.r.publish(signals, "quiet"), 1)
        d.wait_log("quiet")
        mon = self.monitor()
        self.r.zadd(SCHEDULE, {payload(): self.now() - 1})
        self.wait_passes(mon, 3)            # the orphan checks go on while quiet
        self.assertEqual(self.queue("default"), [])
        # no read of the due sets; the orphan check's own reads (the batches' expiry look)
        # go on
        self.assertEqual([e for e in mon.commands("ZRANGEBYSCORE")
                          if e[2][1] in (SCHEDULE, RETRY)], [])
        self.assertEqual(self.r.publish(signals, "resume"), 1)
        wait_for(lambda: self.queue("default"), timeout=5, message="graduation after resume")

    def test_sp12_rhythm_key_check_orphan_check_and_poll(self):
        mon = self.monitor()
        start = time.time()
        self.daemon(queues=["other"], poll_interval=1, orphan_check_interval=3)
        time.sleep(7.5)
        end = time.time()
        polls = [e[0] for e in mon.commands("ZRANGEBYSCORE") if e[2][1] == SCHEDULE]
        checks = self.passes(mon)
        key_checks = [e[0] for e in mon.commands("TYPE") if e[2][1] == DEAD]
        self.assertEqual(len(key_checks), 1, "key check on the first poll only (then 60 s)")
        self.assertTrue(key_checks[0] - start < 2)
        self.assertTrue(checks and checks[0] - start < 2, "orphan check immediately")
        self.assertIn(len(checks), (3, 4), checks)     # t = 0, 3, 6
        for a, b in zip(checks, checks[1:]):
            self.assertAlmostEqual(b - a, 3, delta=0.5)
        self.assertGreaterEqual(len(polls), int(end - start) - 1)
        for a, b in zip(polls, polls[1:]):
            self.assertAlmostEqual(b - a, 1, delta=0.5)


class GuardOffPollTest(PollerTestCase):
    """D runs as an ACL user without RENAME: wrong-typed keys stay in place."""

    def test_sp7_unreadable_schedule_does_not_stop_retry(self):
        self.r.set(SCHEDULE, "x")
        p = payload()
        self.r.zadd(RETRY, {p: self.now() - 1})
        d = self.daemon(url=self.guard_off(), **OTHER)
        wait_for(lambda: self.queue("default"), timeout=5, message="retry graduated")
        self.assertEqual(self.r.type(SCHEDULE), b"string")
        d.wait_log("Scheduled poll: cogworker:schedule unreadable")

    def test_sp8_entry_that_fails_is_deferred_and_does_not_block(self):
        self.r.set(b"cogworker:queue:broken", "x")
        now = self.now()
        a, bad, c = payload(), payload(queue="broken"), payload()
        self.r.zadd(RETRY, {a: now - 30, bad: now - 20, c: now - 10})
        d = self.daemon(url=self.guard_off(), **OTHER)
        wait_for(lambda: len(self.queue("default")) == 2, timeout=5)
        self.assertEqual(self.r.zrange(RETRY, 0, -1), [bad.encode()])
        self.assertAlmostEqual(self.r.zscore(RETRY, bad), self.now() + 60, delta=5)
        d.wait_log("deferred 60s")
        self.assertEqual(self.r.type(b"cogworker:queue:broken"), b"string")


if __name__ == "__main__":
    import unittest
    unittest.main()

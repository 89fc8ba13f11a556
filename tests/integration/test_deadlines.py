# SPDX-License-Identifier: MIT
"""DL: deadlines (doc/behaviours.md §35, doc/protocol.md §7.31): a job past its expires_at, or
its handler's expires_in after enqueued_at, is never started; queued, retry and scheduled
ones alike end in dead as Cogworker::JobExpired, or are dropped with expired = "discard".

Run: python3 tests/integration/run.py test_deadlines
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, handler, job, wait_for  # noqa: E402
from runkit import (DEAD, FAILED, RETRY, SCHEDULE, JobTestCase, loads, parse_records,  # noqa: E402
                    recorder_cmd)

EXPIRED = "Cogworker::JobExpired"
FAST = {"poll_interval": 0.2}


class DeadlinesTest(JobTestCase):

    def ok_daemon(self, **h):
        rec = self.path("deaths")
        handlers = [dict({"class": "Ok", "command": handler("ok"),
                          "on_death": recorder_cmd(rec, self.server)}, **h)]
        return self.daemon(handlers=handlers, **FAST), rec

    def assert_expired_in_dead(self, jid, why):
        member, _ = self.wait_member(DEAD, jid=jid)
        entry = loads(member)
        self.assertEqual(entry["error_class"], EXPIRED)
        self.assertIn("expired at ", entry["error_message"])
        self.assertIn(why, entry["error_message"])
        return member

    def test_dl1_dl4_queued_job_past_expires_at_is_buried_unstarted(self):
        d, rec = self.ok_daemon()
        late = job("Ok", expires_at=time.time() - 5)
        on_time = job("Ok", expires_at=time.time() + 60)
        jl, jo = loads(late)["jid"], loads(on_time)["jid"]
        self.push(late)
        self.push(on_time)
        self.wait_done(d, "Ok", jo)                                  # DL-4
        member = self.assert_expired_in_dead(jl, "(its expires_at)")
        self.assertEqual(d.runs_of(jl), 0)
        self.assertEqual(d.log_lines("start: Ok jid=%s" % jl), [])
        d.wait_log("expired: Ok jid=%s" % jl)
        self.wait_settled(d)
        self.assertEqual(self.counter(FAILED), 1)
        wait_for(lambda: parse_records(self.read(rec, b"")), timeout=10, message="on_death")
        self.assertEqual(parse_records(self.read(rec))[0]["entry"].encode(), member)

    def test_dl2_dl3_due_retry_and_scheduled_entries_past_their_deadline(self):
        d, _ = self.ok_daemon()
        now = time.time()
        retry = job("Ok", retry_count=1, error_class="X", failed_at=now - 30,
                    expires_at=now - 1)
        sched = json.loads(job("Ok", expires_at=now - 1))
        del sched["enqueued_at"]
        sched["at"] = now - 0.5
        sched = json.dumps(sched, separators=(",", ":"))
        self.r.zadd(RETRY, {retry: now - 0.1})
        self.r.zadd(SCHEDULE, {sched: now - 0.5})
        for p in (retry, sched):
            self.assert_expired_in_dead(loads(p)["jid"], "(its expires_at)")
            self.assertEqual(d.runs_of(loads(p)["jid"]), 0)
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(SCHEDULE), 0)
        self.assertEqual(self.qlen(), 0, "never put on a queue")
        self.assertEqual(self.counter(FAILED), 2)

    def test_dl5_expires_in_counts_from_enqueued_at_and_discard_drops(self):
        d, rec = self.ok_daemon(expires_in=5, expired="discard")
        old = json.loads(job("Ok"))
        old["enqueued_at"] -= 10
        old = json.dumps(old, separators=(",", ":"))
        fresh = job("Ok")
        retry = json.loads(job("Ok", retry_count=1))
        retry["enqueued_at"] -= 60                       # enqueued a minute ago, failed since
        retry = json.dumps(retry, separators=(",", ":"))
        self.r.zadd(RETRY, {retry: time.time()})
        self.push(old)
        self.push(fresh)
        self.wait_done(d, "Ok", loads(fresh)["jid"])
        for p in (old, retry):
            d.wait_log("expired: Ok jid=%s" % loads(p)["jid"])
            self.assertEqual(d.runs_of(loads(p)["jid"]), 0)
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(DEAD), 0, "discarded, not buried")
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertIn("expires_in 5s after it was enqueued",
                      d.log_lines("expired: Ok jid=%s" % loads(old)["jid"])[0])
        time.sleep(0.3)
        self.assertIsNone(self.read(rec), "no on_death for a discard")

    def test_dl6_cogworkerctl_push_expires_in_and_at(self):
        d, _ = self.ok_daemon()
        env = dict(os.environ, REDIS_URL=self.server.url)

        def push(*args, rc=0):
            p = subprocess.run([binary("cogworkerctl"), "push"] + list(args) + ["Ok"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            self.assertEqual(p.returncode, rc, (args, p.stderr))
            return p.stdout.decode().strip() if rc == 0 else p.stderr.decode()
        before = time.time()
        soon = push("--expires-in", "60")
        self.wait_done(d, "Ok", soon)
        # a deadline already past would bury the job unrun: refused, nothing pushed
        self.assertIn("is not after the job is due",
                      push("--expires-at", "2020-01-01T00:00:00Z", rc=2))
        self.assertIn("moment it is due", push("--expires-in", "0", rc=2))
        self.assertEqual(self.r.zcard(DEAD), 0)
        # --expires-in counts from when the job is due: --in 100 --expires-in 5
        later = push("--in", "100", "--expires-in", "5")
        (member, score), = [m for m in self.members(SCHEDULE) if loads(m[0])["jid"] == later]
        self.assertAlmostEqual(loads(member)["expires_at"], score + 5, delta=0.01)
        self.assertGreater(score, before + 99)
        # --expires-at: a time, or a duration from now
        at = push("--in", "100", "--expires-at", "2h")
        (member, score), = [m for m in self.members(SCHEDULE) if loads(m[0])["jid"] == at]
        self.assertAlmostEqual(loads(member)["expires_at"], before + 7200, delta=30)

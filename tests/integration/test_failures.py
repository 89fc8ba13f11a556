# SPDX-License-Identifier: MIT
"""FR — failure routing and interrupts (doc/behaviours.md §14), BK — attempts, throughput and
counters (§16).

Where a scenario has "the test re-scores the retry entry" so that the job runs again, the
test moves the entry onto its queue itself (runkit.JobTestCase.graduate), which is what the
scheduled poller does with a due entry: these tests are about failure routing, not about
the poller.

FR-10 … FR-13, FR-16 and FR-17 need the reconcile step (a pending filing is completed by
the next reconcile after Redis is writable again); they are skipped while the daemon has
none. FR-14 and FR-15 are unit scenarios.

Run: python3 tests/integration/run.py test_failures
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job, wait_for  # noqa: E402
from runkit import (DEAD, FAILED, NEEDS_RECONCILE, PROCESSED, RETRY,  # noqa: E402
                    JobTestCase, canonical_digest, loads, order_cmd, recorder_cmd,
                    parse_records, sh)

FAST_RECONCILE = {"orphan_check_interval": 2, "poll_interval": 1}


class Routing(JobTestCase):

    def test_fr1_retry_entry_fields_score_and_attempt(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        t0 = self.now()
        p = self.push(job("F", [1, "a"], retry=3, custom_option={"kept": True}))
        jid = loads(p)["jid"]
        member, score = self.wait_member(RETRY)
        t1 = self.now()
        e = self.assert_failure_entry(p, member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", e["error_message"])
        self.assertEqual(e["retry_count"], 1)
        self.assertIsInstance(e["failed_at"], float)
        self.assertTrue(t0 - 1 <= e["failed_at"] <= t1 + 1, (t0, e["failed_at"], t1))
        self.assertTrue(t0 + 14 <= score <= t1 + 75, (t0, score, t1))
        self.assertEqual(e["custom_option"], {"kept": True})
        a = self.attempts(jid)
        self.assertEqual(len(a), 1)
        self.assertEqual(a[0]["attempt"], 1)
        self.assertEqual(a[0]["outcome"], "retrying")
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertEqual(d.runs_of(jid), 1)

    def test_fr2_retry_false_dead_counters_and_attempt(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        b0 = self.bucket()
        p = self.push(job("F", retry=False))
        jid = loads(p)["jid"]
        member, score = self.wait_member(DEAD)
        self.assert_failure_entry(p, member)
        self.assertAlmostEqual(score, self.now(), delta=5)
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(self.counter(FAILED), 1)
        self.assertEqual(self.counter(PROCESSED), 0)
        a = self.attempts(jid)
        self.assertEqual(len(a), 1)
        self.assertEqual(a[0]["attempt"], 1)
        self.assertEqual(a[0]["outcome"], "dead")
        self.assertEqual(a[0]["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", a[0]["error_message"])
        buckets = {b0, self.bucket()}
        self.assertEqual(sum(int(self.r.hget(b, "failed") or 0) for b in buckets), 1)
        self.assertTrue(all(self.r.hget(b, "processed") is None for b in buckets))

    def test_fr3_repeated_failures_count_keep_first_failed_at_and_back_off(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        p = self.push(job("F", retry=5, failure_outcome="retrying"))
        jid = loads(p)["jid"]
        first_failed_at = member = None
        bounds = {1: (14, 75), 2: (31, 118), 3: (96, 212)}
        for n in (1, 2, 3):
            t0 = self.now()
            if n > 1:
                self.graduate(member)
            wait_for(lambda: d.runs_of(jid) == n, timeout=10, message="run %d" % n)
            member, score = wait_for(
                lambda: next(((m, s) for m, s in self.members(RETRY)
                              if loads(m)["retry_count"] == n), None),
                timeout=10, message="retry entry with retry_count %d" % n)
            t1 = self.now()
            self.assertNotIn(b"failure_outcome", member)
            e = loads(member)
            # members already there keep their place; new ones are appended once
            keys = [k for k, _ in json.loads(member, object_pairs_hook=list)]
            self.assertEqual(len(keys), len(set(keys)), member)
            self.assertEqual(keys[:4], ["class", "args", "queue", "jid"])
            self.assertEqual(keys[-4:], ["error_class", "error_message", "failed_at",
                                         "retry_count"])
            self.assertEqual(e["retry_count"], n)
            if first_failed_at is None:
                first_failed_at = e["failed_at"]
            self.assertEqual(e["failed_at"], first_failed_at)
            lo, hi = bounds[n]
            self.assertTrue(t0 + lo - 1 <= score <= t1 + hi + 1, (n, t0, score, t1))
            self.assertEqual(self.r.zcard(RETRY), 1)
        self.assertEqual([a["outcome"] for a in self.attempts(jid)], ["retrying"] * 3)
        self.assertEqual([a["attempt"] for a in self.attempts(jid)], [1, 2, 3])
        self.wait_settled(d)
        self.assertEqual(self.counter(FAILED), 3)

    def test_fr4_retry_budget_parsing(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}], concurrency=2)
        cases = [
            ('"4"', 3, RETRY), ('"4"', 4, DEAD),
            ("2.0", 1, RETRY), ("2.0", 2, DEAD),
            ("{}", 0, DEAD), ('"lots"', 0, DEAD),
            ("true", 24, RETRY), (None, 24, RETRY),
            ("true", 25, DEAD), (None, 25, DEAD),
            ("null", 24, RETRY), ("null", 25, DEAD),
            ("false", 0, DEAD),
            ("[1]", 0, DEAD), ('""', 0, DEAD),
            # a string is read as the gem's Integer(s, exception: false) || 0 reads it
            ('"1e3"', 0, DEAD), ('"2.5"', 0, DEAD),
            ('"1_000"', 999, RETRY), ('"1_000"', 1000, DEAD),
            ('"010"', 7, RETRY), ('"010"', 8, DEAD),
        ]
        expect = {}
        for i, (retry, count, where) in enumerate(cases):
            jid = "%024x" % (i + 1)
            retry_part = ',"retry":%s' % retry if retry is not None else ""
            count_part = ',"retry_count":%d' % count if count else ""
            p = ('{"class":"F","args":[],"queue":"default","jid":"%s"%s%s}'
                 % (jid, retry_part, count_part))
            self.push(p)
            expect[jid] = (where, count, retry)
        wait_for(lambda: self.r.zcard(RETRY) + self.r.zcard(DEAD) == len(cases), timeout=20,
                 message="all budget cases filed")
        where = {loads(m)["jid"]: RETRY for m in self.r.zrange(RETRY, 0, -1)}
        where.update({loads(m)["jid"]: DEAD for m in self.r.zrange(DEAD, 0, -1)})
        for jid, (want, count, retry) in expect.items():
            self.assertEqual(where.get(jid), want, "retry=%s retry_count=%d" % (retry, count))
        for m in self.r.zrange(DEAD, 0, -1) + self.r.zrange(RETRY, 0, -1):
            e = loads(m)
            self.assertEqual(e["retry_count"], expect[e["jid"]][1] + 1)
        self.wait_settled(d)
        self.assertIsNone(d.proc.poll())

    def test_fr5_dead_exit_code(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "K", "command": handler("exit", 3),
                                   "dead_exit_codes": [3], "discard_exit_codes": [4],
                                   "on_death": order_cmd(order, "handler")}],
                        on_death=[order_cmd(order, "global")])
        p = self.push(job("K", retry=10, failure_outcome="x"))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(DEAD)
        e = loads(member)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertTrue(e["error_message"].startswith("exit status 3"))
        self.assertNotIn("failure_outcome", e)
        wait_for(lambda: self.read(order) == b"handler\nglobal\n", timeout=5,
                 message="handler then global on_death")
        self.assertEqual(self.attempts(jid)[0]["outcome"], "killed")
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_fr6_discard_exit_code(self):
        rec = self.path("deaths")
        d = self.daemon(handlers=[{"class": "X", "command": handler("exit", 4),
                                   "dead_exit_codes": [3], "discard_exit_codes": [4],
                                   "on_death": recorder_cmd(rec, self.server)}],
                        on_death=[recorder_cmd(rec, self.server)])
        p = job("X", ["a", 1], retry=10, unique="until_executed")
        jid = loads(p)["jid"]
        lock = ("cogworker:unique:" + canonical_digest("X", "default", '["a",1]')).encode()
        self.r.set(lock, jid, ex=86400)
        decoy = b"cogworker:unique:" + b"0" * 40
        self.r.set(decoy, jid, ex=86400)
        self.push(p)
        wait_for(lambda: self.attempts(jid), timeout=10, message="attempt recorded")
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)
        self.assertEqual(self.attempts(jid)[0]["outcome"], "discarded")
        self.assertEqual(self.attempts(jid)[0]["attempt"], 1)
        self.assertFalse(self.r.exists(lock))
        self.assertTrue(self.r.exists(decoy))
        self.assertEqual(self.counter(FAILED), 1)
        self.assertEqual(self.counter(PROCESSED), 0)
        self.assertEqual(self.qlen(), 0)
        time.sleep(0.5)
        self.assertIsNone(self.read(rec))
        self.assertEqual(d.runs_of(jid), 1)

    def test_fr7_last_retry_goes_to_dead_on_death_once_in_order(self):
        rec_h, rec_g, order = self.path("rec-h"), self.path("rec-g"), self.path("order")
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail"),
                                   "on_death": sh('"$1" "$2" "$3"; echo handler >> "$4"',
                                                  handler("recorder")[0], rec_h,
                                                  self.server.port, order)}],
                        on_death=[sh('"$1" "$2" "$3"; echo global >> "$4"',
                                     handler("recorder")[0], rec_g, self.server.port, order)])
        p = self.push(job("F", retry=1))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(RETRY)
        self.wait_settled(d)
        self.assertIsNone(self.read(order))
        self.graduate(member)
        dead, _ = self.wait_member(DEAD)
        self.assertEqual(loads(dead)["retry_count"], 2)
        wait_for(lambda: self.read(order) == b"handler\nglobal\n", timeout=5,
                 message="handler then global on_death")
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertEqual(self.read(order), b"handler\nglobal\n")
        for rec in (rec_h, rec_g):
            recs = parse_records(self.read(rec))
            self.assertEqual(len(recs), 1)
            self.assertEqual(recs[0]["dead"], "1")
            self.assertEqual(recs[0]["entry"].encode(), dead)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual([a["outcome"] for a in self.attempts(jid)], ["retrying", "dead"])

    def test_fr7_discard_code_on_final_attempt_goes_to_dead(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "X", "command": handler("exit", 4),
                                   "discard_exit_codes": [4]}],
                        on_death=[order_cmd(order, "global")])
        p = self.push(job("X", retry=1, retry_count=1))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(DEAD)
        self.assertEqual(loads(member)["retry_count"], 2)
        wait_for(lambda: self.read(order) == b"global\n", timeout=5, message="on_death")
        self.assertEqual(self.attempts(jid)[0]["outcome"], "dead")
        self.wait_settled(d)

    def test_fr8_retry_false_unmapped_code_dead_and_on_death(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "E", "command": handler("exit", 7),
                                   "dead_exit_codes": [3], "discard_exit_codes": [4]}],
                        on_death=[order_cmd(order, "global")])
        p = self.push(job("E", retry=False))
        member, _ = self.wait_member(DEAD)
        e = self.assert_failure_entry(p, member)
        self.assertTrue(e["error_message"].startswith("exit status 7"))
        wait_for(lambda: self.read(order) == b"global\n", timeout=5, message="on_death")
        self.wait_settled(d)

    def test_fr9_retry_extends_both_locks(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        pjid = "f" * 40
        p = job("F", [7], retry=3, unique="until_executed", periodic_pjid=pjid,
                periodic_slot=1767225600)
        jid = loads(p)["jid"]
        ulock = ("cogworker:unique:" + canonical_digest("F", "default", "[7]")).encode()
        rlock = ("periodic:running:" + pjid).encode()
        self.r.set(ulock, jid, ex=300)
        self.r.set(rlock, jid, ex=300)
        self.push(p)
        _, score = self.wait_member(RETRY)
        self.wait_settled(d)
        now = self.now()
        delay = score - now
        for lock in (ulock, rlock):
            self.assertEqual(self.r.get(lock), jid.encode())
            self.assertAlmostEqual(self.r.ttl(lock), delay + 86400, delta=5)

    def test_fr18_no_handler_retry_then_dead_only_global_on_death(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "Other", "command": handler("ok"),
                                   "on_death": order_cmd(order, "other-handler")}],
                        on_death=[order_cmd(order, "global")])
        t0 = self.now()
        p = self.push(job("Ghost", retry=1))
        jid = loads(p)["jid"]
        member, score = self.wait_member(RETRY)
        t1 = self.now()
        e = loads(member)
        self.assertEqual(e["error_class"], "Cogworker::NoHandler")
        self.assertTrue(t0 + 14 <= score <= t1 + 75, (t0, score, t1))
        self.wait_settled(d)
        self.graduate(member)
        dead, _ = self.wait_member(DEAD)
        self.assertEqual(loads(dead)["error_class"], "Cogworker::NoHandler")
        wait_for(lambda: self.read(order) == b"global\n", timeout=5, message="global on_death")
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertEqual(self.read(order), b"global\n")
        self.assertEqual([a["outcome"] for a in self.attempts(jid)], ["retrying", "dead"])

    def test_fr19_reload_adds_the_handler_and_the_retry_succeeds(self):
        d = self.daemon(handlers=[{"class": "Other", "command": handler("ok")}])
        p = self.push(job("Later", retry=3))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(RETRY)
        self.wait_settled(d)
        d.settings["handlers"] = [{"class": "Other", "command": handler("ok")},
                                  {"class": "Later", "command": handler("ok")}]
        d.write_conf()
        import signal
        d.signal(signal.SIGHUP)
        d.wait_log("reloaded", timeout=10)
        self.graduate(member)
        self.wait_done(d, "Later", jid)
        self.wait_settled(d)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)
        self.assertEqual(self.wait_counter(PROCESSED, 1), 1)
        self.assertEqual(self.counter(FAILED), 1)


class Interrupts(JobTestCase):
    """[RO] while the handler finishes: the retry/dead write fails, the filing is kept in
    memory and the next reconcile after Redis is writable files it (doc/protocol.md §7.6)."""

    def _interrupted(self, d, p, code=1):
        jid = loads(p)["jid"]
        self.push(p)
        self.wait_runs(d, jid)
        time.sleep(0.2)
        self.ro_on()
        t = self.now()
        d.open_gate(jid, code)
        time.sleep(3)
        self.ro_off()
        return jid, t

    def _gate_daemon(self, **extra):
        settings = dict(FAST_RECONCILE)
        settings.update(extra)
        return self.daemon(handlers=[{"class": "G", "command": handler("gate"),
                                      "dead_exit_codes": [3]}], **settings)

    def _filed(self, key, d, jid):
        member, score = self.wait_member(key, jid=jid, timeout=65)
        self.wait_settled(d, timeout=65)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(d.runs_of(jid), 1)
        return loads(member), score

    def test_fr10_pending_filing_completed_at_stop(self):
        """FR-10 without waiting for a reconcile: the stop settles pending filings first
        (doc/protocol.md §7.7, step 4 of the stop): the job is interrupted into retry, never put
        back on its queue."""
        d = self._gate_daemon()
        jid, t = self._interrupted(d, job("G", retry=3))
        self.assertEqual(d.stop(), 0)
        members = self.members(RETRY)
        self.assertEqual(len(members), 1, members)
        e, score = loads(members[0][0]), members[0][1]
        self.assertEqual(e["jid"], jid)
        self.assertEqual(e["interrupted_count"], 1)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertAlmostEqual(e["failed_at"], t, delta=2)
        self.assertAlmostEqual(score, t + 30, delta=2)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(self.inprogress(d), [])
        self.assertEqual(self.r.llen(b"cogworker:unsettled"), 0)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertEqual(d.runs_of(jid), 1)

    def test_fr11_pending_dead_filing_completed_at_stop_runs_on_death_once(self):
        rec = self.path("deaths")
        d = self._gate_daemon(on_death=[recorder_cmd(rec, self.server)])
        jid, _ = self._interrupted(d, job("G", retry=3, interrupted_count=3))
        self.assertIsNone(self.read(rec), "on_death ran before the job was filed")
        self.assertEqual(d.stop(), 0)
        members = self.members(DEAD)
        self.assertEqual(len(members), 1, members)
        e = loads(members[0][0])
        self.assertEqual(e["interrupted_count"], 4)
        self.assertEqual(self.r.zcard(RETRY) + self.qlen(), 0)
        recs = parse_records(self.read(rec))
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["entry"].encode(), members[0][0])
        self.assertEqual(d.runs_of(jid), 1)

    @NEEDS_RECONCILE
    def test_fr10_interrupted_into_retry(self):
        d = self._gate_daemon()
        jid, t = self._interrupted(d, job("G", retry=3))
        e, score = self._filed(RETRY, d, jid)
        self.assertEqual(e["interrupted_count"], 1)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertTrue(e["error_message"].startswith("exit status 1"))
        self.assertAlmostEqual(e["failed_at"], t, delta=2)
        self.assertAlmostEqual(score, t + 30, delta=2)
        self.assertEqual(self.r.zcard(DEAD), 0)

    @NEEDS_RECONCILE
    def test_fr11_more_than_three_interrupts_goes_to_dead(self):
        d = self._gate_daemon()
        jid, _ = self._interrupted(d, job("G", retry=3, interrupted_count=3))
        e, _ = self._filed(DEAD, d, jid)
        self.assertEqual(e["interrupted_count"], 4)
        self.assertEqual(self.r.zcard(RETRY), 0)

    @NEEDS_RECONCILE
    def test_fr12_retry_false_interrupted_into_dead(self):
        d = self._gate_daemon()
        jid, _ = self._interrupted(d, job("G", retry=False))
        e, _ = self._filed(DEAD, d, jid)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(self.r.zcard(RETRY), 0)

    @NEEDS_RECONCILE
    def test_fr13_last_allowed_attempt_interrupted_into_dead(self):
        d = self._gate_daemon()
        jid, _ = self._interrupted(d, job("G", retry=2, retry_count=2))
        e, _ = self._filed(DEAD, d, jid)
        self.assertEqual(e["retry_count"], 3)
        self.assertEqual(self.r.zcard(RETRY), 0)

    @NEEDS_RECONCILE
    def test_fr16_interrupted_into_dead_releases_locks(self):
        d = self._gate_daemon()
        pjid = "e" * 40
        p = job("G", ["u"], retry=10, interrupted_count=3, unique="until_executed",
                periodic_pjid=pjid, periodic_slot=1767225600)
        jid = loads(p)["jid"]
        ulock = ("cogworker:unique:" + canonical_digest("G", "default", '["u"]')).encode()
        rlock = ("periodic:running:" + pjid).encode()
        self.r.set(ulock, jid, ex=3000)
        self.r.set(rlock, jid, ex=3000)
        self._interrupted(d, p)
        self._filed(DEAD, d, jid)
        wait_for(lambda: not self.r.exists(ulock) and not self.r.exists(rlock), timeout=10,
                 message="both locks released")

    @NEEDS_RECONCILE
    def test_fr10_unwritable_retry_set_filed_by_reconcile_once_fixed(self):
        """[WT] variant of FR-10: `cogworker:retry` is a string (guard off), so neither the
        retry ZADD nor the interrupt write can file the failure. The job stays on the
        in-progress list (not requeued, not re-run) until the key is fixed; then a
        reconcile files it into retry as an interrupt."""
        url = self.guard_off_url()
        self.r.set(RETRY, b"not a zset")
        d = self.daemon(url=url, handlers=[{"class": "F", "command": handler("fail")}],
                        **FAST_RECONCILE)
        p = self.push(job("F", retry=3))
        jid = loads(p)["jid"]
        self.wait_runs(d, jid)
        d.wait_log("couldn't file failed job jid=%s" % jid, timeout=10)
        time.sleep(6)                                # a few reconciles (every 2 s)
        self.assertEqual(self.inprogress(d), [p])
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(d.runs_of(jid), 1)
        self.r.delete(RETRY)
        e, score = self._filed(RETRY, d, jid)
        self.assertEqual(e["interrupted_count"], 1)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", e["error_message"])
        self.assertEqual(self.r.zcard(DEAD), 0)

    @NEEDS_RECONCILE
    def test_fr17_dead_exit_code_honoured_on_interrupt(self):
        d = self._gate_daemon()
        jid, _ = self._interrupted(d, job("G", retry=10), code=3)
        e, _ = self._filed(DEAD, d, jid)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(self.r.zcard(RETRY), 0)


class Bookkeeping(JobTestCase):

    def test_bk1_attempts_log_two_entries_oldest_first(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        p = self.push(job("F", retry=5))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(RETRY)
        self.wait_settled(d)
        self.graduate(member)
        wait_for(lambda: len(self.attempts(jid)) == 2, timeout=10, message="2 attempts")
        a = self.attempts(jid)
        self.assertEqual([x["attempt"] for x in a], [1, 2])
        for x in a:
            self.assertEqual(x["outcome"], "retrying")
            self.assertEqual(x["error_class"], "Cogworker::HandlerFailed")
            self.assertIn("kaboom", x["error_message"])
            self.assertIsInstance(x["failed_at"], float)
        self.assertLessEqual(a[0]["failed_at"], a[1]["failed_at"])
        ttl = self.r.ttl(("cogworker:job_attempts:" + jid).encode())
        self.assertTrue(0 < ttl <= 2592000, ttl)          # BK-3

    def test_bk2_attempts_log_keeps_last_25(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        p = job("F", retry=40, retry_count=29)
        jid = loads(p)["jid"]
        key = ("cogworker:job_attempts:" + jid).encode()
        for n in range(1, 30):
            self.r.rpush(key, json.dumps({"attempt": n, "failed_at": 1767225600.0 + n,
                                          "outcome": "retrying", "error_class": "E",
                                          "error_message": "m"}))
        self.push(p)
        self.wait_member(RETRY)
        self.wait_settled(d)
        a = self.attempts(jid)
        self.assertEqual([x["attempt"] for x in a], list(range(6, 31)))
        self.assertEqual(a[-1]["outcome"], "retrying")
        ttl = self.r.ttl(key)
        self.assertTrue(0 < ttl <= 2592000, ttl)

    def test_bk4_killed_and_discarded_outcomes(self):
        d = self.daemon(handlers=[{"class": "K", "command": handler("exit", 3),
                                   "dead_exit_codes": [3]},
                                  {"class": "X", "command": handler("exit", 4),
                                   "discard_exit_codes": [4]}])
        k = loads(self.push(job("K", retry=10)))["jid"]
        x = loads(self.push(job("X", retry=10)))["jid"]
        wait_for(lambda: self.attempts(k) and self.attempts(x), timeout=10,
                 message="both attempts")
        self.assertEqual(self.attempts(k)[0]["outcome"], "killed")
        self.assertEqual(self.attempts(x)[0]["outcome"], "discarded")
        self.wait_settled(d)

    def test_bk5_throughput_bucket_counts_independently(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("ok")},
                                  {"class": "F", "command": handler("fail")}])
        started, b0 = self.now(), self.bucket()
        self.push(job("R"))
        self.push(job("F", retry=3))
        self.wait_member(RETRY)
        wait_for(lambda: self.counter(PROCESSED) == 1, timeout=10, message="processed 1")
        self.wait_settled(d)
        # Across an hour the two may land in two buckets: each counted once, somewhere.
        self.assertEqual(self.bucket_total("processed", started), 1)
        self.assertEqual(self.bucket_total("failed", started), 1)
        for b in {b0, self.bucket()}:
            if self.r.exists(b):
                ttl = self.r.ttl(b)
                self.assertTrue(0 < ttl <= 90000, ttl)

    def test_bk6_processed_counts_successes_failed_counts_every_failed_attempt(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("ok")},
                                  {"class": "F", "command": handler("fail")},
                                  {"class": "X", "command": handler("exit", 4),
                                   "discard_exit_codes": [4]}], concurrency=2)
        self.push(job("R"))
        self.push(job("R"))
        self.push(job("F", retry=3))          # retry
        self.push(job("F", retry=False))      # dead
        self.push(job("X", retry=3))          # discard
        self.push(b"not json at all")         # burial
        wait_for(lambda: self.counter(PROCESSED) + self.counter(FAILED) == 6, timeout=15,
                 message="6 outcomes counted")
        self.wait_settled(d)
        time.sleep(0.3)
        self.assertEqual(self.counter(PROCESSED), 2)
        self.assertEqual(self.counter(FAILED), 4)
        self.assertEqual(self.r.zcard(RETRY), 1)
        self.assertEqual(self.r.zcard(DEAD), 2)


if __name__ == "__main__":
    import unittest
    unittest.main()

# SPDX-License-Identifier: MIT
"""Bookkeeping: job status and run history (doc/behaviours.md §20 SH, doc/protocol.md §7.21, §7.22),
unique jobs end to end through `cogworkerctl push --unique` (§5, §7.18), bookkeeping
faults with status and history switched on (BE-1, BE-2, PX-14), and the cogworkerctl
views (`jobs show` with the status hash, `history`).

The daemon side of UJ-1 … UJ-9 (release, extension, owner checks, the digest of
hand-written canonical JSON) is in test_unique.py; the deferred releases of unique locks
(DR-2, DR-3) in test_periodic_locks.py; the digest against vectors recorded with Ruby in
tests/unit/test_digest.c.

Run: python3 tests/integration/run.py test_bookkeeping
"""

import datetime
import hashlib
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, handler, job, new_jid, wait_for  # noqa: E402
from runkit import (DEAD, FAILED, PROCESSED, RETRY, JobTestCase,  # noqa: E402
                    canonical_digest, loads, sh)

ALL = b"cogworker:history:all"
SUCCESS = b"cogworker:history:success"
FAILED_H = b"cogworker:history:failed"
DAY = 86400
BIG_ARGS = '[12345678901234567890,1.10,"x",{"k":"\u00e9/"}]'     # bytes that must survive

ON = {"status_expiration": 1800, "history_retention_days": 30}


def status_key(jid):
    return ("status:" + jid).encode()


def daily_key(t):
    return ("cogworker:history:daily:"
            + datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d")
            ).encode()


def raw_job(cls, args_text, jid=None, retry=None, **extra):
    """A job whose args are exactly args_text (not re-encoded)."""
    jid = jid or new_jid()
    now = time.time()
    parts = ['"class":%s' % json.dumps(cls), '"args":%s' % args_text, '"queue":"default"',
             '"jid":"%s"' % jid]
    if retry is not None:
        parts.append('"retry":%s' % json.dumps(retry))
    for k, v in extra.items():
        parts.append('"%s":%s' % (k, json.dumps(v)))
    parts.append('"created_at":%.6f,"enqueued_at":%.6f' % (now, now))
    return "{" + ",".join(parts) + "}", jid


class Bookkeeping(JobTestCase):

    def handlers(self, extra=()):
        return [{"class": "R", "command": handler("ok")},
                {"class": "F", "command": handler("fail")},
                {"class": "G", "command": handler("gate")},
                {"class": "X", "command": handler("exit", 3), "dead_exit_codes": [3]},
                {"class": "D", "command": handler("exit", 4), "discard_exit_codes": [4]},
                {"class": "Q", "command": handler("exit", 5)}] + list(extra)

    def sd(self, extra=(), **settings):
        """D with status and history on (doc/behaviours.md §20)."""
        conf = dict(ON)
        conf.update(settings)
        return self.daemon(handlers=self.handlers(extra), **conf)

    def status(self, jid):
        return {k.decode(): v.decode() for k, v in self.r.hgetall(status_key(jid)).items()}

    def wait_status(self, jid, value, timeout=10):
        wait_for(lambda: self.status(jid).get("status") == value, timeout=timeout,
                 message="status:%s = %s (is %r)" % (jid, value, self.status(jid)))
        return self.status(jid)

    def entries(self, key):
        return [(loads(m), s) for m, s in self.members(key)]

    def wait_entries(self, key, n, timeout=10):
        wait_for(lambda: self.r.zcard(key) >= n, timeout=timeout,
                 message="%d entries in %s" % (n, key))
        return self.entries(key)

    def push_job(self, cls, args=(), **kw):
        p = job(cls, list(args), **kw)
        self.push(p)
        return loads(p)["jid"]


# ======================================================================================
# SH — status

class Status(Bookkeeping):

    def test_sh1_working_while_it_runs_then_complete(self):
        d = self.sd()
        jid = self.push_job("G", ["a"])
        self.wait_runs(d, jid)
        st = self.wait_status(jid, "working")
        self.assertEqual((st["class"], st["queue"]), ("G", "default"))
        self.assertAlmostEqual(int(st["update_time"]), self.now(), delta=5)
        self.assertNotIn("error_class", st)
        ttl = self.r.ttl(status_key(jid))
        self.assertTrue(0 < ttl <= 1800, ttl)
        d.open_gate(jid, 0)
        st = self.wait_status(jid, "complete")
        self.assertEqual((st["class"], st["queue"]), ("G", "default"))
        self.assertTrue(0 < self.r.ttl(status_key(jid)) <= 1800)

    def test_status_ttl_is_reapplied_on_each_write(self):
        d = self.sd(status_expiration=100)
        jid = self.push_job("G")
        self.wait_runs(d, jid)
        self.wait_status(jid, "working")
        self.r.expire(status_key(jid), 7)           # as if it had aged
        d.open_gate(jid, 0)
        self.wait_status(jid, "complete")
        self.assertGreater(self.r.ttl(status_key(jid)), 90)

    def test_sh2_retrying_then_failed_with_the_error(self):
        d = self.sd()
        p = job("F", retry=1)
        jid = loads(p)["jid"]
        self.push(p)
        member, _ = self.wait_member(RETRY)
        st = self.wait_status(jid, "retrying")
        self.assertEqual(st["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(st["error_message"], "exit status 1: kaboom")
        self.wait_settled(d)
        self.graduate(member)
        self.wait_member(DEAD)
        st = self.wait_status(jid, "failed")
        self.assertEqual(st["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_sh3_dead_exit_code_with_retries_left_is_failed(self):
        self.sd()
        jid = self.push_job("X", retry=5)
        self.wait_member(DEAD)
        st = self.wait_status(jid, "failed")
        self.assertEqual(st["error_message"], "exit status 3")
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_sh3_discard_exit_code_is_failed(self):
        d = self.sd()
        jid = self.push_job("D", retry=5)
        self.wait_fail(d, "D", jid)
        self.wait_status(jid, "failed")
        self.wait_settled(d)
        self.assertEqual((self.r.zcard(RETRY), self.r.zcard(DEAD)), (0, 0))

    def test_sh3_control_plain_failure_with_retries_left_is_retrying(self):
        self.sd()
        jid = self.push_job("Q", retry=5)
        self.wait_member(RETRY)
        self.wait_status(jid, "retrying")

    def test_sh4_retry_false_is_failed(self):
        d = self.sd()
        p, jid = raw_job("F", "[]", retry=False)
        self.push(p)
        self.wait_member(DEAD)
        self.wait_status(jid, "failed")
        self.wait_settled(d)
        self.assertEqual(d.log_lines("Status:"), [])
        self.assertIsNone(d.proc.poll())

    def test_sh5_fields_the_handler_writes_survive_the_final_write(self):
        writer = sh('echo "$COGWORKER_JID" >> "$RUNS"; '
                    'redis-cli -p "$REDIS_PORT" HSET "status:$COGWORKER_JID" pct 42 message '
                    'halfway custom yes >/dev/null')
        self.sd(extra=[{"class": "W", "command": writer}])
        jid = self.push_job("W")
        st = self.wait_status(jid, "complete")
        self.assertEqual((st["pct"], st["message"], st["custom"]), ("42", "halfway", "yes"))

    def test_status_off_writes_nothing(self):
        d = self.daemon(handlers=self.handlers())
        a, b = self.push_job("R"), self.push_job("F", retry=0)
        self.wait_done(d, "R", a)
        self.wait_member(DEAD)
        self.wait_settled(d)
        self.assertEqual(self.r.keys(b"status:*"), [])
        self.assertEqual(self.r.keys(b"cogworker:history:*"), [])
        self.assertEqual(loads(self.members(DEAD)[0][0])["jid"], b)


class Progress(Bookkeeping):

    def progress_handler(self):
        # Reports progress, then waits for its gate; a second report has no message.
        return {"class": "P", "command": sh(
            'echo "$COGWORKER_JID" >> "$RUNS"; '
            'echo "cogworker:progress 42 halfway there"; '
            'echo "cogworker:progress lots ignored"; echo "just output"; '
            'while [ ! -f "$GATES/$COGWORKER_JID" ]; do sleep 0.05; done; '
            'printf "cogworker:progress 90\\r\\n"; sleep 0.3; exit 0')}

    def test_progress_line_shows_in_status(self):
        d = self.sd(extra=[self.progress_handler()])
        jid = self.push_job("P")
        wait_for(lambda: self.status(jid).get("pct") == "42", message="pct 42")
        st = self.status(jid)
        self.assertEqual((st["status"], st["message"]), ("working", "halfway there"))
        self.assertTrue(0 < self.r.ttl(status_key(jid)) <= 1800)
        d.open_gate(jid, 0)
        st = self.wait_status(jid, "complete")
        self.assertEqual((st["pct"], st["message"]), ("90", "halfway there"))

    def test_progress_with_status_off_writes_nothing(self):
        d = self.daemon(handlers=self.handlers([self.progress_handler()]))
        jid = self.push_job("P")
        self.wait_runs(d, jid)
        d.wait_log("stdout: just output")
        d.open_gate(jid, 0)
        self.wait_done(d, "P", jid)
        self.assertFalse(self.r.exists(status_key(jid)))


# ======================================================================================
# SH — history

class History(Bookkeeping):

    def test_sh6_success_entry(self):
        d = self.sd()
        p, jid = raw_job("R", BIG_ARGS, retry=2)
        self.push(p)
        self.wait_done(d, "R", jid)
        [(raw, score)] = wait_for(lambda: self.members(SUCCESS), message="success entry")
        self.assertIn(b'"args":' + BIG_ARGS.encode() + b',', raw)      # args byte for byte
        e = loads(raw)
        self.assertEqual(list(e)[:12], ["jid", "class", "queue", "args", "status", "started_at",
                                        "finished_at", "error_class", "error_message",
                                        "backtrace", "cpu_s", "maxrss_bytes"])  # cost: AC-1
        # where the run had a cgroup of its own (containment in force), its figures too
        self.assertIn(list(e)[12:], ([], ["memory_peak_bytes", "io_read_bytes",
                                          "io_write_bytes", "oom_kills"]))
        self.assertEqual((e["jid"], e["class"], e["queue"], e["status"]),
                         (jid, "R", "default", "success"))
        self.assertIsNone(e["backtrace"])
        self.assertIsNone(e["error_class"])
        self.assertGreaterEqual(e["finished_at"], e["started_at"])
        self.assertAlmostEqual(e["finished_at"], self.now(), delta=10)
        self.assertAlmostEqual(score, e["finished_at"], places=5)
        self.assertEqual(self.members(ALL), [(raw, score)])
        self.assertEqual(self.r.zcard(FAILED_H), 0)

    def test_sh7_failure_entry_with_stderr_backtrace(self):
        d = self.sd()
        jid = self.push_job("F", ["x"], retry=3)
        [(e, score)] = self.wait_entries(FAILED_H, 1)
        self.assertEqual((e["jid"], e["class"], e["status"]), (jid, "F", "failed"))
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(e["error_message"], "exit status 1: kaboom")
        self.assertEqual(e["backtrace"], ["kaboom"])
        self.assertEqual(e["args"], ["x"])
        self.assertGreaterEqual(e["finished_at"], e["started_at"])
        self.assertAlmostEqual(score, e["finished_at"], places=5)
        self.assertEqual([x for x, _ in self.entries(ALL)], [e])
        # still routed as usual
        member, _ = self.wait_member(RETRY)
        self.assertEqual(loads(member)["jid"], jid)
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(DEAD), 0)

    def test_sh7_backtrace_keeps_the_last_200_lines(self):
        noisy = sh('echo "$COGWORKER_JID" >> "$RUNS"; i=1; '
                   'while [ $i -le 300 ]; do echo "line $i" >&2; i=$((i+1)); done; exit 1')
        self.sd(extra=[{"class": "N", "command": noisy}])
        self.push_job("N", retry=0)
        [(e, _)] = self.wait_entries(FAILED_H, 1)
        self.assertEqual(e["backtrace"], ["line %d" % i for i in range(101, 301)])
        self.wait_member(DEAD)

    def test_backtrace_is_the_exit_status_when_stderr_was_empty(self):
        noexec = self.path("not-executable")
        with open(noexec, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(noexec, 0o644)
        self.sd(extra=[{"class": "NoExec", "command": [noexec]}])
        for cls in ("Q", "Nobody", "NoExec"):
            self.push_job(cls, retry=0)
        got = {e["class"]: e for e, _ in self.wait_entries(FAILED_H, 3)}
        self.assertEqual(got["Q"]["backtrace"], ["exit status 5"])
        self.assertEqual(got["Nobody"]["backtrace"], ["no handler configured for class Nobody"])
        # the whole line, reason included
        self.assertEqual(got["NoExec"]["backtrace"], [got["NoExec"]["error_message"]])
        self.assertRegex(got["NoExec"]["error_message"], r"^exec failed: .+")

    def test_sh8_one_success_one_failure(self):
        d = self.sd()
        a = self.push_job("R")
        b = self.push_job("F", retry=0)
        self.wait_entries(ALL, 2)
        self.wait_settled(d)
        self.assertEqual([e["jid"] for e, _ in self.entries(SUCCESS)], [a])
        self.assertEqual([e["jid"] for e, _ in self.entries(FAILED_H)], [b])
        self.assertEqual(sorted(e["jid"] for e, _ in self.entries(ALL)), sorted([a, b]))

    def test_sh9_max_entries_keeps_the_newest(self):
        d = self.sd(history_max_entries=3)
        jids = [self.push_job("R", [i]) for i in range(5)]
        for j in jids:
            self.wait_done(d, "R", j)
        wait_for(lambda: self.counter(PROCESSED) == 5, message="5 runs")
        self.wait_settled(d)
        newest = [jids[4], jids[3], jids[2]]
        for key in (ALL, SUCCESS):
            self.assertEqual([e["jid"] for e, _ in reversed(self.entries(key))], newest, key)

    def test_sh10_entries_older_than_retention_go_first(self):
        d = self.sd(history_retention_days=7)
        now = self.now()
        old = json.dumps({"jid": "old", "class": "R", "status": "success"})
        recent = json.dumps({"jid": "recent", "class": "R", "status": "success"})
        for key in (ALL, SUCCESS):
            self.r.zadd(key, {old: now - 8 * DAY, recent: now - 6 * DAY})
        jid = self.push_job("R")
        self.wait_done(d, "R", jid)
        wait_for(lambda: self.r.zcard(ALL) == 2 and self.r.zcard(SUCCESS) == 2,
                 message="the old entry trimmed")
        for key in (ALL, SUCCESS):
            self.assertEqual(sorted(e["jid"] for e, _ in self.entries(key)),
                             sorted(["recent", jid]))

    def test_sh11_daily_counters(self):
        d = self.sd()
        self.push_job("R")
        self.push_job("F", retry=0)
        self.push_job("R")
        got = self.wait_entries(ALL, 3)
        self.wait_settled(d)
        # Each run counts on the day it finished (UTC): runs across midnight, on two.
        days = {daily_key(e["finished_at"]) for e, _ in got}
        wait_for(lambda: self.daily_sums(days) == {b"success": 2, b"failed": 1},
                 message="daily counters")
        for day in days:
            ttl = self.r.ttl(day)
            self.assertTrue(400 * DAY - 60 < ttl <= 400 * DAY, ttl)

    def daily_sums(self, days):
        """The daily counters summed over `days` (keys), as {field: int}."""
        out = {}
        for day in days:
            for k, v in self.r.hgetall(day).items():
                out[k] = out.get(k, 0) + int(v)
        return out

    def test_sh12_daily_counter_is_not_trimmed(self):
        d = self.sd(history_max_entries=1)
        first_day = daily_key(time.time())
        jids = [self.push_job("R", [i]) for i in range(3)]
        for j in jids:
            self.wait_done(d, "R", j)
        wait_for(lambda: self.counter(PROCESSED) == 3, message="3 runs")
        self.wait_settled(d)
        [(e, _)] = self.entries(ALL)
        self.assertEqual(e["jid"], jids[2])
        days = {first_day, daily_key(e["finished_at"])}     # two, across midnight UTC
        self.assertEqual(self.daily_sums(days).get(b"success"), 3)

    def test_sh13_conf_values_are_applied(self):
        d = self.sd(history_retention_days=2, history_max_entries=4,
                    history_daily_retention_days=10)
        now = self.now()
        seeded = {json.dumps({"jid": "aged-%d" % i}): now - 3 * DAY for i in range(2)}
        seeded.update({json.dumps({"jid": "kept-%d" % i}): now - (3 - i) * 3600
                       for i in range(3)})
        self.r.zadd(ALL, seeded)
        jids = [self.push_job("R", [i]) for i in range(2)]
        for j in jids:
            self.wait_done(d, "R", j)
        wait_for(lambda: self.counter(PROCESSED) == 2, message="2 runs")
        self.wait_settled(d)
        # retention 2 days: the aged ones went; max 4: of kept-0..2 + 2 runs, kept-0 went
        self.assertEqual([e["jid"] for e, _ in self.entries(ALL)],
                         ["kept-1", "kept-2", jids[0], jids[1]])
        [(e, _)] = self.entries(SUCCESS)[-1:]
        ttl = self.r.ttl(daily_key(e["finished_at"]))
        self.assertTrue(10 * DAY - 60 < ttl <= 10 * DAY, ttl)

    def test_history_off_when_retention_is_0_status_on(self):
        d = self.sd(history_retention_days=0)
        jid = self.push_job("R")
        self.wait_done(d, "R", jid)
        self.wait_status(jid, "complete")
        self.assertEqual(self.r.keys(b"cogworker:history:*"), [])


# ======================================================================================
# Bookkeeping faults with status and history on

class Faults(Bookkeeping):

    def test_px14_no_handler_status_failed_and_history_entry(self):
        d = self.sd()
        jid = self.push_job("Nobody", [1], retry=0)
        member, _ = self.wait_member(DEAD)
        self.assertEqual(loads(member)["error_class"], "Cogworker::NoHandler")
        st = self.wait_status(jid, "failed")
        self.assertEqual(st["error_class"], "Cogworker::NoHandler")
        [(e, _)] = self.wait_entries(FAILED_H, 1)
        self.assertEqual((e["jid"], e["error_class"]), (jid, "Cogworker::NoHandler"))
        self.wait_settled(d)

    def test_job_without_a_class_is_buried_and_writes_no_status(self):
        # A payload with no class is no job (doc/behaviours.md HD-1): buried as an invalid
        # job, never run, so no status record is started for it either.
        d = self.sd()
        jid = new_jid()
        self.push('{"args":[],"queue":"default","jid":"%s","retry":0}' % jid)
        member, _ = self.wait_member(DEAD)
        self.assertIn(b"Cogworker::InvalidJob", member)
        self.assertIn(b"not a job: no class", member)
        self.wait_settled(d)
        self.assertEqual(self.status(jid), {})

    def wrong_typed(self, cls, retry=None):
        """BE-1/BE-2 fixture: every record and lock of the job has the wrong type."""
        pjid = "ab" * 20
        p, jid = raw_job(cls, '["be",1]', retry=retry, unique="until_executed",
                         periodic_pjid=pjid)
        self.r.rpush(status_key(jid), b"wrong")
        for key in (ALL, SUCCESS, FAILED_H):
            self.r.set(key, b"wrong")
        self.r.set(daily_key(time.time()), b"wrong")
        self.r.rpush(("periodic:running:" + pjid).encode(), b"wrong")
        self.r.sadd(("cogworker:unique:" + canonical_digest(cls, "default", '["be",1]'))
                    .encode(), b"wrong")
        return p, jid

    def guarded(self):
        return self.daemon(url=self.guard_off_url(), handlers=self.handlers(), **ON)

    def test_be1_success_with_status_and_history_wrong_typed(self):
        d = self.guarded()
        p, jid = self.wrong_typed("R")
        self.push(p)
        self.wait_done(d, "R", jid)
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertEqual((self.wait_counter(PROCESSED, 1), self.counter(FAILED)), (1, 0))
        self.assertEqual((self.r.zcard(RETRY), self.r.zcard(DEAD), self.qlen()), (0, 0, 0))
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(d.log_lines("fail: R jid=%s" % jid), [])
        # the failures were the bookkeeping's, and only logged
        self.assertTrue(d.log_lines("Status:"), d.log())
        self.assertTrue(d.log_lines("History:"), d.log())
        self.assertEqual(self.r.type(status_key(jid)), b"list")

    def test_be2_failure_keeps_the_handlers_error(self):
        d = self.guarded()
        p, jid = self.wrong_typed("F", retry=3)
        self.push(p)
        member, _ = self.wait_member(RETRY)
        self.wait_settled(d)
        e = loads(member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(e["error_message"], "exit status 1: kaboom")
        self.assertEqual((self.r.zcard(DEAD), self.qlen(), d.runs_of(jid)), (0, 0, 1))
        self.assertTrue(d.log_lines("History:"), d.log())


# ======================================================================================
# Unique jobs through cogworkerctl push --unique (producer) and the daemon

class Ctl(Bookkeeping):

    def ctl(self, *args, conf=None, rc=None):
        env = dict(os.environ, REDIS_URL=self.server.url)
        argv = [binary("cogworkerctl")]
        if conf is not None:
            path = self.path("ctl.conf")
            with open(path, "w") as f:
                f.write("".join("%s = %s;\n" % (k, v) for k, v in conf.items()))
            argv += ["-c", path]
        res = subprocess.run(argv + list(args), env=env, capture_output=True, timeout=30)
        out, err = res.stdout.decode(), res.stderr.decode()
        if rc is not None:
            self.assertEqual(res.returncode, rc, (args, out, err))
        return res.returncode, out, err

    def push_unique(self, *args, rc=None, conf=None):
        return self.ctl("push", "--unique", *args, rc=rc, conf=conf)


class UniquePush(Ctl):

    def test_push_unique_twice_one_job_then_after_the_run_a_third_is_accepted(self):
        _, out, _ = self.push_unique("--json-args", '[1,"a"]', "G", rc=0)
        first = out.strip()
        rc, out, err = self.push_unique("--json-args", '[1,"a"]', "G")
        self.assertEqual(rc, 1, (out, err))
        self.assertIn("not pushed", err)
        self.assertEqual(out, "")
        self.assertEqual(self.qlen(), 1)
        lock = ("cogworker:unique:" + canonical_digest("G", "default", '[1,"a"]')).encode()
        self.assertEqual(self.r.get(lock), first.encode())
        d = self.sd()
        self.wait_runs(d, first)
        # still running: still refused
        self.push_unique("--json-args", '[1,"a"]', "G", rc=1)
        d.open_gate(first, 0)
        self.wait_done(d, "G", first)
        wait_for(lambda: not self.r.exists(lock), message="lock released after the run")
        _, out, _ = self.push_unique("--json-args", '[1,"a"]', "G", rc=0)
        third = out.strip()
        self.assertNotEqual(third, first)
        self.assertEqual(self.r.get(lock), third.encode())
        self.wait_runs(d, third)
        self.assertEqual(d.runs_of(first), 1)

    def test_lock_key_is_rubys_digest_and_the_daemon_finds_it(self):
        """The lock cogworkerctl takes is the key a Ruby client computes: SHA-1 of
        class|queue|JSON.generate(args) (recorded from Ruby 3.1 / json 2.6.1), whatever
        spelling the args are given in; the daemon releases exactly that key."""
        ruby = "b658ba27680dac7982a2601ba293837c3e84c437"
        spelled = ('[{"user": {"id": 42, "tags": ["a", "b"], "meta": {"z": 1, "a": null}}}, '
                   '[[1, [2, [3]]]], {}]')
        _, out, _ = self.push_unique("--queue", "critical", "--json-args", spelled,
                                     "Billing::Invoice", rc=0)
        jid = out.strip()
        lock = ("cogworker:unique:" + ruby).encode()
        self.assertEqual(self.r.get(lock), jid.encode())
        d = self.daemon(queues=["critical"], handlers=[
            {"class": "Billing::Invoice", "command": handler("ok")}])
        self.wait_done(d, "Billing::Invoice", jid)
        wait_for(lambda: not self.r.exists(lock), message="released by the daemon")

    def test_lock_ttl_includes_the_wait_until_due(self):
        conf = {"unique_lock_ttl": 100}
        self.push_unique("--in", "600", "R", conf=conf, rc=0)
        self.push_unique("--json-args", "[2]", "R", conf=conf, rc=0)
        later = ("cogworker:unique:" + canonical_digest("R", "default", "[]")).encode()
        now = ("cogworker:unique:" + canonical_digest("R", "default", "[2]")).encode()
        self.assertTrue(695 <= self.r.ttl(later) <= 700, self.r.ttl(later))
        self.assertTrue(95 <= self.r.ttl(now) <= 100, self.r.ttl(now))
        self.assertEqual(self.r.zcard(b"cogworker:schedule"), 1)

    def test_retryable_failure_keeps_the_lock_terminal_releases_it(self):
        d = self.sd(unique_lock_ttl=100)
        _, out, _ = self.push_unique("--retry", "1", "F", rc=0)
        jid = out.strip()
        lock = ("cogworker:unique:" + canonical_digest("F", "default", "[]")).encode()
        member, score = self.wait_member(RETRY)
        self.wait_settled(d)
        self.assertEqual(self.r.get(lock), jid.encode())
        self.assertAlmostEqual(self.r.ttl(lock), score - self.now() + 100, delta=5)
        self.push_unique("--retry", "1", "F", rc=1)          # still held while it retries
        self.graduate(member)
        self.wait_member(DEAD)
        wait_for(lambda: not self.r.exists(lock), message="released after the last failure")
        self.push_unique("--retry", "1", "F", rc=0)

    def test_a_failed_push_gives_its_lock_back(self):
        self.r.set(b"cogworker:queue:default", b"not a list")
        rc, _, err = self.push_unique("R")
        self.assertEqual(rc, 2, err)
        self.assertIn("WRONGTYPE", err)
        self.assertEqual(self.r.keys(b"cogworker:unique:*"), [])
        self.r.delete(b"cogworker:queue:default")
        self.push_unique("R", rc=0)
        self.assertEqual(self.qlen(), 1)

    def test_uj10_delete_or_kill_gives_the_lock_back_owner_checked(self):
        """A deleted queued or scheduled until_executed job left its lock for 24 h, and the
        same push was refused with no hint. Delete and kill release it, as a daemon does
        when a job dies; a lock another jid owns is left alone."""
        def lock(cls, args="[]"):
            return ("cogworker:unique:" + canonical_digest(cls, "default", args)).encode()
        queued = self.push_unique("Q", rc=0)[1].strip()
        scheduled = self.push_unique("--in", "600", "S", rc=0)[1].strip()
        killed = self.push_unique("--in", "600", "K", rc=0)[1].strip()
        other = self.push_unique("--in", "600", "O", rc=0)[1].strip()
        self.r.set(lock("O"), "f" * 24)                     # since taken by another jid
        _, out, _ = self.ctl("jobs", "delete", queued, rc=0)
        self.assertIn("; its lock released", out)
        self.assertIsNone(self.r.get(lock("Q")))
        res = json.loads(self.ctl("--json", "jobs", "delete", scheduled, rc=0)[1])
        self.assertEqual(res["results"][0]["locks_released"], 1)
        self.assertIsNone(self.r.get(lock("S")))
        _, out, _ = self.ctl("jobs", "kill", killed, rc=0)
        self.assertIn("scheduled -> dead; its lock released", out)
        self.assertIsNone(self.r.get(lock("K")))
        _, out, _ = self.ctl("jobs", "delete", other, rc=0)
        self.assertNotIn("lock released", out)
        self.assertEqual(self.r.get(lock("O")), b"f" * 24)
        for cls in ("Q", "S", "K"):                         # the same push is taken again
            self.push_unique(cls, rc=0)
        # a periodic job's running lock goes the same way
        pjid = "a" * 40
        payload = json.dumps({"class": "P", "args": [], "queue": "default", "jid": "b" * 24,
                              "periodic_pjid": pjid, "periodic_until_executed": True})
        self.r.zadd(b"cogworker:schedule", {payload: time.time() + 600})
        self.r.set("periodic:running:" + pjid, "b" * 24)
        self.assertIn("its lock released", self.ctl("jobs", "delete", "b" * 24, rc=0)[1])
        self.assertIsNone(self.r.get("periodic:running:" + pjid))

    def test_uj11_a_refused_push_names_the_holder_and_where_it_is(self):
        held = self.push_unique("--at", "1798761600", "G", rc=0)[1].strip()
        _, out, err = self.push_unique("G", rc=1)
        self.assertEqual(out, "")
        self.assertIn("jid %s, scheduled for 2027-01-01T00:00:00Z" % held, err)
        self.assertIn("cogworkerctl jobs delete %s" % held, err)
        queued = self.push_unique("H", rc=0)[1].strip()
        res = json.loads(self.ctl("--json", "push", "--unique", "H", rc=1)[1])
        self.assertEqual(res, {"jid": None, "skipped": "unique lock held", "held_by": queued,
                               "held_where": "queued on default"})
        # a lock whose job is nowhere (its process lost it): said, with what is left of it
        key = ("cogworker:unique:" + canonical_digest("L", "default", "[]")).encode()
        self.r.set(key, "c" * 24, ex=3600)
        _, _, err = self.push_unique("L", rc=1)
        self.assertIn("jid %s, in no queue or set" % ("c" * 24), err)
        self.assertIn(key.decode(), err)
        self.assertRegex(err, r"expires in (59m|1h)")

    def test_status_queued_then_working(self):
        conf = {"status_expiration": 600}
        _, out, _ = self.push_unique("G", conf=conf, rc=0)
        jid = out.strip()
        st = self.status(jid)
        self.assertEqual((st["status"], st["class"], st["queue"]), ("queued", "G", "default"))
        d = self.sd()
        self.wait_runs(d, jid)
        self.wait_status(jid, "working")
        d.open_gate(jid, 0)
        self.wait_status(jid, "complete")


# ======================================================================================
# cogworkerctl jobs show (status) and history

class CtlViews(Ctl):

    def test_jobs_show_includes_the_status_and_progress(self):
        progress = {"class": "P", "command": sh(
            'echo "$COGWORKER_JID" >> "$RUNS"; echo "cogworker:progress 42 halfway"; '
            'while [ ! -f "$GATES/$COGWORKER_JID" ]; do sleep 0.05; done')}
        d = self.sd(extra=[progress])
        jid = self.push_job("P", ["a"])
        wait_for(lambda: self.status(jid).get("pct") == "42", message="progress")
        # "running" is the workers entry, written within a second of the start (batch.c)
        wait_for(lambda: self.r.hlen("cogworker:workers:" + d.identity) == 1,
                 message="the workers entry")
        self.r.hset(status_key(jid), "custom", "yes")
        _, out, _ = self.ctl("jobs", "show", jid, rc=0)
        self.assertRegex(out, r"status +working, updated \d{4}-\d\d-\d\dT")
        self.assertIn("progress   42% halfway", out)
        self.assertIn("custom = yes", out)
        _, out, _ = self.ctl("--json", "jobs", "show", jid, rc=0)
        shown = json.loads(out)
        self.assertEqual(shown["status"], self.status(jid))
        self.assertEqual(shown["locations"][0]["set"], "running")
        d.open_gate(jid, 0)
        self.wait_status(jid, "complete")
        self.wait_settled(d)
        wait_for(lambda: self.r.hlen("cogworker:workers:" + d.identity) == 0,
                 message="the workers entry gone")
        # finished: found by its status alone
        _, out, _ = self.ctl("jobs", "show", jid, rc=0)
        self.assertIn("status     complete", out)
        self.assertIn("class      P", out)
        shown = json.loads(self.ctl("--json", "jobs", "show", jid, rc=0)[1])
        self.assertEqual((shown["jid"], shown["locations"], shown["status"]["status"]),
                         (jid, [], "complete"))
        # a jid with neither a job nor a status
        _, _, err = self.ctl("jobs", "show", new_jid(), rc=1)
        self.assertIn("no job", err)

    def test_jobs_show_failure_status_and_no_status_when_off(self):
        d = self.sd()
        jid = self.push_job("F", retry=3)
        self.wait_member(RETRY)
        self.wait_status(jid, "retrying")
        _, out, _ = self.ctl("jobs", "show", jid, rc=0)
        self.assertIn("status     retrying", out)
        self.assertIn("error    Cogworker::HandlerFailed: exit status 1: kaboom", out)
        self.wait_settled(d)
        self.r.delete(status_key(jid))
        shown = json.loads(self.ctl("--json", "jobs", "show", jid, rc=0)[1])
        self.assertIsNone(shown["status"])
        self.assertEqual(shown["locations"][0]["set"], "retry")

    def run_some(self):
        d = self.sd()
        ok = [self.push_job("R", [i]) for i in range(2)]
        bad = self.push_job("F", ["b"], retry=0)
        other = self.push_job("Q", retry=0)
        self.wait_entries(ALL, 4)
        self.wait_settled(d)
        return ok, bad, other

    def test_history_lists_runs_newest_first(self):
        ok, bad, other = self.run_some()
        _, out, _ = self.ctl("history", rc=0)
        lines = out.splitlines()
        self.assertTrue(lines[0].startswith("FINISHED"), out)
        order = [l for l in lines[1:5]]
        for line, jid in zip(order, [other, bad, ok[1], ok[0]]):
            self.assertIn(jid, line)
        self.assertIn("exit status 1: kaboom", order[1])
        self.assertIn("failed", order[1])
        self.assertIn("success", order[3])
        self.assertRegex(out, r"per day \(UTC, all classes\):\nDAY +SUCCESS +FAILED\n")
        # one row per day since the oldest run shown: two if the runs crossed midnight UTC
        rows = re.findall(r"^(\d{4}-\d\d-\d\d) +(\d+) +(\d+)$",
                          out.split("per day", 1)[1], re.M)
        self.assertIn(len(rows), (1, 2), out)
        self.assertEqual((sum(int(r[1]) for r in rows), sum(int(r[2]) for r in rows)),
                         (2, 2), out)

    def test_history_json_is_the_stored_entries(self):
        ok, bad, other = self.run_some()
        shown = json.loads(self.ctl("--json", "history", rc=0)[1])
        stored = [loads(m) for m in reversed(self.r.zrange(ALL, 0, -1))]
        self.assertEqual(shown["runs"], stored)
        self.assertEqual([r["jid"] for r in shown["runs"]], [other, bad, ok[1], ok[0]])
        days = shown["daily"]                   # two if the runs crossed midnight UTC
        self.assertIn(len(days), (1, 2), days)
        self.assertEqual((sum(d["success"] for d in days), sum(d["failed"] for d in days)),
                         (2, 2))

    def test_history_filters(self):
        ok, bad, other = self.run_some()

        def jids(*args):
            return [r["jid"] for r in json.loads(self.ctl("--json", "history", *args,
                                                          rc=0)[1])["runs"]]
        self.assertEqual(jids("--status", "failed"), [other, bad])
        self.assertEqual(jids("--status", "success"), [ok[1], ok[0]])
        self.assertEqual(jids("--class", "R"), [ok[1], ok[0]])
        self.assertEqual(jids("--class", "F", "--status", "failed"), [bad])
        self.assertEqual(jids("--class", "F", "--status", "success"), [])
        self.assertEqual(jids("--limit", "1"), [other])
        self.assertEqual(jids("--class", "R", "--limit", "1"), [ok[1]])
        self.assertEqual(len(jids("--limit", "0")), 4)
        self.assertEqual(len(jids("--since", "1h")), 4)
        self.assertEqual(len(jids("--since", "2020-01-01")), 4)
        self.assertEqual(jids("--since", "%d" % (self.now() + 60)), [])
        # an entry from two days ago is outside --since 1d but inside 3d
        old = json.dumps({"jid": "old", "class": "R", "status": "success"})
        self.r.zadd(ALL, {old: self.now() - 2 * DAY})
        self.assertNotIn("old", jids("--since", "1d"))
        self.assertEqual(jids("--since", "3d")[-1], "old")

    def test_history_empty_and_usage_errors(self):
        _, out, _ = self.ctl("history", rc=0)
        self.assertIn("no runs recorded (history is written by daemons with "
                      "history_retention_days > 0)", out)
        for bad in (["--status", "dead"], ["--since", "yesterday"], ["--limit", "-1"],
                    ["extra"]):
            rc, _, err = self.ctl("history", *bad)
            self.assertEqual(rc, 2, bad)
            self.assertTrue(err.startswith("cogworkerctl: history"), err)


if __name__ == "__main__":
    import unittest
    unittest.main()

# SPDX-License-Identifier: MIT
"""DH — on_death (doc/behaviours.md §15).

DH-6, DH-7 and DH-9 need the reconcile step (a filing completed after a Redis fault); they
are skipped while the daemon has none. DH-11's `cogworkerctl` delete/retry half belongs to
the cogworkerctl issue (only `push` exists yet) and is not tested here.

Run: python3 tests/integration/run.py test_on_death
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job, wait_for  # noqa: E402
from runkit import (DEAD, NEEDS_RECONCILE, RETRY, JobTestCase, canonical_digest,  # noqa: E402
                    capture_cmd, loads, order_cmd, parse_records, recorder_cmd, sh)

FAST_RECONCILE = {"orphan_check_interval": 2, "poll_interval": 1}


class OnDeath(JobTestCase):

    def test_dh1_handler_first_then_globals_in_conf_order(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail"),
                                   "on_death": order_cmd(order, "handler")}],
                        on_death=[order_cmd(order, "global-1"), order_cmd(order, "global-2")])
        self.push(job("F", retry=False))
        self.wait_member(DEAD)
        wait_for(lambda: self.read(order) == b"handler\nglobal-1\nglobal-2\n", timeout=5,
                 message="three on_death commands in order")
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertEqual(self.read(order), b"handler\nglobal-1\nglobal-2\n")

    def test_dh1_single_global_command_form(self):
        """`on_death = [ "cmd", "arg" ]` (one command, not a list of them)."""
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}],
                        on_death=order_cmd(order, "only"))
        self.push(job("F", retry=False))
        wait_for(lambda: self.read(order) == b"only\n", timeout=10, message="on_death")
        self.wait_settled(d)

    def test_dh2_failing_commands_do_not_stop_the_others_nor_change_the_outcome(self):
        rec = self.path("deaths")
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail"),
                                   "on_death": sh("cat >/dev/null; exit 1")}],
                        on_death=[sh("exit 1"), recorder_cmd(rec, self.server)])
        p = job("F", ["z"], retry=False, unique="until_executed")
        jid = loads(p)["jid"]
        lock = ("cogworker:unique:" + canonical_digest("F", "default", '["z"]')).encode()
        self.r.set(lock, jid, ex=3600)
        self.push(p)
        dead, _ = self.wait_member(DEAD)
        wait_for(lambda: parse_records(self.read(rec)), timeout=10, message="recorder ran")
        self.wait_settled(d)
        self.assertFalse(self.r.exists(lock))
        lines = d.wait_log("death handler failed for jid=%s" % jid, count=2, timeout=10)
        self.assertTrue(lines)
        self.assertEqual(len(d.log_lines("death handler failed for jid=%s" % jid)), 2)
        recs = parse_records(self.read(rec))
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["entry"].encode(), dead)
        self.assertEqual(self.r.zcard(DEAD), 1)
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_dh2_command_that_cannot_be_executed(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail"),
                                   "on_death": [self.path("no-such-command")]}],
                        on_death=[order_cmd(order, "global")])
        p = self.push(job("F", retry=False))
        jid = loads(p)["jid"]
        wait_for(lambda: self.read(order) == b"global\n", timeout=10, message="global ran")
        d.wait_log("death handler failed for jid=%s" % jid, timeout=10)
        self.wait_settled(d)

    def test_dh3_stdin_is_the_dead_member_byte_for_byte_each_its_own_copy(self):
        a, b = self.path("a"), self.path("b")
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail"),
                                   "on_death": capture_cmd(a)}],
                        on_death=[capture_cmd(b)])
        args = '[12345678901234567890,1.5e300,"\u00e9\\n\\u0001\\"/"]'
        p = ('{"class":"F","args":%s,"queue":"default","jid":"%s","retry":false,'
             '"created_at":1767225600.25}' % (args, "1" * 24))
        self.push(p)
        dead, _ = self.wait_member(DEAD)
        wait_for(lambda: self.read(a) == dead and self.read(b) == dead, timeout=10,
                 message="both commands got the dead member")
        self.assertIsInstance(loads(dead)["failed_at"], float)
        self.assertIn(b'"args":' + args.encode() + b",", dead)
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertEqual(self.read(a), dead)    # once each
        self.assertEqual(self.read(b), dead)

    def test_dh4_runs_after_the_job_is_settled(self):
        rec = self.path("deaths")
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}],
                        on_death=[recorder_cmd(rec, self.server)])
        self.push(job("F", retry=False))
        wait_for(lambda: parse_records(self.read(rec)), timeout=10, message="recorder ran")
        r = parse_records(self.read(rec))[0]
        self.assertEqual(r["inprogress"], "0")
        self.assertEqual(r["dead"], "1")
        self.wait_settled(d)

    def test_dh5_hung_command_killed_at_its_timeout_daemon_carries_on(self):
        started, pids = self.path("started"), self.path("pids")
        hang = sh('echo x >> "$1"; echo $$ >> "$2"; trap "" TERM; sleep 120 & echo $! >> "$2"; '
                  'wait; sleep 120', started, pids)
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")},
                                  {"class": "R", "command": handler("ok")}],
                        on_death=[hang], on_death_timeout=1)
        p = self.push(job("F", retry=False))
        jid = loads(p)["jid"]
        t0 = time.monotonic()
        d.wait_log("death handler failed for jid=%s" % jid, timeout=15)
        self.assertLess(time.monotonic() - t0, 12)
        procs = [int(x) for x in self.read(pids).split()]
        wait_for(lambda: all(self.pid_gone(x) for x in procs), timeout=5,
                 message="the hung on_death command and its child are gone")
        self.assertEqual(self.read(started), b"x\n")
        self.assertEqual(self.r.zcard(DEAD), 1)
        q = self.push(job("R"))
        self.wait_done(d, "R", loads(q)["jid"])
        self.wait_settled(d)
        self.assertEqual(self.read(started), b"x\n")
        self.assertEqual(self.r.zcard(DEAD), 1)

    def test_dh8_none_for_unparseable(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "R", "command": handler("ok")}],
                        on_death=[order_cmd(order, "global")])
        self.push(b"{broken")
        self.push(b"[]")
        p = self.push(job("R"))
        self.wait_member(DEAD, count=2)
        self.wait_done(d, "R", loads(p)["jid"])
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertIsNone(self.read(order))

    def test_dh10_no_handler_only_global_commands(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "Other", "command": handler("ok"),
                                   "on_death": order_cmd(order, "other")},
                                  {"class": "F", "command": handler("fail"),
                                   "on_death": order_cmd(order, "f")}],
                        on_death=[order_cmd(order, "global")])
        self.push(job("Nobody", retry=False))
        self.wait_member(DEAD)
        wait_for(lambda: self.read(order) == b"global\n", timeout=5, message="global only")
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertEqual(self.read(order), b"global\n")

    def test_dh10_wildcard_handler_on_death_runs_for_unknown_class(self):
        """A class served by the `*` handler has that handler: its on_death runs first."""
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "*", "command": handler("fail"),
                                   "on_death": order_cmd(order, "wildcard")}],
                        on_death=[order_cmd(order, "global")])
        self.push(job("Whatever", retry=False))
        wait_for(lambda: self.read(order) == b"wildcard\nglobal\n", timeout=10,
                 message="wildcard then global")
        self.wait_settled(d)

    def test_dh11_none_for_discard_or_retry(self):
        order = self.path("order")
        d = self.daemon(handlers=[{"class": "X", "command": handler("exit", 4),
                                   "discard_exit_codes": [4],
                                   "on_death": order_cmd(order, "x")},
                                  {"class": "F", "command": handler("fail"),
                                   "on_death": order_cmd(order, "f")}],
                        on_death=[order_cmd(order, "global")])
        x = loads(self.push(job("X", retry=5)))["jid"]
        self.push(job("F", retry=5))
        self.wait_member(RETRY)
        wait_for(lambda: self.attempts(x), timeout=10, message="discard recorded")
        self.wait_settled(d)
        time.sleep(0.5)
        self.assertIsNone(self.read(order))
        self.assertEqual(self.r.zcard(DEAD), 0)

    def test_on_death_gets_no_daemon_secrets_in_env(self):
        """on_death commands get the allow-listed environment only, like handlers."""
        envfile = self.path("env")
        d2 = self.daemon(start=False, handlers=[{"class": "F", "command": handler("fail")}],
                         on_death=[sh('cat >/dev/null; env > "$1"', envfile)])
        d2.start(env={"SECRET_TOKEN": "hunter2"})
        self.push(job("F", retry=False))
        wait_for(lambda: self.read(envfile), timeout=10, message="on_death env")
        self.assertNotIn(b"hunter2", self.read(envfile))
        self.wait_settled(d2)


class FiledLater(JobTestCase):
    """Deaths filed after a fault: the interrupt path and pending filings (reconcile)."""

    @NEEDS_RECONCILE
    def test_dh6_interrupted_into_dead_recorder_once(self):
        rec = self.path("deaths")
        d = self.daemon(handlers=[{"class": "G", "command": handler("gate")}],
                        on_death=[recorder_cmd(rec, self.server)], **FAST_RECONCILE)
        p = self.push(job("G", retry=3, interrupted_count=3))
        jid = loads(p)["jid"]
        self.wait_runs(d, jid)
        self.ro_on()
        d.open_gate(jid, 1)
        time.sleep(3)
        self.ro_off()
        dead, _ = self.wait_member(DEAD, timeout=65)
        wait_for(lambda: parse_records(self.read(rec)), timeout=65, message="recorder ran")
        time.sleep(5)                        # more reconciles: still once
        recs = parse_records(self.read(rec))
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["entry"].encode(), dead)
        self.assertEqual(recs[0]["dead"], "1")
        self.assertEqual(d.runs_of(jid), 1)

    @NEEDS_RECONCILE
    def test_dh7_dh9_no_on_death_while_unfiled_then_once_with_original_error(self):
        """RC-6 with a recorder: `cogworker:dead` is a string (guard off), so the dead
        filing fails and stays pending; no on_death meanwhile. Once the key is fixed the
        next reconcile files it, and on_death runs once with the original error."""
        rec = self.path("deaths")
        url = self.guard_off_url()
        self.r.set(DEAD, b"not a zset")
        d = self.daemon(url=url, handlers=[{"class": "F", "command": handler("fail")}],
                        on_death=[recorder_cmd(rec, self.server)], **FAST_RECONCILE)
        p = self.push(job("F", retry=False))
        jid = loads(p)["jid"]
        self.wait_runs(d, jid)
        time.sleep(8)                        # several reconciles (every 2 s)
        self.assertEqual(len(self.inprogress(d)), 1)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertIsNone(self.read(rec))
        self.r.delete(DEAD)
        dead, _ = self.wait_member(DEAD, timeout=65)
        wait_for(lambda: parse_records(self.read(rec)), timeout=65, message="recorder ran")
        self.wait_settled(d, timeout=65)
        time.sleep(5)
        recs = parse_records(self.read(rec))
        self.assertEqual(len(recs), 1)
        e = loads(recs[0]["entry"])
        self.assertEqual(recs[0]["entry"].encode(), dead)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", e["error_message"])
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(self.r.zcard(DEAD), 1)

    def test_dh9_filing_completed_at_stop_carries_the_original_error(self):
        """The same pending dead filing completed by the stop instead of a reconcile."""
        rec = self.path("deaths")
        url = self.guard_off_url()
        self.r.set(DEAD, b"not a zset")
        d = self.daemon(url=url, handlers=[{"class": "F", "command": handler("fail")}],
                        on_death=[recorder_cmd(rec, self.server)])
        p = self.push(job("F", retry=False))
        jid = loads(p)["jid"]
        self.wait_runs(d, jid)
        d.wait_log("couldn't file failed job jid=%s" % jid, timeout=10)
        self.assertEqual(len(self.inprogress(d)), 1)
        self.assertIsNone(self.read(rec))
        self.r.delete(DEAD)
        self.assertEqual(d.stop(), 0)
        members = self.members(DEAD)
        self.assertEqual(len(members), 1)
        recs = parse_records(self.read(rec))
        self.assertEqual(len(recs), 1)
        self.assertEqual(recs[0]["entry"].encode(), members[0][0])
        e = loads(members[0][0])
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", e["error_message"])
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(self.r.llen(b"cogworker:unsettled"), 0)
        self.assertEqual(d.runs_of(jid), 1)

    def test_rc8_unfileable_death_parked_at_stop_no_on_death(self):
        """RC-8, first half: still unfileable at stop → one unsettled record, the job on
        no queue and not in progress, no on_death run by this process."""
        rec = self.path("deaths")
        url = self.guard_off_url()
        self.r.set(DEAD, b"not a zset")
        d = self.daemon(url=url, handlers=[{"class": "F", "command": handler("fail")}],
                        on_death=[recorder_cmd(rec, self.server)])
        p = self.push(job("F", retry=False))
        jid = loads(p)["jid"]
        self.wait_runs(d, jid)
        d.wait_log("couldn't file failed job jid=%s" % jid, timeout=10)
        self.assertEqual(d.stop(), 0)
        recs = self.r.lrange(b"cogworker:unsettled", 0, -1)
        self.assertEqual(len(recs), 1)
        record = loads(recs[0])
        self.assertEqual(record["set"], "cogworker:dead")
        self.assertIsInstance(record["score"], (int, float))
        payload = loads(record["payload"])
        self.assertEqual(payload["jid"], jid)
        self.assertEqual(payload["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(self.inprogress(d), [])
        self.assertEqual(self.qlen(), 0)
        self.assertIsNone(self.read(rec))


if __name__ == "__main__":
    import unittest
    unittest.main()

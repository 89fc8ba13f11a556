# SPDX-License-Identifier: MIT
"""PX — running a job (doc/behaviours.md §13), and the issue's "must hold" checks on a failing
handler, `retry: false` and byte fidelity of args.

The [FAULT] scenarios with wrong-typed keys (PX-9 … PX-13) are in
test_bookkeeping_faults.py. PX-15 is a unit scenario. The status/history half of PX-14 is
not implemented yet (SH) and not tested here.

Run: python3 tests/integration/run.py test_run
"""

import os
import shutil
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job, wait_for  # noqa: E402
from runkit import (DEAD, FAILED, PROCESSED, RETRY, JobTestCase, loads,  # noqa: E402
                    recorder_cmd, sh)


class MustHold(JobTestCase):
    """The checks the issue lists under "What must hold on main"."""

    def test_exit_1_goes_to_retry_with_count_class_and_stderr(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        p = self.push(job("F", ["x"]))         # no retry key: the default budget (25)
        jid = loads(p)["jid"]
        member, _ = self.wait_member(RETRY)
        e = loads(member)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", e["error_message"])
        self.assertTrue(e["error_message"].startswith("exit status 1"), e["error_message"])
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(d.runs_of(jid), 1)

    def test_retry_false_goes_to_dead(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        p = self.push(job("F", ["x"], retry=False))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(DEAD)
        e = self.assert_failure_entry(p, member)
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("kaboom", e["error_message"])
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(d.runs_of(jid), 1)

    def test_big_numbers_and_control_characters_byte_for_byte(self):
        """args [9007199254740993, 12345678901234567890, "é\\n\\u0001"] reach the handler's
        stdin and the retry entry byte for byte."""
        dump_and_fail = sh('"$1"; echo kaboom >&2; exit 1', handler("dump")[0])
        d = self.daemon(handlers=[{"class": "B", "command": dump_and_fail}])
        jid = "0123456789abcdef01234567"
        args = '[9007199254740993,12345678901234567890,"\u00e9\\n\\u0001"]'
        p = ('{"class":"B","args":%s,"queue":"default","jid":"%s","retry":3,'
             '"created_at":1767225600.1,"enqueued_at":1767225600.1}' % (args, jid)).encode()
        self.push(p)
        member, _ = self.wait_member(RETRY)
        stdin = self.read(d.runs + ".d/" + jid + ".stdin")
        self.assertEqual(stdin, p)
        self.assertIn(b'"args":' + args.encode() + b",", member)
        self.assert_failure_entry(p, member)
        env = self.read(d.runs + ".d/" + jid + ".env").decode("utf-8")
        self.assertIn("COGWORKER_ARGS=" + args + "\n", env)


class Running(JobTestCase):

    def test_px1_stdin_environment_counters_and_log(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("dump")}])
        b0 = self.bucket()
        p = self.push(job("R", [1, "two"]))
        jid = loads(p)["jid"]
        self.wait_done(d, "R", jid)
        self.wait_settled(d)
        out = d.runs + ".d/" + jid
        self.assertEqual(self.read(out + ".stdin"), p)
        env = dict(l.split("=", 1) for l in self.read(out + ".env").decode().splitlines())
        self.assertEqual(env["COGWORKER_JID"], jid)
        self.assertEqual(env["COGWORKER_CLASS"], "R")
        self.assertEqual(env["COGWORKER_QUEUE"], "default")
        self.assertEqual(env["COGWORKER_RETRY_COUNT"], "0")
        self.assertEqual(env["COGWORKER_ARGS"], '[1,"two"]')
        self.assertEqual(self.wait_counter(PROCESSED, 1), 1)
        self.assertEqual(self.counter(FAILED), 0)
        buckets = {b0, self.bucket()}
        processed = self.wait_processed_field(buckets, 1)
        self.assertEqual(processed, 1)
        self.assertTrue(all(self.r.hget(b, "failed") is None for b in buckets))
        self.assertEqual(len(d.log_lines("start: R jid=%s" % jid)), 1)
        self.assertEqual(len(d.log_lines("done: R jid=%s" % jid)), 1)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD) + self.qlen(), 0)

    def test_px1_retry_count_env_from_payload(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("dump")}])
        p = self.push(job("R", [], retry=5, retry_count=3))
        jid = loads(p)["jid"]
        self.wait_done(d, "R", jid)
        env = self.read(d.runs + ".d/" + jid + ".env").decode()
        self.assertIn("COGWORKER_RETRY_COUNT=3\n", env)
        self.assertIn("COGWORKER_ARGS=[]\n", env)

    def test_args_too_big_for_the_environment_still_run(self):
        """Args beyond what one environment string may hold (execve's 128 KiB limit per
        string): the job still runs, with the whole payload on stdin; COGWORKER_ARGS is
        left out rather than the exec failing with E2BIG on every attempt."""
        d = self.daemon(handlers=[{"class": "R", "command": handler("dump")}])
        big = self.push(job("R", ["y" * 200000]))
        small = self.push(job("R", ["z" * 100000]))
        for p in (big, small):
            self.wait_done(d, "R", loads(p)["jid"])
        self.wait_settled(d)
        out = d.runs + ".d/"
        self.assertEqual(self.read(out + loads(big)["jid"] + ".stdin"), big)
        env = self.read(out + loads(big)["jid"] + ".env")
        self.assertIn(b"COGWORKER_JID=" + loads(big)["jid"].encode(), env)
        self.assertNotIn(b"COGWORKER_ARGS=", env)
        env = self.read(out + loads(small)["jid"] + ".env")
        self.assertIn(b'COGWORKER_ARGS=["' + b"z" * 100000 + b'"]\n', env)
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)
        self.assertEqual(self.wait_counter(PROCESSED, 2), 2)

    def test_px2_args_as_argv(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("dump") + ["first"],
                                   "args_as_argv": True}])
        p = self.push(job("R", [1, "two", {"k": [2.5]}, "with space"]))
        jid = loads(p)["jid"]
        self.wait_done(d, "R", jid)
        argv = self.read(d.runs + ".d/" + jid + ".argv").decode().split("\n")
        self.assertEqual(argv[:-1], ["first", "1", "two", '{"k":[2.5]}', "with space"])

    def test_px3_numbers_unchanged_in_env_stdin_and_retry_entry(self):
        dump_and_fail = sh('"$1"; echo kaboom >&2; exit 1', handler("dump")[0])
        d = self.daemon(handlers=[{"class": "N", "command": dump_and_fail}])
        args = '[12345678901234567890,1.5e300,0.1,"\u00e9"]'
        jid = "abcdefabcdefabcdefabcdef"
        p = ('{"class":"N","args":%s,"queue":"default","jid":"%s","retry":3,'
             '"created_at":1767225600.5,"enqueued_at":1767225600.5}' % (args, jid)).encode()
        self.push(p)
        member, _ = self.wait_member(RETRY)
        out = d.runs + ".d/" + jid
        self.assertEqual(self.read(out + ".stdin"), p)
        self.assertIn(("COGWORKER_ARGS=" + args + "\n").encode(), self.read(out + ".env"))
        self.assertIn(b'"args":' + args.encode() + b",", member)
        self.assert_failure_entry(p, member)

    def test_px4_unparseable_payload_buried_and_next_job_runs(self):
        rec = self.path("deaths")
        d = self.daemon(handlers=[{"class": "R", "command": handler("ok")}],
                        on_death=[recorder_cmd(rec, self.server)])
        self.push(b"{not json")
        p = self.push(job("R"))
        jid = loads(p)["jid"]
        member, score = self.wait_member(DEAD)
        e = loads(member)
        self.assertEqual(e["class"], "(unparseable)")
        self.assertEqual(e["queue"], "default")
        self.assertEqual(e["error_class"], "JSON::ParserError")
        self.assertEqual(e["raw_payload"], "{not json")
        self.assertIs(e["retry"], False)
        self.assertEqual(e["args"], [])
        self.assertEqual(e["retry_count"], 0)
        self.assertRegex(e["jid"], r"^[0-9a-f]{24}$")
        self.assertNotEqual(e["jid"], jid)
        self.assertIsInstance(e["failed_at"], float)
        self.assertIsInstance(e["enqueued_at"], float)
        self.assertTrue(e["error_message"])
        self.assertAlmostEqual(score, self.now(), delta=10)
        self.wait_done(d, "R", jid)
        self.wait_settled(d)
        self.assertEqual(self.counter(FAILED), 1)
        self.assertEqual(self.wait_counter(PROCESSED, 1), 1)
        self.assertEqual(self.qlen(), 0)
        self.assertEqual(self.r.zcard(DEAD), 1)
        time.sleep(0.5)
        self.assertIsNone(self.read(rec), "on_death ran for an unparseable payload")

    def test_px4_json_that_is_not_an_object_is_buried(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("ok")}])
        self.push(b'["an","array"]')
        self.push(b'"a string"')
        got = self.wait_member(DEAD, count=2)
        raws = sorted(loads(m)["raw_payload"] for m, _ in got)
        self.assertEqual(raws, ['"a string"', '["an","array"]'])
        for m, _ in got:
            e = loads(m)
            self.assertEqual(e["class"], "(unparseable)")
            self.assertIn(e["error_class"], ("Cogworker::InvalidJob", "JSON::ParserError"))
        self.wait_settled(d)
        self.assertEqual(self.counter(FAILED), 2)

    def test_px4_invalid_json_that_lax_parsers_accept_is_buried_not_run(self):
        """Text Ruby's JSON parser rejects is unparseable here too, even where a lax parser
        (cJSON) reads it: leading zeros, raw control characters in a string, trailing
        garbage (also after a NUL byte). None of them runs its handler."""
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        bad = [b'{"class":"F","args":[01],"queue":"default","jid":"%s","retry":3}',
               b'{"class":"F","args":["a\tb"],"queue":"default","jid":"%s","retry":3}',
               b'{"class":"F","args":[],"queue":"default","jid":"%s","retry":3} x',
               b'{"class":"F","args":[],"queue":"default","jid":"%s","retry":3}\x00x',
               b'{"class":"F","args":[],"queue":"default","jid":"%s","retry":3,}']
        jids = ["%024x" % (i + 1) for i in range(len(bad))]
        raws = [b % j.encode() for b, j in zip(bad, jids)]
        for raw in raws:
            self.push(raw)
        got = self.wait_member(DEAD, count=len(raws))
        self.wait_settled(d)
        wrappers = [loads(m) for m, _ in got]
        self.assertEqual(sorted(w["raw_payload"] for w in wrappers),
                         sorted(r.decode() for r in raws))
        for w in wrappers:
            self.assertEqual(w["class"], "(unparseable)")
            self.assertEqual(w["error_class"], "JSON::ParserError")
            self.assertNotIn(w["jid"], jids)
        self.assertEqual(self.r.zcard(RETRY), 0)
        for jid in jids:
            self.assertEqual(d.runs_of(jid), 0)
        # whitespace around the object is valid JSON: that job runs
        p = b'  {"class":"F","args":[1] ,"queue":"default","jid":"%s","retry":3}\n' % (b"f" * 24)
        self.push(p)
        member, _ = self.wait_member(RETRY)
        self.assertTrue(member.startswith(p.rstrip()[:-1]), member)
        self.assertEqual(d.runs_of("f" * 24), 1)

    def test_px4_unparseable_raw_payload_scrubbed_and_bounded(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("ok")}])
        self.push(b"\xff\xfe{oops \xc3")
        self.push(b"[" + b'"\xc3\xa9",' * 60000)        # 120 000 characters, unterminated
        got = self.wait_member(DEAD, count=2)
        self.wait_settled(d)
        for m, _ in got:
            m.decode("utf-8")
            e = loads(m)
            self.assertLessEqual(len(e["raw_payload"]), 100000)
            self.assert_valid_message(e["error_message"])
        raws = sorted((loads(m)["raw_payload"] for m, _ in got), key=len)
        self.assertEqual(raws[0], "\ufffd\ufffd{oops \ufffd")
        self.assertTrue(raws[1].startswith('["\u00e9","\u00e9",'))
        self.assertGreater(len(raws[1]), 90000)

    def test_px5_survives_redis_down_and_keeps_its_capacity(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("ok")},
                                  {"class": "S", "command": handler("slow", 8)}],
                        concurrency=3, heartbeat_interval=1)
        p0 = self.push(job("R"))
        self.wait_done(d, "R", loads(p0)["jid"])
        self.server.pause()
        try:
            time.sleep(10)
        finally:
            self.server.resume()
        self.assertIsNone(d.proc.poll(), "daemon exited during the outage")
        p = self.push(job("R"))
        self.wait_done(d, "R", loads(p)["jid"], timeout=30)
        slow = [self.push(job("S")) for _ in range(3)]
        presence = ("cogworker:process:" + d.identity).encode()
        wait_for(lambda: self.r.hget(presence, "busy") == b"3", timeout=8,
                 message="busy = 3 in the presence hash")
        for s in slow:
            self.wait_runs(d, loads(s)["jid"], 1, timeout=2)
        self.assertEqual(self.qlen(), 0)

    def test_px6_invalid_utf8_in_stderr_scrubbed(self):
        d = self.daemon(handlers=[{"class": "U", "command": handler("badutf8")}])
        p = self.push(job("U", retry=3))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(RETRY)
        member.decode("utf-8")            # strict: valid UTF-8
        e = loads(member)
        self.assertIn("bad \ufffd", e["error_message"])
        self.assert_valid_message(e["error_message"])
        self.wait_settled(d)
        self.assertEqual(d.runs_of(jid), 1)
        self.assertEqual(self.r.zcard(RETRY), 1)

    def _long_stderr(self, output_tail=None):
        # 50 000 characters (100 000 bytes: two-byte characters), then a marker, exit 1.
        script = ('i=0; s=$(printf "%0500d" 0 | sed "s/0/\u00e9/g"); '
                  'while [ $i -lt 100 ]; do printf "%s" "$s" >&2; i=$((i+1)); done; '
                  'printf "THE-END" >&2; exit 1')
        h = {"class": "L", "command": sh(script)}
        if output_tail:
            h["output_tail"] = output_tail
        d = self.daemon(handlers=[h])
        self.push(job("L", retry=3))
        member, _ = self.wait_member(RETRY)
        member.decode("utf-8")
        msg = loads(member)["error_message"]
        self.assert_valid_message(msg)
        self.assertTrue(msg.startswith("exit status 1"), msg[:80])
        self.assertTrue(msg.endswith("THE-END"), msg[-80:])
        self.assertIn("\u00e9\u00e9\u00e9", msg)
        return d, msg

    def test_px7_long_stderr_bounded_message(self):
        self._long_stderr()

    def test_px7_long_stderr_with_big_output_tail_capped_at_10000(self):
        _, msg = self._long_stderr(output_tail=200000)
        self.assertGreater(len(msg), 5000)        # the tail is long: the cap applies
        self.assertLessEqual(len(msg), 10000)

    def test_px8_signal_timeout_spawn_failure_and_no_handler(self):
        noexec = self.path("not-executable")
        with open(noexec, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(noexec, 0o644)
        pids = self.path("pids")
        hang = sh('echo "$COGWORKER_JID" >> "$RUNS"; sleep 300 & echo $! >> "$1"; '
                  'echo $$ >> "$1"; sleep 300', pids)
        d = self.daemon(concurrency=2, handlers=[
            {"class": "Sig", "command": sh('echo "$COGWORKER_JID" >> "$RUNS"; kill -KILL $$')},
            {"class": "Slow", "command": hang, "timeout": 1, "kill_grace": 1},
            {"class": "NoExec", "command": [noexec]},
        ])
        jobs = {c: loads(self.push(job(c, retry=3)))["jid"]
                for c in ("Sig", "Slow", "NoExec", "Missing")}
        got = self.wait_member(RETRY, count=4, timeout=20)
        by_class = {loads(m)["class"]: loads(m) for m, _ in got}
        self.assertEqual(set(by_class), set(jobs))
        sig = by_class["Sig"]
        self.assertEqual(sig["error_class"], "Cogworker::HandlerSignaled")
        self.assertTrue(sig["error_message"].startswith("killed by signal 9"), sig["error_message"])
        self.assertIn("SIGKILL", sig["error_message"])
        slow = by_class["Slow"]
        self.assertEqual(slow["error_class"], "Cogworker::HandlerTimeout")
        self.assertTrue(slow["error_message"].startswith("timed out after 1"), slow["error_message"])
        noex = by_class["NoExec"]
        self.assertEqual(noex["error_class"], "Cogworker::HandlerSpawnFailed")
        self.assertTrue(noex["error_message"].startswith("exec failed: "), noex["error_message"])
        missing = by_class["Missing"]
        self.assertEqual(missing["error_class"], "Cogworker::NoHandler")
        self.assertEqual(missing["error_message"], "no handler configured for class Missing")
        for e in by_class.values():
            self.assertEqual(e["retry_count"], 1)        # routed by the budget: retry 3
        self.assertEqual(self.r.zcard(DEAD), 0)
        # the timed-out handler and its grandchild are both gone
        procs = [int(x) for x in self.read(pids).split()]
        self.assertEqual(len(procs), 2)
        wait_for(lambda: all(self.pid_gone(p) for p in procs), timeout=5,
                 message="handler and grandchild gone")
        self.wait_settled(d)
        self.assertEqual(d.runs_of(jobs["Sig"]), 1)
        self.assertEqual(d.runs_of(jobs["Slow"]), 1)

    def test_px8_failures_routed_by_budget_to_dead(self):
        d = self.daemon(handlers=[
            {"class": "Sig", "command": sh('kill -KILL $$')},
            {"class": "Slow", "command": sh('sleep 300'), "timeout": 1, "kill_grace": 1},
            {"class": "NoExec", "command": [self.path("does-not-exist")]},
        ], concurrency=2)
        for c in ("Sig", "Slow", "NoExec", "Missing"):
            self.push(job(c, retry=False))
        got = self.wait_member(DEAD, count=4, timeout=20)
        classes = {loads(m)["class"]: loads(m)["error_class"] for m, _ in got}
        self.assertEqual(classes, {"Sig": "Cogworker::HandlerSignaled",
                                   "Slow": "Cogworker::HandlerTimeout",
                                   "NoExec": "Cogworker::HandlerSpawnFailed",
                                   "Missing": "Cogworker::NoHandler"})
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(self.counter(FAILED), 4)

    def test_px14_no_handler_retry_0_goes_to_dead(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("ok")}])
        p = self.push(job("Nobody", [1], retry=0))
        member, _ = self.wait_member(DEAD)
        e = self.assert_failure_entry(p, member)
        self.assertEqual(e["error_class"], "Cogworker::NoHandler")
        self.assertEqual(e["error_message"], "no handler configured for class Nobody")
        self.assertEqual(e["retry_count"], 1)
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(RETRY), 0)
        [line] = d.log_lines("fail: Nobody jid=%s " % e["jid"])
        self.assertRegex(line, r"\d\.\d\ds: no handler configured for class Nobody → dead "
                         r"\(retry is 0: no retries\)$")

    def test_wildcard_handler_runs_unknown_classes(self):
        d = self.daemon(handlers=[{"class": "R", "command": handler("fail")},
                                  {"class": "*", "command": handler("dump")}])
        p = self.push(job("Anything", ["a"]))
        jid = loads(p)["jid"]
        self.wait_done(d, "Anything", jid)
        self.assertIn(b"COGWORKER_CLASS=Anything\n", self.read(d.runs + ".d/" + jid + ".env"))

    def test_failure_log_line(self):
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        p = self.push(job("F", retry=2))
        jid = loads(p)["jid"]
        line = self.wait_fail(d, "F", jid)
        # What happened and where it went (the stderr tail is in the output lines before)
        self.assertRegex(line, r"fail: F jid=%s \d+\.\d\ds cpu=\d+\.\d\ds maxrss=[\d.]+[KMG]iB: "
                         r"exit status 1 → retry 1/2 in (\d+s|\dm \d\ds)$"
                         % jid)
        self.assertEqual(len(d.log_lines("jid=%s stderr: kaboom" % jid)), 1)
        self.assertEqual(len(d.log_lines("start: F jid=%s" % jid)), 1)
        self.assertEqual(d.log_lines("done: F jid=%s" % jid), [])


class HandlerContract(JobTestCase):
    """The rest of the handler contract (doc/design.md "Handlers", doc/protocol.md §1.1)."""

    def test_nul_bytes_in_stderr_do_not_cut_the_message(self):
        d = self.daemon(handlers=[{"class": "N", "command": sh(
            "printf 'abc\\000def\\nTHE-END' >&2; exit 1")}])
        self.push(job("N", retry=3))
        member, _ = self.wait_member(RETRY)
        msg = loads(member)["error_message"]
        self.assert_valid_message(msg)
        self.assertTrue(msg.startswith("exit status 1: abc"), msg)
        self.assertTrue(msg.endswith("def\nTHE-END"), msg)
        self.wait_settled(d)

    def test_environment_cwd_and_rlimits(self):
        out = self.path("out")
        probe = sh('env | sort > "$1.env"; pwd > "$1.pwd"; ulimit -n > "$1.nofile"', out)
        d = self.daemon(start=False, handlers=[{
            "class": "E", "command": probe, "env": ["FOO=bar", "COGWORKER_CLASS=spoofed"],
            "env_passthrough": ["PASSME"], "cwd": "/tmp", "rlimit_nofile": 77}])
        d.start(env={"PASSME": "yes", "SECRET_TOKEN": "hunter2", "HOME": "/root/x"})
        p = self.push(job("E", [1]))
        self.wait_done(d, "E", loads(p)["jid"])
        env = dict(l.split("=", 1) for l in self.read(out + ".env").decode().splitlines()
                   if "=" in l)
        self.assertEqual(env.get("FOO"), "bar")
        self.assertEqual(env.get("PASSME"), "yes")
        self.assertEqual(env.get("COGWORKER_CLASS"), "E")      # the daemon's value wins
        self.assertNotIn("SECRET_TOKEN", env)
        self.assertNotIn("HOME", env)
        self.assertIn("PATH", env)
        self.assertEqual(self.read(out + ".pwd"), b"/tmp\n")
        self.assertEqual(self.read(out + ".nofile"), b"77\n")

    @unittest.skipUnless(os.geteuid() == 0, "user/group switching needs a root daemon")
    def test_user_and_group(self):
        out = tempfile.mkdtemp(prefix="cw-user-", dir="/tmp")   # TMPDIR may be private
        self.addCleanup(shutil.rmtree, out, True)
        os.chmod(out, 0o777)
        d = self.daemon(handlers=[
            {"class": "U", "command": sh('id -u > "$1/U"; cat > "$1/U.stdin"', out),
             "user": "nobody"},
            {"class": "G", "command": sh('id -g > "$1/G"', out), "group": "nogroup"},
            {"class": "X", "command": sh("true"), "user": "no-such-user-cogworkerd"}])
        pu = self.push(job("U", [1]))
        pg = self.push(job("G"))
        self.push(job("X", retry=3))
        self.wait_done(d, "U", loads(pu)["jid"])
        self.wait_done(d, "G", loads(pg)["jid"])
        member, _ = self.wait_member(RETRY)
        self.wait_settled(d)
        self.assertEqual(self.read(os.path.join(out, "U")), b"65534\n")
        self.assertEqual(self.read(os.path.join(out, "U.stdin")), pu)
        self.assertEqual(self.read(os.path.join(out, "G")), b"65534\n")
        e = loads(member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerSpawnFailed")
        self.assertTrue(e["error_message"].startswith("exec failed: "), e["error_message"])
        self.assertIn("no-such-user-cogworkerd", e["error_message"])

    def test_output_forwarded_to_the_log_with_the_jid(self):
        d = self.daemon(handlers=[{"class": "O", "command": sh(
            "echo hello out; echo hello err >&2; printf 'no newline'")}])
        p = self.push(job("O"))
        jid = loads(p)["jid"]
        self.wait_done(d, "O", jid)
        log = d.log()
        self.assertRegex(log, r"jid=%s stdout: hello out\n" % jid)
        self.assertRegex(log, r"jid=%s stderr: hello err\n" % jid)
        self.assertRegex(log, r"jid=%s stdout: no newline\n" % jid)

    def test_workers_entry_while_running(self):
        """doc/protocol.md §4.9, §7.4: while a job runs, cogworker:workers:<self> has an entry
        {queue, payload (the job object, spliced in unchanged), run_at}; it is gone after."""
        d = self.daemon(handlers=[{"class": "G", "command": handler("gate")}])
        args = '[12345678901234567890,"\u00e9"]'
        p = ('{"class":"G","args":%s,"queue":"default","jid":"%s"}' % (args, "9" * 24)).encode()
        self.push(p)
        self.wait_runs(d, "9" * 24)
        key = ("cogworker:workers:" + d.identity).encode()
        entries = wait_for(lambda: self.r.hgetall(key), timeout=5, message="workers entry")
        self.assertEqual(len(entries), 1)
        value = list(entries.values())[0]
        self.assertIn(b'"payload":' + p, value)
        w = loads(value)
        self.assertEqual(w["queue"], "default")
        self.assertIsInstance(w["run_at"], int)
        self.assertAlmostEqual(w["run_at"], self.now(), delta=10)
        d.open_gate("9" * 24, 0)
        self.wait_done(d, "G", "9" * 24)
        self.wait_settled(d)
        wait_for(lambda: not self.r.hgetall(key), timeout=5, message="deregistered")


if __name__ == "__main__":
    unittest.main()

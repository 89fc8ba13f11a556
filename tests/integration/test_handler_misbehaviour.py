# SPDX-License-Identifier: MIT
"""Handler misbehaviour (issue 2, "Tests"): a handler that segfaults; hangs past its
`timeout` while its own grandchild also hangs (both gone afterwards); writes 100 MB of
output; never reads stdin; exits before reading it; a command that does not exist. Through
all of it the daemon keeps serving other jobs.

Run: python3 tests/integration/run.py test_handler_misbehaviour
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job, wait_for  # noqa: E402
from runkit import DEAD, PROCESSED, RETRY, JobTestCase, loads, sh  # noqa: E402

RECORD = 'echo "$COGWORKER_JID" >> "$RUNS"; '


class Misbehaviour(JobTestCase):

    def d(self, *handlers, concurrency=2, **settings):
        hs = [{"class": "R", "command": handler("ok")}] + list(handlers)
        return self.daemon(handlers=hs, concurrency=concurrency, **settings)

    def still_serving(self, d, n=3):
        """The daemon is alive and runs ordinary jobs."""
        self.assertIsNone(d.proc.poll(), "the daemon exited")
        jids = [loads(self.push(job("R")))["jid"] for _ in range(n)]
        for jid in jids:
            self.wait_done(d, "R", jid, timeout=15)
        self.assertIsNone(d.proc.poll(), "the daemon exited")

    def rss_kb(self, d):
        with open("/proc/%d/status" % d.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def kill_later(self, pids):
        def cleanup():
            for p in pids:
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.addCleanup(cleanup)

    # ---------------------------------------------------------------------------------

    def test_segfault(self):
        segv = sh(RECORD + 'ulimit -c 0; exec python3 -c "import ctypes; ctypes.string_at(0)"')
        d = self.d({"class": "Segv", "command": segv})
        p = self.push(job("Segv", retry=3))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(RETRY, timeout=15)
        e = loads(member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerSignaled")
        self.assertTrue(e["error_message"].startswith("killed by signal 11 (SIGSEGV)"),
                        e["error_message"])
        self.assertEqual(e["retry_count"], 1)
        self.wait_settled(d)
        self.assertEqual(d.runs_of(jid), 1)
        self.still_serving(d)

    def test_hang_past_timeout_with_hanging_grandchild_both_gone(self):
        pids = self.path("pids")
        # Both the handler and its grandchild ignore TERM: only the KILL after the grace
        # ends them.
        hang = sh(RECORD + 'echo $$ >> "$1"; '
                  '(trap "" TERM; while :; do sleep 1; done) & echo $! >> "$1"; '
                  'trap "" TERM; while :; do sleep 1; done', pids)
        d = self.d({"class": "Hang", "command": hang, "timeout": 1, "kill_grace": 1})
        t0 = time.monotonic()
        p = self.push(job("Hang", retry=3))
        jid = loads(p)["jid"]
        wait_for(lambda: len((self.read(pids) or b"").split()) == 2, timeout=10,
                 message="handler and grandchild pids")
        procs = [int(x) for x in self.read(pids).split()]
        self.kill_later(procs)
        # meanwhile the other fetcher serves other jobs
        self.still_serving(d, n=2)
        member, _ = self.wait_member(RETRY, timeout=15)
        elapsed = time.monotonic() - t0
        e = loads(member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerTimeout")
        self.assertTrue(e["error_message"].startswith("timed out after 1s"), e["error_message"])
        self.assertLess(elapsed, 10)
        wait_for(lambda: all(self.pid_gone(x) for x in procs), timeout=5,
                 message="handler and grandchild gone")
        self.wait_settled(d)
        self.assertEqual(d.runs_of(jid), 1)
        self.still_serving(d)

    def test_grandchild_left_behind_after_success_is_killed(self):
        pids = self.path("pids")
        leave = sh(RECORD + 'sleep 300 & echo $! >> "$1"; exit 0', pids)
        d = self.d({"class": "Leave", "command": leave})
        p = self.push(job("Leave"))
        jid = loads(p)["jid"]
        self.wait_done(d, "Leave", jid)
        procs = [int(x) for x in self.read(pids).split()]
        self.kill_later(procs)
        wait_for(lambda: all(self.pid_gone(x) for x in procs), timeout=5,
                 message="grandchild gone")
        self.still_serving(d)

    def test_escaped_grandchild_holding_the_pipes_does_not_block_the_job(self):
        """A grandchild in its own session keeps stdout/stderr open; the job still ends
        when the handler exits (output drained only briefly)."""
        pids = self.path("pids")
        escape = sh(RECORD + 'setsid sleep 60 & echo $! >> "$1"; echo bye; exit 0', pids)
        d = self.d({"class": "Esc", "command": escape}, concurrency=1)
        p = self.push(job("Esc"))
        jid = loads(p)["jid"]
        t0 = time.monotonic()
        wait_for(lambda: self.read(pids), timeout=5, message="grandchild pid")
        self.kill_later([int(x) for x in self.read(pids).split()])
        self.wait_done(d, "Esc", jid, timeout=15)
        self.assertLess(time.monotonic() - t0, 10)
        self.still_serving(d)

    def test_100_mb_of_output(self):
        flood = sh(RECORD + 'line=$(printf "%0999d" 0); '
                   '(yes "$line" | head -c 50000000) & '
                   '(yes "$line" | head -c 50000000 >&2) & '
                   'wait; printf "THE-END" >&2; exit 1')
        d = self.d({"class": "Flood", "command": flood})
        p = self.push(job("Flood", retry=3))
        jid = loads(p)["jid"]
        self.wait_runs(d, jid)
        self.still_serving(d, n=2)            # while the flood is pumped
        member, _ = self.wait_member(RETRY, timeout=120)
        e = loads(member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertTrue(e["error_message"].startswith("exit status 1: "))
        self.assertTrue(e["error_message"].endswith("THE-END"), e["error_message"][-50:])
        self.assert_valid_message(e["error_message"])
        self.wait_settled(d)
        self.assertLess(self.rss_kb(d), 64 * 1024, "daemon RSS after 100 MB of output")
        self.assertEqual(d.runs_of(jid), 1)
        self.still_serving(d)

    def _big_payload(self, cls, **extra):
        return job(cls, ["x" * (1 << 20), 1], **extra)      # 1 MiB: more than a pipe holds

    def test_never_reads_stdin(self):
        lazy = sh(RECORD + 'sleep 6; exit 0')
        d = self.d({"class": "Lazy", "command": lazy})
        p = self.push(self._big_payload("Lazy"))
        jid = loads(p)["jid"]
        self.wait_runs(d, jid)
        # the daemon is not blocked writing that stdin: the other fetcher serves jobs
        # while the lazy handler sleeps
        t0 = time.monotonic()
        self.still_serving(d, n=2)
        self.assertEqual(d.log_lines("done: Lazy jid=%s" % jid), [])
        self.assertLess(time.monotonic() - t0, 5)
        self.wait_done(d, "Lazy", jid, timeout=15)
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)
        self.still_serving(d)

    def test_never_reads_stdin_and_never_exits_is_timed_out(self):
        d = self.d({"class": "Deaf", "command": sh(RECORD + 'exec sleep 300'), "timeout": 1,
                    "kill_grace": 1})
        p = self.push(self._big_payload("Deaf", retry=3))
        member, _ = self.wait_member(RETRY, timeout=15)
        self.assertEqual(loads(member)["error_class"], "Cogworker::HandlerTimeout")
        self.wait_settled(d)
        self.assertEqual(d.runs_of(loads(p)["jid"]), 1)
        self.still_serving(d)

    def test_exits_before_reading_stdin(self):
        d = self.d({"class": "Quick", "command": sh(RECORD + "exit 0")},
                   {"class": "QuickFail", "command": sh(RECORD + "echo nope >&2; exit 1")})
        ok = [loads(self.push(self._big_payload("Quick")))["jid"] for _ in range(5)]
        bad = loads(self.push(self._big_payload("QuickFail", retry=3)))["jid"]
        for jid in ok:
            self.wait_done(d, "Quick", jid, timeout=15)
        member, _ = self.wait_member(RETRY, timeout=15)
        e = loads(member)
        self.assertEqual(e["jid"], bad)
        self.assertEqual(e["error_class"], "Cogworker::HandlerFailed")
        self.assertIn("nope", e["error_message"])
        self.wait_settled(d)
        self.assertEqual(self.wait_counter(PROCESSED, 5), 5)
        for jid in ok + [bad]:
            self.assertEqual(d.runs_of(jid), 1)
        self.still_serving(d)

    def test_command_that_does_not_exist(self):
        d = self.d({"class": "Abs", "command": [self.path("no/such/program")]},
                   {"class": "Bare", "command": ["no-such-program-cogworkerd-test"]})
        self.push(job("Abs", retry=3))
        self.push(job("Bare", retry=False))
        member, _ = self.wait_member(RETRY)
        e = loads(member)
        self.assertEqual(e["error_class"], "Cogworker::HandlerSpawnFailed")
        # The message names the program and the errno
        self.assertEqual(e["error_message"], "exec failed: %s: No such file or directory "
                         "(ENOENT)" % self.path("no/such/program"))
        self.assertEqual(e["retry_count"], 1)
        dead, _ = self.wait_member(DEAD)
        e = loads(dead)
        self.assertEqual(e["error_class"], "Cogworker::HandlerSpawnFailed")
        self.assertRegex(e["error_message"], r"^exec failed: no-such-program-cogworkerd-test "
                         r"not found in PATH \S+: No such file or directory \(ENOENT\)$")
        self.wait_settled(d)
        self.still_serving(d)

    def test_all_at_once_daemon_keeps_serving(self):
        pids = self.path("pids")
        d = self.d(
            {"class": "Segv", "command": sh(
                'ulimit -c 0; exec python3 -c "import ctypes; ctypes.string_at(0)"')},
            {"class": "Hang", "command": sh('sleep 300 & echo $! >> "$1"; exec sleep 300',
                                            pids), "timeout": 2, "kill_grace": 1},
            {"class": "Lazy", "command": sh("sleep 1")},
            {"class": "Quick", "command": sh("exit 0")},
            {"class": "Missing", "command": [self.path("missing")]},
            concurrency=3)
        bad = []
        for cls in ("Segv", "Hang", "Missing"):
            bad.append(loads(self.push(job(cls, retry=False)))["jid"])
        for cls in ("Lazy", "Quick"):
            self.push(self._big_payload(cls))
        goods = [loads(self.push(job("R")))["jid"] for _ in range(10)]
        for jid in goods:
            self.wait_done(d, "R", jid, timeout=30)
        got = self.wait_member(DEAD, count=3, timeout=30)
        self.assertEqual(sorted(loads(m)["jid"] for m, _ in got), sorted(bad))
        wait_for(lambda: self.counter(PROCESSED) == 12, timeout=15, message="12 successes")
        self.wait_settled(d)
        procs = [int(x) for x in (self.read(pids) or b"").split()]
        self.kill_later(procs)
        self.assertTrue(all(self.pid_gone(x) for x in procs))
        self.still_serving(d)


if __name__ == "__main__":
    import unittest
    unittest.main()

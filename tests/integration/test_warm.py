# SPDX-License-Identifier: MIT
"""WM — warm handlers (doc/behaviours.md §42, doc/protocol.md §1.2, doc/design.md "Warm
handlers").

The handlers speak the protocol by hand (tests/handlers/warm_py in Python, warm_sh in sh),
not through the handler libraries, so these tests hold the daemon to the contract itself.
warm_py appends "<jid> <pid>" to $RUNS for each job: which process ran what is read there.

Run: python3 tests/integration/run.py test_warm
"""

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, free_port, handler, job, wait_for  # noqa: E402
from pollkit import E2E  # noqa: E402
from runkit import DEAD, RETRY, JobTestCase, loads  # noqa: E402


def warm(cls="W", **extra):
    h = {"class": cls, "command": handler("warm_py"), "warm": True}
    h.update(extra)
    return h


class WarmTestCase(JobTestCase):

    def runs(self):
        """[(jid, pid)] in the order the warm processes took the jobs."""
        text = self.read(os.path.join(self.workdir, "runs"), b"").decode()
        return [(l.split()[0], int(l.split()[1])) for l in text.splitlines() if l.strip()]

    def pid_of(self, jid):
        for j, pid in self.runs():
            if j == jid:
                return pid
        return None

    def push_job(self, *args, cls="W", **extra):
        p = job(cls, list(args), **extra)
        self.push(p)
        return loads(p)["jid"], p

    def warm_pids(self):
        """PIDs of this test's live warm_py processes (not zombies), from /proc: those whose
        RUNS is this test's, not another test's run at the same time on the machine."""
        return self.my_pids(b"warm_py")

    def my_pids(self, name):
        """PIDs of this test's live processes (not zombies) whose command line holds name:
        those that inherited this test's RUNS, so no other test's process on the machine."""
        out = []
        mine = ("RUNS=" + os.path.join(self.workdir, "runs")).encode()
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % d, "rb") as f:
                    cmd = f.read()
                with open("/proc/%s/environ" % d, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if name in cmd and mine in env and not self.pid_gone(int(d)):
                out.append(int(d))
        return out

    def ctl(self, *args):
        env = dict(os.environ, REDIS_URL=self.server.url)
        return subprocess.run([binary("cogworkerctl"), "-c", "/dev/null"] + list(args),
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              timeout=30)


class Running(WarmTestCase):

    def test_wm1_one_process_runs_job_after_job(self):
        d = self.daemon(handlers=[warm()])
        jids = [self.push_job("ok")[0] for _ in range(5)]
        for jid in jids:
            self.wait_done(d, "W", jid)
        pids = {self.pid_of(j) for j in jids}
        self.assertEqual(len(pids), 1, self.runs())
        self.assertNotEqual(pids, {None})
        self.wait_settled(d)

    def test_wm1_job_json_reaches_the_process_byte_for_byte(self):
        """Numbers past 2^53 and string spellings survive: the job is spliced, not re-encoded;
        a pretty-printed payload's newlines become spaces, so one message stays one line."""
        d = self.daemon(handlers=[warm("S", command=handler("warm_sh"))])
        jid = "a" * 24
        raw = ('{"class":"S","args":[9007199254740993,1.50,"\\u00e9"],\n"queue":"default",'
               '"jid":"%s","enqueued_at":%f}' % (jid, time.time()))
        self.push(raw)
        self.wait_done(d, "S", jid)
        line = d.wait_log("jid=%s stdout: sh got: " % jid)
        got = line.split("sh got: ", 1)[1]
        self.assertIn('"job":' + raw.replace("\n", " ") + ',"deadline":null}', got)

    def test_wm1_deadline_is_the_timeout(self):
        d = self.daemon(handlers=[warm(timeout=30)])
        before = time.time()
        jid, _ = self.push_job("deadline")
        line = d.wait_log("jid=%s stdout: deadline" % jid)
        deadline = float(line.split("deadline ")[1])
        self.assertGreater(deadline, before + 29)
        self.assertLess(deadline, time.time() + 31)

    def test_wm2_each_jobs_output_is_its_own(self):
        d = self.daemon(handlers=[warm(output_keep=4096)], concurrency=1)
        a, _ = self.push_job("print", "alpha")
        b, _ = self.push_job("print", "bravo")
        self.wait_done(d, "W", a)
        self.wait_done(d, "W", b)
        self.assertEqual(self.pid_of(a), self.pid_of(b))
        for jid, mine, other in ((a, "alpha", "bravo"), (b, "bravo", "alpha")):
            lines = d.log_lines("jid=%s std" % jid)
            self.assertIn("jid=%s stdout: %s" % (jid, mine), "\n".join(lines))
            self.assertIn("jid=%s stderr: err %s" % (jid, mine), "\n".join(lines))
            self.assertNotIn(other, "\n".join(lines))
        # the kept output (cogworkerctl jobs log) too
        wait_for(lambda: b"bravo" in self.ctl("jobs", "log", b).stdout, timeout=5,
                 message="kept output of b")
        out = self.ctl("jobs", "log", a).stdout
        self.assertIn(b"alpha", out)
        self.assertNotIn(b"bravo", out)

    def test_wm3_error_of_done_is_the_error_message(self):
        d = self.daemon(handlers=[warm()])
        jid, pushed = self.push_job("fail", "the database is gone", retry=3)
        member, _ = self.wait_member(RETRY)
        entry = self.assert_failure_entry(pushed, member)
        self.assertEqual(entry["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(entry["error_message"], "exit status 1: the database is gone")
        # the process stays: the next job runs on it
        jid2, _ = self.push_job("ok")
        self.wait_done(d, "W", jid2)
        self.assertEqual(self.pid_of(jid), self.pid_of(jid2))

    def test_wm27_a_long_error_is_cut_to_output_tail(self):
        """done's error is the stderr tail's stand-in and as bounded: 200 KB of it leave
        output_tail bytes in the history's backtrace, as a cold handler's stderr would."""
        self.daemon(handlers=[warm(output_tail=1000)], history_retention_days=30)
        error = "".join("line %06d of a long error\n" % i for i in range(8000))
        jid, _ = self.push_job("fail", error, retry=3)
        self.wait_member(RETRY)
        wait_for(lambda: self.r.zcard(b"cogworker:history:failed") == 1, timeout=5,
                 message="the run in the history")
        entry = loads(self.r.zrange(b"cogworker:history:failed", 0, -1)[0])
        backtrace = "\n".join(entry["backtrace"])
        self.assertLessEqual(len(backtrace), 1000)
        self.assertIn("line 007999 of a long error", backtrace)

    def test_wm3_exit_codes_are_judged_like_a_cold_handlers(self):
        self.daemon(handlers=[warm(dead_exit_codes=[7])])
        jid, _ = self.push_job("exit", 7, retry=5)
        member, _ = self.wait_member(DEAD)
        self.assertEqual(loads(member)["error_message"], "exit status 7")

    def test_wm25_done_behind_many_messages_then_an_exit_is_read(self):
        """The process writes 140 KB of progress, "done" and exits at once: what it wrote
        before its exit is read whole (more than one read) before the exit is judged."""
        d = self.daemon(handlers=[warm()], status_expiration=600)
        jid, _ = self.push_job("flood", 5000, retry=0)
        self.wait_done(d, "W", jid)
        self.assertEqual(self.r.zcard(DEAD) + self.r.zcard(RETRY), 0)

    def test_wm20_progress_message_updates_the_status(self):
        d = self.daemon(handlers=[warm()], status_expiration=600)
        jid, _ = self.push_job("progress", 3)
        key = ("status:" + jid).encode()
        wait_for(lambda: self.r.hget(key, b"message") == b"forty", timeout=5,
                 message="progress in the status hash")
        self.assertEqual(self.r.hget(key, b"pct"), b"40")
        self.wait_done(d, "W", jid)
        # ...and in its kept output, as a cold handler's progress line is, so that `jobs
        # log --follow` shows it (issue 31)
        self.assertIn(b"cogworker:progress 40 forty\n", self.ctl("jobs", "log", jid).stdout)

    def test_wm22_a_warm_handler_in_sh(self):
        d = self.daemon(handlers=[warm("S", command=handler("warm_sh"))])
        jids = [self.push_job("x", cls="S")[0] for _ in range(3)]
        for jid in jids:
            self.wait_done(d, "S", jid)
        pids = {l.split()[-1] for l in self.read(os.path.join(self.workdir, "runs")).decode()
                .splitlines()}
        self.assertEqual(len(pids), 1)

    def test_wm26_a_job_its_process_never_reads_times_out(self):
        """A process that stops reading fd 3 after "ready" is sent a 4 MB job: the job times
        out (an attempt, HandlerTimeout), it is not taken for a job never delivered and
        handed to process after process for ever."""
        self.daemon(handlers=[warm(timeout=1, kill_grace=0.5, env=["WARM_DEAF=1"])])
        self.push_job("size", "x" * (4 << 20), retry=3)
        member, _ = self.wait_member(RETRY, timeout=30)
        self.assertEqual(loads(member)["error_class"], "Cogworker::HandlerTimeout")

    def test_wm26_a_job_that_kills_each_process_reading_it_fails(self):
        """Processes that die while they read a job (a memory limit, say) do not take it for a
        job never delivered for ever, nor back their class off: the third in a row fails it
        (an attempt), and the next job runs."""
        d = self.daemon(handlers=[warm(env=["WARM_MAX_LINE=65536"])])
        self.push_job("size", "x" * (4 << 20), retry=3)
        member, _ = self.wait_member(RETRY, timeout=30)
        self.assertEqual(loads(member)["error_message"],
                         "3 warm processes in a row ended before they had read the whole job")
        jid, _ = self.push_job("ok")
        self.wait_done(d, "W", jid, timeout=5)

    def test_wm8_a_50_mb_job(self):
        # Above the default max_job_bytes (16 MiB), which would bury it unread (HD-12).
        d = self.daemon(handlers=[warm()], max_job_bytes=64 << 20)
        big = "x" * (50 << 20)
        jid, _ = self.push_job("size", big)
        line = d.wait_log("jid=%s stdout: message bytes" % jid, timeout=60)
        self.assertIn("args %d" % len(big), line)
        self.wait_done(d, "W", jid, timeout=30)


class Failing(WarmTestCase):

    def test_wm4_crash_mid_job_is_retried_on_a_new_process(self):
        d = self.daemon(handlers=[warm()])
        jid, pushed = self.push_job("crash", retry=3)
        member, _ = self.wait_member(RETRY)
        entry = loads(member)
        self.assertEqual(entry["error_class"], "Cogworker::HandlerFailed")
        self.assertTrue(entry["error_message"].startswith("exit status 3"), entry)
        self.assertIn("about to crash", entry["error_message"])
        d.wait_log("ended with exit status 3 while running a job")
        jid2, _ = self.push_job("ok")
        self.wait_done(d, "W", jid2)
        self.assertNotEqual(self.pid_of(jid), self.pid_of(jid2))
        self.assertTrue(self.pid_gone(self.pid_of(jid)))

    def test_wm4_killed_by_a_signal(self):
        self.daemon(handlers=[warm()])
        self.push_job("kill", retry=3)
        member, _ = self.wait_member(RETRY)
        self.assertEqual(loads(member)["error_class"], "Cogworker::HandlerSignaled")

    def test_wm5_hang_past_timeout_kills_the_group(self):
        d = self.daemon(handlers=[warm(timeout=1, kill_grace=1)])
        started = time.time()
        jid, _ = self.push_job("hang", retry=3)
        member, _ = self.wait_member(RETRY, timeout=15)
        took = time.time() - started
        self.assertEqual(loads(member)["error_class"], "Cogworker::HandlerTimeout")
        self.assertLess(took, 8)
        self.assertGreater(took, 1.9)       # timeout, then the grace: it ignored the cancel
        pid = self.pid_of(jid)
        wait_for(lambda: self.pid_gone(pid), timeout=5, message="hung process killed")
        jid2, _ = self.push_job("ok")
        self.wait_done(d, "W", jid2)
        self.assertNotEqual(self.pid_of(jid2), pid)

    def test_wm5_a_process_that_answers_the_cancel_is_replaced_too(self):
        d = self.daemon(handlers=[warm(timeout=1, kill_grace=5)])
        jid, _ = self.push_job("sleep", 30, retry=3)
        member, _ = self.wait_member(RETRY, timeout=10)
        entry = loads(member)
        self.assertEqual(entry["error_class"], "Cogworker::HandlerTimeout")
        self.assertIn("stopped on cancel", entry["error_message"])
        d.wait_log("its job timed out")
        jid2, _ = self.push_job("ok")
        self.wait_done(d, "W", jid2)
        self.assertNotEqual(self.pid_of(jid2), self.pid_of(jid))

    def test_wm6_protocol_garbage_fails_the_job_and_replaces_the_process(self):
        for what, why in (("garbage", "bad message: not a JSON object"),
                          ("huge", "a message over 1 MiB"),
                          ("closefd", "closed fd 3")):
            with self.subTest(what=what):
                self.r.flushall()
                d = self.daemon(handlers=[warm()])
                jid, _ = self.push_job(what, retry=3)
                member, _ = self.wait_member(RETRY)
                entry = loads(member)
                self.assertEqual(entry["error_message"],
                                 "warm process broke the protocol: " + why)
                d.wait_log("broke the protocol: " + why)
                jid2, _ = self.push_job("ok")
                self.wait_done(d, "W", jid2)
                self.assertNotEqual(self.pid_of(jid2), self.pid_of(jid))
                d.stop()

    def test_wm6_a_second_done_replaces_the_process_and_the_job_stands(self):
        """The stray "done" carries the first job's jid: whether it comes while the process
        is idle or once the next job was sent, it is caught, and the first job stands."""
        d = self.daemon(handlers=[warm()])
        jid, _ = self.push_job("twice")
        self.wait_done(d, "W", jid)
        pid = self.pid_of(jid)
        for _ in range(2):
            nxt, _ = self.push_job("ok", retry=3)
            wait_for(lambda: d.log_lines("jid=" + nxt), timeout=10, message="next job ran")
            self.wait_settled(d)
            if self.pid_of(nxt) != pid and self.pid_of(nxt):
                break
        line = "\n".join(d.log_lines("warm: W pid=%d" % pid))
        self.assertTrue(any(x in line for x in ("a message after \"done\"", "while idle",
                                                  "\"done\" for another job")), d.log())
        self.assertNotIn(jid.encode(), b"".join(m for m, _ in self.members(RETRY)))
        self.assertEqual(self.r.zcard(DEAD), 0)

    def test_wm7_a_grandchild_holding_stdout_does_not_hold_the_job(self):
        d = self.daemon(handlers=[warm()])
        started = time.time()
        jid, _ = self.push_job("grandchild")
        self.wait_done(d, "W", jid)
        self.assertLess(time.time() - started, 5)
        with open(os.path.join(d.gates, jid + ".grandchild")) as f:
            grandchild = int(f.read())
        self.assertIn(grandchild, self.my_pids(b"sleep"), "the grandchild runs, holding stdout")
        d.stop()
        self.assertEqual(self.my_pids(b"sleep"), [], "the grandchild outlived the daemon's stop")

    def test_wm21_a_process_that_died_idle_is_replaced_without_an_attempt(self):
        d = self.daemon(handlers=[warm()])
        jid, _ = self.push_job("ok")
        self.wait_done(d, "W", jid)
        pid = self.pid_of(jid)
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: self.pid_gone(pid), timeout=5, message="killed")
        jid2, _ = self.push_job("ok", retry=0)
        self.wait_done(d, "W", jid2)
        self.assertNotEqual(self.pid_of(jid2), pid)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertEqual(self.r.zcard(RETRY), 0)


    def test_wm30_recycles_and_faults_leave_no_descriptor_and_no_zombie(self):
        """40 jobs that crash, kill their process, break the protocol, time out, ask to be
        recycled or run on a process recycled every 2 jobs: the daemon holds the same
        descriptors after as after its first job (7 per live warm process: socket, pidfd,
        stdout, stderr, and the /proc stat, status and clear_refs its jobs' cost is read
        from; 4 more with cgroup containment: its cgroup's directory, cgroup.procs,
        cgroup.events and cpu.stat), and no child of it is left a zombie."""
        d = self.daemon(handlers=[warm(warm_max_jobs=2, timeout=2, kill_grace=0.5)],
                        output_keep=0)
        first, _ = self.push_job("ok")
        self.wait_done(d, "W", first)
        self.wait_settled(d)

        def fds():
            return len(os.listdir("/proc/%d/fd" % d.proc.pid))
        per = 7 + (4 if d.log_lines("containment: cgroup v2") else 0)
        base = fds() - per * len(self.warm_pids())
        kinds = [["ok"], ["crash"], ["kill"], ["fail", "x"], ["recycle"], ["twice"],
                 ["exit", 3], ["garbage"], ["print", "y"]]
        for i in range(40):
            self.push_job(*kinds[i % len(kinds)], retry=0)
        self.push_job("hang", retry=0)
        wait_for(lambda: len(d.log_lines("done: W")) + len(d.log_lines("fail: W")) == 42,
                 timeout=60, message="every job run")
        self.wait_settled(d)

        def zombies():
            out = []
            for c in os.listdir("/proc"):
                stat = self.read("/proc/%s/stat" % c, b"") if c.isdigit() else b""
                fields = stat.rsplit(b")", 1)[-1].split()
                if len(fields) > 1 and fields[1] == str(d.proc.pid).encode() \
                        and fields[0] == b"Z":
                    out.append(c)
            return out
        wait_for(lambda: fds() == base + per * len(self.warm_pids()) and not zombies(),
                 timeout=10, message="the first job's descriptors, no zombie")
        self.assertLessEqual(len(self.warm_pids()), 1)


class Starting(WarmTestCase):

    def test_wm15_a_command_failing_before_ready_backs_off_and_its_jobs_wait(self):
        flag = self.path("broken")
        open(flag, "w").close()
        d = self.daemon(handlers=[warm(env=["WARM_START_FAIL=" + flag])], concurrency=2)
        jid, _ = self.push_job("ok", retry=0)
        d.wait_log("warm: W: process pid=", timeout=10)
        time.sleep(2)       # several tries (backoff 0.5 s, 1 s, …): logged once, job waits
        self.assertEqual(len(d.log_lines("warm: W: process pid=")), 1, d.log())
        self.assertEqual(self.r.zcard(DEAD) + self.r.zcard(RETRY), 0)
        self.assertIn(jid.encode(), b"".join(self.r.lrange(
            "cogworker:inprogress:" + d.identity, 0, -1)))
        os.unlink(flag)
        self.wait_done(d, "W", jid, timeout=40)
        d.wait_log("warm: W: a process is ready again after")

    def test_wm29_a_start_whose_job_was_cancelled_is_kept_for_the_next_job(self):
        """The job is cancelled while its process starts: the process is kept, its "ready"
        read when the next job wants it (not taken for a message sent while idle at the
        look of the parked fetcher, within 5 s, and replaced)."""
        d = self.daemon(handlers=[warm(env=["WARM_START_SLEEP=1"])])
        jid, _ = self.push_job("ok", retry=3)
        wait_for(lambda: self.warm_pids(), timeout=10, message="the process starting")
        pid = self.warm_pids()[0]
        self.assertEqual(self.ctl("jobs", "cancel", jid).returncode, 0)
        member, _ = self.wait_member(DEAD)
        self.assertEqual(loads(member)["error_class"], "Cogworker::Cancelled")
        time.sleep(6.5)     # its "ready", then the parked fetcher's look at its pool
        self.assertNotIn("while idle", d.log())
        nxt, _ = self.push_job("ok")
        self.wait_done(d, "W", nxt)
        self.assertEqual(self.pid_of(nxt), pid)

    def test_wm29_a_ready_read_after_warm_start_timeout_still_counts(self):
        """The job is cancelled while its process starts; the process says "ready" in time,
        and the next job comes after warm_start_timeout, before the fetcher's look: the
        "ready" waiting in the socket is read first, the job runs on that process."""
        d = self.daemon(handlers=[warm(env=["WARM_START_SLEEP=1"], warm_start_timeout=2)])
        jid, _ = self.push_job("ok", retry=3)
        wait_for(lambda: self.warm_pids(), timeout=10, interval=0.02,
                 message="the process starting")
        seen = time.time()
        pid = self.warm_pids()[0]
        self.assertEqual(self.ctl("jobs", "cancel", jid).returncode, 0)
        self.wait_member(DEAD)
        time.sleep(max(0, seen + 2.7 - time.time()))
        nxt, _ = self.push_job("ok")
        self.wait_done(d, "W", nxt)
        self.assertEqual(self.pid_of(nxt), pid)
        self.assertNotIn("warm_start_timeout", d.log())

    def test_wm15_a_stop_hands_back_a_job_waiting_for_its_process_at_once(self):
        """A job waiting while its class backs off never started: the stop hands it back
        at once, instead of holding the drain for shutdown_timeout (15 s)."""
        flag = self.path("broken")
        open(flag, "w").close()
        d = self.daemon(handlers=[warm(env=["WARM_START_FAIL=" + flag])], shutdown_timeout=15)
        jid, pushed = self.push_job("ok", retry=0)
        d.wait_log("warm: W: process pid=", timeout=10)
        started = time.time()
        self.assertEqual(d.stop(), 0)
        self.assertLess(time.time() - started, 6)
        self.assertEqual(self.r.lrange("cogworker:queue:default", 0, -1), [pushed.encode()])
        self.assertEqual(self.r.zcard(DEAD) + self.r.zcard(RETRY), 0)

    def test_wm16_no_ready_within_warm_start_timeout(self):
        d = self.daemon(handlers=[warm(env=["WARM_START_SLEEP=30"], warm_start_timeout=1.0)])
        self.push_job("ok", retry=0)
        line = d.wait_log("warm: W: process pid=", timeout=10)
        self.assertIn("no \"ready\" within warm_start_timeout", line)

    def test_wm16_a_program_that_cannot_be_run_fails_like_a_cold_one(self):
        self.daemon(handlers=[{"class": "W", "command": ["/nonexistent/prog"], "warm": True}])
        self.push_job("ok", retry=0)
        member, _ = self.wait_member(DEAD)
        self.assertEqual(loads(member)["error_class"], "Cogworker::HandlerSpawnFailed")

    def test_wm19_check_refuses_warm_with_args_as_argv(self):
        conf = self.path("bad.conf")
        with open(conf, "w") as f:
            f.write('handlers = ( { class = "W"; command = ["/bin/true"]; warm = true;\n'
                    '  args_as_argv = true; } );\n')
        p = subprocess.run([binary("cogworkerd"), "--check", "-c", conf],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"bad.conf:2: handler 'W': args_as_argv can't apply to a warm handler",
                      p.stderr)


class Exec(WarmTestCase):

    def test_wm24_cogworkerctl_exec_runs_a_warm_handler_over_the_protocol(self):
        conf = self.path("exec.conf")
        with open(conf, "w") as f:
            f.write('handlers = ( { class = "W"; command = ["%s"]; warm = true;\n'
                    '  env = ["RUNS=%s"]; } );\n' % (handler("warm_py")[0],
                                                    os.path.join(self.workdir, "runs")))
        def ex(*args):
            return subprocess.run([binary("cogworkerctl"), "-c", conf, "exec"] + list(args),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        ok = ex("--json-args", '["print","hello"]', "W")
        self.assertEqual(ok.returncode, 0, ok)
        self.assertIn(b"hello", ok.stdout)
        bad = ex("--json-args", '["fail","boom"]', "W")
        self.assertEqual(bad.returncode, 1, bad)
        self.assertIn(b"exit status 1: boom", bad.stdout)
        self.assertEqual(self.warm_pids(), [])

    def test_wm31_exec_shows_what_a_warm_job_printed_and_its_error_apart(self):
        """A warm job on the Python library that raises: its traceback (what it printed)
        is the report's stderr, done's error is the error and only the error; a cold
        handler printing the same traceback is reported as before."""
        runs = os.path.join(self.workdir, "runs")
        conf = self.path("exec.conf")
        with open(conf, "w") as f:
            f.write('handlers = ( { class = "W"; command = ["%s"]; warm = true;\n'
                    '  env = ["RUNS=%s"]; },\n'
                    '  { class = "C"; command = ["/usr/bin/python3", "-c",\n'
                    '    "raise ValueError(\'cold boom\')"]; } );\n'
                    % (handler("warmlib_py")[0], runs))

        def ex(*args):
            return subprocess.run([binary("cogworkerctl"), "-c", conf, "exec"] + list(args),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        jid = "b" * 24
        res = ex("--jid", jid, "--json-args", '["raise"]', "W")
        self.assertEqual(res.returncode, 1, res)
        text = res.stdout.decode()
        error = "ValueError: boom %s [at warmlib_py:" % jid
        self.assertIn("error      Cogworker::HandlerFailed: exit status 1: " + error, text)
        self.assertEqual(text.count(error), 1, text)        # said once: as the error
        printed = text.split("\nstderr:\n", 1)[1]
        self.assertTrue(printed.startswith("Traceback (most recent call last):\n"), text)
        self.assertIn('raise ValueError("boom " + job.jid)\n', printed)
        self.assertIn("ValueError: boom %s\n" % jid, printed)
        out = json.loads(subprocess.run(
            [binary("cogworkerctl"), "-c", conf, "--json", "exec", "--jid", jid,
             "--json-args", '["raise"]', "W"], stdout=subprocess.PIPE, timeout=30).stdout)
        self.assertTrue(out["stderr"].startswith("Traceback (most recent call last):\n"), out)
        self.assertTrue(out["stderr"].endswith("ValueError: boom %s\n" % jid), out)
        self.assertTrue(out["error_message"].startswith("exit status 1: " + error), out)
        cold = ex("C")
        self.assertEqual(cold.returncode, 1, cold)
        text = cold.stdout.decode()
        self.assertIn("error      Cogworker::HandlerFailed: exit status 1: Traceback (most "
                      "recent call last):", text)
        self.assertIn("\nstderr:\nTraceback (most recent call last):\n", text)
        self.assertTrue(text.endswith("ValueError: cold boom\n"), text)
        self.assertEqual(self.warm_pids(), [])


class CheckWarnings(WarmTestCase):

    def test_wm19_check_warns_of_limits_that_mean_otherwise_for_a_warm_process(self):
        conf = self.path("w.conf")
        with open(conf, "w") as f:
            f.write('handlers = (\n  { class = "W"; command = ["/bin/true"]; warm = true;\n'
                    '    rlimit_cpu = 60; warm_max_rss = 2000; rlimit_as = 1000; },\n'
                    '  { class = "C"; command = ["/bin/true"]; rlimit_cpu = 60; } );\n')
        p = subprocess.run([binary("cogworkerd"), "--check", "-c", conf],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.assertEqual(p.returncode, 0, p)
        err = p.stderr.decode()
        self.assertIn("w.conf:2: handler W: rlimit_cpu on a warm handler limits each "
                      "process's CPU over all its jobs", err)
        self.assertIn("w.conf:2: handler W: warm_max_rss (2000) is not below rlimit_as (1000)",
                      err)
        self.assertNotIn("handler C", err)


class Recycling(WarmTestCase):

    def test_wm9_warm_max_jobs(self):
        d = self.daemon(handlers=[warm(warm_max_jobs=3)])
        jids = [self.push_job("ok")[0] for _ in range(9)]
        for jid in jids:
            self.wait_done(d, "W", jid)
        pids = [self.pid_of(j) for j in jids]
        self.assertEqual(len(set(pids)), 3, pids)
        self.assertEqual([pids.count(p) for p in dict.fromkeys(pids)], [3, 3, 3])
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)
        d.wait_log("it ran warm_max_jobs jobs after 3 job(s); replaced")

    def test_wm28_a_retired_process_is_killed_after_its_grace_while_a_job_runs(self):
        """A recycled process that does not exit at EOF is killed after its kill_grace even
        when its fetcher is busy with a long job on the replacement meanwhile."""
        d = self.daemon(handlers=[warm(warm_max_jobs=1, kill_grace=1, env=["WARM_LINGER=1"])])
        a, _ = self.push_job("ok")
        self.wait_done(d, "W", a)
        old = self.pid_of(a)
        b, _ = self.push_job("sleep", 8)
        wait_for(lambda: self.pid_of(b), timeout=10, message="the next job running")
        wait_for(lambda: self.pid_gone(old), timeout=5,
                 message="the retired process killed after its grace")
        self.assertFalse(self.pid_gone(self.pid_of(b)))
        self.assertNotIn("done: W jid=" + b, d.log())

    def test_wm28_a_process_whose_job_timed_out_is_gone_when_the_grace_ends(self):
        """It answers the cancel 3 s into its 4 s grace, then does not exit at EOF: it is
        killed when the grace that began at the timeout ends, not a kill_grace after its
        "done" (8 s after the start)."""
        self.daemon(handlers=[warm(timeout=1, kill_grace=4, env=["WARM_LINGER=1"])])
        jid, _ = self.push_job("sleep", 30, 3, retry=3)
        wait_for(lambda: self.pid_of(jid), timeout=10, interval=0.02, message="running")
        started = time.time()
        pid = self.pid_of(jid)
        wait_for(lambda: self.pid_gone(pid), timeout=10, message="the process killed")
        self.assertLess(time.time() - started, 6.5)
        member, _ = self.wait_member(RETRY)
        self.assertEqual(loads(member)["error_class"], "Cogworker::HandlerTimeout")

    def test_wm10_warm_max_rss(self):
        d = self.daemon(handlers=[warm(warm_max_rss=1024)])
        jids = [self.push_job("ok")[0] for _ in range(3)]
        for jid in jids:
            self.wait_done(d, "W", jid)
        self.assertEqual(len({self.pid_of(j) for j in jids}), 3)
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)
        d.wait_log("its RSS is over warm_max_rss")

    def test_wm10_recycle_asked_by_the_process(self):
        d = self.daemon(handlers=[warm()])
        a, _ = self.push_job("recycle")
        self.wait_done(d, "W", a)
        b, _ = self.push_job("ok")
        self.wait_done(d, "W", b)
        self.assertNotEqual(self.pid_of(a), self.pid_of(b))
        wait_for(lambda: self.pid_gone(self.pid_of(a)), timeout=5, message="retired")

    def test_wm17_idle_processes_leave(self):
        d = self.daemon(handlers=[warm(warm_idle_timeout=1.0)])
        jid, _ = self.push_job("ok")
        self.wait_done(d, "W", jid)
        pid = self.pid_of(jid)
        d.wait_log("idle for warm_idle_timeout; retired", timeout=10)
        wait_for(lambda: self.pid_gone(pid), timeout=5, message="idle process gone")
        self.assertEqual(self.warm_pids(), [])

    def test_wm13_reload_replaces_processes_of_a_changed_handler(self):
        d = self.daemon(handlers=[warm(env=["V=1"])])
        a, _ = self.push_job("ok")
        self.wait_done(d, "W", a)
        d.settings["handlers"] = [warm(env=["V=2"])]
        d.write_conf()
        d.signal(signal.SIGHUP)
        d.wait_log("reloaded")
        wait_for(lambda: self.pid_gone(self.pid_of(a)), timeout=10, message="old one retired")
        b, _ = self.push_job("ok")
        self.wait_done(d, "W", b)
        self.assertNotEqual(self.pid_of(a), self.pid_of(b))
        with open("/proc/%d/environ" % self.pid_of(b), "rb") as f:
            self.assertIn(b"V=2\0", f.read())

    def test_wm13_a_reload_keeps_an_unchanged_handlers_process_and_replaces_on_a_number(self):
        d = self.daemon(handlers=[warm(kill_grace=5)])
        a, _ = self.push_job("ok")
        self.wait_done(d, "W", a)
        d.signal(signal.SIGHUP)                 # the same conf: the process stays
        d.wait_log("reloaded")
        b, _ = self.push_job("ok")
        self.wait_done(d, "W", b)
        self.assertEqual(self.pid_of(a), self.pid_of(b))
        d.settings["handlers"] = [warm(kill_grace=6)]
        d.write_conf()
        d.signal(signal.SIGHUP)
        d.wait_log("reloaded", count=2)
        c, _ = self.push_job("ok")
        self.wait_done(d, "W", c)
        self.assertNotEqual(self.pid_of(b), self.pid_of(c))
        d.wait_log("its handler changed")


    def test_wm13_reload_while_a_warm_job_runs_lets_it_finish_then_replaces(self):
        d = self.daemon(handlers=[warm(env=["V=1"])])
        a, _ = self.push_job("sleep", 2)
        wait_for(lambda: self.pid_of(a), timeout=10, message="running")
        d.settings["handlers"] = [warm(env=["V=2"])]
        d.write_conf()
        d.signal(signal.SIGHUP)
        d.wait_log("reloaded")
        self.wait_done(d, "W", a)
        b, _ = self.push_job("ok")
        self.wait_done(d, "W", b)
        self.assertNotEqual(self.pid_of(a), self.pid_of(b))
        with open("/proc/%d/environ" % self.pid_of(b), "rb") as f:
            self.assertIn(b"V=2\0", f.read())
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)


class Lifecycle(WarmTestCase):

    def test_wm11_cancel_a_running_warm_job(self):
        # concurrency 4 on one queue: most fetchers wait locally (no Redis call), and the
        # one whose process was cancelled must still wake to reap and replace it
        d = self.daemon(handlers=[warm(kill_grace=5)], concurrency=4, heartbeat_interval=1)
        jid, _ = self.push_job("sleep", 30, retry=3)
        wait_for(lambda: self.pid_of(jid), timeout=10, message="running")
        res = self.ctl("jobs", "cancel", jid)
        self.assertEqual(res.returncode, 0, res)
        member, _ = self.wait_member(DEAD)
        self.assertEqual(loads(member)["error_class"], "Cogworker::Cancelled")
        d.wait_log("its job was cancelled")
        # With no more jobs coming: the cancelled process is reaped (no <defunct> left for
        # the next job to clear) and a fresh one takes its place at once (issue 31).
        pid = self.pid_of(jid)
        started = time.monotonic()
        wait_for(lambda: not os.path.exists("/proc/%d" % pid), timeout=8,
                 message="the cancelled process reaped, not left <defunct>")
        wait_for(lambda: len(self.warm_pids()) == 1 and pid not in self.warm_pids(), timeout=8,
                 message="a fresh process in its place")
        self.assertLess(time.monotonic() - started, 8)
        # ... and the WARM column counts that one (it said 6 with concurrency 4, issue 31).
        def warm_column():
            procs = json.loads(self.ctl("--json", "processes").stdout)
            return procs and procs[0]["warm"]
        wait_for(lambda: warm_column() == 1, timeout=5, message="processes says 1 warm")
        time.sleep(2)                   # two more beats: it stays 1
        self.assertEqual(warm_column(), 1)

    def test_wm12_stop_drains_warm_jobs_then_ends_every_process(self):
        d = self.daemon(handlers=[warm()], concurrency=2, shutdown_timeout=10)
        jid, _ = self.push_job("sleep", 1.5)
        ok, _ = self.push_job("ok")
        wait_for(lambda: self.pid_of(jid) and self.pid_of(ok), timeout=10, message="running")
        self.assertEqual(d.stop(), 0)
        self.assertIn("done: W jid=%s" % jid, d.log())
        # Retired at the stop; a process still exiting as the daemon ends gets the reaper's
        # kill, a moment later on a loaded host.
        wait_for(lambda: self.warm_pids() == [], timeout=5, message="no warm process left")

    def test_wm12_stop_past_the_drain_requeues_the_warm_job(self):
        d = self.daemon(handlers=[warm()], shutdown_timeout=1)
        jid, pushed = self.push_job("hang")
        wait_for(lambda: self.pid_of(jid), timeout=10, message="running")
        self.assertEqual(d.stop(), 0)
        self.assertEqual(self.r.lrange("cogworker:queue:default", 0, -1), [pushed.encode()])
        wait_for(lambda: self.warm_pids() == [], timeout=5, message="no warm process left")

    def test_wm12_quiet_keeps_processes_and_runs_nothing_new(self):
        d = self.daemon(handlers=[warm()])
        a, _ = self.push_job("ok")
        self.wait_done(d, "W", a)
        d.signal(signal.SIGTSTP)
        d.wait_log("quiet")
        b, _ = self.push_job("ok")
        time.sleep(1.5)
        self.assertIsNone(self.pid_of(b))
        self.assertFalse(self.pid_gone(self.pid_of(a)))

    def test_wm14_kill_9_of_the_daemon_leaves_no_warm_process(self):
        d = self.daemon(handlers=[warm()], concurrency=2, **E2E)
        jid, _ = self.push_job("hang")
        idle, _ = self.push_job("ok")
        wait_for(lambda: self.pid_of(jid) and self.pid_of(idle), timeout=10,
                 message="both running")
        d.signal(signal.SIGKILL)
        d.proc.wait()
        wait_for(lambda: self.warm_pids() == [], timeout=5, message="no warm process left")
        # the hung job is recovered by the next daemon
        d2 = self.daemon(handlers=[warm(timeout=1, kill_grace=1)], **E2E)
        wait_for(lambda: self.pid_of(jid) and len([j for j, _ in self.runs() if j == jid]) == 2,
                 timeout=30, message="recovered and run again")
        d2.stop()

    def test_wm14_a_process_run_as_another_user_dies_with_the_daemon_without_a_reaper(self):
        """PR_SET_PDEATHSIG holds for a handler with `user`: the kernel clears it when the
        ids change, so it is set after. The reaper is killed first, so only it can act."""
        d = self.daemon(handlers=[warm(user="nobody", env=["WARM_START_SLEEP=60"],
                                       warm_start_timeout=60)])
        self.push_job("ok")
        wait_for(lambda: self.warm_pids(), timeout=10, message="the process starting")
        pid = self.warm_pids()[0]
        self.addCleanup(lambda: self.pid_gone(pid) or os.kill(pid, signal.SIGKILL))
        with open("/proc/%d/status" % pid) as f:
            self.assertIn("\nUid:\t65534\t", f.read())
        reapers = [int(c) for c in os.listdir("/proc") if c.isdigit()
                   and self.read("/proc/%s/comm" % c, b"") == b"cogworkerd-reap\n"
                   and self.read("/proc/%s/stat" % c, b"").rsplit(b")", 1)[1].split()[1]
                   == str(d.proc.pid).encode()]
        self.assertEqual(len(reapers), 1)
        os.kill(reapers[0], signal.SIGKILL)
        d.signal(signal.SIGKILL)
        d.proc.wait()
        wait_for(lambda: self.pid_gone(pid), timeout=5, message="the process gone")

    def test_wm18_processes_counts_warm_processes(self):
        d = self.daemon(handlers=[warm()], concurrency=2, heartbeat_interval=1)
        a, _ = self.push_job("sleep", 1)
        b, _ = self.push_job("ok")
        self.wait_done(d, "W", b)

        def warm_count():
            res = self.ctl("--json", "processes")
            procs = json.loads(res.stdout)
            return procs[0]["warm"] if procs and procs[0]["warm"] == 2 else None
        wait_for(warm_count, timeout=10, message="processes says 2 warm")
        out = self.ctl("processes").stdout.decode()
        self.assertIn("WARM", out.splitlines()[0])
        self.assertEqual(out.splitlines()[1].split()[-1], "2")

    def test_wm18_metrics(self):
        port = free_port()
        d = self.daemon(handlers=[warm(warm_max_jobs=2)], metrics_listen="127.0.0.1:%d" % port)
        jids = [self.push_job("ok")[0] for _ in range(3)]
        for jid in jids:
            self.wait_done(d, "W", jid)
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port).read().decode()
        self.assertIn("cogworkerd_warm_processes 1", body)
        self.assertIn("cogworkerd_warm_starts_total 2", body)
        self.assertIn('cogworkerd_warm_recycles_total{reason="jobs"} 1', body)
        self.assertIn("cogworkerd_warm_crashes_total 0", body)



class Prefetch(WarmTestCase):
    """WM-32..35: the next job taken while a warm job runs (doc/design.md "Warm handlers",
    fetcher.c): used at once when "done" comes, handed back when the run is long, never
    started past a pause, quiet or stop, never lost."""

    def metric(self, port, name):
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port).read().decode()
        for line in body.splitlines():
            if line.startswith(name + " "):
                return int(float(line.split()[1]))
        self.fail("%s not in /metrics" % name)

    def queued_jids(self):
        return [loads(x)["jid"] for x in self.r.lrange(b"cogworker:queue:default", 0, -1)]

    def held_behind_gate(self, d, quick=5):
        """quick jobs, then L (waits for the gate L) and Q: once L runs and Q has left the
        queue, Q is the job the fetcher holds."""
        for _ in range(quick):
            self.push_job("ok")
        gate, _ = self.push_job("gate", "L")
        q, _ = self.push_job("ok")
        wait_for(lambda: self.pid_of(gate), timeout=10, message="L started")
        wait_for(lambda: q not in self.queued_jids(), timeout=5, message="Q taken")
        inprog = [loads(x)["jid"] for x in self.inprogress(d)]
        self.assertIn(q, inprog)
        self.assertIsNone(self.pid_of(q), "Q must not start while L runs")
        return gate, q

    def open_gate(self, name="L"):
        with open(os.path.join(self.workdir, "gates", name), "w"):
            pass

    def test_wm32_jobs_are_taken_while_the_last_runs_and_each_runs_once(self):
        port = free_port()
        for i in range(300):
            self.push(job("W", ["ok"], jid="%024x" % i))
        d = self.daemon(handlers=[warm()], concurrency=2,
                        metrics_listen="127.0.0.1:%d" % port)
        wait_for(lambda: self.qlen() == 0, timeout=30, message="queue drained")
        self.wait_settled(d)
        ran = [j for j, _ in self.runs()]
        self.assertEqual(sorted(ran), ["%024x" % i for i in range(300)])
        # Each fetcher's first warm job has no prefetch (no run to go by); most after do.
        self.assertGreater(self.metric(port, "cogworkerd_prefetched_total"), 150)
        self.assertEqual(self.metric(port, "cogworkerd_prefetch_returned_total"), 0)

    def test_wm32_a_hold_of_0_takes_nothing_ahead(self):
        port = free_port()
        for i in range(50):
            self.push(job("W", ["ok"]))
        d = self.daemon(handlers=[warm(warm_prefetch_hold=0)], concurrency=2,
                        metrics_listen="127.0.0.1:%d" % port)
        wait_for(lambda: self.qlen() == 0, timeout=30, message="queue drained")
        self.wait_settled(d)
        self.assertEqual(len(self.runs()), 50)
        self.assertEqual(self.metric(port, "cogworkerd_prefetched_total"), 0)

    def test_wm33_a_job_held_behind_a_long_one_goes_back_for_another_fetcher(self):
        port = free_port()
        d = self.daemon(handlers=[warm(warm_prefetch_hold=1)],
                        metrics_listen="127.0.0.1:%d" % port)
        gate, q = self.held_behind_gate(d)
        # Held its second, Q goes back to the head of the queue while L still runs ...
        wait_for(lambda: q in self.queued_jids(), timeout=5, message="Q handed back")
        self.assertEqual(self.metric(port, "cogworkerd_prefetch_returned_total"), 1)
        self.assertEqual([loads(x)["jid"] for x in self.inprogress(d)], [gate])
        # ... where another daemon's fetcher takes it and runs it, L still running.
        d2 = self.daemon(handlers=[warm()])
        self.wait_done(d2, "W", q)
        self.assertNotIn("done: W jid=%s" % gate, d.log())
        self.open_gate()
        self.wait_done(d, "W", gate)
        self.assertEqual([j for j, _ in self.runs()].count(q), 1)
        self.wait_settled(d)
        self.wait_settled(d2)

    def test_wm34_a_held_job_never_starts_after_a_pause(self):
        d = self.daemon(handlers=[warm(warm_prefetch_hold=20)])
        gate, q = self.held_behind_gate(d)
        res = self.ctl("queues", "pause", "default")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.open_gate()
        self.wait_done(d, "W", gate)
        # Read again before it starts, the pause sends Q back to its queue unstarted.
        wait_for(lambda: q in self.queued_jids(), timeout=5, message="Q handed back")
        time.sleep(0.5)
        self.assertIsNone(self.pid_of(q))
        self.assertEqual(self.inprogress(d), [])
        res = self.ctl("queues", "resume", "default")
        self.assertEqual(res.returncode, 0, res.stderr)
        self.wait_done(d, "W", q)
        self.assertEqual([j for j, _ in self.runs()].count(q), 1)

    def test_wm36_a_held_job_cancelled_is_never_started(self):
        d = self.daemon(handlers=[warm(warm_prefetch_hold=20)])
        gate, q = self.held_behind_gate(d)
        env = dict(os.environ, REDIS_URL=self.server.url)
        cancel = subprocess.Popen([binary("cogworkerctl"), "-c", "/dev/null", "jobs", "cancel", q],
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        d.wait_log("cancel: jid=%s: stopping" % q)      # reached, though not started
        self.open_gate()
        out, err = cancel.communicate(timeout=30)
        self.assertEqual(cancel.returncode, 0, err)
        self.assertIn("cancelled %s on %s: dead" % (q, d.identity), out.decode())
        self.wait_done(d, "W", gate)
        self.assertIsNone(self.pid_of(q), "a job cancelled while held never starts")
        dead = [loads(x) for x in self.r.zrange(DEAD, 0, -1)]
        self.assertEqual([(x["jid"], x["error_class"]) for x in dead],
                         [(q, "Cogworker::Cancelled")])
        self.wait_settled(d)

    def test_wm35_quiet_and_stop_hand_a_held_job_back(self):
        d = self.daemon(handlers=[warm(warm_prefetch_hold=20)], shutdown_timeout=10)
        gate, q = self.held_behind_gate(d)
        res = self.ctl("processes", "quiet", d.identity)     # nothing new starts
        self.assertEqual(res.returncode, 0, res.stderr)
        wait_for(lambda: q in self.queued_jids(), timeout=5, message="Q handed back")
        self.assertEqual([loads(x)["jid"] for x in self.inprogress(d)], [gate])
        res = self.ctl("processes", "resume", d.identity)
        self.assertEqual(res.returncode, 0, res.stderr)
        self.open_gate()
        self.wait_done(d, "W", q)
        # Stop: L2 runs, Q2 held; both end up done or queued, none lost, none twice.
        os.remove(os.path.join(self.workdir, "gates", "L"))
        gate2, q2 = self.held_behind_gate(d)
        d.signal(signal.SIGTERM)
        wait_for(lambda: q2 in self.queued_jids(), timeout=5, message="Q2 handed back")
        self.open_gate()
        d.wait_exit(timeout=20)
        self.assertIn("done: W jid=%s" % gate2, d.log())
        self.assertEqual(self.queued_jids(), [q2])
        self.assertIsNone(self.pid_of(q2))


if __name__ == "__main__":
    import unittest
    unittest.main()

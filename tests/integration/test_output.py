# SPDX-License-Identifier: MIT
"""Every run's output, kept and shown, and cancelling a running job (doc/behaviours.md OUT,
CAN; doc/protocol.md §7.13, §7.29): what `cogworkerctl jobs log` prints for a finished run
and, with --follow, for a running one; the TTL and the per-job cap on runs; the tail kept
when a run prints more than output_keep; output_keep = 0; none for a short, silent
success; a write whose reply was lost, sent again; `jobs cancel` of a running job
whose handler left a grandchild (all gone, dead as Cogworker::Cancelled, once), with
--discard, of a job that is not running, and `jobs kill` of a running job.

Run: python3 tests/integration/run.py test_output
"""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, binary, job, wait_for  # noqa: E402
from observe import TcpProxy  # noqa: E402

DEAD = b"cogworker:dead"


def out_key(jid, n=None):
    return ("cogworker:output:%s" % jid + ("" if n is None else ":%d" % n)).encode()


def sh(script):
    return ["/bin/sh", "-c", script]


# Prints, waits for its gate, prints again: a run that is running while the test looks.
GATED = sh('echo "line one"; echo "to stderr" >&2; '
           'while [ ! -f "$GATES/$COGWORKER_JID" ]; do sleep 0.05; done; '
           'echo "line two"; exit "$(cat "$GATES/$COGWORKER_JID")"')
# Leaves a grandchild in its group, records both pids, then waits for ever.
FAMILY = sh('sleep 300 & echo $! > "$GATES/$COGWORKER_JID.grandchild"; '
            'echo $$ > "$GATES/$COGWORKER_JID.child"; echo working; wait')

# Ignores TERM (the shell and its sleeps), so it lives until kill_grace's KILL: a cancel
# under way lasts that long.
STUBBORN = sh("trap '' TERM; echo stubborn; while :; do sleep 0.1; done")


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):
        return False


class OutputCase(DaemonTestCase):
    def ctl(self, *args, timeout=30):
        env = dict(os.environ, REDIS_URL=self.server.url)
        return subprocess.run([binary("cogworkerctl")] + list(args), env=env,
                              capture_output=True, timeout=timeout)

    def start(self, **settings):
        settings.setdefault("handlers", [
            {"class": "Gated", "command": GATED},
            {"class": "Family", "command": FAMILY, "kill_grace": 1},
            {"class": "Hi", "command": sh('echo "hi $COGWORKER_RETRY_COUNT"; exit 1')},
        ])
        return self.daemon(**settings)

    def pushed(self, cls, **kw):
        payload = job(cls, **kw)
        self.push(payload, queue=kw.get("queue", "default"))
        return json.loads(payload)["jid"]

    def wait_running(self, d, jid, timeout=10):
        key = ("cogworker:workers:%s" % d.identity).encode()
        wait_for(lambda: any(jid.encode() in v for v in self.r.hvals(key)), timeout=timeout,
                 message="job %s running" % jid)

    def wait_record(self, jid, n, pred, timeout=10):
        def rec():
            raw = self.r.hget(out_key(jid), str(n))
            return raw and pred(json.loads(raw)) and json.loads(raw)
        return wait_for(rec, timeout=timeout, message="run %d of %s" % (n, jid))


class TestJobsLog(OutputCase):
    def test_out1_finished_run_printed_with_its_outcome(self):
        """OUT-1: the kept output of a finished run, byte for byte on stdout; which run and
        how it ended on stderr; --json has the same."""
        d = self.start()
        jid = self.pushed("Gated")
        self.wait_running(d, jid)
        # stdout and stderr are two pipes: what reaches the log first is only ordered
        # when the handler waits in between, as it does here until the gate opens.
        wait_for(lambda: b"to stderr" in (self.r.get(out_key(jid, 1)) or b""))
        d.open_gate(jid, 0)
        rec = self.wait_record(jid, 1, lambda r: r["finished_at"] is not None)
        self.assertEqual(rec["outcome"], "success")
        self.assertEqual(rec["identity"], d.identity)
        p = self.ctl("jobs", "log", jid)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"line one\nto stderr\nline two\n")
        err = p.stderr.decode()
        self.assertIn("jid %s run 1" % jid, err)
        self.assertIn("Gated", err)
        # how long it ran, as the log says it: 0.21s, not 0s
        self.assertIn("run 1 ended: success after %.2fs\n"
                      % (rec["finished_at"] - rec["started_at"]), err)
        p = self.ctl("jobs", "log", jid, "--json")
        doc = json.loads(p.stdout)
        self.assertEqual((doc["run"], doc["runs"], doc["outcome"], doc["output"]),
                         (1, [1], "success", "line one\nto stderr\nline two\n"))
        self.assertLessEqual(self.r.ttl(out_key(jid)), 7 * 86400)
        self.assertGreater(self.r.ttl(out_key(jid, 1)), 7 * 86400 - 60)

    def test_out2_follow_streams_a_running_job_and_ends_with_it(self):
        """OUT-2: --follow prints what a running job printed so far, then what it prints
        next, and ends when the job ends, with its outcome."""
        d = self.start()
        jid = self.pushed("Gated")
        env = dict(os.environ, REDIS_URL=self.server.url)
        f = subprocess.Popen([binary("cogworkerctl"), "jobs", "log", jid, "--follow"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: f.poll() is None and f.kill())
        self.wait_running(d, jid)
        self.wait_record(jid, 1, lambda r: "line one" in (self.r.get(out_key(jid, 1)) or b"")
                         .decode())
        time.sleep(1.2)                 # two of follow's reads while the job waits
        self.assertIsNone(f.poll(), "follow ended while the job ran")
        d.open_gate(jid, 3)
        out, err = f.communicate(timeout=15)
        self.assertEqual(f.returncode, 0, err)
        self.assertEqual(out, b"line one\nto stderr\nline two\n")
        self.assertIn("run 1 ended: retrying (Cogworker::HandlerFailed: exit status 3",
                      err.decode())

    def test_out3_runs_capped_and_numbered_run_shown(self):
        """OUT-3: each run is numbered; only the newest output_runs are kept; --run N shows
        run N; a run no longer kept says so (exit 1)."""
        d = self.start(output_runs=2)
        jid = self.pushed("Hi", retry=5)
        for n in (1, 2, 3):
            self.wait_record(jid, n, lambda r: r["finished_at"] is not None)
            if n < 3:   # run the retry now instead of after its backoff
                wait_for(lambda: self.r.zcard(b"cogworker:retry") == 1)
                member = self.r.zrange(b"cogworker:retry", 0, 0)[0]
                self.r.zadd(b"cogworker:retry", {member: 1})
        wait_for(lambda: self.r.hget(out_key(jid), "1") is None, message="run 1 trimmed")
        self.assertEqual(sorted(self.r.hkeys(out_key(jid))), [b"2", b"3", b"last", b"token"])
        self.assertFalse(self.r.exists(out_key(jid, 1)))
        p = self.ctl("jobs", "log", jid)
        self.assertEqual(p.stdout, b"hi 2\n")
        p = self.ctl("jobs", "log", jid, "--run", "2")
        self.assertEqual(p.stdout, b"hi 1\n")
        p = self.ctl("jobs", "log", jid, "--run", "1")
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"not kept (kept: runs 2 to 3)", p.stderr)
        d.stop()

    def test_out4_ttl_tail_and_off(self):
        """OUT-4: what is kept expires after output_ttl; a run printing more than
        output_keep keeps its last output_keep bytes and says how much was cut;
        output_keep = 0 keeps nothing."""
        # (The global output_keep for one handler, the handler's own for the other: the
        # harness writes all handlers on one line, where the conf loader's 32-bit check
        # reads the first value of a name only.)
        self.start(output_ttl=2, output_keep=1000, handlers=[
            {"class": "Loud", "command": sh('i=0; while [ $i -lt 300 ]; do '
                                            'echo "line $i of the loud job"; i=$((i+1)); done')},
            {"class": "Quiet", "command": sh("echo not kept"), "output_keep": 0}])
        loud, quiet = self.pushed("Loud"), self.pushed("Quiet")
        rec = self.wait_record(loud, 1, lambda r: r["finished_at"] is not None)
        text = self.r.get(out_key(loud, 1))
        self.assertEqual(len(text), 1000)
        self.assertTrue(text.endswith(b"line 299 of the loud job\n"))
        self.assertEqual(rec["dropped"], rec["bytes"] - 1000)
        p = self.ctl("jobs", "log", loud)
        self.assertEqual(p.stdout, text)
        self.assertIn(b"were not kept", p.stderr)
        self.assertLessEqual(self.r.ttl(out_key(loud)), 2)
        wait_for(lambda: not self.r.exists(out_key(loud)) and not self.r.exists(
            out_key(loud, 1)), timeout=5, message="kept output expired")
        p = self.ctl("jobs", "log", loud)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"no output kept", p.stderr)
        self.assertFalse(self.r.exists(out_key(quiet)))

    def test_out5_short_silent_success_keeps_nothing(self):
        """OUT-5: a run that succeeds before its first write without printing keeps nothing
        (no keys; jobs log says why it may find none); a silent run that fails, that runs
        past its first write, or that succeeds after a run that was kept, keeps its record;
        so does one that a `jobs log --follow` waits for."""
        handlers = [
            {"class": "Silent", "command": ["/bin/true"]},
            {"class": "SilentFail", "command": sh("exit 2")},
            {"class": "SlowSilent", "command": sh("sleep 1.5")},
            {"class": "FailsOnce", "command": sh(
                '[ "${COGWORKER_RETRY_COUNT:-0}" -ge 1 ] || { echo first; exit 1; }')},
            {"class": "Says", "command": sh("echo said")}]
        # Followed before any daemon runs: the job waits in its queue, then runs silently.
        followed = self.pushed("Silent")
        env = dict(os.environ, REDIS_URL=self.server.url)
        f = subprocess.Popen([binary("cogworkerctl"), "jobs", "log", followed, "--follow"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.addCleanup(lambda: f.poll() is None and f.kill())
        wait_for(lambda: self.r.exists(out_key(followed) + b":followed"),
                 message="the follower's mark")
        d = self.start(handlers=handlers)
        out, err = f.communicate(timeout=20)
        self.assertEqual((f.returncode, out), (0, b""), err)
        self.assertIn(b"run 1 ended: success", err)
        wait_for(lambda: not self.r.exists(out_key(followed) + b":followed"),
                 message="the mark gone with the follower")

        silent = self.pushed("Silent")
        fail = self.pushed("SilentFail", retry=False)
        slow = self.pushed("SlowSilent")
        twice = self.pushed("FailsOnce", retry=1)
        says = self.pushed("Says")      # concurrency 1: written after the others ended
        for jid in (fail, slow, twice, says):
            self.wait_record(jid, 1, lambda r: r["finished_at"] is not None)
        self.assertEqual(self.r.keys(b"cogworker:output:" + silent.encode() + b"*"), [])
        p = self.ctl("jobs", "log", silent)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"no output kept", p.stderr)
        self.assertIn(b"succeeded without printing", p.stderr)
        rec = json.loads(self.r.hget(out_key(fail), "1"))
        self.assertEqual((rec["outcome"], rec["bytes"]), ("dead", 0))
        rec = json.loads(self.r.hget(out_key(slow), "1"))
        self.assertEqual((rec["outcome"], rec["bytes"]), ("success", 0))
        p = self.ctl("jobs", "log", slow)
        self.assertEqual((p.returncode, p.stdout), (0, b""))
        self.assertIn(b"run 1 ended: success", p.stderr)
        self.assertEqual(self.ctl("jobs", "log", says).stdout, b"said\n")
        # The retry of FailsOnce succeeds silently: kept, since run 1 was.
        wait_for(lambda: self.r.zcard(b"cogworker:retry") == 1)
        self.r.zadd(b"cogworker:retry", {self.r.zrange(b"cogworker:retry", 0, 0)[0]: 1})
        rec = self.wait_record(twice, 2, lambda r: r["finished_at"] is not None)
        self.assertEqual((rec["outcome"], rec["bytes"]), ("success", 0))
        p = self.ctl("jobs", "log", twice)
        self.assertIn(b"run 2 ended: success", p.stderr)
        d.stop()

    def test_out8_silent_success_after_a_stopped_run_is_kept(self):
        """OUT-8: a job whose first run printed and was stopped (requeued at the stop),
        then succeeds silently on the next daemon: the success is kept as its last run,
        though its ack asked Redis nothing but its settled record (REQUEUE had marked it,
        doc/protocol.md §7.34)."""
        once = os.path.join(self.workdir, "ran-once")
        handlers = [{"class": "StopThenOk", "command": sh(
            '[ -e %s ] && exit 0; touch %s; echo started; exec sleep 30' % (once, once))}]
        d = self.start(handlers=handlers, shutdown_timeout=1)
        jid = self.pushed("StopThenOk")
        self.wait_record(jid, 1, lambda r: r["bytes"] > 0)
        self.assertEqual(d.stop(), 0)
        self.wait_record(jid, 1, lambda r: r["outcome"] == "stopped")
        self.assertEqual(self.r.get("cogworker:batch:settled:" + jid), b"waited")
        d = self.start(handlers=handlers)
        rec = self.wait_record(jid, 2, lambda r: r["finished_at"] is not None)
        self.assertEqual((rec["outcome"], rec["bytes"]), ("success", 0))
        self.assertEqual(self.r.get("cogworker:batch:settled:" + jid), b"success")
        p = self.ctl("jobs", "log", jid)
        self.assertIn(b"run 2 ended: success", p.stderr)
        d.stop()

    def test_out6_first_batch_on_a_fresh_server_all_kept(self):
        """OUT-6: on a server that has not seen OUTPUT_WRITE yet, every run of the writer's
        first batch is kept (each NOSCRIPT answered by an EVAL of its own write)."""
        d = self.start(handlers=[{"class": "Says", "command": sh('echo "said $0"'),
                                  "args_as_argv": True}])
        jids = [self.pushed("Says", args=[str(i)]) for i in range(3)]
        for i, jid in enumerate(jids):
            self.wait_record(jid, 1, lambda r: r["finished_at"] is not None)
            self.assertEqual(self.r.get(out_key(jid, 1)), b"said %d\n" % i)
        self.assertNotIn("output not kept", d.log())

    def test_out7_a_write_whose_reply_was_lost(self):
        """OUT-7: an output write that ran in Redis but whose reply was lost is sent again
        without harm: a first write finds the run it numbered (no second run left
        "running"), a later one replaces the text instead of appending its bytes twice."""
        proxy = TcpProxy(self.server.port)
        self.addCleanup(proxy.close)
        proxy.lose_reply_to(b"A first")
        proxy.lose_reply_to(b"B second")
        self.start(url=proxy.url, handlers=[
            {"class": "Warm", "command": sh("echo warm")},
            # The lost writes are while the run runs (written every 0.5-0.8 s): a final
            # write that fails is dropped, not sent again.
            {"class": "A", "command": sh("echo A first; sleep 2; echo A last")},
            {"class": "B", "command": sh("echo B first; sleep 1.5; echo B second; "
                                         "sleep 1.5; echo B third")}])
        # A server that knows the script: a lost NOSCRIPT reply would prove nothing.
        self.wait_record(self.pushed("Warm"), 1, lambda r: r["finished_at"] is not None)
        a, b = self.pushed("A"), self.pushed("B")
        for jid, text in ((a, b"A first\nA last\n"), (b, b"B first\nB second\nB third\n")):
            rec = self.wait_record(jid, 1, lambda r: r["finished_at"] is not None, timeout=15)
            self.assertEqual(rec["outcome"], "success")
            self.assertEqual(self.r.get(out_key(jid, 1)), text)
            self.assertEqual(sorted(k for k in self.r.hkeys(out_key(jid)) if k.isdigit()),
                             [b"1"])
        self.assertEqual(proxy.lose, [], "both replies were lost")


class TestCancel(OutputCase):
    def test_can1_cancel_running_job_with_grandchild(self):
        """CAN-1: the handler's whole group is stopped, the job is dead once as
        Cogworker::Cancelled, without on_death, and its output says how it ended."""
        d = self.start()
        jid = self.pushed("Family")
        self.wait_running(d, jid)
        gc = os.path.join(d.gates, jid + ".grandchild")
        wait_for(lambda: read(os.path.join(d.gates, jid + ".child")) and read(gc))
        child = int(read(os.path.join(d.gates, jid + ".child")))
        grandchild = int(read(gc))
        self.assertTrue(alive(child) and alive(grandchild))
        p = self.ctl("jobs", "cancel", jid)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(("cancelled %s on %s: dead" % (jid, d.identity)).encode(), p.stdout)
        wait_for(lambda: not alive(child) and not alive(grandchild), timeout=5,
                 message="handler and grandchild gone")
        dead = [json.loads(m) for m in self.r.zrange(DEAD, 0, -1)]
        self.assertEqual([x["jid"] for x in dead], [jid])
        self.assertEqual(dead[0]["error_class"], "Cogworker::Cancelled")
        self.assertTrue(dead[0]["error_message"].startswith("cancelled on request"))
        attempts = self.r.lrange(("cogworker:job_attempts:" + jid).encode(), 0, -1)
        self.assertEqual([json.loads(a)["outcome"] for a in attempts], ["dead"])
        self.assertEqual(self.r.llen(("cogworker:inprogress:" + d.identity).encode()), 0)
        rec = self.wait_record(jid, 1, lambda r: r["finished_at"] is not None)
        self.assertEqual((rec["outcome"], rec["error_class"]), ("dead", "Cogworker::Cancelled"))
        # A second cancel finds nothing running, and nothing was filed twice.
        p = self.ctl("jobs", "cancel", jid)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"is not running (it is in dead)", p.stderr)
        time.sleep(0.5)
        self.assertEqual(self.r.zcard(DEAD), 1)
        self.assertEqual(len(d.log_lines("fail: Family jid=%s" % jid)), 1)
        self.assertEqual(int(self.r.get(b"cogworker:stats:failed")), 1)

    def test_can4_cancels_at_once_exactly_one_succeeds(self):
        """CAN-4: three `jobs cancel` of one job at the same moment all said "cancelled" and
        exited 0. One wins; the others say it was already cancelled, exit 1; one burial."""
        d = self.start(handlers=[{"class": "Stubborn", "command": STUBBORN, "kill_grace": 2}])
        jid = self.pushed("Stubborn")
        self.wait_running(d, jid)
        env = dict(os.environ, REDIS_URL=self.server.url)
        procs = [subprocess.Popen([binary("cogworkerctl"), "jobs", "cancel", jid], env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                 for _ in range(3)]
        done = [p.communicate(timeout=30) + (p.returncode,) for p in procs]
        self.assertEqual(sorted(rc for _, _, rc in done), [0, 1, 1], done)
        for out, err, rc in done:
            if rc == 0:
                self.assertIn(("cancelled %s on %s: dead" % (jid, d.identity)).encode(), out)
            else:
                self.assertEqual(out, b"")
                self.assertIn(("%s was already cancelled" % jid).encode(), err)
        self.assertEqual([json.loads(m)["jid"] for m in self.r.zrange(DEAD, 0, -1)], [jid])
        attempts = self.r.lrange(("cogworker:job_attempts:" + jid).encode(), 0, -1)
        self.assertEqual(len(attempts), 1)
        self.assertEqual(self.r.keys(b"cogworker:cancel:*"), [])
        # later, once more: not running, and said to have been cancelled
        p = self.ctl("jobs", "cancel", jid, "--json")
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"was already cancelled: it is not running (it is in dead)", p.stderr)
        self.assertEqual(json.loads(p.stdout)["reason"], "already cancelled")

    def test_can2_cancel_discard_and_kill_of_running(self):
        """CAN-2: --discard drops the job (no dead entry, attempt "discarded");
        `jobs kill` of a running job says to use cancel; a job that is not running
        cannot be cancelled (exit 1)."""
        d = self.start()
        jid = self.pushed("Gated")
        self.wait_running(d, jid)
        p = self.ctl("jobs", "kill", jid)
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"jobs cancel JID", p.stderr)
        p = self.ctl("jobs", "cancel", jid, "--discard", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual((doc["cancelled"], doc["outcome"], doc["process"]),
                         (True, "discarded", d.identity))
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertEqual(self.r.zcard(b"cogworker:retry"), 0)
        p = self.ctl("jobs", "cancel", "0123456789abcdef01234567")
        self.assertEqual(p.returncode, 1)
        self.assertIn(b"is not running", p.stderr)
        queued = self.pushed("Gated", queue="elsewhere")
        p = self.ctl("jobs", "cancel", queued)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(b"is not running (it is in queued)", p.stderr)

    def test_can3_cancel_the_moment_the_job_starts(self):
        """CAN-3: a job cancelled as soon as its handler starts, before the once-a-second
        flush has written its workers entry, is found on its process's in-progress list
        and cancelled all the same."""
        d = self.start()
        jid = self.pushed("Family")
        started = os.path.join(d.gates, jid + ".child")
        wait_for(lambda: read(started), timeout=10, message="the handler started")
        p = self.ctl("jobs", "cancel", jid)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(("cancelled %s on %s: dead" % (jid, d.identity)).encode(), p.stdout)
        dead = [json.loads(m) for m in self.r.zrange(DEAD, 0, -1)]
        self.assertEqual([(x["jid"], x["error_class"]) for x in dead],
                         [(jid, "Cogworker::Cancelled")])


if __name__ == "__main__":
    unittest.main()

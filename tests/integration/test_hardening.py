# SPDX-License-Identifier: MIT
"""HD — what a hostile payload or handler can still try (doc/behaviours.md §38): objects
that are not jobs, NUL inside strings, a huge args array, an output flood of empty lines,
an rlimit that does nothing, large jobs. Each scenario is observed as a user would: the
dead set, the handler's own records, the daemon's log, its CPU time and its memory.

Run: python3 tests/integration/run.py test_hardening
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job, new_jid, sanitizer_build, wait_for  # noqa: E402
from runkit import (DEAD, FAILED, RETRY, JobTestCase, loads, recorder_cmd,  # noqa: E402
                    sh)

# Records every run: the handler's stdin, one line per run.
RECORD_STDIN = 'cat >> "$RUNS.stdin"; echo >> "$RUNS.stdin"; echo "$COGWORKER_JID" >> "$RUNS"'


def memory_mb(pid, field="VmRSS"):
    """A line of /proc/PID/status in MB: VmRSS now, VmHWM the peak so far."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no %s for pid %d" % (field, pid))


def cpu_seconds(pid):
    """utime + stime of a process, in seconds (/proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Hardening(JobTestCase):

    def daemon_recording(self, **settings):
        """A daemon whose catch-all handler records every run, with a global on_death."""
        self.deaths = self.path("deaths")
        return self.daemon(handlers=[{"class": "*", "command": sh(RECORD_STDIN)},
                                     {"class": "R", "command": handler("ok")}],
                           on_death=[recorder_cmd(self.deaths, self.server)], **settings)

    def assert_buried(self, d, raws, reasons):
        """Each raw payload is in dead as an InvalidJob wrapper with its reason; nothing ran,
        nothing was retried, no on_death ran, and the daemon goes on running jobs."""
        got = self.wait_member(DEAD, count=len(raws))
        self.wait_settled(d)
        by_raw = {loads(m)["raw_payload"]: loads(m) for m, _ in got}
        # raw_payload is the payload scrubbed to UTF-8, one U+FFFD per bad sequence
        self.assertEqual(sorted(by_raw), sorted(r.decode("utf-8", "replace") for r in raws))
        for raw, reason in zip(raws, reasons):
            w = by_raw[raw.decode("utf-8", "replace")]
            self.assertEqual(w["class"], "(unparseable)")
            self.assertEqual(w["error_class"], "Cogworker::InvalidJob")
            self.assertEqual(w["error_message"], reason, raw)
            self.assertIs(w["retry"], False)
            d.wait_log("invalid job from queue default moved to dead: " + reason)
        self.assertIsNone(self.read(self.path("runs.stdin")), "an invalid job ran")
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(self.counter(FAILED), len(raws))
        ok = loads(self.push(job("R")))["jid"]
        self.wait_done(d, "R", ok)
        time.sleep(0.3)
        self.assertIsNone(self.read(self.deaths), "on_death ran for an invalid job")

    def test_hd1_objects_that_are_not_jobs_are_buried_never_run(self):
        d = self.daemon_recording()
        raws = [b'{"args":[],"queue":"default","jid":"%024x"}' % 1,
                b'{"class":7,"args":[],"queue":"default","jid":"%024x"}' % 2,
                b'{"class":"","args":[],"queue":"default","jid":"%024x"}' % 3,
                b'{"class":"X","args":{"a":1},"queue":"default","jid":"%024x"}' % 4,
                b'{"class":"X","args":"[1]","queue":"default","jid":"%024x"}' % 5,
                b'{"class":"X","args":[],"queue":"default"}',
                b'{"class":"X","args":[],"queue":"default","jid":12}']
        reasons = ["not a job: no class", "not a job: class is not a string",
                   "not a job: class is an empty string", "not a job: args is not an array",
                   "not a job: args is not an array", "not a job: no jid",
                   "not a job: jid is not a non-empty string"]
        for raw in raws:
            self.push(raw)
        self.assert_buried(d, raws, reasons)

    def test_hd3_nul_in_class_queue_or_jid_is_an_invalid_job(self):
        """{"class":"R\\u0000X"} once ran handler R: a C string ends at the NUL."""
        d = self.daemon_recording()
        raws = [b'{"class":"R\\u0000X","args":[],"queue":"default","jid":"%024x"}' % 1,
                b'{"class":"X","args":[],"queue":"default\\u0000evil","jid":"%024x"}' % 2,
                b'{"class":"X","args":[],"queue":"default","jid":"%024x\\u0000"}' % 3]
        reasons = ["not a job: class holds a NUL character (\\u0000)",
                   "not a job: queue holds a NUL character (\\u0000)",
                   "not a job: jid holds a NUL character (\\u0000)"]
        for raw in raws:
            self.push(raw)
        self.assert_buried(d, raws, reasons)
        self.assertEqual(d.runs_of("%024x" % 1), 0)

    def test_hd10_json_that_is_not_utf8_is_an_invalid_job(self):
        """Bytes that are not UTF-8 (a Latin-1 "é", a cut sequence, a surrogate) once ran:
        the job is buried with where the first bad byte is, and its wrapper is valid JSON."""
        d = self.daemon_recording()
        raws = [b'{"class":"X","args":["caf\xe9"],"queue":"default","jid":"%024x"}' % 1,
                b'{"class":"X\xc3","args":[],"queue":"default","jid":"%024x"}' % 2,
                b'{"class":"X","args":["\xed\xa0\x80"],"queue":"default","jid":"%024x"}' % 3]
        reasons = ["not a job: its JSON is not UTF-8 (byte 26 is \\xE9)",
                   "not a job: its JSON is not UTF-8 (byte 12 is \\xC3)",
                   "not a job: its JSON is not UTF-8 (byte 23 is \\xED)"]
        for raw in raws:
            self.push(raw)
        self.assert_buried(d, raws, reasons)
        for m in self.r.zrange(DEAD, 0, -1):
            m.decode("utf-8")           # strict: what the daemon filed is UTF-8

    def test_hd4_nul_in_an_argv_arg_is_dead_at_once_never_truncated(self):
        """["a\\u0000b"] once reached argv as "a". It can't be passed: the job is dead with
        the reason, not retried, the handler never started; on_death runs (a real job)."""
        deaths = self.path("deaths")
        d = self.daemon(handlers=[{"class": "A", "command": handler("dump"),
                                   "args_as_argv": True}],
                        on_death=[recorder_cmd(deaths, self.server)])
        p = self.push(job("A", ["ok", "a\u0000b"], retry=10))
        jid = loads(p)["jid"]
        member, _ = self.wait_member(DEAD, timeout=10)
        e = loads(member)
        self.assertEqual(e["jid"], jid)
        self.assertEqual(e["error_class"], "Cogworker::HandlerSpawnFailed")
        self.assertEqual(e["error_message"], "exec failed: args[1] holds a NUL character "
                         "(\\u0000), which can't be passed on a command line")
        self.assertEqual(e["retry_count"], 1)
        self.wait_settled(d)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(d.runs_of(jid), 0)
        wait_for(lambda: self.read(deaths), timeout=10, message="on_death of the dead job")
        # the same args without args_as_argv reach the handler intact, on stdin
        d.stop()
        d2 = self.daemon(handlers=[{"class": "A", "command": handler("dump")}])
        p = self.push(job("A", ["ok", "a\u0000b"]))
        jid = loads(p)["jid"]
        self.wait_done(d2, "A", jid)
        self.assertEqual(self.read(os.path.join(self.workdir, "runs.d", jid + ".stdin")), p)

    def test_hd6_100000_args_cost_well_under_a_second_of_daemon_cpu(self):
        """80 000 args once cost 12.9 s of the daemon's CPU (a quadratic walk of the args).
        100 000 are run (or refused) in well under one second of it."""
        count = self.path("count")
        d = self.daemon(handlers=[{"class": "Many", "command": sh('echo $# > "$1"', count),
                                   "args_as_argv": True}])
        args = list(range(100000))
        p = self.push(job("Many", args))
        jid = loads(p)["jid"]
        before = cpu_seconds(d.proc.pid)
        self.wait_done(d, "Many", jid, timeout=30)
        self.wait_settled(d)
        used = cpu_seconds(d.proc.pid) - before
        self.assertEqual(self.read(count), b"100001\n")     # the count file, then the args
        self.assertLess(used, 1.0, "the daemon used %.2fs of CPU on 100 000 args" % used)

    def test_hd7_a_flood_of_empty_lines_writes_no_more_than_the_budget_to_the_log(self):
        """The 1 MiB per stream counts log bytes, prefix included: 5 MB of empty lines once
        wrote 121 MB of log. Each stream stops at its budget, and says so once."""
        flood = sh('head -c 400000 /dev/zero | tr "\\000" "\\n"; '
                   'head -c 400000 /dev/zero | tr "\\000" "\\n" >&2; exit 0')
        d = self.daemon(handlers=[{"class": "Flood", "command": flood}])
        size0 = os.path.getsize(d.log_path)
        p = self.push(job("Flood"))
        jid = loads(p)["jid"]
        self.wait_done(d, "Flood", jid, timeout=60)
        grown = os.path.getsize(d.log_path) - size0
        log = d.log()
        for stream in ("stdout", "stderr"):
            lines = [l for l in log.splitlines() if ("jid=%s %s: " % (jid, stream)) in l]
            logged = sum(len(l.encode()) + 1 for l in lines)
            self.assertLessEqual(logged, 1 << 20, stream)
            self.assertGreater(logged, (1 << 20) - 1024, stream)   # the budget is used
            cut = [l for l in lines if "output past 1024 KiB of log; the rest of this run's %s "
                   "is not logged" % stream in l]
            self.assertEqual(len(cut), 1, stream)
        self.assertLess(grown, 2 * (1 << 20) + 8192, "the log grew by %d bytes" % grown)

    def test_hd7_json_lines_that_escape_big_stay_within_the_budget(self):
        """In JSON a byte can take six in the log (\\u0001). Each line was priced at the
        last one's cost, so after 850 plain lines of 1 000 bytes (about 1 020 000 of log) an
        8 000-byte line of control bytes looked as if it fitted and took 48 000: the budget
        overshot by that line. Each line is now measured as it will be written."""
        script = ('import sys\n'
                  'for _ in range(850):\n'
                  '    sys.stdout.write("a" * 1000 + "\\n")\n'
                  'for _ in range(3):\n'
                  '    sys.stdout.write("\\x01" * 8000 + "\\n")\n')
        d = self.daemon(log_format="json", handlers=[
            {"class": "Esc", "command": [sys.executable, "-c", script]}])
        p = self.push(job("Esc"))
        jid = loads(p)["jid"]
        self.wait_done(d, "Esc", jid, timeout=60)
        mine = [(l, json.loads(l)) for l in d.log().splitlines()]
        mine = [(l, e) for l, e in mine if e.get("jid") == jid
                and (e["event"] == "output" or "is not logged" in e["msg"])]
        logged = sum(len(l.encode()) + 1 for l, _ in mine)
        self.assertLessEqual(logged, 1 << 20, "%d lines" % len(mine))
        self.assertGreater(logged, 1000 * 1000)         # the plain lines all fitted
        self.assertEqual(len([l for l, e in mine if "is not logged" in e["msg"]]), 1)
        self.assertEqual(len([l for l, e in mine if e["msg"].endswith("a" * 1000)]), 850)

    def test_hd11_a_large_job_costs_a_few_times_its_size_and_its_memory_comes_back(self):
        """A 200 MB job peaked at 1.76 GB (8.8 times its size: the reply, copies of the text,
        cJSON's tree, the workers entry built apart) and six 10 MB jobs left 150 MB behind
        (each fetcher's read buffer, glibc's arenas). Here: one 40 MB job on a fresh daemon
        must not raise its peak by 5 times its size, and after six 10 MB jobs at
        concurrency 4 its RSS must come back within 30 MB of where it started."""
        read = sh("cat > /dev/null")
        d = self.daemon(concurrency=4, max_job_bytes=0, handlers=[{"class": "Big", "command": read}])
        time.sleep(0.5)
        pid = d.proc.pid
        base = memory_mb(pid)
        jid = loads(self.push(job("Big", ["x" * 40000000])))["jid"]
        self.wait_done(d, "Big", jid, timeout=60)
        grown = memory_mb(pid, "VmHWM") - base
        # On a sanitizer build the jobs run all the same (the large job's paths under its
        # checks), but a bound on memory says nothing there (harness.sanitizer_build).
        if not sanitizer_build():
            self.assertLess(grown, 5 * 40, "a 40 MB job raised the peak by %d MB" % grown)
        jids = [loads(self.push(job("Big", ["y" * 10000000])))["jid"] for _ in range(6)]
        for j in jids:
            self.wait_done(d, "Big", j, timeout=60)
        self.wait_settled(d, timeout=20)
        if sanitizer_build():
            return
        try:
            wait_for(lambda: memory_mb(pid) < base + 30, timeout=10)
        except AssertionError:
            self.fail("RSS %d MB after the jobs, %d MB before" % (memory_mb(pid), base))

    @staticmethod
    def big_job(size, cls="X"):
        """A job of exactly size bytes (its one arg pads it)."""
        head = b'{"class":"%s","queue":"default","jid":"%s","args":["' % (
            cls.encode(), new_jid().encode())
        return head + b"a" * (size - len(head) - 3) + b'"]}'


    def assert_too_large(self, d, raws, limit):
        reasons = ["job of %d bytes is larger than max_job_bytes (%d)" % (len(r), limit)
                   for r in raws]
        self.assert_buried(d, raws, reasons)

    def test_hd12_a_job_over_max_job_bytes_is_buried_as_invalid_never_run(self):
        """Taken by the parked fetcher (BLMOVE), by a try (LMOVE, behind another), and
        from two queues (FETCH); each is in dead as an invalid job with the reason, the
        next job runs. A job of the limit itself runs."""
        d = self.daemon_recording(max_job_bytes=4096)
        time.sleep(0.3)                                 # parked
        raws = [self.big_job(5000), self.big_job(4097), self.big_job(20000)]
        self.push(raws[0])
        self.wait_member(DEAD)
        self.push(raws[1])
        self.push(raws[2])
        self.assert_too_large(d, raws, 4096)
        ok = loads(self.push(self.big_job(4096, "R")))["jid"]
        self.wait_done(d, "R", ok)

    def test_hd12_over_max_job_bytes_from_two_queues_and_with_basic_fetch(self):
        for settings in ({"queues": ["default", "low"]}, {"fetch": "basic"}):
            with self.subTest(**settings):
                self.r.flushall()
                d = self.daemon_recording(max_job_bytes=2048, **settings)
                raws = [self.big_job(3000), self.big_job(70000)]
                for raw in raws:
                    self.push(raw)
                self.assert_too_large(d, raws, 2048)
                d.stop()

    def test_hd12_fetchers_that_share_a_try_each_bury_their_own(self):
        """Concurrency 4: one round trip carries several fetchers' tries, so jobs too
        large and jobs to run come back side by side; each is told apart in order."""
        d = self.daemon(concurrency=4, max_job_bytes=2048, handlers=[
            {"class": "*", "command": sh("sleep 0.2")}])
        for _ in range(5):
            jobs = [self.big_job(n, "S" if n < 2048 else "X")
                    for n in (100, 30000, 100, 3000, 50000, 100, 2049, 100)]
            for raw in jobs:
                self.push(raw)
            big = sorted(r for r in jobs if len(r) > 2048)
            dead = self.wait_member(DEAD, count=len(big), timeout=20)
            self.assertEqual(sorted(loads(m)["raw_payload"].encode() for m, _ in dead), big)
            for raw in jobs:
                if len(raw) <= 2048:
                    self.wait_done(d, "S", loads(raw)["jid"])
            self.wait_settled(d)
            self.r.delete(DEAD)

    def test_hd12_only_the_head_of_a_job_too_large_is_kept(self):
        """The wrapper keeps the first 100 000 characters, as for any payload that is not a
        job: the job itself is never read whole, so no more of it can be kept."""
        d = self.daemon_recording(max_job_bytes=1024)
        raw = self.big_job(1000000)
        self.push(raw)
        member, _ = self.wait_member(DEAD)
        w = loads(member)
        self.assertEqual(w["error_message"],
                         "job of 1000000 bytes is larger than max_job_bytes (1024)")
        self.assertEqual(w["raw_payload"], raw[:100000].decode())
        self.wait_settled(d)
        self.assertIsNone(self.read(self.path("runs.stdin")), "a job too large ran")

    def test_hd13_a_100_mb_job_is_buried_without_being_read(self):
        """A hostile push under Redis's 512 MB limit: with the default max_job_bytes
        (16 MiB) the daemon never holds it. Reading a 100 MB job cost some 800 MB."""
        d = self.daemon(handlers=[{"class": "*", "command": sh("cat > /dev/null")}])
        time.sleep(0.5)
        base = memory_mb(d.proc.pid)
        # 100 MB over loopback into Redis took over the harness's 10 s socket timeout on a
        # loaded host: this push gets its own client and a minute
        slow = self.server.client(socket_timeout=60)
        self.addCleanup(slow.close)
        slow.lpush(b"cogworker:queue:default", self.big_job(100 * 1000 * 1000))
        member, _ = self.wait_member(DEAD, timeout=60)
        self.assertEqual(loads(member)["error_message"], "job of 100000000 bytes is larger "
                         "than max_job_bytes (16777216)")
        self.wait_settled(d)
        grown = memory_mb(d.proc.pid, "VmHWM") - base
        self.assertLess(grown, 30, "burying a 100 MB job raised the peak by %d MB" % grown)

    def test_hd8_rlimit_nproc_without_user_is_warned_about_at_start(self):
        d = self.daemon(handlers=[{"class": "N", "command": handler("ok"), "rlimit_nproc": 50},
                                  {"class": "R", "command": handler("ok")}])
        if os.geteuid() == 0:
            d.wait_log("handler N: rlimit_nproc does nothing here: the handler runs as root "
                       "(no user set), and the kernel does not apply it to root")
        else:
            d.wait_log("handler N: rlimit_nproc counts every process and thread of the "
                       "daemon's own user (no user set)")
        self.assertEqual(d.log_lines("rlimit_nproc"), d.log_lines("handler N: rlimit_nproc"))


if __name__ == "__main__":
    import unittest
    unittest.main()

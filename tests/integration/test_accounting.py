# SPDX-License-Identifier: MIT
"""What every run cost, measured on the real kernel (doc/behaviours.md AC; issue 28 item 2;
src/usage.h): a job that burns half a second of CPU and holds 150 MiB shows cpu= and
maxrss= in its settle line (done: and fail:), the JSON log's cpu_s and maxrss_bytes, its
history entry, its status hash and kept run record as `cogworkerctl jobs show` prints
them, `cogworkerctl history`, `cogworkerctl exec`, and the per-class series of /metrics;
a warm job likewise, each job on one process with its own figures.

Timings are generous: the machine is shared. The figures asserted are lower bounds the
handler guarantees (it touches every page of its 150 MiB, it spins until its own CPU clock
says 0.5 s), and upper bounds far above what it does (a small job after a big one).

Run: python3 tests/integration/run.py test_accounting
"""

import json
import os
import re
import subprocess
import sys
import unittest
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, binary, free_port, job, wait_for  # noqa: E402
from webkit import BrowserCase, shot, text_of  # noqa: E402

MiB = 1 << 20

# Touches every page of mb MiB, then spins until its own CPU clock reached cpu seconds.
WORK = r"""
def work(mb, cpu):
    b = bytearray(mb << 20)
    for i in range(0, len(b), 4096):
        b[i] = 1
    t = time.process_time()
    while time.process_time() - t < cpu:
        pass
"""

# A cold handler: arguments MB CPU CODE; it exits with CODE.
BURN = r"""
import sys, time
""" + WORK + r"""
work(int(sys.argv[1]), float(sys.argv[2]))
print("burnt", flush=True)
sys.exit(int(sys.argv[3]))
"""

# The warm form: each job's args are [MB, CPU]; what it allocates is freed after the job.
WARM_BURN = r"""
import json, socket, time
""" + WORK + r"""
f = socket.socket(fileno=3).makefile("rwb")
def send(m):
    f.write((json.dumps(m) + "\n").encode()); f.flush()
send({"type": "ready"})
for line in f:
    m = json.loads(line)
    if m.get("type") == "job":
        work(*m["job"]["args"])
        send({"type": "done", "exit": 0})
"""

PY = "/usr/bin/python3"
DONE_RE = r"done: %s jid=%s ([0-9.]+)s cpu=([0-9.]+)s maxrss=([0-9.]+)(KiB|MiB|GiB)"


def mib(value, unit):
    return float(value) * {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024}[unit]


class AccountingCase(DaemonTestCase):
    def ctl(self, *args, timeout=30):
        env = dict(os.environ, REDIS_URL=self.server.url)
        return subprocess.run([binary("cogworkerctl")] + list(args), env=env,
                              capture_output=True, timeout=timeout)

    def start(self, **settings):
        settings.setdefault("handlers", [
            {"class": "Burn", "command": [PY, "-c", BURN, "150", "0.5", "0"]},
            {"class": "BurnFail", "command": [PY, "-c", BURN, "150", "0.5", "3"]},
            {"class": "Small", "command": [PY, "-c", BURN, "1", "0", "0"]},
        ])
        return self.daemon(**settings)

    def pushed(self, cls, **kw):
        payload = job(cls, **kw)
        self.push(payload)
        return json.loads(payload)["jid"]

    def assert_big(self, cpu_s, maxrss_bytes, what):
        self.assertGreaterEqual(cpu_s, 0.4, "%s: cpu" % what)
        self.assertLess(cpu_s, 30, "%s: cpu" % what)
        self.assertGreaterEqual(maxrss_bytes, 150 * MiB, "%s: maxrss" % what)
        self.assertLess(maxrss_bytes, 2048 * MiB, "%s: maxrss" % what)


class TestCold(AccountingCase):
    def test_ac1_done_line_history_status_and_jobs_show(self):
        """AC-1: a cold job that burns 0.5 s of CPU and holds 150 MiB: its done line says
        cpu= and maxrss= after the run time; its history entry, its status hash and its
        kept run record carry cpu_s and maxrss_bytes, as `jobs show` (and --json) and
        `history` print them."""
        d = self.start(history_retention_days=1, status_expiration=600)
        jid = self.pushed("Burn")
        line = d.wait_log("done: Burn jid=%s" % jid, timeout=30)
        m = re.search(DONE_RE % ("Burn", jid), line)
        self.assertIsNotNone(m, line)
        self.assertGreaterEqual(float(m.group(2)), 0.4, line)
        self.assertGreaterEqual(mib(m.group(3), m.group(4)), 150, line)
        # the history entry
        entries = [json.loads(e) for e in self.r.zrange("cogworker:history:all", 0, -1)]
        self.assertEqual([e["jid"] for e in entries], [jid])
        self.assert_big(entries[0]["cpu_s"], entries[0]["maxrss_bytes"], "history entry")
        # jobs show --json: the status hash, and the kept run's record
        wait_for(lambda: self.r.hget("cogworker:output:%s" % jid, "1"), timeout=10,
                 message="run record")
        p = self.ctl("jobs", "show", jid, "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assert_big(float(doc["status"]["cpu_s"]), int(doc["status"]["maxrss_bytes"]),
                        "status")
        self.assertEqual([r["run"] for r in doc["runs"]], [1])
        self.assertEqual(doc["runs"][0]["outcome"], "success")
        self.assert_big(doc["runs"][0]["cpu_s"], doc["runs"][0]["maxrss_bytes"], "run record")
        # jobs show for people: the cost line and the run's
        p = self.ctl("jobs", "show", jid)
        out = p.stdout.decode()
        self.assertRegex(out, r"cost +cpu=[0-9.]+s maxrss=[0-9.]+MiB")
        self.assertRegex(out, r"#1 .* success +[0-9.]+s cpu=[0-9.]+s maxrss=[0-9.]+MiB")
        # cogworkerctl history: --json has the entry's figures, the table its columns
        p = self.ctl("history", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        h = json.loads(p.stdout)
        self.assert_big(h["runs"][0]["cpu_s"], h["runs"][0]["maxrss_bytes"], "history --json")
        p = self.ctl("history")
        out = p.stdout.decode()
        self.assertRegex(out, r"TOOK +CPU +MAXRSS")
        m = re.search(r"%s +[0-9.]+s +([0-9.]+)s +([0-9.]+)MiB" % jid, out)
        self.assertIsNotNone(m, out)
        self.assertGreaterEqual(float(m.group(1)), 0.4, out)
        self.assertGreaterEqual(float(m.group(2)), 150, out)

    def test_ac2_fail_line_and_json_log(self):
        """AC-2: a failure's fail line says cpu= and maxrss= before what happened; the JSON
        log's done and fail events carry cpu_s and maxrss_bytes."""
        d = self.start(log_format="json")
        ok, bad = self.pushed("Burn"), self.pushed("BurnFail", retry=False)
        events = {}

        def seen():
            for l in d.log().splitlines():
                try:
                    o = json.loads(l)
                except ValueError:
                    continue
                if o.get("event") in ("done", "fail") and o.get("jid") in (ok, bad):
                    events[o["jid"]] = o
            return len(events) == 2
        wait_for(seen, timeout=60, message="done and fail events")
        self.assertEqual(events[ok]["event"], "done")
        self.assert_big(events[ok]["cpu_s"], events[ok]["maxrss_bytes"], "done event")
        self.assertEqual(events[bad]["event"], "fail")
        self.assert_big(events[bad]["cpu_s"], events[bad]["maxrss_bytes"], "fail event")
        self.assertRegex(events[bad]["msg"],
                         r"fail: BurnFail jid=%s [0-9.]+s cpu=[0-9.]+s maxrss=[0-9.]+MiB: "
                         r"exit status 3" % bad)

    def test_ac3_a_small_job_shows_a_small_peak(self):
        """AC-3: the figures are the run's own: a small job after a big one on the same
        fetcher shows a small peak."""
        d = self.start()
        big, small = self.pushed("Burn"), self.pushed("Small")
        d.wait_log("done: Burn jid=%s" % big, timeout=30)
        line = d.wait_log("done: Small jid=%s" % small, timeout=30)
        m = re.search(DONE_RE % ("Small", small), line)
        self.assertIsNotNone(m, line)
        self.assertLess(mib(m.group(3), m.group(4)), 100, line)

    def test_ac4_no_handler_no_figures(self):
        """AC-4: a job that ran no process (no handler) says nothing of a cost: no cpu= in
        its fail line, and null figures in its history entry."""
        d = self.start(history_retention_days=1)
        jid = self.pushed("Nobody", retry=False)
        line = d.wait_log("fail: Nobody jid=%s" % jid, timeout=20)
        self.assertNotIn("cpu=", line)
        e = json.loads(self.r.zrange("cogworker:history:all", 0, -1)[0])
        self.assertEqual((e["cpu_s"], e["maxrss_bytes"]), (None, None))


class TestCgroup(AccountingCase):
    def test_ac8_escaped_cpu_counted_with_a_cgroup(self):
        """AC-8: with a cgroup per job (containment, CT-1), the CPU of a process the
        handler started but never waited for (setsid, in the background) is the job's:
        the cgroup's cpu.stat counts it where wait4 cannot."""
        # A double fork: the burner is no child of the leader, which waits for its word in a
        # file, never for the burner itself (so wait4 cannot count it).
        esc = ("(setsid %s -c '%s' 1 0.5 0 </dev/null >\"$GATES/$COGWORKER_JID\" 2>&1 &); "
               "while [ ! -s \"$GATES/$COGWORKER_JID\" ]; do sleep 0.05; done" % (
                   PY, BURN.replace("'", "'\\''")))
        d = self.start(handlers=[{"class": "Esc", "command": ["/bin/sh", "-c", esc]}])
        if not d.log_lines("containment: cgroup v2"):
            self.skipTest("no cgroup per job on this host (containment: %s): AC-8 not run"
                          % d.log_lines("containment:"))
        jid = self.pushed("Esc")
        line = d.wait_log("done: Esc jid=%s" % jid, timeout=30)
        m = re.search(DONE_RE % ("Esc", jid), line)
        self.assertIsNotNone(m, line)
        self.assertGreaterEqual(float(m.group(2)), 0.4, line)


class TestExec(AccountingCase):
    def test_ac5_exec_reports_the_cost(self):
        """AC-5: `cogworkerctl exec` says what the run cost, and --json carries it."""
        d = self.start(start=False)
        d.write_conf()
        p = self.ctl("-c", d.conf_path, "exec", "Burn", timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stderr.decode() + p.stdout.decode(),
                         r"cpu=[0-9.]+s maxrss=[0-9.]+MiB")
        p = self.ctl("-c", d.conf_path, "exec", "--json", "Burn", timeout=60)
        doc = json.loads(p.stdout)
        self.assert_big(doc["cpu_s"], doc["maxrss_bytes"], "exec --json")


class TestMetrics(AccountingCase):
    def test_ac6_per_class_series(self):
        """AC-6: /metrics has per-class histograms of CPU seconds and peak RSS, labelled by
        the handler's class (a bounded set: the conf's), their counts the runs."""
        port = free_port()
        d = self.start(metrics_listen="127.0.0.1:%d" % port)
        jid = self.pushed("Burn")
        d.wait_log("done: Burn jid=%s" % jid, timeout=30)
        body = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port,
                                      timeout=10).read().decode()
        self.assertIn("# TYPE cogworkerd_job_cpu_seconds histogram", body)
        self.assertIn("# TYPE cogworkerd_job_maxrss_bytes histogram", body)
        self.assertRegex(body, r'cogworkerd_job_cpu_seconds_count\{class="Burn"\} 1\n')
        self.assertRegex(body, r'cogworkerd_job_maxrss_bytes_count\{class="Burn"\} 1\n')
        cpu = float(re.search(r'cogworkerd_job_cpu_seconds_sum\{class="Burn"\} ([0-9.e+]+)',
                              body).group(1))
        rss = float(re.search(r'cogworkerd_job_maxrss_bytes_sum\{class="Burn"\} ([0-9.e+]+)',
                              body).group(1))
        self.assertGreaterEqual(cpu, 0.4)
        self.assertGreaterEqual(rss, 150 * MiB)
        # a bucket below the peak is empty, +Inf holds the run
        self.assertRegex(body, r'cogworkerd_job_maxrss_bytes_bucket\{class="Burn",'
                               r'le="67108864"\} 0\n')
        self.assertRegex(body, r'cogworkerd_job_maxrss_bytes_bucket\{class="Burn",'
                               r'le="\+Inf"\} 1\n')


class TestWarm(AccountingCase):
    def test_ac7_warm_jobs_each_their_own_figures(self):
        """AC-7: two jobs on one warm process, a big one then a small one: each settle line
        has its own figures (the small one's CPU and peak are its own, not the process's)."""
        d = self.daemon(handlers=[{"class": "WarmBurn", "command": [PY, "-c", WARM_BURN],
                                   "warm": True}], history_retention_days=1)
        big = self.pushed("WarmBurn", args=[150, 0.5])
        lb = d.wait_log("done: WarmBurn jid=%s" % big, timeout=60)
        small = self.pushed("WarmBurn", args=[1, 0])
        ls = d.wait_log("done: WarmBurn jid=%s" % small, timeout=30)
        mb = re.search(DONE_RE % ("WarmBurn", big), lb)
        ms = re.search(DONE_RE % ("WarmBurn", small), ls)
        self.assertIsNotNone(mb, lb)
        self.assertIsNotNone(ms, ls)
        self.assertGreaterEqual(float(mb.group(2)), 0.4, lb)
        self.assertGreaterEqual(mib(mb.group(3), mb.group(4)), 150, lb)
        self.assertLess(float(ms.group(2)), 0.3, ls)
        self.assertLess(mib(ms.group(3), ms.group(4)), 100, ls)
        entries = {json.loads(e)["jid"]: json.loads(e)
                   for e in self.r.zrange("cogworker:history:all", 0, -1)}
        self.assert_big(entries[big]["cpu_s"], entries[big]["maxrss_bytes"], "warm history")
        self.assertLess(entries[small]["maxrss_bytes"], 100 * MiB)


class TestDashboard(BrowserCase, AccountingCase):
    def test_ac9_job_and_history_pages_show_the_cost(self):
        """AC-9: the dashboard's job page shows the status's cost and a row per kept run
        with its CPU and peak; its history page has CPU and Peak RSS columns (headless
        Chromium, as WEB-13 and WEB-18)."""
        d = self.start(history_retention_days=1, status_expiration=600)
        jid = self.pushed("Burn")
        d.wait_log("done: Burn jid=%s" % jid, timeout=30)
        wait_for(lambda: self.r.hget("cogworker:output:%s" % jid, "1"), timeout=10,
                 message="run record")
        w = self.web()
        self.b.get(w.url("/jobs/" + jid))
        status = text_of(self.b, "#status", contains="cost")
        m = re.search(r"cpu=([0-9.]+)s maxrss=([0-9.]+)MiB", status)
        self.assertIsNotNone(m, status)
        self.assertGreaterEqual(float(m.group(1)), 0.4, status)
        self.assertGreaterEqual(float(m.group(2)), 150, status)
        runs = text_of(self.b, "#runs tbody", contains="success")
        m = re.search(r"success\s+\S+\s+([0-9.]+)s\s+([0-9.]+)MiB", runs)
        self.assertIsNotNone(m, runs)
        self.assertGreaterEqual(float(m.group(1)), 0.4, runs)
        self.assertGreaterEqual(float(m.group(2)), 150, runs)
        shot(self.b, "job-cost")
        self.b.get(w.url("/history"))
        self.assertIn("Peak RSS", text_of(self.b, "main thead", contains="CPU"))
        row = text_of(self.b, 'tr[data-jid="%s"]' % jid, contains="MiB")
        m = re.search(r"([0-9.]+)s\s+([0-9.]+)MiB", row)
        self.assertIsNotNone(m, row)
        self.assertGreaterEqual(float(m.group(1)), 0.4, row)
        self.assertGreaterEqual(float(m.group(2)), 150, row)
        shot(self.b, "history-cost")


if __name__ == "__main__":
    unittest.main()

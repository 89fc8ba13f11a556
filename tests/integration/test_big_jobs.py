# SPDX-License-Identifier: MIT
"""BJ — Big jobs everywhere (doc/behaviours.md group BJ; doc/protocol.md §6.36, §6.37;
issue 31 item 5): a job longer than max_job_bytes (16 MiB by default) in dead, retry,
schedule or a queue is listed and shown by `cogworkerctl jobs` and the dashboard's API cut,
with its size, by a process that stays under 64 MiB of resident memory (the peak: ru_maxrss
of a finished cogworkerctl, VmHWM of the running web server); actions on it still act on
the exact member; a daemon killed with one in progress has it recovered intact by a
daemon that never holds it; and `cogworkerctl exec` of one is refused as a daemon would
bury it, never built (BJ-6).

Run: python3 tests/integration/run.py test_big_jobs
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import RedisTestCase, binary, sanitizer_build, wait_for  # noqa: E402
from pollkit import FAST, PollerTestCase, handler  # noqa: E402
from webkit import BrowserCase, WebServer, no_alert, shot, text_of, wait_until  # noqa: E402

MIB = 1 << 20
RSS_LIMIT = 64 * MIB
BIG = 40 * 1000 * 1000          # the 40 MB


def big_job(jid, queue="big", **extra):
    """A job of about 40 MB whose args come before its jid, as cogworker writes them."""
    d = {"class": "Big", "args": ["x" * BIG, 12345678901234567890], "retry": True,
         "queue": queue, "jid": jid, "created_at": 1700000000.5, "enqueued_at": 1700000001.5}
    d.update(extra)
    return json.dumps(d, separators=(",", ":")).encode()


# Runs cogworkerctl from a fresh, small process and reports its peak RSS: ru_maxrss of a
# child forked from this test would count the test's own pages (the 40 MB jobs it holds),
# which the child's memory starts as until exec.
RSS_HELPER = """
import os, resource, subprocess, sys
p = subprocess.run(sys.argv[2:], capture_output=True)
sys.stdout.buffer.write(p.stdout)
sys.stderr.buffer.write(p.stderr)
with open(sys.argv[1], "w") as f:
    f.write("%d %d" % (p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
"""


def ctl_rss(url, *args):
    """(exit status, stdout, stderr, peak resident bytes) of one cogworkerctl run."""
    env = dict(os.environ, REDIS_URL=url)
    with tempfile.NamedTemporaryFile("r", prefix="cw-rss-") as f:
        p = subprocess.run([sys.executable, "-c", RSS_HELPER, f.name, binary("cogworkerctl"),
                            "-c", "/dev/null"] + list(args), env=env, capture_output=True,
                           timeout=120)
        status, kib = (int(x) for x in f.read().split())
    return status, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"), kib * 1024


def vm_hwm(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM for %d" % pid)


class BigJobsListed(RedisTestCase):
    """A 40 MB job in each set, read by cogworkerctl and the dashboard."""

    def setUp(self):
        super().setUp()
        self.jobs = {
            "dead": big_job("bigdead000000001", error_class="RuntimeError",
                            error_message="boom", failed_at=1700000002.5, retry_count=3),
            "retry": big_job("bigretry00000001", error_class="RuntimeError",
                             error_message="again", failed_at=1700000002.5, retry_count=1),
            "scheduled": big_job("bigsched00000001"),
            "queued": big_job("bigqueue00000001"),
        }
        now = time.time()
        self.r.zadd("cogworker:dead", {self.jobs["dead"]: now})
        self.r.zadd("cogworker:retry", {self.jobs["retry"]: now + 3600})
        self.r.zadd("cogworker:schedule", {self.jobs["scheduled"]: now + 3600})
        self.r.lpush("cogworker:queue:big", self.jobs["queued"])
        self.r.sadd("cogworker:queues", "big")
        # a small one beside each, read whole as before
        self.r.zadd("cogworker:dead", {json.dumps({"class": "Small", "args": [1],
                                                   "queue": "big", "jid": "smalldead0000001"}): now - 1})

    def ctl(self, *args):
        return ctl_rss(self.server.url, *args)

    def test_bj1_list_and_show_cut_with_size_under_64_mib(self):
        for set_name, key_jid in (("dead", "bigdead000000001"), ("retry", "bigretry00000001"),
                                  ("scheduled", "bigsched00000001"), ("queued", "bigqueue00000001")):
            size = len(self.jobs[set_name])
            with self.subTest(set=set_name):
                st, out, err, rss = self.ctl("jobs", "list", "--set", set_name)
                self.assertEqual(st, 0, err)
                line = next(l for l in out.splitlines() if key_jid in l)
                self.assertIn("Big", line)
                self.assertIn("(truncated: a job of %d bytes)" % size, line)
                self.assertLess(rss, RSS_LIMIT, "jobs list --set %s" % set_name)
                st, out, err, rss = self.ctl("jobs", "show", key_jid)
                self.assertEqual(st, 0, err)
                self.assertIn("class      Big", out)
                self.assertIn("queue      big", out)
                self.assertIn("size       %d bytes, more than max_job_bytes: truncated to its "
                              "first 16384 bytes" % size, out)
                self.assertIn('payload    {"class":"Big","args":["xxxx', out)
                self.assertLess(rss, RSS_LIMIT, "jobs show (%s)" % set_name)
        st, out, err, rss = self.ctl("--json", "jobs", "list", "--set", "dead")
        self.assertEqual(st, 0, err)
        docs = {d["jid"]: d for d in json.loads(out)}
        big = docs["bigdead000000001"]
        self.assertTrue(big["truncated"])
        self.assertEqual(big["size"], len(self.jobs["dead"]))
        self.assertEqual(len(big["raw"]), 16384)
        self.assertEqual((big["class"], big["queue"], big["error_message"], big["retry_count"]),
                         ("Big", "big", "boom", 3))
        self.assertIsNone(big["args"])
        self.assertNotIn("truncated", docs["smalldead0000001"])      # read whole
        self.assertEqual(docs["smalldead0000001"]["args"], [1])
        self.assertLess(rss, RSS_LIMIT)

    def test_bj2_dashboard_api_cut_with_size_under_64_mib(self):
        w = WebServer(self.server.url).start()
        self.addCleanup(w.stop)
        cookie, _ = w.session()
        st, _, body = w.request("GET", "/api/jobs/dead?limit=50", cookie=cookie)
        self.assertEqual(st, 200, body)
        jobs = {j["jid"]: j for j in json.loads(body)["jobs"]}
        self.assertTrue(jobs["bigdead000000001"]["truncated"])
        self.assertEqual(jobs["bigdead000000001"]["size"], len(self.jobs["dead"]))
        self.assertEqual(jobs["bigdead000000001"]["class"], "Big")
        for set_name in ("retry", "scheduled"):
            st, _, body = w.request("GET", "/api/jobs/%s" % set_name, cookie=cookie)
            self.assertEqual(st, 200, body)
            self.assertTrue(all(j["truncated"] for j in json.loads(body)["jobs"]))
        st, _, body = w.request("GET", "/api/jobs/queued?queue=big", cookie=cookie)
        self.assertEqual(st, 200, body)
        self.assertEqual(json.loads(body)["jobs"][0]["size"], len(self.jobs["queued"]))
        st, _, body = w.request("GET", "/api/jobs/bigdead000000001", cookie=cookie)
        self.assertEqual(st, 200, body)
        self.assertIn('"truncated":true', body)
        self.assertIn('"size":%d' % len(self.jobs["dead"]), body)
        self.assertLess(len(body), 1 * MIB)
        self.assertLess(vm_hwm(w.proc.pid), RSS_LIMIT, "cogworkerctl web")

    def test_bj3_retry_and_delete_act_on_the_exact_member(self):
        st, out, err, rss = self.ctl("jobs", "retry", "bigdead000000001")
        self.assertEqual(st, 0, err)
        self.assertIn("retried bigdead000000001: dead -> queue big", out)
        self.assertLess(rss, RSS_LIMIT)
        self.assertEqual(self.r.zcard("cogworker:dead"), 1)            # the small one
        self.assertEqual(self.r.llen("cogworker:queue:big"), 2)
        self.assertEqual(self.r.lindex("cogworker:queue:big", 0), self.jobs["dead"])  # intact
        st, out, err, rss = self.ctl("jobs", "delete", "bigdead000000001")
        self.assertEqual(st, 0, err)
        self.assertIn("deleted bigdead000000001 from cogworker:queue:big", out)
        self.assertEqual(self.r.lrange("cogworker:queue:big", 0, -1), [self.jobs["queued"]])
        st, out, err, rss = self.ctl("jobs", "delete", "bigretry00000001")
        self.assertEqual(st, 0, err)
        self.assertEqual(self.r.zcard("cogworker:retry"), 0)
        st, out, err, rss = self.ctl("jobs", "kill", "bigsched00000001")
        self.assertEqual(st, 0, err)
        self.assertEqual(self.r.zcard("cogworker:schedule"), 0)
        self.assertIn(self.jobs["scheduled"], self.r.zrange("cogworker:dead", 0, -1))
        self.assertLess(rss, RSS_LIMIT)
        # a retry with a new deadline would need the job whole: refused, left in place
        st, out, err, rss = self.ctl("jobs", "retry", "--expires-in", "10m", "bigsched00000001")
        self.assertEqual(st, 1, out)
        self.assertIn("too large to read: its expires_at can't be set", err)
        self.assertIn(self.jobs["scheduled"], self.r.zrange("cogworker:dead", 0, -1))

    def test_bj3_dashboard_acts_on_a_cut_entry_by_its_jid(self):
        w = WebServer(self.server.url).start()
        self.addCleanup(w.stop)
        cookie, csrf = w.session()
        st, body = w.post("/api/jobs/dead/retry", {"jid": "bigdead000000001"}, cookie=cookie,
                          csrf=csrf)
        self.assertEqual(st, 200, body)
        self.assertEqual(body["done"], 1)
        self.assertEqual(self.r.lindex("cogworker:queue:big", 0), self.jobs["dead"])
        st, body = w.post("/api/jobs/queued/delete", {"jid": "bigdead000000001", "queue": "big"},
                          cookie=cookie, csrf=csrf)
        self.assertEqual(st, 200, body)
        self.assertEqual(self.r.lrange("cogworker:queue:big", 0, -1), [self.jobs["queued"]])
        self.assertLess(vm_hwm(w.proc.pid), RSS_LIMIT, "cogworkerctl web")


# exec's job comes on its command line, which the kernel caps at 6 MB (ARG_MAX: a quarter of
# the stack limit, at most 3/4 of 8 MiB), so it can be over max_job_bytes only when that is
# set lower than the default. This helper runs cogworkerctl with N ARGs of SIZE bytes after
# the given ones, the stack limit raised for them, and reports its peak RSS: forked and
# waited for by hand (wait4), as subprocess's vfork counts this process's pages as the
# child's; what this small process holds is the floor of the figure.
EXEC_RSS_HELPER = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_STACK, (64 << 20, resource.RLIM_INFINITY))
n, size = int(sys.argv[1]), int(sys.argv[2])
argv = sys.argv[3:] + ["x" * size] * n
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    os.dup2(w, 1)
    os.execv(argv[0], argv)
os.close(w)
out = b""
while True:
    b = os.read(r, 1 << 16)
    if not b:
        break
    out += b
_, st, ru = os.wait4(pid, 0)
sys.stdout.buffer.write(b"%d %d\\n" % (os.waitstatus_to_exitcode(st), ru.ru_maxrss) + out)
"""


class BigJobExec(unittest.TestCase):
    """exec of a job over max_job_bytes: refused as a daemon would bury it, never built."""

    ARG = 125000                # under the kernel's 128 KiB for one argument
    N = 40                      # 5 MB of ARGs

    def exec_rss(self, conf, *args, n=0):
        """(exit status, stdout, peak resident bytes) of `cogworkerctl -c conf ARGS` with n
        ARGs of ARG bytes after args."""
        p = subprocess.run([sys.executable, "-c", EXEC_RSS_HELPER, str(n), str(self.ARG),
                            binary("cogworkerctl"), "-c", conf] + list(args),
                           capture_output=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        head, _, out = p.stdout.partition(b"\n")
        status, kib = (int(x) for x in head.split())
        return status, out.decode(errors="replace"), kib * 1024

    def write_conf(self, path, marker, max_job_bytes):
        with open(path, "w") as f:
            f.write('max_job_bytes = %d;\nhandlers = ( { class = "Big"; command = ["/bin/sh", '
                    '"-c", "cat >/dev/null; touch %s"]; } );\n' % (max_job_bytes, marker))

    def test_bj6_exec_of_a_job_over_max_job_bytes_is_not_run_and_says_why(self):
        tmp = tempfile.TemporaryDirectory(prefix="cw-bj6-")
        self.addCleanup(tmp.cleanup)
        marker = os.path.join(tmp.name, "ran")
        conf = os.path.join(tmp.name, "c.conf")
        self.write_conf(conf, marker, MIB)
        jid = "bigexec000000001"
        size = len(json.dumps({"class": "Big", "args": ["x" * self.ARG] * self.N,
                               "queue": "default", "jid": jid, "created_at": 1700000000.123456,
                               "enqueued_at": 1700000000.123456}, separators=(",", ":")))
        # The same command line refused at once (a usage error) is the floor: the ARGs are
        # this much of the process already, as its argv.
        st, out, floor = self.exec_rss(conf, "exec", "--timeout", "x", "--jid", jid, "Big",
                                       n=self.N)
        self.assertEqual(st, 2, out)
        st, out, rss = self.exec_rss(conf, "exec", "--jid", jid, "Big", n=self.N)
        self.assertEqual(st, 1, out[:2000])
        self.assertFalse(os.path.exists(marker), "the handler ran")
        self.assertIn('job        {"class":"Big","args":["xxxx', out)
        self.assertIn("size       %d bytes, more than max_job_bytes (1048576): truncated to its "
                      "first 16384 bytes" % size, out)
        self.assertIn("exit       not run: a daemon never reads a job larger than max_job_bytes",
                      out)
        self.assertIn("outcome    dead: it would go to dead unread, as an invalid job", out)
        self.assertIn("error      Cogworker::InvalidJob: job of %d bytes is larger than "
                      "max_job_bytes (1048576)" % size, out)
        self.assertLess(len(out), 20000)                # its beginning, not 5 MB
        # Of the job it holds less than max_job_bytes beside its argv (before: the args, the
        # job and its parse, 19 MB more). Not on a sanitizer build, whose RSS counts the
        # shadow of every page the measuring walk touched (harness.sanitizer_build).
        if not sanitizer_build():
            self.assertLess(rss - floor, MIB, "exec %d, its command line alone %d" % (rss, floor))
        st, out, rss = self.exec_rss(conf, "--json", "exec", "--jid", jid, "Big", n=self.N)
        self.assertEqual(st, 1, out[:2000])
        d = json.loads(out)
        self.assertEqual((d["status"], d["outcome"], d["error_class"], d["size"], d["truncated"],
                          d["job"], d["exit_code"], d["jid"]),
                         ("too_large", "dead", "Cogworker::InvalidJob", size, True, None, None, jid))
        self.assertEqual(d["error_message"],
                         "job of %d bytes is larger than max_job_bytes (1048576)" % size)
        self.assertEqual(len(d["raw"]), 16384)
        self.assertTrue(d["raw"].startswith('{"class":"Big","args":["xxx'))
        if not sanitizer_build():
            self.assertLess(rss - floor, MIB)
        # At the limit a job runs as before; one byte over, not (the limit 4096 here).
        self.write_conf(conf, marker, 4096)
        small = len(json.dumps({"class": "Big", "args": [""], "queue": "default", "jid": jid,
                                "created_at": 1700000000.123456,
                                "enqueued_at": 1700000000.123456}, separators=(",", ":")))
        st, out, _ = self.exec_rss(conf, "exec", "--jid", jid, "Big", "y" * (4097 - small))
        self.assertEqual(st, 1, out)
        self.assertIn("job of 4097 bytes is larger than max_job_bytes (4096)", out)
        self.assertFalse(os.path.exists(marker), "the handler ran")
        st, out, _ = self.exec_rss(conf, "exec", "--jid", jid, "Big", "y" * (4096 - small))
        self.assertEqual(st, 0, out)
        self.assertIn("outcome    success", out)
        self.assertTrue(os.path.exists(marker))


class BigJobPages(BrowserCase):
    """The dead page and the job's page in a headless Chromium."""

    def test_bj2_dead_page_and_job_page_show_it_cut_and_retry_it(self):
        job = big_job("bigpage000000001", error_class="RuntimeError", error_message="boom")
        self.r.zadd("cogworker:dead", {job: time.time()})
        w = self.web()
        self.b.get(w.url("/jobs/dead"))
        row = text_of(self.b, 'tr[data-jid="bigpage000000001"]', timeout=60)
        self.assertIn("(truncated: a job of %s bytes)" % format(len(job), ","), row)
        self.assertIn("RuntimeError: boom", row)
        shot(self.b, "bigjobs-dead")
        self.b.get(w.url("/jobs/bigpage000000001"))
        loc = text_of(self.b, "main .location", timeout=60, contains="size")
        self.assertIn("%s bytes: more than max_job_bytes, shown truncated" % format(len(job), ","),
                      loc)
        self.assertTrue(no_alert(self.b))
        from selenium.webdriver.common.by import By
        wait_until(lambda: [b for b in self.b.find_elements(By.CSS_SELECTOR, "main .location button")
                            if b.text == "Retry now"], timeout=30)[0].click()
        wait_until(lambda: self.r.llen("cogworker:queue:big") == 1, timeout=60, message="retried")
        self.assertEqual(self.r.lindex("cogworker:queue:big", 0), job)
        self.assertLess(vm_hwm(w.proc.pid), RSS_LIMIT, "cogworkerctl web")


class BigJobRecovered(PollerTestCase):

    def test_bj4_killed_with_a_big_job_in_progress_recovered_intact(self):
        slow = [{"class": "Big", "command": handler("slow", 60)}]
        d1 = self.daemon(handlers=slow, queues=["big"], max_job_bytes=64 * MIB, **FAST)
        job = big_job("bigrun0000000001")
        self.push(job, queue="big")
        wait_for(lambda: d1.runs_of("bigrun0000000001") == 1, timeout=30,
                 message="the big job running on D1")
        ident = d1.identity
        d1.kill()
        self.assertEqual(self.list_of(ident), [job])
        self.make_dead(ident)
        # D2 reads another queue: the job it recovers stays on its queue to be looked at
        d2 = self.daemon(handlers=slow, queues=["other"], **FAST)
        wait_for(lambda: self.r.llen("cogworker:queue:big") == 1, timeout=30,
                 message="the big job requeued")
        self.assertEqual(self.r.lindex("cogworker:queue:big", 0), job)
        self.assertEqual(self.list_of(ident), [])
        d2.wait_log("requeued 1 job(s) left in progress by dead process %s" % ident)
        self.assertLess(vm_hwm(d2.proc.pid), len(job), "D2 never held the job")

    def test_bj5_a_parked_repeat_orphan_too_large_is_buried_unread(self):
        """A job parked as a repeat orphan by a process with a higher max_job_bytes: the
        recovering daemon's listing of the parking list does not read it, and buries it as a
        fetch buries a job too large."""
        job = big_job("bigpark000000001")
        small = json.dumps({"class": "Big", "args": [1], "queue": "big",
                            "jid": "smallpark0000001"})
        self.r.rpush("cogworker:repeat_orphans", job, small)
        d = self.daemon(queues=["other"], **FAST)
        wait_for(lambda: self.r.llen("cogworker:repeat_orphans") == 0, timeout=60,
                 message="the parking list filed")
        dead = self.r.zrange("cogworker:dead", 0, -1)
        self.assertEqual(len(dead), 2)
        wrapper = json.loads(next(e for e in dead if b"(unparseable)" in e))
        self.assertEqual(wrapper["class"], "(unparseable)")
        self.assertEqual(wrapper["error_message"], "job of %d bytes is larger than "
                         "max_job_bytes (16777216)" % len(job))
        self.assertTrue(wrapper["raw_payload"].startswith('{"class":"Big","args":["xxx'))
        other = json.loads(next(e for e in dead if b"smallpark" in e))
        self.assertEqual(other["error_class"], "Cogworker::ProcessDied")
        self.assertLess(vm_hwm(d.proc.pid), len(job), "the daemon never held the job")


if __name__ == "__main__":
    unittest.main()

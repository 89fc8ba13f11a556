# SPDX-License-Identifier: MIT
"""Process lifecycle and configuration (doc/behaviours.md groups LC and CF; doc/protocol.md §7.1,
§7.27; issue 2 point 2 and its "What must hold on main" checks):

- `--check` with good and bad confs: exit 2 naming the file and the line;
- REDIS_URL overrides redis.url; -C and -q override the conf;
- 1 000 jobs for a /bin/true handler pushed with LPUSH all run once:
  cogworker:stats:processed grows by 1 000, queues and in-progress lists end empty;
- the daemon's RSS at concurrency 50.

LC-2 and LC-6 (TERM and kill -9 mid-job) are in test_shutdown.py. CF-5 (no on_death →
no command) is left to the on_death tests.

Run: python3 tests/integration/run.py test_lifecycle
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (DaemonTestCase, sanitizer_build, binary, free_port, handler, job,  # noqa: E402
                     wait_for)
from observe import Monitor, rss_kb  # noqa: E402

PROCESSED = b"cogworker:stats:processed"
FAILED = b"cogworker:stats:failed"
PROCESSES = b"cogworker:processes"

HANDLERS = [{"class": "G", "command": handler("gate")},
            {"class": "K", "command": handler("ok")},
            {"class": "S", "command": handler("slow", 2)},
            {"class": "T", "command": ["/bin/true"]}]


def qkey(q):
    return ("cogworker:queue:" + q).encode()


def jid_of(j):
    return json.loads(j)["jid"]


class Lifecycle(DaemonTestCase):

    def test_lc1_presence_is_written_before_anything_else(self):
        with Monitor(self.server) as mon:
            d = self.daemon(handlers=HANDLERS, queues=["default", "low"],
                            periodic=[{"cron": "* * * * *", "class": "K"}])
            presence = ("cogworker:process:" + d.identity).encode()
            k = job("K")
            self.push(k)
            wait_for(lambda: d.runs_of(jid_of(k)) == 1)
            time.sleep(0.5)
            ent = mon.entries()
        mine = self.r.client_info()["addr"]
        daemon_cmds = [e for e in ent if e[1] != mine]
        # the first thing the daemon writes is its presence, HSET then EXPIRE
        writes = [e for e in daemon_cmds if e[2][0].upper() not in (b"AUTH", b"SELECT",
                                                                    b"PING", b"CLIENT")]
        self.assertEqual(writes[0][2][:2], [b"HSET", presence], writes[:3])
        self.assertEqual(writes[1][2][:2], [b"EXPIRE", presence], writes[:3])
        first_hset = ent.index(writes[0])
        fetchy = (b"BLMOVE", b"LMOVE", b"BRPOP", b"SMEMBERS", b"EVALSHA", b"EVAL", b"INFO",
                  b"ZRANGEBYSCORE", b"HSETNX", b"SCAN", b"TYPE")
        early = [e for e in ent[:first_hset] if e[2][0].upper() in fetchy]
        self.assertEqual(early, [])

    def test_lc3_running_job_finishes_during_the_drain(self):
        d = self.daemon(handlers=HANDLERS, shutdown_timeout=10)
        s = job("S")
        self.push(s)
        wait_for(lambda: d.runs_of(jid_of(s)) == 1)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(10), 0)
        took = time.monotonic() - t0
        self.assertEqual(self.r.get(PROCESSED), b"1")
        self.assertEqual(self.r.keys(b"cogworker:queue:*"), [])
        self.assertEqual(self.r.keys(b"cogworker:inprogress:*"), [])
        self.assertGreater(took, 0.8)
        self.assertLess(took, 5)

    def test_lc4_sigint_is_a_graceful_stop(self):
        d = self.daemon(handlers=HANDLERS, shutdown_timeout=1)
        g = job("G")
        self.push(g)
        wait_for(lambda: d.runs_of(jid_of(g)) == 1)
        d.signal(signal.SIGINT)
        self.assertEqual(d.wait_exit(1 + 8), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [g.encode()])
        self.assertFalse(self.r.sismember(PROCESSES, d.identity))

    def test_lc5_three_daemons_share_the_work(self):
        ds = [self.daemon(handlers=HANDLERS, concurrency=2) for _ in range(3)]
        self.assertEqual(self.r.smembers(PROCESSES), {d.identity.encode() for d in ds})
        jobs = [job("K") for _ in range(10)]
        for j in jobs:
            self.push(j)
        wait_for(lambda: self.r.get(PROCESSED) == b"10", timeout=10)
        for j in jobs:
            self.assertEqual(ds[0].runs_of(jid_of(j)), 1)    # one runs file for all
        # shared: each daemon's log names the jobs it ran, and no daemon ran them all
        wait_for(lambda: sum(len(d.log_lines("done: K jid=")) for d in ds) == 10,
                 message="a done: line per job")
        ran_by = {}
        for i, d in enumerate(ds):
            for line in d.log_lines("done: K jid="):
                ran_by.setdefault(line.split("jid=")[1].split()[0], []).append(i)
        self.assertEqual(sorted(ran_by), sorted(jid_of(j) for j in jobs))
        self.assertTrue(all(len(v) == 1 for v in ran_by.values()), ran_by)
        daemons_used = {v[0] for v in ran_by.values()}
        self.assertGreater(len(daemons_used), 1, "one daemon ran every job: %s" % ran_by)
        for d in ds:
            self.assertEqual(d.stop(), 0)

    def test_lc7_idle_stop_is_not_delayed_by_sleeping_threads(self):
        d = self.daemon(handlers=HANDLERS, queues=["default", "low"],
                        periodic=[{"cron": "* * * * *", "class": "K"}])
        time.sleep(1.0)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(3), 0)
        self.assertLess(time.monotonic() - t0, 3)

    def test_thousand_lpushed_jobs_each_run_once(self):
        self.r.set(PROCESSED, 41)
        d = self.daemon(handlers=HANDLERS, concurrency=4, queues=["default", "low"])
        jobs = [job("T", queue=("default", "low")[i % 2]) for i in range(1000)]
        pipe = self.r.pipeline(transaction=False)
        for j in jobs:
            pipe.lpush(qkey(json.loads(j)["queue"]), j)
        pipe.execute()
        wait_for(lambda: self.r.get(PROCESSED) == b"1041", timeout=60, interval=0.2,
                 message="processed to grow by 1000")
        wait_for(lambda: self.r.llen("cogworker:inprogress:" + d.identity) == 0)
        self.assertEqual(self.r.llen(qkey("default")) + self.r.llen(qkey("low")), 0)
        self.assertIsNone(self.r.get(FAILED))
        done = [l.split("jid=")[1].split()[0] for l in d.log_lines("done: T jid=")]
        self.assertEqual(len(done), 1000)
        self.assertEqual(sorted(done), sorted(jid_of(j) for j in jobs))
        time.sleep(1)
        self.assertEqual(self.r.get(PROCESSED), b"1041")
        self.assertEqual(d.stop(), 0)
        self.assertEqual(self.r.keys(b"cogworker:inprogress:*"), [])

    def test_rss_at_concurrency_50(self):
        d = self.daemon(handlers=HANDLERS, concurrency=50, queues=["default", "low"])
        jobs = [job("T") for _ in range(200)]
        for j in jobs:
            self.push(j)
        wait_for(lambda: self.r.get(PROCESSED) == b"200", timeout=30)
        time.sleep(1.0)
        kb = rss_kb(d.proc.pid)
        sys.stderr.write("\n  RSS at concurrency 50 after 200 jobs: %d kB\n" % kb)
        out = os.environ.get("COGWORKERD_LATENCY_REPORT")
        if out:
            with open(out, "a") as f:
                f.write("rss_kb_concurrency_50=%d\n" % kb)
        info = json.loads(self.r.hget("cogworker:process:" + d.identity, "info"))
        self.assertEqual(info["concurrency"], 50)
        if not sanitizer_build():
            self.assertLess(kb, 64 * 1024)


class Overrides(DaemonTestCase):

    def test_redis_url_environment_overrides_the_conf(self):
        dead = "redis://127.0.0.1:%d/0" % free_port()
        d = self.daemon(start=False, handlers=HANDLERS, url=dead)
        d.start(env={"REDIS_URL": self.server.url})
        k = job("K")
        self.push(k)
        wait_for(lambda: d.runs_of(jid_of(k)) == 1)
        self.assertIn("127.0.0.1:%d" % self.server.port,
                      d.log_lines("started, identity=")[0].split("redis=")[1])

    def test_flags_override_concurrency_and_queues(self):
        d = self.daemon(start=False, handlers=HANDLERS, concurrency=1, queues=["default"])
        d.start(args=["-C", "3", "-q", "low,2", "-q", "other"])
        info = json.loads(self.r.hget("cogworker:process:" + d.identity, "info"))
        self.assertEqual(info["concurrency"], 3)
        self.assertEqual(info["queues"], ["low", "other"])
        k = job("K", queue="other")
        self.push(k, "other")
        wait_for(lambda: d.runs_of(jid_of(k)) == 1)

    def fetch_share(self, args=(), **settings):
        """Start a daemon over two always-full queues; share of the first 300 starts
        that came from each queue."""
        jobs = {q: [job("T", queue=q) for _ in range(400)] for q in ("default", "critical",
                                                                      "low")}
        pipe = self.r.pipeline(transaction=False)
        for q, js in jobs.items():
            for j in js:
                pipe.lpush(qkey(q), j)
        pipe.execute()
        queue_of = {jid_of(j): q for q, js in jobs.items() for j in js}
        d = self.daemon(start=False, handlers=HANDLERS, concurrency=1, **settings)
        d.start(args=list(args))
        wait_for(lambda: len(d.log_lines("start: T jid=")) >= 300, timeout=30, interval=0.2)
        d.stop()
        starts = [l.split("jid=")[1].split()[0] for l in d.log_lines("start: T jid=")][:300]
        counts = {}
        for jid in starts:
            counts[queue_of[jid]] = counts.get(queue_of[jid], 0) + 1
        return counts

    def test_cf6_weights_by_repetition(self):
        c = self.fetch_share(queues=["default", "critical", "critical"])
        share = c.get("critical", 0) / 300.0
        self.assertGreater(share, 0.55, c)
        self.assertLess(share, 0.78, c)
        self.assertEqual(set(c), {"default", "critical"})

    def test_cf7_weighted_spec_on_the_command_line(self):
        c = self.fetch_share(args=["-q", "default,3", "-q", "low"])
        share = c.get("default", 0) / 300.0
        self.assertGreater(share, 0.64, c)
        self.assertLess(share, 0.86, c)
        self.assertEqual(set(c), {"default", "low"})


class ConfCheck(DaemonTestCase):

    def write(self, body, name="c.conf"):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            if "redis =" not in body:
                f.write('redis = { url = "%s"; };\n' % self.server.url)
            else:
                f.write("\n")
            if "handlers" not in body:
                f.write('handlers = ( { class = "K"; command = ["/bin/true"]; } );\n')
            else:
                f.write("\n")
            f.write(body + "\n")
        return path

    def check(self, body, *extra):
        path = self.write(body)
        p = subprocess.run([binary("cogworkerd"), "--check", "-c", path] + list(extra),
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=10)
        return p.returncode, p.stdout + p.stderr, path

    def assert_rejected(self, body, phrase, line=3):
        rc, out, path = self.check(body)
        self.assertEqual(rc, 2, out)
        self.assertIn("%s:%d:" % (path, line), out)
        self.assertIn(phrase, out)
        return out

    def test_check_good_conf(self):
        rc, out, path = self.check('concurrency = 4;\nqueues = ["critical,3", "default"];\n'
                                   'fetch = "basic";\nshutdown_timeout = 8;')
        self.assertEqual(rc, 0, out)
        self.assertIn("configuration OK", out)
        self.assertEqual(self.r.dbsize(), 0)

    def test_cf1_fetch_values(self):
        out = self.assert_rejected('fetch = "fast";', "fetch")
        self.assertIn("reliable, basic", out)
        self.assert_rejected('fetch = "";', "fetch")
        self.assertEqual(self.check('fetch = "basic";')[0], 0)
        self.assertEqual(self.check('fetch = "reliable";')[0], 0)

    def test_cf2_cf3_cf4_numeric_settings(self):
        self.assert_rejected("max_orphanings = 0;", "max_orphanings")
        self.assert_rejected("max_orphanings = 2.5;", "max_orphanings")
        self.assert_rejected("orphan_threshold = -1;", "orphan_threshold")
        self.assert_rejected('orphan_threshold = "";', "orphan_threshold")
        self.assert_rejected("fetch_idle_max_interval = 0;", "fetch_idle_max_interval")
        self.assert_rejected('fetch_idle_max_interval = "1";', "fetch_idle_max_interval")

    def test_other_bad_confs_name_file_and_line(self):
        self.assert_rejected("bogus_setting = 1;", "bogus_setting")
        self.assert_rejected('concurrency = "ten";', "concurrency")
        self.assert_rejected('queues = ["default,0"];', "default,0")
        self.assert_rejected('handlers = ( { class = "A"; } );', "command")
        self.assert_rejected('\n\nconcurrency = ;', "", line=5)
        pw = os.path.join(self.workdir, "missing-password")
        self.assert_rejected('redis = { url = "%s"; password_file = "%s"; };'
                             % (self.server.url, pw), "password_file")

    def test_rejected_conf_writes_nothing_to_redis(self):
        path = self.write('fetch = "fast";')
        p = subprocess.run([binary("cogworkerd"), "-c", path], stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("%s:3:" % path, p.stderr)
        self.assertEqual(self.r.dbsize(), 0)


if __name__ == "__main__":
    unittest.main()

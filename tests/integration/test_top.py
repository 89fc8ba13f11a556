# SPDX-License-Identifier: MIT
"""`cogworkerctl top` (doc/behaviours.md TOP): the live view, run for real in a tmux
pane (send-keys, capture-pane), and its one-shot snapshot when stdout is not a terminal.
A running job shows its progress bar from the `cogworker:progress` line it printed, a
paused queue shows as paused, and the pause key resumes it.

Run: python3 tests/integration/run.py test_top
"""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, binary, job, wait_for  # noqa: E402

PROGRESS = ["/bin/sh", "-c", 'echo "cogworker:progress 40 resized 4 of 10"; '
            'while [ ! -f "$GATES/$COGWORKER_JID" ]; do sleep 0.05; done']


class TestTop(DaemonTestCase):
    def setUp(self):
        super().setUp()
        self.d = self.daemon(status_expiration=600,
                             handlers=[{"class": "Resize", "command": PROGRESS}])
        payload = job("Resize")
        self.jid = json.loads(payload)["jid"]
        self.push(payload)
        self.addCleanup(lambda: self.d.open_gate(self.jid))
        self.r.sadd(b"cogworker:queues", b"mail")
        self.r.lpush(b"cogworker:queue:mail", job("Mailer", queue="mail"))
        self.r.sadd(b"cogworker:paused_queues", b"mail")
        wait_for(lambda: self.r.hget(("status:" + self.jid).encode(), b"pct") == b"40",
                 message="progress written")
        # top lists the running jobs from the workers hash, which the daemon's
        # once-a-second flush writes (src/batch.c): a job is listed within a second.
        wait_for(lambda: self.r.hlen(("cogworker:workers:" + self.d.identity).encode()) == 1,
                 timeout=3, message="the running job's workers entry")

    def test_top1_snapshot_when_not_a_terminal(self):
        """TOP-1: without a terminal, one snapshot of every section, no escapes."""
        p = subprocess.run([binary("cogworkerctl"), "top"], capture_output=True, timeout=20,
                           env=dict(os.environ, REDIS_URL=self.server.url))
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout.decode()
        self.assertNotIn("\033", out)
        for section in ("PROCESSES (1)", "RUNNING (1)", "QUEUES", "THROUGHPUT",
                        "RECENT FAILURES"):
            self.assertIn(section, out)
        self.assertIn(self.d.identity, out)
        # one look has no rate: the totals, not "processed 0 in the last 0s" (issue 31)
        self.assertNotIn("in the last 0s", out)
        self.assertRegex(out, r"processed +\d+ in total")
        self.assertIn("[########............]  40% resized 4 of 10", out)
        mail = [l for l in out.splitlines() if " mail " in l]
        self.assertTrue(mail and mail[0].rstrip().endswith("paused"), out)

    def tmux_top(self, width, height):
        """top in a detached tmux pane of width × height; returns the function that
        captures the screen, and the tmux command line."""
        sock = "cw-top-%d-%d" % (os.getpid(), width)
        tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
        env = dict(os.environ, REDIS_URL=self.server.url, TERM="xterm")
        subprocess.run(tmux + ["new-session", "-d", "-x", str(width), "-y", str(height),
                               binary("cogworkerctl") + " top"], env=env, check=True)
        self.addCleanup(subprocess.run, tmux + ["kill-server"], capture_output=True)

        def screen():
            return subprocess.run(tmux + ["capture-pane", "-p"], capture_output=True,
                                  env=env).stdout.decode()
        return screen, tmux

    def test_top3_the_key_line_fits_80x24(self):
        """TOP-3: in an 80×24 terminal with more to show than fits, the key line is still
        the bottom line, whole, and a line says how many did not fit."""
        for i in range(30):
            self.r.sadd(b"cogworker:queues", b"q%02d" % i)
        screen, _ = self.tmux_top(80, 24)
        wait_for(lambda: "q quit" in screen(), timeout=10, message="the key line on screen")
        rows = screen().rstrip("\n").split("\n")
        self.assertLessEqual(len(rows), 24)
        self.assertEqual(rows[-1].rstrip(),
                         "q quit · s quiet/resume · p pause/resume · r retry · c cancel", rows)
        self.assertRegex(rows[-3] + rows[-2],
                         r"… \d+ more line\(s\): a taller terminal shows them", rows)
        self.assertIn("RUNNING (1)", rows)                 # the top sections are there
        self.assertTrue([r for r in rows if self.jid in r], rows)

    def test_top2_live_in_tmux(self):
        """TOP-2: in a real terminal: the progress bar and the paused queue on screen;
        p, the queue's number and Enter resume it; q quits."""
        screen, tmux = self.tmux_top(200, 50)

        wait_for(lambda: "resized 4 of 10" in screen(), timeout=10,
                 message="the running job's progress on screen")
        s = screen()
        self.assertIn("[########............]  40% resized 4 of 10", s)
        mail = [l for l in s.splitlines() if " mail " in l]
        self.assertTrue(mail and mail[0].rstrip().endswith("paused"), s)
        number = mail[0].split()[0]
        subprocess.run(tmux + ["send-keys", "p"], check=True)
        wait_for(lambda: "pause/resume queue number" in screen(), timeout=5)
        subprocess.run(tmux + ["send-keys", number, "Enter"], check=True)
        wait_for(lambda: not self.r.sismember(b"cogworker:paused_queues", b"mail"),
                 timeout=5, message="mail resumed by the key")
        wait_for(lambda: not any(l.rstrip().endswith("paused") for l in screen()
                                 .splitlines() if " mail " in l), timeout=5)
        subprocess.run(tmux + ["send-keys", "q"], check=True)
        wait_for(lambda: subprocess.run(tmux + ["has-session"], capture_output=True)
                 .returncode != 0, timeout=5, message="top quit on q")

    def test_top4_the_keyspace_scan_runs_every_10s_not_each_second(self):
        """TOP-4: queues' SCAN for queue keys nobody listed walks the whole keyspace: top
        runs it at most every 10 s, not at each redraw, and shows meanwhile the queues it
        found; a new unlisted queue appears at the next one."""
        p = self.r.pipeline(transaction=False)
        for i in range(20):
            p.mset({"filler:%d:%d" % (i, k): "x" for k in range(1000)})
        p.execute()
        self.r.lpush(b"cogworker:queue:stray", job("Mailer", queue="stray"))
        self.r.config_resetstat()
        subprocess.run([binary("cogworkerctl"), "queues"], capture_output=True, timeout=20,
                       env=dict(os.environ, REDIS_URL=self.server.url), check=True)
        sweep = self.r.info("commandstats")["cmdstat_scan"]["calls"]
        self.assertGreaterEqual(sweep, 15, "a walk of the 20 000 keys")
        screen, _ = self.tmux_top(200, 50)
        wait_for(lambda: " stray " in screen(), timeout=10, message="the unlisted queue shown")
        self.r.config_resetstat()
        t = time.time()
        time.sleep(4)
        stats = self.r.info("commandstats")
        self.assertIn(" stray ", screen(), "still shown between two SCANs")
        redraws = stats["cmdstat_smembers"]["calls"]
        scans = stats.get("cmdstat_scan", {"calls": 0})["calls"]
        self.assertGreaterEqual(redraws, 3, "top redrew meanwhile")
        self.assertLessEqual(scans, sweep, "at most one walk in %.1fs" % (time.time() - t))
        self.r.lpush(b"cogworker:queue:later", job("Mailer", queue="later"))
        wait_for(lambda: " later " in screen(), timeout=15,
                 message="a new unlisted queue at the next SCAN")
        print("\nTOP-4: one walk %d SCANs; top in 4 s: %d SCANs, %d SMEMBERS"
              % (sweep, scans, redraws))


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: MIT
"""What test_batches.py and test_dependencies.py share (doc/protocol.md §7.34): a daemon
whose handlers record each run (jid, bid, start and end in ns), and cogworkerctl pointed at
the test's Redis."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, wait_for  # noqa: E402
from runkit import JobTestCase, sh  # noqa: E402

# A run: "<jid> <bid or -> <start ns> <end ns>" appended to $1 after sleeping $2 s; exits
# $3, or 0 once the file $4 exists (a member that fails until fixed).
RECORD = ('s=$(date +%s%N); sleep "$2"; code=$3; [ -n "$4" ] && [ -e "$4" ] && code=0; '
          'echo "$COGWORKER_JID ${COGWORKER_BID:--} $s $(date +%s%N) $code" >> "$1"; '
          'exit $code')


class FlowTestCase(JobTestCase):
    def setUp(self):
        super().setUp()
        self.runs_file = self.path("runs")
        self.conf = self.path("ctl.conf")
        with open(self.conf, "w") as f:
            f.write("# cogworkerctl test conf\n")

    def record(self, cls, sleep=0.05, code=0, fixed=""):
        return {"class": cls, "command": sh(RECORD, self.runs_file, sleep, code, fixed),
                "env": ["REDIS_URL=" + self.server.url]}

    def flow_daemon(self, *handlers, **settings):
        settings.setdefault("concurrency", 4)
        settings.setdefault("orphan_check_interval", 1)
        settings.setdefault("poll_interval", 1)
        return self.daemon(handlers=list(handlers), **settings)

    def ctl(self, *args, rc=0, url=None):
        """cogworkerctl on the test's Redis (or on url: a proxy in front of it)."""
        env = dict(os.environ)
        env["REDIS_URL"] = url or self.server.url
        env.pop("COGWORKER_JID", None)
        p = subprocess.run([binary("cogworkerctl"), "-c", self.conf] + list(args), env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        out, err = p.stdout.decode(), p.stderr.decode()
        if rc is not None:
            self.assertEqual(p.returncode, rc, "%s: %s%s" % (args, out, err))
        return out, err

    def runs(self):
        """{jid: [(bid, start, end, code), ...]} of every run so far."""
        out = {}
        try:
            with open(self.runs_file) as f:
                for line in f:
                    jid, bid, s, e, code = line.split()
                    out.setdefault(jid, []).append((bid, int(s), int(e), int(code)))
        except FileNotFoundError:
            pass
        return out

    def wait_runs(self, jids, timeout=20):
        wait_for(lambda: all(j in self.runs() for j in jids), timeout=timeout,
                 message="runs of %s" % (sorted(set(jids) - set(self.runs())),))
        return self.runs()

    def callback_jid(self, bid, kind):
        v = self.r.hget("cogworker:batch:" + bid, "fired_" + kind)
        return v.decode() if v else None

    def show(self, bid):
        return json.loads(self.ctl("--json", "batch", "show", bid)[0])

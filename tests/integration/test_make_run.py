# SPDX-License-Identifier: MIT
"""RUN — `make run` (tools/run.sh) as a newcomer uses it: the daemon on conf/dev.conf with
its example handlers and a private redis-server; a second `make run` in the same checkout
refuses while the first runs, a server left behind by a killed run is reused, and none is
left running once a run ends (doc/behaviours.md group RUN).

Each test copies conf/ and tools/run.sh into a temp dir standing for the checkout
(run.sh keeps its state in ./build/run/), and runs the real binaries of the build.

Run: python3 tests/integration/run.py test_make_run
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, build_dir, wait_for  # noqa: E402


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(") ")[-1][0] != "Z"
    except OSError:
        return False


class MakeRun(unittest.TestCase):

    def setUp(self):
        self.top = tempfile.mkdtemp(prefix="cw-makerun-")
        self.addCleanup(shutil.rmtree, self.top, True)
        shutil.copytree(os.path.join(REPO, "conf"), os.path.join(self.top, "conf"))
        os.makedirs(os.path.join(self.top, "tools"))
        shutil.copy(os.path.join(REPO, "tools", "run.sh"), os.path.join(self.top, "tools"))
        self.rundir = os.path.join(self.top, "build", "run")
        self.env = dict(os.environ)
        self.env.pop("REDIS_URL", None)
        self.runs = []
        self.addCleanup(self.cleanup)

    def cleanup(self):
        for p, _ in self.runs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for name in ("daemon.pid", "redis.pid"):
            pid = self.pid(name)
            if pid and alive(pid):
                os.kill(pid, signal.SIGKILL)

    def pid(self, name):
        try:
            with open(os.path.join(self.rundir, name)) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def start(self):
        """tools/run.sh in its own session (like a terminal's foreground job)."""
        log = os.path.join(self.top, "run-%d.log" % len(self.runs))
        out = open(log, "wb")
        self.addCleanup(out.close)
        p = subprocess.Popen(["sh", "tools/run.sh", build_dir()], cwd=self.top, env=self.env,
                             stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
        self.runs.append((p, log))
        return p, log

    def text(self, log):
        with open(log, errors="replace") as f:
            return f.read()

    def wait_started(self, log):
        wait_for(lambda: "started, identity=" in self.text(log), timeout=20,
                 message="the daemon of make run started")

    def ctl(self, *args):
        env = dict(self.env, REDIS_URL="unix://" + os.path.join(self.rundir, "redis.sock"))
        return subprocess.run([os.path.join(build_dir(), "cogworkerctl")] + list(args),
                              env=env, capture_output=True, text=True, timeout=30)

    def test_run1_second_run_refuses_then_reuses_a_leftover_server(self):
        first, log = self.start()
        self.wait_started(log)
        redis_pid = self.pid("redis.pid")
        self.assertTrue(redis_pid and alive(redis_pid))
        # The example handlers run (from the daemon's PATH), Sleepy reports progress
        jid = self.ctl("push", "Echo", "hello").stdout.strip()
        wait_for(lambda: "done: Echo jid=%s" % jid in self.text(log), timeout=10)
        self.assertIn("echo handler: jid=%s" % jid, self.text(log))
        jid = self.ctl("push", "Sleepy", "1").stdout.strip()
        wait_for(lambda: "done: Sleepy jid=%s" % jid in self.text(log), timeout=10)
        show = self.ctl("jobs", "show", jid)
        self.assertIn("status     complete", show.stdout)
        self.assertIn("progress   100% done", show.stdout)
        self.assertIn(jid, self.ctl("history").stdout)

        # A second make run while the first runs: refused, clearly, nothing started
        second = subprocess.run(["sh", "tools/run.sh", build_dir()], cwd=self.top,
                                env=self.env, capture_output=True, text=True, timeout=20)
        self.assertEqual(second.returncode, 1, second)
        self.assertIn("make run is already running in this checkout (pid %d)" % first.pid,
                      second.stderr)
        self.assertIn("REDIS_URL=unix://%s/redis.sock" % self.rundir, second.stderr)
        self.assertEqual(self.pid("redis.pid"), redis_pid)

        # The first run dies without cleaning up (kill -9 of the script and its daemon,
        # like a closed terminal): its redis-server is left over...
        daemon_pid = self.pid("daemon.pid")
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        self.assertTrue(alive(daemon_pid))
        refused = subprocess.run(["sh", "tools/run.sh", build_dir()], cwd=self.top,
                                 env=self.env, capture_output=True, text=True, timeout=20)
        self.assertEqual(refused.returncode, 1, refused)
        self.assertIn("a daemon of an earlier make run is still running (pid %d)" % daemon_pid,
                      refused.stderr)
        os.kill(daemon_pid, signal.SIGKILL)
        wait_for(lambda: not alive(daemon_pid))
        self.assertTrue(alive(redis_pid))

        # ...and the next run takes it over, and stops it when it ends.
        third, log3 = self.start()
        self.wait_started(log3)
        self.assertIn("reusing the private redis-server (pid %d)" % redis_pid, self.text(log3))
        self.assertIn(jid, self.ctl("history").stdout)      # the same server, data kept
        os.killpg(third.pid, signal.SIGINT)                # Ctrl-C in its terminal
        third.wait(timeout=40)
        self.assertIn("stopped", self.text(log3))
        wait_for(lambda: not alive(redis_pid), timeout=10, message="redis-server stopped")
        self.assertFalse(os.path.exists(os.path.join(self.rundir, "run.pid")))

    def test_run2_a_stale_pid_file_starts_a_fresh_server(self):
        os.makedirs(self.rundir)
        for name in ("run.pid", "redis.pid", "daemon.pid"):
            with open(os.path.join(self.rundir, name), "w") as f:
                f.write("999999\n")
        with open(os.path.join(self.rundir, "redis.sock"), "w"):
            pass                                            # a stale socket path
        p, log = self.start()
        self.wait_started(log)
        self.assertIn("run: private redis-server at unix://", self.text(log))
        redis_pid = self.pid("redis.pid")
        self.assertNotEqual(redis_pid, 999999)
        os.killpg(p.pid, signal.SIGTERM)
        p.wait(timeout=40)
        wait_for(lambda: not alive(redis_pid), timeout=10, message="redis-server stopped")


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: MIT
"""CAP: caps per handler (doc/behaviours.md §51, doc/design.md "Caps per handler"):
memory_max, cpu_max and pids_max enforced by the kernel through cgroups, the out-of-memory
error, dead_on_oom, and the conf errors of a cap this host can't enforce.

Against the real kernel, as root: the daemon finds the controllers itself (cgroup v2 where
delegated, else a cgroup v1 hierarchy it can write), and tests/handlers/hog takes memory,
forks or burns CPU. What a user would see is checked: the retry and dead entries, the log
lines, --check's output and exit status.

A test that needs a controller this host can't give (`cogworkerd --check` on a conf with
that cap says so) cannot run: it FAILS, saying so, because a CI host that lost a controller
must not turn these tests green by skipping them. Where a host is known to lack one, say so
with COGWORKERD_HOST_LACKS=memory,cpu,pids: those tests are then reported as skipped
("cannot run here: ..."), never as passed.

Run: python3 tests/integration/run.py test_caps
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, handler, job, wait_for  # noqa: E402
from runkit import DEAD, RETRY, JobTestCase  # noqa: E402

FAST = {"poll_interval": 0.2, "heartbeat_interval": 1}
CAP_OF = {"memory": ("memory_max", '"64M"'), "cpu": ("cpu_max", '"50%"'),
          "pids": ("pids_max", "16")}
LACKS = set(filter(None, os.environ.get("COGWORKERD_HOST_LACKS", "").split(",")))
# A host that has no cgroup at all, for the daemon's discovery (COGWORKERD_TEST_PROC_SELF).
NO_CGROUPS_MOUNTINFO = "30 22 0:27 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"


def check_conf(workdir, body, env=None, user=None):
    """cogworkerd --check on a conf of handlers `body`: (exit status, output, path)."""
    if user is not None:            # a directory the other user can read
        workdir = tempfile.mkdtemp(prefix="cw-caps-", dir="/tmp")
        os.chmod(workdir, 0o755)
    path = os.path.join(workdir, "check-%d.conf" % len(os.listdir(workdir)))
    with open(path, "w") as f:
        f.write('redis = { url = "redis://127.0.0.1:1"; };\n%s\n' % body)
    os.chmod(path, 0o644)
    argv = [binary("cogworkerd"), "--check", "-c", path]
    if user is not None:
        argv = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups"] + argv
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=10, env=e)
    return p.returncode, p.stdout + p.stderr, path


class Caps(JobTestCase):

    def setUp(self):
        super().setUp()
        os.chmod(self.workdir, 0o755)

    def need(self, controller):
        """Fail (or, where COGWORKERD_HOST_LACKS names it, skip) unless the daemon can use
        the controller on this host, as --check says."""
        name, value = CAP_OF[controller]
        rc, out, _ = check_conf(self.workdir, 'handlers = ( { class = "X"; command = '
                                '["/bin/true"]; %s = %s; } );' % (name, value))
        if rc == 0:
            return
        why = "cannot run here: the %s controller is not available (%s)" % (
            controller, out.strip())
        if controller in LACKS:
            self.skipTest(why)
        self.fail(why + "; if this host is known to lack it, set COGWORKERD_HOST_LACKS=%s"
                  % controller)

    def hog(self, cls, *args, **caps):
        h = {"class": cls, "command": handler("hog", *args)}
        h.update(caps)
        return h

    def entry(self, key, jid):
        for m in self.r.zrange(key, 0, -1):
            e = json.loads(m)
            if e["jid"] == jid:
                return e
        return None

    # -- memory_max

    def test_cap1_past_memory_max_fails_out_of_memory_and_retries(self):
        """CAP-1: a job that takes more than its memory_max is killed by the kernel and fails
        as "out of memory (memory_max M, peak P)", then follows its retry rules; the same
        handler under its cap succeeds."""
        self.need("memory")
        d = self.daemon(handlers=[self.hog("Big", "mem", 200, memory_max="64M"),
                                  self.hog("Fits", "mem", 16, memory_max="64M")],
                        concurrency=2, **FAST)
        big = json.loads(self.push(job("Big", retry=3)))["jid"]
        fits = json.loads(self.push(job("Fits", retry=3)))["jid"]
        self.wait_member(RETRY, jid=big, timeout=30)
        e = self.entry(RETRY, big)
        self.assertEqual(e["error_class"], "Cogworker::HandlerOutOfMemory")
        self.assertTrue(e["error_message"].startswith(
            "out of memory (memory_max 64 MiB, peak 64 MiB)"), e["error_message"])
        line = d.wait_log("fail: Big jid=%s" % big)
        self.assertIn("out of memory (memory_max 64 MiB, peak 64 MiB) → retry 1/3", line)
        d.wait_log("done: Fits jid=%s" % fits, timeout=20)
        d.wait_log("jid=%s stdout: held 16 MiB" % fits)
        self.assertIsNone(self.entry(DEAD, big))

    def test_cap1_out_of_memory_on_the_last_try_is_dead(self):
        """CAP-1: out of memory with no retry left goes to dead like any failure."""
        self.need("memory")
        d = self.daemon(handlers=[self.hog("Big", "mem", 200, memory_max="64M")], **FAST)
        big = json.loads(self.push(job("Big", retry=0)))["jid"]
        self.wait_member(DEAD, jid=big, timeout=30)
        self.assertIn("out of memory (memory_max 64 MiB", self.entry(DEAD, big)["error_message"])
        d.wait_log("fail: Big jid=%s" % big)

    def test_cap2_dead_on_oom(self):
        """CAP-2: dead_on_oom sends a job killed for memory straight to dead, retries left."""
        self.need("memory")
        d = self.daemon(handlers=[self.hog("Big", "mem", 200, memory_max="64M",
                                           dead_on_oom=True)], **FAST)
        big = json.loads(self.push(job("Big", retry=25)))["jid"]
        self.wait_member(DEAD, jid=big, timeout=30)
        e = self.entry(DEAD, big)
        self.assertEqual(e["error_class"], "Cogworker::HandlerOutOfMemory")
        self.assertTrue(e["error_message"].startswith("out of memory (memory_max 64 MiB, "
                                                      "peak 64 MiB)"), e["error_message"])
        line = d.wait_log("fail: Big jid=%s" % big)
        self.assertIn("→ dead (out of memory, and the handler has dead_on_oom)", line)
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_cap1_warm_process_past_memory_max(self):
        """CAP-1: a warm process is capped as a whole; past memory_max its job fails out of
        memory, and the next job gets a new process."""
        self.need("memory")
        d = self.daemon(handlers=[{"class": "W", "command": handler("warm_py"), "warm": True,
                                   "memory_max": "64M"}], **FAST)
        jid = json.loads(self.push(job("W", ["alloc", 200], retry=3)))["jid"]
        self.wait_member(RETRY, jid=jid, timeout=30)
        self.assertTrue(self.entry(RETRY, jid)["error_message"].startswith(
            "out of memory (memory_max 64 MiB, peak 64 MiB)"), self.entry(RETRY, jid))
        ok = json.loads(self.push(job("W", ["ok"], retry=3)))["jid"]
        d.wait_log("done: W jid=%s" % ok, timeout=20)

    # -- pids_max, cpu_max

    def test_cap3_pids_max_bounds_a_fork_bomb(self):
        """CAP-3: pids_max bounds what a job can fork: the fork past it fails in the job,
        the job fails, and the daemon goes on running jobs."""
        self.need("pids")
        d = self.daemon(handlers=[self.hog("Bomb", "fork", 500, pids_max=8),
                                  {"class": "Ok", "command": handler("ok")}], **FAST)
        bomb = json.loads(self.push(job("Bomb", retry=3)))["jid"]
        line = d.wait_log("jid=%s stdout: fork failed after" % bomb, timeout=20)
        self.assertIn("fork failed after 7 children", line)     # 8 with the handler itself
        d.wait_log("fail: Bomb jid=%s" % bomb)
        self.assertIn("exit status 3", self.entry(RETRY, bomb)["error_message"])
        ok = json.loads(self.push(job("Ok")))["jid"]
        d.wait_log("done: Ok jid=%s" % ok)

    def spin(self, d, share):
        """(CPU seconds, periods throttled) of a 1 s busy loop under cpu_max share."""
        jid = json.loads(self.push(job("Spin" + share.rstrip("%"))))["jid"]
        line = d.wait_log("jid=%s stdout: cpu" % jid, timeout=20)
        cpu = float(line.split("stdout: cpu ")[1].split()[0])
        throttled = int(line.split("throttled ")[1].split()[0])
        print("\nCAP-4: cpu_max %s: %.3f s of CPU in 1 s of wall time, throttled in %d "
              "periods" % (share, cpu, throttled))
        d.wait_log("done: Spin%s jid=%s" % (share.rstrip("%"), jid))
        return cpu, throttled, line

    def test_cap4_cpu_max(self):
        """CAP-4: cpu_max "50%": a busy loop for 1 s of wall time gets at most about half a
        CPU second (bound 0.6 s). A loaded host may give it less than that anyway, so the
        same loop under "10%" must be throttled by its cgroup and get at most 0.15 s: the
        cap, not the load, held it back."""
        self.need("cpu")
        d = self.daemon(handlers=[self.hog("Spin50", "spin", 1.0, cpu_max="50%"),
                                  self.hog("Spin10", "spin", 1.0, cpu_max="10%")], **FAST)
        cpu, _, line = self.spin(d, "50%")
        self.assertLessEqual(cpu, 0.6, line)
        cpu, throttled, line = self.spin(d, "10%")
        self.assertLessEqual(cpu, 0.15, line)
        self.assertGreater(throttled, 0, line)

    # -- the cgroups themselves

    def pool_dirs(self, pid):
        """The daemon pid's caps cgroups on this host (cgcaps.c names them by pid)."""
        found = []
        mine = "cogworkerd.%d.%d" % (os.stat("/proc/self/ns/pid").st_ino, pid)
        for root, dirs, _ in os.walk("/sys/fs/cgroup"):
            for name in dirs:
                if name == mine:
                    found.append(os.path.join(root, name))
            if root.count("/") > 6:
                dirs[:] = []
        return found

    def test_cap5_cgroups_removed_at_stop_and_swept_after_a_kill(self):
        """CAP-5: the caps' cgroups go at a stop; those a kill -9 left go at the next start."""
        self.need("memory")
        hogs = [self.hog("Fits", "mem", 4, memory_max="64M")]
        d = self.daemon(handlers=hogs, **FAST)
        jid = json.loads(self.push(job("Fits")))["jid"]
        d.wait_log("done: Fits jid=%s" % jid)
        pid = d.proc.pid
        self.assertTrue(self.pool_dirs(pid))
        self.assertEqual(d.stop(), 0)
        self.assertEqual(self.pool_dirs(pid), [])

        d = self.daemon(handlers=hogs, **FAST)
        jid = json.loads(self.push(job("Fits")))["jid"]
        d.wait_log("done: Fits jid=%s" % jid)
        pid = d.proc.pid
        self.assertTrue(self.pool_dirs(pid))
        d.kill()
        self.assertTrue(self.pool_dirs(pid))
        d = self.daemon(handlers=hogs, **FAST)
        wait_for(lambda: not self.pool_dirs(pid), timeout=5,
                 message="the killed daemon's cgroups swept")

    # -- conf errors

    def test_cap6_wrong_unit_is_a_conf_error_with_its_line(self):
        """CAP-6: a cap with the wrong unit: --check names file and line, exit 2."""
        for setting, phrase in (('memory_max = "256MB";', 'memory_max: "256MB" is not a size'),
                                ('cpu_max = "half";', 'cpu_max: "half" is not a CPU share'),
                                ('pids_max = "many";', "pids_max must be an integer")):
            rc, out, path = check_conf(self.workdir, 'handlers = ( { class = "X";\n'
                                       '  command = ["/bin/true"];\n  %s } );' % setting)
            self.assertEqual(rc, 2, out)
            self.assertIn("%s:4: handler.%s" % (path, phrase), out)

    def fake_host(self):
        """A /proc/self for discovery that shows no cgroup at all."""
        d = tempfile.mkdtemp(prefix="cw-proc-")
        self.addCleanup(shutil.rmtree, d, True)
        with open(os.path.join(d, "cgroup"), "w") as f:
            f.write("0::/\n")
        with open(os.path.join(d, "mountinfo"), "w") as f:
            f.write(NO_CGROUPS_MOUNTINFO)
        return {"COGWORKERD_TEST_PROC_SELF": d}

    def test_cap7_check_names_the_missing_controller(self):
        """CAP-7: where the host has no memory controller, --check refuses memory_max at
        its line, naming the controller and how to delegate it; the daemon won't start on
        that conf, and a reload to it is rejected."""
        env = self.fake_host()
        body = ('handlers = ( { class = "X"; command = ["/bin/true"];\n'
                '  memory_max = "256M"; cpu_max = 2; } );')
        rc, out, path = check_conf(self.workdir, body, env=env)
        self.assertEqual(rc, 2, out)
        self.assertIn("%s:3: handler 'X': memory_max needs the memory controller, but "
                      "neither cgroup v2 nor a cgroup v1 hierarchy of this host offers it; "
                      "delegate it to the daemon: under systemd, Delegate=memory" % path, out)
        self.assertIn("%s:3: handler 'X': cpu_max needs the cpu controller" % path, out)
        self.assertNotIn("configuration OK", out)

        start = subprocess.run([binary("cogworkerd"), "-c", path], stdin=subprocess.DEVNULL,
                               capture_output=True, text=True, timeout=10,
                               env=dict(os.environ, **env))
        self.assertEqual(start.returncode, 2, start.stderr)
        self.assertIn("memory_max needs the memory controller", start.stderr)

        d = self.daemon(handlers=[{"class": "Ok", "command": handler("ok")}], start=False,
                        **FAST)
        d.start(env=env)
        d.settings["handlers"] = [{"class": "Ok", "command": handler("ok"),
                                   "pids_max": 10}]
        d.write_conf()
        d.signal(signal.SIGHUP)
        line = d.wait_log("reload rejected")
        self.assertIn("pids_max needs the pids controller", line)
        jid = json.loads(self.push(job("Ok")))["jid"]
        d.wait_log("done: Ok jid=%s" % jid)

    def test_cap8_memory_max_without_root(self):
        """CAP-8: memory_max where the daemon can't write the controller's cgroups (not
        root, nothing delegated): --check refuses it, saying why."""
        self.need("memory")
        if os.geteuid() != 0 or not shutil.which("setpriv"):
            self.fail("cannot run here: needs root and setpriv to check as another user")
        rc, out, path = check_conf(self.workdir, 'handlers = ( { class = "X"; command = '
                                   '["/bin/true"];\n  memory_max = "1G"; } );', user=65534)
        self.addCleanup(shutil.rmtree, os.path.dirname(path), True)
        self.assertEqual(rc, 2, out)
        self.assertIn("%s:3: handler 'X': memory_max needs the memory controller, but " % path,
                      out)
        if "cgroup v1 hierarchy" in out:        # a hybrid host, as the CI's
            self.assertIn("can't be written by uid 65534", out)
            self.assertIn("needs the daemon to run as root", out)


if __name__ == "__main__":
    import unittest
    unittest.main()

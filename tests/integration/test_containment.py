# SPDX-License-Identifier: MIT
"""Containment (issue 28 item 1, doc/design.md "Containment", CT-1..CT-7): when a job ends,
every process it started ends, the ones that escaped its process group too (setsid, a
double fork, SIGTERM ignored): at success, timeout, cancel, a warm process's recycling, and
when the daemon is killed with SIGKILL. Against the real kernel: a cgroup v2 per job slot,
so these tests need root and a cgroup v2 mount with cgroup.kill (Linux 5.14); where there
is none they say so and are skipped, never counted as passed. The fallback (containment =
"process-group", or "cgroup" where none can be had) is tested too.

Each test's escaped process is a `sleep` with a duration of its own (a marker), found by
its exact command line in /proc: never a global pgrep of a common command.

Run: python3 tests/integration/run.py test_containment
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, job, wait_for  # noqa: E402
from runkit import JobTestCase, loads, sh  # noqa: E402


def cgroup_v2_mount():
    for m in ("/sys/fs/cgroup", "/sys/fs/cgroup/unified"):
        if os.path.exists(os.path.join(m, "cgroup.procs")) and \
                os.path.exists(os.path.join(m, "cgroup.subtree_control")):
            return m
    return None


def why_no_cgroup():
    if os.geteuid() != 0:
        return "containment tests need root (cgroup v2 subtrees)"
    if cgroup_v2_mount() is None:
        return "no cgroup v2 mounted at /sys/fs/cgroup or /sys/fs/cgroup/unified"
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    if (major, minor) < (5, 14):
        return "the kernel has no cgroup.kill (Linux 5.14 or later)"
    return None


NEEDS_CGROUP = unittest.skipIf(why_no_cgroup() is not None, why_no_cgroup() or "")


def marker():
    """A sleep duration no other test uses: the escaped process's exact argv."""
    return "%d.%06d" % (3000 + random.randrange(1000), random.randrange(10 ** 6))


def pids_of_sleep(mark):
    """Live (not zombie) processes whose command line is exactly `sleep <mark>`."""
    want = b"sleep\0" + mark.encode() + b"\0"
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                if f.read() != want:
                    continue
            with open("/proc/%s/stat" % name) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X"):
            found.append(int(name))
    return found


def escaped(mark, ignore_term=False):
    """Shell that starts `sleep <mark>` in a session of its own (setsid, every stdio to
    /dev/null, so the job's pipes close), optionally ignoring SIGTERM, and goes on once it
    has left the job's process group (the file $1.<mark> says so)."""
    trap = "trap \"\" TERM; " if ignore_term else ""
    return ('setsid sh -c \'%stouch "$0"; exec sleep %s\' "$1.%s" </dev/null >/dev/null '
            '2>&1 & while [ ! -e "$1.%s" ]; do sleep 0.02; done; echo started; '
            % (trap, mark, mark, mark))


class Containment(JobTestCase):

    def setUp(self):
        super().setUp()
        self.marks = []
        self.addCleanup(self.kill_marks)

    def mark(self):
        m = marker()
        self.marks.append(m)
        return m

    def kill_marks(self):
        for m in self.marks:
            for pid in pids_of_sleep(m):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass

    def wait_started(self, mark, timeout=10):
        wait_for(lambda: pids_of_sleep(mark), timeout=timeout,
                 message="the escaped sleep %s running" % mark)

    def assert_gone_within(self, mark, seconds):
        try:
            wait_for(lambda: not pids_of_sleep(mark), timeout=seconds,
                     message="sleep %s gone" % mark)
        except AssertionError:
            self.fail("sleep %s still alive %gs after its job ended (pids %s)"
                      % (mark, seconds, pids_of_sleep(mark)))

    def ctl(self, *args):
        env = dict(os.environ)
        env["REDIS_URL"] = self.server.url
        conf = os.path.join(self.workdir, "ctl.conf")
        if not os.path.exists(conf):
            with open(conf, "w") as f:
                f.write("# cogworkerctl\n")
        return subprocess.run([binary("cogworkerctl"), "-c", conf] + list(args), env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                              text=True)

    # ---------------------------------------------------------------------------------

    @NEEDS_CGROUP
    def test_ct1_escaped_child_gone_after_success(self):
        """CT-1: a handler that leaves a setsid'd grandchild behind succeeds, and within 2 s
        of its done no such process is alive; the start-up log names the mechanism."""
        m = self.mark()
        d = self.daemon(handlers=[{"class": "Esc", "command": sh(escaped(m), self.path("ready"))}])
        self.assertTrue(d.log_lines("containment: cgroup v2, jobs in "), d.log())
        jid = loads(self.push(job("Esc")))["jid"]
        self.wait_done(d, "Esc", jid, timeout=15)
        self.assert_gone_within(m, 2)

    @NEEDS_CGROUP
    def test_ct2_escaped_child_ignoring_term_gone_after_timeout(self):
        """CT-2: a job that times out while its escaped child (ignoring SIGTERM) runs: the
        child is gone within 2 s of the job's failure."""
        m = self.mark()
        cmd = sh(escaped(m, ignore_term=True) + "sleep 30", self.path("ready"))
        d = self.daemon(handlers=[{"class": "Slow", "command": cmd, "timeout": 1,
                                   "kill_grace": 0.5}])
        jid = loads(self.push(job("Slow", retry=False)))["jid"]
        self.wait_started(m)
        self.wait_fail(d, "Slow", jid, timeout=15)
        self.assert_gone_within(m, 2)

    @NEEDS_CGROUP
    def test_ct3_escaped_child_gone_after_cancel(self):
        """CT-3: a job cancelled (cogworkerctl jobs cancel) while its escaped child runs:
        the child is gone within 2 s of the cancel's settle."""
        m = self.mark()
        cmd = sh(escaped(m, ignore_term=True) + "sleep 30", self.path("ready"))
        d = self.daemon(handlers=[{"class": "Slow", "command": cmd, "kill_grace": 0.5}],
                        heartbeat_interval=1)
        jid = loads(self.push(job("Slow")))["jid"]
        self.wait_started(m)
        res = self.ctl("jobs", "cancel", jid)
        self.assertEqual(res.returncode, 0, res.stdout + res.stderr)
        self.wait_fail(d, "Slow", jid, timeout=15)
        self.assert_gone_within(m, 2)

    WARM = """printf '{"type":"ready"}\\n' >&3
while IFS= read -r line <&3; do
  case $line in *'"type":"cancel"'*) continue ;; esac
  setsid sh -c 'touch "$0"; exec sleep '"$MARK" "$READY" </dev/null >/dev/null 2>&1 3>&- &
  while [ ! -e "$READY" ]; do sleep 0.02; done
  case $line in *'"hang"'*) sleep 30 ;; esac
  printf '{"type":"done","exit":0}\\n' >&3
done
"""

    def warm_handler(self, mark, **extra):
        h = {"class": "W", "command": sh(self.WARM), "warm": True,
             "env": ["MARK=" + mark, "READY=" + self.path("ready-" + mark)]}
        h.update(extra)
        return h

    @NEEDS_CGROUP
    def test_ct4_warm_process_recycled_takes_its_escaped_child(self):
        """CT-4: a warm process whose job left an escaped child is recycled after that job
        (warm_max_jobs 1): the child is gone within 2 s of the job's done."""
        m = self.mark()
        d = self.daemon(handlers=[self.warm_handler(m, warm_max_jobs=1, kill_grace=1)])
        jid = loads(self.push(job("W")))["jid"]
        self.wait_done(d, "W", jid, timeout=15)
        self.assert_gone_within(m, 2)

    @NEEDS_CGROUP
    def test_ct4_warm_job_timed_out_takes_its_escaped_child(self):
        """CT-4: a warm job that times out while the escaped child it started runs: its
        process is killed, and the child with it, within 2 s of the job's fail."""
        m = self.mark()
        d = self.daemon(handlers=[self.warm_handler(m, timeout=1, kill_grace=0.5)])
        jid = loads(self.push(job("W", ["hang"], retry=False)))["jid"]
        self.wait_started(m)
        self.wait_fail(d, "W", jid, timeout=15)
        self.assert_gone_within(m, 2)

    @NEEDS_CGROUP
    def test_ct8_on_death_escaped_child_gone(self):
        """CT-8: an on_death command that leaves an escaped child: the child is gone within
        2 s of the command's end."""
        m = self.mark()
        hook = sh("cat >/dev/null; " + escaped(m), self.path("ready"))
        d = self.daemon(handlers=[{"class": "Bad", "command": ["/bin/false"],
                                   "on_death": hook}])
        jid = loads(self.push(job("Bad", retry=False)))["jid"]
        self.wait_fail(d, "Bad", jid, timeout=15)
        ready = self.path("ready") + "." + m        # the escaped child has started
        wait_for(lambda: os.path.exists(ready), timeout=10, message="the hook's child")
        self.assert_gone_within(m, 2)

    @NEEDS_CGROUP
    def test_ct5_daemon_killed_nothing_left(self):
        """CT-5: the daemon is killed with SIGKILL while a job's escaped child runs: nothing
        is left within 10 s (the reaper's cgroup.kill), and the daemon's subtree is gone."""
        m = self.mark()
        cmd = sh(escaped(m, ignore_term=True) + "sleep 30", self.path("ready"))
        d = self.daemon(handlers=[{"class": "Slow", "command": cmd}])
        root = d.log_lines("containment: cgroup v2, jobs in ")[0].split(" jobs in ")[1].split()[0]
        self.assertTrue(os.path.isdir(root), root)
        self.push(job("Slow"))
        self.wait_started(m)
        d.kill()
        self.assert_gone_within(m, 10)
        wait_for(lambda: not os.path.exists(root), timeout=10,
                 message="the dead daemon's subtree %s removed" % root)

    @NEEDS_CGROUP
    def test_ct6_a_later_daemon_sweeps_what_a_dead_one_left(self):
        """CT-6: when the reaper could not do it (killed with the daemon), the next daemon
        started in the same cgroup kills and removes the dead daemon's subtree at its
        start."""
        m = self.mark()
        cmd = sh(escaped(m, ignore_term=True) + "sleep 30", self.path("ready"))
        self.start_in_private_cgroup()
        d = self.daemon(handlers=[{"class": "Slow", "command": cmd}])
        root = d.log_lines("containment: cgroup v2, jobs in ")[0].split(" jobs in ")[1].split()[0]
        self.push(job("Slow"))
        self.wait_started(m)
        reapers = [p for p in self.children_of(d.proc.pid)
                   if self.comm(p) == "cogworkerd-reap"]
        self.assertEqual(len(reapers), 1, "the reaper")
        os.kill(reapers[0], signal.SIGKILL)
        d.kill()
        time.sleep(0.5)
        self.assertTrue(pids_of_sleep(m), "the escaped sleep outlived daemon and reaper")
        d2 = self.daemon(handlers=[{"class": "Slow", "command": cmd}])
        self.assertTrue(d2.log_lines("containment: removed %s" % root), d2.log())
        self.assert_gone_within(m, 2)
        self.assertFalse(os.path.exists(root))

    LEAK_WARM = """printf '{"type":"ready"}\\n' >&3
while IFS= read -r line <&3; do
  case $line in *'"type":"cancel"'*) continue ;; esac
  case $line in *'"hang"'*) setsid sleep "$MARK" </dev/null >/dev/null 2>&1 3>&- & sleep 30 ;; esac
  printf '{"type":"done","exit":0}\\n' >&3
done
"""

    @NEEDS_CGROUP
    def test_ct9_many_jobs_leave_no_descriptor_nor_cgroup(self):
        """CT-9: a few hundred jobs of every ending (success, failure, timeout, an escaped
        child, warm processes recycled and killed for a timeout, on_death runs with an
        escaped child, confined runs, a reload that replaces the warm processes): the
        daemon ends with the descriptors and the cgroups it had before, and no escaped
        child is left."""
        m = self.mark()
        esc = "setsid sleep %s </dev/null >/dev/null 2>&1 & echo x" % m
        hs = [{"class": "Ok", "command": ["/bin/true"]},
              {"class": "Fail", "command": ["/bin/false"]},
              {"class": "Slow", "command": ["/bin/sleep", "30"], "timeout": 0.3,
               "kill_grace": 0.1},
              {"class": "Esc", "command": sh(esc)},
              {"class": "W", "command": sh(self.LEAK_WARM), "warm": True, "warm_max_jobs": 3,
               "warm_idle_timeout": 1, "env": ["MARK=" + m]},
              {"class": "WT", "command": sh(self.LEAK_WARM), "warm": True, "timeout": 0.3,
               "kill_grace": 0.1, "warm_idle_timeout": 1, "env": ["MARK=" + m]},
              {"class": "Bad", "command": ["/bin/false"],
               "on_death": sh("cat >/dev/null; " + esc)},
              {"class": "Conf", "command": sh("echo x > /tmp/x"), "private_tmp": True,
               "network": False}]
        d = self.daemon(handlers=hs, concurrency=3)
        root = d.log_lines("containment: cgroup v2, jobs in ")[0].split(" jobs in ")[1].split()[0]
        mix = [("Ok", []), ("Fail", []), ("Slow", []), ("Esc", []), ("W", []), ("W", []),
               ("WT", ["hang"]), ("WT", []), ("Bad", []), ("Conf", [])]

        def settled():
            log = d.log()
            return log.count(" done: ") + log.count(" fail: ")

        def run(n):
            base = settled()
            self.r.lpush("cogworker:queue:default",
                         *[job(c, a, retry=False) for c, a in (mix * n)[:n]])
            wait_for(lambda: settled() >= base + n, timeout=240, interval=0.2,
                     message="%d jobs settled" % n)

        def cgroups():
            return sorted(dp[len(root):] for dp, _, _ in os.walk(root) if dp != root)

        def quiet():
            """No warm process left (idle timeout) and no escaped child."""
            return not [c for c in cgroups() if c.startswith("/warm-")] and \
                not pids_of_sleep(m)

        def fds():
            return sorted(os.listdir("/proc/%d/fd" % d.proc.pid), key=int)

        run(len(mix))
        wait_for(quiet, timeout=20, message="the warm processes retired")
        before_fds, before_cg = fds(), cgroups()
        run(300)
        d.settings["handlers"] = [dict(h, env=h.get("env", []) + ["V=2"]) if h.get("warm")
                                  else h for h in hs]
        d.write_conf()
        d.signal(signal.SIGHUP)
        d.wait_log("reloaded")
        run(3 * len(mix))
        wait_for(quiet, timeout=20, message="the warm processes retired, no escaped child")
        self.assertEqual(cgroups(), before_cg)
        wait_for(lambda: len(fds()) == len(before_fds), timeout=5,
                 message="the daemon's descriptors back to %d (now %s)"
                 % (len(before_fds), fds()))

    def start_in_private_cgroup(self):
        """The daemons this test starts run in a cgroup of its own, so that no daemon of
        another test on the machine sweeps what they leave (the sweep is by cgroup)."""
        import harness
        mnt = cgroup_v2_mount()
        with open("/proc/self/cgroup") as f:
            rel = [l[3:] for l in f.read().splitlines() if l.startswith("0::")][0]
        path = os.path.join(mnt + (rel if rel != "/" else ""),
                            "cw-test-%d-%s" % (os.getpid(), os.urandom(3).hex()))
        os.mkdir(path)
        orig = harness._die_with_parent

        def into():
            orig()
            with open(os.path.join(path, "cgroup.procs"), "w") as f:
                f.write("0")

        def cleanup():
            harness._die_with_parent = orig
            self._stop_daemons()            # their reapers leave once they have cleaned up
            for _ in range(100):
                try:
                    os.rmdir(path)
                    return
                except OSError:
                    time.sleep(0.05)
        harness._die_with_parent = into
        self.addCleanup(cleanup)

    @staticmethod
    def comm(pid):
        try:
            with open("/proc/%d/comm" % pid) as f:
                return f.read().strip()
        except OSError:
            return ""

    @staticmethod
    def children_of(pid):
        out = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    with open("/proc/%s/stat" % name) as f:
                        if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                            out.append(int(name))
                except OSError:
                    pass
        return out

    # ---- the fallback ---------------------------------------------------------------

    def test_ct7_process_group_fallback_says_so(self):
        """CT-7: containment = "process-group": the daemon says so once at start and in
        --check, and keeps the old rule: the group is killed, an escaped process is not."""
        m = self.mark()
        d = self.daemon(containment="process-group",
                        handlers=[{"class": "Esc", "command": sh(escaped(m), self.path("ready"))}])
        self.assertEqual(len(d.log_lines("containment: process group only")), 1, d.log())
        jid = loads(self.push(job("Esc")))["jid"]
        self.wait_done(d, "Esc", jid, timeout=15)
        time.sleep(0.5)
        self.assertTrue(pids_of_sleep(m), "without a cgroup the escaped sleep lives on")
        p = subprocess.run([binary("cogworkerd"), "-c", d.conf_path, "--check"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 0, p.stdout)
        self.assertIn('containment: process group only (containment = "process-group")',
                      p.stdout)

    @unittest.skipIf(os.geteuid() != 0, "needs root to run --check as an unprivileged user")
    def test_ct7_cgroup_where_none_can_be_had_is_a_check_error(self):
        """CT-7: containment = "cgroup" for a user that cannot make cgroups: --check fails
        naming the file and line, and the daemon refuses to start."""
        public = tempfile.mkdtemp(prefix="cw-ct7-", dir="/tmp")
        self.addCleanup(shutil.rmtree, public, True)
        os.chmod(public, 0o755)
        conf = os.path.join(public, "cg.conf")
        with open(conf, "w") as f:
            f.write('concurrency = 1;\ncontainment = "cgroup";\n')
        os.chmod(conf, 0o644)
        as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
        p = subprocess.run(as_nobody + [binary("cogworkerd"), "-c", conf, "--check"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn('%s:2: containment = "cgroup": no cgroup can be had: ' % conf, p.stdout)
        self.assertNotIn("configuration OK", p.stdout)
        p = subprocess.run(as_nobody + [binary("cogworkerd"), "-c", conf], timeout=20,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           env=dict(os.environ, REDIS_URL=self.server.url))
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn('%s:2: containment = "cgroup": no cgroup can be had' % conf, p.stdout)

    def test_ct7_containment_values(self):
        """CT-7: a containment that is not one of the three is a conf error with its line."""
        conf = os.path.join(self.workdir, "bad.conf")
        with open(conf, "w") as f:
            f.write('concurrency = 1;\ncontainment = "jail";\n')
        p = subprocess.run([binary("cogworkerd"), "-c", conf, "--check"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 2, p.stdout)
        self.assertIn("%s:2: containment must be one of: auto, cgroup, process-group" % conf,
                      p.stdout)


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: MIT
"""cogworkerd under a real systemd (issue 17): the package installed in a container booted
by systemd as PID 1 (tests/integration/syskit.py), with the container's own redis-server,
and the unit as shipped driven with systemctl, kill and cogworkerctl, as an operator would.

- start: `systemctl start` returns only once the first heartbeat is in Redis (the process
  is listed the moment it returns), and while Redis is down it keeps waiting (activating)
  until Redis is back.
- reload: a broken conf fails `systemctl reload` (ExecReload's --check, file:line in the
  journal), no HUP reaches the daemon, which runs on with the old conf; a good conf reloads.
- stop: a short job finishes, a long one is stopped and requeued, well within
  TimeoutStopSec, with result "success".
- kill -9 of the daemon: systemd kills its handlers (the control group), restarts it
  (Restart=on-failure, RestartSec as shipped) and the restarted daemon recovers the job.
- SIGSTOP: the watchdog (WatchdogSec=3 in a drop-in) kills the frozen daemon, systemd
  restarts it.
- `cogworkerctl processes stop`: exit 0, the unit stays stopped (no restart).
- a handler's grandchild that left its session (setsid) is killed at stop: the control
  group, not the process group, bounds what a stop leaves.
- containment under systemd (CT-1, doc/design.md "Containment"): the unit's Delegate=yes
  and ReadWritePaths= give the daemon its cgroup; it says so at start, sits in the leaf
  "daemon", and a job's setsid'd grandchild is gone when the job is done.
- confinement (CN-11): as the service user, through a user namespace per job, the unit's
  sandbox allows network = false, private_tmp and read_only; a writable path the unit
  itself keeps read-only fails the reload's --check.

Each test prints its timings (run.py -v shows them). The conf uses short intervals
(heartbeat 1 s, shutdown_timeout 3 s); everything else is the unit as installed.

Run: python3 tests/integration/run.py test_systemd     (or make check-systemd)
"""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import wait_for  # noqa: E402
from syskit import Container, prepare  # noqa: E402

UNIT = "cogworkerd"
CONF_PATH = "/etc/cogworkerd/cogworkerd.conf"
DROPIN = "/etc/systemd/system/cogworkerd.service.d/test.conf"
SHUTDOWN_TIMEOUT = 3
REDIS_URL = "redis://127.0.0.1:6379/0"
CTL_CONF = "/root/ctl.conf"
CONF = """# The conf of test_systemd: short intervals, the container's redis-server.
redis = { url = "%s"; connect_timeout = 1.0; command_timeout = 2.0; };
concurrency = 3;
queues = [ "default" ];
shutdown_timeout = %d;
poll_interval = 1;
heartbeat_interval = 1;
process_ttl = 3;
orphan_threshold = 4;
orphan_check_interval = 1;
handlers = (
  { class = "Quick"; command = [ "/bin/true" ]; },
  { class = "Sleep"; command = [ "/bin/sleep" ]; args_as_argv = true; },
  # A grandchild in a session of its own (out of reach of the handler's process group),
  # then a long job.
  { class = "Escape";
    command = [ "/bin/sh", "-c",
                "setsid /bin/sleep 3333 </dev/null >/dev/null 2>&1 & exec /bin/sleep 60" ]; },
  # The same grandchild (once it has left the group), then success at once (CT-1).
  { class = "EscapeDone";
    command = [ "/bin/sh", "-c",
                "setsid /bin/sh -c 'touch /tmp/ct1; exec /bin/sleep 3335' </dev/null "
                ">/dev/null 2>&1 & while [ ! -e /tmp/ct1 ]; do sleep 0.02; done" ]; }
);
""" % (REDIS_URL, SHUTDOWN_TIMEOUT)


class SystemdTest(unittest.TestCase):
    timings = []

    @classmethod
    def setUpClass(cls):
        deb, root = prepare(cls)
        cls.c = Container(root, debdir=os.path.dirname(deb))
        cls.c.start()
        try:
            cls.c.install(os.path.basename(deb))
            cls.c.write(CTL_CONF, 'redis = { url = "%s"; };\n' % REDIS_URL)
        except BaseException:
            cls.c.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        cls.c.stop()
        print("\ntimings (s):\n  " + "\n  ".join(cls.timings), flush=True)

    def setUp(self):
        c = self.c
        c.run("systemctl", "stop", UNIT)
        c.run("systemctl", "reset-failed", UNIT, check=False)  # also the start limit
        if c.run("rm", "-v", "-f", DROPIN).stdout:
            c.run("systemctl", "daemon-reload")
        c.run("systemctl", "start", "redis-server")
        c.run("redis-cli", "FLUSHALL")
        c.write(CONF_PATH, CONF)

    def tearDown(self):
        self.c.run("systemctl", "stop", UNIT, check=False)

    # -- helpers ------------------------------------------------------------------------

    def timing(self, what, seconds):
        self.timings.append("%-62s %6.2f" % (what, seconds))

    def ctl(self, *args):
        """cogworkerctl --json ARGS, on a conf of its own (a test breaks the daemon's)."""
        return json.loads(self.c.run("cogworkerctl", "-c", CTL_CONF, "--json", *args).stdout)

    def push(self, cls, *args):
        return self.ctl("push", cls, *args)["jid"]

    def jids(self, where):
        return {e["jid"]: e for e in self.ctl("jobs", "list", "--set", where)}

    def processed(self):
        return self.ctl("stats")["processed"]

    def state(self, *props):
        return self.c.show(UNIT, *(props or ("ActiveState", "SubState", "MainPID",
                                             "NRestarts", "Result")))

    def main_pid(self):
        return int(self.state("MainPID")["MainPID"])

    def seconds(self, prop):
        """A duration property (e.g. TimeoutStopUSec) in seconds."""
        span = self.c.run("systemctl", "show", UNIT, "-P", prop).stdout.strip()
        value = self.c.run("systemd-analyze", "timespan", span).stdout
        return int(value.split("μs:")[1].split()[0]) / 1e6

    def pgrep(self, pattern):
        out = self.c.run("pgrep", "-f", "-x", pattern, check=False).stdout
        return [int(p) for p in out.split()]

    def start(self):
        t = time.monotonic()
        self.c.run("systemctl", "start", UNIT, timeout=120)
        return time.monotonic() - t

    def running_on(self, jid, pid):
        """jid runs on the process whose pid is `pid` (a dead process's entry for the
        same jid may still be listed beside it)."""
        return any(e["jid"] == jid and e["process"].split(":")[1:2] == [str(pid)]
                   for e in self.ctl("jobs", "list", "--set", "running"))

    # -- scenarios ----------------------------------------------------------------------

    def test_start_returns_after_the_first_heartbeat(self):
        took = self.start()
        self.timing("start, Redis up: systemctl start returned after", took)
        procs = self.ctl("processes")
        self.assertEqual([p["pid"] for p in procs], [self.main_pid()],
                         "the process is in Redis when systemctl start returns")

        self.c.run("systemctl", "stop", UNIT, "redis-server")
        t0 = time.monotonic()
        starter = subprocess.Popen(["nsenter", "-t", str(self.c.leader), "-a", "systemctl",
                                    "start", UNIT], stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        try:
            time.sleep(3)
            self.assertIsNone(starter.poll(), "systemctl start returned with Redis down")
            st = self.state()
            self.assertEqual((st["ActiveState"], st["SubState"]), ("activating", "start"))
            t1 = time.monotonic()
            self.c.run("systemctl", "start", "redis-server")
            out, _ = starter.communicate(timeout=60)
        finally:
            if starter.poll() is None:
                starter.kill()
        t2 = time.monotonic()
        self.assertEqual(starter.returncode, 0, out)
        self.assertEqual([p["pid"] for p in self.ctl("processes")], [self.main_pid()])
        self.assertEqual(self.state()["ActiveState"], "active")
        self.timing("start, Redis down: systemctl start still waiting after", t1 - t0)
        self.timing("start, Redis down: returned after redis-server started", t2 - t1)

    def test_reload_with_a_broken_conf_fails_and_keeps_the_old_one(self):
        self.start()
        pid = self.main_pid()
        cursor = self.c.journal_cursor()
        lines = CONF.count("\n")
        self.c.write(CONF_PATH, CONF + "no_such_setting = 1;\n")
        t = time.monotonic()
        res = self.c.run("systemctl", "reload", UNIT, check=False)
        self.timing("reload, broken conf: systemctl reload failed after",
                    time.monotonic() - t)
        self.assertNotEqual(res.returncode, 0, "a reload with a broken conf succeeded")
        where = "%s:%d" % (CONF_PATH, lines + 1)
        journal = wait_for(lambda: (lambda j: j if where in j else None)(
            self.c.journal(UNIT, cursor)), timeout=10, message="file:line in the journal")
        # The daemon logs on its own meanwhile (beats, the first orphan check): what a HUP
        # would have made it say is a "reload" line of its own.
        mine = [l for l in journal.splitlines() if "cogworkerd[%d]" % pid in l]
        self.assertFalse([l for l in mine if "reload" in l.lower()], "the daemon got a HUP")
        st = self.state()
        self.assertEqual((st["ActiveState"], int(st["MainPID"])), ("active", pid))
        # The old conf is in force: its classes run, the daemon's own check agrees.
        before = self.processed()
        self.push("Quick")
        wait_for(lambda: self.processed() == before + 1, timeout=10, message="Quick done")

        # A good conf does reload (the HUP reaches the daemon) and adds a class.
        self.c.write(CONF_PATH, CONF.replace(
            '  { class = "Quick";',
            '  { class = "Added"; command = [ "/bin/true" ]; },\n  { class = "Quick";'))
        t = time.monotonic()
        self.c.run("systemctl", "reload", UNIT)
        self.timing("reload, good conf: systemctl reload returned after",
                    time.monotonic() - t)
        self.push("Added")
        wait_for(lambda: self.processed() == before + 2, timeout=10, message="Added done")
        self.assertEqual(self.main_pid(), pid)

    def test_stop_drains_and_requeues_within_timeout_stop(self):
        self.start()
        short = self.push("Sleep", "1.5")
        long = self.push("Sleep", "60")
        wait_for(lambda: {short, long} <= set(self.jids("running")), timeout=10,
                 message="both jobs running")
        t = time.monotonic()
        self.c.run("systemctl", "stop", UNIT, timeout=120)
        took = time.monotonic() - t
        self.timing("stop, one 1.5 s and one 60 s job: systemctl stop took", took)
        self.assertLess(took, self.seconds("TimeoutStopUSec"))
        self.assertLess(took, SHUTDOWN_TIMEOUT + 10)
        st = self.state()
        self.assertEqual((st["ActiveState"], st["Result"]), ("inactive", "success"))
        self.assertEqual(self.processed(), 1, "the short job finished during the drain")
        self.assertIn(long, self.jids("queued"), "the long job was requeued")
        self.assertEqual(self.jids("running"), {})
        self.assertEqual(self.pgrep("/bin/sleep 60"), [])

    def test_kill_9_restarts_and_recovers_the_jobs(self):
        self.start()
        old = self.main_pid()
        jid = self.push("Sleep", "60")
        wait_for(lambda: self.running_on(jid, old), timeout=10, message="job running")
        t0 = time.monotonic()
        self.c.run("kill", "-9", str(old))
        # The daemon's reaper kills its handlers, systemd what is left of the unit.
        wait_for(lambda: self.pgrep("/bin/sleep 60") == [], timeout=10,
                 message="the dead daemon's handler killed")
        t_handler = time.monotonic() - t0
        new = wait_for(lambda: (lambda s: int(s["MainPID"]) if s["ActiveState"] == "active"
                                and int(s["MainPID"]) not in (0, old) else None)(self.state()),
                       timeout=30, interval=0.1, message="the restarted daemon")
        t_restart = time.monotonic() - t0
        self.assertEqual(self.state()["NRestarts"], "1")
        wait_for(lambda: self.running_on(jid, new), timeout=30, interval=0.1,
                 message="the job running again on the restarted daemon")
        t_job = time.monotonic() - t0
        self.assertEqual(len(self.pgrep("/bin/sleep 60")), 1)
        restart_sec = self.seconds("RestartUSec")
        self.assertGreaterEqual(t_restart, restart_sec - 0.5)
        self.timing("kill -9: its handler gone after", t_handler)
        self.timing("kill -9: restarted (RestartSec=%g) after" % restart_sec, t_restart)
        self.timing("kill -9: its job running again after", t_job)

    def test_watchdog_kills_a_frozen_daemon_and_restarts_it(self):
        self.c.write(DROPIN, "[Service]\nWatchdogSec=3\n")
        self.c.run("systemctl", "daemon-reload")
        self.start()
        old = self.main_pid()
        time.sleep(1.5)  # a few WATCHDOG=1 first: the watchdog is fed, then it starves
        self.assertEqual(self.main_pid(), old)
        cursor = self.c.journal_cursor()
        t0 = time.monotonic()
        self.c.run("kill", "-STOP", str(old))
        wait_for(lambda: self.state()["Result"] == "watchdog", timeout=15, interval=0.1,
                 message="the watchdog firing")
        t_fired = time.monotonic() - t0
        wait_for(lambda: self.c.run("test", "-d", "/proc/%d" % old,
                                    check=False).returncode != 0,
                 timeout=15, message="the frozen daemon gone")
        t_gone = time.monotonic() - t0
        new = wait_for(lambda: (lambda s: int(s["MainPID"]) if s["ActiveState"] == "active"
                                and int(s["MainPID"]) not in (0, old) else None)(self.state()),
                       timeout=30, interval=0.1, message="the restarted daemon")
        t_restart = time.monotonic() - t0
        self.assertNotEqual(new, old)
        self.assertIn("Watchdog timeout", self.c.journal(UNIT, cursor))
        self.timing("SIGSTOP, WatchdogSec=3: watchdog fired after", t_fired)
        self.timing("SIGSTOP, WatchdogSec=3: frozen daemon gone after", t_gone)
        self.timing("SIGSTOP, WatchdogSec=3: restarted after", t_restart)

    def test_remote_stop_ends_it_without_a_restart(self):
        self.start()
        pid = self.main_pid()
        ident = [p["identity"] for p in self.ctl("processes")]
        t = time.monotonic()
        self.assertEqual([r["received"] for r in self.ctl("processes", "stop", *ident)],
                         [True])
        wait_for(lambda: self.state()["ActiveState"] == "inactive", timeout=20,
                 interval=0.1, message="the unit stopped")
        self.timing("cogworkerctl processes stop: unit inactive after", time.monotonic() - t)
        st = self.state("Result", "SubState", "ExecMainStatus", "ExecMainPID")
        self.assertEqual((st["Result"], st["SubState"], st["ExecMainStatus"]),
                         ("success", "dead", "0"))
        self.assertEqual(int(st["ExecMainPID"]), pid)
        # Past RestartSec: still stopped, nothing restarted.
        time.sleep(self.seconds("RestartUSec") + 1)
        st = self.state()
        self.assertEqual((st["ActiveState"], st["NRestarts"]), ("inactive", "0"))

    def test_stop_kills_grandchildren_that_left_the_process_group(self):
        self.start()
        jid = self.push("Escape")
        grandchild = wait_for(lambda: self.pgrep("/bin/sleep 3333"), timeout=10,
                              message="the setsid grandchild")[0]
        handler = wait_for(lambda: self.pgrep("/bin/sleep 60"), timeout=10)[0]
        ps = self.c.run("ps", "-o", "sid=,pgid=", "-p", "%d,%d" % (handler, grandchild)
                        ).stdout.split()
        self.assertNotEqual(ps[0:2], ps[2:4], "the grandchild left the handler's session")
        cgroup = self.c.run("cat", "/proc/%d/cgroup" % grandchild).stdout
        self.assertIn("/system.slice/cogworkerd.service", cgroup)
        t = time.monotonic()
        self.c.run("systemctl", "stop", UNIT, timeout=120)
        took = time.monotonic() - t
        self.timing("stop, handler with a setsid grandchild: systemctl stop took", took)
        self.assertEqual(self.pgrep("/bin/sleep 3333"), [], "the grandchild outlived stop")
        self.assertEqual(self.pgrep("/bin/sleep 60"), [])
        self.assertLess(took, SHUTDOWN_TIMEOUT + 10, "stop waited for TimeoutStopSec")
        self.assertEqual(self.state()["Result"], "success")
        self.assertIn(jid, self.jids("queued"))

    def test_ct1_containment_in_the_delegated_unit(self):
        self.start()
        log = self.c.run("journalctl", "-u", UNIT, "-o", "cat", "--no-pager").stdout
        # /sys/fs/cgroup on a pure cgroup v2 host, /sys/fs/cgroup/unified on a hybrid one
        self.assertRegex(log, r"containment: cgroup v2, jobs in /sys/fs/cgroup(/unified)?"
                              r"/system\.slice/cogworkerd\.service/cogworkerd\.\d+\.\d+ ")
        self.assertIn("(delegated by systemd)", log)
        own = self.c.run("cat", "/proc/%d/cgroup" % self.main_pid()).stdout
        self.assertIn("0::/system.slice/cogworkerd.service/daemon", own)
        jid = self.push("EscapeDone")
        t = time.monotonic()
        journal = lambda: self.c.run("journalctl", "-u", UNIT, "-o", "cat",  # noqa: E731
                                     "--no-pager").stdout
        wait_for(lambda: "done: EscapeDone jid=%s" % jid in journal(),
                 timeout=15, message="the job done")
        wait_for(lambda: not self.pgrep("/bin/sleep 3335"), timeout=2,
                 message="the escaped grandchild gone within 2 s of done")
        self.timing("containment: escaped grandchild gone after done", time.monotonic() - t)

    def test_cn11_confinement_under_the_unit_as_shipped(self):
        out = "/var/lib/cogworkerd/out"
        confined = """
  { class = "Net"; network = false;
    command = [ "/bin/sh", "-c", "redis-cli -h 127.0.0.1 -p 6379 ping" ]; },
  { class = "Tmp"; private_tmp = true;
    command = [ "/bin/sh", "-c", "echo tmp:$(ls -A /tmp); echo x > /tmp/a && echo wrote" ]; },
  { class = "Ro"; read_only = true; writable_paths = [ "%s" ]; no_new_privileges = true;
    command = [ "/bin/sh", "-c",
                "echo y > %s/f && echo out-ok; echo z > /var/lib/cogworkerd/x || echo state-refused" ]; },
""" % (out, out)
        conf = CONF.replace("handlers = (\n", "handlers = (\n" + confined, 1)
        self.c.write(CONF_PATH, conf)
        self.c.run("install", "-d", "-o", "cogworker", "-g", "cogworker", "/var/lib/cogworkerd",
                   out)
        cursor = self.c.journal_cursor()
        self.start()
        jids = {cls: self.push(cls) for cls in ("Net", "Tmp", "Ro")}

        def settled():
            log = self.c.journal(UNIT, cursor)
            return log if all(("done: %s jid=%s" % (c, j)) in log or
                              ("fail: %s jid=%s" % (c, j)) in log
                              for c, j in jids.items()) else None
        log = wait_for(settled, timeout=20, message="the three jobs settled")
        self.assertIn("fail: Net jid=%s" % jids["Net"], log)
        self.assertIn("jid=%s stderr: Could not connect to Redis at 127.0.0.1:6379"
                      % jids["Net"], log)
        self.assertIn("jid=%s stdout: tmp:\n" % jids["Tmp"], log + "\n")
        self.assertIn("done: Tmp jid=%s" % jids["Tmp"], log)
        self.assertIn("jid=%s stdout: out-ok" % jids["Ro"], log)
        self.assertIn("jid=%s stdout: state-refused" % jids["Ro"], log)
        self.assertEqual(self.c.run("cat", out + "/f").stdout, "y\n")
        self.c.run("test", "!", "-e", "/var/lib/cogworkerd/x")
        # /srv is read-only for the whole service (ProtectSystem=strict): the reload's
        # --check refuses it as a writable path, and the daemon runs on.
        self.c.run("install", "-d", "/srv/out")
        self.c.write(CONF_PATH, conf.replace('"%s"' % out, '"/srv/out"'))
        cursor = self.c.journal_cursor()
        res = self.c.run("systemctl", "reload", UNIT, check=False)
        self.assertNotEqual(res.returncode, 0)
        self.assertIn("writable path /srv/out: read-only for the daemon itself",
                      self.c.journal(UNIT, cursor))
        self.assertEqual(self.state()["ActiveState"], "active")


if __name__ == "__main__":
    unittest.main()

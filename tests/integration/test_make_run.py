# SPDX-License-Identifier: MIT
"""RUN — `make run` (tools/run.sh) as a newcomer uses it: the daemon on conf/dev.conf with
its example handlers and a private redis-server; a second `make run` in the same checkout
refuses while the first runs, a server left behind by a killed run is reused, and none is
left running once a run ends; Ctrl-C drains for dev.conf's 5 s, a second one stops the jobs
at once, and what was requeued is kept for the next run (doc/behaviours.md group RUN).

Each test copies conf/ and tools/run.sh into a temp dir standing for the checkout
(run.sh keeps its state in ./build/run/), and runs the real binaries of the build.

Run: python3 tests/integration/run.py test_make_run
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import redis  # noqa: E402
from harness import REPO, RedisServer, build_dir, free_port, wait_for  # noqa: E402


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

    def start(self, *conf):
        """tools/run.sh in its own session (like a terminal's foreground job); conf: make
        run's CONF."""
        log = os.path.join(self.top, "run-%d.log" % len(self.runs))
        out = open(log, "wb")
        self.addCleanup(out.close)
        p = subprocess.Popen(["sh", "tools/run.sh", build_dir()] + list(conf), cwd=self.top,
                             env=self.env,
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
        # a clean stop is no error: make must not say "Error 130"
        self.assertEqual(third.wait(timeout=40), 0)
        self.assertIn("stopped", self.text(log3))
        wait_for(lambda: not alive(redis_pid), timeout=10, message="redis-server stopped")
        self.assertFalse(os.path.exists(os.path.join(self.rundir, "run.pid")))

    def test_run6_ctrl_c_twice_requeues_and_the_next_run_runs_the_job(self):
        first, log = self.start()
        self.wait_started(log)
        self.assertIn("run: Ctrl-C stops it: running jobs get 5s to finish (shutdown_timeout "
                      "in conf/dev.conf), a second Ctrl-C stops them at once", self.text(log))
        redis_pid = self.pid("redis.pid")
        jid = self.ctl("push", "Sleepy", "8").stdout.strip()
        # Running for a second, so well past its setsid: a Ctrl-C to make run's process
        # group no longer reaches the handler itself.
        wait_for(lambda: "slept 1 of 8s" in self.ctl("jobs", "show", jid).stdout, timeout=10,
                 message="Sleepy reported its progress")
        os.killpg(first.pid, signal.SIGINT)                 # Ctrl-C: a 5 s drain...
        wait_for(lambda: "stopping: waiting up to 5s for 1 running job(s)" in self.text(log),
                 timeout=10)
        t0 = time.monotonic()
        os.killpg(first.pid, signal.SIGINT)                 # ...cut short by a second one
        first.wait(timeout=20)
        self.assertLess(time.monotonic() - t0, 20)
        text = self.text(log)
        self.assertIn("stopping: stopped again: stopping the handlers of 1 running job(s) now",
                      text)
        self.assertNotIn("still running after", text)      # the drain did not run out
        self.assertNotIn("done: Sleepy jid=%s" % jid, text)
        self.assertIn("requeued 1 unfinished job(s)", text)
        wait_for(lambda: not alive(redis_pid), timeout=10, message="redis-server stopped")

        # What the private server wrote to build/run/ has the job back on its queue...
        saved = tempfile.mkdtemp(prefix="cw-makerun-aof-")
        self.addCleanup(shutil.rmtree, saved, True)
        shutil.copytree(os.path.join(self.rundir, "appendonlydir"),
                        os.path.join(saved, "appendonlydir"))
        srv = RedisServer(extra_args=["--dir", saved, "--appendonly", "yes"])
        self.addCleanup(srv.stop)
        queued = [json.loads(m) for m in srv.client().lrange("cogworker:queue:default", 0, -1)]
        self.assertEqual([(j["jid"], j["class"], j["args"]) for j in queued],
                         [(jid, "Sleepy", ["8"])])
        srv.stop()

        # ...and the next make run runs it, to the end.
        second, log2 = self.start()
        self.wait_started(log2)
        wait_for(lambda: "done: Sleepy jid=%s" % jid in self.text(log2), timeout=30,
                 message="the requeued job ran in the next make run")
        os.killpg(second.pid, signal.SIGINT)
        second.wait(timeout=20)

    def test_run7_a_conf_of_ones_own(self):
        # make run CONF=FILE: a missing file is named, nothing started
        missing = subprocess.run(["sh", "tools/run.sh", build_dir(), "my.conf"], cwd=self.top,
                                 env=self.env, capture_output=True, text=True, timeout=20)
        self.assertEqual(missing.returncode, 2, missing)
        self.assertIn("run: no conf file my.conf (make run CONF=path/to/your.conf)",
                      missing.stderr)
        self.assertIsNone(self.pid("redis.pid"))
        # a conf of one's own: its handler runs, its shutdown_timeout is the one announced
        with open(os.path.join(self.top, "conf", "dev.conf")) as f:
            dev = f.read()
        mine = dev.replace("shutdown_timeout = 5;", "shutdown_timeout = 3;").replace(
            'handlers = (', 'handlers = (\n  { class = "Mine"; command = [ "example-echo" ]; '
            'args_as_argv = true; },')
        self.assertNotEqual(mine, dev)
        with open(os.path.join(self.top, "my.conf"), "w") as f:
            f.write(mine)
        p, log = self.start("my.conf")
        self.wait_started(log)
        self.assertIn("running jobs get 3s to finish (shutdown_timeout in my.conf)",
                      self.text(log))
        jid = self.ctl("push", "Mine", "hi").stdout.strip()
        wait_for(lambda: "done: Mine jid=%s" % jid in self.text(log), timeout=10,
                 message="the handler of my.conf ran")
        os.killpg(p.pid, signal.SIGINT)
        self.assertEqual(p.wait(timeout=40), 0)

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


# --- tools/deps.sh: the dependency step of make run, make check and the others ------------
#
# A test cannot install Debian packages for real, nor stop the host's services: deps.sh
# runs here with a PATH whose dpkg-query, apt-get, sudo, systemctl, invoke-rc.d and
# update-rc.d are shims. They keep a list of "installed" packages, record every call, and
# act out what the real ones do to services: installing redis-server or redis-sentinel
# starts a real redis-server (the packaged service, on a private port), and stopping the
# service of that name (systemctl disable --now, invoke-rc.d stop) kills the process
# registered under it. The host's own Redis is a real redis-server the test starts and
# registers as "redis-server" before the call, so a deps.sh that stopped what it did not
# install would kill it, and the test would see it gone.

SHIM_COMMON = r"""#!/bin/sh
state=$SHIM_STATE
printf '%s\n' "$(basename "$0") $*" >>"$state/calls"
stop() {    # stop the service $1 (with or without .service): kill what is registered
	n=${1%.service}
	[ -f "$state/svc/$n.pid" ] && kill "$(cat "$state/svc/$n.pid")" 2>/dev/null
	rm -f "$state/svc/$n.pid"
}
"""

SHIMS = {
    "sudo": 'exec "$@"\n',
    "dpkg-query": r"""pkg=$(eval echo \${$#})
if grep -qx "$pkg" "$state/installed"; then printf 'install ok installed'; exit 0; fi
echo "dpkg-query: no packages found matching $pkg" >&2
exit 1
""",
    "apt-get": r"""case " $* " in
*" update "*)
	n=$(cat "$state/lock_busy" 2>/dev/null || echo 0)
	if [ "$n" -gt 0 ]; then
		echo $((n - 1)) >"$state/lock_busy"
		echo "E: Could not get lock /var/lib/apt/lists/lock. It is held by process 4242 (apt-get)" >&2
		echo "E: Unable to lock directory /var/lib/apt/lists/" >&2
		exit 100
	fi
	exit 0 ;;
esac
skip=0; verb=""
for a; do
	if [ $skip = 1 ]; then skip=0; continue; fi
	case $a in
	-o) skip=1 ;;
	-*) ;;
	*) if [ -z "$verb" ]; then verb=$a; else
		echo "$a" >>"$state/installed"
		# the package's postinst starts and enables its service
		port=$(cat "$state/port.$a" 2>/dev/null) || continue
		redis-server --port "$port" --save '' --appendonly no --daemonize yes \
			--pidfile "$state/svc/$a.pid" --logfile "$state/$a.log" --dir "$state"
		i=0; while [ ! -s "$state/svc/$a.pid" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done
	fi ;;
	esac
done
""",
    "systemctl": r"""case " $* " in *" stop "*|*" --now "*)
	for a; do case $a in -*|stop|disable|enable|start|restart) ;; *) stop "$a" ;; esac; done ;;
esac
""",
    "invoke-rc.d": '[ "$2" = stop ] && stop "$1"\nexit 0\n',
    "update-rc.d": "exit 0\n",
}

RUN_SET = {"build-essential", "pkg-config", "libhiredis-dev", "libcjson-dev", "libconfig-dev",
           "libsystemd-dev", "libmicrohttpd-dev", "libcrypt-dev", "libssl-dev", "redis-server",
           "redis-tools"}
TEST_ONLY = {"valgrind", "cppcheck", "gnuplot-nox", "man-db", "python3-prometheus-client",
             "tmux", "check", "redis-sentinel", "python3-redis", "ruby", "nodejs", "chromium",
             "chromium-driver", "python3-selenium", "openssl", "curl"}


class Deps(unittest.TestCase):

    def setUp(self):
        self.state = tempfile.mkdtemp(prefix="cw-deps-")
        self.addCleanup(shutil.rmtree, self.state, True)
        self.bin = os.path.join(self.state, "bin")
        os.makedirs(self.bin)
        os.makedirs(os.path.join(self.state, "svc"))
        for name, body in SHIMS.items():
            path = os.path.join(self.bin, name)
            with open(path, "w") as f:
                f.write(SHIM_COMMON + body)
            os.chmod(path, 0o755)
        self.installed([])
        self.addCleanup(self.stop_services)

    def stop_services(self):
        svc = os.path.join(self.state, "svc")
        for name in os.listdir(svc):
            try:
                with open(os.path.join(svc, name)) as f:
                    os.kill(int(f.read()), signal.SIGKILL)
            except (OSError, ValueError):
                pass

    def installed(self, pkgs):
        with open(os.path.join(self.state, "installed"), "w") as f:
            f.write("".join(p + "\n" for p in pkgs))

    def host_redis(self):
        """The host's own Redis: packaged, running, registered as the redis-server service."""
        srv = RedisServer()
        self.addCleanup(srv.stop)
        with open(os.path.join(self.state, "svc", "redis-server.pid"), "w") as f:
            f.write("%d\n" % srv.pid)
        return srv

    def packaged_service_port(self, pkg):
        """Installing pkg will start its service on this port."""
        port = free_port()
        with open(os.path.join(self.state, "port." + pkg), "w") as f:
            f.write("%d\n" % port)
        return port

    def deps(self, *argv, env=None):
        """tools/deps.sh ARGV... (ARGV as a make target gives it) with the shims first."""
        e = dict(os.environ, SHIM_STATE=self.state, PATH=self.bin + ":" + os.environ["PATH"])
        e.update(env or {})
        return subprocess.run(["sh", os.path.join(REPO, "tools", "deps.sh")] + list(argv),
                              cwd=REPO, env=e, capture_output=True, text=True, timeout=60)

    def calls(self):
        try:
            with open(os.path.join(self.state, "calls")) as f:
                return f.read().splitlines()
        except FileNotFoundError:
            return []

    def apt_installs(self):
        """The packages of every apt-get install call."""
        pkgs = set()
        for line in self.calls():
            words = line.split()
            if words[0] == "apt-get" and "install" in words:
                rest = words[words.index("install") + 1:]
                pkgs.update(w for w in rest if not w.startswith("-"))
        return pkgs

    def make_target_deps(self, target):
        """The deps.sh arguments of make TARGET (make -n prints its recipe lines)."""
        out = subprocess.run(["make", "-n", target], cwd=REPO, capture_output=True,
                             text=True, timeout=60).stdout
        for line in out.splitlines():
            if line.startswith("sh tools/deps.sh"):
                return line.split()[2:]
        self.fail("make -n %s runs no tools/deps.sh:\n%s" % (target, out))

    def answers(self, port):
        try:
            return redis.Redis(port=port, socket_timeout=1).ping()
        except redis.ConnectionError:
            return False

    def test_run3_make_run_leaves_the_hosts_redis_running_and_installs_no_test_tools(self):
        self.installed(["redis-server", "redis-tools"])
        host = self.host_redis()
        res = self.deps(*self.make_target_deps("run"))
        self.assertEqual(res.returncode, 0, res)
        self.assertTrue(host.client().ping())                   # still running
        self.assertEqual([c for c in self.calls() if "redis" in c and "apt-get" not in c
                          and "dpkg-query" not in c], [])       # never asked to stop
        self.assertIn("deps: redis-server was installed before this call: its service is "
                      "left as it was", res.stdout)
        got = self.apt_installs()
        self.assertEqual(got, RUN_SET - {"redis-server", "redis-tools"})
        self.assertEqual(got & TEST_ONLY, set())

    def test_run4_only_the_services_this_call_installed_are_stopped(self):
        # make check's set on a host with its own redis-server but no redis-sentinel
        self.installed(["redis-server"])
        host = self.host_redis()
        sentinel_port = self.packaged_service_port("redis-sentinel")
        res = self.deps(*self.make_target_deps("check"))
        self.assertEqual(res.returncode, 0, res)
        self.assertTrue(host.client().ping())
        self.assertTrue(TEST_ONLY - {"redis-server"} <= self.apt_installs(), self.calls())
        self.assertIn("redis-sentinel", self.apt_installs())
        # the packaged sentinel service did start, and was stopped: nothing on its port
        self.assertIn("deps: stopped and disabled the redis-sentinel service, which this call "
                      "installed", res.stdout)
        self.assertTrue(any(c.startswith("apt-get") for c in self.calls()))
        wait_for(lambda: not self.answers(sentinel_port), timeout=10,
                 message="the packaged sentinel service stopped")
        self.assertNotIn("stopped and disabled the redis-server", res.stdout)
        self.assertTrue(host.client().ping())

        # On a fresh host, make run's own redis-server package is the one it stops
        host.stop()
        os.unlink(os.path.join(self.state, "svc", "redis-server.pid"))
        self.installed([])
        port = self.packaged_service_port("redis-server")
        res = self.deps("run")
        self.assertEqual(res.returncode, 0, res)
        self.assertIn("deps: stopped and disabled the redis-server service, which this call "
                      "installed", res.stdout)
        wait_for(lambda: not self.answers(port), timeout=10,
                 message="the packaged redis-server service stopped")

        # Everything there: nothing is installed, nothing is said, no service is touched
        self.installed(RUN_SET | TEST_ONLY | {"python3", "procps", "systemd"})
        before = len(self.calls())
        res = self.deps("test")
        self.assertEqual((res.returncode, res.stdout), (0, ""), res)
        self.assertEqual([c.split()[0] for c in self.calls()[before:]],
                         ["dpkg-query"] * len(self.calls()[before:]))

    def test_run5_another_apt_holding_the_lock_is_waited_for(self):
        with open(os.path.join(self.state, "lock_busy"), "w") as f:
            f.write("2\n")                                      # two refusals, then free
        res = self.deps("run", env={"DEPS_LOCK_TIMEOUT": "30"})
        self.assertEqual(res.returncode, 0, res)
        self.assertIn("deps: another apt is running (Could not get lock "
                      "/var/lib/apt/lists/lock. It is held by process 4242 (apt-get)); "
                      "waiting for it, up to 30s", res.stdout)
        updates = [c for c in self.calls() if c.startswith("apt-get") and "update" in c]
        self.assertEqual(len(updates), 3)
        installs = [c for c in self.calls() if c.startswith("apt-get") and "install" in c]
        self.assertEqual(len(installs), 1)
        self.assertIn("-o DPkg::Lock::Timeout=30 install", installs[0])   # dpkg's lock: apt waits

        # a lock that stays held: a clear failure once the time is up, nothing installed
        with open(os.path.join(self.state, "lock_busy"), "w") as f:
            f.write("1000\n")
        self.installed([])
        before = len(self.calls())
        res = self.deps("run", env={"DEPS_LOCK_TIMEOUT": "2"})
        self.assertNotEqual(res.returncode, 0, res)
        self.assertIn("deps: gave up waiting for the apt lists lock after 2s", res.stderr)
        self.assertFalse([c for c in self.calls()[before:] if "install" in c.split()])


if __name__ == "__main__":
    unittest.main()

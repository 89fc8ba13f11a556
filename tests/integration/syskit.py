# SPDX-License-Identifier: MIT
"""A real systemd for the tests: a Debian tree booted by systemd as PID 1 in a
systemd-nspawn container, with the package installed from the .deb (issue 17).

    deb, root = prepare(self)            # make deb container-root, under a lock
    with Container(root, debdir=os.path.dirname(deb)) as c:
        c.install(os.path.basename(deb))
        c.run("systemctl", "start", "cogworkerd")

The tree (build/container/root, tools/container-root.sh) is booted with --volatile=overlay:
the container writes to a tmpfs over it, so every container starts from the same pristine
tree and leaves nothing in it. --private-network gives it a network namespace with only
loopback: its redis-server and its daemon see nothing of the host's ports, nor the host of
theirs. The host has no systemd of its own here (no machined, no host bus), so the
container is not registered (--register=no, --keep-unit) and commands reach it through
nsenter into the namespaces of its PID 1: they run inside as root, with the container's
file system, systemctl talking to the container's systemd.

A container is stopped with SIGTERM to systemd-nspawn (a clean poweroff inside; SIGTERM
to the container's systemd itself would only make it re-execute). nspawn runs in a session
of its own, so a timeout that kills the test's process group does not SIGKILL it (that
would leave the container running without it), and it gets SIGTERM when the test process
dies (PR_SET_PDEATHSIG), so no container outlives its test.

Skips happen only where nspawn cannot run at all here (not root, no namespaces, or
`systemd-nspawn ... /bin/true` itself fails), with the reason; a container that nspawn can
start but that does not boot is a failure.
"""

import ctypes
import fcntl
import os
import signal
import subprocess
import tempfile
import time
import unittest

from harness import REPO, wait_for

PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
ROOT = os.path.join(REPO, "build", "container", "root")
DEBDIR = os.path.join(REPO, "build", "deb")


def deb_version():
    """The package version, from the first line of debian/changelog."""
    with open(os.path.join(REPO, "debian", "changelog")) as f:
        first = f.readline()
    return first[first.index("(") + 1:first.index(")")]


def deb_path():
    arch = subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE,
                          text=True, check=True).stdout.strip()
    return os.path.join(DEBDIR, "cogworkerd_%s_%s.deb" % (deb_version(), arch))


def _nspawn_unavailable():
    """Why systemd-nspawn cannot run on this machine at all, or None."""
    if os.geteuid() != 0:
        return "systemd-nspawn needs root, and these tests run as uid %d" % os.geteuid()
    probe = subprocess.run(["unshare", "--mount", "--pid", "--net", "--uts", "--ipc",
                            "--fork", "--mount-proc", "true"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if probe.returncode != 0:
        return "this machine refuses new namespaces: %s" % probe.stdout.strip()
    return None


# The lock is held shared while containers run on the tree and exclusively while make
# may rebuild it, so parallel test files build it once and never boot a half-made tree.
_lock = None


def prepare(case):
    """Build the package and the tree when stale (`make deb container-root`, the
    package's own unit-test run skipped: make check runs those), once per process.
    Returns (deb path, root). Skips `case` where nspawn cannot run here."""
    global _lock
    reason = _nspawn_unavailable()
    if reason:
        raise unittest.SkipTest(reason)
    if _lock is None:
        os.makedirs(os.path.join(REPO, "build"), exist_ok=True)
        lock = open(os.path.join(REPO, "build", ".container.lock"), "w")
        fcntl.flock(lock, fcntl.LOCK_EX)
        start = time.monotonic()
        # Twice at most: debootstrap fetches from the network, which may fail once.
        for attempt in range(2):
            made = subprocess.run(["make", "-s", "-C", REPO, "deb", "container-root"],
                                  env=dict(os.environ, DEB_BUILD_OPTIONS="nocheck"),
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                  timeout=1200)
            if made.returncode == 0:
                break
            print("syskit: make deb container-root failed (attempt %d):\n%s"
                  % (attempt + 1, made.stdout[-4000:]), flush=True)
        if made.returncode != 0:
            lock.close()
            # case may be the class (setUpClass): raise, not case.fail
            raise AssertionError("make deb container-root failed:\n" + made.stdout[-4000:])
        print("syskit: make deb container-root: %.1fs" % (time.monotonic() - start),
              flush=True)
        fcntl.flock(lock, fcntl.LOCK_SH)
        _lock = lock
    return deb_path(), ROOT


def _pdeathsig_term():
    """preexec_fn: SIGTERM to nspawn (a clean poweroff) when the test process dies."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Container:
    """One booted container on the tree `root`; `debdir` is bound read-only at /debs."""

    serial = 0

    def __init__(self, root, debdir=None, boot_timeout=90):
        Container.serial += 1
        self.root = root
        self.debdir = debdir
        self.boot_timeout = boot_timeout
        self.name = "cw-%d-%d" % (os.getpid(), Container.serial)
        self.proc = None
        self.leader = None
        self.boot_seconds = None

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def _nspawn_argv(self, *tail):
        argv = ["systemd-nspawn", "--quiet", "-D", self.root, "--volatile=overlay",
                "--register=no", "--keep-unit", "--private-network",
                "--machine=" + self.name]
        if self.debdir:
            argv.append("--bind-ro=%s:/debs" % self.debdir)
        return argv + list(tail)

    def start(self):
        self.log = tempfile.NamedTemporaryFile(prefix="nspawn-", suffix=".log")
        start = time.monotonic()
        self.proc = subprocess.Popen(self._nspawn_argv("--boot"), stdin=subprocess.DEVNULL,
                                     stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True, preexec_fn=_pdeathsig_term)
        try:
            self.leader = wait_for(self._find_leader, timeout=30, interval=0.05,
                                   message="the container's PID 1")
            state = wait_for(self._booted, timeout=self.boot_timeout, interval=0.1,
                             message="the container's systemd")
        except AssertionError:
            self._boot_failed()
            raise
        self.boot_seconds = time.monotonic() - start
        if state not in ("running", "degraded"):
            console = self.console()
            self._boot_failed()
            raise AssertionError("container did not boot (%r):\n%s" % (state, console))
        if state == "degraded":
            failed = self.run("systemctl", "--failed", "--no-legend", check=False).stdout
            print("syskit: container booted degraded:\n" + failed, flush=True)

    def _booted(self):
        """The system state once the boot is over, else None. Until the container's
        systemd listens, systemctl says "offline" (or nothing); then --wait returns once
        no start job is left."""
        state = self.run("systemctl", "is-system-running", "--wait", check=False,
                         timeout=self.boot_timeout).stdout.strip()
        return None if state in ("", "offline", "unknown") else state

    def _find_leader(self):
        if self.proc.poll() is not None:
            raise AssertionError("systemd-nspawn exited %d:\n%s"
                                 % (self.proc.returncode, self.console()))
        try:
            with open("/proc/%d/task/%d/children" % (self.proc.pid, self.proc.pid)) as f:
                kids = f.read().split()
        except FileNotFoundError:
            return None
        for kid in kids:
            try:
                with open("/proc/%s/comm" % kid) as f:
                    if f.read().strip() == "systemd":
                        return int(kid)
            except FileNotFoundError:
                pass
        return None

    def _boot_failed(self):
        """A boot that failed: skip when nspawn cannot run even /bin/true here (the
        machine's fault), else let the failure stand (ours)."""
        self.stop()
        probe = subprocess.run(self._nspawn_argv("/bin/true"), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=60)
        if probe.returncode != 0:
            raise unittest.SkipTest("systemd-nspawn cannot run a container here: "
                                    + probe.stdout.strip()[-1000:])

    def console(self):
        """The container's console output so far (the boot messages)."""
        with open(self.log.name, errors="replace") as f:
            return f.read()[-4000:]

    def stop(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                # PID 1 of the namespace killed: the kernel kills everything in it.
                if self.leader:
                    os.kill(self.leader, signal.SIGKILL)
                self.proc.wait(timeout=30)
        self.proc = None
        self.log.close()

    # -- commands inside --------------------------------------------------------------

    def run(self, *argv, input=None, check=True, timeout=60):
        """Run argv inside the container as root, with a clean environment; returns the
        CompletedProcess (text; stderr separate). check: fail on a non-zero exit."""
        cmd = ["nsenter", "-t", str(self.leader), "-a", "env", "-i", "PATH=" + PATH,
               "SYSTEMD_COLORS=0", "DEBIAN_FRONTEND=noninteractive"] + list(argv)
        res = subprocess.run(cmd, input=input, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, timeout=timeout)
        if check and res.returncode != 0:
            raise AssertionError("in the container, %s exited %d\nstdout: %s\nstderr: %s"
                                 % (" ".join(argv), res.returncode, res.stdout[-3000:],
                                    res.stderr[-3000:]))
        return res

    def sh(self, script, **kw):
        return self.run("/bin/sh", "-c", script, **kw)

    def write(self, path, text):
        """Write a file inside (an existing file keeps its owner and mode)."""
        self.run("/bin/sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "sh", path,
                 input=text)

    def install(self, debname):
        """apt-get install ./DEB from /debs (its dependencies are in the tree already:
        the container has no network)."""
        return self.run("apt-get", "install", "-y", "-q", "/debs/" + debname, timeout=120)

    def show(self, unit, *props):
        """systemctl show PROP... of unit as a dict."""
        argv = ["systemctl", "show", unit]
        for p in props:
            argv += ["-p", p]
        out = self.run(*argv).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def journal_cursor(self):
        out = self.run("journalctl", "-n", "0", "--show-cursor", "-q").stdout
        return out.strip().rpartition("cursor: ")[2]

    def journal(self, unit, cursor):
        """The unit's journal after `cursor`, as text (one line per message)."""
        return self.run("journalctl", "-q", "--no-pager", "-u", unit, "--after-cursor",
                        cursor, "-o", "short-precise").stdout

# SPDX-License-Identifier: MIT
"""CN — a handler's confinement (doc/behaviours.md §47; doc/design.md "Confinement"):
network = false, private_tmp, read_only with writable_paths, no_new_privileges, made by
the real kernel's namespaces (these tests run as root, and one daemon as nobody, through
a user namespace). Observed as a user would: what the job can reach, what it prints into
the daemon's log, what is left on the host, what --check says.

Run: python3 tests/integration/run.py test_confinement
"""

import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, build_dir, job, new_jid, wait_for  # noqa: E402
from runkit import DEAD, JobTestCase, loads, sh  # noqa: E402

# Connects to the test's own Redis (REDIS_PORT is in every handler's env), then to a
# server it starts itself on its own loopback; says which worked.
CONNECT = r'''
import os, socket, sys
try:
    socket.create_connection(("127.0.0.1", int(os.environ["REDIS_PORT"])), 2).close()
    print("redis reachable")
except OSError as e:
    print("redis unreachable: %s" % e)
    sys.exit(3)
'''

SELF_LOOPBACK = r'''
import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), 2); c.close()
print("own loopback works")
'''


# Under ThreadSanitizer the handler's child is a fork(), in which TSan starts its background
# thread again, and the kernel gives no user namespace to a threaded process (EINVAL): a
# daemon that is not root can't confine on that build (src/confine.c says so).
NEEDS_FORKLESS = unittest.skipIf(os.path.basename(build_dir()) == "tsan",
                                 "a daemon that is not root can't confine on a "
                                 "ThreadSanitizer build: its fork child is threaded")


def py(code):
    return ["/usr/bin/python3", "-c", code]


def nobody_ids():
    return 65534, 65534


class SharedDirCase(JobTestCase):

    def setUp(self):
        super().setUp()
        # The work dir is under /tmp (which private_tmp replaces) and private to root; this
        # one is neither, for writable paths, and for what nobody must reach. The build
        # dir, unless the checkout itself is under one of private_tmp's directories (CI's
        # clone may be in /tmp): then /run, root's tmpfs, which nobody can traverse.
        top = os.path.join(os.path.realpath(build_dir()), "cn-tests")
        if top.startswith(("/tmp/", "/var/tmp/", "/dev/shm/")):
            top = "/run/cw-cn-tests"
        os.makedirs(top, exist_ok=True)
        self.shared = tempfile.mkdtemp(dir=top)
        os.chmod(self.shared, 0o755)
        self.addCleanup(shutil.rmtree, self.shared, True)


class Confinement(SharedDirCase):

    def run_job(self, d, cls, retry=0, **extra):
        jid = new_jid()
        self.push(job(cls, jid=jid, retry=retry, **extra))
        line = wait_for(lambda: d.log_lines("done: %s jid=%s" % (cls, jid)) or
                        d.log_lines("fail: %s jid=%s" % (cls, jid)), timeout=15,
                        message="job %s settled" % jid)[0]
        return jid, line.startswith("done:") or " done: " in line

    def stdout_of(self, d, jid):
        return [l.split(" stdout: ", 1)[1] for l in d.log_lines("jid=%s stdout: " % jid)]

    def test_cn1_network_false_reaches_only_its_own_loopback(self):
        d = self.daemon(handlers=[
            {"class": "Off", "command": py(CONNECT), "network": False},
            {"class": "On", "command": py(CONNECT)},
            {"class": "Self", "command": py(SELF_LOOPBACK), "network": False}])
        jid, ok = self.run_job(d, "Off")
        self.assertFalse(ok, d.log()[-2000:])
        self.assertTrue(any(s.startswith("redis unreachable") for s in self.stdout_of(d, jid)),
                        d.log()[-2000:])
        dead = loads(self.wait_member(DEAD, jid=jid)[0])
        self.assertIn("exit status 3", dead["error_message"])
        jid, ok = self.run_job(d, "On")
        self.assertTrue(ok, d.log()[-2000:])
        self.assertEqual(self.stdout_of(d, jid), ["redis reachable"])
        jid, ok = self.run_job(d, "Self")
        self.assertTrue(ok, d.log()[-2000:])
        self.assertEqual(self.stdout_of(d, jid), ["own loopback works"])

    def test_cn2_private_tmp_is_empty_per_job_and_gone_after(self):
        # Each job: what /tmp and /var/tmp hold, then a file of its own in each.
        script = ('echo "tmp:$(ls -A /tmp | tr "\\n" " ")"; '
                  'echo "vartmp:$(ls -A /var/tmp | tr "\\n" " ")"; '
                  'echo secret > /tmp/cn2-$COGWORKER_JID && '
                  'echo secret > /var/tmp/cn2-$COGWORKER_JID && echo wrote')
        host_marker = "/tmp/cn2-host-%s" % new_jid()
        open(host_marker, "w").close()
        self.addCleanup(os.unlink, host_marker)
        d = self.daemon(handlers=[{"class": "T", "command": sh(script), "private_tmp": True}])
        jids = []
        for _ in range(2):
            jid, ok = self.run_job(d, "T")
            self.assertTrue(ok, d.log()[-2000:])
            jids.append(jid)
            self.assertEqual(self.stdout_of(d, jid), ["tmp:", "vartmp:", "wrote"])
        for jid in jids:
            self.assertFalse(os.path.exists("/tmp/cn2-" + jid))
            self.assertFalse(os.path.exists("/var/tmp/cn2-" + jid))

    def test_cn12_private_tmp_for_a_daemon_run_from_under_tmp(self):
        """A daemon whose own directory is under /tmp (a checkout in /tmp, as CI's may be):
        private_tmp hides it in the job's namespace, and the job keeps the directory it
        inherited instead of failing as 'chdir ?: No such file or directory'."""
        here = tempfile.mkdtemp(prefix="cw-cn12-", dir="/tmp")
        self.addCleanup(shutil.rmtree, here, True)
        with open(os.path.join(here, "marker"), "w") as f:
            f.write("mine\n")
        old = os.getcwd()
        os.chdir(here)
        try:
            d = self.daemon(handlers=[{"class": "T", "command": sh('cat marker; ls -A /tmp | '
                                                                   'wc -l'),
                                       "private_tmp": True}])
        finally:
            os.chdir(old)
        jid, ok = self.run_job(d, "T")
        self.assertTrue(ok, d.log()[-2000:])
        self.assertEqual(self.stdout_of(d, jid), ["mine", "0"])

    def test_cn3_read_only_but_writable_paths(self):
        out = self.path("out")
        os.mkdir(out)
        elsewhere = self.path("elsewhere")
        script = ('echo a > "$1/in" && echo "in ok"; '
                  'echo b > "$2" 2>/dev/null && echo "outside written" || echo "outside refused"; '
                  'echo c > /dev/null && echo "dev ok"')
        d = self.daemon(handlers=[{"class": "R", "command": sh(script, out, elsewhere),
                                   "read_only": True, "writable_paths": [out]},
                                  {"class": "W", "command": sh(script, out, elsewhere)}])
        jid, ok = self.run_job(d, "R")
        self.assertTrue(ok, d.log()[-2000:])
        self.assertEqual(self.stdout_of(d, jid), ["in ok", "outside refused", "dev ok"])
        self.assertTrue(os.path.exists(os.path.join(out, "in")))
        self.assertFalse(os.path.exists(elsewhere))
        jid, ok = self.run_job(d, "W")
        self.assertEqual(self.stdout_of(d, jid), ["in ok", "outside written", "dev ok"])
        self.assertTrue(os.path.exists(elsewhere))

    def setuid_id(self):
        """A setuid-root copy of id(1) in a directory nobody can reach."""
        prog = os.path.join(self.shared, "id")
        shutil.copy("/usr/bin/id", prog)
        os.chown(prog, 0, 0)
        os.chmod(prog, 0o4755)
        return prog

    def test_cn4_no_new_privileges(self):
        prog = self.setuid_id()
        script = 'grep NoNewPrivs /proc/self/status; echo "euid $("$1" -u)"'
        d = self.daemon(handlers=[
            {"class": "N", "command": sh(script, prog), "user": "nobody",
             "no_new_privileges": True},
            {"class": "P", "command": sh(script, prog), "user": "nobody"}])
        jid, ok = self.run_job(d, "N")
        self.assertTrue(ok, d.log()[-2000:])
        self.assertEqual(self.stdout_of(d, jid), ["NoNewPrivs:\t1", "euid 65534"])
        jid, ok = self.run_job(d, "P")
        self.assertTrue(ok, d.log()[-2000:])
        self.assertEqual(self.stdout_of(d, jid), ["NoNewPrivs:\t0", "euid 0"])

    def test_cn5_all_of_it_with_user_and_cwd(self):
        """Every setting at once, on a handler run as nobody (the namespaces are made before
        the ids drop) in a cwd that is a writable path (entered after the mounts)."""
        out = os.path.join(self.shared, "out")
        os.mkdir(out)
        os.chmod(out, 0o777)
        script = ('id -u; echo x > here && echo "cwd writable"; '
                  'echo y > /tmp/t && echo "tmp writable"; '
                  'touch /var/lib/cn5 2>/dev/null || echo "var refused"; '
                  'grep NoNewPrivs /proc/self/status; '
                  '/usr/bin/python3 -c "$1" || true')
        d = self.daemon(handlers=[{"class": "A", "command": sh(script, CONNECT),
                                   "user": "nobody", "cwd": out, "network": False,
                                   "private_tmp": True, "read_only": True,
                                   "writable_paths": [out], "no_new_privileges": True}])
        jid, ok = self.run_job(d, "A")
        self.assertTrue(ok, d.log()[-2000:])
        lines = self.stdout_of(d, jid)
        self.assertEqual(lines[:5], ["65534", "cwd writable", "tmp writable", "var refused",
                                     "NoNewPrivs:\t1"])
        self.assertTrue(lines[5].startswith("redis unreachable"), lines)
        self.assertTrue(os.path.exists(os.path.join(out, "here")))

    def test_cn6_a_confinement_that_fails_at_spawn_says_so(self):
        """A writable path removed after the start: the job fails as a spawn failure that
        names the confinement's step and errno."""
        out = self.path("gone")
        os.mkdir(out)
        d = self.daemon(handlers=[{"class": "G", "command": ["/bin/true"], "read_only": True,
                                   "writable_paths": [out]}])
        os.rmdir(out)
        jid, ok = self.run_job(d, "G")
        self.assertFalse(ok)
        dead = loads(self.wait_member(DEAD, jid=jid)[0])
        self.assertEqual(dead["error_class"], "Cogworker::HandlerSpawnFailed")
        self.assertIn("exec failed: confinement: the mounts of read_only/private_tmp: "
                      "No such file or directory (ENOENT)", dead["error_message"])

    @NEEDS_FORKLESS
    def test_cn7_a_daemon_that_is_not_root_confines_through_a_user_namespace(self):
        out = os.path.join(self.shared, "out")
        os.mkdir(out)
        os.chmod(out, 0o777)
        script = ('id -u; echo x > "$2/f" && echo "out ok"; echo y > /tmp/t && echo "tmp ok"; '
                  'touch /etc/cn7 2>/dev/null || echo "etc refused"; '
                  '/usr/bin/python3 -c "$1" || true')
        d = self.daemon(start=False, handlers=[
            {"class": "U", "command": sh(script, CONNECT, out), "network": False,
             "private_tmp": True, "read_only": True, "writable_paths": [out],
             "no_new_privileges": True}])
        d.conf_path = os.path.join(self.shared, "daemon.conf")    # nobody reads it
        uid, gid = nobody_ids()
        d.start(wrap=["setpriv", "--reuid=%d" % uid, "--regid=%d" % gid, "--clear-groups"])
        jid, ok = self.run_job(d, "U")
        self.assertTrue(ok, d.log()[-2000:])
        lines = self.stdout_of(d, jid)
        self.assertEqual(lines[:4], ["65534", "out ok", "tmp ok", "etc refused"])
        self.assertTrue(lines[4].startswith("redis unreachable"), lines)
        self.assertEqual(os.stat(os.path.join(out, "f")).st_uid, uid)

    def test_cn10_a_warm_process_is_confined_as_a_whole(self):
        """A warm handler with private_tmp and network = false: its jobs share the process's
        own /tmp (documented: private per process, not per job), none reaches Redis, nothing
        is left on the host; a reload that turns network back on replaces the process."""
        script = ('printf \'{"type":"ready"}\\n\' >&3\n'
                  'while IFS= read -r line <&3; do\n'
                  '  case $line in *\'"type":"cancel"\'*) continue ;; esac\n'
                  '  echo "pid $$ tmp:$(ls -A /tmp | tr "\\n" " ")"\n'
                  '  touch "/tmp/cn10-$$-$(ls -A /tmp | wc -l)"\n'
                  '  /usr/bin/python3 -c "$1" >/dev/null 2>&1 && echo net:yes || echo net:no\n'
                  '  printf \'{"type":"done","exit":0}\\n\' >&3\n'
                  'done\n')
        h = {"class": "W", "command": sh(script, CONNECT), "warm": True, "private_tmp": True,
             "network": False}
        d = self.daemon(handlers=[dict(h)])
        outs = []
        for _ in range(2):
            jid, ok = self.run_job(d, "W")
            self.assertTrue(ok, d.log()[-2000:])
            outs.append(self.stdout_of(d, jid))
        pid = outs[0][0].split()[1]
        self.assertEqual(outs[0], ["pid %s tmp:" % pid, "net:no"])
        self.assertEqual(outs[1], ["pid %s tmp:cn10-%s-0 " % (pid, pid), "net:no"])
        self.assertEqual([f for f in os.listdir("/tmp") if f.startswith("cn10-%s-" % pid)], [])
        d.settings["handlers"] = [dict(h, network=True)]
        d.write_conf()
        d.signal(signal.SIGHUP)
        d.wait_log("reloaded")
        jid, ok = self.run_job(d, "W")
        self.assertTrue(ok, d.log()[-2000:])
        out = self.stdout_of(d, jid)
        self.assertNotEqual(out[0].split()[1], pid, out)
        self.assertEqual(out[1:], ["net:yes"])
        self.assertTrue(out[0].endswith("tmp:"), out)


# unshare(2) and the flag, for a user namespace without user namespaces in it
CLONE_NEWUSER = 0x10000000


def run_without_userns(argv):
    """argv run as nobody in a user namespace whose user.max_user_namespaces is 0: a process
    that is not root and can't make user namespaces. (stdout + stderr, status)."""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(w)
            os.close(r2)
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWUSER) != 0:
                os._exit(90)
            os.write(w2, b"u")                 # unshared: the maps can be written
            os.read(r, 1)                      # the maps are written
            with open("/proc/sys/user/max_user_namespaces", "w") as f:
                f.write("0")
            os.setgroups([])
            os.setresgid(65534, 65534, 65534)
            os.setresuid(65534, 65534, 65534)
            out = os.open(argv[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.execv(argv[0], argv[:-1])
        finally:
            os._exit(91)
    os.close(r)
    os.close(w2)
    unshared = os.read(r2, 1)
    os.close(r2)
    for f, m in (() if not unshared else (("uid_map", "0 0 4294967295"), ("gid_map", "0 0 4294967295"))):
        with open("/proc/%d/%s" % (pid, f), "w") as fh:
            fh.write(m)
    os.write(w, b"x")
    os.close(w)
    _, status = os.waitpid(pid, 0)
    with open(argv[-1]) as f:
        return f.read(), os.waitstatus_to_exitcode(status)


class ConfinementCheck(SharedDirCase):

    def check(self, handler_body):
        path = os.path.join(self.shared, "c.conf")
        with open(path, "w") as f:
            f.write('redis = { url = "%s"; };\n' % self.server.url)
            f.write('handlers = ( { class = "K"; command = ["/bin/true"];\n')
            f.write(handler_body + "\n")
            f.write("} );\n")
        p = subprocess.run([binary("cogworkerd"), "--check", "-c", path],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=10)
        return p.returncode, p.stdout + p.stderr, path

    def assert_rejected(self, body, phrase, line=3):
        rc, out, path = self.check(body)
        self.assertEqual(rc, 2, out)
        self.assertIn("%s:%d:" % (path, line), out)
        self.assertIn(phrase, out)
        return out

    def test_cn8_bad_confs_name_file_and_line(self):
        out = os.path.join(self.shared, "out")
        os.mkdir(out)
        self.assert_rejected('network = "no";', "handler.network must be true or false")
        self.assert_rejected("private_tmp = 1;", "handler.private_tmp must be true or false")
        self.assert_rejected('read_only = "yes";', "handler.read_only must be true or false")
        self.assert_rejected("no_new_privileges = 0;",
                             "handler.no_new_privileges must be true or false")
        self.assert_rejected('read_only = true;\nwritable_paths = "%s";' % out,
                             "writable_paths must be an array of strings", line=4)
        self.assert_rejected('writable_paths = ["%s"];' % out,
                             "writable_paths needs read_only = true")
        self.assert_rejected('read_only = true;\nwritable_paths = ["srv/out"];',
                             "'srv/out' is not an absolute path", line=4)
        self.assert_rejected('read_only = true;\nwritable_paths = ["/srv/../etc"];',
                             "has a . or .. component", line=4)
        self.assert_rejected('read_only = true;\nwritable_paths = ["/"];',
                             "is the whole file system", line=4)
        self.assert_rejected('read_only = true;\nprivate_tmp = true;\n'
                             'writable_paths = ["/tmp/x"];',
                             "writable path /tmp/x is under /tmp, which private_tmp replaces",
                             line=5)
        missing = os.path.join(out, "missing")
        self.assert_rejected('read_only = true;\nwritable_paths = ["%s"];' % missing,
                             "handler 'K': writable path %s: No such file or directory"
                             % missing, line=4)
        ro = os.path.join(self.shared, "ro")
        os.mkdir(ro)
        subprocess.run(["mount", "--bind", "-o", "ro", ro, ro], check=True)
        self.addCleanup(subprocess.run, ["umount", ro])
        self.assert_rejected('read_only = true;\nwritable_paths = ["%s"];' % ro,
                             "writable path %s: read-only for the daemon itself" % ro, line=4)
        rc, text, _ = self.check('network = false;\nprivate_tmp = true;\nread_only = true;\n'
                                 'writable_paths = ["%s"];\nno_new_privileges = true;' % out)
        self.assertEqual(rc, 0, text)
        self.assertIn("configuration OK", text)
        self.assertIn("handler K: its confinement is no wall against a handler that runs as "
                      "root", text)
        rc, text, _ = self.check('network = false;\nuser = "nobody";')
        self.assertEqual(rc, 0, text)
        self.assertNotIn("no wall", text)

    @NEEDS_FORKLESS
    def test_cn9_refused_where_the_kernel_or_privileges_cannot(self):
        """Not root, and no user namespaces to be had: --check refuses each confinement
        that needs a namespace, at the line of its first setting, and says what the host
        lacks; the daemon does not start on it. no_new_privileges needs nothing."""
        out = os.path.join(self.shared, "out")
        os.mkdir(out)
        log = os.path.join(self.shared, "check.out")
        open(log, "w").close()
        os.chmod(log, 0o666)
        for body, line in (("network = false;", 3), ('private_tmp = true;', 3),
                           ('read_only = true;\nwritable_paths = ["%s"];' % out, 3)):
            _, _, path = self.check(body)
            os.chmod(path, 0o644)
            text, rc = run_without_userns([binary("cogworkerd"), "--check", "-c", path, log])
            self.assertEqual(rc, 2, text)
            self.assertIn("%s:%d: handler 'K': can't be confined as asked: confinement: "
                          "creating the namespaces: No space left on device (ENOSPC); the "
                          "daemon is not root" % (path, line), text)
            self.assertIn("user.max_user_namespaces", text)
            text, rc = run_without_userns([binary("cogworkerd"), "-c", path, log])
            self.assertEqual(rc, 2, text)
            self.assertIn("can't be confined as asked", text)
            self.assertNotIn("started", text)
        _, _, path = self.check("no_new_privileges = true;")
        os.chmod(path, 0o644)
        text, rc = run_without_userns([binary("cogworkerd"), "--check", "-c", path, log])
        self.assertEqual(rc, 0, text)

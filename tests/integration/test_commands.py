# SPDX-License-Identifier: MIT
"""CK — a conf's commands checked as the daemon will run them (doc/behaviours.md group CK):
`cogworkerd --check` fails naming the file, the line and the path of a command that is
missing, not executable (by the handler's user), relative without a cwd or not in PATH;
the daemon warns about the same at start. At run time a failed spawn names the path and
the errno, and one that can never succeed (E2BIG) goes to dead at once.

Run: python3 tests/integration/run.py test_commands
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, conf_value, handler, job  # noqa: E402
from runkit import DEAD, RETRY, JobTestCase, loads  # noqa: E402


class Check(JobTestCase):

    def script(self, name, mode=0o755):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(path, mode)
        return path

    def conf(self, handlers, extra=""):
        """A conf whose handlers start at line 3, one per line."""
        path = os.path.join(self.workdir, "c.conf")
        with open(path, "w") as f:
            f.write('redis = { url = "%s"; };\nhandlers = (\n' % self.server.url)
            f.write(",\n".join("  " + conf_value(h) for h in handlers) + "\n);\n" + extra)
        return path

    def check(self, path, env=None):
        p = subprocess.run([binary("cogworkerd"), "--check", "-c", path],
                           stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=10, env=env)
        return p.returncode, p.stdout, p.stderr

    def test_ck1_good_commands_pass(self):
        ok = self.script("ok")
        path = self.conf([{"class": "A", "command": [ok]},
                          {"class": "B", "command": ["true"]},       # through PATH
                          {"class": "C", "command": ["./ok"], "cwd": self.workdir},
                          {"class": "D", "command": [ok], "on_death": ["/bin/true"]}],
                         'on_death = [ "/bin/true" ];\n')
        rc, out, err = self.check(path)
        self.assertEqual((rc, err), (0, ""), out)
        self.assertIn("configuration OK", out)

    def test_ck2_each_mistake_named_with_file_line_and_path(self):
        noexec = self.script("noexec", 0o644)
        owner_only = self.script("owner-only", 0o700)
        missing = os.path.join(self.workdir, "missing")
        path = self.conf([
            {"class": "Missing", "command": [missing]},
            {"class": "NoExec", "command": [noexec]},
            {"class": "Relative", "command": ["bin/thing"]},
            {"class": "NotInPath", "command": ["cogworkerd-test-no-such-program"]},
            {"class": "Nobody", "command": [owner_only], "user": "nobody"},
            {"class": "BadCwd", "command": ["./ok"], "cwd": missing},
            {"class": "Death", "command": ["/bin/true"], "on_death": [missing]},
        ], 'on_death = ( [ "/bin/true" ], [ "%s" ] );\n' % missing)
        rc, out, err = self.check(path)
        self.assertEqual(rc, 2, err)
        self.assertNotIn("configuration OK", out)
        lines = err.splitlines()
        want = [
            (3, "handler 'Missing': command: %s: No such file or directory" % missing),
            (4, "handler 'NoExec': command: %s: not executable by this user" % noexec),
            (5, "handler 'Relative': command: bin/thing is a relative path and the handler "
                "has no cwd"),
            (6, "handler 'NotInPath': command: cogworkerd-test-no-such-program is not found "
                "in PATH "),
            (7, "handler 'Nobody': command: %s: not executable by user nobody" % owner_only),
            (8, "handler 'BadCwd': command: cwd %s: No such file or directory" % missing),
            (9, "handler 'Death': on_death: %s: No such file or directory" % missing),
            (11, "on_death: %s: No such file or directory" % missing),
        ]
        self.assertEqual(len(lines), len(want), err)
        for line, (n, text) in zip(lines, want):
            self.assertTrue(line.startswith("cogworkerd: %s:%d: %s" % (path, n, text)), line)

    def test_ck3_path_is_the_daemons(self):
        """A bare name is searched in the PATH the handler gets: the daemon's, or the one
        in the handler's env."""
        bindir = os.path.join(self.workdir, "bin")
        os.makedirs(bindir)
        with open(os.path.join(bindir, "my-job"), "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(os.path.join(bindir, "my-job"), 0o755)
        path = self.conf([{"class": "A", "command": ["my-job"]}])
        self.assertEqual(self.check(path)[0], 2)
        env = dict(os.environ, PATH=bindir + ":" + os.environ.get("PATH", "/usr/bin:/bin"))
        self.assertEqual(self.check(path, env=env)[0], 0)
        path = self.conf([{"class": "A", "command": ["my-job"], "env": ["PATH=" + bindir]}])
        self.assertEqual(self.check(path)[0], 0)

    def test_ck4_the_daemon_warns_at_start_and_runs_the_rest(self):
        missing = os.path.join(self.workdir, "missing")
        d = self.daemon(handlers=[{"class": "Gone", "command": [missing]},
                                  {"class": "Ok", "command": handler("ok")}])
        [line] = d.log_lines("handler 'Gone'")
        self.assertIn("WARN: %s:" % d.conf_path, line)
        self.assertIn("%s: No such file or directory (its jobs will fail until it is fixed)"
                      % missing, line)
        jid = loads(self.push(job("Ok")))["jid"]
        self.wait_done(d, "Ok", jid)


class SpawnFailures(JobTestCase):

    def test_ck5_spawn_failure_names_the_path_and_errno(self):
        cwd = os.path.join(self.workdir, "gone")
        d = self.daemon(handlers=[
            {"class": "NoExec", "command": ["/etc/passwd"]},
            {"class": "BadCwd", "command": ["/bin/true"], "cwd": cwd}])
        a = loads(self.push(job("NoExec", retry=1)))["jid"]
        b = loads(self.push(job("BadCwd", retry=1)))["jid"]
        entries = {loads(m)["jid"]: loads(m) for m, _ in self.wait_member(RETRY, count=2)}
        self.assertEqual(entries[a]["error_message"],
                         "exec failed: /etc/passwd: Permission denied (EACCES)")
        self.assertEqual(entries[b]["error_message"],
                         "exec failed: chdir %s: No such file or directory (ENOENT)" % cwd)
        line = self.wait_fail(d, "BadCwd", b)
        self.assertIn(": exec failed: chdir %s: No such file or directory (ENOENT) → retry 1/1"
                      % cwd, line)

    def test_ck6_e2big_goes_to_dead_at_once(self):
        d = self.daemon(handlers=[{"class": "Big", "command": handler("ok"),
                                   "args_as_argv": True}])
        # One argument over the kernel's 128 KiB limit for a single argv string
        payload = job("Big", ["x" * 200000])      # the default retry: 25
        jid = loads(self.push(payload))["jid"]
        member, _ = self.wait_member(DEAD)
        e = loads(member)
        self.assertEqual(e["jid"], jid)
        self.assertEqual(e["error_class"], "Cogworker::HandlerSpawnFailed")
        self.assertEqual(e["error_message"], "exec failed: %s: Argument list too long (E2BIG)"
                         % handler("ok")[0])
        self.assertEqual(e["retry_count"], 1)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual([a["outcome"] for a in self.attempts(jid)], ["killed"])
        line = self.wait_fail(d, "Big", jid)
        self.assertIn("→ dead (the arguments do not fit in an argv (E2BIG): no retry can "
                      "succeed)", line)
        self.assertEqual(d.runs_of(jid), 0)
        self.wait_settled(d)


if __name__ == "__main__":
    import unittest
    unittest.main()

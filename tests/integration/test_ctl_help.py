# SPDX-License-Identifier: MIT
"""CH — what cogworkerctl tells a newcomer about itself (doc/behaviours.md group CH):
--version, `help [COMMAND]` and `COMMAND --help` for every command (without Redis), the
bash and zsh completion scripts (completion/), and which conf and Redis it used when
REDIS_URL overrode a conf's url or a default was taken.

Run: python3 tests/integration/run.py test_ctl_help
"""

import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, DaemonTestCase, binary, free_port  # noqa: E402

BASH_COMPLETION = os.path.join(REPO, "completion", "cogworkerctl.bash")
ZSH_COMPLETION = os.path.join(REPO, "completion", "_cogworkerctl")
DEAD_URL = "redis://127.0.0.1:%d/0"


def ctl(*args, env=None, conf=None):
    e = dict(os.environ)
    e.pop("REDIS_URL", None)
    e.update(env or {})
    argv = [binary("cogworkerctl")] + (["-c", conf] if conf else []) + list(args)
    return subprocess.run(argv, env=e, capture_output=True, text=True, timeout=30)


def commands():
    """The commands `cogworkerctl help` lists."""
    out = ctl("help").stdout
    block = out.split("\ncommands:\n")[1].split("\n\n")[0]
    return [l.split()[0] for l in block.splitlines()]


class Help(unittest.TestCase):

    def test_ch1_version(self):
        p = ctl("--version")
        self.assertEqual(p.returncode, 0)
        d = subprocess.run([binary("cogworkerd"), "--version"], capture_output=True, text=True)
        self.assertEqual(p.stdout, d.stdout.replace("cogworkerd", "cogworkerctl"))
        self.assertRegex(p.stdout, r"^cogworkerctl \d+\.\d+\.\d+\n$")

    def test_ch2_help_for_every_command_without_redis(self):
        names = commands()
        self.assertEqual(names[:3], ["push", "stats", "queues"])
        self.assertTrue({"jobs", "processes", "periodic", "history", "exec", "metrics"}
                        <= set(names))
        self.assertEqual(ctl("--help").stdout, ctl("help").stdout)
        env = {"REDIS_URL": DEAD_URL % free_port()}
        for name in names:
            with self.subTest(name):
                a = ctl("help", name, env=env)
                b = ctl(name, "--help", env=env)
                self.assertEqual((a.returncode, a.stderr), (0, ""), a)
                self.assertEqual((b.returncode, b.stderr), (0, ""), b)
                self.assertEqual(a.stdout, b.stdout)
                self.assertTrue(a.stdout.startswith("usage: cogworkerctl %s" % name), a.stdout)
        # --help after options and subcommands, and after other common options
        self.assertEqual(ctl("jobs", "show", "--help", env=env).stdout, ctl("help", "jobs").stdout)
        self.assertEqual(ctl("--json", "queues", "pause", "--help", env=env).returncode, 0)
        self.assertEqual(ctl("push", "--queue", "q", "--help", env=env).stdout,
                         ctl("help", "push").stdout)
        bad = ctl("help", "nosuch")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("no command \"nosuch\"", bad.stderr)
        bad = ctl("nosuch")
        self.assertEqual(bad.returncode, 2)
        self.assertIn("try cogworkerctl help", bad.stderr)

    def test_ch2_push_and_exec_args_after_class_are_not_options(self):
        """push and exec stop at CLASS: an ARG "--help" is the handler's, not a request
        for help."""
        conf = os.path.join(os.environ.get("TMPDIR", "/tmp"), "cw-help-%d.conf" % os.getpid())
        with open(conf, "w") as f:
            f.write('handlers = ( { class = "E"; command = ["/bin/echo"]; args_as_argv = true; } );\n')
        self.addCleanup(os.unlink, conf)
        p = ctl("exec", "E", "--help", conf=conf)
        self.assertEqual(p.returncode, 0, p)
        self.assertIn('"args":["--help"]', p.stdout)
        self.assertIn("command    /bin/echo --help\n", p.stdout)


class Completion(unittest.TestCase):

    def complete(self, *words, env=None):
        """COMPREPLY of the bash completion for the command line words (the last one is
        being completed)."""
        script = ('source %s; COMP_WORDS=(cogworkerctl %s); COMP_CWORD=%d; _cogworkerctl; '
                  'printf "%%s\\n" "${COMPREPLY[@]}"'
                  % (BASH_COMPLETION, " ".join("'%s'" % w for w in words), len(words)))
        p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=10,
                           env=dict(os.environ, PATH=os.path.dirname(binary("cogworkerctl"))
                                    + ":" + os.environ.get("PATH", "/usr/bin:/bin"),
                                    **(env or {})))
        self.assertEqual(p.stderr, "")
        return [w for w in p.stdout.splitlines() if w]

    def test_ch3_bash_completion_loads_and_completes(self):
        p = subprocess.run(["bash", "-c", "source %s && complete -p cogworkerctl"
                            % BASH_COMPLETION], capture_output=True, text=True, timeout=10)
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        self.assertEqual(p.stdout.strip(), "complete -F _cogworkerctl cogworkerctl")
        self.assertEqual(self.complete(""), commands() + ["help"])
        self.assertEqual(self.complete("j"), ["jobs"])
        self.assertEqual(self.complete("jobs", ""), ["list", "show", "retry", "delete", "kill",
                                                     "reschedule", "log", "cancel", "--json",
                                                     "--yes", "--help"])
        self.assertEqual(self.complete("jobs", "log", "--"), ["--run", "--follow", "--json",
                                                               "--yes", "--help"])
        self.assertEqual(self.complete("jobs", "list", "--set", "r"), ["retry", "running"])
        self.assertEqual(self.complete("-c", "x.conf", "--json", "pro"), ["processes"])
        self.assertIn("--stdin", self.complete("push", "--"))
        self.assertEqual(self.complete("history", "--status", ""), ["success", "failed"])
        self.assertEqual(self.complete("jobs", "show", "--f"), ["--full"])

    def test_ch3_completion_scripts_know_every_command(self):
        with open(BASH_COMPLETION) as f:
            bash = f.read()
        with open(ZSH_COMPLETION) as f:
            zsh = f.read()
        self.assertTrue(zsh.startswith("#compdef cogworkerctl\n"))
        for name in commands():
            with self.subTest(name):
                self.assertRegex(bash, r"(\n\t|\|)%s(\||\))" % name)
                self.assertIn("'%s:" % name, zsh)
                self.assertRegex(zsh, r"(\n\t\t|\|)%s(\||\))" % name)   # a case of its own


class CompletionFromRedis(DaemonTestCase):
    """CH-5: what completes after `processes quiet` and `periodic disable` comes from the
    Redis cogworkerctl reads: the live identities, the published pjids."""

    def test_ch5_identities_and_pjids_complete(self):
        ident = "web-3:48211:9f3c0a1b2e4d"
        self.r.hset("cogworker:process:" + ident, mapping={"info": '{"pid":48211}',
                                                           "busy": "0", "quiet": "false"})
        self.r.sadd("cogworker:processes", ident)
        pjid = "d83" + "0" * 37
        self.r.hset("periodic:schedule", pjid, '{"cron":"* * * * *","class":"A","args":[]}')
        env = {"REDIS_URL": self.server.url}
        c = Completion.complete
        self.assertEqual(c(self, "processes", "quiet", "", env=env),
                         [ident, "--all", "--json", "--yes", "--help"])
        self.assertEqual(c(self, "processes", "stop", "w", env=env), [ident])
        self.assertEqual(c(self, "periodic", "disable", "d", env=env), [pjid])
        self.assertEqual(c(self, "periodic", "run", "", env=env),
                         [pjid, "--json", "--yes", "--help"])


class Notices(DaemonTestCase):
    """Where the Redis settings came from, said once on stderr at the connection."""

    def conf(self, body):
        path = os.path.join(self.workdir, "c.conf")
        with open(path, "w") as f:
            f.write(body)
        return path

    def test_ch4_redis_url_overriding_a_conf_is_said(self):
        path = self.conf('redis = { url = "redis://127.0.0.1:1/0"; };\n')
        p = ctl("stats", conf=path, env={"REDIS_URL": self.server.url})
        self.assertEqual(p.returncode, 0, p)
        self.assertEqual(p.stderr, "cogworkerctl: using REDIS_URL (redis://127.0.0.1:%d/0), "
                         "not redis.url of %s\n" % (self.server.port, path))
        # The conf's own url, or REDIS_URL over a conf that sets none: nothing to say
        path = self.conf('redis = { url = "%s"; };\n' % self.server.url)
        self.assertEqual(ctl("stats", conf=path).stderr, "")
        path = self.conf("concurrency = 2;\n")
        self.assertEqual(ctl("stats", conf=path, env={"REDIS_URL": self.server.url}).stderr, "")
        # Commands that never connect say nothing
        self.assertEqual(ctl("help", conf=path).stderr, "")

    def test_ch4_a_default_url_is_said_and_named_on_a_failed_connection(self):
        path = self.conf("concurrency = 2;\n")
        p = ctl("stats", conf=path)
        lines = p.stderr.splitlines()
        self.assertEqual(lines[0], "cogworkerctl: %s sets no redis.url and REDIS_URL is unset: "
                         "using redis://127.0.0.1:6379/0" % path)
        p = ctl("stats", conf=path, env={"REDIS_URL": DEAD_URL % free_port()})
        self.assertEqual(p.returncode, 2)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertTrue(p.stderr.rstrip().endswith("(Redis from REDIS_URL)"), p.stderr)

    def test_ch4_no_conf_at_all(self):
        """Without -c, the default conf when readable, else the built-in url, said."""
        p = ctl("stats", env={"REDIS_URL": ""})
        default = "/etc/cogworkerd/cogworkerd.conf"
        if os.access(default, os.R_OK):
            self.assertNotIn("no conf file", p.stderr)
        else:
            self.assertTrue(p.stderr.startswith(
                "cogworkerctl: no conf file (%s is not readable) and REDIS_URL is unset: using "
                "redis://127.0.0.1:6379/0\n" % default), p.stderr)


if __name__ == "__main__":
    unittest.main()

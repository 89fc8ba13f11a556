# SPDX-License-Identifier: MIT
"""The Debian package (issue 17): `make deb` builds it with no lintian error, and on a
Debian system booted by systemd (a container, tests/integration/syskit.py) it installs with
`apt-get install ./cogworkerd_<version>_<arch>.deb`, is configured as an operator expects,
and removes and purges cleanly.

- Install: the programs, units, snippets, man pages and completion files, the warm handler
  libraries in /usr/share/cogworkerd/handlers (the sh example runnable); the cogworker
  system user (sysusers.d), /etc/cogworkerd 0750 and the conf 0640,
  both root:cogworker (dpkg statoverrides), the conf a conffile, the unit enabled but not
  started, the template not enabled, the dashboard's unit (cogworkerd-web) neither, and it
  starts on loopback under its hardening when asked; `cogworkerd --check` passes on the installed conf as
  root and as cogworker (the daemon's user reads it), while another user cannot read it;
  the binary's version is the package's.
- Reinstall: a changed conf is kept, with its mode.
- Remove keeps the conf; purge leaves none of the package's files, no enable symlink and
  no statoverride (the cogworker user stays: Debian leaves system users in place).

Run: python3 tests/integration/run.py test_package     (or make check-systemd)
"""

import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from syskit import Container, deb_version, prepare  # noqa: E402

CONF = "/etc/cogworkerd/cogworkerd.conf"
WANTS = "/etc/systemd/system/multi-user.target.wants/cogworkerd.service"
HANDLER_DIR = "/usr/share/cogworkerd/handlers"
HANDLER_FILES = {HANDLER_DIR + "/python/cogworker_handler.py": "644",
                 HANDLER_DIR + "/ruby/cogworker_handler.rb": "644",
                 HANDLER_DIR + "/ruby/cogworker_app.rb": "644",
                 HANDLER_DIR + "/ruby/compat/cogworker.rb": "644",
                 HANDLER_DIR + "/node/cogworker_handler.js": "644",
                 HANDLER_DIR + "/sh/example-warm.sh": "755"}


class PackageTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.deb, cls.root = prepare(cls)

    def test_lintian_reports_no_error(self):
        with open(os.path.join(os.path.dirname(self.deb), "lintian.txt")) as f:
            report = f.read()
        tags = [line for line in report.splitlines() if line[:2] in ("E:", "W:", "I:", "P:")]
        print("lintian:\n  " + "\n  ".join(tags or ["(nothing)"]), flush=True)
        self.assertFalse([t for t in tags if t.startswith("E:")], report)

    def test_install_check_remove_purge(self):
        with Container(self.root, debdir=os.path.dirname(self.deb)) as c:
            print("container booted in %.1fs" % c.boot_seconds, flush=True)
            t = time.monotonic()
            out = c.install(os.path.basename(self.deb)).stdout
            print("apt-get install ./%s: %.1fs" % (os.path.basename(self.deb),
                                                   time.monotonic() - t), flush=True)
            self.assertIn("Setting up cogworkerd (%s)" % deb_version(), out)
            files = c.run("dpkg-query", "-L", "cogworkerd").stdout.split()
            self._installed(c, files)

            # A conf the operator changed survives a reinstall, mode and all.
            c.sh("echo '# changed by the operator' >> " + CONF)
            c.run("apt-get", "install", "-y", "-q", "--reinstall",
                  "/debs/" + os.path.basename(self.deb), timeout=120)
            self.assertIn("# changed by the operator", c.run("cat", CONF).stdout)
            self.assertEqual(c.run("stat", "-c", "%a %U %G", CONF).stdout.split(),
                             ["640", "root", "cogworker"])

            c.run("apt-get", "remove", "-y", "-q", "cogworkerd", timeout=120)
            self.assertEqual(c.run("dpkg-query", "-W", "-f", "${db:Status-Abbrev}",
                                   "cogworkerd").stdout.strip(), "rc")
            self.assertFalse(self._present(c, ["/usr/sbin/cogworkerd", "/usr/bin/cogworkerctl",
                                               "/lib/systemd/system/cogworkerd.service"]))
            self.assertEqual(self._present(c, [CONF]), [CONF], "remove keeps the conffile")

            c.run("apt-get", "purge", "-y", "-q", "cogworkerd", timeout=120)
            status = c.run("dpkg-query", "-W", "-f", "${db:Status-Abbrev}", "cogworkerd",
                           check=False).stdout.strip()
            self.assertIn(status, ("", "un"), "dpkg still knows the package")
            present = self._present(c, [f for f in files if f != "/."]
                                    + [WANTS, "/etc/cogworkerd"])
            leftover = sorted(set(present) - set(self._owned_dirs(c, present)))
            self.assertEqual(leftover, [], "left behind by the purge")
            overrides = c.run("dpkg-statoverride", "--list").stdout
            self.assertNotIn("cogworkerd", overrides)
            self.assertNotIn("cogworkerd", c.run("ls", "/var/lib/dpkg/info").stdout)
            # Debian leaves system users in place (files they own may remain elsewhere).
            self.assertEqual(c.run("id", "-u", "cogworker", check=False).returncode, 0)

    def _installed(self, c, files):
        for f in ("/usr/sbin/cogworkerd", "/usr/bin/cogworkerctl",
                  "/lib/systemd/system/cogworkerd.service",
                  "/lib/systemd/system/cogworkerd@.service",
                  "/lib/systemd/system/cogworkerd-web.service",
                  "/usr/lib/sysusers.d/cogworkerd.conf", "/usr/lib/tmpfiles.d/cogworkerd.conf",
                  "/usr/share/man/man8/cogworkerd.8.gz",
                  "/usr/share/man/man5/cogworkerd.conf.5.gz",
                  "/usr/share/man/man1/cogworkerctl.1.gz",
                  "/usr/share/bash-completion/completions/cogworkerctl",
                  "/usr/share/zsh/vendor-completions/_cogworkerctl", CONF):
            self.assertIn(f, files)
        modes = c.run("stat", "-c", "%a %U %n", *HANDLER_FILES).stdout.splitlines()
        self.assertEqual(modes, ["%s root %s" % (m, f) for f, m in HANDLER_FILES.items()])
        # The example is the real one: outside the daemon it refuses, saying why.
        example = c.run(HANDLER_DIR + "/sh/example-warm.sh", check=False)
        self.assertEqual(example.returncode, 2)
        self.assertIn("COGWORKER_PROTOCOL is '', not 1", example.stderr)
        user = c.run("getent", "passwd", "cogworker").stdout.strip().split(":")
        self.assertLess(int(user[2]), 1000, "a system user")
        self.assertEqual(user[5:], ["/var/lib/cogworkerd", "/usr/sbin/nologin"])
        self.assertEqual(c.run("stat", "-c", "%a %U %G", "/etc/cogworkerd").stdout.split(),
                         ["750", "root", "cogworker"])
        self.assertEqual(c.run("stat", "-c", "%a %U %G", CONF).stdout.split(),
                         ["640", "root", "cogworker"])
        self.assertIn(CONF, c.run("dpkg-query", "-W", "-f", "${Conffiles}",
                                  "cogworkerd").stdout)

        self.assertEqual(c.run("systemctl", "is-enabled", "cogworkerd",
                               check=False).stdout.strip(), "enabled")
        self.assertEqual(c.run("systemctl", "is-active", "cogworkerd",
                               check=False).stdout.strip(), "inactive", "installing starts nothing")
        self.assertNotIn("cogworkerd@", c.run("ls", "/etc/systemd/system/multi-user.target.wants")
                         .stdout)
        self.assertEqual(c.run("systemctl", "is-enabled", "cogworkerd-web",
                               check=False).stdout.strip(), "disabled", "the dashboard is off")
        # Turned on, it serves on loopback under its sandbox (no Redis needed to start).
        c.run("systemctl", "start", "cogworkerd-web")
        for _ in range(50):
            log = c.run("journalctl", "-u", "cogworkerd-web", "--no-pager", check=False).stdout
            if "dashboard on http://127.0.0.1:9395/" in log:
                break
            time.sleep(0.1)
        self.assertIn("dashboard on http://127.0.0.1:9395/", log)
        self.assertEqual(c.run("systemctl", "is-active", "cogworkerd-web",
                               check=False).stdout.strip(), "active")
        c.run("systemctl", "stop", "cogworkerd-web")

        check = c.run("cogworkerd", "--check", "-c", CONF)
        self.assertIn("configuration OK", check.stdout + check.stderr)
        c.run("setpriv", "--reuid=cogworker", "--regid=cogworker", "--init-groups",
              "cogworkerd", "--check", "-c", CONF)
        other = c.run("setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                      "cogworkerd", "--check", "-c", CONF, check=False)
        self.assertEqual(other.returncode, 2, "a user outside the group reads the conf")
        self.assertIn(CONF, other.stderr)
        version = c.run("cogworkerd", "--version").stdout
        self.assertEqual(version.split(), ["cogworkerd", deb_version()],
                         "the binary's version (Makefile VERSION) and the package's "
                         "(debian/changelog) differ")

    @staticmethod
    def _present(c, paths):
        """Those of paths that exist in the container (symlinks too, dangling or not)."""
        return c.run("/bin/sh", "-c", 'for p; do if [ -e "$p" ] || [ -L "$p" ]; then '
                     'echo "$p"; fi; done', "sh", *paths).stdout.split()

    @staticmethod
    def _owned_dirs(c, paths):
        """Those of paths that are directories another package owns (/usr/sbin, ...)."""
        return c.run("/bin/sh", "-c", 'for p; do if [ -d "$p" ] && dpkg-query -S "$p" '
                     '>/dev/null 2>&1; then echo "$p"; fi; done', "sh", *paths).stdout.split()


if __name__ == "__main__":
    unittest.main()

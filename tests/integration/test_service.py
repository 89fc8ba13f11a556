# SPDX-License-Identifier: MIT
"""Running cogworkerd as a service (issue 6): systemd units, sd_notify, reload, metrics,
/healthz, `make install`, man pages.

- Units: `systemd-analyze verify` (offline, on the tree `make install DESTDIR=` lays out, with
  the ExecStart path pointed into that tree and MANPATH at its man pages: no warning at all),
  `systemd-analyze security --offline=true` at "OK" or better (exposure < 5.0), and the
  template's settings equal to the main unit's.
- sd_notify through a NOTIFY_SOCKET this test binds: READY=1 only after the first heartbeat
  (none while Redis is stopped), STATUS=, RELOADING=1 then READY=1 on HUP (valid or not),
  STOPPING=1, WATCHDOG=1 every beat, Redis reachable or not.
- Reload while a job runs: an invalid conf is rejected with file:line in the log and the old
  conf stays; a valid one adds a class and changes a handler for new jobs, names the settings
  that need a restart, and the running job finishes untouched.
- /metrics parsed as Prometheus text (a strict parser of format 0.0.4 here, and
  prometheus_client's when installed), the eight cogworker names and the daemon's own
  counters; /healthz flipping to 503 while Redis is stopped (SIGSTOP, then a real stop).
- `make install DESTDIR=`: the tree, the conf kept on a second install, PREFIX in the units.
- `man -l --warnings` renders each page without a warning.

Run: make && python3 tests/integration/run.py test_service
"""

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, DaemonTestCase, build_dir, free_port, handler, job,  # noqa: E402
                     wait_for)

UNITS = ("cogworkerd.service", "cogworkerd@.service")
MAN_PAGES = ("man1/cogworkerctl.1", "man5/cogworkerd.conf.5", "man8/cogworkerd.8")
EIGHT = {
    "cogworker_processed_total": "counter",
    "cogworker_failed_total": "counter",
    "cogworker_retry_size": "gauge",
    "cogworker_scheduled_size": "gauge",
    "cogworker_dead_size": "gauge",
    "cogworker_queue_size": "gauge",
    "cogworker_queue_latency_seconds": "gauge",
    "cogworker_busy_workers": "gauge",
}


def make_install(destdir, *extra):
    """`make install DESTDIR=destdir` with the binaries of the build under test (no
    rebuild: `-o all`). Returns the CompletedProcess (stdout+stderr in .stdout)."""
    return subprocess.run(["make", "-s", "-C", REPO, "-o", "all", "BUILD=" + build_dir(),
                           "DESTDIR=" + destdir] + list(extra) + ["install"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=120)


def read_unit(path):
    """A unit file as {section: [(key, value), ...]} (repeated keys kept in order)."""
    out, section = {}, None
    with open(path) as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                out.setdefault(section, [])
                continue
            k, _, v = line.partition("=")
            out[section].append((k.strip(), v.strip()))
    return out


def unit_value(unit, section, key):
    vals = [v for k, v in unit.get(section, []) if k == key]
    return vals[-1] if vals else None


def seconds(v):
    """A systemd time span as written in our units: "45", "45s", "1min"."""
    m = re.fullmatch(r"(\d+)(s|sec|min)?", v)
    assert m, v
    return int(m.group(1)) * (60 if m.group(2) == "min" else 1)


# --------------------------------------------------------------------------------------
# Prometheus text format 0.0.4, strictly

METRIC_NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(r"^(%s)(\{%s(?:,%s)*,?\})? (\S+)( -?\d+)?$" % (METRIC_NAME, _LABEL, _LABEL))


def parse_prometheus(text):
    """Parse an exposition: returns (types {family: type}, samples [(name, {labels}, value)]).
    Fails on anything format 0.0.4 does not allow: a sample before or without its TYPE line,
    a TYPE line repeated or after the family's samples, bad names, bad label syntax, a
    value that is not a float, a missing final newline."""
    assert text.endswith("\n"), "exposition must end with a newline"
    types, samples, seen_samples_of = {}, [], set()
    current = None
    for n, line in enumerate(text.split("\n")[:-1], 1):
        assert line == line.strip() and line, "line %d: empty or padded: %r" % (n, line)
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 2 and parts[1] == "HELP":
                assert len(parts) >= 3 and re.fullmatch(METRIC_NAME, parts[2]), line
                assert parts[2] not in seen_samples_of, "line %d: HELP after samples" % n
                continue
            if len(parts) >= 2 and parts[1] == "TYPE":
                assert len(parts) == 4, "line %d: bad TYPE line %r" % (n, line)
                name, typ = parts[2], parts[3]
                assert re.fullmatch(METRIC_NAME, name), "line %d: bad name %r" % (n, name)
                assert typ in ("counter", "gauge", "histogram", "summary", "untyped"), line
                assert name not in types, "line %d: second TYPE line for %s" % (n, name)
                assert name not in seen_samples_of, "line %d: TYPE after samples" % n
                types[name], current = typ, name
            continue
        m = SAMPLE.match(line)
        assert m, "line %d: not a sample line: %r" % (n, line)
        name, value = m.group(1), m.group(3)
        labels = dict(re.findall(LABEL, m.group(2) or ""))
        v = float(value)        # accepts NaN, +Inf, -Inf as Prometheus does
        family = name
        if current and types[current] == "histogram" and name in (
                current + "_bucket", current + "_sum", current + "_count"):
            family = current
        assert family == current, "line %d: sample %s outside its family's block" % (n, name)
        seen_samples_of.add(family)
        samples.append((name, labels, v))
    return types, samples


def lint_prometheus(text):
    """The checks `promtool check metrics` makes (Prometheus 2.42, promlint), done here
    because Debian's promtool comes with the whole Prometheus server: every family has one
    HELP line (before its TYPE line, not empty), counters and only counters end in _total,
    no _count/_sum/_bucket outside histograms and summaries, snake_case names, base units
    (seconds, bytes; not milliseconds). Returns [problem, …]."""
    problems, helps = [], {}
    types, _ = parse_prometheus(text)
    for n, line in enumerate(text.split("\n")[:-1], 1):
        parts = line.split(None, 3)
        if line.startswith("# HELP "):
            name = parts[2]
            if name in helps:
                problems.append("line %d: second HELP for %s" % (n, name))
            if name in types and text.index(line) > text.index("# TYPE %s " % name):
                problems.append("line %d: HELP after TYPE for %s" % (n, name))
            helps[name] = parts[3] if len(parts) == 4 else ""
    for name, typ in types.items():
        if not helps.get(name, "").strip():
            problems.append("%s: no help text" % name)
        if typ == "counter" and not name.endswith("_total"):
            problems.append('%s: counter metrics should have "_total" suffix' % name)
        if typ != "counter" and name.endswith("_total"):
            problems.append('%s: non-counter metrics should not have "_total" suffix' % name)
        if typ not in ("histogram", "summary") and re.search(r"_(count|sum|bucket)$", name):
            problems.append("%s: _count/_sum/_bucket outside a histogram or summary" % name)
        if name != name.lower() or "__" in name:
            problems.append("%s: metric names should be written in snake_case" % name)
        if re.search(r"_(milliseconds|microseconds|nanoseconds|minutes|hours|days|kilobytes|"
                     r"megabytes)(_|$)", name):
            problems.append("%s: use base units" % name)
    for name in helps:
        if name not in types:
            problems.append("%s: HELP without TYPE" % name)
    return problems


def sample(samples, name, **labels):
    found = [v for n, l, v in samples if n == name and l == labels]
    assert len(found) == 1, "%s%s: %d samples" % (name, labels, len(found))
    return found[0]


def http(url, method="GET", timeout=10):
    """(status, headers, body text) of a request, error statuses included."""
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as res:
            return res.status, res.headers, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


# --------------------------------------------------------------------------------------
# sd_notify


class NotifySocket:
    """A unix datagram socket standing in for systemd's NOTIFY_SOCKET: every datagram
    received is kept, in order, as a list of its "KEY=value" lines."""

    def __init__(self, directory):
        self.path = os.path.join(directory, "notify.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(self.path)
        self.sock.settimeout(0.1)
        self.messages = []
        self.lock = threading.Lock()
        self.done = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            with self.lock:
                self.messages.append((time.monotonic(), data.decode().strip().split("\n")))

    def close(self):
        self.done = True
        self.thread.join(2)
        self.sock.close()

    def lines(self, since=0):
        """Every "KEY=value" received, in order, from message index `since` on."""
        with self.lock:
            return [l for _, m in self.messages[since:] for l in m]

    def count(self):
        with self.lock:
            return len(self.messages)

    def wait(self, line, since=0, timeout=10):
        """Wait until `line` (exact, or a prefix ending in "=") arrives; returns the
        message index just after it."""
        def found():
            with self.lock:
                for i in range(since, len(self.messages)):
                    for l in self.messages[i][1]:
                        if l == line or (line.endswith("=") and l.startswith(line)):
                            return i + 1
            return None
        try:
            return wait_for(found, timeout=timeout, message="sd_notify %r" % line)
        except AssertionError:
            raise AssertionError("sd_notify %r not received in %gs; got %r"
                                 % (line, timeout, self.lines()))


# --------------------------------------------------------------------------------------
# Units, install tree, man pages (no Redis needed)


class Units(unittest.TestCase):

    def setUp(self):
        self.src = os.path.join(REPO, "systemd")

    def test_settings_the_issue_asks_for(self):
        u = read_unit(os.path.join(self.src, "cogworkerd.service"))
        s = "Service"
        self.assertEqual(unit_value(u, s, "Type"), "notify")
        self.assertEqual(unit_value(u, s, "KillMode"), "mixed")
        self.assertEqual(unit_value(u, s, "Restart"), "on-failure")
        self.assertEqual(unit_value(u, s, "User"), "cogworker")
        self.assertIn("-HUP $MAINPID", [v for k, v in u[s] if k == "ExecReload"][-1])
        self.assertTrue(unit_value(u, s, "StateDirectory"))
        self.assertTrue(unit_value(u, s, "RuntimeDirectory"))
        # TimeoutStopSec above shutdown_timeout (25) + the handlers' stop and the requeue
        # (doc/protocol.md §7.2: at least 35).
        self.assertGreaterEqual(seconds(unit_value(u, s, "TimeoutStopSec")), 35)
        # The watchdog is fed once per heartbeat (5 s by default; process_ttl 60 keeps it
        # under 30): WatchdogSec must leave room for several beats.
        self.assertGreaterEqual(seconds(unit_value(u, s, "WatchdogSec")), 30)
        for key, value in [("NoNewPrivileges", "yes"), ("ProtectSystem", "strict"),
                           ("ProtectHome", "yes"), ("PrivateTmp", "yes"),
                           ("ProtectKernelTunables", "yes"), ("ProtectKernelModules", "yes"),
                           ("ProtectKernelLogs", "yes"), ("SystemCallFilter", "~@privileged"),
                           # containment: the unit's cgroup is the daemon's, the rest of
                           # /sys/fs/cgroup stays read-only (doc/design.md "Containment")
                           ("Delegate", "yes"), ("ProtectControlGroups", "yes")]:
            self.assertEqual(unit_value(u, s, key), value, key)
        self.assertIn("@system-service", [v for k, v in u[s] if k == "SystemCallFilter"])
        self.assertIn("AF_INET", unit_value(u, s, "RestrictAddressFamilies"))

    def test_template_is_the_same_service_per_instance(self):
        main = read_unit(os.path.join(self.src, "cogworkerd.service"))
        tmpl = read_unit(os.path.join(self.src, "cogworkerd@.service"))
        # ReadWritePaths: the unit's own cgroup, under system-cogworkerd.slice for instances
        per_instance = {"ExecStart", "ExecReload", "StateDirectory", "RuntimeDirectory",
                        "WorkingDirectory", "Description", "ReadWritePaths"}
        for section in ("Unit", "Service", "Install"):
            a = [(k, v) for k, v in main[section] if k not in per_instance]
            b = [(k, v) for k, v in tmpl[section] if k not in per_instance]
            self.assertEqual(a, b, section)
        self.assertIn("-c /etc/cogworkerd/%i.conf", unit_value(tmpl, "Service", "ExecStart"))
        self.assertEqual(unit_value(tmpl, "Service", "StateDirectory"), "cogworkerd/%i")

    @unittest.skipUnless(shutil.which("systemd-analyze"), "systemd-analyze missing "
                         "(Debian package systemd; tools/deps.sh installs it)")
    def test_security_exposure_is_ok_or_better(self):
        for name in UNITS:
            path = os.path.join(self.src, name)
            if "@" in name:     # security wants an instance name
                d = tempfile.mkdtemp()
                self.addCleanup(shutil.rmtree, d, True)
                shutil.copy(path, os.path.join(d, "cogworkerd@main.service"))
                path = os.path.join(d, "cogworkerd@main.service")
            p = subprocess.run(["systemd-analyze", "security", "--offline=true",
                                "--no-pager", path], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stdout)
            m = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?) (\w+)", p.stdout)
            self.assertIsNotNone(m, p.stdout)
            exposure, level = float(m.group(1)), m.group(2)
            # systemd's scale: PERFECT 0, SAFE < 1, OK < 5, MEDIUM < 7.5, EXPOSED < 9, ...
            self.assertLess(exposure, 5.0, p.stdout)
            self.assertIn(level, ("OK", "SAFE", "PERFECT"), p.stdout)
            # systemd's own threshold check agrees (the threshold is exposure x 10).
            t = subprocess.run(["systemd-analyze", "security", "--offline=true",
                                "--threshold=49", "--no-pager", path],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60)
            self.assertEqual(t.returncode, 0)


class Install(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.dest = tempfile.mkdtemp(prefix="cw-install-")
        cls.addClassCleanup(shutil.rmtree, cls.dest, True)
        cls.result = make_install(cls.dest)

    def setUp(self):
        self.assertEqual(self.result.returncode, 0, self.result.stdout)

    def p(self, rel, dest=None):
        return os.path.join(dest or self.dest, rel)

    def test_tree(self):
        expected = {
            "usr/local/sbin/cogworkerd": 0o755,
            "usr/local/bin/cogworkerctl": 0o755,
            "etc/cogworkerd/cogworkerd.conf": 0o640,     # it may hold a password
            "usr/local/lib/systemd/system/cogworkerd.service": 0o644,
            "usr/local/lib/systemd/system/cogworkerd@.service": 0o644,
            "usr/local/lib/systemd/system/cogworkerd-web.service": 0o644,   # the dashboard
            "usr/local/lib/sysusers.d/cogworkerd.conf": 0o644,
            "usr/local/lib/tmpfiles.d/cogworkerd.conf": 0o644,
            "usr/local/share/man/man1/cogworkerctl.1": 0o644,
            "usr/local/share/man/man5/cogworkerd.conf.5": 0o644,
            "usr/local/share/man/man8/cogworkerd.8": 0o644,
            "usr/local/share/bash-completion/completions/cogworkerctl": 0o644,
            "usr/local/share/zsh/site-functions/_cogworkerctl": 0o644,
            # the warm handler libraries (doc/protocol.md §1.2, handlers/README.md)
            "usr/local/share/cogworkerd/handlers/python/cogworker_handler.py": 0o644,
            "usr/local/share/cogworkerd/handlers/ruby/cogworker_handler.rb": 0o644,
            "usr/local/share/cogworkerd/handlers/ruby/cogworker_app.rb": 0o644,
            "usr/local/share/cogworkerd/handlers/ruby/compat/cogworker.rb": 0o644,
            "usr/local/share/cogworkerd/handlers/node/cogworker_handler.js": 0o644,
            "usr/local/share/cogworkerd/handlers/sh/example-warm.sh": 0o755,
        }
        files = set()
        for root, _, names in os.walk(self.dest):
            for n in names:
                files.add(os.path.relpath(os.path.join(root, n), self.dest))
        self.assertEqual(files, set(expected))
        for rel, mode in expected.items():
            self.assertEqual(os.stat(self.p(rel)).st_mode & 0o777, mode, rel)
        self.assertEqual(os.stat(self.p("etc/cogworkerd")).st_mode & 0o777, 0o750)
        # The binaries are the build's, the conf is the annotated example, and it is valid.
        with open(self.p("usr/local/sbin/cogworkerd"), "rb") as a, \
                open(os.path.join(build_dir(), "cogworkerd"), "rb") as b:
            self.assertEqual(a.read(), b.read())
        with open(self.p("etc/cogworkerd/cogworkerd.conf")) as a, \
                open(os.path.join(REPO, "conf", "cogworkerd.conf")) as b:
            self.assertEqual(a.read(), b.read())
        chk = subprocess.run([self.p("usr/local/sbin/cogworkerd"), "--check", "-c",
                              self.p("etc/cogworkerd/cogworkerd.conf")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(chk.returncode, 0, chk.stdout)
        unit = read_unit(self.p("usr/local/lib/systemd/system/cogworkerd.service"))
        self.assertEqual(unit_value(unit, "Service", "ExecStart"),
                         "/usr/local/sbin/cogworkerd -c /etc/cogworkerd/cogworkerd.conf")

    def test_existing_conf_is_kept_and_the_example_lands_beside_it(self):
        dest = tempfile.mkdtemp(prefix="cw-install-")
        self.addCleanup(shutil.rmtree, dest, True)
        conf = self.p("etc/cogworkerd/cogworkerd.conf", dest)
        os.makedirs(os.path.dirname(conf))
        with open(conf, "w") as f:
            f.write("concurrency = 3;\n")
        r = make_install(dest)
        self.assertEqual(r.returncode, 0, r.stdout)
        with open(conf) as f:
            self.assertEqual(f.read(), "concurrency = 3;\n")
        with open(conf + ".example") as a, open(os.path.join(REPO, "conf",
                                                             "cogworkerd.conf")) as b:
            self.assertEqual(a.read(), b.read())
        self.assertIn("kept", r.stdout)

    def test_conf_goes_to_the_service_group_when_it_exists(self):
        """HD-9: the conf directory 0750 and the conf 0640 are for root and the service group; a
        group that exists gets them (as root), else make install says what to run."""
        import grp
        dest = tempfile.mkdtemp(prefix="cw-install-")
        self.addCleanup(shutil.rmtree, dest, True)
        r = make_install(dest, "SERVICE_GROUP=daemon")
        self.assertEqual(r.returncode, 0, r.stdout)
        conf_dir = self.p("etc/cogworkerd", dest)
        for path, mode in ((conf_dir, 0o750), (conf_dir + "/cogworkerd.conf", 0o640)):
            st = os.stat(path)
            self.assertEqual(st.st_mode & 0o777, mode, path)
            if os.geteuid() == 0:
                self.assertEqual(st.st_gid, grp.getgrnam("daemon").gr_gid, path)
        if os.geteuid() != 0:
            self.assertIn("give them to group daemon on the target host", r.stdout)
        r = make_install(dest, "SERVICE_GROUP=cw-no-such-group")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("give them to group cw-no-such-group on the target host", r.stdout)

    def test_prefix_goes_into_the_units(self):
        dest = tempfile.mkdtemp(prefix="cw-install-")
        self.addCleanup(shutil.rmtree, dest, True)
        r = make_install(dest, "PREFIX=/usr")
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertTrue(os.access(self.p("usr/sbin/cogworkerd", dest), os.X_OK))
        self.assertTrue(os.access(self.p("usr/bin/cogworkerctl", dest), os.X_OK))
        self.assertTrue(os.path.exists(self.p("usr/share/man/man8/cogworkerd.8", dest)))
        for name, conf in (("cogworkerd.service", "cogworkerd.conf"),
                           ("cogworkerd@.service", "%i.conf")):
            unit = read_unit(self.p("usr/lib/systemd/system/" + name, dest))
            self.assertEqual(unit_value(unit, "Service", "ExecStart"),
                             "/usr/sbin/cogworkerd -c /etc/cogworkerd/" + conf)
            with open(self.p("usr/lib/systemd/system/" + name, dest)) as f:
                settings = [l for l in f if not l.startswith("#")]
            self.assertFalse([l for l in settings if "/usr/local" in l])

    @unittest.skipUnless(shutil.which("systemd-analyze"), "systemd-analyze missing "
                         "(Debian package systemd; tools/deps.sh installs it)")
    def test_systemd_analyze_verify_installed_units(self):
        """verify (offline) checks the syntax of every setting, that ExecStart/ExecReload
        are executables and that the Documentation= man pages exist; a warning is a
        failure here. The installed units name /usr/local/sbin/cogworkerd, so a copy
        pointing into the DESTDIR tree is what gets verified (systemd-analyze --root would
        look for /bin/kill and the system units inside the tree too)."""
        work = tempfile.mkdtemp(prefix="cw-verify-")
        self.addCleanup(shutil.rmtree, work, True)
        env = dict(os.environ, MANPATH=self.p("usr/local/share/man"), SYSTEMD_PAGER="",
                   SYSTEMD_LOG_COLOR="0")
        for name, as_name in (("cogworkerd.service", "cogworkerd.service"),
                              ("cogworkerd@.service", "cogworkerd@.service"),
                              ("cogworkerd@.service", "cogworkerd@main.service")):
            with open(self.p("usr/local/lib/systemd/system/" + name)) as f:
                text = f.read()
            text = text.replace("/usr/local/sbin/", self.p("usr/local/sbin/"))
            path = os.path.join(work, as_name)
            with open(path, "w") as f:
                f.write(text)
            p = subprocess.run(["systemd-analyze", "verify", path], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, env=env, timeout=60)
            self.assertEqual((p.returncode, p.stdout), (0, ""), as_name)

    @unittest.skipUnless(shutil.which("systemd-sysusers") and shutil.which("systemd-tmpfiles"),
                         "systemd-sysusers/systemd-tmpfiles missing (Debian package systemd)")
    def test_sysusers_and_tmpfiles_snippets_apply(self):
        root = tempfile.mkdtemp(prefix="cw-root-")
        self.addCleanup(shutil.rmtree, root, True)
        os.makedirs(os.path.join(root, "etc"))
        p = subprocess.run(["systemd-sysusers", "--root=" + root,
                            self.p("usr/local/lib/sysusers.d/cogworkerd.conf")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 0, p.stdout)
        with open(os.path.join(root, "etc", "passwd")) as f:
            entry = [l for l in f if l.startswith("cogworker:")]
        self.assertEqual(len(entry), 1)
        self.assertTrue(entry[0].rstrip().endswith(":/var/lib/cogworkerd:/usr/sbin/nologin"))
        p = subprocess.run(["systemd-tmpfiles", "--root=" + root, "--create",
                            self.p("usr/local/lib/tmpfiles.d/cogworkerd.conf")],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.assertEqual(p.returncode, 0, p.stdout)
        st = os.stat(os.path.join(root, "etc", "cogworkerd"))
        self.assertEqual(st.st_mode & 0o777, 0o750)


class ManPages(unittest.TestCase):

    @unittest.skipUnless(shutil.which("man"), "man missing (Debian package man-db)")
    def test_each_page_renders_without_warnings(self):
        for rel in MAN_PAGES:
            path = os.path.join(REPO, "man", os.path.basename(rel))
            for width in ("80", "60"):
                p = subprocess.run(["man", "-l", "--warnings", "-E", "UTF-8", path],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=dict(os.environ, MANWIDTH=width, MAN_KEEP_FORMATTING="",
                                            LC_ALL="C.UTF-8"), timeout=60)
                self.assertEqual(p.returncode, 0, (rel, p.stderr))
                self.assertEqual(p.stderr, "", (rel, width))
                self.assertIn("NAME", p.stdout)
                self.assertIn("SEE ALSO", p.stdout)

    def test_conf_page_documents_every_setting(self):
        """Every setting name the loader accepts (the tables of src/conf_*.c: conf_settings.c,
        conf_handler.c, any file a later split adds) is in the page."""
        names = set()
        for path in glob.glob(os.path.join(REPO, "src", "conf_*.c")):
            with open(path) as f:
                names |= set(re.findall(r'\.name = "([a-z_]+)"', f.read()))
        self.assertGreater(len(names), 40)
        self.assertIn("kill_grace", names)          # conf_handler.c's table was read
        self.assertIn("max_orphanings", names)      # conf_settings.c's table was read
        with open(os.path.join(REPO, "man", "cogworkerd.conf.5")) as f:
            page = f.read().replace("\\-", "-")
        missing = sorted(n for n in names if not re.search(r"\b%s\b" % re.escape(n), page))
        self.assertEqual(missing, [])

    def test_daemon_page_lists_every_metric(self):
        with open(os.path.join(REPO, "man", "cogworkerd.8")) as f:
            page = f.read()
        for name in EIGHT:
            self.assertIn(name, page)


# --------------------------------------------------------------------------------------
# The running daemon


class Lint(unittest.TestCase):
    """lint_prometheus finds what promtool would (a check that cannot fail passes anything)."""

    def test_lint_finds_each_problem(self):
        bad = ("# TYPE jobs counter\njobs 1\n"
               "# HELP busy_total\n# TYPE busy_total gauge\nbusy_total 1\n"
               "# TYPE run_milliseconds gauge\nrun_milliseconds 3\n"
               "# HELP ok_total Fine.\n# TYPE ok_total counter\nok_total 2\n")
        problems = lint_prometheus(bad)
        self.assertEqual(sorted(problems), sorted([
            "jobs: no help text", 'jobs: counter metrics should have "_total" suffix',
            "busy_total: no help text",
            'busy_total: non-counter metrics should not have "_total" suffix',
            "run_milliseconds: no help text", "run_milliseconds: use base units"]))
        self.assertEqual(lint_prometheus("# HELP ok_total Fine.\n# TYPE ok_total counter\n"
                                         "ok_total 2\n"), [])


class ServiceCase(DaemonTestCase):

    def notify_daemon(self, **settings):
        """A started daemon reporting to a NotifySocket (self.notify)."""
        self.notify = NotifySocket(self.workdir)
        self.addCleanup(self.notify.close)
        start = settings.pop("start", True)
        d = self.daemon(start=False, **settings)
        if start:
            d.start(env={"NOTIFY_SOCKET": self.notify.path})
        return d


class Notify(ServiceCase):

    def test_ready_after_first_beat_status_reload_stopping(self):
        self.server.pause()             # Redis unreachable: no first beat, so no READY
        d = self.notify_daemon(start=False, heartbeat_interval=1,
                               redis={"command_timeout": 0.5, "connect_timeout": 0.5},
                               handlers=[{"class": "Ok", "command": handler("ok")}])
        d.start(wait=False, env={"NOTIFY_SOCKET": self.notify.path})
        time.sleep(2.5)
        self.assertNotIn("READY=1", self.notify.lines())
        self.server.resume()
        i = self.notify.wait("READY=1", timeout=10)
        d.wait_started()
        # READY only once the presence key exists (the first beat happened before it).
        self.assertEqual(len(self.r.smembers(b"cogworker:processes")), 1)
        self.notify.wait("STATUS=", since=i - 1)
        status = [l for l in self.notify.lines() if l.startswith("STATUS=")][-1]
        self.assertRegex(status, r"^STATUS=0/1 busy, redis ok$")

        n = self.notify.count()
        d.signal(signal.SIGHUP)
        j = self.notify.wait("RELOADING=1", since=n)
        self.notify.wait("READY=1", since=j)
        d.wait_log("reloaded ")

        n = self.notify.count()
        d.signal(signal.SIGTERM)
        self.notify.wait("STOPPING=1", since=n)
        self.assertEqual(d.wait_exit(20), 0)

    def test_watchdog_fed_every_beat_also_while_redis_is_away(self):
        d = self.notify_daemon(heartbeat_interval=1,
                               redis={"command_timeout": 0.5, "connect_timeout": 0.5})
        self.notify.wait("WATCHDOG=1")
        n = self.notify.count()
        time.sleep(3.2)
        self.assertGreaterEqual(self.notify.lines(n).count("WATCHDOG=1"), 2)
        self.server.pause()
        try:
            time.sleep(1.5)             # let a beat fail first
            n = self.notify.count()
            time.sleep(5)
            lines = self.notify.lines(n)
            # A beat against a stopped Redis takes up to command_timeout per command: still
            # at least one watchdog ping every couple of seconds, and the status says so.
            self.assertGreaterEqual(lines.count("WATCHDOG=1"), 2, lines)
            self.assertTrue(any(l.startswith("STATUS=") and "redis unreachable" in l
                                for l in lines), lines)
        finally:
            self.server.resume()
        n = self.notify.count()
        self.notify.wait("STATUS=0/1 busy, redis ok", since=n, timeout=10)
        self.assertEqual(d.stop(), 0)


class Reload(ServiceCase):

    def test_reload_while_a_job_runs(self):
        d = self.notify_daemon(concurrency=2, handlers=[
            {"class": "Gate", "command": handler("gate")},
            {"class": "Change", "command": handler("fail")}])
        a = job("Gate")
        jid_a = json.loads(a)["jid"]
        self.push(a)
        d.wait_log("start: Gate jid=%s" % jid_a)

        # 1. An invalid conf: rejected, its file and line in the log, the old conf stays.
        d.write_conf()
        with open(d.conf_path) as f:
            bad_line = len(f.read().splitlines()) + 1
        with open(d.conf_path, "a") as f:
            f.write("bogus_setting = 1;\n")
        n = self.notify.count()
        d.signal(signal.SIGHUP)
        line = d.wait_log("reload rejected")
        self.assertIn("%s:%d:" % (d.conf_path, bad_line), line)
        self.assertIn("bogus_setting", line)
        j = self.notify.wait("RELOADING=1", since=n)
        self.notify.wait("READY=1", since=j)
        c1 = json.loads(job("Change"))["jid"]
        self.push(job("Change", jid=c1))
        d.wait_log("fail: Change jid=%s" % c1)          # the old handler still runs it

        # 2. A valid conf: a new class, a changed handler, a setting that needs a restart.
        d.settings["concurrency"] = 3
        d.settings["handlers"] = [{"class": "Gate", "command": handler("gate")},
                                  {"class": "Change", "command": handler("ok")},
                                  {"class": "New", "command": handler("ok")}]
        d.write_conf()
        n = self.notify.count()
        d.signal(signal.SIGHUP)
        d.wait_log("reloaded %s: 3 handler(s)" % d.conf_path)
        self.assertTrue(d.log_lines("concurrency changed; it takes effect at the next restart"))
        j = self.notify.wait("RELOADING=1", since=n)
        self.notify.wait("READY=1", since=j)
        for cls in ("New", "Change"):
            jid = json.loads(job(cls))["jid"]
            self.push(job(cls, jid=jid))
            d.wait_log("done: %s jid=%s" % (cls, jid))

        # 3. The job that ran through both reloads was never touched; it finishes now.
        self.assertEqual(d.runs_of(jid_a), 1)
        self.assertFalse(d.log_lines("done: Gate jid=%s" % jid_a))
        # Its workers entry: written by the once-a-second flush (src/batch.c) for a job
        # still running then, so a reader sees it within a second of the start.
        wait_for(lambda: self.r.hlen(b"cogworker:workers:" + d.identity.encode()) == 1,
                 timeout=3, message="the running job's workers entry")
        d.open_gate(jid_a)
        d.wait_log("done: Gate jid=%s" % jid_a)
        self.assertEqual(d.runs_of(jid_a), 1)
        wait_for(lambda: self.r.llen(b"cogworker:inprogress:" + d.identity.encode()) == 0)
        self.assertEqual(self.r.llen(b"cogworker:queue:default"), 0)
        self.assertFalse([m for m in self.r.zrange(b"cogworker:retry", 0, -1)
                          if jid_a.encode() in m])
        self.assertEqual(d.stop(), 0)

    def test_reload_keeps_the_queues_and_fetch_until_a_restart(self):
        """What the reload's notice says holds: the fetchers keep reading the queues and
        the fetch mode they started with."""
        d = self.notify_daemon(concurrency=2, queues=["default"],
                               handlers=[{"class": "Ok", "command": handler("ok")}])
        d.settings["queues"] = ["other"]
        d.settings["fetch"] = "basic"
        d.write_conf()
        d.signal(signal.SIGHUP)
        d.wait_log("reloaded %s" % d.conf_path)
        self.assertTrue(d.log_lines("queues changed; they take effect at the next restart"))
        self.assertTrue(d.log_lines("fetch changed; it takes effect at the next restart"))
        other = json.loads(self.push(job("Ok", queue="other"), queue="other"))["jid"]
        here = json.loads(self.push(job("Ok")))["jid"]
        d.wait_log("done: Ok jid=%s" % here)
        time.sleep(1.5)
        self.assertFalse(d.log_lines("jid=%s" % other))
        self.assertEqual(self.r.llen(b"cogworker:queue:other"), 1)
        self.assertEqual(d.stop(), 0)


class Metrics(ServiceCase):

    def metrics_daemon(self, **settings):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        d = self.daemon(metrics_listen="127.0.0.1:%d" % self.port, **settings)
        d.wait_log("metrics endpoint on http://127.0.0.1:%d/metrics" % self.port)
        return d

    def scrape(self):
        status, headers, body = http(self.base + "/metrics")
        self.assertEqual(status, 200, body)
        self.assertEqual(headers["Content-Type"], "text/plain; version=0.0.4")
        return body

    def test_scrape_parses_with_the_eight_metrics_and_the_daemons_own(self):
        d = self.metrics_daemon(concurrency=2, handlers=[
            {"class": "Ok", "command": handler("ok")},
            {"class": "Fail", "command": handler("fail")},
            {"class": "Slow", "command": handler("slow", 30), "timeout": 0.5,
             "kill_grace": 0.5}])
        # Queues the daemon does not read, to see the per-queue metrics.
        self.r.sadd(b"cogworker:queues", b"b", b"a")
        self.r.lpush(b"cogworker:queue:a", job("X", queue="a"), job("X", queue="a"))
        for cls, extra in (("Ok", {}), ("Fail", {}), ("Fail", {"retry": False}),
                           ("Slow", {})):
            self.push(job(cls, **extra))
        wait_for(lambda: len(d.log_lines("done: ")) + len(d.log_lines("fail: ")) >= 4,
                 timeout=15, message="four jobs settled")
        wait_for(lambda: self.r.llen(b"cogworker:inprogress:" + d.identity.encode()) == 0)

        # The processed counter is flushed once a second (src/batch.c): scrape once it
        # holds every success.
        wait_for(lambda: int(self.r.get(b"cogworker:stats:processed") or 0)
                 == len(d.log_lines("done: ")), timeout=3, message="the processed counter")
        body = self.scrape()
        types, samples = parse_prometheus(body)
        # What promtool check metrics would say (lint_prometheus): nothing; every metric
        # has its HELP line
        self.assertEqual(lint_prometheus(body), [])
        self.assertNotIn("(undocumented)", body)
        self.assertEqual(body.count("# HELP "), body.count("# TYPE "))
        self.assertIn("# HELP cogworker_queue_size Jobs waiting on each queue.\n"
                      "# TYPE cogworker_queue_size gauge\n", body)
        for name, typ in EIGHT.items():
            self.assertEqual(types.get(name), typ, name)
        self.assertEqual(sample(samples, "cogworker_processed_total"),
                         int(self.r.get(b"cogworker:stats:processed")))
        self.assertEqual(sample(samples, "cogworker_failed_total"),
                         int(self.r.get(b"cogworker:stats:failed")))
        self.assertEqual(sample(samples, "cogworker_retry_size"), self.r.zcard(b"cogworker:retry"))
        self.assertEqual(sample(samples, "cogworker_dead_size"), self.r.zcard(b"cogworker:dead"))
        self.assertEqual(sample(samples, "cogworker_scheduled_size"), 0)
        self.assertEqual(sample(samples, "cogworker_busy_workers"), 0)
        self.assertEqual(sample(samples, "cogworker_queue_size", queue="a"), 2)
        self.assertEqual(sample(samples, "cogworker_queue_size", queue="b"), 0)
        self.assertLess(body.index('cogworker_queue_size{queue="a"}'),
                        body.index('cogworker_queue_size{queue="b"}'))
        lat = re.search(r'^cogworker_queue_latency_seconds\{queue="a"\} (\S+)$', body, re.M)
        self.assertRegex(lat.group(1), r"^\d+\.\d{3}$")

        # The daemon's own counters.
        self.assertEqual(sample(samples, "cogworkerd_jobs_total", outcome="succeeded"), 1)
        self.assertEqual(sample(samples, "cogworkerd_jobs_total", outcome="retried"), 2)
        self.assertEqual(sample(samples, "cogworkerd_jobs_total", outcome="dead"), 1)
        self.assertEqual(sample(samples, "cogworkerd_jobs_total", outcome="discarded"), 0)
        self.assertEqual(sample(samples, "cogworkerd_handler_timeouts_total"), 1)
        for name in ("cogworkerd_redis_reconnects_total", "cogworkerd_orphans_recovered_total",
                     "cogworkerd_keys_quarantined_total", "cogworkerd_cron_slots_fired_total",
                     "cogworkerd_cron_slots_skipped_total"):
            self.assertEqual(types.get(name), "counter", name)
        self.assertEqual(types["cogworkerd_job_run_seconds"], "histogram")
        buckets = [(l["le"], v) for n, l, v in samples if n == "cogworkerd_job_run_seconds_bucket"]
        self.assertEqual(buckets[-1][0], "+Inf")
        bounds = [float(le) for le, _ in buckets]
        self.assertEqual(bounds, sorted(bounds))
        counts = [v for _, v in buckets]
        self.assertEqual(counts, sorted(counts))       # cumulative
        self.assertEqual(counts[-1], sample(samples, "cogworkerd_job_run_seconds_count"))
        self.assertEqual(counts[-1], 4)
        self.assertGreaterEqual(sample(samples, "cogworkerd_job_run_seconds_sum"), 0.5)
        self.assertEqual(sample(samples, "cogworkerd_redis_up"), 1)
        self.assertEqual(sample(samples, "cogworkerd_concurrency"), 2)
        self.assertEqual(sample(samples, "cogworkerd_busy"), 0)
        self.assertEqual(sample(samples, "cogworkerd_quiet"), 0)

        try:
            from prometheus_client.parser import text_string_to_metric_families
        except ImportError:
            pass    # python3-prometheus-client (tools/deps.sh) adds this second opinion
        else:
            fams = {f.name: f for f in text_string_to_metric_families(body)}
            self.assertEqual(fams["cogworker_processed"].type, "counter")
            self.assertEqual(fams["cogworker_queue_size"].type, "gauge")
            self.assertEqual(fams["cogworkerd_job_run_seconds"].type, "histogram")

        # `cogworkerctl metrics` prints the same eight (one implementation).
        ctl = subprocess.run([os.path.join(build_dir(), "cogworkerctl"), "metrics"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict(os.environ, REDIS_URL=self.server.url), timeout=30)
        if ctl.returncode == 0 and ctl.stdout.startswith("# TYPE"):
            ctl_types, _ = parse_prometheus(ctl.stdout)
            self.assertEqual(ctl_types, EIGHT)
            def strip(lines):
                return [re.sub(r"^(cogworker_queue_latency_seconds\{[^}]*\}) \S+$", r"\1", l)
                        for l in lines]
            ctl_lines = ctl.stdout.splitlines()
            self.assertNotIn("# HELP", ctl.stdout)      # cogworker's exposition, exactly
            served = [l for l in body.splitlines() if not l.startswith("# HELP ")]
            self.assertEqual(strip(ctl_lines), strip(served[:len(ctl_lines)]))

        # Other paths and methods.
        self.assertEqual(http(self.base + "/nope")[0], 404)
        status, headers, index = http(self.base + "/")
        self.assertEqual(status, 200)
        self.assertTrue(headers["Content-Type"].startswith("text/plain"))
        self.assertIn("\n/metrics  Prometheus metrics", index)
        self.assertIn("\n/healthz  200 \"ok\"", index)
        self.assertIn(d.identity, index)
        self.assertEqual(http(self.base + "/metrics", method="POST")[0], 405)
        self.assertEqual(d.stop(), 0)

    def test_healthz_flips_while_redis_is_away(self):
        d = self.metrics_daemon(heartbeat_interval=1,
                                redis={"command_timeout": 0.5, "connect_timeout": 0.5})
        status, _, body = http(self.base + "/healthz")
        self.assertEqual((status, body), (200, "ok\n"))

        self.server.pause()             # SIGSTOP: connections hang, commands time out
        try:
            st = wait_for(lambda: (lambda r: r if r[0] == 503 else None)(
                http(self.base + "/healthz")), timeout=10, message="503 while paused")
            self.assertIn("redis:", st[2])
            # /metrics still answers, without the eight, with redis_up 0.
            body = self.scrape()
            types, samples = parse_prometheus(body)
            self.assertEqual(sample(samples, "cogworkerd_redis_up"), 0)
            self.assertNotIn("cogworker_processed_total", types)
        finally:
            self.server.resume()
        wait_for(lambda: http(self.base + "/healthz")[0] == 200, timeout=10,
                 message="200 after resume")

        self.server.restart()           # a real stop and start on the same port
        wait_for(lambda: http(self.base + "/healthz")[0] == 200, timeout=10,
                 message="200 after restart")
        reconnects = sample(parse_prometheus(self.scrape())[1],
                            "cogworkerd_redis_reconnects_total")
        self.assertGreaterEqual(reconnects, 1)
        self.server._reap()
        wait_for(lambda: http(self.base + "/healthz")[0] == 503, timeout=10,
                 message="503 while stopped")
        self.server.start()
        wait_for(lambda: http(self.base + "/healthz")[0] == 200, timeout=10,
                 message="200 after start")
        self.assertEqual(d.stop(), 0)

    def test_poller_and_ticker_counters(self):
        """Orphans recovered, keys quarantined and cron slots fired come from the poller's
        and the ticker's hooks."""
        # A dead process's in-progress job (no presence, last beat long ago) and a
        # wrong-typed key: the first poll recovers the one and quarantines the other.
        ghost = b"ghost-host:1:0123456789ab"
        orphan = job("Ok")
        self.r.lpush(b"cogworker:inprogress:" + ghost, orphan)
        self.r.sadd(b"cogworker:inprogress_identities", ghost)
        self.r.hset(b"cogworker:last_beat", ghost, int(time.time()) - 3600)
        self.r.set(b"cogworker:schedule", b"not a zset")
        d = self.metrics_daemon(tick_interval=1, handlers=[
            {"class": "Ok", "command": handler("ok")},
            {"class": "Tick", "command": handler("ok")}])
        d.wait_log("done: Ok jid=%s" % json.loads(orphan)["jid"], timeout=15)
        d.settings["periodic"] = [{"cron": "* * * * * *", "class": "Tick"}]
        d.write_conf()
        d.signal(signal.SIGHUP)
        d.wait_log("done: Tick", timeout=15)

        def counters():
            _, samples = parse_prometheus(self.scrape())
            return {n: v for n, l, v in samples if n.startswith("cogworkerd_")
                    and n.endswith("_total") and not l}
        c = wait_for(lambda: (lambda c: c if c["cogworkerd_cron_slots_fired_total"] >= 1
                              else None)(counters()), timeout=10, message="a fired slot")
        self.assertEqual(c["cogworkerd_orphans_recovered_total"], 1)
        self.assertEqual(c["cogworkerd_keys_quarantined_total"], 1)
        self.assertEqual(d.stop(), 0)

    def test_no_listener_when_off(self):
        port = free_port()
        d = self.daemon()
        with self.assertRaises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        self.assertFalse(d.log_lines("metrics endpoint"))
        self.assertEqual(d.stop(), 0)

    def test_unusable_address_is_logged_and_the_daemon_runs_on(self):
        blocker = socket.socket()
        blocker.bind(("127.0.0.1", 0))
        blocker.listen(1)
        self.addCleanup(blocker.close)
        port = blocker.getsockname()[1]
        d = self.daemon(metrics_listen="127.0.0.1:%d" % port,
                        handlers=[{"class": "Ok", "command": handler("ok")}])
        self.assertTrue(d.log_lines("metrics endpoint: can't listen on 127.0.0.1:%d" % port))
        payload = job("Ok")
        self.push(payload)
        d.wait_log("done: Ok jid=%s" % json.loads(payload)["jid"])
        self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: MIT
"""Redis Sentinel (doc/behaviours.md SN-1 to SN-5; doc/design.md "Redis"; doc/protocol.md
§7.11, §7.24, §7.27): one primary, one replica and three sentinels on loopback ports
(sentinelkit.py), every server with a password, the daemons on db 3.

The failover tests run two daemons under a steady stream of jobs from a producer that asks
the sentinels before each push, then fail over, the gentle way (SENTINEL FAILOVER: the old
primary stays up and writable until the sentinels reconfigure it, about 10 s later) and the
hard way (SIGKILL of the primary). They check that the daemons follow within a few
seconds, keep running jobs, that every job the new primary acknowledged runs (those pushed
after the daemons followed: exactly once), and that nothing acknowledged before the
failover began is lost. They print what it cost ("figures: ..." on stderr): time until a
sentinel named the new primary, until every daemon connection had moved, jobs lost and
jobs run twice. COGWORKERD_SENTINEL_ROUNDS=N repeats each failover N times (default 1).
SentinelOverTLS does the gentle failover again with everything in TLS (SN-5).

Run: python3 tests/integration/run.py test_sentinel
"""

import collections
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Daemon, binary, handler, stop_daemons, wait_for  # noqa: E402
from sentinelkit import (DATA_PASSWORD, DB, MASTER, QUEUE, SENTINEL_PASSWORD,  # noqa: E402
                         Producer, SentinelSet, daemon_clients)
from tlskit import PKI  # noqa: E402

ROUNDS = int(os.environ.get("COGWORKERD_SENTINEL_ROUNDS", "1"))
HANDLERS = [{"class": "Ok", "command": handler("slow", 0.2)}]
# Short intervals: every thread makes a call at least each second, and strays are looked at
# each second, so what a failover leaves behind is settled within the test.
FAST = {"heartbeat_interval": 1, "poll_interval": 1, "tick_interval": 1,
        "orphan_check_interval": 1}
FOLLOW_BOUND = 10.0     # seconds after the switch: generous, the machine is shared


class SentinelCase(unittest.TestCase):

    def sentinel_set(self):
        return SentinelSet()

    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="cw-sentinel-")
        self.addCleanup(shutil.rmtree, self.workdir, True)
        self.s = self.sentinel_set()
        self.addCleanup(self.s.stop)
        self.daemons = []
        self.addCleanup(self._kill_daemons)

    def _kill_daemons(self):
        stop_daemons(self.daemons)

    def daemon(self, redis_extra=None, **settings):
        s = dict(FAST, concurrency=3, handlers=[dict(h) for h in HANDLERS])
        s.update(settings)
        d = Daemon(self.s.servers[self.s.primary_port()], self.workdir, url=self.s.url,
                   redis=self.s.conf(**(redis_extra or {})), **s)
        self.daemons.append(d)
        d.start()
        return d

    def runs(self):
        try:
            with open(os.path.join(self.workdir, "runs")) as f:
                return collections.Counter(f.read().split())
        except FileNotFoundError:
            return collections.Counter()

    def ctl(self, conf, *args):
        env = dict(os.environ)
        env.pop("REDIS_URL", None)
        return subprocess.run([binary("cogworkerctl"), "-c", conf] + list(args),
                              capture_output=True, text=True, timeout=30, env=env)

    # -- SN-1

    def test_sn1_discovery_credentials_db_and_ctl(self):
        pwfile = os.path.join(self.workdir, "sentinel.pw")
        with open(pwfile, "w") as f:
            f.write(SENTINEL_PASSWORD + "\n")
        d = self.daemon(redis_extra={"sentinel_password": "",
                                     "sentinel_password_file": pwfile})
        banner = d.log_lines("started, identity=")[0]
        self.assertIn("redis=sentinel://%s/%s/%d" % (",".join(self.s.addresses), MASTER, DB),
                      banner)
        primary = self.s.primary_port()
        d.wait_log("Redis Sentinel: the primary of %s is 127.0.0.1:%d" % (MASTER, primary))
        # cogworkerctl reads the same settings: a push lands in db 3 of the primary.
        p = self.ctl(d.conf_path, "push", "Ok")
        self.assertEqual(p.returncode, 0, p.stderr)
        jid = p.stdout.strip()
        wait_for(lambda: self.runs()[jid] == 1, timeout=10, message="the pushed job to run")
        c = self.s.client(primary)
        self.addCleanup(c.close)
        wait_for(lambda: c.get(b"cogworker:stats:processed") == b"1", timeout=5,
                 message="processed 1 in db 3")
        c0 = self.s.client(primary)
        c0.select(0)
        self.addCleanup(c0.close)
        self.assertEqual(c0.dbsize(), 0)
        p = self.ctl(d.conf_path, "stats", "--json")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('"processed":1', p.stdout.replace(" ", ""))
        for secret in (DATA_PASSWORD, SENTINEL_PASSWORD):
            self.assertNotIn(secret, d.log())
        # No sentinel answering: cogworkerctl says which it asked, exit 2.
        bad = os.path.join(self.workdir, "bad.conf")
        with open(bad, "w") as f:
            f.write('redis = { url = "%s"; sentinels = [ "127.0.0.1:1" ]; master_name = "%s"; '
                    'connect_timeout = 1.0; };\n' % (self.s.url, MASTER))
        p = self.ctl(bad, "stats")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no primary of %s found: sentinel 127.0.0.1:1: " % MASTER, p.stderr)
        d.stop()

    # -- SN-2, SN-3: failovers under a stream of jobs

    def stream_through(self, kind):
        """Two daemons, a producer, ROUNDS failovers of `kind`; returns the figures."""
        ds = [self.daemon(), self.daemon()]
        producer = Producer(self.s, rate=25)
        producer.start()
        self.addCleanup(producer.stop)
        wait_for(lambda: sum(self.runs().values()) >= 20, timeout=20,
                 message="jobs running before the failover")
        figures = []
        starts = []             # (monotonic time the failover began, old port)
        for rnd in range(ROUNDS):
            if rnd:
                self.ready_again(kind, figures[-1])
            old = self.s.primary_port()
            oc = self.s.client(old)
            # The threads that call Redis all the time: fetchers, manager, poller,
            # subscriber. The ticker without periodic entries calls only at start, so its
            # connection moves at its next call, whenever that is.
            base = sum(d.settings["concurrency"] + 3 for d in ds)
            t0 = time.monotonic()
            starts.append((t0, old))
            if kind == "failover":
                old, new, took = self.s.failover()
            else:
                oc.close()
                old, new, took = self.s.kill_primary()
            t_switch = t0 + took
            nc = self.s.client(new)
            # Followed: no daemon connection left on a live old primary; after a kill, one
            # on the new primary per thread that keeps calling.
            try:
                if kind == "failover":
                    wait_for(lambda: not daemon_clients(oc), timeout=FOLLOW_BOUND,
                             interval=0.02, message="every daemon connection off the old primary")
                else:
                    wait_for(lambda: len(daemon_clients(nc)) >= base, timeout=FOLLOW_BOUND,
                             interval=0.02, message="every daemon connection on the new primary")
            except AssertionError as e:
                left = daemon_clients(oc if kind == "failover" else nc)
                raise AssertionError("round %d: %s (base %d): %r\n%s" % (
                    rnd, e, base, left, "\n".join(d.log()[-3000:] for d in ds)))
            if kind == "failover":
                oc.close()
            t_follow = time.monotonic()
            # Jobs keep running: the next ones the new primary takes run.
            later = lambda: [a[0] for a in producer.acked if a[1] == new and a[2] > t_follow]
            wait_for(lambda: len(later()) >= 10 and all(self.runs()[j] for j in later()[:10]),
                     timeout=20, message="jobs pushed after the follow to run")
            nc.close()
            figures.append({"old": old, "new": new, "switch": took,
                            "follow": t_follow - t_switch, "t0": t0, "t_follow": t_follow})
        producer.stop()
        final = self.s.primary_port()
        fc = self.s.client(final)
        self.addCleanup(fc.close)
        acked = list(producer.acked)
        wait_for(lambda: all(self.runs()[a[0]] for a in acked if a[1] == final), timeout=30,
                 message="every job the final primary acknowledged to run")
        wait_for(lambda: fc.llen(QUEUE) == 0 and not any(
            fc.llen(k) for k in fc.keys(b"cogworker:inprogress:*")), timeout=30,
            message="the queue and the in-progress lists empty")
        for d in ds:
            self.assertEqual(d.stop(), 0)
        return self.report(kind, figures, acked, producer.refused, final)

    def ready_again(self, kind, last):
        """Back to a primary with a replica in sync before the next round."""
        if kind == "kill":
            self.s.restart_as_replica(last["old"], last["new"])
        self.s.wait_ready(last["new"], timeout=60)

    def report(self, kind, figures, acked, refused, final):
        runs = self.runs()
        when = {a[0]: a for a in acked}
        lost = [a for a in acked if not runs[a[0]]]
        dup = [j for j, n in runs.items() if n > 1]

        def near(t):
            """Seconds from the failover nearest to t began (negative: before it)."""
            return min((t - f["t0"] for f in figures), key=abs)
        # Each loss or second run, by when the producer got its acknowledgement.
        details = ["lost %s acked by %d %+.2fs" % (a[0], a[1], near(a[2])) for a in lost]
        details += ["twice %s acked by %d %+.2fs" % (j, when[j][1], near(when[j][2]))
                    for j in dup if j in when]
        sys.stderr.write("figures: kind=%s rounds=%d switch=%s follow=%s pushed=%d refused=%d "
                         "lost=%d run_twice=%d%s\n" % (
                             kind, len(figures),
                             "/".join("%.2f" % f["switch"] for f in figures),
                             "/".join("%.2f" % f["follow"] for f in figures),
                             len(acked), len(refused), len(lost), len(dup),
                             "".join("\n  " + d for d in details)))
        # Nothing acknowledged before a failover began may be lost (loopback replication
        # takes well under the margin); all the final primary took runs.
        margin = 0.25
        for a in lost:
            self.assertNotEqual(a[1], final, "job %s acknowledged by the final primary" % a[0])
            self.assertTrue(any(f["t0"] - margin <= a[2] <= f["t_follow"] for f in figures),
                            "job %s lost outside a failover window" % a[0])
        # Once the daemons followed, the new primary's jobs run exactly once, until the
        # next failover may touch them (jobs queued or running when it begins).
        for k, f in enumerate(figures):
            until = figures[k + 1]["t0"] - 0.5 if k + 1 < len(figures) else float("inf")
            after = [a[0] for a in acked if a[1] == f["new"] and f["t_follow"] < a[2] < until]
            self.assertTrue(after)
            self.assertEqual([j for j in after if runs[j] != 1], [])
        return figures, lost, dup

    def test_sn2_sentinel_failover_daemons_follow(self):
        self.stream_through("failover")

    def test_sn3_primary_killed_daemons_follow(self):
        self.stream_through("kill")


class SentinelOverTLS(SentinelCase):
    """SN-5: servers, replication and sentinels in TLS only (tlskit), client certificates
    required everywhere; the daemons reach the sentinels with sentinel_tls and the primary
    with rediss://."""

    def sentinel_set(self):
        self.pki = PKI()
        self.addCleanup(self.pki.stop)
        return SentinelSet(tls=self.pki)

    def test_sn5_failover_over_tls(self):
        d = self.daemon()
        self.assertIn("redis=sentinel+tls://%s/%s/%d" % (",".join(self.s.addresses), MASTER, DB),
                      d.log_lines("started, identity=")[0])
        p = self.ctl(d.conf_path, "push", "Ok")
        self.assertEqual(p.returncode, 0, p.stderr)
        wait_for(lambda: self.runs()[p.stdout.strip()] == 1, timeout=10,
                 message="the job cogworkerctl pushed to run")
        d.stop()
        self.daemons.remove(d)
        self.stream_through("failover")

    # The plain class's tests are not run again here.
    test_sn1_discovery_credentials_db_and_ctl = None
    test_sn2_sentinel_failover_daemons_follow = None
    test_sn3_primary_killed_daemons_follow = None


if __name__ == "__main__":
    unittest.main()

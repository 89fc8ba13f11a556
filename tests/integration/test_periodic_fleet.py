# SPDX-License-Identifier: MIT
"""Periodic jobs across processes and over time (issue 4's numbers; doc/behaviours.md PT-16,
PT-22, PT-27; doc/protocol.md §7.16, §9 "Periodic").

- Three daemons with a per-second entry for 30 s: every second's slot runs exactly once.
- An `until_executed` entry whose job outlives several slots: never two runs at once.
- A daemon down across three slots: exactly one catch-up run on restart.
- The per-entry backoff (5, 10, 20 s …, reset by a success) and the 15 s blocked grace.
- `cogworkerd --check` rejects a bad cron naming the file and line.

The slot numbers of the runs come from tests/handlers/slot, which writes each run's
`periodic_slot` with its start and end times.

Run: python3 tests/integration/run.py test_periodic_fleet
"""

import os
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, handler, wait_for  # noqa: E402
from observe import Monitor  # noqa: E402
from periodickit import (PeriodicTestCase, creation_slots, entry, every_slot, pjid,  # noqa: E402
                         running_key, slot_lock_key)


def report(msg):
    sys.stderr.write("\n    [periodic] %s\n" % msg)
    sys.stderr.flush()


def is_claim(e, p):
    """A MONITOR entry that is our daemon calling CLAIM for pjid p (KEYS[1] = its lock)."""
    a = e[2]
    return (a[0].upper() in (b"EVALSHA", b"EVAL") and len(a) > 3 and a[2] == b"3"
            and a[3] == running_key(p))


def claim_times(mon, p):
    """Times of the CLAIM calls for p. A call is an EVALSHA, and an EVAL only after that
    EVALSHA was answered NOSCRIPT: an EVAL right after an EVALSHA of the same connection is
    the same call. (Telling them apart by time does not do: a claim that ends a backoff and
    the next second's can be 90 ms apart.)"""
    out, last = [], {}
    for e in mon.entries():
        if not is_claim(e, p):
            continue
        cmd = e[2][0].upper()
        retried = cmd == b"EVAL" and last.get(e[1]) == b"EVALSHA"
        last[e[1]] = cmd
        if not retried:
            out.append(e[0])
    return out


def stop_all(daemons):
    """TERM every daemon at once and wait for all of them."""
    threads = [threading.Thread(target=d.stop) for d in daemons]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


class ExactlyOnce(PeriodicTestCase):

    def test_three_daemons_every_second_slot_exactly_once(self):
        cron = "* * * * * *"
        p = pjid(cron, "P", "[]")
        settings = dict(queues=["default"], concurrency=2,
                        handlers=[{"class": "P", "command": handler("slot")}])
        ds = [self.periodic_daemon([entry(cron, "P")], **settings) for _ in range(3)]
        started = time.time()
        time.sleep(30)
        stopping = time.time()
        stop_all(ds)
        stopped = time.time()
        runs = self.slots_file(ds[0])           # one runs file for the work dir
        slots = sorted(r[0] for r in runs)
        distinct = sorted(set(slots))
        first, last = distinct[0], distinct[-1]
        expected = list(range(first, last + 1))
        missing = sorted(set(expected) - set(distinct))
        dups = len(slots) - len(distinct)
        report("3 daemons, `* * * * * *`, %.1f s: %d slot(s) fired, %d expected "
               "(%d..%d), %d missing, %d duplicate run(s); pushed jobs not run: %d"
               % (stopped - started, len(distinct), len(expected), first, last, len(missing),
                  dups, self.r.llen(b"cogworker:queue:default")))
        self.assertEqual(dups, 0)
        self.assertEqual(missing, [])
        # The first run is the catch-up of the slot before the first tick, the last is
        # the slot before the stop: about one per second of the run.
        self.assertLessEqual(first, int(started) + 2)
        self.assertGreaterEqual(last, int(stopping) - 2)
        self.assertGreaterEqual(len(distinct), 28)
        # Every pushed job ran (nothing left queued or in progress after the stops).
        self.assertEqual(self.r.llen(b"cogworker:queue:default"), 0)
        self.assertEqual(len(slots), len(runs))
        # No leader: the per-slot NX lock of a fired slot is there for whoever came second.
        self.assertLessEqual(self.r.ttl(slot_lock_key(p, last)), 20)

    def test_until_executed_job_outliving_its_slots_never_overlaps(self):
        cron = "*/2 * * * * *"
        p = pjid(cron, "P", "[]")
        settings = dict(queues=["default"], concurrency=2,
                        handlers=[{"class": "P", "command": handler("slot", 5)}])
        ds = [self.periodic_daemon([entry(cron, "P", unique=True)], **settings)
              for _ in range(2)]
        time.sleep(24)
        runs = sorted(self.slots_file(ds[0]), key=lambda r: r[2])
        report("`*/2 * * * * *` until_executed, 5 s runs, 2 daemons x 2 fetchers, 24 s: "
               "%d run(s), slots %s" % (len(runs), [r[0] for r in runs]))
        self.assertGreaterEqual(len(runs), 3)
        for a, b in zip(runs, runs[1:]):
            self.assertGreaterEqual(b[2], a[3], "run of slot %d started before the run of "
                                    "slot %d ended" % (b[0], a[0]))
        slots = [r[0] for r in runs]
        self.assertEqual(slots, sorted(set(slots)))
        # Each run is for a slot that came while (or after) the previous one ran: the
        # slots in between were blocked, not queued up.
        for a, b in zip(runs, runs[1:]):
            self.assertGreater(b[0], a[0] + 2)
        stop_all(ds)

    def test_daemon_down_across_three_slots_catches_up_once(self):
        cron = "*/3 * * * * *"
        p = pjid(cron, "P", "[]")
        d = self.periodic_daemon([entry(cron, "P")])
        self.wait_jobs(p, n=2, timeout=10)
        d.stop()
        before = [j["periodic_slot"] for j in self.jobs_of(p)]
        last = before[-1]
        wait_for(lambda: every_slot(3, time.time()) >= last + 12, timeout=20,
                 message="three slots to pass")
        self.periodic_daemon([entry(cron, "P")])
        js = self.wait_jobs(p, n=len(before) + 1, timeout=10)
        new = js[len(before)]
        missed = (new["periodic_slot"] - last) // 3 - 1
        after = [j["periodic_slot"] for j in self.jobs_of(p)]
        report("`*/3 * * * * *` down across %d slot(s): catch-up run for slot %d, slots "
               "before %s, after %s" % (missed, new["periodic_slot"], before[-2:],
                                        after[len(before):]))
        self.assertGreaterEqual(missed, 3)
        self.assertIn(new["periodic_slot"], creation_slots(3, new))
        self.assertEqual([s for s in after if last < s < new["periodic_slot"]], [])
        self.assertEqual(len(after), len(set(after)))


class Backoff(PeriodicTestCase):

    def test_pt22_errors_back_off_5_10_20_and_a_success_resets(self):
        url = self.guard_off_url()
        q = b"cogworker:queue:default"
        cron = "* * * * * *"
        p = pjid(cron, "P", "[]")
        self.r.set(q, b"a string")
        with Monitor(self.server) as mon:
            d = self.periodic_daemon([entry(cron, "P")], url=url, tick_interval=0.5)
            claims = lambda: claim_times(mon, p)   # noqa: E731

            def own(cmd):
                """Server times of this test's own `cmd q` (the monitor orders them among
                the daemon's commands exactly as Redis ran them)."""
                return [e[0] for e in mon.entries()
                        if e[2][0].upper() == cmd and len(e[2]) > 1 and e[2][1] == q]

            def fixed_then_broken_again():
                """(deleted at, set again at) once both are on the monitor."""
                dels, sets = own(b"DEL"), own(b"SET")
                return (dels[-1], sets[-1]) if dels and sets and sets[-1] > dels[-1] else None
            wait_for(lambda: len(claims()) >= 3, timeout=25, message="three failed claims")
            self.r.delete(q)
            # The entry is per-second: after the success the next slots push too, so wait
            # for the first push, not for exactly one job (a test that looks a second late
            # would never see one).
            wait_for(lambda: self.r.exists(q) and self.r.type(q) == b"list", timeout=30,
                     message="the push to succeed")
            self.r.set(q, b"a string")
            t_del, t_set = wait_for(fixed_then_broken_again, timeout=3,
                                    message="the DEL and SET on the monitor")
            try:
                wait_for(lambda: len([x for x in claims() if x > t_set]) >= 2, timeout=15,
                         message="two claims after the key broke again")
            except AssertionError:
                raise AssertionError("claims at %s, deleted %.3f, set %.3f; log:\n%s" % (
                    claims(), t_del, t_set, d.log()[-6000:]))
            c = claims()

            def pushes_seen():
                return [e[0] for e in mon.entries()
                        if e[2][0].upper() == b"LPUSH" and e[2][1] == q]
            # The push of the last claim may still be on its way to the monitor (a slow
            # build): give it a moment rather than count it missing.
            wait_for(lambda: len(pushes_seen()) >= len(c), timeout=3,
                     message="a push after each won claim")
            pushes = pushes_seen()
        gaps = [round(b - a, 2) for a, b in zip(c, c[1:])]
        # A claim's push succeeded when it ran while the key was a list: between the DEL
        # and the SET (a claim just before the SET may push just after it, and fail).
        ok = [t_del < next(x for x in pushes if x >= t) < t_set for t in c]
        report("claim spacing (s): %s; pushed: %s" % (gaps, "".join(".+"[o] for o in ok)))
        # fail, +5 fail, +10 fail, +20 success (the key was deleted meanwhile)
        self.assertEqual(ok[:4], [False, False, False, True])
        self.assertAlmostEqual(gaps[0], 5, delta=0.7)
        self.assertAlmostEqual(gaps[1], 10, delta=0.7)
        self.assertAlmostEqual(gaps[2], 20, delta=0.7)
        # Successes every second until the key broke again; then the first failure comes
        # a second after the last success, and the next claim 5 s after it (reset).
        k = ok.index(False, 3)
        self.assertEqual(ok[3:k], [True] * (k - 3))
        self.assertLess(gaps[k - 1], 1.2)
        self.assertAlmostEqual(gaps[k], 5, delta=0.7)
        # Every push follows a won claim at once: nothing is pushed while backing off.
        self.assertEqual(len(pushes), len(c))
        for t in pushes:
            self.assertTrue(any(0 <= t - x < 0.5 for x in c), t)
        self.assertGreaterEqual(len(d.log_lines("Periodic tick: %s failed" % p)), 4)


class BlockedGrace(PeriodicTestCase):

    def test_pt27_slot_blocked_past_the_grace_is_skipped(self):
        cron = "*/30 * * * * *"
        p = pjid(cron, "P", "[]")
        # Start early in a 30 s window, so the grace ends well before the next slot.
        if not 1.5 <= time.time() % 30 <= 5:
            time.sleep((31.5 - time.time() % 30) % 30)
        self.r.set(running_key(p), b"old-run")
        d = self.periodic_daemon([entry(cron, "P", unique=True)])
        slot = every_slot(30, time.time())
        d.wait_log("skipped", timeout=20)
        self.assertLess(time.time(), slot + 28)
        self.r.delete(running_key(p))
        time.sleep(2)
        self.assertEqual(self.jobs_of(p), [])
        self.assertIsNone(self.r.get(b"periodic:last_slot:" + p.encode()))
        js = self.wait_jobs(p, timeout=32)
        self.assertEqual(js[0]["periodic_slot"], slot + 30)
        self.assertEqual(len(self.jobs_of(p)), 1)


class Check(PeriodicTestCase):

    def test_check_rejects_a_bad_cron_naming_file_and_line(self):
        path = os.path.join(self.workdir, "bad.conf")
        with open(path, "w") as f:
            f.write('redis = { url = "redis://127.0.0.1:1/0"; };\n'
                    'periodic = (\n'
                    '  { class = "P"; args = "[]";\n'
                    '    cron = "61 * * * *"; }\n'
                    ');\n')
        out = subprocess.run([binary("cogworkerd"), "--check", "-c", path],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        text = out.stdout.decode()
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("%s:4:" % path, text)
        self.assertIn("61", text)
        # The same file with a valid cron passes.
        with open(path, "w") as f:
            f.write('redis = { url = "redis://127.0.0.1:1/0"; };\n'
                    'tick_interval = 0.25;\n'
                    'periodic = ( { class = "P"; cron = "*/5 * * * * * Europe/Berlin"; } );\n')
        out = subprocess.run([binary("cogworkerd"), "--check", "-c", path],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=10)
        self.assertEqual(out.returncode, 0, out.stdout)


if __name__ == "__main__":
    unittest.main()

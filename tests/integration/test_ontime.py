# SPDX-License-Identifier: MIT
"""On time (issue 12; doc/behaviours.md group OT; doc/protocol.md §7.9, §7.14, §7.16):
scheduled, retried and cron jobs start at their time, pause means pause, and stop and quiet
reach fetchers blocked in Redis at once.

What a user sees: the `start:` log line of a job (its timestamp, to the millisecond) against
the time it was due; which jobs of a paused queue ran (the test handlers' runs file) and
what stays on the queue; how long a stop takes; what `--check` prints. The bounds are
generous (a loaded CI machine), the figures themselves are `make bench`'s.

Default settings unless a test says otherwise: `poll_interval` 2, the catch-up look
(`tick_interval`) 1 s. Classes with `redis_args` run on a server with keyspace
notifications on, the others on one without (the daemon never changes either).

Run: python3 tests/integration/run.py test_ontime
"""

import calendar
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, binary, handler, job, wait_for  # noqa: E402
from periodickit import SCHEDULE_HASH, pjid  # noqa: E402

SCHEDULE = b"cogworker:schedule"
RETRY = b"cogworker:retry"
PAUSED = b"cogworker:paused_queues"
LOG_TS = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?Z ")
OK = [{"class": "T", "command": handler("ok")}]


def qkey(q):
    return ("cogworker:queue:" + q).encode()


def log_time(line):
    m = LOG_TS.match(line)
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + float(m.group(7) or 0)


def jid_of(payload):
    return json.loads(payload)["jid"]


def report(msg):
    sys.stderr.write("\n    [on time] %s\n" % msg)


class OnTimeCase(DaemonTestCase):

    def started_at(self, d, jid, timeout=10):
        line = d.wait_log("start: T jid=%s" % jid, timeout=timeout)
        return log_time(line)

    def lateness(self, d, set_key, leads):
        """Write one entry per lead (seconds before it is due), in order, into set_key;
        return how late each one's handler started."""
        due = {}
        for lead in leads:
            extra = {"retry_count": 1, "error_class": "X", "error_message": "y"} \
                if set_key == RETRY else {}
            p = job("T", retry=3, **extra)
            due[jid_of(p)] = time.time() + lead
            self.r.zadd(set_key, {p: due[jid_of(p)]})
        return [self.started_at(d, jid, timeout=max(leads) + 10) - at for jid, at in due.items()]

    def alternating_pushes(self, d, n=8):
        """Push n jobs alternating between q1 and q2, idle in between; their start delays."""
        lat = []
        for i in range(n):
            q = ("q1", "q2")[i % 2]
            p = job("T", queue=q)
            t0 = time.time()
            self.push(p, q)
            lat.append(self.started_at(d, jid_of(p), timeout=5) - t0)
            time.sleep(0.1 + 0.05 * i)
        return lat


class ScheduledOnTime(OnTimeCase):
    """OT-1, OT-2: entries written at least poll_interval before they are due start on time."""

    def test_ot1_job_scheduled_3s_ahead_starts_on_time(self):
        d = self.daemon(handlers=OK)
        d.wait_log("first orphan check completed")
        late = self.lateness(d, SCHEDULE, [3.0, 3.3, 3.7])
        report("scheduled 3 s ahead: lateness %s ms" % ", ".join("%.0f" % (x * 1e3) for x in late))
        for x in late:
            self.assertGreaterEqual(x, -0.05)
            self.assertLess(x, 0.5)

    def test_ot2_retry_is_on_time(self):
        d = self.daemon(handlers=OK)
        d.wait_log("first orphan check completed")
        late = self.lateness(d, RETRY, [3.0, 3.5])
        report("retry 3 s ahead: lateness %s ms" % ", ".join("%.0f" % (x * 1e3) for x in late))
        for x in late:
            self.assertGreaterEqual(x, -0.05)
            self.assertLess(x, 0.5)


class ScheduledWithNotifications(OnTimeCase):
    """OT-3: with keyspace notifications a write is seen at once, so an entry due sooner than
    poll_interval is on time too (here poll_interval 10 would otherwise make it late)."""

    redis_args = ("--notify-keyspace-events", "KEA")

    def test_ot3_entry_due_half_a_second_after_it_is_written(self):
        d = self.daemon(handlers=OK, poll_interval=10)
        d.wait_log("keyspace notifications")
        d.wait_log("first orphan check completed")
        late = self.lateness(d, SCHEDULE, [0.5])
        late += self.lateness(d, RETRY, [0.7])
        report("due 0.5-0.7 s after the write, notifications: %s ms"
               % ", ".join("%.0f" % (x * 1e3) for x in late))
        for x in late:
            self.assertLess(x, 0.5)


class CronOnTime(OnTimeCase):
    """OT-4: a per-second cron fires every second, each slot exactly once, with 3 daemons
    for 20 s, at its second (default catch-up look: slots do not wait for it)."""

    def test_ot4_three_daemons_fire_every_second_once_and_on_time(self):
        entry = {"cron": "* * * * * *", "class": "P"}
        ds = [self.daemon(queues=["other"], periodic=[entry]) for _ in range(3)]
        wait_for(lambda: self.r.llen(qkey("default")) > 0, timeout=15,
                 message="the first slot")
        time.sleep(20)
        end = int(time.time())
        for d in ds:
            self.assertEqual(d.stop(), 0)
        jobs = [json.loads(x) for x in self.r.lrange(qkey("default"), 0, -1)]
        slots = sorted(j["periodic_slot"] for j in jobs)
        first = slots[0]
        self.assertEqual(len(slots), len(set(slots)), "a slot fired twice")
        self.assertEqual(slots, list(range(first, slots[-1] + 1)), "a slot was skipped")
        self.assertGreaterEqual(slots[-1], end - 2)
        self.assertGreaterEqual(len(slots), 20)
        late = sorted(j["created_at"] - j["periodic_slot"] for j in jobs
                      if j["periodic_slot"] > first)
        report("3 daemons, * * * * * *: %d slots, lateness p50 %.1f ms, max %.1f ms"
               % (len(slots), late[len(late) // 2] * 1e3, late[-1] * 1e3))
        self.assertGreaterEqual(late[0], 0)
        self.assertLess(late[-1], 0.5)


class PeriodicQueue(OnTimeCase):
    """OT-5: an entry's `queue`; OT-6: --check warns (not fails) about queues and classes
    this conf does not serve, and the daemon logs the same at start."""

    def test_ot5_entry_with_queue_reports_runs_on_a_daemon_serving_only_reports(self):
        cron = "*/2 * * * * *"
        d = self.daemon(queues=["reports"], concurrency=2,
                        handlers=[{"class": "R", "command": handler("ok")}],
                        periodic=[{"cron": cron, "class": "R", "queue": "reports"}])
        d.wait_log("done: R jid=", timeout=10, count=2)
        self.assertEqual(d.log_lines("which this conf does not read"), [])
        p = pjid(cron, "R", "[]")
        self.assertEqual(json.loads(self.r.hget(SCHEDULE_HASH, p)),
                         {"cron": cron, "class": "R", "retry": 0, "unique": None, "args": [],
                          "queue": "reports"})
        self.assertEqual(self.r.llen(qkey("default")), 0)
        # cogworkerctl periodic run pushes onto the entry's queue as well
        out = subprocess.run([binary("cogworkerctl"), "-c", d.conf_path, "--json", "periodic",
                              "run", p[:12]], capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertEqual(json.loads(out.stdout)["queue"], "reports")

    def check(self, body):
        path = os.path.join(self.workdir, "check.conf")
        with open(path, "w") as f:
            f.write('redis = { url = "redis://127.0.0.1:1/0"; };\n' + body)
        p = subprocess.run([binary("cogworkerd"), "--check", "-c", path],
                           capture_output=True, text=True, timeout=10)
        return p, path

    def test_ot6_check_warns_on_an_unserved_queue_and_an_unresolvable_class(self):
        p, path = self.check('queues = [ "mail", "reports" ];\n'
                             'handlers = ( { class = "A"; command = [ "/bin/true" ]; } );\n'
                             'periodic = (\n'
                             '  { cron = "* * * * *"; class = "A"; },\n'
                             '  { cron = "0 * * * *"; class = "Nobody"; queue = "mail"; }\n'
                             ');\n')
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("configuration OK", p.stdout)
        self.assertIn("%s:5: periodic entry A (* * * * *) puts its jobs on queue 'default', "
                      "which this conf does not read (queues: mail, reports)" % path, p.stderr)
        self.assertIn("%s:6: periodic job class Nobody can't be resolved" % path, p.stderr)
        self.assertEqual(len([l for l in p.stderr.splitlines() if "warning:" in l]), 2, p.stderr)
        # an old conf that sets tick_interval still loads, with a notice
        p, path = self.check("tick_interval = 5;\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("%s:2: tick_interval no longer paces the periodic slots" % path, p.stderr)
        # a good conf: no warning
        p, path = self.check('periodic = ( { cron = "* * * * *"; class = "A"; } );\n'
                             'handlers = ( { class = "A"; command = [ "/bin/true" ]; } );\n')
        self.assertEqual((p.returncode, p.stderr), (0, ""))
        # the daemon logs the same at start
        d = self.daemon(queues=["mail"], handlers=OK,
                        periodic=[{"cron": "0 0 1 1 *", "class": "T", "queue": "reports"}])
        line = d.wait_log("which this conf does not read")
        self.assertIn(" WARN: ", line)
        self.assertIn("queue 'reports'", line)


class PauseRace(OnTimeCase):
    """OT-7: 200 rounds of pause -> an immediate push -> the job stays queued and does not
    start; resume -> it runs within 1 s. Without keyspace notifications the fetcher parked
    on the queue takes the job pushed right after the SADD nearly every round (the race),
    and hands it back."""

    def test_ot7_job_pushed_after_pause_never_starts_200_rounds(self):
        d = self.daemon(handlers=OK, concurrency=4)
        time.sleep(0.5)
        started, resume = 0, []
        for i in range(200):
            self.r.sadd(PAUSED, "default")
            p = job("T")
            self.push(p)
            time.sleep(0.02)
            if d.runs_of(jid_of(p)):
                started += 1
            else:
                wait_for(lambda: self.r.lrange(qkey("default"), 0, -1) == [p.encode()],
                         timeout=2, interval=0.005, message="round %d: the job back on its queue" % i)
            t0 = time.monotonic()
            self.r.srem(PAUSED, "default")
            wait_for(lambda: d.runs_of(jid_of(p)) == 1, timeout=5, interval=0.002,
                     message="round %d: the job after the resume" % i)
            resume.append(time.monotonic() - t0)
        resume.sort()
        report("pause race: %d of 200 started while paused; resume -> run p50 %.0f ms, max %.0f ms"
               % (started, resume[100] * 1e3, resume[-1] * 1e3))
        self.assertEqual(started, 0)
        self.assertLess(resume[-1], 1.0)


class PauseResume(OnTimeCase):
    """OT-8: with `cogworkerctl queues pause` on a server without notifications: a job pushed
    right after it returned does not start, and `queues resume` starts it within 1 s."""

    def ctl(self, d, *args):
        out = subprocess.run([binary("cogworkerctl"), "-c", d.conf_path] + list(args),
                             capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 0, out.stderr)

    def test_ot8_pause_with_cogworkerctl_then_resume_within_a_second(self):
        d = self.daemon(handlers=OK, concurrency=2, queues=["default", "low"])
        time.sleep(0.5)
        for i in range(5):
            self.ctl(d, "queues", "pause", "default")
            p = job("T")
            self.push(p)
            time.sleep(0.3)
            self.assertEqual(d.runs_of(jid_of(p)), 0, "round %d: started while paused" % i)
            self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [p.encode()])
            t0 = time.monotonic()
            self.ctl(d, "queues", "resume", "default")
            wait_for(lambda: d.runs_of(jid_of(p)) == 1, timeout=3, interval=0.01,
                     message="round %d: the job after the resume" % i)
            took = time.monotonic() - t0
            self.assertLess(took, 1.0, "round %d: resume took %.2f s" % (i, took))


class QuietAndStopWhileBlocked(OnTimeCase):
    """OT-9: idle fetchers block in Redis for 30 s; quiet and stop still reach them within a
    second (the waker's CLIENT UNBLOCK)."""

    def blocked_clients(self):
        return [c for c in self.r.client_list() if "b" in c.get("flags", "")]

    def test_ot9_quiet_unblocks_every_fetcher_within_a_second(self):
        d = self.daemon(handlers=OK, concurrency=4, queues=["default", "low"])
        wait_for(lambda: len(self.blocked_clients()) >= 2, timeout=5,
                 message="fetchers parked")
        time.sleep(0.5)
        t0 = time.monotonic()
        self.r.publish("cogworker:signal:" + d.identity, "quiet")
        wait_for(lambda: self.blocked_clients() == [], timeout=1.5, interval=0.01,
                 message="no blocked fetcher after quiet")
        took = time.monotonic() - t0
        p = job("T")
        self.push(p)
        time.sleep(1.0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [p.encode()])
        self.assertEqual(d.runs_of(jid_of(p)), 0)
        report("quiet: fetchers unblocked after %.0f ms" % (took * 1e3))
        self.assertLess(took, 1.0)
        self.r.publish("cogworker:signal:" + d.identity, "resume")
        wait_for(lambda: d.runs_of(jid_of(p)) == 1, timeout=2, message="the job after resume")

    def test_ot9_stop_of_an_idle_daemon_takes_under_a_second(self):
        d = self.daemon(handlers=OK, concurrency=4, queues=["default", "low"])
        wait_for(lambda: len(self.blocked_clients()) >= 2, timeout=5,
                 message="fetchers parked")
        time.sleep(0.5)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(5), 0)
        took = time.monotonic() - t0
        report("stop of an idle daemon: %.0f ms" % (took * 1e3))
        self.assertLess(took, 1.5)
        self.assertIn("stopped", d.log().splitlines()[-1])
        self.assertEqual(self.r.keys(b"cogworker:inprogress:*"), [])


class FewerFetchersThanQueues(OnTimeCase):
    """OT-10: concurrency 1 over two queues starts a job within about
    fetch_idle_max_interval (0.5 s) of its push, on either queue."""

    def test_ot10_within_a_second(self):
        d = self.daemon(handlers=OK, concurrency=1, queues=["q1", "q2"])
        time.sleep(1.0)
        lat = self.alternating_pushes(d)
        report("fewer fetchers: %s ms" % ", ".join("%.0f" % (x * 1e3) for x in lat))
        self.assertLess(max(lat), 1.0)


class FewerFetchersWithNotifications(OnTimeCase):
    """OT-11: the same with keyspace notifications for lists: milliseconds."""

    redis_args = ("--notify-keyspace-events", "KEA")

    def test_ot11_within_milliseconds(self):
        d = self.daemon(handlers=OK, concurrency=1, queues=["q1", "q2"])
        d.wait_log("keyspace notifications")
        time.sleep(1.0)
        lat = self.alternating_pushes(d)
        report("fewer fetchers, notifications: %s ms" % ", ".join("%.0f" % (x * 1e3) for x in lat))
        self.assertLess(max(lat), 0.2)


class StartDelay(OnTimeCase):
    """OT-12 (issue 21, item 3): the reported setup, two daemons at concurrency 4 over
    `default`, `critical` and `limited` with a per-second periodic entry on `default` and no
    keyspace notifications. Right after the start, 40 s jobs are pushed in one LPUSH (as a
    bulk push does), two per daemon; 5 s later a short job must start within the 0.5 s
    promise (2 s here).

    Why two per daemon: each daemon's watcher of `default` takes one at the push and hands
    its queue to the local waiter, which tries before it parks; the try took the second job
    instead, so `default` was left with no watcher while the fetchers on `critical` and
    `limited` sat in their 30 s blocks, and the periodic jobs and the short one waited for
    those blocks to run out (some 24 s after the start). With one job per daemon nothing is
    left for the try to take."""

    def test_ot12_job_pushed_5s_after_long_ones_starts_at_once(self):
        hs = [{"class": "Slow", "command": handler("slow", 40)},
              {"class": "T", "command": handler("ok")},
              {"class": "Tick", "command": handler("ok")}]
        ds = [self.daemon(concurrency=4, queues=["default", "critical", "limited"],
                          handlers=hs, periodic=[{"cron": "* * * * * *", "class": "Tick"}],
                          shutdown_timeout=1)
              for _ in range(2)]
        for d in ds:
            d.wait_log("first orphan check completed")
        time.sleep(3.0)             # the fetchers are parked: the rotations of the start are over
        self.r.lpush(qkey("default"), *[job("Slow", [i]) for i in range(4)])
        wait_for(lambda: sum(len(d.log_lines("start: Slow")) for d in ds) == 4, timeout=5,
                 message="the four long jobs running")
        time.sleep(5)
        p = job("T")
        t0 = time.time()
        self.push(p)
        jid = jid_of(p)

        def started():
            for d in ds:
                lines = d.log_lines("start: T jid=%s" % jid)
                if lines:
                    return log_time(lines[0])
            return None
        at = wait_for(started, timeout=40, interval=0.05, message="the short job's start")
        report("a job pushed 5 s after four 40 s ones on two fresh daemons: started after "
               "%.0f ms" % ((at - t0) * 1e3))
        self.assertLess(at - t0, 2.0)


if __name__ == "__main__":
    unittest.main()

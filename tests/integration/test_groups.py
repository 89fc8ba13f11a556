# SPDX-License-Identifier: MIT
"""GR: fair share, limits per group of a handler's jobs (doc/behaviours.md "GR — Fair share",
doc/protocol.md §7.35): group_by, group_concurrency and group_rate_limit across daemons.

What a user would check: the handlers' own records (tests/handlers/span writes a start and
an end line per run), from which the running jobs of each group at every moment and the
starts per window are computed; when the jobs of a small group start after their push;
that every job ran; what Redis holds (the set-aside lines), the log, and cogworkerctl.

Run: python3 tests/integration/run.py test_groups
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, free_port, handler, job, wait_for  # noqa: E402
from runkit import FAILED, JobTestCase  # noqa: E402
from test_limits import max_overlap  # noqa: E402

GROUPS = "cogworker:groups:"
GROUP_JOBS = "cogworker:group_jobs:"
FAST = {"poll_interval": 0.2, "heartbeat_interval": 1, "process_ttl": 3,
        "orphan_threshold": 4, "orphan_check_interval": 1}


def runs_of(d):
    """[(jid, start, end)] of every run in $RUNS.spans, an end paired with the latest start
    of its job (a run whose end is missing, killed with its daemon, is taken to end 0.3 s
    after it started: its handler sleeps 0.2 s)."""
    runs, open_ = [], {}
    try:
        with open(d.runs + ".spans") as f:
            for line in f:
                kind, _, jid, t = line.split()
                if kind == "S":
                    open_.setdefault(jid, []).append(float(t))
                elif open_.get(jid):
                    runs.append((jid, open_[jid].pop(), float(t)))
    except FileNotFoundError:
        pass
    for jid, starts in open_.items():
        runs += [(jid, s, s + 0.3) for s in starts]
    return runs


def started(d, jid):
    try:
        with open(d.runs + ".spans") as f:
            return any(l.split()[0] == "S" and l.split()[2] == jid for l in f if l.strip())
    except FileNotFoundError:
        return False


def ended(d, jids):
    done = {jid for jid, _, _ in runs_of(d)}
    return all(j in done for j in jids)


class GroupsTest(JobTestCase):

    def grouped(self, n=1, sleep=0.2, concurrency=4, **limits):
        h = {"class": "Work", "command": handler("span", sleep), "group_by": "args[0]"}
        h.update(limits)
        return [self.daemon(concurrency=concurrency, handlers=[dict(h)], **FAST)
                for _ in range(n)]

    def push_group(self, group, n):
        return [json.loads(self.push(job("Work", [group, i])))["jid"] for i in range(n)]

    def test_gr1_a_flood_never_starves_another_group(self):
        """GR-1: 400 jobs of A then 4 of B, group_concurrency 2 on two daemons of 4: B's
        start within 1.5 s; never more than 2 of A at once, across a kill -9 of one."""
        ds = self.grouped(2, group_concurrency=2)
        a = self.push_group("A", 400)
        pushed = time.time()
        b = self.push_group("B", 4)
        wait_for(lambda: ended(ds[0], b), timeout=30, message="B's 4 jobs ran")
        starts = {jid: s for jid, s, _ in runs_of(ds[0])}
        late = max(starts[j] for j in b) - pushed
        self.assertLess(late, 1.5, "B's jobs start within 1.5 s of their push")
        # A's line is in Redis, in order, while A runs two at a time.
        self.assertGreater(self.r.zcard(GROUP_JOBS + "Work:A"), 300)
        self.assertIsNotNone(self.r.zscore(GROUPS + "Work", "A"))
        line = [json.loads(x)["jid"] for x in self.r.zrange(GROUP_JOBS + "Work:A", 0, -1)]
        self.assertEqual(line, [j for j in a if j in set(line)], "in push order")
        time.sleep(1)
        ds[0].kill()
        wait_for(lambda: ended(ds[1], a), timeout=180, message="A's 400 jobs ran")
        runs = runs_of(ds[1])
        a_set = set(a)
        most = max_overlap([(s, e) for jid, s, e in runs if jid in a_set])
        self.assertLessEqual(most, 2, "at most 2 jobs of A at any moment")
        self.assertEqual(self.r.exists(GROUP_JOBS + "Work:A"), 0)
        wait_for(lambda: self.r.zcard(GROUPS + "Work") == 0, timeout=5,
                 message="no group left with set-aside jobs")
        self.assertEqual(self.r.get(FAILED), None, "a job set aside is no failure")
        done = {jid for jid, _, _ in runs}
        self.assertEqual(done, a_set | set(b), "every job ran")
        order = [jid for jid, _, _ in sorted(runs, key=lambda r: r[1]) if jid in a_set]
        firsts = list(dict.fromkeys(order))
        print("\nGR-1 B's last start %.2fs after its push; at most %d of A at once; %d runs "
              "of 400 A jobs (reruns after the kill: %d); A started in push order: %s"
              % (late, most, len(order), len(order) - 400, firsts == a))

    def test_gr2_group_rate_limit(self):
        """GR-2: group_rate_limit 5/2s: 50 jobs of A start at most 5 in any 2 s, while B's
        run at full speed."""
        ds = self.grouped(2, sleep=0, group_rate_limit="5/2s")
        a = self.push_group("A", 50)
        time.sleep(1)
        pushed = time.time()
        b = self.push_group("B", 5)
        wait_for(lambda: ended(ds[0], b), timeout=30, message="B's jobs ran")
        late = max(s for jid, s, _ in runs_of(ds[0]) if jid in set(b)) - pushed
        self.assertLess(late, 1.5, "B's jobs are not held up by A's rate")
        wait_for(lambda: ended(ds[0], a), timeout=120, message="A's 50 jobs ran")
        starts = sorted(s for jid, s, _ in runs_of(ds[0]) if jid in set(a))
        # The limit holds on Redis's clock at admission; a handler notes its start some ms
        # later, so windows a little shorter than 2 s are checked on the handlers' times.
        worst = max(sum(1 for t in starts if s <= t < s + 1.75) for s in starts)
        self.assertLessEqual(worst, 5)
        self.assertEqual(len(starts), 50, "each ran once")
        self.assertGreaterEqual(starts[-1] - starts[0], 2 * 9 - 0.5, "50 at 5 per 2 s")
        self.assertEqual(self.r.get(FAILED), None)
        print("\nGR-2 most starts of A in 1.75 s: %d; B's last start %.2fs after its push; "
              "A's 50 over %.1fs" % (worst, late, starts[-1] - starts[0]))

    def test_gr3_group_values_that_are_no_group(self):
        """GR-3: an object, a float and a 1 MB string as the group: each job runs, in the
        group "", and the log says why; a missing value is the group "" too."""
        d = self.daemon(concurrency=2, max_job_bytes=4 << 20, handlers=[
            {"class": "Work", "command": handler("span", 0), "group_by": "args[0]",
             "group_concurrency": 1}], **FAST)
        jids = [json.loads(self.push(job("Work", [v])))["jid"]
                for v in ({"id": 1}, 1.5, "x" * (1 << 20))]
        jids.append(json.loads(self.push(job("Work", [])))["jid"])
        wait_for(lambda: ended(d, jids), timeout=30, message="the four jobs ran")
        for j in jids:
            self.assertEqual(d.runs_of(j), 1)
        log = d.log()
        self.assertIn("is an object: it goes to the group \"\"", log)
        self.assertIn("is a number that is not an integer: it goes to the group", log)
        self.assertIn("is longer than 200 bytes: it goes to the group", log)
        self.assertIn("start: Work jid=%s group=\"\"" % jids[0], log, "the run's group")
        self.assertEqual(self.r.get(FAILED), None)
        self.assertEqual(self.r.zcard(b"cogworker:dead"), 0)

    def test_gr4_conf_errors_name_file_and_line(self):
        """GR-4: a group_by that does not parse, and a group limit without group_by, are
        conf errors with file and line."""
        for body, phrase, line in [
                ('group_by = "args[x]";', "group_by: 'args[x]' is not a path to the job's "
                 "group: '[' must be followed by an index", 3),
                ('group_by = "args[0].";', "a '.' must be followed by a key", 3),
                ('group_concurrency = 2;', "a limit per group needs group_by", 3)]:
            with self.subTest(body=body):
                with tempfile.NamedTemporaryFile("w", suffix=".conf", delete=False) as f:
                    f.write('handlers = (\n  { class = "W"; command = ["/bin/true"];\n'
                            '    %s }\n);\n' % body)
                p = subprocess.run([binary("cogworkerd"), "--check", "-c", f.name],
                                   capture_output=True, text=True, timeout=10)
                os.unlink(f.name)
                self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
                self.assertIn("%s:%d:" % (f.name, line), p.stdout + p.stderr)
                self.assertIn(phrase, p.stdout + p.stderr)

    def ctl(self, *args, rc=0, stderr=False):
        """Its stdout (and, with stderr, its stderr after it)."""
        p = subprocess.run([binary("cogworkerctl")] + list(args), capture_output=True,
                           text=True, timeout=30, env=dict(os.environ, REDIS_URL=self.server.url))
        self.assertEqual(p.returncode, rc, p.stdout + p.stderr)
        return p.stdout + p.stderr if stderr else p.stdout

    def test_gr5_ctl_groups_lists_running_and_waiting(self):
        """GR-5: cogworkerctl groups: per group its running and set-aside jobs and its
        limits, as a table and --json; --handler picks a class; /metrics has the groups
        that wait."""
        port = free_port()
        d = self.daemon(concurrency=3, metrics_listen="127.0.0.1:%d" % port, handlers=[
            {"class": "Work", "command": handler("span", 3), "group_by": "args[0]",
             "group_concurrency": 1, "group_rate_limit": "10/60s"}], **FAST)
        self.push_group("A", 4)
        self.push_group("B", 1)
        self.push_group(7, 1)

        def rows():
            return {r["group"]: r for r in json.loads(self.ctl("groups", "--json"))}
        wait_for(lambda: rows().get("A", {}).get("waiting") == 3 and "7" in rows()
                 and rows()["7"]["running"] == 1, timeout=10, message="A's 3 set aside")
        r = rows()
        self.assertEqual(r["A"], {"class": "Work", "group": "A", "running": 1, "waiting": 3,
                                  "group_concurrency": 1, "group_rate_limit": "10/60s",
                                  "window_starts": 1})
        self.assertEqual((r["B"]["running"], r["B"]["waiting"]), (1, 0))
        self.assertEqual(list(r)[0], "A", "most waiting first")
        table = self.ctl("groups").splitlines()
        self.assertEqual(table[0].split(), ["CLASS", "GROUP", "RUNNING", "WAITING", "LIMIT",
                                            "RATE", "IN", "WINDOW"])
        self.assertEqual(table[1].split(), ["Work", "A", "1", "3", "1", "10/60s", "1"])
        self.assertEqual(json.loads(self.ctl("groups", "--handler", "Other", "--json")), [])
        self.assertIn("no groups running or waiting for Other",
                      self.ctl("groups", "--handler", "Other"))
        self.assertEqual(len(json.loads(self.ctl("groups", "--handler", "Work", "--json"))), 3)
        with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as res:
            lines = res.read().decode().splitlines()
        self.assertIn('cogworkerd_groups_waiting{class="Work"} 1', lines)
        self.assertIn('cogworkerd_group_jobs_waiting{class="Work"} 3', lines)
        self.assertIn('cogworkerd_group_waiting{class="Work",group="A"} 3', lines)
        self.assertFalse([x for x in lines if 'group="B"' in x], "only groups that wait")
        d.wait_log('group="7"')

    def test_gr6_jobs_show_queues_and_top_show_the_groups(self):
        """GR-6: jobs show names a job's group (and its place when set aside); jobs list
        --set group lists the set-aside jobs; queues and top show per class the groups
        with jobs set aside and how many."""
        self.daemon(concurrency=3, handlers=[
            {"class": "Work", "command": handler("span", 4), "group_by": "args[0]",
             "group_concurrency": 1}], **FAST)
        a = self.push_group("A", 4)
        bc = self.push_group("B C", 2)
        odd = json.loads(self.push(job("Work", [{"not": "a group"}])))["jid"]

        def waiting():
            return {r["group"]: r["waiting"] for r in json.loads(self.ctl("groups", "--json"))}
        wait_for(lambda: waiting() == {"A": 3, "B C": 1, "": 0}, timeout=10,
                 message="3 of A and 1 of B C set aside")
        shown = self.ctl("jobs", "show", a[2])
        self.assertIn("where      group: set aside for its group until the group has room "
                      "(cogworker:group_jobs:Work:A)", shown)
        self.assertIn("group      A (group_by args[0]): set aside, 2 of 3 in its line, back "
                      "when its group has room", shown)
        doc = json.loads(self.ctl("jobs", "show", "--json", a[2]))
        self.assertEqual(doc["group"], {"name": "A", "group_by": "args[0]", "invalid": None,
                                        "set_aside": True, "key": GROUP_JOBS + "Work:A",
                                        "place": 2, "line": 3})
        self.assertEqual([x["set"] for x in doc["locations"]], ["group"])
        running = json.loads(self.ctl("jobs", "show", "--json", a[0]))
        self.assertEqual((running["group"]["name"], running["group"]["set_aside"]), ("A", False))
        self.assertTrue({"running", "inprogress"} & {x["set"] for x in running["locations"]})
        self.assertRegex(self.ctl("jobs", "show", a[0]),
                         r"\ngroup      A \(group_by args\[0\]\)\n")
        other = json.loads(self.ctl("jobs", "show", "--json", odd))["group"]
        self.assertEqual((other["name"], other["invalid"], other["set_aside"]),
                         ("", "an object", False))
        self.assertIn('group      "" (group_by args[0]: the value is an object, so the group '
                      '"")', self.ctl("jobs", "show", odd))
        listed = json.loads(self.ctl("jobs", "list", "--set", "group", "--json"))
        self.assertEqual([x["jid"] for x in listed], a[1:] + bc[1:])
        queues = self.ctl("queues").splitlines()
        i = queues.index("set aside for their group (cogworkerctl groups):")
        self.assertEqual(queues[i + 1], '  Work: 4 job(s) set aside in 2 group(s): A 3, "B C" 1')
        self.assertIsInstance(json.loads(self.ctl("queues", "--json")), list, "still the array")
        top = self.ctl("top")
        self.assertIn("    set aside for their group:\n"
                      '      Work: 4 job(s) set aside in 2 group(s): A 3, "B C" 1\n', top)

    def test_gr8_pause_and_quiet_hold_a_job_brought_back(self):
        """GR-8: a release brings nothing back to a paused queue: the group's jobs stay in
        their line, in order, past process_ttl; a quiet process starts none; resumed, they
        run once each, one at a time, in order, and nothing of the group is left."""
        d = self.daemon(concurrency=2, handlers=[
            {"class": "Work", "command": handler("span", 1.5), "group_by": "args[0]",
             "group_concurrency": 1}], **FAST)
        # The first runs before the others are pushed: two fetchers taking the first two
        # at once may admit the second first (then the first waits in the line, paused).
        first = json.loads(self.push(job("Work", ["A", 0])))["jid"]
        wait_for(lambda: started(d, first), timeout=10, message="A's first started")
        a = [first] + [json.loads(self.push(job("Work", ["A", i])))["jid"] for i in (1, 2)]
        queue = b"cogworker:queue:default"
        wait_for(lambda: self.r.zcard(GROUP_JOBS + "Work:A") == 2, timeout=10,
                 message="A's second and third set aside")
        self.ctl("queues", "pause", "default")
        wait_for(lambda: ended(d, a[:1]), timeout=10, message="A's first ran")
        # Its release brings nothing back to the paused queue (where a reservation would
        # expire and the next look bring the third in front of the second): both stay in
        # their line, in order, past process_ttl.
        time.sleep(FAST["process_ttl"] + 1)
        self.assertEqual(self.r.llen(queue), 0, "nothing brought back to a paused queue")
        self.assertEqual([json.loads(x)["jid"] for x in
                          self.r.zrange(GROUP_JOBS + "Work:A", 0, -1)], a[1:])
        self.assertFalse(any(j in a[1:] for j, _, _ in runs_of(d)))
        self.ctl("processes", "quiet", d.identity)
        time.sleep(1)
        self.ctl("queues", "resume", "default")
        time.sleep(2)
        self.assertEqual(self.r.zcard(GROUP_JOBS + "Work:A") + self.r.llen(queue), 2)
        self.assertFalse(any(j in a[1:] for j, _, _ in runs_of(d)),
                         "a quiet process starts nothing")
        self.ctl("processes", "resume", d.identity)
        wait_for(lambda: ended(d, a), timeout=20, message="A's three ran")
        runs = runs_of(d)
        self.assertEqual(sorted(j for j, _, _ in runs), sorted(a), "each once")
        self.assertLessEqual(max_overlap([(s, e) for _, s, e in runs]), 1)
        self.assertEqual([j for j, _, _ in sorted(runs, key=lambda r: r[1])], a, "in order")
        wait_for(lambda: not self.r.exists(GROUP_JOBS + "Work:A", GROUPS + "Work"),
                 timeout=5, message="the group's line and index gone")
        self.assertEqual(self.r.get(FAILED), None)

    def calls(self):
        """Commands Redis ran since CONFIG RESETSTAT, less INFO and CONFIG themselves."""
        return {k[8:]: v["calls"] for k, v in self.r.info("commandstats").items()
                if not k.startswith(("cmdstat_info", "cmdstat_config"))}

    def test_gr9_readers_read_at_most_1000_groups_and_say_so(self):
        """GR-9: 3 000 groups with a job set aside each: groups --json, the table, queues
        and /metrics answer at once with a bounded number of commands (the first 1 000
        groups of the index, by its order), the exact number of groups, and the cut
        said."""
        n, bound = 3000, 1000
        now = time.time()
        self.r.hset(b"cogworker:limits", "Work", json.dumps(
            {"group_by": "args[0]", "group_concurrency": 1}))
        p = self.r.pipeline(transaction=False)
        for i in range(n):
            g = "g%04d" % i
            p.zadd(GROUP_JOBS + "Work:" + g, {job("Work", [g]): now})
            # Next looks an hour away (no sweep moves them), the last groups soonest.
            p.zadd(GROUPS + "Work", {g: now + 3600 + n - i})
        p.execute()
        self.r.sadd(b"cogworker:queues", "default")
        read = ["g%04d" % i for i in range(n - bound, n)]
        cut = {"groups_waiting": n, "not_read": n - bound, "running_not_read": True,
               "read_max": bound}

        self.r.config_resetstat()
        t = time.time()
        doc = json.loads(self.ctl("groups", "--json"))
        took = time.time() - t
        calls = self.calls()
        self.assertEqual([x["group"] for x in doc], read, "the index's first 1 000")
        self.assertEqual({json.dumps(x["cut"], sort_keys=True) for x in doc},
                         {json.dumps(cut, sort_keys=True)})
        self.assertEqual(doc[0]["waiting"], 1)
        self.assertLessEqual(calls.get("zcard", 0) + calls.get("zcount", 0), 3 * bound + 1)
        ctl_calls = sum(calls.values())
        self.assertLess(ctl_calls, 3 * bound + 20, calls)
        self.assertLess(took, 2.0)
        table = self.ctl("groups").splitlines()
        self.assertEqual(len(table), 1 + bound + 1)
        self.assertEqual(table[-1], "Work: … and 2000 more groups not read (3000 with jobs set "
                         "aside; a read counts at most 1000 groups per class)")
        queues = self.ctl("queues").splitlines()
        i = queues.index("set aside for their group (cogworkerctl groups):")
        self.assertEqual(queues[i + 1], "  Work: 1000 job(s) set aside in 1000 group(s) read, "
                         "2000 more group(s) not read: g2000 1, g2001 1, g2002 1, g2003 1, "
                         "g2004 1 (and 995 more)")
        # Groups whose jobs all run (found by the SCAN of their slot keys) fill the bound
        # too, and the cut is said.
        self.r.hset(b"cogworker:limits", "Other", json.dumps(
            {"group_by": "args[0]", "group_concurrency": 1}))
        p = self.r.pipeline(transaction=False)
        for i in range(bound + 1):
            p.zadd("cogworker:group_slots:Other:s%04d" % i, {"me:1:abc f1 j%d" % i: now + 60})
        p.execute()
        other = json.loads(self.ctl("groups", "--handler", "Other", "--json"))
        self.assertEqual(len(other), bound)
        self.assertEqual(other[0]["running"], 1)
        self.assertEqual(other[0]["cut"], {"groups_waiting": 0, "not_read": 0,
                                           "running_not_read": True, "read_max": bound})
        self.assertEqual(self.ctl("groups", "--handler", "Other").splitlines()[-1],
                         "Other: … and more groups holding slots not read (a read counts at "
                         "most 1000 groups per class)")

        port = free_port()
        self.daemon(concurrency=1, metrics_listen="127.0.0.1:%d" % port, handlers=[
            {"class": "Work", "command": handler("span", 0), "group_by": "args[0]",
             "group_concurrency": 1}], **FAST)
        url = "http://127.0.0.1:%d/metrics" % port
        urllib.request.urlopen(url, timeout=5).read()    # the first scrape loads scripts
        self.r.config_resetstat()
        t = time.time()
        with urllib.request.urlopen(url, timeout=5) as res:
            lines = res.read().decode().splitlines()
        scraped = time.time() - t
        calls = self.calls()
        self.assertIn('cogworkerd_groups_waiting{class="Work"} 3000', lines, "exact")
        self.assertIn('cogworkerd_group_jobs_waiting{class="Work"} 1000', lines)
        self.assertIn('cogworkerd_groups_not_read{class="Work"} 2000', lines)
        self.assertEqual(len([x for x in lines if x.startswith("cogworkerd_group_waiting{")]),
                         10, "the 10 most waiting of those read")
        # The daemon's own beats, fetches and sweeps run meanwhile: a margin for them.
        self.assertLessEqual(calls.get("zcard", 0) + calls.get("zcount", 0), 3 * bound + 50)
        self.assertLess(sum(calls.values()), 3 * bound + 200, calls)
        self.assertLess(scraped, 2.0)
        print("\nGR-9 %d groups: groups --json %d commands in %.3fs, /metrics %d in %.3fs"
              % (n, ctl_calls, took, sum(calls.values()), scraped))

    def test_gr11_jobs_show_walks_at_most_1000_lines_and_says_so(self):
        """GR-11: 3 000 groups with a job set aside each: jobs show of an unknown jid and of
        a finished job walks at most the first 1 000 group lines (the groups GR-9 reads),
        answers at once with a bounded number of commands and says the search was cut;
        a job set aside in one of those lines is still found, with its group and place;
        jobs list --set group says how many groups it did not read."""
        n, bound = 3000, 1000
        # A finished job first, by a daemon, stopped before anything is counted.
        d = self.daemon(concurrency=1, handlers=[
            {"class": "Done", "command": handler("span", 0)}], history_retention_days=1, **FAST)
        done = json.loads(self.push(job("Done", [])))["jid"]
        wait_for(lambda: ended(d, [done]), timeout=10, message="the Done job ran")
        d.stop()
        now = time.time()
        self.r.hset(b"cogworker:limits", "Work", json.dumps(
            {"group_by": "args[0]", "group_concurrency": 1}))
        p = self.r.pipeline(transaction=False)
        jids = {}
        for i in range(n):
            g = "g%04d" % i
            payload = job("Work", [g])
            jids[g] = json.loads(payload)["jid"]
            p.zadd(GROUP_JOBS + "Work:" + g, {payload: now})
            # As in GR-9: the last groups first in the index's order.
            p.zadd(GROUPS + "Work", {g: now + 3600 + n - i})
        p.execute()
        cut = {"read": bound, "not_read": n - bound, "read_max": bound}
        said = ("the first 1000 of 3000 group lines (a search reads at most 1000 per "
                "class); not in the others")

        self.r.config_resetstat()
        t = time.time()
        out = self.ctl("jobs", "show", "nosuchjid", rc=1, stderr=True)
        took = time.time() - t
        calls = sum(self.calls().values())
        self.assertIn("no job nosuchjid (looked in queues, scheduled, retry, dead, running, in "
                      "progress, waiting, status, history, and " + said + ")", out)
        self.assertLess(calls, bound + 100, self.calls())
        self.assertLess(took, 2.0)

        self.r.config_resetstat()
        shown = self.ctl("jobs", "show", done)
        done_calls = sum(self.calls().values())
        self.assertIn("\nsearched   " + said + "\n", shown)
        self.assertLess(done_calls, bound + 100, self.calls())
        doc = json.loads(self.ctl("jobs", "show", "--json", done))
        self.assertEqual(doc["group_lines_cut"], cut)
        self.assertIsNotNone(doc["ended"])

        # Set aside in a line read (the index's first 1 000: g2000..g2999): found and placed.
        found = json.loads(self.ctl("jobs", "show", "--json", jids["g2500"]))
        self.assertEqual([x["set"] for x in found["locations"]], ["group"])
        self.assertEqual((found["group"]["name"], found["group"]["set_aside"],
                          found["group"]["place"], found["group"]["line"]),
                         ("g2500", True, 1, 1))
        self.assertIn("group      g2500 (group_by args[0]): set aside, 1 of 1 in its line",
                      self.ctl("jobs", "show", jids["g2500"]))
        # In a line not read: not claimed absent, the cut said.
        self.assertIn(said, self.ctl("jobs", "show", jids["g0005"], rc=1, stderr=True))

        listed = self.ctl("jobs", "list", "--set", "group", "--limit", "0").splitlines()
        self.assertEqual(len(listed), 1 + bound + 1)
        self.assertEqual(listed[-1], "... and 2000 more groups not read (a walk reads at most "
                         "1000 group lines per class)")
        self.assertEqual(len(json.loads(self.ctl("jobs", "list", "--set", "group", "--limit",
                                                 "0", "--json"))), bound)
        print("\nGR-11 %d groups: jobs show of an unknown jid %d commands in %.3fs, of a "
              "finished job %d" % (n, calls, took, done_calls))

    def test_gr10_a_group_slot_key_lives_with_its_lease_and_goes_after_it(self):
        """GR-10: a group's slots key expires 2 x process_ttl past its latest lease: a job
        running past that still holds its slot (the beat moves the key's TTL on with the
        lease); its daemon killed, the key goes by itself, with no job of the group left
        to release or look at it."""
        d = self.daemon(concurrency=1, handlers=[
            {"class": "Work", "command": handler("span", 30), "group_by": "args[0]",
             "group_concurrency": 1}], **FAST)
        self.push_group("A", 1)
        slots = "cogworker:group_slots:Work:A"
        wait_for(lambda: self.r.zcard(slots) == 1, timeout=10, message="A's lease")
        ttl = FAST["process_ttl"]
        time.sleep(3 * ttl + 1)     # past the TTL the key had when ADMIT took the lease
        sec, usec = self.r.time()
        (member, expiry), = self.r.zrange(slots, 0, -1, withscores=True)
        self.assertGreater(expiry, sec + usec / 1e6, "the lease is live, renewed by beats")
        self.assertGreater(self.r.pttl(slots), 2 * ttl * 1000, "the key outlives it")
        self.assertLessEqual(self.r.pttl(slots), 3 * ttl * 1000 + 50)
        d.kill()
        killed = time.time()
        wait_for(lambda: not self.r.exists(slots), timeout=3 * ttl + 2,
                 message="the abandoned slots key gone by its TTL")
        print("\nGR-10 the slots key of a killed holder went %.1fs after the kill "
              "(process_ttl %gs)" % (time.time() - killed, ttl))


if __name__ == "__main__":
    import unittest
    unittest.main()

# SPDX-License-Identifier: MIT
"""A job's runs from history (doc/behaviours.md JR; issue 31 item 3 and a small one of item
6; doc/protocol.md §7.22): the history write indexes each run by its jid
(cogworker:history:jid:<jid>, lua/history_write.lua), and `cogworkerctl jobs show`, its
--json, /api/jobs/<jid> and the dashboard's job page list a job's runs from it, each with
its outcome, duration, CPU and peak memory; a finished job's show says how it ended. The
index follows history's trims exactly: by count, by age (a retention of seconds, set as a
fraction of a day in the conf), and a pointer whose entry another writer trimmed is never
shown.

Run: python3 tests/integration/run.py test_job_runs
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, binary, job, wait_for  # noqa: E402
from webkit import BrowserCase, WebServer, shot, text_of  # noqa: E402

ALL = b"cogworker:history:all"
RETRY = b"cogworker:retry"
DEAD = b"cogworker:dead"

# Fails its first two runs (exit 1, a line on stderr), succeeds the third: counts its runs
# of this jid in $RUNS.
FLAKY = ('echo "$COGWORKER_JID" >> "$RUNS"; n=$(grep -c -x "$COGWORKER_JID" "$RUNS"); '
         'if [ "$n" -ge 3 ]; then exit 0; fi; echo "boom $n" >&2; exit 1')
HANDLERS = [{"class": "Flaky", "command": ["/bin/sh", "-c", FLAKY]},
            {"class": "Ok", "command": ["/bin/true"]},
            {"class": "Bad", "command": ["/bin/sh", "-c", "echo no >&2; exit 1"]}]


def index_key(jid):
    return ("cogworker:history:jid:" + jid).encode()


class RunsCase(DaemonTestCase):
    def ctl(self, *args, rc=0):
        env = dict(os.environ, REDIS_URL=self.server.url)
        p = subprocess.run([binary("cogworkerctl")] + list(args), env=env,
                           capture_output=True, timeout=30)
        if rc is not None:
            self.assertEqual(p.returncode, rc, (args, p.stdout, p.stderr))
        return p.stdout.decode()

    def start(self, **settings):
        settings.setdefault("history_retention_days", 1)
        settings.setdefault("handlers", HANDLERS)
        settings.setdefault("poll_interval", 1)
        return self.daemon(**settings)

    def pushed(self, cls, **kw):
        payload = job(cls, **kw)
        self.push(payload)
        return json.loads(payload)["jid"]

    def entries_of(self, jid):
        return [e for e in (json.loads(m) for m in self.r.zrange(ALL, 0, -1))
                if e.get("jid") == jid]

    def retried_twice(self, d):
        """A Flaky job (retry 5) that failed twice and then succeeded: each failure moved
        back to its queue at once with `cogworkerctl jobs retry`."""
        jid = self.pushed("Flaky", retry=5)
        for n in (1, 2):
            wait_for(lambda: len(self.entries_of(jid)) == n and self.r.zcard(RETRY) == 1,
                     timeout=20, message="failure %d in history and in retry" % n)
            self.ctl("jobs", "retry", "--set", "retry", jid)
        wait_for(lambda: len(self.entries_of(jid)) == 3, timeout=20, message="3 runs")
        d.wait_log("done: Flaky jid=%s" % jid, timeout=20)
        self.wait_gone(jid)
        return jid

    def wait_gone(self, jid):
        """Until the job is in no set: its ack follows its history entry and done line."""
        wait_for(lambda: json.loads(self.ctl("jobs", "show", jid, "--json"))["locations"] == [],
                 timeout=20, message="%s acknowledged" % jid)


class TestShow(RunsCase):
    def test_jr1_retried_twice_shows_three_runs(self):
        """JR-1: a job that failed twice and then succeeded: `jobs show --json` has
        `history`, three runs oldest first with outcomes retrying, retrying, success, each
        with its times, duration, error, cpu_s and maxrss_bytes; the text lists them under
        "attempts 3 in history" and says where it ended: "finished: succeeded" (status on:
        it said "nowhere", only its status left)."""
        d = self.start(status_expiration=600)
        jid = self.retried_twice(d)
        doc = json.loads(self.ctl("jobs", "show", jid, "--json"))
        runs = doc["history"]
        self.assertEqual([r["outcome"] for r in runs], ["retrying", "retrying", "success"])
        self.assertEqual([r["run"] for r in runs], [1, 2, 3])
        self.assertEqual([r["status"] for r in runs], ["failed", "failed", "success"])
        for r in runs:
            self.assertEqual(r["jid"], jid)
            self.assertGreaterEqual(r["duration_s"], 0)
            self.assertAlmostEqual(r["duration_s"], r["finished_at"] - r["started_at"], places=4)
            self.assertGreater(r["cpu_s"], -1)
            self.assertGreater(r["maxrss_bytes"], 0)
        self.assertLess(runs[0]["finished_at"], runs[1]["finished_at"])
        self.assertLess(runs[1]["finished_at"], runs[2]["finished_at"])
        self.assertEqual(runs[0]["error_message"], "exit status 1: boom 1")
        self.assertEqual(runs[1]["error_message"], "exit status 1: boom 2")
        self.assertIsNone(runs[2]["error_class"])
        self.assertEqual(doc["locations"], [])
        self.assertEqual(doc["ended"], {"outcome": "success", "runs": 3,
                                        "finished_at": doc["ended"]["finished_at"]})
        self.assertAlmostEqual(doc["ended"]["finished_at"], runs[2]["finished_at"], places=5)
        out = self.ctl("jobs", "show", jid)
        self.assertRegex(out, r"where +finished: succeeded \S+ \(.*\), after 3 runs in history")
        self.assertNotIn("nowhere", out)
        self.assertRegex(out, r"status +complete")
        self.assertRegex(out, r"class +Flaky\nqueue +default")
        self.assertRegex(out, r"attempts +3 in history")
        rows = re.findall(r"^  #(\d) +\S+ +(\w+) +[0-9.]+m?s cpu=[0-9.]+s maxrss=[0-9.]+[KMG]iB(.*)$",
                          out, re.M)
        self.assertEqual([(n, oc) for n, oc, _ in rows][:3],
                         [("1", "retrying"), ("2", "retrying"), ("3", "success")], out)
        self.assertIn("Cogworker::HandlerFailed: exit status 1: boom 1", rows[0][2])

    def test_jr2_finished_job_without_status_is_found_in_history(self):
        """JR-2: status off, output off: a finished job was "no job" for `jobs show` (and
        "nowhere" with "attempts 0" with status on); now it says it finished and lists its
        run: a success once, a discard, and a dead job deleted from the dead set."""
        d = self.start(output_keep=0)
        ok = self.pushed("Ok")
        bad = self.pushed("Bad", retry=0)
        d.wait_log("done: Ok jid=%s" % ok, timeout=20)
        wait_for(lambda: self.r.zcard(DEAD) == 1, timeout=20, message="Bad dead")
        self.wait_gone(ok)
        out = self.ctl("jobs", "show", ok)
        self.assertRegex(out, r"where +finished: succeeded .* after 1 run in history")
        self.assertRegex(out, r"attempts +1 in history.*\n  #1 +\S+ +success")
        # dead: found in the dead set, its run listed; deleted from it: "finished: dead"
        out = self.ctl("jobs", "show", bad)
        self.assertRegex(out, r"where +dead \(cogworker:dead\)")
        self.assertRegex(out, r"#1 +\S+ +dead +[0-9.]+m?s cpu=.*Cogworker::HandlerFailed: "
                              r"exit status 1: no")
        self.ctl("jobs", "delete", bad, "--set", "dead", "--yes")
        out = self.ctl("jobs", "show", bad)
        self.assertRegex(out, r"where +finished: dead \S+ \(.*\), deleted from the dead set")
        self.assertEqual(json.loads(self.ctl("jobs", "show", bad, "--json"))["ended"]["outcome"],
                         "dead")

    def test_jr3_api_has_the_runs(self):
        """JR-3: /api/jobs/<jid> (the dashboard's API) carries the same `history` and
        `ended` as `jobs show --json`."""
        d = self.start(output_keep=0)
        jid = self.retried_twice(d)
        w = WebServer(self.server.url).start()
        self.addCleanup(w.stop)
        cookie, _ = w.session()
        st, doc = w.get_json("/api/jobs/" + jid, cookie)
        self.assertEqual(st, 200, doc)
        self.assertEqual([r["outcome"] for r in doc["history"]],
                         ["retrying", "retrying", "success"])
        self.assertTrue(all(r["cpu_s"] is not None and r["maxrss_bytes"] > 0
                            for r in doc["history"]), doc["history"])
        self.assertEqual(doc["ended"]["outcome"], "success")


class TestTrim(RunsCase):
    def test_jr4_index_follows_the_count_trim(self):
        """JR-4: history_max_entries 4: a job's three runs, then two other runs push its
        first out of history: its index holds two pointers (the trim took the first's in
        the same call) and show lists runs retrying, success; three more runs push it out
        entirely: its index key is gone and show says no job (status off)."""
        d = self.start(history_max_entries=4)
        jid = self.retried_twice(d)
        self.assertEqual(self.r.zcard(index_key(jid)), 3)
        for _ in range(2):
            o = self.pushed("Ok")
            d.wait_log("done: Ok jid=%s" % o, timeout=20)
        wait_for(lambda: len(self.entries_of(jid)) == 2, timeout=10, message="one trimmed")
        self.assertEqual(self.r.zcard(index_key(jid)), 2)
        doc = json.loads(self.ctl("jobs", "show", jid, "--json"))
        self.assertEqual([r["outcome"] for r in doc["history"]], ["retrying", "success"])
        for _ in range(3):
            o = self.pushed("Ok")
            d.wait_log("done: Ok jid=%s" % o, timeout=20)
        wait_for(lambda: not self.entries_of(jid), timeout=10, message="all trimmed")
        self.assertEqual(self.r.exists(index_key(jid)), 0)
        self.ctl("jobs", "show", jid, rc=1)

    def test_jr5_index_follows_the_age_trim_and_has_its_ttl(self):
        """JR-5: history_retention_days 0.00005 (4.32 s): the index's TTL is the retention
        rounded up (5 s); a run after the first's entry aged out trims that entry and its
        pointer together (the index made persistent first, so its TTL is not what removes
        it)."""
        d = self.start(history_retention_days=0.00005)
        a = self.pushed("Ok")
        d.wait_log("done: Ok jid=%s" % a, timeout=20)
        wait_for(lambda: self.r.exists(index_key(a)), timeout=10, message="a's index")
        ttl = self.r.ttl(index_key(a))
        self.assertTrue(0 < ttl <= 5, ttl)
        [entry] = self.entries_of(a)
        self.r.persist(index_key(a))
        wait_for(lambda: time.time() > entry["finished_at"] + 4.32 + 0.2, timeout=10,
                 interval=0.1, message="a's entry aged")
        self.assertEqual(self.r.zcard(index_key(a)), 1)   # nothing trims until a write
        b = self.pushed("Ok")
        d.wait_log("done: Ok jid=%s" % b, timeout=20)
        wait_for(lambda: not self.entries_of(a), timeout=10, message="a trimmed")
        self.assertEqual(self.r.exists(index_key(a)), 0)
        self.assertEqual([json.loads(m)["jid"] for m in self.r.zrange(ALL, 0, -1)], [b])
        self.ctl("jobs", "show", a, rc=1)

    def test_jr6_pointer_to_an_entry_trimmed_elsewhere_is_not_shown(self):
        """JR-6: an entry removed from history by another writer (a Ruby process's trim
        knows no index) leaves its pointer; show lists only the runs history still has."""
        d = self.start()
        jid = self.retried_twice(d)
        first = self.r.zrange(ALL, 0, 0)[0]
        self.assertEqual(json.loads(first)["jid"], jid)
        self.r.zrem(ALL, first)
        self.assertEqual(self.r.zcard(index_key(jid)), 3)
        doc = json.loads(self.ctl("jobs", "show", jid, "--json"))
        self.assertEqual([(r["run"], r["outcome"]) for r in doc["history"]],
                         [(2, "retrying"), (3, "success")])
        self.assertNotIn("boom 1", json.dumps(doc["history"]))


class TestPage(BrowserCase, RunsCase):
    def test_jr7_job_page_lists_the_runs(self):
        """JR-7: the dashboard's job page (headless Chromium) of a job retried twice,
        output not kept: a Runs table of three rows from history, outcomes retrying,
        retrying, success, each with Took, CPU, Peak RSS and the error; the page says the
        job finished (succeeded), not "Nowhere"."""
        d = self.start(output_keep=0)
        jid = self.retried_twice(d)
        w = self.web()
        self.b.get(w.url("/jobs/" + jid))
        runs = text_of(self.b, "#runs tbody", contains="success")
        rows = [r for r in runs.split("\n") if r.strip()]
        self.assertEqual(len(rows), 3, runs)
        for row, oc in zip(rows, ["retrying", "retrying", "success"]):
            self.assertRegex(row, r"^\d \S.* %s\s+[0-9.]+m?s\s+[0-9.]+m?s\s+[0-9.]+[KMG]iB" % oc)
        self.assertIn("boom 1", rows[0])
        ended = text_of(self.b, "#ended", contains="succeeded")
        self.assertIn("3 runs", ended)
        self.assertNotIn("Nowhere", text_of(self.b, "main"))
        shot(self.b, "job-runs")


if __name__ == "__main__":
    unittest.main()

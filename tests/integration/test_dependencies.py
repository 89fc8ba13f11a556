# SPDX-License-Identifier: MIT
"""DP — jobs that wait for other jobs (doc/behaviours.md §46, doc/protocol.md §7.34):
cogworkerctl push --after / --after-any; the waiting set; release when every dependency
succeeded, burial as Cogworker::DependencyFailed when one failed.

Run: python3 tests/integration/run.py test_dependencies
"""

import json
import os
import random
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flowkit import FlowTestCase  # noqa: E402
from harness import job, new_jid, wait_for  # noqa: E402
from observe import Monitor  # noqa: E402
from runkit import DEAD  # noqa: E402


class Dependencies(FlowTestCase):
    def push(self, cls, *opts):
        return self.ctl("push", *opts, cls)[0].strip()

    def dead_entries(self):
        return {json.loads(m)["jid"]: json.loads(m) for m in self.r.zrange(DEAD, 0, -1)}

    def test_dp1_a_job_runs_after_what_it_waits_for(self):
        # not started until both are pushed: under load, A's 0.5 s run could end before
        # B's push, and B would be queued at once, not seen waiting
        d = self.flow_daemon(self.record("Work", 0.5), start=False)
        a = self.push("Work")
        b = self.push("Work", "--after", a)
        self.assertEqual(self.r.zscore("cogworker:batch:waiting", b) is not None, True)
        shown = json.loads(self.ctl("--json", "jobs", "show", b)[0])
        self.assertEqual((shown["waits_for"]["jids"], shown["waits_for"]["after_any"]),
                         ([a], False))
        self.assertEqual([x["jid"] for x in shown["waits_for"]["states"]], [a])
        self.assertEqual([x["set"] for x in shown["locations"]], ["after"])
        out, _ = self.ctl("jobs", "show", b)
        self.assertIn("waits for  (runs once they all succeeded): %s" % a, out)
        self.assertIn("class      Work", out)
        d.start()
        runs = self.wait_runs([a, b])
        self.assertGreater(runs[b][0][1], runs[a][0][2])
        self.assertIsNone(self.r.zscore("cogworker:batch:waiting", b))

    def test_dp2_a_dag_of_20_runs_each_job_once_after_its_dependencies(self):
        self.flow_daemon(self.record("Work", 0.1), concurrency=4)
        rnd = random.Random(25)
        deps, jids = {}, []
        for i in range(20):
            # fan-out from early nodes, fan-in of up to 4 earlier ones
            parents = rnd.sample(jids, min(len(jids), rnd.randint(0, 4))) if jids else []
            opts = ("--after", ",".join(parents)) if parents else ()
            jid = self.push("Work", *opts)
            deps[jid] = parents
            jids.append(jid)
        runs = self.wait_runs(jids, timeout=60)
        fan_in = max(len(p) for p in deps.values())
        fan_out = max(sum(j in p for p in deps.values()) for j in jids)
        self.assertGreaterEqual(fan_in, 3)
        self.assertGreaterEqual(fan_out, 3)
        time.sleep(1)
        runs = self.runs()
        for jid in jids:
            self.assertEqual(len(runs[jid]), 1, "%s ran once" % jid)
            for p in deps[jid]:
                self.assertGreater(runs[jid][0][1], runs[p][0][2],
                                   "%s started after %s ended" % (jid, p))
        self.assertEqual(self.r.zcard("cogworker:batch:waiting"), 0)

    def test_dp3_a_failed_dependency_buries_its_dependants_and_after_any_runs(self):
        d = self.flow_daemon(self.record("Work"), self.record("Bad", 0.05, 1), start=False)
        bad = self.push("Bad", "--retry", "false")
        child = self.push("Work", "--after", bad)
        grandchild = self.push("Work", "--after", child)
        anyway = self.push("Work", "--after-any", "--after", bad)
        d.start()
        wait_for(lambda: len(self.dead_entries()) == 3, timeout=20, message="three dead")
        dead = self.dead_entries()
        self.assertEqual(dead[child]["error_class"], "Cogworker::DependencyFailed")
        self.assertEqual(dead[child]["error_message"], "dependency %s died" % bad)
        self.assertEqual(dead[grandchild]["error_message"], "dependency %s died" % child)
        runs = self.wait_runs([bad, anyway])
        self.assertGreater(runs[anyway][0][1], runs[bad][0][2])
        time.sleep(1)
        self.assertNotIn(child, self.runs())
        self.assertNotIn(grandchild, self.runs())

    def test_dp4_unknown_and_dead_dependencies_are_refused_at_push(self):
        self.flow_daemon(self.record("Bad", 0.05, 1))
        _, err = self.ctl("push", "--after", "0123456789abcdef01234567", "Work", rc=2)
        self.assertIn("no job 0123456789abcdef01234567", err)
        bad = self.push("Bad", "--retry", "false")
        wait_for(lambda: bad in self.dead_entries(), timeout=10, message="dead")
        _, err = self.ctl("push", "--after", bad, "Work", rc=2)
        self.assertIn("died", err)
        self.assertEqual(self.r.llen("cogworker:queue:default"), 0)
        self.assertEqual(self.r.zcard("cogworker:batch:waiting"), 0)
        self.push("Work", "--after", bad, "--after-any", "--queue", "elsewhere")
        self.assertEqual(self.r.llen("cogworker:queue:elsewhere"), 1)

    def test_dp5_a_dependency_that_already_succeeded_counts_as_met(self):
        self.flow_daemon(self.record("Work"))
        a = self.push("Work")
        self.wait_runs([a])
        wait_for(lambda: self.r.get("cogworker:batch:settled:" + a) == b"success", timeout=5,
                 message="settled record")
        b = self.push("Work", "--after", a)
        self.assertIsNone(self.r.zscore("cogworker:batch:waiting", b))
        self.wait_runs([b])

    def test_dp8_after_any_a_job_dead_longer_than_its_settled_record_runs(self):
        self.flow_daemon(self.record("Work"), self.record("Bad", 0.05, 1))
        bad = self.push("Bad", "--retry", "false")
        wait_for(lambda: bad in self.dead_entries(), timeout=10, message="dead")
        wait_for(lambda: self.r.get("cogworker:batch:settled:" + bad), timeout=5,
                 message="settled record")
        self.r.delete("cogworker:batch:settled:" + bad)     # expired: it died long ago
        _, err = self.ctl("push", "--after", bad, "Work", rc=2)
        self.assertIn("is in dead since", err)
        anyway = json.loads(self.ctl("--json", "push", "--after-any", "--after", bad,
                                     "Work")[0])
        self.assertFalse(anyway["waiting"], "a dead dependency is settled: met")
        self.assertEqual(self.r.zcard("cogworker:batch:waiting"), 0)
        self.assertEqual(self.r.get("cogworker:batch:settled:" + bad), b"dead")
        self.wait_runs([anyway["jid"]])

    def take(self, queue, jid):
        """What a Ruby worker's fetch does: the job off its queue (its raw JSON)."""
        for raw in self.r.lrange("cogworker:queue:" + queue, 0, -1):
            if json.loads(raw)["jid"] == jid:
                self.assertEqual(self.r.lrem("cogworker:queue:" + queue, 1, raw), 1)
                return raw
        self.fail("%s not on queue %s" % (jid, queue))

    def test_dp13_dependencies_a_ruby_worker_settled_are_given_up_on(self):
        d = self.flow_daemon(self.record("Work"), lost_dependency_threshold=2)
        # dependencies on a queue no daemon reads: a Ruby worker's
        ran, died, deleted, running = [self.push("Work", "--queue", "ruby") for _ in range(4)]
        # one too long for a page of the search (over 64 KiB): read alone
        queued = self.push("Work", "--queue", "ruby", "--json-args", '["%s"]' % ("x" * 100000))
        w = {dep: self.push("Work", *(("--after-any",) if dep == deleted else ()),
                            "--after", dep)
             for dep in (ran, died, deleted, running, queued)}
        # as the gem does it: a basic fetch takes `ran` (BRPOP) and acks nothing; `died`
        # goes to dead after its last retry; its Web UI deletes `deleted`; `running` runs
        # for long on a basic-fetch worker (its workers entry); `queued` waits its turn
        t0 = time.monotonic()
        self.take("ruby", ran)
        raw = json.loads(self.take("ruby", died))
        raw.update(error_class="RuntimeError", error_message="boom", retry_count=25,
                   failed_at=time.time())
        self.r.zadd(DEAD, {json.dumps(raw): time.time()})
        self.take("ruby", deleted)
        entry = json.dumps({"queue": "ruby", "payload": self.take("ruby", running).decode(),
                            "run_at": int(time.time())})
        self.r.sadd("cogworker:processes", "rubyhost:1:abc")
        self.r.hset("cogworker:process:rubyhost:1:abc", "busy", "1")
        self.r.expire("cogworker:process:rubyhost:1:abc", 60)
        self.r.hset("cogworker:workers:rubyhost:1:abc", "tid1", entry)
        wait_for(lambda: {w[ran], w[died]} <= set(self.dead_entries()), timeout=20,
                 message="the jobs waiting for ran and died buried")
        self.assertGreaterEqual(time.monotonic() - t0, 2, "not before the threshold")
        dead = self.dead_entries()
        self.assertEqual(dead[w[ran]]["error_class"], "Cogworker::DependencyFailed")
        self.assertEqual(dead[w[ran]]["error_message"], "dependency %s was discarded" % ran)
        self.assertEqual(dead[w[died]]["error_message"], "dependency %s died" % died)
        self.assertEqual(self.r.get("cogworker:batch:settled:" + died), b"dead")
        self.wait_runs([w[deleted]])
        d.wait_log("jid=%s: jobs wait for it, but it has no settled record and no queue" % ran)
        d.wait_log("jid=%s: jobs wait for it, and it is in dead without a settled record"
                   % died)
        time.sleep(5)           # more than twice the threshold: the others still wait
        waiting = {m.decode() for m in self.r.zrange("cogworker:batch:waiting", 0, -1)}
        self.assertEqual(waiting, {w[running], w[queued]})
        self.assertNotIn(w[ran], self.runs())
        self.assertNotIn(w[died], self.runs())
        self.assertEqual(self.r.zcard("cogworker:unseen_dependencies"), 0)

    def test_dp6_a_waiting_member_of_a_batch(self):
        self.flow_daemon(self.record("Work", 0.3), self.record("Done"))
        bid = self.ctl("batch", "new", "--on-success", "Done")[0].strip()
        a = self.push("Work", "--batch", bid)
        b = self.push("Work", "--batch", bid, "--after", a)
        shown = json.loads(self.ctl("--json", "jobs", "show", b)[0])
        self.assertEqual(shown["batch"], bid)
        self.ctl("batch", "commit", bid)
        wait_for(lambda: self.callback_jid(bid, "success"), timeout=20, message="on_success")
        done = self.callback_jid(bid, "success")
        runs = self.wait_runs([a, b, done])
        self.assertGreater(runs[done][0][1], runs[b][0][2])

    def test_dp7_a_job_waits_for_every_one_of_many_dependencies_up_to_the_cap(self):
        self.flow_daemon(self.record("Work"))
        pending = self.push("Work", "--in", "3600")      # due in an hour
        waiters = []
        for n in (58, 59, 64, 1000):
            # n - 1 that finished (their settled records, as a daemon's ack writes them)
            # and the pending one last: a cut argument list dropped the last ones
            done = [new_jid() for _ in range(n - 1)]
            pipe = self.r.pipeline()
            for j in done:
                pipe.set("cogworker:batch:settled:" + j, "success", ex=600)
            pipe.execute()
            w = json.loads(self.ctl("--json", "push", "--after", ",".join(done + [pending]),
                                    "Work")[0])
            self.assertTrue(w["waiting"], "%d dependencies: waits" % n)
            shown = json.loads(self.ctl("--json", "jobs", "show", w["jid"])[0])
            self.assertEqual((shown["waits_for"]["jids"], shown["waits_for"]["after_any"]),
                         ([pending], False))
            waiters.append(w["jid"])
        over = ",".join([new_jid() for _ in range(1000)] + [pending])
        _, err = self.ctl("push", "--after", over, "Work", rc=2)
        self.assertIn("1001 dependencies: a job waits for at most 1000", err)
        self.assertEqual(self.r.zcard("cogworker:batch:waiting"), len(waiters))
        time.sleep(2.5)                     # two looks of the poller: nothing ran
        self.assertEqual(self.runs(), {})
        self.assertEqual(self.r.llen("cogworker:queue:default"), 0)
        self.ctl("jobs", "retry", pending)  # due now: it runs, then each waiter
        runs = self.wait_runs([pending] + waiters)
        for w in waiters:
            self.assertEqual(len(runs[w]), 1)
            self.assertGreater(runs[w][0][1], runs[pending][0][2])
        self.assertEqual(self.r.zcard("cogworker:batch:waiting"), 0)
    def test_dp11_cancel_settles_a_waiting_member_for_the_jobs_that_wait_for_it(self):
        """Issue 32: a job outside the batch waiting --after a waiting member hung, and
        cogworker:batch:dependants:<jid> leaked."""
        d = self.flow_daemon(self.record("Work"), start=False)
        bid = self.ctl("batch", "new")[0].strip()
        a = self.push("Work", "--batch", bid)
        w = self.push("Work", "--batch", bid, "--after", a)
        out = self.push("Work", "--after", w)
        anyway = self.push("Work", "--after-any", "--after", w)
        text, _ = self.ctl("--yes", "batch", "cancel", bid)
        dead = self.dead_entries()
        self.assertEqual(list(dead), [out])
        self.assertEqual(dead[out]["error_class"], "Cogworker::DependencyFailed")
        self.assertEqual(dead[out]["error_message"], "dependency %s was discarded" % w)
        self.assertEqual(self.r.get("cogworker:batch:settled:" + w), b"discarded")
        self.assertIn("1 waiting member(s) discarded", text)
        d.start()
        self.wait_runs([anyway])
        time.sleep(1)
        self.assertEqual(sorted(self.runs()), [anyway], "a deleted, w and out never run")
        self.assertEqual(self.r.zcard("cogworker:batch:waiting"), 0)
        left = [k for k in self.r.keys("cogworker:batch:*")
                if k.split(b":")[2] in (b"wait", b"after", b"dependants")]
        self.assertEqual(left, [])
        s = json.loads(self.ctl("--json", "batch", "show", bid)[0])
        self.assertEqual((s["pending"], sorted(s["discarded_jids"])), (0, sorted([a, w])))

    def test_dp12_jobs_stuck_for_good_do_not_hide_a_release_cut_short(self):
        """Issue 32: BATCH_EXPIRE looked at the 100 oldest waiting jobs only."""
        d = self.flow_daemon(self.record("Work"), start=False)
        never = self.push("Work", "--in", "1d")             # scheduled a day ahead
        for _ in range(110):
            self.push("Work", "--after", never)
        a = self.push("Work")
        c = self.push("Work", "--after", a)                 # the newest waiting job
        # a ran and its ack wrote its settled record, then the daemon died before the
        # release (doc/protocol.md §7.34 "Plain jobs pay little")
        self.r.delete("cogworker:queue:default")
        self.r.set("cogworker:batch:settled:" + a, "success", ex=600)
        d.start()
        d.wait_log("settled job(s) had jobs still waiting for them", timeout=15)
        self.wait_runs([c])
        self.assertEqual(self.r.zcard("cogworker:batch:waiting"), 110)
        self.assertFalse(self.r.exists("cogworker:batch:dependants:" + a))

    def test_dp9_a_dependency_that_fails_into_retry_holds_its_dependants(self):
        fixed = self.path("fixed")
        self.flow_daemon(self.record("Work"), self.record("Flaky", 0.05, 1, fixed))
        a = self.push("Flaky")
        b = self.push("Work", "--after", a)
        wait_for(lambda: self.r.zcard("cogworker:retry") == 1, timeout=10, message="retry")
        time.sleep(1.5)       # a held ack rides on the next fetch, within a poll
        # No outcome recorded: only the mark BATCH_PUSH left (jobs wait for it).
        self.assertEqual(self.r.get("cogworker:batch:settled:" + a), b"waited")
        self.assertNotIn(b, self.runs())
        self.assertIsNotNone(self.r.zscore("cogworker:batch:waiting", b))
        with open(fixed, "w"):
            pass
        self.ctl("jobs", "retry", a)
        runs = self.wait_runs([b])
        self.assertEqual([r[3] for r in runs[a]], [1, 0])
        self.assertGreater(runs[b][0][1], runs[a][1][2])
        self.assertEqual(self.r.get("cogworker:batch:settled:" + a), b"success")

    def test_dp16_a_plain_success_writes_its_record_and_learns_of_dependants_in_one_command(self):
        # Issue 29: SET settled ... GET, not a SET and an EXISTS dependants per job; a job
        # pushed --after a running one is still released, one pushed after it succeeded
        # still counts it met.
        n = 30
        p = self.r.pipeline(transaction=False)
        jids = [new_jid() for _ in range(n)]
        for jid in jids:
            p.lpush("cogworker:queue:default", job("Work", jid=jid))
        p.execute()
        with Monitor(self.server) as mon:
            self.flow_daemon(self.record("Work", 0.01), self.record("Slow", 1.5),
                             concurrency=2)
            wait_for(lambda: len(self.runs()) == n, timeout=20, message="the plain jobs")
            slow = self.push("Slow", "--retry", "false")
            waits = self.push("Work", "--after", slow)
            self.assertEqual(self.r.get("cogworker:batch:settled:" + slow), b"waited")
            runs = self.wait_runs([slow, waits])
            self.assertGreater(runs[waits][0][1], runs[slow][0][2])
            met = self.push("Work", "--after", jids[0])
            self.wait_runs([met])
            time.sleep(0.3)
            ent = mon.entries()
        for jid in jids:
            rec = ("cogworker:batch:settled:" + jid).encode()
            deps = ("cogworker:batch:dependants:" + jid).encode()
            mine = [e[2] for e in ent if e[1] != "lua" and (rec in e[2] or deps in e[2])]
            # one command for the record and the question; the one for jids[0] by
            # cogworkerctl's GET at its push --after
            want = [[b"SET", rec, b"success", b"EX", b"600", b"GET"]]
            self.assertEqual([c for c in mine if c[0].upper() != b"GET"], want, jid)


if __name__ == "__main__":
    unittest.main()

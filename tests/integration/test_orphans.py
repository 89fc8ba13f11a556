# SPDX-License-Identifier: MIT
"""OR — orphan recovery (doc/behaviours.md §5, doc/protocol.md §7.10, §7.14), and the issue's
end-to-end crash scenarios.

Dead processes are simulated as doc/behaviours.md §0.3 says (no presence key, last_beat
backdated), and D's orphan checks run every second (orphan_check_interval = 1) instead of
every 60 s. The end-to-end tests use the issue's settings (heartbeat_interval 1,
process_ttl 3, orphan_threshold 4, orphan_check_interval 1) and real kill -9.

Not covered: OR-19 and OR-23 are [unit] behaviours (a connection lost inside one
identity's recovery; a give-back of an unstarted job after stop began), not producible
selectively against a real server.

Run: python3 tests/integration/run.py test_orphans
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from observe import descendants, pid_alive, ppid_of  # noqa: E402
from pollkit import (DEAD, E2E, FAST, FIRST_CHECK, IDENTITIES, LAST_BEAT, ORPH,  # noqa: E402
                     SCHEDULE, PollerTestCase, handler, loads, new_jid, payload, wait_for)

DEAD_ID = "dead-host:1:abc"
OTHER = dict(FAST, queues=["other"])     # recovered jobs stay visible on their queue


class OrphanRecoveryTest(PollerTestCase):

    def test_or1_boot_scan_finds_unregistered_dead_list_live_ones_untouched(self):
        a, b = payload(), payload()
        self.dead_fake(DEAD_ID, [a], registered=False)
        self.live_fake("live-host:2:def", [b])
        d = self.daemon(**OTHER)
        self.wait_queue("default", [a])
        self.assertEqual(self.list_of(DEAD_ID), [])
        self.assertEqual(self.list_of("live-host:2:def"), [b.encode()])
        d.wait_log("requeued 1 job(s) left in progress by dead process dead-host:1:abc")
        self.assertEqual(self.list_of(d.identity), [])

    def test_or2_no_scan_after_boot_registry_member_recovered(self):
        mon = self.monitor()
        self.daemon(**OTHER)
        self.wait_passes(mon, 1)
        a = payload()
        self.dead_fake(DEAD_ID, [a], registered=False)
        self.wait_passes(mon, 3)
        self.assertEqual(self.list_of(DEAD_ID), [a.encode()], "found without a SCAN")
        self.assertEqual(len(mon.commands("SCAN")), 1)
        self.r.sadd(IDENTITIES, DEAD_ID)
        self.wait_queue("default", [a])
        wait_for(lambda: not self.r.sismember(IDENTITIES, DEAD_ID), timeout=5,
                 message="identity removed once its list is empty")

    def test_or3_registered_with_a_fresh_last_beat(self):
        d = self.daemon(**OTHER)
        for _ in range(3):
            time.sleep(1)
            self.assertTrue(self.r.sismember(IDENTITIES, d.identity))
            self.assertLessEqual(abs(int(self.r.hget(LAST_BEAT, d.identity)) - self.now()), 5)

    def test_or4_to_7_threshold_rule(self):
        now = int(self.now())
        jobs = {name: payload() for name in ("recent", "old", "fresh", "garbage")}
        self.dead_fake("h:1:recent", [jobs["recent"]], last_beat=now - 120)
        self.dead_fake("h:2:old", [jobs["old"]], last_beat=now - 301)
        self.dead_fake("h:3:fresh", [jobs["fresh"]], last_beat=now - 10)
        self.dead_fake("h:4:garbage", [jobs["garbage"]], last_beat="garbage")
        mon = self.monitor()
        self.daemon(**OTHER)
        self.wait_queue("default", [jobs["old"], jobs["garbage"]])
        self.wait_passes(mon, 2)
        self.assertEqual(sorted(self.queue("default")),
                         sorted([jobs["old"].encode(), jobs["garbage"].encode()]))
        for ident, name in (("h:1:recent", "recent"), ("h:3:fresh", "fresh")):
            self.assertEqual(self.list_of(ident), [jobs[name].encode()])
            self.assertTrue(self.r.sismember(IDENTITIES, ident))
            self.assertIsNotNone(self.r.hget(LAST_BEAT, ident))
        for ident in ("h:2:old", "h:4:garbage"):
            self.assertFalse(self.r.sismember(IDENTITIES, ident))
            self.assertIsNone(self.r.hget(LAST_BEAT, ident))

    def test_or8_configured_threshold(self):
        now = int(self.now())
        a, b = payload(), payload()
        self.dead_fake("h:1:a", [a], last_beat=now - 90)
        self.dead_fake("h:2:b", [b], last_beat=now - 30)
        mon = self.monitor()
        self.daemon(orphan_threshold=60, **OTHER)
        self.wait_queue("default", [a])
        self.wait_passes(mon, 2)
        self.assertEqual(self.list_of("h:2:b"), [b.encode()])

    def test_or9_end_to_end_crash_then_recovery_by_another_daemon(self):
        d1 = self.daemon(handlers=[{"class": "S", "command": handler("slow", 60)}], **FAST)
        p = payload("S")
        self.push(p)
        jid = loads(p)["jid"]
        wait_for(lambda: d1.runs_of(jid) == 1, timeout=5)
        children = [c for c in descendants(d1.proc.pid) if ppid_of(c) == d1.proc.pid]
        self.assertTrue(children)
        ident = d1.identity
        d1.kill()
        wait_for(lambda: not any(pid_alive(c) for c in children), timeout=1,
                 message="handler child gone with the daemon")
        self.assertEqual(self.queue("default"), [])
        self.assertEqual(self.list_of(ident), [p.encode()])
        self.make_dead(ident)
        d2 = self.daemon(handlers=[{"class": "S", "command": handler("slow", 60)}], **FAST)
        wait_for(lambda: d2.runs_of(jid) == 2, timeout=5, message="J run again by D2")
        self.assertEqual(self.list_of(ident), [])
        d2.wait_log("requeued 1 job(s) left in progress by dead process %s" % ident)

    def test_or12_and_13_unlisted_queue_warning(self):
        now = int(self.now())
        nobody, fresh = payload(queue="nobody-reads"), payload(queue="fresh")
        self.r.zadd(b"cogworker:live_queues", {"fresh": self.now()})
        self.dead_fake("h:1:a", [nobody], last_beat=now - 301)
        self.dead_fake("h:2:b", [fresh], last_beat=now - 301)
        d = self.daemon(**OTHER)
        self.wait_queue("nobody-reads", [nobody])
        self.wait_queue("fresh", [fresh])
        self.assertTrue(self.r.sismember(b"cogworker:queues", "nobody-reads"))
        d.wait_log("no live process reads: nobody-reads")
        self.assertEqual([l for l in d.log_lines("no live process reads") if "fresh" in l], [])

    def test_or17_basic_daemon_never_scans_but_recovers_registered_lists(self):
        mon = self.monitor()
        a = payload()
        d = self.daemon(fetch="basic", **OTHER)
        self.wait_passes(mon, 2)
        self.dead_fake(DEAD_ID, [a], last_beat=int(self.now()) - 301)
        self.wait_queue("default", [a])
        self.wait_passes(mon, 2)
        self.assertEqual(mon.commands("SCAN"), [])
        d.stop()

    def test_or17_reliable_daemon_scans_once(self):
        mon = self.monitor()
        self.daemon(**OTHER)
        self.wait_passes(mon, 4)
        scans = [e for e in mon.commands("SCAN") if b"cogworker:inprogress:*" in e[2]]
        self.assertEqual(len(scans), 1)
        self.assertLessEqual(scans[0][0], self.passes(mon)[0] + 0.001)

    def test_or21_and_22_recovery_retakes_the_running_lock(self):
        now = int(self.now())
        j1, j2, j3 = new_jid(), new_jid(), new_jid()
        absent = payload(jid=j1, periodic_until_executed=True, periodic_pjid="pj1")
        owned = payload(jid=j2, periodic_until_executed=True, periodic_pjid="pj2")
        newer = payload(jid=j3, periodic_until_executed=True, periodic_pjid="pj3")
        self.r.set(b"periodic:running:pj2", j2, ex=30)
        self.r.set(b"periodic:running:pj3", "newer", ex=30)
        self.dead_fake("h:1:a", [absent, owned, newer], last_beat=now - 301)
        self.daemon(**OTHER)
        self.wait_queue("default", [absent, owned, newer])
        self.assertEqual(self.r.get(b"periodic:running:pj1"), j1.encode())
        self.assertGreater(self.r.ttl(b"periodic:running:pj1"), 420)
        self.assertEqual(self.r.get(b"periodic:running:pj2"), j2.encode())
        self.assertGreater(self.r.ttl(b"periodic:running:pj2"), 420)
        self.assertEqual(self.r.get(b"periodic:running:pj3"), b"newer")
        self.assertLessEqual(self.r.ttl(b"periodic:running:pj3"), 30)

    def test_or24_success_deletes_the_orphan_counter(self):
        """OR-24: a job recovered from a dead process (its counter at 2, then 3) that then
        succeeds leaves no counter: REQUEUE marked its settled record, which the success's
        ack reads in place of a DEL sent for every job (doc/protocol.md §7.34)."""
        p = payload("Ok")
        jid = loads(p)["jid"]
        self.r.set(ORPH + jid, 2)
        self.dead_fake(DEAD_ID, [p])
        d = self.daemon(handlers=[{"class": "Ok", "command": handler("ok")}], **FAST)
        wait_for(lambda: d.runs_of(jid) == 1 and not self.list_of(d.identity), timeout=10)
        wait_for(lambda: not self.r.exists(ORPH + jid), timeout=2)
        self.assertEqual(self.r.get("cogworker:batch:settled:" + jid), b"success")

    def test_or25_clean_stops_never_count_as_orphanings(self):
        p = payload("G")
        jid = loads(p)["jid"]
        self.push(p)
        for i in range(5):
            d = self.daemon(handlers=[{"class": "G", "command": handler("gate")}],
                            shutdown_timeout=1, **FAST)
            wait_for(lambda: d.runs_of(jid) == i + 1, timeout=5)
            self.assertEqual(d.stop(), 0)
            self.assertEqual(self.queue("default"), [p.encode()])
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertFalse(self.r.exists(ORPH + jid))

    def test_or26_unreadable_job_lands_on_default_and_is_buried_there(self):
        self.dead_fake(DEAD_ID, ["{not json"], last_beat=int(self.now()) - 301)
        d = self.daemon(**FAST)         # reads default
        wait_for(lambda: self.r.zcard(DEAD) == 1, timeout=5)
        [e] = self.dead_entries()
        self.assertEqual(e["class"], "(unparseable)")
        self.assertEqual(e["raw_payload"], "{not json")
        self.assertEqual(e["queue"], "default")
        d.wait_log("requeued 1 job(s) left in progress by dead process %s" % DEAD_ID)


class GuardOffRecoveryTest(PollerTestCase):
    """D runs without RENAME (and, where said, without SCAN): the faults stay in place."""

    def test_or10_and_11_a_job_that_cannot_be_put_back_does_not_block_the_others(self):
        self.r.set(b"cogworker:queue:broken", "x")
        broken, good = payload(queue="broken"), payload()
        self.dead_fake("dead-host:9:z", [broken, good], last_beat=int(self.now()) - 301)
        d = self.daemon(url=self.guard_off(), **OTHER)
        self.wait_queue("default", [good])
        self.assertEqual(self.list_of("dead-host:9:z"), [broken.encode()])
        self.assertTrue(self.r.sismember(IDENTITIES, "dead-host:9:z"))
        d.wait_log("1 job(s) left in progress by dead-host:9:z couldn't be put back")
        self.r.delete(b"cogworker:queue:broken")
        self.wait_queue("broken", [broken])
        wait_for(lambda: not self.r.sismember(IDENTITIES, "dead-host:9:z"), timeout=5)

    def test_or14_one_bad_identity_is_isolated_and_the_pass_counts(self):
        now = int(self.now())
        self.r.sadd(IDENTITIES, "h:1:a")
        self.r.set(b"cogworker:inprogress:h:1:a", "x")
        a = payload()
        self.dead_fake("h:2:b", [a], last_beat=now - 301)
        d = self.daemon(url=self.guard_off(), log_level="info", **OTHER)
        self.wait_queue("default", [a])
        d.wait_log(FIRST_CHECK)
        errors = d.log_lines("Orphan check: recovery of")
        self.assertTrue(errors)
        self.assertTrue(all("h:1:a" in l and "WRONGTYPE" in l for l in errors), errors)

    def test_or15_scan_finds_lists_when_the_registry_is_unreadable(self):
        self.r.set(IDENTITIES, "x")
        a = payload()
        self.dead_fake(DEAD_ID, [a], registered=False)
        d = self.daemon(url=self.guard_off(), **OTHER)
        self.wait_queue("default", [a])
        d.wait_log(FIRST_CHECK)

    def test_or16_no_candidate_source_no_completed_check(self):
        self.r.set(IDENTITIES, "x")
        mon = self.monitor()
        d = self.daemon(url=self.acl_url("cw2", "-rename", "-scan"), **OTHER)
        self.wait_passes(mon, 3)
        self.assertEqual(d.log_lines(FIRST_CHECK), [])
        d.wait_log("scan for in-progress lists failed")
        self.r.delete(IDENTITIES)
        d.wait_log(FIRST_CHECK, timeout=5)

    def test_or18_next_check_soon_after_connection_trouble_not_after_command_errors(self):
        mon = self.monitor()
        d = self.daemon(url=self.guard_off(), queues=["other"], poll_interval=1,
                        orphan_check_interval=6)
        d.wait_log(FIRST_CHECK)
        booted = time.time()
        a = payload()
        self.dead_fake(DEAD_ID, [a], last_beat=int(self.now()) - 301)
        self.r.set(b"cogworker:inprogress:h:9:z", "x")       # a command error each check
        self.r.sadd(IDENTITIES, "h:9:z")

        def checks():
            """Every orphan check reads the registry first. The key check reads it too,
            right after cogworker:queues (at boot, and since KG-9 once more when the
            wrong-typed list answers WRONGTYPE): those reads are left out."""
            out, last = [], {}
            for e in mon.entries():
                if (e[2][:2] == [b"SMEMBERS", IDENTITIES] and e[0] > booted and
                        last.get(e[1]) != [b"SMEMBERS", b"cogworker:queues"]):
                    out.append(e[0])
                last[e[1]] = e[2][:2]
            return out
        self.ro_on()                    # READONLY: the requeue script fails
        wait_for(lambda: len(checks()) >= 3, timeout=10, message="three checks")
        t = checks()
        self.assertLess(t[2] - t[1], 2, t)       # the one after a failed check comes soon
        self.assertEqual(self.queue("default"), [])
        self.ro_off()
        self.wait_queue("default", [a], timeout=5)
        recovered = time.time()
        # now only the wrong-typed list fails, a command error: the 6 s rhythm holds
        wait_for(lambda: len([c for c in checks() if c > recovered]) >= 2, timeout=15,
                 message="two more checks")
        base = max(c for c in checks() if c <= recovered)   # the check that recovered a
        t = [base] + [c for c in checks() if c > recovered]
        gaps = [y - x for x, y in zip(t, t[1:])]
        self.assertTrue(all(g > 5 for g in gaps), gaps)
        d.wait_log("Orphan check: recovery of h:9:z failed")

    def test_or20_failing_orphan_check_never_stops_graduation(self):
        self.r.set(IDENTITIES, "x")
        p = payload()
        self.r.zadd(SCHEDULE, {p: self.now() - 10})
        mon = self.monitor()
        d = self.daemon(url=self.acl_url("cw2", "-rename", "-scan"), **OTHER)
        wait_for(lambda: self.queue("default"), timeout=3, message="graduated")
        first_poll = [e[0] for e in mon.commands("ZRANGEBYSCORE")][0]
        self.assertLessEqual(self.passes(mon)[0], first_poll)
        self.assertEqual(d.log_lines(FIRST_CHECK), [])


class EndToEndTest(PollerTestCase):
    """The issue's scenarios with real daemons and real time."""

    def test_kill_9_job_runs_again_on_the_survivor_within_10s(self):
        hs = [{"class": "S", "command": handler("slow", 30)},
              {"class": "Ok", "command": handler("ok")}]
        d1 = self.daemon(handlers=hs, **E2E)
        d2 = self.daemon(handlers=hs, **E2E)
        done = [payload("Ok") for _ in range(4)]
        for p in done:
            self.push(p)
        wait_for(lambda: all(d1.runs_of(loads(p)["jid"]) == 1 for p in done), timeout=5)
        job_ = payload("S")
        jid = loads(job_)["jid"]
        self.push(job_)
        wait_for(lambda: d1.runs_of(jid) == 1, timeout=5)
        victim = next(d for d in (d1, d2) if job_.encode() in self.list_of(d.identity))
        survivor = d2 if victim is d1 else d1
        victim.kill()
        killed = time.monotonic()
        wait_for(lambda: d1.runs_of(jid) == 2, timeout=10, message="J run again")
        self.assertLess(time.monotonic() - killed, 10)
        survivor.wait_log("requeued 1 job(s) left in progress by dead process %s"
                          % victim.identity)
        self.assertEqual(self.list_of(victim.identity), [])
        for p in done:      # nothing that had finished runs twice
            self.assertEqual(d1.runs_of(loads(p)["jid"]), 1)

    def test_killed_max_orphanings_plus_1_times_ends_dead_with_on_death_once(self):
        deaths = self.path("deaths")
        hs = [{"class": "S", "command": handler("slow", 30)}]
        settings = dict(E2E, max_orphanings=1, on_death=handler("recorder", deaths,
                                                                   self.server.port))
        p = payload("S", retry=25)
        jid = loads(p)["jid"]
        daemons = [self.daemon(handlers=hs, **settings)]
        self.push(p)
        for kill in range(2):                       # max_orphanings + 1 kills
            wait_for(lambda: daemons[0].runs_of(jid) == kill + 1, timeout=12,
                     message="run %d" % (kill + 1))
            victim = next(d for d in daemons if p.encode() in self.list_of(d.identity))
            victim.kill()
            daemons.remove(victim)
            daemons.append(self.daemon(handlers=hs, **settings))
        entry = wait_for(lambda: self.r.zrange(DEAD, 0, -1), timeout=12)[0]
        dead = loads(entry)
        self.assertEqual(dead["jid"], jid)
        self.assertEqual(dead["error_class"], "Cogworker::ProcessDied")
        self.assertIn("more than 1 times", dead["error_message"])
        self.assertEqual(daemons[0].runs_of(jid), 2)
        time.sleep(2)
        with open(deaths) as f:
            records = f.read().split("--\n")
        records = [r for r in records if r.strip()]
        self.assertEqual(len(records), 1, records)
        self.assertIn("entry=" + entry.decode(), records[0])
        self.assertFalse(self.r.exists(ORPH + jid))
        self.assertEqual(self.r.llen(b"cogworker:repeat_orphans"), 0)

    def test_sigstopped_daemon_keeps_its_jobs(self):
        hs = [{"class": "G", "command": handler("gate")}]
        settings = dict(E2E, orphan_threshold=30)
        d1 = self.daemon(handlers=hs, **settings)
        p = payload("G")
        jid = loads(p)["jid"]
        self.push(p)
        wait_for(lambda: d1.runs_of(jid) == 1, timeout=5)
        d2 = self.daemon(handlers=hs, **settings)
        d1.signal(signal.SIGSTOP)
        try:
            wait_for(lambda: not self.r.exists("cogworker:process:" + d1.identity), timeout=6,
                     message="D1's presence expired")
            time.sleep(5)           # five more checks of D2
            self.assertEqual(self.list_of(d1.identity), [p.encode()])
            self.assertEqual(self.queue("default"), [])
            self.assertEqual(d2.runs_of(jid), 1)
            self.assertEqual(d2.log_lines("left in progress by dead process"), [])
        finally:
            d1.signal(signal.SIGCONT)
        d1.open_gate(jid)
        wait_for(lambda: not self.list_of(d1.identity), timeout=5)
        time.sleep(1)
        self.assertEqual(d1.runs_of(jid), 1)


if __name__ == "__main__":
    import unittest
    unittest.main()

# SPDX-License-Identifier: MIT
"""The periodic ticker (doc/behaviours.md group PT; doc/protocol.md §7.16, §6.14, §6.15, §4.7, §4.9).

What a user sees: the job a slot pushes onto `default`, the keys CLAIM and ROLLBACK leave
in Redis, `periodic:schedule`, and the daemon's log. The ticker runs every 0.2 s here
(`tick_interval`), the protocol's 5 s being a default. Scenarios needing one slot use the
fixture entry E (`* * * * *`, kept away from minute boundaries) or a yearly entry; those
needing several use 6-field crons with seconds.

Not here: PT-8, PT-24, PT-25, PT-28 are [unit] (no fault-injecting Redis layer exists
yet); PT-16 and PT-22, PT-27 are in test_periodic_fleet.py (they take longer).

Run: python3 tests/integration/run.py test_periodic
"""

import hashlib
import json
import os
import re
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, wait_for  # noqa: E402
from observe import Monitor  # noqa: E402
from periodickit import (CuttingProxy, DISABLED, E, E_ARGS, E_PJID, SCHEDULE_HASH, TICK, YEARLY,  # noqa: E402
                         PeriodicTestCase, avoid_minute_boundary, creation_slots, entry, every_slot,
                         last_slot_key, pjid, running_key, slot_lock_key, yearly_slot)

HEX24 = re.compile(r"^[0-9a-f]{24}$")


def minute_slot(t):
    """The latest whole minute at or before t (issue 12: the slot of its own second)."""
    s = int(t)
    return s - s % 60


class FirstSlot(PeriodicTestCase):

    def test_pt01_pt02_first_slot_pushes_the_job_and_takes_the_locks(self):
        avoid_minute_boundary(15)
        self.periodic_daemon([E])
        j = self.wait_jobs(E_PJID)[0]
        slot = j["periodic_slot"]
        self.assertEqual(slot % 60, 0)
        self.assertTrue(0 < j["created_at"] - slot <= 61, (j["created_at"], slot))
        self.assertEqual(slot, minute_slot(j["created_at"]))
        self.assertEqual(j["class"], "P")
        self.assertEqual(j["args"], [{"k": "v"}])
        self.assertEqual(j["queue"], "default")
        self.assertEqual(j["retry"], 0)
        self.assertEqual(j["periodic_pjid"], E_PJID)
        self.assertIs(j["periodic_until_executed"], True)
        self.assertRegex(j["jid"], HEX24)
        self.assertIsInstance(j["created_at"], float)
        self.assertIsInstance(j["enqueued_at"], float)
        self.assertNotIn("unique", j)
        self.assertEqual(self.r.get(running_key(E_PJID)), j["jid"].encode())
        self.assertEqual(self.r.get(last_slot_key(E_PJID)), str(slot).encode())
        ttl = self.r.ttl(slot_lock_key(E_PJID, slot))
        self.assertTrue(0 < ttl <= 20, ttl)
        # PT-2: the running lock lives queued_ttl (unique_lock_ttl = 86400).
        ttl = self.r.ttl(running_key(E_PJID))
        self.assertTrue(1 <= ttl <= 86400, ttl)
        self.assertGreater(ttl, 86000)
        # One slot, one job, however many ticks pass.
        self.settle_ticks(5)
        self.assertEqual(len(self.jobs_of(E_PJID)), 1)

    def test_pt03_fast_job_leaves_no_running_lock(self):
        avoid_minute_boundary(15)
        d = self.periodic_daemon([E], queues=["default"],
                                 handlers=[{"class": "P", "command": handler("ok")}])
        line = d.wait_log("done: P jid=", timeout=10)
        jid = line.split("jid=")[1].split()[0]
        self.assertEqual(d.runs_of(jid), 1)
        self.assertIsNone(self.r.get(running_key(E_PJID)))
        self.assertIsNotNone(self.r.get(last_slot_key(E_PJID)))

    def test_pt05_fractional_unique_lock_ttl_is_rounded_up(self):
        self.periodic_daemon([entry(YEARLY, "P", unique=True)], unique_lock_ttl=3600.5)
        p = pjid(YEARLY, "P", "[]")
        self.wait_jobs(p)
        pttl = self.r.pttl(running_key(p))
        self.assertTrue(3600000 < pttl <= 3601000, pttl)

    def test_pt17_schedule_is_published_with_cogworkers_pjid(self):
        e2 = entry("* * * * *", "P", "[2]", retry=0, unique=True)
        self.periodic_daemon([E, e2])
        wait_for(lambda: self.r.hlen(SCHEDULE_HASH) == 2, message="two published entries")
        self.assertEqual(E_PJID, hashlib.sha1(b'* * * * *|P|[{"k":"v"}]').hexdigest())
        self.assertEqual(self.r.hget(SCHEDULE_HASH, E_PJID),
                         b'{"cron":"* * * * *","class":"P","retry":0,"unique":"until_executed",'
                         b'"args":[{"k":"v"}]}')
        p2 = pjid("* * * * *", "P", "[2]")
        self.assertNotEqual(p2, E_PJID)
        self.assertIsNotNone(self.r.hget(SCHEDULE_HASH, p2))

    def test_pt17_args_are_canonicalised_for_pjid_schedule_and_job(self):
        # Written with spaces in the conf; a Ruby process derives the pjid from the
        # canonical JSON, publishes it, and pushes it, compact.
        cron = YEARLY
        self.periodic_daemon([entry(cron, "P", '[ {"k" : "v"}, 1.50, 12345678901234567890 ]')])
        canon = '[{"k":"v"},1.5,12345678901234567890]'
        p = pjid(cron, "P", canon)
        j = self.wait_jobs(p)[0]
        raw = self.r.lindex(b"cogworker:queue:default", 0)
        self.assertIn(b'"args":' + canon.encode(), raw)
        self.assertEqual(j["retry"], 0)
        sched = json.loads(self.r.hget(SCHEDULE_HASH, p))
        self.assertEqual(sched, {"cron": cron, "class": "P", "retry": 0, "unique": None,
                                 "args": [{"k": "v"}, 1.5, 12345678901234567890]})


class Readiness(PeriodicTestCase):

    def test_pt09_no_claim_before_the_first_orphan_check(self):
        # A big keyspace makes the first orphan check (its boot SCAN) take a while.
        self.r.execute_command("DEBUG", "POPULATE", "300000", "filler")
        with Monitor(self.server) as mon:
            d = self.periodic_daemon([entry(YEARLY, "P")])
            p = pjid(YEARLY, "P", "[]")
            self.wait_jobs(p)
            entries = mon.entries()
        d.wait_log("first orphan check completed")
        first_registry = next((i for i, e in enumerate(entries)
                               if b"cogworker:inprogress_identities" in e[2]
                               and e[2][0].upper() in (b"SMEMBERS", b"SSCAN", b"SRANDMEMBER")),
                              None)
        first_claim = next(i for i, e in enumerate(entries)
                           if e[2][0].upper() in (b"EVALSHA", b"EVAL") and len(e[2]) > 3
                           and e[2][3] == running_key(p))
        scans = [i for i, e in enumerate(entries) if e[2][0].upper() == b"SCAN"]
        self.assertIsNotNone(first_registry, "the orphan check never read the registry")
        self.assertLess(first_registry, first_claim)
        self.assertTrue(scans, "no boot scan")
        self.assertLess(scans[-1], first_claim)


class Faults(PeriodicTestCase):

    def test_pt04_ticker_survives_redis_down_and_fires_the_next_slot(self):
        p = pjid("*/2 * * * * *", "P", "[]")
        d = self.periodic_daemon([entry("*/2 * * * * *", "P")])
        self.wait_jobs(p)
        self.server.pause()
        time.sleep(7)                   # several ticks, and more than the command timeout
        self.server.resume()
        resumed = time.time()
        d.wait_log("Periodic tick: Redis unavailable", timeout=5)
        js = self.wait_jobs(p, n=1, timeout=15)
        wait_for(lambda: any(j["periodic_slot"] >= every_slot(2, resumed)
                             for j in self.jobs_of(p)),
                 timeout=15, message="a slot fired after Redis came back")
        slots = [j["periodic_slot"] for j in self.jobs_of(p)]
        self.assertEqual(len(slots), len(set(slots)))
        self.assertTrue(js)

    def test_pt06_failed_push_rolls_back_and_fires_later(self):
        url = self.guard_off_url()
        self.r.set(b"cogworker:queue:default", b"not a list")
        e = entry(YEARLY, "P", unique=True)
        p = pjid(YEARLY, "P", "[]")
        d = self.periodic_daemon([e], url=url)
        d.wait_log("Periodic tick: %s failed" % p, timeout=10)
        slot = yearly_slot()
        self.assertEqual(self.r.get(last_slot_key(p)), str(slot - 1).encode())
        self.assertEqual(self.r.exists(slot_lock_key(p, slot)), 0)
        self.assertEqual(self.r.exists(running_key(p)), 0)
        self.assertEqual(self.r.type(b"cogworker:queue:default"), b"string")
        self.r.delete(b"cogworker:queue:default")
        js = self.wait_jobs(p, timeout=15)     # after the 5 s (or 10 s) backoff
        self.assertEqual([j["periodic_slot"] for j in js], [slot])
        self.assertEqual(self.r.get(running_key(p)), js[0]["jid"].encode())
        self.assertEqual(self.r.get(last_slot_key(p)), str(slot).encode())

    def test_pt07_rollback_restores_the_previous_last_slot(self):
        url = self.guard_off_url()
        self.r.set(b"cogworker:queue:default", b"not a list")
        p = pjid(YEARLY, "P", "[]")
        self.r.set(last_slot_key(p), b"100")
        d = self.periodic_daemon([entry(YEARLY, "P", unique=True)], url=url)
        d.wait_log("Periodic tick: %s failed" % p, timeout=10)
        self.assertEqual(self.r.get(last_slot_key(p)), b"100")
        self.assertEqual(self.r.exists(running_key(p)), 0)
        self.assertEqual(self.r.exists(slot_lock_key(p, yearly_slot())), 0)

    def test_pt08_rollback_that_fails_too_is_retried_until_redis_is_back(self):
        # Redis "goes away" exactly when the job is pushed: the push fails, and so does the
        # rollback that follows; both are availability errors.
        proxy = CuttingProxy(self.server.port, [b"LPUSH", b"cogworker:queue:default"], 3)
        self.addCleanup(proxy.close)
        p = pjid(YEARLY, "P", "[]")
        slot = yearly_slot()
        d = self.periodic_daemon([entry(YEARLY, "P", unique=True)], url=proxy.url)
        line = d.wait_log("rollback of %s slot %d failed" % (p, slot), timeout=10)
        # While Redis is away the claim stands (the rollback is owed, in memory).
        self.assertEqual(self.r.get(last_slot_key(p)), str(slot).encode())
        self.assertIsNotNone(self.r.get(running_key(p)))
        self.assertEqual(self.jobs_of(p), [])
        d.wait_log("rollback of %s slot %d done" % (p, slot), timeout=10)
        js = self.wait_jobs(p, timeout=5)
        self.assertEqual([j["periodic_slot"] for j in js], [slot])
        self.assertEqual(self.r.get(running_key(p)), js[0]["jid"].encode())
        self.assertGreaterEqual(time.time() - proxy.cut_at, 3)
        self.assertIn("retried every tick", line)
        self.settle_ticks(5)
        self.assertEqual(len(self.jobs_of(p)), 1)

    def test_pt10_damaged_keys_fail_only_their_entry(self):
        url = self.guard_off_url()
        self.r.set(SCHEDULE_HASH, b"a string")
        a = pjid(YEARLY, "A", "[]")
        b = pjid(YEARLY, "B", "[]")
        self.r.set(last_slot_key(a), b"garbage")
        d = self.periodic_daemon([entry(YEARLY, "A"), entry(YEARLY, "B")], url=url)
        self.wait_jobs(b)
        d.wait_log("Periodic tick: %s failed" % a)
        d.wait_log("Periodic schedule not published")
        self.assertEqual(self.jobs_of(a), [])
        self.assertEqual(self.r.get(last_slot_key(a)), b"garbage")
        self.assertIsNone(d.proc.poll())

    def test_pt11_unreadable_disabled_set_counts_as_enabled(self):
        url = self.guard_off_url()
        self.r.set(DISABLED, b"a string")
        p = pjid(YEARLY, "P", "[]")
        d = self.periodic_daemon([entry(YEARLY, "P")], url=url)
        self.wait_jobs(p)
        line = d.wait_log("treating")
        self.assertIn(p, line)
        self.assertIn("enabled", line)

    def test_pt23_read_only_redis_is_retried_every_tick_without_backoff(self):
        cron = "*/3 * * * * *"
        p = pjid(cron, "P", "[]")
        d = self.periodic_daemon([entry(cron, "P")])
        self.wait_jobs(p)
        with Monitor(self.server) as mon:
            self.ro_on()
            ro_start = time.time()
            time.sleep(7)
            n_before = len(self.jobs_of(p))
            self.ro_off()
            off = time.time()
            # Within a tick or two the current slot fires (a backoff would wait 5-20 s).
            wait_for(lambda: len(self.jobs_of(p)) > n_before, timeout=1.5,
                     message="the slot firing right after read-only ended")
            took = time.time() - off
            claims = [e for e in mon.entries()
                      if e[2][0].upper() in (b"EVALSHA", b"EVAL") and len(e[2]) > 3
                      and e[2][3] == running_key(p) and ro_start + 0.5 < e[0] < off - 0.5]
        # One claim attempt per tick while read-only: ~30 at 0.2 s (a 5 s backoff: 2).
        self.assertGreater(len(claims), 10, "claims while read-only: %d" % len(claims))
        self.assertLess(took, 1.5)
        last = self.jobs_of(p)[-1]
        self.assertIn(last["periodic_slot"], creation_slots(3, last))
        self.assertIsNone(d.proc.poll())


class Disabled(PeriodicTestCase):

    def test_pt12_pt13_disabled_entry_claims_nothing_then_a_peer_fires_the_slot(self):
        # E's shape with a yearly cron: the slot cannot change while the test runs.
        e = entry(YEARLY, "P", E_ARGS, retry=0, unique=True)
        p = pjid(YEARLY, "P", E_ARGS)
        q = entry(YEARLY, "Q")              # an enabled neighbour: proof the ticker ticks
        qp = pjid(YEARLY, "Q", "[]")
        self.r.sadd(DISABLED, p)
        self.periodic_daemon([e, q])
        self.wait_jobs(qp)
        self.settle_ticks(5)
        self.assertEqual(self.jobs_of(p), [])
        self.assertIsNone(self.r.get(running_key(p)))
        self.assertIsNone(self.r.get(last_slot_key(p)))
        # PT-13: enabled again, a second daemon (same slot) fires it exactly once; the
        # first daemon, which checked the slot while it was disabled, does not.
        self.r.srem(DISABLED, p)
        self.periodic_daemon([e])
        js = self.wait_jobs(p)
        self.settle_ticks(5)
        self.assertEqual([j["periodic_slot"] for j in self.jobs_of(p)], [yearly_slot()])
        self.assertEqual(self.r.get(running_key(p)), js[0]["jid"].encode())

    def test_pt14_entry_without_unique_never_writes_a_running_lock(self):
        cron = "*/2 * * * * *"
        p = pjid(cron, "P", "[]")
        self.r.config_set("notify-keyspace-events", "KA")
        self.addCleanup(self.r.config_set, "notify-keyspace-events", "")
        sub = self.server.client().pubsub()
        self.addCleanup(sub.close)
        sub.psubscribe("__keyspace@0__:periodic:*")
        d = self.periodic_daemon([entry(cron, "P")], queues=["default"],
                                 handlers=[{"class": "P", "command": handler("dump")}])
        d.wait_log("done: P jid=", timeout=10, count=2)
        events = []
        while True:
            m = sub.get_message(timeout=0.5)
            if m is None:
                break
            if m["type"] == "pmessage":
                events.append((m["channel"], m["data"]))
        keys = {c for c, _ in events}
        self.assertIn(b"__keyspace@0__:" + last_slot_key(p), keys)   # notifications work
        self.assertFalse([c for c in keys if b"periodic:running:" in c], events)
        ran = re.findall(r"done: P jid=([0-9a-f]{24})", d.log())
        self.assertGreaterEqual(len(ran), 2)
        for jid in ran:         # the jobs as their handler got them (handlers/dump)
            with open(os.path.join(d.runs + ".d", jid + ".stdin")) as f:
                j = json.loads(f.read())
            self.assertEqual(j["periodic_pjid"], p)
            self.assertNotIn("periodic_until_executed", j)
            self.assertEqual(d.runs_of(jid), 1)


class Slots(PeriodicTestCase):

    def test_pt15_one_job_per_slot_never_two(self):
        cron = "*/2 * * * * *"
        p = pjid(cron, "P", "[]")
        start = time.time()
        self.periodic_daemon([entry(cron, "P")])
        self.wait_jobs(p, n=6, timeout=20)
        self.settle_ticks(3)
        slots = [j["periodic_slot"] for j in self.jobs_of(p)]
        self.assertEqual(len(slots), len(set(slots)), slots)
        self.assertEqual(slots, sorted(slots))
        first = self.jobs_of(p)[0]
        self.assertIn(first["periodic_slot"], creation_slots(2, first))
        self.assertGreaterEqual(first["periodic_slot"], every_slot(2, start))
        self.assertEqual(slots, list(range(slots[0], slots[-1] + 1, 2)), slots)

    def test_pt18_catch_up_off_primes_a_new_entry(self):
        cron = "*/3 * * * * *"
        p = pjid(cron, "P", "[]")
        d = self.periodic_daemon([entry(cron, "P")], periodic_catch_up=False)
        # The primed slot as the daemon says it, not the key's value read afterwards: on a
        # loaded host the first read may come after the next slot ran and moved the key on.
        line = d.wait_log("primed", timeout=10)
        first = int(re.search(r"primed at slot (\d+)", line).group(1))
        self.assertEqual(first % 3, 0)
        self.assertGreaterEqual(int(self.r.get(last_slot_key(p))), first)
        js = self.wait_jobs(p, timeout=10)
        self.assertEqual(js[0]["periodic_slot"], first + 3)
        self.assertFalse([j for j in self.jobs_of(p) if j["periodic_slot"] == first])

    def test_pt19_catch_up_off_on_two_daemons_started_together(self):
        cron = "*/3 * * * * *"
        p = pjid(cron, "P", "[]")
        self.periodic_daemon([entry(cron, "P")], periodic_catch_up=False)
        self.periodic_daemon([entry(cron, "P")], periodic_catch_up=False)
        first = int(wait_for(lambda: self.r.get(last_slot_key(p)), timeout=10))
        self.wait_jobs(p, n=2, timeout=15)
        slots = [j["periodic_slot"] for j in self.jobs_of(p)]
        self.assertNotIn(first, slots)
        self.assertEqual(slots[:2], [first + 3, first + 6])

    def test_pt20_catch_up_off_still_catches_up_an_existing_entry(self):
        p = pjid(YEARLY, "P", "[]")
        self.r.set(last_slot_key(p), b"0")
        self.periodic_daemon([entry(YEARLY, "P")], periodic_catch_up=False)
        js = self.wait_jobs(p)
        self.settle_ticks(5)
        self.assertEqual(len(self.jobs_of(p)), 1)
        self.assertEqual(js[0]["periodic_slot"], yearly_slot())

    def test_pt21_after_downtime_exactly_one_run_of_the_current_slot(self):
        avoid_minute_boundary(15)
        slot = minute_slot(time.time())
        self.r.set(last_slot_key(E_PJID), str(slot - 600).encode())
        self.periodic_daemon([E])
        js = self.wait_jobs(E_PJID)
        self.settle_ticks(5)
        self.assertEqual([j["periodic_slot"] for j in self.jobs_of(E_PJID)], [slot])
        self.assertEqual(js[0]["periodic_slot"], slot)

    def test_pt26_blocked_slot_fires_when_the_lock_goes_within_the_grace(self):
        p = pjid(YEARLY, "P", "[]")
        self.r.set(running_key(p), b"old-run")
        d = self.periodic_daemon([entry(YEARLY, "P", unique=True)])
        time.sleep(4)
        self.assertEqual(self.jobs_of(p), [])
        self.assertIsNone(self.r.get(last_slot_key(p)))
        self.r.delete(running_key(p))
        js = self.wait_jobs(p, timeout=2)
        self.assertEqual(js[0]["periodic_slot"], yearly_slot())
        self.assertEqual(self.r.get(running_key(p)), js[0]["jid"].encode())
        self.assertEqual(d.log_lines("skipped"), [])

    def test_pt29_quiet_ticker_pushes_nothing_and_resume_fires_once(self):
        cron = "*/3 * * * * *"
        p = pjid(cron, "P", "[]")
        d = self.periodic_daemon([entry(cron, "P")])
        self.wait_jobs(p)
        self.r.publish("cogworker:signal:" + d.identity, "quiet")
        d.wait_log("quiet")
        self.settle_ticks(2)
        n = len(self.jobs_of(p))
        time.sleep(7)                    # two slots go by
        self.assertEqual(len(self.jobs_of(p)), n)
        self.r.publish("cogworker:signal:" + d.identity, "resume")
        resumed = time.time()
        self.wait_jobs(p, n=n + 1, timeout=3)
        took = time.time() - resumed
        new = self.jobs_of(p)[n]
        self.assertIn(new["periodic_slot"], creation_slots(3, new))
        self.assertLess(took, 2)
        # The slots that passed while quiet are not replayed.
        self.assertGreaterEqual(new["periodic_slot"] - self.jobs_of(p)[n - 1]["periodic_slot"], 6)
        slots = [j["periodic_slot"] for j in self.jobs_of(p)]
        self.assertEqual(len(slots), len(set(slots)))


class Publishing(PeriodicTestCase):

    def test_pt30_replace_removes_fields_of_other_schedules(self):
        self.r.hset(SCHEDULE_HASH, "stale", "{}")
        d = self.periodic_daemon([E], periodic_replace=False)
        wait_for(lambda: self.r.hexists(SCHEDULE_HASH, E_PJID), message="E published")
        self.settle_ticks(3)
        self.assertTrue(self.r.hexists(SCHEDULE_HASH, "stale"))
        d.stop()
        self.periodic_daemon([E], periodic_replace=True)
        wait_for(lambda: not self.r.hexists(SCHEDULE_HASH, "stale"), message="stale removed")
        self.assertEqual(self.r.hkeys(SCHEDULE_HASH), [E_PJID.encode()])

    def test_pt31_entry_without_handler_is_logged_published_and_fired(self):
        p = pjid(YEARLY, "Nobody", "[]")
        d = self.periodic_daemon([entry(YEARLY, "Nobody")],
                                 handlers=[{"class": "P", "command": handler("ok")}])
        d.wait_log("periodic job class Nobody can't be resolved")
        self.assertTrue(self.r.hexists(SCHEDULE_HASH, p))
        self.wait_jobs(p)

    def test_reload_adds_and_removes_entries(self):
        a = entry(YEARLY, "A")
        b = entry(YEARLY, "B")
        pa, pb = pjid(YEARLY, "A", "[]"), pjid(YEARLY, "B", "[]")
        d = self.periodic_daemon([a], periodic_replace=True)
        self.wait_jobs(pa)
        self.assertEqual(self.r.hkeys(SCHEDULE_HASH), [pa.encode()])
        d.settings["periodic"] = [a, b]
        d.write_conf()
        d.signal(signal.SIGHUP)
        self.wait_jobs(pb, timeout=5)
        self.assertEqual(sorted(self.r.hkeys(SCHEDULE_HASH)), sorted([pa.encode(), pb.encode()]))
        self.assertEqual(len(self.jobs_of(pa)), 1)     # A's slot is not fired again
        d.settings["periodic"] = [b]
        d.write_conf()
        d.signal(signal.SIGHUP)
        wait_for(lambda: self.r.hkeys(SCHEDULE_HASH) == [pb.encode()], message="A unpublished")
        # A no longer ticks: a fresh baseline for A is not claimed.
        self.r.delete(last_slot_key(pa))
        self.settle_ticks(5)
        self.assertIsNone(self.r.get(last_slot_key(pa)))
        self.assertEqual(len(self.jobs_of(pa)), 1)
        self.assertEqual(len(self.jobs_of(pb)), 1)


if __name__ == "__main__":
    unittest.main()

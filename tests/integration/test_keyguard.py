# SPDX-License-Identifier: MIT
"""KG — KeyGuard (doc/behaviours.md §8, doc/protocol.md §7.15): D runs with RENAME permission.

A key check runs on D's first poll and then every 60 s; most scenarios plant the damage
before D starts. The end-to-end scenario plants it while jobs flow and waits for the
60-second check.

Not covered here: KG-4 is a [unit] behaviour (two quarantines of one key within the same
millisecond); the names carry 8 random hex characters, which test_kg1 checks.

Run: python3 tests/integration/run.py test_keyguard
"""

import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pollkit import (DEAD, FAST, FIRST_CHECK, IDENTITIES, RETRY, SCHEDULE,  # noqa: E402
                     PollerTestCase, handler, loads, new_jid, payload, wait_for)

Q = b"cogworker:quarantine:"


def copy_re(key):
    return re.compile(re.escape(b"cogworker:quarantine:" + key + b":") + rb"\d+:[0-9a-f]{8}$")


class KeyGuardCase(PollerTestCase):
    """Views of the quarantined copies, for the test classes below."""

    def copies(self, key):
        pat = copy_re(key)
        return sorted(k for k in self.r.keys(Q + b"*") if pat.match(k))

    def wait_quarantined(self, key, timeout=5):
        wait_for(lambda: self.copies(key), timeout=timeout,
                 message="%s quarantined" % key.decode())
        return self.copies(key)


class KeyGuardTest(KeyGuardCase):

    def test_kg1_wrong_typed_keys_are_moved_healthy_ones_kept(self):
        self.r.set(DEAD, "x")
        self.r.set(b"cogworker:queue:broken", "y")
        self.r.sadd(b"cogworker:queues", "broken", "good")
        good = payload(queue="good")
        self.r.rpush(b"cogworker:queue:good", good)
        retry = payload()
        self.r.zadd(RETRY, {retry: self.now() + 3600})
        d = self.daemon(queues=["other"])
        [dead_copy] = self.wait_quarantined(DEAD)
        [queue_copy] = self.wait_quarantined(b"cogworker:queue:broken")
        self.assertEqual(self.r.type(DEAD), b"none")
        self.assertEqual(self.r.type(b"cogworker:queue:broken"), b"none")
        self.assertEqual(self.r.get(dead_copy), b"x")
        self.assertEqual(self.r.get(queue_copy), b"y")
        ttl = self.r.ttl(dead_copy)
        self.assertTrue(0 < ttl <= 2592000, ttl)
        self.assertEqual(self.r.lrange(b"cogworker:queue:good", 0, -1), [good.encode()])
        self.assertEqual(self.r.zrange(RETRY, 0, -1), [retry.encode()])
        line = d.wait_log("cogworker:dead held a string, not a zset")
        self.assertIn("moved to cogworker:quarantine:cogworker:dead:", line)
        self.assertIn(dead_copy.decode(), line)
        self.assertTrue(line.endswith("(kept 30 days)"), line)
        d.wait_log("cogworker:queue:broken held a string, not a list")
        # only the two damaged keys were touched
        self.assertEqual(len(self.r.keys(Q + b"*")), 2)

    def test_kg2_computed_keys_of_listed_members_and_then_the_listing_itself(self):
        self.r.sadd(IDENTITIES, "h:1:a")
        self.r.set(b"cogworker:inprogress:h:1:a", "s")
        self.r.sadd(b"cogworker:processes", "p:2:b")
        self.r.set(b"cogworker:process:p:2:b", "s")
        self.r.rpush(b"cogworker:workers:p:2:b", "l")
        self.daemon(queues=["other"])
        self.wait_quarantined(b"cogworker:inprogress:h:1:a")
        self.wait_quarantined(b"cogworker:process:p:2:b")
        self.wait_quarantined(b"cogworker:workers:p:2:b")
        # the listing made a string: the following check (D2's first) quarantines it
        self.r.delete(IDENTITIES)
        self.r.set(IDENTITIES, "garbage")
        self.daemon(queues=["other"])
        self.wait_quarantined(IDENTITIES)

    def test_kg3_after_quarantine_a_dying_job_lands_in_a_fresh_dead_set(self):
        self.r.set(DEAD, "x")
        d = self.daemon(handlers=[{"class": "F", "command": handler("fail")}])
        self.wait_quarantined(DEAD)
        p = payload("F", retry=False)
        self.push(p)
        wait_for(lambda: self.r.type(DEAD) == b"zset" and self.r.zcard(DEAD) == 1, timeout=5)
        self.assertEqual(loads(self.r.zrange(DEAD, 0, -1)[0])["jid"], loads(p)["jid"])
        self.assertEqual(d.runs_of(loads(p)["jid"]), 1)

    def test_kg5_periodic_entry_keys(self):
        self.r.hset(b"periodic:schedule", "pj", '{"cron":"0 0 1 1 *","class":"P"}')
        self.r.rpush(b"periodic:running:pj", "l")
        self.r.sadd(b"periodic:last_slot:pj", "s")
        d = self.daemon(queues=["other"])
        self.wait_quarantined(b"periodic:running:pj")
        self.wait_quarantined(b"periodic:last_slot:pj")
        d.wait_log("periodic:running:pj held a list, not a string")
        d.wait_log("periodic:last_slot:pj held a set, not a string")

    def test_kg6_only_the_five_newest_copies_are_kept(self):
        base = int(time.time() * 1000) - 100000
        old = [b"cogworker:quarantine:cogworker:dead:%d:%08x" % (base + i, i)
               for i in range(6)]
        for i, k in enumerate(old):
            self.r.set(k, "copy%d" % i)
        self.r.set(DEAD, "new")
        self.daemon(queues=["other"])
        wait_for(lambda: self.r.type(DEAD) == b"none" and len(self.copies(DEAD)) == 5,
                 timeout=5, message="five copies")
        kept = self.copies(DEAD)
        self.assertEqual(sorted(old[-4:]), sorted(k for k in kept if k in old))
        [new] = [k for k in kept if k not in old]
        self.assertEqual(self.r.get(new), b"new")

    def test_kg7_pruning_matches_exact_copy_names_only(self):
        base = int(time.time() * 1000) - 100000
        ab = [b"cogworker:quarantine:cogworker:queue:a:b:%d:%08x" % (base + i, i)
              for i in range(6)]
        a = [b"cogworker:quarantine:cogworker:queue:a:%d:%08x" % (base + 10 + i, i)
             for i in range(6)]
        uns = [b"cogworker:quarantine:cogworker:unsettled:%d:%08x" % (base + 20 + i, i)
               for i in range(6)]
        for k in ab + a + uns:
            self.r.set(k, "c")
        self.r.rpush(b"cogworker:quarantine:cogworker:unsettled:records", "rec")
        self.r.set(b"cogworker:queue:a", "x")
        self.r.set(b"cogworker:unsettled", "x")
        self.daemon(queues=["a"])
        wait_for(lambda: len(self.copies(b"cogworker:queue:a")) == 5 and
                 len(self.copies(b"cogworker:unsettled")) == 5, timeout=5,
                 message="pruned copies")
        for k in ab:
            self.assertTrue(self.r.exists(k), k)
        self.assertEqual(self.r.lrange(b"cogworker:quarantine:cogworker:unsettled:records",
                                       0, -1), [b"rec"])

    def test_kg8_every_fixed_key_is_checked(self):
        wrong = {  # key: (setter, actual type, expected type)
            b"cogworker:schedule": ("set", "zset"), b"cogworker:retry": ("set", "zset"),
            b"cogworker:dead": ("set", "zset"), b"cogworker:live_queues": ("set", "zset"),
            b"cogworker:queues": ("set", "set"), b"cogworker:processes": ("set", "set"),
            b"cogworker:paused_queues": ("set", "set"),
            b"cogworker:inprogress_identities": ("set", "set"),
            b"periodic:disabled": ("set", "set"),
            b"cogworker:last_beat": ("set", "hash"), b"periodic:schedule": ("set", "hash"),
            b"cogworker:repeat_orphans": ("set", "list"),
            b"cogworker:unsettled": ("set", "list"),
            b"cogworker:stats:processed": ("rpush", "string"),
            b"cogworker:stats:failed": ("rpush", "string"),
        }
        for key, (how, _) in wrong.items():
            if how == "set":
                self.r.set(key, "wrong")
            else:
                self.r.rpush(key, "wrong")
        d = self.daemon(queues=["other"])
        for key, (how, expected) in wrong.items():
            [c] = self.wait_quarantined(key)
            self.assertEqual(self.r.type(c), b"string" if how == "set" else b"list")
            actual = "string" if how == "set" else "list"
            d.wait_log("%s held a %s, not a %s: moved to" % (key.decode(), actual, expected))


class KeyGuardOnWrongTypeTest(KeyGuardCase):
    """KG-9: a WRONGTYPE reply seen by any thread gets the key check run at once, so damage
    planted after D's first check is quarantined in seconds, not at the next minute (it
    took 38.5 s and 159 error lines with these three keys); the log says once per key what
    was done."""

    def test_kg9_wrongtype_anywhere_triggers_the_check_within_seconds(self):
        d = self.daemon(queues=["default", "other"], concurrency=2,
                        handlers=[{"class": "Ok", "command": handler("ok")},
                                  {"class": "F", "command": handler("fail")}], **FAST)
        d.wait_log(FIRST_CHECK)
        time.sleep(1.5)                 # past the first checks: only a trigger helps now
        size0 = len(d.log())
        planted = time.monotonic()
        self.r.set(RETRY, "x")                          # the fetchers' failure filing
        self.r.hset(b"cogworker:queue:default", "f", "v")   # a fetcher's FETCH
        self.r.rpush(SCHEDULE, "x")                     # the poller's own graduation
        failing = payload("F", queue="other", retry=3)
        self.push(failing, queue="other")
        keys = {RETRY: ("string", "zset"), b"cogworker:queue:default": ("hash", "list"),
                SCHEDULE: ("list", "zset")}
        for key, (actual, expected) in keys.items():
            self.wait_quarantined(key, timeout=8)
            d.wait_log("%s held a %s, not a %s: moved to" % (key.decode(), actual, expected))
        took = time.monotonic() - planted
        self.assertLess(took, 5.0, "quarantined after %.1fs" % took)
        # the failure owed meanwhile is filed into a fresh retry set; the queue works again
        wait_for(lambda: self.r.type(RETRY) == b"zset" and self.r.zcard(RETRY) == 1,
                 timeout=10, message="the owed filing in a fresh retry set")
        ok = payload("Ok")
        self.push(ok)
        wait_for(lambda: d.runs_of(loads(ok)["jid"]) == 1, timeout=5)
        time.sleep(1.5)
        log = d.log()[size0:]
        for key, (actual, expected) in keys.items():
            self.assertEqual(log.count("%s held a %s, not a %s" % (key.decode(), actual,
                                                                   expected)), 1, key)
        errors = [l for l in log.splitlines() if "WRONGTYPE" in l]
        self.assertLess(len(errors), 40, "\n".join(errors))
        self.assertIsNone(d.proc.poll())


class KeyGuardWhileJobsFlowTest(PollerTestCase):
    """The issue's end-to-end scenario: damage planted after D's first key check is found
    (since KG-9, at once: the damaged keys answer WRONGTYPE) while jobs keep flowing."""

    def test_planted_keys_are_quarantined_within_a_minute_and_processing_carries_on(self):
        d = self.daemon(queues=["default", "q2"], concurrency=2,
                        handlers=[{"class": "Ok", "command": handler("ok")},
                                  {"class": "F", "command": handler("fail")}], **FAST)
        d.wait_log("first orphan check completed")
        planted = time.monotonic()
        # a failing job before the damage: filed normally
        first = payload("F", retry=False)
        self.push(first)
        wait_for(lambda: self.r.zcard(DEAD) == 1, timeout=5)
        self.r.delete(DEAD)
        self.r.set(DEAD, "x")
        self.r.set(b"cogworker:queue:q2", "x")
        self.r.delete(SCHEDULE)
        self.r.set(SCHEDULE, "x")
        self.r.set(b"cogworker:processes", "x")
        # jobs go on failing and succeeding while the keys are damaged
        failing = [payload("F", retry=False) for _ in range(3)]
        oks = [payload("Ok") for _ in range(3)]
        for f, o in zip(failing, oks):
            self.push(f)
            self.push(o)
            time.sleep(1)
        for key in (b"cogworker:dead", b"cogworker:queue:q2", b"cogworker:schedule",
                    b"cogworker:processes"):
            d.wait_log("%s held a string" % key.decode(),
                       timeout=max(1, 70 - (time.monotonic() - planted)))
        self.assertLess(time.monotonic() - planted, 66)
        # the dead jobs owed meanwhile are filed again into a fresh dead set, once each
        wait_for(lambda: self.r.type(DEAD) == b"zset" and self.r.zcard(DEAD) == 3, timeout=5)
        self.assertEqual(sorted(loads(m)["jid"] for m in self.r.zrange(DEAD, 0, -1)),
                         sorted(loads(f)["jid"] for f in failing))
        for f in failing:
            self.assertEqual(d.runs_of(loads(f)["jid"]), 1)
        for o in oks:
            wait_for(lambda: d.runs_of(loads(o)["jid"]) == 1, timeout=5)
        # processing carries on: the repaired queue, schedule and presence work again
        later = payload("Ok", queue="q2")
        self.push(later, queue="q2")
        sched = payload("Ok")
        self.r.zadd(SCHEDULE, {sched: self.now() - 1})
        wait_for(lambda: d.runs_of(loads(later)["jid"]) == 1, timeout=5)
        wait_for(lambda: d.runs_of(loads(sched)["jid"]) == 1, timeout=5)
        wait_for(lambda: self.r.sismember(b"cogworker:processes", d.identity), timeout=5)
        self.assertIsNone(d.proc.poll())


if __name__ == "__main__":
    import unittest
    unittest.main()

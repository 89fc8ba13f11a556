# SPDX-License-Identifier: MIT
"""RP — repeat orphans and unsettled records (doc/behaviours.md §6, doc/protocol.md §7.10 step 3).

Dead processes are simulated (doc/behaviours.md §0.3) or real daemons are killed and their
deaths backdated; D's orphan checks run every second.

Not covered: RP-9 is a [unit] behaviour (the swap of a raw burial failing with a
connection error); RP-8 and RP-15 cover the raw burial and its swap on a real server.

Run: python3 tests/integration/run.py test_repeat_orphans
"""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pollkit import (DEAD, FAILED, FAST, ORPH, PARKING, RECORDS, RETRY,  # noqa: E402
                     UNSETTLED, PollerTestCase, handler, loads, new_jid, payload, wait_for)
from runkit import canonical_digest, parse_records  # noqa: E402

OTHER = dict(FAST, queues=["other"])


def record(set_, score, pl):
    return json.dumps({"set": set_, "score": score, "payload": pl}, separators=(",", ":"))


class RepeatOrphanTest(PollerTestCase):

    def recorder(self, name="deaths"):
        return handler("recorder", self.path(name), self.server.port)

    def records(self, name="deaths"):
        return parse_records(self.read(self.path(name)))

    def dead_pass(self, ident, jobs, **settings):
        """A dead fake holding jobs; returns once D recovered its list."""
        self.dead_fake(ident, jobs, last_beat=int(self.now()) - 301)
        wait_for(lambda: not self.list_of(ident), timeout=5, message="%s recovered" % ident)

    def test_rp1_and_2_fourth_death_goes_to_dead_as_process_died(self):
        hs = [{"class": "S", "command": handler("slow", 60)}]
        p = payload("S", retry=25)
        jid = loads(p)["jid"]
        self.push(p)
        failed_before = int(self.r.get(FAILED) or 0)
        started = self.now()
        d = self.daemon(handlers=hs, **FAST)
        for i in range(1, 5):
            wait_for(lambda: d.runs_of(jid) == i, timeout=5, message="run %d" % i)
            ident = d.identity
            d.kill()
            self.make_dead(ident)
            d = self.daemon(handlers=hs, **FAST)
            if i < 4:
                wait_for(lambda: self.r.get(ORPH + jid) == str(i).encode(), timeout=5,
                         message="counter %d" % i)
        entry = wait_for(lambda: self.r.zrange(DEAD, 0, -1), timeout=5)[0]
        dead = loads(entry)
        self.assertEqual(dead["error_class"], "Cogworker::ProcessDied")
        self.assertIn("more than 3 times", dead["error_message"])
        d.wait_log("jid=%s orphaned too often, moved to dead" % jid)
        self.assertEqual(self.r.llen(PARKING), 0)
        self.assertFalse(self.r.exists(ORPH + jid))
        self.assertEqual(self.queue("default"), [])
        time.sleep(1)
        self.assertEqual(d.runs_of(jid), 4)
        # RP-2: J's own fields kept, failed_at now, counted once
        orig = loads(p)
        for k, v in orig.items():
            self.assertEqual(dead[k], v, k)
        self.assertAlmostEqual(dead["failed_at"], self.now(), delta=10)
        self.assertEqual(int(self.r.get(FAILED)), failed_before + 1)
        self.assertEqual(self.bucket_total("failed", started), 1)

    def test_rp4_corrupt_counter_restarts_from_zero(self):
        p = payload()
        jid = loads(p)["jid"]
        self.r.rpush(ORPH + jid, "junk")
        self.daemon(url=self.guard_off(), max_orphanings=1, **OTHER)
        self.dead_pass("h:1:a", [p])
        self.assertEqual(self.queue("default"), [p.encode()])
        self.assertEqual(self.r.get(ORPH + jid), b"1")
        self.r.delete(b"cogworker:queue:default")
        self.dead_pass("h:2:b", [p])
        wait_for(lambda: self.r.zcard(DEAD) == 1, timeout=5)
        self.assertEqual(self.queue("default"), [])

    def test_rp5_garbage_counter_and_unusable_parking_below_limit(self):
        p, q = payload(), payload()
        self.r.set(ORPH + loads(p)["jid"], "abc")
        self.r.hset(PARKING, "f", "v")
        self.daemon(url=self.guard_off(), **OTHER)
        self.dead_pass("h:1:a", [p, q])
        self.wait_queue("default", [p, q])
        self.assertEqual(self.r.get(ORPH + loads(p)["jid"]), b"1")
        self.assertEqual(self.r.get(ORPH + loads(q)["jid"]), b"1")
        self.assertEqual(self.r.zcard(DEAD), 0)

    def test_rp6_locks_released_and_failure_counted_once(self):
        jid = new_jid()
        p = payload("W", jid=jid, unique="until_executed", periodic_pjid="pj",
                    periodic_until_executed=True)
        args = json.dumps(loads(p)["args"], separators=(",", ":"))
        self.assertEqual(args, "[12345678901234567890,1.1]")
        ukey = "cogworker:unique:" + canonical_digest("W", "default", args)
        self.r.set(b"periodic:running:pj", jid)
        self.r.set(ukey, jid)
        self.daemon(max_orphanings=1, **OTHER)
        self.dead_pass("h:1:a", [p])
        self.assertEqual(self.r.get(b"periodic:running:pj"), jid.encode())
        self.r.delete(b"cogworker:queue:default")
        self.dead_pass("h:2:b", [p])
        wait_for(lambda: not self.r.exists(b"periodic:running:pj") and
                 not self.r.exists(ukey), timeout=5, message="locks released")
        self.assertEqual(self.r.get(FAILED), b"1")

    def test_rp7_two_daemons_bury_one_parked_job_once(self):
        p = payload("W")
        jid = loads(p)["jid"]
        self.r.rpush(PARKING, p)
        self.r.set(ORPH + jid, 4)
        hs = [{"class": "W", "command": handler("ok"), "on_death": self.recorder("own")}]
        settings = dict(OTHER, handlers=hs, on_death=self.recorder())
        d1 = self.daemon(start=False, **settings)
        d1.start(wait=False)    # (its files exist before D2 picks its own names)
        d2 = self.daemon(start=False, **settings)
        d2.start(wait=False)
        d1.wait_started()
        d2.wait_started()
        wait_for(lambda: self.r.zcard(DEAD) == 1, timeout=5)
        time.sleep(2)           # further passes of both
        self.assertEqual(self.r.zcard(DEAD), 1)
        self.assertEqual(self.r.llen(PARKING), 0)
        entry = self.r.zrange(DEAD, 0, -1)[0].decode()
        self.assertIn("more than 3 times", loads(entry)["error_message"])
        for name in ("own", "deaths"):
            recs = self.records(name)
            self.assertEqual(len(recs), 1, (name, recs))
            self.assertEqual(recs[0]["entry"], entry)
        self.assertEqual(len(d1.log_lines("orphaned too often")) +
                         len(d2.log_lines("orphaned too often")), 1)

    def test_rp10_unusable_records_are_quarantined_the_good_one_filed(self):
        good = payload(error_class="E", error_message="m", retry=False, retry_count=1)
        gjid = loads(good)["jid"]
        self.r.set(ORPH + gjid, 1)
        bad1 = "{}"
        bad2 = record("cogworker:queue:x", 1.5, payload())
        ok = record("cogworker:dead", self.now(), good)
        self.r.rpush(UNSETTLED, bad1, bad2, ok)
        d = self.daemon(**OTHER)
        wait_for(lambda: self.r.llen(UNSETTLED) == 0 and self.r.zcard(DEAD) == 1, timeout=5)
        self.assertEqual(self.r.zrange(DEAD, 0, -1), [good.encode()])
        self.assertEqual(self.r.lrange(RECORDS, 0, -1), [bad1.encode(), bad2.encode()])
        self.assertTrue(0 < self.r.ttl(RECORDS) <= 2592000)
        self.assertFalse(self.r.exists(ORPH + gjid))
        d.wait_log("filed handed-over job jid=%s into cogworker:dead" % gjid)

    def test_rp11_and_13_unsettled_dead_record_releases_locks_and_notifies_once(self):
        jid = new_jid()
        p = payload("W", jid=jid, unique="until_executed", periodic_pjid="pj",
                    error_class="KeyError", error_message="key not found", retry=False)
        args = json.dumps(loads(p)["args"], separators=(",", ":"))
        ukey = "cogworker:unique:" + canonical_digest("W", "default", args)
        self.r.set(b"periodic:running:pj", jid)
        self.r.set(ukey, jid)
        r2 = payload("W", error_class="E", error_message="m")
        self.r.rpush(UNSETTLED, record("cogworker:dead", self.now(), p),
                     record("cogworker:retry", self.now() + 100, r2))
        self.daemon(on_death=self.recorder(), **OTHER)
        wait_for(lambda: self.r.llen(UNSETTLED) == 0, timeout=5)
        self.daemon(on_death=self.recorder(), **OTHER)
        time.sleep(2)
        self.assertEqual(self.r.zrange(DEAD, 0, -1), [p.encode()])
        self.assertEqual(self.r.zrange(RETRY, 0, -1), [r2.encode()])
        self.assertFalse(self.r.exists(b"periodic:running:pj"))
        self.assertFalse(self.r.exists(ukey))
        recs = self.records()
        self.assertEqual(len(recs), 1, recs)
        got = loads(recs[0]["entry"])
        self.assertEqual((got["error_class"], got["error_message"]), ("KeyError", "key not found"))

    def test_rp14_no_handler_class_gets_only_the_global_on_death(self):
        p = payload("NoSuchClass")
        self.r.rpush(PARKING, p)
        self.r.set(ORPH + loads(p)["jid"], 4)
        hs = [{"class": "Other", "command": handler("ok"), "on_death": self.recorder("own")}]
        self.daemon(handlers=hs, on_death=self.recorder(), **OTHER)
        wait_for(lambda: len(self.records()) == 1, timeout=5)
        time.sleep(1)
        self.assertEqual(self.records("own"), [])
        self.assertEqual(len(self.records()), 1)


class GuardOffRepeatOrphanTest(PollerTestCase):

    def recorder(self):
        return handler("recorder", self.path("deaths"), self.server.port)

    def deaths(self):
        return parse_records(self.read(self.path("deaths")))

    def test_rp3_and_8_unusable_parking_list_buries_raw_then_swaps(self):
        self.r.set(PARKING, "x")
        p = payload()
        jid = loads(p)["jid"]
        self.r.set(ORPH + jid, 3)
        self.dead_fake("h:1:a", [p], last_beat=int(self.now()) - 301)
        d = self.daemon(url=self.guard_off(), on_death=self.recorder(), **OTHER)
        wait_for(lambda: len(self.deaths()) == 1, timeout=5)
        time.sleep(1.5)
        [entry] = self.r.zrange(DEAD, 0, -1)
        self.assertEqual(loads(entry)["error_class"], "Cogworker::ProcessDied")
        self.assertEqual(self.queue("default"), [])
        self.assertEqual(len(self.deaths()), 1)
        self.assertEqual(self.deaths()[0]["entry"], entry.decode())
        d.wait_log("jid=%s orphaned too often, moved to dead" % jid)

    def test_rp12_unwritable_stats_never_keep_locks_or_counter(self):
        self.r.rpush(FAILED, "x")
        jid = new_jid()
        p = payload("W", jid=jid, periodic_pjid="pj")
        self.r.set(b"periodic:running:pj", jid)
        self.r.rpush(PARKING, p)
        self.r.set(ORPH + jid, 4)
        d = self.daemon(url=self.guard_off(), **OTHER)
        wait_for(lambda: self.r.zcard(DEAD) == 1, timeout=5)
        wait_for(lambda: not self.r.exists(b"periodic:running:pj") and
                 not self.r.exists(ORPH + jid), timeout=3)
        d.wait_log("stats failed (ignored)")

    def test_rp15_on_death_runs_once_even_when_the_lock_release_fails(self):
        self.r.rpush(b"periodic:running:pj", "wrong type")
        parked = payload("W", periodic_pjid="pj")
        self.r.rpush(PARKING, parked)
        self.r.set(ORPH + loads(parked)["jid"], 4)
        unsettled = payload("W", periodic_pjid="pj", error_class="E", error_message="m")
        self.r.rpush(UNSETTLED, record("cogworker:dead", self.now(), unsettled))
        d = self.daemon(url=self.guard_off(), on_death=self.recorder(), **OTHER)
        # a raw burial (parking list made unusable after the first pass)
        wait_for(lambda: len(self.deaths()) == 2, timeout=5)
        self.r.delete(PARKING)
        self.r.set(PARKING, "x")
        raw = payload("W", periodic_pjid="pj")
        self.r.set(ORPH + loads(raw)["jid"], 3)
        self.dead_fake("h:1:a", [raw], last_beat=int(self.now()) - 301)
        wait_for(lambda: len(self.deaths()) == 3, timeout=5)
        time.sleep(2)
        got = sorted(loads(r["entry"])["jid"] for r in self.deaths())
        self.assertEqual(got, sorted(loads(x)["jid"] for x in (parked, unsettled, raw)))
        self.assertEqual(self.r.zcard(DEAD), 3)
        self.assertTrue(d.log_lines("release of periodic:running:pj failed (ignored)"))


if __name__ == "__main__":
    import unittest
    unittest.main()

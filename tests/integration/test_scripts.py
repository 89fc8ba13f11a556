# SPDX-License-Identifier: MIT
"""The atomic scripts (lua/*.lua, doc/protocol.md §6), run directly against a real redis-server
with EVAL of the text the build embeds.

Each test sets keys up by hand, runs one script, and checks the reply and every key the
script may touch. TestCommandOrder watches the commands the scripts issue (MONITOR) to
pin the check -> write -> remove order.

Run: python3 tests/integration/run.py test_scripts
"""

import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (REPO, RedisServer, RedisTestCase, build_dir,  # noqa: E402
                     free_port, load_script, script_names)

import redis  # noqa: E402

# -- key names (doc/protocol.md §2)
QUEUE = "cogworker:queue:"
QUEUES = b"cogworker:queues"
LIVE = b"cogworker:live_queues"
DEAD = b"cogworker:dead"
RETRY = b"cogworker:retry"
SCHEDULE = b"cogworker:schedule"
LAST_BEAT = b"cogworker:last_beat"
PARKING = b"cogworker:repeat_orphans"
UNSETTLED = b"cogworker:unsettled"
STATS_FAILED = b"cogworker:stats:failed"
ORPH = "cogworker:orphanings:"
RUNNING = "periodic:running:"

OWNER = "dead-host:1:abc"
INPROGRESS = ("cogworker:inprogress:" + OWNER).encode()
PRESENCE = ("cogworker:process:" + OWNER).encode()
QUEUED_TTL = 86400

PROTOCOL_SCRIPTS = [
    "fetch", "requeue", "bury_orphan", "requeue_one", "interrupt", "park_unsettled",
    "file_unsettled", "swap_dead_entry", "ack", "requeue_entry", "retake", "claim",
    "rollback", "claim_and_requeue", "bury", "quarantine", "expire_if_owned",
    "delete_if_owned", "kill", "output_write", "admit", "release_slot",
    "release_group_slot", "group_sweep", "refresh_group_lease",
    "batch_open", "batch_push", "batch_commit", "batch_settle", "batch_revive",
    "batch_cancel", "batch_expire", "batch_purge", "bury_too_large", "history_write",
    "peek_cut", "act_cut",
]


def job(jid, queue="default", **extra):
    """A compact job payload (bytes). Big integers in args check that the exact string
    travels: cjson would print 12345678901234567890 as 1.2345678901235e+19."""
    d = {"class": "Work", "args": [12345678901234567890, 1.10], "queue": queue, "jid": jid}
    d.update(extra)
    return json.dumps(d, separators=(",", ":")).encode()


def periodic_job(jid, pjid="pj", **extra):
    return job(jid, periodic_pjid=pjid, periodic_slot=1767225600,
               periodic_until_executed=True, **extra)


def counter(jid):
    return (ORPH + jid).encode()


def qkey(name):
    return (QUEUE + name).encode()


class ScriptTestCase(RedisTestCase):
    """Shortcuts for the scripts with long layouts."""

    def now(self):
        return int(self.r.time()[0])

    def requeue(self, threshold="300", now=None, max_orphanings=3, marks=(), owner=OWNER,
                client=None):
        """REQUEUE with the daemon's layout; returns the reply as a list."""
        keys = [("cogworker:inprogress:" + owner).encode(),
                ("cogworker:process:" + owner).encode(),
                LAST_BEAT, PARKING, DEAD, QUEUES, LIVE]
        args = [QUEUE, "default", RUNNING, QUEUED_TTL, owner, threshold,
                self.now() if now is None else now, ORPH, 604800, max_orphanings,
                "cogworker:batch:settled:", "waited"]
        return self.run_script("requeue", keys, args + list(marks), client=client)

    def inprogress(self):
        return self.r.lrange(INPROGRESS, 0, -1)

    def queue(self, name="default"):
        return self.r.lrange(qkey(name), 0, -1)

    def live(self, *names):
        """Declare queues as read by a live process (fresh live_queues scores)."""
        now = self.now()
        self.r.zadd(LIVE, {n: now for n in names})


# ======================================================================================
# The files themselves


class TestScriptFiles(RedisTestCase):

    def test_every_protocol_script_exists_and_compiles(self):
        self.assertEqual(set(PROTOCOL_SCRIPTS), set(script_names()))
        for name in PROTOCOL_SCRIPTS:
            with self.subTest(script=name):
                text = load_script(name)
                self.assertNotIn("--@include", text)
                with open(os.path.join(REPO, "lua", name + ".lua")) as f:
                    lines = f.read().split("\n")
                header = "\n".join(lines[:next(i for i, line in enumerate(lines)
                                                 if not line.startswith("--"))])
                for word in ("KEYS", "ARGV", "Returns", "Order", "Why"):
                    self.assertIn(word, header, "comment block of %s" % name)
                self.r.script_load(text)  # compiles

    def test_fragments_are_included_in_order(self):
        for name in ("requeue", "requeue_one"):
            text = load_script(name)
            self.assertLess(text.index("local function retake_running_lock"),
                            text.index("local function requeue_job"), name)
        for name in ("requeue_entry", "retake"):
            self.assertIn("local function retake_running_lock", load_script(name))

    def test_time_readers_enable_effects_replication_first(self):
        guard = "if redis.replicate_commands then pcall(redis.replicate_commands) end"
        for name in PROTOCOL_SCRIPTS:
            text = load_script(name)
            code = [line for line in text.split("\n") if line and not line.startswith("--")]
            if "'TIME'" in text:
                self.assertTrue(code[0].startswith(guard), name)
                self.assertNotIn("redis.call('TIME')", text, "TIME only through pcall")

    def test_expansion_matches_the_build(self):
        """load_script() == the C strings tools/embed-lua.sh generated for the binary."""
        with open(os.path.join(build_dir(), "lua_scripts.c")) as f:
            out = f.read()
        embedded = {}
        for m in re.finditer(r'static const char lua_(\w+)\[\] =\n((?:".*"\n)*);', out):
            parts = re.findall(r'^"(.*)"$', m.group(2), re.M)
            text = "".join(parts)
            text = re.sub(r'\\(.)', lambda e: {"n": "\n", "t": "\t"}.get(e.group(1),
                                                                        e.group(1)), text)
            embedded[m.group(1)] = text
        self.assertEqual(set(embedded), set(PROTOCOL_SCRIPTS))
        for name, text in embedded.items():
            self.assertEqual(text, load_script(name), name)

    def embed(self, script, fragments=None):
        """Run tools/embed-lua.sh on a lua dir holding one script x.lua (and lib/ fragments);
        (exit status, stderr, the expanded x.lua or None)."""
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "lua", "lib"))
            with open(os.path.join(tmp, "lua", "x.lua"), "w") as f:
                f.write(script)
            for name, text in (fragments or {}).items():
                with open(os.path.join(tmp, "lua", "lib", name + ".lua"), "w") as f:
                    f.write(text)
            res = subprocess.run(["sh", os.path.join(REPO, "tools", "embed-lua.sh"),
                                  os.path.join(tmp, "lua"), os.path.join(tmp, "out")],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            path = os.path.join(tmp, "out", "x.lua")
            text = None
            if res.returncode == 0:
                with open(path) as f:
                    text = f.read()
            return res.returncode, res.stderr.decode(), text

    def test_expand_includes_like_awk(self):
        lib = os.path.join(REPO, "lua", "lib")
        with open(os.path.join(lib, "retake_running_lock.lua")) as f:
            frag = f.read()
        frags = {"retake_running_lock": frag}
        self.assertEqual(self.embed("a\n--@include retake_running_lock\nb", frags)[2],
                         "a\n" + frag + "b\n")
        # only an exact "--@include " prefix includes
        self.assertEqual(self.embed(" --@include x\n")[2], " --@include x\n")

    def test_missing_fragment_fails_the_build(self):
        rc, err, _ = self.embed("a\n--@include nosuch\nb\n")
        self.assertNotEqual(rc, 0)
        self.assertIn("embed-lua.sh", err)
        self.assertIn("x.lua:2", err)
        self.assertIn("--@include nosuch", err)


# ======================================================================================
# 6.1 FETCH


class TestFetch(ScriptTestCase):

    def fetch(self, *queues):
        return self.run_script("fetch", [qkey(q) for q in queues] + [INPROGRESS])

    def test_all_empty_is_nil(self):
        self.assertIsNone(self.fetch("a", "b"))
        self.assertEqual(self.inprogress(), [])

    def test_takes_the_oldest_of_the_first_non_empty_queue(self):
        self.r.lpush(qkey("b"), b"b1", b"b2")  # b1 oldest (rightmost)
        self.r.lpush(qkey("c"), b"c1")
        self.assertEqual(self.fetch("a", "b", "c"), [qkey("b"), b"b1"])
        self.assertEqual(self.fetch("a", "b", "c"), [qkey("b"), b"b2"])
        self.assertEqual(self.fetch("a", "b", "c"), [qkey("c"), b"c1"])
        self.assertIsNone(self.fetch("a", "b", "c"))
        # newest fetch at index 0
        self.assertEqual(self.inprogress(), [b"c1", b"b2", b"b1"])

    def test_try_order_is_the_key_order(self):
        self.r.lpush(qkey("a"), b"a1")
        self.r.lpush(qkey("b"), b"b1")
        self.assertEqual(self.fetch("b", "a"), [qkey("b"), b"b1"])

    def test_moves_the_exact_string(self):
        raw = job("j1")
        self.r.lpush(qkey("default"), raw)
        self.assertEqual(self.fetch("default"), [qkey("default"), raw])
        self.assertEqual(self.inprogress(), [raw])


# ======================================================================================
# 6.4 REQUEUE: liveness


class TestRequeueLiveness(ScriptTestCase):

    def setUp(self):
        super().setUp()
        self.raw = job("j1")
        self.r.rpush(INPROGRESS, self.raw)

    def assertAlive(self, reply):
        self.assertEqual(reply, [-1, 0, 0])
        self.assertEqual(self.inprogress(), [self.raw])
        self.assertEqual(self.queue(), [])

    def assertRecovered(self, reply):
        self.assertEqual(reply[:2], [1, 0])
        self.assertEqual(self.inprogress(), [])
        self.assertEqual(self.queue(), [self.raw])

    def test_presence_means_alive(self):
        self.r.hset(PRESENCE, "busy", "0")
        self.r.hset(LAST_BEAT, OWNER, self.now() - 10000)
        self.assertAlive(self.requeue())

    def test_recent_beat_means_alive(self):
        for age in (10, 120, 300):
            self.r.hset(LAST_BEAT, OWNER, self.now() - age)
            self.assertAlive(self.requeue(threshold="300"))

    def test_old_beat_means_dead(self):
        self.r.hset(LAST_BEAT, OWNER, self.now() - 301)
        self.assertRecovered(self.requeue(threshold="300"))

    def test_threshold_is_honoured(self):
        self.r.hset(LAST_BEAT, OWNER, self.now() - 90)
        self.assertAlive(self.requeue(threshold="120"))
        self.assertRecovered(self.requeue(threshold="60"))

    def test_no_beat_means_dead(self):
        self.assertRecovered(self.requeue())

    def test_garbage_beat_counts_as_absent(self):
        for garbage in ("garbage", "", "inf", "nan", "12abc"):
            with self.subTest(last_beat=garbage):
                self.r.delete(qkey("default"), INPROGRESS, counter("j1"))
                self.r.rpush(INPROGRESS, self.raw)
                self.r.hset(LAST_BEAT, OWNER, garbage)
                self.assertRecovered(self.requeue())

    def test_redis_clock_wins_over_the_callers(self):
        # The caller's epoch is far in the future; TIME works, so it is ignored.
        self.r.hset(LAST_BEAT, OWNER, self.now() - 10)
        self.assertAlive(self.requeue(now=self.now() + 100000))

    def test_no_threshold_is_unconditional(self):
        self.r.hset(PRESENCE, "busy", "0")
        self.r.hset(LAST_BEAT, OWNER, self.now())
        self.assertRecovered(self.requeue(threshold=""))

    def test_the_last_beat_is_left_to_the_caller(self):
        self.r.hset(LAST_BEAT, OWNER, self.now() - 301)
        self.requeue()
        self.assertEqual(self.r.hexists(LAST_BEAT, OWNER), True)


class TestRequeueTimeRefusedByAcl(ScriptTestCase):
    """TIME refused by an ACL ([ACL] -time): the scripts use the caller's epoch."""

    def setUp(self):
        super().setUp()
        self.r.acl_setuser("cw", enabled=True, passwords=["+pw"], keys=["*"],
                           commands=["+@all", "-time"], reset=True)
        self.addCleanup(self.r.acl_deluser, "cw")
        self.cw = self.server.client(username="cw", password="pw")
        self.addCleanup(self.cw.close)
        with self.assertRaises(redis.ResponseError):
            self.cw.time()
        self.raw = job("j1")
        self.r.rpush(INPROGRESS, self.raw)
        self.r.hset(LAST_BEAT, OWNER, 1000000)

    def test_alive_by_the_callers_clock(self):
        self.assertEqual(self.requeue(now=1000000 + 300, client=self.cw), [-1, 0, 0])

    def test_dead_by_the_callers_clock(self):
        self.assertEqual(self.requeue(now=1000000 + 301, client=self.cw), [1, 0, 1,
                                                                           b"default"])
        self.assertEqual(self.queue(), [self.raw])

    def test_unlisted_check_uses_the_callers_clock(self):
        self.r.zadd(LIVE, {"default": 1000000 + 500})
        self.assertEqual(self.requeue(now=1000000 + 600, client=self.cw), [1, 0, 0])


class TestRequeueTimeRenamed(ScriptTestCase):
    """TIME unknown to the server (rename-command TIME ""): same fallback."""

    redis_args = ["--rename-command", "TIME", ""]

    def now(self):
        return 2000000000

    def test_fallback(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.r.hset(LAST_BEAT, OWNER, 2000000000 - 100)
        self.assertEqual(self.requeue(), [-1, 0, 0])
        self.assertEqual(self.requeue(now=2000000000 + 400), [1, 0, 1, b"default"])
        self.assertEqual(self.queue(), [raw])


# ======================================================================================
# 6.4 REQUEUE: the moves


class TestRequeueMoves(ScriptTestCase):

    def test_empty_list(self):
        self.assertEqual(self.requeue(), [0, 0, 0])

    def test_order_is_preserved(self):
        """Fetched j1, j2, j3 (j3 newest, index 0): after the requeue j1 is first in line
        (rightmost), ahead of what was already queued."""
        self.r.lpush(qkey("default"), b"old")
        for i in (1, 2, 3):
            self.r.lpush(INPROGRESS, job("j%d" % i))
        self.live("default")
        self.assertEqual(self.requeue(), [3, 0, 0])
        self.assertEqual(self.queue(), [b"old", job("j3"), job("j2"), job("j1")])
        # consumers take from the right: j1 first, then j2, j3, then old
        self.assertEqual([self.r.rpop(qkey("default")) for _ in range(4)],
                         [job("j1"), job("j2"), job("j3"), b"old"])

    def test_each_job_goes_to_its_own_queue(self):
        self.r.rpush(INPROGRESS, job("a", "qa"), job("b", "qb"))
        self.live("qa", "qb")
        self.assertEqual(self.requeue(), [2, 0, 0])
        self.assertEqual(self.queue("qa"), [job("a", "qa")])
        self.assertEqual(self.queue("qb"), [job("b", "qb")])

    def test_unreadable_queue_goes_to_default(self):
        bad = [b"{not json", b"[1,2]", b'"str"', b"null",
               b'{"jid":"x","queue":""}', b'{"jid":"y","queue":7}', b'{"jid":"z"}']
        self.r.rpush(INPROGRESS, *bad)
        self.live("default")
        self.assertEqual(self.requeue(), [len(bad), 0, 0])
        self.assertEqual(sorted(self.queue()), sorted(bad))

    def test_finished_marks_are_dropped_with_their_counter(self):
        done, kept, other = job("done"), job("kept"), job("other")
        self.r.rpush(INPROGRESS, done, kept, other)
        self.r.set(counter("done"), 2)
        self.r.set(counter("other"), 2)
        self.live("default")
        reply = self.requeue(threshold="", marks=[b"d:" + done, b"k:" + kept])
        self.assertEqual(reply, [1, 0, 0])
        self.assertEqual(self.queue(), [other])
        self.assertEqual(self.inprogress(), [kept])
        self.assertFalse(self.r.exists(counter("done")), "the drop is the ack")
        self.assertEqual(self.r.get(counter("other")), b"2", "shutdown never counts")

    def test_kept_jobs_go_back_after_failed_ones(self):
        kept = job("kept")
        broken = job("broken", "broken")
        self.r.rpush(INPROGRESS, kept, broken, job("good"))
        self.r.set(qkey("broken"), "a string")
        self.live("default", "broken")
        reply = self.requeue(threshold="", marks=[b"k:" + kept])
        self.assertEqual(reply, [1, 1, 0])
        self.assertEqual(self.inprogress(), [broken, kept])

    def test_unknown_marks_are_ignored(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.live("default")
        self.assertEqual(self.requeue(marks=[b"x:" + raw, b"", b"d"]), [1, 0, 0])

    def test_failed_write_rotates_the_job_to_the_back(self):
        broken, good1, good2 = job("b", "broken"), job("g1"), job("g2")
        self.r.rpush(INPROGRESS, broken, good1, good2)
        self.r.set(qkey("broken"), "a string")
        self.live("default", "broken")
        self.assertEqual(self.requeue(), [2, 1, 0])
        self.assertEqual(self.inprogress(), [broken])
        self.assertEqual(self.queue(), [good1, good2])
        self.assertFalse(self.r.exists(counter("b")), "only a requeue counts")
        self.assertEqual(self.r.get(counter("g1")), b"1")
        # fixed: the next pass moves it too
        self.r.delete(qkey("broken"))
        self.assertEqual(self.requeue(), [1, 0, 0])
        self.assertEqual(self.queue("broken"), [broken])
        self.assertEqual(self.inprogress(), [])

    def test_failed_writes_keep_their_order(self):
        b1, b2 = job("b1", "broken"), job("b2", "broken")
        self.r.rpush(INPROGRESS, b1, job("g"), b2)
        self.r.set(qkey("broken"), "a string")
        self.live("default", "broken")
        self.assertEqual(self.requeue(), [1, 2, 0])
        self.assertEqual(self.inprogress(), [b1, b2])

    def test_unlisted_queues_are_reported_once_and_listed(self):
        self.r.zadd(LIVE, {"fresh": self.now(), "stale": self.now() - 200})
        self.r.rpush(INPROGRESS, job("a", "nobody"), job("b", "fresh"), job("c", "stale"),
                     job("d", "nobody"))
        reply = self.requeue()
        self.assertEqual(reply[:3], [4, 0, 2])
        self.assertEqual(reply[3:], [b"nobody", b"stale"])
        self.assertEqual(self.r.smembers(QUEUES), {b"nobody", b"stale"})
        self.assertEqual(len(self.queue("nobody")), 2)

    def test_live_queue_within_120s_is_listed(self):
        self.r.zadd(LIVE, {"q": self.now() - 119})
        self.r.rpush(INPROGRESS, job("a", "q"))
        self.assertEqual(self.requeue(), [1, 0, 0])

    def test_damaged_listing_keys_do_not_block(self):
        self.r.set(QUEUES, "x")
        self.r.set(LIVE, "x")
        self.r.rpush(INPROGRESS, job("a"))
        self.assertEqual(self.requeue(), [1, 0, 1, b"default"])
        self.assertEqual(self.queue(), [job("a")])

    def test_wrong_typed_list_is_an_error(self):
        self.r.set(INPROGRESS, "x")
        with self.assertRaises(redis.ResponseError):
            self.requeue()


# ======================================================================================
# 6.4 REQUEUE: orphan counters, parking, raw burial


class TestRequeueOrphans(ScriptTestCase):

    def setUp(self):
        super().setUp()
        self.raw = job("j1")
        self.live("default")

    def recover(self, **kw):
        self.r.rpush(INPROGRESS, self.raw)
        return self.requeue(**kw)

    def test_counter_counts_recoveries_with_a_ttl(self):
        for n in (1, 2, 3):
            self.assertEqual(self.recover(), [1, 0, 0])
            self.assertEqual(self.r.get(counter("j1")), str(n).encode())
            self.assertTrue(604790 < self.r.ttl(counter("j1")) <= 604800)
        self.assertEqual(len(self.queue()), 3)

    def test_fourth_recovery_parks(self):
        self.r.set(counter("j1"), 3)
        self.assertEqual(self.recover(max_orphanings=3), [1, 0, 0])
        self.assertEqual(self.r.lrange(PARKING, 0, -1), [self.raw])
        self.assertEqual(self.queue(), [])
        self.assertEqual(self.inprogress(), [])
        self.assertEqual(self.r.get(counter("j1")), b"3", "parking does not count")

    def test_limit_is_count_plus_one(self):
        self.r.set(counter("j1"), 2)
        self.assertEqual(self.recover(max_orphanings=3), [1, 0, 0])
        self.assertEqual(self.queue(), [self.raw])
        self.assertEqual(self.r.get(counter("j1")), b"3")

    def test_shutdown_requeue_ignores_the_limit(self):
        self.r.set(counter("j1"), 10)
        self.assertEqual(self.recover(threshold=""), [1, 0, 0])
        self.assertEqual(self.queue(), [self.raw])
        self.assertEqual(self.r.get(counter("j1")), b"10")

    def test_no_jid_no_counter(self):
        self.raw = b'{"class":"Work","queue":"default"}'
        self.assertEqual(self.recover(max_orphanings=0), [1, 0, 0])
        self.assertEqual(self.queue(), [self.raw])
        self.assertEqual(self.r.keys(ORPH + "*"), [])

    def test_corrupt_counter_is_reset(self):
        for corrupt in ("abc", "1.5", ""):
            with self.subTest(counter=corrupt):
                self.r.delete(qkey("default"))
                self.r.set(counter("j1"), corrupt)
                self.assertEqual(self.recover(max_orphanings=1), [1, 0, 0])
                self.assertEqual(self.r.get(counter("j1")), b"1")
                self.assertEqual(self.queue(), [self.raw])

    def test_wrong_typed_counter_is_reset(self):
        self.r.rpush(counter("j1"), "x", "y")
        self.assertEqual(self.recover(max_orphanings=1), [1, 0, 0])
        self.assertEqual(self.r.get(counter("j1")), b"1")
        # and the limit still works: 1 + 1 > 1
        self.assertEqual(self.recover(max_orphanings=1), [1, 0, 0])
        self.assertEqual(self.r.lrange(PARKING, 0, -1), [self.raw])

    def test_a_job_put_back_marks_its_settled_record(self):
        """FE-13: a recovered or shutdown-requeued job gets the mark in its settled record,
        which its success's ack reads in place of a DEL of its counter; never over an
        outcome, and the mark's TTL renewed."""
        rec = b"cogworker:batch:settled:j1"
        for threshold in ("300", ""):
            with self.subTest(threshold=threshold):
                self.r.delete(rec)
                self.assertEqual(self.recover(threshold=threshold), [1, 0, 0])
                self.assertEqual(self.r.get(rec), b"waited")
                self.assertTrue(604790 < self.r.ttl(rec) <= 604800)
        self.r.expire(rec, 100)
        self.assertEqual(self.recover(), [1, 0, 0])
        self.assertTrue(604790 < self.r.ttl(rec) <= 604800)
        self.r.set(rec, "success", ex=600)
        self.assertEqual(self.recover(), [1, 0, 0])
        self.assertEqual(self.r.get(rec), b"success")
        self.assertLessEqual(self.r.ttl(rec), 600)

    def test_counter_is_written_after_the_job(self):
        """A failed requeue never counts as an orphaning."""
        self.r.set(qkey("default"), "a string")
        self.assertEqual(self.recover(), [0, 1, 0])
        self.assertFalse(self.r.exists(counter("j1")))

    def test_raw_burial_when_parking_fails(self):
        self.r.set(PARKING, "a string")
        self.r.set(counter("j1"), 3)
        reply = self.recover(now=1767225600)
        self.assertEqual(reply, [1, 0, 0, self.raw])
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True),
                         [(self.raw, 1767225600.0)])
        self.assertEqual(self.inprogress(), [])
        self.assertEqual(self.queue(), [])

    def test_raw_burial_reply_follows_the_unlisted_names(self):
        self.r.set(PARKING, "a string")
        self.r.set(counter("j1"), 3)
        other = job("j2", "nobody")
        self.r.rpush(INPROGRESS, other)
        self.assertEqual(self.recover(), [2, 0, 1, b"nobody", self.raw])

    def test_both_parking_and_dead_broken_requeues(self):
        self.r.hset(PARKING, "x", "y")
        self.r.set(DEAD, "a string")
        self.r.set(counter("j1"), 3)
        self.assertEqual(self.recover(), [1, 0, 0])
        self.assertEqual(self.queue(), [self.raw])
        self.assertEqual(self.r.get(counter("j1")), b"4")

    def test_parking_broken_and_nothing_writable_rotates(self):
        self.r.set(PARKING, "a string")
        self.r.set(DEAD, "a string")
        self.r.set(qkey("default"), "a string")
        self.r.set(counter("j1"), 3)
        self.assertEqual(self.recover(), [0, 1, 0])
        self.assertEqual(self.inprogress(), [self.raw])


# ======================================================================================
# 6.2/6.3 via REQUEUE and REQUEUE_ONE: the running lock travels with the push


class TestRequeueRunningLock(ScriptTestCase):

    LOCK = (RUNNING + "pj").encode()

    def setUp(self):
        super().setUp()
        self.live("default")
        self.raw = periodic_job("j1")

    def recover(self):
        self.r.rpush(INPROGRESS, self.raw)
        return self.requeue()

    def test_absent_lock_is_taken_with_queued_ttl(self):
        self.assertEqual(self.recover(), [1, 0, 0])
        self.assertEqual(self.r.get(self.LOCK), b"j1")
        self.assertTrue(QUEUED_TTL - 10 < self.r.ttl(self.LOCK) <= QUEUED_TTL)

    def test_own_lock_is_refreshed(self):
        self.r.set(self.LOCK, "j1", ex=30)
        self.recover()
        self.assertEqual(self.r.get(self.LOCK), b"j1")
        self.assertGreater(self.r.ttl(self.LOCK), 420)

    def test_other_owner_is_left_alone(self):
        self.r.set(self.LOCK, "newer", ex=30)
        self.recover()
        self.assertEqual(self.r.get(self.LOCK), b"newer")
        self.assertLessEqual(self.r.ttl(self.LOCK), 30)
        self.assertEqual(self.queue(), [self.raw])

    def test_only_a_literal_true_flag_counts(self):
        for raw in (job("j1", periodic_pjid="pj", periodic_until_executed="true"),
                    job("j1", periodic_pjid="pj"),
                    job("j1", periodic_pjid=7, periodic_until_executed=True)):
            self.raw = raw
            self.recover()
            self.assertFalse(self.r.exists(self.LOCK), raw)

    def test_damaged_lock_keeps_the_job_listed(self):
        self.r.rpush(self.LOCK, "x")
        self.assertEqual(self.recover(), [0, 1, 0])
        self.assertEqual(self.inprogress(), [self.raw])
        self.assertEqual(self.queue(), [])


# ======================================================================================
# 6.5 BURY_ORPHAN


class TestBuryOrphan(ScriptTestCase):

    def bury(self, raw, entry=b"entry", score=100):
        return self.run_script("bury_orphan", [PARKING, DEAD], [raw, score, entry])

    def test_head_only(self):
        self.r.rpush(PARKING, b"a", b"b")
        self.assertEqual(self.bury(b"b"), 0)
        self.assertEqual(self.bury(b"missing"), 0)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertEqual(self.bury(b"a", b"entry-a", 123.5), 1)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(b"entry-a", 123.5)])
        self.assertEqual(self.r.lrange(PARKING, 0, -1), [b"b"])

    def test_second_burier_gets_zero(self):
        self.r.rpush(PARKING, b"a")
        self.assertEqual(self.bury(b"a"), 1)
        self.assertEqual(self.bury(b"a"), 0)
        self.assertEqual(self.r.zcard(DEAD), 1)

    def test_empty_or_missing_list(self):
        self.assertEqual(self.bury(b"a"), 0)

    def test_failed_write_keeps_the_job_parked(self):
        self.r.rpush(PARKING, b"a")
        self.r.set(DEAD, "x")
        with self.assertRaises(redis.ResponseError):
            self.bury(b"a")
        self.assertEqual(self.r.lrange(PARKING, 0, -1), [b"a"])

    def test_its_settle_is_noted_in_the_same_step(self):
        self.r.rpush(PARKING, b"a")
        owed = "cogworker:batch:owed"
        args = [b"b", 1, b"entry", "jid-a", "dead b1"]
        self.assertEqual(self.run_script("bury_orphan", [PARKING, DEAD, owed], args), 0)
        self.assertFalse(self.r.exists(owed))
        args[0] = b"a"
        self.assertEqual(self.run_script("bury_orphan", [PARKING, DEAD, owed], args), 1)
        self.assertEqual(self.r.hgetall(owed), {b"jid-a": b"dead b1"})


# ======================================================================================
# 6.6 REQUEUE_ONE


class TestRequeueOne(ScriptTestCase):

    def requeue_one(self, raw):
        return self.run_script("requeue_one", [INPROGRESS],
                               [raw, QUEUE, "default", RUNNING, QUEUED_TTL])

    def test_not_listed_is_zero(self):
        self.r.rpush(INPROGRESS, job("other"))
        self.assertEqual(self.requeue_one(job("j1")), 0)
        self.assertEqual(self.queue(), [])
        self.assertEqual(self.inprogress(), [job("other")])

    def test_requeues_to_the_front_of_its_queue(self):
        raw = job("j1", "q")
        self.r.rpush(INPROGRESS, job("a"), raw, job("b"))
        self.r.lpush(qkey("q"), b"waiting")
        self.assertEqual(self.requeue_one(raw), 1)
        self.assertEqual(self.r.rpop(qkey("q")), raw, "first in line")
        self.assertEqual(self.inprogress(), [job("a"), job("b")])

    def test_removes_one_copy_only(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw, raw)
        self.assertEqual(self.requeue_one(raw), 1)
        self.assertEqual(self.inprogress(), [raw])

    def test_retakes_a_lapsed_running_lock(self):
        raw = periodic_job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.assertEqual(self.requeue_one(raw), 1)
        self.assertEqual(self.r.get((RUNNING + "pj").encode()), b"j1")
        self.assertGreater(self.r.ttl((RUNNING + "pj").encode()), QUEUED_TTL - 10)

    def test_no_orphan_counting(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.requeue_one(raw)
        self.assertFalse(self.r.exists(counter("j1")))

    def test_failed_write_keeps_the_job_listed(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.r.set(qkey("default"), "x")
        with self.assertRaises(redis.ResponseError):
            self.requeue_one(raw)
        self.assertEqual(self.inprogress(), [raw])


# ======================================================================================
# 6.7 INTERRUPT


class TestInterrupt(ScriptTestCase):

    def interrupt(self, raw, target=RETRY, payload=b"new", score=50, jid="j1"):
        keys = [INPROGRESS, target] + ([counter(jid)] if jid else [])
        return self.run_script("interrupt", keys, [raw, score, payload])

    def test_gone_is_zero(self):
        self.assertEqual(self.interrupt(job("j1")), 0)
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_files_and_removes_one_copy(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw, job("x"), raw)
        self.r.set(counter("j1"), 2)
        self.assertEqual(self.interrupt(raw, DEAD, b"entry", 77), 1)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(b"entry", 77.0)])
        self.assertEqual(self.inprogress(), [job("x"), raw])
        self.assertFalse(self.r.exists(counter("j1")))

    def test_counter_key_is_optional(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.assertEqual(self.interrupt(raw, jid=None), 1)
        self.assertEqual(self.inprogress(), [])

    def test_damaged_counter_does_not_fail(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.r.hset(counter("j1"), "x", "y")
        self.assertEqual(self.interrupt(raw), 1)

    def test_failed_write_keeps_the_job_listed(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.r.set(RETRY, "x")
        with self.assertRaises(redis.ResponseError):
            self.interrupt(raw)
        self.assertEqual(self.inprogress(), [raw])


# ======================================================================================
# 6.8 PARK_UNSETTLED, 6.9 FILE_UNSETTLED


class TestUnsettled(ScriptTestCase):

    def record(self, jid, target="cogworker:dead", score=42):
        return json.dumps({"set": target, "score": score, "payload": job(jid).decode()},
                          separators=(",", ":")).encode()

    def park(self, raw, record):
        return self.run_script("park_unsettled", [INPROGRESS, UNSETTLED], [raw, record])

    def file(self, record, target=DEAD, payload=b"payload", score=42, jid="j1"):
        keys = [UNSETTLED, target] + ([counter(jid)] if jid else [])
        return self.run_script("file_unsettled", keys, [record, score, payload])

    def test_park(self):
        raw, rec = job("j1"), self.record("j1")
        self.assertEqual(self.park(raw, rec), 0)
        self.assertEqual(self.r.llen(UNSETTLED), 0)
        self.r.rpush(INPROGRESS, raw, job("x"))
        self.r.rpush(UNSETTLED, b"earlier")
        self.assertEqual(self.park(raw, rec), 1)
        self.assertEqual(self.r.lrange(UNSETTLED, 0, -1), [b"earlier", rec])
        self.assertEqual(self.inprogress(), [job("x")])

    def test_park_failed_write_keeps_the_job_listed(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.r.set(UNSETTLED, "x")
        with self.assertRaises(redis.ResponseError):
            self.park(raw, b"rec")
        self.assertEqual(self.inprogress(), [raw])

    def test_file_head_only(self):
        a, b = self.record("a"), self.record("b")
        self.r.rpush(UNSETTLED, a, b)
        self.assertEqual(self.file(b, jid="b"), 0)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.r.set(counter("a"), 1)
        self.assertEqual(self.file(a, DEAD, job("a"), 42, "a"), 1)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(job("a"), 42.0)])
        self.assertEqual(self.r.lrange(UNSETTLED, 0, -1), [b])
        self.assertFalse(self.r.exists(counter("a")))
        self.assertEqual(self.file(a, jid="a"), 0, "a second filer gets 0")

    def test_file_into_retry_without_counter_key(self):
        rec = self.record("j1", "cogworker:retry")
        self.r.rpush(UNSETTLED, rec)
        self.assertEqual(self.file(rec, RETRY, b"p", 9, jid=None), 1)
        self.assertEqual(self.r.zscore(RETRY, b"p"), 9.0)

    def test_file_failed_write_keeps_the_record(self):
        rec = self.record("j1")
        self.r.rpush(UNSETTLED, rec)
        self.r.set(DEAD, "x")
        with self.assertRaises(redis.ResponseError):
            self.file(rec)
        self.assertEqual(self.r.lrange(UNSETTLED, 0, -1), [rec])


# ======================================================================================
# 6.10 SWAP_DEAD_ENTRY


class TestSwapDeadEntry(ScriptTestCase):

    def swap(self, old, new, score=10):
        return self.run_script("swap_dead_entry", [DEAD], [old, new, score])

    def test_gone_is_zero(self):
        self.assertEqual(self.swap(b"raw", b"entry"), 0)
        self.assertEqual(self.r.zcard(DEAD), 0)

    def test_swaps(self):
        self.r.zadd(DEAD, {b"raw": 1, b"other": 2})
        self.assertEqual(self.swap(b"raw", b"entry", 10), 1)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True),
                         [(b"other", 2.0), (b"entry", 10.0)])
        self.assertEqual(self.swap(b"raw", b"entry"), 0)

    def test_same_member_is_kept(self):
        self.r.zadd(DEAD, {b"raw": 1})
        self.assertEqual(self.swap(b"raw", b"raw", 5), 1)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(b"raw", 5.0)])


# ======================================================================================
# 6.11 ACK


class TestAck(ScriptTestCase):

    def test_removes_one_copy_and_the_counter(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw, job("x"), raw)
        self.r.set(counter("j1"), 2)
        self.assertEqual(self.run_script("ack", [INPROGRESS, counter("j1")], [raw]), 1)
        self.assertEqual(self.inprogress(), [job("x"), raw])
        self.assertFalse(self.r.exists(counter("j1")))

    def test_not_listed_and_damaged_counter_still_one(self):
        self.r.hset(counter("j1"), "x", "y")
        self.assertEqual(self.run_script("ack", [INPROGRESS, counter("j1")], [job("j1")]), 1)
        self.assertEqual(self.run_script("ack", [INPROGRESS], [job("j1")]), 1)


# ======================================================================================
# 6.12 REQUEUE_ENTRY, 6.13 RETAKE


class TestRequeueEntry(ScriptTestCase):

    LOCK = (RUNNING + "pj").encode()

    def requeue_entry(self, payload, flag, queue="default", jid="j1", ttl=QUEUED_TTL):
        keys = [qkey(queue)] + ([self.LOCK] if flag else [])
        return self.run_script("requeue_entry", keys, [payload, jid, ttl, flag])

    def test_pushes_to_the_front(self):
        self.r.lpush(qkey("default"), b"waiting")
        self.assertEqual(self.requeue_entry(job("j1"), ""), 1)
        self.assertEqual(self.r.rpop(qkey("default")), job("j1"))
        self.assertFalse(self.r.exists(self.LOCK))

    def test_flagged_takes_the_lock(self):
        self.assertEqual(self.requeue_entry(periodic_job("j1"), "1", ttl=100), 1)
        self.assertEqual(self.r.get(self.LOCK), b"j1")
        self.assertTrue(90 < self.r.ttl(self.LOCK) <= 100)

    def test_flag_spellings(self):
        for flag, locked in (("true", True), ("1", True), ("0", False), ("false", False)):
            self.r.delete(self.LOCK)
            self.run_script("requeue_entry", [qkey("default"), self.LOCK],
                            [b"p", "j1", 100, flag])
            self.assertEqual(bool(self.r.exists(self.LOCK)), locked, flag)

    def test_flagged_refreshes_own_and_spares_others(self):
        self.r.set(self.LOCK, "j1", ex=5)
        self.requeue_entry(b"p", "1")
        self.assertGreater(self.r.ttl(self.LOCK), 5)
        self.r.set(self.LOCK, "newer", ex=5)
        self.requeue_entry(b"p", "1")
        self.assertEqual(self.r.get(self.LOCK), b"newer")
        self.assertLessEqual(self.r.ttl(self.LOCK), 5)
        self.assertEqual(self.r.llen(qkey("default")), 2)


class TestRetake(ScriptTestCase):

    LOCK = (RUNNING + "pj").encode()

    def retake(self, jid="j1", ttl=420):
        return self.run_script("retake", [self.LOCK], [jid, ttl])

    def test_absent_is_taken(self):
        self.assertEqual(self.retake(), 1)
        self.assertEqual(self.r.get(self.LOCK), b"j1")
        self.assertTrue(410 < self.r.ttl(self.LOCK) <= 420)

    def test_owned_is_refreshed(self):
        self.r.set(self.LOCK, "j1", ex=10)
        self.assertEqual(self.retake(), 1)
        self.assertTrue(410 < self.r.ttl(self.LOCK) <= 420)

    def test_other_owner_untouched(self):
        self.r.set(self.LOCK, "newer", ex=10)
        self.assertEqual(self.retake(), 0)
        self.assertEqual(self.r.get(self.LOCK), b"newer")
        self.assertLessEqual(self.r.ttl(self.LOCK), 10)

    def test_owned_without_ttl_gets_one(self):
        self.r.set(self.LOCK, "j1")
        self.assertEqual(self.retake(), 1)
        self.assertGreater(self.r.ttl(self.LOCK), 0)


# ======================================================================================
# 6.14 CLAIM, 6.15 ROLLBACK


class Periodic(ScriptTestCase):
    PJID = "pj"
    RUN = b"periodic:running:pj"
    LAST = b"periodic:last_slot:pj"

    def slot_lock(self, slot):
        return ("periodic:lock:pj:%d" % slot).encode()

    def claim(self, slot, mode="until_executed", jid="j1"):
        return self.run_script("claim", [self.RUN, self.LAST, self.slot_lock(slot)],
                               [slot, mode, 20, jid, QUEUED_TTL])

    def rollback(self, slot, previous, jid="j1"):
        return self.run_script("rollback", [self.LAST, self.slot_lock(slot), self.RUN],
                               [slot, previous, jid])


class TestClaim(Periodic):

    def test_first_claim(self):
        self.assertEqual(self.claim(1000), [1, b""])
        self.assertEqual(self.r.get(self.LAST), b"1000")
        self.assertEqual(self.r.get(self.slot_lock(1000)), b"1")
        self.assertTrue(0 < self.r.ttl(self.slot_lock(1000)) <= 20)
        self.assertEqual(self.r.get(self.RUN), b"j1")
        self.assertTrue(QUEUED_TTL - 10 < self.r.ttl(self.RUN) <= QUEUED_TTL)

    def test_returns_the_previous_slot(self):
        self.r.set(self.LAST, "940")
        self.assertEqual(self.claim(1000), [1, b"940"])

    def test_blocked_by_a_running_lock(self):
        self.r.set(self.RUN, "old-run")
        self.assertEqual(self.claim(1000), 2)
        self.assertFalse(self.r.exists(self.LAST))
        self.assertFalse(self.r.exists(self.slot_lock(1000)))

    def test_without_unique_mode_no_running_lock(self):
        self.r.set(self.RUN, "old-run")
        self.assertEqual(self.claim(1000, mode=""), [1, b""])
        self.assertEqual(self.r.get(self.RUN), b"old-run")
        self.r.delete(self.RUN)
        self.assertEqual(self.claim(1060, mode=""), [1, b"1000"])
        self.assertFalse(self.r.exists(self.RUN))

    def test_same_or_earlier_slot_is_zero(self):
        self.r.set(self.LAST, "1000")
        self.assertEqual(self.claim(1000), 0)
        self.assertEqual(self.claim(940), 0)
        self.assertEqual(self.r.get(self.LAST), b"1000")
        self.assertFalse(self.r.exists(self.RUN))

    def test_slot_lock_is_nx(self):
        self.r.set(self.slot_lock(1000), "1", ex=20)
        self.assertEqual(self.claim(1000), 0)
        self.assertFalse(self.r.exists(self.LAST))
        self.assertFalse(self.r.exists(self.RUN))

    def test_two_claimers_one_winner(self):
        self.assertEqual(self.claim(1000, jid="a"), [1, b""])
        self.r.delete(self.RUN)  # the first run finished at once
        self.assertEqual(self.claim(1000, jid="b"), 0)

    def test_non_numeric_last_slot_is_an_error(self):
        self.r.set(self.LAST, "garbage")
        with self.assertRaises(redis.ResponseError):
            self.claim(1000)
        self.assertFalse(self.r.exists(self.slot_lock(1000)))
        self.assertFalse(self.r.exists(self.RUN))


class TestRollback(Periodic):

    def test_without_previous_goes_to_slot_minus_one(self):
        self.claim(1767225600)
        self.assertEqual(self.rollback(1767225600, ""), 1)
        self.assertEqual(self.r.get(self.LAST), b"1767225599")
        self.assertFalse(self.r.exists(self.slot_lock(1767225600)))
        self.assertFalse(self.r.exists(self.RUN))

    def test_restores_previous(self):
        self.r.set(self.LAST, "100")
        self.assertEqual(self.claim(1000), [1, b"100"])
        self.assertEqual(self.rollback(1000, "100"), 1)
        self.assertEqual(self.r.get(self.LAST), b"100")

    def test_later_slot_untouched(self):
        self.claim(1000)
        self.r.set(self.LAST, "1060")
        self.assertEqual(self.rollback(1000, ""), 1)
        self.assertEqual(self.r.get(self.LAST), b"1060")
        self.assertFalse(self.r.exists(self.slot_lock(1000)))

    def test_running_lock_released_only_when_ours(self):
        self.claim(1000)
        self.r.set(self.RUN, "newer")
        self.assertEqual(self.rollback(1000, ""), 1)
        self.assertEqual(self.r.get(self.RUN), b"newer")

    def test_damaged_keys_still_done(self):
        self.r.rpush(self.RUN, "x")
        self.r.set(self.LAST, "1000")
        self.r.set(self.slot_lock(1000), "1")
        self.assertEqual(self.rollback(1000, "100"), 1)
        self.assertEqual(self.r.get(self.LAST), b"100")
        self.assertFalse(self.r.exists(self.slot_lock(1000)))
        self.r.delete(self.RUN, self.LAST)
        self.r.rpush(self.LAST, "x")
        self.r.set(self.RUN, "j1")
        self.assertEqual(self.rollback(1000, ""), 1)
        self.assertFalse(self.r.exists(self.RUN))
        self.assertEqual(self.r.type(self.LAST), b"list")


# ======================================================================================
# 6.16 CLAIM_AND_REQUEUE, 6.17 BURY, kill


class TestClaimAndRequeue(ScriptTestCase):

    def graduate(self, entry, payload, source=SCHEDULE, queue="default"):
        return self.run_script("claim_and_requeue", [source, QUEUES, qkey(queue)],
                               [entry, payload, queue])

    def test_gate(self):
        entry = job("j1", at=1.5)
        self.r.zadd(SCHEDULE, {entry: 1.5})
        self.r.lpush(qkey("q"), b"older")
        self.assertEqual(self.graduate(entry, b"restamped", queue="q"), 1)
        self.assertEqual(self.queue("q"), [b"restamped", b"older"], "LPUSH: back of line")
        self.assertEqual(self.r.zcard(SCHEDULE), 0)
        self.assertEqual(self.r.smembers(QUEUES), {b"q"})
        self.assertEqual(self.graduate(entry, b"restamped", queue="q"), 0, "gone")
        self.assertEqual(self.r.llen(qkey("q")), 2)

    def test_from_retry_and_dead(self):
        for source in (RETRY, DEAD):
            self.r.zadd(source, {b"e": 1})
            self.assertEqual(self.graduate(b"e", b"p", source), 1)
            self.assertEqual(self.r.zcard(source), 0)

    def test_damaged_listing_still_requeued(self):
        self.r.zadd(RETRY, {b"e": 1})
        self.r.set(QUEUES, "x")
        self.assertEqual(self.graduate(b"e", b"p", RETRY), 1)
        self.assertEqual(self.queue(), [b"p"])

    def test_failed_push_keeps_the_entry(self):
        self.r.zadd(RETRY, {b"e": 1})
        self.r.set(qkey("default"), "x")
        with self.assertRaises(redis.ResponseError):
            self.graduate(b"e", b"p", RETRY)
        self.assertEqual(self.r.zscore(RETRY, b"e"), 1.0)


class TestBury(ScriptTestCase):

    def bury(self, entry, wrapper=b"wrapper", score=99, source=SCHEDULE):
        return self.run_script("bury", [source, DEAD, STATS_FAILED], [entry, score, wrapper])

    def test_gone_is_zero(self):
        self.assertEqual(self.bury(b"e"), 0)
        self.assertFalse(self.r.exists(STATS_FAILED))

    def test_buries_and_counts(self):
        self.r.zadd(SCHEDULE, {b"e": 1, b"f": 2})
        self.r.set(STATS_FAILED, 5)
        self.assertEqual(self.bury(b"e"), 1)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(b"wrapper", 99.0)])
        self.assertEqual(self.r.zrange(SCHEDULE, 0, -1), [b"f"])
        self.assertEqual(self.r.get(STATS_FAILED), b"6")
        self.assertEqual(self.bury(b"e"), 0)

    def test_damaged_stats_still_buried(self):
        self.r.zadd(RETRY, {b"e": 1})
        self.r.rpush(STATS_FAILED, "x")
        self.assertEqual(self.bury(b"e", source=RETRY), 1)
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_failed_write_keeps_the_entry(self):
        self.r.zadd(SCHEDULE, {b"e": 1})
        self.r.set(DEAD, "x")
        with self.assertRaises(redis.ResponseError):
            self.bury(b"e")
        self.assertEqual(self.r.zscore(SCHEDULE, b"e"), 1.0)


class TestBuryTooLarge(ScriptTestCase):
    """The job is found by its length, first and last bytes, never sent whole."""

    def bury(self, big, head=256, taken="0"):
        return self.run_script("bury_too_large", [INPROGRESS, DEAD],
                               [len(big), big[:head], big[-64:], 99, b"wrapper", taken])

    def test_finds_it_by_length_head_and_tail_and_buries_it(self):
        big = b"{" + b"x" * 5000 + b"}"
        same_head = b"{" + b"x" * 4999 + b"y}"
        self.r.rpush(INPROGRESS, b"a", same_head, big, big, b"z")
        self.assertEqual(self.bury(big), 1)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(b"wrapper", 99.0)])
        self.assertEqual(self.inprogress(), [b"a", same_head, big, b"z"], "one of the two")
        self.assertEqual(self.bury(big), 1)
        self.assertEqual(self.inprogress(), [b"a", same_head, b"z"])
        self.assertEqual(self.bury(big), 0, "none left")
        self.assertEqual(self.inprogress(), [b"a", same_head, b"z"])

    def test_taken_by_basic_fetch_is_only_filed(self):
        self.r.rpush(INPROGRESS, b"a")
        self.assertEqual(self.bury(b"{" + b"x" * 5000 + b"}", taken="1"), 1)
        self.assertEqual(self.r.zcard(DEAD), 1)
        self.assertEqual(self.inprogress(), [b"a"])

    def test_failed_write_keeps_the_job(self):
        big = b"{" + b"x" * 5000 + b"}"
        self.r.rpush(INPROGRESS, big)
        self.r.set(DEAD, "x")
        with self.assertRaises(redis.ResponseError):
            self.bury(big)
        self.assertEqual(self.inprogress(), [big])


class TestKill(ScriptTestCase):

    def kill(self, member, new, score=500, source=RETRY):
        return self.run_script("kill", [source, DEAD], [member, score, new])

    def test_gone_is_zero(self):
        self.assertEqual(self.kill(b"e", b"e"), 0)
        self.assertEqual(self.r.zcard(DEAD), 0)

    def test_moves_same_member(self):
        self.r.zadd(RETRY, {b"e": 1})
        self.assertEqual(self.kill(b"e", b"e", 500), 1)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(b"e", 500.0)])
        self.assertEqual(self.kill(b"e", b"e"), 0)

    def test_moves_new_member(self):
        self.r.zadd(SCHEDULE, {b"e": 1})
        self.assertEqual(self.kill(b"e", b"e2", 7, SCHEDULE), 1)
        self.assertEqual(self.r.zcard(SCHEDULE), 0)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(b"e2", 7.0)])

    def test_dead_onto_itself_keeps_it(self):
        self.r.zadd(DEAD, {b"e": 1})
        self.assertEqual(self.kill(b"e", b"e", 3, DEAD), 1)
        self.assertEqual(self.r.zrange(DEAD, 0, -1, withscores=True), [(b"e", 3.0)])

    def test_failed_write_keeps_the_entry(self):
        self.r.zadd(RETRY, {b"e": 1})
        self.r.set(DEAD, "x")
        with self.assertRaises(redis.ResponseError):
            self.kill(b"e", b"e")
        self.assertEqual(self.r.zscore(RETRY, b"e"), 1.0)

    def test_an_empty_member_drops_and_the_settle_is_noted(self):
        owed = "cogworker:batch:owed"
        self.r.zadd(SCHEDULE, {b"e": 1, b"f": 2})
        self.assertEqual(self.run_script("kill", [SCHEDULE, DEAD, owed],
                                         [b"e", 5, b"", "jid-e", "discarded "]), 1)
        self.assertEqual(self.run_script("kill", [SCHEDULE, DEAD, owed],
                                         [b"f", 5, b"f2", "jid-f", "dead b1"]), 1)
        self.assertEqual(self.run_script("kill", [SCHEDULE, DEAD, owed],
                                         [b"e", 5, b"", "jid-x", "dead "]), 0)
        self.assertEqual(self.r.zcard(SCHEDULE), 0)
        self.assertEqual(self.r.zrange(DEAD, 0, -1), [b"f2"])
        self.assertEqual(self.r.hgetall(owed), {b"jid-e": b"discarded ",
                                                 b"jid-f": b"dead b1"})


# ======================================================================================
# 6.18 QUARANTINE, 6.19 owned keys


class TestQuarantine(ScriptTestCase):

    QNAME = b"cogworker:quarantine:cogworker:dead:1767225600000:0a1b2c3d"

    def quarantine(self, key, expected):
        return self.run_script("quarantine", [key, self.QNAME], [expected, 2592000])

    def test_absent_or_right_type_is_zero(self):
        self.assertEqual(self.quarantine(DEAD, "zset"), 0)
        self.r.zadd(DEAD, {b"e": 1})
        self.assertEqual(self.quarantine(DEAD, "zset"), 0)
        self.assertEqual(self.r.zcard(DEAD), 1)
        self.assertFalse(self.r.exists(self.QNAME))

    def test_wrong_type_is_renamed_with_a_ttl(self):
        self.r.set(DEAD, "oops")
        self.assertEqual(self.quarantine(DEAD, "zset"), 1)
        self.assertFalse(self.r.exists(DEAD))
        self.assertEqual(self.r.get(self.QNAME), b"oops")
        self.assertTrue(2592000 - 10 < self.r.ttl(self.QNAME) <= 2592000)

    def test_each_type(self):
        for make, expected in ((lambda k: self.r.set(k, "s"), "string"),
                               (lambda k: self.r.rpush(k, "l"), "list"),
                               (lambda k: self.r.sadd(k, "m"), "set"),
                               (lambda k: self.r.hset(k, "f", "v"), "hash"),
                               (lambda k: self.r.zadd(k, {"m": 1}), "zset")):
            self.r.flushall()
            make(b"k")
            self.assertEqual(self.quarantine(b"k", expected), 0, expected)
            self.assertEqual(self.quarantine(b"k", "zset" if expected != "zset" else "list"),
                             1, expected)


class TestOwnedKeys(ScriptTestCase):

    KEY = b"cogworker:unique:abc"

    def test_expire_if_owned(self):
        self.assertEqual(self.run_script("expire_if_owned", [self.KEY], ["j1", 100]), 0)
        self.assertFalse(self.r.exists(self.KEY))
        self.r.set(self.KEY, "j2", ex=10)
        self.assertEqual(self.run_script("expire_if_owned", [self.KEY], ["j1", 100]), 0)
        self.assertLessEqual(self.r.ttl(self.KEY), 10)
        self.r.set(self.KEY, "j1", ex=10)
        self.assertEqual(self.run_script("expire_if_owned", [self.KEY], ["j1", 100]), 1)
        self.assertTrue(90 < self.r.ttl(self.KEY) <= 100)

    def test_delete_if_owned(self):
        self.assertEqual(self.run_script("delete_if_owned", [self.KEY], ["j1"]), 0)
        self.r.set(self.KEY, "j2")
        self.assertEqual(self.run_script("delete_if_owned", [self.KEY], ["j1"]), 0)
        self.assertEqual(self.r.get(self.KEY), b"j2")
        self.r.set(self.KEY, "j1")
        self.assertEqual(self.run_script("delete_if_owned", [self.KEY], ["j1"]), 1)
        self.assertFalse(self.r.exists(self.KEY))


# ======================================================================================
# [RO] a read-only replica: pcalls must not hide READONLY from the caller


class TestReadOnlyReplica(ScriptTestCase):
    """The writes that matter are not pcalled, so a failed-over primary makes the
    writing scripts fail with READONLY (an availability error for the daemon) instead of
    reporting "nothing could be written"."""

    def setUp(self):
        super().setUp()
        self.raw = job("j1")
        self.r.rpush(INPROGRESS, self.raw)
        self.r.zadd(RETRY, {self.raw: 1})
        self.r.set(b"periodic:last_slot:pj", 60)
        self.r.replicaof("127.0.0.1", free_port())  # a closed port: stays read-only
        self.addCleanup(self.r.replicaof, "NO", "ONE")

    def test_writing_scripts_fail(self):
        calls = [
            lambda: self.requeue(),
            lambda: self.requeue(threshold=""),
            lambda: self.run_script("ack", [INPROGRESS, counter("j1")], [self.raw]),
            lambda: self.run_script("claim_and_requeue", [RETRY, QUEUES, qkey("default")],
                                    [self.raw, b"p", "default"]),
            lambda: self.run_script("rollback", [b"periodic:last_slot:pj",
                                                 b"periodic:lock:pj:60",
                                                 b"periodic:running:pj"], [60, "", "j1"]),
        ]
        for call in calls:
            with self.assertRaises(redis.ReadOnlyError):
                call()
        self.assertEqual(self.inprogress(), [self.raw])
        self.assertEqual(self.r.zscore(RETRY, self.raw), 1.0)

    def test_alive_owner_still_answers(self):
        self.r.replicaof("NO", "ONE")
        self.r.hset(PRESENCE, "busy", "0")
        self.r.replicaof("127.0.0.1", free_port())
        self.assertEqual(self.requeue(), [-1, 0, 0])


# ======================================================================================
# 6.21 ADMIT, 6.22 RELEASE_SLOT (limits, §7.30)

SLOTS = b"cogworker:limit:Dump"
STARTS = b"cogworker:rate:Dump"
WAITERS = b"cogworker:limit_waiters:Dump"
LIMITS = b"cogworker:limits"
SELF_LIST = b"cogworker:inprogress:me:1:abc"


class TestAdmit(ScriptTestCase):

    def admit(self, raw, fleet=0, rate=0, window=2, jid="j1", holder=None, decl='{}',
              listed=True, delay=1):
        keys = [SLOTS if fleet else b"", STARTS if rate else b"", WAITERS, LIMITS,
                SELF_LIST if listed else b"", SCHEDULE]
        args = [raw, "Dump", decl, fleet, holder or ("me:1:abc f1 " + jid), 60, rate, window,
                jid, delay, self.now()]
        return self.run_script("admit", keys, args)

    def clock(self):
        s, us = self.r.time()
        return s + us / 1e6

    def test_fleet_admits_up_to_n_then_turns_away_to_the_schedule(self):
        raws = [job("j%d" % i) for i in range(3)]
        self.r.rpush(SELF_LIST, *raws)
        for i in range(2):
            st, expiry, why, prev = self.admit(raws[i], fleet=2, jid="j%d" % i)
            self.assertEqual((st, why), (1, b""))
            self.assertAlmostEqual(float(expiry), self.clock() + 60, delta=2)
        self.assertEqual(self.r.zcard(SLOTS), 2)
        before = self.clock()
        st, at, why, _ = self.admit(raws[2], fleet=2, jid="j2", delay=1)
        self.assertEqual((st, why), (0, b"fleet"))
        self.assertAlmostEqual(float(at), before + 1, delta=0.5)
        self.assertEqual(self.r.zscore(SCHEDULE, raws[2]), float(at.decode()))
        self.assertEqual(self.r.lrange(SELF_LIST, 0, -1), raws[:2], "moved, not copied")
        self.assertEqual(self.r.zscore(WAITERS, "j2"), float(at.decode()))
        self.assertEqual(self.r.zcard(SLOTS), 2, "no lease for the one turned away")

    def test_expired_leases_do_not_count(self):
        now = self.clock()
        self.r.zadd(SLOTS, {"dead:1:x f j8": now - 1, "dead:1:x f j9": now - 5})
        self.r.rpush(SELF_LIST, job("j1"))
        self.assertEqual(self.admit(job("j1"), fleet=1)[0], 1)
        self.assertEqual(self.r.zrange(SLOTS, 0, -1), [b"me:1:abc f1 j1"])

    def test_waiters_ahead_push_the_next_try_back(self):
        now = self.clock()
        self.r.zadd(SLOTS, {"h f a": now + 60})
        self.r.zadd(WAITERS, {"w%d" % i: now + 10 for i in range(4)})
        self.r.zadd(WAITERS, {"due": now - 1})           # not ahead: its turn has come
        self.r.rpush(SELF_LIST, job("j1"))
        self.r.zadd(SLOTS, {"h f b": now + 60})
        _, at, _, _ = self.admit(job("j1"), fleet=2, delay=1)
        self.assertAlmostEqual(float(at), now + 1 * (1 + 4 // 2), delta=0.5)

    def test_rate_window_and_its_room(self):
        raws = [job("j%d" % i) for i in range(4)]
        self.r.rpush(SELF_LIST, *raws)
        for i in range(3):
            self.assertEqual(self.admit(raws[i], rate=3, window=2, jid="j%d" % i)[0], 1)
        self.assertEqual(self.r.zcard(STARTS), 3)
        first = float(self.r.zrange(STARTS, 0, 0, withscores=True)[0][1])
        self.assertGreater(self.r.pttl(STARTS), 2000)
        st, at, why, _ = self.admit(raws[3], rate=3, window=2, jid="j3")
        self.assertEqual((st, why), (0, b"rate"))
        self.assertAlmostEqual(float(at), first + 2, delta=0.01)
        # The window slides: a start older than the window no longer counts.
        self.r.zadd(STARTS, {m: first - 5 for m in self.r.zrange(STARTS, 0, -1)})
        self.r.rpush(SELF_LIST, raws[3])
        self.assertEqual(self.admit(raws[3], rate=3, window=2, jid="j3")[0], 1)
        self.assertEqual(self.r.zcard(STARTS), 1)
        self.assertIsNone(self.r.zscore(WAITERS, "j3"), "admitted: no longer waiting")

    def test_no_slot_means_no_start_counted(self):
        self.r.zadd(SLOTS, {"h f a": self.clock() + 60})
        self.r.rpush(SELF_LIST, job("j1"))
        self.assertEqual(self.admit(job("j1"), fleet=1, rate=5)[2], b"fleet")
        self.assertEqual(self.r.zcard(STARTS), 0)

    def test_not_listed_touches_nothing(self):
        self.r.zadd(SLOTS, {"h f a": self.clock() + 60})
        self.assertEqual(self.admit(job("j1"), fleet=1)[0], -1)
        self.assertEqual(self.r.zcard(SCHEDULE), 0)
        self.assertEqual(self.r.zcard(WAITERS), 0)

    def test_basic_mode_schedules_without_a_list(self):
        self.r.zadd(SLOTS, {"h f a": self.clock() + 60})
        self.assertEqual(self.admit(job("j1"), fleet=1, listed=False)[0], 0)
        self.assertEqual(self.r.zcard(SCHEDULE), 1)

    def test_declaration_is_recorded_and_a_different_one_reported(self):
        self.r.rpush(SELF_LIST, job("j1"), job("j2"))
        self.assertEqual(self.admit(job("j1"), fleet=3, decl='{"fleet_concurrency":3}')[3], b"")
        self.assertEqual(self.r.hget(LIMITS, "Dump"), b'{"fleet_concurrency":3}')
        prev = self.admit(job("j2"), fleet=5, jid="j2", decl='{"fleet_concurrency":5}')[3]
        self.assertEqual(prev, b'{"fleet_concurrency":3}')
        self.assertEqual(self.r.hget(LIMITS, "Dump"), b'{"fleet_concurrency":5}')

    def test_the_payload_travels_byte_for_byte(self):
        raw = job("j1")                                  # big integer in args
        self.r.zadd(SLOTS, {"h f a": self.clock() + 60})
        self.r.rpush(SELF_LIST, raw)
        self.admit(raw, fleet=1)
        self.assertEqual(self.r.zrange(SCHEDULE, 0, -1), [raw])


class TestReleaseSlot(ScriptTestCase):

    def test_releases_its_own_and_trims_the_expired(self):
        now = int(self.r.time()[0])
        self.r.zadd(SLOTS, {"me f j1": now + 60, "other f j2": now + 60, "dead f j3": now - 1})
        self.assertEqual(self.run_script("release_slot", [SLOTS], ["me f j1", now]), 1)
        self.assertEqual(self.r.zrange(SLOTS, 0, -1), [b"other f j2"])
        self.assertEqual(self.run_script("release_slot", [SLOTS], ["me f j1", now]), 0)


# ======================================================================================
# 6.21 ADMIT with groups, 6.32 RELEASE_GROUP_SLOT, 6.33 GROUP_SWEEP (fair share, §7.35)

GSLOTS = b"cogworker:group_slots:Dump:A"
GSTARTS = b"cogworker:group_rate:Dump:A"
GJOBS = b"cogworker:group_jobs:Dump:A"
GINDEX = b"cogworker:groups:Dump"
DEFAULT_Q = ("cogworker:queue:default").encode()


class TestGroups(ScriptTestCase):

    def admit(self, raw, jid, n=2, rate=0, window=2, place=None, ttl=60, holder=None):
        keys = [b"", b"", WAITERS, LIMITS, SELF_LIST, SCHEDULE, GSLOTS,
                GSTARTS if rate else b"", GJOBS, GINDEX]
        args = [raw, "Dump", "{}", 0, holder or "me:1:abc f1 " + jid, ttl, 0, 0, jid, 1,
                self.now(),
                "A", n, rate, window, "cogworker:queue:", "default",
                place if place is not None else self.now(), "cogworker:paused_queues"]
        return self.run_script("admit", keys, args)

    def release(self, holder, n=2):
        return self.run_script("release_group_slot", [GSLOTS, b"", GJOBS, GINDEX],
                               [holder, "A", n, 0, 0, 60, "cogworker:queue:", "default",
                                self.now(), "cogworker:paused_queues"])

    def sweep(self, n=1):
        return self.run_script("group_sweep", [GINDEX], [
            "cogworker:group_slots:Dump:", "cogworker:group_rate:Dump:",
            "cogworker:group_jobs:Dump:", n, 0, 0, 60, "cogworker:queue:", "default", 100,
            100, self.now(), "cogworker:paused_queues"])

    def test_set_aside_in_order_then_back_one_per_release_with_a_reservation(self):
        raws = [job("j%d" % i) for i in range(5)]
        self.r.rpush(SELF_LIST, *raws)
        for i in range(2):
            st, _, why, _ = self.admit(raws[i], "j%d" % i, place=100 + i)
            self.assertEqual((st, why), (1, b""))
        # j4 is set aside before j2 and j3, but was enqueued first of the three.
        for i, place in ((4, 99), (2, 102), (3, 103)):
            st, _, why, _ = self.admit(raws[i], "j%d" % i, place=place)
            self.assertEqual((st, why), (0, b"group"))
        self.assertEqual(self.r.lrange(SELF_LIST, 0, -1), [raws[0], raws[1]])
        self.assertEqual(self.r.zrange(GJOBS, 0, -1), [raws[4], raws[2], raws[3]])
        self.assertIsNotNone(self.r.zscore(GINDEX, "A"))
        self.assertEqual(self.release("me:1:abc f1 j0"), [1, 1])
        self.assertEqual(self.r.lrange(DEFAULT_Q, -1, -1), [raws[4]], "at the fetch end")
        self.assertIsNotNone(self.r.zscore(GSLOTS, "r j4"), "its slot reserved")
        # A newer job of the group waits in line, even though it could count a slot.
        self.r.rpush(SELF_LIST, job("j5"))
        self.assertEqual(self.admit(job("j5"), "j5", place=200)[2], b"group")
        # The job brought back takes its reservation and runs.
        self.r.rpush(SELF_LIST, raws[4])
        self.assertEqual(self.admit(raws[4], "j4")[0], 1)
        self.assertIsNone(self.r.zscore(GSLOTS, "r j4"))
        self.assertEqual(self.r.zcard(GSLOTS), 2)

    def test_a_line_emptied_leaves_the_index(self):
        raws = [job("j%d" % i) for i in range(2)]
        self.r.rpush(SELF_LIST, *raws)
        self.assertEqual(self.admit(raws[0], "j0", n=1)[0], 1)
        self.assertEqual(self.admit(raws[1], "j1", n=1)[2], b"group")
        self.assertEqual(self.release("me:1:abc f1 j0", n=1), [1, 1])
        self.assertEqual(self.r.exists(GJOBS), 0)
        self.assertIsNone(self.r.zscore(GINDEX, "A"))

    def test_sweep_brings_back_what_an_expired_slot_frees(self):
        raws = [job("j%d" % i) for i in range(3)]
        self.r.rpush(SELF_LIST, *raws)
        self.assertEqual(self.admit(raws[0], "j0", n=1)[0], 1)
        for i in (1, 2):
            self.assertEqual(self.admit(raws[i], "j%d" % i, n=1, place=10 + i)[2], b"group")
        # The holder died: its lease expires, and the group is due for a look.
        self.r.zadd(GSLOTS, {"me:1:abc f1 j0": 1})
        self.r.zadd(GINDEX, {"A": 1})
        looked, moved = self.sweep()
        self.assertEqual((looked, moved), (1, 1))
        self.assertEqual(self.r.lrange(DEFAULT_Q, 0, -1), [raws[1]])
        self.assertEqual(self.r.zrange(GJOBS, 0, -1), [raws[2]])
        self.assertGreater(self.r.zscore(GINDEX, "A"), self.now(), "next look later")

    def test_nothing_comes_back_to_a_paused_queue(self):
        """A release or a sweep leaves a paused queue's jobs in their line, in order (on
        the queue, unfetched, a reservation would expire and the next look bring the next
        job in front of it); the group is looked at again within a second."""
        raws = [job("j%d" % i) for i in range(3)]
        self.r.rpush(SELF_LIST, *raws)
        self.assertEqual(self.admit(raws[0], "j0", n=1)[0], 1)
        for i in (1, 2):
            self.assertEqual(self.admit(raws[i], "j%d" % i, n=1, place=10 + i)[2], b"group")
        self.r.sadd(b"cogworker:paused_queues", "default")
        self.assertEqual(self.release("me:1:abc f1 j0", n=1), [1, 0])
        self.assertEqual(self.r.llen(DEFAULT_Q), 0)
        self.assertEqual(self.r.zrange(GJOBS, 0, -1), [raws[1], raws[2]])
        self.assertEqual(self.r.zcard(GSLOTS), 0, "no reservation taken")
        sec, usec = self.r.time()
        self.assertLessEqual(self.r.zscore(GINDEX, "A"), sec + usec / 1e6 + 1.01,
                             "looked at again within a second")
        self.r.zadd(GINDEX, {"A": 1})
        self.assertEqual(self.sweep(), [1, 0])
        self.assertEqual(self.r.zcard(GJOBS), 2)
        self.r.srem(b"cogworker:paused_queues", "default")
        self.r.zadd(GINDEX, {"A": 1})
        self.assertEqual(self.sweep(), [1, 1])
        self.assertEqual(self.r.lrange(DEFAULT_Q, 0, -1), [raws[1]], "the oldest, resumed")

    def key_left(self, key):
        """Seconds until key expires, beyond its latest member's score (its expiry)."""
        latest = self.r.zrange(key, -1, -1, withscores=True)[0][1]
        sec, usec = self.r.time()
        return self.r.pttl(key) / 1000 - (latest - (sec + usec / 1e6))

    def refresh(self, expiry, holder, retake=0, ttl=60):
        return self.run_script("refresh_group_lease", [GSLOTS],
                               ["%.6f" % expiry, holder, retake, ttl])

    def test_slot_key_outlives_every_lease_and_goes_when_all_expired(self):
        """The group's slots key has a TTL (§2): its latest member's expiry + 2 x
        process_ttl, set by ADMIT, group_return (a release, a sweep) and the beat's
        REFRESH_GROUP_LEASE; a writer with a shorter process_ttl never cuts it below
        another holder's live lease; an abandoned key goes by itself."""
        raws = [job("j%d" % i) for i in range(4)]
        self.r.rpush(SELF_LIST, *raws)
        self.assertEqual(self.admit(raws[0], "j0", n=3)[0], 1)
        self.assertEqual(self.r.ttl(GSLOTS) // 10, 18, "3 x process_ttl after a lease")
        self.assertAlmostEqual(self.key_left(GSLOTS), 120, delta=0.1)
        # A second holder with process_ttl 10: its lease expires sooner, the key stays
        # past the first one's.
        self.assertEqual(self.admit(raws[1], "j1", n=3, ttl=10)[0], 1)
        self.assertGreater(self.r.pttl(GSLOTS) / 1000, 60 + 19.5)
        self.assertAlmostEqual(self.key_left(GSLOTS), 20, delta=0.1)
        # The beat renews a lease and moves the key on with it (a key cut short by hand
        # stands for time going by).
        self.r.pexpire(GSLOTS, 5000)
        sec, usec = self.r.time()
        self.assertEqual(self.refresh(sec + usec / 1e6 + 60, "me:1:abc f1 j0"), 0)
        self.assertAlmostEqual(self.key_left(GSLOTS), 120, delta=0.1)
        # XX: a lease released meanwhile is not brought back; retake takes it again.
        self.assertEqual(self.refresh(sec + 90, "me:1:abc f1 gone"), 0)
        self.assertIsNone(self.r.zscore(GSLOTS, "me:1:abc f1 gone"))
        self.assertEqual(self.refresh(sec + 90, "me:1:abc f1 back", retake=1), 1)
        self.assertAlmostEqual(self.key_left(GSLOTS), 120, delta=1.1)
        self.r.zrem(GSLOTS, "me:1:abc f1 back")
        # A release keeps the TTL on what is left, from its latest member.
        self.r.pexpire(GSLOTS, 5000)
        self.assertEqual(self.release("me:1:abc f1 j1", n=3), [1, 0])
        self.assertAlmostEqual(self.key_left(GSLOTS), 120, delta=0.1)
        # A reservation (a job brought back by a release) sets it too.
        self.assertEqual(self.admit(raws[1], "j1", n=1, place=1)[2], b"group")
        self.r.pexpire(GSLOTS, 5000)
        self.assertEqual(self.release("me:1:abc f1 j0", n=1), [1, 1])
        self.assertEqual(self.r.zrange(GSLOTS, 0, -1), [b"r j1"])
        self.assertAlmostEqual(self.key_left(GSLOTS), 120, delta=0.1)
        # Abandoned: a holder with process_ttl 0.2 that never comes back. Its key goes
        # 2 x process_ttl after the lease expired, with nobody to look or release.
        self.r.delete(GSLOTS)
        self.r.rpush(SELF_LIST, raws[2])
        self.assertEqual(self.admit(raws[2], "j2", n=1, ttl=0.2)[0], 1)
        self.assertEqual(self.r.exists(GSLOTS), 1)
        time.sleep(0.8)
        self.assertEqual(self.r.exists(GSLOTS), 0, "gone by its TTL")

    def test_group_rate_key_goes_by_its_ttl(self):
        """The group's starts key lives the window + 1 s past its newest start: ADMIT's
        start and a reservation's start (group_return) both renew it (§2)."""
        raws = [job("j%d" % i) for i in range(2)]
        self.r.rpush(SELF_LIST, *raws)
        self.assertEqual(self.admit(raws[0], "j0", n=1, rate=5, window=2)[0], 1)
        self.assertAlmostEqual(self.r.pttl(GSTARTS), 3000, delta=100)
        self.assertEqual(self.admit(raws[1], "j1", n=1, rate=5, window=2, place=1)[2],
                         b"group")
        self.r.pexpire(GSTARTS, 500)
        self.assertEqual(self.run_script(
            "release_group_slot", [GSLOTS, GSTARTS, GJOBS, GINDEX],
            ["me:1:abc f1 j0", "A", 1, 5, 2, 60, "cogworker:queue:", "default",
             self.now(), "cogworker:paused_queues"]), [1, 1])
        self.assertIsNotNone(self.r.zscore(GSLOTS, "r j1"))
        self.assertAlmostEqual(self.r.pttl(GSTARTS), 3000, delta=100)
        time.sleep(3.2)
        self.assertEqual(self.r.exists(GSTARTS), 0, "gone a second after its window")

    def test_group_rate_sets_aside_and_the_twin_goes_to_the_schedule(self):
        raws = [job("j%d" % i) for i in range(3)]
        self.r.rpush(SELF_LIST, *raws)
        self.assertEqual(self.admit(raws[0], "j0", n=0, rate=1, window=5)[0], 1)
        self.assertEqual(self.admit(raws[1], "j1", n=0, rate=1, window=5)[2], b"group_rate")
        self.assertEqual(self.r.zcard(GSTARTS), 1)
        # The same payload again (pushed twice): the set holds it once, so the twin waits
        # in the schedule set; nothing is lost.
        self.r.rpush(SELF_LIST, raws[1])
        st, at, why, _ = self.admit(raws[1], "j1", n=0, rate=1, window=5)
        self.assertEqual((st, why), (0, b"group"))
        self.assertEqual(self.r.zscore(SCHEDULE, raws[1]), float(at))
        self.assertEqual(self.r.zcard(GJOBS), 1)
        self.assertEqual(self.r.lrange(SELF_LIST, 0, -1), [raws[0], raws[2]])


# ======================================================================================
# 6.4 REQUEUE and 6.6 REQUEUE_ONE additions: at-most-once classes (§7.32), give back last

AMO_SET = ("cogworker:at_most_once:" + OWNER).encode()
AMO_PARKING = b"cogworker:at_most_once_orphans"


class TestRequeueAtMostOnce(ScriptTestCase):

    def requeue9(self, marks=(), threshold="300"):
        keys = [INPROGRESS, PRESENCE, LAST_BEAT, PARKING, DEAD, QUEUES, LIVE, AMO_SET,
                AMO_PARKING]
        args = [QUEUE, "default", RUNNING, QUEUED_TTL, OWNER, threshold, self.now(), ORPH,
                604800, 3, "cogworker:batch:settled:", "waited"]
        return self.run_script("requeue", keys, args + list(marks))

    def jobs(self):
        once = json.loads(job("j1"))
        once["class"] = "Charge"
        other = job("j2")
        once = json.dumps(once, separators=(",", ":")).encode()
        self.r.rpush(INPROGRESS, once, other)
        return once, other

    def test_owner_declared_class_is_parked_never_requeued(self):
        once, other = self.jobs()
        self.r.sadd(AMO_SET, "Charge")
        self.assertEqual(self.requeue9()[:2], [2, 0])
        self.assertEqual(self.r.lrange(AMO_PARKING, 0, -1), [once])
        self.assertEqual(self.queue(), [other])
        self.assertFalse(self.r.exists(counter("j1")), "not counted as an orphaning")

    def test_callers_marks_count_too_and_the_fallback_with_exceptions(self):
        once, other = self.jobs()
        self.requeue9(marks=["o:Charge"])
        self.assertEqual(self.r.lrange(AMO_PARKING, 0, -1), [once])
        self.r.delete(AMO_PARKING, qkey("default"))
        self.r.rpush(INPROGRESS, once, other)
        self.r.sadd(AMO_SET, "*", "!Charge")             # every class but Charge
        self.requeue9()
        self.assertEqual(self.r.lrange(AMO_PARKING, 0, -1), [other])
        self.assertEqual(self.queue(), [once])

    def test_parking_that_fails_leaves_it_listed(self):
        once, other = self.jobs()
        self.r.sadd(AMO_SET, "Charge")
        self.r.set(AMO_PARKING, "wrong type")
        self.assertEqual(self.requeue9()[:2], [1, 1])
        self.assertEqual(self.inprogress(), [once])
        self.assertEqual(self.queue(), [other])

    def test_live_owner_and_shutdown_requeue_are_untouched_by_it(self):
        once, other = self.jobs()
        self.r.sadd(AMO_SET, "Charge")
        self.r.set(PRESENCE, "x")
        self.assertEqual(self.requeue9()[0], -1)
        self.r.delete(PRESENCE)
        self.requeue9(threshold="")                      # the own list at shutdown
        self.assertEqual(sorted(self.queue()), sorted([once, other]))
        self.assertEqual(self.r.llen(AMO_PARKING), 0)

    def test_requeue_one_back_goes_behind_the_queue(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.r.lpush(qkey("default"), b"waiting")
        self.assertEqual(self.run_script("requeue_one", [INPROGRESS],
                                         [raw, QUEUE, "default", RUNNING, QUEUED_TTL, "back"]), 1)
        self.assertEqual(self.r.rpop(qkey("default")), b"waiting", "the others first")
        self.assertEqual(self.r.rpop(qkey("default")), raw)


# ======================================================================================
# The order of commands inside the scripts ([MON])


class Monitor:
    """A MONITOR connection; lua_commands(client, fn) runs fn and returns the commands
    the scripts issued meanwhile, as lists of (still-escaped) strings."""

    ARG = re.compile(r'"((?:[^"\\]|\\.)*)"')

    def __init__(self, server):
        self.client = server.client()
        self.conn = self.client.connection_pool.get_connection("MONITOR")
        self.conn.send_command("MONITOR")
        assert self.conn.read_response() == b"OK"
        self.seq = 0

    def lua_commands(self, client, fn):
        self.seq += 1
        token = "monitor-sentinel-%d" % self.seq
        fn()
        client.echo(token)
        cmds = []
        while True:
            line = self.conn.read_response().decode("utf-8", "replace")
            if token in line:
                return cmds
            if " lua] " in line:
                args = self.ARG.findall(line.split(" lua] ", 1)[1])
                cmds.append([args[0].upper()] + args[1:])

    def close(self):
        self.client.connection_pool.release(self.conn)
        self.conn.disconnect()
        self.client.close()


class TestCommandOrder(ScriptTestCase):

    def setUp(self):
        super().setUp()
        self.mon = Monitor(self.server)
        self.addCleanup(self.mon.close)

    def names(self, fn):
        return [c[0] for c in self.mon.lua_commands(self.r, fn)]

    def test_requeue_peek_write_pop_then_count(self):
        raw = periodic_job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.r.zadd(LIVE, {"default": self.now()})
        cmds = self.names(self.requeue)
        self.assertEqual(cmds, [
            "EXISTS", "HGET",                 # liveness (no stamp: TIME not needed)
            "TIME",                           # the clock for live_queues
            "LLEN", "LINDEX",                 # peek
            "GET",                            # orphan counter
            "GET", "SET",                     # retake_running_lock (absent -> SET)
            "RPUSH",                          # write
            "ZSCORE",                         # live_queues
            "LPOP",                           # only then pop
            "INCR", "EXPIRE",                 # and only then count
            "GET", "SET",                     # and mark its settled record (FE-13)
        ])

    def test_requeue_parks_before_popping(self):
        raw = job("j1")
        self.r.rpush(INPROGRESS, raw)
        self.r.set(counter("j1"), 3)
        self.r.hset(LAST_BEAT, OWNER, self.now() - 1000)
        cmds = self.names(self.requeue)
        self.assertEqual(cmds, ["EXISTS", "HGET", "TIME", "TIME", "LLEN", "LINDEX", "GET",
                                "RPUSH", "LPOP"])

    def test_requeue_unlisted_is_listed_before_the_pop(self):
        self.r.rpush(INPROGRESS, job("j1", "nobody"))
        cmds = self.names(lambda: self.requeue(threshold=""))
        self.assertEqual(cmds, ["TIME", "LLEN", "LINDEX", "RPUSH", "ZSCORE", "SADD",
                                "LPOP", "GET", "SET"])

    def test_requeue_failed_write_pops_then_pushes_back(self):
        self.r.rpush(INPROGRESS, job("j1", "broken"))
        self.r.set(qkey("broken"), "x")
        cmds = self.names(lambda: self.requeue(threshold=""))
        self.assertEqual(cmds, ["TIME", "LLEN", "LINDEX", "RPUSH", "LPOP", "RPUSH"])

    def test_simple_moves(self):
        raw = job("j1")
        cases = [
            ("requeue_one", lambda: self.r.rpush(INPROGRESS, raw),
             [INPROGRESS], [raw, QUEUE, "default", RUNNING, QUEUED_TTL],
             ["LPOS", "RPUSH", "LREM"]),
            ("interrupt", lambda: self.r.rpush(INPROGRESS, raw),
             [INPROGRESS, RETRY, counter("j1")], [raw, 1, b"new"],
             ["LPOS", "ZADD", "LREM", "DEL"]),
            ("park_unsettled", lambda: self.r.rpush(INPROGRESS, raw),
             [INPROGRESS, UNSETTLED], [raw, b"rec"], ["LPOS", "RPUSH", "LREM"]),
            ("file_unsettled", lambda: self.r.rpush(UNSETTLED, b"rec"),
             [UNSETTLED, DEAD, counter("j1")], [b"rec", 1, raw],
             ["LINDEX", "ZADD", "LPOP", "DEL"]),
            ("bury_orphan", lambda: self.r.rpush(PARKING, raw),
             [PARKING, DEAD], [raw, 1, b"entry"], ["LINDEX", "ZADD", "LPOP"]),
            ("swap_dead_entry", lambda: self.r.zadd(DEAD, {raw: 1}),
             [DEAD], [raw, b"entry", 1], ["ZSCORE", "ZADD", "ZREM"]),
            ("ack", lambda: self.r.rpush(INPROGRESS, raw),
             [INPROGRESS, counter("j1")], [raw], ["LREM", "DEL"]),
            ("requeue_entry", lambda: None,
             [qkey("default"), b"periodic:running:pj"], [raw, "j1", 10, "1"],
             ["RPUSH", "GET", "SET"]),
            ("retake", lambda: self.r.set(b"periodic:running:pj", "j1"),
             [b"periodic:running:pj"], ["j1", 10], ["GET", "EXPIRE"]),
            ("claim_and_requeue", lambda: self.r.zadd(RETRY, {raw: 1}),
             [RETRY, QUEUES, qkey("default")], [raw, b"new", "default"],
             ["ZSCORE", "LPUSH", "ZREM", "SADD"]),
            ("bury", lambda: self.r.zadd(SCHEDULE, {raw: 1}),
             [SCHEDULE, DEAD, STATS_FAILED], [raw, 1, b"wrapper"],
             ["ZSCORE", "ZADD", "ZREM", "INCR"]),
            ("kill", lambda: self.r.zadd(RETRY, {raw: 1}),
             [RETRY, DEAD], [raw, 1, raw], ["ZSCORE", "ZADD", "ZREM"]),
            ("quarantine", lambda: self.r.set(DEAD, "x"),
             [DEAD, b"cogworker:quarantine:x"], ["zset", 2592000],
             ["TYPE", "RENAME", "EXPIRE"]),
            ("claim", lambda: None,
             [b"periodic:running:pj", b"periodic:last_slot:pj", b"periodic:lock:pj:60"],
             [60, "until_executed", 20, "j1", 100],
             ["EXISTS", "GET", "SET", "SET", "SET"]),
            ("rollback", lambda: (self.r.set(b"periodic:last_slot:pj", 60),
                                  self.r.set(b"periodic:running:pj", "j1")),
             [b"periodic:last_slot:pj", b"periodic:lock:pj:60", b"periodic:running:pj"],
             [60, "", "j1"], ["GET", "SET", "DEL", "GET", "DEL"]),
            ("expire_if_owned", lambda: self.r.set(b"k", "j1"),
             [b"k"], ["j1", 10], ["GET", "EXPIRE"]),
            ("delete_if_owned", lambda: self.r.set(b"k", "j1"),
             [b"k"], ["j1"], ["GET", "DEL"]),
        ]
        for name, prepare, keys, args, expected in cases:
            with self.subTest(script=name):
                self.r.flushall()
                prepare()
                self.assertEqual(
                    self.names(lambda: self.run_script(name, keys, args)), expected)

    def test_claim_sets_running_lock_last(self):
        cmds = self.mon.lua_commands(self.r, lambda: self.run_script(
            "claim",
            [b"periodic:running:pj", b"periodic:last_slot:pj", b"periodic:lock:pj:60"],
            [60, "until_executed", 20, "j1", 100]))
        self.assertEqual([c[:2] for c in cmds[2:]],
                         [["SET", "periodic:lock:pj:60"], ["SET", "periodic:last_slot:pj"],
                          ["SET", "periodic:running:pj"]])


class TestOutputWrite(RedisTestCase):
    """OUTPUT_WRITE (doc/protocol.md §6.20): a first write sent again after a lost reply."""

    IDX = b"cogworker:output:j1"

    def write(self, run, mode, data, token, cap=10):
        return self.run_script("output_write", [self.IDX],
                               [run, mode, data, '{"outcome":"running"}', cap, 600, token])

    def test_a_first_write_sent_again_finds_its_run(self):
        self.assertEqual(self.write(0, "a", "one\n", "host:1:a 100.000001"), 1)
        # Its reply was lost: the writer sends the whole text again, as a first write.
        self.assertEqual(self.write(0, "s", "one\ntwo\n", "host:1:a 100.000001"), 1)
        self.assertEqual(self.r.get(self.IDX + b":1"), b"one\ntwo\n")
        # Another run (another start) is numbered next.
        self.assertEqual(self.write(0, "a", "x", "host:1:a 200.000002"), 2)
        self.assertEqual(sorted(self.r.hkeys(self.IDX)), [b"1", b"2", b"last", b"token"])
        self.assertEqual(self.write(2, "a", "y", "host:1:a 200.000002"), 2)
        self.assertEqual(self.r.get(self.IDX + b":2"), b"xy")
        # A run numbered since by a process that keeps no token (an older daemon): a
        # first write sent again by the run before it is numbered anew, not written there.
        self.r.hincrby(self.IDX, "last", 1)
        self.assertEqual(self.write(0, "s", "x2", "host:1:a 200.000002"), 4)
        self.assertIsNone(self.r.get(self.IDX + b":3"))


class TestHistoryWrite(RedisTestCase):
    """HISTORY_WRITE (doc/protocol.md §6.35): what the daemon's runs do is JR-1..JR-6
    (test_job_runs.py); here what only a hand-made set-up shows."""

    ALL, OK, DAY = b"cogworker:history:all", b"cogworker:history:success", b"day"

    def write(self, jid, f, cutoff="(0", max_entries=10):
        entry = json.dumps({"jid": jid, "finished_at": float(f)}, separators=(",", ":"))
        keys = [self.ALL, self.OK, self.DAY] + ([b"cogworker:history:jid:" + jid.encode()]
                                                 if jid else [])
        return self.run_script("history_write", keys, [f, entry, cutoff, max_entries,
                                                       "success", 60, 30, "success",
                                                       "cogworker:history:jid:"])

    def test_another_writers_entry_takes_its_pointer_when_trimmed(self):
        """JR-4 for an entry whose text is not this daemon's (a space after the colon, a
        key before jid): the trim finds its jid by decoding it."""
        self.r.zadd(b"cogworker:history:jid:ruby", {b"100.5 success": 100.5})
        self.r.zadd(self.ALL, {json.dumps({"class": "R", "jid": "ruby"}): 100.5})
        self.assertEqual(self.write("j1", "200.25", max_entries=1), 1)
        self.assertEqual(self.r.exists(b"cogworker:history:jid:ruby"), 0)
        self.assertEqual(self.r.zrange(b"cogworker:history:jid:j1", 0, -1, withscores=True),
                         [(b"200.25 success", 200.25)])
        self.assertEqual(self.r.ttl(b"cogworker:history:jid:j1"), 30)

    def test_a_damaged_key_fails_its_step_only(self):
        """BE-1's rule inside the script: a wrong-typed day counter fails its own step; the
        entry, its set and the index are written, and the error is the reply."""
        self.r.set(self.DAY, b"damaged")
        with self.assertRaises(Exception) as cm:
            self.write("j1", "300.5")
        self.assertIn("WRONGTYPE", str(cm.exception))
        self.assertEqual(self.r.zcard(self.ALL), 1)
        self.assertEqual(self.r.zcard(self.OK), 1)
        self.assertEqual(self.r.zcard(b"cogworker:history:jid:j1"), 1)

    def test_a_trim_takes_at_most_1000_pointers_and_all_the_entries(self):
        """A history_max_entries lowered by a reload: 1 500 entries over the max go at
        once, as always, but one call takes only the first 1 000 pointers out (bounded
        work for Redis); the rest go by their TTL."""
        p = self.r.pipeline(transaction=False)
        for i in range(1501):
            jid, score = "j%04d" % i, 1000 + i
            p.zadd(self.ALL, {json.dumps({"jid": jid}, separators=(",", ":")): score})
            p.zadd(b"cogworker:history:jid:" + jid.encode(), {"%d success" % score: score})
        p.execute()
        self.assertEqual(self.write("new", "5000.5", max_entries=1), 1)
        self.assertEqual([json.loads(m)["jid"] for m in self.r.zrange(self.ALL, 0, -1)],
                         ["new"])
        left = sorted(k.decode()[len("cogworker:history:jid:"):]
                      for k in self.r.scan_iter(b"cogworker:history:jid:*", count=1000))
        self.assertEqual(left, ["j%04d" % i for i in range(1000, 1501)] + ["new"])

    def test_an_entry_without_jid_has_no_index(self):
        self.assertEqual(self.write(None, "400.5"), 1)
        self.assertEqual(self.r.keys(b"cogworker:history:jid:*"), [])
        self.assertEqual(self.r.zcard(self.ALL), 1)


class TestHarness(unittest.TestCase):
    """The harness itself: restart keeps the port, pause/resume, unix socket."""

    def test_server_life_cycle(self):
        with RedisServer() as srv:
            r = srv.client()
            r.set("k", "v")
            self.assertEqual(srv.client(unix=True).get("k"), b"v")
            self.assertTrue(srv.url.startswith("redis://127.0.0.1:"))
            srv.pause()
            with self.assertRaises(redis.TimeoutError):
                srv.client(socket_timeout=0.3).ping()
            srv.resume()
            self.assertEqual(r.get("k"), b"v")
            port = srv.port
            srv.restart()
            self.assertEqual(srv.port, port)
            self.assertIsNone(srv.client().get("k"))
            directory = srv.dir
        self.assertFalse(os.path.exists(directory))


if __name__ == "__main__":
    unittest.main()


# ======================================================================================
# Batches and dependencies (doc/protocol.md §6.23-§6.29, §7.34)

BATCH = "cogworker:batch:"
KEEP, SETTLED_KEEP = 604800, 600


class BatchScriptCase(ScriptTestCase):
    """The batch scripts with the daemon's common arguments (lua/lib/batch.lua)."""

    NOW = "1767225600.5"

    def batch(self, name, *args, now=None):
        common = [BATCH, QUEUE, QUEUES, DEAD, SCHEDULE, now or self.NOW, KEEP, SETTLED_KEEP]
        return self.run_script(name, (), common + list(args))

    def open(self, bid, parent="", adder="", expires="1767229200", on_success="Done",
             on_complete="All", on_death="Died", args='[1,"x"]'):
        return self.batch("batch_open", bid, "a test batch", on_success, on_complete,
                          on_death, args, "callbacks", expires, parent, adder)

    def push(self, jid, bid="", adder="", deps=(), any_=False, at="", queue="default"):
        raw = job(jid, queue=queue, **({"bid": bid} if bid else {}))
        return self.batch("batch_push", jid, raw, queue, at, bid, adder,
                          "1" if any_ else "0", *deps)

    def settle(self, jid, outcome="success", bid=""):
        return self.batch("batch_settle", jid, outcome, bid)

    def revive(self, bid, jid):
        """jobs retry of a dead member: its entry in dead put back, revived in bid."""
        entry = job(jid, bid=bid, error_class="E")
        self.r.zadd(DEAD, {entry: 1767225000})
        return self.batch("batch_revive", bid, jid, entry, job(jid, bid=bid), "default")

    def expire(self, waiting="", listed="", batches=100, waiters=100, listed_n=100):
        """BATCH_EXPIRE as the poller calls it: the reply's expired, resettled, cursors."""
        return self.batch("batch_expire", batches, waiting, waiters, listed, listed_n)

    def cancel(self, bid, chunk=500):
        """BATCH_CANCEL as cogworkerctl calls it: the tree walked a chunk per call. Returns
        the first call's status, the member jobs met (sorted), the child batches, the
        waiting members discarded, the callbacks fired and the number of calls."""
        todo, jobs, children, discarded, fired, calls, status = [bid], [], [], 0, [], 0, None
        while todo:
            b, cursor = todo.pop(0), ""
            while True:
                reply = self.batch("batch_cancel", b, cursor, chunk)
                calls += 1
                if status is None:
                    status = reply[0].decode()
                cursor = reply[1].decode()
                todo += [c.decode() for c in reply[2]]
                children += [c.decode() for c in reply[2]]
                jobs += [j.decode() for j in reply[3]]
                discarded += reply[4]
                fired += [f.decode() for f in reply[5:]]
                if cursor == "0":
                    break
        return status, sorted(jobs), sorted(children), discarded, fired, calls

    def members(self, bid, part):
        return sorted(m.decode() for m in self.r.smembers(BATCH + bid + ":" + part))

    def callbacks(self):
        return [json.loads(j) for j in self.r.lrange(qkey("callbacks"), 0, -1)]

    def state(self, bid):
        return self.r.hget(BATCH + bid, "state").decode()


class TestBatchOpenPush(BatchScriptCase):
    def test_open_makes_an_open_batch_listed_with_its_expiry(self):
        self.assertEqual(self.open("b1"), 1)
        h = {k.decode(): v.decode() for k, v in self.r.hgetall(BATCH + "b1").items()}
        self.assertEqual(h["state"], "open")
        self.assertEqual(h["on_success"], "Done")
        self.assertEqual(h["callback_args"], '[1,"x"]')
        self.assertEqual(self.r.zscore(BATCH + "open", "b1"), 1767229200)
        self.assertEqual(self.r.zscore(BATCH + "list", "b1"), float(self.NOW))
        with self.assertRaisesRegex(redis.ResponseError, "batch b1 exists"):
            self.open("b1")

    def test_push_adds_the_member_before_its_job_and_refuses_a_closed_batch(self):
        self.open("b1")
        self.assertEqual(self.push("j1", bid="b1"), [b"queued", 0])
        self.assertEqual(self.members("b1", "pending"), ["j1"])
        self.assertEqual(json.loads(self.queue()[0])["bid"], "b1")
        self.assertEqual(self.r.hget(BATCH + "b1", "total"), b"1")
        self.batch("batch_commit", "b1")
        with self.assertRaisesRegex(redis.ResponseError, "only its members still running"):
            self.push("j2", bid="b1")
        # a member still pending (running) may add one
        self.assertEqual(self.push("j2", bid="b1", adder="j1"), [b"queued", 0])
        self.assertEqual(self.members("b1", "pending"), ["j1", "j2"])
        with self.assertRaisesRegex(redis.ResponseError, "batch nope does not exist"):
            self.push("j3", bid="nope")
        self.assertEqual(len(self.queue()), 2)

    def test_a_scheduled_member_goes_to_the_schedule(self):
        self.open("b1")
        self.assertEqual(self.push("j1", bid="b1", at="1767300000"), [b"scheduled", 0])
        self.assertEqual(self.r.zscore(SCHEDULE, job("j1", bid="b1")), 1767300000)


class TestBatchSettle(BatchScriptCase):
    def test_success_fires_once_after_commit_and_the_last_member(self):
        self.open("b1")
        for j in ("j1", "j2"):
            self.push(j, bid="b1")
        self.assertEqual(self.settle("j1", bid="b1"), [0, 0, 0])
        self.batch("batch_commit", "b1")
        self.assertEqual(self.callbacks(), [])
        reply = self.settle("j2", bid="b1")
        fired = sorted(x.decode().split()[1] for x in reply[3:])
        self.assertEqual(fired, ["complete", "success"])
        cbs = self.callbacks()
        self.assertEqual(sorted(c["class"] for c in cbs), ["All", "Done"])
        for c in cbs:
            self.assertEqual(c["bid"], "b1")
            self.assertEqual(c["args"], [1, "x"])
            self.assertEqual(c["queue"], "callbacks")
        # settled twice (a job run twice, a duplicate settle): nothing more
        self.assertEqual(self.settle("j2", bid="b1"), [0, 0, 0])
        self.assertEqual(self.settle("j1", "dead", bid="b1"), [0, 0, 0])
        self.assertEqual(len(self.callbacks()), 2)
        self.assertEqual(self.members("b1", "succeeded"), ["j1", "j2"])
        self.assertGreater(self.r.ttl(BATCH + "b1"), 0)
        self.assertEqual(self.r.get(BATCH + "settled:j2"), b"success")

    def test_an_empty_batch_completes_at_commit(self):
        self.open("b1")
        reply = self.batch("batch_commit", "b1")
        self.assertEqual(reply[0], 1)
        self.assertEqual(len(self.callbacks()), 2)
        self.assertEqual(self.batch("batch_commit", "b1"), [0])

    def test_a_death_fires_on_death_once_and_on_success_after_a_revive(self):
        self.open("b1")
        for j in ("j1", "j2", "j3"):
            self.push(j, bid="b1")
        self.batch("batch_commit", "b1")
        self.settle("j1", "dead", bid="b1")
        self.settle("j2", "dead", bid="b1")
        self.assertEqual([c["class"] for c in self.callbacks()], ["Died"])
        self.settle("j3", bid="b1")
        self.assertEqual(sorted(c["class"] for c in self.callbacks()), ["All", "Died"])
        # j1 retried by hand (BATCH_REVIVE), j2 by a client that does not call it
        queued = len(self.queue())
        self.assertEqual(self.revive("b1", "j1"), 1)
        self.assertEqual(self.members("b1", "pending"), ["j1"])
        self.assertEqual(self.queue()[0], job("j1", bid="b1"))
        self.assertEqual(self.r.zcard(DEAD), 0)
        # a second retry of the same entry finds it gone: nothing done
        self.assertEqual(self.batch("batch_revive", "b1", "j1", job("j1", bid="b1",
                                    error_class="E"), job("j1", bid="b1"), "default"), -1)
        self.assertEqual(len(self.queue()), queued + 1)
        self.assertEqual(self.r.ttl(BATCH + "b1"), -1)
        self.settle("j1", bid="b1")
        self.assertNotIn("Done", [c["class"] for c in self.callbacks()])
        self.settle("j2", bid="b1")
        self.assertEqual(sorted(c["class"] for c in self.callbacks()), ["All", "Died", "Done"])
        self.assertEqual(self.members("b1", "dead"), [])

    def test_a_child_batch_settles_in_its_parent(self):
        self.open("p")
        self.open("c", parent="p")
        self.assertEqual(self.members("p", "pending"), ["c"])
        self.push("j1", bid="c")
        self.push("j2", bid="p")
        self.batch("batch_commit", "p")
        self.batch("batch_commit", "c")
        self.settle("j2", bid="p")
        self.assertEqual(self.callbacks(), [])
        reply = self.settle("j1", bid="c")
        fired = sorted(x.decode() for x in reply[3:])
        self.assertEqual([f.split()[:2] for f in fired],
                         [["c", "complete"], ["c", "success"], ["p", "complete"],
                          ["p", "success"]])
        self.assertEqual(self.members("p", "succeeded"), ["c", "j2"])

    def test_a_child_that_failed_is_dead_in_its_parent_until_revived(self):
        self.open("p")
        self.open("c", parent="p")
        self.push("j1", bid="c")
        self.batch("batch_commit", "p")
        self.batch("batch_commit", "c")
        self.settle("j1", "dead", bid="c")
        self.assertEqual(self.members("p", "dead"), ["c"])
        self.assertEqual(self.revive("c", "j1"), 2)
        self.assertEqual(self.members("p", "pending"), ["c"])
        self.settle("j1", bid="c")
        self.assertIn(["p", "success"], [[c["bid"], c["callback"]] for c in self.callbacks()])

    def test_the_settled_record_never_contradicts_the_batch(self):
        """BT-19: first settle for good wins; only a success after a death replaces it,
        as the batch moves that member from dead to succeeded."""
        self.open("b1")
        for j in ("j1", "j2", "j3"):
            self.push(j, bid="b1")
        self.push("w", deps=("j1",))
        self.settle("j1", bid="b1")
        # a re-run after a kill -9 between its settle and its ack, dying this time
        self.assertEqual(self.settle("j1", "dead", bid="b1"), [0, 0, 0])
        self.assertEqual(self.r.get(BATCH + "settled:j1"), b"success")
        self.assertEqual(self.members("b1", "succeeded"), ["j1"])
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.assertIn(job("w"), self.queue())       # released once, by the success
        self.settle("j2", "discarded", bid="b1")
        self.settle("j2", bid="b1")
        self.assertEqual(self.r.get(BATCH + "settled:j2"), b"discarded")
        self.assertEqual(self.members("b1", "discarded"), ["j2"])
        self.settle("j3", "dead", bid="b1")
        self.settle("j3", "discarded", bid="b1")
        self.assertEqual(self.r.get(BATCH + "settled:j3"), b"dead")
        self.settle("j3", bid="b1")     # retried by hand, and a success
        self.assertEqual(self.r.get(BATCH + "settled:j3"), b"success")
        self.assertEqual(self.members("b1", "succeeded"), ["j1", "j3"])
        self.assertEqual(self.members("b1", "dead"), [])

    def test_a_bad_outcome_is_refused(self):
        with self.assertRaisesRegex(redis.ResponseError, "outcome must be"):
            self.settle("j1", "maybe")


class TestDependencies(BatchScriptCase):
    def test_a_job_waits_until_every_dependency_succeeded(self):
        self.assertEqual(self.push("c", deps=("a", "b")), [b"waiting", 2])
        self.assertEqual(self.queue(), [])
        self.assertEqual(self.r.zscore(BATCH + "waiting", "c"), float(self.NOW))
        self.assertEqual(self.settle("a"), [0, 0, 0])
        self.assertEqual(self.queue(), [])
        self.assertEqual(self.settle("b"), [1, 0, 0])
        self.assertEqual(self.queue(), [job("c")])
        self.assertIsNone(self.r.zscore(BATCH + "waiting", "c"))
        for k in ("wait:c", "after:c", "dependants:a", "dependants:b"):
            self.assertFalse(self.r.exists(BATCH + k), k)
        self.assertEqual(self.settle("b"), [0, 0, 0])      # twice: nothing more
        self.assertEqual(len(self.queue()), 1)

    def test_a_settled_dependency_counts_at_push(self):
        self.settle("a")
        self.assertEqual(self.push("c", deps=("a",)), [b"queued", 0])
        self.settle("d", "dead")
        with self.assertRaisesRegex(redis.ResponseError, "dependency d died"):
            self.push("e", deps=("d",))
        self.assertEqual(self.push("e", deps=("d",), any_=True), [b"queued", 0])
        with self.assertRaisesRegex(redis.ResponseError, "cannot wait for itself"):
            self.push("f", deps=("f",))

    def test_a_failed_dependency_buries_its_dependants_down_the_chain(self):
        self.open("b1")
        self.push("b", deps=("a",))
        self.push("c", bid="b1", deps=("b",))
        self.push("d", deps=("a",), any_=True)
        self.assertEqual(self.settle("a", "discarded")[:3], [1, 2, 0])
        dead = {json.loads(m)["jid"]: json.loads(m) for m in self.r.zrange(DEAD, 0, -1)}
        self.assertEqual(sorted(dead), ["b", "c"])
        self.assertEqual(dead["b"]["error_class"], "Cogworker::DependencyFailed")
        self.assertEqual(dead["b"]["error_message"], "dependency a was discarded")
        self.assertEqual(dead["c"]["error_message"], "dependency b died")
        self.assertEqual(dead["c"]["args"], [12345678901234567890, 1.10])
        self.assertEqual(self.queue(), [job("d")])
        self.assertEqual(self.members("b1", "dead"), ["c"])
        self.assertEqual(self.callbacks(), [])          # b1 is open: nothing fires yet
        self.batch("batch_commit", "b1")
        self.assertEqual([c["class"] for c in self.callbacks()], ["All", "Died"])

    def waiters(self, dep, n, any_=False):
        """n jobs waiting for dep (BATCH_PUSH each, in one pipeline)."""
        common = [BATCH, QUEUE, QUEUES, DEAD, SCHEDULE, self.NOW, KEEP, SETTLED_KEEP]
        text = load_script("batch_push")
        sha = self.r.script_load(text)
        pipe = self.r.pipeline(transaction=False)
        for k in range(n):
            w = "w%05d" % k
            pipe.evalsha(sha, 0, *(common + [w, job(w), "default", "", "", "",
                                            "1" if any_ else "0", dep]))
        pipe.execute()

    def settle_all(self, jid, outcome="success"):
        """BATCH_SETTLE as the daemon calls it, again while more is left: the replies."""
        replies = [self.settle(jid, outcome)]
        while replies[-1][2]:
            self.assertEqual(self.r.hget(BATCH + "owed", jid), (outcome + " ").encode())
            replies.append(self.settle(jid, outcome))
        return replies

    def test_a_release_of_many_goes_in_bounded_calls(self):
        """DP-14: 2 500 jobs wait for a: each BATCH_SETTLE call releases at most 250, says
        more is left and notes it in cogworker:batch:owed until the last; each is released
        once, none before its call."""
        self.waiters("a", 2500)
        replies = self.settle_all("a")
        self.assertEqual([r[0] for r in replies], [250] * 10 + [0] * (len(replies) - 10))
        self.assertFalse(self.r.exists(BATCH + "owed"))
        queued = [json.loads(j)["jid"] for j in self.queue()]
        self.assertEqual(sorted(queued), ["w%05d" % k for k in range(2500)])
        self.assertEqual(self.r.zcard(BATCH + "waiting"), 0)
        self.assertEqual(self.settle("a"), [0, 0, 0])

    def test_a_failure_buries_many_in_bounded_calls_and_a_burial_settles_in_turn(self):
        """DP-14: 300 wait for a, which dies, and x waits for one of them: each call buries
        at most 63 (a burial counts 4 of the 250) and settles each; a buried job whose own
        dependants fell past a call's share is noted in cogworker:batch:owed, and its
        settle from the note (the poller's) buries x."""
        self.waiters("a", 300)
        self.push("x", deps=("w00007",))
        replies = self.settle_all("a", "dead")
        # Each call takes a random share of the dependants (SRANDMEMBER): w00007 falls in a
        # full call (x then owed: 48 in the last) or in the last, where x fits (49).
        counts = [r[1] for r in replies]
        self.assertEqual(counts[:4], [63, 63, 63, 63])
        self.assertIn(counts[4], (48, 49))
        owed = self.r.hgetall(BATCH + "owed")
        self.assertEqual(list(owed), [b"w00007"] if counts[4] == 48 else [])
        for jid, note in owed.items():
            self.settle(jid.decode(), *note.decode().split(" "))
        self.assertEqual(self.r.zcard(DEAD), 301)
        self.assertEqual(self.r.get(BATCH + "settled:x"), b"dead")
        self.assertEqual(self.r.get(BATCH + "settled:w00299"), b"dead")
        self.assertFalse(self.r.exists(BATCH + "owed"))
        self.assertEqual(self.r.zcard(BATCH + "waiting"), 0)

    def test_expire_repairs_a_release_a_crash_cut_short(self):
        self.push("c", deps=("a",))
        self.r.set(BATCH + "settled:a", "success")      # the ack's round trip, then a crash
        reply = self.expire()
        self.assertEqual(reply[:2], [[], 1])
        self.assertEqual(self.queue(), [job("c")])


class TestBatchCancelExpire(BatchScriptCase):
    def test_cancel_returns_the_pending_jobs_and_nothing_fires_after(self):
        self.open("p")
        self.open("c", parent="p")
        self.push("j1", bid="p")
        self.push("j2", bid="c")
        self.push("w", bid="c", deps=("j1",))
        self.batch("batch_commit", "p")
        self.batch("batch_commit", "c")
        status, jobs, children, discarded, _, _ = self.cancel("p")
        self.assertEqual((status, jobs, children, discarded), ("cancelled", ["j1", "j2"], ["c"], 1))
        self.assertEqual((self.state("p"), self.state("c")), ("cancelled", "cancelled"))
        self.assertFalse(self.r.exists(BATCH + "wait:w"))
        self.settle("j1", "dead", bid="p")
        self.settle("j2", bid="c")
        self.assertEqual(self.callbacks(), [])
        with self.assertRaisesRegex(redis.ResponseError, "batch p is cancelled"):
            self.push("j3", bid="p")
        # a second cancel walks again (a cogworkerctl cut short), changing nothing
        self.assertEqual(self.cancel("p")[:3], ("again", [], []))

    def test_a_cancelled_child_settles_in_its_parent_as_discarded(self):
        """Issue 32: the parent waited for ever ('1 pending, 1 succeeded')."""
        self.open("p")
        self.open("c", parent="p")
        self.push("j1", bid="p")
        self.push("j2", bid="c")
        self.batch("batch_commit", "p")
        self.settle("j1", bid="p")
        status, jobs, _, _, fired, _ = self.cancel("c")
        self.assertEqual((status, jobs), ("cancelled", ["j2"]))
        self.assertEqual(self.members("p", "pending"), [])
        self.assertEqual(self.members("p", "discarded"), ["c"])
        self.assertEqual([f.split()[:2] for f in fired], [["p", "complete"]])
        self.assertEqual([c["class"] for c in self.callbacks()], ["All"])
        self.settle("j2", bid="c")          # the member ends anyway: nothing more
        self.cancel("c")
        self.assertEqual([c["class"] for c in self.callbacks()], ["All"])
        self.assertEqual(self.state("p"), "committed")

    def test_an_expired_child_settles_in_its_parent_as_dead(self):
        self.open("p")
        self.open("c", parent="p", expires="1767225000")
        self.push("j1", bid="p")
        self.batch("batch_commit", "p")
        self.settle("j1", bid="p")
        reply = self.expire()
        self.assertEqual(reply[0], [b"c", 0])
        self.assertEqual(self.members("p", "dead"), ["c"])
        self.assertEqual(sorted(f.decode().split()[1] for f in reply[4:]), ["complete", "death"])
        self.assertEqual(sorted(c["class"] for c in self.callbacks()), ["All", "Died"])
        self.expire()
        self.assertEqual(len(self.callbacks()), 2)
        # a dead member of it retried by hand: the revive stops there, p stays complete
        self.r.sadd(BATCH + "c:dead", "jc")
        self.assertEqual(self.revive("c", "jc"), 0)
        self.assertEqual(self.members("p", "pending"), [])
        self.assertGreater(self.r.ttl(BATCH + "c"), 0)

    def test_cancel_settles_its_waiting_members_for_the_jobs_that_wait_for_them(self):
        """Issue 32: jobs outside the batch that waited --after a waiting member hung, and
        dependants:<jid> leaked."""
        self.open("b")
        self.push("a", bid="b")
        self.push("w", bid="b", deps=("a",))
        self.push("out", deps=("w",))               # a plain job outside the batch
        self.push("any", deps=("w",), any_=True)
        self.assertEqual(self.cancel("b")[:4], ("cancelled", ["a"], [], 1))
        self.assertEqual(self.r.get(BATCH + "settled:w"), b"discarded")
        dead = {json.loads(m)["jid"]: json.loads(m) for m in self.r.zrange(DEAD, 0, -1)}
        self.assertEqual(list(dead), ["out"])
        self.assertEqual(dead["out"]["error_message"], "dependency w was discarded")
        self.assertEqual(self.queue(), [job("any"), job("a", bid="b")])
        self.assertEqual(self.members("b", "discarded"), ["w"])
        left = [k for k in self.r.keys(BATCH + "*")
                if b":dependants:" in k or b":wait:" in k or b":after:" in k]
        self.assertEqual(left, [])
        self.assertEqual(self.r.zcard(BATCH + "waiting"), 0)

    def test_cancel_walks_a_large_batch_a_chunk_per_call(self):
        self.open("b")
        jids = ["j%05d" % i for i in range(1200)]
        for j in jids:
            self.r.sadd(BATCH + "b:pending", j)
        status, jobs, _, _, _, calls = self.cancel("b", chunk=200)
        self.assertEqual(jobs, jids)
        self.assertGreaterEqual(calls, 4)

    def test_a_complete_batch_is_not_cancelled(self):
        self.open("b")
        self.push("j1", bid="b")
        self.batch("batch_commit", "b")
        self.settle("j1", bid="b")
        self.assertEqual(self.cancel("b")[:2], ("complete", []))
        self.assertEqual(self.state("b"), "committed")
        self.assertIsNone(self.r.hget(BATCH + "b", "cancelled_at"))

    def test_a_child_under_a_cancelled_parent_fires_nothing_before_the_walk_reaches_it(self):
        self.open("p")
        self.open("c", parent="p")
        self.push("j1", bid="c")
        self.batch("batch_commit", "p")
        self.batch("batch_commit", "c")
        self.batch("batch_cancel", "p", "", 1)      # the first call only
        self.settle("j1", "dead", bid="c")
        self.assertEqual(self.callbacks(), [])

    def test_sets_written_after_a_cancel_or_an_expiry_expire_with_the_batch(self):
        """Issue 32: an outcome set created after the cancel had no TTL."""
        self.open("b")
        self.open("x", expires="1767225000")
        for j, b in (("j1", "b"), ("j2", "x")):
            self.push(j, bid=b)
        self.cancel("b")
        self.expire()
        self.settle("j1", bid="b")
        self.settle("j2", "dead", bid="x")
        for key in ("b:succeeded", "x:dead", "b", "x"):
            self.assertGreater(self.r.ttl(BATCH + key), 0, key)

    def test_an_uncommitted_batch_expires_and_says_so(self):
        self.open("b1", expires="1767225000")
        self.open("b2")
        self.push("j1", bid="b1")
        reply = self.expire()
        self.assertEqual(reply[:2], [[b"b1", 1], 0])
        self.assertEqual(self.state("b1"), "expired")
        self.assertEqual(self.state("b2"), "open")
        self.assertEqual(self.r.zrange(BATCH + "open", 0, -1), [b"b2"])
        self.settle("j1", bid="b1")
        self.assertEqual(self.callbacks(), [])
        with self.assertRaisesRegex(redis.ResponseError, "batch b1 is expired"):
            self.batch("batch_commit", "b1")

    def test_expire_reaches_every_waiting_job_over_successive_calls(self):
        """Issue 32: only the 100 oldest waiting jobs were looked at, so jobs stuck for
        good hid one whose release a crash cut short."""
        for i in range(150):
            self.push("s%03d" % i, deps=("never%03d" % i,))
        self.push("c", deps=("a",))
        self.r.zadd(BATCH + "waiting", {"c": float(self.NOW) + 1})     # the newest
        self.r.set(BATCH + "settled:a", "success")  # the ack's round trip, then a crash
        cursor, rounds = "", 0
        while self.queue() == [] and rounds < 3:
            reply = self.expire(waiting=cursor)
            cursor, rounds = reply[2].decode(), rounds + 1
        self.assertEqual(self.queue(), [job("c")])
        self.assertEqual(rounds, 2)
        self.assertEqual(cursor, "")                # came round: the next starts over
        self.assertEqual(self.r.zcard(BATCH + "waiting"), 150)

    def test_expire_prunes_the_whole_list_over_successive_calls(self):
        """Issue 32: batch list pruned only among its newest 100 entries."""
        for i in range(250):
            self.r.zadd(BATCH + "list", {"gone%03d" % i: i})
        self.open("live")
        cursor = ""
        for _ in range(3):
            cursor = self.expire(listed=cursor)[3].decode()
        self.assertEqual(self.r.zrange(BATCH + "list", 0, -1), [b"live"])

    def purge(self, bid, key, kind, window=3, take=2, attempts=""):
        """BATCH_PURGE as cogworkerctl calls it, to the end: the jobs taken out, the locked
        ones handed back, the number of calls."""
        cursor, taken, locked, calls = "0", 0, [], 0
        while cursor:
            reply = self.batch("batch_purge", bid, key, kind, cursor, window, "TOMB",
                               attempts, take, 1000)
            cursor, taken, calls = reply[0].decode(), taken + reply[1], calls + 1
            locked += reply[2]
        return taken, locked, calls

    def test_purge_takes_the_tree_s_jobs_out_of_queues_and_sets_a_window_per_call(self):
        self.open("p")
        self.open("c", parent="p")
        self.open("other")
        for j in ("m1", "m2", "m3"):
            self.push(j, bid="p")
        self.push("m4", bid="c")
        self.push("x1", bid="other")
        self.push("plain")
        self.push("late", bid="p", at="1767300000")
        self.push("uniq", bid="c", queue="q2")
        self.r.lset(qkey("q2"), 0, job("uniq", queue="q2", bid="c", unique="until_executed"))
        self.r.zadd(RETRY, {job("m5", bid="c", retry_count=1): 1767300000})
        self.r.sadd(BATCH + "c:pending", "m5")
        self.r.rpush("cogworker:job_attempts:m5", "{}")
        self.push("w", deps=("m2",))                    # outside, waits for a member
        self.cancel("p")
        before = len(self.queue())
        taken, locked, calls = self.purge("p", QUEUE + "default", "list")
        self.assertEqual(taken, 4)
        self.assertGreaterEqual(calls, 3)
        self.assertEqual(sorted(json.loads(j)["jid"] for j in self.queue()), ["plain", "x1"])
        self.assertEqual(len(self.queue()), before - 4)
        self.assertEqual(self.purge("p", QUEUE + "q2", "list")[:2],
                         (1, [job("uniq", queue="q2", bid="c", unique="until_executed")]))
        self.assertEqual(self.purge("p", SCHEDULE, "zset")[0], 1)
        self.assertEqual(self.purge("p", RETRY, "zset", attempts="cogworker:job_attempts:")[0], 1)
        self.assertFalse(self.r.exists("cogworker:job_attempts:m5"))
        self.assertEqual(self.r.zcard(SCHEDULE) + self.r.zcard(RETRY), 0)
        self.assertEqual(self.members("p", "discarded"), ["c", "late", "m1", "m2", "m3"])
        self.assertEqual(self.members("c", "discarded"), ["m4", "m5", "uniq"])
        self.assertEqual((self.members("p", "pending"), self.members("c", "pending")), ([], []))
        self.assertEqual(self.r.get(BATCH + "settled:m1"), b"discarded")
        dead = [json.loads(m) for m in self.r.zrange(DEAD, 0, -1)]
        self.assertEqual([(d["jid"], d["error_message"]) for d in dead],
                         [("w", "dependency m2 was discarded")])
        self.assertEqual(self.purge("p", QUEUE + "default", "list")[0], 0)     # again: none
        self.assertEqual(self.callbacks(), [])

    def test_a_death_before_the_commit_fires_on_death_at_the_commit(self):
        self.open("b")
        self.push("j1", bid="b")
        self.push("j2", bid="b")
        self.settle("j1", "dead", bid="b")
        self.assertEqual(self.callbacks(), [])
        reply = self.batch("batch_commit", "b")
        self.assertEqual([f.decode().split()[1] for f in reply[1:]], ["death"])
        self.settle("j2", bid="b")
        self.assertEqual([c["class"] for c in self.callbacks()], ["All", "Died"])


class TestBatchKeyNames(unittest.TestCase):
    def test_the_names_the_scripts_compute_are_those_of_keys_h(self):
        """src/keys.h spells the names; lua/lib/batch.lua computes them from K_BATCH."""
        with open(os.path.join(REPO, "src", "keys.h")) as f:
            names = re.findall(r'#define K_\w+ "cogworker:batch:([a-z:]+)"', f.read())
        self.assertEqual(sorted(names), ["after:", "dependants:", "list", "open", "owed",
                                         "settled:", "wait:", "waiting"])
        lua = "".join(open(os.path.join(REPO, "lua", n)).read()
                      for n in ["lib/batch.lua"] + ["batch_%s.lua" % s for s in
                                ("open", "push", "commit", "settle", "revive", "cancel",
                                 "expire")])
        used = set(re.findall(r"K \.\. '([a-z:]+)'", lua))
        self.assertEqual(used, set(names))


class TestCutEntries(ScriptTestCase):
    """PEEK_CUT and ACT_CUT (doc/protocol.md §6.36, §6.37): entries over max read cut."""

    def big(self, jid, n=2000, **extra):
        d = {"class": "Big", "args": ["x" * n, {"jid": "inner", "q": "a\\\"b"}], "queue": "q",
             "jid": jid, "n": 12345678901234567890, "note": "y" * 1100}
        d.update(extra)
        return json.dumps(d, separators=(",", ":")).encode()

    def peek(self, key, kind, where, m, head=256, tail=64):
        return self.run_script("peek_cut", [key], [kind, where, str(len(m)), m[:head],
                                                   m[-tail:] if tail else b""])

    def test_peek_gives_the_summary_of_the_entry_read_cut(self):
        big = self.big("b1")
        self.r.zadd("cogworker:dead", {job("s1"): 2, big: 2, b"[1,2]" + b" " * 1000: 3})
        # the top-level jid, not the one inside args; big numbers byte for byte; no long value
        want = b'{"class":"Big","queue":"q","jid":"b1","n":12345678901234567890}'
        self.assertEqual(self.peek("cogworker:dead", "z", "2.000000", big), want)
        self.assertEqual(self.peek("cogworker:dead", "z", "3", b"[1,2]" + b" " * 1000), b"")
        self.assertIsNone(self.peek("cogworker:dead", "z", "1", big))      # not there
        self.r.rpush("l", job("a"), job("b"), big)
        self.assertEqual(self.peek("l", "l", "2", big), want)
        self.r.lpush("l", job("c"))                                      # it moved
        self.assertEqual(self.peek("l", "l", "2", big), want)
        self.r.hset("h", mapping={"payload": big, "queue": "q"})
        self.assertEqual(self.peek("h", "f", "payload", big), want)
        work = json.dumps({"queue": "q", "run_at": 1}).encode()[:-1] + b',"payload":' + big + b"}"
        self.r.hset("w", "t1", work)
        self.assertEqual(self.peek("w", "h", "", work),
                         b'{"queue":"q","run_at":1,"payload":' + want + b"}")
        cut_off = big[:-1]                                                # not closed
        self.r.rpush("c", cut_off)
        self.assertEqual(self.peek("c", "l", "0", cut_off), b"")

    def test_act_cut_matches_the_jid_never_only_the_head(self):
        a, b = self.big("aaaa"), self.big("bbbb")        # same length, same first bytes
        self.assertEqual(len(a), len(b))
        self.r.zadd("cogworker:dead", {a: 5, b: 5})
        args = ["delete", "z", "5.000000", str(len(a)), "bbbb", a[:64], "", ""]
        self.assertEqual(self.run_script("act_cut", ["cogworker:dead"] * 2 + [QUEUES], args), 1)
        self.assertEqual(self.r.zrange("cogworker:dead", 0, -1), [a])
        self.assertEqual(self.run_script("act_cut", ["cogworker:dead"] * 2 + [QUEUES], args), 0)
        args = ["retry", "z", "5", str(len(a)), "aaaa", a[:64], "", "q"]
        self.assertEqual(self.run_script("act_cut", ["cogworker:dead", qkey("q"), QUEUES], args), 1)
        self.assertEqual(self.r.lrange(qkey("q"), 0, -1), [a])          # byte for byte
        self.assertTrue(self.r.sismember(QUEUES, "q"))
        args = ["delete", "l", "", str(len(a)), "aaaa", a[:64], "", ""]
        self.assertEqual(self.run_script("act_cut", [qkey("q")] * 2 + [QUEUES], args), 1)
        self.assertEqual(self.r.llen(qkey("q")), 0)

    def test_requeue_of_a_job_over_1_mib_reads_its_queue_and_jid_without_a_decode(self):
        big = self.big("big1", n=2 << 20, queue="elsewhere")
        self.r.rpush(INPROGRESS, big)
        self.assertEqual(self.requeue()[0:2], [1, 0])
        self.assertEqual(self.r.lrange(qkey("elsewhere"), 0, -1), [big])
        self.assertEqual(self.r.get(b"cogworker:orphanings:big1"), b"1")

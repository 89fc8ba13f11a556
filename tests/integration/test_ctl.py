# SPDX-License-Identifier: MIT
"""cogworkerctl against a real redis-server (doc/behaviours.md groups CTL and PR; doc/protocol.md
§7.28). Jobs are placed the way cogworker and cogworkerd place them: LPUSHed on a queue,
ZADDed into schedule / retry / dead with the failure fields, running under a live daemon.
Each test checks what the command prints (table or --json) and what changed in Redis.

MET (metrics) is in test_metrics.py. The cogworkerctl half of DH-11 (no on_death for a
delete, retry or kill) is here, in LiveDaemon.

Run: python3 tests/integration/run.py test_ctl
"""

import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (DaemonTestCase, binary, free_port, handler, job,  # noqa: E402
                     new_jid, wait_for)
from observe import Monitor  # noqa: E402
from periodickit import avoid_minute_boundary  # noqa: E402

import redis  # noqa: E402

QUEUES = b"cogworker:queues"
PAUSED = b"cogworker:paused_queues"
SCHEDULE = b"cogworker:schedule"
RETRY = b"cogworker:retry"
DEAD = b"cogworker:dead"
PROCESSES = b"cogworker:processes"
DISABLED = b"periodic:disabled"
PSCHEDULE = b"periodic:schedule"
BIG_ARGS = '[12345678901234567890,1.10,"x"]'    # bytes that must survive every move


def qkey(q):
    return ("cogworker:queue:" + q).encode()


def attempts_key(jid):
    return ("cogworker:job_attempts:" + jid).encode()


def entry(cls="Work", queue="default", jid=None, args=BIG_ARGS, failed=True, **extra):
    """A job payload as a producer wrote it, plus the failure fields the daemon adds for a
    retry or dead entry (failed=True). Compact, keys in cogworker's order; args keep their
    exact spelling. queue=None leaves the queue out."""
    jid = jid or new_jid()
    now = time.time() - 100
    parts = ['"class":%s' % json.dumps(cls), '"args":%s' % args]
    if queue is not None:
        parts.append('"queue":%s' % json.dumps(queue))
    parts += ['"jid":"%s"' % jid, '"retry":true', '"created_at":%.6f' % now,
              '"enqueued_at":%.6f' % (now + 1)]
    if failed:
        parts += ['"error_class":"Cogworker::HandlerFailed"',
                  '"error_message":"exit status 1: kaboom"',
                  '"failed_at":%.6f' % (now + 2), '"retry_count":1']
    for k, v in extra.items():
        parts.append('%s:%s' % (json.dumps(k), json.dumps(v, separators=(",", ":"))))
    return "{" + ",".join(parts) + "}"


def jid_of(payload):
    return json.loads(payload)["jid"]


def attempt(n, outcome="retrying"):
    return json.dumps({"attempt": n, "failed_at": time.time(), "outcome": outcome,
                       "error_class": "Cogworker::HandlerFailed",
                       "error_message": "exit status 1: kaboom"}, separators=(",", ":"))


def pjid_of(cron, cls, args):
    return hashlib.sha1(("%s|%s|%s" % (cron, cls, args)).encode()).hexdigest()


class Result:
    def __init__(self, p):
        self.rc = p.returncode
        self.out = p.stdout.decode("utf-8", "replace")
        self.err = p.stderr.decode("utf-8", "replace")

    def __repr__(self):
        return "rc=%d\nstdout:\n%s\nstderr:\n%s" % (self.rc, self.out, self.err)


class CtlCase(DaemonTestCase):
    """A fresh Redis per test (FLUSHALL), cogworkerctl pointed at it with REDIS_URL and an
    empty conf file (or a conf with handlers for exec)."""

    def setUp(self):
        super().setUp()
        self.conf = os.path.join(self.workdir, "ctl.conf")
        with open(self.conf, "w") as f:
            f.write("# cogworkerctl test conf\n")

    def ctl(self, *args, url=None, conf=None, stdin=None, timeout=30):
        env = dict(os.environ)
        env["REDIS_URL"] = url or self.server.url
        p = subprocess.run([binary("cogworkerctl"), "-c", conf or self.conf] + list(args),
                           env=env, input=stdin, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=timeout)
        return Result(p)

    def ok(self, *args, **kw):
        res = self.ctl(*args, **kw)
        self.assertEqual(res.rc, 0, res)
        return res

    def js(self, *args, rc=0, **kw):
        res = self.ctl("--json", *args, **kw)
        self.assertEqual(res.rc, rc, res)
        return json.loads(res.out)

    def fails(self, rc, *args, **kw):
        """The command exits with rc and one line "cogworkerctl: ..." on stderr."""
        res = self.ctl(*args, **kw)
        self.assertEqual(res.rc, rc, res)
        lines = res.err.strip().splitlines()
        self.assertTrue(lines and all(l.startswith("cogworkerctl: ") for l in lines), res)
        return res

    def now(self):
        s, us = self.r.time()
        return s + us / 1e6

    def zmembers(self, key):
        return [m.decode() for m in self.r.zrange(key, 0, -1)]

    def queue(self, q="default"):
        return [m.decode() for m in self.r.lrange(qkey(q), 0, -1)]

    def table_rows(self, out):
        """Rows of a human table (header dropped), split on runs of 2+ spaces."""
        lines = [l for l in out.splitlines() if l.strip()]
        return [re.split(r"\s{2,}", l.strip()) for l in lines[1:]]


# ======================================================================================
# Bad input and connection errors


class BadInput(CtlCase):

    def test_unreachable_redis_is_exit_2_with_one_line(self):
        url = "redis://127.0.0.1:%d/0" % free_port()
        for cmd in (["stats"], ["queues"], ["processes"], ["periodic"], ["metrics"],
                    ["jobs", "list"], ["jobs", "show", new_jid()],
                    ["queues", "pause", "a"], ["push", "Work"]):
            res = self.fails(2, *cmd, url=url)
            self.assertEqual(res.out, "", cmd)
            self.assertEqual(len(res.err.strip().splitlines()), 1, res)
            self.assertIn("connect", res.err, cmd)

    def test_usage_errors_are_exit_2_and_change_nothing(self):
        self.push(entry(failed=False))
        self.r.zadd(DEAD, {entry(): 1})
        before = sorted(self.r.keys())
        for cmd in (["frobnicate"], ["jobs", "list", "--set", "bogus"],
                    ["jobs", "reschedule", new_jid(), "soon"], ["jobs", "reschedule", new_jid()],
                    ["queues", "pause"], ["queues", "pause", "a", "b"], ["queues", "bogus"],
                    ["jobs", "retry"], ["jobs", "retry", "--all"],
                    ["jobs", "kill", "--set", "dead", new_jid()],
                    ["jobs", "list", "--limit", "-3"], ["periodic", "run"],
                    ["processes", "quiet"], ["exec"]):
            self.fails(2, *cmd)
        # destructive forms without --yes
        res = self.fails(2, "jobs", "delete", "--all", "--set", "dead")
        self.assertIn("--yes", res.err)
        self.fails(2, "jobs", "kill", "--all", "--set", "retry")
        res = self.fails(2, "queues", "clear", "default")
        self.assertIn("--yes", res.err)
        self.fails(2, "processes", "stop", "--all")
        self.assertEqual(sorted(self.r.keys()), before)
        self.assertEqual(self.r.zcard(DEAD), 1)
        self.assertEqual(self.r.llen(qkey("default")), 1)

    def test_ctl27_json_args_errors_say_what_is_wrong(self):
        """CTL-27: a JSON parse error is called one, with where it is; "must be a JSON array" is
        only for valid JSON of another kind. Nothing is pushed."""
        cases = [
            ("[1,2", "is not valid JSON: it ends too soon ([1,2)"),
            ("[1,x]", "is not valid JSON: 'x' at byte 4 ([1,x])"),
            ('{"a":1}', 'must be a JSON array of args, not an object: {"a":1}'),
            ("42", "must be a JSON array of args, not a number: 42"),
            ("", "is empty: give a JSON array of args ('[]' for none)"),
        ]
        for text, said in cases:
            with self.subTest(text):
                for cmd in (["push", "--json-args", text, "Work"],
                            ["exec", "--json-args", text, "Work"]):
                    res = self.fails(2, *cmd)
                    self.assertEqual(res.err, "cogworkerctl: %s: --json-args %s\n"
                                     % (cmd[0], said))
        res = self.fails(2, "push", "--stdin", "Work", stdin=b'["ok"]\n[1,2\n')
        self.assertIn("cogworkerctl: stdin line 2 is not valid JSON: it ends too soon ([1,2)",
                      res.err)
        self.assertEqual(self.r.llen(qkey("default")), 1)      # line 1 went, line 2 did not

    def test_unknown_jid_is_exit_1_and_changes_nothing(self):
        self.push(entry(failed=False))
        self.r.zadd(RETRY, {entry(): 1})
        before = {k: self.r.dump(k) for k in self.r.keys()}
        ghost = new_jid()
        for cmd in (["jobs", "show"], ["jobs", "retry"], ["jobs", "delete"], ["jobs", "kill"]):
            res = self.fails(1, *(cmd + [ghost]))
            self.assertIn(ghost, res.err)
            self.assertEqual(res.out, "")
        self.fails(1, "jobs", "reschedule", ghost, "5")
        self.fails(1, "periodic", "run", "0" * 40)
        self.fails(1, "periodic", "disable", "0" * 40)
        self.fails(1, "processes", "quiet", "nohost:1:000000000000")
        self.assertEqual({k: self.r.dump(k) for k in self.r.keys()}, before)
        # --json still prints a parseable document for the jid commands
        out = self.js("jobs", "delete", ghost, rc=1)
        self.assertEqual(out["results"], [{"jid": ghost, "set": None, "result": "not_found"}])
        self.assertEqual(out["done"], 0)

    def test_wrong_typed_keys_are_named_and_exit_2(self):
        self.r.set(RETRY, "oops")
        res = self.fails(2, "jobs", "list", "--set", "retry")
        self.assertIn("cogworker:retry", res.err)
        self.assertIn("WRONGTYPE", res.err)
        self.fails(2, "stats")
        self.fails(2, "metrics")
        self.r.delete(RETRY)
        self.r.set(QUEUES, "oops")
        res = self.fails(2, "queues")
        self.assertIn("cogworker:queues", res.err)
        self.r.delete(QUEUES)
        self.r.sadd(QUEUES, "default")
        self.r.set(qkey("default"), "oops")
        res = self.fails(2, "queues")
        self.assertIn("cogworker:queue:default", res.err)
        self.r.set(PROCESSES, "oops")
        self.fails(2, "processes")
        # a damaged dead set is not DELeted by delete --all
        self.r.set(DEAD, "oops")
        self.fails(2, "jobs", "delete", "--all", "--set", "dead", "--yes")
        self.assertEqual(self.r.get(DEAD), b"oops")

    def test_show_skips_a_damaged_key_with_a_warning(self):
        e = entry()
        self.r.zadd(RETRY, {e: 1})
        self.r.sadd(QUEUES, "default")
        self.r.set(qkey("default"), "oops")
        res = self.ctl("--json", "jobs", "show", jid_of(e))
        self.assertEqual(res.rc, 0, res)
        self.assertIn("cogworker:queue:default", res.err)
        self.assertEqual([l["set"] for l in json.loads(res.out)["locations"]], ["retry"])


# ======================================================================================
# Queues


class Queues(CtlCase):

    def test_ctl1_pause_and_resume(self):
        self.r.sadd(QUEUES, "a", "b")
        self.push(entry(queue="a", failed=False), "a")
        res = self.ok("queues", "pause", "a")
        self.assertEqual(res.out, "paused queue a\n")
        self.assertEqual(self.r.smembers(PAUSED), {b"a"})
        rows = {r[0]: r for r in self.table_rows(self.ok("queues").out)}
        self.assertEqual(rows["a"][3], "paused")
        self.assertEqual(rows["b"][3], "no")
        res = self.fails(1, "queues", "pause", "a")          # nothing done
        self.assertIn("already paused", res.err)
        self.assertEqual(self.js("queues", "resume", "a"),
                         {"queue": "a", "paused": False, "changed": True})
        self.assertEqual(self.r.smembers(PAUSED), set())
        self.fails(1, "queues", "resume", "a")
        self.assertEqual(self.r.llen(qkey("a")), 1)           # jobs stay queued

    def live_fake(self, ident, queues):
        """A live process, as its presence hash shows one, reading queues."""
        self.r.hset("cogworker:process:" + ident, mapping={
            "info": json.dumps({"hostname": "h", "pid": 1, "queues": queues}),
            "busy": "0", "quiet": "false"})
        self.r.sadd(PROCESSES, ident)

    def test_ctl29_unknown_queues_are_warned_about_and_the_name_rule_said(self):
        """CTL-29: pausing a queue nothing knows, or pushing to one no live process reads,
        is done with a warning on stderr naming what the live processes read; a bad name is
        refused with the rule."""
        res = self.ok("queues", "pause", "nosuchqueue")
        self.assertEqual(res.out, "paused queue nosuchqueue\n")
        self.assertEqual(res.err, "cogworkerctl: warning: queue nosuchqueue is unknown: not in "
                         "cogworker:queues, no job on it, and no live process reads it (none "
                         "is live)\n")
        self.assertEqual(self.r.smembers(PAUSED), {b"nosuchqueue"})
        self.live_fake("h:1:aaaaaaaaaaaa", ["default", "critical"])
        res = self.ok("queues", "pause", "defualt")
        self.assertIn("no live process reads it (they read: critical, default)", res.err)
        # known: listed, holding jobs, or read by a live process: nothing to say
        self.r.sadd(QUEUES, "listed")
        self.r.lpush(qkey("holding"), job("W", queue="holding"))
        for q in ("listed", "holding", "critical"):
            self.assertEqual(self.ok("queues", "pause", q).err, "", q)
        # push --queue to a queue no live process reads: pushed, and said
        res = self.ok("push", "--queue", "nosuchqueue", "W")
        self.assertEqual(res.err, "cogworkerctl: warning: no live process reads queue "
                         "nosuchqueue (they read: critical, default); its jobs wait there until "
                         "one does\n")
        self.assertEqual(self.r.llen(qkey("nosuchqueue")), 1)
        self.assertEqual(self.ok("push", "--queue", "critical", "W").err, "")
        self.assertEqual(self.ok("push", "W").err, "")            # no --queue: not checked
        # the rule, said
        rule = "a queue name is not empty and has no spaces, control characters or commas"
        for cmd in (["queues", "pause", "a b"], ["queues", "clear", "a,b", "--yes"],
                    ["push", "--queue", "a b", "W"], ["exec", "--queue", "a,b", "W"]):
            res = self.fails(2, *cmd)
            self.assertEqual(res.err, 'cogworkerctl: %s: bad queue name "%s": %s\n'
                             % (" ".join(cmd[:2]) if cmd[0] == "queues" else cmd[0],
                                cmd[2] if cmd[0] == "queues" else cmd[2], rule), cmd)
        self.assertFalse(self.r.exists(qkey("a b")))

    def test_ctl2_size_latency_paused_and_first_record(self):
        old = time.time() - 200
        j1 = job("Work", ["one", 1], created_at=old - 5, enqueued_at=old)
        j2 = job("Work", ["two", 2])
        self.push(j1)
        self.push(j2)
        self.r.sadd(QUEUES, "default", "empty")
        self.r.sadd(PAUSED, "default")
        out = self.js("queues")
        self.assertEqual([q["name"] for q in out], ["default", "empty"])
        d = out[0]
        self.assertEqual(d["size"], 2)
        self.assertEqual(d["size"], self.r.llen(qkey("default")))
        self.assertGreaterEqual(d["latency"], 199)     # the oldest job's age
        self.assertLess(d["latency"], 230)
        self.assertIs(d["paused"], True)
        self.assertEqual(out[1], {"name": "empty", "size": 0, "latency": 0.0, "paused": False,
                                  "waiting": 0})
        rows = self.table_rows(self.ok("queues").out)
        self.assertEqual(rows[0][:2], ["default", "2"])
        # as top and the daemon's log say a duration, not 200.123s
        self.assertRegex(rows[0][2], r"^3m [23]\ds$")
        self.assertEqual(rows[0][3], "paused")
        self.assertEqual(rows[1][:3], ["empty", "0", "-"])
        # the queue's first record shows its class and args
        first = self.js("jobs", "list", "--set", "queued", "--queue", "default")[0]
        self.assertEqual(first["class"], "Work")
        self.assertEqual(first["args"], ["two", 2])
        self.assertEqual(first["raw"], j2)
        rows = self.table_rows(self.ok("jobs", "list", "--set", "queued").out)
        self.assertEqual(rows[0][2], "Work")
        self.assertIn('["two",2]', rows[0])

    def test_queues_from_every_source_listed_once_each(self):
        # Names from the queues set, the paused set and SCAN overlap: each is listed once,
        # sorted, paused where the paused set says so, whichever source it came from.
        listed = ["q%05d" % i for i in range(3000)]
        self.r.sadd(QUEUES, *listed)
        only_paused = ["p%05d" % i for i in range(500)]
        self.r.sadd(PAUSED, *(listed[::2] + only_paused + ["s00001"]))
        pipe = self.r.pipeline()
        for name in listed[:500] + ["s%05d" % i for i in range(500)]:
            pipe.lpush(qkey(name), job("Work"))
        pipe.execute()
        out = self.js("queues")
        names = [q["name"] for q in out]
        expected = sorted(set(listed + only_paused + ["s%05d" % i for i in range(500)]))
        self.assertEqual(names, expected)
        paused = {q["name"] for q in out if q["paused"]}
        self.assertEqual(paused, set(listed[::2] + only_paused + ["s00001"]))
        sizes = {q["name"]: q["size"] for q in out}
        self.assertEqual(sizes["q00499"], 1)
        self.assertEqual(sizes["q00500"], 0)
        self.assertEqual(sizes["s00499"], 1)

    def test_ctl4_clear_needs_yes_and_deletes_the_queue(self):
        self.push(job("Work"))
        self.push(job("Work"))
        self.fails(2, "queues", "clear", "default")
        self.assertEqual(self.r.llen(qkey("default")), 2)
        res = self.ok("queues", "clear", "default", "--yes")
        self.assertIn("2 job(s) deleted", res.out)
        self.assertFalse(self.r.exists(qkey("default")))
        self.fails(1, "--yes", "queues", "clear", "default")   # nothing left to clear
        self.push(job("Work"))
        self.assertEqual(self.js("--yes", "queues", "clear", "default"),
                         {"queue": "default", "deleted": 1})


# ======================================================================================
# Jobs: list and show


class JobsRead(CtlCase):

    def place_all(self):
        q = self.push(job("Q", ["q"])).decode()
        s = entry("S", failed=False, at=time.time() + 600)
        self.r.zadd(SCHEDULE, {s: time.time() + 600})
        rt = entry("R")
        self.r.zadd(RETRY, {rt: time.time() + 60})
        d1, d2 = entry("D", queue="low"), entry("D")
        self.r.zadd(DEAD, {d1: time.time() - 100, d2: time.time() - 10})
        return q, s, rt, d1, d2

    def test_list_every_set_in_order_with_filters(self):
        q, s, rt, d1, d2 = self.place_all()
        out = self.js("jobs", "list")
        self.assertEqual([(e["set"], e["raw"]) for e in out],
                         [("queued", q), ("scheduled", s), ("retry", rt), ("dead", d2),
                          ("dead", d1)])                         # dead: newest first
        r = out[2]
        self.assertEqual(r["key"], "cogworker:retry")
        self.assertEqual(r["jid"], jid_of(rt))
        self.assertEqual(r["class"], "R")
        self.assertEqual(r["queue"], "default")
        self.assertEqual(json.dumps(r["args"]), json.dumps(json.loads(BIG_ARGS)))
        self.assertEqual(r["retry_count"], 1)
        self.assertEqual(r["error_class"], "Cogworker::HandlerFailed")
        self.assertEqual(r["error_message"], "exit status 1: kaboom")
        self.assertAlmostEqual(r["score"], self.r.zscore(RETRY, rt), places=3)
        self.assertEqual([e["raw"] for e in self.js("jobs", "list", "--set", "dead",
                                                    "--queue", "low")], [d1])
        self.assertEqual([e["raw"] for e in self.js("jobs", "list", "--class", "D",
                                                    "--limit", "1")], [d2])
        self.assertEqual(self.js("jobs", "list", "--set", "retry", "--class", "Nope"), [])
        self.assertEqual(self.ok("jobs", "list", "--set", "retry", "--class", "Nope").out,
                         "no jobs (retry)\n")
        # the table
        rows = self.table_rows(self.ok("jobs", "list", "--set", "retry").out)
        self.assertEqual(rows[0][:4], ["retry", jid_of(rt), "R", "default"])
        self.assertRegex(rows[0][4], r"^in (5\ds|1m 00s)$")
        self.assertIn("Cogworker::HandlerFailed: exit status 1: kaboom", rows[0][-1])

    def test_list_pages_through_big_sets(self):
        members = {entry("P", failed=True): i for i in range(250)}
        self.r.zadd(RETRY, members)
        self.assertEqual(len(self.js("jobs", "list", "--set", "retry", "--limit", "0")), 250)
        self.assertEqual(len(self.js("jobs", "list", "--set", "retry")), 100)  # default limit

    def test_show_retry_entry_with_attempts(self):
        e = entry("R")
        jid = jid_of(e)
        self.r.zadd(RETRY, {e: time.time() + 60})
        self.r.rpush(attempts_key(jid), attempt(1), attempt(2))
        out = self.js("jobs", "show", jid)
        self.assertEqual(out["jid"], jid)
        self.assertEqual(len(out["locations"]), 1)
        loc = out["locations"][0]
        self.assertEqual(loc["set"], "retry")
        self.assertEqual(loc["raw"], e)
        self.assertEqual(loc["payload"], json.loads(e))
        self.assertEqual([a["attempt"] for a in out["attempts"]], [1, 2])
        self.assertEqual(out["attempts"][0]["outcome"], "retrying")
        text = self.ok("jobs", "show", jid).out
        self.assertIn("where      retry (cogworker:retry), due ", text)
        self.assertIn("error      Cogworker::HandlerFailed: exit status 1: kaboom", text)
        self.assertIn("attempts   2", text)
        self.assertIn("retrying", text)
        self.assertIn("payload    " + e, text)

    def test_show_queued_and_scheduled(self):
        q = self.push(job("Q", ["a"])).decode()
        out = self.js("jobs", "show", jid_of(q))
        self.assertEqual([(l["set"], l["key"]) for l in out["locations"]],
                         [("queued", "cogworker:queue:default")])
        self.assertEqual(out["attempts"], [])
        s = entry("S", failed=False)
        self.r.zadd(SCHEDULE, {s: time.time() + 300})
        self.assertIn("where      scheduled (cogworker:schedule), due ",
                      self.ok("jobs", "show", jid_of(s)).out)

    def test_show_cuts_huge_args_and_payload_unless_full(self):
        big = '["%s",1]' % ("é" * 5000)                  # 5000 characters, 10 009 bytes
        e = entry("Big", args=big)
        self.r.zadd(RETRY, {e: time.time() + 60})
        text = self.ok("jobs", "show", jid_of(e)).out
        lines = {l[:10].strip(): l for l in text.splitlines() if l[:10].strip()}
        self.assertLess(len(lines["args"]), 2200)
        self.assertTrue(lines["args"].endswith(
            "… (cut: %d bytes in all; --full shows everything)" % len(big.encode())),
            lines["args"][-120:])
        self.assertTrue(lines["payload"].endswith(
            "… (cut: %d bytes in all; --full shows everything)" % len(e.encode())))
        full = self.ok("jobs", "show", "--full", jid_of(e)).out
        self.assertIn("args       " + big + "\n", full)
        self.assertIn("payload    " + e + "\n", full)
        self.assertNotIn("(cut:", full)
        # --json is for programs: always whole
        self.assertEqual(self.js("jobs", "show", jid_of(e))["locations"][0]["raw"], e)
        # a small one is not cut
        s = entry("Small")
        self.r.zadd(RETRY, {s: time.time() + 60})
        self.assertNotIn("(cut:", self.ok("jobs", "show", jid_of(s)).out)

    def test_show_says_why_a_dead_job_is_dead(self):
        """Not "1 of 25 allowed" for a dead job, not "killed" for a dead exit code."""
        cases = [
            ({"retry_count": 1}, "exit status 3", "killed",
             "retries    dead after 1 failure(s): dead (exit code 3), cut short with 25 of 25 "
             "retries left", "dead (exit code 3)"),
            ({"retry_count": 26}, "exit status 1: kaboom", "dead",
             "retries    dead after 26 failure(s): retries exhausted (25 allowed)", "dead"),
            ({"retry_count": 1, "retry": False}, "exit status 1", "dead",
             "retries    dead after 1 failure(s): retry is false, so the first failure goes "
             "to dead", "dead"),
        ]
        for fields, message, outcome, retries, shown in cases:
            with self.subTest(retries):
                e = json.loads(entry("D"))
                e.update(fields, error_message=message)
                raw = json.dumps(e, separators=(",", ":"))
                self.r.zadd(DEAD, {raw: time.time()})
                a = json.dumps({"attempt": e["retry_count"], "failed_at": time.time(),
                                "outcome": outcome, "error_class": "Cogworker::HandlerFailed",
                                "error_message": message})
                self.r.rpush(attempts_key(e["jid"]), a)
                text = self.ok("jobs", "show", e["jid"]).out
                self.assertIn(retries + "\n", text)
                self.assertNotIn("allowed\n" if outcome == "killed" else "of 25 allowed", text)
                [line] = [l for l in text.splitlines() if l.startswith("  #")]
                self.assertRegex(line, r"^  #\d+ +\S+  %s +Cogworker::HandlerFailed: "
                                 % re.escape(shown))
                self.assertNotIn("killed", text)
                # the attempts log keeps its word for programs
                self.assertEqual(self.js("jobs", "show", e["jid"])["attempts"][0]["outcome"],
                                 outcome)
        r = entry("R")
        self.r.zadd(RETRY, {r: time.time() + 60})
        self.assertIn("retries    1 failure(s) so far; 25 retries allowed\n",
                      self.ok("jobs", "show", jid_of(r)).out)

    def test_ctl13_corrupt_entries_are_listed_and_deleted_by_raw_value(self):
        for key in (RETRY, DEAD):
            self.r.zadd(key, {"{not json": 1, "[1, 2]": 2})
        listed = self.js("jobs", "list", "--set", "retry") + self.js("jobs", "list", "--set", "dead")
        self.assertEqual(len(listed), 4)
        self.assertTrue(all(e["class"] == "(unparseable)" and e["jid"] is None
                            for e in listed))
        self.assertEqual(sorted(e["raw"] for e in listed),
                         sorted(["{not json", "[1, 2]"] * 2))
        rows = self.table_rows(self.ok("jobs", "list", "--set", "dead").out)
        self.assertEqual([r[2] for r in rows], ["(unparseable)"] * 2)
        shown = self.js("jobs", "show", "[1, 2]")
        self.assertEqual(sorted(l["set"] for l in shown["locations"]), ["dead", "retry"])
        out = self.js("jobs", "delete", "{not json", "[1, 2]")
        self.assertEqual(out["done"], 4)
        self.assertEqual(self.r.zcard(RETRY), 0)
        self.assertEqual(self.r.zcard(DEAD), 0)


# ======================================================================================
# Jobs: actions


class JobsAct(CtlCase):

    def assert_restamped(self, old, new, before):
        """new is old with only enqueued_at changed (same place, fresh value)."""
        o, n = json.loads(old), json.loads(new)
        self.assertGreaterEqual(n["enqueued_at"], before - 1)
        self.assertLessEqual(n["enqueued_at"], time.time() + 1)
        self.assertNotEqual(n["enqueued_at"], o["enqueued_at"])
        old_t = re.search(r'"enqueued_at":([0-9.]+)', old).group(1)
        new_t = re.search(r'"enqueued_at":([0-9.]+)', new).group(1)
        self.assertEqual(new, old.replace('"enqueued_at":' + old_t, '"enqueued_at":' + new_t))
        self.assertIn(BIG_ARGS, new)

    def test_ctl3_delete_the_middle_of_three(self):
        js = [self.push(job("Work", [i])).decode() for i in range(3)]
        res = self.ok("jobs", "delete", jid_of(js[1]))
        self.assertEqual(res.out, "deleted %s from cogworker:queue:default\n" % jid_of(js[1]))
        self.assertEqual(self.queue(), [js[2], js[0]])

    def test_ctl5_retry_all_of_one_queue(self):
        a1, a2, low = entry("W"), entry("W"), entry("W", queue="low")
        self.r.zadd(RETRY, {a1: 1, a2: 2, low: 3})
        self.r.sadd(QUEUES, "low")
        before = time.time()
        res = self.ok("jobs", "retry", "--all", "--set", "retry", "--queue", "default")
        self.assertIn("retry: 2 of 2 job(s) done", res.out)
        self.assertEqual(self.zmembers(RETRY), [low])
        q = self.queue()
        self.assertEqual(len(q), 2)
        for old in (a1, a2):
            new = [x for x in q if jid_of(x) == jid_of(old)][0]
            self.assert_restamped(old, new, before)
        self.assertIn(b"default", self.r.smembers(QUEUES))
        # nothing left to retry for that queue
        self.fails(1, "jobs", "retry", "--all", "--set", "retry", "--queue", "default")

    def test_ctl6_delete_retry_and_dead_entries_with_their_attempts(self):
        r, d = entry("R"), entry("D")
        self.r.zadd(RETRY, {r: 1})
        self.r.zadd(DEAD, {d: 1})
        for e in (r, d):
            self.r.rpush(attempts_key(jid_of(e)), attempt(1))
        out = self.js("jobs", "delete", jid_of(r), jid_of(d))
        self.assertEqual(out, {"action": "delete", "done": 2, "results": [
            {"jid": jid_of(r), "set": "retry", "result": "deleted"},
            {"jid": jid_of(d), "set": "dead", "result": "deleted"}]})
        self.assertEqual(self.r.zcard(RETRY) + self.r.zcard(DEAD), 0)
        self.assertFalse(self.r.exists(attempts_key(jid_of(r)), attempts_key(jid_of(d))))

    def test_ctl7_retry_a_retry_entry_keeps_attempts(self):
        e = entry("R")
        jid = jid_of(e)
        self.r.zadd(RETRY, {e: time.time() + 3600})
        self.r.rpush(attempts_key(jid), attempt(1))
        before = time.time()
        res = self.ok("jobs", "retry", jid)
        self.assertEqual(res.out, "retried %s: retry -> queue default\n" % jid)
        self.assertEqual(self.r.zcard(RETRY), 0)
        [new] = self.queue()
        self.assert_restamped(e, new, before)
        self.assertEqual(self.r.llen(attempts_key(jid)), 1)

    def test_retry_without_enqueued_at_appends_it(self):
        e = entry("R").replace(',"enqueued_at":', ',"x_at":')
        self.r.zadd(RETRY, {e: 1})
        self.ok("jobs", "retry", jid_of(e))
        [new] = self.queue()
        self.assertTrue(new.startswith(e[:-1] + ',"enqueued_at":'), new)

    def test_ctl8_reschedule_keeps_the_member(self):
        s = entry("S", failed=False)
        r = entry("R")
        self.r.zadd(SCHEDULE, {s: time.time() + 10})
        self.r.zadd(RETRY, {r: time.time() + 10})
        for key, e in ((SCHEDULE, s), (RETRY, r)):
            now = self.now()
            out = self.js("jobs", "reschedule", jid_of(e), "5")
            self.assertEqual(out["results"][0]["result"], "rescheduled")
            self.assertAlmostEqual(self.r.zscore(key, e), now + 300, delta=2)
            self.assertAlmostEqual(out["results"][0]["at"], now + 300, delta=2)
            self.assertEqual(self.zmembers(key), [e])
        now = self.now()
        res = self.ok("jobs", "reschedule", jid_of(s), "10080")
        self.assertAlmostEqual(self.r.zscore(SCHEDULE, s), now + 604800, delta=2)
        self.assertIn("rescheduled %s (scheduled) to " % jid_of(s), res.out)
        # Out of range or not a whole number: refused, nothing moves (no clamping)
        before = self.r.zscore(SCHEDULE, s)
        for bad in ("0", "-5", "1.5", "10081", "20000", "", "99999999999999999999"):
            res = self.fails(2, "jobs", "reschedule", jid_of(s), "--", bad)
            self.assertIn("MINUTES must be a whole number from 1 to 10080", res.err, bad)
        self.fails(2, "jobs", "reschedule", jid_of(s), "-5")     # read as an option
        self.assertEqual(self.r.zscore(SCHEDULE, s), before)
        # not for queued or dead jobs
        d = entry("D")
        self.r.zadd(DEAD, {d: 1})
        self.fails(1, "jobs", "reschedule", jid_of(d), "5")
        self.assertEqual(self.r.zscore(DEAD, d), 1)

    def test_ctl9_entry_taken_just_before_reschedule_is_not_readded(self):
        """[FAULT] Writes are paused (CLIENT PAUSE WRITE) so that a ZREM by another client is
        queued before cogworkerctl's write: the entry vanishes between the read and the
        ZADD."""
        s = entry("S", failed=False)
        self.r.zadd(SCHEDULE, {s: time.time() + 10})
        self.r.execute_command("CLIENT", "PAUSE", 10000, "WRITE")
        try:
            other = self.server.client()
            t = threading.Thread(target=lambda: other.zrem(SCHEDULE, s))
            t.start()
            blocked = lambda: int(self.r.info("clients")["blocked_clients"])  # noqa: E731
            wait_for(lambda: blocked() == 1, message="the ZREM to wait")
            env = dict(os.environ, REDIS_URL=self.server.url)
            p = subprocess.Popen([binary("cogworkerctl"), "-c", self.conf, "jobs",
                                  "reschedule", jid_of(s), "5"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            wait_for(lambda: blocked() == 2, message="cogworkerctl's write to wait")
        finally:
            self.r.execute_command("CLIENT", "UNPAUSE")
        out, err = p.communicate(timeout=10)
        t.join(5)
        other.close()
        self.assertEqual(p.returncode, 0, err)
        self.assertEqual((out, err), (b"", b""))          # silently
        self.assertEqual(self.r.zcard(SCHEDULE), 0)       # nothing re-added

    def test_ctl10_retry_a_dead_entry_twice_queues_it_once(self):
        e = entry("D")
        self.r.zadd(DEAD, {e: 1})
        before = time.time()
        out = self.js("jobs", "retry", jid_of(e))
        self.assertEqual(out["results"], [{"jid": jid_of(e), "set": "dead",
                                           "result": "retried", "queue": "default"}])
        res = self.fails(1, "jobs", "retry", jid_of(e))
        self.assertIn("gone", res.err)
        self.assertEqual(self.r.zcard(DEAD), 0)
        [new] = self.queue()
        self.assert_restamped(e, new, before)
        # with the claim gate itself: the same member retried from a stale read
        self.r.delete(qkey("default"))
        self.r.zadd(DEAD, {e: 1})
        self.fails(1, "jobs", "retry", "--set", "retry", jid_of(e))    # not in retry
        self.ok("jobs", "retry", "--set", "dead", jid_of(e))
        self.assertEqual(self.r.llen(qkey("default")), 1)

    def test_ctl11_delete_all_dead(self):
        ds = [entry("D") for _ in range(3)]
        self.r.zadd(DEAD, {d: i for i, d in enumerate(ds)})
        keep = entry("R")
        self.r.zadd(RETRY, {keep: 1})
        for e in ds + [keep]:
            self.r.rpush(attempts_key(jid_of(e)), attempt(1))
        out = self.js("jobs", "delete", "--all", "--set", "dead", "--yes")
        self.assertEqual(out["done"], 3)
        self.assertFalse(self.r.exists(DEAD))
        for d in ds:
            self.assertFalse(self.r.exists(attempts_key(jid_of(d))))
        self.assertTrue(self.r.exists(attempts_key(jid_of(keep))))
        self.assertEqual(self.zmembers(RETRY), [keep])
        self.fails(1, "jobs", "delete", "--all", "--set", "dead", "--yes")

    def test_delete_all_with_a_filter_deletes_only_matches(self):
        a, b = entry("A"), entry("B")
        self.r.zadd(RETRY, {a: 1, b: 2})
        self.r.rpush(attempts_key(jid_of(a)), attempt(1))
        self.ok("jobs", "delete", "--all", "--set", "retry", "--class", "A", "--yes")
        self.assertEqual(self.zmembers(RETRY), [b])
        self.assertFalse(self.r.exists(attempts_key(jid_of(a))))
        self.push(job("A"))
        self.push(job("B"))
        self.ok("jobs", "delete", "--all", "--set", "queued", "--class", "B", "--yes")
        self.assertEqual([jid for jid in map(lambda x: json.loads(x)["class"], self.queue())],
                         ["A"])

    def test_ctl12_entries_that_cannot_go_back_on_a_queue_stay(self):
        noq = entry("R", queue=None)
        wrapper = ('{"class":"(unparseable)","args":[],"queue":"default","jid":"%s",'
                   '"retry":false,"retry_count":0,"enqueued_at":1.0,"failed_at":1.0,'
                   '"error_class":"JSON::ParserError","error_message":"bad",'
                   '"raw_payload":"{oops"}' % new_jid())
        emptyq = entry("R", queue="")
        self.r.zadd(DEAD, {noq: 1, wrapper: 2})
        self.r.zadd(RETRY, {emptyq: 3})
        for e, key in ((noq, DEAD), (wrapper, DEAD), (emptyq, RETRY)):
            res = self.fails(1, "jobs", "retry", jid_of(e))
            self.assertIn("can't be put back on a queue", res.err)
            self.assertIn(jid_of(e), res.err)
            self.assertIsNotNone(self.r.zscore(key, e))
        res = self.ctl("jobs", "retry", "--all", "--set", "dead")
        self.assertEqual(res.rc, 1, res)
        self.assertEqual(res.err.count("can't be put back on a queue"), 2)
        self.assertEqual(self.r.zcard(DEAD), 2)
        self.assertEqual(self.r.keys("cogworker:queue:*"), [])

    def test_ctl14_unwritable_target_queue_leaves_the_entry(self):
        e = entry("R")
        self.r.zadd(RETRY, {e: 1})
        self.r.set(qkey("default"), "not a list")
        res = self.fails(2, "jobs", "retry", jid_of(e))
        self.assertIn("WRONGTYPE", res.err)
        self.assertEqual(self.zmembers(RETRY), [e])
        self.assertEqual(self.r.get(qkey("default")), b"not a list")

    def test_ctl15_delete_a_schedule_entry(self):
        s, other = entry("S", failed=False), entry("S", failed=False)
        self.r.zadd(SCHEDULE, {s: 1, other: 2})
        res = self.ok("jobs", "delete", jid_of(s))
        self.assertEqual(res.out, "deleted %s from scheduled\n" % jid_of(s))
        self.assertEqual(self.zmembers(SCHEDULE), [other])

    def test_kill_moves_schedule_and_retry_entries_to_dead(self):
        s, r = entry("S", failed=False), entry("R")
        self.r.zadd(SCHEDULE, {s: time.time() + 100})
        self.r.zadd(RETRY, {r: time.time() + 100})
        self.r.rpush(attempts_key(jid_of(r)), attempt(1))
        now = self.now()
        out = self.js("jobs", "kill", jid_of(s), jid_of(r))
        self.assertEqual([x["result"] for x in out["results"]], ["killed", "killed"])
        self.assertEqual(self.r.zcard(SCHEDULE) + self.r.zcard(RETRY), 0)
        self.assertEqual(sorted(self.zmembers(DEAD)), sorted([s, r]))   # same members
        for e in (s, r):
            self.assertAlmostEqual(self.r.zscore(DEAD, e), now, delta=2)
        self.assertEqual(self.r.llen(attempts_key(jid_of(r))), 1)
        res = self.fails(1, "jobs", "kill", jid_of(r))
        self.assertIn("already dead", res.err)
        q = self.push(job("Q")).decode()
        self.fails(1, "jobs", "kill", jid_of(q))
        self.assertEqual(self.queue(), [q])

    def test_kill_all_needs_yes(self):
        rs = [entry("R") for _ in range(3)]
        self.r.zadd(RETRY, {e: i for i, e in enumerate(rs)})
        self.fails(2, "jobs", "kill", "--all", "--set", "retry")
        self.assertEqual(self.r.zcard(RETRY), 3)
        self.ok("jobs", "kill", "--all", "--set", "retry", "--yes")
        self.assertEqual(sorted(self.zmembers(DEAD)), sorted(rs))
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_retry_a_scheduled_entry_enqueues_it_now(self):
        s = entry("S", failed=False, at=time.time() + 600)
        self.r.zadd(SCHEDULE, {s: time.time() + 600})
        self.ok("jobs", "retry", jid_of(s))
        self.assertEqual(self.r.zcard(SCHEDULE), 0)
        [new] = self.queue()
        self.assertEqual(json.loads(new)["jid"], jid_of(s))


# ======================================================================================
# Processes (fake ones)


class Processes(CtlCase):

    def fake(self, identity, busy="0", quiet="false", workers=0, info=None):
        info = info if info is not None else {
            "hostname": identity.split(":")[0], "pid": int(identity.split(":")[1]),
            "concurrency": 10, "queues": ["default", "low"], "started_at": time.time() - 120,
            "rss_kb": 20480}
        key = "cogworker:process:" + identity
        self.r.hset(key, mapping={"info": json.dumps(info), "busy": busy, "quiet": quiet})
        self.r.expire(key, 55)          # beat 5 s ago
        self.r.sadd(PROCESSES, identity)
        for i in range(workers):
            payload = job("Slow", [i])
            self.r.hset("cogworker:workers:" + identity, "%012x" % i,
                        '{"queue":"default","payload":%s,"run_at":%d}' % (payload, time.time()))
        return identity

    def test_ctl19_busy_from_workers_quiet_and_pruning(self):
        live = self.fake("live-host:2:def000000000", busy="0", quiet="true", workers=3)
        self.r.sadd(PROCESSES, "gone-host:3:abc000000000")
        out = self.js("processes")
        self.assertEqual(len(out), 1)
        p = out[0]
        self.assertEqual(p["identity"], live)
        self.assertEqual(p["hostname"], "live-host")
        self.assertEqual(p["pid"], 2)
        self.assertEqual(p["busy"], 3)                 # not the stale "0"
        self.assertEqual(p["concurrency"], 10)
        self.assertEqual(p["queues"], ["default", "low"])
        self.assertIs(p["quiet"], True)
        self.assertGreaterEqual(p["beat_age"], 4)
        self.assertLessEqual(p["beat_age"], 7)
        self.assertAlmostEqual(p["started_at"], time.time() - 120, delta=5)
        self.assertEqual(p["rss_kb"], 20480)
        self.assertEqual(self.r.smembers(PROCESSES), {live.encode()})   # pruned
        self.r.sadd(PROCESSES, "gone-host:3:abc000000000")
        text = self.ok("processes").out
        row = self.table_rows(text)[0]
        self.assertEqual(row[:4], [live, "live-host", "2", "3 / 10"])
        self.assertEqual(row[4], "default,low")
        self.assertEqual(row[5], "Quiet")
        self.assertNotIn("gone-host", text)
        self.assertEqual(self.r.smembers(PROCESSES), {live.encode()})

    def test_process_with_empty_info(self):
        self.fake("odd:7:000000000000", info={})
        [p] = self.js("processes")
        self.assertEqual((p["hostname"], p["pid"], p["concurrency"], p["rss_kb"]),
                         ("odd", None, None, None))

    def test_running_jobs_of_fake_processes_are_listed(self):
        ident = self.fake("live-host:2:def000000000", workers=2)
        out = self.js("jobs", "list", "--set", "running")
        self.assertEqual(len(out), 2)
        self.assertEqual({e["process"] for e in out}, {ident})
        self.assertEqual(sorted(e["args"][0] for e in out), [0, 1])
        self.assertTrue(all(e["key"] == "cogworker:workers:" + ident for e in out))

    def test_signal_without_a_subscriber_is_nothing_done(self):
        ident = self.fake("live-host:2:def000000000")
        res = self.fails(1, "processes", "quiet", ident)
        self.assertIn("no subscriber", res.err)
        self.fails(1, "processes", "quiet", "--all")
        self.assertEqual(self.r.hget("cogworker:process:" + ident, "quiet"), b"false")


# ======================================================================================
# Periodic entries


class Periodic(CtlCase):

    def publish(self, cron="*/5 * * * *", cls="Report", args='[{"section":"digest"}]',
                unique=None, retry=0):
        pjid = pjid_of(cron, cls, args)
        self.r.hset(PSCHEDULE, pjid, '{"cron":%s,"class":%s,"retry":%d,"unique":%s,"args":%s}'
                    % (json.dumps(cron), json.dumps(cls), retry, json.dumps(unique), args))
        return pjid

    def test_ctl20_list_disable_enable(self):
        avoid_minute_boundary(margin=3, period=300)     # next_run is read against now
        p1 = self.publish()
        p2 = self.publish(cron="0 3 * * *", cls="Nightly", args="[12345678901234567890]",
                          unique="until_executed")
        self.r.set("periodic:last_slot:" + p2, 1767225600)
        now = self.now()
        out = {e["pjid"]: e for e in self.js("periodic")}
        self.assertEqual(set(out), {p1, p2})
        e1 = out[p1]
        self.assertEqual((e1["cron"], e1["class"], e1["args"], e1["retry"], e1["unique"],
                          e1["enabled"], e1["last_run"]),
                         ("*/5 * * * *", "Report", [{"section": "digest"}], 0, None, True, None))
        self.assertEqual(e1["next_run"], (int(now) // 300 + 1) * 300)
        e2 = out[p2]
        self.assertEqual((e2["unique"], e2["last_run"]), ("until_executed", 1767225600))
        self.assertGreater(e2["next_run"], now)
        self.assertLessEqual(e2["next_run"], now + 86400 + 3600)
        rows = {r[2]: r for r in self.table_rows(self.ok("periodic").out)}
        self.assertEqual(rows["Report"][0], p1[:12])
        self.assertEqual(rows["Report"][1], "*/5 * * * *")
        self.assertEqual(rows["Report"][4], "never")
        self.assertRegex(rows["Report"][5], r"^\d{4}-\d\d-\d\dT\d\d:\d[05]:00Z \(in ")
        self.assertEqual(rows["Report"][-1], "Enabled")
        self.assertTrue(rows["Nightly"][4].startswith("2026-01-01T00:00:00Z ("))
        self.assertEqual(rows["Nightly"][6], "until_executed")

        self.assertEqual(self.ok("periodic", "disable", p1).out, "disabled %s\n" % p1)
        self.assertEqual(self.r.smembers(DISABLED), {p1.encode()})
        self.fails(1, "periodic", "disable", p1)
        rows = {r[2]: r for r in self.table_rows(self.ok("periodic").out)}
        self.assertEqual(rows["Report"][-1], "Disabled")
        self.assertEqual(self.js("periodic", "enable", p1[:8]),     # a unique prefix
                         {"pjid": p1, "enabled": True, "changed": True})
        self.assertEqual(self.r.smembers(DISABLED), set())

    def test_ctl21_pr3_run_pushes_an_ordinary_job(self):
        pjid = self.publish(args='[12345678901234567890,{"k":1.10}]', unique="until_executed")
        before = time.time()
        res = self.ok("periodic", "run", pjid)
        jid = res.out.strip()
        self.assertRegex(jid, r"^[0-9a-f]{24}$")
        [raw] = self.queue()
        j = json.loads(raw)
        self.assertEqual(j["jid"], jid)
        self.assertEqual(j["class"], "Report")
        self.assertIn('"args":[12345678901234567890,{"k":1.10}]', raw)
        self.assertEqual(j["queue"], "default")
        self.assertFalse([k for k in j if k.startswith("periodic_")])
        self.assertNotIn("unique", j)
        for k in ("created_at", "enqueued_at"):
            self.assertIsInstance(j[k], float)
            self.assertGreaterEqual(j[k], before - 1)
        self.assertIn(b"default", self.r.smembers(QUEUES))
        out = self.js("periodic", "run", pjid[:10])
        self.assertEqual(out["pjid"], pjid)
        self.assertEqual(self.r.llen(qkey("default")), 2)

    def test_pr1_run_with_an_unwritable_queue_listing_pushes_once(self):
        pjid = self.publish()
        self.r.set(QUEUES, "oops")
        res = self.ctl("periodic", "run", pjid)
        self.assertEqual(res.rc, 0, res)
        self.assertRegex(res.out.strip(), r"^[0-9a-f]{24}$")
        self.assertEqual(self.r.llen(qkey("default")), 1)
        self.assertIn("cogworker:queues", res.err)     # only logged
        self.assertEqual(self.r.get(QUEUES), b"oops")

    def test_pr4_status_queued_when_status_is_on(self):
        pjid = self.publish()
        conf = os.path.join(self.workdir, "status.conf")
        with open(conf, "w") as f:
            f.write("status_expiration = 600;\n")
        jids = [self.ok("periodic", "run", pjid, conf=conf).out.strip(),
                self.ok("push", "Work", conf=conf).out.strip()]
        for jid, cls in zip(jids, ("Report", "Work")):
            st = self.r.hgetall("status:" + jid)
            self.assertEqual((st[b"status"], st[b"class"], st[b"queue"]),
                             (b"queued", cls.encode(), b"default"))
            self.assertGreater(self.r.ttl("status:" + jid), 500)
        # status off (the default): nothing written
        jid = self.ok("periodic", "run", pjid).out.strip()
        self.assertFalse(self.r.exists("status:" + jid))

    def test_ambiguous_prefix_is_a_usage_error(self):
        self.r.hset(PSCHEDULE, "abcd" + "0" * 36, '{"cron":"* * * * *","class":"A","args":[]}')
        self.r.hset(PSCHEDULE, "abcd" + "1" * 36, '{"cron":"* * * * *","class":"B","args":[]}')
        res = self.fails(2, "periodic", "run", "abcd")
        self.assertIn("pjid prefix abcd is ambiguous: 2 entries start with it (abcd", res.err)
        self.assertIn("abcd00000000", res.err)
        self.assertIn("abcd11111111", res.err)
        self.assertFalse(self.r.exists(qkey("default")))

    def test_ctl20_any_unambiguous_prefix_however_short(self):
        """CTL-20: `periodic disable d83` works when one pjid starts with d83, as the help
        says: any unambiguous prefix, not only one of 4 characters or more."""
        self.r.hset(PSCHEDULE, "d83" + "0" * 37, '{"cron":"* * * * *","class":"A","args":[]}')
        self.r.hset(PSCHEDULE, "e" + "1" * 39, '{"cron":"* * * * *","class":"B","args":[]}')
        self.assertEqual(self.ok("periodic", "disable", "d83").out,
                         "disabled %s\n" % ("d83" + "0" * 37))
        self.assertEqual(self.ok("periodic", "disable", "e").out, "disabled %s\n" % ("e" + "1" * 39))
        self.assertEqual(self.r.smembers(DISABLED), {b"d83" + b"0" * 37, b"e" + b"1" * 39})
        res = self.fails(1, "periodic", "enable", "f")
        self.assertIn("no periodic entry f in periodic:schedule", res.err)


# ======================================================================================
# Stats


class Stats(CtlCase):

    def test_ctl22_stats_agree_with_redis(self):
        self.r.set("cogworker:stats:processed", 41)
        self.r.set("cogworker:stats:failed", 7)
        self.r.sadd(QUEUES, "default", "low", "empty")
        for _ in range(3):
            self.push(job("W"))
        self.push(job("W", queue="low"), "low")
        self.r.zadd(SCHEDULE, {entry(failed=False): 1})
        self.r.zadd(RETRY, {entry(): 1, entry(): 2})
        self.r.zadd(DEAD, {entry(): 1, entry(): 2, entry(): 3})
        for ident, busy in (("h:1:aaaaaaaaaaaa", "2"), ("h:2:bbbbbbbbbbbb", "1")):
            self.r.hset("cogworker:process:" + ident, mapping={"info": "{}", "busy": busy,
                                                                "quiet": "false"})
            self.r.sadd(PROCESSES, ident)
        self.r.sadd(PROCESSES, "h:3:cccccccccccc")          # no presence: not counted
        hour = int(self.now()) // 3600
        self.r.hset("cogworker:throughput:%d" % hour, mapping={"processed": 5, "failed": 2})
        self.r.hset("cogworker:throughput:%d" % (hour - 23), mapping={"processed": 9})
        self.r.hset("cogworker:throughput:%d" % (hour - 24), mapping={"processed": 99})
        s = self.js("stats")
        self.assertEqual({k: v for k, v in s.items() if k != "throughput"},
                         {"processed": 41, "failed": 7, "enqueued": 4, "scheduled": 1,
                          "retry": 2, "dead": 3, "busy": 3, "processes": 2})
        tp = s["throughput"]
        self.assertEqual(len(tp), 24)
        self.assertEqual(tp[-1], {"hour": hour * 3600, "processed": 5, "failed": 2})
        self.assertEqual(tp[0], {"hour": (hour - 23) * 3600, "processed": 9, "failed": 0})
        self.assertEqual(sum(t["processed"] for t in tp), 14)
        text = self.ok("stats").out
        for name, v in (("processed", 41), ("failed", 7), ("enqueued", 4), ("scheduled", 1),
                        ("retry", 2), ("dead", 3), ("busy", 3), ("processes", 2)):
            self.assertRegex(text, r"(?m)^%s +%d$" % (name, v))
        self.assertRegex(text, r"(?m)T\d\d:00Z +5 +2$")
        # the totals, then only the two hours that had any, not 24 rows of mostly zeros
        self.assertIn("throughput, last 24 hours (UTC): 14 processed, 2 failed; the hours "
                      "with any:\n", text)
        hours = re.findall(r"(?m)^\d{4}-\d\d-\d\dT\d\d:00Z .*$", text)
        self.assertEqual(len(hours), 2, text)
        self.assertRegex(hours[0], r" +9 +0$")

    def test_stats_of_an_empty_redis(self):
        s = self.js("stats")
        self.assertEqual(s["processed"] + s["enqueued"] + s["dead"] + s["processes"], 0)
        self.assertEqual(len(s["throughput"]), 24)
        text = self.ok("stats").out
        self.assertTrue(text.endswith("\nthroughput, last 24 hours (UTC): nothing processed or "
                                      "failed\n"), text)


# ======================================================================================
# exec: a handler run locally, without Redis


class Exec(CtlCase):

    def exec_conf(self):
        runs = os.path.join(self.workdir, "runs")
        env = '"RUNS=%s"' % runs
        path = os.path.join(self.workdir, "exec.conf")
        with open(path, "w") as f:
            f.write("""handlers = (
  { class = "R"; command = ["%s"]; env = [%s]; args_as_argv = true; },
  { class = "Exit"; command = ["%s"]; env = [%s]; args_as_argv = true;
    dead_exit_codes = [3]; discard_exit_codes = [4]; },
  { class = "Fail"; command = ["%s"]; env = [%s]; },
  { class = "Slow"; command = ["%s", "5"]; env = [%s]; timeout = 0.5; kill_grace = 1; },
  { class = "Echo"; command = ["/bin/echo"]; args_as_argv = true; }
);
""" % (handler("dump")[0], env, handler("exit")[0], env, handler("fail")[0], env,
                handler("slow")[0], env))
        return path, runs

    def test_ctl23_runs_the_handler_with_the_contract_and_no_redis_writes(self):
        conf, runs = self.exec_conf()
        with Monitor(self.server) as mon:
            time.sleep(0.1)
            out = self.js("exec", "--json-args", '[1,"two",12345678901234567890]', "R",
                          conf=conf)
            self.r.echo("end-of-exec")
            wait_for(lambda: mon.commands("ECHO"), message="the marker")
            seen = [e for e in mon.entries() if e[2][0].upper() != b"ECHO"]
        self.assertEqual(seen, [])                          # nothing reached Redis
        jid = out["jid"]
        with open(runs) as f:
            self.assertEqual(f.read().split(), [jid])       # ran once
        with open(os.path.join(runs + ".d", jid + ".stdin")) as f:
            stdin = f.read()
        self.assertEqual(json.loads(stdin), out["job"])
        self.assertIn('"args":[1,"two",12345678901234567890]', stdin)
        job_ = json.loads(stdin)
        self.assertEqual((job_["class"], job_["queue"]), ("R", "default"))
        self.assertIsInstance(job_["enqueued_at"], float)
        with open(os.path.join(runs + ".d", jid + ".env")) as f:
            env = dict(l.rstrip("\n").split("=", 1) for l in f)
        self.assertEqual(env, {"COGWORKER_JID": jid, "COGWORKER_CLASS": "R",
                               "COGWORKER_QUEUE": "default", "COGWORKER_RETRY_COUNT": "0",
                               "COGWORKER_ARGS": '[1,"two",12345678901234567890]'})
        with open(os.path.join(runs + ".d", jid + ".argv")) as f:
            self.assertEqual(f.read().split("\n")[:3], ["1", "two", "12345678901234567890"])
        self.assertEqual((out["status"], out["exit_code"], out["outcome"], out["error_class"]),
                         ("exited", 0, "success", None))
        self.assertEqual(out["handler"], "R")
        self.assertEqual(out["command"][1:], ["1", "two", "12345678901234567890"])
        self.assertGreaterEqual(out["duration"], 0)
        self.assertLess(out["duration"], 5)

    def test_exec_works_with_redis_unreachable(self):
        conf, _ = self.exec_conf()
        url = "redis://127.0.0.1:%d/0" % free_port()
        res = self.ctl("exec", "Echo", "hello", "world", conf=conf, url=url)
        self.assertEqual(res.rc, 0, res)
        self.assertIn("outcome    success", res.out)
        self.assertIn("stdout:\nhello world\n", res.out)
        self.assertRegex(res.out, r"exit       status 0 after \d+\.\d{3}s \(pid \d+\)")

    def test_exec_reports_the_exit_code_map(self):
        conf, _ = self.exec_conf()
        cases = [
            (["Exit", "3"], "killed", 3),
            (["Exit", "4"], "discarded", 4),
            (["Exit", "5"], "retrying", 5),
            (["--retry", "false", "Exit", "5"], "dead", 5),
            (["--retry", "false", "Exit", "3"], "dead", 3),     # no retries left wins
        ]
        for args, outcome, code in cases:
            out = self.js("exec", *args, conf=conf, rc=1)
            self.assertEqual((out["outcome"], out["exit_code"], out["error_class"],
                              out["error_message"]),
                             (outcome, code, "Cogworker::HandlerFailed",
                              "exit status %d" % code), args)
        out = self.js("exec", "Fail", conf=conf, rc=1)
        self.assertEqual((out["outcome"], out["stderr"], out["error_message"]),
                         ("retrying", "kaboom\n", "exit status 1: kaboom"))
        res = self.ctl("exec", "Exit", "3", conf=conf)
        self.assertIn("outcome    dead (exit code 3 is in dead_exit_codes): it would go "
                      "straight to dead, with no retry\n", res.out)
        res = self.ctl("exec", "--retry", "false", "Exit", "5", conf=conf)
        self.assertIn("outcome    dead (retry is false: no retries): it would go to dead\n",
                      res.out)
        res = self.ctl("exec", "Fail", conf=conf)
        self.assertEqual(res.rc, 1)
        self.assertIn("outcome    retrying", res.out)
        self.assertIn("error      Cogworker::HandlerFailed: exit status 1: kaboom", res.out)
        self.assertIn("stderr:\nkaboom\n", res.out)

    def test_exec_timeout_and_no_handler(self):
        conf, _ = self.exec_conf()
        t0 = time.monotonic()
        out = self.js("exec", "Slow", conf=conf, rc=1)
        self.assertLess(time.monotonic() - t0, 4)
        self.assertEqual((out["status"], out["outcome"], out["error_class"], out["error_message"]),
                         ("timeout", "retrying", "Cogworker::HandlerTimeout",
                          "timed out after 0.5s"))
        out = self.js("exec", "Nope", conf=conf, rc=1)
        self.assertEqual((out["status"], out["handler"], out["command"], out["error_class"],
                          out["error_message"]),
                         ("no_handler", None, None, "Cogworker::NoHandler",
                          "no handler configured for class Nope"))


# ======================================================================================
# Against live daemons


GATE = [{"class": "G", "command": handler("gate")}, {"class": "K", "command": handler("ok")}]


def channel(identity):
    return "cogworker:signal:" + identity


class LiveDaemon(CtlCase):

    def subscribed(self, d):
        wait_for(lambda: self.r.execute_command("PUBSUB", "NUMSUB", channel(d.identity))[1]
                 == 1, message="the subscriber of " + d.identity)

    def quiet_field(self, d):
        return self.r.hget("cogworker:process:" + d.identity, "quiet")

    def test_ctl16_quiet_then_resume(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        self.subscribed(d)
        res = self.ok("processes", "quiet", d.identity)
        self.assertEqual(res.out, "sent quiet to %s\n" % d.identity)
        wait_for(lambda: self.quiet_field(d) == b"true", timeout=5)
        time.sleep(0.6)                 # a fetch begun before quiet has had its chance
        j = job("K")
        self.push(j)
        time.sleep(2.5)
        self.assertEqual(d.runs_of(jid_of(j)), 0)
        self.assertEqual(self.r.llen(qkey("default")), 1)
        [p] = self.js("processes")
        self.assertIs(p["quiet"], True)
        self.assertEqual(p["pid"], d.proc.pid)
        self.ok("processes", "resume", d.identity)
        wait_for(lambda: self.quiet_field(d) == b"false", timeout=5)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1, timeout=5)

    def test_ctl28_quiet_by_pid(self):
        """CTL-28: `processes quiet PID` quiets the live process with that pid; a pid or
        name that matches none says what an identity looks like, with the live ones."""
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        self.subscribed(d)
        res = self.ok("processes", "quiet", str(d.proc.pid))
        self.assertEqual(res.out, "sent quiet to %s\n" % d.identity)
        wait_for(lambda: self.quiet_field(d) == b"true", timeout=5)
        out = self.js("processes", "resume", str(d.proc.pid))
        self.assertEqual(out, [{"identity": d.identity, "signal": "resume", "received": True}])
        wait_for(lambda: self.quiet_field(d) == b"false", timeout=5)
        res = self.fails(1, "processes", "quiet", "1")
        self.assertEqual(res.err, "cogworkerctl: no live process 1: give an identity "
                         "(host:pid:id, as `cogworkerctl processes` lists them: %s) or the pid "
                         "of one\n" % d.identity)
        # the same pid on another host is ambiguous: nothing is sent
        other = "elsewhere:%d:0123456789ab" % d.proc.pid
        self.r.hset("cogworker:process:" + other, mapping={
            "info": json.dumps({"pid": d.proc.pid}), "busy": "0", "quiet": "false"})
        self.r.sadd(PROCESSES, other)
        res = self.fails(1, "processes", "quiet", str(d.proc.pid))
        self.assertIn("pid %d is live on 2 hosts (" % d.proc.pid, res.err)
        self.assertIn("): give the identity", res.err)
        time.sleep(0.5)
        self.assertEqual(self.quiet_field(d), b"false")

    def test_ctl17_quiet_all_and_resume_all(self):
        d1 = self.daemon(handlers=GATE, heartbeat_interval=1)
        d2 = self.daemon(handlers=GATE, heartbeat_interval=1)
        self.subscribed(d1)
        self.subscribed(d2)
        out = self.js("processes", "quiet", "--all")
        self.assertEqual(sorted(x["identity"] for x in out), sorted([d1.identity, d2.identity]))
        self.assertTrue(all(x["received"] and x["signal"] == "quiet" for x in out))
        for d in (d1, d2):
            wait_for(lambda: self.quiet_field(d) == b"true", timeout=5)
        self.ok("processes", "resume", "--all")
        for d in (d1, d2):
            wait_for(lambda: self.quiet_field(d) == b"false", timeout=5)

    def test_ctl18_stop(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        self.subscribed(d)
        self.ok("processes", "stop", d.identity)
        self.assertEqual(d.wait_exit(40), 0)
        self.assertEqual(self.js("processes"), [])

    def test_running_job_is_listed_shown_and_not_deleted(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        j = job("G", ["x"])
        self.push(j)
        jid = jid_of(j)
        wait_for(lambda: self.r.hlen("cogworker:workers:" + d.identity) == 1)
        [e] = self.js("jobs", "list", "--set", "running")
        self.assertEqual((e["jid"], e["process"], e["queue"], e["raw"]), (jid, d.identity,
                                                                         "default", j))
        self.assertLessEqual(abs(e["run_at"] - time.time()), 10)
        shown = self.js("jobs", "show", jid)
        # once: its in-progress entry is not a second copy of it (issue 21 item 20)
        self.assertEqual([l["set"] for l in shown["locations"]], ["running"])
        text = self.ok("jobs", "show", jid).out
        self.assertEqual(text.count("\nwhere "), 1, text)
        self.assertEqual(text.count("\npayload "), 1, text)
        [p] = self.js("processes")
        self.assertEqual(p["busy"], 1)
        res = self.fails(1, "jobs", "delete", jid)
        self.assertIn("running", res.err)
        self.assertIn("on " + d.identity, self.ok("jobs", "list", "--set", "running").out)
        d.open_gate(jid)
        wait_for(lambda: self.r.hlen("cogworker:workers:" + d.identity) == 0)

    def test_retry_of_a_dead_job_makes_it_run_again(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        e = entry("K", args="[]")
        self.r.zadd(DEAD, {e: 1})
        self.ok("jobs", "retry", jid_of(e))
        wait_for(lambda: d.runs_of(jid_of(e)) == 1, timeout=10)
        wait_for(lambda: self.r.get("cogworker:stats:processed") == b"1")
        self.assertEqual(self.r.zcard(DEAD), 0)

    def test_show_says_a_cancelled_job_was_cancelled(self):
        """CTL-25: a job cancelled with `jobs cancel` is shown as cancelled, not as "cut
        short with 25 of 25 retries left (killed, orphaned or interrupted too often)"."""
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        j = job("G")
        self.push(j)
        wait_for(lambda: self.r.hlen("cogworker:workers:" + d.identity) == 1)
        self.ok("jobs", "cancel", jid_of(j))
        text = self.ok("jobs", "show", jid_of(j)).out
        self.assertIn("retries    dead after 1 failure(s): cancelled on request (jobs cancel), "
                      "which skips the retries\n", text)
        self.assertNotIn("cut short", text)
        self.assertIn("error      Cogworker::Cancelled: cancelled on request", text)

    def test_ctl26_retry_of_an_expired_job_is_refused_or_given_a_new_deadline(self):
        """CTL-26 (and CTL-25's JobExpired): `jobs retry` of a job buried as Cogworker::JobExpired by its own past
        expires_at is refused with the reason (it would be buried again at once), and
        --expires-in gives it a new deadline, after which it runs."""
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        j = job("K", expires_at=time.time() - 60)
        self.push(j)
        jid = jid_of(j)
        wait_for(lambda: self.r.zcard(DEAD) == 1, timeout=10, message="buried as expired")
        [dead] = self.zmembers(DEAD)
        self.assertEqual(json.loads(dead)["error_class"], "Cogworker::JobExpired")
        text = self.ok("jobs", "show", jid).out
        self.assertIn("its deadline passed before it started, which skips the retries "
                      "(jobs retry --expires-in D gives it a new one)\n", text)
        res = self.fails(1, "jobs", "retry", jid)
        self.assertIn("%s in dead expired at " % jid, res.err)
        self.assertIn("retrying it would bury it again at once: give it a new deadline "
                      "with --expires-in D", res.err)
        self.assertEqual(self.zmembers(DEAD), [dead])            # left where it was
        out = self.js("jobs", "retry", jid, rc=1)
        self.assertEqual(out["results"][0]["result"], "refused")
        # --all refuses it the same way
        self.fails(1, "jobs", "retry", "--all", "--set", "dead")
        self.assertEqual(self.zmembers(DEAD), [dead])
        # a bad duration is a usage error, before anything moves
        self.fails(2, "jobs", "retry", "--expires-in", "soon", jid)
        # Quiet, so the retried job can be read on its queue before it runs.
        self.subscribed(d)
        self.ok("processes", "quiet", d.identity)
        wait_for(lambda: self.quiet_field(d) == b"true", timeout=5)
        time.sleep(0.6)                 # a fetch begun before quiet has had its chance
        before = time.time()
        res = self.ok("jobs", "retry", "--expires-in", "10m", jid)
        self.assertIn("retried %s: dead -> queue default, expires_at " % jid, res.out)
        [queued] = self.queue()
        self.assertGreaterEqual(json.loads(queued)["expires_at"], before + 599)
        self.assertLess(json.loads(queued)["expires_at"], time.time() + 601)
        self.assertEqual(self.r.zcard(DEAD), 0)
        self.ok("processes", "resume", d.identity)
        wait_for(lambda: d.runs_of(jid) == 1, timeout=10, message="the retried job ran")

    def test_dh11_no_on_death_for_ctl_delete_retry_or_kill(self):
        rec = os.path.join(self.workdir, "deaths")
        d = self.daemon(handlers=GATE + [{"class": "F", "command": handler("fail")}],
                        heartbeat_interval=1,
                        on_death=[["/bin/sh", "-c", "cat >> %s; echo >> %s" % (rec, rec)]])
        # the recorder works: a real death runs it once
        dying = job("F", retry=False)
        self.push(dying)
        def recorded():
            try:
                with open(rec) as f:
                    return f.read()
            except FileNotFoundError:
                return ""
        wait_for(lambda: jid_of(dying) in recorded(), timeout=10,
                 message="on_death for a real death")
        before = recorded()
        gone, again, killed = entry("K", args="[]"), entry("K", args="[]"), entry("K")
        self.r.zadd(DEAD, {gone: 1, again: 2})
        self.r.zadd(RETRY, {killed: time.time() + 3600})
        self.ok("jobs", "delete", jid_of(gone))
        self.ok("jobs", "retry", jid_of(again))
        self.ok("jobs", "kill", jid_of(killed))
        self.ok("jobs", "delete", jid_of(dying))            # the real dead entry
        wait_for(lambda: d.runs_of(jid_of(again)) == 1, timeout=10)
        time.sleep(1.0)
        self.assertEqual(recorded(), before)

    def test_push_in_2_runs_about_two_seconds_later(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1, poll_interval=1)
        t0 = time.time()
        jid = self.ok("push", "--in", "2", "K").out.strip()
        self.assertEqual(self.js("jobs", "list", "--set", "scheduled")[0]["jid"], jid)
        wait_for(lambda: d.runs_of(jid) == 1, timeout=15)
        took = time.time() - t0
        self.assertGreaterEqual(took, 1.9)
        self.assertLess(took, 8)


if __name__ == "__main__":
    unittest.main()

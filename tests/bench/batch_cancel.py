#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""`cogworkerctl batch cancel` of a large batch (issue 32; doc/performance.md "Batches at
scale"):

    tests/bench/batch_cancel.py [--build DIR] [--members N] [--other N]

Starts its own redis-server, makes a batch of N members (100 000 by default) laid out as
the producer lays them out (members pending, their jobs spread over two queues, the
schedule and retry, one in twenty waiting for another member, plus a job outside the
batch waiting for each of the first 100 waiting ones), beside --other unrelated jobs
queued, then times `cogworkerctl batch cancel --yes --json` and reads SLOWLOG (every call
over 100 us: Redis logs the commands a script runs as well, and at 0 they would crowd
the calls out) for the script calls' durations. Prints the figures; never fails.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "integration"))
from harness import REPO, RedisServer  # noqa: E402

B = "cogworker:batch:"


def job(jid, bid, queue):
    return json.dumps({"class": "Work", "args": [1, "x" * 40], "queue": queue, "jid": jid,
                       "bid": bid, "created_at": 1767225600.5,
                       "enqueued_at": 1767225600.5}, separators=(",", ":"))


def make_batch(r, bid, members, other):
    """The keys BATCH_OPEN and BATCH_PUSH write, written in pipelines."""
    r.hset(B + bid, mapping={"state": "committed", "created_at": 1767225600, "parent": "",
                             "total": members, "on_complete": "All", "on_success": "Done",
                             "callback_queue": "default", "callback_args": "[]"})
    r.zadd(B + "list", {bid: 1767225600})
    p = r.pipeline(transaction=False)
    for i in range(members):
        jid = "%s%08d" % (bid[:16], i)
        p.sadd(B + bid + ":pending", jid)
        raw = job(jid, bid, "q%d" % (i % 2))
        kind = i % 20
        if kind == 0 and i > 0:               # waits for the member before it
            dep = "%s%08d" % (bid[:16], i - 1)
            p.hset(B + "wait:" + jid, mapping={"payload": raw, "queue": "q0", "any": "0",
                                               "at": "", "bid": bid})
            p.sadd(B + "after:" + jid, dep)
            p.sadd(B + "dependants:" + dep, jid)
            p.zadd(B + "waiting", {jid: 1767225600 + i})
            if i <= 2000:                     # and a job outside waits for it
                out = "out%021d" % i
                p.hset(B + "wait:" + out, mapping={"payload": job(out, "", "q0").replace(
                    ',"bid":""', ""), "queue": "q0", "any": "0", "at": "", "bid": ""})
                p.sadd(B + "after:" + out, jid)
                p.sadd(B + "dependants:" + jid, out)
                p.zadd(B + "waiting", {out: 1767225600 + i})
        elif kind == 1:
            p.zadd("cogworker:schedule", {raw: 1867225600 + i})
        elif kind == 2:
            p.zadd("cogworker:retry", {raw: 1867225600 + i})
        else:
            p.lpush("cogworker:queue:q%d" % (i % 2), raw)
        if i % 5000 == 4999:
            p.execute()
    for i in range(other):
        p.lpush("cogworker:queue:q%d" % (i % 2), job("oth%021d" % i, "", "q%d" % (i % 2))
                .replace(',"bid":""', ""))
        if i % 5000 == 4999:
            p.execute()
    p.sadd("cogworker:queues", "q0", "q1")
    p.execute()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--members", type=int, default=100000)
    ap.add_argument("--other", type=int, default=100000)
    a = ap.parse_args()
    server = RedisServer()
    try:
        r = server.client()
        bid = "ab" * 12
        t0 = time.monotonic()
        make_batch(r, bid, a.members, a.other)
        made = time.monotonic() - t0
        r.config_set("slowlog-log-slower-than", 100)   # the scripts' own commands too
        r.config_set("slowlog-max-len", 1000000)
        r.slowlog_reset()
        env = dict(os.environ, REDIS_URL=server.url)
        t0 = time.monotonic()
        p = subprocess.run([os.path.join(a.build, "cogworkerctl"), "--json", "--yes",
                            "batch", "cancel", bid], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=3600)
        took = time.monotonic() - t0
        log = r.slowlog_get(1000000)
        scripts = [e["duration"] for e in log
                   if e["command"].split(b" ")[0].upper() in (b"EVALSHA", b"EVAL")]
        out = json.loads(p.stdout.decode().strip().splitlines()[-1])
        print("members %d (+%d other jobs queued), made in %.1f s" % (a.members, a.other, made))
        print("batch cancel: exit %d in %.2f s; %s" % (p.returncode, took, json.dumps(out)))
        scripts.sort()
        print("script calls over 100 us %d (SLOWLOG %d entries): p50 %.1f ms, p99 %.1f ms, "
              "longest %.1f ms, total %.0f ms" % (
                  len(scripts), len(log), scripts[len(scripts) // 2] / 1000,
                  scripts[int(len(scripts) * 0.99)] / 1000, scripts[-1] / 1000,
                  sum(scripts) / 1000))
        print("left: pending %d, queued q0+q1 %d, schedule %d, retry %d, waiting %d" % (
            r.scard(B + bid + ":pending"), r.llen("cogworker:queue:q0") +
            r.llen("cogworker:queue:q1"), r.zcard("cogworker:schedule"),
            r.zcard("cogworker:retry"), r.zcard(B + "waiting")))
    finally:
        server.stop()


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""What history costs per job at Redis (doc/performance.md "History"): the write of a run's
history entry and its jid index (doc/protocol.md §7.22).

    tests/bench/history_cost.py [--build DIR] [--jobs N] [--reps N]

A redis-server of its own (tests/integration/harness.py); N /bin/true jobs at concurrency 4,
status off, alternately with history off and on (history_retention_days = 30); N/2 of
them fail once and succeed on their retry (retry 1, no backoff wait: the retry is moved by
the test at once), the other half succeed at once, so a job's runs are 1 or 2. For each run:
Redis commands per job (INFO commandstats, what scripts call counted too), commands the
daemon sent per job (MONITOR would be slower: the client's own are calls less the inner
calls of scripts, taken as the calls of EVALSHA/EVAL plus the non-script commands), bytes
the daemon sent per job (INFO stats total_net_input_bytes), redis-server CPU per job, and,
with history on, the memory of the history keys per job (MEMORY USAGE). The difference
on - off is history's write cost. Prints a table; never fails on a number.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from harness import Daemon, RedisServer, job, wait_for  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
PROCESSED = b"cogworker:stats:processed"


def proc_cpu(pid):
    with open("/proc/%d/stat" % pid) as f:
        v = f.read().rsplit(")", 1)[1].split()
    return (int(v[11]) + int(v[12])) / CLK_TCK


FLAKY = ('f="$RUNS.$COGWORKER_JID"; if [ -e "$f" ]; then exit 0; fi; : > "$f"; exit 1')


def one(server, build, n, history):
    r = server.client()
    r.flushall()
    work = tempfile.mkdtemp(prefix="cw-hc-")
    p = r.pipeline(transaction=False)
    for i in range(n):
        cls = "Flaky" if i % 2 else "True"
        p.lpush(b"cogworker:queue:default", job(cls, retry=1))
    p.execute()
    settings = {"concurrency": 4, "log_level": "warn", "status_expiration": 0,
                "history_retention_days": 30 if history else 0,
                "handlers": [{"class": "True", "command": ["/bin/true"]},
                             {"class": "Flaky", "command": ["/bin/sh", "-c", FLAKY]}]}
    d = Daemon(server, work, **settings)
    r.config_resetstat()
    c0 = proc_cpu(server.pid)
    s0 = r.info("stats")
    d.start(wait=False)
    polls = 0
    try:
        # Half fail once: their retries wait in the retry set; move them to the queue at
        # once (what the poller would do after the backoff), counting our own commands.
        while True:
            polls += 1
            done = int(r.get(PROCESSED) or 0)
            if done >= n:
                break
            due = r.zrange(b"cogworker:retry", 0, -1)
            polls += 1
            for m in due:
                if r.zrem(b"cogworker:retry", m):
                    r.lpush(b"cogworker:queue:default", m)
                    polls += 2
                else:
                    polls += 1
            time.sleep(0.05)
        stats = r.info("stats")
        cmds = r.info("commandstats")
        c1 = proc_cpu(server.pid)
    finally:
        d.stop()
    # Ours: GET, ZRANGE, ZREM, LPUSH (polls), CONFIG RESETSTAT's INFO stats, the INFO calls
    # at the end; counted apart per command below where it matters.
    calls = {k[len("cmdstat_"):]: v["calls"] for k, v in cmds.items()}
    total = sum(calls.values()) - polls - 3
    script = calls.get("evalsha", 0) + calls.get("eval", 0)
    mem = 0
    if history:
        for key in r.scan_iter(b"cogworker:history:*", count=1000):
            mem += r.memory_usage(key) or 0
    net = stats["total_net_input_bytes"] - s0["total_net_input_bytes"]
    return {"commands": total / n, "scripts": script / n, "bytes": net / n,
            "redis_us": (c1 - c0) / n * 1e6, "mem": mem / n, "calls": calls}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=3)
    opts = ap.parse_args()
    os.environ["COGWORKERD_BUILD"] = os.path.abspath(opts.build)
    server = RedisServer()
    rows = {False: [], True: []}
    try:
        for _ in range(opts.reps):
            for history in (False, True):
                rows[history].append(one(server, opts.build, opts.jobs, history))
    finally:
        server.stop()
    med = {h: {k: statistics.median(x[k] for x in v) for k in ("commands", "scripts", "bytes",
                                                                 "redis_us", "mem")}
           for h, v in rows.items()}
    print("jobs %d a run (half fail once, then succeed), %d runs each, medians"
          % (opts.jobs, opts.reps))
    print("%-12s %10s %10s %10s %12s %12s" % ("history", "cmds/job", "scripts/job",
                                               "bytes/job", "redis us/job", "mem B/job"))
    for h in (False, True):
        m = med[h]
        print("%-12s %10.2f %10.2f %10.0f %12.0f %12.0f" % ("on" if h else "off", m["commands"],
              m["scripts"], m["bytes"], m["redis_us"], m["mem"]))
    print("%-12s %10.2f %10.2f %10.0f %12.0f" % ("on - off", med[True]["commands"] -
          med[False]["commands"], med[True]["scripts"] - med[False]["scripts"],
          med[True]["bytes"] - med[False]["bytes"], med[True]["redis_us"] -
          med[False]["redis_us"]))
    last = rows[True][-1]["calls"]
    print("history on, calls per job by command: " + ", ".join(
        "%s %.2f" % (k, v / opts.jobs) for k, v in sorted(last.items()) if v >= opts.jobs / 10))


if __name__ == "__main__":
    main()

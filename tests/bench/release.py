# SPDX-License-Identifier: MIT
"""What releasing a job's dependants costs Redis (doc/performance.md "Releasing many
dependants", doc/protocol.md §6.26): N jobs wait for one job, which then settles; the
settle is called as the daemon calls it (BATCH_SETTLE again while it says more is left)
and each call is timed, by the client and by Redis itself (INFO commandstats, the
server's own microseconds in scripts). With --rev, the scripts of that git revision are
timed the same way on a fresh server, for a before/after.

Run: python3 tests/bench/release.py [--n 100000] [--rev REV] [--outcome dead]
(needs `make all`: the scripts as the build expands them).
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
from harness import REPO, RedisServer, load_script  # noqa: E402
import redis  # noqa: E402

BATCH, QUEUE, QUEUES = "cogworker:batch:", "cogworker:queue:", "cogworker:queues"
DEAD, SCHEDULE = "cogworker:dead", "cogworker:schedule"


def script_at(rev, name):
    """lua/<name>.lua of git revision rev, its --@include lines expanded as the build does."""
    def show(path):
        return subprocess.check_output(["git", "-C", REPO, "show", "%s:%s" % (rev, path)],
                                       text=True)
    out = []
    for line in show("lua/%s.lua" % name).split("\n"):
        if line.startswith("--@include "):
            out.append(show("lua/lib/%s.lua" % line.split()[1]).rstrip("\n"))
        else:
            out.append(line)
    return "\n".join(out)


def redis_usec(r):
    """Microseconds Redis spent in EVAL and EVALSHA so far."""
    stats = r.info("commandstats")
    return sum(stats.get("cmdstat_" + c, {}).get("usec", 0) for c in ("eval", "evalsha"))


def run(n, outcome, text_of):
    with RedisServer() as srv:
        # no read timeout: the old scripts' one call for 100 000 runs for seconds
        r = redis.Redis(unix_socket_path=srv.unix_socket)
        common = [BATCH, QUEUE, QUEUES, DEAD, SCHEDULE, str(int(time.time())), "604800", "600"]
        push = r.script_load(text_of("batch_push"))
        settle = r.script_load(text_of("batch_settle"))
        pipe = r.pipeline(transaction=False)
        for k in range(n):
            w = "w%023d" % k
            raw = json.dumps({"class": "W", "args": [], "queue": "default", "jid": w})
            pipe.evalsha(push, 0, *(common + [w, raw, "default", "", "", "", "0", "a" * 24]))
            if len(pipe) >= 1000:
                pipe.execute()
        pipe.execute()
        calls = []
        more = 1
        while more:
            before, t0 = redis_usec(r), time.monotonic()
            rep = r.evalsha(settle, 0, *(common + ["a" * 24, outcome, ""]))
            calls.append(((time.monotonic() - t0) * 1000, (redis_usec(r) - before) / 1000))
            more = rep[2] if len(rep) > 2 and isinstance(rep[2], int) else 0
        done = r.llen(QUEUE + "default") + r.zcard(DEAD)
        left = r.zcard(BATCH + "waiting")
        return calls, done, left


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100000, help="dependants (100000)")
    ap.add_argument("--outcome", default="success", help="success (released) or dead (buried)")
    ap.add_argument("--rev", help="also time the scripts of this git revision")
    opts = ap.parse_args()
    runs = [("this tree", load_script)]
    if opts.rev:
        runs.insert(0, (opts.rev, lambda name: script_at(opts.rev, name)))
    for label, text_of in runs:
        calls, done, left = run(opts.n, opts.outcome, text_of)
        client = [c[0] for c in calls]
        server = [c[1] for c in calls]
        print("%s: %d dependants %s in %d call(s), %d left waiting; per call (ms, Redis's "
              "own / client's): longest %.1f / %.1f, median %.1f / %.1f; total %.0f / %.0f"
              % (label, done, "released" if opts.outcome == "success" else "buried",
                 len(calls), left, max(server), max(client), sorted(server)[len(server) // 2],
                 sorted(client)[len(client) // 2], sum(server), sum(client)))


if __name__ == "__main__":
    main()

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Warm against cold for a Python handler that imports for a while (issue 22's target: a
handler whose import takes ~200 ms runs ≥ 50× more jobs/s warm than cold):

    tests/bench/warm_libs.py [--build DIR] [--concurrency 4] [--import-ms 200]
                             [--cold-jobs 60] [--warm-jobs 20000] [--reps 3] [--others]

The same function twice, as Debian's python3 runs it: a cold handler script (the import,
standing for a framework, is a time.sleep; then the job on stdin, then exit 0) and a warm
one on handlers/python/cogworker_handler.py (the same import once per process, then
run()); with --others, an empty job on the Ruby and Node.js libraries too. Each
repetition pushes the jobs first, starts a daemon (log_level "warn") and times the jobs
from the moment a tenth of them are taken (the warm processes have started, the cold
pipeline is full) to the last one done: jobs/s. Prints one line per run and the medians.
A measurement, not a test: nothing fails on a slow number, and the machine's other load
shows in it (the load average is printed).
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
# bench.py runs this again under Debian's python3 when the first python3 lacks
# python3-redis, and puts the test harness on the path.
import bench  # noqa: E402,F401
from harness import Daemon, RedisServer, job  # noqa: E402

QUEUE = b"cogworker:queue:default"

# The job's function is the same in both; only what surrounds it differs.
FUNCTION = '''
def perform(args):
    return sum(len(str(a)) for a in args)
'''
COLD = '''#!/usr/bin/python3
import json, sys, time
time.sleep(%(import_s)r)              # the import of a framework
''' + FUNCTION + '''
perform(json.load(sys.stdin)["args"])
'''
WARM = '''#!/usr/bin/python3
import sys, time
sys.path.insert(0, %(lib)r)
import cogworker_handler as cw
time.sleep(%(import_s)r)              # the import of a framework
''' + FUNCTION + '''
cw.run(lambda job: perform(job.args))
'''
# The other libraries' cost per job: an empty perform, Sidekiq's way in Ruby.
RUBY = '''#!/usr/bin/ruby
$LOAD_PATH.unshift %(rblib)r
require "cogworker_handler"
class Noop
  def perform(*); end
end
CogworkerHandler.run(Noop)
'''
NODE = '''#!/usr/bin/node
const cw = require(%(jslib)r);
cw.run(() => {});
'''


def write_handler(d, name, text, **values):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text % values)
    os.chmod(path, 0o755)
    return path


def push_jobs(r, n):
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.lpush(QUEUE, job("Bench", [i, "x" * 16]))
        if i % 1000 == 999:
            p.execute()
    p.execute()


def in_progress(r):
    return sum(r.llen(k) for k in r.scan_iter(match=b"cogworker:inprogress:*"))


def drain(r, n, alive, timeout):
    """jobs/s from the moment a tenth of the jobs are taken to the moment the rest are
    done: the queue empty, and no job left on an in-progress list."""
    lead = max(1, n // 10)
    deadline = time.monotonic() + timeout
    while r.llen(QUEUE) > n - lead:
        if not alive() or time.monotonic() > deadline:
            raise RuntimeError("no job taken")
        time.sleep(0.002)
    t1, k1 = time.monotonic(), r.llen(QUEUE)
    while r.llen(QUEUE) > 0 or in_progress(r) > 0:
        if not alive() or time.monotonic() > deadline:
            raise RuntimeError("stalled with %d of %d left" % (r.llen(QUEUE), n))
        time.sleep(0.002)
    return k1 / (time.monotonic() - t1)


def one_run(server, workdir, command, warm, conc, n):
    r = server.client()
    r.flushall()
    push_jobs(r, n)
    block = {"class": "Bench", "command": [command]}
    if warm:
        block["warm"] = True
    d = Daemon(server, workdir, concurrency=conc, log_level="warn", handlers=[block])
    d.start(wait=False)
    try:
        return drain(r, n, lambda: d.proc.poll() is None, timeout=600)
    finally:
        d.stop()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--import-ms", type=float, default=200)
    ap.add_argument("--cold-jobs", type=int, default=60)
    ap.add_argument("--warm-jobs", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--others", action="store_true",
                    help="also an empty job on the Ruby and Node.js libraries")
    a = ap.parse_args()
    os.environ["COGWORKERD_BUILD"] = os.path.abspath(a.build)

    tmp = tempfile.mkdtemp(prefix="cw-warm-bench-")
    try:
        values = {"import_s": a.import_ms / 1000.0,
                  "lib": os.path.join(REPO, "handlers", "python"),
                  "rblib": os.path.join(REPO, "handlers", "ruby"),
                  "jslib": os.path.join(REPO, "handlers", "node", "cogworker_handler.js")}
        runs = [("cold", write_handler(tmp, "cold.py", COLD, **values), False, a.cold_jobs),
                ("warm", write_handler(tmp, "warm.py", WARM, **values), True, a.warm_jobs)]
        if a.others:
            runs += [("ruby no-op", write_handler(tmp, "noop.rb", RUBY, **values), True,
                      a.warm_jobs),
                     ("node no-op", write_handler(tmp, "noop.js", NODE, **values), True,
                      a.warm_jobs)]
        print("warm_libs: python3 handler importing for %g ms, concurrency %d, load %s"
              % (a.import_ms, a.concurrency, " ".join("%.2f" % x for x in os.getloadavg())),
              flush=True)
        rates = {kind: [] for kind, _, _, _ in runs}
        with RedisServer() as server:
            for rep in range(a.reps):
                for kind, cmd, warm, n in runs:
                    wd = tempfile.mkdtemp(dir=tmp)
                    rate = one_run(server, wd, cmd, warm, a.concurrency, n)
                    rates[kind].append(rate)
                    print("  rep %d %s: %d jobs, %.1f jobs/s" % (rep + 1, kind, n, rate),
                          flush=True)
        c, w = statistics.median(rates["cold"]), statistics.median(rates["warm"])
        for kind, v in rates.items():
            print("warm_libs: median %s %.1f jobs/s" % (kind, statistics.median(v)))
        print("warm_libs: warm = %.0f× cold (load %s)"
              % (w / c, " ".join("%.2f" % x for x in os.getloadavg())))
    finally:
        shutil.rmtree(tmp, True)


if __name__ == "__main__":
    main()

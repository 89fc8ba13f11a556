#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# A Python handler whose start-up takes BENCH_IMPORT_S seconds (0.2 by default): a sleep
# standing for the import of a framework, for the bench's warm-against-cold figure
# (tests/bench/bench.py "warm"). Cold (a process per job): the import, then the job from
# stdin, then exit 0. Warm (COGWORKER_PROTOCOL=1): the import once, then the job's
# function per job through the Python handler library (handlers/python).
import json
import os
import sys
import time

time.sleep(float(os.environ.get("BENCH_IMPORT_S", "0.2")))     # the framework's import


def perform(args):
    return sum(len(str(a)) for a in args)


if os.environ.get("COGWORKER_PROTOCOL") == "1":
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                    "handlers", "python"))
    import cogworker_handler as cw
    cw.run(lambda job: perform(job.args))
else:
    perform(json.load(sys.stdin).get("args") or [])

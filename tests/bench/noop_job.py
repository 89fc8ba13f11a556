#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# The Python no-op job of the bench's peers figure (tests/bench/peers.py): an empty
# function run by cogworkerd as a warm handler through the Python library (handlers/python),
# the same empty task Celery runs in-process there.
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "handlers", "python"))
import cogworker_handler as cw  # noqa: E402


def perform(job):
    pass


cw.run(perform)

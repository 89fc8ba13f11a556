#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# The soak's warm handler (tests/soak/soak.py), speaking doc/protocol.md §1.2 by hand: per
# job it appends "S <jid> <slot> <pid>" to $RUNS, sleeps args[0] seconds unless a cancel
# arrives (then it answers exit 1 without an "E": the job did not finish), appends
# "E <jid> <slot> <pid>" and answers "done" with the job's jid. argv[1] is the soak's work
# directory, so the soak can find this process on /proc after the daemons are gone.
import json
import os
import select
import socket
import sys
import time

if os.environ.get("COGWORKER_PROTOCOL") != "1":
    sys.exit("warm_soak.py: not started as a warm handler")
SLOT = os.environ["SOAK_SLOT"]
RUNS = os.environ["RUNS"]
sock = socket.socket(fileno=3)
buf = b""


def record(kind, jid):
    with open(RUNS, "a") as f:
        f.write("%s %s %s %d %.6f\n" % (kind, jid, SLOT, os.getpid(), time.time()))


def next_line(timeout=None):
    """The next message line, None at EOF, b"" when timeout passed first."""
    global buf
    until = None if timeout is None else time.monotonic() + timeout
    while b"\n" not in buf:
        left = None if until is None else max(0.0, until - time.monotonic())
        if left is not None and not select.select([sock], [], [], left)[0]:
            return b""
        chunk = sock.recv(65536)
        if not chunk:
            return None
        buf += chunk
    line, buf = buf.split(b"\n", 1)
    return line


sock.sendall(b'{"type":"ready"}\n')
while True:
    line = next_line()
    if line is None:
        sys.exit(0)             # retired: EOF on fd 3
    msg = json.loads(line)
    if msg.get("type") != "job":
        continue
    jid = msg["job"]["jid"]
    record("S", jid)
    done = {"type": "done", "exit": 0, "jid": jid}
    if next_line(float(msg["job"]["args"][0])) == b"":
        record("E", jid)
    else:                       # a cancel (or EOF): stopped before its end
        done["exit"] = 1
    sys.stdout.flush()
    sock.sendall((json.dumps(done) + "\n").encode())

#!/usr/bin/python3
# SPDX-License-Identifier: MIT
# The least a Python warm handler can do per job (tests/bench/peers.py): read the protocol's
# lines on fd 3 (doc/protocol.md §1.2), parse each as JSON, answer a job with its `done`.
# No cancel, no output flush, no error handling: the yardstick that shows what the library
# (handlers/python) adds to the protocol's own cost in this language.
import json
import os

out = os.fdopen(3, "wb", buffering=0)
out.write(b'{"type":"ready"}\n')
for line in os.fdopen(os.dup(3), "rb"):
    msg = json.loads(line)
    if msg.get("type") == "job":
        out.write(('{"type":"done","exit":0,"jid":%s}\n' % json.dumps(msg["job"]["jid"])).encode())

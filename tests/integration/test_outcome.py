# SPDX-License-Identifier: MIT
"""`cogworkerctl exec` and the daemon agree on what a handler's run comes to.

exec promises to report the outcome (success, retrying, dead, killed, discarded) and the
error_class / error_message the daemon would file for the same job under the same handler
conf. Both now get them from src/outcome.c; this test keeps it so. One set of handler
results (exit 0, exit N, a code in dead_exit_codes or discard_exit_codes, the retry budget
spent, a signal, a timeout, a command that cannot be executed, a user that cannot be
resolved, no handler at all, stderr tails cut at output_tail, args passed as argv) is run
once through a daemon, read back from the attempts log and the retry / dead entry, and once
through `cogworkerctl --json exec` on the very same conf file, and compared case by case.

The expected outcome and error class of each case are written down too, so that the test
cannot pass by both sides reporting nothing.

Run: python3 tests/integration/run.py test_outcome
"""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import binary, handler, job, wait_for  # noqa: E402
from runkit import DEAD, RETRY, JobTestCase, loads, sh  # noqa: E402

RECORD = 'echo "$COGWORKER_JID" >> "$RUNS"; '
# 300 two-byte characters on stderr, then a marker: an output_tail of 63 bytes cuts the
# tail in the middle of a character.
LONG_STDERR = (RECORD + 's=$(printf "%0300d" 0 | sed "s/0/\u00e9/g"); printf "%s" "$s" >&2; '
               'printf "THE-END" >&2; exit 2')

FAILED = "Cogworker::HandlerFailed"
SIGNALED = "Cogworker::HandlerSignaled"
TIMEOUT = "Cogworker::HandlerTimeout"
SPAWN = "Cogworker::HandlerSpawnFailed"
NO_HANDLER = "Cogworker::NoHandler"

# (name, class, args JSON, retry, expected outcome, expected error_class)
CASES = [
    ("exit 0", "Ok", "[]", 3, "success", None),
    ("exit N", "Exit", "[5]", 3, "retrying", FAILED),
    ("exit N, retry false", "Exit", "[5]", False, "dead", FAILED),
    ("dead_exit_codes", "Exit", "[3]", 3, "killed", FAILED),
    ("discard_exit_codes", "Exit", "[4]", 3, "discarded", FAILED),
    ("dead code, no retries left", "Exit", "[3]", False, "dead", FAILED),
    ("discard code, no retries left", "Exit", "[4]", 0, "dead", FAILED),
    ("string arg as argv", "Exit", '["6"]', 3, "retrying", FAILED),
    ("object arg as argv", "Exit", '[{"a":[1,2]}]', 3, "retrying", FAILED),
    ("stderr tail", "Fail", "[]", 3, "retrying", FAILED),
    ("invalid UTF-8 on stderr", "BadUtf8", "[]", 3, "retrying", FAILED),
    ("tail cut at output_tail", "Tail", "[]", 3, "retrying", FAILED),
    ("SIGKILL", "Kill", "[]", 3, "retrying", SIGNALED),
    ("SIGTERM", "Term", "[]", 3, "retrying", SIGNALED),
    ("timeout", "Slow", "[]", 3, "retrying", TIMEOUT),
    ("missing command", "Missing", "[]", 3, "retrying", SPAWN),
    ("not executable", "NoExec", "[]", 3, "retrying", SPAWN),
    ("unknown user", "BadUser", "[]", 3, "retrying", SPAWN),
    ("no handler", "Nope", "[]", 3, "retrying", NO_HANDLER),
    ("no handler, retry false", "Nope", "[]", False, "dead", NO_HANDLER),
]


class SameOutcome(JobTestCase):

    def handlers(self):
        noexec = self.path("not-executable")
        with open(noexec, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        os.chmod(noexec, 0o644)
        return [
            {"class": "Ok", "command": handler("ok")},
            {"class": "Exit", "command": handler("exit"), "args_as_argv": True,
             "dead_exit_codes": [3], "discard_exit_codes": [4]},
            {"class": "Fail", "command": handler("fail")},
            {"class": "BadUtf8", "command": handler("badutf8")},
            {"class": "Tail", "command": sh(LONG_STDERR), "output_tail": 63},
            {"class": "Kill", "command": sh(RECORD + 'echo dying >&2; kill -KILL $$')},
            {"class": "Term", "command": sh(RECORD + 'kill -TERM $$')},
            {"class": "Slow", "command": handler("slow", 5), "timeout": 0.5, "kill_grace": 1},
            {"class": "Missing", "command": [self.path("no-such-command")]},
            {"class": "NoExec", "command": [noexec]},
            {"class": "BadUser", "command": handler("ok"), "user": "cw-no-such-user"},
        ]

    def push_case(self, cls, args, retry):
        return loads(self.push(job(cls, json.loads(args), retry=retry)))["jid"]

    def through_daemon(self, d, cls, jid):
        """(outcome, error_class, error_message) as the daemon filed them: its attempt
        record for a failure, its "done:" line for a success."""
        wait_for(lambda: self.attempts(jid) or d.log_lines("done: %s jid=%s" % (cls, jid)),
                 timeout=15, message="the outcome of %s" % jid)
        a = self.attempts(jid)
        if not a:
            return ("success", None, None)
        self.assertEqual(len(a), 1, a)
        return (a[0]["outcome"], a[0]["error_class"], a[0]["error_message"])

    def filed_entry(self, jid, outcome):
        """The retry or dead entry the failure left, if its outcome files one."""
        key = {"retrying": RETRY, "dead": DEAD, "killed": DEAD}.get(outcome)
        if key is None:
            return None
        member, _ = self.wait_member(key, jid=jid)
        return loads(member)

    def through_exec(self, conf, cls, args, retry):
        """(outcome, error_class, error_message) as `cogworkerctl --json exec` reports."""
        argv = [binary("cogworkerctl"), "-c", conf, "--json", "exec", "--json-args", args,
                "--retry", json.dumps(retry), cls]
        env = dict(os.environ, REDIS_URL=self.server.url)
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=30)
        out = json.loads(p.stdout)
        self.assertEqual(p.returncode, 0 if out["outcome"] == "success" else 1, p)
        return (out["outcome"], out["error_class"], out["error_message"])

    def test_exec_and_the_daemon_classify_alike(self):
        d = self.daemon(concurrency=4, handlers=self.handlers())
        jids = {name: self.push_case(cls, args, retry) for name, cls, args, retry, _, _ in CASES}
        filed = {name: self.through_daemon(d, cls, jids[name]) for name, cls, _, _, _, _ in CASES}
        self.wait_settled(d)
        for name, cls, args, retry, outcome, error_class in CASES:
            with self.subTest(name):
                jid, daemon = jids[name], filed[name]
                local = self.through_exec(d.conf_path, cls, args, retry)
                self.assertEqual(local, daemon, "exec and the daemon disagree")
                self.assertEqual(daemon[:2], (outcome, error_class))
                if error_class:
                    self.assertTrue(daemon[2], "an empty error_message")
                entry = self.filed_entry(jid, outcome)
                if entry is not None:
                    self.assertEqual((entry["error_class"], entry["error_message"]),
                                     daemon[1:])

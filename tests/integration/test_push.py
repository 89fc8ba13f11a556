# SPDX-License-Identifier: MIT
"""What cogworkerctl push takes and what it refuses (doc/behaviours.md group PU), and the
time arguments of every command, read by one grammar (src/timearg.c; its unit test is
tests/unit/test_timearg.c). A refusal is exit 2 with one line naming what is wrong, and
nothing reaches Redis.

Run: python3 tests/integration/run.py test_push
"""

import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_ctl import RETRY, CtlCase, entry, jid_of  # noqa: E402

SCHEDULE = b"cogworker:schedule"
JAN_2027 = 1798761600                   # date -ud 2027-01-01 +%s


class PushInput(CtlCase):

    def assert_nothing_written(self):
        self.assertEqual(self.r.keys(), [])

    def test_pu1_empty_class_is_refused(self):
        res = self.fails(2, "push", "")
        self.assertIn("CLASS is empty", res.err)
        self.assertEqual(res.out, "")
        res = self.fails(2, "push", "--stdin", "", stdin=b'["a"]\n')
        self.assertIn("CLASS is empty", res.err)
        self.assert_nothing_written()
        # a class of one space is a class (cogworker takes it too)
        self.ok("push", " ")
        self.assertEqual(json.loads(self.queue()[0])["class"], " ")

    def test_pu2_bytes_that_are_not_utf8_are_refused_naming_where(self):
        """push "caf\xe9" became caf\uFFFD, --stdin stored the raw byte, --queue took it."""
        bad = b"caf\xe9"
        cases = [(["push", bad], "push: CLASS is not UTF-8: byte 4 is \\xE9"),
                 (["push", "W", "ok", bad], "push: ARG 2 is not UTF-8: byte 4 is \\xE9"),
                 (["push", "--queue", b"q\xff", "W"], "push: --queue is not UTF-8: byte 2 is \\xFF"),
                 (["push", "--jid", b"\xc3", "W"], "push: --jid is not UTF-8: byte 1 is \\xC3"),
                 (["push", "--json-args", b'["\xed\xa0\x80"]', "W"],
                  "push: --json-args is not UTF-8: byte 3 is \\xED"),
                 (["exec", "W", bad], "exec: ARG 1 is not UTF-8: byte 4 is \\xE9")]
        for args, says in cases:
            res = self.fails(2, *args)
            self.assertIn(says, res.err, args)
        self.assert_nothing_written()
        # --stdin: the bad line is named and skipped, the others pushed, exit 2
        res = self.fails(2, "push", "--stdin", "W", stdin=b'["a"]\n["caf\xe9"]\n["b"]\n')
        self.assertIn("stdin line 2 is not UTF-8: byte 6 is \\xE9", res.err)
        self.assertEqual(sorted(json.loads(m)["args"] for m in self.queue()), [["a"], ["b"]])
        # UTF-8 passes, and so does its \u escape
        self.ok("push", "W", "caf\u00e9")
        self.ok("push", "--json-args", '["\\u00e9"]', "W")
        self.assertEqual(sorted(json.loads(m)["args"] for m in self.queue()),
                         [["a"], ["b"], ["caf\u00e9"], ["\u00e9"]])


class TimeArguments(CtlCase):
    """PU-7: every time option reads one grammar (--at 2027-01-01 and --in 5m were refused
    while history took both; --expires-in 0 was taken and the job died at once)."""

    def scheduled(self, jid):
        (member, score), = [(m, s) for m, s in self.r.zrange(SCHEDULE, 0, -1, withscores=True)
                            if json.loads(m)["jid"] == jid]
        return json.loads(member), score

    def test_pu7_push_takes_every_form_and_refuses_what_cannot_make_sense(self):
        t0 = time.time()
        cases = [(["--at", "2027-01-01"], JAN_2027, 0),
                 (["--at", "2027-01-01T09:30:00+02:00"], JAN_2027 + 9.5 * 3600 - 7200, 0),
                 (["--at", "2027-01-01 09:30"], JAN_2027 + 9.5 * 3600, 0),
                 (["--at", str(JAN_2027)], JAN_2027, 0),
                 (["--at", "5m"], t0 + 300, 5),
                 (["--in", "5m"], t0 + 300, 5),
                 (["--in", "1h30m"], t0 + 5400, 5),
                 (["--in", "90"], t0 + 90, 5)]
        for args, want, slack in cases:
            jid = self.ok("push", *args, "Work").out.strip()
            payload, score = self.scheduled(jid)
            self.assertAlmostEqual(score, want, delta=slack or 0.001, msg=args)
            self.assertAlmostEqual(payload["at"], score, delta=0.001)
        jid = self.ok("push", "--in", "1h", "--expires-in", "30m", "Work").out.strip()
        payload, score = self.scheduled(jid)
        self.assertAlmostEqual(payload["expires_at"], score + 1800, delta=0.01)
        jid = self.ok("push", "--at", "2027-01-01", "--expires-at", "2027-01-02", "Work").out.strip()
        self.assertEqual(self.scheduled(jid)[0]["expires_at"], JAN_2027 + 86400)
        before = {k: self.r.dump(k) for k in self.r.keys()}
        refusals = [
            (["--expires-in", "0"], "moment it is due"),
            (["--expires-in", "-5"], "negative"),
            (["--expires-in", "5x"], "is not a duration"),
            (["--expires-at", "2020-01-01"], "is not after the job is due"),
            (["--at", "2027-01-02", "--expires-at", "2027-01-01"], "is not after the job is due"),
            (["--in", "2027-01-01"], "is a time, not a duration"),
            (["--in", "-5"], "negative"),
            (["--in", "soon"], "is not a duration"),
            (["--at", "90"], "for a delay give --in 90"),
            (["--at", "2027-02-30"], "no such date"),
            (["--at", "2027-01-01T25:00"], "no such time of day"),
            (["--at", "tomorrow"], "is not a time"),
            (["--in", "1h", "--at", "2027-01-01"], "don't mix"),
            (["--in", "36501d"], "more than 100 years"),
        ]
        for args, says in refusals:
            res = self.fails(2, "push", *args, "Work")
            self.assertIn(says, res.err, args)
            self.assertIn("push", res.err, args)
        self.assertEqual({k: self.r.dump(k) for k in self.r.keys()}, before)

    def test_pu7_history_reschedule_retry_and_exec_read_the_same_grammar(self):
        for since in ("2026-01-01", "2026-01-01T06:00:00+01:00", "1h30m", "90m", "1767225600"):
            self.ok("history", "--since", since)
        res = self.fails(2, "history", "--since", "yesterday")
        self.assertIn("back from now (90m, 12h, 7d)", res.err)
        self.assertIn("no such date", self.fails(2, "history", "--since", "2026-02-30").err)
        # jobs reschedule: whole minutes as before, or a duration with a unit
        e = entry()
        self.r.zadd(RETRY, {e: 1})
        for arg, secs in (("90s", 90), ("2h", 7200), ("1h30m", 5400), ("5", 300)):
            now = self.now()
            self.ok("jobs", "reschedule", jid_of(e), arg)
            self.assertAlmostEqual(self.r.zscore(RETRY, e), now + secs, delta=3, msg=arg)
        for arg, says in (("2w", "more than a week"), ("0s", "due at once"),
                          ("1.5", "whole number"), ("5x", "whole number"),
                          ("5mx", "is not a duration")):
            self.assertIn(says, self.fails(2, "jobs", "reschedule", jid_of(e), arg).err, arg)
        self.assertIn("moment it is back on its queue",
                      self.fails(2, "jobs", "retry", "--expires-in", "0", jid_of(e)).err)
        self.assertEqual(self.r.zcard(RETRY), 1)
        res = self.fails(2, "exec", "--timeout", "-1", "Work")
        self.assertIn("exec --timeout", res.err)
        self.assertIn("negative", res.err)


if __name__ == "__main__":
    unittest.main()

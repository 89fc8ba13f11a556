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
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_ctl import CtlCase  # noqa: E402

SCHEDULE = b"cogworker:schedule"


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


if __name__ == "__main__":
    unittest.main()

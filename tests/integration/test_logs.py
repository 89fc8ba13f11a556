# SPDX-License-Identifier: MIT
"""LG — the daemon's log as an operator reads it (doc/behaviours.md group LG): one line per
settled job saying where it went and how long it ran, the sd-daemon priority prefix when
stderr is the journal (JOURNAL_STREAM), `log_format = "json"` for log shippers, and a
handler's bytes escaped in the text format so that they cannot act on a terminal.

Run: python3 tests/integration/run.py test_logs
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import handler, job, wait_for  # noqa: E402
from runkit import JobTestCase, loads, sh  # noqa: E402

# The run time, then what the run cost (AC-1): "0.51s cpu=0.48s maxrss=151MiB".
DUR = r"\d+\.\d\ds cpu=\d+\.\d\ds maxrss=[\d.]+[KMG]iB"


def exit_handler(**extra):
    h = {"class": "Exit", "command": handler("exit"), "args_as_argv": True,
         "dead_exit_codes": [3], "discard_exit_codes": [4]}
    h.update(extra)
    return h


class JobLines(JobTestCase):

    def settle_all(self, d, jids):
        """The done: or fail: line of each jid, once all are there."""
        def lines():
            got = {}
            for jid in jids:
                found = [l for l in d.log().splitlines()
                         if re.search(r"(done|fail): \S+ jid=%s " % jid, l)]
                if not found:
                    return None
                self.assertEqual(len(found), 1, found)
                got[jid] = found[0]
            return got
        return wait_for(lines, timeout=15, message="a settled line per job")

    def test_lg1_one_line_per_outcome(self):
        d = self.daemon(concurrency=3, handlers=[
            {"class": "Nap", "command": sh("sleep 0.3")}, exit_handler()])
        jids = {}
        for name, payload in (
                ("done", job("Nap")),
                ("retry", job("Exit", [5])),
                ("code", job("Exit", [3])),
                ("discard", job("Exit", [4])),
                ("exhausted", job("Exit", [5], retry=2, retry_count=2)),
                ("false", job("Exit", [5], retry=False))):
            jids[name] = loads(self.push(payload))["jid"]
        got = self.settle_all(d, list(jids.values()))
        want = {
            "done": r"INFO: done: Nap jid=%s " + DUR + "$",
            "retry": r"WARN: fail: Exit jid=%s " + DUR + r": exit status 5 → retry 1/25 in "
                     r"(\d+s|\dm \d\ds)$",
            "code": r"WARN: fail: Exit jid=%s " + DUR + r": exit status 3 → dead \(exit code 3 "
                    r"is in dead_exit_codes\)$",
            "discard": r"WARN: fail: Exit jid=%s " + DUR + r": exit status 4 → discarded "
                       r"\(exit code 4 is in discard_exit_codes\)$",
            "exhausted": r"WARN: fail: Exit jid=%s " + DUR + r": exit status 5 → dead "
                         r"\(retries exhausted\)$",
            "false": r"WARN: fail: Exit jid=%s " + DUR + r": exit status 5 → dead \(retry is "
                     r"false: no retries\)$",
        }
        for name, jid in jids.items():
            with self.subTest(name):
                self.assertRegex(got[jid], want[name] % jid)
                self.assertEqual(len(d.log_lines("start: %s jid=%s" % (
                    "Nap" if name == "done" else "Exit", jid))), 1)
        self.assertGreaterEqual(float(re.search(r"jid=\S+ ([\d.]+)s ", got[jids["done"]])
                                      .group(1)), 0.3)
        # A retry says when: the backoff of attempt 1 (1 + 15 + 0..29 × 2 seconds)
        m = re.search(r"in (?:(\d)m )?(\d+)s$", got[jids["retry"]])
        delay = int(m.group(1) or 0) * 60 + int(m.group(2))
        self.assertGreaterEqual(delay, 15)
        self.assertLessEqual(delay, 75)

    def test_lg2_journal_stream_lines_carry_the_priority(self):
        d = self.daemon(start=False, handlers=[{"class": "Ok", "command": handler("ok")},
                                               {"class": "F", "command": handler("fail")}])
        open(d.log_path, "ab").close()
        st = os.stat(d.log_path)
        d.start(env={"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)})
        ok = loads(self.push(job("Ok")))["jid"]
        bad = loads(self.push(job("F", retry=1)))["jid"]
        d.wait_log("done: Ok jid=%s" % ok)
        d.wait_log("fail: F jid=%s" % bad)
        lines = d.log().splitlines()
        for line in lines:
            self.assertRegex(line, r"^<[3467]>(DEBUG|INFO|WARN|ERROR): ", line)
        self.assertRegex(d.log_lines("started, identity=")[0], r"^<6>INFO: cogworkerd ")
        self.assertRegex(d.log_lines("done: Ok jid=" + ok)[0], r"^<6>INFO: done: ")
        self.assertRegex(d.log_lines("fail: F jid=" + bad)[0], r"^<4>WARN: fail: ")
        self.assertRegex(d.log_lines("jid=%s stderr: kaboom" % bad)[0], r"^<6>INFO: ")
        self.assertEqual(d.stop(), 0)

    def test_lg2_a_stale_journal_stream_is_not_believed(self):
        """JOURNAL_STREAM naming another file (inherited from a service by a shell that
        started the daemon elsewhere): the ordinary format."""
        d = self.daemon(start=False)
        d.start(env={"JOURNAL_STREAM": "1:2"})
        line = d.log_lines("started, identity=")[0]
        self.assertRegex(line, r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z pid=\d+ INFO: ")

    def test_lg3_json_lines_parse_with_the_job_fields(self):
        d = self.daemon(log_format="json", handlers=[
            {"class": "Ok", "command": sh('echo "hello from $COGWORKER_JID"')},
            exit_handler()])
        ok = loads(self.push(job("Ok", queue="default")))["jid"]
        bad = loads(self.push(job("Exit", [5], retry=3)))["jid"]
        code = loads(self.push(job("Exit", [3], retry=3)))["jid"]

        def events():
            out = [json.loads(l) for l in d.log().splitlines()]
            done = {e.get("jid") for e in out if e["event"] in ("done", "fail")}
            return out if {ok, bad, code} <= done else None
        evs = wait_for(events, timeout=15, message="three settled jobs")
        for e in evs:
            self.assertTrue({"time", "level", "pid", "event", "msg"} <= set(e), e)
            self.assertRegex(e["time"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertIn(e["level"], ("debug", "info", "warn", "error"))
        self.assertTrue(any(e["event"] == "log" and "started, identity=" in e["msg"]
                            for e in evs))

        def one(event, jid):
            [e] = [e for e in evs if e["event"] == event and e.get("jid") == jid]
            return e
        start = one("start", ok)
        self.assertEqual((start["class"], start["queue"], start["level"]), ("Ok", "default", "info"))
        done = one("done", ok)
        self.assertEqual((done["class"], done["queue"], done["outcome"]),
                         ("Ok", "default", "success"))
        self.assertIsInstance(done["duration"], (int, float))
        self.assertGreaterEqual(done["duration"], 0)
        # The line shows the duration to 1/100 s; the field is the same time, printed with
        # more digits (rounding 0.005 from a decimal or a binary value can differ).
        prefix = "done: Ok jid=%s " % ok
        self.assertTrue(done["msg"].startswith(prefix), done["msg"])
        shown, cpu = re.match(r"([\d.]+)s cpu=([\d.]+)s maxrss=",
                              done["msg"][len(prefix):]).groups()
        self.assertLessEqual(abs(float(shown) - done["duration"]), 0.0051, done["msg"])
        # what the run cost (AC-2): the same figures as numbers
        self.assertLessEqual(abs(float(cpu) - done["cpu_s"]), 0.0051, done["msg"])
        self.assertGreater(done["maxrss_bytes"], 0)
        self.assertGreater(one("fail", bad)["maxrss_bytes"], 0)
        out = one("output", ok)                 # the handler's output carries the job
        self.assertEqual((out["class"], out["stream"]), ("Ok", "stdout"))
        self.assertIn("hello from " + ok, out["msg"])

        fail = one("fail", bad)
        self.assertEqual((fail["level"], fail["outcome"], fail["attempt"], fail["max_retries"],
                          fail["error_class"], fail["error_message"]),
                         ("warn", "retry", 1, 3, "Cogworker::HandlerFailed", "exit status 5"))
        self.assertGreater(fail["retry_in"], 0)
        self.assertNotIn("reason", fail)
        dead = one("fail", code)
        self.assertEqual((dead["outcome"], dead["reason"]),
                         ("dead", "exit code 3 is in dead_exit_codes"))
        self.assertNotIn("retry_in", dead)

    def test_lg3_json_under_the_journal(self):
        d = self.daemon(start=False, log_format="json")
        open(d.log_path, "ab").close()
        st = os.stat(d.log_path)
        d.start(env={"JOURNAL_STREAM": "%d:%d" % (st.st_dev, st.st_ino)})
        line = d.log_lines("started, identity=")[0]
        self.assertTrue(line.startswith("<6>{"), line)
        self.assertEqual(json.loads(line[3:])["level"], "info")

    HOSTILE = sh(r"printf 'x\033[2J\b\377\0after\n'; printf 'caf\303\251 \302\233\t|\n' >&2")

    def test_lg4_handler_output_is_escaped_in_the_text_log(self):
        """printf 'x\\033[2J\\b\\377\\0after' once reached the log raw: it cleared the
        terminal that tailed it, made grep call it binary, and lost what followed the NUL."""
        d = self.daemon(handlers=[{"class": "Esc", "command": self.HOSTILE}])
        jid = loads(self.push(job("Esc")))["jid"]
        self.wait_done(d, "Esc", jid)
        with open(d.log_path, "rb") as f:
            raw = f.read()
        mine = [l for l in raw.split(b"\n") if (b"jid=%s " % jid.encode()) in l]
        out = [l for l in mine if b" stdout: " in l]
        err = [l for l in mine if b" stderr: " in l]
        self.assertEqual(len(out), 1, mine)
        self.assertTrue(out[0].endswith(rb"INFO: jid=%s stdout: x\x1b[2J\x08\xff\x00after"
                                        % jid.encode()), out[0])
        # valid UTF-8 stays as it is, tab included; a C1 control (CSI) is escaped
        self.assertEqual(len(err), 1, mine)
        self.assertTrue(err[0].endswith("stderr: café \\u009b\t|".encode()), err[0])
        raw.decode("utf-8")                     # grep reads it as text
        self.assertEqual([c for c in raw if c < 0x20 and c not in b"\t\n"], [])

    def test_lg4_handler_output_keeps_its_nul_in_json(self):
        d = self.daemon(log_format="json", handlers=[{"class": "Esc", "command": self.HOSTILE}])
        jid = loads(self.push(job("Esc")))["jid"]
        self.wait_done(d, "Esc", jid)
        msgs = {e["stream"]: e["msg"] for e in map(json.loads, d.log().splitlines())
                if e.get("jid") == jid and e["event"] == "output"}
        self.assertEqual(msgs, {"stdout": "jid=%s stdout: x\x1b[2J\b\ufffd\x00after" % jid,
                                "stderr": "jid=%s stderr: café \x9b\t|" % jid})


if __name__ == "__main__":
    import unittest
    unittest.main()

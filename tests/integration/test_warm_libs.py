# SPDX-License-Identifier: MIT
"""The warm handler libraries (handlers/, issue 22; doc/behaviours.md WL): Python, Ruby and
Node.js handlers written on them (tests/handlers/warmlib_{py,rb,js}), each run by the
daemon under Debian's interpreter with `warm = true`, and the POSIX sh example
(handlers/sh/example-warm.sh). The same scenarios for each library: args as pushed, big
integers intact; progress in the status hash and `jobs show`; an exception is a retry with
its message; `exit N` in the job is the job's status; output attributed to its job;
recycle() replaces the process; a cancel stops the job inside the process (its cleanup
runs, well before kill_grace); a retired process exits 0 on the EOF of fd 3; run cold,
the library refuses with exit 2 and says why. And a cogworker app's own worker classes,
run by class name through handlers/ruby/cogworker_app.rb from a block of class "*".

Run: python3 tests/integration/run.py test_warm_libs
"""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, binary, handler, new_jid, wait_for  # noqa: E402
from runkit import DEAD, PROCESSED, RETRY, JobTestCase, loads  # noqa: E402

# Past any test's patience: a job that ends sooner was stopped by the library, not killed.
KILL_GRACE = 30
EXAMPLE = os.path.join(REPO, "handlers", "sh", "example-warm.sh")


def raw_job(cls, args_text, jid=None, **extra):
    """A job whose args are exactly args_text, not re-encoded."""
    jid = jid or new_jid()
    now = time.time()
    fields = ['"class":%s' % json.dumps(cls), '"args":%s' % args_text, '"queue":"default"',
              '"jid":"%s"' % jid]
    fields += ['"%s":%s' % (k, json.dumps(v)) for k, v in extra.items()]
    fields.append('"created_at":%.6f,"enqueued_at":%.6f' % (now, now))
    return "{" + ",".join(fields) + "}", jid


class WarmLibCase(JobTestCase):
    """What each library's tests share; LANG picks tests/handlers/warmlib_<LANG>."""

    LANG = None
    ERROR_CLASS = None                  # what the test handler raises on "raise"

    def handlers(self, **block):
        h = {"class": "W", "command": handler("warmlib_" + self.LANG), "warm": True,
             "kill_grace": KILL_GRACE}
        h.update(block)
        return [h]

    def start(self, block=None, **settings):
        settings.setdefault("status_expiration", 600)
        return self.daemon(handlers=self.handlers(**(block or {})), **settings)

    def push_args(self, args_text, **extra):
        payload, jid = raw_job("W", args_text, **extra)
        self.push(payload)
        return jid

    def path(self, name):
        return os.path.join(self.workdir, "runs.d", name)

    def record(self, jid, timeout=10):
        """What the job's function saw: {pid, args, class, retry_count}."""
        p = self.path(jid + ".json")
        wait_for(lambda: os.path.exists(p), timeout=timeout, message="the record of " + jid)
        with open(p) as f:
            return json.load(f)

    def ctl(self, *args):
        env = dict(os.environ, REDIS_URL=self.server.url)
        return subprocess.run([binary("cogworkerctl")] + list(args), env=env,
                              capture_output=True, text=True, timeout=30)

    def status(self, jid):
        return {k.decode(): v.decode()
                for k, v in self.r.hgetall(("status:" + jid).encode()).items()}

    def wait_status(self, jid, value, timeout=10):
        return wait_for(lambda: self.status(jid).get("status") == value and self.status(jid),
                        timeout=timeout, message="status %s of %s" % (value, jid))


class LibraryScenarios:
    """The scenarios, mixed into one TestCase per library below."""

    def test_wl1_args_reach_the_function_as_pushed_in_one_process(self):
        """WL-1: two jobs run in one process; each sees its args exactly as pushed (integers
        past 2^64, a float, escapes, nesting), its class and its retry count."""
        d = self.start()
        args = ('["ok",123456789012345678901234567890,-98765432109876543210,1.5,'
                '"\\u00e9t\\u00e9 \\"q\\" \\n",{"k":[true,null,{"__proto__":1}]},9007199254740993]')
        first = self.push_args(args)
        second = self.push_args('["ok"]', retry_count=2)
        self.wait_done(d, "W", first)
        self.wait_done(d, "W", second)
        a, b = self.record(first), self.record(second)
        self.assertEqual(a["args"], json.loads(args))
        self.assertEqual((a["class"], a["retry_count"], b["retry_count"]), ("W", 0, 2))
        self.assertEqual(a["pid"], b["pid"], "a warm handler runs both jobs in one process")
        self.assertEqual(self.wait_counter(PROCESSED, 2), 2)

    def test_wl2_progress_shows_in_status_and_jobs_show(self):
        """WL-2: progress(42, "halfway there") while the job runs: the status hash and
        `cogworkerctl jobs show`; the job then completes."""
        d = self.start()
        jid = self.push_args('["progress"]')
        st = wait_for(lambda: self.status(jid).get("pct") == "42" and self.status(jid),
                      message="pct 42")
        self.assertEqual((st["status"], st["message"]), ("working", "halfway there"))
        out = self.ctl("jobs", "show", jid)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("progress   42% halfway there", out.stdout)
        d.open_gate(jid)
        self.wait_status(jid, "complete")

    def test_wl3_an_exception_is_a_retry_with_its_message(self):
        """WL-3: the function raises: the job goes to the retry set with the exception's
        class and message (and where it was raised) as its error, the backtrace is in its
        output; the process stays."""
        d = self.start()
        jid = self.push_args('["raise"]', retry=3)
        member, _ = self.wait_member(RETRY)
        entry = loads(member)
        self.assertEqual((entry["jid"], entry["error_class"]), (jid, "Cogworker::HandlerFailed"))
        self.assertIn("%s: boom %s [at warmlib_%s" % (self.ERROR_CLASS, jid, self.LANG),
                      entry["error_message"])
        out = wait_for(lambda: self.ctl("jobs", "log", jid).stdout, message="kept output")
        self.assertIn("boom " + jid, out)
        self.assertIn("tests/handlers/warmlib_" + self.LANG, out)
        again = self.push_args('["ok"]')
        self.wait_done(d, "W", again)
        self.assertEqual(self.record(again)["pid"], self.record(jid)["pid"])

    def test_wl4_output_is_attributed_to_its_job(self):
        """WL-4: two jobs in a row on one process print to stdout and stderr without
        flushing: each job's kept output is its own lines and nothing of the other's."""
        d = self.start()
        jids = [self.push_args('["print"]') for _ in range(2)]
        for jid in jids:
            self.wait_done(d, "W", jid)
        self.assertEqual(self.record(jids[0])["pid"], self.record(jids[1])["pid"])
        for jid in jids:
            out = wait_for(lambda: self.ctl("jobs", "log", jid).stdout, message="kept output")
            self.assertEqual(sorted(out.splitlines()),
                             ["stderr of " + jid, "stdout of " + jid], out)

    def test_wl5_recycle_replaces_the_process_after_its_job(self):
        """WL-5: recycle() in a job: that job succeeds, the next one runs in a new
        process, and the old one exits 0 (the EOF of its fd 3)."""
        d = self.start()
        first = self.push_args('["recycle"]')
        self.wait_done(d, "W", first)
        second = self.push_args('["ok"]')
        self.wait_done(d, "W", second)
        old, new = self.record(first)["pid"], self.record(second)["pid"]
        self.assertNotEqual(old, new)
        self.assertEqual(self.exited(old), "0")
        self.assertEqual(self.r.zcard(RETRY), 0)

    def test_wl6_cancel_stops_the_job_inside_the_process(self):
        """WL-6: `cogworkerctl jobs cancel` of a job blocked in a sleep: the library stops
        it (its cleanup runs) long before kill_grace; the job is dead as cancelled."""
        d = self.start()
        jid = self.push_args('["hang"]', retry=3)
        pid = self.record(jid)["pid"]
        t = time.monotonic()
        out = self.ctl("jobs", "cancel", jid)
        self.assertEqual(out.returncode, 0, out.stderr)
        member, _ = self.wait_member(DEAD, timeout=KILL_GRACE / 2)
        self.assertLess(time.monotonic() - t, KILL_GRACE / 2)
        self.assertEqual(loads(member)["error_class"], "Cogworker::Cancelled")
        # the reason once, not "cancelled on request: cancelled" (issue 31)
        self.assertEqual(loads(member)["error_message"], "cancelled on request")
        self.assertTrue(os.path.exists(self.path(jid + ".cleanup")), "cleanup did not run")
        # a cancelled process is never reused
        again = self.push_args('["ok"]')
        self.wait_done(d, "W", again)
        self.assertNotEqual(self.record(again)["pid"], pid)

    def test_wl7_a_retired_process_exits_0_on_eof(self):
        """WL-7: idle past warm_idle_timeout, the daemon closes fd 3: the process exits 0
        by itself (kill_grace is far off)."""
        d = self.start(block={"warm_idle_timeout": 1})
        jid = self.push_args('["ok"]')
        self.wait_done(d, "W", jid)
        pid = self.record(jid)["pid"]
        d.wait_log("warm: W pid=%d: idle for warm_idle_timeout; retired" % pid, timeout=10)
        self.assertEqual(self.exited(pid), "0")

    def test_wl8_run_cold_it_refuses_with_exit_2_and_says_why(self):
        """WL-8: the same script in a handler block without `warm = true`: no
        COGWORKER_PROTOCOL, so it exits 2 and the job's error says why."""
        self.start(block={"warm": False})
        jid = self.push_args('["ok"]', retry=3)
        entry = loads(self.wait_member(RETRY)[0])
        self.assertEqual(entry["jid"], jid)
        self.assertRegex(entry["error_message"],
                         r"^exit status 2: cogworker_handler: COGWORKER_PROTOCOL is not set: "
                         r"this program is a warm handler")
        self.assertFalse(os.path.exists(self.path(jid + ".json")))

    def exited(self, pid, timeout=10):
        """The exit status the process wrote on its way out (normal exits only: a killed
        process writes none)."""
        p = self.path("%d.exited" % pid)
        wait_for(lambda: os.path.exists(p), timeout=timeout, message="pid %d exited" % pid)
        with open(p) as f:
            return f.read()


class ExitStatus:
    """`exit N` in the job (Python, Ruby): the job's status, judged as a cold handler's."""

    def test_wl9_exit_n_in_the_job_is_its_status(self):
        """WL-9: sys.exit(3) / exit 3 in the job with dead_exit_codes [3]: the job is dead
        with "exit status 3" at once, and the process runs the next job."""
        d = self.start(block={"dead_exit_codes": [3]})
        jid = self.push_args('["exit",3]', retry=5)
        entry = loads(self.wait_member(DEAD)[0])
        self.assertEqual(entry["jid"], jid)
        self.assertTrue(entry["error_message"].startswith("exit status 3"), entry)
        again = self.push_args('["ok"]')
        self.wait_done(d, "W", again)
        self.assertEqual(self.record(again)["pid"], self.record(jid)["pid"])


class Python(WarmLibCase, LibraryScenarios, ExitStatus):
    LANG = "py"
    ERROR_CLASS = "ValueError"


class Ruby(WarmLibCase, LibraryScenarios, ExitStatus):
    LANG = "rb"
    ERROR_CLASS = "ArgumentError"


class Node(WarmLibCase, LibraryScenarios):
    LANG = "js"
    ERROR_CLASS = "TypeError"


class RubyApp(WarmLibCase):
    """A cogworker app's own worker classes (tests/handlers/warmlib_app.rb), run by their
    class name through handlers/ruby/cogworker_app.rb from one handler block of class "*",
    without the cogworker gem (its stand-in, handlers/ruby/compat/cogworker.rb)."""

    def handlers(self, **block):
        h = {"class": "*", "warm": True, "kill_grace": KILL_GRACE,
             "command": ["ruby", os.path.join(REPO, "handlers", "ruby", "cogworker_app.rb"),
                         handler("warmlib_app.rb")[0]]}
        h.update(block)
        return [h]

    def push_class(self, cls, args_text, **extra):
        payload, jid = raw_job(cls, args_text, **extra)
        self.push(payload)
        return jid

    def test_wl12_worker_classes_run_by_name_in_one_process(self):
        """WL-12: jobs of a namespaced class (Billing::ChargeJob) and another class run in
        one process, each a new instance of its class with its jid; args of every JSON
        type reach perform as pushed; cogworker_options loaded."""
        d = self.start()
        args = ('[12345678901234567890123,19.99,"EUR",true,null,[1,"two",[3.5]],'
                '{"k":{"n":1,"u":"\u00e9"},"b":false}]')
        charge = self.push_class("Billing::ChargeJob", args)
        echo = self.push_class("EchoJob", '["hello",-7,0.5,false]')
        self.wait_done(d, "Billing::ChargeJob", charge)
        self.wait_done(d, "EchoJob", echo)
        a, b = self.record(charge), self.record(echo)
        self.assertEqual(a["args"], json.loads(args))
        self.assertEqual(a["types"], ["Integer", "Float", "String", "TrueClass", "NilClass",
                                      "Array", "Hash"])
        self.assertEqual((a["class"], a["jid"], b["class"], b["jid"]),
                         ("Billing::ChargeJob", charge, "EchoJob", echo))
        self.assertEqual(a["options"], {"queue": "billing", "retry": 3})
        self.assertEqual(b["args"], ["hello", -7, 0.5, False])
        self.assertEqual(a["pid"], b["pid"], "the app is loaded once, in one process")

    def test_wl13_an_unknown_class_fails_its_job_not_the_process(self):
        """WL-13: a job of a class the app does not have, one of a class that is no
        worker, and perform_async without the gem: each is a retry with a clear message,
        and the next job runs in the same process."""
        d = self.start()
        before = self.push_class("EchoJob", '["before"]')
        self.wait_done(d, "EchoJob", before)
        cases = (("Nope::Missing", "CogworkerHandler::UnknownWorker: no worker class "
                                   "Nope::Missing in this app (uninitialized constant Nope"),
                 ("NotAWorker", "CogworkerHandler::UnknownWorker: NotAWorker is not a worker "
                                "class (no instance method perform)"),
                 ("FollowUpJob", "NotImplementedError: EchoJob.perform_async: pushing a "
                                 "job needs the cogworker gem"))
        for cls, message in cases:
            jid = self.push_class(cls, "[]", retry=3)
            member = wait_for(lambda: [m for m in self.r.zrange(RETRY, 0, -1)
                                       if loads(m)["jid"] == jid], message="retry of " + cls)
            entry = loads(member[0])
            self.assertEqual(entry["error_class"], "Cogworker::HandlerFailed")
            self.assertIn(message, entry["error_message"])
        after = self.push_class("EchoJob", '["after"]')
        self.wait_done(d, "EchoJob", after)
        self.assertEqual(self.r.zcard(RETRY), 3)
        self.assertEqual(self.record(after)["pid"], self.record(before)["pid"],
                         "the process outlived the failures")


class ShExample(WarmLibCase):
    """The POSIX sh example, as shipped."""

    def handlers(self, **block):
        h = {"class": "W", "command": [EXAMPLE], "warm": True, "kill_grace": KILL_GRACE}
        h.update(block)
        return [h]

    def test_wl10_sh_example_greets_per_job_in_one_process(self):
        """WL-10: the example runs jobs in one process: each job's kept output is its
        greeting, its progress reaches the status; a job it cannot read fails."""
        d = self.start()
        jids = [self.push_args('["world %d"]' % i) for i in range(2)]
        pids = []
        for i, jid in enumerate(jids):
            self.wait_status(jid, "complete")
            self.assertEqual(self.status(jid)["pct"], "50")
            out = wait_for(lambda: self.ctl("jobs", "log", jid).stdout, message="kept output")
            # its greeting, and its progress as the line a cold job prints for it (WM-20);
            # the two come by different descriptors, so in either order
            lines = sorted(out.splitlines())
            self.assertEqual(len(lines), 2, out)
            self.assertEqual(lines[0], "cogworker:progress 50 greeting")
            self.assertRegex(lines[1], r"^hello, world %d \(job %s, pid \d+\)$" % (i, jid))
            pids.append(out.split("pid ")[1].split(")")[0])
        self.assertEqual(pids[0], pids[1])
        bad = self.push_args('[1]', retry=3)
        entry = loads(self.wait_member(RETRY)[0])
        self.assertEqual(entry["jid"], bad)
        self.assertIn("exit status 1: job %s: the first arg is not a plain string" % bad,
                      entry["error_message"])

    def test_wl11_sh_example_run_cold_refuses(self):
        """WL-11: without `warm = true` the example exits 2 and says why."""
        self.start(block={"warm": False})
        self.push_args('["world"]', retry=3)
        entry = loads(self.wait_member(RETRY)[0])
        self.assertIn("exit status 2: example-warm.sh: COGWORKER_PROTOCOL is '', not 1",
                      entry["error_message"])

if __name__ == "__main__":
    import unittest
    unittest.main()

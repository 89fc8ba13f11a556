# SPDX-License-Identifier: MIT
"""Reliable fetch and fetch-mode detection (doc/behaviours.md groups FE and FM; doc/protocol.md §7.3,
§7.9), plus the idle latency issue 2 point 5 asks for.

Our reliable fetch goes beyond cogworker's idle backoff (src/fetch.c, opening comment):
idle fetchers park in BLMOVE spread over the queues and the weighted FETCH script runs
whenever work is found. So FE-3/FE-4 (backoff gaps between FETCH calls) are replaced by
latency checks: an idle daemon starts a job pushed on any of its queues within a tight
bound, and paused queues are still honoured while idle. FE-6 (a long client-side pause
interrupted by TERM) has no client-side pause to interrupt; the stop while parked in
BLMOVE is covered by HB-5/LC-7. FE-8 is in test_shutdown.py.

Run: python3 tests/integration/run.py test_fetch
"""

import json
import os
import random
import re
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, handler, job, new_jid, wait_for  # noqa: E402
from observe import Monitor, TcpProxy  # noqa: E402

PROCESSED = b"cogworker:stats:processed"
PAUSED = b"cogworker:paused_queues"
IDENTITIES = b"cogworker:inprogress_identities"
LOG_TS = re.compile(r"^(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)(\.\d+)?Z ")


def qkey(q):
    return ("cogworker:queue:" + q).encode()


def inprogress(identity):
    return ("cogworker:inprogress:" + identity).encode()


def gate_handlers(cls="G"):
    return [{"class": cls, "command": handler("gate")}]


def log_time(line):
    """Epoch seconds of a log line's UTC timestamp."""
    import calendar
    m = LOG_TS.match(line)
    y, mo, d, h, mi, s = (int(m.group(i)) for i in range(1, 7))
    frac = float(m.group(7) or 0)
    return calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0)) + frac


def percentile(values, p):
    v = sorted(values)
    k = min(len(v) - 1, max(0, int(round(p / 100.0 * len(v) + 0.5)) - 1))
    return v[k]


class ReliableFetch(DaemonTestCase):

    def test_fe1_job_sits_in_own_inprogress_list_while_it_runs(self):
        d = self.daemon(handlers=gate_handlers())
        j = job("G")
        jid = json.loads(j)["jid"]
        self.push(j)
        wait_for(lambda: d.runs_of(jid) == 1, message="the gate job to start")
        self.assertEqual(self.r.llen(qkey("default")), 0)
        self.assertEqual(self.r.lrange(inprogress(d.identity), 0, -1), [j.encode()])
        d.open_gate(jid, 0)
        wait_for(lambda: self.r.get(PROCESSED) == b"1", message="processed = 1")
        wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0,
                 message="in-progress list emptied")
        self.assertEqual(d.runs_of(jid), 1)

    def test_fe2_paused_queue_is_skipped_and_left_untouched(self):
        self.r.sadd(PAUSED, "default")
        jd = job("G", queue="default")
        jl = job("G", queue="low")
        self.push(jd, "default")
        self.push(jl, "low")
        d = self.daemon(handlers=gate_handlers(), queues=["default", "low"])
        jid_l = json.loads(jl)["jid"]
        wait_for(lambda: d.runs_of(jid_l) == 1, message="the low job to run")
        d.open_gate(jid_l)
        time.sleep(2.5)        # a whole BLMOVE wait and more
        self.assertEqual(d.runs_of(json.loads(jd)["jid"]), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [jd.encode()])

    def test_fe5_single_distinct_queue_blocks_server_side_with_blmove(self):
        # Issue 12: the idle block is 30 s (IDLE_BLOCK, cut short by CLIENT UNBLOCK), not 2.
        with Monitor(self.server) as mon:
            d = self.daemon(handlers=gate_handlers(), queues=["default", "default"])
            want = [b"BLMOVE", qkey("default"), inprogress(d.identity), b"RIGHT", b"LEFT", b"30"]
            first = mon.wait_command(lambda e: [a.upper() if i in (0, 3, 4) else a
                                                for i, a in enumerate(e[2])] == want,
                                     message="BLMOVE ... RIGHT LEFT 30")
            # push 0.3 s into a wait
            delay = first[0] + 0.3 - time.time()
            if delay > 0:
                time.sleep(delay)
            j = job("G")
            jid = json.loads(j)["jid"]
            t0 = time.monotonic()
            self.push(j)
            wait_for(lambda: d.runs_of(jid) == 1, timeout=1.5, message="the job to start")
            started = time.monotonic() - t0
            self.assertEqual(self.r.lrange(inprogress(d.identity), 0, -1), [j.encode()])
            d.open_gate(jid)
            wait_for(lambda: self.r.get(PROCESSED) == b"1")
            time.sleep(0.3)
            # the single-queue path never runs the fetch script
            fetch_calls = [e for e in mon.entries()
                           if e[1] == "lua" and e[2][0].upper() == b"LMOVE"]
            self.assertEqual(fetch_calls, [], "fetch script used on a single queue")
        self.assertLess(started, 1.5)

    def test_fe7_script_flush_is_answered_by_eval_then_evalsha_again(self):
        d = self.daemon(handlers=gate_handlers(), queues=["default", "low"],
                        fetch_idle_max_interval=0.2)
        mon = Monitor(self.server).start()
        self.addCleanup(mon.stop)
        fetch_evalsha = mon.wait_command(
            lambda e: e[2][0].upper() == b"EVALSHA" and
            e[2][-1] == inprogress(d.identity), timeout=5,
            message="a fetch EVALSHA")
        sha = fetch_evalsha[2][1]
        t_flush = time.time()
        self.r.script_flush()
        ev = mon.wait_command(lambda e: e[0] > t_flush and e[2][0].upper() == b"EVAL" and
                              e[2][-1] == inprogress(d.identity), timeout=6,
                              message="the EVAL fallback of the fetch script")
        before = [e for e in mon.entries()
                  if t_flush < e[0] <= ev[0] and e[2][0].upper() == b"EVALSHA" and
                  e[2][1] == sha]
        self.assertTrue(before, "no EVALSHA answered NOSCRIPT before the EVAL")
        self.assertIn(b"LMOVE", ev[2][1])
        self.assertEqual(self.r.script_exists(sha.decode()), [True])
        mon.wait_command(lambda e: e[0] > ev[0] + 0.01 and e[2][0].upper() == b"EVALSHA" and
                         e[2][1] == sha, timeout=6, message="EVALSHA again after the EVAL")

    def test_fe9_lmove_into_inprogress_then_ack_lrem_one(self):
        with Monitor(self.server) as mon:
            d = self.daemon(handlers=[{"class": "T", "command": ["/bin/true"]}],
                            queues=["default", "low"], concurrency=2)
            time.sleep(0.3)
            j = job("T", queue="low")
            jid = json.loads(j)["jid"]
            self.push(j, "low")
            wait_for(lambda: self.r.get(PROCESSED) == b"1")
            wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0)
            time.sleep(0.2)
            ent = mon.entries()
        il = inprogress(d.identity)
        moves = [e for e in ent if e[2][0].upper() in (b"LMOVE", b"BLMOVE") and
                 e[2][1] == qkey("low") and e[2][2] == il]
        self.assertTrue(moves, "no LMOVE/BLMOVE from the queue into %r" % il)
        lrems = [e for e in ent if e[2][0].upper() == b"LREM" and e[2][1] == il]
        self.assertEqual(len(lrems), 1, lrems)
        self.assertEqual(lrems[0][2][2:], [b"1", j.encode()])
        self.assertEqual(self.r.exists("cogworker:orphanings:" + jid), 0)

    def test_fe13_a_plain_success_is_acked_by_its_record_and_one_lrem(self):
        """FE-13: a plain job's silent success costs its ack the settled record's SET ... GET
        and one LREM: no DEL of its orphan counter, no EXISTS of its kept output (its
        record was empty: nothing recovered it, no one follows it); its record says
        success and nothing of it is kept."""
        with Monitor(self.server) as mon:
            d = self.daemon(handlers=[{"class": "T", "command": ["/bin/true"]}],
                            concurrency=1)
            time.sleep(0.3)
            j = job("T")
            jid = json.loads(j)["jid"]
            self.push(j)
            wait_for(lambda: self.r.get(PROCESSED) == b"1")
            wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0)
            time.sleep(0.3)
            ent = mon.entries()
        about = [e[2] for e in ent if any(jid.encode() in a for a in e[2][1:2])]
        self.assertEqual([a[0].upper() for a in about], [b"SET"], about)
        self.assertEqual(about[0][2:], [b"success", b"EX", b"600", b"GET"])
        self.assertEqual(self.r.get("cogworker:batch:settled:" + jid), b"success")
        self.assertEqual(self.r.keys("cogworker:output:" + jid + "*"), [])

    def test_fe10_a_busy_fetcher_acks_with_its_next_fetch(self):
        # The ack of the job that ended rides on the fetch of the next one (src/fetch.c):
        # a busy fetcher costs Redis one read event (one pipeline) per job, not two.
        n = 400
        p = self.r.pipeline(transaction=False)
        for _ in range(n):
            p.lpush(qkey("default"), job("T"))
        p.execute()

        def reads():
            return self.r.info("stats")["total_reads_processed"]
        before = reads()
        d = self.daemon(handlers=[{"class": "T", "command": ["/bin/true"]}],
                        concurrency=1, output_keep=0)
        wait_for(lambda: self.r.llen(qkey("default")) == 0, timeout=60, interval=0.2)
        # The last job's ack goes with the try that finds the queue empty: not held
        # until a job comes.
        wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0, timeout=2, interval=0.01,
                 message="the last job acked")
        per_job = (reads() - before) / n
        report = "%.2f read events per job" % per_job
        self.assertLess(per_job, 1.5, report)
        wait_for(lambda: self.r.get(PROCESSED) == str(n).encode(), timeout=5)


    def test_fe11_fetchers_that_want_a_job_together_share_a_round_trip(self):
        """Warm no-op jobs at concurrency 16: the tries of fetchers that finish while another
        fetcher's round trip is in flight ride on the next one (src/fetch.c), so the server
        answers fewer pipelines than there are jobs; each job still runs exactly once.
        Without prefetch (warm_prefetch_hold = 0): a prefetch's try is its own round trip
        by design (doc/protocol.md §7.9 2), awaited while the job runs."""
        n = 2000
        p = self.r.pipeline(transaction=False)
        jids = []
        for _ in range(n):
            j = job("W")
            jids.append(json.loads(j)["jid"])
            p.lpush(qkey("default"), j)
        d = self.daemon(handlers=[{"class": "W", "command": handler("warm_sh"), "warm": True,
                                   "warm_prefetch_hold": 0}],
                        concurrency=16, output_keep=0)
        time.sleep(1.0)         # every fetcher parked, its warm process not yet started

        def writes():
            return self.r.info("stats")["total_writes_processed"]
        p.execute()
        before = writes()
        wait_for(lambda: self.r.llen(qkey("default")) == 0, timeout=120, interval=0.2)
        wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0, timeout=10, interval=0.05,
                 message="every job acked")
        per_job = (writes() - before) / n
        # One pipeline per job without the sharing (1.01 measured), 0.75-0.82 with it here;
        # the bound leaves room for a host where fewer fetchers finish together.
        self.assertLess(per_job, 0.95, "%.2f server writes per job" % per_job)
        with open(os.path.join(d.workdir, "runs")) as f:
            ran = [line.split('"jid":"')[1].split('"')[0] for line in f if '"jid":"' in line]
        self.assertEqual(sorted(ran), sorted(jids))


class IdleLatency(DaemonTestCase):
    """Issue 2 point 5: an idle daemon starts a job on *any* of its queues at once."""

    N = 50

    def measure(self, queues, concurrency, n=N, settle=0.15):
        d = self.daemon(handlers=[{"class": "T", "command": ["/bin/true"]}],
                        queues=queues, concurrency=concurrency)
        time.sleep(1.0)        # every fetcher parked
        pushed = {}
        rnd = random.Random(7)
        names = [q.split(",")[0] for q in queues]
        for i in range(n):
            q = names[i % len(names)] if i < len(names) * 2 else rnd.choice(names)
            j = job("T", queue=q)
            jid = json.loads(j)["jid"]
            pushed[jid] = time.time()
            self.push(j, q)
            wait_for(lambda: len(d.log_lines("done: T")) == i + 1, timeout=10,
                     message="job %d done" % i)
            time.sleep(settle + rnd.random() * 0.1)
        lat = []
        for line in d.log_lines("start: T jid="):
            jid = line.split("jid=")[1].split()[0]
            lat.append(log_time(line) - pushed[jid])
        self.assertEqual(len(lat), n)
        # processed is flushed once a second (src/batch.c)
        wait_for(lambda: self.r.get(PROCESSED) == str(n).encode(), timeout=5)
        self.assertEqual(self.r.get(PROCESSED), str(n).encode())
        return lat

    def report(self, name, lat):
        p50, p99 = percentile(lat, 50) * 1000, percentile(lat, 99) * 1000
        sys.stderr.write("\n  %s: enqueue->start p50 %.1f ms, p99 %.1f ms, max %.1f ms, "
                         "%d of %d over 50 ms\n" % (name, p50, p99, max(lat) * 1000,
                                                    sum(1 for x in lat if x > 0.050),
                                                    len(lat)))
        out = os.environ.get("COGWORKERD_LATENCY_REPORT")
        if out:
            with open(out, "a") as f:
                f.write("%s p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n" % (name, p50, p99,
                                                                     max(lat) * 1000))
        return p99 / 1000.0

    def assert_fast(self, lat):
        """p99 < 50 ms, except that one sample of the 50 may be a scheduling hiccup of a
        loaded CI machine: a fetcher missing from a queue costs a whole BLMOVE wait
        (0.1-2 s) and shows on many samples (13-18 of 50 before the fix for five queues)."""
        slow = sorted(x for x in lat if x > 0.050)
        self.assertLessEqual(len(slow), 1, "samples over 50 ms: %s"
                             % ", ".join("%.0f ms" % (x * 1000) for x in slow))
        self.assertLess(max(lat), 0.5)

    def test_two_queues_idle_start_latency(self):
        lat = self.measure(["default", "low"], concurrency=2)
        self.report("two queues, concurrency 2", lat)
        self.assert_fast(lat)

    def test_two_weighted_queues_default_concurrency(self):
        lat = self.measure(["critical,3", "default"], concurrency=10, n=30)
        self.report("critical,3 + default, concurrency 10", lat)
        self.assert_fast(lat)

    def test_five_queues_idle_start_latency(self):
        lat = self.measure(["q1", "q2", "q3", "q4", "q5"], concurrency=5)
        self.report("five queues, concurrency 5", lat)
        self.assert_fast(lat)

    def test_paused_queue_honoured_while_idle(self):
        d = self.daemon(handlers=[{"class": "T", "command": handler("ok")}],
                        queues=["default", "low"], concurrency=2)
        time.sleep(0.5)
        self.r.sadd(PAUSED, "default")
        time.sleep(2.5)        # parked waits begun before the pause have ended
        jd = job("T", queue="default")
        jid_d = json.loads(jd)["jid"]
        self.push(jd, "default")
        jl = job("T", queue="low")
        jid_l = json.loads(jl)["jid"]
        t0 = time.monotonic()
        self.push(jl, "low")
        wait_for(lambda: d.runs_of(jid_l) == 1, timeout=2, message="the low job")
        self.assertLess(time.monotonic() - t0, 0.5)
        time.sleep(2.5)
        self.assertEqual(d.runs_of(jid_d), 0, "a job of a paused queue ran")
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [jd.encode()])
        self.r.srem(PAUSED, "default")
        wait_for(lambda: d.runs_of(jid_d) == 1, timeout=4,
                 message="the default job after the queue was resumed")


class FetchModeOnModernServer(DaemonTestCase):

    def test_fm1_reliable_by_default_and_registered(self):
        d = self.daemon(handlers=gate_handlers())
        j = job("G")
        jid = json.loads(j)["jid"]
        self.push(j)
        wait_for(lambda: d.runs_of(jid) == 1)
        self.assertEqual(self.r.lrange(inprogress(d.identity), 0, -1), [j.encode()])
        self.assertTrue(self.r.sismember(IDENTITIES, d.identity))
        d.open_gate(jid)
        wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0 and
                 self.r.get(PROCESSED) == b"1")

    def test_fm4_redis_down_at_start_then_reliable(self):
        self.server.pause()
        try:
            d = self.daemon(start=False, handlers=gate_handlers(),
                            redis={"command_timeout": 0.5, "connect_timeout": 0.5})
            d.start(wait=False)
            time.sleep(2.0)
            self.assertNotIn("started, identity=", d.log())
        finally:
            self.server.resume()
        d.wait_started(timeout=10)
        j = job("G")
        jid = json.loads(j)["jid"]
        self.push(j)
        wait_for(lambda: d.runs_of(jid) == 1)
        self.assertEqual(self.r.lrange(inprogress(d.identity), 0, -1), [j.encode()])
        d.open_gate(jid)
        wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0)
        self.assertNotIn("falling back", d.log())

    def test_fm4_version_check_cut_by_the_network_is_not_memoised(self):
        # the connection drops exactly on the first INFO (the fetch-mode check): the
        # failed check must be asked again, not remembered as "old server"
        proxy = TcpProxy(self.server.port)
        self.addCleanup(proxy.close)
        proxy.blackhole_on(b"INFO")
        d = self.daemon(handlers=gate_handlers(), url=proxy.url, concurrency=2,
                        redis={"command_timeout": 0.5, "connect_timeout": 0.5})
        wait_for(lambda: proxy.holed, timeout=5, message="the INFO cut")
        time.sleep(1.5)
        proxy.restore()
        j = job("G")
        jid = json.loads(j)["jid"]
        self.push(j)
        wait_for(lambda: d.runs_of(jid) == 1, timeout=8)
        self.assertEqual(self.r.lrange(inprogress(d.identity), 0, -1), [j.encode()])
        d.open_gate(jid)
        wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0)
        self.assertNotIn("falling back", d.log())

    def test_fm5_first_info_after_first_presence_write(self):
        with Monitor(self.server) as mon:
            d = self.daemon(handlers=gate_handlers(), queues=["default", "low"])
            presence = ("cogworker:process:" + d.identity).encode()
            mon.wait_command(lambda e: e[2][0].upper() == b"INFO", timeout=5,
                             message="INFO")
            ent = mon.entries()
        first_hset = next(i for i, e in enumerate(ent)
                          if e[2][0].upper() == b"HSET" and e[2][1] == presence)
        first_info = next(i for i, e in enumerate(ent) if e[2][0].upper() == b"INFO")
        self.assertLess(first_hset, first_info)


class FetchModeWithoutLmove(DaemonTestCase):
    """[NOLMOVE]: a 7.x server whose LMOVE and BLMOVE are renamed away (also for Lua);
    INFO still reports >= 6.2, so only the runtime "unknown command" tells. Seen through
    a proxy that makes INFO report 6.0, the same server is an [OLD] one (FM-2)."""

    redis_args = ("--rename-command", "LMOVE", "", "--rename-command", "BLMOVE", "")

    def run_falls_back(self, queues, url=None, concurrency=1):
        with Monitor(self.server) as mon:
            kw = {"url": url} if url else {}
            d = self.daemon(handlers=gate_handlers(), queues=queues, concurrency=concurrency,
                            **kw)
            jids = []
            for i in range(3):
                j = job("G", queue=queues[0])
                jids.append(json.loads(j)["jid"])
                self.push(j, queues[0])
            for jid in jids:
                wait_for(lambda: d.runs_of(jid) == 1, message="job %s to run" % jid)
                d.open_gate(jid)
            wait_for(lambda: self.r.get(PROCESSED) == b"3")
            t = time.time()
            time.sleep(2.5)
            ent = mon.entries()
            later = [e for e in ent if e[0] > t]
        self.assertEqual(len(d.log_lines("isn't supported by this Redis")), 1, d.log())
        self.assertIn("falling back to :basic", d.log())
        # An idle basic fetcher blocks 30 s (issue 12): its BRPOP may predate t.
        self.assertTrue([e for e in ent if e[2][0].upper() == b"BRPOP"],
                        "no BRPOP after the fallback")
        self.assertFalse([e for e in later if e[2][0].upper() in (b"EVALSHA", b"EVAL")
                          and e[2][-1] == inprogress(d.identity)],
                         "still running the fetch script after the fallback")
        self.assertEqual(self.r.exists(inprogress(d.identity)), 0)
        return d

    def test_fm3_two_queues_fetch_script_path(self):
        self.run_falls_back(["default", "low"])

    def test_fm3_many_fetchers_log_it_once(self):
        self.run_falls_back(["default", "low"], concurrency=4)

    def test_fm3_single_queue_blmove_path(self):
        self.run_falls_back(["default"])

    def test_fm3_info_refused_assumes_modern_then_falls_back(self):
        # The second half of FM-3 wants an [OLD] 6.0 server; on this [NOLMOVE] server an
        # ACL user without INFO takes the same path: the version check fails with a
        # command error, a modern server is assumed, LMOVE turns out missing.
        self.r.execute_command("ACL", "SETUSER", "noinfo", "on", ">pw", "~*", "&*", "+@all",
                               "-info")
        d = self.run_falls_back(["default", "low"],
                                url="redis://noinfo:pw@127.0.0.1:%d/0" % self.server.port)
        self.assertNotIn("needs Redis >= 6.2", d.log())

    def test_fm2_old_server_falls_back_to_basic(self):
        # [OLD] without a 6.0 binary: this class's server already lacks LMOVE and BLMOVE,
        # as 6.0 does, and a proxy makes its INFO say 6.0, so the version check at the first
        # fetch decides, before any LMOVE is tried (FM-3 is the other way to find out).
        version = self.r.info("server")["redis_version"]
        old = re.sub(r"^\d+\.\d+", "6.0", version)
        if len(old) != len(version):
            self.skipTest("can't pass %s off as a 6.0 of the same length" % version)
        proxy = TcpProxy(self.server.port)
        self.addCleanup(proxy.close)
        proxy.rewrite_replies(b"redis_version:" + version.encode(),
                              b"redis_version:" + old.encode())
        # "Never exists": a key cannot come into being without a keyspace event.
        self.r.config_set("notify-keyspace-events", "KA")
        self.addCleanup(self.r.config_set, "notify-keyspace-events", "")
        events = self.server.client().pubsub()
        self.addCleanup(events.close)
        events.psubscribe(b"__keyspace@0__:cogworker:inprogress:*")
        with Monitor(self.server) as mon:
            d = self.daemon(handlers=gate_handlers(), queues=["default", "low"], fetch="reliable",
                            url=proxy.url)
            j = job("G")
            jid = json.loads(j)["jid"]
            self.push(j)
            wait_for(lambda: d.runs_of(jid) == 1, message="the job to run")
            self.assertEqual(self.r.llen(qkey("default")), 0)
            d.open_gate(jid)
            wait_for(lambda: self.r.get(PROCESSED) == b"1")
            names = {e[2][0].upper() for e in mon.entries()}
        self.assertEqual(d.log_lines("falling back to :basic"),
                         d.log_lines("reliable fetch needs Redis >= 6.2 (LMOVE)"))
        self.assertEqual(len(d.log_lines("falling back to :basic")), 1, d.log())
        self.assertNotIn("isn't supported by this Redis", d.log())
        self.assertIn(b"BRPOP", names)
        self.assertFalse(names & {b"LMOVE", b"BLMOVE"}, "LMOVE tried on an old server")
        self.assertEqual(self.r.exists(inprogress(d.identity)), 0)
        touched = []
        while True:
            m = events.get_message(timeout=0.1)
            if m is None:
                break
            if m["type"] == "pmessage":
                touched.append((m["channel"], m["data"]))
        self.assertEqual(touched, [], "an in-progress list was written")
        self.assertEqual(d.stop(), 0)


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: MIT
"""Redis faults while the daemon runs, and its logging (issue 2 "Redis faults";
doc/behaviours.md HB-7, HB-9, HB-13, HB-24–26, RE-2, RE-5–9; doc/protocol.md §7.12,
§7.24, §7.25).

[DOWN] comes two ways: SIGSTOP of the redis-server (requests are buffered and run on
SIGCONT) and a TCP proxy between the daemon and Redis that drops every byte (a cut
network: what was sent is lost, and the test's own client still reaches Redis).
[RO] is REPLICAOF to a closed port. Timeouts are shortened through the conf
(redis.command_timeout, heartbeat_interval) so that outages of a few seconds are long.

Run: python3 tests/integration/run.py test_redis_faults
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import (DaemonTestCase, binary, free_port, handler, job,  # noqa: E402
                     new_jid, wait_for)
from observe import PipedDaemon, TcpProxy  # noqa: E402

PROCESSED = b"cogworker:stats:processed"
PROCESSES = b"cogworker:processes"

HANDLERS = [{"class": "G", "command": handler("gate")},
            {"class": "K", "command": handler("ok")},
            {"class": "F", "command": handler("fail")}]
FAST = {"command_timeout": 1.0, "connect_timeout": 1.0}


def qkey(q):
    return ("cogworker:queue:" + q).encode()


def inprogress(identity):
    return ("cogworker:inprogress:" + identity).encode()


def presence(identity):
    return ("cogworker:process:" + identity).encode()


def jid_of(j):
    return json.loads(j)["jid"]


def site_lines(d, phrase):
    """{site: [lines]} of the log lines `<site>: <phrase>...`."""
    out = {}
    for line in d.log().splitlines():
        m = re.search(r"(?:INFO|WARN|ERROR): (.+?): " + re.escape(phrase), line)
        if m:
            out.setdefault(m.group(1), []).append(line)
    return out


class FaultCase(DaemonTestCase):

    def gate_job_running(self, **settings):
        """A daemon (beats every second, 1 s Redis timeouts) running a G job: (d, job, jid)."""
        d = self.daemon(handlers=HANDLERS, heartbeat_interval=1, redis=FAST, **settings)
        j = job("G")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1, message="the job running")
        return d, j, jid_of(j)

    def assert_all_ran_once_and_settled(self, d, jobs, timeout=10):
        wait_for(lambda: all(d.runs_of(jid_of(j)) >= 1 for j in jobs), timeout=timeout,
                 message="every job to run")
        wait_for(lambda: self.r.llen(inprogress(d.identity)) == 0, timeout=timeout,
                 message="the in-progress list emptied")
        for j in jobs:
            self.assertEqual(d.runs_of(jid_of(j)), 1, "jid %s" % jid_of(j))
        self.assertEqual(self.r.keys(b"cogworker:queue:*"), [])

    def assert_one_line_per_episode(self, d):
        down = site_lines(d, "Redis unavailable — ")
        up = site_lines(d, "Redis available again after ")
        self.assertTrue(down, "no 'Redis unavailable' line:\n" + d.log()[-3000:])
        for site, lines in down.items():
            self.assertEqual(len(lines), 1, "site %s:\n%s" % (site, "\n".join(lines)))
            self.assertIn("(repeats summarized every 60s)", lines[0])
            self.assertEqual(len(up.get(site, [])), 1,
                             "site %s: recovery lines %r" % (site, up.get(site)))
        self.assertEqual(set(up), set(down))
        return down


class ConnectionKills(FaultCase):

    def test_client_kill_mid_run(self):
        d = self.daemon(handlers=HANDLERS, concurrency=3, queues=["default", "low"],
                        heartbeat_interval=1)
        jobs = [job("G") for _ in range(2)]
        for j in jobs:
            self.push(j)
        wait_for(lambda: all(d.runs_of(jid_of(j)) == 1 for j in jobs))
        killed = self.r.execute_command("CLIENT", "KILL", "TYPE", "normal")
        killed += self.r.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        self.assertGreaterEqual(killed, 4)      # fetchers, manager, subscriber, ...
        for j in jobs:
            d.open_gate(jid_of(j))
        self.assert_all_ran_once_and_settled(d, jobs)
        wait_for(lambda: self.r.get(PROCESSED) == b"2")
        # it carries on: remote control and fetching work again
        wait_for(lambda: self.r.execute_command(
            "PUBSUB", "NUMSUB", "cogworker:signal:" + d.identity)[1] == 1, timeout=5,
            message="the subscriber back")
        more = [job("K", queue=q) for q in ("default", "low", "default")]
        for j in more:
            self.push(j, json.loads(j)["queue"])
        self.assert_all_ran_once_and_settled(d, jobs + more)
        # kill them again while every fetcher is parked in BLMOVE
        time.sleep(0.5)
        self.r.execute_command("CLIENT", "KILL", "TYPE", "normal")
        late = job("K", queue="low")
        self.push(late, "low")
        self.assert_all_ran_once_and_settled(d, jobs + more + [late])
        self.r.expire(presence(d.identity), 5)
        wait_for(lambda: self.r.ttl(presence(d.identity)) > 5, timeout=3)
        self.assertIsNone(d.proc.poll())


    def test_restart_without_persistence_idle_daemon_re_registers(self):
        # the data is gone (no AOF here): the next beats write presence and the registry
        # again, scripts are loaded again (NOSCRIPT → EVAL), jobs run
        d = self.daemon(handlers=HANDLERS, concurrency=2, queues=["default", "low"],
                        heartbeat_interval=1, redis=FAST)
        self.r.set(b"marker", b"1")
        self.server.restart()
        self.r.connection_pool.disconnect()
        # The data is gone (not dbsize() == 0: the daemon may write again first, and does
        # over TLS, where the test's own reconnection is slower).
        self.assertEqual(self.r.exists(b"marker"), 0)
        wait_for(lambda: self.r.exists(presence(d.identity)) and
                 self.r.sismember(PROCESSES, d.identity), timeout=5,
                 message="presence written again")
        ks = [job("K", queue=q) for q in ("default", "low")]
        for k in ks:
            self.push(k, json.loads(k)["queue"])
        self.assert_all_ran_once_and_settled(d, ks)
        wait_for(lambda: self.r.execute_command(
            "PUBSUB", "NUMSUB", "cogworker:signal:" + d.identity)[1] == 1, timeout=5)


class KeysLost(FaultCase):
    """HB-24, HB-25 (issue 21, item 9): redis-server restarted empty (no persistence) while
    a job runs. The next beat finds the presence gone and files the running job again: in
    the in-progress list and the workers hash, so cogworkerctl shows it running, it is acked
    as usual when it ends, and a crash before that does not lose it."""

    def ctl(self, d, *args):
        p = subprocess.run([binary("cogworkerctl"), "-c", d.conf_path, "--json"] + list(args),
                           capture_output=True, text=True, timeout=10)
        self.assertEqual(p.returncode, 0, p.stderr)
        return json.loads(p.stdout)

    def restart_empty_while_running(self, **settings):
        d, g, _ = self.gate_job_running(concurrency=2, **settings)
        workers = b"cogworker:workers:" + d.identity.encode()
        wait_for(lambda: self.r.hlen(workers) == 1, message="its workers entry")
        self.server.restart()
        self.r.connection_pool.disconnect()
        wait_for(lambda: self.r.lrange(inprogress(d.identity), 0, -1) == [g.encode()],
                 timeout=10, message="the running job back in the in-progress list")
        wait_for(lambda: self.r.hlen(workers) == 1, timeout=5,
                 message="its workers entry written again")
        d.wait_log("filed running job jid=%s again" % jid_of(g))
        self.assertEqual(len(d.log_lines("presence was gone from Redis")), 1)
        return d, g

    def test_hb24_running_job_filed_again_shown_and_acked(self):
        d, g = self.restart_empty_while_running(orphan_check_interval=1)
        [p] = [p for p in self.ctl(d, "processes") if p["identity"] == d.identity]
        self.assertEqual(p["busy"], 1)
        running = self.ctl(d, "jobs", "list", "--set", "running")
        self.assertEqual([e["jid"] for e in running], [jid_of(g)])
        time.sleep(2.5)         # reconcile passes: it runs here, so it is no stray
        self.assertEqual(self.r.lrange(inprogress(d.identity), 0, -1), [g.encode()])
        d.open_gate(jid_of(g))
        self.assert_all_ran_once_and_settled(d, [g])
        wait_for(lambda: self.r.hlen(b"cogworker:workers:" + d.identity.encode()) == 0,
                 message="the workers entry gone with the job")
        self.assertEqual(d.runs_of(jid_of(g)), 1)

    def test_hb25_a_crash_after_the_empty_restart_loses_nothing(self):
        fast = {"process_ttl": 3, "orphan_threshold": 4, "orphan_check_interval": 1}
        d1, g = self.restart_empty_while_running(**fast)
        d1.kill()
        d2 = self.daemon(handlers=HANDLERS, concurrency=2, heartbeat_interval=1, **fast)
        wait_for(lambda: d2.runs_of(jid_of(g)) == 2, timeout=20,
                 message="the job recovered and run again")
        d2.open_gate(jid_of(g))
        wait_for(lambda: self.r.llen(inprogress(d2.identity)) == 0, timeout=10)
        self.assertFalse(self.r.exists(inprogress(d1.identity)))

    def test_hb27_basic_fetch_files_its_running_job_again_and_a_stop_requeues_it(self):
        """Basic fetch has no list: what its stop requeues is what the workers hash holds.
        Redis restarted empty while G runs: the beat writes the entry again, so a stop
        past the drain puts the job back on its queue instead of losing it."""
        d, g, jid = self.gate_job_running(fetch="basic", shutdown_timeout=1)
        workers = b"cogworker:workers:" + d.identity.encode()
        wait_for(lambda: self.r.hlen(workers) == 1, message="its workers entry")
        self.server.restart()
        self.r.connection_pool.disconnect()
        wait_for(lambda: self.r.hlen(workers) == 1, timeout=10,
                 message="its workers entry written again")
        self.assertIn(g.encode(), self.r.hvals(workers)[0])
        d.wait_log("filed 1 running job(s) again into cogworker:workers:")
        self.assertEqual(d.stop(), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [g.encode()])
        self.assertEqual(self.r.hlen(workers), 0)

    def test_hb26_a_job_recovered_from_this_process_is_not_filed_again(self):
        """What a recovery of this process's list as a dead one's leaves (its beats failed
        for longer than orphan_threshold): the job requeued, its orphan counter, no presence
        and no list. The job still runs here, but is not filed again: it is on its queue."""
        d = self.daemon(handlers=HANDLERS, concurrency=1, heartbeat_interval=1, redis=FAST)
        g = job("G")
        self.push(g)
        wait_for(lambda: d.runs_of(jid_of(g)) == 1, message="the job running")
        pipe = self.r.pipeline()
        pipe.delete(presence(d.identity), inprogress(d.identity))
        pipe.lpush(qkey("default"), g)
        pipe.incr("cogworker:orphanings:" + jid_of(g))
        pipe.execute()
        d.wait_log("jid=%s runs here but was recovered from this process's list" % jid_of(g),
                   timeout=5)
        self.assertEqual(self.r.llen(inprogress(d.identity)), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [g.encode()])
        d.open_gate(jid_of(g))         # then its requeued copy runs, as after any recovery
        wait_for(lambda: d.runs_of(jid_of(g)) == 2, message="the requeued copy")


class ServerRestart(FaultCase):
    """redis-server restarted (AOF on, so the data survives) while jobs run."""

    redis_args = ("--appendonly", "yes", "--appendfsync", "always")

    def test_restart_while_jobs_run_loses_nothing(self):
        d = self.daemon(handlers=HANDLERS, concurrency=3, queues=["default", "low"],
                        heartbeat_interval=1, redis=FAST)
        jobs = [job("G", queue=q) for q in ("default", "low") for _ in range(3)]
        for j in jobs:
            self.push(j, json.loads(j)["queue"])
        wait_for(lambda: sum(d.runs_of(jid_of(j)) for j in jobs) == 3,
                 message="three jobs running")
        running = [j for j in jobs if d.runs_of(jid_of(j)) == 1]
        self.server.restart()
        self.r.connection_pool.disconnect()
        # the jobs that ran through the restart finish afterwards
        for j in running:
            d.open_gate(jid_of(j))
        waiting = [j for j in jobs if j not in running]
        wait_for(lambda: all(d.runs_of(jid_of(j)) == 1 for j in waiting), timeout=10,
                 message="the other jobs to start after the restart")
        for j in waiting:
            d.open_gate(jid_of(j))
        self.assert_all_ran_once_and_settled(d, jobs)
        wait_for(lambda: self.r.exists(presence(d.identity)), timeout=3)
        after = job("K")
        self.push(after)
        self.assert_all_ran_once_and_settled(d, jobs + [after])
        self.assertIsNone(d.proc.poll())
        self.assertEqual(d.stop(), 0)

    def test_jobs_finishing_during_the_restart_are_settled_not_rerun(self):
        d = self.daemon(handlers=HANDLERS, concurrency=2, heartbeat_interval=1,
                        shutdown_timeout=3, redis=FAST)
        jobs = [job("G") for _ in range(2)]
        for j in jobs:
            self.push(j)
        wait_for(lambda: all(d.runs_of(jid_of(j)) == 1 for j in jobs))
        self.server.pause()
        try:
            for j in jobs:
                d.open_gate(jid_of(j))
            time.sleep(2.5)     # every ack attempt fails meanwhile
        finally:
            self.server.restart()
        self.r.connection_pool.disconnect()
        wait_for(lambda: self.r.exists(presence(d.identity)), timeout=5)
        # settled at the latest by the stop (pending acks are never requeued)
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(3 + 8), 0)
        self.assertEqual(self.r.llen(inprogress(d.identity)), 0)
        self.assertEqual(self.r.keys(b"cogworker:queue:*"), [])
        for j in jobs:
            self.assertEqual(d.runs_of(jid_of(j)), 1)


class Outages(FaultCase):

    def test_sigstop_outage_mid_job_then_carries_on(self):
        # [DOWN] by SIGSTOP; HB-7 (shortened): the beat loop survives failed beats
        d = self.daemon(handlers=HANDLERS, concurrency=2, queues=["default", "low"],
                        heartbeat_interval=1, redis=FAST)
        j = job("G")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        self.server.pause()
        time.sleep(4)
        self.server.resume()
        d.open_gate(jid_of(j))
        self.assert_all_ran_once_and_settled(d, [j])
        self.r.expire(presence(d.identity), 5)
        wait_for(lambda: self.r.ttl(presence(d.identity)) > 5, timeout=5,
                 message="presence refreshed after the outage")
        k = job("K", queue="low")
        self.push(k, "low")
        self.assert_all_ran_once_and_settled(d, [j, k])
        time.sleep(1.5)
        self.assert_one_line_per_episode(d)

    def test_re8_an_ack_that_gets_through_after_an_outage_is_logged_so(self):
        """Issue 21, item 18: a job finishes while Redis is stopped; its ack is owed, which
        is a warning, not an error, and the ack that gets through once Redis is back says
        so. No ERROR line about a job whose ack was not lost."""
        d, j, jid = self.gate_job_running(orphan_check_interval=1)
        self.server.pause()
        try:
            d.open_gate(jid)
            owed = d.wait_log("couldn't acknowledge finished job jid=%s yet" % jid, timeout=10)
        finally:
            self.server.resume()
        self.assertIn(" WARN: ", owed)
        done = d.wait_log("acknowledged finished job jid=%s " % jid, timeout=10)
        self.assertIn(" INFO: ", done)
        self.assertEqual([l for l in d.log().splitlines() if " ERROR: " in l and jid in l], [])
        self.assert_all_ran_once_and_settled(d, [j])

    def test_re9_an_ack_never_made_is_an_error_at_the_stop(self):
        """The ack is still owed when the daemon stops, and the stop cannot make it either
        (Redis read-only): then, and only then, an ERROR says so."""
        d, j, jid = self.gate_job_running(shutdown_timeout=1)
        self.r.execute_command("REPLICAOF", "127.0.0.1", free_port())
        try:
            d.open_gate(jid)
            d.wait_log("couldn't acknowledge finished job jid=%s yet" % jid, timeout=10)
            self.assertEqual(d.stop(), 0)
        finally:
            self.r.execute_command("REPLICAOF", "NO", "ONE")
        [line] = [l for l in d.log().splitlines() if " ERROR: " in l and jid in l]
        self.assertIn("finished job jid=%s was never acknowledged" % jid, line)
        self.assertIn("its recovery will run it again", line)
        self.assertEqual(self.r.lrange(inprogress(d.identity), 0, -1), [j.encode()])

    def test_hb9_down_at_start_no_presence_no_job_until_it_returns(self):
        proxy = TcpProxy(self.server.port)
        self.addCleanup(proxy.close)
        proxy.blackhole()
        k = job("K")
        self.push(k)
        d = self.daemon(start=False, handlers=HANDLERS, url=proxy.url, redis=FAST)
        d.start(wait=False)
        time.sleep(3.5)
        self.assertEqual(self.r.keys(b"cogworker:process*"), [])
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [k.encode()])
        self.assertEqual(d.runs_of(jid_of(k)), 0)
        self.assertNotIn("started, identity=", d.log())
        self.assertEqual(len(d.log_lines("Redis unavailable")), 1, d.log())
        t0 = time.monotonic()
        proxy.restore()
        d.wait_started(timeout=5)
        self.assertLess(time.monotonic() - t0, 3.5)    # retried about once a second
        self.assertTrue(self.r.exists(presence(d.identity)))
        wait_for(lambda: d.runs_of(jid_of(k)) == 1)
        # no job before the first beat succeeded (the banner itself comes after the
        # threads start, doc/protocol.md §7.1, so a fast fetcher may log before it)
        log = d.log()
        self.assertLess(log.index("Heartbeat: Redis available again"), log.index("start: K"))

    def test_hb7_hb13_network_cut_then_lock_retaken(self):
        # HB-7: a cut longer than the command timeout; HB-13: the first beat after a
        # failed one re-takes the running lock of a performing until_executed job
        proxy = TcpProxy(self.server.port)
        self.addCleanup(proxy.close)
        d = self.daemon(handlers=HANDLERS, url=proxy.url, heartbeat_interval=1,
                        concurrency=2, redis=FAST)
        jid = new_jid()
        j = job("G", jid=jid, periodic_pjid="pj13", periodic_until_executed=True)
        self.r.set("periodic:running:pj13", jid, ex=3600)
        jid2 = new_jid()
        j2 = job("G", jid=jid2, periodic_pjid="pj13b", periodic_until_executed=True)
        self.r.set("periodic:running:pj13b", jid2, ex=3600)
        self.push(j)
        self.push(j2)
        wait_for(lambda: d.runs_of(jid) == 1 and d.runs_of(jid2) == 1)
        proxy.blackhole()
        self.r.delete("periodic:running:pj13", "periodic:running:pj13b")
        wait_for(lambda: d.log_lines("Heartbeat: Redis unavailable"), timeout=5,
                 message="a failed beat")
        time.sleep(1.5)
        self.r.set("periodic:running:pj13b", "newer-run")
        proxy.restore()
        wait_for(lambda: self.r.get("periodic:running:pj13") == jid.encode(), timeout=5,
                 message="the lock re-taken by the first beat after the failed one")
        ttl = self.r.ttl("periodic:running:pj13")
        self.assertGreater(ttl, 0)
        self.assertLessEqual(ttl, 420)
        self.assertEqual(self.r.get("periodic:running:pj13b"), b"newer-run")
        self.r.expire(presence(d.identity), 5)
        wait_for(lambda: self.r.ttl(presence(d.identity)) > 5, timeout=5,
                 message="presence refreshed after the cut")
        d.open_gate(jid)
        d.open_gate(jid2)
        self.assert_all_ran_once_and_settled(d, [j, j2], timeout=15)


class SummarisedLogging(FaultCase):

    def test_re2_read_only_for_65s_one_line_a_minute_per_site(self):
        d = self.daemon(handlers=HANDLERS, concurrency=3, queues=["default", "low"],
                        heartbeat_interval=1, redis=FAST)
        self.r.execute_command("REPLICAOF", "127.0.0.1", free_port())
        try:
            time.sleep(65)
        finally:
            self.r.execute_command("REPLICAOF", "NO", "ONE")
        k = job("K")
        self.push(k)
        self.assert_all_ran_once_and_settled(d, [k])
        time.sleep(2)
        down = self.assert_one_line_per_episode(d)
        self.assertIn("Heartbeat", down)
        self.assertIn("READONLY", down["Heartbeat"][0])
        still = site_lines(d, "still unavailable — ")
        up = site_lines(d, "Redis available again after ")
        for site in ("Heartbeat", "Fetch"):
            self.assertEqual(len(still.get(site, [])), 1, "%s: %r" % (site, still.get(site)))
            n_more = int(re.search(r"still unavailable — (\d+) more error", still[site][0])
                         .group(1))
            n_all = int(re.search(r"available again after (\d+) error\(s\) over (\d+)s",
                                  up[site][0]).group(1))
            self.assertGreater(n_more, 10)
            self.assertGreaterEqual(n_all, n_more + 1)
        for site, lines in still.items():
            self.assertLessEqual(len(lines), 1, "%s: %r" % (site, lines))


class LogFormat(FaultCase):

    LINE = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z pid=%d (DEBUG|INFO|WARN|ERROR): "

    def test_re5_every_line_has_the_format_and_debug_is_hidden(self):
        d = self.daemon(start=False, handlers=HANDLERS)
        del d.settings["log_level"]           # the default level
        d.start()
        jobs = [job("K"), job("F", retry=False)]
        for j in jobs:
            self.push(j)
        wait_for(lambda: self.r.zcard("cogworker:dead") == 1 and
                 self.r.get(PROCESSED) == b"1")
        self.assertEqual(d.stop(), 0)
        lines = d.log().splitlines()
        self.assertGreater(len(lines), 5)
        pat = re.compile(self.LINE % d.proc.pid)
        for line in lines:
            self.assertRegex(line, pat)
            self.assertNotIn(" DEBUG: ", line)
        self.assertTrue([l for l in lines if "kaboom" in l and jid_of(jobs[1]) in l],
                        "handler output not logged with its jid")

    def test_re6_piped_output_survives_a_remote_stop(self):
        d = PipedDaemon(self.server, self.workdir, handlers=HANDLERS)
        self.daemons.append(d)
        d.start()
        k = job("K")
        self.push(k)
        d.wait_log("done: K jid=" + jid_of(k))
        self.r.publish("cogworker:signal:" + d.identity, "stop")
        self.assertEqual(d.wait_exit(8), 0)
        d.close()
        lines = d.log().splitlines()
        self.assertTrue(lines[-1].endswith("INFO: stopped"), lines[-3:])
        self.assertTrue([l for l in lines if "stopping:" in l])

    def test_re7_banner_and_no_password_anywhere(self):
        secret = "s3cr3t-Pw"
        self.r.execute_command("ACL", "SETUSER", "cwu", "reset", "on", ">" + secret, "~*",
                               "&*", "+@all")
        self.addCleanup(lambda: self.r.execute_command("ACL", "DELUSER", "cwu"))
        url = "redis://cwu:%s@127.0.0.1:%d/0" % (secret, self.server.port)
        d = self.daemon(handlers=HANDLERS, url=url, concurrency=2,
                        queues=["critical,2", "default"])
        banner = d.log_lines("started, identity=")[0]
        self.assertRegex(
            banner, r" INFO: cogworkerd \S+ started, identity=%s pid=%d concurrency=2 "
            r"queues=critical,default redis=\S+$" % (re.escape(d.identity), d.proc.pid))
        target = banner.rsplit("redis=", 1)[1]
        self.assertIn("127.0.0.1:%d" % self.server.port, target)
        self.assertNotIn(secret, d.log())
        self.assertEqual(d.stop(), 0)
        # a refused password is not echoed either
        bad = "redis://cwu:wrong-%s@127.0.0.1:%d/0" % (secret, self.server.port)
        d2 = self.daemon(start=False, handlers=HANDLERS, url=bad)
        d2.start(wait=False)
        d2.wait_log("AUTH", timeout=5)
        d2.signal(signal.SIGTERM)
        self.assertEqual(d2.wait_exit(5), 0)
        self.assertNotIn(secret, d2.log())


if __name__ == "__main__":
    unittest.main()

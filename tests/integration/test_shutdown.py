# SPDX-License-Identifier: MIT
"""Stopping the daemon: graceful stop with requeue, remote stop, and a kill -9 (doc/behaviours.md
FE-8, BF-6, BF-7, RC-4, HB-4, HB-5, HB-10, HB-17, LC-2, LC-6, LC-8; doc/protocol.md §7.2, §7.3), and
issue 2's acceptance checks:

- TERM while a 60 s job runs with shutdown_timeout = 2: the job is back on its queue, the
  handler and its children are gone, the daemon exits 0 within 10 s;
- kill -9 of the daemon mid-job: the job is still in cogworker:inprogress:<identity>, and
  the handler child is gone.

shutdown_timeout is shortened through the conf (the 25 s default changes nothing but the
wait).

Run: python3 tests/integration/run.py test_shutdown
"""

import json
import os
import signal
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, free_port, handler, job, new_jid, wait_for  # noqa: E402
from observe import TcpProxy, procs_with_env  # noqa: E402

PROCESSES = b"cogworker:processes"
LAST_BEAT = b"cogworker:last_beat"
IDENTITIES = b"cogworker:inprogress_identities"
PROCESSED = b"cogworker:stats:processed"

GATE = [{"class": "G", "command": handler("gate")},
        {"class": "S", "command": handler("slow", 60)}]


def qkey(q):
    return ("cogworker:queue:" + q).encode()


def inprogress(identity):
    return ("cogworker:inprogress:" + identity).encode()


def presence(identity):
    return ("cogworker:process:" + identity).encode()


def workers(identity):
    return ("cogworker:workers:" + identity).encode()


def jid_of(j):
    return json.loads(j)["jid"]


class GracefulStop(DaemonTestCase):

    def assert_job_processes_gone(self, jid, timeout=1.0):
        wait_for(lambda: procs_with_env("COGWORKER_JID", jid) == [], timeout=timeout,
                 message="every process of job %s gone" % jid)

    def test_fe8_unfinished_jobs_go_back_in_order_byte_identical(self):
        d = self.daemon(handlers=GATE, concurrency=3, queues=["default", "low"],
                        shutdown_timeout=2)
        old = job("G", queue="default")
        new = job("G", queue="default")
        l1 = job("G", queue="low")
        self.push(old, "default")
        self.push(new, "default")
        self.push(l1, "low")
        for j in (old, new, l1):
            wait_for(lambda: d.runs_of(jid_of(j)) == 1, message="all three running")
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(2 + 8), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [new.encode(), old.encode()])
        self.assertEqual(self.r.lrange(qkey("low"), 0, -1), [l1.encode()])
        self.assertEqual(self.r.llen(inprogress(d.identity)), 0)
        for j in (old, new, l1):
            self.assert_job_processes_gone(jid_of(j), timeout=0.5)
        self.assertIn("requeued 3 unfinished job(s)", d.log())
        # and the requeued jobs run again (at-least-once), oldest first; the runs file
        # is shared by both daemons of the test
        d2 = self.daemon(handlers=GATE, concurrency=1, queues=["default"])
        wait_for(lambda: d2.runs_of(jid_of(old)) == 2, message="old runs again first")
        self.assertEqual(d2.runs_of(jid_of(new)), 1)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [new.encode()])

    def test_term_during_60s_job_requeues_kills_tree_and_exits_0_within_10s(self):
        # issue 2, "What must hold on main"; LC-2 (reliable)
        d = self.daemon(handlers=GATE, shutdown_timeout=2, concurrency=3,
                        queues=["default", "low"])
        j = job("S")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        tree = wait_for(lambda: len(procs_with_env("COGWORKER_JID", jid_of(j))) >= 2 and
                        procs_with_env("COGWORKER_JID", jid_of(j)),
                        message="the handler and its sleep child")
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(10), 0)
        self.assertLess(time.monotonic() - t0, 10)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [j.encode()])
        self.assertEqual(self.r.llen(inprogress(d.identity)), 0)
        self.assert_job_processes_gone(jid_of(j), timeout=0.5)
        self.assertIn("stopping: 1 job(s) still running after 2s", d.log())
        for pid in tree:
            self.assertFalse(os.path.exists("/proc/%d/environ" % pid) and
                             pid in procs_with_env("COGWORKER_JID", jid_of(j)))
        self.assertEqual(self.r.get(PROCESSED), None)

    def draining(self, cls, shutdown_timeout):
        """A daemon (concurrency 2) running one job of cls, told to stop: in its drain."""
        d = self.daemon(handlers=GATE, concurrency=2, shutdown_timeout=shutdown_timeout)
        j = job(cls)
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        d.signal(signal.SIGTERM)
        d.wait_log("stopping:")
        return d, j

    def test_lc8_a_second_term_stops_the_drain_at_once(self):
        # LC-8: whoever stops a draining daemon again wants it gone now (a second Ctrl-C
        # under make run): the job is stopped and requeued without waiting out the 60 s.
        d, j = self.draining("S", shutdown_timeout=60)
        self.assertIn("stopping: waiting up to 60s for 1 running job(s)", d.log())
        t0 = time.monotonic()
        d.signal(signal.SIGINT)
        self.assertEqual(d.wait_exit(15), 0, d.log()[-4000:])
        self.assertLess(time.monotonic() - t0, 15)
        self.assertIn("stopping: stopped again: stopping the handlers of 1 running job(s) now; "
                      "their jobs go back to their queues", d.log())
        self.assertNotIn("still running after", d.log())
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [j.encode()])
        self.assertEqual(self.r.llen(inprogress(d.identity)), 0)
        self.assert_job_processes_gone(jid_of(j), timeout=0.5)

    def test_term_with_redis_unreachable_still_exits_within_shutdown_timeout_plus_5(self):
        # doc/design.md "Stop": exit within shutdown_timeout + 5 s, also when Redis has gone
        # away (SIGSTOP: connections hang rather than fail). Jobs stay in progress for
        # recovery; the handler is still stopped.
        d = self.daemon(handlers=GATE, shutdown_timeout=2, concurrency=3,
                        queues=["default", "low"])
        j = job("S")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        self.server.pause()
        try:
            t0 = time.monotonic()
            d.signal(signal.SIGTERM)
            self.assertEqual(d.wait_exit(12), 0, d.log()[-6000:])
            self.assertLess(time.monotonic() - t0, 2 + 5 + 0.5)
        finally:
            self.server.resume()
        self.assert_job_processes_gone(jid_of(j), timeout=0.5)
        self.assertEqual(self.r.lrange(inprogress(d.identity), 0, -1), [j.encode()])
        self.assertIn(d.identity.encode(), self.r.smembers(IDENTITIES))
        self.assertIn("Redis unreachable", d.log())

    def test_lc2_basic_mode_term_requeues_the_running_job(self):
        d = self.daemon(handlers=GATE, fetch="basic", shutdown_timeout=1)
        j = job("G")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(1 + 8), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [j.encode()])
        self.assert_job_processes_gone(jid_of(j), timeout=0.5)
        self.assertEqual(self.r.exists(workers(d.identity)), 0)

    def test_bf6_basic_requeue_retakes_the_running_lock(self):
        d = self.daemon(handlers=GATE, fetch="basic", shutdown_timeout=1)
        jid = new_jid()
        j = job("G", jid=jid, periodic_pjid="pj", periodic_until_executed=True)
        self.push(j)
        wait_for(lambda: d.runs_of(jid) == 1)
        self.r.delete("periodic:running:pj")
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(1 + 8), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [j.encode()])
        self.assertEqual(self.r.get("periodic:running:pj"), jid.encode())
        self.assertGreater(self.r.ttl("periodic:running:pj"), 420)

    def test_bf7_unreadable_workers_entry_is_skipped(self):
        d = self.daemon(handlers=GATE, fetch="basic", shutdown_timeout=1)
        j = job("G")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        wait_for(lambda: self.r.hlen(workers(d.identity)) == 1)
        self.r.hset(workers(d.identity), "bogusbogus00", "{not json")
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(1 + 8), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [j.encode()])
        self.assertTrue([l for l in d.log_lines("{not json") if "ERROR" in l or "WARN" in l],
                        d.log())

    def test_rc4_pending_ack_is_never_requeued_at_stop(self):
        # RC-4: the ack fails under [RO]; TERM right after [RO] ends, before any reconcile
        d = self.daemon(handlers=GATE, shutdown_timeout=3,
                        redis={"command_timeout": 2.0})
        j = job("G")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        closed = free_port()
        self.r.execute_command("REPLICAOF", "127.0.0.1", closed)
        try:
            d.open_gate(jid_of(j), 0)
            d.wait_log("couldn't acknowledge finished job jid=%s yet"
                       % jid_of(j), timeout=5)
            time.sleep(3)
        finally:
            self.r.execute_command("REPLICAOF", "NO", "ONE")
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(3 + 8), 0)
        self.assertEqual(self.r.llen(qkey("default")), 0)
        self.assertEqual(self.r.llen(inprogress(d.identity)), 0)
        self.assertEqual(d.runs_of(jid_of(j)), 1)
        self.assertEqual(self.r.keys(b"cogworker:queue:*"), [])


    def test_job_pushed_after_term_is_not_started(self):
        # fetchers still parked in BLMOVE when the stop begins hand what they get back
        d = self.daemon(handlers=GATE, concurrency=3, queues=["default", "low"],
                        shutdown_timeout=2)
        time.sleep(0.5)
        d.signal(signal.SIGTERM)
        time.sleep(0.2)
        late = [job("G", queue=q) for q in ("default", "low")]
        for j in late:
            self.push(j, json.loads(j)["queue"])
        self.assertEqual(d.wait_exit(2 + 8), 0)
        for j in late:
            self.assertEqual(d.runs_of(jid_of(j)), 0)
            self.assertEqual(self.r.lrange(qkey(json.loads(j)["queue"]), 0, -1), [j.encode()])
        self.assertEqual(self.r.keys(b"cogworker:inprogress:*"), [])
        self.assertNotIn("start: G", d.log())

    def test_gate_opened_during_the_drain_completes_without_requeue(self):
        d, j = self.draining("G", shutdown_timeout=10)
        time.sleep(0.5)
        d.open_gate(jid_of(j))
        self.assertEqual(d.wait_exit(8), 0)
        self.assertEqual(self.r.get(PROCESSED), b"1")
        self.assertEqual(self.r.keys(b"cogworker:queue:*"), [])
        self.assertEqual(self.r.keys(b"cogworker:inprogress:*"), [])


class StopAndPresence(DaemonTestCase):

    def numsub(self, identity):
        return self.r.execute_command("PUBSUB", "NUMSUB",
                                      "cogworker:signal:" + identity)[1]

    def test_hb4_remote_stop(self):
        d = self.daemon(handlers=GATE)
        wait_for(lambda: self.numsub(d.identity) == 1)
        self.r.publish("cogworker:signal:" + d.identity, "stop")
        self.assertEqual(d.wait_exit(8), 0)
        self.assertFalse(self.r.sismember(PROCESSES, d.identity))
        self.assertEqual(self.r.exists(presence(d.identity), workers(d.identity)), 0)
        self.assertIn("stopped", d.log().splitlines()[-1])

    def test_hb4_remote_stop_while_running_requeues(self):
        d = self.daemon(handlers=GATE, shutdown_timeout=1)
        j = job("G")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        self.r.publish("cogworker:signal:" + d.identity, "stop")
        self.assertEqual(d.wait_exit(1 + 8), 0)
        self.assertEqual(self.r.lrange(qkey("default"), 0, -1), [j.encode()])
        self.assertEqual(procs_with_env("COGWORKER_JID", jid_of(j)), [])

    def test_hb5_idle_term_is_quick_and_unsubscribes(self):
        d = self.daemon(handlers=GATE, queues=["default", "low"])
        wait_for(lambda: self.numsub(d.identity) == 1)
        t0 = time.monotonic()
        d.signal(signal.SIGTERM)
        self.assertEqual(d.wait_exit(5), 0)
        self.assertLess(time.monotonic() - t0, 5)
        wait_for(lambda: self.numsub(d.identity) == 0, timeout=1)
        # said as it is, not "waiting up to 25s for 0 running job(s)"
        self.assertEqual(len(d.log_lines("stopping: no job running")), 1, d.log())
        self.assertEqual(d.log_lines("waiting up to"), [])

    def test_hb17_clean_stop_removes_every_trace(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        wait_for(lambda: self.r.hget(LAST_BEAT, d.identity))
        self.assertTrue(self.r.sismember(IDENTITIES, d.identity))
        self.assertEqual(d.stop(), 0)
        self.assertFalse(self.r.sismember(PROCESSES, d.identity))
        self.assertEqual(self.r.exists(presence(d.identity), workers(d.identity),
                                       inprogress(d.identity)), 0)
        self.assertFalse(self.r.sismember(IDENTITIES, d.identity))
        self.assertIsNone(self.r.hget(LAST_BEAT, d.identity))

    def test_hb10_term_while_waiting_for_the_first_beat(self):
        # [DOWN] by a TCP proxy that drops every byte (a SIGSTOPped server would run the
        # buffered first presence write once it resumes, after the daemon is gone)
        proxy = TcpProxy(self.server.port)
        self.addCleanup(proxy.close)
        proxy.blackhole()
        d = self.daemon(start=False, handlers=GATE, url=proxy.url,
                        redis={"command_timeout": 1.0, "connect_timeout": 1.0})
        d.start(wait=False)
        time.sleep(2.5)
        d.signal(signal.SIGTERM)
        status = d.wait_exit(1.0 + 4)
        proxy.restore()
        self.assertEqual(status, 0)
        self.assertNotIn("started, identity=", d.log())
        self.assertEqual(self.r.smembers(PROCESSES), set())
        self.assertEqual(self.r.keys(b"cogworker:process:*"), [])
        self.assertEqual(self.r.keys(b"cogworker:inprogress*"), [])


class KillNine(DaemonTestCase):

    def test_kill_9_mid_job_keeps_it_in_progress_and_the_child_dies(self):
        # issue 2 "kill -9 of the daemon mid-job"; LC-6
        d = self.daemon(handlers=GATE)
        j = job("S")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        children = wait_for(lambda: [p for p in procs_with_env("COGWORKER_JID", jid_of(j))
                                     if self.ppid(p) == d.proc.pid])
        tree = wait_for(lambda: len(procs_with_env("COGWORKER_JID", jid_of(j))) >= 2 and
                        procs_with_env("COGWORKER_JID", jid_of(j)),
                        message="the handler and its sleep child")
        identity = d.identity
        d.signal(signal.SIGKILL)
        d.proc.wait()
        wait_for(lambda: not any(self.alive(p) for p in children), timeout=5.0,
                 message="the handler child dying with the daemon")
        # ...and its own children too (slow's `sleep 60`, which PR_SET_PDEATHSIG does not
        # cover): the reaper kills the whole process group, so a recovered copy of the job
        # never runs beside the old one.
        wait_for(lambda: not any(self.alive(p) for p in tree), timeout=5.0,
                 message="the handler's whole process tree gone")
        self.assertEqual(self.r.lrange(inprogress(identity), 0, -1), [j.encode()])
        self.assertEqual(self.r.llen(qkey("default")), 0)
        # its registration stays, so that a live process recovers the list later
        self.assertTrue(self.r.sismember(IDENTITIES, identity))

    @staticmethod
    def ppid(pid):
        from observe import ppid_of
        return ppid_of(pid)

    @staticmethod
    def alive(pid):
        from observe import pid_alive
        return pid_alive(pid)


if __name__ == "__main__":
    unittest.main()

# SPDX-License-Identifier: MIT
"""Heartbeat, presence and remote control (doc/behaviours.md group HB; doc/protocol.md §7.12, §7.13).

The beat interval is shortened through the conf (heartbeat_interval = 1) where the
scenario does not depend on it. HB-4, HB-5, HB-10 and HB-17 (stops) are in
test_shutdown.py; HB-7, HB-9 and HB-13 (Redis down) in test_redis_faults.py. HB-8 needs
two periodic runs with the ticker's locks and is left to the periodic tests.

Run: python3 tests/integration/run.py test_heartbeat
"""

import json
import os
import re
import signal
import socket
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, handler, job, new_jid, wait_for  # noqa: E402
from observe import TcpProxy  # noqa: E402

PROCESSES = b"cogworker:processes"
QUEUES = b"cogworker:queues"
LIVE = b"cogworker:live_queues"
LAST_BEAT = b"cogworker:last_beat"
IDENTITIES = b"cogworker:inprogress_identities"
PROCESSED = b"cogworker:stats:processed"


def presence(identity):
    return ("cogworker:process:" + identity).encode()


def workers(identity):
    return ("cogworker:workers:" + identity).encode()


def channel(identity):
    return "cogworker:signal:" + identity


def jid_of(j):
    return json.loads(j)["jid"]


GATE = [{"class": "G", "command": handler("gate")}, {"class": "K", "command": handler("ok")}]


class Presence(DaemonTestCase):

    def redis_time(self):
        s, us = self.r.time()
        return s + us / 1e6

    def test_hb1_presence_hash_info_ttl_and_processes(self):
        d = self.daemon(handlers=GATE, concurrency=3, queues=["critical,3", "default"])
        self.assertRegex(d.identity, r"^%s:%d:[0-9a-f]{12}$"
                         % (re.escape(socket.gethostname()), d.proc.pid))
        h = self.r.hgetall(presence(d.identity))
        self.assertEqual(h[b"busy"], b"0")
        self.assertEqual(h[b"quiet"], b"false")
        info = json.loads(h[b"info"])
        self.assertEqual(info["hostname"], socket.gethostname())
        self.assertEqual(info["pid"], d.proc.pid)
        self.assertEqual(info["concurrency"], 3)
        self.assertEqual(info["queues"], ["critical", "default"])
        self.assertIsInstance(info["started_at"], float)
        self.assertLess(abs(info["started_at"] - time.time()), 30)
        self.assertIsInstance(info["rss_kb"], int)
        self.assertGreater(info["rss_kb"], 0)
        self.assertTrue(self.r.sismember(PROCESSES, d.identity))
        end = time.monotonic() + 11      # two beats and more at the default 5 s
        while time.monotonic() < end:
            ttl = self.r.pttl(presence(d.identity)) / 1000.0
            self.assertGreater(ttl, 54)     # a beat is 5 s after the last one ended
            self.assertLessEqual(ttl, 60)
            time.sleep(0.5)

    def test_hb1_dyno_names_the_host(self):
        d = self.daemon(start=False, handlers=GATE)
        d.start(env={"DYNO": "web.7"})
        self.assertTrue(d.identity.startswith("web.7:%d:" % d.proc.pid), d.identity)
        info = json.loads(self.r.hget(presence(d.identity), b"info"))
        self.assertEqual(info["hostname"], "web.7")

    def test_process_ttl_from_the_conf(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1, process_ttl=7)
        for _ in range(8):
            ttl = self.r.pttl(presence(d.identity)) / 1000.0
            self.assertGreater(ttl, 5.5)
            self.assertLessEqual(ttl, 7)
            time.sleep(0.4)

    def test_hb2_busy_follows_running_jobs(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1, concurrency=2)
        jobs = [job("G") for _ in range(2)]
        for j in jobs:
            self.push(j)
        wait_for(lambda: self.r.hget(presence(d.identity), "busy") == b"2", timeout=3)
        d.open_gate(jid_of(jobs[0]))
        wait_for(lambda: self.r.hget(presence(d.identity), "busy") == b"1", timeout=3)
        d.open_gate(jid_of(jobs[1]))
        wait_for(lambda: self.r.hget(presence(d.identity), "busy") == b"0", timeout=3)

    def test_hb3_restart_gets_a_new_identity_and_old_keys_go(self):
        d1 = self.daemon(handlers=GATE)
        old = d1.identity
        self.assertEqual(d1.stop(), 0)
        d2 = self.daemon(handlers=GATE)
        self.assertNotEqual(d2.identity, old)
        self.assertNotEqual(d2.identity.rsplit(":", 1)[1], old.rsplit(":", 1)[1])
        self.assertEqual(self.r.exists(presence(old), workers(old),
                                       "cogworker:inprogress:" + old), 0)
        self.assertFalse(self.r.sismember(PROCESSES, old))
        self.assertFalse(self.r.sismember(IDENTITIES, old))
        self.assertIsNone(self.r.hget(LAST_BEAT, old))
        self.assertEqual(self.r.smembers(PROCESSES), {d2.identity.encode()})

    def test_hb15_hb16_queues_and_live_queues(self):
        self.r.zadd(LIVE, {"stale": self.redis_time() - 86401})
        self.daemon(handlers=GATE, queues=["default", "low"], heartbeat_interval=1)
        self.assertEqual(self.r.smembers(QUEUES), {b"default", b"low"})
        wait_for(lambda: self.r.zscore(LIVE, "stale") is None, timeout=3,
                 message="the stale live_queues member pruned")
        for q in ("default", "low"):
            self.assertLess(abs(self.r.zscore(LIVE, q) - self.redis_time()), 5)
        # refreshed: a score set back is moved forward by the next beat
        self.r.zadd(LIVE, {"low": self.redis_time() - 1000})
        wait_for(lambda: self.redis_time() - self.r.zscore(LIVE, "low") < 5, timeout=3)

    def test_hb21_workers_hash_while_running(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        j = job("G", args=[9007199254740993, "é"])
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        h = wait_for(lambda: self.r.hgetall(workers(d.identity)))
        self.assertEqual(len(h), 1)
        field, value = next(iter(h.items()))
        self.assertRegex(field.decode(), r"^[0-9a-f]{12}$")
        v = json.loads(value)
        self.assertEqual(v["queue"], "default")
        self.assertEqual(v["payload"], json.loads(j))
        # the payload is spliced in, not re-encoded: the big integer keeps its digits
        self.assertIn(b"9007199254740993", value)
        self.assertIsInstance(v["run_at"], int)
        self.assertLess(abs(v["run_at"] - time.time()), 5)
        time.sleep(1.5)            # a beat has refreshed the TTL
        ttl = self.r.ttl(workers(d.identity))
        self.assertGreater(ttl, 0)
        self.assertLessEqual(ttl, 60)
        d.open_gate(jid_of(j))
        wait_for(lambda: self.r.hlen(workers(d.identity)) == 0)

    def test_hb22_first_workers_entry_has_a_ttl_before_the_next_beat(self):
        # A beat 25 s away: the only beat so far ran before the hash existed, so the
        # entry's TTL can come only from the flush that wrote it. Without one, a kill -9
        # now would leave the entry (a job shown running on a dead process) for ever.
        d = self.daemon(handlers=GATE, heartbeat_interval=25, process_ttl=60)
        j = job("G")
        self.push(j)
        wait_for(lambda: self.r.hlen(workers(d.identity)) == 1, timeout=5,
                 message="the workers entry")
        ttl = self.r.ttl(workers(d.identity))
        self.assertGreater(ttl, 0)
        self.assertLessEqual(ttl, 60)
        d.open_gate(jid_of(j))


class RemoteControl(DaemonTestCase):

    def test_hb18_quiet_and_resume_over_the_channel(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        wait_for(lambda: self.r.execute_command("PUBSUB", "NUMSUB", channel(d.identity))[1]
                 == 1, message="the subscriber")
        self.r.publish(channel(d.identity), "quiet")
        wait_for(lambda: self.r.hget(presence(d.identity), "quiet") == b"true", timeout=5)
        time.sleep(0.6)             # a fetch begun before quiet has had its chance
        j = job("K")
        self.push(j)
        time.sleep(3.0)
        self.assertEqual(d.runs_of(jid_of(j)), 0)
        self.assertEqual(self.r.llen("cogworker:queue:default"), 1)
        self.r.publish(channel(d.identity), "resume")
        wait_for(lambda: self.r.hget(presence(d.identity), "quiet") == b"false", timeout=5)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1, timeout=5)
        self.assertIsNone(d.proc.poll())

    def test_hb23_signal_arriving_with_the_subscribe_reply(self):
        """HB-23: a signal that reaches the subscriber in the same read as its SUBSCRIBE's
        reply (published as it subscribes again) is acted on at once, not when the next
        message comes."""
        proxy = TcpProxy(self.server.port)
        self.addCleanup(proxy.close)
        d = self.daemon(handlers=GATE, heartbeat_interval=1, url=proxy.url)
        numsub = lambda: self.r.execute_command("PUBSUB", "NUMSUB", channel(d.identity))[1]
        wait_for(lambda: numsub() == 1, message="the subscriber")
        proxy.hold_replies()
        self.r.execute_command("CLIENT", "KILL", "TYPE", "pubsub")
        wait_for(lambda: numsub() == 1, message="the subscriber back")
        self.assertEqual(self.r.publish(channel(d.identity), "quiet"), 1)
        wait_for(lambda: any(b"quiet" in v for v in proxy.held_replies()),
                 message="the message held with the reply")
        proxy.release_replies()     # the SUBSCRIBE's reply and the message in one send
        wait_for(lambda: self.r.hget(presence(d.identity), "quiet") == b"true", timeout=5)

    def test_hb19_sigtstp_quiets_and_the_running_job_finishes(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        j = job("G")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        d.signal(signal.SIGTSTP)
        wait_for(lambda: self.r.hget(presence(d.identity), "quiet") == b"true", timeout=5)
        j2 = job("K")
        self.push(j2)
        d.open_gate(jid_of(j))
        wait_for(lambda: self.r.get(PROCESSED) == b"1", timeout=5)
        time.sleep(3.0)
        self.assertEqual(d.runs_of(jid_of(j2)), 0)
        self.assertEqual(self.r.lrange("cogworker:queue:default", 0, -1), [j2.encode()])
        self.assertIsNone(d.proc.poll(), "TSTP must not stop the daemon")
        # only a remote resume undoes quiet
        self.r.publish(channel(d.identity), "resume")
        wait_for(lambda: d.runs_of(jid_of(j2)) == 1, timeout=5)

    def test_hb20_unknown_message_is_a_warning(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        wait_for(lambda: self.r.execute_command("PUBSUB", "NUMSUB", channel(d.identity))[1]
                 == 1)
        self.r.publish(channel(d.identity), "dance")
        line = d.wait_log("dance")
        self.assertIn(" WARN: ", line)
        time.sleep(1.5)
        self.assertEqual(self.r.hget(presence(d.identity), "quiet"), b"false")
        j = job("K")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        self.assertIsNone(d.proc.poll())


class PeriodicLockRefresh(DaemonTestCase):
    """HB-6 and HB-14, with jobs carrying periodic fields pushed by the test."""

    def periodic_job(self, pjid):
        jid = new_jid()
        j = job("G", jid=jid, periodic_pjid=pjid, periodic_until_executed=True)
        self.r.set("periodic:running:" + pjid, jid, ex=3600)
        return j, jid

    def test_hb6_beat_refreshes_the_running_lock_without_the_workers_hash(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        j, jid = self.periodic_job("pj6")
        self.push(j)
        wait_for(lambda: d.runs_of(jid) == 1)
        self.r.delete(workers(d.identity))
        self.r.expire("periodic:running:pj6", 5)
        wait_for(lambda: self.r.ttl("periodic:running:pj6") > 5, timeout=3,
                 message="the lock TTL refreshed by a beat")
        self.assertLessEqual(self.r.ttl("periodic:running:pj6"), 420)
        self.assertEqual(self.r.get("periodic:running:pj6"), jid.encode())
        d.open_gate(jid)
        wait_for(lambda: self.r.get(PROCESSED) == b"1")

    def test_hb14_normal_beats_never_recreate_a_lock(self):
        d = self.daemon(handlers=GATE, heartbeat_interval=1)
        j, jid = self.periodic_job("pj14")
        self.push(j)
        wait_for(lambda: d.runs_of(jid) == 1)
        # performing, previous beat fine: a deleted lock stays deleted
        self.r.delete("periodic:running:pj14")
        time.sleep(2.5)
        self.assertEqual(self.r.exists("periodic:running:pj14"), 0)
        d.open_gate(jid)
        wait_for(lambda: self.r.get(PROCESSED) == b"1")
        # finished: its lock (released) is never brought back
        time.sleep(2.5)
        self.assertEqual(self.r.exists("periodic:running:pj14"), 0)


class RegistryFaults(DaemonTestCase):

    def acl_user(self, name, *rules):
        self.r.execute_command("ACL", "SETUSER", name, "reset", "on", ">pw", "~*", "&*",
                               "+@all", *rules)
        self.addCleanup(lambda: self.r.execute_command("ACL", "DELUSER", name))
        return "redis://%s:pw@127.0.0.1:%d/0" % (name, self.server.port)

    def test_hb11_time_refused_uses_the_host_clock(self):
        url = self.acl_user("notime", "-time")
        d = self.daemon(handlers=GATE, url=url, heartbeat_interval=1)
        self.assertTrue(self.r.exists(presence(d.identity)))
        first = float(wait_for(lambda: self.r.hget(LAST_BEAT, d.identity)))
        self.assertLess(abs(first - time.time()), 2)
        wait_for(lambda: float(self.r.hget(LAST_BEAT, d.identity) or 0) > first, timeout=4,
                 message="last_beat moving on")
        self.assertLess(abs(float(self.r.hget(LAST_BEAT, d.identity)) - time.time()), 2)
        j = job("K")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)

    def test_hb12_wrong_typed_registry_keys_do_not_stop_the_daemon(self):
        url = self.acl_user("noguard", "-rename")
        for k in (IDENTITIES, LAST_BEAT, PROCESSES):
            self.r.set(k, "oops")
        d = self.daemon(handlers=GATE, url=url, heartbeat_interval=1)
        self.assertTrue(self.r.exists(presence(d.identity)))
        j = job("K")
        self.push(j)
        wait_for(lambda: d.runs_of(jid_of(j)) == 1)
        wait_for(lambda: self.r.get(PROCESSED) == b"1")
        line = d.wait_log("process registry not written")
        self.assertIn("WRONGTYPE", line)
        # the presence hash is still refreshed beat after beat
        self.r.expire(presence(d.identity), 5)
        wait_for(lambda: self.r.ttl(presence(d.identity)) > 5, timeout=3)
        self.assertEqual(self.r.get(PROCESSES), b"oops")


if __name__ == "__main__":
    unittest.main()

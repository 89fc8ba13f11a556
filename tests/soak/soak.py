#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""soak.py: the chaos soak (make soak). N daemons run jobs that take 0-0.4 s (--max-run) against one
redis-server with an AOF (appendfsync always) while everything that can go wrong does:

  - kill -9 of a random daemon every few seconds (restarted a second later, a new identity),
    counting the jobs in flight on it at that moment: its in-progress list, and the handler
    runs it had started;
  - CLIENT KILL of every daemon connection;
  - one daemon frozen with SIGSTOP past process_ttl and orphan_threshold, then resumed;
  - DEBUG SLEEP of the server;
  - a crash of the server (SIGKILL) and a restart from its AOF.

A share of the jobs (--warm-share, a half by default) goes to a warm handler
(tests/soak/warm_soak.py, doc/protocol.md §1.2) instead of the cold sh one: the same
records, from long-lived processes. Their processes must die with their daemon: a kill -9
leaves none alive a few seconds later, and none is left once the daemons are gone.

A share of the cold jobs (--group-share, a third) goes to a handler with fair share
(SoakGroup: group_by = "args[1]", group_concurrency = 1, group_rate_limit = "4/1s"; doc/protocol.md
§7.35), in --groups groups of which the first gets half: its jobs are set aside in
cogworker:group_jobs:SoakGroup:<group> and brought back by releases and by the poller's
sweep, through the kills, the storms and the Redis crash. They are counted as every other
job (once each, nothing lost), no group may have had more than one job running at once
(a run killed with its daemon counted to its start + --max-run + 1 s), and at the end no line, no
cogworker:groups:SoakGroup and no live slot lease may be left.

A batch of --batch-members jobs (1 000 by default, doc/protocol.md §7.34) rides along: the
first jobs pushed are its members (BATCH_PUSH, the script cogworkerctl push --batch runs),
the batch is committed once the last is pushed, and its on_success and on_complete are jobs
of the sh handler. The soak fails unless each callback was pushed once and started once,
after every member had ended once, with every member counted as succeeded.

A share of the other jobs (--after-share, a fifth) waits for one or two jobs pushed just
before it (BATCH_PUSH with dependencies, as cogworkerctl push --after): each must start
after every job it waits for ended, and no later than WAIT_BOUND after the last of them
ended (doc/protocol.md §7.34's bound: released by the settle, or by the poller's next
orphan check after a crash, plus the queue and the chaos); one whose dependency was buried
as ProcessDied is buried as DependencyFailed, counted apart. A SoakGroup job that waited is
held to the order only, not to WAIT_BOUND: once released it waits its turn in its group's
line, which the group's rate limit makes as long as the line is (minutes at --rate 150);
its wait is reported apart.

Lost acks are injected for real (--ack-storms, 2 by default): for ACK_STORM seconds every
connection of every daemon is killed (CLIENT KILL) every 50-150 ms, so acks fail on their
first attempt, on their three attempts (owed: "couldn't acknowledge finished job ... yet"),
and are made late by reconcile ("acknowledged finished job ... after its ack first
failed"), with the settles they carry (§7.7). The report counts both from the logs; the
checks above (nothing lost, nothing run early, each callback once) must hold through them.

Every job is pushed once, with a unique jid, by a pusher whose own connection is spared
(and which pauses while the server is down, so that no push is ever in doubt). Handlers
append "S jid slot" when they start and "E jid slot" when they end to one file. At the end,
once the queues are drained, it prints jobs pushed, lost (pushed, never finished, not in
Redis), run twice (started more than once), left in Redis, and the duplicates next to the
jobs in flight at the kills and the freeze: cogworker's at-least-once window, the most
runs a kill can repeat. It fails (exit 1) on a lost job, more duplicates than that window,
anything left behind, a warm process that outlived its daemon, a daemon that died by
itself, or a sanitizer report in a log. One dead entry is no failure: a job on the
in-progress list of more than max_orphanings killed or frozen daemons is buried as
Cogworker::ProcessDied by design (doc/behaviours.md §6), and the soak's rhythm makes that
likely enough to happen (a kill's jobs are requeued orphan_threshold after it, about when
the next kill comes); such jobs are counted apart.

    python3 tests/soak/soak.py --build build [--seconds 180] [--daemons 3] [--json FILE]
                               [--rate 25] [--max-run 0.4] [--warm-share 0.5] [--tls]

--tls: the server speaks TLS only, with client certificates required (tests/integration/
tlskit.py), and every connection, the daemons', the pusher's and the chaos's, is TLS.
"""

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
try:
    import redis  # noqa: E402
except ImportError:         # a python first in PATH without python3-redis: Debian's has it
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise
from harness import Daemon, _die_with_parent, free_port, load_script, wait_for  # noqa: E402
from tlskit import PKI  # noqa: E402

# A record: "S|E jid slot pid|- epoch" (the warm handler's has its pid).
HANDLER = ('echo "S $COGWORKER_JID $SOAK_SLOT - $(date +%s.%N)" >> "$RUNS"; sleep "$1"; '
           'echo "E $COGWORKER_JID $SOAK_SLOT - $(date +%s.%N)" >> "$RUNS"')
WARM_HANDLER = os.path.join(HERE, "warm_soak.py")
# How long a killed daemon's warm processes may take to die (PDEATHSIG is immediate; the
# reaper kills the groups it was told of right after the daemon is gone).
WARM_DEATH_WAIT = 3.0
SETTINGS = {"heartbeat_interval": 1, "process_ttl": 3, "orphan_threshold": 4,
            "orphan_check_interval": 1, "poll_interval": 1, "shutdown_timeout": 3,
            "max_orphanings": 3, "log_level": "info"}
# The longest a job may wait after the last job it waits for ended (see the docstring).
WAIT_BOUND = 30.0
GROUP_CONCURRENCY = 1   # SoakGroup's limits: a group's jobs are set aside often
GROUP_RATE = "4/1s"
ACK_STORM = 8.0         # seconds of CLIENT KILL every 50-150 ms
SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:",
                   "ThreadSanitizer", "SUMMARY: UndefinedBehaviorSanitizer")


class Server:
    """redis-server with an AOF fsynced on every write; killed with SIGKILL, restarted from
    the same directory (so from the AOF) on the same port."""

    def __init__(self, workdir, pki=None):
        self.dir = os.path.join(workdir, "redis")
        os.makedirs(self.dir)
        self.port = free_port()
        self.proc = None
        self.tls = pki.serving() if pki else None       # harness.Daemon reads it too
        self.url = "%s://127.0.0.1:%d/0" % ("rediss" if pki else "redis", self.port)

    def start(self):
        ports = ["--port", str(self.port)]
        if self.tls:
            ports = ["--port", "0", "--tls-port", str(self.port)] + self.tls.server_args()
        argv = ["redis-server"] + ports + ["--bind", "127.0.0.1",
                "--dir", self.dir, "--save", "", "--appendonly", "yes",
                "--appendfsync", "always", "--enable-debug-command", "local",
                "--daemonize", "no"]
        log = open(os.path.join(self.dir, "redis.log"), "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        c = self.client()
        wait_for(lambda: self._ping(c), timeout=30, message="redis-server up")
        c.close()

    @staticmethod
    def _ping(c):
        try:
            return c.ping()
        except (redis.ConnectionError, redis.BusyLoadingError, redis.TimeoutError):
            return False

    def crash(self):
        self.proc.kill()
        self.proc.wait()

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(10)

    def client(self, name=None, timeout=15):
        c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=timeout,
                        decode_responses=True, **(self.tls.client_kwargs() if self.tls else {}))
        if name:
            c.client_setname(name)
        return c


class Soak:

    def __init__(self, args):
        self.args = args
        self.workdir = tempfile.mkdtemp(prefix="cw-soak-")
        os.environ["COGWORKERD_BUILD"] = os.path.abspath(args.build)
        self.pki = PKI() if args.tls else None
        self.server = Server(self.workdir, self.pki)
        self.rng = random.Random(args.seed)
        self.pushed = []
        self.pushed_warm = 0
        self.grouped = {}               # jid -> its group (SoakGroup's jobs)
        self.group_peak = 0             # jobs of SoakGroup set aside at once, at most
        self.push_paused = threading.Event()
        self.push_idle = threading.Event()
        self.stop_pushing = threading.Event()
        self.slots = []                 # the daemon running in each slot
        self.retired = []               # daemons killed or stopped (their logs are checked)
        self.kills = []                 # {"slot", "inprogress", "running"} at each kill
        self.freezes = []
        self.in_flight_at = {}          # jid -> kills and freezes that had it in progress
        self.events = {"client_kill": 0, "debug_sleep": 0, "redis_restart": 0, "ack_storm": 0}
        self.warm_survivors = []        # warm processes alive WARM_DEATH_WAIT after a kill
        self.lock = threading.Lock()
        self.generation = 0
        self.pusher_error = None
        self.bid = "%024x" % (args.seed * 10 ** 9 + 999999999)
        self.members = []
        self.committed_at = None
        self.after = {}                 # jid -> the jids it waits for
        self.storm_kills = 0

    # -- daemons

    def group_handler(self, tag):
        return {"class": "SoakGroup", "command": ["/bin/sh", "-c", HANDLER, "sh"],
                "args_as_argv": True, "env": ["SOAK_SLOT=" + tag], "group_by": "args[1]",
                "group_concurrency": GROUP_CONCURRENCY, "group_rate_limit": GROUP_RATE}

    def start_daemon(self, slot):
        """A daemon for slot; its handlers tag their records with slot.generation."""
        self.generation += 1
        tag = "%d.%d" % (slot, self.generation)
        d = Daemon(self.server, self.workdir, concurrency=self.args.concurrency,
                   handlers=[{"class": "Soak", "command": ["/bin/sh", "-c", HANDLER, "sh"],
                              "args_as_argv": True, "env": ["SOAK_SLOT=" + tag]},
                             {"class": "SoakWarm", "command": [WARM_HANDLER, self.workdir],
                              "warm": True, "env": ["SOAK_SLOT=" + tag]},
                             self.group_handler(tag)],
                   **SETTINGS)
        d.start(env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0"}, wait=True)
        d.soak_tag = tag
        return d

    def runs(self):
        try:
            with open(os.path.join(self.workdir, "runs")) as f:
                return [l.split() for l in f if l.strip()]
        except FileNotFoundError:
            return []

    def running_on(self, d):
        """Handler runs d started and did not finish."""
        started, ended = {}, {}
        for rec in self.runs():
            if len(rec) >= 3 and rec[2] == d.soak_tag:
                (started if rec[0] == "S" else ended)[rec[1]] = \
                    (started if rec[0] == "S" else ended).get(rec[1], 0) + 1
        return sum(max(0, n - ended.get(j, 0)) for j, n in started.items())

    def warm_procs(self):
        """{pid: slot tag} of this soak's live warm processes (zombies are dead)."""
        out = {}
        for p in os.listdir("/proc"):
            if not p.isdigit():
                continue
            try:
                with open("/proc/%s/cmdline" % p, "rb") as f:
                    argv = f.read().split(b"\0")
                with open("/proc/%s/stat" % p) as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                with open("/proc/%s/environ" % p, "rb") as f:
                    env = f.read().split(b"\0")
            except OSError:
                continue
            if (state != "Z" and WARM_HANDLER.encode() in argv and
                    self.workdir.encode() in argv):
                tag = [e[len(b"SOAK_SLOT="):].decode() for e in env
                       if e.startswith(b"SOAK_SLOT=")]
                out[int(p)] = tag[0] if tag else "?"
        return out

    def survivors_of(self, tag):
        """Warm processes of the daemon tagged tag still alive WARM_DEATH_WAIT after its
        death (polled: most are gone at once)."""
        until = time.monotonic() + WARM_DEATH_WAIT
        while True:
            left = [p for p, t in self.warm_procs().items() if t == tag]
            if not left or time.monotonic() >= until:
                return left
            time.sleep(0.1)

    def inprogress_jids(self, c, d):
        """The jids on d's in-progress list (None for an entry that is not a job)."""
        jids = []
        for raw in c.lrange("cogworker:inprogress:" + d.identity, 0, -1):
            try:
                jids.append(json.loads(raw).get("jid"))
            except (ValueError, AttributeError):
                jids.append(None)
        return jids

    def count_in_flight(self, jids):
        for j in set(jids):
            self.in_flight_at[j] = self.in_flight_at.get(j, 0) + 1

    def buried_as_orphaned(self, c):
        """The dead jobs that were in progress at more than max_orphanings kills and freezes
        and died as ProcessDied: buried by design, not left behind."""
        out = []
        for raw in c.zrange("cogworker:dead", 0, -1):
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            if (e.get("error_class") == "Cogworker::ProcessDied"
                    and self.in_flight_at.get(e.get("jid"), 0) > SETTINGS["max_orphanings"]):
                out.append(e["jid"])
        return out

    # -- the pusher

    def pusher(self):
        try:
            self.push_all()
        except Exception as e:          # a push in doubt: the soak can't count, it fails
            self.pusher_error = "%s: %s" % (type(e).__name__, e)
            self.push_idle.set()

    def batch_script(self, c, name, *args):
        """A batch script with the common arguments (lua/lib/batch.lua)."""
        common = ["cogworker:batch:", "cogworker:queue:", "cogworker:queues",
                  "cogworker:dead", "cogworker:schedule", "%.6f" % time.time(), 604800, 600]
        return c.eval(load_script(name), 0, *(common + list(args)))

    def open_batch(self):
        c = self.server.client("soak-pusher")
        self.batch_script(c, "batch_open", self.bid, "soak", "Soak", "Soak", "", "[0.01]",
                          "default", "%.6f" % (time.time() + 86400), "", "")
        c.close()

    def push_job(self, c, jid, payload):
        """A job of the batch while it takes members (its commit after the last), else a
        plain LPUSH, or one that waits for one or two jobs pushed just before it."""
        if len(self.members) >= self.args.batch_members:
            if self.pushed and self.rng.random() < self.args.after_share:
                deps = self.rng.sample(self.pushed[-20:], min(len(self.pushed),
                                                               self.rng.randint(1, 2)))
                self.batch_script(c, "batch_push", jid, payload, "default", "", "", "", "0",
                                  *deps)
                self.after[jid] = deps
            else:
                c.lpush("cogworker:queue:default", payload)
            return
        self.batch_script(c, "batch_push", jid, payload, "default", "", self.bid, "", "0")
        self.members.append(jid)
        if len(self.members) == self.args.batch_members:
            self.batch_script(c, "batch_commit", self.bid)
            self.committed_at = time.monotonic() - self.t0

    def push_all(self):
        """LPUSH at --rate. After a pause (the server restarted) a fresh connection, named
        again so CLIENT KILL spares it; any error ends the pushing, and the soak fails."""
        c = self.server.client("soak-pusher")
        n = 0
        next_at = time.monotonic()
        while not self.stop_pushing.is_set():
            if self.push_paused.is_set():
                self.push_idle.set()
                time.sleep(0.05)
                if not self.push_paused.is_set():
                    c.close()
                    c = self.server.client("soak-pusher")
                    next_at = time.monotonic()
                continue
            self.push_idle.clear()
            now = time.time()
            jid = "%024x" % (self.args.seed * 10 ** 9 + n)
            n += 1
            run = round(self.rng.uniform(0, self.args.max_run), 3)
            cls = "SoakWarm" if self.rng.random() < self.args.warm_share else "Soak"
            args = [run]
            if cls == "Soak" and self.rng.random() < self.args.group_share:
                cls = "SoakGroup"
                g = 0 if self.rng.random() < 0.5 else self.rng.randrange(self.args.groups)
                args.append("g%d" % g)
            job = {"class": cls, "args": args, "queue": "default", "jid": jid, "retry": True,
                   "created_at": now, "enqueued_at": now}
            if len(self.members) < self.args.batch_members:
                job["bid"] = self.bid
            payload = json.dumps(job, separators=(",", ":"))
            self.push_job(c, jid, payload)      # an error ends the soak: loudly
            with self.lock:
                self.pushed.append(jid)
                if cls == "SoakWarm":
                    self.pushed_warm += 1
                if cls == "SoakGroup":
                    self.grouped[jid] = args[1]
            next_at += 1.0 / self.args.rate
            time.sleep(max(0, next_at - time.monotonic()))
        self.push_idle.set()

    def pause_pushing(self):
        self.push_paused.set()
        self.push_idle.clear()
        self.push_idle.wait(10)

    # -- the chaos

    def kill_one(self, c):
        """kill -9, then count: a dead process's in-progress list no longer changes (until
        recovery, orphan_threshold later), so what is on it is exactly what may run again."""
        slot = self.rng.randrange(len(self.slots))
        d = self.slots[slot]
        warm = len([p for p, t in self.warm_procs().items() if t == d.soak_tag])
        d.kill()
        jids = self.inprogress_jids(c, d)
        self.count_in_flight(jids)
        rec = {"slot": slot, "inprogress": len(jids), "warm": warm,
               "running": self.running_on(d), "at": round(time.monotonic() - self.t0, 1)}
        self.kills.append(rec)
        self.retired.append(d)
        self.warm_survivors += self.survivors_of(d.soak_tag)
        time.sleep(1.0)
        self.slots[slot] = self.start_daemon(slot)

    def client_kill(self, c):
        for cl in c.client_list():
            if cl.get("name") not in ("soak-pusher", "soak-chaos"):
                try:
                    c.client_kill_filter(_id=cl["id"])
                except redis.ResponseError:
                    pass                    # gone already
        self.events["client_kill"] += 1

    def freeze(self, c):
        """SIGSTOP past process_ttl and orphan_threshold, then SIGCONT. A frozen process's
        blocking fetches still complete in the server, so its in-progress list may grow
        while it is frozen, until recovery takes it: the in-flight count is its largest
        length meanwhile."""
        slot = self.rng.randrange(len(self.slots))
        d = self.slots[slot]
        d.proc.send_signal(signal.SIGSTOP)
        rec = {"slot": slot, "inprogress": 0, "running": self.running_on(d),
               "at": round(time.monotonic() - self.t0, 1)}
        until = time.monotonic() + SETTINGS["orphan_threshold"] + 3
        seen = set()
        while time.monotonic() < until:
            jids = self.inprogress_jids(c, d)
            rec["inprogress"] = max(rec["inprogress"], len(jids))
            seen.update(jids)
            time.sleep(0.05)
        d.proc.send_signal(signal.SIGCONT)
        self.count_in_flight(seen)
        self.freezes.append(rec)

    def ack_storm(self, c):
        """Acks lost for real: every daemon connection killed every 50-150 ms for
        ACK_STORM seconds (the pusher's and the chaos's spared)."""
        until = time.monotonic() + ACK_STORM
        while time.monotonic() < until:
            self.client_kill(c)
            self.events["client_kill"] -= 1
            self.storm_kills += 1
            time.sleep(self.rng.uniform(0.05, 0.15))
        self.events["ack_storm"] += 1

    def debug_sleep(self, c):
        c.execute_command("DEBUG", "SLEEP", "2")
        self.events["debug_sleep"] += 1

    def redis_restart(self):
        self.pause_pushing()
        self.server.crash()
        time.sleep(1.0)
        self.server.start()
        self.events["redis_restart"] += 1
        self.push_paused.clear()

    def chaos(self):
        c = self.server.client("soak-chaos")
        end = self.t0 + self.args.seconds
        plan = {"kill": self.t0 + 3, "client_kill": self.t0 + 5, "debug_sleep": self.t0 + 8,
                "freeze": self.t0 + self.args.seconds * 0.3,
                "restart": self.t0 + self.args.seconds * 0.6}
        storms = [self.t0 + self.args.seconds * (k + 0.5) / (self.args.ack_storms + 1)
                  for k in range(self.args.ack_storms)]
        while time.monotonic() < end:
            now = time.monotonic()
            if now >= plan["kill"]:
                self.kill_one(c)
                plan["kill"] = time.monotonic() + self.rng.uniform(2, 5)
            elif now >= plan["client_kill"]:
                self.client_kill(c)
                plan["client_kill"] = now + self.rng.uniform(6, 10)
            elif now >= plan["debug_sleep"]:
                self.debug_sleep(c)
                plan["debug_sleep"] = now + self.rng.uniform(12, 20)
            elif now >= plan["freeze"]:
                self.freeze(c)
                plan["freeze"] = float("inf")
            elif now >= plan["restart"]:
                c.close()
                self.redis_restart()
                c = self.server.client("soak-chaos")
                plan["restart"] = float("inf")
            elif storms and now >= storms[0]:
                storms.pop(0)
                self.ack_storm(c)
            else:
                time.sleep(0.1)
        c.close()

    # -- the end

    def buried_for_a_dependency(self, c, orphaned):
        """Dead as DependencyFailed because a job it waited for was buried as orphaned (or
        for its own dependency, down the chain): by design too."""
        failed = set()
        for raw in c.zrange("cogworker:dead", 0, -1):
            try:
                e = json.loads(raw)
            except ValueError:
                continue
            if e.get("error_class") == "Cogworker::DependencyFailed":
                failed.add(e.get("jid"))
        gone, out = set(orphaned), []
        for j in sorted(failed, key=lambda j: self.pushed.index(j) if j in self.after else 0):
            if any(d in gone for d in self.after.get(j, ())):
                gone.add(j)
                out.append(j)
        return out

    def left_in_redis(self, c):
        orphaned = self.buried_as_orphaned(c)
        apart = len(orphaned) + len(self.buried_for_a_dependency(c, orphaned))
        left = {"queue": c.llen("cogworker:queue:default"), "retry": c.zcard("cogworker:retry"),
                "schedule": c.zcard("cogworker:schedule"),
                "dead": c.zcard("cogworker:dead") - apart,
                "waiting": c.zcard("cogworker:batch:waiting"),
                "owed": c.hlen("cogworker:batch:owed"),
                "unsettled": c.llen("cogworker:unsettled"), "inprogress": 0}
        for key in c.scan_iter("cogworker:inprogress:*"):
            left["inprogress"] += c.llen(key)
        # Fair share: no job set aside, no group still indexed, no live slot (a reservation
        # or a lease; an expired one left by a killed holder is no slot: counted apart).
        left["group_jobs"] = sum(c.zcard(k) for k in c.scan_iter("cogworker:group_jobs:*"))
        left["groups"] = c.zcard("cogworker:groups:SoakGroup")
        now = "%.6f" % self.server_time(c)
        left["group_slots"] = sum(c.zcount(k, "(" + now, "+inf")
                                  for k in c.scan_iter("cogworker:group_slots:*"))
        return left

    @staticmethod
    def server_time(c):
        s, us = c.time()
        return s + us / 1e6

    def group_keys_left(self, c):
        """Group slot keys still there at the end (holding only expired leases) and the
        members in them: what a killed holder leaves until its group's next job."""
        keys = list(c.scan_iter("cogworker:group_slots:*"))
        return {"keys": len(keys), "members": sum(c.zcard(k) for k in keys),
                "rate_keys": len(list(c.scan_iter("cogworker:group_rate:*")))}

    def watch_groups(self):
        """The most SoakGroup jobs set aside at once (sampled every 0.5 s): that the chaos
        ran with jobs in the lines."""
        c = self.server.client("soak-watch")
        while not self.stop_pushing.is_set():
            try:
                n = sum(c.zcard(k) for k in c.scan_iter("cogworker:group_jobs:SoakGroup:*"))
                self.group_peak = max(self.group_peak, n)
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                time.sleep(1)
                try:
                    c.close()
                    c = self.server.client("soak-watch")
                except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                    pass
            time.sleep(0.5)
        c.close()

    def groups_report(self, runs, dead_jids):
        """SoakGroup's jobs: how many, set aside at most at once, and the most of one group
        that ran at once, by the records (a run whose end is missing, killed with its
        daemon, counted to its start + --max-run + 1 s); over the limit only in the kills'
        window is expected (a killed holder's slot expires after process_ttl while its run
        may be redone sooner by nobody: it can't, the run died with it)."""
        spans, start = {}, {}
        for rec in runs:
            if len(rec) < 5 or rec[1] not in self.grouped:
                continue
            key = (rec[1], rec[2])
            if rec[0] == "S":
                start[key] = float(rec[4])
            elif key in start:
                spans.setdefault(self.grouped[rec[1]], []).append(
                    (start.pop(key), float(rec[4])))
        for (jid, _), t in start.items():
            spans.setdefault(self.grouped[jid], []).append((t, t + self.args.max_run + 1))
        peak = 0
        for g, sp in spans.items():
            edges = sorted([(a, 1) for a, _ in sp] + [(b, -1) for _, b in sp],
                           key=lambda e: (e[0], e[1]))
            now = 0
            for _, d in edges:
                now += d
                peak = max(peak, now)
        return {"jobs": len(self.grouped), "groups": len(set(self.grouped.values())),
                "set_aside_peak": self.group_peak, "most_running_in_a_group": peak,
                "dead": sum(j in dead_jids for j in self.grouped)}

    def drain(self, c, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = self.left_in_redis(c)
            busy = sum(int(c.hget("cogworker:process:" + d.identity, "busy") or 0)
                       for d in self.slots)
            if not any(left.values()) and busy == 0:
                return left
            time.sleep(0.5)
        return self.left_in_redis(c)

    def sanitizer_reports(self):
        found = []
        for d in self.retired + self.slots:
            for line in d.log().splitlines():
                if any(m in line for m in SANITIZER_MARKS):
                    found.append("%s: %s" % (os.path.basename(d.log_path), line[:200]))
        return found

    def batch_report(self, c, runs, buried):
        """The batch's end: each callback pushed once (its fired mark), started once, after
        every member's first end (the order of the records' file); the members buried as
        orphaned (buried_as_orphaned) are dead members, and on_success is then never run."""
        h = c.hgetall("cogworker:batch:" + self.bid)
        gone = set(buried) & set(self.members)
        first_end, starts = {}, {}
        for i, rec in enumerate(runs):
            if rec[0] == "E":
                first_end.setdefault(rec[1], i)
            else:
                starts.setdefault(rec[1], []).append(i)
        members_ended = [first_end.get(j) for j in self.members if j not in gone]
        last_member = max((i for i in members_ended if i is not None), default=-1)
        done = float(h["completed_at"]) - self.t0_epoch if h.get("completed_at") else None
        out = {"members": len(self.members), "committed_at_s": self.committed_at,
               "completed_at_s": done,
               "state": h.get("state"),
               "pending": c.scard("cogworker:batch:%s:pending" % self.bid),
               "succeeded": c.scard("cogworker:batch:%s:succeeded" % self.bid),
               "dead": c.scard("cogworker:batch:%s:dead" % self.bid),
               "buried_members": len(gone),
               "members_unended": sum(i is None for i in members_ended)}
        for kind in ("success", "complete"):
            jid = h.get("fired_" + kind)
            s = starts.get(jid, []) if jid else []
            out[kind] = {"jid": jid, "starts": len(s),
                         "after_last_member": bool(s) and s[0] > last_member}
        return out

    def waits_report(self, runs, dead_jids):
        """Each job that waited: started after every job it waited for ended, and how long
        after the last of them (s, from the records' times)."""
        first_start, first_end = {}, {}
        for rec in runs:
            if len(rec) >= 5:
                (first_start if rec[0] == "S" else first_end).setdefault(rec[1], float(rec[4]))
        early, waits, grouped_waits, unended = [], [], [], 0
        for jid, deps in self.after.items():
            if jid in dead_jids:
                continue            # buried for a dependency: checked with what is left
            ends = [first_end.get(d) for d in deps]
            if None in ends or jid not in first_start:
                unended += 1
                continue
            wait = first_start[jid] - max(ends)
            (grouped_waits if jid in self.grouped else waits).append(wait)
            if wait < 0:
                early.append(jid)
        return {"jobs": len(self.after), "early": early, "unended": unended,
                "longest_wait_s": round(max(waits), 2) if waits else None,
                "median_wait_s": round(sorted(waits)[len(waits) // 2], 2) if waits else None,
                "over_bound": sum(w > WAIT_BOUND for w in waits),
                "grouped": len(grouped_waits),
                "grouped_longest_wait_s": round(max(grouped_waits), 2) if grouped_waits
                else None}

    def acks_report(self):
        owed = settled_late = 0
        for d in self.retired:
            for line in d.log().splitlines():
                owed += "couldn't acknowledge finished job" in line
                settled_late += "after its ack first failed" in line
        return {"storms": self.events["ack_storm"], "kills": self.storm_kills,
                "owed": owed, "acknowledged_late": settled_late}

    def batch_ok(self, b):
        if not self.args.batch_members:
            return True
        fired = ("complete",) if b["buried_members"] else ("success", "complete")
        return (b["members"] == self.args.batch_members and b["pending"] == 0 and
                b["succeeded"] == b["members"] - b["buried_members"] and
                b["dead"] == b["buried_members"] and b["members_unended"] == 0 and
                (not b["buried_members"] or not b["success"]["jid"]) and
                all(b[k]["jid"] and b[k]["starts"] == 1 and b[k]["after_last_member"]
                    for k in fired))

    def run(self):
        self.server.start()
        if self.args.batch_members:
            self.open_batch()
        self.slots = [self.start_daemon(i) for i in range(self.args.daemons)]
        self.t0 = time.monotonic()
        self.t0_epoch = time.time()
        pusher = threading.Thread(target=self.pusher, daemon=True)
        pusher.start()
        watcher = threading.Thread(target=self.watch_groups, daemon=True)
        watcher.start()
        self.chaos()
        self.stop_pushing.set()
        pusher.join(10)
        c = self.server.client("soak-chaos")
        left = self.drain(c, 120)
        died = [d for d in self.slots if d.proc.poll() is not None]
        for d in self.slots:
            d.stop(timeout=30)
        self.retired += self.slots
        until = time.monotonic() + WARM_DEATH_WAIT
        left_behind = self.warm_procs()
        while left_behind and time.monotonic() < until:
            time.sleep(0.1)
            left_behind = self.warm_procs()
        for pid in left_behind:         # counted, and not left running after the soak
            os.kill(pid, signal.SIGKILL)
        requeued = 0          # what the daemons say they took over from dead processes
        for d in self.retired:
            for line in d.log().splitlines():
                if "left in progress by dead process" in line:
                    requeued += int(line.split("requeued ")[1].split()[0])
        runs = self.runs()
        starts, ends = {}, {}
        for rec in runs:
            (starts if rec[0] == "S" else ends)[rec[1]] = \
                (starts if rec[0] == "S" else ends).get(rec[1], 0) + 1
        dead_jids = set()
        for m in c.zrange("cogworker:dead", 0, -1):
            try:
                dead_jids.add(json.loads(m).get("jid"))
            except ValueError:
                pass
        buried = self.buried_as_orphaned(c)
        batch = self.batch_report(c, runs, buried) if self.args.batch_members else None
        waits = self.waits_report(runs, dead_jids)
        waits["buried_for_a_dependency"] = len(self.buried_for_a_dependency(c, buried))
        groups = self.groups_report(runs, dead_jids)
        groups["keys_left"] = self.group_keys_left(c)
        c.close()
        pushed = set(self.pushed)
        lost = [j for j in pushed if j not in ends and j not in dead_jids]
        twice = [j for j in pushed if starts.get(j, 0) > 1]
        extra = sum(starts.get(j, 0) - 1 for j in twice)
        window = sum(k["inprogress"] for k in self.kills + self.freezes)
        report = {
            "seconds": self.args.seconds, "daemons": self.args.daemons,
            "concurrency": self.args.concurrency, "build": self.args.build,
            "pushed": len(pushed), "pushed_warm": self.pushed_warm,
            "warm_processes": len({rec[3] for rec in runs if len(rec) >= 4 and rec[3] != "-"}),
            "warm_at_kills": sum(k["warm"] for k in self.kills),
            "warm_survivors_of_kills": len(self.warm_survivors),
            "warm_left_behind": len(left_behind),
            "finished": len([j for j in pushed if j in ends]),
            "lost": len(lost), "run_twice": len(twice), "extra_runs": extra,
            "left_in_redis": left, "buried_as_orphaned": buried, "kills": len(self.kills),
            "in_flight_at_kills": [k["inprogress"] for k in self.kills],
            "running_at_kills": [k["running"] for k in self.kills],
            "in_flight_at_freeze": [f["inprogress"] for f in self.freezes],
            "at_least_once_window": window, "requeued_from_dead": requeued,
            "events": self.events,
            "sanitizer_reports": self.sanitizer_reports(),
            "died_by_themselves": [os.path.basename(d.log_path) for d in died],
            "pusher_error": self.pusher_error,
            "batch": batch,
            "waits": waits,
            "groups": groups,
            "acks": self.acks_report(),
            "workdir": self.workdir,
        }
        return report, lost


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--daemons", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--rate", type=float, default=25, help="jobs pushed per second")
    ap.add_argument("--max-run", type=float, default=0.4,
                    help="a job sleeps 0 to this many seconds (short jobs stress the per-job "
                         "path: --max-run 0.01 --rate 200)")
    ap.add_argument("--warm-share", type=float, default=0.5,
                    help="the share of the jobs pushed for the warm handler (0: none)")
    ap.add_argument("--group-share", type=float, default=1 / 3,
                    help="the share of the cold jobs pushed for SoakGroup, the handler with "
                         "group limits (0: none)")
    ap.add_argument("--groups", type=int, default=4,
                    help="SoakGroup's groups (the first gets half of its jobs)")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--json", help="also write the report here")
    ap.add_argument("--keep", action="store_true", help="keep the work directory")
    ap.add_argument("--tls", action="store_true", help="everything over TLS (rediss://)")
    ap.add_argument("--batch-members", type=int, default=1000,
                    help="the first jobs pushed are members of one batch (0: no batch)")
    ap.add_argument("--after-share", type=float, default=0.2,
                    help="the share of the other jobs that wait for one or two jobs pushed "
                         "just before them (0: none)")
    ap.add_argument("--ack-storms", type=int, default=2,
                    help="windows of %gs in which every daemon connection is killed every "
                         "50-150 ms, so acks are lost (0: none)" % ACK_STORM)
    args = ap.parse_args()
    soak = Soak(args)
    try:
        rep, lost = soak.run()
    finally:
        for d in soak.slots:
            d.kill()
        soak.server.stop()
        if soak.pki:
            soak.pki.stop()
    left = sum(rep["left_in_redis"].values())
    ok = (rep["lost"] == 0 and left == 0 and rep["extra_runs"] <= rep["at_least_once_window"]
          and not rep["sanitizer_reports"] and not rep["died_by_themselves"]
          and not rep["warm_survivors_of_kills"] and not rep["warm_left_behind"]
          and not rep["pusher_error"] and soak.batch_ok(rep["batch"])
          and not rep["waits"]["early"] and not rep["waits"]["unended"]
          and not rep["waits"]["over_bound"]
          and rep["groups"]["most_running_in_a_group"] <= GROUP_CONCURRENCY)
    print("soak: %gs, %d daemons x %d, build %s, seed %d%s" % (
        args.seconds, args.daemons, args.concurrency, args.build, args.seed,
        ", over TLS" if args.tls else ""))
    print("  chaos: %d kill -9 (in flight at each: %s; handlers running: %s), %d CLIENT KILL "
          "rounds, %d DEBUG SLEEP 2, 1 SIGSTOP past process_ttl (in flight: %s), %d Redis "
          "restart(s) from the AOF" % (
              rep["kills"], rep["in_flight_at_kills"], rep["running_at_kills"],
              rep["events"]["client_kill"], rep["events"]["debug_sleep"],
              rep["in_flight_at_freeze"], rep["events"]["redis_restart"]))
    print("  pushed %d, finished %d, lost %d, run twice %d (%d extra runs), left in Redis %d %s"
          % (rep["pushed"], rep["finished"], rep["lost"], rep["run_twice"], rep["extra_runs"],
             left, rep["left_in_redis"]))
    print("  duplicates %d <= at-least-once window %d (jobs in flight at the kills and the "
          "freeze): %s; the daemons requeued %d job(s) from processes that looked dead" % (
              rep["extra_runs"], rep["at_least_once_window"],
              "yes" if rep["extra_runs"] <= rep["at_least_once_window"] else "NO",
              rep["requeued_from_dead"]))
    if rep["buried_as_orphaned"]:
        print("  buried as ProcessDied, in progress at more than max_orphanings (%d) kills and "
              "freezes: %s" % (SETTINGS["max_orphanings"], rep["buried_as_orphaned"]))
    print("  warm: %d of the jobs pushed, run by %d warm processes; %d alive at the kills -9, "
          "%d of them still alive %gs later; left once the daemons were gone: %d" % (
              rep["pushed_warm"], rep["warm_processes"], rep["warm_at_kills"],
              rep["warm_survivors_of_kills"], WARM_DEATH_WAIT, rep["warm_left_behind"]))
    b = rep["batch"]
    if b:
        print("  batch: %d members, committed at %.0fs, completed at %.0fs (the chaos ran to "
              "%gs); %s, %d pending, %d succeeded, %d dead; "
              "on_success pushed %s, started %d time(s), after the last member: %s; "
              "on_complete pushed %s, started %d time(s), after the last member: %s" % (
                  b["members"], b["committed_at_s"] or -1, b["completed_at_s"] or -1,
                  args.seconds, b["state"], b["pending"],
                  b["succeeded"], b["dead"], "once" if b["success"]["jid"] else "never",
                  b["success"]["starts"], "yes" if b["success"]["after_last_member"] else "NO",
                  "once" if b["complete"]["jid"] else "never", b["complete"]["starts"],
                  "yes" if b["complete"]["after_last_member"] else "NO"))
    g = rep["groups"]
    print("  fair share: %d job(s) of SoakGroup in %d group(s) (group_concurrency %d, "
          "group_rate_limit %s), at most %d set aside at once; most of one group running at "
          "once (a killed run counted %gs): %d; dead: %d; at the end %d group slot key(s) "
          "with %d expired lease(s), %d rate key(s)" % (
              g["jobs"], g["groups"], GROUP_CONCURRENCY, GROUP_RATE, g["set_aside_peak"],
              args.max_run + 1, g["most_running_in_a_group"], g["dead"],
              g["keys_left"]["keys"], g["keys_left"]["members"], g["keys_left"]["rate_keys"]))
    w, a = rep["waits"], rep["acks"]
    print("  waiting jobs: %d pushed after one or two others; started before one ended: %d; "
          "never started: %d; buried as DependencyFailed (a dependency buried as orphaned): "
          "%d; wait after the last dependency ended: median %s s, longest %s s (bound %gs, "
          "over it: %d); of SoakGroup, in its group's line after: %d, longest %s s" % (
              w["jobs"], len(w["early"]), w["unended"], w["buried_for_a_dependency"],
              w["median_wait_s"], w["longest_wait_s"], WAIT_BOUND, w["over_bound"],
              w["grouped"], w["grouped_longest_wait_s"]))
    print("  lost acks: %d storm(s) of %gs, %d CLIENT KILL rounds in them; acks owed after "
          "three failed attempts: %d, acknowledged late by reconcile: %d" % (
              a["storms"], ACK_STORM, a["kills"], a["owed"], a["acknowledged_late"]))
    if rep["sanitizer_reports"]:
        print("  sanitizer reports:\n    " + "\n    ".join(rep["sanitizer_reports"][:20]))
    if rep["died_by_themselves"]:
        print("  daemons that died by themselves: %s" % rep["died_by_themselves"])
    if lost:
        print("  lost jids (first 10): %s" % lost[:10])
    if rep["pusher_error"]:
        print("  the pusher stopped: %s" % rep["pusher_error"])
    print("soak: %s" % ("ok" if ok else "FAILED (work dir kept: %s)" % rep["workdir"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=1)
    if ok and not args.keep:
        shutil.rmtree(soak.workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

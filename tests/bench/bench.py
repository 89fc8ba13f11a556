#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""cogworkerd benchmarks (issue 7): `make bench`, or

    tests/bench/bench.py [--build DIR] [--reps N] [--quick] [--only FIGURE,...]

Starts its own redis-server (tests/integration/harness.py) and writes, into <build>/bench/,
report.md (every figure with the machine it ran on), throughput.png (gnuplot) and
results.json (every raw sample).

Figures (each run several times; the report gives medians):

  throughput   20 000 /bin/true jobs at concurrency 1, 2, 4, 8, 16 (log_level "warn"), next
               to the spawn ceiling (tests/bench/spawn_ceiling.c: posix_spawn + waitpid of
               /bin/true with as many threads) measured in the same repetition, right before
               and right after the daemon (their mean). The jobs are pushed first (pipelined LPUSH),
               then the daemon starts; the rate is how fast the queue drains, from the 200th
               job taken to the last (not the processed counter, which the daemon flushes
               once a second). Ratio = daemon / ceiling of the same repetition; its median is
               the headline. Concurrency 4 also runs with log_level "info". At concurrency 1,
               4 and 16 the peer runs too: Sidekiq (Debian's ruby-sidekiq, which the bench
               installs; --no-sidekiq leaves it out) on the same Redis, 2 000 jobs whose
               perform is system('/bin/true'), measured the same way.
  warm         issue 22's targets, at concurrency 4 and 16, each repetition in one go on the
               same Redis: the spawn ceiling (before and after) and cold /bin/true (their
               ratio must not move); a warm no-op in C (tests/bench/warm_noop.c: the daemon's
               ceiling with warm handlers; its CPU, Redis round trips and commands per job);
               Ruby's empty perform as a warm handler (tests/bench/noop_job.rb) against
               Sidekiq running it in-process; a Python handler whose import takes 0.2 s
               (tests/bench/slow_import.py), warm against cold. Then the daemon's RSS at
               concurrency 50 with a warm process per fetcher.
  scaling      1, 2, 4 daemons on one Redis, concurrency 25 each, jobs of /bin/sleep 0.05:
               jobs/s, redis-server CPU per job, Redis commands per job.
  round trips  Redis commands per job on the success path (INFO commandstats delta, 2 000
               jobs), network round trips per job (INFO stats total_reads_processed delta:
               one read event per pipeline), and commands issued by the client vs from
               inside scripts (MONITOR on a small sample: script commands show as "[0 lua]").
  latency      enqueue -> handler start, p50/p99/max, one queue and five queues, daemon idle
               (concurrency 10): the handler (spawn_ceiling --stamp) writes its CLOCK_REALTIME
               start time; the push time is taken just before the LPUSH; same host clock.
  scheduled    lateness of scheduled and retry entries: due time -> on the queue (the
               enqueued_at the poller stamps when it moves the job), default poll_interval:
               entries written at least poll_interval before they are due, entries due
               sooner, and those again on a server with keyspace notifications on.
  cron         lateness of each slot of a per-second cron (* * * * * *): periodic_slot ->
               the job's created_at, one daemon and three daemons; slots fired, duplicates.
  idle         idle daemons for 60 s (one key check included): concurrency 10 on one queue
               and 25 over five queues; CPU % of one core (/proc/<pid>/stat) and Redis
               commands/s (INFO stats delta).
  pause        200 rounds of pause -> push -> resume on an idle daemon: jobs started while
               their queue was paused (the race), and the resume -> start time.
  fewer        enqueue -> handler start with fewer fetchers than queues (concurrency 1, two
               queues), without and with keyspace notifications for lists.
  memory       RSS (VmRSS) at concurrency 10, 50, 200: idle, and the peak while every
               fetcher runs a child (2 x concurrency jobs of /bin/sleep 1).
  large        memory after large jobs (issue 21): the daemon's peak (VmHWM) and its RSS
               once they are done (the lowest within 10 s after the in-progress list
               empties), concurrency 6, a handler that reads its stdin: six jobs of a 10 MB
               string arg at once, one of 200 MB, three of 200 MB one after the other (no
               max_job_bytes), and one of 400 MB that the default max_job_bytes buries.
  output       the cost of keeping output (output_keep, cogworkerctl jobs log): 5 000 jobs
               at concurrency 4 with output_keep = 0 and = 65536 (the default), for
               /bin/true and for /bin/cat of a 4 KiB file, interleaved, median of the
               repetitions: jobs/s and CPU per job of the daemon and of redis-server.
  recovery     two daemons, heartbeat_interval 1, process_ttl 3, orphan_threshold 4,
               orphan_check_interval 1: kill -9 of the daemon running a job -> the job's
               handler starting on the survivor; several kills.
  confinement  the cost of each confinement setting (doc/design.md "Confinement"): the
               throughput run at concurrency 4 (log_level "warn", a quarter of the jobs),
               alternately without confinement, with each of no_new_privileges,
               private_tmp, read_only and network = false, and with all four: jobs/s, the
               daemon's CPU and its children's (the handlers') CPU per job.
  tls          jobs/s over TLS against plain TCP, the same redis-server (a plain and a TLS
               port, client certificates required on it; tests/integration/tlskit.py),
               /bin/true at concurrency 4, the two alternating: the ratio TLS / TCP
               (issue 23's target: at least 0.9), and the CPU per job of each.
  peers        issue 29: each language's in-process job runner against cogworkerd running
               the same empty job warm through our library in that language, same run,
               same Redis: Celery (python3-celery, prefork), Sidekiq (ruby-sidekiq), BullMQ
               (npm's bullmq + ioredis under <build>/bench/node), RQ (python3-rq) against
               cold `python3 -c pass`, the warm C no-op, a Ruby app's worker classes run by
               name, and a minimal protocol loop in each language (tests/bench/peers.py:
               the method, and what is measured per process).
  limits       the cost of a limit that is never reached (doc/protocol.md §7.30): the
               throughput run at concurrency 4 (log_level "warn"), alternately without a
               limit, with fleet_concurrency = 1000 (one ADMIT and one RELEASE_SLOT script
               per job) and with max_concurrency = 1000 (in memory only).
  groups       the cost of fair share (doc/protocol.md §7.35): 2 000 cold /bin/true jobs at
               concurrency 4, the variants alternating: without group_by; with group_by =
               "args[0]" over 50 groups and group_concurrency = 1000 (no job ever waits);
               and over 2 groups with group_concurrency = 1 (jobs set aside and brought
               back). From the daemon's start until the queue, the lines and the
               in-progress lists are empty (the commands: until the processed counter,
               flushed once a second, has them all): Redis commands per job (INFO commandstats after CONFIG RESETSTAT: a
               script's own commands counted, the bench's polls taken out), script calls per
               job, Redis CPU and the daemon's CPU per job, and the wall time.
  containment  the cost of containment (doc/design.md "Containment", issue 28 item 5): cold
               /bin/true and the warm C no-op at concurrency 4, alternately with
               containment = "process-group" (off) and "cgroup" (a cgroup per job slot): jobs/s
               and daemon CPU per job, the ratio on / off per repetition (target: at least
               0.9 cold; warm unchanged within noise). Needs root and cgroup v2; else not run.

Benchmarks are not tests: nothing here fails on a slow number. Other load on the machine
shows in the numbers; the load average at start and end is in the report.
"""

import argparse
import importlib.util
import json
import os
import platform
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def reexec_with_redis():
    """The harness needs python3-redis: when this interpreter lacks it (a pyenv python first
    in PATH), run again with Debian's /usr/bin/python3, as tests/integration/run.py does."""
    if importlib.util.find_spec("redis") is not None:
        return
    py = "/usr/bin/python3"
    if os.path.exists(py) and os.path.realpath(sys.executable) != os.path.realpath(py):
        os.execv(py, [py] + sys.argv)
    sys.exit("bench: python3-redis is missing (apt-get install python3-redis)")


reexec_with_redis()
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
from harness import Daemon, RedisServer, binary, free_port, job, wait_for  # noqa: E402
from tlskit import PKI  # noqa: E402
sys.path.insert(0, HERE)
from peers import Peers  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
PROCESSED = b"cogworker:stats:processed"
CONCURRENCIES = [1, 2, 4, 8, 16]
SIDEKIQ_CONCURRENCIES = [1, 4, 16]
WARM_CONCURRENCIES = [4, 16]
SCALE_DAEMONS = [1, 2, 4]


def log(msg):
    print("bench: " + msg, flush=True)


# --------------------------------------------------------------------------------------
# Small helpers


def median(v):
    return statistics.median(v) if v else None


def percentile(v, p):
    """Nearest-rank percentile (p in 0..100) of a non-empty list."""
    s = sorted(v)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def proc_cpu(pid):
    """(utime, stime, cutime, cstime) of a process in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return [int(x) / CLK_TCK for x in fields[11:15]]


def proc_rss_kib(pid, field="VmRSS"):
    """A line of /proc/PID/status in KiB: VmRSS, or VmHWM (the peak so far)."""
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return None


def kids_cpu(pid):
    """{child pid: its utime + stime in s} of pid's live children that run another program
    than pid (its warm processes, not the reaper it forked without an exec)."""
    def comm_ppid(p):
        with open("/proc/%s/stat" % p) as f:
            head, tail = f.read().rsplit(")", 1)
        fields = tail.split()
        return head.split("(", 1)[1], int(fields[1]), fields
    try:
        own = comm_ppid(pid)[0]
    except OSError:
        return {}
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            comm, ppid, fields = comm_ppid(d)
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and not comm.startswith(own):    # not cogworkerd-reap
            out[int(d)] = (int(fields[11]) + int(fields[12])) / CLK_TCK
    return out


def processed(r):
    return int(r.get(PROCESSED) or 0)


def push_jobs(r, n, cls="True", queue="default"):
    """n jobs on one queue, LPUSHed in pipelined batches (not timed)."""
    key = ("cogworker:queue:" + queue).encode()
    p = r.pipeline(transaction=False)
    for i in range(n):
        p.lpush(key, job(cls, queue=queue))
        if i % 1000 == 999:
            p.execute()
    p.execute()


def wait_ready(r, d, timeout=15):
    """The daemon's first heartbeat is in (the banner is not logged at log_level warn)."""
    def up():
        if d.proc.poll() is not None:
            raise RuntimeError("cogworkerd exited early:\n" + d.log()[-3000:])
        return r.scard(b"cogworker:processes") > 0
    wait_for(up, timeout=timeout, interval=0.01, message="cogworkerd's first heartbeat")


def read_stamps(path):
    out = {}
    try:
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 2:
                    out.setdefault(parts[0], []).append(float(parts[1]))
    except FileNotFoundError:
        pass
    return out


def sidekiq_version():
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "ruby-sidekiq"],
                             capture_output=True, text=True, timeout=10).stdout.strip()
        return out.split("+")[0] or "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def fmt(v, spec="%.0f", none="n/a"):
    return none if v is None else spec % v


class Bench:
    def __init__(self, opts):
        self.opts = opts
        self.build = os.path.abspath(opts.build)
        os.environ["COGWORKERD_BUILD"] = self.build
        self.out = os.path.join(self.build, "bench")
        os.makedirs(self.out, exist_ok=True)
        self.ceiling_bin = os.path.join(self.out, "spawn_ceiling")
        self.path_bin = os.path.join(self.out, "spawn_path")    # built by `make bench`
        self.warm_noop_bin = os.path.join(self.out, "warm_noop")
        self.tmp = tempfile.mkdtemp(prefix="cw-bench-")
        self.results = {}
        self.t0 = time.monotonic()
        self.server = None

    # -- setup

    @staticmethod
    def ensure_binary(src, out):
        src = os.path.join(HERE, src)
        if os.path.exists(out) and os.path.getmtime(out) >= os.path.getmtime(src):
            return
        # `make bench` builds it with the daemon's CFLAGS; this is for direct runs.
        cmd = [os.environ.get("CC", "cc"), "-O2", "-g", "-std=gnu11", "-Wall", "-Wextra",
               "-pthread", "-D_GNU_SOURCE", "-o", out, src]
        log("building " + " ".join(cmd))
        subprocess.check_call(cmd)

    def machine(self):
        def cmd(argv):
            try:
                return subprocess.run(argv, capture_output=True, text=True,
                                      timeout=10).stdout.strip()
            except Exception:
                return "?"
        model = "?"
        try:
            with open("/proc/cpuinfo") as f:
                for line in f:
                    if line.startswith("model name"):
                        model = line.split(":", 1)[1].strip()
                        break
        except OSError:
            pass
        mem = "?"
        try:
            with open("/proc/meminfo") as f:
                kib = int(f.readline().split()[1])
                mem = "%.1f GiB" % (kib / 1048576)
        except (OSError, ValueError, IndexError):
            pass
        rv = cmd(["redis-server", "--version"])
        m = re.search(r"v=(\S+)", rv)
        return {
            "nproc": len(os.sched_getaffinity(0)),
            "cpu": model,
            "kernel": platform.release(),
            "os": cmd(["sh", "-c", ". /etc/os-release && echo \"$PRETTY_NAME\""]),
            "memory": mem,
            "redis": m.group(1) if m else rv,
            "revision": cmd(["git", "-C", REPO, "describe", "--always", "--dirty"]) or "?",
            "loadavg_start": os.getloadavg(),
        }

    def client(self):
        return self.server.client()

    def fresh(self):
        r = self.client()
        r.flushall()
        return r

    def workdir(self):
        return tempfile.mkdtemp(dir=self.tmp, prefix="d-")

    def daemon(self, **settings):
        s = {"concurrency": 4, "queues": ["default"], "log_level": "warn",
             "handlers": [{"class": "True", "command": ["/bin/true"]}]}
        s.update(settings)
        return Daemon(self.server, self.workdir(), **s)

    def elapsed(self):
        return time.monotonic() - self.t0

    # -- throughput

    @staticmethod
    def spawn_loop(binary, threads, n):
        """A run of spawn_ceiling.c's loop, as built in `binary`: its output line parsed."""
        out = subprocess.run([binary, str(threads), str(n)], capture_output=True,
                             text=True, check=True).stdout.split()
        return {"rate": float(out[2]), "self_us": float(out[3]), "children_us": float(out[4])}

    def ceiling(self, threads, n):
        return self.spawn_loop(self.ceiling_bin, threads, n)

    def spawn_path(self, threads, n):
        """The daemon's handler_run alone (spawn_ceiling.c built as spawn_path), or None
        when it is not built (bench.py run without `make bench`)."""
        if not os.path.exists(self.path_bin):
            return None
        return self.spawn_loop(self.path_bin, threads, n)

    def drain(self, r, key, n, procs, alive, timeout=180, kids_of=None, redis_counts=False):
        """Watch the queue `key` (n jobs pushed) drain: t1 once `lead` jobs are taken (the
        workers are warm), t2 once it is empty; the rate is the jobs taken between. Not the
        processed counter: the daemon flushes it once a second (src/batch.c), Sidekiq at its
        beat. CPU of each pid in procs (with its reaped children) and of redis-server over
        the same span; with kids_of, also of that pid's live children of another program
        (warm processes, never reaped while they serve); with redis_counts, the network
        round trips (INFO stats total_reads_processed) and commands per job at Redis, less
        the bench's own."""
        lead = min(200, n // 10)
        deadline = time.monotonic() + timeout
        while r.llen(key) > n - lead:
            if not alive() or time.monotonic() > deadline:
                raise RuntimeError("no job taken")
            time.sleep(0.002)
        s1 = (r.info("stats"), r.info("commandstats")) if redis_counts else None
        t1, k1 = time.monotonic(), r.llen(key)
        c1 = [proc_cpu(pid) for pid in procs]
        rc1 = proc_cpu(self.server.pid)
        w1 = kids_cpu(kids_of) if kids_of else {}
        polls = 1
        while True:
            k = r.llen(key)
            polls += 1
            if k == 0:
                break
            if not alive() or time.monotonic() > deadline:
                raise RuntimeError("stalled with %d of %d left" % (k, n))
            time.sleep(0.005)
        t2 = time.monotonic()
        c2 = [proc_cpu(pid) for pid in procs]
        rc2 = proc_cpu(self.server.pid)
        w2 = kids_cpu(kids_of) if kids_of else {}
        s2 = (r.info("stats"), r.info("commandstats")) if redis_counts else None
        jobs = k1
        own = sum(b[0] + b[1] - a[0] - a[1] for a, b in zip(c1, c2))
        kids = sum(b[2] + b[3] - a[2] - a[3] for a, b in zip(c1, c2))
        res = {"rate": jobs / (t2 - t1), "seconds": t2 - t1, "jobs": jobs,
               "daemon_us": own / jobs * 1e6, "children_us": kids / jobs * 1e6,
               "redis_us": (rc2[0] + rc2[1] - rc1[0] - rc1[1]) / jobs * 1e6}
        if kids_of:
            # Only the processes alive at both ends: one that left between is not counted.
            res["warm_us"] = sum(w2[p] - w1[p] for p in w1 if p in w2) / jobs * 1e6
            res["warm_procs"] = len(w2)
        if redis_counts:
            # Ours between the snapshots: the LLEN polls, INFO stats and INFO commandstats
            # (the second pair counts its INFO stats read, not its command).
            reads = (s2[0]["total_reads_processed"] - s1[0]["total_reads_processed"]
                     - polls - 2)
            by = {}
            for k, v in s2[1].items():
                calls = v["calls"] - s1[1].get(k, {}).get("calls", 0)
                name = k[len("cmdstat_"):]
                calls -= {"llen": polls, "info": 2}.get(name, 0)
                if calls > 0:
                    by[name] = calls / jobs
            res["reads_per_job"] = reads / jobs
            res["commands_per_job"] = sum(by.values())
            res["by_command"] = by
        return res

    def daemon_rate(self, conc, n, level="warn", cls="True", **settings):
        r = self.fresh()
        push_jobs(r, n, cls=cls)
        d = self.daemon(concurrency=conc, log_level=level, **settings)
        d.start(wait=False)
        try:
            return self.drain(r, b"cogworker:queue:default", n, [d.proc.pid],
                              lambda: d.proc.poll() is None)
        finally:
            d.stop()

    # -- the peer: Sidekiq, each job `system('/bin/true')`

    def ensure_sidekiq(self):
        """Sidekiq from Debian's ruby-sidekiq, installed here (never by make run or make
        check); None and the reason when it cannot be had."""
        if hasattr(self, "sidekiq_why"):
            return self.sidekiq_why
        self.sidekiq_why = self.get_sidekiq()
        return self.sidekiq_why

    def get_sidekiq(self):
        if self.opts.no_sidekiq:
            return "not asked for (--no-sidekiq)"
        if not shutil.which("sidekiq"):
            cmd = ["apt-get", "install", "-y", "ruby-sidekiq"]
            if os.geteuid() != 0:
                cmd = ["sudo", "-n"] + cmd
            log("installing the peer: " + " ".join(cmd))
            try:
                subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               timeout=600, env=dict(os.environ,
                                                     DEBIAN_FRONTEND="noninteractive"))
            except (OSError, subprocess.SubprocessError) as e:
                return "ruby-sidekiq could not be installed (%s)" % e
        if not shutil.which("sidekiq"):
            return "ruby-sidekiq could not be installed (apt-get failed)"
        # TrueJob shells out like a process per job; NoopJob is the warm figure's empty
        # method, the same one tests/bench/noop_job.rb runs for cogworkerd.
        self.sidekiq_job = os.path.join(self.tmp, "sidekiq_jobs.rb")
        with open(self.sidekiq_job, "w") as f:
            f.write('require "sidekiq"\n'
                    'class TrueJob\n'
                    '  include Sidekiq::Worker\n'
                    '  def perform(*) system("/bin/true") end\n'
                    'end\n'
                    'class NoopJob\n'
                    '  include Sidekiq::Worker\n'
                    '  def perform; end\n'
                    'end\n')
        return None

    def sidekiq_rate(self, conc, n, cls="TrueJob"):
        r = self.fresh()
        key = b"queue:default"
        p = r.pipeline(transaction=False)
        for i in range(n):
            now = time.time()
            p.lpush(key, json.dumps({"class": cls, "args": [], "queue": "default",
                                     "jid": os.urandom(12).hex(), "retry": True,
                                     "created_at": now, "enqueued_at": now}))
            if i % 1000 == 999:
                p.execute()
        p.sadd(b"queues", b"default")
        p.execute()
        env = dict(os.environ, REDIS_URL="redis://127.0.0.1:%d/0" % self.server.port)
        sk = subprocess.Popen(["sidekiq", "-r", self.sidekiq_job, "-c", str(conc), "-q",
                               "default"], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, cwd=self.tmp)
        try:
            return self.drain(r, key, n, [sk.pid], lambda: sk.poll() is None)
        finally:
            sk.terminate()
            try:
                sk.wait(timeout=30)
            except subprocess.TimeoutExpired:
                sk.kill()
                sk.wait()

    def throughput(self):
        n = self.opts.jobs
        nc = self.opts.ceiling_spawns
        runs = {c: [] for c in CONCURRENCIES}
        info_runs, path_runs = [], []
        peer = {c: [] for c in SIDEKIQ_CONCURRENCIES}
        why_no_peer = self.ensure_sidekiq()
        if why_no_peer:
            log("Sidekiq: not measured: " + why_no_peer)
        budget = self.opts.budget
        rep = 0
        rep_time = None
        while rep < self.opts.reps:
            started = time.monotonic()
            for c in CONCURRENCIES:
                # The ceiling right before and right after the daemon, averaged: a burst of
                # other load on the machine during one of them moves the ratio less.
                before = self.ceiling(c, nc)
                dm = self.daemon_rate(c, n)
                di = self.daemon_rate(c, n, level="info") if c == 4 else None
                sp = self.spawn_path(c, nc) if c == 4 else None
                sk = None
                if not why_no_peer and c in SIDEKIQ_CONCURRENCIES:
                    try:
                        sk = self.sidekiq_rate(c, self.opts.sidekiq_jobs)
                    except RuntimeError as e:
                        log("Sidekiq c=%d failed: %s" % (c, e))
                after = self.ceiling(c, nc)
                ce = {k: (before[k] + after[k]) / 2 for k in before}
                ce["before"], ce["after"] = before["rate"], after["rate"]
                runs[c].append({"daemon": dm, "ceiling": ce, "ratio": dm["rate"] / ce["rate"]})
                line = ("throughput c=%-2d rep %d: %.0f jobs/s, ceiling %.0f/s (%.0f before, "
                        "%.0f after), ratio %.2f" % (c, rep + 1, dm["rate"], ce["rate"],
                                                     before["rate"], after["rate"],
                                                     dm["rate"] / ce["rate"]))
                if sp:
                    path_runs.append({"path": sp, "ceiling": ce, "daemon": dm})
                    line += "; spawn path alone %.0f/s, %.0f us/run (ceiling %.0f)" % (
                        sp["rate"], sp["self_us"], ce["self_us"])
                if di:
                    info_runs.append({"daemon": di, "ceiling": ce,
                                      "ratio": di["rate"] / ce["rate"]})
                    line += "; log_level info %.0f jobs/s (%.2f)" % (
                        di["rate"], di["rate"] / ce["rate"])
                if sk:
                    peer[c].append({"sidekiq": sk, "ceiling": ce, "daemon": dm,
                                    "ratio": sk["rate"] / ce["rate"],
                                    "ahead": dm["rate"] / sk["rate"]})
                    line += "; Sidekiq %.0f jobs/s (%.2f; cogworkerd %.1fx, the ceiling %.1fx)" % (
                        sk["rate"], sk["rate"] / ce["rate"], dm["rate"] / sk["rate"],
                        ce["rate"] / sk["rate"])
                log(line)
            rep += 1
            rep_time = time.monotonic() - started
            # Keep `make bench` under its budget: the other figures need about REST s.
            if rep >= 2 and self.elapsed() + rep_time + self.opts.rest > budget:
                log("stopping throughput after %d repetitions (time budget)" % rep)
                break
        self.results["throughput"] = {"jobs": n, "ceiling_spawns": nc, "reps": rep,
                                      "runs": {str(c): v for c, v in runs.items()},
                                      "info_c4": info_runs, "path_c4": path_runs,
                                      "sidekiq": {str(c): v for c, v in peer.items()},
                                      "sidekiq_jobs": self.opts.sidekiq_jobs,
                                      "no_sidekiq": why_no_peer}

    # -- warm handlers (issue 22's targets)

    def warm_handlers(self):
        """The handler blocks of the warm figure: a no-op in C (tests/bench/warm_noop.c),
        Ruby's empty perform (tests/bench/noop_job.rb), and a Python handler whose import
        takes 0.2 s (tests/bench/slow_import.py), warm and cold."""
        slow = os.path.join(HERE, "slow_import.py")
        return [{"class": "True", "command": ["/bin/true"]},
                {"class": "Noop", "command": [self.warm_noop_bin], "warm": True},
                {"class": "NoopJob", "command": [os.path.join(HERE, "noop_job.rb")],
                 "warm": True},
                {"class": "SlowCold", "command": [slow]},
                {"class": "SlowWarm", "command": [slow], "warm": True}]

    def warm_rate(self, conc, n, cls, redis_counts=False):
        """daemon_rate for one class of warm_handlers(), with the warm processes' CPU."""
        r = self.fresh()
        push_jobs(r, n, cls=cls)
        d = self.daemon(concurrency=conc, handlers=self.warm_handlers())
        d.start(wait=False)
        try:
            return self.drain(r, b"cogworker:queue:default", n, [d.proc.pid],
                              lambda: d.proc.poll() is None, timeout=600,
                              kids_of=d.proc.pid, redis_counts=redis_counts)
        finally:
            d.stop()

    def warm(self):
        """Issue 22's targets, each against its yardstick measured in the same repetition,
        same Redis, at concurrency 4 and 16: the spawn ceiling (before and after, as in
        throughput) and cold /bin/true; the warm C no-op (the daemon's ceiling with warm
        handlers: jobs/s, daemon CPU and Redis round trips per job); Ruby's empty perform
        warm against Sidekiq running it in-process; the 0.2 s-import Python handler warm
        and cold. Then the daemon's RSS at concurrency 50 with a warm process per fetcher."""
        o = self.opts
        why_no_peer = self.ensure_sidekiq()
        if why_no_peer:
            log("Sidekiq: not measured: " + why_no_peer)
        runs = {str(c): [] for c in WARM_CONCURRENCIES}
        for rep in range(o.warm_reps):
            for c in WARM_CONCURRENCIES:
                x = {}
                before = self.ceiling(c, o.ceiling_spawns)
                x["cold"] = self.daemon_rate(c, o.jobs)
                x["noop"] = self.warm_rate(c, o.warm_jobs, "Noop", redis_counts=True)
                x["ruby"] = self.warm_rate(c, o.warm_jobs, "NoopJob")
                if not why_no_peer:
                    try:
                        x["sidekiq"] = self.sidekiq_rate(c, o.warm_jobs, cls="NoopJob")
                    except RuntimeError as e:
                        log("Sidekiq c=%d failed: %s" % (c, e))
                x["slow_cold"] = self.warm_rate(c, o.slow_cold_jobs * c // 4, "SlowCold")
                x["slow_warm"] = self.warm_rate(c, o.slow_warm_jobs, "SlowWarm")
                after = self.ceiling(c, o.ceiling_spawns)
                x["ceiling"] = {k: (before[k] + after[k]) / 2 for k in before}
                x["ceiling"]["before"], x["ceiling"]["after"] = before["rate"], after["rate"]
                runs[str(c)].append(x)
                nw = x["noop"]
                log("warm c=%-2d rep %d: cold /bin/true %.0f jobs/s (%.2f of the ceiling %.0f); "
                    "warm C no-op %.0f jobs/s, daemon %.0f us/job, %.2f round trips and %.2f "
                    "commands/job; Ruby no-op warm %.0f jobs/s%s; Python 0.2 s import cold "
                    "%.1f, warm %.0f jobs/s (%.0fx)" % (
                        c, rep + 1, x["cold"]["rate"], x["cold"]["rate"] / x["ceiling"]["rate"],
                        x["ceiling"]["rate"], nw["rate"], nw["daemon_us"], nw["reads_per_job"],
                        nw["commands_per_job"], x["ruby"]["rate"],
                        ", Sidekiq %.0f (%.2fx)" % (x["sidekiq"]["rate"], x["ruby"]["rate"] /
                                                    x["sidekiq"]["rate"])
                        if "sidekiq" in x else "",
                        x["slow_cold"]["rate"], x["slow_warm"]["rate"],
                        x["slow_warm"]["rate"] / x["slow_cold"]["rate"]))
        self.results["warm"] = {"runs": runs, "jobs": o.jobs, "warm_jobs": o.warm_jobs,
                                "slow_warm_jobs": o.slow_warm_jobs,
                                "slow_cold_jobs": o.slow_cold_jobs,
                                "no_sidekiq": why_no_peer, "memory": self.warm_memory(50)}

    def warm_memory(self, conc):
        """VmRSS of a daemon of concurrency conc running warm C no-ops: before any job,
        its peak while jobs flow through a warm process per fetcher, and after, with them
        all idle."""
        r = self.fresh()
        d = self.daemon(concurrency=conc, handlers=self.warm_handlers())
        d.start(wait=False)
        try:
            wait_ready(r, d)
            time.sleep(1.5)
            idle = proc_rss_kib(d.proc.pid)
            n = self.opts.warm_jobs
            push_jobs(r, n, cls="Noop")
            peak, procs = 0, 0
            deadline = time.monotonic() + 300
            while r.llen(b"cogworker:queue:default") > 0 and time.monotonic() < deadline:
                peak = max(peak, proc_rss_kib(d.proc.pid))
                procs = max(procs, len(kids_cpu(d.proc.pid)))
                time.sleep(0.05)
            time.sleep(1.0)
            after = proc_rss_kib(d.proc.pid)
            procs = max(procs, len(kids_cpu(d.proc.pid)))
        finally:
            d.stop()
        res = {"concurrency": conc, "jobs": n, "idle_kib": idle, "peak_kib": max(peak, after),
               "after_kib": after, "warm_procs": procs}
        log("warm memory c=%d: %.1f MiB before any job, %.1f MiB at the peak, %.1f MiB after "
            "(%d warm processes)" % (conc, idle / 1024, res["peak_kib"] / 1024, after / 1024,
                                     procs))
        return res

    # -- scaling across daemons

    def scaling(self):
        """1, 2, 4 daemons (concurrency 25 each) on one Redis, jobs of `/bin/sleep 0.05`, so
        that a daemon's own limit is its concurrency (25 / 0.05 s = 500 jobs/s), not the
        spawn rate... as far as two cores allow. Over a window of steady work: jobs/s,
        redis-server CPU per job and its share of one core, commands per job (INFO stats
        delta), the daemons' CPU per job."""
        res = {}
        key = b"cogworker:queue:default"
        for k in SCALE_DAEMONS:
            r = self.fresh()
            n = int(k * 25 / 0.05 * (self.opts.scale_seconds + 8))
            push_jobs(r, n, cls="Nap")
            ds = [self.daemon(concurrency=25, handlers=[
                {"class": "Nap", "command": ["/bin/sleep", "0.05"]}]) for _ in range(k)]
            for d in ds:
                d.start(wait=False)
            try:
                wait_for(lambda: r.scard(b"cogworker:processes") >= k, timeout=20,
                         interval=0.05, message="%d daemons up" % k)
                time.sleep(2.0)         # every fetcher busy
                s0 = r.info("stats")["total_commands_processed"]
                k0, t0 = r.llen(key), time.monotonic()
                rc0 = proc_cpu(self.server.pid)
                dc0 = [proc_cpu(d.proc.pid) for d in ds]
                time.sleep(self.opts.scale_seconds)
                k1, t1 = r.llen(key), time.monotonic()
                rc1 = proc_cpu(self.server.pid)
                dc1 = [proc_cpu(d.proc.pid) for d in ds]
                s1 = r.info("stats")["total_commands_processed"]
            finally:
                for d in ds:
                    d.stop()
            jobs = k0 - k1
            if k1 == 0 or jobs <= 0:
                log("scaling %d daemon(s): the queue ran dry; not measured" % k)
                continue
            dt = t1 - t0
            rcpu = rc1[0] + rc1[1] - rc0[0] - rc0[1]
            dcpu = sum(b[0] + b[1] - a[0] - a[1] for a, b in zip(dc0, dc1))
            # Ours between the two INFO: two LLEN and the second INFO itself.
            res[str(k)] = {"daemons": k, "jobs_per_s": jobs / dt,
                           "redis_us_per_job": rcpu / jobs * 1e6,
                           "redis_core_pct": rcpu / dt * 100,
                           "commands_per_job": (s1 - s0 - 3) / jobs,
                           "daemon_us_per_job": dcpu / jobs * 1e6,
                           "ideal_jobs_per_s": k * 25 / 0.05}
            log("scaling %d daemon(s): %.0f jobs/s (at most %d), redis %.1f us/job (%.1f %% of a "
                "core), %.2f commands/job, daemons %.0f us/job" % (
                    k, jobs / dt, k * 500, rcpu / jobs * 1e6, rcpu / dt * 100,
                    (s1 - s0 - 3) / jobs, dcpu / jobs * 1e6))
        self.results["scaling"] = res

    # -- output keeping

    def output(self):
        n = self.opts.output_jobs
        text = os.path.join(self.tmp, "4k.txt")
        with open(text, "w") as f:
            f.write(("%063d\n" % 0) * 64)              # 4096 bytes in 64 lines
        handlers = [{"class": "True", "command": ["/bin/true"]},
                    {"class": "Cat", "command": ["/bin/cat", text]}]
        runs = {}
        for rep in range(self.opts.reps):
            for cls in ("True", "Cat"):
                for keep in (0, 65536):
                    d = self.daemon_rate(4, n, cls=cls, handlers=handlers, output_keep=keep)
                    runs.setdefault("%s/%d" % (cls, keep), []).append(d)
                    log("output %s output_keep=%d rep %d: %.0f jobs/s, daemon %.0f us/job, "
                        "redis %.0f us/job" % (cls, keep, rep + 1, d["rate"], d["daemon_us"],
                                               d["redis_us"]))
        self.results["output"] = {"jobs": n, "runs": runs}

    # -- the cost of a limit never reached

    LIMIT_VARIANTS = (("none", {}), ("fleet_concurrency = 1000", {"fleet_concurrency": 1000}),
                      ("max_concurrency = 1000", {"max_concurrency": 1000}))

    def limits(self):
        n = self.opts.jobs
        runs = {name: [] for name, _ in self.LIMIT_VARIANTS}
        for rep in range(self.opts.reps):
            for name, h in self.LIMIT_VARIANTS:
                dm = self.daemon_rate(4, n, handlers=[dict(
                    {"class": "True", "command": ["/bin/true"]}, **h)])
                runs[name].append(dm)
                log("limits rep %d: %s: %.0f jobs/s (daemon %.0f µs/job, redis %.0f µs/job)"
                    % (rep + 1, name, dm["rate"], dm["daemon_us"], dm["redis_us"]))
        self.results["limits"] = {"jobs": n, "concurrency": 4, "runs": runs}

    # -- the cost of fair share

    GROUP_VARIANTS = (
        ("without group_by", 50, {}),
        ("group_by, 50 groups, group_concurrency = 1000", 50,
         {"group_by": "args[0]", "group_concurrency": 1000}),
        ("group_by, 2 groups, group_concurrency = 1 (set aside)", 2,
         {"group_by": "args[0]", "group_concurrency": 1}))

    def groups_run(self, n, ngroups, h):
        """One variant: n jobs in ngroups groups (round-robin) pushed, stats reset, then the
        daemon runs them all; its counts over the whole run, less the bench's own polls."""
        r = self.fresh()
        key = b"cogworker:queue:default"
        p = r.pipeline(transaction=False)
        for i in range(n):
            p.lpush(key, job("True", args=["t%d" % (i % ngroups)]))
        p.execute()
        d = self.daemon(concurrency=4, handlers=[dict(
            {"class": "True", "command": ["/bin/true"]}, **h)])
        r.config_resetstat()
        rc1 = proc_cpu(self.server.pid)
        t1 = time.monotonic()
        d.start(wait=False)
        polls = {"get": 0, "llen": 0, "scan": 0, "config": 1, "info": 1}
        deadline = time.monotonic() + 300

        def keys(match):
            out, cursor = [], 0
            while True:
                polls["scan"] += 1
                cursor, found = r.scan(cursor, match=match, count=1000)
                out += found
                if cursor == 0:
                    return out

        def idle():
            """Nothing left to run or running: the queue, the lines, the in-progress lists
            (a job leaves its list at its ack) all empty."""
            polls["llen"] += 1
            if r.llen(key) or keys("cogworker:group_jobs:*"):
                return False
            lists = keys("cogworker:inprogress:*")
            polls["llen"] += len(lists)
            return not any(r.llen(k) for k in lists)
        try:
            while not idle():
                if d.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("groups: stalled at %d of %d" % (processed(r), n))
                time.sleep(0.01)
            t2 = time.monotonic()
            c = proc_cpu(d.proc.pid)
            rc2 = proc_cpu(self.server.pid)
            # The processed counter, flushed once a second, says every job was acked; the
            # commands counted are the whole run's, the flush among them.
            while True:
                polls["get"] += 1
                if processed(r) >= n:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError("groups: processed stays under %d" % n)
                time.sleep(0.05)
            cmds = r.info("commandstats")
        finally:
            d.stop()
        by = {}
        for k, v in cmds.items():
            name = k[len("cmdstat_"):]
            calls = v["calls"] - polls.get(name, 0)
            if calls > 0:
                by[name] = calls / n
        scripts = by.get("evalsha", 0) + by.get("eval", 0)
        return {"seconds": t2 - t1, "jobs": n, "rate": n / (t2 - t1),
                "commands_per_job": sum(by.values()),
                "scripts_per_job": scripts, "by_command": by,
                "daemon_us": (c[0] + c[1]) / n * 1e6,
                "redis_us": (rc2[0] + rc2[1] - rc1[0] - rc1[1]) / n * 1e6}

    def groups(self):
        n = 2000 if not self.opts.quick else 500
        runs = {name: [] for name, _, _ in self.GROUP_VARIANTS}
        for rep in range(self.opts.reps):
            for name, ngroups, h in self.GROUP_VARIANTS:
                x = self.groups_run(n, ngroups, h)
                runs[name].append(x)
                log("groups rep %d: %s: %.1f commands/job (%.2f scripts), redis %.0f µs/job, "
                    "daemon %.0f µs/job, %.1f s" % (rep + 1, name, x["commands_per_job"],
                                                   x["scripts_per_job"], x["redis_us"],
                                                   x["daemon_us"], x["seconds"]))
        self.results["groups"] = {"jobs": n, "concurrency": 4, "runs": runs}

    def report_groups(self, L):
        g = self.results.get("groups")
        if not g:
            return
        L.append("## The cost of fair share\n")
        L.append("%d `/bin/true` jobs at concurrency %d, `log_level = \"warn\"`, from the "
                 "daemon's start until the queue, the lines and the in-progress lists are "
                 "empty, the variants alternating; "
                 "medians of %d repetitions. Commands: INFO commandstats (a script's own "
                 "commands counted), the bench's polls taken out.\n"
                 % (g["jobs"], g["concurrency"], len(g["runs"][self.GROUP_VARIANTS[0][0]])))
        L.append("| handler | Redis commands/job | scripts/job | Redis CPU µs/job | daemon CPU "
                 "µs/job | wall (jobs/s) | every repetition (commands/job) |\n"
                 "|---|---:|---:|---:|---:|---:|---|")
        for name, _, _ in self.GROUP_VARIANTS:
            v = g["runs"][name]
            L.append("| %s | %.1f | %.2f | %.0f | %.0f | %.2f s (%.0f) | %s |" % (
                name, median([x["commands_per_job"] for x in v]),
                median([x["scripts_per_job"] for x in v]),
                median([x["redis_us"] for x in v]), median([x["daemon_us"] for x in v]),
                median([x["seconds"] for x in v]), median([x["rate"] for x in v]),
                ", ".join("%.1f" % x["commands_per_job"] for x in v)))
        L.append("")

    # -- containment on against off

    CONTAINMENT_VARIANTS = (("off", "process-group"), ("on", "cgroup"))

    def containment(self):
        probe = subprocess.run([binary("cogworkerd"), "--check", "-c", "/dev/null"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if "containment: cgroup v2" not in probe.stdout:
            log("containment: not run (%s)" % probe.stdout.strip().splitlines()[0])
            self.results["containment"] = {"skipped": probe.stdout.strip()}
            return
        n = self.opts.jobs // 2
        runs = {"%s/%s" % (kind, name): [] for kind in ("cold", "warm")
                for name, _ in self.CONTAINMENT_VARIANTS}
        handlers = self.warm_handlers()
        for rep in range(self.opts.reps):
            for kind, cls in (("cold", "True"), ("warm", "Noop")):
                for name, mode in self.CONTAINMENT_VARIANTS:
                    dm = self.daemon_rate(4, n, cls=cls, handlers=handlers, containment=mode)
                    runs["%s/%s" % (kind, name)].append(dm)
                    log("containment rep %d: %s %s: %.0f jobs/s (daemon %.0f µs/job)"
                        % (rep + 1, kind, name, dm["rate"], dm["daemon_us"]))
        self.results["containment"] = {"jobs": n, "concurrency": 4, "runs": runs}

    def report_containment(self, L):
        cg = self.results.get("containment")
        if not cg:
            return
        L.append("## The cost of containment\n")
        if "skipped" in cg:
            L.append("not run: %s\n" % cg["skipped"])
            return
        L.append("%d jobs at concurrency %d, `log_level = \"warn\"`: cold `/bin/true` and the "
                 "warm C no-op, each with `containment = \"process-group\"` (off) and "
                 "`\"cgroup\"` (on), alternating; medians of %d repetitions.\n"
                 % (cg["jobs"], cg["concurrency"], len(cg["runs"]["cold/off"])))
        L.append("| jobs | containment | jobs/s | daemon CPU µs/job | every repetition |\n"
                 "|---|---|---:|---:|---|")
        for kind in ("cold", "warm"):
            for name, _ in self.CONTAINMENT_VARIANTS:
                v = cg["runs"]["%s/%s" % (kind, name)]
                L.append("| %s | %s | %.0f | %.0f | %s |" % (
                    kind, name, median([x["rate"] for x in v]),
                    median([x["daemon_us"] for x in v]), ", ".join("%.0f" % x["rate"] for x in v)))
        for kind in ("cold", "warm"):
            ratios = [b["rate"] / a["rate"] for a, b in zip(cg["runs"][kind + "/off"],
                                                            cg["runs"][kind + "/on"])]
            L.append("\n%s on / off: **%.2f** (median of the repetitions' ratios: %s; target "
                     "%s).\n" % (kind, median(ratios), ", ".join("%.2f" % r for r in ratios),
                                 "≥ 0.9" if kind == "cold" else "unchanged within noise"))

    # -- issue 29's peers (tests/bench/peers.py)

    def peers(self):
        self.peer_figure = Peers(self)
        self.peer_figure.run()

    # -- the cost of confinement (doc/design.md "Confinement")

    CONFINE_VARIANTS = (("none", {}), ("no_new_privileges", {"no_new_privileges": True}),
                        ("private_tmp", {"private_tmp": True}),
                        ("read_only", {"read_only": True}),
                        ("network = false", {"network": False}),
                        ("all four", {"no_new_privileges": True, "private_tmp": True,
                                      "read_only": True, "network": False}))

    def confinement(self):
        n = self.opts.jobs // 4
        runs = {name: [] for name, _ in self.CONFINE_VARIANTS}
        for rep in range(self.opts.reps):
            for name, h in self.CONFINE_VARIANTS:
                dm = self.daemon_rate(4, n, handlers=[dict(
                    {"class": "True", "command": ["/bin/true"]}, **h)])
                runs[name].append(dm)
                log("confinement rep %d: %s: %.0f jobs/s (daemon %.0f µs/job, children %.0f "
                    "µs/job)" % (rep + 1, name, dm["rate"], dm["daemon_us"],
                                 dm["children_us"]))
        self.results["confinement"] = {"jobs": n, "concurrency": 4, "runs": runs}

    def report_confinement(self, L):
        cf = self.results.get("confinement")
        if not cf:
            return
        L.append("## The cost of confinement\n")
        L.append("%d cold `/bin/true` jobs at concurrency %d, `log_level = \"warn\"`, each "
                 "setting alone and all four, the variants alternating; medians of %d "
                 "repetitions. The children's CPU (the handlers, reaped) holds what the "
                 "child spends confining itself before it execs; a network namespace's "
                 "teardown runs later in a kernel worker, in neither column.\n"
                 % (cf["jobs"], cf["concurrency"], len(cf["runs"]["none"])))
        L.append("| confinement | jobs/s | vs none | daemon CPU µs/job | children CPU "
                 "µs/job | every repetition |\n|---|---:|---:|---:|---:|---|")
        base = median([x["rate"] for x in cf["runs"]["none"]])
        for name, _ in self.CONFINE_VARIANTS:
            v = cf["runs"][name]
            rate = median([x["rate"] for x in v])
            L.append("| %s | %.0f | %+.1f %% | %.0f | %.0f | %s |" % (
                name, rate, (rate / base - 1) * 100,
                median([x["daemon_us"] for x in v]), median([x["children_us"] for x in v]),
                ", ".join("%.0f" % x["rate"] for x in v)))
        L.append("")

    # -- TLS

    def tls(self):
        n = self.opts.jobs // 2
        pki = PKI()
        plain = free_port()
        server = RedisServer(tls=pki.serving(), extra_args=["--port", str(plain)])
        saved, self.server = self.server, server
        runs = {"tcp": [], "tls": []}
        try:
            for rep in range(self.opts.reps):
                for name in ("tcp", "tls"):
                    # The server's own url is rediss://, and a daemon on it gets redis.tls.
                    url = "redis://127.0.0.1:%d/0" % plain if name == "tcp" else server.url
                    dm = self.daemon_rate(4, n, url=url)
                    runs[name].append(dm)
                    log("tls rep %d: %s: %.0f jobs/s (daemon %.0f µs/job, redis %.0f µs/job)"
                        % (rep + 1, name, dm["rate"], dm["daemon_us"], dm["redis_us"]))
        finally:
            self.server = saved
            server.stop()
            pki.stop()
        self.results["tls"] = {"jobs": n, "concurrency": 4, "runs": runs}

    # -- round trips

    def round_trips(self):
        n = self.opts.rt_jobs
        r = self.fresh()
        push_jobs(r, n)
        d = self.daemon(concurrency=4)
        r.config_resetstat()
        d.start(wait=False)
        polls = 0
        try:
            while processed(r) < n:
                polls += 1
                time.sleep(0.05)
            polls += 1
            stats = r.info("stats")
            cmds = r.info("commandstats")
        finally:
            d.stop()
        # Ours: the GET polls, INFO stats, INFO commandstats (CONFIG RESETSTAT came before).
        ours_reads = polls + 2
        per = {}
        for k, v in cmds.items():
            name = k[len("cmdstat_"):]
            calls = v["calls"]
            if name == "get":
                calls -= polls
            if name == "info":
                calls -= 2
            if calls > 0:
                per[name] = calls / n
        reads = (stats["total_reads_processed"] - ours_reads) / n
        # A small sample under MONITOR: who issued each command.
        m = self.monitor_sample(self.opts.monitor_jobs)
        self.results["round_trips"] = {
            "jobs": n, "commands_per_job": per, "all_per_job": sum(per.values()),
            "reads_per_job": reads, "monitor": m}
        log("round trips: %.2f commands/job (commandstats), %.2f read events/job; MONITOR: "
            "%.2f client + %.2f script commands/job"
            % (sum(per.values()), reads, m["client_per_job"], m["script_per_job"]))

    def monitor_sample(self, n):
        r = self.fresh()
        push_jobs(r, n)
        mon = socket.create_connection(("127.0.0.1", self.server.port))
        mon.sendall(b"MONITOR\r\n")
        buf = bytearray()
        stop = threading.Event()

        def reader():
            mon.settimeout(0.2)
            while not stop.is_set():
                try:
                    chunk = mon.recv(1 << 16)
                except socket.timeout:
                    continue
                if not chunk:
                    break
                buf.extend(chunk)
        t = threading.Thread(target=reader, daemon=True)
        t.start()
        # Our polls go through a socket of our own, so MONITOR lines from it can be told
        # apart by address.
        poll = socket.create_connection(("127.0.0.1", self.server.port))
        mine = "%s:%d" % poll.getsockname()[:2]

        def polled():
            poll.sendall(b"GET cogworker:stats:processed\r\n")
            data = b""
            while True:
                data += poll.recv(256)
                if data.startswith(b"$-1\r\n"):
                    return 0
                parts = data.split(b"\r\n")
                if len(parts) >= 3:
                    return int(parts[1])

        d = self.daemon(concurrency=1)
        d.start(wait=False)
        try:
            wait_for(lambda: polled() >= n, timeout=60, interval=0.05)
            time.sleep(0.3)
        finally:
            d.stop()
            stop.set()
            t.join()
            mon.close()
            poll.close()
        lines = bytes(buf).decode("utf-8", "replace").splitlines()
        client = script = 0
        by = {}
        for line in lines:
            m = re.match(r'^\+?\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]+)"', line)
            if not m:
                continue
            src, cmd = m.group(1), m.group(2).lower()
            if src == mine:
                continue            # the bench's own polls
            key = ("lua " if src == "lua" else "") + cmd
            by[key] = by.get(key, 0) + 1
            if src == "lua":
                script += 1
            else:
                client += 1
        return {"jobs": n, "client_per_job": client / n, "script_per_job": script / n,
                "by_command": {k: v / n for k, v in sorted(by.items())}}

    # -- latency

    def latency(self):
        res = {}
        for label, queues in (("1 queue", ["default"]),
                              ("5 queues", ["q1", "q2", "q3", "q4", "q5"])):
            runs = []
            for rep in range(self.opts.lat_reps):
                runs.append(self.latency_run(queues, self.opts.lat_samples))
            allv = [x for run in runs for x in run]
            res[label] = {
                "samples": len(allv),
                "p50_ms": median([percentile(run, 50) for run in runs]) * 1e3,
                "p99_ms": median([percentile(run, 99) for run in runs]) * 1e3,
                "max_ms": max(allv) * 1e3,
                "runs": runs,
            }
            log("latency %s: p50 %.2f ms, p99 %.2f ms, max %.2f ms (%d samples)" % (
                label, res[label]["p50_ms"], res[label]["p99_ms"], res[label]["max_ms"],
                len(allv)))
        self.results["latency"] = res

    def latency_run(self, queues, samples):
        r = self.fresh()
        stamps = os.path.join(self.tmp, "stamps-%d" % time.monotonic_ns())
        d = self.daemon(concurrency=10, queues=queues, handlers=[
            {"class": "Stamp", "command": [self.ceiling_bin, "--stamp", stamps]}])
        d.start(wait=False)
        lat = []
        try:
            wait_ready(r, d)
            time.sleep(1.0)             # every fetcher parked: the daemon is idle
            for i in range(samples):
                q = queues[i % len(queues)]
                payload = job("Stamp", queue=q)
                jid = json.loads(payload)["jid"]
                key = ("cogworker:queue:" + q).encode()
                t = time.time()
                r.lpush(key, payload)
                # The stamp, not the processed counter: that is flushed once a second.
                wait_for(lambda: jid in read_stamps(stamps), timeout=10, interval=0.001)
                lat.append(read_stamps(stamps)[jid][0] - t)
                wait_for(lambda: not r.llen(b"cogworker:inprogress:" + self.identity_of(r)
                                            .encode()), timeout=10, interval=0.001)
                time.sleep(0.02)        # idle again before the next push
        finally:
            d.stop()
        return lat

    # -- scheduled lateness

    def lateness_of(self, r, queue, due):
        """enqueued_at - due of every job on queue (the poller stamps enqueued_at)."""
        late = []
        for raw in r.lrange(("cogworker:queue:" + queue).encode(), 0, -1):
            j = json.loads(raw)
            late.append(float(j["enqueued_at"]) - due[j["jid"]])
        return late

    @staticmethod
    def spread(late):
        return {"n": len(late), "p50_s": percentile(late, 50), "p99_s": percentile(late, 99),
                "max_s": max(late)}

    def sched_run(self, r, set_key, lead, n, spread):
        """n entries into set_key, each written `lead(i)` s before it is due, the writes
        spread over `spread` s; returns their lateness."""
        due = {}
        t0 = time.time()
        for i in range(n):
            at_write = t0 + spread * i / n
            delay = at_write - time.time()
            if delay > 0:
                time.sleep(delay)
            extra = {"retry_count": 1, "error_class": "X", "error_message": "y"} \
                if set_key == b"cogworker:retry" else {}
            payload = job("Late", queue="late", **extra)
            at = time.time() + lead(i)
            due[json.loads(payload)["jid"]] = at
            r.zadd(set_key, {payload: at})
        wait_for(lambda: r.llen(b"cogworker:queue:late") >= n, timeout=spread + 30,
                 interval=0.05)
        late = self.lateness_of(r, "late", due)
        r.delete(b"cogworker:queue:late")
        return late

    def sched_alone(self, r, lead, n, rnd):
        """n schedule entries one at a time, each written lead() s before it is due on an
        otherwise idle poller, at a random moment of its look rhythm; their lateness (an
        entry written while others come due is seen sooner: each wake looks again)."""
        late = []
        for i in range(n):
            time.sleep(rnd.random() * 2.0)
            payload = job("Late", queue="late")
            at = time.time() + lead()
            r.zadd(b"cogworker:schedule", {payload: at})
            wait_for(lambda: r.llen(b"cogworker:queue:late") >= 1, timeout=30, interval=0.01)
            late += self.lateness_of(r, "late", {json.loads(payload)["jid"]: at})
            r.delete(b"cogworker:queue:late")
        return late

    def scheduled(self):
        n, spread = self.opts.sched_jobs, self.opts.sched_spread
        poll = 2.0                      # the default poll_interval
        rnd = __import__("random").Random(12)
        res = {"jobs": n, "poll_interval": poll}
        for notify in ("", "KEA"):
            r = self.fresh()
            r.config_set("notify-keyspace-events", notify)
            d = self.daemon(concurrency=2, queues=["default"])
            d.start(wait=False)
            try:
                wait_ready(r, d)
                time.sleep(0.5)
                if not notify:
                    res["ahead"] = self.spread(self.sched_run(
                        r, b"cogworker:schedule", lambda i: poll + 0.2 + rnd.random(), n, spread))
                    res["retry"] = self.spread(self.sched_run(
                        r, b"cogworker:retry", lambda i: poll + 0.2 + rnd.random(), n, spread))
                key = "sooner_notify" if notify else "sooner"
                res[key] = self.spread(self.sched_alone(
                    r, lambda: 0.1 + rnd.random() * (poll - 0.2), n // 2, rnd))
            finally:
                d.stop()
                r.config_set("notify-keyspace-events", "")
        self.results["scheduled"] = res
        for k in ("ahead", "retry", "sooner", "sooner_notify"):
            log("scheduled lateness %s: p50 %.3f s, p99 %.3f s, max %.3f s" % (
                k, res[k]["p50_s"], res[k]["p99_s"], res[k]["max_s"]))

    # -- cron lateness

    def cron_run(self, ndaemons, seconds):
        r = self.fresh()
        entry = {"cron": "* * * * * *", "class": "C"}
        ds = [self.daemon(concurrency=2, queues=["other"], periodic=[entry])
              for _ in range(ndaemons)]
        for d in ds:
            d.start(wait=False)
        try:
            for d in ds:
                wait_ready(r, d)
            wait_for(lambda: r.llen(b"cogworker:queue:default") >= 1, timeout=20,
                     interval=0.05)
            time.sleep(1.5)             # past the catch-up of the first slot
            r.delete(b"cogworker:queue:default")
            t0 = time.time()
            time.sleep(seconds)
            t1 = time.time()
            jobs = [json.loads(x) for x in r.lrange(b"cogworker:queue:default", 0, -1)]
        finally:
            for d in ds:
                d.stop()
        slots = [j["periodic_slot"] for j in jobs]
        late = [j["created_at"] - j["periodic_slot"] for j in jobs
                if t0 + 1 <= j["periodic_slot"] <= t1 - 1]
        expected = list(range(int(t0) + 1, int(t1) - 1 + 1))
        return dict(self.spread(late), daemons=ndaemons, seconds=seconds,
                    slots_expected=len(expected),
                    slots_fired=len(set(slots) & set(expected)),
                    duplicates=len(slots) - len(set(slots)))

    def cron(self):
        res = {}
        for k in (1, 3):
            res[str(k)] = self.cron_run(k, self.opts.cron_seconds)
            v = res[str(k)]
            log("cron lateness, %d daemon(s): p50 %.1f ms, p99 %.1f ms, max %.1f ms; %d of %d "
                "slots fired, %d duplicates" % (k, v["p50_s"] * 1e3, v["p99_s"] * 1e3,
                                                 v["max_s"] * 1e3, v["slots_fired"],
                                                 v["slots_expected"], v["duplicates"]))
        self.results["cron"] = res

    # -- idle cost

    def idle_run(self, concurrency, queues):
        r = self.fresh()
        d = self.daemon(concurrency=concurrency, queues=queues)
        d.start(wait=False)
        window = self.opts.idle_seconds
        try:
            wait_ready(r, d)
            time.sleep(3)               # boot work (orphan check, key check) done
            pid = d.proc.pid
            c0 = proc_cpu(pid)
            s0 = r.info("stats")["total_commands_processed"]
            cs0 = r.info("commandstats")
            t0 = time.monotonic()
            time.sleep(window)
            c1 = proc_cpu(pid)
            t1 = time.monotonic()
            s1 = r.info("stats")["total_commands_processed"]
            cs1 = r.info("commandstats")
        finally:
            d.stop()
        dt = t1 - t0
        ours = 3                        # INFO stats (after s0), INFO commandstats, INFO stats
        by = {}
        for k, v in cs1.items():
            calls = v["calls"] - cs0.get(k, {}).get("calls", 0)
            if k == "cmdstat_info":
                calls -= ours
            if calls > 0:
                by[k[len("cmdstat_"):]] = calls / dt
        return {"concurrency": concurrency, "queues": len(queues), "seconds": dt,
                "cpu_pct": (c1[0] + c1[1] - c0[0] - c0[1]) / dt * 100,
                "cmds_per_s": (s1 - s0 - ours) / dt, "by_command": by}

    def idle(self):
        res = []
        for conc, queues in ((10, ["default"]), (25, ["q1", "q2", "q3", "q4", "q5"])):
            v = self.idle_run(conc, queues)
            res.append(v)
            log("idle, concurrency %d over %d queue(s): %.3f %% CPU, %.2f Redis commands/s "
                "over %.0f s" % (conc, len(queues), v["cpu_pct"], v["cmds_per_s"],
                                 v["seconds"]))
        self.results["idle"] = res

    # -- the pause race

    def pause(self):
        rounds = self.opts.pause_rounds
        r = self.fresh()
        stamps = os.path.join(self.tmp, "pause-stamps")
        d = self.daemon(concurrency=4, queues=["default"], handlers=[
            {"class": "Stamp", "command": [self.ceiling_bin, "--stamp", stamps]}])
        d.start(wait=False)
        started_paused, resume = 0, []
        try:
            wait_ready(r, d)
            time.sleep(1.0)
            for i in range(rounds):
                r.sadd(b"cogworker:paused_queues", b"default")     # what queues pause does
                payload = job("Stamp")
                jid = json.loads(payload)["jid"]
                r.lpush(b"cogworker:queue:default", payload)
                time.sleep(0.03)
                if jid in read_stamps(stamps):
                    started_paused += 1
                t = time.time()
                r.srem(b"cogworker:paused_queues", b"default")
                wait_for(lambda: jid in read_stamps(stamps), timeout=5, interval=0.002)
                resume.append(read_stamps(stamps)[jid][0] - t)
        finally:
            d.stop()
        self.results["pause"] = dict(self.spread(resume), rounds=rounds,
                                     started_while_paused=started_paused)
        log("pause: %d of %d jobs pushed after the pause started; resume -> start p50 %.0f ms, "
            "p99 %.0f ms, max %.0f ms" % (started_paused, rounds, percentile(resume, 50) * 1e3,
                                          percentile(resume, 99) * 1e3, max(resume) * 1e3))

    # -- fewer fetchers than queues

    def fewer(self):
        res = {}
        for notify in ("", "KEA"):
            r = self.fresh()
            r.config_set("notify-keyspace-events", notify)
            stamps = os.path.join(self.tmp, "fewer-%s" % (notify or "off"))
            queues = ["q1", "q2"]
            d = self.daemon(concurrency=1, queues=queues, handlers=[
                {"class": "Stamp", "command": [self.ceiling_bin, "--stamp", stamps]}])
            d.start(wait=False)
            lat = []
            rnd = __import__("random").Random(5)
            try:
                wait_ready(r, d)
                time.sleep(1.0)
                for i in range(self.opts.fewer_samples):
                    q = queues[i % 2]
                    payload = job("Stamp", queue=q)
                    jid = json.loads(payload)["jid"]
                    t = time.time()
                    r.lpush(("cogworker:queue:" + q).encode(), payload)
                    # The stamp, not the processed counter: that is flushed once a second.
                    wait_for(lambda: jid in read_stamps(stamps), timeout=10, interval=0.001)
                    lat.append(read_stamps(stamps)[jid][0] - t)
                    time.sleep(0.05 + rnd.random() * 0.5)
            finally:
                d.stop()
                r.config_set("notify-keyspace-events", "")
            res["notify" if notify else "plain"] = self.spread(lat)
            v = res["notify" if notify else "plain"]
            log("fewer fetchers than queues%s: p50 %.1f ms, p99 %.1f ms, max %.1f ms" % (
                " (keyspace notifications)" if notify else "", v["p50_s"] * 1e3,
                v["p99_s"] * 1e3, v["max_s"] * 1e3))
        self.results["fewer"] = res

    # -- memory

    def memory(self):
        res = {}
        for c in (10, 50, 200):
            r = self.fresh()
            d = self.daemon(concurrency=c, handlers=[
                {"class": "Sleep", "command": ["/bin/sleep", "1"]}])
            d.start(wait=False)
            try:
                wait_ready(r, d)
                time.sleep(1.5)
                idle = [proc_rss_kib(d.proc.pid)]
                for _ in range(4):
                    time.sleep(0.1)
                    idle.append(proc_rss_kib(d.proc.pid))
                push_jobs(r, 2 * c, cls="Sleep")
                peak = 0
                busy_seen = 0
                deadline = time.monotonic() + 60
                while processed(r) < 2 * c and time.monotonic() < deadline:
                    peak = max(peak, proc_rss_kib(d.proc.pid))
                    busy_seen = max(busy_seen, r.hlen(
                        ("cogworker:workers:" + self.identity_of(r)).encode()))
                    time.sleep(0.05)
            finally:
                d.stop()
            res[str(c)] = {"idle_kib": median(idle), "load_kib": peak, "busy_seen": busy_seen}
            log("memory c=%d: idle %.1f MiB, under load %.1f MiB (%d busy at once)" % (
                c, median(idle) / 1024, peak / 1024, busy_seen))
        self.results["memory"] = res

    # -- memory after large jobs

    # name, sizes, one after the other, max_job_bytes (None: the default, 16 MiB)
    LARGE = (("6 x 10 MB at once", [10 ** 7] * 6, False, None),
             ("1 x 200 MB", [2 * 10 ** 8], False, 0),
             ("3 x 200 MB one after the other", [2 * 10 ** 8] * 3, True, 0),
             ("1 x 400 MB, over max_job_bytes (buried unread)", [4 * 10 ** 8], False, None))

    def large(self):
        res = {}
        key = b"cogworker:queue:default"
        for name, sizes, one_by_one, limit in self.LARGE:
            r = self.fresh()
            extra = {} if limit is None else {"max_job_bytes": limit}
            d = self.daemon(concurrency=6, handlers=[
                {"class": "Big", "command": ["/bin/sh", "-c", "cat > /dev/null"]}], **extra)
            d.start(wait=False)
            try:
                wait_ready(r, d)
                time.sleep(0.5)
                base = proc_rss_kib(d.proc.pid)
                for i, size in enumerate(sizes):
                    r.lpush(key, job("Big", ["x" * size]))
                    if one_by_one or i == len(sizes) - 1:
                        n = i + 1 if one_by_one else len(sizes)
                        wait_for(lambda: processed(r) + r.zcard(b"cogworker:dead") >= n,
                                 timeout=300, interval=0.05,
                                 message="%d large jobs done or buried" % n)
                inprogress = ("cogworker:inprogress:" + self.identity_of(r)).encode()
                wait_for(lambda: r.llen(inprogress) == 0, timeout=60, interval=0.05)
                after = []
                for _ in range(20):
                    after.append(proc_rss_kib(d.proc.pid))
                    time.sleep(0.5)
                peak = proc_rss_kib(d.proc.pid, "VmHWM")
            finally:
                d.stop()
            res[name] = {"base_kib": base, "peak_kib": peak, "after_kib": min(after),
                         "largest_mb": max(sizes) / 1e6}
            log("large jobs, %s: peak %.0f MiB (%.1f x the largest), after %.0f MiB "
                "(base %.0f)" % (name, peak / 1024, peak / 1024 / (max(sizes) / 2 ** 20),
                                 min(after) / 1024, base / 1024))
        self.results["large"] = res

    def identity_of(self, r):
        m = r.smembers(b"cogworker:processes")
        return next(iter(m)).decode() if m else ""

    # -- recovery after SIGKILL

    def recovery(self):
        kills = self.opts.kills
        r = self.fresh()
        stamps = os.path.join(self.tmp, "recovery-stamps")
        settings = dict(concurrency=1, heartbeat_interval=1, process_ttl=3,
                        orphan_threshold=4, orphan_check_interval=1,
                        handlers=[{"class": "Long", "command": [self.ceiling_bin, "--stamp",
                                                                stamps, "120"]}])
        daemons = []
        try:
            a = self.daemon(**settings)
            daemons.append(a)
            a.start(wait=False)
            wait_ready(r, a)
            payload = job("Long")
            jid = json.loads(payload)["jid"]
            r.lpush(b"cogworker:queue:default", payload)
            try:
                wait_for(lambda: len(read_stamps(stamps).get(jid, [])) >= 1, timeout=10,
                         interval=0.01)
            except AssertionError:
                self.results["recovery"] = None
                log("recovery: the job did not start")
                return
            running = a
            times = []
            for k in range(kills):
                b = self.daemon(**settings)
                daemons.append(b)
                b.start(wait=False)
                wait_for(lambda: r.scard(b"cogworker:processes") >= 2, timeout=15,
                         interval=0.02)
                time.sleep(1.5)         # b beats and is idle in BLMOVE
                seen = len(read_stamps(stamps)[jid])
                t_kill = time.time()
                running.proc.kill()
                running.proc.wait()
                try:
                    wait_for(lambda: len(read_stamps(stamps).get(jid, [])) > seen,
                             timeout=40, interval=0.01)
                except AssertionError:
                    if k == 0:
                        self.results["recovery"] = None
                        log("recovery: n/a (the job was not recovered within 40 s)")
                        return
                    break
                times.append(read_stamps(stamps)[jid][seen] - t_kill)
                log("recovery kill %d: %.2f s" % (k + 1, times[-1]))
                running = b
        finally:
            for d in daemons:
                d.kill()
        self.results["recovery"] = {"kills": len(times), "median_s": median(times),
                                    "max_s": max(times), "min_s": min(times), "runs": times}

    # -- report

    def plot(self):
        t = self.results.get("throughput")
        if not t or not shutil.which("gnuplot"):
            return None
        dat = os.path.join(self.out, "throughput.dat")
        with open(dat, "w") as f:
            f.write("# concurrency daemon_jobs_per_s ceiling_spawns_per_s ratio\n")
            for c in CONCURRENCIES:
                runs = t["runs"][str(c)]
                f.write("%d %.1f %.1f %.3f\n" % (
                    c, median([x["daemon"]["rate"] for x in runs]),
                    median([x["ceiling"]["rate"] for x in runs]),
                    median([x["ratio"] for x in runs])))
        png = os.path.join(self.out, "throughput.png")
        m = self.results["machine"]
        script = """
set terminal png size 900,560 noenhanced
set output '%s'
set title "cogworkerd: /bin/true jobs/s vs. the posix_spawn ceiling (%d CPUs, %s)"
set xrange [0.8:20]
set xlabel 'concurrency (fetcher threads / spawning threads)'
set ylabel 'jobs/s, spawns/s'
set y2label 'ratio'
set logscale x 2
set xtics (1, 2, 4, 8, 16)
set yrange [0:*]
set offsets 0, 0, graph 0.25, 0
set y2range [0:1.2]
set y2tics 0.25
set ytics nomirror
set key top left
set grid
plot '%s' using 1:3 with linespoints lw 2 title 'spawn ceiling (posix_spawn + waitpid)', \\
     '%s' using 1:2 with linespoints lw 2 title 'cogworkerd (log_level warn)', \\
     '%s' using 1:4 axes x1y2 with linespoints dt 2 title 'ratio (right axis)', \\
     0.85 axes x1y2 with lines dt 3 lc rgb 'gray' title 'target ratio 0.85'
""" % (png, m["nproc"], m["cpu"].replace("'", ""), dat, dat, dat)
        gp = os.path.join(self.out, "throughput.gp")
        with open(gp, "w") as f:
            f.write(script)
        subprocess.run(["gnuplot", gp], check=False)
        return png if os.path.exists(png) else None

    def report(self):
        m = self.results["machine"]
        m["loadavg_end"] = os.getloadavg()
        L = []
        L.append("# cogworkerd benchmarks\n")
        L.append("Written by `make bench` (tests/bench/bench.py) on %s, in %.0f s.\n" % (
            time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), self.elapsed()))
        L.append("## Machine\n")
        L.append("| | |\n|---|---|")
        L.append("| CPUs (nproc) | %d |" % m["nproc"])
        L.append("| CPU model | %s |" % m["cpu"])
        L.append("| kernel | %s |" % m["kernel"])
        L.append("| OS | %s |" % m["os"])
        L.append("| memory | %s |" % m["memory"])
        L.append("| redis-server | %s (same host, TCP 127.0.0.1, no persistence) |" % m["redis"])
        L.append("| cogworkerd revision | %s |" % m["revision"])
        L.append("| load average at start / end | %s / %s |" % (
            " ".join("%.2f" % x for x in m["loadavg_start"]),
            " ".join("%.2f" % x for x in m["loadavg_end"])))
        L.append("")
        o = self.results.get("output")
        if o:
            L.append("## The cost of keeping output\n")
            L.append("%d jobs at concurrency 4, `log_level = \"warn\"`, median of %d "
                     "interleaved repetitions; `output_keep = 0` keeps nothing, 65536 is the "
                     "default. Cat prints a 4 KiB file (64 lines). CPU in microseconds per "
                     "job.\n" % (o["jobs"], len(next(iter(o["runs"].values())))))
            L.append("| handler | output_keep | jobs/s | daemon CPU/job | redis CPU/job |")
            L.append("|---|---|---|---|---|")
            for key, v in o["runs"].items():
                cls, keep = key.split("/")
                L.append("| %s | %s | %s | %s | %s |" % (
                    "/bin/true" if cls == "True" else "/bin/cat 4 KiB", keep,
                    fmt(median([x["rate"] for x in v])),
                    fmt(median([x["daemon_us"] for x in v])),
                    fmt(median([x["redis_us"] for x in v]))))
            L.append("")
        t = self.results.get("throughput")
        if t:
            L.append("## Throughput: %d `/bin/true` jobs vs. the spawn ceiling\n" % t["jobs"])
            L.append("Median of %d repetitions. The ceiling (tests/bench/spawn_ceiling.c: "
                     "`posix_spawn` + `waitpid` of `/bin/true`, %d spawns shared by as many "
                     "threads as the daemon has fetchers) runs in the same repetition, right "
                     "before and right after the daemon (the mean of the two is the "
                     "repetition's ceiling); the ratio is taken per repetition. Daemon: "
                     "one queue, `log_level = \"warn\"`, Redis over TCP on the same host. "
                     "CPU columns: microseconds of CPU per job (daemon process; its children; "
                     "redis-server) and per spawn for the ceiling (spawner; children).\n"
                     % (t["reps"], t["ceiling_spawns"]))
            L.append("| concurrency | cogworkerd jobs/s | ceiling spawns/s | ratio | "
                     "daemon CPU µs/job | children µs/job | redis µs/job | "
                     "ceiling spawner µs | ceiling children µs | CPU ratio |")
            L.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

            def cpu_ratio(x):
                ce, dm = x["ceiling"], x["daemon"]
                return (ce["self_us"] + ce["children_us"]) / (
                    dm["daemon_us"] + dm["children_us"] + dm["redis_us"])

            def row(label, runs, ceiling=True):
                return ("| %s | %.0f | %.0f | **%.2f** | %.0f | %.0f | %.0f | %s | %s | %.2f |" % (
                    label, median([x["daemon"]["rate"] for x in runs]),
                    median([x["ceiling"]["rate"] for x in runs]),
                    median([x["ratio"] for x in runs]),
                    median([x["daemon"]["daemon_us"] for x in runs]),
                    median([x["daemon"]["children_us"] for x in runs]),
                    median([x["daemon"]["redis_us"] for x in runs]),
                    "%.0f" % median([x["ceiling"]["self_us"] for x in runs]) if ceiling else "",
                    "%.0f" % median([x["ceiling"]["children_us"] for x in runs])
                    if ceiling else "",
                    median([cpu_ratio(x) for x in runs])))
            for c in CONCURRENCIES:
                L.append(row(str(c), t["runs"][str(c)]))
            if t["info_c4"]:
                L.append(row("4, `log_level = \"info\"`", t["info_c4"], ceiling=False))
            sk = t.get("sidekiq") or {}
            for c in SIDEKIQ_CONCURRENCIES:
                runs = sk.get(str(c)) or []
                if runs:
                    L.append(row("%d, Sidekiq" % c, [{"daemon": x["sidekiq"], "ceiling":
                                                     x["ceiling"], "ratio": x["ratio"]}
                                                    for x in runs]))
            L.append("")
            if t.get("no_sidekiq"):
                L.append("Sidekiq: not measured: %s.\n" % t["no_sidekiq"])
            elif any(sk.get(str(c)) for c in SIDEKIQ_CONCURRENCIES):
                L.append("The peer: Sidekiq %s (Debian's ruby-sidekiq, installed by the "
                         "bench), on the same Redis, %d jobs whose `perform` is "
                         "`system('/bin/true')`, `-c` = the concurrency; its CPU columns are "
                         "the Ruby process and its children. cogworkerd / Sidekiq, median of "
                         "the repetitions' ratios: %s.\n" % (
                             sidekiq_version(), t.get("sidekiq_jobs", 0),
                             ", ".join("c=%d **%.1f×**" % (c, median(
                                 [x["ahead"] for x in sk[str(c)]]))
                                       for c in SIDEKIQ_CONCURRENCIES if sk.get(str(c)))))
                L.append("No runner that starts a process per job can be further ahead of "
                         "Sidekiq than the ceiling is: ceiling / Sidekiq, median: %s.\n" % (
                             ", ".join("c=%d %.1f×" % (c, median(
                                 [1 / x["ratio"] for x in sk[str(c)]]))
                                       for c in SIDEKIQ_CONCURRENCIES if sk.get(str(c)))))
            L.append("CPU ratio = the ceiling's CPU per spawn (spawner + child) / the daemon's "
                     "CPU per job (daemon + child + redis-server): the ratio to expect when "
                     "every core is busy (from concurrency %d up on this machine, about). "
                     "The daemon's share is its Redis round trip (one per job: the fetch, with "
                     "the previous job's ack in front) and the pipes, poll loop and process "
                     "group of each child.\n"
                     % self.results["machine"]["nproc"])
            pr = t.get("path_c4") or []
            if pr:
                def med(f):
                    return median([f(x) for x in pr])
                ce_us = med(lambda x: x["ceiling"]["self_us"])
                path_us = med(lambda x: x["path"]["self_us"])
                dm_us = med(lambda x: x["daemon"]["daemon_us"])
                L.append("Where the daemon's CPU per job goes at concurrency 4 (median of %d): "
                         "the ceiling's `posix_spawn` + `waitpid` %.0f µs; the daemon's "
                         "spawn path alone (spawn_ceiling.c built with -DSPAWN_PATH: handler_run, no Redis, "
                         "%.0f runs/s) %.0f µs, so %.0f µs for its pipes, child setup, poll "
                         "loop and group kill; the daemon %.0f µs, so %.0f µs for the rest "
                         "(the Redis round trip, the job's JSON and environment, settlement "
                         "and bookkeeping).\n" % (
                             len(pr), ce_us, med(lambda x: x["path"]["rate"]), path_us,
                             path_us - ce_us, dm_us, dm_us - path_us))
            L.append("Every repetition (jobs/s / ceiling (before, after) = ratio):\n")

            def reps(runs):
                return ", ".join("%.0f / %.0f (%.0f, %.0f) = %.2f" % (
                    x["daemon"]["rate"], x["ceiling"]["rate"], x["ceiling"]["before"],
                    x["ceiling"]["after"], x["ratio"]) for x in runs)
            for c in CONCURRENCIES:
                L.append("- c=%d: %s" % (c, reps(t["runs"][str(c)])))
            if t["info_c4"]:
                L.append("- c=4, info: %s" % reps(t["info_c4"]))
            L.append("\n![throughput](throughput.png)\n")
        self.report_warm(L)
        Peers.report(self.results, L)
        sc = self.results.get("scaling")
        if sc:
            L.append("## Scaling across daemons (one Redis)\n")
            L.append("Jobs of `/bin/sleep 0.05`, each daemon at concurrency 25 (so at most 500 "
                     "jobs/s each), over %.0f s of steady work. Redis CPU and commands include "
                     "everything the daemons send (beats, polls, flushes).\n"
                     % self.opts.scale_seconds)
            L.append("| daemons | jobs/s | at most | redis CPU µs/job | redis, % of a core | "
                     "commands/job | daemon CPU µs/job |")
            L.append("|---:|---:|---:|---:|---:|---:|---:|")
            for k, v in sc.items():
                L.append("| %s | %.0f | %.0f | %.1f | %.1f %% | %.2f | %.0f |" % (
                    k, v["jobs_per_s"], v["ideal_jobs_per_s"], v["redis_us_per_job"],
                    v["redis_core_pct"], v["commands_per_job"], v["daemon_us_per_job"]))
            L.append("")
        rt = self.results.get("round_trips")
        if rt:
            L.append("## Redis round trips per job (success path)\n")
            L.append("| measure | per job |\n|---|---:|")
            L.append("| network round trips (INFO stats `total_reads_processed` delta) | "
                     "%.2f |" % rt["reads_per_job"])
            L.append("| all commands (INFO commandstats delta; script-internal commands "
                     "included) | %.2f |" % rt["all_per_job"])
            L.append("| top-level calls, sent by the daemon (MONITOR sample of %d jobs) | "
                     "%.2f |" % (rt["monitor"]["jobs"], rt["monitor"]["client_per_job"]))
            L.append("| commands run inside scripts (MONITOR `[0 lua]`) | %.2f |" %
                     rt["monitor"]["script_per_job"])
            L.append("")
            L.append("By command (commandstats, %d jobs at concurrency 4; fractions are the "
                     "daemon's background work — heartbeat, poller — spread over the run): %s\n"
                     % (rt["jobs"], ", ".join("%s %.2f" % (k.upper(), v) for k, v in
                                             sorted(rt["commands_per_job"].items(),
                                                    key=lambda kv: -kv[1]))))
            L.append("By command and issuer (MONITOR): %s\n" % ", ".join(
                "%s %.2f" % (k.upper(), v) for k, v in rt["monitor"]["by_command"].items()))
        lat = self.results.get("latency")
        if lat:
            L.append("## Latency: enqueue → handler start (idle daemon, concurrency 10)\n")
            L.append("p50 and p99: median over %d runs; max: over all samples. The handler "
                     "writes its own start time (CLOCK_REALTIME); the push time is taken "
                     "right before the LPUSH.\n" % self.opts.lat_reps)
            L.append("| queues | samples | p50 | p99 | max |\n|---|---:|---:|---:|---:|")
            for k, v in lat.items():
                L.append("| %s | %d | %.2f ms | %.2f ms | %.2f ms |" % (
                    k, v["samples"], v["p50_ms"], v["p99_ms"], v["max_ms"]))
            L.append("")
        s = self.results.get("scheduled")
        if s:
            L.append("## Scheduled and retry lateness (due → on the queue)\n")
            L.append("%d entries per row, written over %.0f s; `poll_interval` %g s (the "
                     "default); \"on the queue\" = the `enqueued_at` the poller stamps when it "
                     "moves the job. Before issue 12 (polls every 5 s): p50 2.45 s, p99 4.95 s."
                     "\n" % (s["jobs"], self.opts.sched_spread, s["poll_interval"]))
            L.append("| entries | p50 | p99 | max |\n|---|---:|---:|---:|")
            for k, label in (("ahead", "schedule, written ≥ poll_interval before due"),
                             ("retry", "retry, written ≥ poll_interval before due"),
                             ("sooner", "schedule, due sooner (0.1–1.9 s after the write; "
                                        "one at a time, %d entries)" % s["sooner"]["n"]),
                             ("sooner_notify", "the same, keyspace notifications on")):
                v = s[k]
                L.append("| %s | %.1f ms | %.1f ms | %.1f ms |" % (
                    label, v["p50_s"] * 1e3, v["p99_s"] * 1e3, v["max_s"] * 1e3))
            L.append("")
        cr = self.results.get("cron")
        if cr:
            L.append("## Cron lateness per slot (`* * * * * *`)\n")
            L.append("Lateness = the job's `created_at` − its `periodic_slot`. Before issue 12: "
                     "one run per 5 s tick, 5 to 9 runs in 20 s with three daemons.\n")
            L.append("| daemons | seconds | slots fired / due | duplicates | p50 | p99 | max |\n"
                     "|---:|---:|---:|---:|---:|---:|---:|")
            for k, v in cr.items():
                L.append("| %s | %.0f | %d / %d | %d | %.1f ms | %.1f ms | %.1f ms |" % (
                    k, v["seconds"], v["slots_fired"], v["slots_expected"], v["duplicates"],
                    v["p50_s"] * 1e3, v["p99_s"] * 1e3, v["max_s"] * 1e3))
            L.append("")
        idle = self.results.get("idle")
        if idle:
            L.append("## Idle cost\n")
            L.append("A %.0f s window (one key check included). Before issue 12: 12 commands/s "
                     "(concurrency 10, one queue) and 102 (25 over five queues).\n"
                     % idle[0]["seconds"])
            L.append("| concurrency | queues | CPU (% of one core) | Redis commands/s | by command |"
                     "\n|---:|---:|---:|---:|---|")
            for v in idle:
                L.append("| %d | %d | %.3f %% | %.2f | %s |" % (
                    v["concurrency"], v["queues"], v["cpu_pct"], v["cmds_per_s"],
                    ", ".join("%s %.2f" % (k.upper(), x) for k, x in sorted(
                        v["by_command"].items(), key=lambda kv: -kv[1]))))
            L.append("")
        pa = self.results.get("pause")
        if pa:
            L.append("## Pause\n")
            L.append("%d rounds on an idle daemon (concurrency 4, one queue): SADD the queue to "
                     "`cogworker:paused_queues` (what `cogworkerctl queues pause` does), push a "
                     "job at once, look 30 ms later, resume. Before issue 12: 2 of 5 such jobs "
                     "started.\n" % pa["rounds"])
            L.append("| started while paused | resume → start p50 | p99 | max |\n"
                     "|---:|---:|---:|---:|")
            L.append("| %d of %d | %.0f ms | %.0f ms | %.0f ms |\n" % (
                pa["started_while_paused"], pa["rounds"], pa["p50_s"] * 1e3, pa["p99_s"] * 1e3,
                pa["max_s"] * 1e3))
        fw = self.results.get("fewer")
        if fw:
            L.append("## Enqueue → start with fewer fetchers than queues\n")
            L.append("Concurrency 1 over two queues, pushes alternating between them, idle in "
                     "between. Before issue 12: p50 about 0.7 s.\n")
            L.append("| server | samples | p50 | p99 | max |\n|---|---:|---:|---:|---:|")
            for k, label in (("plain", "keyspace notifications off"),
                             ("notify", "notify-keyspace-events KEA")):
                v = fw[k]
                L.append("| %s | %d | %.1f ms | %.1f ms | %.1f ms |" % (
                    label, v["n"], v["p50_s"] * 1e3, v["p99_s"] * 1e3, v["max_s"] * 1e3))
            L.append("")
        mem = self.results.get("memory")
        if mem:
            L.append("## Memory (VmRSS of the daemon)\n")
            L.append("Under load: the peak while 2 × concurrency `/bin/sleep 1` jobs run "
                     "(every fetcher has a child).\n")
            L.append("| concurrency | idle | under load | busy fetchers seen |\n"
                     "|---:|---:|---:|---:|")
            for c, v in mem.items():
                L.append("| %s | %.1f MiB | %.1f MiB | %d |" % (
                    c, v["idle_kib"] / 1024, v["load_kib"] / 1024, v["busy_seen"]))
            L.append("")
        big = self.results.get("large")
        if big:
            L.append("## Memory after large jobs (VmRSS and VmHWM of the daemon)\n")
            L.append("Concurrency 6, handler `cat > /dev/null`; after: the lowest RSS within "
                     "10 s once the in-progress list is empty.\n")
            L.append("| jobs | before | peak | after |\n|---|---:|---:|---:|")
            for name, v in big.items():
                L.append("| %s | %.0f MiB | %.0f MiB | %.0f MiB |" % (
                    name, v["base_kib"] / 1024, v["peak_kib"] / 1024, v["after_kib"] / 1024))
            L.append("")
        L.append("## Recovery after SIGKILL\n")
        rec = self.results.get("recovery", "skipped")
        if rec is None:
            L.append("n/a: the killed daemon's job was not recovered.\n")
        elif rec == "skipped":
            L.append("not run.\n")
        else:
            L.append("Two daemons (`heartbeat_interval = 1`, `process_ttl = 3`, "
                     "`orphan_threshold = 4`, `orphan_check_interval = 1`); kill -9 of the "
                     "one running the job → the job's handler starting on the survivor.\n")
            L.append("| kills | median | max | min |\n|---:|---:|---:|---:|")
            L.append("| %d | %.2f s | %.2f s | %.2f s |\n" % (
                rec["kills"], rec["median_s"], rec["max_s"], rec["min_s"]))
        lim = self.results.get("limits")
        if lim:
            L.append("## The cost of a limit that is never reached\n")
            L.append("%d `/bin/true` jobs at concurrency %d, `log_level = \"warn\"`, the "
                     "variants alternating; medians of %d repetitions.\n"
                     % (lim["jobs"], lim["concurrency"], len(lim["runs"]["none"])))
            L.append("| handler limit | jobs/s | vs none | daemon CPU µs/job | redis µs/job | "
                     "every repetition |\n|---|---:|---:|---:|---:|---|")
            base = median([x["rate"] for x in lim["runs"]["none"]])
            for name, _ in self.LIMIT_VARIANTS:
                v = lim["runs"][name]
                rate = median([x["rate"] for x in v])
                L.append("| %s | %.0f | %+.1f %% | %.0f | %.0f | %s |" % (
                    name, rate, (rate / base - 1) * 100,
                    median([x["daemon_us"] for x in v]), median([x["redis_us"] for x in v]),
                    ", ".join("%.0f" % x["rate"] for x in v)))
            L.append("")
        self.report_groups(L)
        tls = self.results.get("tls")
        if tls:
            L.append("## TLS against plain TCP\n")
            L.append("%d `/bin/true` jobs at concurrency %d on one redis-server with a plain "
                     "and a TLS port (client certificates required), the two alternating; "
                     "medians of %d repetitions.\n"
                     % (tls["jobs"], tls["concurrency"], len(tls["runs"]["tcp"])))
            L.append("| transport | jobs/s | daemon CPU µs/job | redis µs/job | every repetition |"
                     "\n|---|---:|---:|---:|---|")
            for name in ("tcp", "tls"):
                v = tls["runs"][name]
                L.append("| %s | %.0f | %.0f | %.0f | %s |" % (
                    name, median([x["rate"] for x in v]), median([x["daemon_us"] for x in v]),
                    median([x["redis_us"] for x in v]), ", ".join("%.0f" % x["rate"] for x in v)))
            ratios = [b["rate"] / a["rate"] for a, b in zip(tls["runs"]["tcp"], tls["runs"]["tls"])]
            L.append("\nTLS / TCP: **%.2f** (median of the repetitions' ratios: %s; target "
                     "≥ 0.9).\n" % (median(ratios), ", ".join("%.2f" % r for r in ratios)))
        self.report_containment(L)
        self.report_confinement(L)
        L.append("## Reproduce\n")
        L.append("`make bench` (the report lands in build/bench/report.md). Raw samples: "
                 "build/bench/results.json.\n")
        with open(os.path.join(self.out, "report.md"), "w") as f:
            f.write("\n".join(L))
        with open(os.path.join(self.out, "results.json"), "w") as f:
            json.dump(self.results, f, indent=1, default=str)

    def report_warm(self, L):
        w = self.results.get("warm")
        if not w:
            return
        L.append("## Warm handlers (issue 22's targets)\n")
        L.append("Each concurrency's repetition runs, on the same Redis: the spawn ceiling "
                 "(before and after), %d cold `/bin/true` jobs, %d jobs of each warm no-op "
                 "(C: tests/bench/warm_noop.c; Ruby: tests/bench/noop_job.rb, `def perform; "
                 "end`), Sidekiq running the same `perform` in-process, and the Python handler "
                 "whose import takes 0.2 s (tests/bench/slow_import.py), cold (%d jobs at "
                 "concurrency 4, in proportion above) and warm (%d). Medians of %d "
                 "repetitions; CPU in µs per job; round trips = Redis's read events "
                 "(`total_reads_processed`), commands from `INFO commandstats`, both less the "
                 "bench's own.\n" % (w["jobs"], w["warm_jobs"], w["slow_cold_jobs"],
                                       w["slow_warm_jobs"],
                                       len(next(iter(w["runs"].values())))))
        L.append("| figure | target | " + " | ".join("c=%s" % c for c in w["runs"]) + " |")
        L.append("|---|---|" + "---:|" * len(w["runs"]))

        def row(label, target, f, spec="%.0f"):
            cells = []
            for runs in w["runs"].values():
                try:
                    cells.append(spec % median([f(x) for x in runs]))
                except (KeyError, ZeroDivisionError, TypeError):
                    cells.append("n/a")
            L.append("| %s | %s | %s |" % (label, target, " | ".join(cells)))
        row("cold `/bin/true`, jobs/s", "", lambda x: x["cold"]["rate"])
        row("spawn ceiling, spawns/s", "", lambda x: x["ceiling"]["rate"])
        row("cold / ceiling", "as before (throughput)",
            lambda x: x["cold"]["rate"] / x["ceiling"]["rate"], "%.2f")
        row("warm C no-op, jobs/s", "", lambda x: x["noop"]["rate"])
        row("… daemon CPU µs/job", "≤ 40", lambda x: x["noop"]["daemon_us"])
        row("… redis-server CPU µs/job", "", lambda x: x["noop"]["redis_us"])
        row("… handler CPU µs/job", "", lambda x: x["noop"]["warm_us"])
        row("… Redis round trips/job", "< 1", lambda x: x["noop"]["reads_per_job"], "%.2f")
        row("… Redis commands/job", "", lambda x: x["noop"]["commands_per_job"], "%.2f")
        row("warm Ruby no-op (cogworkerd), jobs/s", "", lambda x: x["ruby"]["rate"])
        row("Sidekiq %s, the same `perform` in-process, jobs/s" % sidekiq_version(), "",
            lambda x: x["sidekiq"]["rate"])
        row("cogworkerd / Sidekiq", "≥ 3× (5×)",
            lambda x: x["ruby"]["rate"] / x["sidekiq"]["rate"], "%.2f×")
        row("… daemon + Ruby handler CPU µs/job", "",
            lambda x: x["ruby"]["daemon_us"] + x["ruby"]["warm_us"])
        row("… Sidekiq CPU µs/job", "", lambda x: x["sidekiq"]["daemon_us"])
        row("Python, 0.2 s import, cold, jobs/s", "", lambda x: x["slow_cold"]["rate"], "%.1f")
        row("Python, 0.2 s import, warm, jobs/s", "", lambda x: x["slow_warm"]["rate"])
        row("warm / cold", "≥ 50×",
            lambda x: x["slow_warm"]["rate"] / x["slow_cold"]["rate"], "%.0f×")
        L.append("")
        if w.get("no_sidekiq"):
            L.append("Sidekiq: not measured: %s.\n" % w["no_sidekiq"])
        m = w.get("memory")
        if m:
            L.append("RSS of the daemon at concurrency %d with warm C no-ops (target ≤ 12 MiB): "
                     "%.1f MiB before any job, %.1f MiB at the peak while %d jobs ran, %.1f "
                     "MiB after, with %d warm processes.\n" % (
                         m["concurrency"], m["idle_kib"] / 1024, m["peak_kib"] / 1024,
                         m["jobs"], m["after_kib"] / 1024, m["warm_procs"]))
        L.append("Every repetition (jobs/s): " + "; ".join(
            "c=%s: %s" % (c, ", ".join(
                "cold %.0f / ceiling %.0f, C %.0f, Ruby %.0f, Sidekiq %s, Python %.1f → %.0f" % (
                    x["cold"]["rate"], x["ceiling"]["rate"], x["noop"]["rate"],
                    x["ruby"]["rate"], fmt(x.get("sidekiq", {}).get("rate")),
                    x["slow_cold"]["rate"], x["slow_warm"]["rate"]) for x in runs))
            for c, runs in w["runs"].items()) + "\n")

    # -- main

    def run(self):
        self.ensure_binary("spawn_ceiling.c", self.ceiling_bin)
        self.ensure_binary("warm_noop.c", self.warm_noop_bin)
        self.results["machine"] = self.machine()
        log("machine: %(nproc)d CPUs, %(cpu)s, kernel %(kernel)s, redis %(redis)s" %
            self.results["machine"])
        figures = ["throughput", "warm", "output", "round_trips", "scaling", "latency", "scheduled",
                   "cron", "idle", "pause", "fewer", "memory", "large", "recovery", "limits",
                   "groups", "tls", "containment", "peers", "confinement"]
        only = self.opts.only.split(",") if self.opts.only else figures
        self.server = RedisServer()
        try:
            for name in figures:
                if name in only:
                    t = time.monotonic()
                    getattr(self, name)()
                    log("%s done in %.0f s (total %.0f s)" % (name, time.monotonic() - t,
                                                            self.elapsed()))
        finally:
            self.server.stop()
            shutil.rmtree(self.tmp, ignore_errors=True)
        png = self.plot()
        self.report()
        log("report: %s%s" % (os.path.join(self.out, "report.md"),
                              (", plot: " + png) if png else ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"))
    ap.add_argument("--reps", type=int, default=3, help="throughput repetitions (default 3)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: small numbers")
    ap.add_argument("--only", default="", help="comma-separated figures to run")
    ap.add_argument("--budget", type=float, default=1000,
                    help="seconds the whole run should stay under (throughput reps adapt)")
    ap.add_argument("--no-sidekiq", action="store_true",
                    help="leave the peers out (Sidekiq, Celery, RQ from Debian, BullMQ from "
                         "npm; the report says they were not asked for)")
    ap.add_argument("--peer-rows", default="",
                    help="peers: only these rows (comma-separated keys of peers.py ROWS)")
    ap.add_argument("--peer-reps", type=int, default=0, help="peers: repetitions (default 3)")
    opts = ap.parse_args()
    opts.no_peers = opts.no_sidekiq
    opts.peer_reps_asked = opts.peer_reps
    opts.jobs, opts.ceiling_spawns, opts.rt_jobs, opts.monitor_jobs = 20000, 6000, 2000, 200
    opts.output_jobs = 5000
    opts.lat_reps, opts.lat_samples = 3, 100
    opts.sched_jobs, opts.sched_spread = 40, 10.0
    opts.idle_seconds, opts.kills = 60, 3
    opts.cron_seconds, opts.pause_rounds, opts.fewer_samples = 20, 200, 50
    opts.sidekiq_jobs, opts.scale_seconds = 2000, 8.0
    opts.warm_jobs, opts.slow_warm_jobs, opts.slow_cold_jobs, opts.warm_reps = 20000, 10000, 80, 2
    opts.peer_jobs, opts.peer_cold_jobs, opts.peer_reps = 10000, 120, 3
    opts.rest = 1500    # seconds the figures after throughput take, roughly
    if opts.quick:
        opts.jobs, opts.ceiling_spawns, opts.rt_jobs, opts.monitor_jobs = 2000, 600, 500, 50
        opts.output_jobs = 500
        opts.reps, opts.lat_reps, opts.lat_samples = 1, 1, 20
        opts.sched_jobs, opts.sched_spread = 10, 2.0
        opts.idle_seconds, opts.kills = 3, 1
        opts.cron_seconds, opts.pause_rounds, opts.fewer_samples = 5, 20, 10
        opts.sidekiq_jobs, opts.scale_seconds = 500, 3.0
        opts.warm_jobs, opts.slow_warm_jobs, opts.slow_cold_jobs, opts.warm_reps = 2000, 1000, 20, 1
        opts.peer_jobs, opts.peer_cold_jobs, opts.peer_reps = 1000, 40, 1
    if opts.peer_reps_asked:
        opts.peer_reps = opts.peer_reps_asked
    Bench(opts).run()


if __name__ == "__main__":
    main()

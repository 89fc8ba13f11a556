# SPDX-License-Identifier: MIT
"""The bench's `peers` figure (issue 29): each in-process job runner of a language against
cogworkerd running the same empty job warm through our library in that language, in the
same run, on the same Redis, measured the same way:

  Python   Celery (Debian's python3-celery, prefork pool, `python3 -m celery`, Redis broker)
           against a warm handler on handlers/python (tests/bench/noop_job.py)
  Ruby     Sidekiq (Debian's ruby-sidekiq) against a warm handler on handlers/ruby
           (tests/bench/noop_job.rb), and the same library running a cogworker app's own
           worker classes by their name (class "*", tests/bench/app_workers.rb)
  Node.js  BullMQ (npm's bullmq + ioredis, installed under <build>/bench/node, never
           globally; removeOnComplete: true) against a warm handler on handlers/node
           (tests/bench/noop_job.js)
  C        the warm no-op (tests/bench/warm_noop.c): the daemon's own ceiling
  cold     RQ (Debian's python3-rq: a fork per job) against cogworkerd running
           `python3 -c pass` as a cold handler

and, beside each library, a minimal loop in the same language that reads and answers the
same protocol lines (tests/bench/minimal_loop.*): what the protocol itself costs there, so
the library's own share shows.

Each row: the queue filled first (not timed), the runner started with concurrency 4, the
window opened once a tenth of the jobs (at most 200) are taken and closed when the queue's
list is empty (LLEN, polled every 5 ms: never a counter flushed in batches). Over the
window: jobs/s; CPU per job of the whole machine (/proc/stat: user, nice, system, irq,
softirq; not idle, iowait nor steal) and of each process tree of the run (the runner with
every descendant, and redis-server), and their context switches per job (voluntary ones
are sleeps, each ended by a wake-up). The rows of a repetition run one after the other;
the report gives medians over the repetitions.

A peer that cannot be installed is reported as missing, with why; nothing is left out
silently.
"""

import json
import os
import shutil
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"          # Debian's, whose packages the Python peers are
CONC = 4
BULLMQ_PACKAGES = ["bullmq", "ioredis"]


def log(msg):
    print("bench: " + msg, flush=True)


# --------------------------------------------------------------------------------------
# What a window measures

CLK_TCK = os.sysconf("SC_CLK_TCK")


def machine_busy():
    """Seconds of busy CPU of the whole machine so far (every core)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    # user nice system idle iowait irq softirq steal ...
    return (v[0] + v[1] + v[2] + v[5] + v[6]) / CLK_TCK


def all_procs():
    """{pid: (ppid, CPU s of its reaped children)} of every process."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            out[int(d)] = (int(fields[1]), (int(fields[13]) + int(fields[14])) / CLK_TCK)
        except (OSError, ValueError, IndexError):
            continue
    return out


def threads(pid):
    """(CPU s, voluntary, involuntary context switches) of pid's live threads: schedstat's
    nanoseconds, not the stat file's ticks, which sample too coarsely for a window of a
    second or two."""
    cpu = vol = inv = 0
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/schedstat" % (pid, t)) as f:
            cpu += int(f.read().split()[0])
        with open("/proc/%d/task/%s/status" % (pid, t)) as f:
            for line in f:
                if line.startswith("voluntary_ctxt_switches"):
                    vol += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    inv += int(line.split()[1])
    return cpu / 1e9, vol, inv


def tree(procs, roots):
    """The pids of roots and all their descendants."""
    kids = {}
    for pid, p in procs.items():
        kids.setdefault(p[0], []).append(pid)
    seen, todo = set(), [r for r in roots if r in procs]
    while todo:
        pid = todo.pop()
        if pid not in seen:
            seen.add(pid)
            todo += kids.get(pid, [])
    return seen


class Snapshot:
    def __init__(self, groups, solo=None):
        """groups: {name: [root pids]}; solo: a pid whose own CPU is also kept."""
        self.t = time.monotonic()
        self.solo = solo
        self.machine = machine_busy()
        ps = all_procs()
        self.members = {name: tree(ps, roots) for name, roots in groups.items()}
        # pid: (CPU s with its reaped children's, voluntary, involuntary switches, own CPU s)
        self.procs = {}
        for pid in set().union(*self.members.values()):
            try:
                cpu, vol, inv = threads(pid)
            except (OSError, ValueError, IndexError):
                continue
            self.procs[pid] = (cpu + ps[pid][1], vol, inv, cpu)


def window_delta(a, b, jobs):
    """Per job, between two snapshots: the machine's CPU, and each group's CPU and context
    switches (a process that appeared counts from zero; one that ended between them is
    in its parent's reaped-children time when a member waited for it)."""
    res = {"jobs": jobs, "seconds": b.t - a.t, "rate": jobs / (b.t - a.t),
           "machine_us": (b.machine - a.machine) / jobs * 1e6, "groups": {}}
    for name, pids in b.members.items():
        cpu = vol = inv = 0.0
        for pid in pids:
            now = b.procs.get(pid)
            if now is None:
                continue
            was = a.procs.get(pid) if pid in a.members.get(name, ()) else None
            cpu += now[0] - (was[0] if was else 0)
            vol += now[1] - (was[1] if was else 0)
            inv += now[2] - (was[2] if was else 0)
        res["groups"][name] = {"us": cpu / jobs * 1e6, "vol": vol / jobs, "inv": inv / jobs,
                               "procs": len(pids)}
    res["us"] = sum(g["us"] for g in res["groups"].values())
    if b.solo in b.procs and b.solo in a.procs:
        res["daemon_us"] = (b.procs[b.solo][3] - a.procs[b.solo][3]) / jobs * 1e6
    return res


# --------------------------------------------------------------------------------------


class Peers:
    """The figure; bench is the Bench of bench.py (its Redis, its daemons, its options)."""

    def __init__(self, bench):
        self.b = bench
        self.o = bench.opts
        self.tmp = os.path.join(bench.tmp, "peers")
        os.makedirs(self.tmp, exist_ok=True)
        self.node_dir = os.path.join(bench.out, "node")
        self.missing = {}

    # -- installing the peers (never by make run or make check)

    def apt(self, package, probe):
        """Debian's package installed unless probe() already holds; None, or why not."""
        if probe():
            return None
        cmd = ["apt-get", "install", "-y", package]
        if os.geteuid() != 0:
            cmd = ["sudo", "-n"] + cmd
        log("installing a peer: " + " ".join(cmd))
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=900,
                               env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
        except (OSError, subprocess.SubprocessError) as e:
            return "%s could not be installed (%s)" % (package, e)
        if not probe():
            return "%s could not be installed (apt-get: %s)" % (
                package, (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
        return None

    @staticmethod
    def py_has(module):
        return lambda: subprocess.run([PY, "-c", "import " + module],
                                      capture_output=True).returncode == 0

    def npm(self):
        """bullmq and ioredis from the npm registry into <build>/bench/node (never
        globally); None, or why not."""
        mods = os.path.join(self.node_dir, "node_modules")
        if all(os.path.exists(os.path.join(mods, p, "package.json")) for p in BULLMQ_PACKAGES):
            return None
        if not shutil.which("node") or not shutil.which("npm"):
            return "node or npm is not installed (tools/deps.sh test installs nodejs)"
        os.makedirs(self.node_dir, exist_ok=True)
        cmd = ["npm", "install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund",
               "--prefix", self.node_dir] + BULLMQ_PACKAGES
        log("installing a peer: " + " ".join(cmd))
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as e:
            return "npm install bullmq ioredis failed (%s)" % e
        if p.returncode != 0:
            return "npm install bullmq ioredis failed: %s" % (
                (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1])
        return None

    def install(self):
        """Every peer, or why it is missing (self.missing); their versions."""
        why = self.b.ensure_sidekiq()
        if why:
            self.missing["sidekiq"] = why
        if self.o.no_peers:
            for k in ("celery", "bullmq", "rq"):
                self.missing[k] = "not asked for (--no-sidekiq)"
            return
        for key, pkg, mod in (("celery", "python3-celery", "celery"),
                              ("rq", "python3-rq", "rq")):
            why = self.apt(pkg, self.py_has(mod))
            if why:
                self.missing[key] = why
        why = self.npm()
        if why:
            self.missing["bullmq"] = why

    def versions(self):
        def dpkg(pkg):
            try:
                v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg],
                                   capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.SubprocessError):
                return "?"
            return v.split("+")[0].split("-")[0] or "?"

        def npmv(pkg):
            try:
                with open(os.path.join(self.node_dir, "node_modules", pkg, "package.json")) as f:
                    return json.load(f)["version"]
            except (OSError, ValueError, KeyError):
                return "?"

        def cmd(argv):
            try:
                return subprocess.run(argv, capture_output=True, text=True,
                                      timeout=10).stdout.strip()
            except (OSError, subprocess.SubprocessError):
                return "?"
        return {"sidekiq": dpkg("ruby-sidekiq"), "celery": dpkg("python3-celery"),
                "rq": dpkg("python3-rq"), "bullmq": npmv("bullmq"), "ioredis": npmv("ioredis"),
                "python": cmd([PY, "-c", "import sys; print(sys.version.split()[0])"]),
                "ruby": cmd(["ruby", "-e", "print RUBY_VERSION"]),
                "node": cmd(["node", "--version"]).lstrip("v")}

    # -- one row

    def measure(self, r, key, n, groups, alive, timeout=300, solo=None):
        """The window over the drain of list `key` (n jobs pushed): opened once a tenth of
        them (at most 200) are taken, closed when it is empty."""
        lead = max(1, min(200, n // 10))
        deadline = time.monotonic() + timeout
        while r.llen(key) > n - lead:
            if not alive() or time.monotonic() > deadline:
                raise RuntimeError("no job taken from %s" % key.decode())
            time.sleep(0.002)
        groups = dict(groups, redis=[self.b.server.pid])
        k1 = r.llen(key)
        a = Snapshot(groups, solo)
        while True:
            k = r.llen(key)
            if k == 0:
                break
            if not alive() or time.monotonic() > deadline:
                raise RuntimeError("stalled with %d of %d left on %s" % (k, n, key.decode()))
            time.sleep(0.005)
        b = Snapshot(groups, solo)
        return window_delta(a, b, k1)

    def run_process(self, argv, r, key, n, env=None, cwd=None, extra=()):
        """Start argv (and extra processes, counted in its group), measure, stop all."""
        procs = []
        env = dict(os.environ, **(env or {}))
        try:
            for a in [argv] + list(extra):
                procs.append(subprocess.Popen(a, env=env, cwd=cwd or self.tmp,
                                              stdin=subprocess.DEVNULL,
                                              stdout=subprocess.DEVNULL,
                                              stderr=open(os.path.join(self.tmp, "peer.log"),
                                                          "ab")))
            return self.measure(r, key, n, {"runner": [p.pid for p in procs]},
                                lambda: all(p.poll() is None for p in procs))
        finally:
            for p in procs:
                if p.poll() is None:
                    p.terminate()
            for p in procs:
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()

    def ours(self, cls, n, command, star=False):
        """cogworkerd with one handler block (warm unless command is cold)."""
        r = self.b.fresh()
        block = {"class": "*" if star else cls, "command": command[0]}
        block.update(command[1])
        from harness import job  # noqa: E402 (bench.py put the harness on the path)
        key = b"cogworker:queue:default"
        jobs = command[2] if len(command) > 2 else None
        p = r.pipeline(transaction=False)
        for i in range(n):
            p.lpush(key, jobs(i) if jobs else job(cls))
            if i % 1000 == 999:
                p.execute()
        p.execute()
        d = self.b.daemon(concurrency=CONC, handlers=[block])
        d.start(wait=False)
        try:
            return self.measure(r, key, n, {"runner": [d.proc.pid]},
                                lambda: d.proc.poll() is None, solo=d.proc.pid)
        finally:
            d.stop()

    # -- the peers

    def sidekiq(self, n):
        r = self.b.fresh()
        key = b"queue:default"
        p = r.pipeline(transaction=False)
        for i in range(n):
            now = time.time()
            p.lpush(key, json.dumps({"class": "NoopJob", "args": [], "queue": "default",
                                     "jid": os.urandom(12).hex(), "retry": True,
                                     "created_at": now, "enqueued_at": now}))
            if i % 1000 == 999:
                p.execute()
        p.sadd(b"queues", b"default")
        p.execute()
        return self.run_process(["sidekiq", "-r", self.b.sidekiq_job, "-c", str(CONC),
                                 "-q", "default"], r, key, n,
                                env={"REDIS_URL": self.b.server.url})

    CELERY_APP = '''
import os
from celery import Celery
app = Celery("bench_celery", broker=os.environ["BENCH_BROKER"])
app.conf.update(task_ignore_result=True, worker_hijack_root_logger=False,
                worker_send_task_events=False)

@app.task(name="noop")
def noop():
    pass
'''

    def celery(self, n):
        """Celery's own message for one task, pushed n times with fresh ids (kombu's Redis
        transport: a JSON envelope on the list named after the queue)."""
        r = self.b.fresh()
        path = os.path.join(self.tmp, "bench_celery.py")
        with open(path, "w") as f:
            f.write(self.CELERY_APP)
        env = {"BENCH_BROKER": self.b.server.url, "PYTHONPATH": self.tmp, "C_FORCE_ROOT": "1"}
        subprocess.run([PY, "-c", "import bench_celery as b; "
                        "b.app.send_task('noop', queue='bench')"], check=True, cwd=self.tmp,
                       env=dict(os.environ, **env), capture_output=True, timeout=60)
        key = b"bench"
        one = r.rpop(key).decode()
        msg = json.loads(one)
        tid, tag = msg["headers"]["id"], msg["properties"]["delivery_tag"]
        p = r.pipeline(transaction=False)
        for i in range(n):
            p.lpush(key, one.replace(tid, str(uuid.uuid4())).replace(tag, str(uuid.uuid4())))
            if i % 1000 == 999:
                p.execute()
        p.execute()
        return self.run_process([PY, "-m", "celery", "-A", "bench_celery", "worker",
                                 "-P", "prefork", "-c", str(CONC), "-Q", "bench",
                                 "--without-gossip", "--without-mingle", "--without-heartbeat",
                                 "-l", "WARNING"], r, key, n, env=env)

    BULLMQ_FILL = '''
const { Queue } = require("bullmq");
const [port, n] = process.argv.slice(2).map(Number);
(async () => {
  const q = new Queue("bench", { connection: { host: "127.0.0.1", port } });
  for (let done = 0; done < n; done += 1000) {
    const k = Math.min(1000, n - done);
    await q.addBulk(Array.from({ length: k }, () => ({ name: "noop", data: {},
      opts: { removeOnComplete: true, removeOnFail: true } })));
  }
  await q.close();
})().catch((e) => { console.error(e); process.exit(1); });
'''
    BULLMQ_WORKER = '''
const { Worker } = require("bullmq");
const port = Number(process.argv[2]), concurrency = Number(process.argv[3]);
const w = new Worker("bench", async () => {}, { connection: { host: "127.0.0.1", port },
  concurrency });
w.on("error", (e) => console.error(e));
process.on("SIGTERM", () => w.close().then(() => process.exit(0)));
'''

    def bullmq(self, n):
        r = self.b.fresh()
        fill = os.path.join(self.node_dir, "bench_fill.js")
        worker = os.path.join(self.node_dir, "bench_worker.js")
        for path, text in ((fill, self.BULLMQ_FILL), (worker, self.BULLMQ_WORKER)):
            with open(path, "w") as f:
                f.write(text)
        subprocess.run(["node", fill, str(self.b.server.port), str(n)], check=True,
                       capture_output=True, timeout=300)
        return self.run_process(["node", worker, str(self.b.server.port), str(CONC)], r,
                                b"bull:bench:wait", n, cwd=self.node_dir)

    def rq(self, n):
        r = self.b.fresh()
        with open(os.path.join(self.tmp, "bench_rq.py"), "w") as f:
            f.write("def noop():\n    pass\n")
        env = {"PYTHONPATH": self.tmp}
        subprocess.run([PY, "-c", "import sys; from redis import Redis; from rq import Queue; "
                        "q = Queue('bench', connection=Redis(port=int(sys.argv[1]))); "
                        "[q.enqueue('bench_rq.noop') for _ in range(int(sys.argv[2]))]",
                        str(self.b.server.port), str(n)], check=True, cwd=self.tmp,
                       env=dict(os.environ, **env), capture_output=True, timeout=300)
        argv = [PY, "-m", "rq.cli", "worker", "--url", self.b.server.url, "--path", self.tmp,
                "--logging_level", "WARNING", "bench"]
        return self.run_process(argv, r, b"rq:queue:bench", n, env=env,
                                extra=[argv] * (CONC - 1))

    # -- the rows

    def handlers(self):
        """Our side of each row: (class, (command, block settings[, job maker]))."""
        warm = {"warm": True}
        return {
            "ours_py": ("Noop", ([PY, os.path.join(HERE, "noop_job.py")], warm)),
            "min_py": ("Noop", ([PY, os.path.join(HERE, "minimal_loop.py")], warm)),
            "ours_rb": ("NoopJob", ([os.path.join(HERE, "noop_job.rb")], warm)),
            "app_rb": ("NoopWorker", (["ruby", os.path.join(REPO, "handlers", "ruby",
                                                            "cogworker_app.rb"),
                                       os.path.join(HERE, "app_workers.rb")], warm)),
            "min_rb": ("Noop", (["ruby", os.path.join(HERE, "minimal_loop.rb")], warm)),
            "ours_js": ("Noop", (["node", os.path.join(HERE, "noop_job.js")], warm)),
            "min_js": ("Noop", (["node", os.path.join(HERE, "minimal_loop.js")], warm)),
            "ours_c": ("Noop", ([self.b.warm_noop_bin], warm)),
            "ours_cold": ("Pass", ([PY, "-c", "pass"], {})),
        }

    # (row key, language, what it is, peer key or None, warm or cold job count)
    ROWS = (("celery", "Python"), ("ours_py", "Python"), ("min_py", "Python"),
            ("sidekiq", "Ruby"), ("ours_rb", "Ruby"), ("app_rb", "Ruby"), ("min_rb", "Ruby"),
            ("bullmq", "Node.js"), ("ours_js", "Node.js"), ("min_js", "Node.js"),
            ("ours_c", "C"), ("rq", "cold"), ("ours_cold", "cold"))
    COLD = ("rq", "ours_cold")

    def run(self):
        self.install()
        for k, why in self.missing.items():
            log("peers: %s is missing: %s" % (k, why))
        ours = self.handlers()
        runs = {k: [] for k, _ in self.ROWS}
        load = [os.getloadavg()]
        only = [k for k in self.o.peer_rows.split(",") if k]
        for rep in range(self.o.peer_reps):
            for key, _ in self.ROWS:
                if key in self.missing or (only and key not in only):
                    continue
                n = self.o.peer_cold_jobs if key in self.COLD else self.o.peer_jobs
                try:
                    if key in ours:
                        cls, cmd = ours[key]
                        x = self.ours(cls, n, cmd, star=key == "app_rb")
                    else:
                        x = getattr(self, key)(n)
                except (RuntimeError, subprocess.SubprocessError, OSError) as e:
                    log("peers rep %d %s failed: %s" % (rep + 1, key, e))
                    continue
                runs[key].append(x)
                log("peers rep %d %-9s %6.0f jobs/s, CPU µs/job: machine %.0f, %s; "
                    "switches/job runner %.1f+%.1f" % (
                        rep + 1, key, x["rate"], x["machine_us"],
                        ", ".join("%s %.0f" % (g, v["us"]) for g, v in x["groups"].items()),
                        x["groups"]["runner"]["vol"], x["groups"]["runner"]["inv"]))
            load.append(os.getloadavg())
        self.b.results["peers"] = {"runs": runs, "missing": self.missing,
                                   "versions": self.versions(), "jobs": self.o.peer_jobs,
                                   "cold_jobs": self.o.peer_cold_jobs, "concurrency": CONC,
                                   "loadavg": load}

    # -- the report

    @staticmethod
    def med(runs, f):
        from statistics import median
        v = [f(x) for x in runs]
        return median(v) if v else None

    @classmethod
    def report(cls, results, L):
        pr = results.get("peers")
        if not pr:
            return
        runs, v = pr["runs"], pr["versions"]
        m = cls.med

        def rate(k):
            return m(runs.get(k, []), lambda x: x["rate"])

        def cpu(k):
            return m(runs.get(k, []), lambda x: x["us"])

        def mach(k):
            return m(runs.get(k, []), lambda x: x["machine_us"])

        def cell(k):
            if k in pr["missing"]:
                return "missing", "", ""
            if not runs.get(k):
                return "failed", "", ""
            return "%.0f" % rate(k), "%.0f" % cpu(k), "%.0f" % mach(k)
        loads = pr["loadavg"]
        L.append("## Peers: in-process runners against our warm handlers (issue 29)\n")
        L.append("An empty job, concurrency %d, %d jobs per row (%d for the cold rows), "
                 "medians of %d repetitions, every row of a repetition in turn on one Redis. "
                 "The queue is filled first; the window opens once a tenth of the jobs (at "
                 "most 200) are taken and closes when the queue's list is empty. CPU per job "
                 "is the processes of the row (the runner with its descendants, and "
                 "redis-server) over the window, and the whole machine's busy time beside "
                 "it (which counts whatever else ran). Load average over the run: %s.\n" % (
                     pr["concurrency"], pr["jobs"], pr["cold_jobs"],
                     max(len(x) for x in runs.values()) if runs else 0,
                     " → ".join("%.1f" % x[0] for x in loads)))
        L.append("| language | peer, in-process | jobs/s | µs CPU/job (machine) | cogworkerd "
                 "warm + our library | jobs/s | µs CPU/job (machine) | ratio |")
        L.append("|---|---|---:|---:|---|---:|---:|---:|")
        rows = (("Python", "celery", "Celery %s prefork" % v["celery"], "ours_py",
                 "handlers/python"),
                ("Ruby", "sidekiq", "Sidekiq %s" % v["sidekiq"], "ours_rb", "handlers/ruby"),
                ("Ruby", "sidekiq", "Sidekiq %s" % v["sidekiq"], "app_rb",
                 "handlers/ruby, the app's worker classes by name (`class = \"*\"`)"),
                ("Node.js", "bullmq", "BullMQ %s" % v["bullmq"], "ours_js", "handlers/node"),
                ("cold", "rq", "RQ %s (a fork per job)" % v["rq"], "ours_cold",
                 "cogworkerd cold `python3 -c pass`"))
        for lang, pk, pname, ok, oname in rows:
            p, o = cell(pk), cell(ok)
            ratio = ("**%.2f×**" % (rate(ok) / rate(pk))
                     if runs.get(pk) and runs.get(ok) else "n/a")
            L.append("| %s | %s | %s | %s (%s) | %s | %s | %s (%s) | %s |" % (
                lang, pname, p[0], p[1], p[2], oname, o[0], o[1], o[2], ratio))
        c = cell("ours_c")
        L.append("| C | | | | warm no-op (tests/bench/warm_noop.c), the daemon's ceiling | "
                 "%s | %s (%s) | |" % c)
        L.append("")
        for k, why in pr["missing"].items():
            L.append("- %s: **missing**: %s" % (k, why))
        if pr["missing"]:
            L.append("")
        L.append("Where the CPU goes, µs per job by process (medians), and context switches "
                 "per job of the runner's processes (voluntary: a sleep and its wake-up; "
                 "involuntary):\n")
        L.append("| row | jobs/s | runner µs | … of which the daemon | redis-server µs | "
                 "machine µs | switches/job (vol + invol) | every repetition, jobs/s |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---|")
        names = {"celery": "Celery", "sidekiq": "Sidekiq", "bullmq": "BullMQ", "rq": "RQ",
                 "ours_py": "ours, Python library", "min_py": "ours, minimal Python loop",
                 "ours_rb": "ours, Ruby library", "app_rb": "ours, Ruby app by class",
                 "min_rb": "ours, minimal Ruby loop", "ours_js": "ours, Node.js library",
                 "min_js": "ours, minimal Node.js loop", "ours_c": "ours, C no-op",
                 "ours_cold": "ours, cold python3 -c pass"}
        for k, _ in cls.ROWS:
            rr = runs.get(k)
            if not rr:
                continue
            own = m(rr, lambda x: x["daemon_us"]) if "daemon_us" in rr[0] else None
            L.append("| %s | %.0f | %.0f | %s | %.0f | %.0f | %.1f + %.1f | %s |" % (
                names[k], rate(k), m(rr, lambda x: x["groups"]["runner"]["us"]),
                "%.0f" % own if own is not None else "",
                m(rr, lambda x: x["groups"]["redis"]["us"]), mach(k),
                m(rr, lambda x: x["groups"]["runner"]["vol"]),
                m(rr, lambda x: x["groups"]["runner"]["inv"]),
                ", ".join("%.0f" % x["rate"] for x in rr)))
        L.append("")
        L.append("Versions: Python %(python)s, Ruby %(ruby)s, Node.js %(node)s; ioredis "
                 "%(ioredis)s.\n" % v)


if __name__ == "__main__":
    sys.exit("run through tests/bench/bench.py --only peers")

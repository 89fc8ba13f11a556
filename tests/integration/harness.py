# SPDX-License-Identifier: MIT
"""Integration-test harness for cogworkerd: private redis-servers, the Lua scripts as the
build embeds them (<build>/lua/), and small waiting helpers.

Python 3 stdlib + python3-redis (4.x) only. Every test file starts its own redis-server(s)
on a free TCP port and a unix socket in a private temp dir, so files can run in parallel
(tests/integration/run.py).

    class MyTest(RedisTestCase):
        def test_x(self):
            self.r.lpush(b"k", b"v")        # fresh, FLUSHALLed server per test

Environment: COGWORKERD_BUILD = the build directory holding cogworkerd / cogworkerctl
(absolute; set by run.py, default <repo>/build).
"""

import ctypes
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest

import redis

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LUA_DIR = os.path.join(REPO, "lua")
REDIS_SERVER = os.environ.get("REDIS_SERVER", "redis-server")


def build_dir():
    """The build directory (COGWORKERD_BUILD, else <repo>/build), absolute."""
    return os.path.abspath(os.environ.get("COGWORKERD_BUILD") or os.path.join(REPO, "build"))


def sanitizer_build():
    """Whether the binaries are a sanitizer build (build/asan, build/tsan): there a process's
    RSS counts the sanitizer's shadow memory, and ASan's quarantine holds what is freed (its
    peak is the sum of what was allocated), so a bound on memory says nothing of the code."""
    return os.path.basename(build_dir()) in ("asan", "tsan")


def binary(name):
    """Path of a built program, e.g. binary("cogworkerd")."""
    return os.path.join(build_dir(), name)


# --------------------------------------------------------------------------------------
# Waiting


def wait_for(pred, timeout=5, interval=0.05, message=None):
    """Poll pred() every `interval` s until it returns a truthy value, and return that
    value. Raise AssertionError (naming `message`, or pred) after `timeout` seconds.
    Exceptions raised by pred propagate: a broken predicate should fail loudly."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() >= deadline:
            what = message or getattr(pred, "__name__", repr(pred))
            raise AssertionError("timed out after %gs waiting for %s" % (timeout, what))
        time.sleep(interval)


# --------------------------------------------------------------------------------------
# Lua scripts, as the build embeds them


def script_path(name):
    """The expanded text of lua/<name>.lua that the build embeds: tools/embed-lua.sh
    writes it to <build>/lua/<name>.lua beside the C strings, so the tests EVAL exactly
    what the binary runs, and no second expander can drift from the first."""
    return os.path.join(build_dir(), "lua", name + ".lua")


def load_script(name):
    """The text of lua/<name>.lua with its --@include lines expanded, from the build."""
    path = script_path(name)
    if not os.path.exists(path):
        raise FileNotFoundError("%s: not built (make all writes it)" % path)
    with open(path, encoding="utf-8") as f:
        return f.read()


def script_names():
    """Every script name (lua/*.lua, without the lib fragments), sorted."""
    return sorted(f[:-4] for f in os.listdir(LUA_DIR) if f.endswith(".lua"))


# --------------------------------------------------------------------------------------
# A private redis-server


def free_port():
    """A TCP port that was free a moment ago on 127.0.0.1."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _die_with_parent():
    """preexec_fn: the server gets SIGKILL if the test process dies (best-effort)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class RedisServer:
    """A redis-server of our own: 127.0.0.1:<free port> plus a unix socket, in a private
    temp dir, no persistence, DEBUG allowed locally.

        with RedisServer() as srv:
            r = srv.client()
        RedisServer(extra_args=["--rename-command", "TIME", ""])

    password: the server's requirepass (also given to client() and the readiness PING).
    tls: a tlskit.Serving: the TCP port speaks TLS only (the unix socket stays plain), and
    client() connects in TLS.
    """

    def __init__(self, extra_args=(), port=None, start=True, timeout=10, password=None,
                 tls=None):
        self.extra_args = list(extra_args)
        self.port = port
        self.timeout = timeout
        self.password = password
        self.tls = tls
        self.dir = tempfile.mkdtemp(prefix="cw-redis-")
        self.unix_socket = os.path.join(self.dir, "redis.sock")
        self.log_path = os.path.join(self.dir, "redis.log")
        self.proc = None
        self.paused = False
        if start:
            self.start()

    # -- addresses

    @property
    def url(self):
        return "%s://127.0.0.1:%d/0" % ("rediss" if self.tls else "redis", self.port)

    @property
    def unix_url(self):
        return "unix://%s?db=0" % self.unix_socket

    def client(self, unix=False, **kwargs):
        """A redis.Redis with bytes replies (decode_responses=False)."""
        kwargs.setdefault("socket_timeout", 10)
        kwargs.setdefault("password", self.password)
        if self.tls and not unix:
            for k, v in self.tls.client_kwargs().items():
                kwargs.setdefault(k, v)
        if unix:
            return redis.Redis(unix_socket_path=self.unix_socket, decode_responses=False,
                               **kwargs)
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=False,
                           **kwargs)

    # -- life cycle

    def _argv(self):
        auth = ["--requirepass", self.password] if self.password else []
        ports = ["--port", str(self.port)]
        if self.tls:
            ports = ["--port", "0", "--tls-port", str(self.port)] + self.tls.server_args()
        return [REDIS_SERVER] + ports + [
            "--bind", "127.0.0.1",
            "--unixsocket", self.unix_socket, "--unixsocketperm", "700",
            "--dir", self.dir,
            "--save", "", "--appendonly", "no",
            "--enable-debug-command", "local",
            "--daemonize", "no"] + auth + self.extra_args

    def start(self):
        """Start the server (on self.port, or a free port) and wait until PING works.
        A port lost to another process between choosing and binding is retried."""
        fixed_port = self.port is not None
        for _ in range(5):
            if not fixed_port:
                self.port = free_port()
            with open(self.log_path, "ab") as log:
                self.proc = subprocess.Popen(self._argv(), stdin=subprocess.DEVNULL,
                                             stdout=log, stderr=subprocess.STDOUT,
                                             preexec_fn=_die_with_parent)
            if self._wait_ready():
                self.paused = False
                return self
            self._reap()
            if fixed_port:
                break
        raise RuntimeError("redis-server did not start on port %s:\n%s"
                           % (self.port, self.log()))

    def _wait_ready(self):
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                c = self.client(socket_timeout=1)
                try:
                    if c.ping():
                        return True
                finally:
                    c.close()
            except (redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError):
                pass
            time.sleep(0.02)
        return False

    def _reap(self):
        if self.proc is None:
            return
        if self.proc.poll() is None:
            if self.paused:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.paused = False

    def log(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def restart(self):
        """Stop and start again on the same port and socket (the data is lost: no
        persistence)."""
        self._reap()
        try:
            os.unlink(self.unix_socket)
        except FileNotFoundError:
            pass
        return self.start()

    def down(self):
        """Stop the process, keeping its port and dir: restart() brings it back (empty)."""
        self._reap()

    def stop(self):
        """Stop the server and remove its temp dir. Idempotent."""
        self._reap()
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    # -- [DOWN] faults: the process stays, its clients time out; data is kept

    def pause(self):
        self.proc.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self):
        self.proc.send_signal(signal.SIGCONT)
        self.paused = False

    @property
    def pid(self):
        return self.proc.pid if self.proc else None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()

    def __del__(self):
        try:
            self.stop()
        except Exception:
            pass


# --------------------------------------------------------------------------------------
# Test base class


class RedisTestCase(unittest.TestCase):
    """One RedisServer per test class (started in setUpClass, stopped at class cleanup),
    FLUSHALLed before every test. self.r / cls.r is a bytes client.

    redis_args: extra redis-server arguments for the whole class.
    tls: True makes the server's TCP port TLS only, with certificates of a tlskit.PKI
    (cls.pki) and client certificates required; the daemons then use rediss:// and its
    redis.tls settings, and self.r speaks TLS too. test_tls.py runs other files' classes
    so."""

    redis_args = ()
    tls = False

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        serving = None
        if cls.tls:
            from tlskit import PKI
            cls.pki = PKI()
            cls.addClassCleanup(cls.pki.stop)
            serving = cls.pki.serving()
        cls.server = RedisServer(extra_args=cls.redis_args, tls=serving)
        cls.addClassCleanup(cls.server.stop)
        cls.r = cls.server.client()
        cls.addClassCleanup(cls.r.close)

    def setUp(self):
        super().setUp()
        if self.server.paused:
            self.server.resume()
        self.r.flushall()

    # -- scripts

    _script_cache = {}

    def script(self, name):
        """Expanded text of lua/<name>.lua, as built (cached per process)."""
        if name not in self._script_cache:
            self._script_cache[name] = load_script(name)
        return self._script_cache[name]

    def run_script(self, name, keys=(), args=(), client=None):
        """EVAL lua/<name>.lua (expanded) with KEYS and ARGV; returns the raw reply."""
        c = client or self.r
        return c.eval(self.script(name), len(keys), *keys, *args)


# --------------------------------------------------------------------------------------
# The daemon under test

HANDLERS = os.path.join(REPO, "tests", "handlers")


def handler(name, *args):
    """argv of a test handler in tests/handlers (see doc/behaviours.md §0.2)."""
    return [os.path.join(HANDLERS, name)] + [str(a) for a in args]


def conf_value(v):
    """A Python value as libconfig text."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return "%dL" % v if abs(v) > 2**31 - 1 else str(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"%s"' % v.replace("\\", "\\\\").replace('"', '\\"')
    if isinstance(v, (list, tuple)):
        if v and isinstance(v[0], (dict, list, tuple)):
            return "(" + ", ".join(conf_value(x) for x in v) + ")"
        return "[" + ", ".join(conf_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + " ".join("%s = %s;" % (k, conf_value(x)) for k, x in v.items()) + " }"
    raise TypeError(v)


class Daemon:
    """A cogworkerd on a test's redis-server.

        d = Daemon(server, workdir, handlers=[{"class": "Ok", "command": handler("ok")}])
        d.start(); d.identity; d.wait_log("done: Ok"); d.stop()

    Test handlers append their jid to <workdir>/runs and read gates from <workdir>/gates
    (the RUNS and GATES variables are put into every handler's env).

    A daemon must be alive until the test ends it: stop(), kill(), wait_exit(), signal()
    with a stopping signal, or expect_exit() before ending it any other way (os.kill of its
    pid, a fatal error the test provokes). Any other exit, whenever it happened, and a death
    by a crash signal even during an asked-for stop, is reported by death() and fails the
    test at teardown (DaemonTestCase)."""

    STOPPING = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGKILL)
    CRASHES = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE, signal.SIGILL,
               signal.SIGTRAP, signal.SIGSYS)

    def __init__(self, server, workdir, url=None, **settings):
        self.server = server
        self.workdir = workdir
        self.runs = os.path.join(workdir, "runs")
        self.gates = os.path.join(workdir, "gates")
        os.makedirs(self.gates, exist_ok=True)
        self.settings = {"concurrency": 1, "queues": ["default"], "heartbeat_interval": 5,
                         "log_level": "info"}
        self.settings.update(settings)
        self.url = url or server.url
        self.proc = None
        self.identity = None
        self.exit_expected = False
        self.died = None            # how it died before the test asked, once seen
        self.n = len([f for f in os.listdir(workdir) if f.startswith("daemon-")])
        self.conf_path = os.path.join(workdir, "daemon-%d.conf" % self.n)
        self.log_path = os.path.join(workdir, "daemon-%d.log" % self.n)

    def write_conf(self):
        s = dict(self.settings)
        handlers = s.pop("handlers", [])
        for h in handlers:
            env = list(h.get("env", []))
            env += ["RUNS=" + self.runs, "GATES=" + self.gates,
                    "REDIS_PORT=%d" % self.server.port]
            h["env"] = env
        redis_extra = dict(s.pop("redis", {}))     # e.g. {"command_timeout": 1.0}
        if self.server.tls and self.url == self.server.url:
            redis_extra.setdefault("tls", self.server.tls.daemon_conf())
        lines = ['redis = { url = %s; %s};' % (conf_value(self.url), "".join(
            "%s = %s; " % (k, conf_value(v)) for k, v in redis_extra.items()))]
        for k, v in s.items():
            lines.append("%s = %s;" % (k, conf_value(v)))
        if handlers:
            lines.append("handlers = %s;" % conf_value(handlers))
        with open(self.conf_path, "w") as f:
            f.write("\n".join(lines) + "\n")

    def start(self, wait=True, env=None, args=(), wrap=()):
        """wrap: a command the daemon is run under (e.g. setpriv to run it as another user)."""
        self.write_conf()
        e = dict(os.environ)
        e.pop("REDIS_URL", None)
        e.update(env or {})
        self.log_file = open(self.log_path, "ab")
        self.exit_expected = False
        self.proc = subprocess.Popen(list(wrap) + [binary("cogworkerd"), "-c", self.conf_path]
                                     + list(args),
                                     stdin=subprocess.DEVNULL, stdout=self.log_file,
                                     stderr=subprocess.STDOUT, env=e,
                                     preexec_fn=_die_with_parent)
        if wait:
            self.wait_started()
        return self

    def wait_started(self, timeout=10):
        line = self.wait_log("started, identity=", timeout=timeout)
        self.identity = line.split("identity=")[1].split()[0]
        return self.identity

    def log(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_lines(self, needle):
        return [l for l in self.log().splitlines() if needle in l]

    def wait_log(self, needle, timeout=5, count=1):
        def found():
            lines = self.log_lines(needle)
            return lines[count - 1] if len(lines) >= count else None
        try:
            return wait_for(found, timeout=timeout, message="log line %r" % needle)
        except AssertionError:
            raise AssertionError("log line %r not seen in %gs; log:\n%s"
                                 % (needle, timeout, self.log()[-4000:]))

    # -- ending it, and telling an asked-for end from a death

    def expect_exit(self):
        """The test is about to end the daemon itself, or to make it exit: from now on an
        exit is no death (see the class's comment)."""
        self._note_death()
        self.exit_expected = True

    def _note_death(self):
        if self.proc and self.died is None and not self.exit_expected \
                and self.proc.poll() is not None:
            self.died = "exited (status %d) before the test ended it" % self.proc.returncode

    def death(self):
        """None if the daemon is alive or ended as the test asked; else what happened."""
        self._note_death()
        if self.died:
            return self.died
        rc = self.proc.returncode if self.proc else None
        if rc is not None and rc < 0 and -rc in self.CRASHES:
            return "died of %s" % signal.Signals(-rc).name
        return None

    def signal(self, sig):
        if sig in self.STOPPING:
            self.expect_exit()
        self.proc.send_signal(sig)

    def wait_exit(self, timeout=10):
        self.expect_exit()
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError("cogworkerd did not exit within %gs; log:\n%s"
                                 % (timeout, self.log()[-4000:]))

    def stop(self, timeout=40):
        """SIGTERM and wait; returns the exit status."""
        self.expect_exit()
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            status = self.wait_exit(timeout)
        else:
            status = self.proc.returncode if self.proc else None
        self.close()
        return status

    def kill(self):
        self.expect_exit()
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.close()

    def close(self):
        f = getattr(self, "log_file", None)
        if f and not f.closed:
            f.close()

    def runs_of(self, jid):
        try:
            with open(self.runs) as f:
                return sum(1 for l in f if l.strip() == jid)
        except FileNotFoundError:
            return 0

    def open_gate(self, jid, code=0):
        path = os.path.join(self.gates, jid)
        with open(path + ".tmp", "w") as f:
            f.write(str(code))
        os.rename(path + ".tmp", path)


def stop_daemons(daemons):
    """Teardown: kills every daemon still running, then fails if one had died on its own
    (a crash after the test's last assertion is still a failure of that test)."""
    deaths = []
    for d in daemons:
        death = d.death()
        if death:
            deaths.append("cogworkerd %s %s; log:\n%s" % (d.identity or d.log_path, death,
                                                           d.log()[-3000:]))
        d.kill()
    if deaths:
        raise AssertionError("\n\n".join(deaths))


def new_jid():
    return os.urandom(12).hex()


def job(cls, args=(), queue="default", jid=None, retry=None, **extra):
    """A job JSON string the way doc/behaviours.md §0.1 pushes it (compact, like Ruby)."""
    import json
    now = time.time()
    j = {"class": cls, "args": list(args), "queue": queue, "jid": jid or new_jid()}
    if retry is not None:
        j["retry"] = retry
    j["created_at"] = now
    j["enqueued_at"] = now
    j.update(extra)
    return json.dumps(j, separators=(",", ":"), ensure_ascii=False)


class DaemonTestCase(RedisTestCase):
    """A RedisTestCase with a fresh work dir per test and daemons stopped at test end.

        d = self.daemon(handlers=[...], concurrency=2)   # started, identity known
    """

    def setUp(self):
        super().setUp()
        self.workdir = tempfile.mkdtemp(prefix="cw-test-")
        self.addCleanup(shutil.rmtree, self.workdir, True)
        self.daemons = []
        self.addCleanup(self._stop_daemons)

    def _stop_daemons(self):
        stop_daemons(self.daemons)

    def daemon(self, start=True, **settings):
        d = Daemon(self.server, self.workdir, **settings)
        self.daemons.append(d)
        if start:
            d.start()
        return d

    def push(self, payload, queue="default"):
        if isinstance(payload, str):
            payload = payload.encode()
        self.r.lpush(b"cogworker:queue:" + queue.encode(), payload)
        return payload

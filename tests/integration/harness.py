"""Integration-test harness for cogworkerd: private redis-servers, the Lua scripts as the
build embeds them, and small waiting helpers.

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
# Lua scripts, expanded exactly as tools/embed-lua.sh does


def _awk_lines(text):
    """Split like awk's default record separator: on "\\n" only; a final newline does not
    start another record."""
    if text == "":
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


def expand_includes(text, lib_dir=os.path.join(LUA_DIR, "lib")):
    """Replace every line starting with "--@include " by the lines of lib/<NAME>.lua,
    where NAME is the second whitespace-separated field (awk's $2). Every line comes out
    terminated by "\\n", as in the generated C strings. Unlike the awk script, a missing
    fragment is an error here (the build would silently embed nothing)."""
    out = []
    for line in _awk_lines(text):
        if line.startswith("--@include "):
            fields = line.split()
            path = os.path.join(lib_dir, (fields[1] if len(fields) > 1 else "") + ".lua")
            with open(path, encoding="utf-8") as f:
                out.extend(_awk_lines(f.read()))
        else:
            out.append(line)
    return "".join(line + "\n" for line in out)


def load_script(name):
    """The text of lua/<name>.lua with its --@include lines expanded."""
    with open(os.path.join(LUA_DIR, name + ".lua"), encoding="utf-8") as f:
        return expand_includes(f.read())


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
    """

    def __init__(self, extra_args=(), port=None, start=True, timeout=10):
        self.extra_args = list(extra_args)
        self.port = port
        self.timeout = timeout
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
        return "redis://127.0.0.1:%d/0" % self.port

    @property
    def unix_url(self):
        return "unix://%s?db=0" % self.unix_socket

    def client(self, unix=False, **kwargs):
        """A redis.Redis with bytes replies (decode_responses=False)."""
        kwargs.setdefault("socket_timeout", 10)
        if unix:
            return redis.Redis(unix_socket_path=self.unix_socket, decode_responses=False,
                               **kwargs)
        return redis.Redis(host="127.0.0.1", port=self.port, decode_responses=False,
                           **kwargs)

    # -- life cycle

    def _argv(self):
        return [REDIS_SERVER,
                "--port", str(self.port), "--bind", "127.0.0.1",
                "--unixsocket", self.unix_socket, "--unixsocketperm", "700",
                "--dir", self.dir,
                "--save", "", "--appendonly", "no",
                "--enable-debug-command", "local",
                "--daemonize", "no"] + self.extra_args

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
                c = redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)
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

    redis_args: extra redis-server arguments for the whole class."""

    redis_args = ()

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = RedisServer(extra_args=cls.redis_args)
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
        """Expanded text of lua/<name>.lua (cached per process)."""
        if name not in self._script_cache:
            self._script_cache[name] = load_script(name)
        return self._script_cache[name]

    def run_script(self, name, keys=(), args=(), client=None):
        """EVAL lua/<name>.lua (expanded) with KEYS and ARGV; returns the raw reply."""
        c = client or self.r
        return c.eval(self.script(name), len(keys), *keys, *args)

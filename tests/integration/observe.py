# SPDX-License-Identifier: MIT
"""Observation helpers for the integration tests, beside harness.py: a MONITOR recorder
([MON]), process-table look-ups (which handler children are alive), and a daemon whose
output goes through a pipe (RE-6).

    mon = Monitor(server).start()
    ...
    mon.stop()
    mon.commands("BLMOVE", client=d)      # [(ts, client, [b"BLMOVE", ...]), ...]

    procs_with_env("COGWORKER_JID", jid)  # pids of a job's handler and its descendants

Stdlib + python3-redis only, like harness.py.
"""

import os
import signal
import socket
import subprocess
import threading
import time

from harness import Daemon, _die_with_parent, binary, wait_for

# --------------------------------------------------------------------------------------
# [MON]

_ESCAPES = {ord("n"): b"\n", ord("r"): b"\r", ord("t"): b"\t", ord("a"): b"\a",
            ord("b"): b"\b", ord('"'): b'"', ord("\\"): b"\\"}


def parse_monitor_line(line):
    """`1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"` → (ts, client, [args]).
    client is "127.0.0.1:5555", "lua" or "unix:/path". Arguments are unescaped the way
    Redis escapes them (sdscatrepr). None for a line that is not a command."""
    if line.startswith(b"+"):
        line = line[1:]
    try:
        ts_end = line.index(b" ")
        ts = float(line[:ts_end])
        br_end = line.index(b"]", ts_end)
    except ValueError:
        return None
    inside = line[ts_end + 2:br_end].split(b" ", 1)
    client = inside[1].decode("utf-8", "replace") if len(inside) > 1 else ""
    rest = line[br_end + 1:]
    args, i, n = [], 0, len(rest)
    while i < n:
        if rest[i:i + 1] != b'"':
            i += 1
            continue
        i += 1
        cur = bytearray()
        while i < n and rest[i] != ord('"'):
            c = rest[i]
            if c == ord("\\") and i + 1 < n:
                e = rest[i + 1]
                if e == ord("x") and i + 3 < n:
                    cur += bytes([int(rest[i + 2:i + 4], 16)])
                    i += 4
                    continue
                cur += _ESCAPES.get(e, bytes([e]))
                i += 2
                continue
            cur.append(c)
            i += 1
        i += 1
        args.append(bytes(cur))
    if not args:
        return None
    return ts, client, args


class Monitor:
    """Runs MONITOR on its own connection in a thread and keeps every command with the
    server's timestamp. Commands run inside scripts have client "lua".

    entries(): everything so far; commands(name, client=None): those named `name`
    (case-insensitive), optionally only from the daemon `client` (a Daemon: its
    connections are recognised by CLIENT LIST's port numbers, looked up when asked)."""

    def __init__(self, server):
        self.server = server
        self._entries = []
        self._lock = threading.Lock()
        self._sock = None
        self._thread = None
        self._stop = False

    def start(self):
        if getattr(self.server, "tls", None):       # its unix socket stays plain
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(self.server.unix_socket)
        else:
            s = socket.create_connection(("127.0.0.1", self.server.port), timeout=5)
        s.sendall(b"MONITOR\r\n")
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(4096)
            if not chunk:
                raise RuntimeError("MONITOR connection closed")
            buf += chunk
        first, buf = buf.split(b"\r\n", 1)
        if first != b"+OK":
            raise RuntimeError("MONITOR refused: %r" % first)
        s.settimeout(0.2)
        self._sock = s
        self._thread = threading.Thread(target=self._run, args=(buf,), daemon=True)
        self._thread.start()
        return self

    def _run(self, buf):
        while not self._stop:
            while b"\r\n" in buf:
                line, buf = buf.split(b"\r\n", 1)
                e = parse_monitor_line(line)
                if e:
                    with self._lock:
                        self._entries.append(e)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                break
            if not chunk:
                break
            buf += chunk

    def stop(self):
        self._stop = True
        if self._thread:
            self._thread.join(5)
        if self._sock:
            self._sock.close()
            self._sock = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def entries(self):
        with self._lock:
            return list(self._entries)

    def commands(self, name=None, clients=None):
        """Entries whose command is `name` (any when None), from `clients` (a set of
        "host:port" strings, or None for all)."""
        out = []
        for e in self.entries():
            if name is not None and e[2][0].upper() != name.upper().encode():
                continue
            if clients is not None and e[1] not in clients:
                continue
            out.append(e)
        return out

    def wait_command(self, pred, timeout=5, message=None):
        """Wait for an entry e with pred(e) true; returns it."""
        def found():
            for e in self.entries():
                if pred(e):
                    return e
            return None
        return wait_for(found, timeout=timeout, message=message or "a MONITOR entry")


def client_addrs(r, name=None):
    """'host:port' of the connections CLIENT LIST shows (those with client name `name`
    when given), minus MONITOR connections."""
    out = set()
    for c in r.client_list():
        if "O" in c.get("flags", "") or c.get("cmd") == "monitor":
            continue
        if name is not None and c.get("name") != name:
            continue
        out.add(c["addr"])
    return out


# --------------------------------------------------------------------------------------
# The process table


def _proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
    except OSError:
        return None
    # "pid (comm) S ppid pgrp ..."; comm may contain spaces and parentheses
    rest = data[data.rindex(b")") + 2:].split()
    return rest


def pid_alive(pid):
    """True while pid exists and is not a zombie."""
    st = _proc_state(pid)
    return st is not None and st[0] not in (b"Z", b"X")


def ppid_of(pid):
    st = _proc_state(pid)
    return int(st[1]) if st else None


def all_pids():
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def descendants(pid):
    """Every live descendant of pid (children, grandchildren, ...)."""
    children = {}
    for p in all_pids():
        pp = ppid_of(p)
        if pp is not None and pid_alive(p):
            children.setdefault(pp, []).append(p)
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def procs_with_env(name, value):
    """Live processes whose environment holds name=value: a handler started for a jid
    (COGWORKER_JID) and every descendant it spawned, even after they were re-parented."""
    needle = ("%s=%s" % (name, value)).encode()
    out = []
    for p in all_pids():
        try:
            with open("/proc/%d/environ" % p, "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if needle in env and pid_alive(p):
            out.append(p)
    return out


def rss_kb(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


# --------------------------------------------------------------------------------------
# A daemon whose stdout and stderr are a pipe (journald-like, RE-6)


class PipedDaemon(Daemon):
    """A Daemon whose stdout+stderr are one pipe; a thread copies what comes through the
    pipe into the usual log file, so wait_log and log() see exactly what the pipe
    carried."""

    def start(self, wait=True, env=None, args=()):
        self.write_conf()
        e = dict(os.environ)
        e.pop("REDIS_URL", None)
        e.update(env or {})
        self.log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen([binary("cogworkerd"), "-c", self.conf_path] + list(args),
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=e,
                                     preexec_fn=_die_with_parent)
        self._copier = threading.Thread(target=self._copy, daemon=True)
        self._copier.start()
        if wait:
            self.wait_started()
        return self

    def _copy(self):
        fd = self.proc.stdout.fileno()
        while True:
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            self.log_file.write(chunk)
            self.log_file.flush()

    def wait_exit(self, timeout=10):
        status = super().wait_exit(timeout)
        self._copier.join(5)
        return status

    def close(self):
        t = getattr(self, "_copier", None)
        if t:
            t.join(5)
        super().close()


def send_signal(pid, sig=signal.SIGTERM):
    try:
        os.kill(pid, sig)
        return True
    except ProcessLookupError:
        return False


def sleep_until(pred, timeout, interval=0.05):
    """Like wait_for but returns False instead of raising."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(interval)
    return bool(pred())


# --------------------------------------------------------------------------------------
# [DOWN] through a TCP proxy: bytes in flight vanish, as on a cut network (unlike
# SIGSTOP, where the kernel buffers a request and the stopped server runs it later)


class TcpProxy:
    """127.0.0.1:<self.port> → 127.0.0.1:<target_port>, one thread.

        p = TcpProxy(server.port); url = p.url
        p.blackhole()   # connections stay open, every byte either way is dropped, new
                        # connections are accepted and go nowhere: clients time out
        p.restore()     # connections touched by the blackhole are closed; forwarding again
        p.rewrite_replies(b"redis_version:7.0.15", b"redis_version:6.0.15")
                        # what the server sends is edited on the way (an older server)
        p.lose_reply_to(b"needle")
                        # the first client chunk holding the needle goes through, and the
                        # connection is cut when the server answers it: the command ran,
                        # its reply is lost (once per call; calls add needles)
        p.delay_on(b"needle", 2)
                        # the first client chunk holding the needle, and what follows it on
                        # its connection, goes to the server 2 s late: a client stalled
                        # between two commands (once per call)
        p.hold_replies(); p.held_replies(); p.release_replies()
                        # what the server sends waits in the proxy (held_replies: what is
                        # held), then goes on at once, one send per connection: replies that
                        # were apart arrive together
        p.accepted     # connections accepted so far
        p.close()
    """

    def __init__(self, target_port):
        import selectors
        self.target_port = target_port
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.port = self.listener.getsockname()[1]
        self.sel = selectors.DefaultSelector()
        self.sel.register(self.listener, selectors.EVENT_READ, None)
        self.peer = {}            # socket -> its other end (None while blackholed)
        self.tainted = set()      # sockets that lost bytes to the blackhole
        self.holed = False
        self.trigger = None
        self.rewrite = None
        self.held = None          # socket -> bytes of the server's, while replies are held
        self.lose = []            # needles of lose_reply_to, not met yet
        self.cut = set()          # server sockets whose next reply is lost, then cut
        self.delays = []          # (needle, seconds) of delay_on, not met yet
        self.delayed = {}         # client socket -> [when to send, bytes held]
        self.accepted = 0
        self._lock = threading.Lock()
        self._stop = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    @property
    def url(self):
        return "redis://127.0.0.1:%d/0" % self.port

    def blackhole(self):
        with self._lock:
            self.holed = True

    def blackhole_on(self, needle):
        """Blackhole from the first client chunk holding `needle` (bytes) on, that chunk
        included: a cut that hits exactly one kind of command."""
        with self._lock:
            self.trigger = needle

    def rewrite_replies(self, old, new):
        """Replace the bytes `old` by `new` in everything the server sends. Same length
        only, so that RESP bulk lengths stay right; a match split across two reads is not
        seen, which is fine for what this is for (a field of an INFO reply)."""
        if len(old) != len(new):
            raise ValueError("rewrite_replies: %r and %r differ in length" % (old, new))
        with self._lock:
            self.rewrite = (old, new)

    def lose_reply_to(self, needle):
        with self._lock:
            self.lose.append(needle)

    def delay_on(self, needle, seconds):
        with self._lock:
            self.delays.append((needle, seconds))

    def _send_delayed(self):
        now = time.monotonic()
        for s, (when, data) in list(self.delayed.items()):
            if when <= now:
                del self.delayed[s]
                other = self.peer.get(s)
                try:
                    if other is not None:
                        other.sendall(data)
                except OSError:
                    self._close(s)

    def hold_replies(self):
        with self._lock:
            self.held = {}

    def held_replies(self):
        """What is held, per connection (a copy)."""
        with self._lock:
            return list((self.held or {}).values())

    def release_replies(self):
        with self._lock:
            held, self.held = self.held or {}, None
            for other, data in held.items():
                try:
                    other.sendall(data)
                except OSError:
                    self._close(other)

    def restore(self):
        with self._lock:
            self.holed = False
            for s in list(self.tainted):
                self._close(s)
            self.tainted.clear()

    def close(self):
        self._stop = True
        self._thread.join(5)
        with self._lock:
            for s in list(self.peer):
                self._close(s)
        self.listener.close()

    def _is_client(self, s):
        try:
            return s.getsockname()[1] == self.port
        except OSError:
            return False

    def _close(self, s):
        import selectors  # noqa: F401
        other = self.peer.pop(s, None)
        for x in (s, other):
            if x is None:
                continue
            try:
                self.sel.unregister(x)
            except (KeyError, ValueError):
                pass
            x.close()
            self.peer.pop(x, None)
            self.tainted.discard(x)

    def _run(self):
        import selectors
        while not self._stop:
            with self._lock:
                self._send_delayed()
            for key, _ in self.sel.select(0.02 if self.delayed else 0.1):
                with self._lock:
                    s = key.fileobj
                    if s is self.listener:
                        try:
                            c, _ = self.listener.accept()
                        except OSError:
                            continue
                        self.accepted += 1
                        if self.holed:
                            self.peer[c] = None
                            self.tainted.add(c)
                            self.sel.register(c, selectors.EVENT_READ, None)
                            continue
                        try:
                            u = socket.create_connection(("127.0.0.1", self.target_port), 2)
                        except OSError:
                            c.close()
                            continue
                        self.peer[c], self.peer[u] = u, c
                        self.sel.register(c, selectors.EVENT_READ, None)
                        self.sel.register(u, selectors.EVENT_READ, None)
                        continue
                    if s not in self.peer:
                        continue
                    try:
                        data = s.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        self._close(s)
                        continue
                    other = self.peer.get(s)
                    if self.trigger is not None and self.trigger in data and \
                            s in self.peer and other is not None and \
                            self.peer.get(other) is s and self._is_client(s):
                        self.holed = True
                        self.trigger = None
                    if self.holed or other is None:
                        self.tainted.add(s)
                        if other is not None:
                            self.tainted.add(other)
                        continue
                    if s in self.cut:
                        self.cut.discard(s)
                        self._close(s)
                        continue
                    hit = [x for x in self.lose if x in data] if self._is_client(s) else []
                    if hit and other is not None:
                        self.lose.remove(hit[0])
                        self.cut.add(other)
                    if self.rewrite is not None and not self._is_client(s):
                        data = data.replace(*self.rewrite)
                    if self.held is not None and not self._is_client(s):
                        self.held[other] = self.held.get(other, b"") + data
                        continue
                    if s in self.delayed:
                        self.delayed[s][1] += data
                        continue
                    late = [d for d in self.delays if d[0] in data] \
                        if self._is_client(s) else []
                    if late:
                        self.delays.remove(late[0])
                        self.delayed[s] = [time.monotonic() + late[0][1], data]
                        continue
                    try:
                        other.sendall(data)
                    except OSError:
                        self._close(s)

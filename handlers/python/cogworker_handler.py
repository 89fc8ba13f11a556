# SPDX-License-Identifier: MIT
"""cogworker_handler: run a Python function per job as a cogworkerd warm handler.

A warm handler is one process that runs many jobs, one at a time, so what it loads at start
(the interpreter, a framework, a model) is loaded once instead of once per job. cogworkerd
starts it for a handler block with `warm = true;` and speaks protocol version 1 with it on
fd 3 (doc/protocol.md §1.2, handlers/README.md). This module speaks that protocol; your
script only says what to load and what to do per job:

    import cogworker_handler as cw
    import myapp                        # the warm-up: runs once, before the first job

    def perform(job):
        user_id, = job.args             # the job's args exactly as pushed (big ints intact)
        cw.progress(40, "halfway")      # shows in `cogworkerctl jobs show` and status
        myapp.send_mail(user_id)        # an exception: exit 1, its message the job's error

    cw.run(perform)                     # never returns

Python 3, standard library only (tested with Debian 12's python3). Per job, in the main
thread:

- `perform(job)` is called with a `Job`: `job.args`, `job.jid`, `job.class_name`,
  `job.queue`, `job.retry_count`, `job.payload` (the whole job object), `job.deadline`
  (epoch seconds by which the daemon cancels the job, or None) and `job.cancelled`.
- Returning is success (exit 0). An exception is exit 1: its traceback goes to stderr (the
  job's output) and "Class: message [at file:line in function, ...]" becomes the job's
  error message. `sys.exit(n)` ends the job with exit status n, as it would end a cold
  handler (dead_exit_codes and discard_exit_codes apply), and the process stays.
- stdout and stderr are flushed before the job is reported done, so everything the job
  printed is attributed to it.
- `progress(pct, message=None)`: pct a number from 0 to 100. Outside a job it does nothing.
- `recycle()`: ask to be replaced by a fresh process after this job (a leak, a config
  change); the process keeps running until the daemon retires it.
- Cancel (`cogworkerctl jobs cancel`, or the job's timeout): `job.cancelled` turns true and
  `Cancelled` is raised in the job, interrupting a blocking call such as `time.sleep` or a
  socket read: while a job runs the channel raises SIGIO when the daemon writes to it, and
  the handler of that signal, which Python runs in the main thread, reads the cancel. So
  the library owns SIGIO, and SIGINT too: a SIGINT during a job cancels it, outside one it
  is ignored. No thread of the library's runs beside the job. `Cancelled` derives from
  BaseException, so `except Exception` does not swallow it; catch it, or use `finally`, to
  clean up. Code in C that does not return to Python meanwhile is not interrupted: the
  daemon kills the process group `kill_grace` seconds after the cancel. A cancelled
  process is replaced after its job in any case, so state the exception left half-changed
  does not outlive it.
- When the daemon closes fd 3 the process exits with status 0 (atexit handlers run); a job
  running at that moment is cancelled first.

Run without the daemon (COGWORKER_PROTOCOL is not "1"), `run` says so and exits with 2.
"""

import fcntl
import json
import math
import os
import signal
import socket
import sys
import threading
import traceback

PROTOCOL = "1"
# What the daemon reads of one line from us is 1 MiB; messages and errors are cut well
# below it (a character is at most 6 bytes as a JSON escape).
_TEXT_MAX = 100000
_SIGNALS = {signal.SIGIO, signal.SIGINT}

__all__ = ["run", "progress", "recycle", "Cancelled", "Job", "current_job"]


class Cancelled(BaseException):
    """Raised in the job when cogworkerd cancels it (a cancel request or its timeout)."""


class Job:
    """One job as the daemon sent it. `payload` is the job object as pushed."""

    def __init__(self, payload, deadline):
        self.payload = payload
        self.deadline = deadline
        self._cancelled = False
        self._raised = False

    def _get(self, key, default=None):
        if isinstance(self.payload, dict):
            return self.payload.get(key, default)
        return default

    @property
    def args(self):
        return self._get("args", [])

    @property
    def jid(self):
        return self._get("jid")

    @property
    def class_name(self):
        return self._get("class")

    @property
    def queue(self):
        return self._get("queue")

    @property
    def retry_count(self):
        """Failures recorded so far, 0 on the first run (what COGWORKER_RETRY_COUNT says
        to a cold handler)."""
        n = self._get("retry_count")
        try:
            n = int(n) if isinstance(n, (int, str)) and not isinstance(n, bool) else 0
        except ValueError:
            n = 0
        return max(n, 0)

    @property
    def cancelled(self):
        return self._cancelled

    def check_cancelled(self):
        """Raise Cancelled if the job was cancelled (for code that catches it broadly)."""
        if self._cancelled:
            raise Cancelled("cancelled by cogworkerd")


_sock = None
_send_lock = threading.Lock()         # a job's own threads may report progress too
_current = None                       # the Job running now: set and read in the main thread
_recycle = False
_main_ident = None
_pending = bytearray()                # read from the channel, not yet a whole line used
_eof = False
_flags = 0                            # the channel's file status flags, without O_ASYNC


def current_job():
    """The Job running now, or None."""
    return _current


def _refuse(message):
    sys.stderr.write("cogworker_handler: %s\n" % message)
    sys.stderr.flush()
    sys.exit(2)


def _open_channel():
    version = os.environ.get("COGWORKER_PROTOCOL")
    if version is None:
        _refuse("COGWORKER_PROTOCOL is not set: this program is a warm handler, to be run by "
                "cogworkerd from a handler block with `warm = true;` (it takes its jobs on "
                "fd 3, not on stdin)")
    if version != PROTOCOL:
        _refuse("COGWORKER_PROTOCOL is %r: this library speaks version %s of the warm "
                "protocol; use the library that comes with this cogworkerd"
                % (version, PROTOCOL))
    try:
        sock = socket.socket(fileno=3)
        if sock.type != socket.SOCK_STREAM:
            raise OSError("not a stream socket")
    except OSError as e:
        _refuse("fd 3 is not the socket to cogworkerd (%s): is this run by cogworkerd?" % e)
    # A program the job starts must not inherit the channel: it could write to it, or keep
    # it open after we are gone.
    os.set_inheritable(3, False)
    return sock


def _send(msg):
    line = (json.dumps(msg, separators=(",", ":")) + "\n").encode()
    with _send_lock:
        _sock.sendall(line)


def _send_blocking_cancel(msg):
    """_send from the main thread with SIGIO and SIGINT held back, so a cancel cannot cut
    a line."""
    if threading.get_ident() != _main_ident:
        return _send(msg)
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        _send(msg)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _text(s):
    """s as a string that survives JSON and UTF-8 (no lone surrogates), cut to size."""
    s = str(s)[:_TEXT_MAX]
    return s.encode("utf-8", "replace").decode("utf-8")


def progress(pct, message=None):
    """Report the running job's progress: pct from 0 to 100, an optional message."""
    if isinstance(pct, bool) or not isinstance(pct, (int, float)) or \
            not math.isfinite(pct) or not 0 <= pct <= 100:
        raise ValueError("progress: pct must be a number from 0 to 100, not %r" % (pct,))
    if _current is None:
        return
    msg = {"type": "progress", "pct": pct}
    if message is not None:
        msg["message"] = _text(message)
    _send_blocking_cancel(msg)


def recycle():
    """Ask cogworkerd to replace this process after the current (or next) job."""
    global _recycle
    _recycle = True


def _cancel(job):
    """From the main thread (where Python runs signal handlers): raise Cancelled in the
    job, once."""
    if job is None or job._raised:
        return
    job._cancelled = True
    job._raised = True
    raise Cancelled("cancelled by cogworkerd")


def _on_sigint(signum, frame):
    _cancel(_current)


def _on_sigio(signum=None, frame=None):
    """SIGIO's handler, and the look at the start of each job: read what the daemon
    wrote while the job runs; a cancel, or the EOF of a retirement, cancels the job."""
    global _eof
    job = _current
    if job is None:
        return                      # between jobs the main loop reads the channel
    try:
        while True:
            data = _sock.recv(65536, socket.MSG_DONTWAIT)
            if not data:
                _eof = True
                break
            _pending.extend(data)
    except (BlockingIOError, InterruptedError):
        pass
    except OSError:
        _eof = True
    cancel = _eof
    keep = bytearray()
    while True:
        nl = _pending.find(b"\n")
        if nl < 0:
            break
        line = bytes(_pending[:nl + 1])
        del _pending[:nl + 1]
        msg = _parse(line)
        kind = msg.get("type") if isinstance(msg, dict) else None
        cancel = cancel or kind == "cancel"
        if kind == "job":
            keep += line            # sent only after our done; left for the main loop
    _pending[:0] = keep
    if cancel:
        _cancel(job)


def _parse(line):
    """A line from the daemon that is not JSON means the two ends disagree: stop here, and
    say why, rather than leave the daemon waiting for a `done`."""
    try:
        return json.loads(line)
    except (ValueError, RecursionError) as e:
        sys.stderr.write("cogworker_handler: cannot read a message from cogworkerd: %s\n"
                         % str(e)[:200])
        sys.stderr.flush()
        os._exit(1)


def _arm(job):
    """The channel raises SIGIO while a job runs (O_ASYNC), and only then, so a job costs
    no signal; what came before is looked at once."""
    global _current
    _current = job
    fcntl.fcntl(_sock.fileno(), fcntl.F_SETFL, _flags | os.O_ASYNC)
    _on_sigio()


def _disarm():
    global _current
    _current = None
    fcntl.fcntl(_sock.fileno(), fcntl.F_SETFL, _flags)


def _next_line():
    """The next line from the daemon (bytes), or None at EOF."""
    global _eof
    while True:
        nl = _pending.find(b"\n")
        if nl >= 0:
            line = bytes(_pending[:nl + 1])
            del _pending[:nl + 1]
            return line
        if _eof:
            return None
        data = _sock.recv(65536)
        if not data:
            _eof = True
            return None
        _pending.extend(data)


def _describe(e):
    """Class: message [at file:line in function, ...], innermost frame first."""
    head = "".join(traceback.format_exception_only(type(e), e)).strip()
    here = os.path.abspath(__file__)
    frames = [f for f in traceback.extract_tb(e.__traceback__)
              if os.path.abspath(f.filename) != here]
    where = ", ".join("%s:%s in %s" % (os.path.basename(f.filename), f.lineno, f.name)
                      for f in reversed(frames[-5:]))
    return head + (" [at %s]" % where if where else "")


def _flush_output():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass


def _perform(fn, job):
    """Run one job; its exit status and error message."""
    try:
        try:
            _arm(job)
            fn(job)
        finally:
            _disarm()
        return 0, None
    except Cancelled:
        return 1, None          # the daemon says why: "cancelled on request"
    except SystemExit as e:
        if e.code is None:
            return 0, None
        if isinstance(e.code, int):
            return e.code & 0xFF, None
        sys.stderr.write("%s\n" % e.code)
        return 1, _text(e.code)
    except Exception as e:
        # As Python prints an uncaught exception, from the job's function down.
        traceback.print_exception(type(e), e, e.__traceback__.tb_next)
        return 1, _text(_describe(e))
    finally:
        _disarm()


def run(fn):
    """Serve jobs to fn(job) until cogworkerd retires this process; never returns."""
    global _sock, _main_ident, _flags
    _sock = _open_channel()
    _main_ident = threading.get_ident()
    signal.signal(signal.SIGINT, _on_sigint)
    signal.signal(signal.SIGIO, _on_sigio)
    fcntl.fcntl(_sock.fileno(), fcntl.F_SETOWN, os.getpid())
    _flags = fcntl.fcntl(_sock.fileno(), fcntl.F_GETFL) & ~os.O_ASYNC
    try:
        _send({"type": "ready"})
        while True:
            line = _next_line()
            if line is None:
                break
            msg = _parse(line)
            if not isinstance(msg, dict) or msg.get("type") != "job":
                continue            # a late cancel, or a later protocol's message
            job = Job(msg.get("job"), msg.get("deadline"))
            try:
                code, error = _perform(fn, job)
            except Cancelled:       # a cancel read as the job ended, past its except
                _disarm()
                code, error = 1, None
            _flush_output()
            done = {"type": "done", "exit": code}
            if isinstance(job.jid, str):
                done["jid"] = job.jid   # so that the daemon can tell a stray "done"
            if error is not None:
                done["error"] = error
            if _recycle:
                done["recycle"] = True
            _send(done)
            if _eof:
                break
    except OSError:
        pass                        # the channel broke: the daemon is gone
    _flush_output()
    sys.exit(0)

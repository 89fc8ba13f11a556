#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Run the integration tests: each tests/integration/test_*.py FILE in its own
`python3 -m unittest` process, N files at a time.

    tests/integration/run.py [--build DIR] [-j N] [-v] [pattern ...]

A pattern selects the files whose name contains it (`test_scripts`, `scripts`, ...).
Every file starts its own redis-server(s), so files can run in parallel. Each file's
output is captured; the output of failed files is printed, then a summary. Exit status 1
when any file failed (or when no file matched).

On a sanitizer build (make check SANITIZE=address|thread) every report of ASan, LSan, UBSan
or TSan, from any process a file started, goes to a file of that file's TMPDIR (log_path),
and a file with a report fails with it, whatever its tests said: a race or a leak in a
daemon whose test passed is still a failure.

Stdlib only. The tests need python3-redis: when the interpreter running this script
lacks it (e.g. a pyenv python first in PATH), Debian's /usr/bin/python3 runs the tests.
"""

import argparse
import concurrent.futures
import glob
import importlib.util
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))


def test_python():
    """An interpreter that can import redis."""
    if importlib.util.find_spec("redis") is not None:
        return sys.executable
    for candidate in ("/usr/bin/python3",):
        if os.path.exists(candidate):
            ok = subprocess.run([candidate, "-c", "import redis"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if ok.returncode == 0:
                return candidate
    return sys.executable  # the tests will say what is missing


def summarise(output):
    """(tests run, details) from unittest's closing lines."""
    ran = re.findall(r"^Ran (\d+) tests? in", output, re.M)
    tail = re.findall(r"^(OK.*|FAILED \(.*\))$", output, re.M)
    return (int(ran[-1]) if ran else 0), (tail[-1] if tail else "no unittest summary")


SANITIZERS = ("ASAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS")


def with_sanitizer_logs(env, prefix):
    """env whose sanitizer reports go to files prefix.<pid> (the user's options kept)."""
    env = dict(env)
    for var in SANITIZERS:
        env[var] = ":".join(filter(None, [env.get(var), "log_path=" + prefix]))
    return env


def sanitizer_reports(prefix):
    """The text of every report written under prefix (see with_sanitizer_logs)."""
    out = []
    for path in sorted(glob.glob(prefix + ".*")):
        with open(path, errors="replace") as f:
            out.append("%s:\n%s" % (os.path.basename(path), f.read()))
    return out


def run_file(path, python, env, timeout, tmp_root):
    """Run one test file; returns (ok, tests, details, seconds, output). The file gets a
    private TMPDIR (its redis-servers' dirs live there), removed afterwards even when the
    file had to be killed."""
    module = os.path.splitext(os.path.basename(path))[0]
    env = dict(env, TMPDIR=tempfile.mkdtemp(prefix="f-", dir=tmp_root))
    reports = os.path.join(env["TMPDIR"], "sanitizer")
    env = with_sanitizer_logs(env, reports)
    start = time.monotonic()
    # Own session, so a timeout can stop the file with everything it started.
    proc = subprocess.Popen([python, "-m", "unittest", "-v", module], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        timed_out = True
    found = sanitizer_reports(reports)
    shutil.rmtree(env["TMPDIR"], ignore_errors=True)
    output = out.decode("utf-8", "replace")
    tests, details = summarise(output)
    if timed_out:
        details = "TIMED OUT after %ds" % timeout
    if found:
        details += "; %d sanitizer report(s)" % len(found)
        output += "".join("---- sanitizer report %s" % r for r in found)
    ok = proc.returncode == 0 and not timed_out and not found
    return ok, tests, details, time.monotonic() - start, output


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(REPO, "build"),
                    help="build directory holding cogworkerd and cogworkerctl")
    ap.add_argument("-j", "--jobs", type=int, default=max(2, os.cpu_count() or 1),
                    help="files run at once (default: number of CPUs, at least 2)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print the output of passing files too")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per file")
    ap.add_argument("patterns", nargs="*", help="substrings of the file names to run")
    opts = ap.parse_args()

    files = sorted(glob.glob(os.path.join(HERE, "test_*.py")))
    if opts.patterns:
        files = [f for f in files if any(p in os.path.basename(f) for p in opts.patterns)]
    if not files:
        print("run.py: no test file matches %s" % (" ".join(opts.patterns) or "test_*.py"))
        return 1

    env = dict(os.environ)
    env["COGWORKERD_BUILD"] = os.path.abspath(opts.build)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [HERE, env.get("PYTHONPATH")]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    python = test_python()

    print("running %d file(s), %d at a time (%s, build %s)"
          % (len(files), max(1, opts.jobs), python, env["COGWORKERD_BUILD"]), flush=True)
    lock = threading.Lock()
    failed, total_tests = [], 0
    start = time.monotonic()
    tmp_root = tempfile.mkdtemp(prefix="cw-it-")
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
        futures = {pool.submit(run_file, f, python, env, opts.timeout, tmp_root): f
                   for f in files}
        for fut in concurrent.futures.as_completed(futures):
            name = os.path.basename(futures[fut])
            ok, tests, details, secs, output = fut.result()
            with lock:
                total_tests += tests
                print("%-4s %-40s %4d tests %7.1fs  %s"
                      % ("ok" if ok else "FAIL", name, tests, secs, details), flush=True)
                if not ok:
                    failed.append(name)
                if not ok or opts.verbose:
                    print("---- output of %s ----\n%s---- end of %s ----"
                          % (name, output, name), flush=True)

    shutil.rmtree(tmp_root, ignore_errors=True)
    print("%d file(s), %d test(s) in %.1fs: %s"
          % (len(files), total_tests, time.monotonic() - start,
             "all passed" if not failed else "%d file(s) FAILED: %s"
             % (len(failed), ", ".join(sorted(failed)))))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

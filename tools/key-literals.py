#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""key-literals.py: every Redis key name is spelled in src/keys.h and nowhere else in src/.

The key names are a wire contract shared with Ruby clients and workers; a name written out
in two files is a name that can drift in one of them. So a C string literal in src/ (any
.c or .h but keys.h) that holds a "cogworker:" or "periodic:" name fails: the prefix
followed by a character a key name can continue with (a letter, digit, _, %, <, *), at
the start of the literal or anywhere in it ("SMEMBERS cogworker:queues" spells a key as
much as "cogworker:queues" does). Comments are skipped (they may name keys freely), and so
is prose that only starts like a prefix ("periodic: unknown subcommand"). Lua scripts are
out of scope: they get their keys through KEYS.

Usage: key-literals.py [--src DIR]; exit status 1 when any literal offends, naming each.
"""
import argparse
import os
import re
import sys

KEY = re.compile(r"(cogworker|periodic):[A-Za-z0-9_%<*]")
EXEMPT = "keys.h"
ME = "key-literals"


def literals(text):
    """(line, literal body) for every string literal of C text, comments skipped."""
    i, n, line = 0, len(text), 1
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            line += text.count("\n", i, j)
            i = j
        elif c in "\"'":
            j, start = i + 1, line
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            if c == '"':
                yield start, text[i + 1:j]
            i = j + 1
        else:
            i += 1


def offenders(src):
    out = []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            path = os.path.join(root, f)
            if not f.endswith((".c", ".h")) or os.path.relpath(path, src) == EXEMPT:
                continue
            with open(path, encoding="utf-8", errors="replace") as fh:
                text = fh.read()
            for line, lit in literals(text):
                if KEY.search(lit):
                    out.append((path, line, lit))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default="src")
    a = ap.parse_args()
    bad = offenders(a.src)
    for path, line, lit in bad:
        print('%s:%d: key name spelled outside %s: "%s"' % (path, line, EXEMPT, lit))
    if bad:
        print("%s: FAILED: %d string literal(s) in %d file(s) of %s spell a key name; use the "
              "macros of %s" % (ME, len(bad), len({b[0] for b in bad}), a.src, EXEMPT))
        return 1
    print("%s: ok" % ME)
    return 0


if __name__ == "__main__":
    sys.exit(main())

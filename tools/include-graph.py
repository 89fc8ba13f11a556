#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""include-graph.py: cycles between the components of src/, by include and by link.

A component is a basename: src/foo.c and src/foo.h are component `foo`; files under
src/ctl/ are components `ctl/<name>` (under src/web/, `web/<name>`); an object built from a
generated source at the top of the build directory (build/lua_scripts.o) is a component of
its own name. A file that only exists as a header (daemon.h) is a component too.

Two graphs, two kinds of dependency, and either one may close a cycle:

- The include graph. A -> B when any file of A (its .c or its .h) has `#include "x.h"`
  that resolves to B's header: x.h is looked up beside the including file first, then in
  src/, as the compiler does with -Isrc. Angle-bracket includes and quoted names that do
  not resolve inside src/ are not ours and are ignored. A file including its own
  component's header is no edge. A header including a header counts like a .c does, so
  a cycle closed by headers alone fails the same way. An internal header (foo_int.h: what
  the files of one split-up concept share, included by nothing outside them) is no
  component: including it is including what it includes, and the calls between the files
  that share it are the link graph's to judge.

- The link graph. A -> B when the object of A has an undefined external symbol (nm: U)
  that the object of B defines (any defined external symbol: functions, T, and globals,
  D/B/R/C, since sharing a global couples two files as much as a call does). This is the
  graph a header hides: a header that declares functions of several .c files (daemon.h
  today) makes each includer depend on all of them, whichever header it includes. When two
  objects define one symbol (main: the daemon's and cogworkerctl's), every definer is a
  target. Symbols no object defines (libc, hiredis...) are no edge.

- The family graph. A concept split into files is a family: a component and the components
  of the same directory whose names extend its own with "_" (ctl/jobs, ctl/jobs_act,
  ctl/jobs_find, ...). Inside a family, A -> B when A includes B's header or calls into B's
  object: the union of the two graphs, restricted to its members. Either graph alone can
  miss a circle there: when jobs.h declared the functions of jobs.c and of the parts below
  it, every part included jobs.h (part -> jobs, by include) while jobs.c called the parts
  (jobs -> part, by link), and neither graph had a cycle. A family must run one way: the
  command on top, its parts below, what they share at the bottom. UNLEVELLED names the
  families known not to (each with why); they are reported, not failed, and one that no
  longer cycles is said to be levelled, so it can leave the list.

Every strongly connected component of more than one member is a cycle, in any graph.
Each is printed as a closed walk along real edges that visits all its members, with the
evidence for every step (the #include line, or up to three of the symbols), so that the
reader can see which dependency to cut. Exit status 1 if any graph has a cycle, 2 on a
usage error (no objects: build first).

Usage: include-graph.py [--src DIR] [--build DIR] [--dot include|link]
  --dot prints the graph in Graphviz form (edges inside a cycle in red) and exits 0.
"""
import argparse
import os
import re
import signal
import subprocess
import sys
from collections import defaultdict, deque

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
ME = "include-graph"

# Families whose members call each other both ways today (the family graph's exceptions).
UNLEVELLED = {
    "warm": "warm_int.h is shared by warm.c, warm_proc.c and warm_serve.c, which call "
            "each other",
    "web/web": "web.h declares the functions of every src/web/*.c, and web.c calls them",
}


def component(rel):
    """src-relative path -> component name (extension dropped)."""
    return os.path.splitext(rel)[0]


def source_files(src):
    out = []
    for root, _, files in os.walk(src):
        for f in files:
            if f.endswith((".c", ".h")):
                out.append(os.path.relpath(os.path.join(root, f), src))
    return sorted(out)


def is_internal(rel):
    return rel.endswith("_int.h")


def includes_of(src, rel):
    """[(line number, name as written, src-relative target)] of one file's quoted includes
    that resolve inside src/."""
    out = []
    with open(os.path.join(src, rel), encoding="utf-8", errors="replace") as fh:
        for n, line in enumerate(fh, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            name = m.group(1)
            beside = os.path.normpath(os.path.join(os.path.dirname(rel), name))
            if os.path.isfile(os.path.join(src, beside)):
                out.append((n, name, beside))
            elif os.path.isfile(os.path.join(src, name)):
                out.append((n, name, os.path.normpath(name)))
    return out


def through_internal(src, rel, seen=None):
    """The non-internal headers an internal header brings in, following internal ones."""
    seen = set() if seen is None else seen
    out = []
    for _, _, target in includes_of(src, rel):
        if target in seen:
            continue
        seen.add(target)
        out.extend(through_internal(src, target, seen) if is_internal(target) else [target])
    return out


def include_graph(src):
    """{comp: {comp: [evidence]}} from quoted includes."""
    g = defaultdict(lambda: defaultdict(list))
    for rel in source_files(src):
        if is_internal(rel):
            continue
        a = component(rel)
        g[a]
        for n, name, target in includes_of(src, rel):
            targets = through_internal(src, target) if is_internal(target) else [target]
            for t in targets:
                b = component(t)
                if b != a:
                    via = "" if t == target else " (through %s)" % name
                    g[a][b].append('%s:%d includes "%s"%s' % (os.path.join(src, rel), n,
                                                             name, via))
    return g


def objects(src, build):
    """[(component, object path)] for every src/**/*.c, plus generated top-level objects."""
    out, missing = [], []
    for rel in source_files(src):
        if not rel.endswith(".c"):
            continue
        obj = os.path.join(build, "src", component(rel) + ".o")
        if os.path.isfile(obj):
            if os.path.getmtime(obj) < os.path.getmtime(os.path.join(src, rel)):
                print("%s: warning: %s is older than its source; run make first" % (ME, obj),
                      file=sys.stderr)
            out.append((component(rel), obj))
        else:
            missing.append(obj)
    if os.path.isdir(build):
        for f in sorted(os.listdir(build)):
            if f.endswith(".o"):
                out.append((component(f), os.path.join(build, f)))
    return out, missing


def nm_symbols(obj):
    """(defined, undefined) external symbol sets of one object."""
    res = subprocess.run(["nm", "-P", "-g", obj], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True)
    if res.returncode != 0:
        raise RuntimeError("nm %s: %s" % (obj, res.stderr.strip()))
    defined, undefined = set(), set()
    for line in res.stdout.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        name, kind = f[0], f[1]
        if kind in ("U", "w", "v"):
            undefined.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, undefined


def link_graph(objs):
    g = defaultdict(lambda: defaultdict(list))
    syms = {}
    definers = defaultdict(list)
    for comp, obj in objs:
        d, u = nm_symbols(obj)
        syms[comp] = u
        g[comp]
        for s in d:
            definers[s].append(comp)
    for comp, u in syms.items():
        for s in sorted(u):
            for b in definers.get(s, ()):
                if b != comp:
                    g[comp][b].append(s)
    return g


def families(comps):
    """{root: members} for every component that others of its directory extend with "_"."""
    out = {}
    for root in sorted(comps):
        d, base = os.path.split(root)
        members = {c for c in comps
                   if os.path.dirname(c) == d and os.path.basename(c).startswith(base + "_")}
        if members:
            out[root] = members | {root}
    return out


def family_graph(inc, lnk):
    """{root: {comp: {comp: [evidence]}}}: the union of both graphs inside each family."""
    out = {}
    for root, members in families(set(inc) | set(lnk)).items():
        g = defaultdict(lambda: defaultdict(list))
        for a in sorted(members):
            g[a]
            for b, ev in inc.get(a, {}).items():
                if b in members:
                    g[a][b].extend(ev)
            for b, syms in lnk.get(a, {}).items():
                if b in members:
                    g[a][b].append("calls " + ", ".join(syms[:3]) +
                                   (" (+%d more)" % (len(syms) - 3) if len(syms) > 3 else ""))
        out[root] = g
    return out


def report_families(fams):
    """The family graph's cycles, as report() prints a graph's; the count of failures."""
    failed, known, levelled = [], [], []
    for root, g in sorted(fams.items()):
        if not sccs(g):
            if root in UNLEVELLED:
                levelled.append(root)
            continue
        (known if root in UNLEVELLED else failed).append(root)
    if not failed:
        print("%s: family graph: no cycle (%d families%s)" % (
            ME, len(fams), "; known unlevelled: " + ", ".join(
                "%s (%s)" % (r, UNLEVELLED[r]) for r in known) if known else ""))
    for root in levelled:
        print("%s: family graph: %s is levelled now: take it out of UNLEVELLED" % (ME, root))
    if failed:
        print("%s: family graph: %d famil%s with a cycle: %s" % (
            ME, len(failed), "y" if len(failed) == 1 else "ies", ", ".join(failed)))
        for root in failed:
            report("family %s" % root, fams[root], lambda ev: "; ".join(ev))
    return len(failed)


def sccs(g):
    """Tarjan, iterative; strongly connected components of more than one member."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(g):
        if root in index:
            continue
        work = [(root, iter(sorted(g[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            pushed = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g.get(w, ())))))
                    pushed = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if pushed:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(set(comp))
    return sorted(out, key=lambda s: (-len(s), sorted(s)))


def shortest(g, scc, start, goal):
    """Shortest path start -> a node satisfying goal(node), inside scc (start excluded)."""
    prev = {start: None}
    q = deque([start])
    while q:
        v = q.popleft()
        for w in sorted(g[v]):
            if w in scc and w not in prev:
                prev[w] = v
                if goal(w):
                    path = [w]
                    while prev[path[-1]] != start:
                        path.append(prev[path[-1]])
                    return path[::-1]
                q.append(w)
    return None


def closed_walk(g, scc):
    """A walk along edges that starts and ends at the first member and visits every member."""
    start = min(scc)
    walk, seen = [start], {start}
    while seen != scc:
        step = shortest(g, scc, walk[-1], lambda w: w not in seen)
        walk += step
        seen.update(step)
    walk += shortest(g, scc, walk[-1], lambda w: w == start)
    return walk


def report(kind, g, how):
    cycles = sccs(g)
    if not cycles:
        print("%s: %s graph: no cycle (%d components)" % (ME, kind, len(g)))
        return 0
    print("%s: %s graph: %d cycle%s" % (ME, kind, len(cycles), "" if len(cycles) == 1 else "s"))
    for scc in cycles:
        walk = closed_walk(g, scc)
        print("  cycle of %d components: %s" % (len(scc), ", ".join(sorted(scc))))
        print("    along: %s" % " -> ".join(walk))
        for a, b in zip(walk, walk[1:]):
            print("      %s -> %s: %s" % (a, b, how(g[a][b])))
    return len(cycles)


def dot(kind, g):
    inside = set()
    for scc in sccs(g):
        inside |= {(a, b) for a in scc for b in g[a] if b in scc}
    print("digraph %s {" % kind)
    print("\trankdir=BT; node [shape=box, fontname=monospace];")
    for a in sorted(g):
        print('\t"%s";' % a)
        for b in sorted(g[a]):
            print('\t"%s" -> "%s"%s;' % (a, b, ' [color=red]' if (a, b) in inside else ""))
    print("}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default="src")
    ap.add_argument("--build", default="build")
    ap.add_argument("--dot", choices=("include", "link"))
    a = ap.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)   # --dot | head

    inc = include_graph(a.src)
    if a.dot == "include":
        dot("include", inc)
        return 0
    objs, missing = objects(a.src, a.build)
    if missing:
        print("%s: FAILED: no object for %d source(s) (%s...): run make first"
              % (ME, len(missing), missing[0]), file=sys.stderr)
        return 2
    lnk = link_graph(objs)
    if a.dot == "link":
        dot("link", lnk)
        return 0

    ni = report("include", inc, lambda ev: "; ".join(ev))
    nl = report("link", lnk, lambda syms: ", ".join(syms[:3]) +
                (" (+%d more)" % (len(syms) - 3) if len(syms) > 3 else ""))
    nf = report_families(family_graph(inc, lnk))
    if ni or nl or nf:
        print("%s: FAILED: %d include cycle(s), %d link cycle(s) between components of %s, "
              "%d family cycle(s)" % (ME, ni, nl, a.src, nf))
        return 1
    print("%s: ok" % ME)
    return 0


if __name__ == "__main__":
    sys.exit(main())

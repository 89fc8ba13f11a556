#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check-refs.py: every reference a comment, a test or a doc makes to the docs resolves.

The code cites its reasons instead of repeating them:

    §7.4, doc/protocol.md §7.4     section 7.4 of doc/protocol.md (a bare § means protocol)
    lesson 21                      item 21 of the lessons, doc/protocol.md §10
    doc/behaviours.md §13, PX-9    a section or a behaviour ID of doc/behaviours.md
    doc/design.md "Process shape"  a heading of doc/design.md

A § belongs to the document last named before it (within a few lines): after
doc/behaviours.md it is a section of that file; with no name before it, of protocol. This script finds every such reference in src/, lua/, tests/, tools/, conf/,
man/, README.md and HACKING.md, and fails naming each one that points nowhere, and each
mention of the reference documents that are not in the repo (PROTOCOL.md, DESIGN.md,
BEHAVIOURS.md), so a clone always explains itself.

The docs themselves are checked the same way: a file named doc/NAME.md anywhere above must
exist, and every relative Markdown link of README.md, HACKING.md and doc/*.md must reach a
file of the repo and, with a #fragment, one of that file's headings (as GitHub makes
anchors of them). And the README stays a landing page, at most README_MAX_LINES lines: what
grows goes to doc/operating.md, doc/performance.md or doc/hardening.md.

    tools/check-refs.py [REPO]      exit 0 when every reference resolves, 1 otherwise
"""

import os
import re
import sys

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), ".."))
SCAN = ["src", "lua", "tests", "tools", "conf", "man", "systemd", "README.md", "HACKING.md",
        "Makefile", "doc/operating.md", "doc/performance.md", "doc/hardening.md"]
README_MAX_LINES = 200
SKIP_EXT = (".o", ".d", ".png", ".pyc")
SELF = os.path.abspath(__file__)

SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)")
LESSON = re.compile(r"\blessons?\s+(\d+)((?:\s*(?:,|-|–|and)\s*\d+)*)")
DESIGN_TITLE = re.compile(r'doc/design\.md,?\s+"([^"]+)"')
OUTSIDE = re.compile(r"\b(PROTOCOL(?:\.md)?\s*§|PROTOCOL\.md|DESIGN\.md|BEHAVIOURS(?:\.md)?)")
BEHAVIOUR_ID = re.compile(r"\b([A-Z]{2,3})-(\d+)\b")
DOC_FILE = re.compile(r"(?<![\w/.-])doc/([a-z][a-z0-9_-]*\.md)\b")
MD_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```.*?^\s*```", re.S | re.M)


def read(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()


def headings(text):
    """Section numbers ("7.4", "10") and titles of a Markdown document."""
    nums, titles = set(), set()
    for line in text.splitlines():
        m = re.match(r"#{1,6}\s+(\d+(?:\.\d+)*)\.?\s+(.*)", line)
        if m:
            nums.add(m.group(1))
            titles.add(m.group(2).strip())
        m = re.match(r"#{1,6}\s+(.*)", line)
        if m:
            titles.add(m.group(1).strip())
    return nums, titles


def lessons(text):
    """The numbers of the items of §10 of doc/protocol.md."""
    m = re.search(r"^## 10\b.*?(?=^## |\Z)", text, re.S | re.M)
    found = set()
    for line in (m.group(0) if m else "").splitlines():
        n = re.match(r"\s*(?:\*\*)?(?:L|lesson\s*)?(\d+)[.):]", line)
        if n:
            found.add(int(n.group(1)))
    return found


def doc_before(text, pos, window=240):
    """The document a § at pos refers to: the one named last in the text before it."""
    before = text[max(0, pos - window):pos].lower()
    b, p = before.rfind("behaviours"), before.rfind("protocol")
    return "behaviours" if b > p else "protocol"


def files():
    for entry in SCAN:
        top = os.path.join(REPO, entry)
        if os.path.isfile(top):
            yield top
        for root, dirs, names in os.walk(top):
            # tests/lint plants dangling references on purpose, to test this script
            dirs[:] = [d for d in dirs if d not in ("__pycache__", "corpus") and
                       os.path.relpath(os.path.join(root, d), REPO) != "tests/lint"]
            for n in names:
                p = os.path.join(root, n)
                if not n.endswith(SKIP_EXT) and os.path.abspath(p) != SELF:
                    yield p


def anchors(text):
    """The #fragments GitHub gives the headings of a Markdown text: lower case, spaces to
    hyphens, every other character but letters, digits, _ and - dropped; a repeated heading
    gets -1, -2, ..."""
    seen, found = {}, set()
    for line in FENCE.sub("", text).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        slug = re.sub(r"[^\w\- ]", "", m.group(1).lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        found.add(slug if n == 0 else "%s-%d" % (slug, n))
    return found


def markdown_docs():
    """README.md, HACKING.md and doc/*.md, as paths relative to REPO."""
    docdir = os.path.join(REPO, "doc")
    names = sorted(n for n in os.listdir(docdir) if n.endswith(".md")) \
        if os.path.isdir(docdir) else []
    return [rel for rel in ["README.md", "HACKING.md"] + ["doc/" + n for n in names]
            if os.path.isfile(os.path.join(REPO, rel))]


def broken_links(rel):
    """Each relative link of the Markdown file rel that reaches no file, or no heading."""
    text = read(os.path.join(REPO, rel))
    bad = []
    for lineno, line in enumerate(FENCE.sub(lambda m: "\n" * m.group(0).count("\n"),
                                            text).splitlines(), 1):
        line = re.sub(r"`[^`]*`", "", line)      # a link written as code is no link
        for m in MD_LINK.finditer(line):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
                continue                            # http:, https:, mailto:
            path, _, frag = target.partition("#")
            where = "%s:%d" % (rel, lineno)
            dest = os.path.normpath(os.path.join(os.path.dirname(rel), path)) if path else rel
            full = os.path.join(REPO, dest)
            if dest.startswith("..") or not os.path.exists(full):
                bad.append("%s: link %s: no file %s in the repo" % (where, target, dest))
            elif frag and (not dest.endswith(".md") or frag not in anchors(read(full))):
                bad.append("%s: link %s: %s has no heading #%s" % (where, target, dest, frag))
    return bad


def main():
    docs = {}
    for name in ("protocol", "behaviours", "design"):
        path = os.path.join(REPO, "doc", name + ".md")
        docs[name] = read(path) if os.path.exists(path) else ""
    proto_nums, _ = headings(docs["protocol"])
    beh_nums, _ = headings(docs["behaviours"])
    _, design_titles = headings(docs["design"])
    lesson_nums = lessons(docs["protocol"])
    beh_ids = set(re.findall(r"\b([A-Z]{2,3}-\d+)\b", docs["behaviours"]))
    bad = []
    for path in files():
        rel = os.path.relpath(path, REPO)
        try:
            text = read(path)
        except OSError:
            continue
        offsets, at = [], 0
        for line in text.splitlines(True):
            offsets.append(at)
            at += len(line)
        for lineno, line in enumerate(text.splitlines(), 1):
            where = "%s:%d" % (rel, lineno)
            for m in OUTSIDE.finditer(line):
                bad.append("%s: cites %r, which is not in the repo (use doc/...)"
                           % (where, m.group(1)))
            for m in SECTION.finditer(line):
                num = m.group(1)
                doc = doc_before(text, offsets[lineno - 1] + m.start())
                known = beh_nums if doc == "behaviours" else proto_nums
                if num not in known:
                    bad.append("%s: §%s is not a section of doc/%s.md" % (where, num, doc))
            for m in LESSON.finditer(line):
                nums = [int(m.group(1))] + [int(x) for x in re.findall(r"\d+", m.group(2))]
                for n in nums:
                    if n not in lesson_nums:
                        bad.append("%s: lesson %d is not in doc/protocol.md §10" % (where, n))
            for m in DESIGN_TITLE.finditer(line):
                title = m.group(1)
                if not any(t == title or t.startswith(title) for t in design_titles):
                    bad.append('%s: doc/design.md has no heading "%s"' % (where, title))
            for m in DOC_FILE.finditer(line):
                if not os.path.isfile(os.path.join(REPO, "doc", m.group(1))):
                    bad.append("%s: names doc/%s, which is not in the repo" % (where, m.group(1)))
            if rel.startswith("tests") and beh_ids:
                for m in BEHAVIOUR_ID.finditer(line):
                    ident = "%s-%s" % (m.group(1), m.group(2))
                    if m.group(1) in {i.split("-")[0] for i in beh_ids} and ident not in beh_ids:
                        bad.append("%s: behaviour %s is not in doc/behaviours.md" % (where, ident))
    for rel in markdown_docs():
        bad.extend(broken_links(rel))
    readme = os.path.join(REPO, "README.md")
    if os.path.isfile(readme):
        n = len(read(readme).splitlines())
        if n > README_MAX_LINES:
            bad.append("README.md: %d lines, more than %d: it is the landing page; move the "
                       "detail to doc/operating.md, doc/performance.md or doc/hardening.md"
                       % (n, README_MAX_LINES))
    for b in bad:
        print("check-refs: " + b)
    if bad:
        print("check-refs: %d reference(s) point nowhere" % len(bad))
        return 1
    print("check-refs: every reference resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())

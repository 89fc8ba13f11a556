#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The checks of make lint catch what they claim to, and only that.

A check that cannot fail is worse than none: it says "ok" about anything. So each check of
tools/lint.sh is run on a small tree made here, once clean (it must pass) and once with one
planted defect (it must fail, exit 1, and name the defect): an include cycle through .c
files, one closed by headers alone, a link cycle no include shows, a circle inside a family
of files that neither graph alone shows (the parts include the command's header, the
command calls the parts: src/ctl/jobs*.c before jobs_types.h), a key name spelled
outside keys.h, a cppcheck warning; and a reference to doc/ that points nowhere, a
Markdown link to a file or heading that is not there, a README grown past a landing page
(tools/check-refs.py). The trees are compiled for real (cc -c), since the link
check reads the objects with nm, the way make lint reads build/.

Run: python3 tests/lint/test_lint.py (make lint runs it first). Needs cc, nm, cppcheck.
"""
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
LINT = os.path.join(ROOT, "tools", "lint.sh")

# A tree without defects: b is below a, ctl/m is a component apart from m, and the family
# p (p.c the command, p_x.c its part) runs one way: p calls p_x, p_x knows nothing of p.
CLEAN = {
    "p.h": "int p_f(void);\n",
    "p.c": '#include "p.h"\n#include "p_x.h"\nint p_f(void) { return p_x_f(); }\n',
    "p_x.h": "int p_x_f(void);\n",
    "p_x.c": '#include "p_x.h"\nint p_x_f(void) { return 6; }\n',
    "a.h": '#include "b.h"\nint a_f(void);\n',
    "a.c": '#include "a.h"\nint a_f(void) { return b_f() + 1; }\n',
    "b.h": "int b_f(void);\n",
    "b.c": '#include "b.h"\n/* "cogworker:queue:" in a comment is no key */\n'
           'int b_f(void) { return 2; }\n',
    "keys.h": '#define K_QUEUE "cogworker:queue:"\n',
    "m.h": "int m_f(void);\n",
    "m.c": '#include "m.h"\n#include "keys.h"\n'
           'const char *m_key(void) { return K_QUEUE "x"; }\n'
           'const char *m_msg(void) { return "periodic: unknown subcommand"; }\n'
           "int m_f(void) { return 3; }\n",
    "ctl/m.h": "int ctl_m(void);\n",
    "ctl/m.c": '#include "m.h"\nint ctl_m(void) { return 4; }\n',
}


class Tree:
    """A src/ and build/src/ pair in a temporary directory."""

    def __init__(self, files):
        self.tmp = tempfile.TemporaryDirectory(prefix="lint-test-")
        self.src = os.path.join(self.tmp.name, "src")
        self.build = os.path.join(self.tmp.name, "build")
        for rel, text in files.items():
            path = os.path.join(self.src, rel)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if rel.endswith(".h"):      # guarded, so that a planted cycle still compiles
                guard = "G_" + rel.replace("/", "_").replace(".", "_").upper()
                text = "#ifndef %s\n#define %s\n%s#endif\n" % (guard, guard, text)
            with open(path, "w") as fh:
                fh.write(text)
        for rel in files:
            if rel.endswith(".c"):
                obj = os.path.join(self.build, "src", rel[:-2] + ".o")
                os.makedirs(os.path.dirname(obj), exist_ok=True)
                subprocess.run(["cc", "-std=gnu11", "-I" + self.src, "-c", "-o", obj,
                                os.path.join(self.src, rel)], check=True)

    def lint(self, *checks):
        res = subprocess.run(["sh", LINT, "-s", self.src, "-b", self.build] + list(checks),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             universal_newlines=True)
        return res.returncode, res.stdout

    def close(self):
        self.tmp.cleanup()


def planted(**changes):
    files = dict(CLEAN)
    files.update({k.replace("__", "/").replace("_dot_", "."): v for k, v in changes.items()})
    return files


class LintChecks(unittest.TestCase):
    def run_tree(self, files, *checks):
        t = Tree(files)
        self.addCleanup(t.close)
        return t.lint(*checks)

    def assert_fails(self, files, check, *needles):
        rc, out = self.run_tree(files, check)
        self.assertEqual(rc, 1, out)
        self.assertIn("lint: FAILED: " + check, out)
        for n in needles:
            self.assertIn(n, out)
        return out

    def test_clean_tree_passes_every_check(self):
        rc, out = self.run_tree(CLEAN)
        self.assertEqual(rc, 0, out)
        self.assertIn("include-graph: ok", out)
        self.assertIn("family graph: no cycle (1 families)", out)
        self.assertIn("cppcheck: ok", out)
        self.assertIn("key-literals: ok", out)
        self.assertTrue(out.rstrip().endswith("lint: ok"), out)

    def test_include_cycle_through_c_files(self):
        # b.c includes a.h while a.h includes b.h: a -> b -> a.
        files = planted(b_dot_c='#include "b.h"\n#include "a.h"\nint b_f(void) { return 2; }\n')
        out = self.assert_fails(files, "graph", "include graph: 1 cycle",
                                "cycle of 2 components: a, b", "along: a -> b -> a",
                                'b.c:2 includes "a.h"')
        self.assertIn("link graph: no cycle", out)

    def test_include_cycle_closed_by_headers_alone(self):
        # b.h includes a.h: no .c takes part, the headers close the loop.
        files = planted(b_dot_h='#include "a.h"\nint b_f(void);\n')
        self.assert_fails(files, "graph", "include graph: 1 cycle", 'b.h:3 includes "a.h"')

    def test_internal_header_is_no_component(self):
        # a_int.h (shared by a.c and a2.c) includes a.h, and a.c includes a_int.h: no cycle,
        # because an internal header is only what it includes.
        files = planted(a_int_dot_h='#include "a.h"\nint a2_f(void);\n',
                        a_dot_c='#include "a.h"\n#include "a_int.h"\n'
                                'int a_f(void) { return b_f() + a2_f(); }\n',
                        a2_dot_c='#include "a_int.h"\nint a2_f(void) { return 5; }\n')
        rc, out = self.run_tree(files, "graph")
        self.assertEqual(rc, 0, out)
        # ... but the calls between the files that share it still count.
        files["a2.c"] = '#include "a_int.h"\nint a2_f(void) { return a_f(); }\n'
        self.assert_fails(files, "graph", "link graph: 1 cycle", "a2 -> a: a_f")

    def test_link_cycle_no_include_shows(self):
        # b.c calls a_f declared by hand: the includes stay acyclic, the objects do not.
        files = planted(b_dot_c='int a_f(void);\nint b_f(void) { return a_f(); }\n')
        out = self.assert_fails(files, "graph", "link graph: 1 cycle",
                                "cycle of 2 components: a, b", "b -> a: a_f", "a -> b: b_f")
        self.assertIn("include graph: no cycle", out)

    def test_family_circle_neither_graph_shows(self):
        # p.h declares the part's function too, and p_x.c includes p.h for it: p_x -> p by
        # include, p -> p_x by link; each graph alone is acyclic.
        files = planted(p_dot_h="int p_f(void);\nint p_x_f(void);\n",
                        p_dot_c='#include "p.h"\nint p_f(void) { return p_x_f(); }\n',
                        p_x_dot_c='#include "p.h"\nint p_x_f(void) { return 6; }\n')
        out = self.assert_fails(files, "graph", "family graph: 1 family with a cycle: p",
                                "cycle of 2 components: p, p_x", "along: p -> p_x -> p",
                                "p -> p_x: calls p_x_f", 'p_x.c:1 includes "p.h"',
                                "0 include cycle(s), 0 link cycle(s)", "1 family cycle(s)")
        self.assertIn("include graph: no cycle", out)
        self.assertIn("link graph: no cycle", out)
        # The same circle between components that are no family (m.c calls b_f, b.c
        # includes m.h) is not the family check's: ctl.h and the commands are such a pair.
        files = planted(m_dot_c=CLEAN["m.c"] + 'int b_f(void);\nint m_g(void) { return b_f(); }\n',
                        b_dot_c='#include "b.h"\n#include "m.h"\nint b_f(void) { return 2; }\n')
        rc, out = self.run_tree(files, "graph")
        self.assertEqual(rc, 0, out)

    def test_known_unlevelled_family_is_reported_not_failed(self):
        files = planted(warm_dot_h="int warm_f(void);\nint warm_x_f(void);\n",
                        warm_dot_c='#include "warm.h"\nint warm_f(void) { return warm_x_f(); }\n',
                        warm_x_dot_c='#include "warm.h"\nint warm_x_f(void) { return 7; }\n')
        rc, out = self.run_tree(files, "graph")
        self.assertEqual(rc, 0, out)
        self.assertIn("known unlevelled: warm (", out)

    def test_graph_wants_objects(self):
        t = Tree(CLEAN)
        self.addCleanup(t.close)
        os.remove(os.path.join(t.build, "src", "a.o"))
        rc, out = t.lint("graph")
        self.assertNotEqual(rc, 0, out)
        self.assertIn("run make first", out)

    def test_key_literal_outside_keys_h(self):
        files = planted(m_dot_c=CLEAN["m.c"] +
                        'const char *m_bad(void) { return "SMEMBERS cogworker:queues"; }\n'
                        'const char *m_bad2(void) { return "periodic:schedule"; }\n')
        self.assert_fails(files, "keys", "m.c:6: key name spelled outside keys.h",
                          "m.c:7: key name spelled outside keys.h",
                          "key-literals: FAILED: 2 string literal(s) in 1 file(s)")

    def test_cppcheck_warning(self):
        bad = "int m_g(const int *p)\n{\n\tint n = *p;\n\tif (p == 0)\n\t\treturn 1;\n\treturn n;\n}\n"
        out = self.assert_fails(planted(m_dot_c=CLEAN["m.c"] + bad), "cppcheck",
                                "nullPointerRedundantCheck", "cppcheck: FAILED: 1 finding(s)")
        self.assertIn("m.c:8: warning:", out)

    def test_cppcheck_inline_suppression_with_reason(self):
        bad = ("int m_g(const int *p)\n{\n"
               "\t/* cppcheck-suppress nullPointerRedundantCheck ; planted, on purpose */\n"
               "\tint n = *p;\n\tif (p == 0)\n\t\treturn 1;\n\treturn n;\n}\n")
        rc, out = self.run_tree(planted(m_dot_c=CLEAN["m.c"] + bad), "cppcheck")
        self.assertEqual(rc, 0, out)

    def test_every_check_runs_and_all_failures_are_named(self):
        files = planted(b_dot_h='#include "a.h"\nint b_f(void);\n',
                        m_dot_c=CLEAN["m.c"] + 'const char *k(void) { return "cogworker:dead"; }\n')
        rc, out = self.run_tree(files)
        self.assertEqual(rc, 1, out)
        self.assertIn("cppcheck: ok", out)
        self.assertIn("lint: FAILED: graph keys", out)


CHECK_REFS = os.path.join(ROOT, "tools", "check-refs.py")
PROTOCOL_DOC = ("# protocol\n## 7. Components\n### 7.4 Processor\n"
                "## 10. Lessons\n**Processor**\n\n9. a fetch blip killed the thread\n")
BEHAVIOURS_DOC = "# behaviours\n## 13. PX — Running a job\n- **PX-9** x\n"
DESIGN_DOC = "# design\n## Process shape\n"


class RefChecks(unittest.TestCase):
    """tools/check-refs.py: a reference to the docs that points nowhere fails, by name."""

    def repo(self, source, **docs):
        """A repo of the three reference docs, src/x.c holding source, and docs: keyword
        file names (README_dot_md, doc__operating_dot_md) with their text."""
        tmp = tempfile.TemporaryDirectory(prefix="refs-test-")
        self.addCleanup(tmp.cleanup)
        extra = [(k.replace("__", "/").replace("_dot_", "."), v) for k, v in docs.items()]
        for rel, text in [("doc/protocol.md", PROTOCOL_DOC), ("doc/behaviours.md", BEHAVIOURS_DOC),
                          ("doc/design.md", DESIGN_DOC), ("src/x.c", source)] + extra:
            os.makedirs(os.path.join(tmp.name, os.path.dirname(rel)), exist_ok=True)
            with open(os.path.join(tmp.name, rel), "w") as fh:
                fh.write(text)
        res = subprocess.run([sys.executable, CHECK_REFS, tmp.name], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True)
        return res.returncode, res.stdout

    def test_references_that_resolve(self):
        rc, out = self.repo('/* §7.4, doc/protocol.md §7, lesson 9, doc/behaviours.md §13,\n'
                            ' * doc/design.md "Process shape" */\n')
        self.assertEqual(rc, 0, out)

    def test_each_kind_of_dangling_reference(self):
        rc, out = self.repo('/* §7.5 */\n/* lesson 10 */\n/* doc/behaviours.md §14 */\n'
                            '/* doc/design.md "Pitfalls" */\n/* PROTOCOL §7.4 */\n')
        self.assertEqual(rc, 1, out)
        for needle in ("x.c:1: §7.5 is not a section of doc/protocol.md",
                       "x.c:2: lesson 10 is not in doc/protocol.md §10",
                       "x.c:3: §14 is not a section of doc/behaviours.md",
                       'x.c:4: doc/design.md has no heading "Pitfalls"',
                       "x.c:5: cites 'PROTOCOL §'"):
            self.assertIn(needle, out)

    # The README and the docs it links to: a newcomer follows the links, so a link that
    # breaks when a section is renamed or moved must fail make lint, not a reader.
    README = ("# x\n[ops](doc/operating.md), [limits](doc/operating.md#known-limits),\n"
              "[web](doc/operating.md#cogworkers-web-ui), [again](doc/operating.md#stop-1),\n"
              "[licence](LICENSE), [the man pages](man/), [site](https://example.org/x),\n"
              "`[not a link](nowhere.md)`\n```\n[in a block](nowhere.md)\n```\n")
    OPERATING = ("# Operating\n## Known limits\n## cogworker's Web UI\n## Stop\n## Stop\n"
                 "See [the design](design.md#process-shape) and [below](#known-limits).\n")

    def docs(self, **changes):
        files = {"README_dot_md": self.README, "doc__operating_dot_md": self.OPERATING,
                 "LICENSE": "MIT\n", "man__x_dot_1": ".TH X 1\n"}
        files.update(changes)
        return files

    def test_markdown_links_that_resolve(self):
        rc, out = self.repo("/* doc/operating.md */\n", **self.docs())
        self.assertEqual(rc, 0, out)

    def test_link_to_a_missing_file_fails(self):
        rc, out = self.repo("", **self.docs(README_dot_md=self.README + "[x](doc/operatin.md)\n"))
        self.assertEqual(rc, 1, out)
        self.assertIn("README.md:9: link doc/operatin.md: no file doc/operatin.md in the repo", out)

    def test_link_to_a_missing_heading_fails(self):
        ops = self.OPERATING.replace("## Known limits", "## Limits")
        rc, out = self.repo("", **self.docs(doc__operating_dot_md=ops))
        self.assertEqual(rc, 1, out)
        self.assertIn("README.md:2: link doc/operating.md#known-limits: doc/operating.md has "
                      "no heading #known-limits", out)
        self.assertIn("doc/operating.md:6: link #known-limits: doc/operating.md has no heading "
                      "#known-limits", out)

    def test_link_out_of_the_repo_fails(self):
        rc, out = self.repo("", **self.docs(doc__hardening_dot_md="[up](../../etc/passwd)\n"))
        self.assertEqual(rc, 1, out)
        self.assertIn("doc/hardening.md:1: link ../../etc/passwd: no file", out)

    def test_a_named_doc_that_is_not_there_fails(self):
        rc, out = self.repo("/* see doc/operations.md */\n", **self.docs())
        self.assertEqual(rc, 1, out)
        self.assertIn("x.c:1: names doc/operations.md, which is not in the repo", out)

    def test_readme_longer_than_a_landing_page_fails(self):
        rc, out = self.repo("", **self.docs(README_dot_md=self.README + "line\n" * 192))
        self.assertEqual(rc, 0, out)                            # 200 lines: still fine
        rc, out = self.repo("", **self.docs(README_dot_md=self.README + "line\n" * 193))
        self.assertEqual(rc, 1, out)
        self.assertIn("README.md: 201 lines, more than 200", out)

    def test_this_repository(self):
        """What make lint runs last: the real README and docs, as they are now."""
        res = subprocess.run([sys.executable, CHECK_REFS, ROOT], stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, universal_newlines=True)
        self.assertEqual(res.returncode, 0, res.stdout)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[1:], verbosity=1)

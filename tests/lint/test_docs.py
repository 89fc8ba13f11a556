#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The recipes the docs give a reader to copy work as written.

A recipe is code a reader pastes without reading it twice, so a wrong one costs them an
afternoon. What can be checked here without the network is checked:

- the Web UI's config.ru (doc/operating.md, "cogworker's Web UI") loads the gem's core, "cogworker", before "cogworker/web": the web part uses the core's
  constants without requiring it, so alone it fails at rackup with `NameError:
  uninitialized constant Cogworker::Web::Routes` (issue 21, found against the real gem).
  The gem itself is not a Debian package and cannot be installed in a test, so the order
  of the requires is what is checked, not a run of the application.

Run: python3 tests/lint/test_docs.py (make lint runs it).
"""
import os
import re
import sys
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
OPERATING = os.path.join(ROOT, "doc", "operating.md")


def heredoc(text, name):
    """The body of `cat > NAME <<'EOF'` ... `EOF` in an indented block of text."""
    m = re.search(r"^(\s*)cat > %s <<'EOF'\n(.*?)^\1EOF$" % re.escape(name), text, re.S | re.M)
    if not m:
        return None
    indent = m.group(1)
    return "".join(line[len(indent):] if line.startswith(indent) else line
                   for line in m.group(2).splitlines(True))


def requires(ruby):
    """The features a Ruby text requires, in order."""
    return re.findall(r"""\brequire\s*\(?\s*["']([^"']+)["']""", ruby)


class WebUiRecipe(unittest.TestCase):
    def setUp(self):
        with open(OPERATING, encoding="utf-8") as fh:
            self.config_ru = heredoc(fh.read(), "config.ru")
        self.assertIsNotNone(self.config_ru, "no `cat > config.ru <<'EOF'` in doc/operating.md")

    def test_core_is_required_before_the_web_part(self):
        req = requires(self.config_ru)
        self.assertIn("cogworker/web", req, self.config_ru)
        self.assertIn("cogworker", req, "config.ru never requires \"cogworker\", so "
                      "Cogworker::Web fails with NameError:\n" + self.config_ru)
        self.assertLess(req.index("cogworker"), req.index("cogworker/web"), self.config_ru)


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]] + sys.argv[1:], verbosity=1)

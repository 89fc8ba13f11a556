# SPDX-License-Identifier: MIT
"""DOC — the recipes of doc/operating.md work as written: each block marked
`<!-- recipe: NAME -->` is run by sh, as a reader would paste it into an empty directory,
and what the text after it promises is checked (doc/behaviours.md group DOC).

Run: python3 tests/integration/run.py test_doc_recipes
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import REPO, binary, free_port, wait_for  # noqa: E402


def recipe(name):
    """The sh block that follows the marker of recipe NAME in doc/operating.md."""
    with open(os.path.join(REPO, "doc", "operating.md")) as f:
        text = f.read()
    m = re.search(r"<!-- recipe: %s -->\n```sh\n(.*?)\n```" % re.escape(name), text, re.S)
    if not m:
        raise AssertionError("doc/operating.md has no recipe %s" % name)
    return m.group(1)


class TLSRecipe(unittest.TestCase):

    def test_doc1_the_test_tls_redis_recipe(self):
        d = tempfile.mkdtemp(prefix="cw-recipe-")
        self.addCleanup(shutil.rmtree, d, True)
        port = free_port()
        script = recipe("tls-test-redis")
        self.assertIn("6380", script)
        # the reader's port, ours a free one: nothing else is changed
        p = subprocess.run(["sh", "-e", "-c", script.replace("6380", str(port))], cwd=d,
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        pidfile = os.path.join(d, "redis.pid")
        wait_for(lambda: os.path.exists(pidfile), timeout=10, message="redis-server started")
        with open(pidfile) as f:
            pid = int(f.read())
        self.addCleanup(lambda: os.kill(pid, signal.SIGKILL) if os.path.exists(
            "/proc/%d" % pid) else None)
        # the conf of the text, with the paths of that directory
        conf = os.path.join(d, "my.conf")
        with open(conf, "w") as f:
            f.write('redis = { url = "rediss://localhost:%d/0";\n'
                    '          tls = { ca_file = "%s/ca.crt";\n'
                    '                  cert_file = "%s/client.crt"; key_file = "%s/client.key";'
                    ' }; };\n'
                    'handlers = ( { class = "*"; command = [ "/bin/true" ]; } );\n'
                    % (port, d, d, d))
        env = dict(os.environ)
        env.pop("REDIS_URL", None)
        check = None

        def connected():
            nonlocal check
            check = subprocess.run([binary("cogworkerd"), "-c", conf, "--check", "--connect"],
                                   capture_output=True, text=True, timeout=30, env=env)
            return check.returncode == 0
        wait_for(connected, timeout=15, interval=0.3, message="--check --connect succeeded")
        out = check.stdout + check.stderr
        self.assertIn("connected to rediss://localhost:%d/0 (TLSv1.3" % port, out)
        self.assertIn("certificate /CN=localhost (verified)", out)
        ping = subprocess.run(["redis-cli", "--tls", "--cacert", "ca.crt", "--cert", "client.crt",
                               "--key", "client.key", "-p", str(port), "ping"], cwd=d,
                              capture_output=True, text=True, timeout=20)
        self.assertEqual(ping.stdout.strip(), "PONG", ping.stderr)


if __name__ == "__main__":
    unittest.main()

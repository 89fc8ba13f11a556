# SPDX-License-Identifier: MIT
"""`cogworkerctl metrics`: cogworker's Prometheus exposition (doc/behaviours.md group MET,
doc/protocol.md §7.26), read from a real redis-server: exact names, types and format, values
equal to what Redis holds.

MET-5 (the HTTP endpoint: 200, content type, 404) is tested with the daemon's endpoint in
test_service.py, which also checks that the endpoint and `cogworkerctl metrics` print the
same eight metrics.

Run: python3 tests/integration/run.py test_metrics
"""

import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import DaemonTestCase, binary, free_port, handler, job, wait_for  # noqa: E402

NAMES = ["cogworker_processed_total", "cogworker_failed_total", "cogworker_retry_size",
         "cogworker_scheduled_size", "cogworker_dead_size", "cogworker_queue_size",
         "cogworker_queue_latency_seconds", "cogworker_busy_workers"]
TYPES = {n: ("counter" if n.endswith("_total") else "gauge") for n in NAMES}
SAMPLE = re.compile(r'^([a-z_]+)(\{queue="((?:[^"\\]|\\.)*)"\})? (\S+)$')


def parse(text):
    """{name: type} and [(name, queue or None, value text)], failing on any other line."""
    types, samples = {}, []
    assert text.endswith("\n"), "the exposition ends with a newline"
    for line in text.splitlines():
        if line.startswith("#"):
            m = re.match(r"^# TYPE ([a-z_]+) (counter|gauge)$", line)
            assert m, "unexpected comment line %r" % line
            assert m.group(1) not in types, "two TYPE lines for %s" % m.group(1)
            types[m.group(1)] = m.group(2)
            continue
        m = SAMPLE.match(line)
        assert m, "not a sample line: %r" % line
        assert m.group(1) in types, "sample before its TYPE line: %r" % line
        samples.append((m.group(1), m.group(3), m.group(4)))
    return types, samples


class Metrics(DaemonTestCase):

    def setUp(self):
        super().setUp()
        self.conf = os.path.join(self.workdir, "ctl.conf")
        with open(self.conf, "w") as f:
            f.write("# empty\n")

    def metrics(self, *args, url=None, rc=0):
        env = dict(os.environ, REDIS_URL=url or self.server.url)
        p = subprocess.run([binary("cogworkerctl"), "-c", self.conf] + list(args) + ["metrics"],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        self.assertEqual(p.returncode, rc, p.stderr)
        return p.stdout.decode(), p.stderr.decode()

    def value(self, samples, name, queue=None):
        vals = [v for n, q, v in samples if n == name and q == queue]
        self.assertEqual(len(vals), 1, (name, queue, samples))
        return vals[0]

    def test_met1_exact_exposition_of_a_nearly_empty_redis(self):
        self.r.set("cogworker:stats:processed", 1)
        out, err = self.metrics()
        self.assertEqual(err, "")
        self.assertEqual(out, "".join([
            "# TYPE cogworker_processed_total counter\n", "cogworker_processed_total 1\n",
            "# TYPE cogworker_failed_total counter\n", "cogworker_failed_total 0\n",
            "# TYPE cogworker_retry_size gauge\n", "cogworker_retry_size 0\n",
            "# TYPE cogworker_scheduled_size gauge\n", "cogworker_scheduled_size 0\n",
            "# TYPE cogworker_dead_size gauge\n", "cogworker_dead_size 0\n",
            "# TYPE cogworker_queue_size gauge\n",
            "# TYPE cogworker_queue_latency_seconds gauge\n",
            "# TYPE cogworker_busy_workers gauge\n", "cogworker_busy_workers 0\n"]))

    def test_met1_one_type_line_per_metric_and_no_help(self):
        self.r.set("cogworker:stats:processed", 1)
        self.r.set("cogworker:stats:failed", 4)
        self.r.sadd("cogworker:queues", "default", "low")
        out, _ = self.metrics()
        self.assertNotIn("# HELP", out)
        types, samples = parse(out)
        self.assertEqual(types, TYPES)
        self.assertIn("cogworker_processed_total 1\n", out)
        self.assertEqual(self.value(samples, "cogworker_failed_total"), "4")
        self.assertEqual(out.count("# TYPE "), 8)

    def test_met2_queues_sorted_by_name_latency_three_decimals(self):
        self.r.sadd("cogworker:queues", "b", "a")
        old = time.time() - 12.5
        self.r.lpush("cogworker:queue:a", job("W", queue="a", enqueued_at=old))
        self.r.lpush("cogworker:queue:a", job("W", queue="a"))
        self.r.lpush("cogworker:queue:unlisted", job("W"))    # not in cogworker:queues
        out, _ = self.metrics()
        _, samples = parse(out)
        sizes = [(q, v) for n, q, v in samples if n == "cogworker_queue_size"]
        self.assertEqual(sizes, [("a", "2"), ("b", "0")])
        self.assertLess(out.index('cogworker_queue_size{queue="a"} 2'),
                        out.index('cogworker_queue_size{queue="b"} 0'))
        lat_a = self.value(samples, "cogworker_queue_latency_seconds", "a")
        self.assertRegex(lat_a, r"^\d+\.\d{3}$")
        self.assertGreaterEqual(float(lat_a), 12.0)      # the oldest job's age
        self.assertLess(float(lat_a), 30)
        self.assertEqual(self.value(samples, "cogworker_queue_latency_seconds", "b"), "0.000")

    def test_met2_latency_falls_back_to_created_at_and_floors_at_zero(self):
        self.r.sadd("cogworker:queues", "c", "f", "x")
        j = json.loads(job("W"))
        del j["enqueued_at"]
        j["created_at"] = time.time() - 20
        self.r.lpush("cogworker:queue:c", json.dumps(j))
        self.r.lpush("cogworker:queue:f", job("W", enqueued_at=time.time() + 3600))
        self.r.lpush("cogworker:queue:x", "{not json")
        _, samples = parse(self.metrics()[0])
        self.assertGreaterEqual(float(self.value(samples, "cogworker_queue_latency_seconds",
                                                 "c")), 19.0)
        self.assertEqual(self.value(samples, "cogworker_queue_latency_seconds", "f"), "0.000")
        self.assertEqual(self.value(samples, "cogworker_queue_latency_seconds", "x"), "0.000")
        self.assertEqual(self.value(samples, "cogworker_queue_size", "x"), "1")

    def test_met3_set_sizes_are_the_zcards(self):
        self.r.zadd("cogworker:retry", {"r%d" % i: i for i in range(3)})
        self.r.zadd("cogworker:schedule", {"s%d" % i: i for i in range(5)})
        self.r.zadd("cogworker:dead", {"d0": 1})
        _, samples = parse(self.metrics()[0])
        for name, key in (("cogworker_retry_size", "cogworker:retry"),
                          ("cogworker_scheduled_size", "cogworker:schedule"),
                          ("cogworker_dead_size", "cogworker:dead")):
            self.assertEqual(int(self.value(samples, name)), self.r.zcard(key))
        self.assertEqual(self.value(samples, "cogworker_scheduled_size"), "5")

    def test_met4_busy_sums_live_processes_only(self):
        for ident, busy in (("h:1:aaaaaaaaaaaa", "2"), ("h:2:bbbbbbbbbbbb", "1")):
            self.r.hset("cogworker:process:" + ident,
                        mapping={"info": "{}", "busy": busy, "quiet": "false"})
            self.r.expire("cogworker:process:" + ident, 60)
            self.r.sadd("cogworker:processes", ident)
        self.r.sadd("cogworker:processes", "h:3:cccccccccccc")     # presence gone
        _, samples = parse(self.metrics()[0])
        self.assertEqual(self.value(samples, "cogworker_busy_workers"), "3")
        # reading metrics changes nothing
        self.assertEqual(self.r.scard("cogworker:processes"), 3)

    def test_met4_busy_of_a_live_daemon_running_a_job(self):
        d = self.daemon(handlers=[{"class": "G", "command": handler("gate")}],
                        heartbeat_interval=1)
        j = job("G")
        self.r.lpush("cogworker:queue:default", j)

        def busy():
            _, samples = parse(self.metrics()[0])
            return self.value(samples, "cogworker_busy_workers") == "1"
        wait_for(busy, timeout=5, message="busy_workers 1")
        d.open_gate(json.loads(j)["jid"])
        wait_for(lambda: self.r.get("cogworker:stats:processed") == b"1")

        def done():
            _, samples = parse(self.metrics()[0])
            return (self.value(samples, "cogworker_busy_workers") == "0" and
                    self.value(samples, "cogworker_processed_total") == "1")
        wait_for(done, timeout=5, message="busy_workers 0, processed 1")

    def test_label_values_are_escaped(self):
        self.r.sadd("cogworker:queues", 'we"ird\\q')
        out, _ = self.metrics()
        self.assertIn('cogworker_queue_size{queue="we\\"ird\\\\q"} 0\n', out)
        parse(out)

    def test_errors_exit_2_with_one_line(self):
        self.r.set("cogworker:dead", "oops")
        out, err = self.metrics(rc=2)
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1)
        self.assertRegex(err, r"^cogworkerctl: .*cogworker:dead.*WRONGTYPE")
        out, err = self.metrics(url="redis://127.0.0.1:%d/0" % free_port(), rc=2)
        self.assertEqual(out, "")
        self.assertRegex(err, r"^cogworkerctl: connect to .* failed")
        out, err = self.metrics("--json", rc=2)
        self.assertIn("Prometheus text", err)


if __name__ == "__main__":
    unittest.main()

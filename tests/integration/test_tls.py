# SPDX-License-Identifier: MIT
"""Redis over TLS (doc/behaviours.md TL-2 to TL-8 and TL-11; TL-1 is unit/test_config.c,
TL-10 unit/test_rlink.c; doc/design.md "Redis"): real redis-servers serving TLS only on
their TCP port (--port 0, --tls-port, tls-auth-clients yes), with certificates this file
makes with openssl (tlskit.py: a CA, a server certificate, a client certificate, an expired
one, one for another name, a client certificate from an unknown CA). The tests' own connections speak TLS too, or use the
server's unix socket, which stays plain.

The classes at the end run other files' classes again over TLS (RedisTestCase.tls): CLIENT
KILL mid-run and a restart (test_redis_faults.py), CLIENT UNBLOCK of parked fetchers,
keyspace notifications and cogworkerctl pauses (test_ontime.py), the reliable fetch's
pipelines and scripts (test_fetch.py): the guarantees of the connection layer hold in TLS.

Run: python3 tests/integration/run.py test_tls
"""

import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import test_fetch  # noqa: E402
import test_ontime  # noqa: E402
import test_redis_faults  # noqa: E402
from harness import (Daemon, DaemonTestCase, RedisServer, binary, handler, job,  # noqa: E402
                     wait_for)
from observe import TcpProxy  # noqa: E402
from tlskit import PKI  # noqa: E402

OK = [{"class": "Ok", "command": handler("ok")}]
FAST = {"connect_timeout": 1.0, "command_timeout": 2.0}


def ctl(*args, conf=None, env=None, input=None):
    e = dict(os.environ)
    e.pop("REDIS_URL", None)
    e.update(env or {})
    argv = [binary("cogworkerctl")] + (["-c", conf] if conf else []) + list(args)
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, env=e, input=input)


def check_connect(d):
    """cogworkerd --check --connect on d's conf (written, not started)."""
    d.write_conf()
    e = dict(os.environ)
    e.pop("REDIS_URL", None)
    return subprocess.run([binary("cogworkerd"), "-c", d.conf_path, "--check", "--connect"],
                          capture_output=True, text=True, timeout=30, env=e)


class TLSCase(DaemonTestCase):
    tls = True

    def tls_conf(self, **extra):
        return dict(FAST, tls=self.pki.conf(**extra))


class EndToEnd(TLSCase):

    def test_tl2_jobs_run_over_tls_with_client_certificates(self):
        d = self.daemon(handlers=OK, concurrency=2, redis=self.tls_conf())
        self.assertIn("redis=rediss://127.0.0.1:%d/0" % self.server.port,
                      d.log_lines("started, identity=")[0])
        jobs = [job("Ok") for _ in range(20)]
        for j in jobs:
            self.push(j)
        # cogworkerctl with the daemon's conf, over TLS too
        p = ctl("push", "Ok", conf=d.conf_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        jids = [j.split('"jid":"')[1][:24] for j in jobs] + [p.stdout.strip()]
        wait_for(lambda: all(d.runs_of(j) == 1 for j in jids), timeout=10,
                 message="every job to run once")
        wait_for(lambda: self.r.get(b"cogworker:stats:processed") == b"21", timeout=5)
        p = ctl("stats", "--json", conf=d.conf_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn('"processed":21', p.stdout.replace(" ", ""))
        # A TLS-only server: every daemon connection on its TCP port is TLS.
        self.assertGreaterEqual(len([c for c in self.r.client_list()
                                     if c["addr"].startswith("127.0.0.1")]), 4)
        self.assertEqual(d.stop(), 0)

    def test_tl3_check_connect_says_how_it_connected(self):
        d = Daemon(self.server, self.workdir, handlers=OK, redis=self.tls_conf())
        p = check_connect(d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, r"redis: connected to rediss://127\.0\.0\.1:%d/0 \(TLSv1\.3 "
                         r".*certificate .*CN ?= ?localhost \(verified\)\), PING answered"
                         % self.server.port)

    def test_tl7_cogworkerctl_url_and_tls_flags(self):
        env = {"REDIS_URL": self.server.url}
        flags = ["--tls-ca-file", self.pki.path("ca"), "--tls-cert-file", self.pki.path("client"),
                 "--tls-key-file", self.pki.path("client", "key")]
        p = ctl(*flags, "push", "Ok", env=env)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.r.llen(b"cogworker:queue:default"), 1)
        # Without the client certificate the server refuses us, and says so.
        p = ctl(*flags[:2], "stats", env=env)
        self.assertEqual(p.returncode, 2)
        self.assertIn("connect to rediss://127.0.0.1:%d/0 failed: the server wants a client "
                      "certificate" % self.server.port, p.stderr)
        # TLS flags with a plain url: refused before anything is sent.
        p = ctl(*flags, "stats", env={"REDIS_URL": "redis://127.0.0.1:%d/0" % self.server.port})
        self.assertEqual(p.returncode, 2)
        self.assertIn("--tls-* options are given, but REDIS_URL is not rediss://", p.stderr)

    def test_tl5_key_file_open_to_others_is_refused(self):
        key = os.path.join(self.workdir, "client.key")
        with open(self.pki.path("client", "key")) as src, open(key, "w") as dst:
            dst.write(src.read())
        os.chmod(key, 0o644)
        d = Daemon(self.server, self.workdir, handlers=OK,
                   redis=dict(FAST, tls=self.pki.conf(key_file=key)))
        d.write_conf()
        p = subprocess.run([binary("cogworkerd"), "-c", d.conf_path, "--check"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.returncode, 2)
        self.assertIn("%s:1: redis.tls.key_file '%s' is open to others (mode 0644)"
                      % (d.conf_path, key), p.stderr)
        os.chmod(key, 0o600)
        p = check_connect(d)
        self.assertEqual(p.returncode, 0, p.stderr)


# Saves its stdin (the job as fetched) and prints about 1 MB of random base64 lines, saved
# too, so that what came in and what was kept can be compared byte for byte.
BIG = {"class": "Big", "command": ["/bin/sh", "-c",
       'cat > "$GATES/$COGWORKER_JID.in"; head -c 786432 /dev/urandom | base64 '
       '> "$GATES/$COGWORKER_JID.out"; cat "$GATES/$COGWORKER_JID.out"; '
       'echo "$COGWORKER_JID" >> "$RUNS"']}


class BigOverTLS(TLSCase):
    """TL-11: jobs and replies of hundreds of TLS records (one carries 16 KiB)."""

    def test_tl11_megabyte_jobs_and_output_over_tls(self):
        d = self.daemon(handlers=[BIG], concurrency=2, output_keep=4 << 20,
                        redis=self.tls_conf())
        arg = os.urandom(600 * 1024).hex()              # 1.2 MB of args
        raw = job("Big", [arg])
        self.push(raw)                                  # self.r speaks TLS too
        pushed = json.loads(raw)["jid"]
        p = ctl("push", "--stdin", "Big", conf=d.conf_path,
                input=json.dumps([arg[::-1]]) + "\n")
        self.assertEqual(p.returncode, 0, p.stderr)
        by_ctl = p.stdout.split()[-1]
        wait_for(lambda: d.runs_of(pushed) == 1 and d.runs_of(by_ctl) == 1, timeout=30,
                 message="both big jobs run")
        for jid, want in ((pushed, arg), (by_ctl, arg[::-1])):
            with open(os.path.join(d.gates, jid + ".in"), "rb") as f:
                got = f.read()
            if jid == pushed:
                self.assertEqual(got, raw.encode(), "the job reached the handler as pushed")
            self.assertEqual(json.loads(got)["args"], [want])
            with open(os.path.join(d.gates, jid + ".out"), "rb") as f:
                printed = f.read()
            self.assertGreater(len(printed), 1 << 20)
            # kept by the daemon over TLS, read back by cogworkerctl over TLS
            def finished():
                p = ctl("jobs", "log", jid, "--json", conf=d.conf_path)
                return p.returncode == 0 and json.loads(p.stdout)["outcome"] == "success"
            wait_for(finished, timeout=15, message="the run's output kept")
            log = ctl("jobs", "log", jid, conf=d.conf_path)
            self.assertEqual(log.returncode, 0, log.stderr)
            self.assertEqual(log.stdout, printed.decode(), "the output read back whole")
        self.assertEqual(self.r.zcard(b"cogworker:dead"), 0)
        self.assertEqual(self.r.zcard(b"cogworker:retry"), 0)


class NoVerify(DaemonTestCase):
    """TL-6: verify = false reaches a server whose certificate names another host, and
    says at start and in --check what that costs."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pki = PKI()
        cls.addClassCleanup(cls.pki.stop)
        cls.tserver = RedisServer(tls=cls.pki.serving("wrongname"))
        cls.addClassCleanup(cls.tserver.stop)

    def test_tl6_verify_false_warns_and_works(self):
        conf = dict(FAST, tls=self.pki.conf(verify=False))
        d = Daemon(self.tserver, self.workdir, handlers=OK, redis=conf)
        self.daemons.append(d)
        p = check_connect(d)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("warning: %s:1: redis.tls.verify = false: the server's certificate is not "
                      "checked" % d.conf_path, p.stderr)
        self.assertIn("(NOT verified)", p.stdout)
        d.start()
        self.assertEqual(len(d.log_lines("WARN: %s:1: redis.tls.verify = false" % d.conf_path)), 1)
        p = ctl("push", "Ok", conf=d.conf_path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("redis.tls.verify = false", p.stderr)
        wait_for(lambda: d.runs_of(p.stdout.strip()) == 1, timeout=10)
        # The same conf with verify on: the name is checked, and refused.
        d2 = Daemon(self.tserver, self.workdir, handlers=OK,
                    redis=dict(FAST, tls=self.pki.conf()))
        p = check_connect(d2)
        self.assertEqual(p.returncode, 1)
        self.assertIn("the server's certificate is not for 127.0.0.1", p.stderr)


class Refusals(DaemonTestCase):
    """TL-4: each way a TLS connection can be wrong is named, with the endpoint, by
    `--check --connect` (exit 1) and in the daemon's log, and the daemon keeps retrying
    with its backoff: alive, one line per log site, and a bounded rate of connects (counted
    by a TCP proxy in front of the server: Redis counts no connection whose handshake
    failed)."""

    WATCH = 4.0     # seconds the daemon runs against the refusing server
    MAX_CONNECTS = 150  # in WATCH s; each thread backs off to 2 s (a loop makes thousands)

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.pki = PKI()
        cls.addClassCleanup(cls.pki.stop)

    def tserver(self, cert="server", auth_clients=True, port=None):
        s = RedisServer(tls=self.pki.serving(cert, auth_clients), port=port)
        self.addCleanup(s.stop)
        return s

    def proxy(self, server, scheme):
        """A counting proxy to server, and the url of a daemon that goes through it."""
        p = TcpProxy(server.port)
        self.addCleanup(p.close)
        return p, "%s://127.0.0.1:%d/0" % (scheme, p.port)

    def refused_daemon(self, server, url, tls, reason):
        """A daemon on url, checked first with --check --connect; not started."""
        redis = dict(FAST)
        if tls is not None:
            redis["tls"] = tls
        d = Daemon(server, self.workdir, url=url, handlers=OK, concurrency=2, redis=redis)
        self.daemons.append(d)
        p = check_connect(d)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn("cogworkerd: redis: ", p.stderr)
        self.assertIn(url, p.stderr)
        self.assertIn(reason, p.stderr)
        return d

    def assert_retrying(self, d, proxy, url, reason):
        """d runs WATCH seconds against the proxy: alive, the reason logged with the
        endpoint once per site, connects bounded by the backoff."""
        before = proxy.accepted
        time.sleep(self.WATCH)
        self.assertIsNone(d.proc.poll(), d.log()[-2000:])
        made = proxy.accepted - before
        down = d.log_lines("Redis unavailable")
        self.assertTrue(any(url in l and reason in l for l in down), d.log()[-3000:])
        sites = [l.split(": Redis unavailable")[0].split(": ", 1)[1] for l in down]
        self.assertEqual(len(sites), len(set(sites)), "a site logged twice:\n" + "\n".join(down))
        self.assertLess(made, self.MAX_CONNECTS, "connections in %gs" % self.WATCH)
        sys.stderr.write("\n    [tls] %s: %d connections in %gs, %d log lines\n"
                         % (reason[:40], made, self.WATCH, len(down)))

    def assert_refused(self, server, scheme, tls, reason):
        proxy, url = self.proxy(server, scheme)
        d = self.refused_daemon(server, url, tls, reason)
        d.start(wait=False)
        self.assert_retrying(d, proxy, url, reason)
        d.kill()

    def test_tl4_unknown_ca(self):
        s = self.tserver(auth_clients=False)
        self.assert_refused(s, "rediss", {"ca_file": self.pki.path("otherca")},
                            "the server's certificate is not signed by a CA we trust")

    def test_tl4_expired_certificate(self):
        s = self.tserver("expired", auth_clients=False)
        self.assert_refused(s, "rediss", self.pki.conf(cert=None),
                            "the server's certificate has expired")

    def test_tl4_name_mismatch(self):
        s = self.tserver("wrongname", auth_clients=False)
        self.assert_refused(s, "rediss", self.pki.conf(cert=None),
                            "the server's certificate is not for 127.0.0.1")

    def test_tl4_plaintext_server_on_a_tls_url(self):
        s = RedisServer()
        self.addCleanup(s.stop)
        self.assert_refused(s, "rediss", self.pki.conf(cert=None),
                            "no TLS handshake within 1s (a plaintext port? then the url is "
                            "redis://)")

    def test_tl4_missing_client_certificate(self):
        s = self.tserver()
        self.assert_refused(s, "rediss", self.pki.conf(cert=None),
                            "the server wants a client certificate")

    def test_tl4_client_certificate_of_an_unknown_ca(self):
        s = self.tserver()
        self.assert_refused(s, "rediss", self.pki.conf(cert="stranger"),
                            "the server refused our client certificate")

    def test_tl4_server_turned_to_tls_under_a_running_daemon(self):
        """A TLS server on a redis:// url accepts the connection and resets it at the
        first command: every thread of a running daemon meets that, and must back off
        rather than reconnect at once in a loop."""
        plain = RedisServer()
        self.addCleanup(plain.stop)
        proxy, url = self.proxy(plain, "redis")
        d = Daemon(plain, self.workdir, url=url, handlers=OK, concurrency=2, redis=FAST,
                   heartbeat_interval=1)
        self.daemons.append(d)
        d.start()
        port = plain.port
        plain.stop()
        self.tserver(auth_clients=False, port=port)
        reason = "before any reply (a TLS port? then the url is rediss://)"
        self.assert_retrying(d, proxy, url, reason)
        d2 = Daemon(plain, self.workdir, url="redis://127.0.0.1:%d/0" % port, handlers=OK,
                    redis=FAST)
        p = check_connect(d2)
        self.assertEqual(p.returncode, 1)
        self.assertIn("127.0.0.1:%d/0: Connection reset by peer %s" % (port, reason), p.stderr)


# -- the guarantees of the connection layer, over TLS (TL-8)

class ConnectionKillsOverTLS(test_redis_faults.ConnectionKills):
    tls = True


class ServerRestartOverTLS(test_redis_faults.ServerRestart):
    tls = True


class QuietAndStopWhileBlockedOverTLS(test_ontime.QuietAndStopWhileBlocked):
    tls = True


class ScheduledWithNotificationsOverTLS(test_ontime.ScheduledWithNotifications):
    tls = True


class PauseResumeOverTLS(test_ontime.PauseResume):
    tls = True


class ReliableFetchOverTLS(test_fetch.ReliableFetch):
    tls = True


if __name__ == "__main__":
    unittest.main()

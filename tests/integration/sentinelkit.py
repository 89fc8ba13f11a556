# SPDX-License-Identifier: MIT
"""Redis Sentinel for the integration tests (test_sentinel.py): a primary, a replica and
three sentinels on loopback ports, all private like harness.RedisServer, and a producer
that follows the primary the way a careful client would. Not a test file itself.

    s = SentinelSet()                  # primary + replica + 3 sentinels, ready to fail over
    s.conf()                           # the daemon's redis = { ... } settings for it
    old, new, took = s.failover()      # SENTINEL FAILOVER; returns once a sentinel says so
    old, new, took = s.kill_primary()  # SIGKILL the primary; returns once a sentinel says so
    s.stop()

Every server has a password (and the sentinels another one), and the daemons use db 3, so
the tests also check how the url's credentials and db combine with discovery. Sentinel
timings are short (down-after-milliseconds 1000) so that a failover takes about 1-3 s.

    s = SentinelSet(tls=pki)           # the same in TLS only (tlskit.PKI): servers,
                                       # replication, sentinels and their clients
"""

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import redis

from harness import RedisServer, job, new_jid, wait_for

REDIS_SENTINEL = os.environ.get("REDIS_SENTINEL", "redis-sentinel")
MASTER = "cwmaster"
DATA_PASSWORD = "data-secret"
SENTINEL_PASSWORD = "sentinel-secret"
DB = 3
QUEUE = b"cogworker:queue:default"


class SentinelServer(RedisServer):
    """One redis-sentinel monitoring MASTER at 127.0.0.1:<master_port> (quorum 2)."""

    def __init__(self, master_port, down_after_ms=1000, failover_timeout_ms=10000, tls=None):
        self.master_port = master_port
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        super().__init__(password=SENTINEL_PASSWORD, tls=tls)

    def _argv(self):
        conf = os.path.join(self.dir, "sentinel.conf")     # sentinel rewrites it: its own
        ports = "port %d\n" % self.port
        if self.tls:
            ports = "port 0\ntls-port %d\n%s" % (self.port, self.tls.pki.sentinel_conf())
        with open(conf, "w") as f:
            f.write(ports)
            f.write("bind 127.0.0.1\ndir %s\nrequirepass %s\nsentinel sentinel-pass %s\n"
                    "sentinel monitor %s 127.0.0.1 %d 2\n"
                    "sentinel auth-pass %s %s\n"
                    "sentinel down-after-milliseconds %s %d\n"
                    "sentinel failover-timeout %s %d\n"
                    % (self.dir, SENTINEL_PASSWORD, SENTINEL_PASSWORD, MASTER,
                       self.master_port,
                       MASTER, DATA_PASSWORD, MASTER, self.down_after_ms, MASTER,
                       self.failover_timeout_ms))
        return [REDIS_SENTINEL, conf]


def data_server_args(replica_of=None):
    # No 5 s wait before a full sync (Redis 7's default): failovers resync at once.
    extra = ["--masterauth", DATA_PASSWORD, "--repl-diskless-sync-delay", "0"]
    if replica_of:
        extra += ["--replicaof", "127.0.0.1", str(replica_of)]
    return extra


def data_server(replica_of=None, tls=None):
    return RedisServer(extra_args=data_server_args(replica_of), password=DATA_PASSWORD, tls=tls)


class SentinelSet:
    def __init__(self, tls=None):
        self.servers = {}               # port -> RedisServer (data servers, dead ones too)
        self.sentinels = []
        self.tls = tls.serving() if tls else None
        try:
            primary = data_server(tls=self.tls)
            self.servers[primary.port] = primary
            replica = data_server(replica_of=primary.port, tls=self.tls)
            self.servers[replica.port] = replica
            wait_for(lambda: replica.client().info("replication")["master_link_status"] == "up",
                     timeout=10, message="the replica in sync")
            self.sentinels = [SentinelServer(primary.port, tls=self.tls) for _ in range(3)]
            self.wait_ready(primary.port)
        except Exception:
            self.stop()
            raise

    # -- addresses and clients

    @property
    def addresses(self):
        return ["127.0.0.1:%d" % s.port for s in self.sentinels]

    def conf(self, **extra):
        """The redis = { ... } settings of a daemon or cogworkerctl using these sentinels."""
        c = {"sentinels": self.addresses, "master_name": MASTER,
             "sentinel_password": SENTINEL_PASSWORD,
             "connect_timeout": 1.0, "command_timeout": 2.0}
        if self.tls:
            c.update(sentinel_tls=True, tls=self.tls.daemon_conf())
        c.update(extra)
        return c

    @property
    def url(self):
        return "%s://:%s@%s/%d" % ("rediss" if self.tls else "redis", DATA_PASSWORD, MASTER, DB)

    def client(self, port, name="test"):
        return redis.Redis(host="127.0.0.1", port=port, password=DATA_PASSWORD, db=DB,
                           socket_timeout=5, client_name=name, **self.tls_kwargs())

    def sentinel_client(self, s):
        return redis.Redis(host="127.0.0.1", port=s.port, password=SENTINEL_PASSWORD,
                           socket_timeout=2, **self.tls_kwargs())

    def tls_kwargs(self):
        return self.tls.client_kwargs() if self.tls else {}

    def primary_port(self, s=None):
        """The primary's port as sentinel s (default: each in turn) names it, or None."""
        for sen in ([s] if s else self.sentinels):
            try:
                c = self.sentinel_client(sen)
                try:
                    addr = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
                finally:
                    c.close()
                return int(addr[1])
            except (redis.RedisError, OSError, TypeError):
                continue
        return None

    # -- readiness

    def _ready(self, primary):
        for s in self.sentinels:
            c = self.sentinel_client(s)
            try:
                m = c.execute_command("SENTINEL", "MASTER", MASTER)
                m = dict(zip(m[0::2], m[1::2]))
                if int(m[b"port"]) != primary or b"down" in m[b"flags"]:
                    return False
                if int(m[b"num-other-sentinels"]) != 2 or int(m[b"num-slaves"]) < 1:
                    return False
                good = [r for r in c.execute_command("SENTINEL", "REPLICAS", MASTER)
                        if b"down" not in dict(zip(r[0::2], r[1::2]))[b"flags"] and
                        dict(zip(r[0::2], r[1::2]))[b"master-link-status"] == b"ok"]
                if not good:
                    return False
            except redis.RedisError:
                return False
            finally:
                c.close()
        return True

    def wait_ready(self, primary, timeout=30):
        """Every sentinel knows the primary, the two others and a replica in sync."""
        wait_for(lambda: self._ready(primary), timeout=timeout, interval=0.1,
                 message="the sentinels ready to fail over")

    def _wait_switch(self, old, t0, timeout):
        """(new port, seconds from t0) once any sentinel names a new primary."""
        new = wait_for(lambda: next((p for p in (self.primary_port(s) for s in self.sentinels)
                                     if p and p != old), None),
                       timeout=timeout, interval=0.02, message="a sentinel to name a new primary")
        return new, time.monotonic() - t0

    # -- failovers

    def failover(self, timeout=30):
        """SENTINEL FAILOVER (retried while a sentinel finds no good replica yet):
        (old port, new port, seconds until a sentinel named the new primary)."""
        old = self.primary_port()
        deadline = time.monotonic() + timeout
        while True:
            c = self.sentinel_client(self.sentinels[0])
            try:
                t0 = time.monotonic()
                c.execute_command("SENTINEL", "FAILOVER", MASTER)
                break
            except redis.ResponseError as e:    # NOGOODSLAVE, INPROG: not yet
                if time.monotonic() > deadline:
                    raise AssertionError("SENTINEL FAILOVER refused: %s" % e)
                time.sleep(0.2)
            finally:
                c.close()
        new, took = self._wait_switch(old, t0, timeout)
        return old, new, took

    def kill_primary(self, timeout=30):
        """SIGKILL the primary: (old port, new port, seconds until a sentinel named the new
        primary). The dead server stays in self.servers (restart_as_replica brings it back)."""
        old = self.primary_port()
        srv = self.servers[old]
        t0 = time.monotonic()
        srv.proc.send_signal(signal.SIGKILL)
        srv.proc.wait()
        srv.proc = None
        new, took = self._wait_switch(old, t0, timeout)
        return old, new, took

    def restart_as_replica(self, port, of):
        """Start a killed server again, replicating from `of` (as an operator would)."""
        srv = self.servers[port]
        srv.extra_args = data_server_args(of)
        srv.restart()

    def stop(self):
        for s in self.sentinels + list(self.servers.values()):
            s.stop()


class Producer(threading.Thread):
    """Pushes `rate` jobs of class cls a second to the primary the sentinels name, asking
    them before every push (so it follows a switch as soon as a sentinel announces it). Each
    acknowledged push is recorded as (jid, port of the server that acknowledged it,
    monotonic time); a refused one (READONLY, connection refused) as (jid, error)."""

    def __init__(self, sset, cls="Ok", rate=40):
        super().__init__(daemon=True)
        self.sset, self.cls, self.every = sset, cls, 1.0 / rate
        self.acked, self.refused = [], []
        self.conns = {}
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            jid = new_jid()
            port = self.sset.primary_port()
            try:
                if port is None:
                    raise redis.ConnectionError("no sentinel answered")
                c = self.conns.get(port) or self.conns.setdefault(
                    port, self.sset.client(port, name="producer"))
                c.lpush(QUEUE, job(self.cls, jid=jid))
                self.acked.append((jid, port, time.monotonic()))
            except redis.RedisError as e:
                self.conns.pop(port, None)
                self.refused.append((jid, str(e)))
            self.halt.wait(self.every)

    def stop(self):
        self.halt.set()
        self.join(10)
        for c in self.conns.values():
            c.close()


def daemon_clients(client):
    """Client connections of daemons on a server: unnamed ones, not replicas or sentinels
    (the tests name their own connections)."""
    out = []
    for cl in client.client_list():
        if cl.get("name") or "S" in cl.get("flags", "") or "M" in cl.get("flags", ""):
            continue
        out.append(cl)
    return out


class Workdir:
    """A temp dir removed at exit."""

    def __init__(self):
        self.path = tempfile.mkdtemp(prefix="cw-sentinel-")

    def remove(self):
        shutil.rmtree(self.path, ignore_errors=True)

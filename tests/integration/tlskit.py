# SPDX-License-Identifier: MIT
"""TLS for the integration tests (test_tls.py, the TLS round of test_sentinel.py, the
soak and the bench): certificates made with the openssl command line, and the arguments a
redis-server or redis-sentinel needs to serve them. Not a test file itself.

    pki = PKI()                        # a CA and every certificate below, in a temp dir
    RedisServer(tls=pki.serving())     # TLS only (--port 0), client certificates required
    RedisServer(tls=pki.serving("expired", auth_clients=False))
    pki.conf()                         # the daemon's redis.tls = { ... } settings
    pki.stop()

Certificates, each with its key (mode 0600) in pki.dir:
  ca            the CA every good certificate is signed by
  server        for localhost and 127.0.0.1
  client        a client certificate from the CA
  expired       for localhost and 127.0.0.1, valid for one day in 2020
  wrongname     for elsewhere.example only
  otherca       a second CA, unknown to the servers
  stranger      a client certificate from otherca (a server refuses it)
"""

import os
import shutil
import subprocess
import tempfile

OPENSSL = os.environ.get("OPENSSL", "openssl")
EC = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]


def _run(cwd, *argv):
    p = subprocess.run([OPENSSL] + list(argv), cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError("openssl %s: %s" % (" ".join(argv), p.stderr))


class PKI:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="cw-pki-")
        try:
            self._make()
        except Exception:
            self.stop()
            raise

    def path(self, name, ext="crt"):
        return os.path.join(self.dir, "%s.%s" % (name, ext))

    def _ca(self, name):
        _run(self.dir, "req", "-x509", *EC, "-keyout", name + ".key", "-out", name + ".crt",
             "-days", "3", "-subj", "/CN=cogworkerd test %s" % name)

    def _signed(self, name, cn, san, ca="ca"):
        _run(self.dir, "req", *EC, "-keyout", name + ".key", "-out", name + ".csr",
             "-subj", "/CN=" + cn)
        ext = os.path.join(self.dir, name + ".ext")
        with open(ext, "w") as f:
            f.write("subjectAltName=%s\n" % san)
        _run(self.dir, "x509", "-req", "-in", name + ".csr", "-CA", ca + ".crt",
             "-CAkey", ca + ".key", "-CAcreateserial", "-days", "2", "-extfile", ext,
             "-out", name + ".crt")

    def _expired(self):
        """openssl x509 cannot backdate; `openssl ca` with its own small database can."""
        db = os.path.join(self.dir, "db")
        os.mkdir(db)
        open(os.path.join(db, "index.txt"), "w").close()
        with open(os.path.join(db, "serial"), "w") as f:
            f.write("1000\n")
        cnf = os.path.join(self.dir, "ca.cnf")
        with open(cnf, "w") as f:
            f.write("[ca]\ndefault_ca = c\n[c]\ndatabase = db/index.txt\nserial = db/serial\n"
                    "new_certs_dir = db\ndefault_md = sha256\npolicy = p\n"
                    "copy_extensions = copy\n[p]\ncommonName = supplied\n")
        _run(self.dir, "req", *EC, "-keyout", "expired.key", "-out", "expired.csr",
             "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1")
        _run(self.dir, "ca", "-batch", "-config", cnf, "-cert", "ca.crt", "-keyfile", "ca.key",
             "-in", "expired.csr", "-out", "expired.crt", "-startdate", "20200101000000Z",
             "-enddate", "20200102000000Z")

    def _make(self):
        self._ca("ca")
        self._ca("otherca")
        self._signed("server", "localhost", "DNS:localhost,IP:127.0.0.1")
        self._signed("client", "cogworkerd", "DNS:cogworkerd")
        self._signed("wrongname", "elsewhere.example", "DNS:elsewhere.example")
        self._signed("stranger", "stranger", "DNS:stranger", ca="otherca")
        self._expired()
        for f in os.listdir(self.dir):
            if f.endswith(".key"):
                os.chmod(os.path.join(self.dir, f), 0o600)

    # -- what servers and clients are given

    def serving(self, cert="server", auth_clients=True):
        """What a harness.RedisServer serves TLS with (its tls argument)."""
        return Serving(self, cert, auth_clients)

    def sentinel_conf(self):
        """The lines of a sentinel.conf that make the sentinel speak TLS only, to its
        clients, to the other sentinels and to the servers it watches."""
        return ("tls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
                "tls-auth-clients yes\ntls-replication yes\n"
                % (self.path("server"), self.path("server", "key"), self.path("ca")))

    def client_kwargs(self, cert="client"):
        """redis.Redis keyword arguments for a TLS connection as the tests make them."""
        return {"ssl": True, "ssl_ca_certs": self.path("ca"), "ssl_certfile": self.path(cert),
                "ssl_keyfile": self.path(cert, "key"), "ssl_cert_reqs": "required"}

    def conf(self, cert="client", **extra):
        """The daemon's redis.tls group."""
        c = {"ca_file": self.path("ca")}
        if cert:
            c.update(cert_file=self.path(cert), key_file=self.path(cert, "key"))
        c.update(extra)
        return c

    def stop(self):
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None


class Serving:
    """A server's certificate and whether it asks for the client's."""

    def __init__(self, pki, cert, auth_clients):
        self.pki, self.cert, self.auth_clients = pki, cert, auth_clients

    def server_args(self):
        """redis-server arguments besides --tls-port; replicas replicate in TLS too."""
        p = self.pki
        return ["--tls-cert-file", p.path(self.cert), "--tls-key-file", p.path(self.cert, "key"),
                "--tls-ca-cert-file", p.path("ca"),
                "--tls-auth-clients", "yes" if self.auth_clients else "no",
                "--tls-replication", "yes"]

    def daemon_conf(self):
        """The redis.tls group of a daemon on this server: the CA and the client
        certificate."""
        return self.pki.conf()

    def client_kwargs(self):
        """The tests' own connections: verified, with the client certificate. A server
        whose certificate the tests mean to be bad is still reached (no verification)."""
        kw = self.pki.client_kwargs()
        if self.cert != "server":
            kw["ssl_cert_reqs"] = "none"
        return kw

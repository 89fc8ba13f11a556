# SPDX-License-Identifier: MIT
"""WEB — the dashboard, `cogworkerctl web` (doc/behaviours.md group WEB; doc/protocol.md
§7.33): who may reach it and do what, checked with plain HTTP requests, and its pages in a
real headless Chromium (Selenium), each action clicked and its effect checked in Redis.
Screenshots of the pages go to <build>/web-screenshots/.

Run: python3 tests/integration/run.py test_web
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import RedisTestCase, binary, free_port, handler, job, wait_for  # noqa: E402
from webkit import BrowserCase, WebServer, shot, text_of, wait_until  # noqa: E402

PAUSED = b"cogworker:paused_queues"
QUEUES = b"cogworker:queues"


def ctl(*args, env=None, stdin=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([binary("cogworkerctl"), "-c", "/dev/null"] + list(args), env=e,
                          input=stdin, capture_output=True, text=True, timeout=30)


class Serving(RedisTestCase):
    """The server alone: addresses, headers, sessions, CSRF, Origin, --read-only, logins."""

    def web(self, *args):
        w = WebServer(self.server.url, args=args).start()
        self.addCleanup(w.stop)
        return w

    def test_web1_non_loopback_needs_auth_file(self):
        port = free_port()
        p = ctl("web", "--listen", "0.0.0.0:%d" % port, env={"REDIS_URL": self.server.url})
        self.assertEqual(p.returncode, 2, p)
        self.assertIn("0.0.0.0:%d is not a loopback address" % port, p.stderr)
        self.assertIn("--auth-file", p.stderr)
        for bad in ("127.0.0.1", "127.0.0.1:0", "127.0.0.1:99999", "[::1"):
            with self.subTest(bad):
                p = ctl("web", "--listen", bad, env={"REDIS_URL": self.server.url})
                self.assertEqual(p.returncode, 2, p)
                self.assertIn("web: --listen %s" % bad, p.stderr)
        p = ctl("web", "--auth-file", "/nonexistent/users", env={"REDIS_URL": self.server.url})
        self.assertEqual(p.returncode, 2, p)
        self.assertIn("/nonexistent/users: No such file", p.stderr)

    def test_web2_pages_assets_and_headers(self):
        w = self.web()
        st, h, body = w.request("GET", "/")
        self.assertEqual(st, 200)
        self.assertIn('<script src="/assets/app.js" defer></script>', body)
        csp = h["content-security-policy"]
        self.assertIn("default-src 'none'", csp)
        self.assertIn("script-src 'self';", csp)
        self.assertNotIn("unsafe-inline", csp)
        self.assertNotIn("unsafe-eval", csp)
        self.assertEqual(h["x-content-type-options"], "nosniff")
        self.assertEqual(h["x-frame-options"], "DENY")
        for page in ("/queues", "/jobs/dead", "/jobs/0123456789abcdef01234567", "/processes",
                     "/periodic", "/limits", "/history", "/metrics"):
            st, _, b = w.request("GET", page)
            self.assertEqual((st, b), (200, body), page)
        st, h, js = w.request("GET", "/assets/app.js")
        self.assertEqual(st, 200)
        self.assertTrue(h["content-type"].startswith("text/javascript"))
        self.assertNotIn("innerHTML", js)
        self.assertNotIn("eval(", js)
        self.assertEqual(w.request("GET", "/nosuch")[0], 404)
        self.assertEqual(w.request("GET", "/assets/nosuch.js")[0], 404)
        self.assertEqual(w.request("GET", "/assets/../index.html")[0], 400)
        self.assertEqual(w.request("GET", "/assets/%2e%2e")[0], 400)
        self.assertEqual(w.request("DELETE", "/api/stats")[0], 405)
        st, h, _ = w.request("GET", "/api/stats")
        self.assertEqual(st, 401)
        self.assertIn("default-src 'none'", h["content-security-policy"])

    def test_web3_post_needs_session_csrf_and_same_origin(self):
        w = self.web()
        self.r.sadd(QUEUES, "default")
        cookie, csrf = w.session()
        path = "/api/queues/default/pause"
        st, body = w.post(path)
        self.assertEqual(st, 401, body)
        st, body = w.post(path, cookie=cookie)
        self.assertEqual(st, 403, body)
        self.assertIn("CSRF", body["error"])
        st, body = w.post(path, cookie=cookie, csrf="0" * 64)
        self.assertEqual(st, 403, body)
        st, body = w.post(path, cookie=cookie, csrf=csrf,
                          headers={"Origin": "http://evil.example"})
        self.assertEqual(st, 403, body)
        st, body = w.post(path, cookie=cookie, csrf=csrf,
                          headers={"Origin": "http://127.0.0.1:%d.evil.example" % w.port})
        self.assertEqual(st, 403, body)
        st, body = w.post(path, cookie=cookie, csrf=csrf, origin=False,
                          headers={"Sec-Fetch-Site": "cross-site"})
        self.assertEqual(st, 403, body)
        st, body = w.post(path, cookie="cwsid=" + "a" * 64, csrf=csrf)
        self.assertEqual(st, 401, body)
        self.assertFalse(self.r.sismember(PAUSED, "default"))
        st, body = w.post(path, cookie=cookie, csrf=csrf)
        self.assertEqual((st, body), (200, {"queue": "default", "paused": True, "changed": True}))
        self.assertTrue(self.r.sismember(PAUSED, "default"))
        st, body = w.post(path, cookie=cookie, csrf=csrf)
        self.assertEqual(st, 409, body)
        self.assertEqual(body["error"], "queue default is already paused")
        # A page of a site that rebinds its name to 127.0.0.1 sends its own Host.
        st, _, _ = w.request("GET", "/api/stats", cookie=cookie,
                             headers={"Host": "evil.example:%d" % w.port})
        self.assertEqual(st, 403)
        log = w.log()
        self.assertIn("web: local (from 127.0.0.1): refused: no valid CSRF token", log)
        self.assertIn("refused: a request from another site (Origin)", log)
        self.assertIn("refused: a request from another site (Sec-Fetch-Site)", log)
        self.assertIn('POST /api/queues/default/pause: 200 {"queue":"default","paused":true,'
                      '"changed":true}', log)

    def test_web4_read_only_refuses_actions(self):
        w = self.web("--read-only")
        self.r.sadd(QUEUES, "default")
        cookie, csrf = w.session()
        st, s = w.get_json("/api/session", cookie)
        self.assertTrue(s["read_only"])
        st, body = w.post("/api/queues/default/pause", cookie=cookie, csrf=csrf)
        self.assertEqual(st, 403, body)
        self.assertIn("read-only", body["error"])
        self.assertFalse(self.r.sismember(PAUSED, "default"))
        self.assertIn("POST /api/queues/default/pause: refused: read-only", w.log())
        st, q = w.get_json("/api/queues", cookie)
        self.assertEqual((st, [x["name"] for x in q]), (200, ["default"]))

    def test_web5_users_logins_and_tokens(self):
        d = tempfile.mkdtemp(prefix="cw-web-auth-")
        users = os.path.join(d, "users")
        p = ctl("web", "passwd", "--auth-file", users, "alice", stdin="correct horse\n")
        self.assertEqual(p.returncode, 0, p)
        self.assertIn("added user alice in %s" % users, p.stderr)
        line = open(users).read()
        self.assertRegex(line, r"^alice:\$y\$[^:\n]+\n$")
        self.assertEqual(os.stat(users).st_mode & 0o777, 0o640)
        p = ctl("web", "passwd", "--auth-file", users, "--token", "robot")
        self.assertEqual(p.returncode, 0, p)
        token = p.stdout.strip()
        self.assertRegex(token, r"^robot:[0-9a-f]{48}$")
        p = ctl("web", "passwd", "--auth-file", users, "alice", stdin="short\n")
        self.assertEqual(p.returncode, 2, p)
        self.assertEqual(open(users).read().count("alice:"), 1)
        p = ctl("web", "passwd", "bad:name", stdin="correct horse\n")
        self.assertEqual(p.returncode, 2, p)
        w = self.web("--auth-file", users)
        self.r.sadd(QUEUES, "default")
        st, s = w.get_json("/api/session", None)
        self.assertEqual((st, s["user"], s["auth"]), (200, None, True))
        self.assertEqual(w.request("GET", "/api/stats")[0], 401)
        t0 = time.monotonic()
        st, body = w.post("/api/login", {"user": "alice", "password": "wrong horse"})
        self.assertEqual(st, 401, body)
        self.assertGreaterEqual(time.monotonic() - t0, 0.9)
        st, body = w.post("/api/login", {"user": "alice", "password": "correct horse"},
                          headers={"Origin": "http://evil.example"})
        self.assertEqual(st, 403, body)
        st, h, body = w.request("POST", "/api/login", {"user": "alice", "password": "correct horse"},
                                headers={"Origin": w.url("").rstrip("/")})
        self.assertEqual(st, 200, body)
        cookie = h["set-cookie"]
        self.assertIn("HttpOnly", cookie)
        self.assertIn("SameSite=Strict", cookie)
        cookie = cookie.split(";")[0]
        csrf = json.loads(body)["csrf"]
        self.assertEqual(w.get_json("/api/stats", cookie)[0], 200)
        st, body = w.post("/api/queues/default/pause", cookie=cookie)
        self.assertEqual(st, 403, body)
        st, body = w.post("/api/queues/default/pause", cookie=cookie, csrf=csrf)
        self.assertEqual(st, 200, body)
        st, body = w.post("/api/queues/default/resume", origin=False,
                          headers={"Authorization": "Bearer " + token})
        self.assertEqual(st, 200, body)
        self.assertFalse(self.r.sismember(PAUSED, "default"))
        st, body = w.post("/api/queues/default/pause", origin=False,
                          headers={"Authorization": "Bearer robot:" + "0" * 48})
        self.assertEqual(st, 401, body)
        st, body = w.post("/api/logout", cookie=cookie, csrf=csrf)
        self.assertEqual(st, 200, body)
        self.assertEqual(w.get_json("/api/stats", cookie)[0], 401)
        log = w.log()
        self.assertIn("web: alice (from 127.0.0.1): login: refused: wrong user or password", log)
        self.assertIn("web: alice (from 127.0.0.1): POST /api/queues/default/pause: 200", log)
        self.assertIn("web: robot (from 127.0.0.1): POST /api/queues/default/resume: 200", log)
        self.assertNotIn("correct horse", log)

    def test_web6_redis_away_is_503_not_500(self):
        w = self.web()
        cookie, _ = w.session()
        self.assertEqual(w.get_json("/api/stats", cookie)[0], 200)
        self.server.down()
        self.addCleanup(lambda: self.server.proc or self.server.restart())
        st, body = w.get_json("/api/stats", cookie)
        self.assertEqual(st, 503, body)
        self.assertTrue(body["unavailable"])
        st, _, page = w.request("GET", "/")
        self.assertEqual(st, 200)
        self.server.restart()
        wait_for(lambda: w.get_json("/api/stats", cookie)[0] == 200, timeout=10,
                 message="the API back with Redis")


class Pages(BrowserCase):
    """The pages in Chromium against a daemon; one browser for the class."""

    def test_web7_overview_shows_the_numbers(self):
        self.daemon(handlers=[{"class": "Ok", "command": handler("ok")}], concurrency=2)
        for i in range(5):
            self.push(job("Ok", [i]))
        wait_for(lambda: self.r.get(b"cogworker:stats:processed") == b"5", timeout=20)
        self.r.sadd(QUEUES, "low")
        for i in range(3):
            self.push(job("Later", [i], queue="low"), queue="low")
        now = time.time()
        self.r.zadd(b"cogworker:schedule", {job("S", [1]): now + 3600})
        self.r.zadd(b"cogworker:retry", {job("R", [1]): now + 600, job("R", [2]): now + 700})
        self.r.zadd(b"cogworker:dead", {job("D", [i]): now - i for i in range(4)})
        self.r.incrby(b"cogworker:stats:failed", 7)
        w = self.web()
        self.b.get(w.url("/"))
        expect = {"c-processed": "5", "c-failed": "7", "c-enqueued": "3", "c-scheduled": "1",
                  "c-retry": "2", "c-dead": "4", "c-processes": "1", "c-busy": "0"}
        for cid, n in expect.items():
            self.assertEqual(text_of(self.b, "#%s .n" % cid, contains=n).strip(), n, cid)
        self.assertIn("low", text_of(self.b, "#ov-queues", contains="low"))
        # The live chart: jobs flowing for a few refreshes draw a line above zero.
        wait_until(lambda: self.b.execute_script(
            "return document.querySelectorAll('#live polyline').length") == 2)
        t_end = time.monotonic() + 8
        n = 0
        while time.monotonic() < t_end:
            self.push(job("Ok", [n]))
            n += 1
            time.sleep(0.05)
        wait_for(lambda: self.r.get(b"cogworker:stats:processed") == str(5 + n).encode(),
                 timeout=30, message="the flow processed")
        text_of(self.b, "#c-processed .n", contains="{:,}".format(5 + n), timeout=10)
        rate = text_of(self.b, "#rate")
        self.assertRegex(rate, r"^\d+\.\d processed/s, 0\.0 failed/s$")
        self.assertTrue(self.b.execute_script(
            "return live.points.some(p => p.p > 1)"), "a point above 1 processed/s")
        shot(self.b, "overview")

    def test_web8_queue_actions_clicked(self):
        from selenium.webdriver.common.by import By
        self.r.sadd(QUEUES, "default", "mail")
        for i in range(4):
            self.push(job("M", [i], queue="mail"), queue="mail")
        w = self.web()
        self.b.get(w.url("/queues"))
        row = '[data-queue="mail"]'
        text_of(self.b, row, contains="4")

        def click(label):
            for b in self.b.find_elements(By.CSS_SELECTOR, row + " button"):
                if b.text == label:
                    b.click()
                    return
            raise AssertionError("no button %s in %s" % (label, row))
        click("Pause")
        wait_until(lambda: self.r.sismember(PAUSED, "mail"), message="mail paused")
        text_of(self.b, row, contains="paused")
        shot(self.b, "queues")
        click("Resume")
        wait_until(lambda: not self.r.sismember(PAUSED, "mail"), message="mail resumed")
        text_of(self.b, row + " button", contains="Pause")
        click("Clear")
        alert = wait_until(lambda: self.b.switch_to.alert)
        self.assertIn("Delete all 4 job(s) of queue mail?", alert.text)
        alert.dismiss()
        time.sleep(0.5)
        self.assertEqual(self.r.llen(b"cogworker:queue:mail"), 4)
        click("Clear")
        wait_until(lambda: self.b.switch_to.alert).accept()
        wait_until(lambda: self.r.llen(b"cogworker:queue:mail") == 0, message="mail cleared")
        self.assertIn("POST /api/queues/mail/clear: 200", w.log())

    def test_web9_read_only_draws_no_action(self):
        from selenium.webdriver.common.by import By
        self.r.sadd(QUEUES, "default")
        w = self.web("--read-only")
        self.b.get(w.url("/queues"))
        text_of(self.b, '[data-queue="default"]')
        self.assertIn("read-only", text_of(self.b, "#who", contains="read-only"))
        self.assertEqual(self.b.find_elements(By.CSS_SELECTOR, "main button"), [])

    def test_web22_the_footer_says_insecure_http(self):
        w = self.web("--insecure-http")
        self.b.get(w.url("/"))
        text = text_of(self.b, "footer", contains="--insecure-http")
        self.assertIn("safe only behind a proxy that speaks HTTPS", text)
        self.assertTrue(self.b.find_element("css selector", "footer").is_displayed())
        # without it, no footer
        w2 = self.web()
        self.b.get(w2.url("/"))
        text_of(self.b, "#c-processed .n")
        self.assertFalse(self.b.find_element("css selector", "footer").is_displayed())

    def test_web10_banner_while_redis_is_away(self):
        # A number no empty or reset page shows, so "the last numbers stay" can fail.
        self.r.set(b"cogworker:stats:processed", 12345)
        w = self.web()
        self.b.get(w.url("/"))
        text_of(self.b, "#c-processed .n", contains="12,345")
        self.server.down()
        try:
            text = text_of(self.b, "#banner", contains="Redis does not answer", timeout=15)
            self.assertIn("Showing the last view", text)
            self.assertEqual(text_of(self.b, "#c-processed .n"), "12,345")
        finally:
            self.server.restart()
        wait_until(lambda: not self.b.find_element("id", "banner").is_displayed(), timeout=15,
                   message="the banner gone with Redis back")


class HTTPS(RedisTestCase):
    """WEB-21..23: --tls-cert/--tls-key (libmicrohttpd's TLS): the dashboard over HTTPS with
    that certificate, checked with curl against the CA; Secure cookies; a non-loopback
    listen needs TLS or --insecure-http as well as --auth-file."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        from tlskit import PKI
        cls.pki = PKI()

    @classmethod
    def tearDownClass(cls):
        cls.pki.stop()
        super().tearDownClass()

    def users(self):
        d = tempfile.mkdtemp(prefix="cw-web-tls-")
        users = os.path.join(d, "users")
        p = ctl("web", "passwd", "--auth-file", users, "alice", stdin="correct horse\n")
        self.assertEqual(p.returncode, 0, p)
        return users

    def curl(self, port, *args):
        return subprocess.run(["curl", "-sS", "--max-time", "20", "--cacert",
                               self.pki.path("ca")] + list(args), capture_output=True,
                              text=True, timeout=30)

    def test_web21_https_with_the_given_certificate_and_secure_cookies(self):
        users = self.users()
        w = WebServer(self.server.url, args=["--auth-file", users, "--tls-cert",
                                             self.pki.path("server"), "--tls-key",
                                             self.pki.path("server", "key")]).start()
        self.addCleanup(w.stop)
        self.assertIn("dashboard on https://127.0.0.1:%d/" % w.port, w.log())
        base = "https://localhost:%d" % w.port
        # curl checks the certificate against the CA, and its name
        p = self.curl(w.port, "-o", "/dev/null", "-w", "%{http_code} %{ssl_verify_result}",
                      base + "/")
        self.assertEqual(p.stdout, "200 0", p.stderr)
        # a login over it sets a Secure session cookie
        p = self.curl(w.port, "-D", "-", "-o", "/dev/null", "-H", "Origin: " + base,
                      "--data", "user=alice&password=correct+horse", base + "/api/login")
        self.assertEqual(p.returncode, 0, p.stderr)
        [cookie] = [l for l in p.stdout.splitlines() if l.lower().startswith("set-cookie:")]
        self.assertIn("HttpOnly", cookie)
        self.assertIn("; Secure", cookie)
        # plain HTTP to the same port gets no page
        p = subprocess.run(["curl", "-sS", "--max-time", "5", "http://127.0.0.1:%d/" % w.port],
                           capture_output=True, text=True, timeout=30)
        self.assertNotIn("<script", p.stdout)
        # a CA that did not sign it is refused by the client
        p = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert",
                            self.pki.path("otherca"), base + "/"], capture_output=True,
                           text=True, timeout=30)
        self.assertNotEqual(p.returncode, 0)

    def test_web22_non_loopback_needs_tls_or_insecure_http(self):
        users = self.users()
        port = free_port()
        env = {"REDIS_URL": self.server.url}
        p = ctl("web", "--listen", "0.0.0.0:%d" % port, "--auth-file", users, env=env)
        self.assertEqual(p.returncode, 2, p)
        self.assertIn("0.0.0.0:%d is not a loopback address: passwords and session cookies "
                      "would cross the network in the clear; give --tls-cert FILE --tls-key "
                      "FILE, or --insecure-http behind a TLS-terminating proxy" % port,
                      p.stderr)
        # --insecure-http: it serves, says so at start and in every page's session
        w = WebServer(self.server.url, listen="0.0.0.0:%d" % port,
                      args=["--auth-file", users, "--insecure-http"])
        w.port = port
        w.start()
        self.addCleanup(w.stop)
        self.assertIn("warning: --insecure-http: plain HTTP off loopback", w.log())
        st, s = w.get_json("/api/session", None)
        self.assertEqual((st, s["insecure_http"]), (200, True))
        st, h, _ = w.request("POST", "/api/login", {"user": "alice", "password": "correct horse"},
                             headers={"Origin": w.url("").rstrip("/")})
        self.assertEqual(st, 200)
        self.assertNotIn("Secure", h["set-cookie"])

    def test_web23_bad_tls_options(self):
        env = {"REDIS_URL": self.server.url}
        d = tempfile.mkdtemp(prefix="cw-web-tls-")
        open_key = os.path.join(d, "open.key")
        with open(self.pki.path("server", "key")) as f, open(open_key, "w") as g:
            g.write(f.read())
        os.chmod(open_key, 0o644)
        cases = [
            (["--tls-cert", self.pki.path("server")], "--tls-cert and --tls-key go together"),
            (["--tls-cert", self.pki.path("server"), "--tls-key", open_key],
             "--tls-key %s is open to others (mode 0644)" % open_key),
            (["--tls-cert", "/nonexistent.crt", "--tls-key", self.pki.path("server", "key")],
             "--tls-cert /nonexistent.crt: No such file or directory"),
            (["--tls-cert", self.pki.path("server"), "--tls-key", self.pki.path("server", "key"),
              "--insecure-http"], "--insecure-http and --tls-cert contradict each other"),
            (["--tls-cert", os.path.join(self.pki.dir, "server.ext"), "--tls-key",
              self.pki.path("server", "key")], "not a PEM file"),
        ]
        for args, why in cases:
            with self.subTest(why):
                p = ctl("web", "--listen", "127.0.0.1:%d" % free_port(), *args, env=env)
                self.assertEqual(p.returncode, 2, p)
                self.assertIn(why, p.stderr)
        # a key that is not the certificate's: refused at start, not served
        p = ctl("web", "--listen", "127.0.0.1:%d" % free_port(), "--tls-cert",
                self.pki.path("server"), "--tls-key", self.pki.path("client", "key"), env=env)
        self.assertEqual(p.returncode, 2, p)
        self.assertIn("is --tls-key the key of --tls-cert?", p.stderr)


if __name__ == "__main__":
    unittest.main()

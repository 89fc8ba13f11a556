# SPDX-License-Identifier: MIT
"""Helpers of the dashboard's tests (test_web*.py): a `cogworkerctl web` on a free
loopback port, plain HTTP requests with the headers a test chooses, and a real headless
Chromium driven by Selenium (Debian's chromium, chromium-driver and python3-selenium).

    web = WebServer(redis_url).start()          # cogworkerctl web --listen 127.0.0.1:PORT
    st, headers, body = web.request("GET", "/api/stats", cookie=...)
    b = browser()                               # headless, fresh profile, no network
    b.get(web.url("/")); shot(b, "overview")    # <build>/web-screenshots/overview.png

The browser runs with a private --user-data-dir (removed at quit) and the switches that
keep it from reaching out (no sync, no component updates, no background networking): the
machine has no network, and a test must not depend on one.
"""

import http.client
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time

from harness import DaemonTestCase, binary, build_dir, free_port, wait_for, _die_with_parent

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")


def screenshot_dir():
    d = os.path.join(build_dir(), "web-screenshots")
    os.makedirs(d, exist_ok=True)
    return d


class WebServer:
    """`cogworkerctl web` on 127.0.0.1:<free port> (or listen=), reading redis_url."""

    def __init__(self, redis_url, args=(), listen=None, workdir=None):
        self.redis_url = redis_url
        self.port = free_port()
        self.listen = listen or "127.0.0.1:%d" % self.port
        self.args = list(args)
        self.workdir = workdir or tempfile.mkdtemp(prefix="cw-web-")
        self.log_path = os.path.join(self.workdir, "web-%d.log" % self.port)
        self.proc = None

    def start(self, wait=True):
        env = dict(os.environ)
        env["REDIS_URL"] = self.redis_url
        self.log_file = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [binary("cogworkerctl"), "-c", "/dev/null", "web", "--listen", self.listen] + self.args,
            stdin=subprocess.DEVNULL, stdout=self.log_file, stderr=subprocess.STDOUT, env=env,
            preexec_fn=_die_with_parent)
        if wait:
            wait_for(lambda: "dashboard on" in self.log() or self.proc.poll() is not None,
                     timeout=10, message="cogworkerctl web to listen")
            if self.proc.poll() is not None:
                raise AssertionError("cogworkerctl web exited %d: %s" % (self.proc.returncode,
                                                                         self.log()))
        return self

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def url(self, path="/"):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def request(self, method, path, body=None, headers=None, cookie=None, timeout=30):
        """(status, headers dict with lower-case names, body as text)."""
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        h = {"Host": "127.0.0.1:%d" % self.port}
        if cookie:
            h["Cookie"] = cookie
        if body is not None and not isinstance(body, (bytes, str)):
            from urllib.parse import urlencode
            body = urlencode(body, doseq=True)
            h["Content-Type"] = "application/x-www-form-urlencoded"
        h.update(headers or {})
        try:
            c.request(method, path, body=body, headers=h)
            r = c.getresponse()
            data = r.read().decode("utf-8", "replace")
            return r.status, {k.lower(): v for k, v in r.getheaders()}, data
        finally:
            c.close()

    def session(self):
        """A session of the local user (no --auth-file): (cookie header, csrf token)."""
        st, h, body = self.request("GET", "/api/session")
        assert st == 200, (st, body)
        cookie = h["set-cookie"].split(";")[0]
        return cookie, json.loads(body)["csrf"]

    def post(self, path, form=None, cookie=None, csrf=None, origin=True, headers=None):
        """A POST as the page makes it: the session, the token and the page's Origin."""
        h = {}
        if csrf:
            h["X-CSRF-Token"] = csrf
        if origin:
            h["Origin"] = self.url("").rstrip("/")
        h.update(headers or {})
        st, _, body = self.request("POST", path, body=form or {}, headers=h, cookie=cookie)
        try:
            return st, json.loads(body)
        except ValueError:
            return st, body

    def get_json(self, path, cookie):
        st, _, body = self.request("GET", path, cookie=cookie)
        return st, json.loads(body)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log_file.close()
        return self.proc.returncode if self.proc else None


def browser():
    """A headless Chromium under Selenium with a fresh profile; quit() removes it."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    profile = tempfile.mkdtemp(prefix="cw-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
              "--disable-background-networking", "--disable-component-update",
              "--disable-sync", "--disable-dev-shm-usage", "--window-size=1280,900",
              "--user-data-dir=" + profile):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(30)
    quit = drv.quit

    def quit_and_clean():
        try:
            quit()
        finally:
            shutil.rmtree(profile, ignore_errors=True)
    drv.quit = quit_and_clean
    return drv


class BrowserCase(DaemonTestCase):
    """A DaemonTestCase with one headless Chromium for the class (self.b) and a
    `cogworkerctl web` on this test's Redis per call of web()."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.b = browser()
        cls.addClassCleanup(cls.b.quit)

    def web(self, *args):
        w = WebServer(self.server.url, args=args).start()
        self.addCleanup(w.stop)
        return w


def shot(drv, name):
    """A screenshot of the whole page (beyond the window) into
    <build>/web-screenshots/<name>.png."""
    import base64
    path = os.path.join(screenshot_dir(), name + ".png")
    size = drv.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    png = drv.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True,
        "clip": {"x": 0, "y": 0, "width": size["width"], "height": min(size["height"], 6000),
                 "scale": 1}})["data"]
    with open(path, "wb") as f:
        f.write(base64.b64decode(png))
    return path


def text_of(drv, css, timeout=10, contains=None):
    """The text of the first element matching css, once it exists (and holds contains).
    The pages redraw as they refresh: an element replaced under the look is looked up
    again."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    def look():
        try:
            els = drv.find_elements(By.CSS_SELECTOR, css)
            if not els:
                return None
            t = els[0].text
        except StaleElementReferenceException:
            return None
        return t if contains is None or contains in t else None
    return wait_for(look, timeout=timeout, message="%s%s" % (css, " to hold %r" % contains
                                                             if contains else ""))


def no_alert(drv):
    """True when no JavaScript dialog is open."""
    from selenium.common.exceptions import NoAlertPresentException
    try:
        drv.switch_to.alert.text
        return False
    except NoAlertPresentException:
        return True


def wait_until(pred, timeout=10, message=None):
    return wait_for(pred, timeout=timeout, interval=0.1, message=message)


def monotonic_ms():
    return time.monotonic() * 1000

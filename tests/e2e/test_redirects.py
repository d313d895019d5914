#!/usr/bin/env python3
"""End-to-end tests of redirects in plans (docs/plans.md, Redirects) against `squall target`'s
/redirect/N and /redirect/loop: a 303 login whose session cookie the next hop carries, a 307 and
a 308 that keep a POST's body, a 302 that turns a POST into a GET, a loop stopped at the limit
(`redirect_limit`), `redirects: 0` (the 3xx is what checks see), a Location on another origin
(`redirect_offsite`), relative and absolute Locations, HTTP/2, a 3xx that closes its connection,
and in every run squall's request count equal to the count the target kept; then the same
against nginx's `return 30x` (absolute Locations, a cookie on the 302, a 307 POST, a loop),
counted by nginx's access log. Every run is bounded by an iteration count.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

ITERS = 6


class Redirects(sqtest.TargetCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.reset()

    def tearDown(self):
        self.tmp.cleanup()

    def run_flow(self, flow, *extra, cookies=False, defaults=""):
        """Runs one scenario of ITERS iterations over 2 VUs; returns its result document after
        checking that squall sent what the target counted."""
        text = f"target: {self.base}\n"
        if defaults:
            text += f"defaults: {defaults}\n"
        text += textwrap.dedent(
            f"""
            scenarios:
              s:
                executor: shared-iterations
                vus: 2
                iterations: {ITERS}
                cookies: {"true" if cookies else "false"}
                flow:
            """
        )
        text += textwrap.indent(textwrap.dedent(flow).strip() + "\n", "      ")
        path = os.path.join(self.tmp.name, "plan.yaml")
        with open(path, "w") as f:
            f.write(text)
        p, _ = sqtest.run_squall("run", path, "--json", "-", "-q", *extra, timeout=60)
        self.assertTrue(p.stdout.strip(), p.stderr)
        doc = json.loads(p.stdout)
        self.assert_accounting(doc)
        # each hop is a request the server saw, and squall counted it
        self.assertEqual(doc["requests"]["sent"], self.stats()["requests"], doc["requests"])
        return doc

    def checks(self, doc):
        return {(c["step"], c["check"]): (c["passed"], c["failed"]) for c in doc["checks"]}

    def step(self, doc, name):
        return next(s for s in doc["steps"] if s["step"] == name)

    def test_login_303_carries_the_cookie_set_on_the_3xx(self):
        doc = self.run_flow(
            """
            - name: login
              request:
                method: POST
                url: "/redirect/1?status=303&cookie=sid=s3cr3t&to=/cookie/echo"
                form: { user: alice }
              check: { status: 200, body_contains: "sid=s3cr3t" }
            """,
            cookies=True,
        )
        self.assertEqual(self.checks(doc)[("login", "status 200")], (ITERS, 0))
        self.assertEqual(self.checks(doc)[("login", "body contains 'sid=s3cr3t'")], (ITERS, 0))
        self.assertEqual(doc["requests"]["sent"], 2 * ITERS)
        self.assertEqual(doc["status"]["3xx"], ITERS)
        st = self.step(doc, "login")
        self.assertEqual(st["requests"], 2 * ITERS)
        self.assertEqual(sorted(st["status"]), ["200", "303"])
        self.assertEqual(self.stats()["endpoints"]["cookie"], ITERS)

    def test_307_and_308_keep_method_and_body_302_turns_post_into_get(self):
        doc = self.run_flow(
            """
            - name: t307
              request: { method: POST, url: "/redirect/2?status=307&to=/echo", body: "hello-307" }
              check: { status: 200, body_contains: '"body":"hello-307"' }
              extract: { m307: { json: "$.method" } }
            - name: t308
              request: { method: PUT, url: "/redirect/1?status=308&to=/echo", body: "hello-308" }
              check: { status: 200, body_contains: '"method":"PUT"' }
            - name: t302
              request: { method: POST, url: "/redirect/1?status=302&to=/echo", body: "gone" }
              check: { status: 200, body_contains: '"method":"GET"' }
            - name: t302b
              request: { method: POST, url: "/redirect/1?status=302&to=/echo", body: "gone" }
              check: { body_contains: '"body_len":0' }
            """
        )
        for (step, check), (passed, failed) in self.checks(doc).items():
            self.assertEqual((passed, failed), (ITERS, 0), (step, check))
        self.assertEqual(doc["requests"]["sent"], (3 + 2 + 2 + 2) * ITERS)
        self.assertEqual(doc["status"]["2xx"], 4 * ITERS)
        self.assertEqual(doc["errors"]["extract"], 0)

    def test_loop_stops_at_the_limit_with_its_own_error_kind(self):
        doc = self.run_flow(
            """
            - name: loop
              request: { url: /redirect/loop }
              check: { status: 302 }
            - name: short
              request: { url: "/redirect/5", redirects: 3 }
              check: { status: 302 }
            - name: after
              request: { url: /fast }
              check: { status: 200 }
            """
        )
        self.assertEqual(doc["errors"]["redirect_limit"], 2 * ITERS)
        self.assertEqual(doc["errors"]["redirect_offsite"], 0)
        self.assertEqual(self.step(doc, "loop")["requests"], 11 * ITERS)  # k6's 10, + the first
        self.assertEqual(self.step(doc, "short")["requests"], 4 * ITERS)
        for (step, check), (passed, failed) in self.checks(doc).items():
            self.assertEqual((passed, failed), (ITERS, 0), (step, check))
        self.assertEqual(doc["requests"]["failed"], 0)

    def test_limit_from_defaults_and_zero_turns_following_off(self):
        doc = self.run_flow(
            """
            - name: off
              request: { url: "/redirect/1", redirects: 0 }
              check: { status: 302 }
            - name: two
              request: { url: "/redirect/2" }
              check: { status: 200 }
            - name: three
              request: { url: "/redirect/3" }
              check: { status: 302 }
            """,
            defaults="{ max_redirects: 2 }",
        )
        for (step, check), (passed, failed) in self.checks(doc).items():
            self.assertEqual((passed, failed), (ITERS, 0), (step, check))
        self.assertEqual(self.step(doc, "off")["requests"], ITERS)
        self.assertEqual(doc["errors"]["redirect_limit"], ITERS)  # "three" only; "off" is none

    def test_max_redirects_flag_wins_over_defaults_not_over_a_step(self):
        flow = """
            - name: plain
              request: { url: "/redirect/2" }
              check: { status: 302 }
            - name: own
              request: { url: "/redirect/2", redirects: 2 }
              check: { status: 200 }
            """
        doc = self.run_flow(flow, "--max-redirects", "1", defaults="{ max_redirects: 5 }")
        for (step, check), (passed, failed) in self.checks(doc).items():
            self.assertEqual((passed, failed), (ITERS, 0), (step, check))
        self.assertEqual(doc["errors"]["redirect_limit"], ITERS)
        self.reset()
        doc = self.run_flow(flow, "--max-redirects", "0")
        self.assertEqual(self.step(doc, "plain")["requests"], ITERS)
        self.assertEqual(doc["errors"]["redirect_limit"], 0)  # 0 follows none: no error
        p, _ = sqtest.run_squall("run", "nothing.yaml", "--max-redirects", "101")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("0..100", p.stderr)

    def test_offsite_is_not_followed(self):
        doc = self.run_flow(
            """
            - name: away
              request: { url: "/redirect/1?to=http://squall-offsite.invalid/x" }
              check: { status: 302 }
            - name: other_port
              request: { url: "/redirect/1?to=http://127.0.0.1:1/x" }
              check: { status: 302 }
            """
        )
        self.assertEqual(doc["errors"]["redirect_offsite"], 2 * ITERS)
        self.assertEqual(doc["requests"]["sent"], 2 * ITERS)
        self.assertEqual(doc["errors"]["connect"], 0)

    def test_relative_absolute_and_http2(self):
        flow = f"""
            - name: rel
              request: {{ url: "/redirect/1?to=../echo?x=1" }}
              check: {{ body_contains: '"path":"/echo?x=1"' }}
            - name: abs
              request: {{ url: "/redirect/1?to={self.base}/echo" }}
              check: {{ status: 200 }}
            - name: post
              request: {{ method: POST, url: "/redirect/2?status=307&to=/echo", body: "h2body" }}
              check: {{ body_contains: '"body":"h2body"' }}
            """
        for extra in ((), ("--http2",)):
            self.reset()
            doc = self.run_flow(flow, *extra)
            for (step, check), (passed, failed) in self.checks(doc).items():
                self.assertEqual((passed, failed), (ITERS, 0), (extra, step, check))
            self.assertEqual(doc["requests"]["sent"], 7 * ITERS)

    def test_a_3xx_that_closes_its_connection(self):
        # Connection: close on the request makes the target close after each answer: every hop
        # goes on a fresh connection.
        doc = self.run_flow(
            """
            - name: closing
              request:
                url: "/redirect/3"
                headers: { Connection: close }
              check: { status: 200 }
            """
        )
        self.assertEqual(self.checks(doc)[("closing", "status 200")], (ITERS, 0))
        self.assertEqual(doc["requests"]["sent"], 4 * ITERS)
        self.assertGreaterEqual(doc["connections"]["closed_by_server"], 4 * ITERS - 2)



class TargetRedirects(sqtest.TargetCase):
    """squall target's /redirect/N and /redirect/loop (docs/target.md)."""

    def test_answers(self):
        st, h, body = sqtest.http(self.port, "GET", "/redirect/3?status=308&to=/x&cookie=a=b")
        self.assertEqual((st, body), (308, b""))
        self.assertEqual(h["location"], "/redirect/2?status=308&to=/x&cookie=a=b")
        self.assertEqual(h["set-cookie"], "a=b; Path=/")
        st, h, _ = sqtest.http(self.port, "POST", "/redirect/1?to=http://h/y")
        self.assertEqual((st, h["location"]), (302, "http://h/y"))
        st, h, _ = sqtest.http(self.port, "GET", "/redirect/1")
        self.assertEqual((st, h["location"]), (302, "/ok"))
        st, h, _ = sqtest.http(self.port, "GET", "/redirect/loop?status=301")
        self.assertEqual((st, h["location"]), (301, "/redirect/loop?status=301"))
        for bad in ("/redirect/0", "/redirect/101", "/redirect/1?status=304", "/redirect/1?to=",
                    "/redirect/1?cookie=novalue", "/redirect/1?cookie=a=b;c", "/redirect/x"):
            self.assertEqual(sqtest.http(self.port, "GET", bad)[0], 400, bad)


NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)

NGINX_CONF = """worker_processes 1;
master_process off;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 64; }}
http {{
    access_log {d}/access.log;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    server {{
        listen {host}:{port};
        location = /old {{ add_header Set-Cookie "n=1; Path=/"; return 302 /new; }}
        location = /abs {{ return 301 http://{host}:{port}/new; }}
        location = /post {{ return 307 /echo; }}
        location = /echo {{ return 200 "method=$request_method length=$content_length\\n"; }}
        location = /new {{ return 200 "new cookie=$http_cookie\\n"; }}
        location = /loop {{ return 302 /loop; }}
    }}
}}
"""


@unittest.skipUnless(NGINX, "nginx not installed")
class NginxRedirects(unittest.TestCase):
    """An independent server's redirects: nginx's `return 30x` (its Locations are absolute,
    built from the Host and the listening port), started here as a non-daemon child and stopped
    by its PID. Its access log counts the requests it saw."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="squall-nginx-redir-")
        cls.port = sqtest.free_port()
        conf = os.path.join(cls.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(d=cls.dir, host=sqtest.HOST, port=cls.port))
        cls.proc = subprocess.Popen([NGINX, "-p", cls.dir, "-c", conf,
                                     "-e", os.path.join(cls.dir, "error.log")],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((sqtest.HOST, cls.port), timeout=1).close()
                break
            except OSError:
                if cls.proc.poll() is not None or time.monotonic() > deadline:
                    err = cls.proc.stderr.read().decode(errors="replace")
                    raise RuntimeError("nginx did not start: " + err)
                time.sleep(0.05)

    @classmethod
    def tearDownClass(cls):
        sqtest.stop_proc(cls.proc)
        cls.proc.stderr.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def access_lines(self):
        with open(os.path.join(self.dir, "access.log")) as f:
            return sum(1 for _ in f)

    def test_plan_against_nginx(self):
        before = self.access_lines()
        plan = os.path.join(self.dir, "plan.yaml")
        with open(plan, "w") as f:
            f.write(textwrap.dedent(f"""
                target: http://{sqtest.HOST}:{self.port}
                scenarios:
                  s:
                    executor: shared-iterations
                    vus: 2
                    iterations: {ITERS}
                    cookies: true
                    flow:
                      - name: old
                        request: {{ url: /old }}
                        check: {{ status: 200, body_contains: "cookie=n=1" }}
                      - name: abs
                        request: {{ url: /abs }}
                        check: {{ status: 200 }}
                      - name: post
                        request: {{ method: POST, url: /post, body: "12345" }}
                        check: {{ body_contains: "method=POST length=5" }}
                      - name: loop
                        request: {{ url: /loop, redirects: 2 }}
                        check: {{ status: 302 }}
                """))
        p, _ = sqtest.run_squall("run", plan, "--json", "-", "-q", timeout=60)
        self.assertTrue(p.stdout.strip(), p.stderr)
        doc = json.loads(p.stdout)
        for c in doc["checks"]:
            self.assertEqual((c["passed"], c["failed"]), (ITERS, 0), c)
        self.assertEqual(doc["errors"]["redirect_limit"], ITERS)
        self.assertEqual(doc["requests"]["sent"], (2 + 2 + 2 + 3) * ITERS)
        # nginx writes its log line when a request ends: wait for the last ones
        deadline = time.monotonic() + 5
        while self.access_lines() - before < doc["requests"]["sent"] and \
                time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(self.access_lines() - before, doc["requests"]["sent"])


if __name__ == "__main__":
    sqtest.main()

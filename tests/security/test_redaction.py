"""Credentials never written: every output of a run keeps none of the secrets it sent or got.

A small HTTP/1.1 server of this test's own on 127.0.0.1 (a port the kernel picks) plays the
system under test: an OAuth2 token endpoint (the client-credentials grant, HTTP Basic client
authentication) that hands out a token this test knows, /login that sets a session cookie of its
own making (never in a URL), and /echo that answers with the request as it came (start line,
header fields, body), so every credential the client sends comes back in a response body too.

Secrets, fresh per run of the test: a quick run's -H Authorization (Bearer), Cookie and X-Api-Key
values; a plan's fixed `Authorization: Basic ...` header, its auth.oauth2 client secret and the
token the endpoint issues, the password column of a feeder marked `secret:`, and the cookie the
server set. The runs write every output they can (--json, --html, --out ndjson, --http-debug on
stderr, the summary, `squall report --html`); a daemon runs a quick request and a plan, and its
SQLite store (every row of every table, read with sqlite3), its API answers and its log are
searched. No secret may appear anywhere. Then the same runs with the opt-outs (--no-redact, a
plan's `redact: false`, a request's `no-redact`) must show them: the search can see what it
looks for.
"""

import base64
import json
import os
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import sec  # noqa: F401  (puts tests/e2e on the path)
import sqtest
from sqtest import HOST


def fresh(tag):
    return "%s-%s" % (tag, secrets.token_hex(8))


S = {
    "quick_bearer": fresh("QuickBearer"),
    "quick_cookie": fresh("QuickCookie"),
    "quick_apikey": fresh("QuickApiKey"),
    "plan_basic": base64.b64encode(("loader:" + fresh("BasicPass")).encode()).decode(),
    "client_secret": fresh("ClientSecret"),
    "oauth_token": fresh("OAuthToken"),
    "feeder_pw1": fresh("FeederPwOne"),
    "feeder_pw2": fresh("FeederPwTwo"),
    "server_cookie": fresh("ServerCookie"),
}
QUICK = ("quick_bearer", "quick_cookie", "quick_apikey")
PLAN = ("plan_basic", "oauth_token", "feeder_pw1", "feeder_pw2", "server_cookie")
CLIENT_ID = "load-test"


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, extra=()):
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        path = self.path.split("?")[0]
        if path == "/oauth/token":
            want = "Basic " + base64.b64encode(
                ("%s:%s" % (CLIENT_ID, S["client_secret"])).encode()).decode()
            if self.headers.get("Authorization") != want or b"client_credentials" not in body:
                return self.answer(401, b'{"error":"invalid_client"}')
            tok = json.dumps({"access_token": S["oauth_token"], "token_type": "Bearer",
                              "expires_in": 3600}).encode()
            return self.answer(200, tok)
        if path == "/login":
            return self.answer(200, b"welcome",
                               [("Set-Cookie", "sid=%s; Path=/" % S["server_cookie"])])
        if path == "/echo":  # the request as it came: start line, fields, body
            head = "%s %s %s\r\n%s\r\n" % (self.command, self.path, self.request_version,
                                           str(self.headers).replace("\n", "\r\n").rstrip())
            return self.answer(200, head.encode() + b"\r\n" + body)
        return self.answer(404, b"")

    do_GET = do_POST = handle_any


def plan_text(port, csv, redact=True, vus=2, iterations=3):
    return """target: http://127.0.0.1:%d
name: redaction
%s
data:
  users: { csv: %s, mode: per-vu, secret: [password] }
auth:
  oauth2:
    token_url: /oauth/token
    client_id: %s
    client_secret: %s
scenarios:
  s:
    executor: per-vu-iterations
    vus: %d
    iterations: %d
    cookies: true
    flow:
      - name: basic
        request: { url: /echo, headers: { Authorization: "Basic %s" } }
      - name: login
        request:
          url: /login
          method: POST
          json: { user: "{{users.user}}", password: "{{users.password}}" }
      - name: bearer
        request: { url: /echo, headers: { Authorization: "Bearer {{$oauth.token}}" } }
      - name: cookie
        request: { url: /echo }
""" % (port, "" if redact else "redact: false", csv, CLIENT_ID, S["client_secret"], vus,
       iterations, S["plan_basic"])


def found(text, keys):
    return sorted(k for k in keys if S[k] in text)


class Redaction(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = ThreadingHTTPServer((HOST, 0), Handler)
        cls.srv.daemon_threads = True
        cls.port = cls.srv.server_address[1]
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()
        cls.tmp = tempfile.mkdtemp(prefix="squall-redact-")
        cls.csv = os.path.join(cls.tmp, "users.csv")
        with open(cls.csv, "w") as f:
            f.write("user,password\nalice,%s\nbob,%s\n" % (S["feeder_pw1"], S["feeder_pw2"]))

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def outputs(self, tag, args):
        """Runs squall ARGS with --json, --html, --out ndjson; then `squall report --html` from
        the JSON. Returns {what: text} of every output."""
        j, h, n, h2 = (self.path("%s.%s" % (tag, x)) for x in ("json", "html", "ndjson", "r.html"))
        p, _ = sqtest.run_squall(*args, "--json", j, "--html", h, "--out", "ndjson=" + n,
                                 "--sample-responses", "100")
        self.assertEqual(p.returncode, 0, p.stderr)
        r, _ = sqtest.run_squall("report", j, "--html", h2)
        self.assertEqual(r.returncode, 0, r.stderr)
        s, _ = sqtest.run_squall("report", j)
        out = {"stdout": p.stdout, "stderr": p.stderr, "report summary": s.stdout}
        for what, f in (("json", j), ("html", h), ("ndjson", n), ("report html", h2)):
            with open(f, errors="replace") as fh:
                out[what] = fh.read()
        doc = json.loads(out["json"])
        kept = sum(len(c["samples"]) for c in doc["sampled_exchanges"]["classes"])
        self.assertEqual(kept, doc["requests"]["completed"], "every exchange is kept")
        return out

    def quick_args(self, *more):
        return ["http://%s:%d/echo" % (HOST, self.port), "-n", "4", "-c", "1", "-t", "1",
                "-H", "Authorization: Bearer " + S["quick_bearer"],
                "-H", "Cookie: theme=dark; session=" + S["quick_cookie"],
                "-H", "X-Api-Key: " + S["quick_apikey"], "--http-debug", *more]

    def test_quick_outputs_keep_no_secret(self):
        out = self.outputs("quick", self.quick_args())
        for what, text in out.items():
            self.assertEqual(found(text, QUICK), [], "%s holds a secret" % what)
        self.assertIn("Authorization: Bearer [redacted]", out["stderr"])  # --http-debug
        self.assertIn("-H 'Authorization: Bearer [redacted]'",
                      json.loads(out["json"])["run"]["command"])
        # the opt-out shows them: the search above could see them
        out = self.outputs("quick-kept", self.quick_args("--no-redact"))
        for what in ("json", "html", "stderr", "report html"):
            self.assertEqual(found(out[what], QUICK), sorted(QUICK), what)
        self.assertEqual(found(out["ndjson"], QUICK), [])  # per-request lines hold no header

    def test_plan_outputs_keep_no_secret(self):
        plan = self.path("plan.yaml")
        with open(plan, "w") as f:
            f.write(plan_text(self.port, self.csv))
        out = self.outputs("plan", ["run", plan])
        for what, text in out.items():
            self.assertEqual(found(text, PLAN + ("client_secret",)), [],
                             "%s holds a secret" % what)
        doc = json.loads(out["json"])
        reqs = [x["request"]["text"] for c in doc["sampled_exchanges"]["classes"]
                for x in c["samples"]]
        self.assertTrue(any("Authorization: Basic [redacted]" in r for r in reqs))
        self.assertTrue(any("Authorization: Bearer [redacted]" in r for r in reqs))
        self.assertTrue(any("Cookie: [redacted]" in r for r in reqs))
        heads = [x["response"]["head"] for c in doc["sampled_exchanges"]["classes"]
                 for x in c["samples"] if x["response"]]
        self.assertTrue(any("Set-Cookie: [redacted]" in h for h in heads))
        # redact: false shows them (the client secret goes to the token endpoint only)
        with open(plan, "w") as f:
            f.write(plan_text(self.port, self.csv, redact=False))
        out = self.outputs("plan-kept", ["run", plan])
        for what in ("json", "html", "report html"):
            self.assertEqual(found(out[what], PLAN), sorted(PLAN), what)
        # and so does --no-redact over a plan that redacts
        with open(plan, "w") as f:
            f.write(plan_text(self.port, self.csv))
        out = self.outputs("plan-flag", ["run", plan, "--no-redact"])
        self.assertEqual(found(out["json"], PLAN), sorted(PLAN))

    def test_broker_url_password(self):
        """A nats:// URL's password (user:password@) is a credential: config.url, run.command,
        the report and the summary show it redacted."""
        nats = shutil.which("nats-server")
        if not nats:
            self.skipTest("no nats-server")
        import socket
        s = socket.socket()
        s.bind((HOST, 0))
        port = s.getsockname()[1]
        s.close()
        pw = fresh("NatsPassword")
        proc = subprocess.Popen([nats, "-a", HOST, "-p", str(port), "--user", "loader", "--pass",
                                 pw], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while True:
                try:
                    socket.create_connection((HOST, port), timeout=1).close()
                    break
                except OSError:
                    self.assertLess(time.monotonic(), deadline, "nats-server did not listen")
                    time.sleep(0.05)
            url = "nats://loader:%s@%s:%d/redaction" % (pw, HOST, port)
            for keep in (False, True):
                j, h = self.path("nats-%s.json" % keep), self.path("nats-%s.html" % keep)
                p, _ = sqtest.run_squall(url, "-n", "20", "-c", "1", "--json", j, "--html", h,
                                         *(["--no-redact"] if keep else []))
                self.assertEqual(p.returncode, 0, p.stderr)
                with open(j) as f:
                    doc = f.read()
                with open(h) as f:
                    html = f.read()
                if keep:
                    self.assertIn(pw, json.loads(doc)["config"]["url"])
                    continue
                for what, text in (("json", doc), ("html", html), ("stdout", p.stdout),
                                   ("stderr", p.stderr)):
                    self.assertFalse(pw in text, "%s holds the broker password" % what)
                d = json.loads(doc)
                self.assertEqual(d["config"]["url"],
                                 "nats://loader:[redacted]@%s:%d/redaction" % (HOST, port))
                self.assertIn("nats://loader:[redacted]@", d["run"]["command"])
        finally:
            sqtest.stop(proc)

    def test_proxy_password(self):
        """A proxy URL's password (--proxy http://user:password@host) is a credential: the result
        (config.proxy never has it; run.command redacts it), the report, the summary, and a
        daemon's stored request and API answers do not hold it."""
        pw = fresh("ProxyPassword")
        closed = sqtest.free_port()  # nothing listens: the run fails to connect, and says so
        proxy = "http://loader:%s@127.0.0.1:%d" % (pw, closed)
        j, h = self.path("proxy.json"), self.path("proxy.html")
        p, _ = sqtest.run_squall("http://%s:%d/fast" % (HOST, self.port), "-n", "2",
                                 "--proxy", proxy, "--json", j, "--html", h)
        with open(j) as f:
            doc = f.read()
        with open(h) as f:
            html = f.read()
        for what, text in (("json", doc), ("html", html), ("stdout", p.stdout),
                           ("stderr", p.stderr)):
            self.assertFalse(pw in text, "%s holds the proxy password" % what)
        d = json.loads(doc)
        self.assertEqual(d["config"]["proxy"]["url"], "http://127.0.0.1:%d" % closed)
        self.assertIn("loader:[redacted]@", d["run"]["command"])
        data = self.path("store-proxy")
        proc, port = sqtest.start_serve("--data", data, "-t", "1")
        try:
            q = {"url": "http://%s:%d/fast" % (HOST, self.port), "requests": 2, "proxy": proxy}
            st, _, raw = sqtest.http(port, "POST", "/runs", json.dumps({"quick": q}).encode(),
                                     {"Content-Type": "application/json"})
            self.assertEqual(st, 201, raw)
            rid = json.loads(raw)["id"]
            deadline = time.monotonic() + 60
            while True:
                run = sqtest.json_get(port, "/runs/%d" % rid)
                if run["status"] not in ("queued", "running"):
                    break
                self.assertLess(time.monotonic(), deadline, run)
                time.sleep(0.2)
            self.assertEqual(run["request"]["quick"]["proxy"],
                             "http://loader:[redacted]@127.0.0.1:%d" % closed)
            self.assertNotIn(pw, json.dumps(run))
        finally:
            sqtest.stop(proc)
        os.unlink(proc.log_path)
        db = sqlite3.connect(os.path.join(data, "squall.db"))
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            for row in db.execute('SELECT * FROM "%s"' % table):
                for cell in row:
                    if isinstance(cell, bytes):
                        cell = cell.decode("latin-1")
                    self.assertNotIn(pw, str(cell), table)
        db.close()

    def daemon_runs(self, keep):
        data = self.path("store-%s" % ("kept" if keep else "redacted"))
        proc, port = sqtest.start_serve("--data", data, "-t", "1")
        try:
            q = {"url": "http://%s:%d/echo" % (HOST, self.port), "requests": 4,
                 "connections": 1, "sample-responses": 100, "method": "POST",
                 "body": "token=" + S["quick_bearer"],  # a credential outside its header
                 "header": ["Authorization: Bearer " + S["quick_bearer"],
                            "Cookie: session=" + S["quick_cookie"],
                            "X-Api-Key: " + S["quick_apikey"]]}
            if keep:
                q["no-redact"] = True
            bodies = [{"quick": q, "name": "quick"},
                      # one VU, one iteration: its 4 exchanges are all kept (5 per class)
                      {"plan": plan_text(self.port, self.csv, redact=not keep, vus=1,
                                         iterations=1),
                       "file": "redaction.yaml"}]
            ids, answers = [], []
            for b in bodies:
                st, _, raw = sqtest.http(port, "POST", "/runs", json.dumps(b).encode(),
                                         {"Content-Type": "application/json"})
                self.assertEqual(st, 201, raw)
                ids.append(json.loads(raw)["id"])
            for rid in ids:
                deadline = time.monotonic() + 60
                while True:
                    run = sqtest.json_get(port, "/runs/%d" % rid)
                    if run["status"] not in ("queued", "running"):
                        break
                    self.assertLess(time.monotonic(), deadline, run)
                    time.sleep(0.2)
                self.assertEqual(run["status"], "finished", run.get("reason"))
                answers.append(json.dumps(run))
                st, _, html = sqtest.http(port, "GET", "/runs/%d/report" % rid)
                self.assertEqual(st, 200)
                answers.append(html.decode(errors="replace"))
            if not keep:
                # "Run again" with a redacted request is refused, saying why
                stored = json.loads(answers[0])["request"]
                self.assertTrue(stored.get("redacted"), stored)
                st, _, raw = sqtest.http(port, "POST", "/runs", json.dumps(stored).encode(),
                                         {"Content-Type": "application/json"})
                self.assertEqual(st, 400, raw)
                self.assertIn(b"redacted", raw)
        finally:
            sqtest.stop(proc)
        with open(proc.log_path, errors="replace") as f:
            log = f.read()
        os.unlink(proc.log_path)
        self.assertNotIn("Sanitizer", log)
        db = sqlite3.connect(os.path.join(data, "squall.db"))
        rows = []
        for (table,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            for row in db.execute('SELECT * FROM "%s"' % table):
                for cell in row:
                    if isinstance(cell, bytes):
                        cell = cell.decode("latin-1")
                    rows.append("%s: %s" % (table, cell))
        db.close()
        return "\n".join(rows), "\n".join(answers), log

    def test_daemon_store_keeps_no_secret(self):
        keys = QUICK + PLAN + ("client_secret",)
        rows, answers, log = self.daemon_runs(keep=False)
        self.assertEqual(found(rows, keys), [], "a store row holds a secret")
        self.assertEqual(found(answers, keys), [], "an API answer holds a secret")
        self.assertEqual(found(log, keys), [], "the daemon's log holds a secret")
        # opted out: the store keeps them (the plan text holds its client secret and Basic value;
        # its one VU reads the feeder's first row only)
        rows, answers, log = self.daemon_runs(keep=True)
        self.assertEqual(found(rows, keys), sorted(k for k in keys if k != "feeder_pw2"))
        self.assertEqual(found(log, keys), [])


if __name__ == "__main__":
    sys.exit(sqtest.main())

#!/usr/bin/env python3
"""End-to-end tests of plans with every protocol and output the quick face has, and of the quick
face's --urls list, against `squall target` (h2c, and h2 over TLS) on ephemeral loopback ports:

- a plan scenario with `protocol: h2` (or `squall run --http2`) runs its flow over h2 streams:
  extraction, checks and cookies see the h2 heads and bodies; bodies are decoded (gzip, br,
  zstd...) and SSE streams counted; the target's /stats confirms the streams arrived as HTTP/2;
- an https plan mixing HTTP/1.1 and h2 scenarios (two TLS clients, ALPN h2 for one);
- `squall run --out csv=/hdr=/ndjson= --sample` as the quick face writes them, steps named;
- the quick face over HTTP/2 decodes and scans bodies as over HTTP/1.1;
- `squall --urls FILE`: round-robin, per-URL figures the target's own counters confirm, over
  HTTP/1.1 and h2c, and every refusal with its message and exit code 2.

Every load is bounded by an iteration or request count (a few hundred requests). About 20 s.
"""
import json
import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402

try:
    import jsonschema
except ImportError:  # scripts/deps.sh installs python3-jsonschema
    jsonschema = None

SCHEMA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                      "result.schema.json")

FLOW = """
    scenarios:
      shoppers:
        executor: shared-iterations
        {protocol}
        vus: 4
        iterations: 40
        cookies: true
        flow:
          - name: login
            request: {{ method: POST, url: /login, json: {{ user: u, password: p }} }}
            extract: {{ token: {{ json: "$.token" }} }}
            check: {{ status: 200 }}
          - name: items
            request:
              url: "/items?vu={{{{$vu}}}}"
              headers: {{ Authorization: "Bearer {{{{token}}}}" }}
            check: {{ status: 200, body_contains: items, json: {{ "$.count": {{ gt: 0 }} }} }}
          - name: set_cookie
            request: {{ url: "/cookie/set?flavour=oat" }}
          - name: echo_cookie
            request: {{ url: /cookie/echo }}
            check: {{ body_contains: "flavour=oat" }}
          - name: json
            request: {{ url: /json/5000 }}
            check: {{ json: {{ "$": {{ exists: true }} }} }}
          - name: events
            request: {{ url: "/sse?events=3&interval=1" }}
            check: {{ body_contains: "data:" }}
    """


class Case(sqtest.TargetCase):
    target_args = ("-t", "2", "-q")

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.reset()

    def tearDown(self):
        self.tmp.cleanup()

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(textwrap.dedent(text).lstrip())
        return self.path(name)

    def plan(self, body, base=None, name="plan.yaml"):
        return self.write(name, f"target: {base or self.base}\n" + textwrap.dedent(body).lstrip())

    def run_doc(self, *args, rc=0, timeout=60):
        p, doc, _ = sqtest.run_json(*args, "-q", timeout=timeout)
        self.assertEqual(p.returncode, rc, p.stderr)
        self.assertIsNotNone(doc, p.stderr)
        self.assert_accounting(doc)
        if jsonschema:
            with open(SCHEMA) as f:
                jsonschema.validate(doc, json.load(f))
        return doc

    def refused(self, args, message):
        p, _ = sqtest.run_squall(*args)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(message, p.stderr)

    def step(self, doc, name):
        return next(s for s in doc["steps"] if s["step"] == name)

    def assert_flow_passed(self, doc, iterations):
        self.assertEqual(doc["requests"]["completed"], 6 * iterations)
        self.assertEqual(doc["requests"]["failed"], 0)
        for c in doc["checks"]:
            self.assertEqual((c["passed"], c["failed"]), (iterations, 0), c)
        self.assertEqual(len(doc["checks"]), 7)
        # /json/5000 came compressed (offered by default) and was decoded for its check
        self.assertEqual(doc["bodies"]["compressed_responses"], iterations)
        self.assertEqual(doc["bodies"]["undecodable_responses"], 0)
        self.assertGreaterEqual(doc["bodies"]["decoded_bytes"], iterations * 5000)
        self.assertEqual(doc["sse"]["streams"], iterations)
        self.assertEqual(doc["sse"]["events"], 3 * iterations)


class PlanOverH2c(Case):
    def test_flow_over_h2_streams(self):
        doc = self.run_doc("run", self.plan(FLOW.format(protocol="protocol: h2")))
        self.assert_flow_passed(doc, 40)
        self.assertEqual(doc["config"]["protocol"], "h2c")
        self.assertEqual(doc["scenarios"][0]["protocol"], "h2c")
        st = self.stats()
        # every request arrived as an h2 stream, one connection per VU (--streams 1)
        self.assertEqual(st["h2"], {"connections": 4, "streams": 240})
        self.assertEqual(st["auth"], {"logins": 40, "items_ok": 40, "items_unauthorized": 0})
        self.assertEqual(st["endpoints"]["cookie"], 80)

    def test_the_same_flow_over_http11_is_the_same(self):
        doc = self.run_doc("run", self.plan(FLOW.format(protocol="")))
        self.assert_flow_passed(doc, 40)
        self.assertEqual(doc["scenarios"][0]["protocol"], "http/1.1")
        self.assertEqual(self.stats()["h2"]["streams"], 0)

    def test_http2_flag_and_streams(self):
        path = self.plan("""
            scenarios:
              s:
                executor: per-vu-iterations
                vus: 8
                iterations: 25
                flow:
                  - request: { url: "/echo?vu={{$vu}}" }
                    check: { body_contains: "HTTP/2" }
            """)
        doc = self.run_doc("run", path, "--http2", "--streams", "4", "-t", "1")
        self.assertEqual(doc["requests"]["completed"], 200)
        self.assertEqual(doc["checks"][0]["passed"], 200)
        self.assertEqual(doc["config"]["streams"], 4)
        self.assertEqual(self.stats()["h2"], {"connections": 2, "streams": 200})
        self.refused(["run", path, "--streams", "4"],
                     "squall run: --streams applies to HTTP/2 scenarios (--http2, or protocol: h2)")

    def test_bad_protocol_is_refused_with_its_place(self):
        path = self.plan("""
            scenarios:
              s:
                executor: shared-iterations
                protocol: h4
                flow: [ { request: { url: /fast } } ]
            """)
        for face in ("run", "validate"):
            self.refused([face, path], path + ":5:15: scenarios.s.protocol: 'h4' is not a "
                         "protocol: http/1.1 (the default), h2 or h3")

    def test_websocket_steps_stay_on_http11(self):
        ws = """
            scenarios:
              chat:
                executor: shared-iterations
                {protocol}
                iterations: 4
                flow:
                  - ws: {{ connect: /ws }}
                  - ws: {{ send: hello, reply: true }}
                  - ws: {{ close: 1000 }}
              api:
                executor: shared-iterations
                iterations: 10
                flow: [ {{ request: {{ url: /echo }}, check: {{ body_contains: HTTP/2 }} }} ]
            """
        self.refused(["run", self.plan(ws.format(protocol="protocol: h2"))],
                     "scenario 'chat': protocol: h2 cannot carry WebSocket steps (their upgrade "
                     "needs HTTP/1.1)")
        doc = self.run_doc("run", self.plan(ws.format(protocol="")), "--http2")
        self.assertEqual([s["protocol"] for s in doc["scenarios"]], ["http/1.1", "h2c"])
        self.assertEqual(doc["checks"][0]["passed"], 10)
        self.assertEqual(self.stats()["h2"]["streams"], 10)

    def test_run_writes_every_out_file(self):
        path = self.plan(FLOW.format(protocol="protocol: h2"))
        csv, hdr, nd = self.path("s.csv"), self.path("s.hdr"), self.path("s.ndjson")
        doc = self.run_doc("run", path, "--out", "csv=" + csv, "--out", "hdr=" + hdr, "--out",
                           "ndjson=" + nd)
        with open(csv) as f:
            rows = f.read().splitlines()
        self.assertTrue(rows[0].startswith("t_s,len_s,requests,completed,"), rows[0])
        self.assertEqual(sum(int(r.split(",")[3]) for r in rows[1:]), 240)
        with open(hdr) as f:
            log = f.read()
        self.assertIn("#[Histogram log format version 1.2]", log)
        self.assertIn("HISTF", log)
        with open(nd) as f:
            lines = [json.loads(x) for x in f]
        self.assertEqual(len(lines), doc["requests"]["sent"])
        steps = {}
        for x in lines:
            self.assertEqual(x["scenario"], "shoppers")
            steps[x["step"]] = steps.get(x["step"], 0) + 1
        self.assertEqual(steps, {s: 40 for s in ("login", "items", "set_cookie", "echo_cookie",
                                                 "json", "events")})
        # --sample records a share of the requests
        doc = self.run_doc("run", path, "--out", "ndjson=" + nd, "--sample", "0.25")
        with open(nd) as f:
            n = sum(1 for _ in f)
        self.assertGreater(n, 10)
        self.assertLess(n, 140)
        self.refused(["run", path, "--sample", "0.5"],
                     "squall run: --sample applies to --out ndjson=FILE")
        self.refused(["run", path, "--out", "xml=a"],
                     "squall run: --out: 'xml=a' is not an output (csv=, hdr=, ndjson=FILE, prometheus-rw= or influxdb=URL)")
        self.refused(["run", path, "--out", "csv=" + self.path("no/such/dir.csv")],
                     "--out csv: cannot write")


class QuickH2Bodies(Case):
    def test_h2_bodies_are_decoded_and_events_counted(self):
        doc = self.run_doc("--http2", "-c", "2", "--streams", "4", "-n", "200",
                           self.base + "/json/20000")
        b = doc["bodies"]
        self.assertEqual(doc["status"]["2xx"], 200)
        self.assertEqual(b["accept_encoding"], "gzip, deflate, br, zstd")
        self.assertEqual(b["compressed_responses"], 200)
        self.assertEqual(b["decoded_bytes"], 200 * 20000)
        self.assertLess(b["wire_bytes"], 200 * 20000)
        for enc in ("gzip", "br", "zstd", "deflate"):
            doc = self.run_doc("--http2", "-n", "20", "-H", "Accept-Encoding: " + enc,
                               self.base + "/json/3000")
            self.assertEqual(doc["bodies"]["compressed_responses"], 20, enc)
            self.assertEqual(doc["bodies"]["decoded_bytes"], 20 * 3000, enc)
        doc = self.run_doc("--http2", "--no-compression", "-n", "20", self.base + "/json/3000")
        self.assertEqual(doc["bodies"]["compressed_responses"], 0)
        self.assertEqual(doc["bodies"]["decoded_bytes"], 20 * 3000)
        doc = self.run_doc("--http2", "-c", "1", "--streams", "5", "-n", "10",
                           self.base + "/sse?events=4&interval=1")
        self.assertEqual((doc["sse"]["streams"], doc["sse"]["events"]), (10, 40))
        self.assertEqual(self.stats()["h2"]["streams"], 200 + 80 + 20 + 10)


URLS = """
    # one origin, four requests
    {base}/fast
    POST {base}/echo hello from the list
    PUT  {base}/echo @body.json

    {base}/status/503
    """


class UrlList(Case):
    def urls(self):
        with open(self.path("body.json"), "w") as f:
            f.write('{"from": "a file"}')
        return self.write("urls.txt", URLS.format(base=self.base))

    def check_urls(self, doc, n):
        u = doc["urls"]
        self.assertEqual([(x["method"], x["url"].rsplit("/", 1)[1], x["line"]) for x in u],
                         [("GET", "fast", 2), ("POST", "echo", 3), ("PUT", "echo", 4),
                          ("GET", "503", 6)])
        for x in u:
            self.assertEqual((x["requests"], x["completed"], x["failed"]), (n, n, 0), x)
            self.assertEqual(x["latency"]["count"], n)
        self.assertEqual(u[0]["status"]["2xx"], n)
        self.assertEqual(u[3]["status"]["5xx"], n)
        self.assertEqual(doc["status"]["5xx"], n)
        r = doc["requests"]
        self.assertEqual([sum(x[k] for x in u) for k in ("requests", "completed", "failed")],
                         [r["sent"], r["completed"], r["failed"]])
        for k in doc["status"]:
            self.assertEqual(sum(x["status"][k] for x in u), doc["status"][k], k)
        st = self.stats()
        self.assertEqual((st["endpoints"]["fast"], st["endpoints"]["echo"],
                          st["endpoints"]["status"]), (n, 2 * n, n))

    def test_round_robin_over_http11_and_h2c(self):
        path = self.urls()
        nd = self.path("u.ndjson")
        doc = self.run_doc("--urls", path, "-c", "4", "-t", "2", "-n", "400", "--out",
                           "ndjson=" + nd)
        self.assertEqual(doc["config"]["urls_file"], path)
        self.check_urls(doc, 100)
        with open(nd) as f:
            labels = [json.loads(x)["url"] for x in f]
        self.assertEqual(labels.count("POST " + self.base + "/echo"), 100)
        self.assertEqual(labels.count("GET " + self.base + "/status/503"), 100)
        self.reset()
        doc = self.run_doc("--http2", "--streams", "4", "--urls", path, "-c", "2", "-t", "2",
                           "-n", "400")
        self.check_urls(doc, 100)
        self.assertEqual(self.stats()["h2"]["streams"], 400)

    def test_summary_lists_each_url(self):
        path = self.urls()
        p, _ = sqtest.run_squall("--urls", path, "-c", "1", "-n", "8")
        self.assertEqual(p.returncode, 0, p.stderr)
        out = p.stdout + p.stderr
        self.assertIn("\nURLs (%s)\n" % path, out)
        self.assertIn("  POST   %s/echo\n         2 req · 0 failed (0 transport, 0 HTTP) · 2xx 2 · "
                      "p50 " % self.base, out)
        # a URL that answers 503 every time fails every request, as an HTTP failure
        self.assertIn("  GET    %s/status/503\n         2 req · 2 failed (0 transport, 2 HTTP) · "
                      "5xx 2 · p50 " % self.base, out)

    def test_bodies_reach_the_server(self):
        # the target answers 413 to a body over 1 MiB: a line's @FILE body (2 MB) is sent, and
        # a line without a body takes -b's (small), over both protocols
        with open(self.path("big.bin"), "wb") as f:
            f.write(b"x" * 2000000)
        path = self.write("bodies.txt", f"""
            PUT {self.base}/echo @big.bin
            PUT {self.base}/echo
            """)
        for proto in ([], ["--http2"]):
            doc = self.run_doc(*proto, "--urls", path, "-b", "small", "-n", "6")
            self.assertEqual([(u["status"]["4xx"], u["status"]["2xx"]) for u in doc["urls"]],
                             [(3, 0), (0, 3)], proto)
            self.assertGreater(doc["bytes"]["sent"], 3 * 2000000)

    def test_refusals(self):
        self.refused(["--urls", self.path("none.txt")],
                     "squall: --urls: '%s': No such file or directory" % self.path("none.txt"))
        bad = self.write("bad.txt", f"""
            {self.base}/a
            https://127.0.0.1:1/b
            """)
        self.refused(["--urls", bad], bad + ":2:1: 'https://127.0.0.1:1/b' is on "
                     "https://127.0.0.1:1, not on http://127.0.0.1:%d like line 1: every URL of a "
                     "run has one scheme" % self.port)
        low = self.write("low.txt", f"post {self.base}/a\n")
        self.refused(["--urls", low], low + ":1:1: 'post' is not a method: methods are "
                     "case-sensitive (did you mean 'POST'?)")
        missing = self.write("missing.txt", f"POST {self.base}/a @gone.json\n")
        self.refused(["--urls", missing], missing + ":1: @gone.json: cannot read " +
                     self.path("gone.json") + ": No such file or directory")
        self.refused(["--urls", bad, self.base + "/"],
                     "give a URL or --urls FILE, not both")
        self.refused(["--urls", self.tmp.name], "it is a directory, not a file")


class PlanOverTls(unittest.TestCase):
    """https: ALPN h2 for h2 scenarios, none for HTTP/1.1 ones; a plan with both gets a client of
    each, and the target counts exactly the h2 scenario's requests as streams."""

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.port = sqtest.start_target("-t", "2", "-q", "--tls")
        cls.base = "https://%s:%d" % (sqtest.HOST, cls.port)

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.proc)

    def h2_streams(self):
        import http.client
        import ssl
        c = http.client.HTTPSConnection(sqtest.HOST, self.port, timeout=10,
                                        context=ssl._create_unverified_context())
        try:
            c.request("GET", "/stats")
            return json.loads(c.getresponse().read())["h2"]["streams"]
        finally:
            c.close()

    def run_plan(self, text):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.yaml")
            with open(path, "w") as f:
                f.write(f"target: {self.base}\n" + textwrap.dedent(text).lstrip())
            p, doc, _ = sqtest.run_json("run", path, "-k", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        return doc

    def test_all_h2_flow(self):
        before = self.h2_streams()
        doc = self.run_plan(FLOW.format(protocol="protocol: h2"))
        self.assertEqual(doc["requests"]["completed"], 240)
        self.assertEqual(doc["config"]["protocol"], "h2")
        self.assertEqual(doc["tls"]["alpn"], "h2")
        self.assertTrue(all(c["failed"] == 0 for c in doc["checks"]), doc["checks"])
        self.assertEqual(self.h2_streams() - before, 240)

    def test_mixed_protocols(self):
        before = self.h2_streams()
        doc = self.run_plan("""
            scenarios:
              two:
                executor: shared-iterations
                protocol: h2
                vus: 2
                iterations: 30
                flow:
                  - request: { url: /echo }
                    check: { body_contains: '"version":"HTTP/2"' }
              one:
                executor: shared-iterations
                protocol: http/1.1
                vus: 2
                iterations: 20
                flow:
                  - request: { url: /echo }
                    check: { body_contains: '"version":"HTTP/1.1"' }
            """)
        self.assertEqual(doc["requests"]["completed"], 50)
        self.assertNotIn("protocol", doc["config"])
        self.assertEqual([s["protocol"] for s in doc["scenarios"]], ["h2", "http/1.1"])
        self.assertEqual([(c["passed"], c["failed"]) for c in doc["checks"]], [(30, 0), (20, 0)])
        self.assertEqual(self.h2_streams() - before, 30)


if __name__ == "__main__":
    sqtest.main()

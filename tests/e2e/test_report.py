#!/usr/bin/env python3
"""End-to-end tests of `squall report FILE [--html OUT]` on a saved result (no load is run).

The input is tests/browser/fixture.json (a recorded open-loop run with its per-second series)
and variants of it written to a temporary folder. tests/browser/report.test.mjs opens the HTML in
a real browser; this file checks the terminal summary, the HTML's text and the bad-input paths.
"""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

SQUALL = sqtest.squall_path()
FIXTURE = os.path.join(os.path.dirname(__file__), "..", "browser", "fixture.json")
ISLAND_RE = re.compile(
    r'<script type="application/json" id="squall-data">(.*?)</script>', re.S)


def run(*args, stdin=None):
    return subprocess.run([SQUALL, "report", *args], capture_output=True, text=True,
                          input=stdin, timeout=60)


def load_fixture():
    with open(FIXTURE) as f:
        return json.load(f)


def group(n):
    return "{:,}".format(n)


class Summary(unittest.TestCase):
    def test_reprints_the_summary(self):
        p = run(FIXTURE)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")
        out = p.stdout
        rq = load_fixture()["requests"]
        self.assertRegex(out, r"^squall GET http://127\.0\.0\.1:\d+/fast → 127\.0\.0\.1:\d+\n")
        self.assertIn("open loop · ramping-arrival-rate · 16 connections (max in flight 16)", out)
        self.assertIn("Requests     %s sent · %s completed · %s in flight at the end\n"
                      % (group(rq["sent"]), group(rq["completed"]), group(rq["in_flight"])), out)
        # an older document (no "failures" block): the transport failures from "requests"
        self.assertIn("Failed       %s transport (no response) · " % group(rq["failed"]), out)
        self.assertIn("Arrivals     %s due · %s dropped" % (group(rq["arrivals"]),
                                                          group(rq["dropped"])), out)
        self.assertIn("(from the intended send)", out)
        self.assertIn("(uncorrected: from the actual send)", out)
        self.assertIn("Status       2xx %s\n" % group(rq["completed"]), out)
        self.assertIn("Errors       none\n", out)
        self.assertIn("\nLatency distribution (log-spaced rows)\n", out)

    def test_figures_come_from_the_document(self):
        doc = load_fixture()
        out = run(FIXTURE).stdout
        tput = "Throughput   {:,.1f} req/s".format(doc["rate"]["requests_per_s"])
        self.assertIn(tput, out)
        p50 = doc["latency"]["p50_us"]
        want = "%dµs" % p50 if p50 < 1000 else "%.2fms" % (p50 / 1e3)
        self.assertIn("p50 " + want, out)

    def test_distribution_adds_up(self):
        doc = load_fixture()
        out = run(FIXTURE).stdout
        rows = out.split("\nLatency distribution (log-spaced rows)\n", 1)[1].strip().splitlines()
        total = sum(int(r.split()[-1].replace(",", "")) for r in rows)
        self.assertEqual(total, doc["latency"]["count"])

    def test_reads_stdin(self):
        with open(FIXTURE) as f:
            p = run("-", stdin=f.read())
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("Requests     %s sent" % group(load_fixture()["requests"]["sent"]), p.stdout)

    def test_without_series_or_optional_keys(self):
        doc = load_fixture()
        for k in ("series", "latency_uncorrected", "spin_us", "connections", "config"):
            doc.pop(k, None)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            p = run(path)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("Requests     %s sent" % group(load_fixture()["requests"]["sent"]), p.stdout)
            p = run(path, "--html", os.path.join(d, "r.html"))
            self.assertEqual(p.returncode, 0, p.stderr)


class PlanArrivals(unittest.TestCase):
    """An open-loop plan's arrivals are iterations, each running its flow's requests: 80 due
    beside 160 sent must say so, in the summary and in the HTML report."""

    def test_iterations_are_named(self):
        doc = load_fixture()
        doc["plan"] = {"file": "two-steps.yaml", "target": "http://127.0.0.1:8080"}
        rq = doc["requests"]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            with open(path, "w") as f:
                json.dump(doc, f)
            out = run(path).stdout
            self.assertIn("Arrivals     %s iterations (each runs its flow's requests) due · %s "
                          "dropped" % (group(rq["arrivals"]), group(rq["dropped"])), out)
            html_path = os.path.join(d, "r.html")
            p = run(path, "--html", html_path)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(html_path, encoding="utf-8") as f:
                page = f.read()
            self.assertIn("Arrivals (iterations due; each runs its flow&#39;s requests)", page)
            self.assertIn("Dropped (iterations due, not started)", page)
        # a quick run's arrivals are requests: no such words
        self.assertNotIn("iterations", run(FIXTURE).stdout.split("Arrivals", 1)[1].split("\n")[0])


class Html(unittest.TestCase):
    def render(self, doc=None):
        with tempfile.TemporaryDirectory() as d:
            src = FIXTURE
            if doc is not None:
                src = os.path.join(d, "r.json")
                with open(src, "w") as f:
                    json.dump(doc, f)
            out = os.path.join(d, "r.html")
            p = run(src, "--html", out)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(p.stdout, "")
            with open(out, encoding="utf-8") as f:
                return f.read()

    def island(self, html):
        m = ISLAND_RE.findall(html)
        self.assertEqual(len(m), 1)
        self.assertNotIn("<", m[0])
        return json.loads(m[0])

    def test_self_contained(self):
        html = self.render()
        self.assertTrue(html.startswith("<!DOCTYPE html>\n"))
        self.assertIn("Content-Security-Policy", html)
        self.assertIn("default-src 'none'", html)
        # no external script, stylesheet, image or font
        self.assertNotRegex(html, r"""(?i)<(script|link|img|iframe)[^>]*\s(src|href)\s*=\s*["']?(https?:)?//""")
        self.assertNotRegex(html, r"(?i)@import|url\(\s*['\"]?(https?:)?//")
        self.assertIn("uPlot", html)
        self.assertIn('id="chart-hdr"', html)
        self.assertIn('id="chart-throughput"', html)
        self.assertNotIn("no per-second series", html)
        self.assertIn("<h3>Environment</h3>", html)
        self.assertIn("<h3>Executor</h3>", html)

    def test_island_carries_the_document_and_the_percentile_curves(self):
        doc = load_fixture()
        isl = self.island(self.render())
        self.assertEqual(isl["result"], doc)
        hdr = isl["hdr"]
        self.assertEqual(hdr["x"][0], 1)
        self.assertEqual(len(hdr["x"]), len(hdr["corrected"]))
        self.assertEqual(len(hdr["x"]), len(hdr["uncorrected"]))
        for curve in ("corrected", "uncorrected"):
            v = hdr[curve]
            self.assertEqual(v, sorted(v), curve)
        self.assertEqual(hdr["corrected"][-1], doc["latency"]["max_us"])
        self.assertEqual(hdr["uncorrected"][-1], doc["latency_uncorrected"]["max_us"])
        i90 = min(range(len(hdr["x"])), key=lambda i: abs(hdr["x"][i] - 10))
        self.assertEqual(hdr["corrected"][i90], doc["latency"]["p90_us"])
        self.assertGreaterEqual(hdr["x"][-1], doc["latency"]["count"])

    def test_without_series_says_so(self):
        doc = load_fixture()
        del doc["series"]
        html = self.render(doc)
        self.assertIn("no per-second series", html)
        self.assertNotIn('id="chart-throughput"', html)
        self.assertIn('id="chart-hdr"', html)

    def test_optional_sections_only_when_present(self):
        html = self.render()
        for h in ("Steps", "Checks", "Thresholds"):
            self.assertNotIn("<h2>%s</h2>" % h, html)
        doc = load_fixture()
        doc["steps"] = [
            {"scenario": "s", "step": "login", "method": "POST", "requests": 10, "failed": 3,
             "errors": 1, "duration_ms": {"count": 9, "med": 0.5, "p(95)": 1.2, "p(99)": 2.0}},
            {"scenario": "s", "step": "browse", "method": "GET", "requests": 0,
             "duration_ms": {"count": 0}}]
        doc["checks"] = [{"scenario": "s", "step": "login", "check": "status is 200",
                          "passed": 7, "failed": 3}]
        doc["thresholds"] = [{"metric": "p99", "condition": "< 10ms", "ok": True}]
        html = self.render(doc)
        for h in ("Steps", "Checks", "Thresholds"):
            self.assertIn("<h2>%s</h2>" % h, html)
        self.assertIn("status is 200", html)
        # the steps as a table, in the flow's order: requests, failed (transport, HTTP), p50 /
        # p95 / p99, the step's checks; not the document's keys as columns
        self.assertIn('<table id="steps">', html)
        self.assertNotIn("<th>duration_ms</th>", html)
        login = html.index("<tr><td>login</td><td>POST</td>")
        self.assertLess(login, html.index("<tr><td>browse</td><td>GET</td>"))
        self.assertIn('<td>login</td><td>POST</td><td class="n">10</td><td class="n">3</td>'
                      '<td class="n">1</td><td class="n">2</td><td class="n">500µs</td>'
                      '<td class="n">1.20ms</td><td class="n">2.00ms</td><td><span class="bad">'
                      '✗</span> status is 200 · 7 passed, 3 failed</td>', html)
        # request accounting: the check failures beside the transport and HTTP ones
        self.assertIn("<tr><th>Failed: checks</th><td class=\"n\">3 of 10</td></tr>", html)

    def test_escapes_document_strings(self):
        doc = load_fixture()
        evil = '</script><script>alert(1)</script><img src=x onerror="alert(2)">&\'"'
        doc["config"]["url"] = "http://h/" + evil
        doc["config"]["method"] = evil
        doc["aborted"] = True
        doc["abort_reason"] = evil
        doc["errors"][evil] = 1
        doc["steps"] = [{evil: evil}]
        html = self.render(doc)
        self.assertNotIn("<script>alert", html)
        self.assertNotIn("<img src=x", html)
        self.assertIn("&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;&lt;img src=x "
                      "onerror=&quot;alert(2)&quot;&gt;&amp;&#39;&quot;", html)
        self.assertEqual(html.count("<script"), 3)
        self.assertEqual(self.island(html)["result"]["config"]["url"], "http://h/" + evil)


class BadInput(unittest.TestCase):
    def one_line(self, p, *needles):
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(p.stdout, "")
        lines = p.stderr.splitlines()
        self.assertEqual(len(lines), 1, p.stderr)
        for n in needles:
            self.assertIn(n, lines[0])

    def write(self, d, name, text):
        path = os.path.join(d, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_missing_file(self):
        self.one_line(run("/nonexistent/result.json"), "/nonexistent/result.json",
                      "No such file")

    def test_not_json(self):
        with tempfile.TemporaryDirectory() as d:
            path = self.write(d, "bad.json", "squall http://x -d 3s\n")
            self.one_line(run(path), path, "not JSON", "line 1")
            path = self.write(d, "trunc.json", '{"schema": "squall.result/1", "requests": {')
            self.one_line(run(path, "--html", os.path.join(d, "o.html")), path, "not JSON")
            self.assertFalse(os.path.exists(os.path.join(d, "o.html")))

    def test_wrong_schema(self):
        doc = load_fixture()
        with tempfile.TemporaryDirectory() as d:
            doc["schema"] = "squall.result/2"
            path = self.write(d, "v2.json", json.dumps(doc))
            self.one_line(run(path), path, "schema 'squall.result/2' is not squall.result/1")
            path = self.write(d, "other.json", '{"name": "not a result"}')
            self.one_line(run(path), path, "no \"schema\" key")
            path = self.write(d, "array.json", "[1, 2]")
            self.one_line(run(path), path, "not a squall result")
            del doc["latency"]
            doc["schema"] = "squall.result/1"
            path = self.write(d, "nolat.json", json.dumps(doc))
            self.one_line(run(path, "--html", os.path.join(d, "o.html")), path, "latency")

    def test_a_directory(self):
        with tempfile.TemporaryDirectory() as d:
            self.one_line(run(d), d)

    def test_bad_flags(self):
        self.one_line(run(), "no result file")
        self.one_line(run(FIXTURE, "--html"), "--html")
        self.one_line(run(FIXTURE, "--bogus"), "--bogus")
        self.one_line(run(FIXTURE, FIXTURE), "one result file")

    def test_unwritable_output(self):
        p = run(FIXTURE, "--html", "/nonexistent/dir/out.html")
        self.assertEqual(p.returncode, 1)
        self.assertIn("/nonexistent/dir/out.html", p.stderr)



SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "result.schema.json")

# A small plan for the schema test: a static step, a templated one with a JSON extraction, a
# think, checks, and thresholds of which one must fail (so both verdicts are in the document).
PLAN = """\
target: {base}
scenarios:
  shop:
    executor: shared-iterations
    vus: 2
    iterations: 20
    flow:
      - name: home
        request: {{ url: /fast }}
        check: {{ status: 200, body_contains: hello }}
      - name: echo
        request:
          method: PUT
          url: "/echo?i={{{{$iteration}}}}"
          body: "vu {{{{$vu}}}}"
        extract:
          method: {{ json: "$.method" }}
        check: {{ status: 200, json: {{ "$.method": PUT }} }}
      - think: 1ms
  late:
    executor: per-vu-iterations
    vus: 1
    iterations: 3
    startTime: 50ms
    flow:
      - name: missing
        request: {{ url: /status/404 }}
        check: {{ status: 404 }}
thresholds:
  http_req_duration: ["p(99) < 5000"]
  "http_reqs{{step:home}}": ["count == 20"]
  "http_req_failed{{scenario:shop}}": ["rate == 0"]
  checks: ["rate > 0.9"]
  iterations: ["count > 1000000"]
"""


class SchemaOfRealDocuments(sqtest.TargetCase):
    """Documents written by this build, against the target, follow docs/result.schema.json."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)
        with open(SCHEMA) as f:
            schema = json.load(f)
        jsonschema.Draft202012Validator.check_schema(schema)
        cls.validator = jsonschema.Draft202012Validator(schema)

    def validate(self, doc):
        errors = ["%s: %s" % ("/".join(map(str, e.absolute_path)), e.message)
                  for e in self.validator.iter_errors(doc)]
        self.assertEqual(errors, [])

    def test_phases_bodies_and_dns(self):
        p, doc, _ = sqtest.run_json(self.base + "/json/4000", "-n", "200", "-c", "4", "-t", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.validate(doc)
        done = doc["requests"]["completed"]
        self.assertEqual(done, 200)
        ph = doc["phases"]
        self.assertEqual(sorted(ph), sorted(["blocked", "dns", "connecting", "tls_handshaking",
                                             "sending", "waiting", "receiving"]))
        for name, v in ph.items():
            self.assertEqual(v["count"], done, name)
        self.assertEqual(ph["waiting"]["metric"], "http_req_waiting")
        b = doc["bodies"]
        self.assertTrue(b["compression"])
        self.assertIsInstance(b["accept_encoding"], str)
        self.assertEqual(b["compressed_responses"], done)
        self.assertEqual(b["decoded_bytes"], 4000 * done)
        self.assertEqual(b["wire_bytes"], doc["bytes"]["received"])
        self.assertNotIn("sse", doc)
        self.assertEqual(doc["dns"]["lookups_during_run"], 0)
        self.assertGreaterEqual(doc["dns"]["first_lookup_us"], 0)
        self.assertEqual(doc["errors"]["dns"], 0)
        self.assertEqual(doc["errors"]["decode"], 0)

    def test_event_streams(self):
        p, doc, _ = sqtest.run_json(self.base + "/sse?events=3&interval=5", "-n", "6", "-c", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.validate(doc)
        s = doc["sse"]
        self.assertEqual(s["streams"], 6)
        self.assertEqual(s["events"], 18)
        self.assertEqual(s["first_event"]["count"], 6)
        self.assertLessEqual(s["first_event"]["p50_us"], s["stream_duration"]["p50_us"])
        self.assertIn("phases", doc)

    def test_without_phases_or_compression(self):
        p, doc, _ = sqtest.run_json(self.base + "/json/1000", "-n", "50", "-c", "2",
                                    "--no-phases", "--no-compression")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.validate(doc)
        self.assertNotIn("phases", doc)
        self.assertEqual(doc["bodies"]["compression"], False)
        self.assertIsNone(doc["bodies"]["accept_encoding"])
        self.assertEqual(doc["bodies"]["compressed_responses"], 0)
        self.assertEqual(doc["bodies"]["decoded_bytes"], 1000 * 50)

    def test_plan_run(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "plan.yaml")
            with open(path, "w") as f:
                f.write(PLAN.format(base=self.base))
            p, doc, _ = sqtest.run_json("run", path, "-t", "2")
            self.assertEqual(p.returncode, 99, p.stderr)  # the iterations threshold fails
            self.validate(doc)
            saved = os.path.join(d, "r.json")
            with open(saved, "w") as f:
                json.dump(doc, f)
            rp = run(saved)
        self.assertEqual(doc["plan"], {"file": path, "target": self.base})
        self.assertEqual([s["name"] for s in doc["scenarios"]], ["shop", "late"])
        shop, late = doc["scenarios"]
        self.assertEqual((shop["iterations"], shop["interrupted"]), (20, 0))
        self.assertEqual(late["iterations"], 3)
        self.assertEqual(late["start_s"], 0.05)
        # Think steps are not in "steps"; every request step is, in plan order.
        self.assertEqual([(s["scenario"], s["step"]) for s in doc["steps"]],
                         [("shop", "home"), ("shop", "echo"), ("late", "missing")])
        home, echo, missing = doc["steps"]
        self.assertEqual(home["status"], {"200": 20})
        self.assertEqual(echo["url"], "/echo?i={{$iteration}}")
        self.assertEqual(echo["extract_failed"], 0)
        self.assertEqual(missing["status"], {"404": 3})
        self.assertEqual(missing["failed"], 3)  # a 4xx is http_req_failed
        self.assertEqual(doc["rendered_requests"], 20)  # the templated step only
        m = doc["metrics"]
        self.assertEqual(m["http_reqs"]["count"], 43)
        self.assertEqual(m["http_reqs"]["count"], doc["requests"]["sent"])
        self.assertEqual(m["http_req_duration"]["count"], 43)
        self.assertEqual((m["http_req_failed"]["passes"], m["http_req_failed"]["fails"]), (3, 40))
        self.assertEqual(m["iterations"]["count"], 23)
        self.assertEqual(m["iteration_duration"]["count"], 23)
        self.assertEqual(m["vus_max"]["value"], 3)
        self.assertEqual(m["checks"]["passes"], sum(c["passed"] for c in doc["checks"]))
        self.assertEqual(m["checks"]["fails"], 0)
        self.assertEqual(m["data_received"]["count"], doc["bytes"]["received"])
        self.assertEqual(len(doc["checks"]), 5)
        verdicts = {(t["metric"], t["expression"]): t for t in doc["thresholds"]}
        self.assertEqual(len(verdicts), 5)
        self.assertTrue(verdicts[("http_reqs{step:home}", "count == 20")]["ok"])
        self.assertTrue(verdicts[("http_req_failed{scenario:shop}", "rate == 0")]["ok"])
        self.assertFalse(verdicts[("iterations", "count > 1000000")]["ok"])
        self.assertTrue(doc["thresholds_failed"])
        # The saved document renders its plan sections, with k6's marks.
        self.assertEqual(rp.returncode, 0, rp.stderr)
        self.assertIn("\nSteps\n", rp.stdout)
        self.assertIn("✓ home: status 200", rp.stdout)
        self.assertIn("✗ iterations: count > 1000000", rp.stdout)

    def test_report_reprints_what_the_run_printed(self):
        # cli/common.c renders the end of every run from the document it writes, so the summary
        # a run prints and the one `squall report` reprints from its --json are the same bytes,
        # for the quick face (with and without --json on stdout) and for a plan.
        with tempfile.TemporaryDirectory() as d:
            saved = os.path.join(d, "r.json")
            for args in ([self.base + "/fast", "-n", "50", "-c", "2", "-t", "1"],
                         [self.base + "/status/404", "-r", "50", "-d", "500ms", "-c", "2",
                          "-t", "1"]):
                p, _ = sqtest.run_squall(*args, "--json", saved)
                self.assertEqual(p.returncode, 0, p.stderr)
                rp = run(saved)
                self.assertEqual(rp.returncode, 0, rp.stderr)
                self.assertEqual(rp.stdout, p.stdout)
                # With the JSON on stdout the summary goes to stderr, after the progress line.
                p, doc, _ = sqtest.run_json(*args)
                with open(saved, "w") as f:
                    json.dump(doc, f)
                self.assertTrue(p.stderr.endswith(run(saved).stdout), p.stderr)
            path = os.path.join(d, "plan.yaml")
            with open(path, "w") as f:
                f.write(PLAN.format(base=self.base))
            p, _ = sqtest.run_squall("run", path, "-t", "1", "-q", "--json", saved)
            self.assertEqual(p.returncode, 99, p.stderr)
            self.assertEqual(p.stdout, "")  # -q: no summary, the document still written
            p, _ = sqtest.run_squall("run", path, "-t", "1", "--json", saved)
            self.assertEqual(p.returncode, 99, p.stderr)
            self.assertEqual(run(saved).stdout, p.stdout)


if __name__ == "__main__":
    sqtest.main()

"""Issue 13's "never lose a result" and "say what happened", end to end: a real `squall` process
against `squall target` (both started and stopped here by PID), every load bounded.

- SIGTERM, SIGINT, two SIGINTs within 10 ms, SIGINT then SIGINT 2 s later: each leaves a
  complete JSON (valid against docs/result.schema.json) and HTML, and exits 105;
- SIGKILL leaves no partial file under the name of a whole-run document (JSON, HTML: written
  atomically), while a streamed --out file keeps what was written up to then;
- exact status codes in the JSON and the summary, the all-error warning line;
- a plan whose target is unreachable exits 1 (not 99);
- --verbose / --http-debug print the exchanges; the messages a newcomer meets (did you mean...).
About 25 s on the 2-core VM.
"""

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest

import sqtest

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "..", "..", "docs", "result.schema.json")
_schema = None


def validate(doc):
    global _schema
    import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

    if _schema is None:
        with open(SCHEMA) as f:
            _schema = json.load(f)
    jsonschema.validate(doc, _schema)


class Faces(sqtest.TargetCase):
    target_args = ("-t", "1")

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)

    def path(self, name):
        return os.path.join(self.tmp.name, name)

    def start(self, *args):
        """Starts squall with --json and --html into the temp dir; returns the Popen."""
        return subprocess.Popen(
            [sqtest.squall_path(), *args, "--json", self.path("r.json"), "--html",
             self.path("r.html")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)

    def finish(self, p, limit=20):
        try:
            out, err = p.communicate(timeout=limit)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            self.fail("squall did not exit within %ds of the signal" % limit)
        return p.returncode, out, err

    def outputs(self):
        with open(self.path("r.json")) as f:
            doc = json.load(f)
        validate(doc)
        with open(self.path("r.html")) as f:
            html = f.read()
        self.assertIn("</html>", html)
        return doc

    def signalled(self, sigs, gap_s=0.0, args=None, completes=True):
        args = args or [self.base + "/fast", "-c", "2", "-d", "20s"]
        self.reset()
        p = self.start(*args)
        # signal once the load is flowing (the target has seen requests), however slow the
        # start is (ASan): a signal before the run's handlers are in place is the default action
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ep = self.stats()["endpoints"]
            if ep["fast"] + ep["delay"] >= 2:
                break
            time.sleep(0.05)
        time.sleep(0.5)
        t0 = time.monotonic()
        for i, s in enumerate(sigs):
            if i:
                time.sleep(gap_s)
            p.send_signal(s)
        rc, out, err = self.finish(p)
        took = time.monotonic() - t0
        doc = self.outputs()
        self.assertTrue(doc["aborted"], doc["abort_reason"])
        self.assertIn("stopped early: stopped by ", out)
        if completes:
            self.assertGreater(doc["requests"]["completed"], 0)
        return rc, doc, out, err, took

    def test_sigterm_writes_every_output(self):
        rc, doc, out, err, took = self.signalled([signal.SIGTERM])
        self.assertEqual(rc, 105, err)
        self.assertEqual(doc["signal"], {"name": "SIGTERM", "forced": False})
        self.assertLess(doc["duration_s"], 10)
        self.assertLess(took, 5)
        self.assertIn("Requests ", out)

    def test_sigint_writes_every_output(self):
        rc, doc, out, err, took = self.signalled([signal.SIGINT])
        self.assertEqual(rc, 105, err)
        self.assertEqual(doc["signal"], {"name": "SIGINT", "forced": False})

    def test_two_sigints_at_once_count_as_one(self):
        # `timeout -s INT` and a terminal's Ctrl-C: one to the process, one to its group
        rc, doc, out, err, took = self.signalled([signal.SIGINT, signal.SIGINT], gap_s=0.005)
        self.assertEqual(rc, 105, err)
        self.assertEqual(doc["signal"], {"name": "SIGINT", "forced": False})

    def test_second_sigint_later_stops_at_once(self):
        # requests of 6 s with a graceful stop of 5 s: the first SIGINT lets them run on, the
        # second, 2 s later, ends the run at once (outputs still written, marked forced)
        args = [self.base + "/delay/6000", "-c", "2", "-d", "20s", "--graceful-stop", "5s",
                "--timeout", "10s"]
        rc, doc, out, err, took = self.signalled([signal.SIGINT, signal.SIGINT], gap_s=2.0,
                                                 args=args, completes=False)
        self.assertEqual(doc["requests"]["in_flight"], 2)
        self.assertEqual(rc, 105, err)
        self.assertEqual(doc["signal"], {"name": "SIGINT", "forced": True})
        self.assertIn("then at once by a second signal", doc["abort_reason"])
        self.assertLess(took, 4.5)  # not the whole 5 s grace, nor the 6 s requests
        self.assertGreater(took, 1.9)

    def test_sigkill_leaves_no_partial_file(self):
        p = self.start(self.base + "/fast", "-c", "2", "-d", "20s", "--out",
                       "csv=" + self.path("s.csv"))
        time.sleep(1.5)
        p.send_signal(signal.SIGKILL)
        p.communicate(timeout=10)
        for name in ("r.json", "r.html"):
            self.assertFalse(os.path.exists(self.path(name)), name)
        # the CSV is written into its name as the run goes (users tail it): what was flushed
        # stays, its header first; no hidden temporary file is left beside it
        with open(self.path("s.csv")) as f:
            self.assertTrue(f.read().startswith("t_s,"))
        self.assertEqual([n for n in os.listdir(self.tmp.name) if n.startswith(".")], [])

    def test_every_response_an_error(self):
        p, doc, _ = sqtest.run_json(self.base + "/status/503", "-n", "20", "-c", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        self.assertEqual(doc["status_codes"], {"503": 20})
        self.assertEqual(doc["failures"]["http"], 20)
        self.assertEqual(doc["failures"]["transport"], 0)
        self.assertEqual(doc["failures"]["http_req_failed"]["rate"], 1.0)
        first = p.stderr.splitlines()[0]
        self.assertEqual(first, "warning: every response was 503 — is the URL right?")
        self.assertIn("Status       503 20\n", p.stderr)

    def test_exact_codes_side_by_side(self):
        p1, d1, _ = sqtest.run_json(self.base + "/status/404", "-n", "5", "-c", "1")
        p2, d2, _ = sqtest.run_json(self.base + "/status/201", "-n", "7", "-c", "1")
        self.assertEqual(d1["status_codes"], {"404": 5})
        self.assertEqual(d2["status_codes"], {"201": 7})
        self.assertNotIn("warning:", p2.stderr)

    def test_run_block(self):
        p, doc, _ = sqtest.run_json(self.base + "/fast", "-n", "50", "-c", "1", "--name",
                                    "nightly", "--percentiles", "50,99.9")
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        run = doc["run"]
        self.assertEqual(run["name"], "nightly")
        iso = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}[+-]\d\d:\d\d$"
        self.assertRegex(run["started_at"], iso)
        self.assertRegex(run["ended_at"], iso)
        self.assertTrue(run["command"].startswith("squall " + self.base + "/fast -n 50"),
                        run["command"])
        self.assertEqual(list(doc["latency"]["percentiles"]), ["50", "99.9"])
        self.assertIn("p50 ", p.stderr)
        self.assertIn("p99.9 ", p.stderr)
        self.assertIn("squall [nightly] GET", p.stderr)


class Stall(unittest.TestCase):
    def test_100ms_series_shows_a_sub_second_stall(self):
        proc, port = sqtest.start_target("-t", "1", "--stall", "300ms/1s")
        try:
            p, doc, _ = sqtest.run_json("http://127.0.0.1:%d/fast" % port, "-c", "2", "-d", "2s")
        finally:
            sqtest.stop(proc)
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        fine = doc["series_100ms"]
        self.assertAlmostEqual(fine["bin_s"], 0.1)
        self.assertGreaterEqual(len(fine["max_us"]), 19)
        # the stalled responses land in bins of their own, the others stay fast
        self.assertGreater(max(fine["max_us"]), 200000)
        self.assertGreater(sum(1 for m in fine["max_us"] if 0 < m < 100000), 5)
        self.assertEqual(sum(fine["completed"]), doc["requests"]["completed"])


class Messages(sqtest.TargetCase):
    def test_verbose_prints_first_exchange_of_each_kind(self):
        p, _ = sqtest.run_squall(self.base + "/status/404", "-n", "5", "-c", "1", "-v", "-q",
                                 "-m", "post", "-b", "hello")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr.count("── first response with status 404"), 1, p.stderr)
        self.assertIn("> POST /status/404 HTTP/1.1\n", p.stderr)
        self.assertIn("> hello\n", p.stderr)
        self.assertIn("< HTTP/1.1 404", p.stderr)

    def test_http_debug(self):
        p, _ = sqtest.run_squall(self.base + "/fast", "-c", "1", "-d", "1s", "--http-debug")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--http-debug prints every exchange: give -n N (N at most 20)", p.stderr)
        p, _ = sqtest.run_squall(self.base + "/fast", "-n", "3", "-c", "1", "--http-debug", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr.count("── response with status 200"), 3, p.stderr)

    def test_unreachable_plan_exits_1(self):
        with tempfile.TemporaryDirectory() as d:
            plan = os.path.join(d, "p.yaml")
            with open(plan, "w") as f:
                f.write("target: http://127.0.0.1:1\n"
                        "scenarios:\n  s:\n    executor: shared-iterations\n"
                        "    iterations: 5\n    vus: 1\n"
                        "    flow:\n      - request: { url: /x }\n"
                        "thresholds:\n  http_req_failed: [\"rate < 0.01\"]\n")
            p, _ = sqtest.run_squall("run", plan, "-q", timeout=30)
            self.assertEqual(p.returncode, 1, p.stderr)
            self.assertIn("squall: nothing was sent", p.stderr)
            with open(os.path.join(d, "q.yaml"), "w") as f:
                f.write("target: http://127.0.0.1:1\nscenarioz: {}\n")
            p, _ = sqtest.run_squall("validate", plan, os.path.join(d, "q.yaml"))
            self.assertEqual(p.returncode, 2)
            self.assertIn("== " + plan, p.stdout)
            self.assertIn("1 of 2 plans OK", p.stdout)
            self.assertIn("did you mean 'scenarios'?", p.stderr)

    def test_newcomer_messages(self):
        p, _ = sqtest.run_squall(self.base + "/fast", "--conections", "2")
        self.assertEqual(p.returncode, 2)
        self.assertIn("unknown flag '--conections' (did you mean '--connections'?)", p.stderr)
        p, _ = sqtest.run_squall("localhost:8080/x")
        self.assertEqual(p.returncode, 2)
        self.assertIn("no scheme (did you mean http://localhost:8080/x?)", p.stderr)
        p, _ = sqtest.run_squall("tagret")
        self.assertEqual(p.returncode, 2)
        self.assertIn("did you mean 'squall target'?", p.stderr)
        p, _ = sqtest.run_squall("--help")
        self.assertEqual(p.returncode, 0)
        for cmd in ("squall run", "squall validate", "squall target", "squall report"):
            self.assertIn(cmd, p.stdout)
        self.assertRegex(p.stdout, r"\n\s+99  thresholds crossed")
        self.assertRegex(p.stdout, r"\n\s+105  stopped by SIGINT or SIGTERM")

    def test_no_stray_progress_line(self):
        # not a terminal, a run shorter than the 10 s progress period: no progress line
        p, _ = sqtest.run_squall(self.base + "/fast", "-c", "1", "-d", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stderr, "")


if __name__ == "__main__":
    sqtest.main()

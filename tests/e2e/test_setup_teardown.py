#!/usr/bin/env python3
"""End-to-end tests of a plan's setup: and teardown: flows (docs/plans.md, Setup and teardown)
against `squall target`: setup logs in once (POST /login), every VU of the scenarios and the
teardown use its token ({{setup.token}}) on /items, and the target's counts reconcile with the
result: its requests == setup + scenarios + teardown, one login, every /items authorised. Then a
setup whose check fails (exit 1, nothing else sent, no teardown), and a teardown that still runs
after SIGINT and after an abortOnFail threshold stopped the scenarios. Every run is bounded by
an iteration count or a duration.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "result.schema.json")


def validate(doc):
    import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

    with open(SCHEMA) as f:
        jsonschema.validate(doc, json.load(f))

SETUP = """
setup:
  flow:
    - name: login
      request: {method: POST, url: /login}
      extract: {token: {json: "$.token"}}
      check: {status: %d}
"""

TEARDOWN = """
teardown:
  flow:
    - name: cleanup
      request:
        url: /echo
        headers: {Authorization: "Bearer {{setup.token}}"}
      check: {status: 200}
"""


class SetupTeardown(sqtest.TargetCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.reset()

    def tearDown(self):
        self.tmp.cleanup()

    def plan(self, scenario, setup_status=200, extra=""):
        text = f"target: {self.base}\n" + SETUP % setup_status + TEARDOWN
        text += "scenarios:\n" + textwrap.indent(textwrap.dedent(scenario).strip() + "\n", "  ")
        text += extra
        path = os.path.join(self.tmp.name, "plan.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_values_reach_every_vu_and_counts_reconcile(self):
        path = self.plan(
            """
            use:
              executor: per-vu-iterations
              vus: 3
              iterations: 4
              flow:
                - request:
                    url: /items
                    headers: {Authorization: "Bearer {{setup.token}}"}
                  check: {status: 200}
            """
        )
        p, doc, _ = sqtest.run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        validate(doc)
        st = self.stats()
        su, td = doc["setup"], doc["teardown"]
        self.assertTrue(su["ok"] and td["ok"], (su, td))
        self.assertEqual((su["requests"], td["requests"]), (1, 1))
        # the scenarios' figures hold their own requests only
        self.assertEqual(doc["requests"]["sent"], 12)
        self.assertEqual(st["requests"], su["requests"] + doc["requests"]["sent"] + td["requests"])
        self.assertEqual(st["auth"]["logins"], 1)
        self.assertEqual(st["auth"]["items_ok"], 12)
        self.assertEqual(st["auth"]["items_unauthorized"], 0)
        self.assertEqual(st["endpoints"]["echo"], 1)

    def test_setup_failure_aborts_the_run(self):
        path = self.plan(
            """
            use:
              executor: per-vu-iterations
              vus: 2
              iterations: 2
              flow:
                - request: {url: /items}
            """,
            setup_status=201,
        )
        p, _ = sqtest.run_squall("run", path, "-q", timeout=60)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("setup failed: 1 of its 1 checks failed", p.stderr)
        st = self.stats()
        self.assertEqual(st["requests"], 1)  # the login, and nothing after it
        self.assertEqual(st["endpoints"]["echo"], 0)  # no teardown after a failed setup

    def wait_items(self, proc):
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            if self.stats()["endpoints"]["items"] > 0:
                return
            time.sleep(0.05)
        self.fail("the scenarios never reached /items")

    def test_teardown_runs_after_sigint(self):
        path = self.plan(
            """
            use:
              executor: constant-vus
              vus: 2
              duration: 30s
              flow:
                - request:
                    url: /items
                    headers: {Authorization: "Bearer {{setup.token}}"}
                - think: 5ms
            """
        )
        out = os.path.join(self.tmp.name, "r.json")
        proc = subprocess.Popen([sqtest.squall_path(), "run", path, "-q", "--json", out],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            self.wait_items(proc)
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                sqtest.stop(proc, kill=True)
        self.assertEqual(proc.returncode, 105, err)
        with open(out) as f:
            doc = json.load(f)
        st = self.stats()
        self.assertEqual(st["endpoints"]["echo"], 1, err)
        self.assertTrue(doc["teardown"]["ok"], doc["teardown"])
        # the target's count less this test's own /stats polls
        self.assertEqual(st["requests"] - st["endpoints"]["stats"],
                         doc["setup"]["requests"] + doc["requests"]["sent"] +
                         doc["teardown"]["requests"])

    def test_teardown_runs_after_a_threshold_abort(self):
        path = self.plan(
            """
            use:
              executor: constant-vus
              vus: 2
              duration: 30s
              flow:
                - request: {url: /status/500}
                - think: 5ms
            """,
            extra=textwrap.dedent(
                """
                thresholds:
                  http_req_failed:
                    - threshold: "rate < 0.5"
                      abortOnFail: true
                """
            ),
        )
        p, doc, _ = sqtest.run_json("run", path, "-q", timeout=60)
        self.assertEqual(p.returncode, 99, p.stderr)
        self.assertTrue(doc["aborted"], doc["abort_reason"])  # the threshold stopped it
        validate(doc)
        st = self.stats()
        self.assertEqual(st["endpoints"]["echo"], 1, p.stderr)
        self.assertTrue(doc["teardown"]["ok"], doc["teardown"])
        # the target's count less this test's own /stats polls
        self.assertEqual(st["requests"] - st["endpoints"]["stats"],
                         doc["setup"]["requests"] + doc["requests"]["sent"] +
                         doc["teardown"]["requests"])


# The scenario every other face runs: /items authorised by setup's token (the target counts
# items_ok only for a token it issued), 3 VUs x 4 iterations; teardown /echo with it.
SCENARIO = """
use:
  executor: per-vu-iterations
  vus: 3
  iterations: 4
  maxDuration: 60s
  flow:
    - request:
        url: /items
        headers: {Authorization: "Bearer {{setup.token}}"}
      check: {status: 200}
"""


def plan_text(base, scenario=SCENARIO, setup_status=200, extra=""):
    text = f"target: {base}\n" + SETUP % setup_status + TEARDOWN
    text += "scenarios:\n" + textwrap.indent(textwrap.dedent(scenario).strip() + "\n", "  ")
    return text + extra


class OtherFaces(sqtest.TargetCase):
    """setup: and teardown: where plans run away from `squall run` on one machine: the daemon
    (POST /runs), MCP (run_load_test over stdio) and agents (the controller runs them once, its
    agents read setup's values). Each time the target saw one login, one teardown /echo, and
    every scenario request authorised by the login's token."""

    def setUp(self):
        self.reset()

    def assert_once(self, doc, sent=12):
        st = self.stats()
        su, td = doc["setup"], doc["teardown"]
        self.assertTrue(su["ok"] and td["ok"], (su, td))
        self.assertEqual((su["requests"], td["requests"]), (1, 1))
        self.assertEqual(doc["requests"]["sent"], sent)
        self.assertEqual(st["auth"]["logins"], 1)          # setup, once
        self.assertEqual(st["endpoints"]["echo"], 1)       # teardown, once
        self.assertEqual(st["auth"]["items_ok"], sent)     # every VU had setup's token
        self.assertEqual(st["auth"]["items_unauthorized"], 0)
        self.assertEqual(st["requests"] - st["endpoints"]["stats"], 1 + sent + 1)
        validate(doc)

    # ---- the daemon ----

    def daemon_run(self, port, text, stop_when_items=False):
        st, _, body = sqtest.http(port, "POST", "/runs", json.dumps({"plan": text}),
                                  {"Content-Type": "application/json"})
        self.assertIn(st, (200, 201, 202), body)
        rid = json.loads(body)["id"]
        deadline = time.monotonic() + 60
        stopped = False
        while time.monotonic() < deadline:
            run = sqtest.json_get(port, "/runs/%d" % rid)
            if run["status"] in ("finished", "stopped", "failed"):
                return run, rid
            if stop_when_items and not stopped and self.stats()["endpoints"]["items"] > 0:
                st, _, body = sqtest.http(port, "POST", "/runs/%d/stop" % rid)
                self.assertIn(st, (200, 202), body)
                stopped = True
            time.sleep(0.05)
        self.fail("run %d did not end" % rid)

    def test_daemon(self):
        data = tempfile.TemporaryDirectory()
        serve, port = sqtest.start_serve("--data", os.path.join(data.name, "data"))
        try:
            run, rid = self.daemon_run(port, plan_text(self.base))
            self.assertEqual(run["status"], "finished", run)
            doc = sqtest.json_get(port, "/runs/%d/result" % rid)
            self.assert_once(doc)
            # a setup whose check fails: the run fails before the scenarios, no teardown
            self.reset()
            run, _ = self.daemon_run(port, plan_text(self.base, setup_status=201))
            self.assertEqual(run["status"], "failed", run)
            self.assertIn("setup failed: 1 of its 1 checks failed", run.get("reason") or "", run)
            st = self.stats()
            self.assertEqual(st["requests"] - st["endpoints"]["stats"], 1)
            # stopped by the API: the teardown still runs, once
            self.reset()
            long = SCENARIO.replace("per-vu-iterations", "constant-vus").replace(
                "iterations: 4", "duration: 30s").replace("  maxDuration: 60s\n", "")
            run, rid = self.daemon_run(port, plan_text(self.base, long + "    - think: 5ms\n"),
                                       stop_when_items=True)
            self.assertEqual(run["status"], "stopped", run)
            doc = sqtest.json_get(port, "/runs/%d/result" % rid)
            self.assertTrue(doc["teardown"]["ok"], doc["teardown"])
            st = self.stats()
            self.assertEqual(st["endpoints"]["echo"], 1)
            self.assertEqual(st["auth"]["logins"], 1)
            self.assertEqual(st["requests"] - st["endpoints"]["stats"],
                             1 + doc["requests"]["sent"] + 1)
            # the daemon's MCP endpoint (POST /mcp): run_load_test queues it on the same runner
            self.reset()
            self.assert_once(self.daemon_mcp(port))
        finally:
            sqtest.stop(serve)
            data.cleanup()
        with open(serve.log_path) as f:
            log = f.read()
        os.unlink(serve.log_path)
        self.assertNotIn("Sanitizer", log)

    def daemon_mcp(self, port):
        hdrs = {"Content-Type": "application/json", "Accept": "application/json"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "1"}}}
        st, h, body = sqtest.http(port, "POST", "/mcp", json.dumps(init), hdrs)
        self.assertEqual(st, 200, body)
        hdrs["Mcp-Session-Id"] = h["mcp-session-id"]
        hdrs["MCP-Protocol-Version"] = "2025-06-18"
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "run_load_test", "arguments": {"plan": plan_text(self.base)}}}
        st, _, body = sqtest.http(port, "POST", "/mcp", json.dumps(call), hdrs, timeout=60)
        self.assertEqual(st, 200, body)
        res = json.loads(body)["result"]
        self.assertFalse(res.get("isError"), res)
        return res["structuredContent"]["result"]

    # ---- MCP over stdio ----

    def test_mcp_stdio(self):
        msgs = [
            {"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "run_load_test", "arguments": {"plan": plan_text(self.base)}}},
        ]
        p = subprocess.run([sqtest.squall_path(), "mcp"],
                           input="".join(json.dumps(m) + "\n" for m in msgs),
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        answers = {}
        for line in p.stdout.splitlines():
            m = json.loads(line)
            if "id" in m:
                answers[m["id"]] = m
        res = answers[2]["result"]
        self.assertFalse(res.get("isError"), res)
        self.assert_once(res["structuredContent"]["result"])

    # ---- agents ----

    @unittest.skipUnless(shutil.which("nats-server"), "nats-server not installed")
    def test_two_agents(self):
        nport = sqtest.free_port()
        nats = subprocess.Popen(["nats-server", "-a", sqtest.HOST, "-p", str(nport)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        agents = []
        try:
            sqtest.wait_port(nport, nats)
            url = "nats://%s:%d" % (sqtest.HOST, nport)
            agents = [sqtest.Agent(url, n, "setup") for n in ("a1", "a2")]
            with tempfile.TemporaryDirectory() as d:
                path = os.path.join(d, "plan.yaml")
                with open(path, "w") as f:
                    f.write(plan_text(self.base))
                p, doc, _ = sqtest.run_json("run", path, "-q", "-t", "1", "--agents", "2",
                                            "--nats", url, "--subject-prefix", "setup")
                self.assertEqual(p.returncode, 0, p.stderr)
                # both agents ran VUs with setup's token (3 VUs: 2 + 1), neither ran setup
                self.assertEqual(sorted(a["requests"]["sent"]
                                        for a in doc["cluster"]["agents"]), [4, 8])
                self.assert_once(doc)
                # an abortOnFail threshold on the merged figures stops the agents: the
                # controller's teardown still runs, once
                self.reset()
                with open(path, "w") as f:
                    f.write(plan_text(self.base, """
                        use:
                          executor: constant-vus
                          vus: 2
                          duration: 30s
                          flow:
                            - request:
                                url: "/status/500?t={{setup.token}}"
                            - think: 5ms
                        """, extra=textwrap.dedent("""
                        thresholds:
                          http_req_failed:
                            - threshold: "rate < 0.5"
                              abortOnFail: true
                        """)))
                p, doc, _ = sqtest.run_json("run", path, "-q", "-t", "1", "--agents", "2",
                                            "--nats", url, "--subject-prefix", "setup",
                                            timeout=90)
            self.assertEqual(p.returncode, 99, p.stderr)
            self.assertTrue(doc["aborted"], doc.get("abort_reason"))
            st = self.stats()
            self.assertEqual((st["auth"]["logins"], st["endpoints"]["echo"]), (1, 1))
            self.assertTrue(doc["teardown"]["ok"], doc["teardown"])
            self.assertEqual(st["requests"] - st["endpoints"]["stats"],
                             1 + doc["requests"]["sent"] + 1)
        finally:
            for a in agents:
                log = a.stop()
                self.assertNotIn("Sanitizer", log)
            sqtest.stop(nats)


if __name__ == "__main__":
    sqtest.main()

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


if __name__ == "__main__":
    sqtest.main()

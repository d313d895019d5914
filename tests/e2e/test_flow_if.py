#!/usr/bin/env python3
"""End-to-end test of `if:` on a step (docs/plans.md, Conditions) against `squall target`: a
first step answers 200 or 201 at random, the next steps run only on one of them (on the last
status), on a variable the flow extracted, and on a value setup: extracted; a step whose
condition never holds sends nothing. The target's per-endpoint counts must equal what the
conditions allow, and squall's request count the target's. Bounded by an iteration count.
"""
import json
import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

VUS, ITERS = 3, 10


class StepIf(sqtest.TargetCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.reset()

    def tearDown(self):
        self.tmp.cleanup()

    def test_conditions_decide_what_is_sent(self):
        text = f"target: {self.base}\n" + textwrap.dedent(
            f"""
            setup:
              flow:
                - request: {{ method: POST, url: /login }}
                  extract: {{ token: {{ json: $.token }} }}
            scenarios:
              s:
                executor: per-vu-iterations
                vus: {VUS}
                iterations: {ITERS}
                flow:
                  - name: coin
                    request: {{ url: "/status/{{{{$randomInt(200,201)}}}}" }}
                    extract: {{ len: {{ header: Content-Length }} }}
                  - name: on200
                    if: "status == 200"
                    request: {{ url: /ok }}
                  - name: on201
                    if: "status == 201"
                    request: {{ url: /fast }}
                  - name: never
                    if: "status == 404 || len != 0"
                    request: {{ url: /echo }}
                  - name: authed
                    if: "setup.token != '' && $iteration >= 0"
                    request:
                      url: /items
                      headers: {{ Authorization: "Bearer {{{{setup.token}}}}" }}
            """
        )
        path = os.path.join(self.tmp.name, "plan.yaml")
        with open(path, "w") as f:
            f.write(text)
        p, doc, _ = sqtest.run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        st = self.stats()
        ep = st["endpoints"]
        n = VUS * ITERS
        self.assertEqual(ep["status"], n)
        # /ok after each 200, /fast after each 201 (the last status is coin's: on200 skipped)
        self.assertEqual(ep["ok"] + ep["fast"], n, ep)
        self.assertEqual(ep["fast"], doc["status_codes"].get("201", 0))  # each 201 led to /fast
        self.assertEqual(ep["echo"], 0)  # never holds: nothing sent
        self.assertEqual(st["auth"]["items_ok"], n)
        steps = {s["step"]: s for s in doc["steps"]}
        self.assertEqual(steps["on200"]["requests"] + steps["on201"]["requests"], n)
        self.assertEqual(steps["on200"]["requests"], ep["ok"])
        self.assertEqual(steps["never"]["requests"], 0)
        self.assertEqual(st["requests"], 1 + doc["requests"]["sent"])


if __name__ == "__main__":
    sqtest.main()

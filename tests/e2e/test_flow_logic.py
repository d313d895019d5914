#!/usr/bin/env python3
"""End-to-end tests of `if:` on a step and of `repeat:` (docs/plans.md, Conditions and Loops)
against `squall target`. if: a
first step answers 200 or 201 at random, the next steps run only on one of them (on the last
status), on a variable the flow extracted, and on a value setup: extracted; a step whose
condition never holds sends nothing. The target's per-endpoint counts must equal what the
conditions allow, and squall's request count the target's. repeat: count loops nested with a
while loop (stopped by its condition, and by its cap), a while that never holds (nothing sent):
the target's per-endpoint counts equal the loops' arithmetic. group: nested groups whose
figures (result `groups`, each step's `group`, the summary) add up to what the target counted
on their endpoints. Bounded by iteration counts.
"""
import json
import os
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "result.schema.json")


def validate(doc):
    import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

    with open(SCHEMA) as f:
        jsonschema.validate(doc, json.load(f))

VUS, ITERS = 3, 10


class FlowLogic(sqtest.TargetCase):
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


    def run_plan(self, flow):
        text = f"target: {self.base}\n" + textwrap.dedent(
            f"""
            scenarios:
              s:
                executor: per-vu-iterations
                vus: {VUS}
                iterations: {ITERS}
                flow:
            """
        )
        text += textwrap.indent(textwrap.dedent(flow).strip() + "\n", "      ")
        path = os.path.join(self.tmp.name, "plan.yaml")
        with open(path, "w") as f:
            f.write(text)
        p, doc, _ = sqtest.run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        st = self.stats()
        self.assertEqual(st["requests"], doc["requests"]["sent"])
        return doc, st["endpoints"]

    def test_repeat(self):
        doc, ep = self.run_plan(
            """
            - request: { url: /ok }
            - repeat:
                count: 3
                steps:
                  - request: { url: /fast }
                  - repeat:                        # the cap stops it: 4 passes
                      while: "status < 400"
                      max: 4
                      steps:
                        - request: { url: /echo }
                  - repeat:                        # its condition stops it after 1 pass
                      while: "status != 404"
                      max: 50
                      steps:
                        - request: { url: /status/404 }
                  - request: { url: "/bytes/1" }
            - repeat:                              # never holds: nothing sent
                while: "status == 999"
                max: 5
                steps:
                  - request: { url: /json/10 }
            """
        )
        n = VUS * ITERS
        self.assertEqual(ep["ok"], n)
        self.assertEqual(ep["fast"], 3 * n)
        self.assertEqual(ep["echo"], 3 * 4 * n)
        self.assertEqual(ep["status"], 3 * n)
        self.assertEqual(ep["bytes"], 3 * n)
        self.assertEqual(ep["json"], 0)
        self.assertEqual(doc["requests"]["sent"], n * (1 + 3 * (1 + 4 + 1 + 1)))


    def test_groups(self):
        doc, ep = self.run_plan(
            """
            - request: { url: /ok }
            - group: checkout
              steps:
                - name: cart
                  request: { url: /fast }
                  check: { status: 200 }
                - group: pay
                  steps:
                    - name: card
                      request: { url: /status/402 }
                    - repeat:
                        count: 2
                        steps:
                          - name: receipt
                            request: { url: /echo }
            - name: out
              request: { url: /bytes/2 }
            """
        )
        validate(doc)
        n = VUS * ITERS
        groups = {g["group"]: g for g in doc["groups"]}
        self.assertEqual(set(groups), {"checkout", "checkout::pay"})
        self.assertEqual(groups["checkout"]["requests"], ep["fast"] + ep["status"] + ep["echo"])
        self.assertEqual(groups["checkout::pay"]["requests"], ep["status"] + ep["echo"])
        self.assertEqual(groups["checkout::pay"]["requests"], 3 * n)
        self.assertEqual(groups["checkout::pay"]["failed"], n)  # the 402s
        self.assertEqual(groups["checkout"]["checks_passed"], n)
        self.assertEqual(groups["checkout"]["duration_ms"]["count"], 4 * n)
        steps = {s["step"]: s.get("group") for s in doc["steps"]}
        self.assertEqual(steps, {"step 1": None, "cart": "checkout", "card": "checkout::pay",
                                 "receipt": "checkout::pay", "out": None})
        # and in the summary
        p, _ = sqtest.run_squall("run", os.path.join(self.tmp.name, "plan.yaml"), timeout=60)
        self.assertIn("\nGroups\n  checkout ", p.stderr + p.stdout)

    def test_group_thresholds(self):
        """The group tag selects a group's requests (its inner groups' too): each threshold's
        figure equals what the target counted on the group's endpoints; a threshold that does
        not hold fails the run with 99."""
        flow = """
            - request: { url: /ok }
            - group: checkout
              steps:
                - request: { url: /fast }
                - group: pay
                  steps:
                    - request: { url: /status/402 }
                    - request: { url: /echo }
            """
        n = VUS * ITERS
        base = f"target: {self.base}\n" + textwrap.dedent(
            f"""
            scenarios:
              s:
                executor: per-vu-iterations
                vus: {VUS}
                iterations: {ITERS}
                flow:
            """
        ) + textwrap.indent(textwrap.dedent(flow).strip() + "\n", "      ")
        passing = base + textwrap.dedent(
            f"""
            thresholds:
              "http_reqs{{group:checkout}}": ["count == {3 * n}"]
              "http_reqs{{group:checkout::pay}}": ["count == {2 * n}"]
              "http_req_failed{{group:checkout::pay}}": ["rate == 0.5"]
              "http_reqs{{group:checkout,status:402}}": ["count == {n}"]
            """
        )
        path = os.path.join(self.tmp.name, "plan.yaml")
        with open(path, "w") as f:
            f.write(passing)
        p, doc, _ = sqtest.run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        ep = self.stats()["endpoints"]
        got = {t["metric"]: t for t in doc["thresholds"]}
        self.assertTrue(all(t["ok"] for t in doc["thresholds"]), doc["thresholds"])
        self.assertEqual(got["http_reqs{group:checkout}"]["value"],
                         ep["fast"] + ep["status"] + ep["echo"])
        self.assertEqual(got["http_reqs{group:checkout::pay}"]["value"], ep["status"] + ep["echo"])
        self.assertEqual(got["http_reqs{group:checkout,status:402}"]["value"], ep["status"])
        # one that does not hold: the group's 402s make its failure rate 1/3
        self.reset()
        with open(path, "w") as f:
            f.write(base + 'thresholds:\n  "http_req_failed{group:checkout}": ["rate < 0.3"]\n')
        p, doc, _ = sqtest.run_json("run", path, "-q")
        self.assertEqual(p.returncode, 99, p.stderr)
        self.assertTrue(doc["thresholds_failed"])
        self.assertAlmostEqual(doc["thresholds"][0]["value"], 1 / 3, places=6)
        # a group not in the plan: refused before any request, naming its line:col
        self.reset()
        with open(path, "w") as f:
            f.write(base + 'thresholds:\n  "http_reqs{group:checkout::py}": ["count > 0"]\n')
        p, _ = sqtest.run_squall("run", path, "-q", timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("no group named 'checkout::py' in the plan (did you mean 'checkout::pay'?)",
                      p.stderr)
        self.assertEqual(self.stats()["requests"], 0)


if __name__ == "__main__":
    sqtest.main()

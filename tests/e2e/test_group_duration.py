#!/usr/bin/env python3
"""End-to-end tests of the built-in trends group_duration and batch_duration (docs/plans.md,
Groups and Parallel requests) against `squall target`, and of setup:/teardown: steps adding to
the plan's own metrics.

group_duration: a group of two /delay/20 steps takes at least 40 ms per pass (a lower bound only:
a busy machine makes it longer, never shorter); one sample per pass of each group (its enclosing
group's too) lands in the result's `groups`, `metrics` and the summary, and thresholds on it hold
or fail the run with 99. batch_duration: a batch of /delay/10 and /delay/30 takes at least 30 ms
from its send to its last answer. setup:/teardown: a `metric:` on their steps counts into the
run's custom metrics. Bounded by iteration counts.
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

VUS, ITERS = 2, 5


def validate(doc):
    import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

    with open(SCHEMA) as f:
        jsonschema.validate(doc, json.load(f))


FLOW = """
- request: { url: /ok }
- group: checkout
  steps:
    - name: cart
      request: { url: /delay/20 }
    - group: pay
      steps:
        - name: card
          request: { url: /delay/20 }
- batch:
    - name: fast
      request: { url: /delay/10 }
    - name: slow
      request: { url: /delay/30 }
"""


class GroupDuration(sqtest.TargetCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "plan.yaml")
        self.reset()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, thresholds="", head="", flow=FLOW):
        text = f"target: {self.base}\n" + textwrap.dedent(head) + textwrap.dedent(
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
        if thresholds:
            text += "thresholds:\n" + textwrap.indent(
                textwrap.dedent(thresholds).strip() + "\n", "  ")
        with open(self.path, "w") as f:
            f.write(text)

    def test_durations_in_the_result(self):
        self.write()
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        n = VUS * ITERS
        self.assertEqual(self.stats()["requests"], doc["requests"]["sent"])
        groups = {g["group"]: g for g in doc["groups"]}
        # one sample per iteration of each group: checkout holds cart and pay (two /delay/20),
        # pay holds card (one)
        co = groups["checkout"]["group_duration_ms"]
        pay = groups["checkout::pay"]["group_duration_ms"]
        self.assertEqual(co["count"], n)
        self.assertEqual(pay["count"], n)
        self.assertGreaterEqual(co["min"], 40)
        self.assertGreaterEqual(pay["min"], 20)
        gd = doc["metrics"]["group_duration"]
        self.assertEqual(gd["count"], 2 * n)
        self.assertGreaterEqual(gd["min"], 20)
        # the batch: from its send to its slowest answer
        steps = {s["step"]: s for s in doc["steps"]}
        bd = steps["fast"]["batch_duration_ms"]
        self.assertEqual(bd["count"], n)
        self.assertGreaterEqual(bd["min"], 30)
        self.assertNotIn("batch_duration_ms", steps["slow"])
        self.assertEqual(doc["metrics"]["batch_duration"]["count"], n)
        # and in the summary
        p, _ = sqtest.run_squall("run", self.path, timeout=60)
        out = p.stderr + p.stdout
        self.assertIn("group_duration", out)
        self.assertIn("batch_duration", out)
        # and in the HTML report
        saved, html = os.path.join(self.tmp.name, "r.json"), os.path.join(self.tmp.name, "r.html")
        with open(saved, "w") as f:
            json.dump(doc, f)
        p, _ = sqtest.run_squall("report", saved, "--html", html, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        with open(html) as f:
            page = f.read()
        self.assertIn("batch_duration p50", page)
        self.assertIn("group_duration_ms", page)

    def test_repeats(self):
        """A repeat inside a group is one pass of the group; a group inside a repeat is one pass
        per turn, even when the group and the repeat start at the same step."""
        self.write(flow="""
            - group: outer
              steps:
                - repeat:
                    count: 3
                    steps:
                      - group: inner
                        steps:
                          - request: { url: /delay/5 }
            """)
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        n = VUS * ITERS
        self.assertEqual(self.stats()["endpoints"]["delay"], 3 * n)
        groups = {g["group"]: g["group_duration_ms"] for g in doc["groups"]}
        self.assertEqual(groups["outer"]["count"], n)
        self.assertEqual(groups["outer::inner"]["count"], 3 * n)
        self.assertGreaterEqual(groups["outer"]["min"], 15)
        self.assertGreaterEqual(groups["outer::inner"]["min"], 5)

    def test_no_groups_no_figures(self):
        self.write(flow="- request: { url: /ok }\n")
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        self.assertNotIn("group_duration", doc["metrics"])
        self.assertNotIn("batch_duration", doc["metrics"])

    def test_thresholds(self):
        # holds: every pass of checkout takes at least 40 ms, of the batch at least 30 ms
        self.write(
            """
            "group_duration{group:checkout}": ["min >= 40", "p(95) > 39"]
            "group_duration{group:checkout::pay}": ["min >= 20"]
            group_duration: ["min >= 20"]
            "batch_duration{step:fast}": ["min >= 30"]
            batch_duration: ["max >= 30"]
            """
        )
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr + json.dumps(doc["thresholds"]))
        validate(doc)
        self.assertTrue(all(t["ok"] and not t["no_data"] for t in doc["thresholds"]),
                        doc["thresholds"])
        got = {t["metric"] + " " + t["expression"]: t["value"] for t in doc["thresholds"]}
        self.assertGreaterEqual(got["group_duration{group:checkout} min >= 40"], 40)
        # fails: no pass of checkout is under 40 ms -> exit 99
        self.reset()
        self.write('"group_duration{group:checkout}": ["p(95) < 40"]\n')
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 99, p.stderr)
        self.assertTrue(doc["thresholds_failed"])
        self.assertGreaterEqual(doc["thresholds"][0]["value"], 40)
        # a batch that cannot be answered under 30 ms -> exit 99
        self.reset()
        self.write('"batch_duration{step:fast}": ["max < 30"]\n')
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 99, p.stderr)
        # tags group_duration does not take: refused before any request (exit 2)
        self.reset()
        self.write('"group_duration{step:cart}": ["p(95) < 400"]\n')
        p, _ = sqtest.run_squall("run", self.path, "-q", timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("group_duration is kept per group", p.stderr)
        self.assertEqual(self.stats()["requests"], 0)

    def test_setup_teardown_metrics(self):
        """setup: and teardown: steps may add samples to the plan's own metrics: they count
        into the run's custom metrics beside the scenarios'."""
        head = """
            metrics:
              calls: counter
              fixture: trend
            setup:
              flow:
                - name: login
                  request: { url: /bytes/9 }
                  extract: { n: { header: Content-Length } }
                  metric:
                    - { name: calls, add: 10 }
                    - { name: fixture, add: "{{n}}" }
            teardown:
              flow:
                - name: cleanup
                  request: { url: /ok }
                  metric: { name: calls, add: 100 }
            """
        flow = """
            - name: work
              request: { url: /ok }
              metric: { name: calls }
            """
        self.write('calls: ["count == %d"]\nfixture: ["avg == 9"]\n' % (VUS * ITERS + 110),
                   head=head, flow=flow)
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr + json.dumps(doc and doc.get("thresholds")))
        validate(doc)
        cm = doc["custom_metrics"]
        self.assertEqual(cm["calls"]["count"], VUS * ITERS + 10 + 100)
        self.assertEqual(cm["fixture"]["samples"], 1)
        self.assertEqual(cm["fixture"]["avg"], 9)


if __name__ == "__main__":
    unittest.main()

#!/usr/bin/env python3
"""End-to-end tests of a plan's own metrics (docs/plans.md, Custom metrics) against `squall
target`: a counter added at each response of two steps, a trend from a value the flow
extracted, a rate from a step's checks, a gauge; every figure equals what the target counted
on the endpoints of the steps that add to it, thresholds on them (with tags) hold or fail the
run with 99 as they should, and a threshold on a metric the plan does not declare is refused
before any request. Bounded by iteration counts.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "result.schema.json")

VUS, ITERS = 3, 10


def validate(doc):
    import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

    with open(SCHEMA) as f:
        jsonschema.validate(doc, json.load(f))


class CustomMetrics(sqtest.TargetCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "plan.yaml")
        self.reset()

    def tearDown(self):
        self.tmp.cleanup()

    def plan(self, thresholds):
        text = f"target: {self.base}\n" + textwrap.dedent(
            f"""
            metrics:
              orders: counter
              cart_value: trend
              in_stock: rate
              queue_depth: gauge
            scenarios:
              s:
                executor: per-vu-iterations
                vus: {VUS}
                iterations: {ITERS}
                flow:
                  - name: coin                  # 200 or 201 at random: the check holds on 200
                    request: {{ url: "/status/{{{{$randomInt(200,201)}}}}" }}
                    check: {{ status: 200 }}
                    metric:
                      - {{ name: in_stock, from: checks }}
                      - {{ name: orders }}
                  - name: size
                    request: {{ url: /bytes/7 }}
                    extract: {{ n: {{ header: Content-Length }} }}
                  - name: pay
                    request: {{ url: /ok }}
                    metric:
                      - {{ name: cart_value, add: "{{{{n}}}}" }}
                      - {{ name: queue_depth, add: 3 }}
                      - {{ name: orders, add: 2 }}
            """
        )
        text += "thresholds:\n" + textwrap.indent(textwrap.dedent(thresholds).strip() + "\n", "  ")
        with open(self.path, "w") as f:
            f.write(text)

    def test_figures_equal_the_target_counts(self):
        n = VUS * ITERS
        self.plan(
            f"""
            orders: ["count == {3 * n}"]
            "orders{{step:pay}}": ["count == {2 * n}"]
            cart_value: ["min >= 7", "max < 7.1", "p(95) < 8"]
            "in_stock{{scenario:s}}": ["rate >= 0", "rate <= 1"]
            queue_depth: ["value == 3"]
            """
        )
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        self.assert_accounting(doc)
        st = self.stats()
        ep = st["endpoints"]
        self.assertEqual(st["requests"], doc["requests"]["sent"])
        self.assertEqual(ep["status"], n)
        cm = doc["custom_metrics"]
        # a sample per response of the steps that add: as many as the target answered there
        self.assertEqual(cm["orders"]["count"], ep["status"] + 2 * ep["ok"])
        self.assertEqual(cm["orders"]["samples"], ep["status"] + ep["ok"])
        self.assertEqual(cm["cart_value"]["count"], ep["ok"])
        self.assertAlmostEqual(cm["cart_value"]["max"], 7.0, delta=0.01)
        self.assertEqual(cm["in_stock"]["passes"] + cm["in_stock"]["fails"], ep["status"])
        checks = {c["step"]: c for c in doc["checks"]}
        self.assertEqual(cm["in_stock"]["passes"], checks["coin"]["passed"])
        self.assertEqual(cm["queue_depth"]["value"], 3)
        self.assert_series(doc, ep)
        self.assertTrue(all(t["ok"] for t in doc["thresholds"]), doc["thresholds"])
        got = {(t["metric"], t["expression"]): t["value"] for t in doc["thresholds"]}
        self.assertEqual(got[("orders{step:pay}", "count == %d" % (2 * n))], 2 * ep["ok"])
        # and in the summary
        p, _ = sqtest.run_squall("run", self.path, timeout=60)
        self.assertIn("\nCustom metrics\n  orders ", p.stderr + p.stdout)

    def assert_series(self, doc, ep):
        """The per-second series carries every declared metric in every second, and its
        seconds add up to the run's figures and to what the target counted."""
        cm = doc["custom_metrics"]
        per = [s["custom_metrics"] for s in doc["series"]]
        self.assertTrue(per)
        for m in per:
            self.assertEqual(sorted(m), sorted(cm))
        self.assertEqual(sum(m["orders"]["count"] for m in per), cm["orders"]["count"])
        self.assertEqual(sum(m["orders"]["count"] for m in per), ep["status"] + 2 * ep["ok"])
        self.assertEqual(sum(m["cart_value"]["count"] for m in per), ep["ok"])
        for m in per:
            if m["cart_value"]["count"]:
                self.assertEqual(m["cart_value"]["avg"], 7)
            else:
                self.assertIsNone(m["cart_value"]["avg"])
        self.assertEqual(sum(m["in_stock"]["passes"] for m in per), cm["in_stock"]["passes"])
        self.assertEqual(sum(m["in_stock"]["total"] for m in per), ep["status"])
        self.assertEqual(per[-1]["queue_depth"]["value"], 3)

    def test_a_threshold_that_does_not_hold(self):
        n = VUS * ITERS
        self.plan(f'"orders{{step:coin}}": ["count > {n}"]\nqueue_depth: ["value < 3"]')
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 99, p.stderr)
        self.assertTrue(doc["thresholds_failed"])
        verdicts = {t["metric"]: t for t in doc["thresholds"]}
        self.assertEqual(verdicts["orders{step:coin}"]["value"], self.stats()["endpoints"]["status"])
        self.assertFalse(verdicts["orders{step:coin}"]["ok"])
        self.assertFalse(verdicts["queue_depth"]["ok"])

    def test_from_a_hook(self):
        """ctx:metric in an after hook: a sample per call, beside the step's metric: entries;
        a metric the plan does not declare is a Lua error that stops the run."""
        n = VUS * ITERS
        with open(os.path.join(self.tmp.name, "hooks.lua"), "w") as f:
            f.write(textwrap.dedent(
                """
                function after_ok(ctx)
                  ctx:metric("orders", 5)
                  ctx:metric("in_stock", ctx.status == 200)
                  ctx:metric("cart_value", 2.5)
                end
                function bad(ctx)
                  ctx:metric("nope", 1)
                end
                """))
        text = f"target: {self.base}\nscript: hooks.lua\n" + textwrap.dedent(
            f"""
            metrics: {{ orders: counter, in_stock: rate, cart_value: trend }}
            scenarios:
              s:
                executor: per-vu-iterations
                vus: {VUS}
                iterations: {ITERS}
                flow:
                  - name: ok
                    request: {{ url: /ok }}
                    metric: {{ name: orders }}
                    after: after_ok
            thresholds:
              orders: ["count == {6 * n}"]
              "orders{{step:ok}}": ["count == {6 * n}"]
              in_stock: ["rate == 1"]
              cart_value: ["min >= 2.5", "max < 2.51"]
            """
        )
        with open(self.path, "w") as f:
            f.write(text)
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        ok = self.stats()["endpoints"]["ok"]
        self.assertEqual(ok, n)
        cm = doc["custom_metrics"]
        self.assertEqual(cm["orders"]["count"], 6 * ok)
        self.assertEqual(cm["orders"]["samples"], 2 * ok)
        self.assertEqual(cm["in_stock"]["passes"], ok)
        self.assertEqual(cm["cart_value"]["count"], ok)
        self.assertTrue(all(t["ok"] for t in doc["thresholds"]), doc["thresholds"])
        # an undeclared name: a Lua error naming it
        with open(self.path, "w") as f:
            f.write(text.replace("after: after_ok", "after: bad"))
        p, _ = sqtest.run_squall("run", self.path, "-q", timeout=60)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("no metric 'nope'", p.stderr)

    def test_user_tags(self):
        """tags: on a scenario, a group and steps select the steps' requests (an inner tag of a
        name wins); each tagged threshold's figure equals what the target counted on the
        endpoints of the steps that carry the tag."""
        n = VUS * ITERS
        text = f"target: {self.base}\n" + textwrap.dedent(
            f"""
            metrics: {{ orders: counter }}
            scenarios:
              s:
                executor: per-vu-iterations
                vus: {VUS}
                iterations: {ITERS}
                tags: {{ team: shop, page: none }}
                flow:
                  - request: {{ url: /ok }}
                    tags: {{ page: home }}
                  - group: buy
                    tags: {{ flow: checkout }}
                    steps:
                      - request: {{ url: /echo }}
                        tags: {{ page: cart }}
                        metric: {{ name: orders }}
                      - request: {{ url: /status/402 }}
            thresholds:
              "http_reqs{{page:home}}": ["count == {n}"]
              "http_reqs{{team:shop}}": ["count == {3 * n}"]
              "http_reqs{{flow:checkout,page:none}}": ["count == {n}"]
              "http_req_failed{{flow:checkout}}": ["rate == 0.5"]
              "orders{{page:cart}}": ["count == {n}"]
              "orders{{page:home}}": ["count == 0"]
            """
        )
        with open(self.path, "w") as f:
            f.write(text)
        p, doc, _ = sqtest.run_json("run", self.path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        ep = self.stats()["endpoints"]
        got = {t["metric"]: t["value"] for t in doc["thresholds"]}
        self.assertTrue(all(t["ok"] for t in doc["thresholds"]), doc["thresholds"])
        self.assertEqual(got["http_reqs{page:home}"], ep["ok"])
        self.assertEqual(got["http_reqs{team:shop}"], ep["ok"] + ep["echo"] + ep["status"])
        self.assertEqual(got["http_reqs{flow:checkout,page:none}"], ep["status"])
        self.assertEqual(got["orders{page:cart}"], ep["echo"])
        tags = [s.get("tags") for s in doc["steps"]]
        self.assertEqual(tags, [{"team": "shop", "page": "home"},
                                {"team": "shop", "page": "cart", "flow": "checkout"},
                                {"team": "shop", "page": "none", "flow": "checkout"}])
        # a tag value no step carries: refused at its line:col, with a suggestion
        with open(self.path, "w") as f:
            f.write(text.replace('"http_reqs{page:home}"', '"http_reqs{page:hom}"'))
        p, _ = sqtest.run_squall("run", self.path, "-q", timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("no step has the tag page:hom in the plan (did you mean 'home'?)", p.stderr)

    def test_an_undeclared_metric_is_refused(self):
        self.plan('ordrs: ["count > 1"]')
        p, _ = sqtest.run_squall("run", self.path, "-q", timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("unknown metric 'ordrs' (did you mean 'orders'?)", p.stderr)
        self.assertIn("plan.yaml:", p.stderr)
        self.assertEqual(self.stats()["requests"], 0)

    @unittest.skipUnless(shutil.which("nats-server"), "nats-server not installed (scripts/deps.sh)")
    def test_distributed(self):
        """Two agents over a real nats-server: each agent's samples (counts, sums, the gauge's
        latest value, the trend's histogram) reach the controller, whose custom_metrics equal
        what the target counted, as a local run's do."""
        n = VUS * ITERS
        self.plan(
            f"""
            orders: ["count == {3 * n}"]
            "orders{{step:pay}}": ["count == {2 * n}"]
            cart_value: ["min >= 7", "max < 7.1", "avg == 7"]
            queue_depth: ["value == 3"]
            """
        )
        port = sqtest.free_port()
        nats = subprocess.Popen(["nats-server", "-a", "127.0.0.1", "-p", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        agents = []
        try:
            sqtest.wait_port(port, nats)
            url = "nats://127.0.0.1:%d" % port
            agents = [sqtest.Agent(url, name, "cm") for name in ("m1", "m2")]
            p, doc, _ = sqtest.run_json("run", self.path, "-q", "--agents", "2", "--nats", url,
                                        "--subject-prefix", "cm")
        finally:
            logs = [a.stop() for a in agents]
            sqtest.stop_proc(nats)
        for log in logs:
            self.assertNotIn("Sanitizer", log)
        self.assertEqual(p.returncode, 0, p.stderr)
        validate(doc)
        self.assertEqual([a["finished"] for a in doc["cluster"]["agents"]], [True, True])
        self.assertTrue(all(a["requests"]["sent"] > 0 for a in doc["cluster"]["agents"]))
        st = self.stats()
        ep = st["endpoints"]
        self.assertEqual(st["requests"], doc["requests"]["sent"])
        self.assertEqual(ep["status"], n)
        cm = doc["custom_metrics"]
        self.assertEqual(cm["orders"]["count"], ep["status"] + 2 * ep["ok"])
        self.assertEqual(cm["orders"]["samples"], ep["status"] + ep["ok"])
        self.assertEqual(cm["cart_value"]["count"], ep["ok"])
        self.assertEqual(cm["cart_value"]["avg"], 7)
        self.assertAlmostEqual(cm["cart_value"]["max"], 7.0, delta=0.01)
        self.assertAlmostEqual(cm["cart_value"]["med"], 7.0, delta=0.01)
        checks = {c["step"]: c for c in doc["checks"]}
        self.assertEqual(cm["in_stock"]["passes"] + cm["in_stock"]["fails"], ep["status"])
        self.assertEqual(cm["in_stock"]["passes"], checks["coin"]["passed"])
        self.assertEqual(cm["queue_depth"]["value"], 3)
        self.assert_series(doc, ep)
        self.assertTrue(all(t["ok"] for t in doc["thresholds"]), doc["thresholds"])


if __name__ == "__main__":
    sqtest.main()

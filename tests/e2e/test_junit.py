#!/usr/bin/env python3
"""End-to-end tests of `--junit FILE` (docs/plans.md): a plan run against `squall target` with a
passing and a failing threshold and a passing and a failing check writes one JUnit test case per
threshold and per check, a <failure> on the two that failed carrying the figure against its
bound; the file validates against tests/junit/junit.xsd with xmllint (a real JUnit consumer is
tests/junit/consumer.test.mjs); names from the plan that hold markup and control bytes come out
escaped; `squall report FILE --junit` writes the same bytes from the saved result; a path that
cannot be written is refused before any load. Every run is bounded by an iteration count.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import TargetCase, run_squall  # noqa: E402

XSD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "junit", "junit.xsd")
HOSTILE = "home <&\"]]>'"  # the step's name, as YAML gives it, before the control bytes


class JUnitCase(TargetCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="sq-junit-")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def path(self, name):
        return os.path.join(self.dir, name)

    def plan(self, thresholds):
        p = self.path("plan.yaml")
        with open(p, "w") as f:
            f.write(textwrap.dedent(f"""\
                name: "ci <&\\"]]>' run"
                target: {self.base}
                scenarios:
                  api:
                    executor: shared-iterations
                    vus: 2
                    iterations: 20
                    flow:
                      - name: "home <&\\"]]>'\\x01\\x7f"
                        request: {{ url: /fast }}
                        check: {{ status: 200 }}
                      - name: missing
                        request: {{ url: /status/404 }}
                        check: {{ status: 200 }}
                thresholds:
                """))
            f.write(textwrap.indent(textwrap.dedent(thresholds), "  "))
        return p

    def xmllint(self, path):
        if not shutil.which("xmllint"):
            self.skipTest("xmllint not installed (scripts/deps.sh test)")
        p = subprocess.run(["xmllint", "--noout", "--schema", XSD, path], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_thresholds_and_checks(self):
        plan = self.plan("""\
            http_req_duration: ["p(95) < 600000"]
            "http_req_duration{step:missing}": ["max < 0"]
            """)
        xml, js = self.path("out.xml"), self.path("out.json")
        p, _ = run_squall("run", plan, "-q", "--junit", xml, "--json", js)
        self.assertEqual(p.returncode, 99, p.stderr)  # thresholds failed: exit as without --junit
        root = ET.parse(xml).getroot()
        self.assertEqual(root.tag, "testsuites")
        self.assertEqual(root.get("name"), "squall: ci <&\"]]>' run")
        self.assertEqual((root.get("tests"), root.get("failures"), root.get("errors")),
                         ("4", "2", "0"))
        suites = {s.get("name"): s for s in root.findall("testsuite")}
        self.assertEqual(list(suites), ["thresholds", "checks"])

        th = suites["thresholds"]
        self.assertEqual((th.get("tests"), th.get("failures")), ("2", "1"))
        cases = th.findall("testcase")
        self.assertEqual([c.get("name") for c in cases],
                         ["http_req_duration: p(95) < 600000",
                          "http_req_duration{step:missing}: max < 0"])
        self.assertIsNone(cases[0].find("failure"))
        self.assertRegex(cases[0].findtext("system-out"), r"^p\(95\)=[0-9.e+-]+ms, bound < 600000$")
        fail = cases[1].find("failure")
        self.assertIsNotNone(fail)
        self.assertEqual(fail.get("type"), "threshold")
        self.assertRegex(fail.get("message"), r"^max=[0-9.e+-]+ms, bound < 0$")

        ck = suites["checks"]
        self.assertEqual((ck.get("tests"), ck.get("failures")), ("2", "1"))
        cases = ck.findall("testcase")
        # the control bytes (\x01 is not XML, DEL would act on a terminal) became U+FFFD
        self.assertEqual([c.get("name") for c in cases],
                         [HOSTILE + "\ufffd\ufffd: status 200", "missing: status 200"])
        self.assertEqual({c.get("classname") for c in cases}, {"squall.checks.api"})
        self.assertIsNone(cases[0].find("failure"))
        self.assertEqual(cases[0].findtext("system-out"), "passed 20, failed 0")
        self.assertEqual(cases[1].find("failure").get("message"), "20 of 20 failed")

        # the saved result gives the same bytes
        r, _ = run_squall("report", js, "--junit", "-")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(xml) as f:
            self.assertEqual(r.stdout, f.read())
        self.xmllint(xml)  # last: without xmllint the rest above still ran

    def test_all_pass(self):
        plan = self.plan("""\
            http_req_duration: ["p(99) < 600000"]
            checks: ["rate > 0.1"]
            """)
        xml = self.path("out.xml")
        p, _ = run_squall("run", plan, "-q", "--junit", xml)
        self.assertEqual(p.returncode, 0, p.stderr)
        root = ET.parse(xml).getroot()
        self.assertEqual((root.get("tests"), root.get("failures")), ("4", "1"))  # one check failed
        th = root.find("testsuite[@name='thresholds']")
        self.assertEqual((th.get("tests"), th.get("failures")), ("2", "0"))
        self.assertRegex(th.findall("testcase")[1].findtext("system-out"),
                         r"^rate=0\.5, bound > 0\.1$")
        self.xmllint(xml)

    def test_refused_before_the_run(self):
        plan = self.plan('http_req_duration: ["p(95) < 600000"]\n')
        self.reset()
        p, _ = run_squall("run", plan, "-q", "--junit", self.dir)  # a directory
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--junit: cannot write", p.stderr)
        self.assertEqual(self.stats()["requests"], 0)
        p, _ = run_squall("run", plan, "-q", "--junit", "-", "--json", "-")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("--junit -", p.stderr)

    def test_report_of_a_quick_run(self):
        # a document with neither thresholds nor checks: two empty suites, still valid
        js, xml = self.path("q.json"), self.path("q.xml")
        p, _ = run_squall(f"{self.base}/fast", "-q", "-c", "1", "-n", "5", "--json", js)
        self.assertEqual(p.returncode, 0, p.stderr)
        r, _ = run_squall("report", js, "--junit", xml)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "")  # --junit alone: no summary
        root = ET.parse(xml).getroot()
        self.assertEqual((root.get("tests"), root.get("failures")), ("0", "0"))
        self.assertEqual([s.get("tests") for s in root.findall("testsuite")], ["0", "0"])
        self.xmllint(xml)


if __name__ == "__main__":
    sqtest.main()

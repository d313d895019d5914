#!/usr/bin/env python3
"""End-to-end tests of `squall run` / `squall validate` against `squall target` on an ephemeral
loopback port: a login flow whose every /items call the target confirms carried a token it issued,
thresholds and exit 99, the static fast path, scenarios with start times, on_error, think time and
cookies. Every run is bounded by an iteration count or a duration of a few seconds.
"""
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

run_squall = sqtest.run_squall


class PlanCase(sqtest.TargetCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.reset()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text).lstrip())
        return path

    def plan(self, body, name="plan.yaml"):
        return self.write(name, f"target: {self.base}\n" + textwrap.dedent(body).lstrip())

    def run_plan(self, path, *extra, timeout=60):
        p, _ = run_squall("run", path, "--json", "-", "-q", *extra, timeout=timeout)
        doc = json.loads(p.stdout) if p.stdout.strip() else None
        return p, doc

    def step(self, doc, name):
        for s in doc["steps"]:
            if s["step"] == name:
                return s
        raise AssertionError(f"no step {name} in {doc['steps']}")


class LoginFlow(PlanCase):
    def test_login_flow_carries_issued_tokens(self):
        self.write("users.csv", "name,password\nalice,a1\nbob,b2\ncarol,c3\n")
        path = self.plan(
            """
            defaults: { headers: { Accept: application/json }, timeout: 5s }
            data:
              users: { csv: users.csv, mode: per-vu }
            scenarios:
              shoppers:
                executor: shared-iterations
                vus: 4
                iterations: 300
                flow:
                  - name: login
                    request: { method: POST, url: /login, json: { user: "{{users.name}}", password: "{{users.password}}" } }
                    extract: { token: { json: "$.token" } }
                    check: { status: 200 }
                  - name: items
                    request:
                      url: "/items?vu={{$vu}}&it={{$iteration}}&id={{$randomUUID}}"
                      headers: { Authorization: "Bearer {{token}}" }
                    check: { status: 200, body_contains: items, json: { "$.count": { gt: 0 } }, duration: { lt: 2s } }
            thresholds:
              http_req_duration: ["p(95) < 2000"]
              "http_req_duration{step:login}": ["p(99) < 3000"]
              checks: ["rate > 0.99"]
            """
        )
        p, doc = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        st = self.stats()
        self.assertEqual(st["auth"]["logins"], 300, st)
        self.assertEqual(st["auth"]["items_ok"], 300, st)
        self.assertEqual(st["auth"]["items_unauthorized"], 0, st)
        self.assertEqual(doc["metrics"]["iterations"]["count"], 300)
        self.assertEqual(self.step(doc, "login")["requests"], 300)
        self.assertEqual(self.step(doc, "items")["requests"], 300)
        for c in doc["checks"]:
            self.assertEqual(c["failed"], 0, c)
            self.assertEqual(c["passed"], 300, c)
        self.assertEqual(len(doc["thresholds"]), 3)
        self.assertTrue(all(t["ok"] for t in doc["thresholds"]), doc["thresholds"])
        self.assertFalse(doc["thresholds_failed"])
        # Both steps are templated: every request was rendered.
        self.assertEqual(doc["rendered_requests"], 600)

    def test_without_token_the_target_refuses(self):
        path = self.plan(
            """
            scenarios:
              s:
                executor: per-vu-iterations
                vus: 2
                iterations: 10
                flow:
                  - name: items
                    request: { url: /items }
                    check: { status: 200 }
            thresholds:
              checks: ["rate > 0.99"]
              http_req_failed: ["rate < 0.5"]
            """
        )
        p, doc = self.run_plan(path)
        self.assertEqual(p.returncode, 99, p.stderr)
        self.assertEqual(self.stats()["auth"]["items_unauthorized"], 20)
        c = doc["checks"][0]
        self.assertEqual((c["passed"], c["failed"]), (0, 20))
        self.assertEqual(self.step(doc, "items")["status"], {"401": 20})
        self.assertEqual([t["ok"] for t in doc["thresholds"]], [False, False])
        self.assertIn("thresholds crossed", p.stderr)


class Abort(PlanCase):
    def test_abort_on_fail_stops_the_run(self):
        path = self.plan(
            """
            scenarios:
              s:
                executor: constant-vus
                vus: 2
                duration: 20s
                flow:
                  - request: { url: /status/500 }
            thresholds:
              http_req_failed: [{ threshold: "rate < 0.01", abortOnFail: true, delayAbortEval: 1s }]
            """
        )
        p, doc = self.run_plan(path)
        self.assertEqual(p.returncode, 99, p.stderr)
        self.assertIn("abortOnFail", p.stderr)
        self.assertLess(doc["duration_s"], 5)
        self.assertTrue(doc["thresholds_failed"])


class Engine(PlanCase):
    def test_static_steps_are_not_rendered(self):
        path = self.plan(
            """
            scenarios:
              s:
                executor: shared-iterations
                vus: 2
                iterations: 50
                flow:
                  - request: { url: /fast }
                  - request: { method: POST, url: /echo, body: "hello" }
                    check: { status: 200, body_contains: hello }
            """
        )
        p, doc = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["rendered_requests"], 0)
        self.assertEqual(doc["requests"]["completed"], 100)
        self.assertEqual(doc["checks"][0]["passed"], 50)

    def test_scenarios_run_concurrently_with_start_times(self):
        path = self.plan(
            """
            scenarios:
              early:
                executor: constant-arrival-rate
                rate: 50
                duration: 2s
                preAllocatedVUs: 4
                flow:
                  - request: { url: /fast }
              late:
                executor: constant-arrival-rate
                rate: 50
                duration: 1s
                startTime: 1s
                preAllocatedVUs: 4
                flow:
                  - request: { url: /ok }
            """
        )
        p, doc = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        sc = {s["name"]: s for s in doc["scenarios"]}
        # every arrival of each schedule run or counted dropped (50/s on 4 VUs: none dropped
        # unless a busy machine stalls the target for 80 ms)
        self.assertEqual(sc["early"]["iterations"] + sc["early"]["dropped"], 100, sc["early"])
        self.assertEqual(sc["late"]["iterations"] + sc["late"]["dropped"], 50, sc["late"])
        self.assertGreater(sc["early"]["iterations"], 50, sc["early"])
        self.assertGreater(sc["late"]["iterations"], 25, sc["late"])
        self.assertEqual(sc["late"]["start_s"], 1.0)
        # together, not one after the other: 2 s (the early one's, the late one's second
        # inside it), not 3 (in turn) or 4 (in turn, each with its start time); 0.9 s is room
        # for a busy machine's late end (tens of ms seen)
        self.assertLess(doc["duration_s"], 2.9)
        self.assertGreaterEqual(doc["duration_s"], 1.9)

    def test_failed_extraction_skips_to_the_next_iteration(self):
        path = self.plan(
            """
            scenarios:
              s:
                executor: shared-iterations
                vus: 1
                iterations: 5
                flow:
                  - name: first
                    request: { method: POST, url: /login }
                    extract: { nothing: { json: "$.missing" } }
                    on_error: next_iteration
                  - name: second
                    request: { url: "/fast?{{nothing}}" }
            """
        )
        p, doc = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        first = self.step(doc, "first")
        self.assertEqual(first["extract_failed"], 5)
        self.assertEqual(doc["errors"]["extract"], 5)
        self.assertEqual(doc["requests"]["failed"], 0)
        self.assertEqual(self.step(doc, "second")["requests"], 0)
        self.assertEqual(doc["metrics"]["iterations"]["count"], 5)

    def test_think_time_lands_in_iteration_duration(self):
        path = self.plan(
            """
            scenarios:
              s:
                executor: per-vu-iterations
                vus: 2
                iterations: 3
                flow:
                  - request: { url: /fast }
                  - think: 200ms
            """
        )
        p, doc = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        it = doc["metrics"]["iteration_duration"]
        self.assertEqual(it["count"], 6)
        self.assertGreaterEqual(it["min"], 195)
        self.assertLess(it["max"], 1000)

    def test_cookie_jar(self):
        path = self.plan(
            """
            scenarios:
              s:
                executor: shared-iterations
                vus: 2
                iterations: 10
                cookies: true
                flow:
                  - request: { url: "/cookie/set?sid=vu{{$vu}}" }
                  - request: { url: /cookie/echo }
                    check: { body_contains: "sid=vu" }
            """
        )
        p, doc = self.run_plan(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["checks"][0]["passed"], 10, doc["checks"])


class Https(PlanCase):
    target_args = ("-t", "1", "--tls")

    def reset(self):
        pass  # /stats/reset would need https; this class reads no server counts

    def test_plan_over_https(self):
        path = self.write("plan.yaml", f"""
            target: https://127.0.0.1:{self.port}
            scenarios:
              s:
                executor: shared-iterations
                vus: 2
                iterations: 40
                flow:
                  - name: login
                    request: {{ method: POST, url: /login }}
                    extract: {{ token: {{ json: "$.token" }} }}
                  - name: items
                    request: {{ url: /items, headers: {{ Authorization: "Bearer {{{{token}}}}" }} }}
                    check: {{ status: 200 }}
            """)
        p, doc = self.run_plan(path, "--insecure")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["checks"][0]["passed"], 40)
        self.assertEqual(doc["tls"]["handshakes"], 2, doc["tls"])
        p, _ = self.run_plan(path)  # the self-signed certificate is refused without --insecure
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("certificate verify failed", p.stderr)


class Validate(PlanCase):
    def test_valid_plan(self):
        path = self.plan(
            """
            scenarios:
              s:
                executor: constant-vus
                vus: 2
                duration: 1s
                flow:
                  - request: { url: /fast }
            """
        )
        p, _ = run_squall("validate", path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("plan OK", p.stdout)
        self.assertIn("constant-vus", p.stdout)

    def test_unknown_key_names_file_line_col(self):
        path = self.plan(
            """
            scenarios:
              s:
                executor: constant-vus
                vus: 2
                duration: 1s
                flow:
                  - request: { metod: GET, url: /fast }
            """
        )
        for cmd in ("validate", "run"):
            p, _ = run_squall(cmd, path)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(f"{path}:8:", p.stderr)
            self.assertIn("metod", p.stderr)
            self.assertIn("method", p.stderr)
        self.assertEqual(self.stats()["requests"], 0)


# Under AddressSanitizer (make test-asan sets ASAN_OPTIONS) the loader runs a few times slower
# and its memory has shadow and redzones: the bounds widen accordingly.
ASAN = "ASAN_OPTIONS" in os.environ or "TSAN_OPTIONS" in os.environ  # a sanitizer build (either)
TIME_BOUND_S = 30.0 if ASAN else 10.0  # before the hash maps: 29 s for 100,000 keys, 15 s for anchors


def run_measured(*args, timeout=120):
    """Runs `$SQUALL ARGS...` from a python child of its own, whose RUSAGE_CHILDREN then is this
    squall alone; returns (exit code, stdout, stderr, wall seconds, peak RSS in MiB)."""
    wrapper = (
        "import json, resource, subprocess, sys, time\n"
        "t0 = time.monotonic()\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "took = time.monotonic() - t0\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024.0\n"
        "print(json.dumps([p.returncode, p.stdout, p.stderr[-4000:], took, rss]))\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, sqtest.squall_path(), *args],
                         capture_output=True, text=True, timeout=timeout, check=True)
    return tuple(json.loads(out.stdout))


class LargePlans(PlanCase):
    """Plans with 100,000 keys, 100,000 anchors and millions of nodes load in bounded time and
    memory, or are refused with the message of the limit they pass (docs/plans.md, Limits)."""

    def big(self, name, head, lines, tail=""):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(f"target: {self.base}\n" + head)
            f.write("".join(lines))
            f.write(tail)
        return path

    def check_bounds(self, what, took, rss, time_s=TIME_BOUND_S, rss_mib=128):
        print(f"{what}: {took:.2f} s, peak RSS {rss:.0f} MiB", file=sys.stderr)
        self.assertLess(took, time_s, what)
        self.assertLess(rss, rss_mib * (3 if ASAN else 1), what)

    FLOW = ("scenarios:\n  s:\n    executor: per-vu-iterations\n    flow:\n"
            "      - request: { url: \"/fast?a={{v0}}&b={{v99999}}\" }\n")

    def test_100k_keys_validate_and_run(self):
        path = self.big("keys.yaml", "vars:\n", (f"  v{i}: x{i}\n" for i in range(100000)),
                        self.FLOW)
        rc, out, err, took, rss = run_measured("validate", path)
        self.assertEqual(rc, 0, err)
        self.assertIn("plan OK", out)
        self.check_bounds("validate, 100,000 keys", took, rss)
        rc, out, err, took, rss = run_measured("run", path, "-q", "--json", "-", "-t", "1")
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["requests"]["completed"], 1)
        self.assertEqual(self.stats()["requests"], 1)  # the target saw exactly that one
        self.check_bounds("run, 100,000 keys", took, rss)

    def test_100k_anchors(self):
        path = self.big("anchors.yaml", "x-a:\n",
                        [f"  - &a{i} {i}\n" for i in range(100000)] + ["x-b:\n"] +
                        [f"  - *a{i}\n" for i in range(100000)], self.FLOW.replace("{{v0}}", "1")
                        .replace("{{v99999}}", "2"))
        rc, out, err, took, rss = run_measured("validate", path)
        self.assertEqual(rc, 0, err)
        self.check_bounds("validate, 100,000 anchors", took, rss)

    def test_multi_megabyte_plan(self):
        # about 12 MB and 750,000 nodes, inside the limits: it validates
        row = '  - {{ id: {0}, name: "user number {0}, with a name long enough to fill a line" }}\n'
        path = self.big("mb.yaml", "x-rows:\n", (row.format(i) for i in range(150000)),
                        self.FLOW.replace("{{v0}}", "1").replace("{{v99999}}", "2"))
        self.assertGreater(os.path.getsize(path), 8 << 20)
        rc, out, err, took, rss = run_measured("validate", path)
        self.assertEqual(rc, 0, err)
        self.check_bounds("validate, %.1f MB" % (os.path.getsize(path) / 1e6), took, rss)

    def test_seven_million_nodes_refused(self):
        # 14 MB, 7 M nodes: it took 9 s and 1.1 GB; now the node limit stops it early
        path = self.big("nodes.yaml", "x-big: [", ("0," for _ in range(7000000)), "0]\n" +
                        self.FLOW.replace("{{v0}}", "1").replace("{{v99999}}", "2"))
        rc, out, err, took, rss = run_measured("validate", path)
        self.assertEqual(rc, 2, err)
        self.assertIn(f"{path}:2:", err)
        self.assertIn("the plan has more than 1000000 YAML nodes, the limit for a plan", err)
        self.check_bounds("validate, 7 M nodes (refused)", took, rss, rss_mib=64)

    def test_alias_bomb_refused(self):
        lines = ["x-0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"]
        for i in range(1, 10):
            lines.append(f"x-{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]\n")
        path = self.big("bomb.yaml", "", lines, self.FLOW.replace("{{v0}}", "1")
                        .replace("{{v99999}}", "2"))
        rc, out, err, took, rss = run_measured("validate", path)
        self.assertEqual(rc, 2, err)
        self.assertIn("aliases expand the plan past 32 MiB", err)
        self.check_bounds("validate, alias bomb (refused)", took, rss, time_s=5, rss_mib=64)

    def test_oversized_file_refused_unread(self):
        path = os.path.join(self.tmp.name, "huge.yaml")
        with open(path, "wb") as f:
            f.truncate(50 << 20)  # sparse: refusing it must not read it
        rc, out, err, took, rss = run_measured("validate", path)
        self.assertEqual(rc, 2, err)
        self.assertIn("the plan is larger than 16 MiB, the limit for a plan file", err)
        self.check_bounds("validate, 50 MB file (refused)", took, rss, time_s=5, rss_mib=64)

    def test_directories_are_named(self):
        p, _ = run_squall("validate", self.tmp.name)
        self.assertEqual(p.returncode, 2)
        self.assertEqual(p.stderr.strip().splitlines()[0],
                         f"squall: {self.tmp.name}: cannot read the plan: it is a directory")
        os.mkdir(os.path.join(self.tmp.name, "d"))
        path = self.plan(
            """
            scenarios:
              s:
                executor: per-vu-iterations
                flow:
                  - request: { url: /fast, file: d }
            """
        )
        p, _ = run_squall("run", path)
        self.assertEqual(p.returncode, 2)
        self.assertIn("request.file: " + os.path.join(self.tmp.name, "d") +
                      ": is a directory, not a file", p.stderr)
        path = self.plan(
            """
            data:
              users: { csv: d }
            scenarios:
              s:
                executor: per-vu-iterations
                flow:
                  - request: { url: /fast }
            """
        )
        p, _ = run_squall("validate", path)
        self.assertEqual(p.returncode, 2)
        self.assertIn("data.users.csv: " + os.path.join(self.tmp.name, "d") +
                      ": cannot read: Is a directory", p.stderr)
        self.assertEqual(self.stats()["requests"], 0)


if __name__ == "__main__":
    unittest.main(verbosity=2)

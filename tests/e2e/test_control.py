#!/usr/bin/env python3
"""End-to-end tests of a running run's control from the CLI (docs/quick.md, "Control of a
running run"): `squall URL --control PORT` and `squall control PORT CHANGE`.

An open-loop run raised and lowered twice, paused and resumed: the accounting stays exact
(sent + dropped = arrivals, the target counted every request sent) and each change is in the
result's controls with rising times. A closed loop's VUs lowered and raised. The endpoint's gate:
loopback Host only, no web page (Origin), JSON only, a token when one is set. `squall target` on
a free loopback port is the load's target; every process is started and stopped by the test.
Nothing here asserts a rate or a time: a busy machine passes.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402


class TestControl(sqtest.TargetCase):
    def start_run(self, *args, env=None):
        """Starts a quick run with --control on a free port; returns (Popen, port, json path)."""
        port = sqtest.free_port()
        fd, path = tempfile.mkstemp(prefix="squall-control-", suffix=".json")
        os.close(fd)
        self.addCleanup(os.unlink, path)
        proc = subprocess.Popen(
            [sqtest.squall_path(), self.base + "/fast", *args, "--control", str(port),
             "--graceful-stop", "5s", "--json", path, "-q"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=env)
        self.addCleanup(sqtest.stop_proc, proc)
        sqtest.wait_port(port, proc, timeout=30)
        return proc, port, path

    def control(self, port, *change, want=0, env=None):
        p = subprocess.run([sqtest.squall_path(), "control", str(port), *change],
                           capture_output=True, text=True, timeout=30, env=env)
        self.assertEqual(p.returncode, want, (change, p.stdout, p.stderr))
        return json.loads(p.stdout) if want == 0 else p.stderr

    def change_until_started(self, port, *change):
        """The first change: refused (409: not started yet) until the load has begun."""
        deadline = time.monotonic() + 30
        while True:
            p = subprocess.run([sqtest.squall_path(), "control", str(port), *change],
                               capture_output=True, text=True, timeout=30)
            if p.returncode == 0:
                return json.loads(p.stdout)
            self.assertTrue("not started" in p.stderr or "no run is going" in p.stderr, p.stderr)
            self.assertLess(time.monotonic(), deadline, p.stderr)
            time.sleep(0.05)

    def finish(self, proc, path):
        _, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 0, err)
        self.assertIn(b"squall: control on http://127.0.0.1:", err)
        with open(path) as f:
            return json.load(f)

    def test_open_loop_rate_twice_and_pause(self):
        self.reset()
        proc, port, path = self.start_run("--rate", "100", "-d", "5s", "-c", "4", "-t", "2")
        st = self.change_until_started(port, "rate=300")
        self.assertEqual((st["kind"], st["rate"], st["open"]), ("rate", 300, True))
        want = [("rate", 300)]
        for change, kind, value in (("rate=40", "rate", 40), ("pause", "pause", 0),
                                    ("resume", "resume", 0), ("rate=400", "rate", 400),
                                    ("rate=60", "rate", 60)):
            time.sleep(0.3)
            st = self.control(port, change)
            self.assertEqual((st["kind"], st["value"]), (kind, value))
            want.append((kind, value))
            if kind == "pause":
                self.assertTrue(st["paused"])
                self.assertIn("paused already", self.control(port, "pause", want=1))
                self.assertIn("open loop", self.control(port, "vus=2", want=1))
                self.assertIn("more than 0", self.control(port, "rate=0", want=1))
            if kind == "resume":
                self.assertEqual((st["paused"], st["rate"]), (False, 40))
        state = self.control(port)  # no change: the state now
        self.assertEqual((state["rate"], state["paused"]), (60, False))
        doc = self.finish(proc, path)
        r = doc["requests"]
        self.assertGreater(r["sent"], 0, r)
        self.assertEqual(r["sent"] + r["dropped"], r["arrivals"], r)
        self.assert_accounting(doc)
        self.assertEqual(self.stats()["endpoints"]["fast"], r["sent"])
        ctl = doc["controls"]
        self.assertEqual([(c["kind"], c["value"]) for c in ctl], want)
        times = [c["t_s"] for c in ctl]
        self.assertTrue(all(b > a for a, b in zip(times, times[1:])), times)
        # the arrivals are the changed schedule's, exactly (engine/control.c)
        self.assertEqual(r["arrivals"], sqtest.controlled_arrivals(ctl, 100, 5), (r, ctl))

    def test_closed_loop_vus(self):
        self.reset()
        proc, port, path = self.start_run("-c", "4", "-t", "2", "-d", "5s")
        st = self.change_until_started(port, "vus=1")
        self.assertEqual((st["open"], st["vus"]), (False, 1))
        self.assertIn("0 to 4", self.control(port, "vus=5", want=1))
        self.assertIn("closed loop", self.control(port, "rate=10", want=1))
        time.sleep(2.2)  # a whole second of the series runs 1 VU (the series' vus: at its end)
        self.assertEqual(self.control(port, "pause")["vus"], 0)
        time.sleep(0.3)
        self.assertEqual(self.control(port, "resume")["vus"], 1)
        self.assertEqual(self.control(port, "vus=4")["vus"], 4)
        doc = self.finish(proc, path)
        self.assert_accounting(doc)
        self.assertEqual(doc["requests"]["in_flight"], 0)  # the graceful stop let them finish
        self.assertEqual(self.stats()["endpoints"]["fast"], doc["requests"]["sent"])
        self.assertEqual([(c["kind"], c["value"]) for c in doc["controls"]],
                         [("vus", 1), ("pause", 0), ("resume", 0), ("vus", 4)])
        # the workers took it: some second ended with 1 VU running (4 without the change)
        self.assertIn(1, [s["vus"] for s in doc["series"]], doc["series"])

    def test_plan_scenarios(self):
        """squall run PLAN --control: one change per scenario by name, one for every scenario it
        fits; the events name their scenario and come in time order."""
        self.reset()
        fd, plan = tempfile.mkstemp(prefix="squall-control-", suffix=".yaml")
        with os.fdopen(fd, "w") as f:
            f.write("target: %s\n"
                    "scenarios:\n"
                    "  open: {executor: constant-arrival-rate, rate: 50, duration: 3s,\n"
                    "         preAllocatedVUs: 4, flow: [{request: {url: /fast}}]}\n"
                    "  closed: {executor: constant-vus, vus: 3, duration: 3s,\n"
                    "           flow: [{request: {url: /fast}}]}\n" % self.base)
        self.addCleanup(os.unlink, plan)
        port = sqtest.free_port()
        fd, path = tempfile.mkstemp(prefix="squall-control-", suffix=".json")
        os.close(fd)
        self.addCleanup(os.unlink, path)
        proc = subprocess.Popen([sqtest.squall_path(), "run", plan, "--control", str(port),
                                 "--json", path, "-q"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        self.addCleanup(sqtest.stop_proc, proc)
        sqtest.wait_port(port, proc, timeout=30)
        self.change_until_started(port, "rate=200")
        self.assertEqual(self.control(port, "vus=1", "scenario=closed")["vus"], 1)
        self.assertIn("open loop", self.control(port, "vus=1", "scenario=open", want=1))
        self.assertIn("no scenario named", self.control(port, "pause", "scenario=x", want=1))
        self.control(port, "pause")  # both
        self.control(port, "resume", "scenario=open")
        doc = self.finish(proc, path)
        r = doc["requests"]
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)
        self.assertEqual(self.stats()["endpoints"]["fast"], r["sent"])
        ctl = doc["controls"]
        self.assertEqual(sorted((c["kind"], c.get("scenario")) for c in ctl),
                         [("pause", None), ("rate", None), ("resume", "open"), ("vus", "closed")])
        times = [c["t_s"] for c in ctl]
        self.assertEqual(times, sorted(times))

    def test_gate(self):
        """Only a local, non-browser client that sends JSON (and the token, when set) gets in."""
        env = dict(os.environ, SQUALL_CONTROL_TOKEN="s3cret-token")
        proc, port, path = self.start_run("--rate", "50", "-d", "3s", env=env)
        body = json.dumps({"pause": True})
        ok = {"Content-Type": "application/json", "Authorization": "Bearer s3cret-token"}
        cases = [
            (dict(ok, Host="evil.example"), 403),
            (dict(ok, Origin="http://127.0.0.1:%d" % port), 403),
            ({"Content-Type": "application/json"}, 401),
            (dict(ok, Authorization="Bearer s3cret-tokeX"), 401),
            (dict(ok, **{"Content-Type": "text/plain"}), 415),
        ]
        for hdrs, want in cases:
            st, h, data = sqtest.http(port, "POST", "/control", body=body, headers=hdrs)
            self.assertEqual(st, want, (hdrs, data))
            self.assertIn("error", json.loads(data))
        st, _, data = sqtest.http(port, "POST", "/control", body="x" * 5000, headers=ok)
        self.assertEqual(st, 413, data)
        st, _, data = sqtest.http(port, "POST", "/other", body=body, headers=ok)
        self.assertEqual(st, 404, data)
        st, _, data = sqtest.http(port, "DELETE", "/control", headers=ok)
        self.assertEqual(st, 405, data)
        # without the token, squall control is refused; with it, the change is made
        self.assertIn("bearer token", self.control(port, "pause", want=1))
        deadline = time.monotonic() + 30
        while True:
            p = subprocess.run([sqtest.squall_path(), "control", str(port), "pause"],
                               capture_output=True, text=True, timeout=30, env=env)
            if p.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = self.finish(proc, path)
        self.assertEqual([c["kind"] for c in doc["controls"]], ["pause"])
        self.assertEqual(doc["requests"]["sent"] + doc["requests"]["dropped"],
                         doc["requests"]["arrivals"])

    def test_flags(self):
        for addr in ("10.0.0.1:80", "0.0.0.0:80", "example.com:80", "x"):
            p, _ = sqtest.run_squall(self.base + "/fast", "-d", "1s", "--control", addr)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("loopback", p.stderr)
        p, _ = sqtest.run_squall("control", "1", "rate=x")
        self.assertEqual(p.returncode, 2, p.stderr)
        p, _ = sqtest.run_squall("control", "1", "pause", "resume")
        self.assertEqual(p.returncode, 2, p.stderr)


if __name__ == "__main__":
    sqtest.main()

#!/usr/bin/env python3
"""End-to-end tests of the executors (open-loop rates, ramps, pacing, iterations) against
`squall target` on an ephemeral loopback port. The target records every request's arrival time
and reports inter-arrival gaps, so the client's pacing is checked by what the server saw.

Every load is bounded by its rate and a duration of a few seconds.
"""
import json
import os
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402

SANITIZED = "ASAN_OPTIONS" in os.environ or "TSAN_OPTIONS" in os.environ

SQUALL = sqtest.squall_path()
run_json = sqtest.run_json


def run_measured(*args, timeout=60):
    """Like run_json, but also returns the child's CPU seconds (user + sys) from wait4."""
    r, w = os.pipe()
    t0 = time.monotonic()
    pid = os.fork()
    if pid == 0:
        os.dup2(w, 1)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(r)
        os.execv(SQUALL, [SQUALL, *args, "--json", "-", "-q"])
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status, ru = os.wait4(pid, 0)
    wall = time.monotonic() - t0
    return os.waitstatus_to_exitcode(status), json.loads(b"".join(chunks)), \
        ru.ru_utime + ru.ru_stime, wall


class OpenLoop(sqtest.TargetCase):

    @sqtest.timing()
    def test_constant_rate(self):
        self.reset()
        p, doc, wall = run_json(self.base + "/fast", "-r", "1000", "-d", "3s", "-c", "32")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        r = doc["requests"]
        self.assertEqual(doc["mode"], "open-loop")
        self.assertEqual(doc["config"]["executor"]["kind"], "constant-arrival-rate")
        self.assertEqual(r["sent"] + r["dropped"], 3000)
        self.assertEqual(r["dropped"], 0)
        st = self.stats()
        served = st["endpoints"]["fast"]
        self.assertGreaterEqual(served, r["completed"])
        self.assertLessEqual(served, r["completed"] + r["in_flight"])
        self.assertGreaterEqual(served, 3000 - r["in_flight"])
        gap = st["arrivals"]["gap_us"]
        self.assertAlmostEqual(gap["p50"], 1000, delta=100)  # within 10% of 1 ms
        self.assertEqual(doc["latency"]["measured_from"], "intended_send")
        self.assertEqual(doc["latency_uncorrected"]["measured_from"], "actual_send")
        self.assertEqual(doc["latency"]["count"], r["completed"])
        self.assertLess(wall, 6)

    def test_drops_are_counted_not_delayed(self):
        # Two connections that each take 100 ms per request cannot carry 200/s: most arrivals
        # find no free connection and, with no room to wait (max-in-flight = -c), are dropped.
        p, doc, _ = run_json(self.base + "/delay/100", "-r", "200", "-d", "1s", "-c", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        r = doc["requests"]
        self.assertEqual(r["sent"] + r["dropped"], 200)
        self.assertGreater(r["dropped"], 150)
        self.assertLessEqual(r["sent"], 25)

    @sqtest.timing()
    def test_ramping_rate(self):
        self.reset()
        p, doc, _ = run_json(self.base + "/fast", "-r", "0", "--stages", "10s:1000",
                                  "-c", "32", timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        r = doc["requests"]
        self.assertEqual(doc["config"]["executor"]["kind"], "ramping-arrival-rate")
        self.assertEqual(r["sent"] + r["dropped"], 5000)
        served = self.stats()["endpoints"]["fast"]
        # Every arrival that was not dropped reached the server (a starved machine may drop a
        # few: they are counted, never silently late).
        self.assertGreaterEqual(served, r["completed"])
        self.assertLessEqual(served, r["sent"])
        self.assertAlmostEqual(served + r["dropped"], 5000, delta=50)  # 1%

    def test_rate_split_across_threads(self):
        self.reset()
        p, doc, _ = run_json(self.base + "/fast", "-r", "997", "-d", "2s", "-c", "9",
                                  "-t", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        self.assertEqual(doc["threads"], 2)
        self.assertEqual(doc["requests"]["arrivals"], 1994)


class Stall(sqtest.TargetCase):
    """Coordinated omission: a server that freezes for 500 ms every 2 s."""

    target_args = ("-t", "1", "--stall", "500ms/2s")

    def test_open_loop_shows_the_stall(self):
        p, doc, _ = run_json(self.base + "/fast", "-r", "1000", "-d", "4s", "-c", "64",
                                  "--max-in-flight", "2000")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertEqual(r["arrivals"], 4000)
        self.assertEqual(r["sent"] + r["dropped"], 4000)
        corrected = doc["latency"]["p90_us"]
        uncorrected = doc["latency_uncorrected"]["p90_us"]
        self.assertGreaterEqual(corrected, 100_000, doc["latency"])
        self.assertLess(uncorrected, 100_000, doc["latency_uncorrected"])


class ClosedLoop(sqtest.TargetCase):
    @sqtest.timing()
    def test_pacing_holds_cadence_cheaply(self):
        rc, doc, cpu, wall = run_measured(self.base + "/fast", "-c", "1", "--pacing", "10ms",
                                          "-d", "3s")
        self.assertEqual(rc, 0)
        n = doc["requests"]["completed"]
        # 300 within 1% (3% in a sanitizer build, whose every wake-up costs more)
        self.assertGreaterEqual(n, 291 if SANITIZED else 297)
        self.assertLessEqual(n, 301)
        self.assertLess(cpu / doc["duration_s"], 0.10, f"{cpu:.3f}s CPU in {wall:.2f}s")

    def test_ramping_vus(self):
        p, doc, wall = run_json(self.base + "/delay/10", "--stages", "1s:8,1s:8,1s:0")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        self.assertEqual(doc["config"]["executor"]["kind"], "ramping-vus")
        self.assertEqual(doc["connections"]["opened"], 8)
        # 4 VU-seconds up, 8 flat, 4 down: 16 VU-seconds at 10 ms or more per request.
        self.assertGreater(doc["requests"]["completed"], 900)
        self.assertLess(doc["requests"]["completed"], 1650)
        self.assertLess(wall, 6)

    def test_iterations_with_max_duration(self):
        p, doc, wall = run_json(self.base + "/delay/50", "-n", "1000", "-c", "2",
                                     "-d", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["config"]["executor"]["kind"], "shared-iterations")
        self.assertLess(doc["requests"]["sent"], 1000)  # maxDuration ended it
        self.assertLess(wall, 4)


class BadFlags(unittest.TestCase):
    def expect_usage(self, args, needle):
        p = subprocess.run([SQUALL, "http://127.0.0.1:1/", *args], capture_output=True,
                           text=True)
        self.assertEqual(p.returncode, 2, (args, p.stderr))
        self.assertIn(needle, p.stderr)

    def test_bad(self):
        self.expect_usage(["-r", "abc"], "-r")
        self.expect_usage(["-r", "0"], "-r")
        self.expect_usage(["--stages", "10s"], "--stages")
        self.expect_usage(["--stages", "10s:5", "-d", "3s"], "--stages")
        self.expect_usage(["-r", "10", "-c", "8", "--max-in-flight", "4"], "--max-in-flight")
        self.expect_usage(["--max-in-flight", "40"], "--max-in-flight")
        self.expect_usage(["-r", "10", "--pacing", "1s"], "--pacing")
        self.expect_usage(["--pacing", "soon"], "--pacing")


if __name__ == "__main__":
    sqtest.main()

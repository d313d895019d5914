"""End-to-end tests: the per-second series ends where the run does, however the run ends.

docs/json-schema.md: the last `series[].t_s` is `duration_s`, the entries' `len_s` add up to it,
and the series' request counts add up to the totals. A partial last second of 100 ms or more is
an entry of its own (`len_s` < 1); a shorter one joins the entry before it, which then ends
where the run did. Each way a run can end is one case: its time (with and without a graceful
stop that waits for slow requests), a request count (-n), a signal (SIGINT), and the server
killed mid-run (the run going on to its end, or stopped by the no-progress watchdog).
"""

import json
import os
import signal
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import HOST, run_json, squall_path, start_target, stop  # noqa: E402


class SeriesTailCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.proc, cls.port = start_target("-t", "1")
        cls.base = f"http://{HOST}:{cls.port}"

    @classmethod
    def tearDownClass(cls):
        stop(cls.proc)

    def assert_tail(self, doc):
        series = doc["series"]
        self.assertTrue(series, doc)
        d = doc["duration_s"]
        self.assertAlmostEqual(series[-1]["t_s"], d, places=9, msg=[s["t_s"] for s in series])
        self.assertAlmostEqual(sum(s["len_s"] for s in series), d, places=6)
        ts = [s["t_s"] for s in series]
        self.assertEqual(ts, sorted(ts))
        for s in series:
            self.assertGreater(s["len_s"], 0, series)
        r = doc["requests"]
        self.assertEqual(sum(s["requests"] for s in series), r["sent"])
        self.assertEqual(sum(s["completed"] for s in series), r["completed"])
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"], r)

    def test_time(self):
        for threads in ("1", "2"):
            p, doc, _ = run_json(f"{self.base}/fast", "-q", "-c", "8", "-t", threads, "-d", "2s")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assert_tail(doc)

    def test_time_with_a_short_graceful_tail(self):
        # slow requests finish after the load ends: the run ends a sliver past 1 s
        p, doc, _ = run_json(f"{self.base}/delay/60", "-q", "-c", "8", "-t", "2", "-d", "1s",
                             "--graceful-stop", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreater(doc["duration_s"], 1.0)
        self.assert_tail(doc)

    def test_time_with_a_long_graceful_tail(self):
        # ... or well past it: the partial second is an entry of its own
        p, doc, _ = run_json(f"{self.base}/delay/400", "-q", "-c", "8", "-t", "2", "-d", "1s",
                             "--graceful-stop", "1s")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreater(doc["duration_s"], 1.1)
        self.assertLess(doc["series"][-1]["len_s"], 1.0)
        self.assert_tail(doc)

    def test_count(self):
        for n in ("3000", "200"):
            p, doc, _ = run_json(f"{self.base}/fast", "-q", "-c", "4", "-t", "2", "-n", n)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertEqual(doc["requests"]["completed"], int(n))
            self.assert_tail(doc)

    def test_signal(self):
        cmd = [squall_path(), f"{self.base}/delay/5", "-q", "-c", "8", "-t", "2", "-d", "20s",
               "--json", "-"]
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            time.sleep(1.5)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
        doc = json.loads(out)
        self.assertTrue(doc["aborted"], doc["abort_reason"])
        self.assertLess(doc["duration_s"], 10)
        self.assert_tail(doc)

    def test_server_killed(self):
        proc, port = start_target("-t", "1")
        try:
            cmd = [squall_path(), f"http://{HOST}:{port}/delay/5", "-q", "-c", "8", "-t", "2",
                   "-d", "3s", "--json", "-"]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(1.3)
            stop(proc, kill=True)
            out, _ = p.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                stop(proc, kill=True)
        doc = json.loads(out)
        self.assertGreater(doc["errors"]["connect"] + doc["errors"]["closed"], 0, doc["errors"])
        self.assert_tail(doc)

    def test_server_killed_watchdog_stops(self):
        proc, port = start_target("-t", "1")
        try:
            cmd = [squall_path(), f"http://{HOST}:{port}/delay/5", "-q", "-c", "8", "-t", "2",
                   "-d", "30s", "--timeout", "500ms", "--connect-timeout", "500ms", "--json", "-"]
            p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(1.3)
            stop(proc, kill=True)
            out, _ = p.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                stop(proc, kill=True)
        doc = json.loads(out)
        self.assertTrue(doc["aborted"], doc)
        self.assertLess(doc["duration_s"], 20)
        self.assert_tail(doc)


if __name__ == "__main__":
    sqtest.main()

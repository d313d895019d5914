#!/usr/bin/env python3
"""A daemon killed mid-run (docs/daemon.md, "What survives a crash"): start a 10 s run, kill -9
the daemon 3 s in, restart it on the same data dir. The run is `interrupted`, with at least 2 s
of its series and a reason; the run that finished before is intact, byte for byte; the sqlite3
CLI finds the database sound (PRAGMA integrity_check); and the restarted daemon runs again.
A graceful SIGTERM mid-run, by contrast, stores the run as stopped with its result.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from openapi_check import OpenAPI  # noqa: E402
from test_daemon import Client, quick  # noqa: E402


class TestCrash(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.oapi = OpenAPI()
        cls.tmp = tempfile.mkdtemp(prefix="squall-crash-")
        cls.data = os.path.join(cls.tmp, "data")
        cls.target, cls.tport = sqtest.start_target("-t", "1")

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.target)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def serve(self):
        proc, port = sqtest.start_serve("--data", self.data)
        self.addCleanup(lambda: os.path.exists(proc.log_path) and os.unlink(proc.log_path))
        return proc, port, Client(port, self.oapi)

    def test_kill_9_mid_run(self):
        proc, port, c = self.serve()
        done = c.start(quick(self.tport, requests=2000), name="before")
        before = c.wait(done)
        self.assertEqual(before["status"], "finished")
        st, h, before_raw = c.call("GET", "/runs/%d/result" % done, raw=True)

        rid = c.start(quick(self.tport, duration="10s"), name="victim")
        deadline = time.monotonic() + 20
        while c.get("/runs/%d" % rid)[1]["status"] != "running":
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        time.sleep(3)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()

        db = os.path.join(self.data, "squall.db")
        p = subprocess.run(["sqlite3", "-readonly", db, "PRAGMA integrity_check;"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.stdout.strip(), "ok", p.stderr)

        proc, port, c = self.serve()
        try:
            run = c.get("/runs/%d" % rid)[1]
            self.assertEqual(run["status"], "interrupted")
            self.assertIsNotNone(run["reason"])
            self.assertIsNone(run["result"])
            st, ser = c.get("/runs/%d/series" % rid)
            self.assertGreaterEqual(len(ser["series"]), 2, ser)
            self.assertEqual([s["idx"] for s in ser["series"]], list(range(len(ser["series"]))))
            self.assertGreater(ser["series"][-1]["totals"]["requests"], 0)
            self.assertGreater(run["summary"]["sent"], 0)  # summed from the series
            st, l = c.get("/runs?status=interrupted")
            self.assertIn(rid, [r["id"] for r in l["runs"]])
            # the finished run, intact
            after = c.get("/runs/%d" % done)[1]
            self.assertEqual(after["status"], "finished")
            st, h, after_raw = c.call("GET", "/runs/%d/result" % done, raw=True)
            self.assertEqual(after_raw, before_raw)
            # an interrupted run replays its stored seconds, then ends
            st, h, body = c.call("GET", "/runs/%d/live" % rid, raw=True)
            self.assertEqual(body.count(b"event: second"), len(ser["series"]))
            self.assertIn(b'"status":"interrupted"', body)
            # and the daemon runs again
            again = c.start(quick(self.tport, requests=200))
            self.assertEqual(c.wait(again)["status"], "finished")
            with open(proc.log_path) as f:
                self.assertIn("now interrupted", f.read())
        finally:
            self.assertEqual(sqtest.stop(proc), 0)
        p = subprocess.run(["sqlite3", "-readonly", db, "PRAGMA integrity_check;"],
                           capture_output=True, text=True, timeout=30)
        self.assertEqual(p.stdout.strip(), "ok", p.stderr)

    def test_sigterm_stops_gracefully(self):
        proc, port, c = self.serve()
        rid = c.start(quick(self.tport, duration="20s"))
        queued = c.start(quick(self.tport, duration="1s"))
        deadline = time.monotonic() + 20
        while c.get("/runs/%d" % rid)[1]["status"] != "running":
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.05)
        time.sleep(1.5)
        t0 = time.monotonic()
        self.assertEqual(sqtest.stop(proc), 0)
        self.assertLess(time.monotonic() - t0, 8)
        with open(proc.log_path) as f:
            log = f.read()
        self.assertIn("shutting down", log)
        p = subprocess.run([sqtest.squall_path(), "runs", "show", str(rid), "--json", "--data",
                            self.data], capture_output=True, text=True, timeout=30)
        run = json.loads(p.stdout)
        self.assertEqual(run["status"], "stopped")
        self.assertEqual(run["reason"], "the daemon shut down")
        self.assertGreater(run["result"]["requests"]["sent"], 0)
        p = subprocess.run([sqtest.squall_path(), "runs", "show", str(queued), "--json", "--data",
                            self.data], capture_output=True, text=True, timeout=30)
        self.assertEqual(json.loads(p.stdout)["status"], "stopped")


if __name__ == "__main__":
    sqtest.main()

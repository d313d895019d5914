#!/usr/bin/env python3
"""End-to-end tests of `squall mcp --store` (docs/mcp.md): runs an agent makes over stdio are
recorded in the run store - `squall runs list` (the store's own reader) shows them, and a second
`squall mcp` on the same store lists, fetches and compares them; a store a running daemon holds
is refused with one message; the flag's mistakes exit 2. A target started and stopped by the
test; two bounded runs (200 requests each); the file takes ~3 s.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import HOST, run_squall  # noqa: E402

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "py", "version": "1"}}}


def call(i, name, args):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": name, "arguments": args}}


def mcp(store, *msgs, timeout=60):
    """Runs `squall mcp --store STORE` with msgs on stdin; returns (CompletedProcess, {id: response})."""
    text = "".join(json.dumps(m) + "\n" for m in msgs)
    p = subprocess.run([sqtest.squall_path(), "mcp", "--store", store], input=text,
                       capture_output=True, text=True, timeout=timeout)
    out = {}
    for line in p.stdout.splitlines():
        r = json.loads(line)
        out[r.get("id")] = r
    return p, out


class McpStore(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="squall-mcpstore-")
        cls.target, cls.tport = sqtest.start_target("-t", "1")

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.target)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_runs_recorded(self):
        store = os.path.join(self.tmp, "data")
        q = lambda path: {"quick": {"url": "http://%s:%d%s" % (HOST, self.tport, path),  # noqa: E731
                                    "connections": 2, "threads": 1, "requests": 200}}
        # run 2 named as docs/mcp.md says (run_load_test's name): the store keeps it
        p, out = mcp(store, INIT, call(1, "run_load_test", q("/fast")),
                     call(2, "run_load_test", dict(q("/delay/10"), name="slow one")))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("error", out[2], out[2])
        ids = [out[i]["result"]["structuredContent"]["run_id"] for i in (1, 2)]
        self.assertEqual(ids, [1, 2])

        # the store's own reader sees them
        r, _ = run_squall("runs", "list", "--data", store, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        listed = json.loads(r.stdout)
        runs = listed["runs"] if isinstance(listed, dict) else listed
        self.assertEqual(sorted(x["id"] for x in runs), [1, 2])
        self.assertTrue(all(x["status"] == "finished" for x in runs), runs)
        self.assertEqual({x["id"]: x["name"] for x in runs}, {1: "", 2: "slow one"})

        # a new session on the same store: list, get, compare
        p, out = mcp(store, INIT, call(1, "list_runs", {}), call(2, "get_run", {"id": 1}),
                     call(3, "compare_runs", {"a": 1, "b": 2}))
        self.assertEqual(p.returncode, 0, p.stderr)
        lr = out[1]["result"]["structuredContent"]["runs"]
        self.assertEqual([x["id"] for x in lr], [2, 1])
        self.assertEqual(lr[1]["status"], "finished")
        doc = out[2]["result"]["structuredContent"]["result"]
        self.assertEqual(doc["requests"]["completed"], 200)
        dl = out[3]["result"]["structuredContent"]["deltas"]
        # run 2's requests are each held 10 ms: its p50 is at least 10 ms, /fast's a small
        # fraction of that even on a busy machine, so the delta is well above 1 ms; and with
        # 2 connections it serves at most 200/s, far fewer than /fast
        self.assertGreater(dl["p50_us"]["delta"], 1000, dl)
        self.assertLess(dl["rps"]["delta"], 0, dl)

    def test_store_a_daemon_holds(self):
        store = os.path.join(self.tmp, "held")
        proc, _ = sqtest.start_serve("--data", store)
        try:
            p, out = mcp(store, INIT)
            self.assertEqual(p.returncode, 1, p.stdout)
            self.assertIn("squall mcp: --store:", p.stderr)
            self.assertEqual(out, {})
        finally:
            sqtest.stop(proc)
            os.unlink(proc.log_path)

    def test_flag_mistakes(self):
        for args, needle in ((["--store"], "--store needs a value"),
                             (["--store="], "--store: the path is empty")):
            p, _ = run_squall("mcp", *args)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(needle, p.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)

"""End-to-end tests of WebSocket load: `squall ws://...` (the quick face) and plan ws steps, against
`squall target`'s /ws (and its /webhook) and against an independent server, the npm `ws` package
(bench/ws_server.mjs, installed into build/npm on first use). Counts are checked against the
servers' own: the target's /stats, and for the npm server the messages squall got back. The run
also goes over wss:// (the target's TLS), with the target's knobs: a close 1011, fragments with
pings between them. Each load is bounded (iterations, or a run of a second or two).
"""

import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import HOST, run_json, run_squall  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def npm_dir():
    d = os.environ.get("SQ_NPM_DIR")
    if d:
        return d
    return os.path.join(os.path.dirname(os.path.abspath(sqtest.squall_path())), "npm")


def start_npm_ws():
    """Starts bench/ws_server.mjs; returns (Popen, port), or None when node or the npm package is
    not to be had (the caller skips)."""
    if not shutil.which("node"):
        return None
    env = dict(os.environ, SQ_NPM_DIR=npm_dir())
    proc = subprocess.Popen(["node", os.path.join(ROOT, "bench", "ws_server.mjs"), "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                            stdin=subprocess.DEVNULL)
    fd = proc.stdout.fileno()
    line = b""
    deadline = time.monotonic() + 120  # a first run installs ws from npm
    while not line.endswith(b"\n"):
        left = deadline - time.monotonic()
        r, _, _ = select.select([fd], [], [], max(left, 0))
        if not r:
            break
        chunk = os.read(fd, 1)
        if not chunk:
            break
        line += chunk
    m = re.match(r"listening on 127\.0\.0\.1:(\d+)", line.decode())
    if not m:
        stop_proc(proc)
        return None
    return proc, int(m.group(1))


def stop_proc(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    for f in (proc.stdout, proc.stderr):
        if f:
            f.close()


def write_plan(dirname, text):
    path = os.path.join(dirname, "plan.yaml")
    with open(path, "w") as f:
        f.write(text)
    return path


class PlanOnTarget(sqtest.TargetCase):
    """Plan ws steps against the target's /ws and /webhook."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.dir = tempfile.mkdtemp(prefix="sq_ws_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)
        super().tearDownClass()

    def plan(self, flow, vus=2, iterations=20):
        return write_plan(self.dir, (
            f"target: {self.base}\n"
            "scenarios:\n  s:\n    executor: shared-iterations\n"
            f"    vus: {vus}\n    iterations: {iterations}\n    flow:\n" + flow))

    def test_flow_counts_match_the_target(self):
        self.reset()
        path = self.plan(
            "      - request: {method: POST, url: /webhook, body: '{\"vu\":{{$vu}}}'}\n"
            "        check: {status: 202}\n"
            "      - name: open\n"
            "        ws: {connect: '/ws?frag=2&ping=1', headers: {X-Vu: '{{$vu}}'}}\n"
            "        check: {status: 101}\n"
            "      - name: say\n"
            "        ws: {send: 'hello {{$vu}}-{{$iteration}}', reply: true, timeout: 2s}\n"
            "        check: {body_contains: hello}\n"
            "      - {name: fire, ws: {send: x}}\n"
            "      - {name: listen, ws: {receive: true}}\n"
            "      - {name: bye, ws: {close: 1000}}\n"
            "      - {name: after, request: {url: /fast}}\n")
        p, doc, _ = run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        self.assertEqual(doc["requests"]["completed"], 20 * 7)
        ws = doc["ws"]
        st = self.stats()
        self.assertEqual(ws["upgrades"], 20)
        self.assertEqual(st["ws"]["upgrades"], 20)
        self.assertEqual(ws["messages"]["sent"], 40)
        self.assertEqual(st["ws"]["messages_in"], 40)
        self.assertEqual(ws["messages"]["received"], st["ws"]["messages_out"])
        self.assertEqual(ws["messages"]["received"], 40)
        # fragments of 2 bytes with a ping before each: every ping was seen, pongs answered
        self.assertEqual(ws["pings"]["received"], st["ws"]["pings_sent"])
        self.assertGreater(ws["pongs"]["sent"], 0)
        self.assertEqual(ws["pongs"]["sent"], st["ws"]["pongs_received"])
        self.assertEqual(ws["close_codes"], {"1000": 20})
        self.assertEqual(st["ws"]["closes_received"], 20)
        self.assertEqual(st["webhook"]["events"], 20)
        self.assertEqual(st["endpoints"]["fast"], 20)
        steps = {s["step"]: s for s in doc["steps"]}
        self.assertEqual(steps["open"]["method"], "WS")
        self.assertEqual(steps["open"]["ws"], "connect")
        self.assertEqual(steps["open"]["status"], {"101": 20})
        self.assertEqual(steps["say"]["requests"], 20)
        checks = {c["step"]: c for c in doc["checks"]}
        self.assertEqual(checks["say"]["passed"], 20)
        self.assertEqual(checks["say"]["failed"], 0)

    def test_refused_upgrade_is_the_steps_answer(self):
        path = self.plan(
            "      - ws: {connect: '/ws?close=99'}\n"
            "        check: {status: 101}\n"
            "      - ws: {send: never}\n"
            "      - ws: {close: 1000}\n"
            "      - request: {url: /fast}\n", iterations=5)
        p, doc, _ = run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        steps = doc["steps"]
        self.assertEqual(steps[0]["status"], {"400": 5})
        self.assertEqual(steps[0]["failed"], 5)  # http_req_failed: a status >= 400
        self.assertEqual(doc["checks"][0]["failed"], 5)
        # no WebSocket to send on or to close: each fails `closed`, the flow goes on
        self.assertEqual(steps[1]["errors"], 5)
        self.assertEqual(steps[2]["errors"], 5)
        self.assertEqual(doc["errors"]["closed"], 10)
        self.assertEqual(steps[3]["status"], {"200": 5})
        self.assertEqual(doc["ws"]["upgrade_failed"], {"400": 5})
        self.assertEqual(doc["ws"]["upgrades"], 0)

    def test_server_close_1011_fails_the_waiting_step(self):
        path = self.plan(
            "      - ws: {connect: '/ws?close=1011&after=1'}\n"
            "      - ws: {send: one, reply: true}\n"
            "      - ws: {send: two, reply: true}\n"
            "      - ws: {close: 1000}\n", vus=1, iterations=3)
        p, doc, _ = run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["ws"]["close_codes"].get("1011"), 3)
        steps = doc["steps"]
        self.assertEqual(steps[1]["failed"], 0)
        self.assertEqual(steps[2]["errors"], 3)  # the close came instead of its reply
        self.assertEqual(doc["errors"]["closed"], 3 + 3)  # ...and the close step had no socket
        self.assert_accounting(doc)


class PlanOnNpmWs(unittest.TestCase):
    """Plan ws steps against the npm `ws` server."""

    @classmethod
    def setUpClass(cls):
        got = start_npm_ws()
        if not got:
            raise unittest.SkipTest("node or the npm ws package is not available")
        cls.proc, cls.port = got
        cls.dir = tempfile.mkdtemp(prefix="sq_ws_")

    @classmethod
    def tearDownClass(cls):
        stop_proc(cls.proc)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_echo_flow(self):
        path = write_plan(self.dir, (
            f"target: http://{HOST}:{self.port}\n"
            "scenarios:\n  s:\n    executor: shared-iterations\n    vus: 4\n    iterations: 100\n"
            "    flow:\n"
            "      - ws: {connect: /}\n"
            "        check: {status: 101}\n"
            "      - ws: {send: 'hello {{$vu}}', reply: true}\n"
            "        check: {body_contains: 'hello '}\n"
            "      - ws: {send: binary, binary: true, reply: true}\n"
            "      - ws: {close: 1000}\n"))
        p, doc, _ = run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        ws = doc["ws"]
        self.assertEqual(ws["upgrades"], 100)
        self.assertEqual(ws["messages"]["sent"], 200)
        self.assertEqual(ws["messages"]["received"], 200)
        self.assertEqual(ws["payload_bytes"]["received"], ws["payload_bytes"]["sent"])
        self.assertEqual(ws["close_codes"], {"1000": 100})
        self.assertEqual(doc["requests"]["failed"], 0)
        self.assertEqual(doc["checks"][1]["passed"], 100)


if __name__ == "__main__":
    sqtest.main()

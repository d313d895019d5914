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


class QuickOnTarget(sqtest.TargetCase):
    """`squall ws://...` against the target's /ws."""

    def url(self, path="/ws"):
        return f"ws://{HOST}:{self.port}{path}"

    def test_echo_counts_match_the_target(self):
        self.reset()
        p, doc, _ = run_json(self.url(), "-c", "4", "-t", "2", "-n", "2000", "--message",
                             '{"hello":"websocket"}', "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        self.assertEqual(doc["config"]["protocol"], "websocket")
        self.assertEqual(doc["requests"]["completed"], 2000)
        self.assertEqual(doc["status"]["other"], 2000)  # a message has no HTTP status
        ws = doc["ws"]
        self.assertEqual(ws["upgrades"], 4)
        self.assertEqual(ws["messages"]["sent"], 2000)
        self.assertEqual(ws["messages"]["received"], 2000)
        self.assertEqual(ws["messages"]["unmatched"], 0)
        self.assertEqual(ws["payload_bytes"]["sent"], 2000 * 21)
        self.assertEqual(ws["payload_bytes"]["received"], 2000 * 21)
        self.assertEqual(ws["upgrade"]["count"], 4)
        self.assertEqual(ws["closes_sent"], 4)  # one close 1000 per connection at the end
        self.assertEqual(doc["errors"]["upgrade"], 0)
        deadline = time.monotonic() + 5
        while True:
            st = self.stats()
            if st["ws"]["closes_received"] == 4 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.assertEqual(st["ws"]["upgrades"], 4)
        self.assertEqual(st["ws"]["messages_in"], 2000)
        self.assertEqual(st["ws"]["messages_out"], 2000)
        self.assertEqual(st["ws"]["bytes_in"], 2000 * 21)
        self.assertEqual(st["ws"]["closes_received"], 4)
        self.assertEqual(st["ws"]["protocol_errors"], 0)

    def test_template_message(self):
        self.reset()
        p, doc, _ = run_json(self.url(), "-c", "2", "-t", "1", "-n", "100", "--message",
                             '{"vu":{{$vu}},"i":{{$iteration}},"id":"{{$randomUUID}}"}', "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 100)
        ws = doc["ws"]
        # rendered per send: the echo carries as many bytes as went out
        self.assertEqual(ws["payload_bytes"]["received"], ws["payload_bytes"]["sent"])
        self.assertGreaterEqual(ws["payload_bytes"]["sent"], 100 * len('{"vu":1,"i":0,"id":""}') + 100 * 36)
        self.assertEqual(self.stats()["ws"]["bytes_in"], ws["payload_bytes"]["sent"])

    def test_fragments_and_server_pings(self):
        self.reset()
        p, doc, _ = run_json(self.url("/ws?frag=3&ping=1"), "-c", "2", "-t", "1", "-n", "200",
                             "--message", "fragmented message", "--binary", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 200)
        ws = doc["ws"]
        self.assertEqual(ws["payload_bytes"]["received"], 200 * 18)
        st = self.stats()["ws"]
        self.assertEqual(ws["pings"]["received"], st["pings_sent"])
        self.assertEqual(st["pings_sent"], 200 * 6)  # one before each fragment
        self.assertGreaterEqual(ws["pongs"]["sent"], 200)
        self.assertEqual(ws["pongs"]["sent"], st["pongs_received"])

    def test_server_close_1011_is_counted_and_the_run_goes_on(self):
        p, doc, _ = run_json(self.url("/ws?close=1011&after=5"), "-c", "2", "-t", "1", "-d",
                             "1s", "--message", "x", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        ws = doc["ws"]
        self.assertGreater(ws["close_codes"].get("1011", 0), 2)
        self.assertGreater(ws["upgrades"], 2)  # each close replaced its connection
        self.assertGreaterEqual(doc["requests"]["completed"], 5 * ws["close_codes"]["1011"])

    def test_client_pings_and_open_loop(self):
        p, doc, _ = run_json(self.url(), "-c", "4", "-t", "1", "-r", "200", "-d", "1s",
                             "--ws-ping", "200ms", "--message", "tick", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        r = doc["requests"]
        self.assertEqual(r["arrivals"], 200)
        # each arrival sent or counted dropped (a busy machine drops some while the target is
        # descheduled), each sent one echoed but those in flight at the end
        self.assertEqual(r["sent"] + r["dropped"], 200, r)
        self.assertEqual(r["failed"], 0, doc["errors"])
        self.assertGreater(r["sent"], 100, r)  # 200/s on 4 connections: a small load
        ws = doc["ws"]
        self.assertGreaterEqual(ws["pings"]["sent"], 4 * 3)
        self.assertEqual(ws["pongs"]["received"], ws["ping_rtt"]["count"])
        self.assertGreaterEqual(ws["pongs"]["received"], ws["pings"]["sent"] - 4)

    def test_refused_upgrade_stops_the_run(self):
        p, doc, _ = run_json(self.url("/fast"), "-c", "2", "-d", "2s", "--message", "x", "-q")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertTrue(doc["aborted"])
        self.assertIn("upgrade was answered with status 200", doc["abort_reason"])
        self.assertEqual(doc["ws"]["upgrade_failed"].get("200"), doc["errors"]["upgrade"])
        self.assertIn("no request succeeded", p.stderr)

    def test_bad_flags_exit_2(self):
        cases = [
            ((self.url(),), "a ws:// URL needs --message"),
            ((f"http://{HOST}:{self.port}/", "--message", "x"), "--message applies to ws://"),
            ((self.url(), "--message", "x", "-m", "POST"), "a ws:// run opens with GET"),
            ((self.url(), "--message", "x", "--http2"), "WebSocket runs over HTTP/1.1"),
            ((self.url(), "--message", "x", "-b", "y"), "-b: a ws:// run sends --message"),
            ((self.url(), "--message", "x", "--ws-ping", "10ms"), "--ws-ping: '10ms': at least"),
            ((self.url(), "--message", "{{$nope}}"), "--message: '{{$nope}}'"),
            ((self.url(), "--message", "@/nonexistent/m"), "cannot read /nonexistent/m"),
            ((self.url(), "--message", "x", "--ws-subprotocol", ""), "is not a subprotocol"),
            (("ws://", "--message", "x"), "bad URL 'ws://'"),
        ]
        for args, msg in cases:
            p, _ = run_squall(*args, "-d", "1s")
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(msg, p.stderr, args)


class QuickOnTls(unittest.TestCase):
    """wss:// over squall's TLS against `squall target --tls`."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="sq_wss_")
        cls.cert = os.path.join(cls.dir, "target.pem")
        cls.proc, cls.port = sqtest.start_target("-t", "1", "-q", "--tls", "--cert-out", cls.cert)

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.proc)
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_wss_echo(self):
        p, doc, _ = run_json(f"wss://localhost:{self.port}/ws", "--cacert", self.cert, "--resolve",
                             f"localhost:{self.port}:127.0.0.1", "-c", "2", "-t", "1", "-n", "300",
                             "--message", "secure", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 300)
        self.assertEqual(doc["tls"]["handshakes"], 2)
        self.assertEqual(doc["ws"]["upgrades"], 2)
        self.assertEqual(doc["ws"]["payload_bytes"]["received"], 300 * 6)

    def test_wss_unverified_fails_tls(self):
        p, doc, _ = run_json(f"wss://localhost:{self.port}/ws", "--resolve",
                             f"localhost:{self.port}:127.0.0.1", "-c", "1", "-d", "1s",
                             "--message", "x", "-q")
        self.assertEqual(p.returncode, 1)
        self.assertGreater(doc["errors"]["tls"], 0)
        self.assertEqual(doc["ws"]["upgrades"], 0)


class QuickSilentServer(unittest.TestCase):
    """A server that accepts the connection and never answers the upgrade."""

    def test_upgrade_times_out(self):
        import socket
        ls = socket.socket()
        ls.bind((HOST, 0))
        ls.listen(16)
        port = ls.getsockname()[1]
        try:
            p, doc, took = run_json(f"ws://{HOST}:{port}/ws", "-c", "2", "-d", "5s",
                                    "--connect-timeout", "500ms", "--message", "x", "-q")
        finally:
            ls.close()
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertLess(took, 4)
        self.assertTrue(doc["aborted"])
        self.assertIn("no answer to the upgrade within the connect timeout", doc["abort_reason"])
        self.assertEqual(doc["ws"]["upgrade_failed"], {"timeout": doc["errors"]["upgrade"]})


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

    def test_quick_echo(self):
        p, doc, _ = run_json(f"ws://{HOST}:{self.port}/", "-c", "4", "-t", "1", "-n", "1000",
                             "--message", '{"n":{{$iteration}}}', "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 1000)
        ws = doc["ws"]
        self.assertEqual(ws["upgrades"], 4)
        self.assertEqual(ws["messages"]["received"], 1000)
        self.assertEqual(ws["payload_bytes"]["received"], ws["payload_bytes"]["sent"])
        self.assertEqual(doc["errors"]["parse"], 0)

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

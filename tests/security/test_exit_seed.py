"""Exit codes a CI gate can trust, and random values that are random (ISSUE25 sections 1 and 7).

Exit codes: a run in which nothing succeeded exits 1 on every face (the quick one-liner,
`squall run`, `squall wrk`, a distributed run on agents) and the daemon marks such a run
`failed`, with one line that says how many failed and of which kinds ("squall: no request
succeeded: 12 failed: timeout 12 (no complete response within the 0.5s timeout)"); a run whose
target answered, even 500 to everything, exits 0. The misbehaving peers are
tests/e2e/misbehave_server.py's modes (a server that never answers, answers garbage, sends an
endless chunked body, a gzip bomb), a publish-only plan against a NATS server that opens the
connection and then confirms nothing, and a subscribe-only plan whose events never come.

Random: {{$randomUUID}}, {{$randomInt(...)}} and a random feeder differ from run to run (the
seed is drawn from the OS), and a run given `--seed N` (or a plan's `seed:`) replays exactly,
VU by VU; the seed is in the result document (run.seed) and the summary, also for a run that was
not given one (given back, it replays that run), for a distributed run and a daemon run. What
each VU sent is recorded by a loopback server of this file that logs every request's body.

Every load is bounded (-d 1s or -n); every process is started here and stopped by its PID.
"""

import http.server
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

import sec  # noqa: F401  (puts tests/e2e on the path)
import sqtest
free_port = sqtest.free_port
wait_port = sqtest.wait_port
stop = sqtest.stop_proc
Agent = sqtest.Agent

HOST = "127.0.0.1"
HERE = os.path.dirname(os.path.abspath(__file__))
MISBEHAVE = os.path.join(HERE, "..", "e2e", "misbehave_server.py")
NATS = shutil.which("nats-server") or "/usr/sbin/nats-server"

# "squall: no request succeeded: 1,234 failed: timeout 1,234 (what it means)"
WHY = re.compile(r"squall: no request succeeded: ([\d,]+) failed: ([a-z_]+) ([\d,]+) \(([^)]*)\)")


def num(s):
    return int(s.replace(",", ""))


class Misbehave:
    """One tests/e2e/misbehave_server.py in MODE, stopped by its PID."""

    def __init__(self, mode, tmp):
        self.status = os.path.join(tmp, "status-%s-%d.json" % (mode, time.monotonic_ns()))
        self.proc = subprocess.Popen([sys.executable, MISBEHAVE, mode, "--status", self.status],
                                     stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
        line = self.proc.stdout.readline().decode()
        if not line.startswith("misbehave listening on "):
            stop(self.proc)
            raise RuntimeError("misbehave_server.py %s: %r" % (mode, line))
        self.port = int(line.split()[-1])
        self.url = "http://%s:%d" % (HOST, self.port)

    def close(self):
        stop(self.proc)
        self.proc.stdout.close()


def plan_text(target, flow, seed=None, vus=2, duration="1s", extra=""):
    """A one-scenario plan: `vus` VUs for `duration` (or `iterations` when duration is an int)."""
    if isinstance(duration, int):
        ex = "    executor: per-vu-iterations\n    iterations: %d\n" % duration
    else:
        ex = "    executor: constant-vus\n    duration: %s\n" % duration
    return ("target: %s\n%s%s"
            "scenarios:\n  s:\n%s    vus: %d\n    flow:\n%s"
            % (target, "seed: %d\n" % seed if seed is not None else "", extra, ex, vus, flow))


class MuteNats:
    """A NATS server that opens connections (INFO, and a PONG to the first PING) and then
    confirms nothing: no PONG again, no message delivered."""

    INFO = (b'INFO {"server_id":"mute","version":"2.9.0","proto":1,"headers":true,'
            b'"max_payload":1048576}\r\n')

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind((HOST, 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.conns, self.servers = [], []
        self.thread = threading.Thread(target=self.accept, daemon=True)
        self.thread.start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)
            t = threading.Thread(target=self.serve, args=(c,), daemon=True)
            self.servers.append(t)
            t.start()

    def serve(self, c):
        try:
            c.sendall(self.INFO)
            buf, ponged = b"", False
            while True:
                data = c.recv(65536)
                if not data:
                    return
                buf += data
                if not ponged and b"PING\r\n" in buf:
                    c.sendall(b"PONG\r\n")
                    ponged = True
                buf = buf[-8:]
        except OSError:
            return

    def close(self):
        # shutdown wakes the threads blocked on these sockets before their descriptors are
        # closed: closed under a thread about to call accept(), a descriptor number the next
        # listener reuses (the Random class's recorder) was accepted on here, and squall's
        # connection to the recorder got this server's INFO (a `parse` error, one request lost)
        for s in [self.sock] + self.conns:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self.thread.join(timeout=10)
        for t in self.servers:
            t.join(timeout=10)
        self.sock.close()
        for c in self.conns:
            c.close()


class Recorder:
    """A loopback HTTP/1.1 server (keep-alive) that answers 200 to everything and records each
    request's body: what every VU sent, in the order it arrived."""

    def __init__(self):
        bodies = self.bodies = []
        lock = self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n).decode()
                with lock:
                    bodies.append(body)
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.srv = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.srv.daemon_threads = True
        self.port = self.srv.server_address[1]
        self.url = "http://%s:%d" % (HOST, self.port)
        self.thread = threading.Thread(target=self.srv.serve_forever, daemon=True)
        self.thread.start()

    def take(self):
        """The bodies recorded since the last take, keyed by their first two words (VU,
        iteration): {(vu, it): the rest}."""
        with self.lock:
            got, self.bodies[:] = list(self.bodies), []
        out = {}
        for b in got:
            vu, it, rest = b.split(" ", 2)
            out[(int(vu), int(it))] = rest
        return out

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()


UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
# what each VU sends: its number, its iteration, then the random values
BODY = "{{$vu}} {{$iteration}} {{$randomUUID}} {{$randomInt(1,1000000000)}}"


def uuids(rec):
    return {v.split(" ")[0] for v in rec.values()}


# the kinds each misbehaviour is counted under, the first the largest
MODES = {
    "never_answer": ("timeout",),
    "garbage": ("parse",),
    "endless_body": ("timeout",),
    "gzip_bomb": ("decode", "timeout"),
}


class ExitCodes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sq-exit-seed-")
        cls.target, cls.tport = sqtest.start_target("-t", "1", "-q")
        cls.base = "http://%s:%d" % (HOST, cls.tport)

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.target)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def write_plan(self, text, name="plan.yaml"):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def check_why(self, p, doc, kinds):
        """rc 1 and the line that says how many failed, of which kind, and what it means."""
        self.assertEqual(p.returncode, 1, p.stderr[-600:])
        m = WHY.search(p.stderr)
        self.assertIsNotNone(m, p.stderr[-600:])
        self.assertIn(m.group(2), kinds, m.group(0))
        self.assertTrue(m.group(4), m.group(0))
        if doc is not None:
            self.assertEqual(doc["requests"]["completed"], 0)
            self.assertEqual(num(m.group(1)), doc["requests"]["failed"], m.group(0))
            self.assertEqual(num(m.group(3)), doc["errors"][m.group(2)], m.group(0))
        return m

    def mode_args(self, mode):
        # the bomb takes a while to refuse (about 0.5 s a response): one connection, a longer
        # timeout, so the run ends on decode errors rather than on timeouts alone
        if mode == "gzip_bomb":
            return ["-c", "1"], "5s"
        return ["-c", "2"], "500ms"

    def test_quick_face_exits_1_and_says_why(self):
        for mode, kinds in MODES.items():
            with self.subTest(mode=mode):
                srv = Misbehave(mode, self.tmp)
                try:
                    conns, tmo = self.mode_args(mode)
                    p, doc, _ = sqtest.run_json(srv.url + "/", "-d", "1s", "--timeout", tmo,
                                                "-t", "1", "-q", *conns, timeout=90)
                finally:
                    srv.close()
                self.check_why(p, doc, kinds)

    def test_plan_exits_1_and_says_why(self):
        # today: exit 0, nothing printed (an iteration counted as a success)
        for mode, kinds in MODES.items():
            with self.subTest(mode=mode):
                srv = Misbehave(mode, self.tmp)
                try:
                    conns, tmo = self.mode_args(mode)
                    vus = int(conns[1])
                    path = self.write_plan(plan_text(srv.url, "      - request: { url: / }\n",
                                                     vus=vus))
                    p, doc, _ = sqtest.run_json("run", path, "--timeout", tmo, "-q", timeout=90)
                finally:
                    srv.close()
                self.check_why(p, doc, kinds)

    def test_plan_with_thresholds_still_exits_1(self):
        # nothing succeeded is not a threshold verdict: 1 wins over 99
        srv = Misbehave("never_answer", self.tmp)
        try:
            path = self.write_plan(plan_text(srv.url, "      - request: { url: / }\n") +
                                   "thresholds:\n  http_req_failed: [\"rate < 0.01\"]\n")
            p, doc, _ = sqtest.run_json("run", path, "--timeout", "300ms", "-q", timeout=60)
        finally:
            srv.close()
        self.check_why(p, doc, ("timeout",))

    def test_wrk_exits_1_and_says_why(self):
        for mode in ("never_answer", "garbage"):
            with self.subTest(mode=mode):
                srv = Misbehave(mode, self.tmp)
                try:
                    p, _ = sqtest.run_squall("wrk", "-t", "1", "-c", "2", "-d", "1s",
                                             "--timeout", "500ms", srv.url + "/", timeout=60)
                finally:
                    srv.close()
                self.check_why(p, None, MODES[mode])

    def test_a_target_that_answers_500_did_its_job(self):
        # the 5xx are in the summary, not in the exit code: a regression guard for the rule
        url = self.base + "/status/500"
        p, doc, _ = sqtest.run_json(url, "-d", "1s", "-c", "2", "-t", "1", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["status"]["5xx"], doc["requests"]["completed"])
        path = self.write_plan(plan_text(self.base, "      - request: { url: /status/500 }\n"))
        p, doc, _ = sqtest.run_json("run", path, "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertGreater(doc["status"]["5xx"], 0)
        p, _ = sqtest.run_squall("wrk", "-t", "1", "-c", "2", "-d", "1s", url)
        self.assertEqual(p.returncode, 0, p.stderr)


@unittest.skipUnless(os.path.exists(NATS), "nats-server not installed (scripts/deps.sh)")
class BusExitCodes(unittest.TestCase):
    """Flows that only publish or subscribe send no request: their steps are the unit."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sq-exit-bus-")
        cls.nport = free_port()
        cls.nats = subprocess.Popen([NATS, "-a", HOST, "-p", str(cls.nport)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(cls.nport, cls.nats)

    @classmethod
    def tearDownClass(cls):
        stop(cls.nats)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_plan(self, flow):
        path = os.path.join(self.tmp, "bus.yaml")
        with open(path, "w") as f:
            f.write(plan_text("http://127.0.0.1:9", flow, duration=5, vus=2))
        return sqtest.run_json("run", path, "--timeout", "300ms", "-q", timeout=60)

    def test_publish_to_a_live_broker_succeeds(self):
        p, doc, _ = self.run_plan("      - publish: { url: \"nats://%s:%d/sq.exit\" }\n"
                                  % (HOST, self.nport))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["sent"], 0)

    def test_publish_to_a_broker_that_never_acks_exits_1(self):
        # the connection opens (INFO, CONNECT, PING, PONG), then no publish is ever confirmed:
        # every step times out; today: exit 0 (each iteration ended, its publish failed)
        mute = MuteNats()
        try:
            p, doc, _ = self.run_plan("      - publish: { url: \"nats://%s:%d/sq.exit\" }\n"
                                      % (HOST, mute.port))
        finally:
            mute.close()
        self.assertEqual(p.returncode, 1, p.stderr)
        m = WHY.search(p.stderr)
        self.assertIsNotNone(m, p.stderr)
        self.assertEqual(m.group(2), "timeout", m.group(0))
        self.assertEqual(num(m.group(1)), 10)  # 2 VUs x 5 iterations, each step failed
        self.assertEqual(sum(s["errors"] for s in doc["steps"]), 10)

    def test_subscribe_that_never_gets_its_event_exits_1(self):
        # a subscribe-only flow: nothing stamped, nothing arrives; every step fails
        p, doc, _ = self.run_plan("      - subscribe: { url: \"nats://%s:%d/sq.none\" }\n"
                                  % (HOST, self.nport))
        self.assertEqual(p.returncode, 1, p.stderr)
        m = WHY.search(p.stderr)
        self.assertIsNotNone(m, p.stderr)
        self.assertEqual(num(m.group(1)), 10)


@unittest.skipUnless(os.path.exists(NATS), "nats-server not installed (scripts/deps.sh)")
class Distributed(unittest.TestCase):
    """A controller and two agents over a nats-server on loopback (docs/distributed.md)."""

    PREFIX = "sqexit"

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sq-exit-dist-")
        cls.nport = free_port()
        cls.nats = subprocess.Popen([NATS, "-a", HOST, "-p", str(cls.nport)],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_port(cls.nport, cls.nats)
        cls.nurl = "nats://%s:%d" % (HOST, cls.nport)
        cls.agents = [Agent(cls.nurl, "a%d" % i, cls.PREFIX) for i in (1, 2)]
        cls.target, cls.tport = sqtest.start_target("-t", "1", "-q")
        cls.base = "http://%s:%d" % (HOST, cls.tport)

    @classmethod
    def tearDownClass(cls):
        for a in cls.agents:
            log = a.close()
            assert "Sanitizer" not in log and "runtime error" not in log, log
        sqtest.stop(cls.target)
        stop(cls.nats)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def ctl(self, *args):
        return sqtest.run_json(*args, "--agents", "2", "--nats", self.nurl, "--subject-prefix",
                               self.PREFIX, "-q", timeout=90)

    def plan(self, text):
        path = os.path.join(self.tmp, "dist.yaml")
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_distributed_exits_1_and_says_why(self):
        # today: the plan exits 0; the quick face exits 1 without the count and the kind
        srv = Misbehave("never_answer", self.tmp)
        try:
            p, doc, _ = self.ctl(srv.url + "/", "-d", "1s", "-c", "2", "-t", "1", "--timeout",
                                 "300ms")
            path = self.plan(plan_text(srv.url, "      - request: { url: / }\n"))
            q, qdoc, _ = self.ctl("run", path, "-t", "1", "--timeout", "300ms")
        finally:
            srv.close()
        for proc, d in ((p, doc), (q, qdoc)):
            self.assertEqual(proc.returncode, 1, proc.stderr[-600:])
            m = WHY.search(proc.stderr)
            self.assertIsNotNone(m, proc.stderr[-600:])
            self.assertEqual(m.group(2), "timeout")
            self.assertEqual(num(m.group(1)), d["requests"]["failed"])
            self.assertGreater(d["requests"]["failed"], 0)

    def test_distributed_seed_replays_per_vu(self):
        # every agent draws from the controller's seed, each VU from its global number: the
        # run on two agents sends what one machine sends with the same seed, VU by VU
        rec = Recorder()
        try:
            path = self.plan(plan_text(rec.url, "      - request: { method: POST, url: /d, "
                                       "body: \"%s\" }\n" % BODY, vus=4, duration=3))
            p, doc, _ = self.ctl("run", path, "-t", "1")
            self.assertEqual(p.returncode, 0, p.stderr[-600:])
            dist = rec.take()
            self.assertEqual(len(dist), 12)
            # no seed given: the agents still differ from each other (no UUID twice)
            self.assertEqual(len(uuids(dist)), 12)
            seed = doc["run"].get("seed")
            self.assertIsInstance(seed, int)
            q, _ = sqtest.run_squall("run", path, "-t", "1", "-q", "--seed", str(seed))
            self.assertEqual(q.returncode, 0, q.stderr[-600:])
            self.assertEqual(rec.take(), dist)
            # the quick face on agents: each VU's i-th value as on one machine
            args = (rec.url + "/q", "-m", "POST", "-b", BODY, "-c", "4", "-t", "1", "-n", "40")
            p, doc, _ = self.ctl(*args, "--seed", "11")
            self.assertEqual(p.returncode, 0, p.stderr[-600:])
            self.assertEqual(doc["run"]["seed"], 11)
            dist = rec.take()
            q, _ = sqtest.run_squall(*args, "-q", "--seed", "11")
            self.assertEqual(q.returncode, 0, q.stderr[-600:])
            local = rec.take()
        finally:
            rec.close()
        common = set(dist) & set(local)
        self.assertGreaterEqual(len(common), 10)
        for k in common:
            self.assertEqual(dist[k], local[k], k)

    def test_distributed_500_everything_exits_0(self):
        p, doc, _ = self.ctl(self.base + "/status/500", "-d", "1s", "-c", "2", "-t", "1")
        self.assertEqual(p.returncode, 0, p.stderr[-600:])
        self.assertGreater(doc["status"]["5xx"], 0)


class Daemon(unittest.TestCase):
    """`squall serve`: a run where nothing succeeded is `failed`, with the CLI's words."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sq-exit-daemon-")
        cls.target, cls.tport = sqtest.start_target("-t", "1", "-q")
        cls.base = "http://%s:%d" % (HOST, cls.tport)
        cls.proc, cls.port = sqtest.start_serve("--data", os.path.join(cls.tmp, "data"))

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.proc)
        sqtest.stop(cls.target)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def submit(self, body):
        st, _, payload = sqtest.http(self.port, "POST", "/runs", body=json.dumps(body),
                                     headers={"Content-Type": "application/json"}, timeout=30)
        self.assertEqual(st, 201, payload)
        rid = json.loads(payload)["id"]
        deadline = time.monotonic() + 60
        while True:
            run = sqtest.json_get(self.port, "/runs/%d" % rid)
            if run["status"] in ("finished", "stopped", "failed"):
                return run
            self.assertLess(time.monotonic(), deadline, run)
            time.sleep(0.1)

    def test_daemon_marks_a_dead_plan_failed_with_why(self):
        # today: `finished` (the plan's iterations counted); the quick run says no count or kind
        srv = Misbehave("never_answer", self.tmp)
        try:
            plan = plan_text(srv.url, "      - request: { url: /, timeout: 300ms }\n")
            run = self.submit({"plan": plan, "file": "dead.yaml"})
            quick = self.submit({"quick": {"url": srv.url + "/", "duration": "1s",
                                           "connections": 2, "threads": 1,
                                           "timeout": "300ms"}})
        finally:
            srv.close()
        for r in (run, quick):
            self.assertEqual(r["status"], "failed", r)
            self.assertRegex(r["reason"], r"^no request succeeded: [\d,]+ failed: timeout [\d,]+ \(")

    @unittest.skipUnless(os.path.exists(NATS), "nats-server not installed (scripts/deps.sh)")
    def test_daemon_publish_only_plan_finishes(self):
        # a flow of publish steps sends no request: its steps are what succeeds (today:
        # `failed`, "no request succeeded", for a run whose every publish the broker took)
        nport = free_port()
        nats = subprocess.Popen([NATS, "-a", HOST, "-p", str(nport)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_port(nport, nats)
            plan = plan_text("http://127.0.0.1:9", "      - publish: { url: \"nats://%s:%d/sq.d\" }\n"
                             % (HOST, nport), duration=5)
            run = self.submit({"plan": plan, "file": "bus.yaml"})
        finally:
            stop(nats)
        self.assertEqual(run["status"], "finished", run)
        self.assertEqual(sum(s["requests"] - s["errors"] for s in run["result"]["steps"]), 10)

    def test_daemon_reports_and_takes_the_seed(self):
        rec = Recorder()
        try:
            quick = {"url": rec.url + "/d", "method": "POST", "body": BODY, "connections": 2,
                     "threads": 1, "requests": 20}
            a = self.submit({"quick": quick})
            got_a = rec.take()
            b = self.submit({"quick": dict(quick, seed=a["result"]["run"]["seed"])})
            got_b = rec.take()
            c = self.submit({"quick": quick})
            got_c = rec.take()
        finally:
            rec.close()
        for r in (a, b, c):
            self.assertEqual(r["status"], "finished", r)
        self.assertEqual(b["result"]["run"]["seed"], a["result"]["run"]["seed"])
        self.assertNotEqual(c["result"]["run"]["seed"], a["result"]["run"]["seed"])
        self.assertFalse(uuids(got_a) & uuids(got_c))
        common = set(got_a) & set(got_b)
        self.assertGreaterEqual(len(common), 6)
        for k in common:
            self.assertEqual(got_a[k], got_b[k], k)

    def test_daemon_500_everything_finishes(self):
        run = self.submit({"quick": {"url": self.base + "/status/500", "duration": "1s",
                                     "connections": 2, "threads": 1}})
        self.assertEqual(run["status"], "finished", run)


# ---- random means random ----


class Random(unittest.TestCase):
    VUS, ITERS = 3, 4

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="sq-seed-")
        cls.rec = Recorder()
        with open(os.path.join(cls.tmp, "rows.csv"), "w") as f:
            f.write("row\n" + "".join("r%d\n" % i for i in range(1000)))

    @classmethod
    def tearDownClass(cls):
        cls.rec.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def plan(self, seed=None, name="seed.yaml"):
        flow = ("      - request: { method: POST, url: /r, body: \"%s {{rows.row}}\" }\n" % BODY)
        text = plan_text(self.rec.url, flow, seed=seed, vus=self.VUS, duration=self.ITERS,
                         extra="data:\n  rows: { csv: rows.csv, mode: random }\n")
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def run_plan(self, path, *args):
        self.rec.take()
        p, doc, _ = sqtest.run_json("run", path, "-t", "2", *args)
        self.assertEqual(p.returncode, 0, p.stderr[-600:])
        got = self.rec.take()
        self.assertEqual(len(got), self.VUS * self.ITERS, got)
        for v in got.values():
            u, n, row = v.split(" ")
            self.assertRegex(u, UUID4)
            self.assertTrue(1 <= int(n) <= 1000000000)
            self.assertRegex(row, r"^r\d+$")
        self.last_stderr = p.stderr
        return got, doc["run"].get("seed")

    def assert_summary_says(self, seed):
        # the summary (on stderr with --json -) says it on one line
        self.assertRegex(self.last_stderr, r"\nSeed +%d · --seed %d replays" % (seed, seed))

    def test_plan_runs_differ_and_a_seed_replays_them(self):
        path = self.plan()
        a, sa = self.run_plan(path)
        b, sb = self.run_plan(path)
        # today both runs send the same values (the generator seeded by the VU number alone)
        same = uuids(a) & uuids(b)
        self.assertFalse(same, "two runs without a seed sent the same UUIDs (%d of %d)"
                         % (len(same), len(a)))
        self.assertTrue([v.split(" ")[1] for v in a.values()] !=
                        [v.split(" ")[1] for v in b.values()], "and the same numbers")
        self.assertIsInstance(sa, int)
        self.assertNotEqual(sa, sb)
        self.assert_summary_says(sb)
        # the seed the first one reported replays it, VU by VU, iteration by iteration
        c, sc = self.run_plan(path, "--seed", str(sa))
        self.assertEqual(sc, sa)
        self.assertEqual(c, a)

    def test_seed_flag_and_plan_key_agree(self):
        d, sd = self.run_plan(self.plan(), "--seed", "42")
        e, _ = self.run_plan(self.plan(), "--seed", "42")
        self.assertEqual(sd, 42)
        self.assert_summary_says(42)
        self.assertEqual(d, e)
        f, sf = self.run_plan(self.plan(seed=42))
        self.assertEqual(sf, 42)
        self.assertEqual(f, d)
        # --seed wins over the plan's seed:
        g, sg = self.run_plan(self.plan(seed=42), "--seed", "43")
        self.assertEqual(sg, 43)
        self.assertFalse(uuids(g) & uuids(d))
        # the largest seed a JSON number carries exactly, and one past it
        h, sh = self.run_plan(self.plan(), "--seed", "9007199254740991")
        self.assertEqual(sh, 9007199254740991)
        p, _ = sqtest.run_squall("run", self.plan(), "--seed", "9007199254740992")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--seed: '9007199254740992' is not a seed (0..9007199254740991)", p.stderr)

    def test_plan_seed_key_is_checked(self):
        path = self.plan()
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write("sed: 5\n" + text)
        p, _ = sqtest.run_squall("validate", path)
        self.assertEqual(p.returncode, 2)
        self.assertIn(":1:1: unknown key 'sed' (did you mean 'seed'?)", p.stderr + p.stdout)
        with open(path, "w") as f:
            f.write("seed: -1\n" + text)
        p, _ = sqtest.run_squall("validate", path)
        self.assertEqual(p.returncode, 2)
        self.assertIn(":1:7: seed: expected a whole number from 0 to 9007199254740991",
                      p.stderr + p.stdout)

    def quick(self, *args):
        self.rec.take()
        p, doc, _ = sqtest.run_json(self.rec.url + "/q", "-m", "POST", "-b", BODY, "-c", "3",
                                    "-t", "2", "-n", "30", "-q", *args)
        self.assertEqual(p.returncode, 0, p.stderr[-600:])
        got = self.rec.take()
        # what squall counted beside what the recorder got, should they ever differ (a fresh
        # machine's run once recorded 29 distinct (VU, iteration) pairs)
        why = (doc["requests"], doc.get("errors"), sorted(got), p.stderr[-600:],
               [c for c in (doc.get("sampled_exchanges") or {}).get("classes", [])
                if c.get("kind") == "error"])
        self.assertEqual(doc["requests"]["completed"], 30, why)
        self.assertEqual(len(got), 30, why)
        return got, doc["run"].get("seed")

    def same_per_vu(self, a, b, least=10):
        """VU v's i-th value is the same in both where both ran it (how -n's requests fall
        across the VUs depends on the scheduling; each VU's stream does not)."""
        common = set(a) & set(b)
        self.assertGreaterEqual(len(common), least, (sorted(a), sorted(b)))
        for k in common:
            self.assertEqual(a[k], b[k], k)

    def test_quick_face_differs_and_replays(self):
        a, sa = self.quick()
        b, sb = self.quick()
        self.assertFalse(uuids(a) & uuids(b), "two runs without a seed sent the same UUIDs")
        self.assertIsInstance(sa, int)
        self.assertNotEqual(sa, sb)
        c, sc = self.quick("--seed", str(sa))
        self.assertEqual(sc, sa)
        self.same_per_vu(a, c)

    def test_wrk_script_math_random(self):
        script = os.path.join(self.tmp, "rnd.lua")
        with open(script, "w") as f:
            f.write("counter = 0\n"
                    "request = function()\n"
                    "  counter = counter + 1\n"
                    "  return wrk.format('POST', '/w', nil, '1 ' .. counter .. ' ' ..\n"
                    "                    math.random(1, 1000000000))\n"
                    "end\n")

        def run(*args):
            self.rec.take()
            fd, out = tempfile.mkstemp(suffix=".json", dir=self.tmp)
            os.close(fd)
            p, _ = sqtest.run_squall("wrk", "-t", "1", "-c", "1", "-d", "300ms", "-s", script,
                                     "--json", out, *args, self.rec.url + "/")
            self.assertEqual(p.returncode, 0, p.stderr[-600:])
            with open(out) as f:
                seed = json.load(f)["run"].get("seed")
            got = self.rec.take()
            self.assertGreaterEqual(len(got), 4)
            return got, seed, p.stderr

        # today: LuaJIT's fixed default state, the same numbers in every run
        a, sa, err = run()
        b, _, _ = run()
        self.same_keys_differ(a, b)
        self.assertIn("squall: seed %d (--seed %d replays" % (sa, sa), err)
        c, sc, _ = run("--seed", str(sa))
        self.assertEqual(sc, sa)
        self.same_per_vu(a, c, least=4)

    def same_keys_differ(self, a, b):
        common = sorted(set(a) & set(b))
        self.assertTrue(common)
        self.assertTrue([a[k] for k in common] != [b[k] for k in common],
                        "two runs without a seed drew the same %d numbers, first %s"
                        % (len(common), a[common[0]]))


if __name__ == "__main__":
    sqtest.main()

"""`squall wrk` against Debian's wrk 4.1.0: the same scripts, the same requests, the same report.

Each fixture of tests/scripts/ (written from what wrk's own scripts/ do) runs once under wrk and
once under `squall wrk` with the same flags, against a recording peer (wrk_peer.py: every request
kept with its connection, headers, body and arrival time) or `squall target`, and the test
compares what arrived and what was printed. Then the script errors, the report's byte shape,
the static path of a script without request()/response()/delay(), and wrk's flag grammar.
Every run is 1 s or less; the file takes about 40 s.
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

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "..", "scripts")
WRK = shutil.which("wrk")


def fixture(name):
    return os.path.join(SCRIPTS, name)


def start_peer():
    proc = subprocess.Popen([sys.executable, os.path.join(HERE, "wrk_peer.py")],
                            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    r, _, _ = select.select([proc.stdout], [], [], 10)
    if not r:
        proc.kill()
        raise RuntimeError("wrk_peer did not start")
    line = proc.stdout.readline().decode()
    m = re.match(r"wrk_peer listening on (\d+)", line)
    if not m:
        proc.kill()
        raise RuntimeError("wrk_peer: %r" % line)
    return proc, int(m.group(1))


def run(tool, *args, timeout=30):
    """Runs wrk or `squall wrk` with args; returns (CompletedProcess, wall seconds)."""
    cmd = [WRK, *args] if tool == "wrk" else [sqtest.squall_path(), "wrk", *args]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p, time.monotonic() - t0


TOOLS = ("wrk", "squall")


class WrkCompat(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not WRK:
            raise RuntimeError("Debian's wrk is not installed (scripts/deps.sh installs it)")
        cls.peer, cls.pport = start_peer()
        cls.purl = "http://127.0.0.1:%d" % cls.pport
        cls.target, cls.tport = sqtest.start_target("-t", "1")
        cls.turl = "http://127.0.0.1:%d" % cls.tport

    @classmethod
    def tearDownClass(cls):
        cls.peer.send_signal(signal.SIGTERM)
        cls.peer.wait(timeout=10)
        cls.peer.stdout.close()
        sqtest.stop(cls.target)

    def log(self):
        return sqtest.json_get(self.pport, "/__log")

    def both(self, *args, path="/", timeout=30):
        """Runs both tools against the peer; returns {tool: (process, requests seen)}."""
        out = {}
        floor = max([r["conn"] for r in self.log()], default=0)
        for tool in TOOLS:
            p, _ = run(tool, *args, self.purl + path, timeout=timeout)
            self.assertEqual(p.returncode, 0, "%s: %s" % (tool, p.stderr))
            # A busy machine can leave the peer still reading a connection of the run before
            # (its last pipelined requests) when its log is taken: those belong to that run's
            # connections, never to this one's, which are new (the peer numbers them in order).
            reqs = [r for r in self.log() if r["conn"] > floor]
            floor = max([r["conn"] for r in reqs], default=floor)
            self.assertGreater(len(reqs), 0, tool)
            out[tool] = (p, reqs)
        return out

    @staticmethod
    def by_conn(reqs):
        conns = {}
        for r in reqs:
            conns.setdefault(r["conn"], []).append(r)
        return conns

    @staticmethod
    def header(r, name):
        for k, v in r["headers"]:
            if k.lower() == name.lower():
                return v
        return None

    # ---- the fixtures ----

    def test_counter(self):
        # a new path and X-Counter every request, counting per thread (one state per thread)
        for tool, (_, reqs) in self.both("-t2", "-c2", "-d1s", "-s", fixture("counter.lua")).items():
            conns = self.by_conn(reqs)
            self.assertEqual(len(conns), 2, tool)
            for rs in conns.values():
                ns = [int(self.header(r, "X-Counter")) for r in rs]
                for r, n in zip(rs, ns):
                    self.assertEqual((r["method"], r["path"]), ("GET", "/%d" % n), tool)
                    self.assertEqual(self.header(r, "Host"), "127.0.0.1:%d" % self.pport, tool)
                # consecutive per thread; wrk's first thread starts at 1 (its pre-run call)
                self.assertIn(ns[0], (0, 1), tool)
                self.assertEqual(ns, list(range(ns[0], ns[0] + len(ns))), tool)

    def test_post(self):
        runs = self.both("-t1", "-c2", "-d1s", "-s", fixture("post.lua"))
        names = {}
        for tool, (_, reqs) in runs.items():
            for r in reqs:
                self.assertEqual((r["method"], r["path"], r["body"]), ("POST", "/", "foo=bar&baz=quux"))
                self.assertEqual(self.header(r, "Content-Type"), "application/x-www-form-urlencoded")
                self.assertEqual(self.header(r, "Content-Length"), "16")
            names[tool] = sorted({k.lower() for r in reqs for k, _ in r["headers"]})
        self.assertEqual(names["squall"], names["wrk"])

    def test_pipeline(self):
        for tool, (_, reqs) in self.both("-t1", "-c2", "-d1s", "-s", fixture("pipeline.lua")).items():
            for rs in self.by_conn(reqs).values():
                paths = [r["path"] for r in rs]
                cycle = ["/?foo", "/?bar", "/?baz"]
                self.assertEqual(paths, (cycle * (len(paths) // 3 + 1))[: len(paths)], tool)
            # the three leave in one write: /?foo arrives with /?bar behind it
            foo = [r for r in reqs if r["path"] == "/?foo"]
            batched = sum(1 for r in foo if r["with_next"])
            self.assertGreater(batched, 0.8 * len(foo), tool)

    def test_auth(self):
        for tool, (_, reqs) in self.both("-t2", "-c2", "-d1s", "-s", fixture("auth.lua")).items():
            conns = self.by_conn(reqs)
            # A thread's state logs in once: its connection starts at /authenticate with no
            # token, then every later request carries the token to /resource. A connection that
            # replaced one (a request that timed out on a starved machine) belongs to a thread
            # that already holds the token, so it may start at /resource, with the token; no
            # connection ever goes back to /authenticate once it has the token.
            firsts = [rs[0]["path"] for rs in conns.values()]
            self.assertIn("/authenticate", firsts, tool)
            self.assertIn("/resource", [r["path"] for r in reqs], tool)  # response() ran
            for rs in conns.values():
                paths = [r["path"] for r in rs]
                logged_in = paths.index("/resource") if "/resource" in paths else len(paths)
                for r in rs[:logged_in]:
                    self.assertEqual(r["path"], "/authenticate", tool)
                    self.assertIsNone(self.header(r, "X-Token"), tool)
                for r in rs[logged_in:]:
                    self.assertEqual((r["path"], self.header(r, "X-Token")),
                                     ("/resource", "tok-5c1e"), tool)

    def test_delay(self):
        for tool, (_, reqs) in self.both("-t1", "-c2", "-d1s", "-s", fixture("delay.lua")).items():
            for rs in self.by_conn(reqs).values():
                # 10..50 ms before each request: about 33 a second per connection
                self.assertTrue(12 <= len(rs) <= 70, (tool, len(rs)))
                gaps = [b["t"] - a["t"] for a, b in zip(rs, rs[1:])]
                self.assertGreater(min(gaps), 0.009, tool)

    def test_report(self):
        for tool, (p, _) in self.both("-t1", "-c2", "-d1s", "-s", fixture("report.lua")).items():
            tail = p.stdout.split("------------------------------\n", 1)[1].splitlines()
            self.assertEqual(len(tail), 4, (tool, tail))
            for want, line in zip(("50", "90", "99", "99.999"), tail):
                self.assertRegex(line, r"^%s%%,\d+$" % re.escape(want), tool)

    def test_setup(self):
        for tool, (p, reqs) in self.both("-t2", "-c2", "-d1s", "-s", fixture("setup.lua")).items():
            out = p.stdout
            self.assertIn("thread 1 created", out, tool)
            self.assertIn("thread 2 created", out, tool)
            made = re.findall(r"^thread (\d) made (\d+) requests and got (\d+) responses$", out, re.M)
            self.assertEqual(sorted(m[0] for m in made), ["1", "2"], (tool, out))
            total = sum(int(m[1]) for m in made)
            for _, mreq, mresp in made:
                self.assertLessEqual(int(mresp), int(mreq), tool)
            # The peer logs what it read: each connection's last request may be counted but
            # still in flight (or unread) when -d ends, one per connection (2), and wrk's first
            # thread counts one request it never sends (its pre-run call). A busy machine makes
            # the in-flight ones likelier, never more than that.
            self.assertLessEqual(abs(total - len(reqs)), 2 + 1, (tool, total, len(reqs)))

    def test_stop(self):
        # one connection: the thread stops itself after its 100th response
        self.log()
        p, _ = run("wrk", "-t1", "-c1", "-d1s", "-s", fixture("stop.lua"), self.purl)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(self.log()), 100)
        p, took = run("squall", "-t1", "-c1", "-d20s", "-s", fixture("stop.lua"), self.purl)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(self.log()), 100)
        self.assertLess(took, 10, "stop must end the run, not the duration")
        self.assertRegex(p.stdout, r"\n  100 requests in ")

    def test_args_and_headers(self):
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write('function init(args)\n'
                    '  local t = {}\n'
                    '  for i = 0, #args do t[#t + 1] = args[i] end\n'
                    '  io.write("ARGS " .. table.concat(t, "|") .. "\\n")\n'
                    'end\n')
        try:
            runs = self.both("-t1", "-c1", "-d1s", "-H", "X-One: 1", "-s", f.name, path="/p?q=1",
                             timeout=30)
        finally:
            os.unlink(f.name)
        for tool, (p, reqs) in runs.items():
            self.assertIn("ARGS %s/p?q=1" % self.purl, p.stdout, tool)
            for r in reqs:
                self.assertEqual((r["path"], self.header(r, "X-One")), ("/p?q=1", "1"), tool)
        # the arguments after "--" reach init(args) as wrk passes them
        for tool in TOOLS:
            with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
                f.write('function init(a) io.write("ARGS " .. table.concat(a, "|", 0) .. "\\n") end\n')
            try:
                p, _ = run(tool, "-t1", "-c1", "-d1s", "-s", f.name, self.purl, "--", "a", "-b")
            finally:
                os.unlink(f.name)
            self.assertIn("ARGS %s|a|-b\n" % self.purl, p.stdout, tool)
        self.log()

    def test_setup_moves_thread_addr(self):
        # setup() points each thread at the peer while the URL names the target: the requests
        # follow thread.addr (wrk.lookup and wrk.connect find it)
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write('function setup(thread)\n'
                    '  local a = wrk.lookup("127.0.0.1", "%d")[1]\n'
                    '  assert(wrk.connect(a))\n'
                    '  thread.addr = a\n'
                    'end\n' % self.pport)
        try:
            self.log()
            for tool in TOOLS:
                sqtest.http(self.tport, "POST", "/stats/reset")
                p, _ = run(tool, "-t2", "-c2", "-d1s", "-s", f.name, self.turl + "/fast")
                self.assertEqual(p.returncode, 0, (tool, p.stderr))
                reqs = self.log()
                self.assertGreater(len(reqs), 10, tool)
                self.assertTrue(all(r["path"] == "/fast" for r in reqs), tool)
                self.assertEqual(sqtest.json_get(self.tport, "/stats")["endpoints"]["fast"], 0, tool)
        finally:
            os.unlink(f.name)

    def test_no_script_request(self):
        # without -s both send what wrk.format renders from the URL: the same fields
        runs = self.both("-t1", "-c1", "-d1s", path="/x")
        heads = {t: sorted((k, v) for r in reqs[:1] for k, v in r["headers"]) for t, (_, reqs) in runs.items()}
        self.assertEqual(heads["squall"], heads["wrk"])

    # ---- the report ----

    def shape(self, out):
        """Each line of the report with its figures replaced, and its length."""
        lines = []
        for ln in out.splitlines():
            if ln.startswith(("Running", "squall")):
                continue
            lines.append((re.sub(r"\d+(\.\d+)?", "9", ln), len(ln)))
        return lines

    def test_report_layout(self):
        outs = {}
        for tool in TOOLS:
            p, _ = run(tool, "-t2", "-c4", "-d1s", "--latency", self.turl + "/fast")
            self.assertEqual(p.returncode, 0, p.stderr)
            outs[tool] = p.stdout
        w, s = outs["wrk"].splitlines(), outs["squall"].splitlines()
        self.assertEqual(s[0], "Running 1s test @ %s/fast" % self.turl)
        self.assertEqual(s[1], w[1])  # "  2 threads and 4 connections"
        self.assertEqual(s[2], w[2])  # the column header, byte for byte
        units = r"(us|ms|s|m|h)"
        for lines in (w, s):
            self.assertRegex(lines[3], r"^    Latency +\d+\.\d\d%s +\d+\.\d\d%s +\d+\.\d\d%s +\d+\.\d\d%%$"
                             % (units, units, units))
            self.assertRegex(lines[4], r"^    Req/Sec +\d+\.\d\dk? +\d+\.\d\dk? +\d+\.\d\dk? +\d+\.\d\d%$")
            self.assertEqual(lines[5], "  Latency Distribution")
            for i, pct in enumerate(("50", "75", "90", "99")):
                self.assertRegex(lines[6 + i], r"^ +%s%% +\d+\.\d\d%s$" % (pct, units))
                self.assertEqual(len(lines[6 + i]), 18)
            self.assertRegex(lines[10], r"^  \d+ requests in \d+\.\d\d%s, \d+\.\d\d[KMG]?B read$" % units)
            self.assertRegex(lines[-2], r"^Requests/sec: +\d+\.\d\d$")
            self.assertRegex(lines[-1], r"^Transfer/sec: +\d+\.\d\d[KMG]?B$")
            rate = float(lines[-2].split()[1])
            self.assertEqual(lines[-2], "Requests/sec: %9.2f" % rate)
            self.assertEqual(len(lines[-1]), 25)
        # the figure columns line up where wrk's do
        self.assertEqual(len(s[3]), len(w[3]))
        self.assertEqual(len(s[4]), len(w[4]))
        self.assertEqual(len(s), len(w))

    def test_non_2xx_and_pointer(self):
        for tool in TOOLS:
            p, _ = run(tool, "-t1", "-c2", "-d1s", self.turl + "/status/404")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertRegex(p.stdout, r"\n  Non-2xx or 3xx responses: \d+\n")
        # squall's own figures are one line away, on stderr
        self.assertIn("--json", p.stderr)

    # ---- errors ----

    def test_syntax_error(self):
        sqtest.http(self.tport, "POST", "/stats/reset")
        p, _ = run("squall", "-t1", "-c1", "-d1s", "-s", fixture("bad/syntax.lua"), self.turl + "/fast")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertRegex(p.stderr, r"bad/syntax\.lua:4: ")
        self.assertEqual(sqtest.json_get(self.tport, "/stats")["requests"], 0, "no load before")

    def test_runtime_error(self):
        p, _ = run("squall", "-t1", "-c2", "-d5s", "-s", fixture("bad/request_error.lua"),
                   self.turl + "/fast")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("request_error.lua:7: attempt to perform arithmetic", p.stderr)
        self.assertIn("stack traceback:", p.stderr)
        self.assertIn("in function 'next_path'", p.stderr)

    def test_format_bad_arguments(self):
        p, _ = run("squall", "-t1", "-c1", "-d5s", "-s", fixture("bad/format_args.lua"),
                   self.turl + "/fast")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("wrk.format: the method (argument #1) is a table", p.stderr)

    def test_missing_script(self):
        p, _ = run("squall", "-s", "/nonexistent.lua", self.turl + "/fast")
        self.assertEqual(p.returncode, 2)
        self.assertIn("/nonexistent.lua: cannot open", p.stderr)

    def test_flags(self):
        for args, msg in ((("-t", "4", "-c", "2"), "connections must be >= threads"),
                          (("-d", "1x"), "-d: '1x' is not a duration"),
                          (("-c", "10q"), "-c: '10q' is not a connection count"),
                          (("--bogus",), "unknown flag '--bogus'")):
            p, _ = run("squall", *args, self.turl + "/fast")
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertIn(msg, p.stderr)
            self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        # wrk's number and time grammar: 1k connections, 2s, and squall's 500ms
        p, _ = run("squall", "-t1", "-c", "1k", "-d", "500ms", "--json", "-", self.turl + "/fast")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        self.assertEqual(doc["config"]["connections"], 1000)
        self.assertAlmostEqual(doc["config"]["duration_s"], 0.5, places=3)

    # ---- the quick face's -s: the same engine ----

    def test_quick_face_script(self):
        self.log()
        p, _ = sqtest.run_squall(self.purl + "/", "-s", fixture("counter.lua"), "-c", "2", "-t",
                                 "2", "-d", "1s", "-q", "--json", "-")
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        reqs = self.log()
        self.assertEqual(doc["script"]["calls"]["request"], doc["requests"]["sent"])
        r = doc["requests"]
        self.assertTrue(r["sent"] - r["in_flight"] <= len(reqs) <= r["sent"], (len(reqs), r))
        for rs in self.by_conn(reqs).values():
            ns = [int(self.header(r, "X-Counter")) for r in rs]
            self.assertEqual(ns, list(range(len(ns))))  # each thread counts from 0
        # done() and the arguments after the URL, as squall wrk passes them
        p, _ = sqtest.run_squall(self.purl + "/", "-s", fixture("setup.lua"), "-c", "2", "-t", "2",
                                 "-d", "1s", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(len(re.findall(r"^thread \d made \d+ requests", p.stdout, re.M)), 2)
        p, _ = sqtest.run_squall(self.purl + "/", "-s", fixture("bad/syntax.lua"))
        self.assertEqual(p.returncode, 2)
        self.assertRegex(p.stderr, r"bad/syntax\.lua:4: ")
        p, _ = sqtest.run_squall(self.purl + "/", "-s", fixture("counter.lua"), "--http2")
        self.assertEqual(p.returncode, 2)
        self.assertIn("-s: scripts run over HTTP/1.1", p.stderr)
        self.log()

    # ---- the static path ----

    def test_static_path(self):
        with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
            f.write('function init(args) wrk.path = "/fast" end\n'
                    'function done(s, l, r) io.write("DONE " .. s.requests .. "\\n") end\n')
        try:
            p, _ = run("squall", "-t1", "-c2", "-d1s", "-s", f.name, "--json", "-", self.turl + "/")
        finally:
            os.unlink(f.name)
        self.assertEqual(p.returncode, 0, p.stderr)
        doc = json.loads(p.stdout)
        sc = doc["script"]
        self.assertEqual(sc["hooks"], ["init", "done"])
        self.assertTrue(sc["static_request"])
        self.assertEqual(sc["calls"], {"request": 0, "response": 0, "delay": 0})
        self.assertGreater(doc["requests"]["completed"], 100)
        self.assertEqual(doc["status"]["2xx"], doc["requests"]["completed"])  # wrk.path took
        self.assertIn("DONE %d" % doc["requests"]["completed"], p.stderr)
        import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)

        with open(os.path.join(HERE, "..", "..", "docs", "result.schema.json")) as f:
            jsonschema.validate(doc, json.load(f))
        # with request() every request is the script's
        p, _ = run("squall", "-t1", "-c2", "-d1s", "-s", fixture("counter.lua"), "--json", "-",
                   self.turl + "/")
        doc = json.loads(p.stdout)
        self.assertFalse(doc["script"]["static_request"])
        self.assertEqual(doc["script"]["calls"]["request"], doc["requests"]["sent"])


if __name__ == "__main__":
    unittest.main(verbosity=2)

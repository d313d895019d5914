#!/usr/bin/env python3
"""End-to-end tests of `--urls` in vegeta's target format and from the standard input, on
several hosts in one run, and of the quick face's small flags around it (-t above -c, --cpus).

Requests go to a recording HTTP/1.1 server in this process (so each request's method, headers
and body are seen as they arrived) or to `squall target`, both on ephemeral loopback ports. Every
load is bounded by -n; every process started here is stopped by its PID.
"""
import http.server
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers 200 to anything and records (method, path, headers, body)."""

    protocol_version = "HTTP/1.1"
    seen = []
    lock = threading.Lock()

    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        with Recorder.lock:
            Recorder.seen.append((self.command, self.path, dict(self.headers.items()), body))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_one

    def log_message(self, *args):
        pass


class VegetaTargets(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = http.server.ThreadingHTTPServer((sqtest.HOST, 0), Recorder)
        cls.srv.daemon_threads = True
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()
        cls.base = "http://%s:%d" % (sqtest.HOST, cls.srv.server_address[1])

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        with Recorder.lock:
            Recorder.seen.clear()

    def tearDown(self):
        self.tmp.cleanup()

    def write(self, name, text):
        path = os.path.join(self.tmp.name, name)
        with open(path, "w") as f:
            f.write(textwrap.dedent(text).lstrip())
        return path

    def targets(self):
        self.write("body.json", '{"a":1}')
        return self.write("targets.txt", f"""
            # vegeta's format: METHOD URL, header lines under it, an @body line, a blank line
            POST {self.base}/a
            Content-Type: application/json
            X-Id: 7
            @body.json

            PUT {self.base}/b
            X-Id:  8

            GET {self.base}/c
            """)

    def check_seen(self):
        with Recorder.lock:
            seen = sorted(Recorder.seen, key=lambda r: r[1])
        self.assertEqual([(m, p) for m, p, _, _ in seen], [("POST", "/a"), ("PUT", "/b"),
                                                           ("GET", "/c")])
        (_, _, ha, ba), (_, _, hb, bb), (_, _, hc, bc) = seen
        # each target's own headers, the run's -H elsewhere; -H on every request
        self.assertEqual((ha["Content-Type"], ha["X-Id"], ba), ("application/json", "7", b'{"a":1}'))
        self.assertEqual((hb["X-Id"], bb), ("8", b""))
        self.assertEqual((hc["X-Id"], bc), ("run", b""))
        for h in (ha, hb, hc):
            self.assertEqual(h["X-Run"], "yes")

    def test_method_headers_and_body_reach_the_wire(self):
        path = self.targets()
        p, doc, _ = sqtest.run_json("--urls", path, "-c", "1", "-n", "3", "-q", "-H", "X-Id: run",
                                    "-H", "X-Run: yes")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([(u["method"], u["line"]) for u in doc["urls"]],
                         [("POST", 2), ("PUT", 7), ("GET", 10)])
        self.check_seen()

    def test_urls_from_stdin(self):
        with open(self.targets()) as f:
            text = f.read().replace("@body.json", "@" + os.path.join(self.tmp.name, "body.json"))
        p = subprocess.run([sqtest.squall_path(), "--urls", "-", "-c", "1", "-n", "3", "-q",
                            "-H", "X-Id: run", "-H", "X-Run: yes", "--json", "-"],
                           input=text, capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(json.loads(p.stdout)["config"]["urls_file"], "-")
        self.check_seen()
        # a mistake in it is named <stdin>:LINE:COL
        p = subprocess.run([sqtest.squall_path(), "--urls", "-", "-n", "1"],
                           input=f"GET {self.base}/a\n\nX-Id: 1\n", capture_output=True,
                           text=True, timeout=60)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("<stdin>:3:1: a header line with no request line above it", p.stderr)
        p = subprocess.run([sqtest.squall_path(), "--urls", "-", "-n", "1"],
                           input=f"POST {self.base}/a\n@nope.json\n", capture_output=True,
                           text=True, timeout=60, cwd=self.tmp.name)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("<stdin>:1: @nope.json: cannot read nope.json: No such file or directory",
                      p.stderr)

    def test_the_example_runs(self):
        # examples/vegeta-targets.txt, pointed at this server (its files copied beside it)
        here = os.path.dirname(os.path.abspath(__file__))
        ex = os.path.join(here, "..", "..", "examples")
        with open(os.path.join(ex, "vegeta-targets.txt")) as f:
            text = f.read().replace("http://127.0.0.1:8080", self.base)
        os.mkdir(os.path.join(self.tmp.name, "data"))
        with open(os.path.join(ex, "data", "products.json"), "rb") as f:
            products = f.read()
        with open(os.path.join(self.tmp.name, "data", "products.json"), "wb") as f:
            f.write(products)
        path = self.write("targets.txt", text)
        p, doc, _ = sqtest.run_json("--urls", path, "-c", "1", "-n", "4", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        with Recorder.lock:
            seen = {(m, p): (h, b) for m, p, h, b in Recorder.seen}
        self.assertEqual(sorted(seen), [("DELETE", "/echo?id=7"), ("GET", "/fast"),
                                        ("POST", "/echo"), ("PUT", "/echo?id=7")])
        self.assertEqual(seen[("POST", "/echo")][0]["X-Request-Kind"], "create")
        self.assertEqual(seen[("PUT", "/echo?id=7")][1], products)

    def test_refusals(self):
        cases = [
            (f"GET {self.base}/a\n\nX-Id: 1\n", "3:1: a header line with no request line above it "
             "(header lines go right under their METHOD URL line, before its @PATH line, with no "
             "blank line between)"),
            ("@body.json\n", "1:1: a body line (@PATH) with no request line above it"),
            (f"POST {self.base}/a x\n@body.json\n", "2:1: line 1 already has a body: one body per "
             "request"),
            (f"POST {self.base}/a\n@b\nX-Id: 1\n", "3:1: a header line with no request line above "
             "it"),
            (f"POST {self.base}/a\nX-Id: a\x01b\n", "2:8: a header value may not hold control "
             "characters"),
            (f"POST {self.base}/a\n  @\n", "2:3: '@' names no file"),
        ]
        for text, want in cases:
            path = self.write("bad.txt", text)
            p, _ = sqtest.run_squall("--urls", path, "-n", "1")
            self.assertEqual(p.returncode, 2, (text, p.stderr))
            self.assertIn("squall: " + path + ":" + want, p.stderr)
        with Recorder.lock:
            self.assertEqual(Recorder.seen, [])


class SmallFlags(sqtest.TargetCase):
    """-t above -c is lowered with a note; --cpus pins each worker, reported per worker."""

    def test_threads_above_connections_are_lowered_with_a_note(self):
        p, doc, _ = sqtest.run_json(self.base + "/fast", "-c", "2", "-t", "8", "-n", "100", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("squall: note: -t 8 lowered to 2: each worker thread needs a connection of "
                      "its own and the run has 2 (raise -c for more threads)\n", p.stderr)
        self.assertEqual(doc["threads"], 2)
        p, doc, _ = sqtest.run_json(self.base + "/fast", "-c", "2", "-t", "2", "-n", "100", "-q")
        self.assertNotIn("note:", p.stderr)

    def mine(self):
        return sorted(os.sched_getaffinity(0))

    def test_cpus_pin_each_worker(self):
        if not {0, 1} <= set(self.mine()):
            self.skipTest("CPUs 0 and 1 are not both available here")
        p, doc, _ = sqtest.run_json(self.base + "/fast", "-c", "4", "-t", "4", "-n", "400", "-q",
                                    "--cpus", "0-1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["config"]["cpus"], "0-1")
        self.assertEqual(doc["worker_cpus"], [0, 1, 0, 1])
        self.assertEqual(doc["threads"], 4)
        # without --cpus: no such field
        p, doc, _ = sqtest.run_json(self.base + "/fast", "-n", "10", "-q")
        self.assertNotIn("worker_cpus", doc)

    def test_cpus_seen_by_the_kernel(self):
        # while the run lasts, its worker threads' affinity is CPU 1 alone (the main thread's
        # stays the process's)
        if 1 not in self.mine():
            self.skipTest("CPU 1 is not available here")
        proc = subprocess.Popen([sqtest.squall_path(), self.base + "/fast", "-d", "3s", "-c",
                                 "2", "-t", "2", "--cpus", "1", "-q", "--json", "-"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        pinned = set()
        try:
            while proc.poll() is None and len(pinned) < 2:
                try:
                    tids = os.listdir("/proc/%d/task" % proc.pid)
                except OSError:
                    break
                for tid in tids:
                    try:
                        with open("/proc/%d/task/%s/status" % (proc.pid, tid)) as f:
                            allowed = [x.split()[1] for x in f if x.startswith("Cpus_allowed_list")]
                    except OSError:
                        continue
                    if allowed == ["1"]:
                        pinned.add(tid)
                time.sleep(0.05)
            out, err = proc.communicate(timeout=60)
        finally:
            sqtest.stop(proc)
        self.assertEqual(proc.returncode, 0, err)
        self.assertEqual(len(pinned), 2, "threads pinned to CPU 1 seen: %s" % sorted(pinned))
        self.assertNotIn(str(proc.pid), pinned)
        self.assertEqual(json.loads(out)["worker_cpus"], [1, 1])

    def test_cpu_not_available_is_a_warning(self):
        cpu = self.mine()[-1] + 1
        p, doc, _ = sqtest.run_json(self.base + "/fast", "-c", "1", "-n", "50", "-q", "--cpus",
                                    str(cpu))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("squall: warning: --cpus: CPU %d is not available to this process" % cpu,
                      p.stderr)
        self.assertEqual(doc["worker_cpus"], [-1])
        self.assertEqual(doc["requests"]["completed"], 50)



class SeveralHosts(unittest.TestCase):
    """A --urls list mixing two `squall target`s (two ports) in one run: each host's figures apart
    in the JSON's `hosts` and the summary, equal to what that target counted, and each
    connection kept to one host (each target saw only its own URLs and its share of the pool)."""

    @classmethod
    def setUpClass(cls):
        cls.t1, cls.p1 = sqtest.start_target("-t", "1")
        cls.t2, cls.p2 = sqtest.start_target("-t", "1")

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.t1)
        sqtest.stop(cls.t2)

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        for port in (self.p1, self.p2):
            sqtest.http(port, "POST", "/stats/reset")

    def tearDown(self):
        self.tmp.cleanup()

    def stats(self, port):
        return sqtest.json_get(port, "/stats")

    def run_list(self, text, *args):
        path = os.path.join(self.tmp.name, "hosts.txt")
        with open(path, "w") as f:
            f.write(text)
        return sqtest.run_json("--urls", path, *args)

    def test_each_host_apart(self):
        h1, h2 = "http://127.0.0.1:%d" % self.p1, "http://127.0.0.1:%d" % self.p2
        # vegeta's format: a header under a target, blank lines between targets
        p, doc, _ = self.run_list(
            f"GET {h1}/fast\n\nGET {h2}/ok\nX-Kind: ok\n\nPOST {h2}/echo\n", "-c", "5",
            "-n", "600", "-t", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        s1, s2 = self.stats(self.p1), self.stats(self.p2)
        hosts = {h["host"]: h for h in doc["hosts"]}
        self.assertEqual(list(hosts), [h1, h2])
        # every request counted where it arrived, and nowhere else
        self.assertEqual(hosts[h1]["requests"], s1["requests"] - s1["endpoints"]["stats"])
        self.assertEqual(hosts[h2]["requests"], s2["requests"] - s2["endpoints"]["stats"])
        self.assertEqual(s1["endpoints"]["fast"], hosts[h1]["completed"])
        self.assertEqual((s1["endpoints"]["ok"], s1["endpoints"]["echo"]), (0, 0))
        self.assertEqual(s2["endpoints"]["fast"], 0)
        self.assertEqual(s2["endpoints"]["ok"] + s2["endpoints"]["echo"],
                         hosts[h2]["completed"])
        self.assertEqual(hosts[h1]["requests"] + hosts[h2]["requests"], 600)
        self.assertEqual(hosts[h1]["status"]["2xx"] + hosts[h2]["status"]["2xx"],
                         doc["status"]["2xx"])
        # the pool apart: connection g to host g mod 2 (5 connections: 3 and 2)
        self.assertEqual((hosts[h1]["connections"], hosts[h2]["connections"]), (3, 2))
        self.assertEqual((hosts[h1]["urls"], hosts[h2]["urls"]), (1, 2))
        # (less the connection that read /stats)
        self.assertEqual(s1["connections"] - 1, 3)
        self.assertEqual(s2["connections"] - 1, 2)
        for h in hosts.values():
            self.assertEqual(h["latency"]["count"], h["completed"])
            self.assertGreater(h["latency"]["p99_us"], 0)
        self.assertEqual([u["host"] for u in doc["urls"]], [h1, h2, h2])
        self.assertIn("Hosts (each connection goes to one)", p.stderr)
        self.assertIn(h1 + " · 3 connections · 1 URLs", p.stderr)
        import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)
        with open(os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                               "result.schema.json")) as f:
            jsonschema.validate(doc, json.load(f))

    def test_the_example_runs(self):
        ex = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "several-hosts.txt")
        with open(ex) as f:
            text = f.read().replace(":8080/", ":%d/" % self.p1).replace(":8081/", ":%d/" % self.p2)
        p, doc, _ = self.run_list(text, "-c", "4", "-n", "40", "-t", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual([h["urls"] for h in doc["hosts"]], [1, 2])
        self.assertEqual(sum(h["requests"] for h in doc["hosts"]), 40)
        self.assertEqual(doc["status"]["2xx"], 40)

    def test_refusals(self):
        h1, h2 = "http://127.0.0.1:%d" % self.p1, "http://127.0.0.1:%d" % self.p2
        text = f"{h1}/fast\n{h2}/fast\n"
        for args, want in [
            (("-c", "1"), "--urls: the list names 2 hosts, and each connection goes to one: "
                          "give -c 2 or more"),
            (("-c", "2", "--http2"), "several hosts in one run are not supported with --http2"),
        ]:
            p, _, _ = self.run_list(text, "-n", "10", *args)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn(want, p.stderr)
        p, _, _ = self.run_list(f"https://127.0.0.1:{self.p1}/a\nhttps://127.0.0.1:{self.p2}/b\n",
                                "-n", "1")
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn("https:// URLs of a run share one host and port", p.stderr)
        for port in (self.p1, self.p2):
            st = self.stats(port)
            self.assertEqual(st["requests"] - st["endpoints"]["stats"], 0)


if __name__ == "__main__":
    sqtest.main()

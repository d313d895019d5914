#!/usr/bin/env python3
"""Sampled exchanges (--sample-responses): against a server in this test that answers every
50th request with a 500 and a distinctive body, and a 1 MiB body on /big, the summary shows that
body's start, each class keeps at most N, the counts seen equal what the server sent, and a big
body is cut to 4 KiB in its sample."""
import http.server
import json
import os
import sys
import tempfile
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import jsonschema  # noqa: E402
import sqtest  # noqa: E402

SCHEMA = json.load(open(os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                                     "result.schema.json")))
FAILURE = b"DISTINCTIVE-FAILURE: the database pool is exhausted (42 waiting)\n"
BIG = bytes(range(32, 127)) * (1048576 // 95) + b"x" * (1048576 % 95)


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        srv = self.server
        with srv.lock:
            srv.count += 1
            n = srv.count
        if self.path == "/big":
            status, body = 200, BIG
        elif self.path == "/hang":
            self.rfile.read(1)  # never answers: the client times out and closes
            return
        elif n % 50 == 0:
            status, body = 500, FAILURE
            with srv.lock:
                srv.failures += 1
        else:
            status, body = 200, b"fine\n"
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class Samples(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.srv = http.server.ThreadingHTTPServer((sqtest.HOST, 0), Handler)
        cls.srv.daemon_threads = True
        cls.srv.lock = threading.Lock()
        cls.srv.count = cls.srv.failures = 0
        cls.thread = threading.Thread(target=cls.srv.serve_forever, daemon=True)
        cls.thread.start()
        cls.base = "http://%s:%d" % (sqtest.HOST, cls.srv.server_address[1])

    @classmethod
    def tearDownClass(cls):
        cls.srv.shutdown()
        cls.srv.server_close()

    def setUp(self):
        with self.srv.lock:
            self.srv.count = self.srv.failures = 0

    def run_doc(self, *args):
        p, doc, _ = sqtest.run_json(*args, timeout=60)
        self.assertIsNotNone(doc, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        return p, doc

    @staticmethod
    def cls(doc, name):
        for c in doc["sampled_exchanges"]["classes"]:
            if c["class"] == name:
                return c
        raise AssertionError("no class %s in %s" % (name, doc["sampled_exchanges"]))

    def test_two_percent_500s_are_seen_and_sampled(self):
        p, doc = self.run_doc(self.base + "/x", "-n", "2000", "-c", "4", "-t", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(self.srv.failures, 40)
        s = doc["sampled_exchanges"]
        self.assertEqual((s["per_class"], s["body_max"]), (5, 4096))
        c5, c2 = self.cls(doc, "5xx"), self.cls(doc, "2xx")
        self.assertEqual((c5["seen"], c2["seen"]), (40, 1960))
        self.assertEqual((len(c5["samples"]), len(c2["samples"])), (5, 5))
        for x in c5["samples"]:
            self.assertEqual(x["status"], 500)
            self.assertEqual(x["response"]["body"].encode(), FAILURE)
            self.assertTrue(x["response"]["head"].startswith("HTTP/1.0 500")
                            or x["response"]["head"].startswith("HTTP/1.1 500"), x)
            self.assertTrue(x["request"]["text"].startswith("GET /x HTTP/1.1\r\n"))
            self.assertGreater(x["latency_ms"], 0)
            self.assertLessEqual(x["ttfb_ms"], x["latency_ms"] + 0.001)
        # sorted by when they ended, and not all the first five 500s (a uniform sample)
        ts = [x["t_s"] for x in c5["samples"]]
        self.assertEqual(ts, sorted(ts))
        # the report shows them (request and response, escaped)
        with tempfile.TemporaryDirectory() as d:
            html = os.path.join(d, "r.html")
            p2 = sqtest.run_squall(self.base + "/x", "-n", "200", "-c", "2", "-t", "1", "-q",
                                   "--html", html)[0]
            self.assertEqual(p2.returncode, 0, p2.stderr)
            with open(html, encoding="utf-8") as f:
                page = f.read()
        self.assertIn('<section id="samples">', page)
        self.assertIn("<h3>5xx · 4 seen</h3>", page)
        self.assertIn("DISTINCTIVE-FAILURE: the database pool is exhausted (42 waiting)", page)
        out = p.stdout + p.stderr
        self.assertIn("5xx (40 seen): GET /x HTTP/1.1 → 500 · body \"DISTINCTIVE-FAILURE: the "
                      "database pool", out)

    def test_per_class_cap_and_off(self):
        p, doc = self.run_doc(self.base + "/x", "-n", "600", "-c", "3", "-t", "1",
                              "--sample-responses", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        for c in doc["sampled_exchanges"]["classes"]:
            self.assertLessEqual(len(c["samples"]), 2, c)
        self.assertEqual(self.cls(doc, "5xx")["seen"], 12)
        p, doc = self.run_doc(self.base + "/x", "-n", "100", "-c", "2", "-t", "1",
                              "--sample-responses", "0")
        self.assertNotIn("sampled_exchanges", doc)
        self.assertNotIn("Sampled", p.stdout + p.stderr)
        p, _ = sqtest.run_squall(self.base + "/x", "-n", "10", "--sample-responses", "101")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--sample-responses: '101'", p.stderr)

    def test_a_1mib_body_is_cut_to_4kib(self):
        p, doc = self.run_doc(self.base + "/big", "-n", "20", "-c", "2", "-t", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        c2 = self.cls(doc, "2xx")
        self.assertEqual(c2["seen"], 20)
        for x in c2["samples"]:
            r = x["response"]
            self.assertEqual(len(r["body"].encode()), 4096)
            self.assertEqual(r["body"].encode(), BIG[:4096])
            self.assertEqual(r["body_bytes"], 1048576)
            self.assertTrue(r["body_cut"])

    def test_a_timeout_is_sampled_without_a_response(self):
        p, doc = self.run_doc(self.base + "/hang", "-n", "3", "-c", "3", "-t", "1",
                              "--timeout", "300ms")
        self.assertEqual(p.returncode, 1, p.stderr)  # nothing succeeded
        c = self.cls(doc, "timeout")
        self.assertEqual((c["kind"], c["seen"], len(c["samples"])), ("error", 3, 3))
        for x in c["samples"]:
            self.assertEqual((x["status"], x["error"], x["response"]), (None, "timeout", None))
            self.assertTrue(x["request"]["text"].startswith("GET /hang HTTP/1.1\r\n"))
        self.assertIn("timeout (3 seen): GET /hang HTTP/1.1 → timeout", p.stdout + p.stderr)



class SamplesOverH2(sqtest.TargetCase):
    def test_h2c_responses_are_sampled(self):
        p, doc, _ = sqtest.run_json(self.base + "/status/503", "--http2", "--streams", "4",
                                    "-c", "2", "-n", "400", "-t", "1", timeout=60)
        self.assertIsNotNone(doc, p.stderr)
        jsonschema.validate(doc, SCHEMA)
        c5 = [c for c in doc["sampled_exchanges"]["classes"] if c["class"] == "5xx"][0]
        self.assertEqual((c5["seen"], len(c5["samples"])), (400, 5))
        for x in c5["samples"]:
            self.assertEqual((x["protocol"], x["status"]), ("h2", 503))
            self.assertTrue(x["response"]["head"].startswith("HTTP/2 503"), x)
            self.assertIn("/status/503", x["request"]["text"])

if __name__ == "__main__":
    sqtest.main()

#!/usr/bin/env python3
"""End-to-end tests of HTTP/2 in `squall target`: h2c with prior knowledge, driven by nghttp2's
own tools (h2load, nghttp from Debian's nghttp2-client), every load bounded by -n.

Skipped (not failed) when h2load / nghttp are not installed.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import http  # noqa: E402

PATTERN = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
H2LOAD = shutil.which("h2load")
NGHTTP = shutil.which("nghttp")


def pattern(n):
    return (PATTERN * (n // 64 + 1))[:n]


@unittest.skipUnless(H2LOAD and NGHTTP, "h2load / nghttp (nghttp2-client) not installed")
class H2TargetTest(sqtest.TargetCase):
    target_args = ("-t", "2", "-q")

    def nghttp(self, *args, timeout=30):
        p = subprocess.run([NGHTTP, *args], capture_output=True, timeout=timeout)
        self.assertEqual(p.returncode, 0, p.stderr.decode(errors="replace"))
        return p.stdout

    def h2stats(self):
        return self.stats()["h2"]

    def test_h2load(self):
        self.reset()
        p = subprocess.run(
            [H2LOAD, "-n", "2000", "-c", "4", "-m", "10", self.base + "/fast"],
            capture_output=True, text=True, timeout=60)
        self.assertEqual(p.returncode, 0, p.stderr)
        m = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, "
                      r"(\d+) failed, (\d+) errored", p.stdout)
        self.assertIsNotNone(m, p.stdout)
        self.assertEqual(m.groups(), ("2000", "2000", "2000", "2000", "0", "0"), p.stdout)
        self.assertIn("status codes: 2000 2xx", p.stdout)
        st = self.stats()
        self.assertEqual(st["h2"], {"connections": 4, "streams": 2000})
        self.assertEqual(st["endpoints"]["fast"], 2000)

    def test_h2load_one_connection_many_streams(self):
        self.reset()
        p = subprocess.run(
            [H2LOAD, "-n", "500", "-c", "1", "-m", "100", self.base + "/bytes/5000"],
            capture_output=True, text=True, timeout=60)
        self.assertIn("500 succeeded", p.stdout)
        self.assertIn("traffic:", p.stdout)
        self.assertEqual(self.h2stats(), {"connections": 1, "streams": 500})

    def test_nghttp_bytes(self):
        out = self.nghttp("-nv", self.base + "/bytes/1000").decode()
        self.assertRegex(out, r"recv \(stream_id=\d+\) :status: 200")
        self.assertRegex(out, r"recv \(stream_id=\d+\) content-length: 1000")
        self.assertIn("content-type: application/octet-stream", out)
        self.assertRegex(out, r"recv DATA frame <length=1000, flags=0x01, stream_id=\d+>")
        # the server announces its stream limit
        self.assertIn("SETTINGS_MAX_CONCURRENT_STREAMS(0x03):1024", out)

    def test_endpoints(self):
        self.assertEqual(self.nghttp(self.base + "/fast"), b"hello world")
        for n in (0, 1, 16384, 16385, 100000, 3 * 1024 * 1024 + 5):
            self.assertEqual(self.nghttp(self.base + "/bytes/%d" % n), pattern(n), n)
        for code in (201, 404, 503):
            out = self.nghttp("-v", self.base + "/status/%d" % code).decode()
            self.assertIn(":status: %d" % code, out)
        out = self.nghttp("-v", self.base + "/nothing-here").decode()
        self.assertIn(":status: 404", out)
        out = self.nghttp("-v", self.base + "/bytes/xyz").decode()
        self.assertIn(":status: 400", out)
        # 204: no content-length, no body
        out = self.nghttp("-v", self.base + "/status/204").decode()
        self.assertIn(":status: 204", out)
        self.assertNotIn("content-length", out)

    def test_head(self):
        out = self.nghttp("-v", "-H", ":method: HEAD", self.base + "/bytes/777").decode()
        self.assertIn(":status: 200", out)
        self.assertIn("content-length: 777", out)
        self.assertNotIn("recv DATA frame", out)

    def test_delay_concurrent(self):
        # three 300 ms delays on one connection answer together, not one after another
        t0 = time.monotonic()
        out = self.nghttp("-nv", self.base + "/delay/300", self.base + "/delay/301",
                          self.base + "/fast").decode()
        took = time.monotonic() - t0
        self.assertEqual(out.count(":status: 200"), 3)
        self.assertGreaterEqual(took, 0.3)
        self.assertLess(took, 0.9)

    def test_streamed_answer(self):
        # /sse streams its events as DATA frames as they fall due; a /fast on the same
        # connection is answered meanwhile
        t0 = time.monotonic()
        out = self.nghttp("-v", self.base + "/sse?events=4&interval=100",
                          self.base + "/fast").decode()
        took = time.monotonic() - t0
        self.assertGreaterEqual(took, 0.4)
        self.assertEqual(out.count('data: {"id":'), 4, out)
        self.assertIn("content-type: text/event-stream", out)
        self.assertIn("hello world", out)
        # the events leave one by one (one DATA frame each), the last with END_STREAM
        self.assertGreaterEqual(len(re.findall(r"recv DATA frame <length=\d+, flags=0x00", out)), 3)

    def test_compressed_and_cookies(self):
        out = self.nghttp("-v", "-H", "accept-encoding: gzip", self.base + "/json/5000").decode()
        self.assertIn("content-encoding: gzip", out)
        out = self.nghttp("-v", self.base + "/cookie/set?flavour=oat").decode()
        self.assertIn("set-cookie: flavour=oat", out)

    def test_echo(self):
        with tempfile.NamedTemporaryFile() as f:
            body = b"x" * 70000 + b"\xff"
            f.write(body)
            f.flush()
            out = self.nghttp("-d", f.name, "-H", "x-hello: world", self.base + "/echo?a=b")
        doc = json.loads(out)
        self.assertEqual(doc["version"], "HTTP/2")
        self.assertEqual(doc["method"], "POST")
        self.assertEqual(doc["path"], "/echo?a=b")
        self.assertEqual(doc["body_len"], len(body))
        self.assertIn("body_base64", doc)
        hdrs = dict((k, v) for k, v in doc["headers"])
        self.assertEqual(hdrs["host"], "127.0.0.1:%d" % self.port)
        self.assertEqual(hdrs["x-hello"], "world")

    def test_h1_unchanged(self):
        status, hdrs, body = http(self.port, "GET", "/fast")
        self.assertEqual((status, body, hdrs["content-length"]), (200, b"hello world", "11"))
        s = sqtest.raw_connect(self.port)
        try:
            # HTTP/1.1 with the method PRI is no preface: routed as HTTP/1.1 ("*" is no path)
            s.sendall(b"PRI * HTTP/1.1\r\nHost: x\r\n\r\n")
            rd = sqtest.RawReader(s)
            self.assertEqual(rd.response()[0], 404)
        finally:
            s.close()


if __name__ == "__main__":
    sqtest.main()

#!/usr/bin/env python3
"""End-to-end tests of HTTP/2 in `squall target`: h2c with prior knowledge, driven by nghttp2's
own tools (h2load, nghttp from Debian's nghttp2-client), every load bounded by -n.

Skipped (not failed) when h2load / nghttp are not installed.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import http  # noqa: E402
free_port = sqtest.free_port

PATTERN = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
H2LOAD = shutil.which("h2load")
NGHTTP = shutil.which("nghttp")
NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)


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
        self.nghttp("-nv", self.base + "/delay/300")
        one = time.monotonic() - t0
        t0 = time.monotonic()
        out = self.nghttp("-nv", self.base + "/delay/300", self.base + "/delay/301",
                          self.base + "/fast").decode()
        took = time.monotonic() - t0
        self.assertEqual(out.count(":status: 200"), 3)
        self.assertGreaterEqual(took, 0.3)
        # Relative to one delayed request through the same nghttp (its start and the machine's
        # load included): together they cost the one delay; one after another they would add
        # 600 ms more. Half of that is the margin.
        self.assertLess(took, one + 0.3, (took, one))

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
        # the events leave as they fall due, the last with END_STREAM: one DATA frame each on a
        # quiet machine; a busy one may wake the target late and send two due events in one
        # frame. So: more than one frame, received over at least half of the 300 ms from the
        # first event to the last (nghttp's own clock), where a stream held to its end comes
        # in one frame at once
        sid = re.search(r"recv \(stream_id=(\d+)\) content-type: text/event-stream", out).group(1)
        frames = re.findall(r"\[ *([\d.]+)\] recv DATA frame <length=\d+, flags=0x0([01]), "
                            r"stream_id=%s>" % sid, out)
        at = [float(t) for t, _ in frames]
        self.assertGreaterEqual(len(at), 2, out)
        self.assertGreaterEqual(at[-1] - at[0], 0.15, at)
        self.assertEqual([f for _, f in frames].count("1"), 1, out)
        self.assertEqual(frames[-1][1], "1", out)

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


class QuickH2Test(sqtest.TargetCase):
    """The quick face over h2c: `squall --http2 --streams N` against squall target."""

    target_args = ("-t", "2", "-q")

    def run_h2(self, *args, timeout=60, rc=0):
        p, doc, _ = sqtest.run_json("--http2", "-q", *args, timeout=timeout)
        self.assertEqual(p.returncode, rc, p.stderr)
        self.assert_accounting(doc)
        return doc

    def test_requests_streams_connections(self):
        self.reset()
        doc = self.run_h2("-c", "2", "--streams", "8", "-n", "2000", "-t", "1",
                          self.base + "/fast")
        r = doc["requests"]
        self.assertEqual((r["sent"], r["completed"], r["failed"]), (2000, 2000, 0))
        self.assertEqual(doc["status"]["2xx"], 2000)
        self.assertEqual(doc["config"]["protocol"], "h2c")
        self.assertEqual(doc["config"]["streams"], 8)
        self.assertEqual(doc["config"]["connections"], 2)
        self.assertEqual(doc["connections"]["opened"], 2)
        self.assertEqual(doc["bodies"]["decoded_bytes"], 2000 * 11)
        st = self.stats()
        self.assertEqual(st["h2"], {"connections": 2, "streams": 2000})
        self.assertEqual(st["endpoints"]["fast"], 2000)

    def test_streams_run_concurrently(self):
        # one connection, 10 streams, 100 ms answers: about 10 requests per 100 ms
        self.reset()
        doc = self.run_h2("-c", "1", "--streams", "10", "-d", "1s", self.base + "/delay/100")
        done = doc["requests"]["completed"]
        self.assertLessEqual(done, 110)  # 10 streams, 100 ms each, 1 s: whatever the machine
        self.assertGreaterEqual(doc["latency"]["min_us"], 100000)
        # Concurrency is requests times their mean latency over the run: 10 streams kept busy
        # give about 10 (a busy machine's slower answers mean fewer requests, not less
        # concurrency); one stream at a time gives 1.
        conc = done * doc["latency"]["mean_us"] / 1e6 / doc["duration_s"]
        self.assertGreaterEqual(conc, 6, (done, doc["latency"]["mean_us"], doc["duration_s"]))
        self.assertEqual(self.stats()["h2"]["connections"], 1)

    def test_workers_split_whole_connections(self):
        self.reset()
        doc = self.run_h2("-c", "4", "--streams", "3", "-t", "2", "-n", "600", self.base + "/ok")
        self.assertEqual(doc["requests"]["completed"], 600)
        self.assertEqual(doc["config"]["connections"], 4)
        self.assertEqual(self.stats()["h2"], {"connections": 4, "streams": 600})

    def test_timeout_cancels_the_stream_only(self):
        self.reset()
        doc = self.run_h2("-c", "1", "--streams", "2", "-d", "1s", "--timeout", "200ms",
                          self.base + "/delay/5000", rc=1)  # 1: no request succeeded
        errs = doc["errors"]
        self.assertGreaterEqual(errs["timeout"], 4)
        self.assertEqual(errs["closed"] + errs["parse"] + errs["write"], 0)
        self.assertEqual(doc["requests"]["completed"], 0)
        # the connection stayed: each timed-out stream was reset, the next one reused it
        self.assertEqual(self.stats()["h2"]["connections"], 1)

    def test_open_loop(self):
        self.reset()
        doc = self.run_h2("-c", "1", "--streams", "4", "-r", "200", "-d", "1s",
                          self.base + "/fast")
        r = doc["requests"]
        self.assertEqual(r["arrivals"], 200)
        self.assertEqual(r["sent"] + r["dropped"], 200)
        # each arrival sent or counted as dropped (a busy machine drops some while the target
        # is descheduled); each sent one answered, but those still in flight at the end
        self.assertEqual(r["failed"], 0, doc["errors"])
        self.assertEqual(r["completed"] + r["in_flight"], r["sent"])
        self.assertGreater(r["sent"], 100, r)  # 200/s on 4 streams: a trivial load
        streams = self.stats()["h2"]["streams"]
        self.assertGreaterEqual(streams, r["completed"])
        self.assertLessEqual(streams, r["sent"])

    def test_post_body_and_status(self):
        self.reset()
        doc = self.run_h2("-c", "1", "--streams", "4", "-n", "100", "-m", "POST", "-b",
                          "x" * 40000, self.base + "/echo")
        self.assertEqual(doc["requests"]["completed"], 100)
        self.assertGreater(doc["bytes"]["sent"], 100 * 40000)
        doc = self.run_h2("-c", "1", "--streams", "4", "-n", "50", self.base + "/status/503")
        self.assertEqual(doc["status"]["5xx"], 50)

    def test_flags(self):
        p, _ = sqtest.run_squall("--streams", "4", self.base + "/fast")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--streams applies to --http2", p.stderr)
        p, _ = sqtest.run_squall("--http2", "--streams", "0", self.base + "/fast")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--streams", p.stderr)


def https_json(port, path):
    """GET over TLS (no verification: the target's self-signed certificate), HTTP/1.1."""
    import http.client
    import ssl
    ctx = ssl._create_unverified_context()
    c = http.client.HTTPSConnection(sqtest.HOST, port, context=ctx, timeout=10)
    try:
        c.request("GET", path)
        return json.loads(c.getresponse().read())
    finally:
        c.close()


class H2TlsTest(unittest.TestCase):
    """HTTP/2 over TLS: squall target --tls offers ALPN h2 (then http/1.1); squall --http2 with
    https:// requires h2."""

    @classmethod
    def setUpClass(cls):
        cls.proc, cls.port = sqtest.start_target("-t", "2", "-q", "--tls")
        cls.base = "https://%s:%d" % (sqtest.HOST, cls.port)

    @classmethod
    def tearDownClass(cls):
        sqtest.stop(cls.proc)

    def test_quick_h2_over_tls(self):
        before = https_json(self.port, "/stats")["h2"]
        p, doc, _ = sqtest.run_json("--http2", "-k", "-q", "-c", "2", "--streams", "4", "-n", "500",
                                    "-t", "2", self.base + "/fast")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertEqual((r["completed"], r["failed"]), (500, 0))
        self.assertEqual(doc["config"]["protocol"], "h2")
        self.assertEqual(doc["tls"]["alpn"], "h2")
        self.assertEqual(doc["tls"]["handshakes"], 2)
        self.assertEqual(doc["connections"]["opened"], 2)
        after = https_json(self.port, "/stats")["h2"]
        self.assertEqual(after["connections"] - before["connections"], 2)
        self.assertEqual(after["streams"] - before["streams"], 500)

    def test_http11_clients_still_get_http11(self):
        p, doc, _ = sqtest.run_json("-k", "-q", "-c", "2", "-n", "100", self.base + "/fast")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["tls"]["alpn"], "http/1.1")
        self.assertEqual(doc["requests"]["completed"], 100)

    def test_unverified_h2_fails_as_tls(self):
        p, doc, _ = sqtest.run_json("--http2", "-q", "-c", "1", "--streams", "2", "-d", "300ms",
                                    self.base + "/fast")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertGreater(doc["errors"]["tls"], 0)
        self.assertEqual(doc["requests"]["sent"], 0)
        self.assertIn("certificate verify failed", doc["tls"]["first_error"])

    @unittest.skipUnless(NGHTTP, "nghttp not installed")
    def test_nghttp_over_tls(self):
        p = subprocess.run([NGHTTP, "-nv", self.base + "/bytes/1000"], capture_output=True,
                           text=True, timeout=30)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("recv DATA frame <length=1000", p.stdout)


NGINX_CONF = """worker_processes 1;
master_process off;
daemon off;
pid {d}/nginx.pid;
error_log {d}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {d}/body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;
    keepalive_requests {kr};
    server {{
        listen {host}:{port} http2;
        location / {{ return 200 "hello from nginx\n"; }}
    }}
    {tls_server}
}}
"""

NGINX_TLS = """server {{
        listen {host}:{port} ssl http2;
        ssl_certificate {d}/cert.pem;
        ssl_certificate_key {d}/key.pem;
        location / {{ return 200 "hello from nginx\n"; }}
    }}"""


@unittest.skipUnless(NGINX, "nginx not installed")
class NginxH2Test(unittest.TestCase):
    """An independent HTTP/2 server: nginx (h2c, `listen ... http2`), started here as a
    non-daemon child with its own prefix and config, stopped by its PID. keepalive_requests
    makes it send GOAWAY every 100 requests per connection."""

    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="squall-nginx-")
        cls.port = free_port()
        cls.tls_port = None
        tls_server = ""
        if shutil.which("openssl"):
            subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                            "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj",
                            "/CN=localhost", "-keyout", os.path.join(cls.dir, "key.pem"), "-out",
                            os.path.join(cls.dir, "cert.pem")], check=True,
                           capture_output=True, timeout=60)
            cls.tls_port = free_port()
            tls_server = NGINX_TLS.format(d=cls.dir, host=sqtest.HOST, port=cls.tls_port)
        conf = os.path.join(cls.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(NGINX_CONF.format(d=cls.dir, kr=100, host=sqtest.HOST, port=cls.port,
                                      tls_server=tls_server))
        cls.proc = subprocess.Popen([NGINX, "-p", cls.dir, "-c", conf,
                                     "-e", os.path.join(cls.dir, "error.log")],
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection((sqtest.HOST, cls.port), timeout=1).close()
                break
            except OSError:
                if cls.proc.poll() is not None or time.monotonic() > deadline:
                    err = cls.proc.stderr.read().decode(errors="replace")
                    raise RuntimeError("nginx did not start: " + err)
                time.sleep(0.05)
        cls.base = "http://%s:%d" % (sqtest.HOST, cls.port)

    @classmethod
    def tearDownClass(cls):
        if cls.proc.poll() is None:
            cls.proc.terminate()
        try:
            cls.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            cls.proc.kill()
            cls.proc.wait()
        cls.proc.stderr.close()
        shutil.rmtree(cls.dir, ignore_errors=True)

    def test_quick_h2_against_nginx(self):
        p, doc, _ = sqtest.run_json("--http2", "-q", "-c", "2", "--streams", "4", "-n", "1000",
                                    "-t", "1", self.base + "/")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertEqual(r["sent"], 1000)
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])
        self.assertEqual(r["in_flight"], 0)
        # every 100 requests nginx says GOAWAY: the connection is replaced, and the streams it
        # had already refused (at most streams - 1 per GOAWAY) count as `closed`
        self.assertGreaterEqual(doc["connections"]["opened"], 10)
        self.assertGreaterEqual(doc["connections"]["closed_by_server"], 8)
        self.assertLessEqual(doc["errors"]["closed"], 3 * doc["connections"]["closed_by_server"])
        self.assertEqual(doc["errors"]["closed"], r["failed"])
        self.assertEqual(doc["status"]["2xx"], r["completed"])
        self.assertGreaterEqual(r["completed"], 900)
        self.assertEqual(doc["bodies"]["decoded_bytes"], r["completed"] * 17)

    def test_quick_h2_over_tls_against_nginx(self):
        if not self.tls_port:
            self.skipTest("openssl CLI not installed: no certificate for nginx")
        p, doc, _ = sqtest.run_json("--http2", "-k", "-q", "-c", "2", "--streams", "4", "-n",
                                    "300", "-t", "1",
                                    "https://%s:%d/" % (sqtest.HOST, self.tls_port))
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertEqual(r["sent"], 300)
        self.assertEqual(r["sent"], r["completed"] + r["failed"])
        self.assertGreaterEqual(r["completed"], 280)  # GOAWAY every 100: a few refused
        self.assertEqual(doc["tls"]["alpn"], "h2")
        self.assertGreaterEqual(doc["connections"]["opened"], 3)

    def test_timed_run_against_nginx(self):
        p, doc, _ = sqtest.run_json("--http2", "-q", "-c", "1", "--streams", "8", "-d", "1s",
                                    self.base + "/")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertGreater(r["completed"], 500)
        self.assertEqual(r["sent"], r["completed"] + r["failed"] + r["in_flight"])

    def test_plan_over_h2_against_nginx(self):
        # a plan's flow over h2c against an independent server: checks read nginx's body, and
        # nginx's GOAWAY every 100 requests replaces connections under the flow
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.yaml")
            with open(path, "w") as f:
                f.write("target: %s\n"
                        "scenarios:\n"
                        "  s:\n"
                        "    executor: shared-iterations\n"
                        "    protocol: h2\n"
                        "    vus: 4\n"
                        "    iterations: 150\n"
                        "    flow:\n"
                        "      - request: { url: \"/a?it={{$iteration}}\" }\n"
                        "        check: { status: 200, body_contains: hello from nginx }\n"
                        "      - request: { url: /b }\n" % self.base)
            p, doc, _ = sqtest.run_json("run", path, "--streams", "4", "-q")
        self.assertEqual(p.returncode, 0, p.stderr)
        r = doc["requests"]
        self.assertEqual(r["sent"], 300)
        self.assertEqual(r["sent"], r["completed"] + r["failed"])
        self.assertEqual(doc["errors"]["closed"], r["failed"])
        self.assertGreaterEqual(r["completed"], 290)
        self.assertGreaterEqual(doc["connections"]["opened"], 3)
        self.assertEqual(doc["scenarios"][0]["protocol"], "h2c")
        for c in doc["checks"]:  # each answered first step was checked, and held
            self.assertEqual(c["failed"], 0, c)
            self.assertGreaterEqual(c["passed"], 140, c)

    def test_client_module_via_h2load_parity(self):
        # the same server through nghttp2's own client, as a cross-check of the setup
        if not H2LOAD:
            self.skipTest("h2load not installed")
        p = subprocess.run([H2LOAD, "-n", "200", "-c", "1", "-m", "4", self.base + "/"],
                           capture_output=True, text=True, timeout=60)
        self.assertIn("status codes: ", p.stdout)


if __name__ == "__main__":
    sqtest.main()

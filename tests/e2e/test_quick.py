#!/usr/bin/env python3
"""End-to-end tests of the quick face against `squall target` on an ephemeral loopback port.

Every load here is bounded by -n or a short -d; the target is started by the test and stopped by
its PID.
"""
import base64
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import unittest
import zlib

sys.path.insert(0, os.path.dirname(__file__))
import sqtest  # noqa: E402
free_port = sqtest.free_port

run = sqtest.run_squall
run_json = sqtest.run_json


def decode_hist_total(b64):
    """Decodes HdrHistogram's V2 compressed encoding independently and returns the total count."""
    raw = base64.b64decode(b64)
    cookie, clen = struct.unpack(">Ii", raw[:8])
    assert cookie == 0x1C849314, hex(cookie)
    inner = zlib.decompress(raw[8 : 8 + clen])
    (icookie, plen, _norm, sigfigs, lowest, highest, _ratio) = struct.unpack(">IiiiqqQ", inner[:40])
    assert icookie & ~0xF0 == 0x1C849303, hex(icookie)
    assert sigfigs == 3 and lowest == 1 and highest == 3_600_000_000
    payload = inner[40 : 40 + plen]
    total, i = 0, 0
    while i < len(payload):
        v, shift = 0, 0
        for k in range(9):
            b = payload[i]
            i += 1
            if k == 8:
                v |= b << 56
                break
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                break
        v = (v >> 1) ^ -(v & 1)  # ZigZag
        if v > 0:
            total += v
    return total


class QuickFace(sqtest.TargetCase):
    def served(self, path=None):
        st = self.stats()
        return st["requests"] if path is None else st["endpoints"].get(path, 0)

    def test_count_run_matches_target(self):
        self.reset()
        p, doc, _ = run_json(self.base + "/fast", "-n", "5000", "-c", "32", "-t", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["schema"], "squall.result/1")
        self.assert_accounting(doc)
        r = doc["requests"]
        self.assertEqual(r["sent"], 5000)
        self.assertEqual(r["completed"], 5000)
        self.assertEqual(r["in_flight"], 0)
        self.assertEqual(doc["status"]["2xx"], 5000)
        self.assertEqual(self.served("fast"), r["completed"])
        lat = doc["latency"]
        self.assertTrue(0 <= lat["min_us"] <= lat["p50_us"] <= lat["p90_us"] <= lat["p95_us"]
                        <= lat["p99_us"] <= lat["p99_9_us"] <= lat["max_us"], lat)
        self.assertEqual(decode_hist_total(lat["histogram"]["data"]), 5000)
        self.assertEqual(doc["connections"]["opened"], 32)
        self.assertGreater(doc["bytes"]["received"], 5000 * 11)
        self.assertAlmostEqual(doc["rate"]["requests_per_s"], r["completed"] / doc["duration_s"],
                               delta=1.0)
        # The human summary goes to stderr when the JSON takes stdout.
        self.assertIn("Requests", p.stderr)

    def test_duration_run(self):
        self.reset()
        p, doc, took = run_json(self.base + "/fast", "-d", "1s", "-c", "8", "-t", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        self.assertAlmostEqual(doc["duration_s"], 1.0, delta=0.2)
        self.assertLess(took, 5)
        served = self.served("fast")
        r = doc["requests"]
        # The target may have answered requests still in flight at the end.
        self.assertGreaterEqual(served, r["completed"])
        self.assertLessEqual(served, r["completed"] + r["in_flight"])
        self.assertLessEqual(r["in_flight"], 8)

    def test_idle_poll_adapts(self):
        # A worker polls its sockets for up to 50 us before sleeping while its recent waits were
        # that short (a fast server), and stops once they are longer (a slow one): one VU waiting
        # 20 ms a response polls on its first three waits only (the moving average of the waits,
        # starting at 0, passes 50 us on the third), then sleeps at once.
        p, doc, _ = run_json(self.base + "/delay/20", "-d", "600ms", "-c", "1", "-t", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        iw = doc["client"]["idle_waits"]
        self.assertGreaterEqual(iw["polled"], 1, iw)
        self.assertLessEqual(iw["polled"], 3, iw)
        self.assertEqual(iw["caught"], 0, iw)
        # every other wait for a response slept: one per completed request at least (about
        # 30 in 600 ms; fewer when a busy machine answers slower), but the polled ones
        done = doc["requests"]["completed"]
        self.assertGreater(done, 5, doc["requests"])
        self.assertGreaterEqual(iw["slept"], done - iw["polled"] - 1, (iw, done))
        p, doc, _ = run_json(self.base + "/fast", "-n", "20000", "-c", "8", "-t", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        cl = doc["client"]
        self.assertGreaterEqual(cl["idle_waits"]["polled"], 1, cl)
        self.assertLessEqual(cl["idle_waits"]["caught"], cl["idle_waits"]["polled"], cl)
        w = cl["workers"][0]
        self.assertLessEqual(w["poll_s"], w["cpu_s"], w)
        # polling is the worker's choice: it is not counted busy
        self.assertLessEqual(w["busy"], (w["cpu_s"] + w["wait_s"] - w["poll_s"]) /
                             doc["duration_s"] + 0.05, w)

    def test_series_and_interval_outputs(self):
        with tempfile.TemporaryDirectory() as d:
            csv, hlog = os.path.join(d, "s.csv"), os.path.join(d, "s.hlog")
            p, doc, _ = run_json(self.base + "/fast", "-d", "2500ms", "-c", "4", "-t", "2",
                                 "--out", "csv=" + csv, "--out", "hdr=" + hlog)
            self.assertEqual(p.returncode, 0, p.stderr)
            series = doc["series"]
            self.assertIn(len(series), (2, 3))  # whole seconds, and the last half second
            r = doc["requests"]
            self.assertEqual(sum(e["requests"] for e in series), r["sent"])
            self.assertEqual(sum(e["completed"] for e in series), r["completed"])
            self.assertAlmostEqual(series[-1]["t_s"], doc["duration_s"], delta=0.05)
            for e in series:
                self.assertLessEqual(e["p50_us"], e["p99_us"])
                self.assertLessEqual(e["p99_us"], e["max_us"])
            rows = open(csv).read().splitlines()
            self.assertTrue(rows[0].startswith("t_s,len_s,requests,completed"))
            self.assertEqual(len(rows) - 1, len(series))
            self.assertEqual(sum(int(x.split(",")[3]) for x in rows[1:]), r["completed"])
            lines = open(hlog).read().splitlines()
            self.assertEqual(lines[0], "#[Histogram log format version 1.2]")
            self.assertTrue(lines[1].startswith("#[StartTime: "))
            data = [x for x in lines if x and not x.startswith("#") and not x.startswith('"')]
            self.assertEqual(len(data), len(series))
            self.assertEqual(sum(decode_hist_total(x.split(",")[3]) for x in data),
                             r["completed"])

    def test_ndjson_per_request(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.ndjson")
            p, doc, _ = run_json(self.base + "/status/503", "-n", "3000", "-c", "8", "-t", "2",
                                 "--out", "ndjson=" + path)
            self.assertEqual(p.returncode, 0, p.stderr)
            lines = [json.loads(x) for x in open(path)]
            self.assertEqual(len(lines), 3000)
            self.assertEqual(doc["samples"], {"written": 3000, "lost": 0})
            self.assertTrue(all(x["status"] == 503 and x["error"] is None for x in lines))
            self.assertTrue(all(x["latency_us"] >= 0 and x["bytes"] > 0 for x in lines))
            self.assertEqual({x["scenario"] for x in lines}, {"default"})
            p, doc, _ = run_json(self.base + "/fast", "-n", "20000", "-c", "8", "--out",
                                 "ndjson=" + path, "--sample", "0.1")
            self.assertEqual(p.returncode, 0, p.stderr)
            n = sum(1 for _ in open(path))
            self.assertGreater(n, 1500)
            self.assertLess(n, 2500)
            # Failed requests are recorded with their error kind.
            p, doc, _ = run_json(self.base + "/delay/2000", "-n", "2", "-c", "2",
                                 "--timeout", "200ms", "--out", "ndjson=" + path)
            lines = [json.loads(x) for x in open(path)]
            self.assertEqual([x["error"] for x in lines], ["timeout", "timeout"])
            self.assertEqual([x["status"] for x in lines], [0, 0])

    def test_documents_follow_the_schema(self):
        import jsonschema  # Debian's python3-jsonschema (scripts/deps.sh)
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        schema = json.load(open(os.path.join(root, "docs", "result.schema.json")))
        docs = [run_json(self.base + "/fast", "-n", "500", "-c", "4")[1],
                run_json(self.base + "/fast", "-r", "300", "-d", "1s", "-c", "4")[1],
                run_json(self.base + "/fast", "--stages", "500ms:2,500ms:0")[1]]
        for doc in docs:
            jsonschema.validate(doc, schema)
        broken = dict(docs[0])
        del broken["requests"]
        with self.assertRaises(jsonschema.ValidationError):
            jsonschema.validate(broken, schema)

    def test_bad_out(self):
        p, _ = run(self.base + "/fast", "-n", "1", "--out", "xml=foo")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--out", p.stderr)
        p, _ = run(self.base + "/fast", "-n", "1", "--sample", "0.5")
        self.assertEqual(p.returncode, 2)
        self.assertIn("--sample", p.stderr)

    def test_delay_latency(self):
        p, doc, _ = run_json(self.base + "/delay/50", "-n", "40", "-c", "4", "-t", "1")
        self.assertEqual(p.returncode, 0, p.stderr)
        lat = doc["latency"]
        # never less than the 50 ms the server holds each request
        self.assertGreaterEqual(lat["min_us"], 50_000, lat)
        self.assertGreaterEqual(lat["p50_us"], 50_000, lat)
        # and never more than the time it had: each of the 4 connections sends its 10 requests
        # back to back, so their latencies add up to at most the run's duration, whatever the
        # machine's load makes of both. A latency that counts more than the request's own time
        # (from an earlier stamp, in the wrong unit) breaks it; 2% is the clocks' rounding.
        self.assertLessEqual(lat["mean_us"] * 40 / 4, doc["duration_s"] * 1e6 * 1.02,
                             (lat, doc["duration_s"]))

    def test_target_down(self):
        port = free_port()
        p, doc, took = run_json(f"http://127.0.0.1:{port}/", "-d", "5s", "-c", "4",
                                "--connect-timeout", "1s")
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertLess(took, 3.0)
        self.assertGreaterEqual(doc["errors"]["connect"], 4)
        self.assertEqual(doc["requests"]["completed"], 0)
        self.assertIn("refused", p.stderr.lower())

    def test_unresolvable_host(self):
        p, _ = run("http://nonexistent.invalid/", "-n", "1")
        self.assertEqual(p.returncode, 1)
        self.assertIn("resolve", p.stderr)

    def test_server_closes_every_connection(self):
        self.reset()
        p, doc, _ = run_json(self.base + "/fast", "-n", "300", "-c", "4", "-t", "1",
                             "-H", "Connection: close")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        self.assertEqual(doc["requests"]["completed"], 300)
        self.assertEqual(doc["connections"]["closed_by_server"], 300)
        self.assertGreaterEqual(doc["connections"]["opened"], 300)
        self.assertEqual(self.served("fast"), 300)

    @unittest.skipUnless(shutil.which("strace"), "strace is not installed")
    def test_churn_system_calls(self):
        """A new connection per request costs no SO_ERROR read, no EPOLL_CTL_MOD or _DEL and
        at most one setsockopt (TCP_QUICKACK; TCP_NODELAY waits for a second write); the socket
        of a connection the server closed is kept for the next connect (shutdown, then
        connect(AF_UNSPEC) once TCP is in CLOSE): no socket(), close() or EPOLL_CTL_ADD per
        connection. Keep-alive connections still get TCP_NODELAY, once each. Counted under
        strace, not timed."""
        self.reset()
        n = 200
        # LeakSanitizer cannot run under ptrace (an ASan build's exit would be 1)
        env = dict(os.environ)
        opts = env.get("ASAN_OPTIONS", "")
        env["ASAN_OPTIONS"] = (opts + ":" if opts else "") + "detect_leaks=0"
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "strace.txt")
            cmd = ["strace", "-f", "-o", log, "-e",
                   "trace=getsockopt,setsockopt,epoll_ctl,connect,socket,close,shutdown",
                   sqtest.squall_path(), self.base + "/fast", "-n", str(n), "-c", "4", "-t", "1",
                   "-H", "Connection: close", "--json", "-"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            doc = json.loads(p.stdout)
            with open(log) as f:
                text = f.read()
        calls = {k: text.count(f" {k}(") for k in (
            "getsockopt", "setsockopt", "epoll_ctl", "connect", "socket", "close", "shutdown")}
        tcp_sockets = text.count("socket(AF_INET, SOCK_STREAM")
        so_error = text.count("SO_ERROR")
        self.assert_accounting(doc)
        self.assertEqual(doc["requests"]["completed"], n)
        self.assertEqual(self.served("fast"), n)
        conns = doc["connections"]["opened"]
        self.assertGreaterEqual(calls["connect"], n)
        # the probe finds loopback connections up: no SO_ERROR read (a few may miss on a busy
        # machine), at most one EPOLL_CTL_ADD per connection and nothing else
        self.assertLess(so_error, n // 4, text[-2000:])
        self.assertLessEqual(calls["epoll_ctl"], conns + 16, calls)
        self.assertLessEqual(calls["setsockopt"], conns + 16, calls)
        # each closed connection's socket is kept for the next (one shutdown each; on a busy
        # machine a few are still in LAST_ACK then and get closed): the 4 first sockets and
        # a few more, not one per connection
        self.assertGreaterEqual(calls["shutdown"], n - 4, calls)
        self.assertLess(tcp_sockets, n // 4, calls)
        self.assertLess(calls["epoll_ctl"], n // 4, calls)
        self.assertLess(calls["close"], n // 4, calls)

        # keep-alive: TCP_QUICKACK at the connect, TCP_NODELAY before the second request
        with tempfile.TemporaryDirectory() as d:
            log = os.path.join(d, "strace.txt")
            cmd = ["strace", "-f", "-o", log, "-e", "trace=setsockopt",
                   sqtest.squall_path(), self.base + "/fast", "-n", "40", "-c", "4", "-t", "1"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(log) as f:
                text = f.read()
        self.assertEqual(text.count("TCP_NODELAY"), 4, text)
        self.assertEqual(text.count("TCP_QUICKACK"), 4, text)

    def test_churn_server_sees_clean_closes(self):
        """A server that answers `Connection: close`, shuts its side and reads to the end sees
        each connection end with squall's FIN (an EOF), never a reset, the socket kept for the
        next connect or not; and it counts as many requests as squall completed."""
        srv = socket.socket()
        srv.bind(("127.0.0.1", 0))
        srv.listen(64)
        srv.settimeout(0.2)
        port = srv.getsockname()[1]
        seen = {"requests": 0, "eof": 0, "reset": 0, "other": 0}
        stop = threading.Event()

        def serve():
            while not stop.is_set():
                try:
                    c, _ = srv.accept()
                except socket.timeout:
                    continue
                with c:
                    c.settimeout(5)
                    try:
                        data = b""
                        while b"\r\n\r\n" not in data:
                            b = c.recv(4096)
                            if not b:
                                break
                            data += b
                        if b"\r\n\r\n" in data:
                            seen["requests"] += 1
                            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                      b"Connection: close\r\n\r\nok")
                            c.shutdown(socket.SHUT_WR)
                        while c.recv(4096):
                            pass
                        seen["eof"] += 1
                    except ConnectionResetError:
                        seen["reset"] += 1
                    except OSError:
                        seen["other"] += 1

        t = threading.Thread(target=serve, daemon=True)
        t.start()
        try:
            p, doc, _ = run_json(f"http://127.0.0.1:{port}/", "-n", "150", "-c", "4", "-t", "1")
        finally:
            stop.set()
            t.join(timeout=10)
            srv.close()
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assert_accounting(doc)
        self.assertEqual(doc["requests"]["completed"], 150)
        self.assertEqual(doc["connections"]["closed_by_server"], 150)
        self.assertEqual(seen["requests"], 150, seen)
        self.assertEqual(seen["reset"], 0, seen)
        self.assertEqual(seen["other"], 0, seen)
        self.assertGreaterEqual(seen["eof"], 150, seen)

    def test_timeout(self):
        p, doc, took = run_json(self.base + "/delay/3000", "-n", "4", "-c", "2", "-t", "1",
                                "--timeout", "300ms")
        self.assertEqual(p.returncode, 1)  # nothing succeeded
        self.assertEqual(doc["errors"]["timeout"], 4)
        self.assertEqual(doc["requests"]["failed"], 4)
        self.assertLess(took, 3)
        self.assert_accounting(doc)

    def test_body_from_file_and_method(self):
        self.reset()
        with tempfile.NamedTemporaryFile("wb", delete=False) as f:
            f.write(b'{"hello":"world"}')
            path = f.name
        try:
            p, doc, _ = run_json(self.base + "/echo", "-n", "10", "-c", "2", "-m", "POST",
                                 "-b", "@" + path, "-H", "X-Test: 1")
        finally:
            os.unlink(path)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["status"]["2xx"], 10)
        self.assertEqual(self.served("echo"), 10)
        self.assertGreater(doc["config"]["request_bytes"], 17)

    def test_head_and_status_classes(self):
        p, doc, _ = run_json(self.base + "/bytes/100000", "-n", "20", "-c", "2", "-m", "HEAD")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 20)
        self.assertLess(doc["bytes"]["received"], 20 * 1000)
        p, doc, _ = run_json(self.base + "/status/503", "-n", "30", "-c", "3")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["status"]["5xx"], 30)

    def test_large_bodies(self):
        p, doc, _ = run_json(self.base + "/bytes/1000000", "-n", "20", "-c", "2")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(doc["requests"]["completed"], 20)
        self.assertGreater(doc["bytes"]["received"], 20 * 1000000)


class BadInput(unittest.TestCase):
    def expect_usage(self, args, needle):
        p, _ = run(*args)
        self.assertEqual(p.returncode, 2, (args, p.stderr))
        self.assertIn(needle, p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def test_bad_flags(self):
        self.expect_usage(["http://127.0.0.1:1/", "-c", "abc"], "-c")
        self.expect_usage(["http://127.0.0.1:1/", "--connections", "0"], "--connections")
        self.expect_usage(["http://127.0.0.1:1/", "-d", "10parsecs"], "-d")
        self.expect_usage(["http://127.0.0.1:1/", "--frobnicate"], "--frobnicate")
        self.expect_usage(["http://127.0.0.1:1/", "-c"], "-c")
        self.expect_usage(["http://127.0.0.1:1/", "-n", "5", "-r", "10"], "-n")
        self.expect_usage(["http://127.0.0.1:1/", "-H", "no colon"], "-H")
        self.expect_usage(["-c", "4"], "URL")
        p, _ = run()  # no arguments at all: the usage text, exit 2
        self.assertEqual(p.returncode, 2)
        self.assertIn("usage:", p.stderr)

    def test_bad_urls(self):
        self.expect_usage(["ftp://127.0.0.1/"], "ftp")
        self.expect_usage(["http://127.0.0.1:99999/"], "99999")
        self.expect_usage(["http:///nohost"], "URL")
        # https:// works (test_tls.py); a TLS option it cannot use is a usage error.
        self.expect_usage(["https://127.0.0.1/", "--cacert", "/nonexistent.pem"], "cacert")

    def test_help_and_version(self):
        p, _ = run("--help")
        self.assertEqual(p.returncode, 0)
        self.assertIn("--connections", p.stdout)
        p, _ = run("--version")
        self.assertEqual(p.returncode, 0)
        self.assertTrue(p.stdout.startswith("squall "))


if __name__ == "__main__":
    sqtest.main()

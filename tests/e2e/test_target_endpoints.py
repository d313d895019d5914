"""End-to-end tests of the target's application endpoints: /json/N with content codings, /sse,
POST /login + /items with bearer tokens and their counters, /cookie/set and /cookie/echo.

gzip and deflate are decoded with python's zlib; br and zstd with curl --compressed when this
curl has those features (`curl -V`), else those two are left to tests/unit/test_decode.c and
tests/unit/test_target_app.c (which decode every coding with squall's own decoder).
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
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sqtest  # noqa: E402
from sqtest import HOST, http, json_get, raw_connect  # noqa: E402


def curl_features():
    exe = shutil.which("curl")
    if not exe:
        return None, set()
    out = subprocess.run([exe, "-V"], capture_output=True, text=True, timeout=10).stdout
    feats = set()
    for line in out.splitlines():
        if line.startswith("Features:"):
            feats = {f.lower() for f in line.split()[1:]}
    return exe, feats


CURL, CURL_FEATURES = curl_features()


def read_chunked_events(sock, deadline):
    """Reads one chunked text/event-stream response off sock. Returns (head, [(time, event)],
    rest) where each event is the text between blank lines, stamped when its last byte came."""
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += recv(sock, deadline)
    i = buf.index(b"\r\n\r\n") + 4
    head, buf = buf[:i].decode("latin-1"), buf[i:]
    events, text = [], b""
    while True:
        while b"\r\n" not in buf:
            buf += recv(sock, deadline)
        j = buf.index(b"\r\n")
        size = int(buf[:j].split(b";")[0], 16)
        while len(buf) < j + 2 + size + 2:
            buf += recv(sock, deadline)
        data, buf = buf[j + 2:j + 2 + size], buf[j + 2 + size:]
        if buf[:2] != b"\r\n":
            raise AssertionError("chunk not followed by CRLF")
        buf = buf[2:]
        if size == 0:
            return head, events, buf
        text += data
        while b"\n\n" in text:
            k = text.index(b"\n\n")
            events.append((time.monotonic(), text[:k].decode()))
            text = text[k + 2:]


def recv(sock, deadline):
    sock.settimeout(max(0.01, deadline - time.monotonic()))
    chunk = sock.recv(65536)
    if not chunk:
        raise EOFError("closed")
    return chunk


class EndpointsTest(sqtest.TargetCase):
    target_args = ("-t", "2", "-q")

    # ---- /json/N ----

    def get_json(self, n, accept=None, method="GET"):
        headers = {"Accept-Encoding": accept} if accept is not None else {}
        return http(self.port, method, "/json/%d" % n, headers=headers)

    def check_json(self, body, n):
        self.assertEqual(len(body), n)
        doc = json.loads(body)
        self.assertIsInstance(doc, list)
        if doc:
            self.assertEqual(doc[-1]["id"], len(doc) - 1)

    def test_json_identity(self):
        for n in (2, 3, 37, 38, 100, 1000, 16384, 16385, 65536, 100000, 1 << 20):
            status, hdrs, body = self.get_json(n)
            self.assertEqual(status, 200)
            self.assertEqual(int(hdrs["content-length"]), n)
            self.assertEqual(hdrs["content-type"], "application/json")
            self.assertEqual(hdrs["vary"], "Accept-Encoding")
            self.assertNotIn("content-encoding", hdrs)
            self.check_json(body, n)
        # not acceptable codings, or none asked: identity
        for accept in ("", "identity", "compress", "gzip;q=0, br;q=0, zstd;q=0, deflate;q=0"):
            status, hdrs, body = self.get_json(500, accept)
            self.assertNotIn("content-encoding", hdrs, accept)
            self.check_json(body, 500)

    def test_json_gzip_deflate(self):
        for n in (2, 100, 5000, 16385, 300000, 2 << 20):
            status, hdrs, body = self.get_json(n, "gzip")
            self.assertEqual((status, hdrs["content-encoding"]), (200, "gzip"))
            self.assertEqual(int(hdrs["content-length"]), len(body))
            self.check_json(zlib.decompress(body, 31), n)
            status, hdrs, body = self.get_json(n, "deflate")
            self.assertEqual((status, hdrs["content-encoding"]), (200, "deflate"))
            self.check_json(zlib.decompress(body), n)  # zlib-wrapped, as RFC 9110 says
            if n >= 5000:
                self.assertLess(len(body), n // 3)  # it really is compressed

    def test_json_br_zstd_with_curl(self):
        if not CURL:
            self.skipTest("no curl")
        for coding in ("br", "zstd"):
            feature = "brotli" if coding == "br" else "zstd"
            if feature not in CURL_FEATURES:
                print("  (curl lacks %s: %s left to the unit tests)" % (feature, coding))
                continue
            for n in (2, 1000, 70000, 1 << 20):
                with tempfile.TemporaryDirectory() as tmp:
                    hfile, bfile = os.path.join(tmp, "h"), os.path.join(tmp, "b")
                    p = subprocess.run(
                        [CURL, "-s", "--compressed", "-H", "Accept-Encoding: " + coding,
                         "-D", hfile, "-o", bfile,
                         "http://%s:%d/json/%d" % (HOST, self.port, n)],
                        capture_output=True, timeout=30)
                    self.assertEqual(p.returncode, 0, p.stderr)
                    head = open(hfile, encoding="latin-1").read().lower()
                    self.assertIn("content-encoding: " + coding, head)
                    wire = int(re.search(r"content-length: (\d+)", head).group(1))
                    with open(bfile, "rb") as f:
                        body = f.read()
                    self.check_json(body, n)
                    if n >= 70000:
                        self.assertLess(wire, n // 3)

    def test_accept_encoding_negotiation(self):
        cases = {
            "gzip, deflate, br, zstd": "zstd",
            "gzip, deflate, br": "br",
            "deflate, gzip": "gzip",
            "deflate": "deflate",
            "br;q=0.5, gzip": "gzip",
            "zstd;q=0, *": "br",
            "*;q=0": None,
            "x-gzip": "gzip",
            "GZIP;Q=0.3, Deflate;q=0.2": "gzip",
        }
        for accept, want in cases.items():
            status, hdrs, body = self.get_json(1000, accept, method="HEAD")
            self.assertEqual(status, 200)
            self.assertEqual(body, b"")
            self.assertEqual(hdrs.get("content-encoding"), want, accept)

    def test_json_cached_bytes_are_stable(self):
        first = [self.get_json(12345, c)[2] for c in ("gzip", "br", "zstd", "deflate", None)]
        again = [self.get_json(12345, c)[2] for c in ("gzip", "br", "zstd", "deflate", None)]
        self.assertEqual(first, again)
        # many sizes: more than the cache holds keeps working (built per request then)
        for n in range(1000, 1000 + 80):
            self.check_json(zlib.decompress(self.get_json(n, "gzip")[2], 31), n)

    def test_json_bad(self):
        for path in ("/json/0", "/json/1", "/json/abc", "/json/", "/json/16777217"):
            self.assertEqual(http(self.port, "GET", path)[0], 400, path)
        self.assertEqual(http(self.port, "GET", "/json")[0], 404)

    # ---- /sse ----

    def sse(self, query, extra=b""):
        s = raw_connect(self.port)
        self.addCleanup(s.close)
        t0 = time.monotonic()
        s.sendall(b"GET /sse?" + query + b" HTTP/1.1\r\nHost: x\r\n\r\n" + extra)
        head, events, rest = read_chunked_events(s, t0 + 30)
        return s, t0, head, events, rest

    def test_sse_events_and_timing(self):
        s, t0, head, events, _ = self.sse(b"events=5&interval=100")
        self.assertTrue(head.startswith("HTTP/1.1 200"))
        self.assertIn("Content-Type: text/event-stream\r\n", head)
        self.assertIn("Transfer-Encoding: chunked\r\n", head)
        self.assertNotIn("Content-Length", head)
        self.assertEqual(len(events), 5)
        for i, (_, ev) in enumerate(events):
            lines = ev.split("\n")
            self.assertEqual(lines[0], "id: %d" % i)
            self.assertTrue(lines[1].startswith("data: "))
            self.assertEqual(json.loads(lines[1][6:]), {"id": i, "of": 5})
        # event i is due (i + 1) * interval after the head, which follows the request (t0): it
        # is never read sooner, however late this test reads; and not a second later
        for i, (t, _) in enumerate(events):
            self.assertGreaterEqual(t - t0, (i + 1) * 0.1 - 0.005, i)
            self.assertLess(t - t0, (i + 1) * 0.1 + 1.0, i)
        # they leave as they fall due, not all at the end: 400 ms from the first to the last
        # (a busy machine may read the first late, so half of it)
        self.assertGreater(events[-1][0] - events[0][0], 0.2, [t - t0 for t, _ in events])

    def test_sse_many_at_once_then_pipelined(self):
        s, _, _, events, rest = self.sse(b"events=2000&interval=0",
                                         extra=b"GET /fast HTTP/1.1\r\nHost: x\r\n\r\n")
        self.assertEqual(len(events), 2000)
        self.assertEqual(json.loads(events[-1][1].split("\n")[1][6:])["id"], 1999)
        # the request pipelined behind the stream is answered after it, on the same connection
        rd = sqtest.RawReader(s)
        rd.buf += rest
        status, _, body, _ = rd.response()
        self.assertEqual((status, body), (200, b"hello world"))

    def test_sse_defaults_empty_and_bad(self):
        s, t0, _, events, _ = self.sse(b"interval=1")
        self.assertEqual(len(events), 10)  # the default count
        status, hdrs, body = http(self.port, "GET", "/sse?events=0")
        self.assertEqual((status, body, hdrs["content-type"]), (200, b"", "text/event-stream"))
        for q in ("events=x", "events=1000001", "interval=60001", "interval=-1", "events"):
            self.assertEqual(http(self.port, "GET", "/sse?" + q)[0], 400, q)
        # HEAD: the head alone
        status, hdrs, body = http(self.port, "HEAD", "/sse?events=3&interval=1000")
        self.assertEqual((status, body, hdrs["transfer-encoding"]), (200, b"", "chunked"))

    def test_sse_http10(self):
        s = raw_connect(self.port)
        self.addCleanup(s.close)
        s.sendall(b"GET /sse?events=3&interval=10 HTTP/1.0\r\n\r\n")
        data = b""
        deadline = time.monotonic() + 10
        while True:
            s.settimeout(max(0.01, deadline - time.monotonic()))
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        self.assertNotIn(b"Transfer-Encoding", head)
        self.assertEqual(body.count(b"\n\n"), 3)


class AuthTest(sqtest.TargetCase):
    """Tokens and their counters; its own target so /stats/reset touches nothing else."""

    target_args = ("-t", "3", "-q")

    def login(self):
        status, hdrs, body = http(self.port, "POST", "/login")
        self.assertEqual((status, hdrs["content-type"]), (200, "application/json"))
        tok = json.loads(body)["token"]
        self.assertRegex(tok, r"^[0-9a-f]{32}$")
        return tok

    def items(self, auth):
        headers = {"Authorization": auth} if auth is not None else {}
        return http(self.port, "GET", "/items", headers=headers)

    def test_login_items_and_counters(self):
        self.reset()
        # each login on its own connection: with 3 workers they land on different threads, and
        # every worker verifies every other worker's tokens
        tokens = [self.login() for _ in range(12)]
        self.assertEqual(len(set(tokens)), 12)
        good = 0
        for tok in tokens:
            for auth in ("Bearer " + tok, "bearer  " + tok, "BEARER " + tok.upper()):
                status, hdrs, body = self.items(auth)
                self.assertEqual(status, 200, auth)
                doc = json.loads(body)
                self.assertEqual(doc["count"], 3)
                self.assertEqual(len(doc["items"]), 3)
                good += 1
        tampered = tokens[0][:31] + ("0" if tokens[0][31] != "0" else "1")
        bad_auths = [None, "", "Bearer", "Bearer ", "Basic " + tokens[0], "Bearer " + tampered,
                     "Bearer " + tokens[0][:31], "Bearer " + tokens[0] + "0",
                     "Bearer " + "0" * 32, "Bearer " + tokens[0][16:] + tokens[0][:16]]
        for auth in bad_auths:
            status, hdrs, body = self.items(auth)
            self.assertEqual(status, 401, auth)
            self.assertEqual(json.loads(body), {"error": "unauthorized"})
            self.assertEqual(hdrs["www-authenticate"], "Bearer")
        # GET /login is not an endpoint
        self.assertEqual(http(self.port, "GET", "/login")[0], 404)
        st = self.stats()
        self.assertEqual(st["auth"], {"logins": 12, "items_ok": good,
                                      "items_unauthorized": len(bad_auths)})
        self.assertEqual(st["endpoints"]["login"], 12)
        self.assertEqual(st["endpoints"]["items"], good + len(bad_auths))
        self.assertEqual(st["endpoints"]["not_found"], 1)
        self.reset()
        self.assertEqual(self.stats()["auth"],
                         {"logins": 0, "items_ok": 0, "items_unauthorized": 0})

    def test_tokens_do_not_survive_a_restart(self):
        tok = self.login()
        proc, port = sqtest.start_target("-t", "1", "-q")
        try:
            status, _, _ = http(port, "GET", "/items", headers={"Authorization": "Bearer " + tok})
            self.assertEqual(status, 401)  # another process, another secret
        finally:
            sqtest.stop(proc)


class CookieTest(sqtest.TargetCase):
    target_args = ("-t", "1", "-q")

    def get(self, path, headers=None):
        import http.client as httpclient
        conn = httpclient.HTTPConnection(HOST, self.port, timeout=10)
        try:
            conn.request("GET", path, headers=headers or {})
            resp = conn.getresponse()
            return resp.status, resp.msg.get_all("Set-Cookie") or [], resp.read()
        finally:
            conn.close()

    def test_set(self):
        status, cookies, body = self.get("/cookie/set?session=abc123")
        self.assertEqual((status, cookies), (200, ["session=abc123; Path=/"]))
        self.assertEqual(json.loads(body), {"set": 1})
        status, cookies, body = self.get("/cookie/set?a=1&b=&c=x.y-z")
        self.assertEqual(cookies, ["a=1; Path=/", "b=; Path=/", "c=x.y-z; Path=/"])
        self.assertEqual(json.loads(body), {"set": 3})
        for q in ("", "?", "?a", "?=1", "?a=x;y", "?a=x,y", "?a=\"q\"", "?a=x\\y", "?a(b)=1",
                  "?" + "&".join("k%d=v" % i for i in range(33))):
            self.assertEqual(self.get("/cookie/set" + q)[0], 400, q)

    def test_echo(self):
        self.assertEqual(self.get("/cookie/echo")[2], b"")
        status, _, body = self.get("/cookie/echo", {"Cookie": "a=1; b=2"})
        self.assertEqual((status, body), (200, b"a=1; b=2"))

    def test_round_trip_with_a_cookie_jar(self):
        import http.cookiejar
        import urllib.request
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        base = "http://%s:%d" % (HOST, self.port)
        opener.open(base + "/cookie/set?user=alice&theme=dark", timeout=10).read()
        self.assertEqual(sorted(c.name for c in jar), ["theme", "user"])
        body = opener.open(base + "/cookie/echo", timeout=10).read().decode()
        self.assertEqual(sorted(body.split("; ")), ["theme=dark", "user=alice"])
        st = self.stats()
        self.assertGreaterEqual(st["endpoints"]["cookie"], 2)


if __name__ == "__main__":
    sqtest.main()
